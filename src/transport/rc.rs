//! InfiniBand Reliable Connected (RC) transport: one queue pair's requester and responder,
//! as sans-IO state machines.
//!
//! Follows the IBTA specification, volume 1, chapter 9 ("Transport layer"): 9.7.1 (PSN
//! generation and checking), 9.7.5.1 (responder: sequence errors, duplicates, ACK/NAK
//! generation), 9.7.5.2 (requester: ACK/NAK processing, retries), 9.7.6 (the local ACK
//! timeout), 9.7.7 (end-to-end flow control credits), and the verbs attributes of
//! `ibv_modify_qp(3)` (`timeout`, `retry_cnt`, `rnr_retry`, `min_rnr_timer`,
//! `max_rd_atomic`). Names follow the verbs attributes.
//!
//! Neither half touches the event queue. The requester takes `post`, `poll_transmit`,
//! `handle_ack`, `handle_read_response` and `handle_timeout`, each with `now`, and says when
//! it next needs a call through `next_timeout`; completions are drained with
//! `pop_completion`. The responder takes `handle_request` and returns what to deliver and
//! what to answer. The simulation (`sim.rs`) is the only glue.
//!
//! PSNs are 24 bits on the wire and wrap (`psn_*` helpers compare modulo 2^24); inside, the
//! requester counts packets with a 64-bit sequence so that a long transfer never confuses
//! two laps of the PSN space.
//!
//! Out-of-order placement (`RcParams::out_of_order`, off by default as on plain RC) lets
//! the responder place packets that overtook others (adaptive routing, spraying) instead
//! of answering them with a sequence NAK: see [`OutOfOrder`] and `rc/reorder.rs`.
//!
//! Leaves out: atomics, SEND/WRITE with immediate, inline data, unreliable modes, path
//! migration, and the responder's own resource limits beyond receive WQEs.

mod reorder;
mod responder;

pub use reorder::{Placed, ReorderBuffer};
pub use responder::{Responder, ResponderAction, ResponderStats};

use crate::units::{SimDuration, SimTime};
use std::collections::VecDeque;

/// The smaller of two optional values, or the one that is there.
#[inline]
pub fn least<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// PSNs are 24 bits (IBTA 9.7.1).
pub const PSN_MASK: u32 = 0x00FF_FFFF;

/// `a + n` in PSN space.
#[inline]
pub fn psn_add(a: u32, n: u64) -> u32 {
    ((a as u64 + n) & PSN_MASK as u64) as u32
}

/// Signed distance `a - b` in PSN space, in [-2^23, 2^23) (IBTA 9.7.1: the half of the
/// PSN space ahead of the expected PSN is "ahead", the half behind is "duplicate").
#[inline]
pub fn psn_diff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// Local ACK timeout for the verbs `timeout` attribute: 4.096 us x 2^timeout, `None` for
/// 0 (wait forever). IBTA 9.7.6.1.3; design reference "InfiniBand RC transport".
pub fn local_ack_timeout(timeout: u8) -> Option<SimDuration> {
    if timeout == 0 {
        None
    } else {
        Some(SimDuration(4_096_000u64 << timeout.min(31)))
    }
}

/// The RNR NAK timer for a 5-bit `min_rnr_timer` code (IBTA table 45; Linux
/// `enum ib_rnr_timeout`): 0 = 655.36 ms, 1 = 0.01 ms ... 31 = 491.52 ms.
pub fn rnr_timer(code: u8) -> SimDuration {
    // Hundredths of a millisecond (10 us units).
    const TABLE_10US: [u64; 32] = [
        65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
        1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
    ];
    SimDuration::from_us(10 * TABLE_10US[(code & 31) as usize])
}

/// What a work request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// RDMA WRITE: the requester pushes data; no receive WQE is consumed.
    Write,
    /// SEND: consumes one receive WQE at the responder.
    Send,
    /// RDMA READ: the requester sends one request; the responder streams the data back.
    Read,
}

/// Queue-pair attributes (verbs names), resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RcParams {
    /// Local ACK timeout exponent: 4.096 us x 2^timeout; 0 = never.
    pub timeout: u8,
    /// Retransmissions after a timeout or NAK-sequence-error before the QP fails (0-7).
    pub retry_cnt: u8,
    /// Retries after an RNR NAK (0-7, 7 = forever).
    pub rnr_retry: u8,
    /// The responder's RNR timer code (what its RNR NAKs ask the requester to wait).
    pub min_rnr_timer: u8,
    /// READs this QP may have outstanding as requester.
    pub max_rd_atomic: u32,
    /// Payload bytes per packet.
    pub path_mtu: u32,
    /// Most unacknowledged packets in flight (`None`: unlimited).
    pub window_packets: Option<u32>,
    /// The responder acknowledges every `ack_every` packets, and at every message end.
    pub ack_every: u32,
    /// Honour AETH end-to-end credits for SEND.
    pub e2e_credits: bool,
    /// First PSN (so wraparound can be exercised).
    pub initial_psn: u32,
    /// Out-of-order placement; `None`: plain RC, where any reordering is a sequence
    /// error (IBTA 9.7.5.1.2).
    pub out_of_order: Option<OutOfOrder>,
}

/// Out-of-order tolerant RC, as NICs built for adaptive routing run it.
///
/// The responder places a packet that arrives ahead of the expected PSN (a bitmap over
/// the PSN window, [`ReorderBuffer`]), completes messages in order once every packet of
/// them is there, and acknowledges cumulatively (IRN, Mittal et al., SIGCOMM 2018, §3;
/// NVIDIA: ConnectX places adaptively routed RDMA WRITE data directly, out of order, and
/// NCCL sends data above `NCCL_IB_AR_THRESHOLD` as plain WRITEs for that reason). A hole
/// that has held packets up for `reorder_timeout` is asked for again with a selective
/// NAK naming the missing PSNs, and the requester resends those only; with
/// `selective_nak` the responder NAKs a hole as soon as a later packet shows it (IRN's
/// NACK on every out-of-order arrival). Neither NVIDIA nor the IBTA documents a NIC's
/// reorder timer: its value here is an assumption, stated where it is set.
///
/// A READ's responses are placed out of order at the requester too; a hole there makes
/// the requester go back to the first missing response (one READ stream per queue pair:
/// a request names a range to its end), spending a retry as plain RC does, so responses
/// placed already may come twice and are dropped. A selective NAK round that names the
/// oldest unacknowledged PSN spends a retry too, and resends do not restart the local
/// ACK timer: a packet that is always lost fails the queue pair as on plain RC. A lost
/// last packet has nothing behind it to show its hole: the local ACK timeout recovers it
/// (IRN's sender-side short timeout is not modelled). A READ request or a SEND's first packet that
/// overtakes earlier packets is not executed ahead of them: it is dropped and asked for
/// again like a lost packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfOrder {
    /// How long a hole may hold packets up before its PSNs are asked for again.
    pub reorder_timeout: SimDuration,
    /// NAK a hole as soon as a later packet shows it (IRN-style), besides the timer.
    pub selective_nak: bool,
}

/// Most holes one selective-NAK round names (each is one NAK packet).
pub const MAX_NAKS_PER_ROUND: usize = 16;

impl Default for RcParams {
    /// NCCL's defaults (nccl `src/transport/net_ib/connect.cc`): timeout 20, retry_cnt 7,
    /// rnr_retry 7, min_rnr_timer 12, max_rd_atomic 1; path MTU 4096.
    fn default() -> Self {
        RcParams {
            timeout: 20,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 1,
            path_mtu: 4096,
            window_packets: None,
            ack_every: 1,
            e2e_credits: true,
            initial_psn: 0,
            out_of_order: None,
        }
    }
}

/// A packet the requester wants sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxRequest {
    pub psn: u32,
    pub op: Op,
    /// Payload bytes (0 for a READ request).
    pub payload: u32,
    /// First packet of its message (carries RETH for WRITE; consumes a receive WQE for
    /// SEND).
    pub first: bool,
    /// Last packet of its message (the responder acknowledges it).
    pub last: bool,
    /// For a READ request: how many response packets it asks for.
    pub read_packets: u32,
    /// Whether this PSN was sent before.
    pub retransmission: bool,
    /// The work request this packet belongs to.
    pub wr_id: u64,
}

/// The syndrome of an acknowledgement (AETH, IBTA 9.7.5.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckKind {
    /// Positive ACK: every PSN up to and including `psn` arrived.
    Ack,
    /// NAK sequence error: `psn` is the PSN the responder expects; all before it arrived.
    NakSeq,
    /// Receiver not ready at `psn`: retry after the RNR timer.
    NakRnr,
    /// Out-of-order RC: `count` PSNs from `psn` are missing; resend those only. It
    /// acknowledges nothing (cumulative ACKs come on their own) and carries its run
    /// length where an ACK carries its credit count.
    NakSelective,
}

/// An ACK or NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckInfo {
    pub kind: AckKind,
    pub psn: u32,
    /// Receive WQEs the responder has posted and not consumed (AETH credit count).
    pub credits: u32,
    /// The responder's RNR timer code (RNR NAKs only).
    pub rnr_code: u8,
    /// Selective NAKs: how many PSNs from `psn` to resend.
    pub count: u32,
}

/// How a work request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcStatus {
    Success,
    /// IBV_WC_RETRY_EXC_ERR: retry_cnt exhausted.
    RetryExceeded,
    /// IBV_WC_RNR_RETRY_EXC_ERR: rnr_retry exhausted.
    RnrRetryExceeded,
    /// IBV_WC_WR_FLUSH_ERR: flushed because the QP went to the error state.
    Flushed,
}

/// A completion: the work request `wr_id` ended with `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub status: WcStatus,
}

#[derive(Clone, Copy, Debug)]
struct Wqe {
    wr_id: u64,
    op: Op,
    len: u64,
    /// Sequence number of its first packet (64-bit, never wraps).
    first_seq: u64,
    packets: u64,
}

impl Wqe {
    fn end_seq(&self) -> u64 {
        self.first_seq + self.packets
    }
}

/// Counters a requester keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequesterStats {
    pub first_transmissions: u64,
    pub retransmissions: u64,
    pub timeouts: u64,
    pub seq_naks: u64,
    pub rnr_naks: u64,
    pub duplicate_read_responses: u64,
}

/// QP state (IBV_QPS_RTS or IBV_QPS_ERR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    ReadyToSend,
    Error,
}

/// The requester half of an RC queue pair.
#[derive(Clone, Debug)]
pub struct Requester {
    p: RcParams,
    state: QpState,
    sq: VecDeque<Wqe>,
    /// The first sequence number of each READ in `sq`, oldest first, so that counting
    /// outstanding READs and finding the oldest one never walks the send queue (a queue
    /// pair may hold 65,536 work requests).
    reads: VecDeque<u64>,
    /// Next sequence number to assign to a posted request.
    next_seq: u64,
    /// Oldest unacknowledged sequence number.
    una: u64,
    /// Next sequence number to transmit.
    nxt: u64,
    /// Highest sequence number ever transmitted + 1 (to tell retransmissions).
    high: u64,
    retries_left: u8,
    rnr_retries_left: u8,
    /// While set, nothing is sent before this time (RNR back-off).
    rnr_wait_until: Option<crate::units::SimTime>,
    /// When the local ACK timer expires, if armed.
    ack_deadline: Option<crate::units::SimTime>,
    credits: u32,
    /// The congestion-control window, packets (`None`: none), set by the NIC from its
    /// algorithm; the requester keeps in flight no more than the smaller of this and
    /// `window_packets`.
    cc_window_packets: Option<u32>,
    completions: VecDeque<Completion>,
    /// Out-of-order RC: runs of sequence numbers a selective NAK asked for again, as
    /// (first, count), sent before anything new.
    resend: VecDeque<(u64, u64)>,
    /// Out-of-order RC: READ responses placed ahead of the oldest missing one.
    read_reorder: Option<ReorderBuffer>,
    pub stats: RequesterStats,
}

impl Requester {
    pub fn new(p: RcParams, initial_credits: u32) -> Requester {
        Requester {
            p,
            state: QpState::ReadyToSend,
            sq: VecDeque::new(),
            reads: VecDeque::new(),
            next_seq: 0,
            una: 0,
            nxt: 0,
            high: 0,
            retries_left: p.retry_cnt,
            rnr_retries_left: p.rnr_retry,
            rnr_wait_until: None,
            ack_deadline: None,
            credits: initial_credits,
            cc_window_packets: None,
            completions: VecDeque::new(),
            resend: VecDeque::new(),
            read_reorder: p.out_of_order.map(|_| ReorderBuffer::new(0)),
            stats: RequesterStats::default(),
        }
    }

    /// Sets the congestion-control window (`None`: no window from congestion control).
    /// A window below `ack_every` is raised to it: the responder ACKs only every
    /// `ack_every` packets (or at a message's end), so a smaller window could wait
    /// forever for an ACK that needs more packets than it may send.
    pub fn set_cc_window(&mut self, packets: Option<u32>) {
        self.cc_window_packets = packets.map(|w| w.max(self.p.ack_every));
    }

    /// The window that limits packets in flight: the smaller of the configured
    /// `window_packets` and the congestion-control window.
    pub fn window(&self) -> Option<u32> {
        least(self.p.window_packets, self.cc_window_packets)
    }

    /// (una, nxt, high, next_seq, outstanding WRs) for debugging.
    pub fn debug_state(&self) -> (u64, u64, u64, u64, usize) {
        (self.una, self.nxt, self.high, self.next_seq, self.sq.len())
    }

    pub fn state(&self) -> QpState {
        self.state
    }

    pub fn params(&self) -> &RcParams {
        &self.p
    }

    fn psn_of(&self, seq: u64) -> u32 {
        psn_add(self.p.initial_psn, seq)
    }

    /// Maps a wire PSN to a sequence number near `una` (IBTA 9.7.5.2: ACK PSNs are
    /// interpreted relative to the oldest outstanding request).
    fn seq_of(&self, psn: u32) -> i64 {
        self.una as i64 + psn_diff(psn, self.psn_of(self.una)) as i64
    }

    /// Posts a work request of `len` bytes (ibv_post_send). Every request takes
    /// ceil(len / path_mtu) PSNs (at least 1); a READ's PSNs are those of its responses.
    pub fn post(&mut self, wr_id: u64, op: Op, len: u64) {
        let packets = len.div_ceil(self.p.path_mtu as u64).max(1);
        if op == Op::Read {
            self.reads.push_back(self.next_seq);
        }
        self.sq.push_back(Wqe {
            wr_id,
            op,
            len,
            first_seq: self.next_seq,
            packets,
        });
        self.next_seq += packets;
        if self.state == QpState::Error {
            self.flush();
        }
    }

    /// Work requests posted and not yet completed.
    pub fn outstanding_wrs(&self) -> usize {
        self.sq.len()
    }

    /// Packets acknowledged since the queue pair opened (the oldest unacknowledged
    /// packet's sequence number).
    pub fn acked_packets(&self) -> u64 {
        self.una
    }

    /// Packets ever sent (the highest sequence number transmitted + 1).
    pub fn sent_packets(&self) -> u64 {
        self.high
    }

    /// Packets sent and not yet acknowledged.
    pub fn in_flight_packets(&self) -> u64 {
        self.nxt - self.una
    }

    /// The next completion, if any (ibv_poll_cq).
    pub fn pop_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// The send-queue index of the request holding sequence number `seq` (a binary
    /// search: the requests hold consecutive ranges in order).
    fn wqe_index(&self, seq: u64) -> Option<usize> {
        let i = self.sq.partition_point(|w| w.end_seq() <= seq);
        (i < self.sq.len() && seq >= self.sq[i].first_seq).then_some(i)
    }

    /// Takes the oldest request off the send queue.
    fn pop_wqe(&mut self) -> Option<Wqe> {
        let w = self.sq.pop_front()?;
        if w.op == Op::Read {
            self.reads.pop_front();
        }
        Some(w)
    }

    /// Why the requester cannot send right now, or `None` if it can (or has nothing).
    pub fn has_work(&self) -> bool {
        self.state == QpState::ReadyToSend && (self.nxt < self.next_seq || !self.resend.is_empty())
    }

    /// The next packet to put on the wire, or `None` if blocked (window, credits, RNR
    /// back-off, outstanding READs) or idle. Arms the local ACK timer.
    pub fn poll_transmit(&mut self, now: crate::units::SimTime) -> Option<TxRequest> {
        if !self.has_work() {
            return None;
        }
        if let Some(t) = self.rnr_wait_until {
            if now < t {
                return None;
            }
            self.rnr_wait_until = None;
        }
        // Resends a selective NAK asked for go first; they are in flight already, so
        // the window does not hold them back.
        if let Some(req) = self.resend_packet(now) {
            return Some(req);
        }
        if self.nxt >= self.next_seq {
            return None;
        }
        if let Some(w) = self.window() {
            if self.nxt - self.una >= w as u64 {
                return None;
            }
        }
        let i = self.wqe_index(self.nxt)?;
        let w = self.sq[i];
        let offset = self.nxt - w.first_seq;
        let req = match w.op {
            Op::Read => {
                // A READ request asks for every response from `nxt` to the end of the
                // message (IBTA 9.7.5.2.8: a retried READ resumes at the missing PSN).
                // Every request left in `sq` ends past `una` (acknowledged ones are
                // retired), so these are the READs before this one.
                let outstanding_reads =
                    self.reads.partition_point(|&first| first < w.first_seq) as u32;
                if outstanding_reads >= self.p.max_rd_atomic {
                    return None;
                }
                TxRequest {
                    psn: self.psn_of(self.nxt),
                    op: Op::Read,
                    payload: 0,
                    first: true,
                    last: true,
                    read_packets: (w.packets - offset) as u32,
                    retransmission: self.nxt < self.high,
                    wr_id: w.wr_id,
                }
            }
            op => {
                if op == Op::Send
                    && offset == 0
                    && self.p.e2e_credits
                    && self.credits == 0
                    && self.nxt > self.una
                {
                    // IBTA 9.7.7.2: no credit, no new SEND message, except that a
                    // requester with nothing outstanding may send one to learn the
                    // credit count (it comes back in the ACK's or RNR NAK's AETH).
                    return None;
                }
                self.data_request(&w, self.nxt)
            }
        };
        if req.retransmission {
            self.stats.retransmissions += 1;
        } else {
            self.stats.first_transmissions += 1;
        }
        if w.op == Op::Send && req.first && !req.retransmission && self.p.e2e_credits {
            self.credits = self.credits.saturating_sub(1);
        }
        self.nxt = if w.op == Op::Read {
            w.end_seq()
        } else {
            self.nxt + 1
        };
        self.high = self.high.max(self.nxt);
        // IBTA 9.7.6.1.3: the timer runs from the last transmission awaiting an ACK.
        self.ack_deadline = local_ack_timeout(self.p.timeout).map(|t| now + t);
        Some(req)
    }

    /// The WRITE or SEND packet `seq` of request `w`.
    fn data_request(&self, w: &Wqe, seq: u64) -> TxRequest {
        let mtu = self.p.path_mtu as u64;
        let offset = seq - w.first_seq;
        TxRequest {
            psn: self.psn_of(seq),
            op: w.op,
            payload: (w.len - offset * mtu).min(mtu) as u32,
            first: offset == 0,
            last: offset + 1 == w.packets,
            read_packets: 0,
            retransmission: seq < self.high,
            wr_id: w.wr_id,
        }
    }

    /// The next packet a selective NAK asked for again, if any is still unacknowledged.
    /// A READ in the run is asked for again from that PSN to its end.
    fn resend_packet(&mut self, now: SimTime) -> Option<TxRequest> {
        while let Some(&(first, count)) = self.resend.front() {
            let end = (first + count).min(self.high);
            let seq = first.max(self.una);
            if seq >= end {
                self.resend.pop_front();
                continue;
            }
            let Some(i) = self.wqe_index(seq) else {
                self.resend.pop_front();
                continue;
            };
            let w = self.sq[i];
            let req = if w.op == Op::Read {
                *self.resend.front_mut().unwrap() = (w.end_seq(), end.saturating_sub(w.end_seq()));
                TxRequest {
                    psn: self.psn_of(seq),
                    op: Op::Read,
                    payload: 0,
                    first: true,
                    last: true,
                    read_packets: (w.end_seq() - seq) as u32,
                    retransmission: true,
                    wr_id: w.wr_id,
                }
            } else {
                *self.resend.front_mut().unwrap() = (seq + 1, end - seq - 1);
                self.data_request(&w, seq)
            };
            self.stats.retransmissions += 1;
            // A resend does not restart the local ACK timer (a queue pair whose resends
            // are always lost must still time out and fail); it starts one if none runs.
            if self.ack_deadline.is_none() {
                self.ack_deadline = local_ack_timeout(self.p.timeout).map(|t| now + t);
            }
            return Some(req);
        }
        None
    }

    /// Retires work requests acknowledged up to (not including) sequence `upto`.
    fn acknowledge(&mut self, upto: u64) {
        if upto <= self.una {
            return;
        }
        let mut upto = upto;
        if let Some(b) = self.read_reorder.as_mut() {
            // READ responses placed right behind what this acknowledges arrived too.
            b.skip_to(upto);
            upto = upto.max(b.next());
        }
        self.una = upto;
        if self.nxt < self.una {
            self.nxt = self.una;
        }
        while let Some(w) = self.sq.front() {
            if w.end_seq() <= self.una {
                self.completions.push_back(Completion {
                    wr_id: w.wr_id,
                    status: WcStatus::Success,
                });
                self.pop_wqe();
            } else {
                break;
            }
        }
        // Progress resets the retry counters (IBTA 9.7.5.2.3 / 9.7.5.2.5).
        self.retries_left = self.p.retry_cnt;
        self.rnr_retries_left = self.p.rnr_retry;
    }

    fn rearm(&mut self, now: crate::units::SimTime) {
        self.ack_deadline = if self.nxt > self.una {
            local_ack_timeout(self.p.timeout).map(|t| now + t)
        } else {
            None
        };
    }

    /// Enters the error state: every outstanding work request completes, the first with
    /// `status`, the rest flushed (IBTA 10.3.1, ibv_poll_cq(3)).
    fn fail(&mut self, status: WcStatus) {
        self.state = QpState::Error;
        self.ack_deadline = None;
        self.rnr_wait_until = None;
        if let Some(w) = self.pop_wqe() {
            self.completions.push_back(Completion {
                wr_id: w.wr_id,
                status,
            });
        }
        self.flush();
    }

    fn flush(&mut self) {
        while let Some(w) = self.pop_wqe() {
            self.completions.push_back(Completion {
                wr_id: w.wr_id,
                status: WcStatus::Flushed,
            });
        }
    }

    /// Goes back to `seq` and resends from there (go-back-N), spending one retry.
    fn go_back(&mut self, seq: u64, status_if_exhausted: WcStatus) {
        if self.retries_left == 0 {
            self.fail(status_if_exhausted);
            return;
        }
        self.retries_left -= 1;
        self.nxt = seq.max(self.una);
        // Everything from there is sent again anyway.
        self.resend.clear();
    }

    /// An ACK or NAK arrived (IBTA 9.7.5.2).
    pub fn handle_ack(&mut self, now: crate::units::SimTime, ack: AckInfo) {
        if self.state == QpState::Error {
            return;
        }
        let seq = self.seq_of(ack.psn);
        // A (N)AK for PSNs not yet sent is invalid; one before `una` is stale.
        if seq < self.una as i64 - 1 || seq >= self.high as i64 {
            return;
        }
        let seq = seq.max(0) as u64;
        if ack.kind != AckKind::NakSelective {
            self.credits = ack.credits;
        }
        match ack.kind {
            AckKind::Ack => {
                // Cumulative: every PSN up to and including `psn` (9.7.5.2.1). A READ's
                // PSNs are acknowledged by its responses, never by an ACK.
                let upto = (seq + 1).min(self.first_unacked_read_seq());
                self.acknowledge(upto);
                self.rearm(now);
            }
            AckKind::NakSeq => {
                // Everything before `psn` arrived; resend from `psn` (9.7.5.2.2).
                self.stats.seq_naks += 1;
                self.acknowledge(seq.min(self.first_unacked_read_seq()));
                self.go_back(seq, WcStatus::RetryExceeded);
                self.rearm(now);
            }
            AckKind::NakSelective => {
                // Out-of-order RC: resend the missing run only (its PSNs were sent). A
                // round of NAKs that names the oldest unacknowledged PSN again spends a
                // retry, as plain RC's sequence NAK does (progress resets the count).
                self.stats.seq_naks += 1;
                if self.p.out_of_order.is_none() || ack.count == 0 {
                    return;
                }
                let run = (seq, ack.count as u64);
                if self.resend.contains(&run) {
                    return; // asked for already, not yet resent
                }
                if seq == self.una {
                    if self.retries_left == 0 {
                        self.fail(WcStatus::RetryExceeded);
                        return;
                    }
                    self.retries_left -= 1;
                }
                self.resend.push_back(run);
            }
            AckKind::NakRnr => {
                // Wait the RNR timer, then resend from `psn` (9.7.5.2.9).
                self.stats.rnr_naks += 1;
                self.acknowledge(seq.min(self.first_unacked_read_seq()));
                if self.p.rnr_retry != 7 {
                    if self.rnr_retries_left == 0 {
                        self.fail(WcStatus::RnrRetryExceeded);
                        return;
                    }
                    self.rnr_retries_left -= 1;
                }
                self.nxt = seq.max(self.una);
                // Everything from there is sent again after the back-off.
                self.resend.clear();
                self.rnr_wait_until = Some(now + rnr_timer(ack.rnr_code));
                self.ack_deadline = None;
            }
        }
    }

    /// The sequence number of the first packet of the oldest READ still unanswered, or
    /// `u64::MAX` (ACKs cannot retire READ PSNs).
    fn first_unacked_read_seq(&self) -> u64 {
        self.reads
            .front()
            .map_or(u64::MAX, |&first| first.max(self.una))
    }

    /// A READ response packet arrived. Returns the payload bytes newly delivered (0 for a
    /// duplicate or out-of-order response, which is dropped). A gap makes the requester
    /// re-issue the READ from the missing PSN (IBTA 9.7.5.2.8).
    pub fn handle_read_response(
        &mut self,
        now: crate::units::SimTime,
        psn: u32,
        payload: u32,
    ) -> u32 {
        if self.state == QpState::Error {
            return 0;
        }
        let seq = self.seq_of(psn);
        if seq < self.una as i64 {
            self.stats.duplicate_read_responses += 1;
            return 0;
        }
        let seq = seq as u64;
        if let Some(b) = self.read_reorder.as_mut().filter(|_| seq > self.una) {
            // Out-of-order RC: place it; the hole timer asks for what is missing.
            return match b.place(now, seq, None) {
                Placed::Duplicate => {
                    self.stats.duplicate_read_responses += 1;
                    0
                }
                Placed::Ahead { .. } => payload,
            };
        }
        if seq > self.una {
            // A response went missing: ask again from the first missing PSN, once per
            // gap (responses already in flight behind it are dropped as they come).
            if self.nxt > self.una {
                self.stats.seq_naks += 1;
                self.go_back(self.una, WcStatus::RetryExceeded);
                self.rearm(now);
            }
            return 0;
        }
        let mut upto = seq + 1;
        if let Some(b) = self.read_reorder.as_mut() {
            // Past the responses placed behind it.
            let mut sink = VecDeque::new();
            upto += b.advance(now, upto - b.next().min(upto), &mut sink);
        }
        self.acknowledge(upto);
        self.rearm(now);
        payload
    }

    /// When a hole among READ responses will have held the others up too long.
    fn read_hole_deadline(&self) -> Option<SimTime> {
        let ooo = self.p.out_of_order?;
        self.read_reorder.as_ref()?.deadline(ooo.reorder_timeout)
    }

    /// When the requester next needs `handle_timeout`, if ever.
    pub fn next_timeout(&self) -> Option<crate::units::SimTime> {
        if self.state == QpState::Error {
            // An errored queue pair waits for nothing (its timers may still hold the
            // deadline that failed it; a stale one would fire again and again).
            return None;
        }
        let t = least(self.rnr_wait_until, self.ack_deadline);
        if self.read_reorder.is_none() {
            return t;
        }
        least(t, self.read_hole_deadline())
    }

    /// Timers that are due fire: the RNR back-off ends, or the local ACK timeout expires
    /// and the requester goes back to the oldest unacknowledged PSN (IBTA 9.7.6.1.3).
    pub fn handle_timeout(&mut self, now: crate::units::SimTime) {
        if self.state == QpState::Error {
            return;
        }
        if self.rnr_wait_until.is_some_and(|t| t <= now) {
            self.rnr_wait_until = None;
        }
        if self.read_hole_deadline().is_some_and(|t| t <= now) {
            // A READ response is missing: ask again from it on (go-back-N from the
            // oldest unacknowledged PSN, spending a retry, as plain RC does on a gap).
            self.stats.seq_naks += 1;
            if let Some(b) = self.read_reorder.as_mut() {
                b.restart_gap_timer(now);
            }
            if self.nxt > self.una {
                let una = self.una;
                self.go_back(una, WcStatus::RetryExceeded);
                if self.state == QpState::Error {
                    return;
                }
            }
        }
        if self.ack_deadline.is_some_and(|t| t <= now) {
            self.ack_deadline = None;
            if self.nxt > self.una {
                self.stats.timeouts += 1;
                let una = self.una;
                self.go_back(una, WcStatus::RetryExceeded);
            }
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod ooo_tests;

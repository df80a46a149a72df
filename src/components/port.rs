//! The egress port: one direction of a link as its sender sees it.
//!
//! Models (htsim's Queue): a FIFO egress queue per class, a serializer at the link rate,
//! and the sender's side of link-level flow control.
//! - Two classes: control (ACK, NAK, CNP) with strict priority among packets that are
//!   ready, never paused and needing no credit; and data.
//! - A packet queued at a switch is ready one port-to-port latency after it arrived
//!   (`Queued::ready`); the port starts it at `max(now, ready)` and stays busy until its
//!   last bit leaves, so waiting for the switch latency costs no event.
//! - PFC (IEEE 802.1Qbb): a PAUSE holds the data class for `quanta x 512` bit times
//!   (refreshed by the receiver while it stays above Xon); a RESUME ends it.
//! - InfiniBand credits (IBTA vol. 1 7.9.4): a data packet starts only with enough 64-byte
//!   credits for its whole size; the time spent waiting with data in hand is a stall.
//!   A port (a switch's, and a host's since issue 17's stop 64) keeps the credits on
//!   their way back to it (`credits_returning`, each under the key its event would have
//!   had in the engine's order) and lands those due before it reads its count
//!   (`land_credits`); only a port waiting for credit asks for an event, at the first
//!   return (`credit_wake_due`). The count it reads is the one a credit event per return
//!   would have given, so every result is the same, with one event per data packet and
//!   hop fewer.
//! - ECN (DCQCN §3, RED): a packet leaving a switch queue is marked with probability
//!   `Red::probability(bytes queued behind it)`, at dequeue as HPCC's simulator does:
//!   the receiver learns of the queue the packet leaves behind, one queueing delay
//!   fresher than marking at enqueue.
//!
//! - Telemetry (HPCC §3.2, in-band network telemetry): `telemetry(start)` is the record a
//!   switch egress stamps on a packet that asks for one (queue, bytes sent, time, rate).
//!
//! The port is sans-IO: `enqueue`, `poll_transmit`, `handle_tx_done`, `handle_pause`,
//! `handle_credits` take the time and return what the event loop must schedule; it never
//! touches the event queue. A queue's depth counts the bytes waiting plus the packet in
//! service; it is sampled at every enqueue (what an arriving packet finds) into a
//! histogram of 64-byte cells.
//!
//! Leaves out: more than two traffic classes, deficit or weighted schedulers between
//! classes, per-priority PFC on more than the data class.

use crate::cc::HopTelemetry;
use crate::engine::PktId;
use crate::packet::RouteInfo;
use crate::topology::{LinkParams, Node, Tier};
use crate::units::{
    serialization_delay, serialization_delay_at, whole_ps_per_byte, SimDuration, SimTime,
};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::Rng;
use std::collections::VecDeque;

use super::queue_depth::{self, DepthCounts};
use super::{credit_blocks, DropReason, CELL_BYTES, NO_PORT};

/// RED marking on the instantaneous egress queue: no mark below `kmin` bytes,
/// probability `pmax` x (q - kmin) / (kmax - kmin) between, always above `kmax`
/// (DCQCN §3; Floyd & Jacobson's RED on the instantaneous queue).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Red {
    pub kmin: u64,
    pub kmax: u64,
    pub pmax: f64,
}

impl Red {
    /// Marking probability at queue depth `q` bytes.
    pub fn probability(&self, q: u64) -> f64 {
        if q <= self.kmin {
            0.0
        } else if q > self.kmax {
            1.0
        } else {
            self.pmax * (q - self.kmin) as f64 / (self.kmax - self.kmin) as f64
        }
    }
}

/// A packet waiting in an egress queue: what the port needs to send it, beside its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    /// Earliest start: arrival plus the port-to-port latency (and the cut-through bound).
    pub ready: SimTime,
    pub pkt: PktId,
    pub route: RouteInfo,
    pub wire: u32,
    /// ECN-capable (data, not ACKs or CNPs).
    pub ect: bool,
    /// Control class (ACK, NAK, CNP): strict priority, never paused, no credits.
    pub ctrl: bool,
    /// The port it arrived over (for per-ingress PFC accounting and credit return);
    /// `NO_PORT` for a packet the switch made itself.
    pub ingress: u32,
}

/// A packet the port starts sending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub pkt: PktId,
    pub route: RouteInfo,
    pub wire: u64,
    /// When serialization starts (>= now: the switch latency may still be running).
    pub start: SimTime,
    /// When its last bit leaves: the port is busy until then.
    pub end: SimTime,
    /// Whether ECN marking set Congestion Experienced on it.
    pub ecn_marked: bool,
}

/// What a port's end of serialization releases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    /// Wire bytes of the packet that left.
    pub wire: u64,
    /// The ingress it came over (`NO_PORT`: a host's own or one the switch made).
    pub ingress: u32,
    /// Whether it was a control packet.
    pub ctrl: bool,
}

/// Whether the data class may start a packet now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Open,
    /// PFC holds it; `Some(t)`: schedule a wake-up at `t` (the first time it is found
    /// paused; at most one wake-up is pending).
    Paused(Option<SimTime>),
    /// IB: not enough credit for the packet; the stall is being timed.
    NoCredit,
}

/// One direction of a link, as its sender sees it.
///
/// Laid out by use (`repr(C)`, one cache line = 64 bytes): the first line holds what
/// every packet's start and end of serialization read (the packet in service, the bytes
/// queued, the pause, the link, where it leads), the second the two queues, the third
/// the credits, marking and per-packet counters; the statistics of queue depth follow,
/// then what only pauses, stalls, drops and the report touch. The compiler's own order
/// (by alignment) spread the per-packet fields over all eight lines of the port.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct EgressPort {
    // ---- line 0: every packet ----
    /// The packet being serialized, if any.
    in_service: Option<Sent>,
    /// Bytes queued, including the packet being serialized.
    pub queued_bytes: u64,
    /// PFC: the data class may not start a packet before this time.
    paused_until: SimTime,
    pub link: LinkParams,
    /// The switch whose buffer holds this port's queue; `None` for a host's port.
    pub switch: Option<u32>,
    pub to: Node,
    // ---- line 1: the queues ----
    queue: VecDeque<Queued>,
    ctrl: VecDeque<Queued>,
    // ---- line 2: credits, marking, per-packet counters ----
    /// IB credits: 64-byte blocks the receiver has room for; `None` without credits.
    credits: Option<u64>,
    /// RED marking at dequeue, and its random stream.
    /// Boxed with its random stream (large), so an unmarked port stays compact.
    red: Option<Box<(Red, StdRng)>>,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub queue_samples: u64,
    pub max_queue_bytes: u64,
    /// A wake-up is pending for the end of a pause.
    wake_pending: bool,
    /// An event is scheduled for the first of `returning`.
    credit_wake: bool,
    queue_batch_len: u8,
    /// `units::whole_ps_per_byte` of the link's rate: a packet's serialization time is
    /// one multiplication, not a division, where it is not 0 (`transmit`).
    ps_per_byte: u32,
    // ---- lines 3-4: queue-depth statistics, credits on their way back ----
    /// Sum of queue depths seen by arriving packets (for the mean).
    pub queue_sample_sum: u128,
    /// Samples not yet in `queue_hist`, as their histogram indices
    /// (`queue_depth::index_of`, which fits 16 bits): counted QUEUE_BATCH at a time, so
    /// a busy port's counts are fetched once per batch, not once per packet (the same
    /// counts in the end; [`EgressPort::flush_stats`] empties it).
    queue_batch: [u16; QUEUE_BATCH],
    /// IB credits on their way back, in the order they land: the engine key each lands
    /// under and its blocks.
    returning: VecDeque<(u128, u32)>,
    stall_since: Option<SimTime>,
    // ---- the rest: pauses, stalls, drops, the report ----
    pub tier: Tier,
    /// PFC: how long one PAUSE holds the data class (quanta x 512 bit times).
    pause_hold: SimDuration,
    /// PFC: start of the current (or last) pause, for accounting.
    paused_from: SimTime,
    paused_ps: u64,
    /// IB credits: the receiver's room when empty, blocks.
    credit_limit: u64,
    stall_ps: u64,
    /// Queue depth seen by arriving packets, in 64-byte cells, counted by histogram
    /// index (`queue_histogram` makes the histogram; its counts are allocated at the
    /// first batch, so idle ports cost no memory). Kept in the port, not boxed, so a
    /// batch's count reads no line but the port's and the counts'.
    queue_hist: DepthCounts,
    hist_cells: u64,
    pub drops: [u64; 3],
    pub drop_bytes: u64,
    pub ecn_marked: u64,
}

/// Queue-depth samples a port batches before it records them.
const QUEUE_BATCH: usize = 32;

impl EgressPort {
    /// A port on `link`; `buffer` sizes its queue histogram, `credits` is the IB credit
    /// count (`None` without credit flow control), `pause_hold` one PAUSE's hold time.
    pub fn new(tier: Tier, link: LinkParams, switch: Option<u32>, to: Node, buffer: u64) -> Self {
        EgressPort {
            hist_cells: (buffer / CELL_BYTES).max(2) + 1,
            tier,
            link,
            switch,
            to,
            queue: VecDeque::new(),
            ctrl: VecDeque::new(),
            in_service: None,
            pause_hold: SimDuration::ZERO,
            paused_until: SimTime::ZERO,
            paused_from: SimTime::ZERO,
            paused_ps: 0,
            wake_pending: false,
            credits: None,
            credit_limit: 0,
            stall_since: None,
            stall_ps: 0,
            returning: VecDeque::new(),
            credit_wake: false,
            queued_bytes: 0,
            tx_bytes: 0,
            tx_packets: 0,
            max_queue_bytes: 0,
            queue_sample_sum: 0,
            queue_samples: 0,
            queue_hist: DepthCounts::default(),
            queue_batch: [0; QUEUE_BATCH],
            queue_batch_len: 0,
            ps_per_byte: whole_ps_per_byte(link.rate),
            drops: [0; 3],
            drop_bytes: 0,
            red: None,
            ecn_marked: 0,
        }
    }

    /// PFC: one PAUSE holds the data class for `quanta` x 512 bit times at this link's
    /// rate (IEEE 802.1Qbb).
    pub fn with_pfc(mut self, quanta: u32) -> Self {
        self.pause_hold = serialization_delay(quanta as u64 * 64, self.link.rate);
        self
    }

    /// IB: the receiver starts with room for `blocks` 64-byte credits.
    pub fn with_credits(mut self, blocks: u64) -> Self {
        self.credits = Some(blocks);
        self.credit_limit = blocks;
        self
    }

    /// IB: bytes this port sent that the receiver still holds (credits not yet back);
    /// 0 without credits.
    #[inline]
    pub fn downstream_bytes(&self) -> u64 {
        self.downstream_with(self.credits)
    }

    /// `downstream_bytes` had the port `credits`.
    #[inline]
    fn downstream_with(&self, credits: Option<u64>) -> u64 {
        credits.map_or(0, |c| {
            self.credit_limit.saturating_sub(c) * super::CREDIT_BLOCK
        })
    }

    /// ECN: RED marking at dequeue with its own random stream.
    pub fn with_red(mut self, red: Red, rng: StdRng) -> Self {
        self.red = Some(Box::new((red, rng)));
        self
    }

    /// Whether the port is serializing a packet.
    #[inline]
    pub fn busy(&self) -> bool {
        self.in_service.is_some()
    }

    /// Packets waiting (both classes), not counting the one in service.
    pub fn waiting(&self) -> usize {
        self.queue.len() + self.ctrl.len()
    }

    /// A switch queues `q` for this port: the depth it finds (bytes waiting plus the
    /// packet in service) is sampled before it is added.
    #[inline(always)]
    pub fn enqueue(&mut self, q: Queued) {
        self.record_arrival(q.wire as u64);
        if q.ctrl {
            self.ctrl.push_back(q);
        } else {
            self.queue.push_back(q);
            // The slot the next packet queued here goes into, a hint (if the ring wraps
            // there, a wasted load): on a deep queue it was last written a whole ring
            // ago, and a store that misses holds up the stores behind it (websearch-128:
            // 0.913x the wall time, 4 pairs).
            if let Some(b) = self.queue.back() {
                crate::engine::prefetch_whole((b as *const Queued).wrapping_add(1));
            }
        }
    }

    #[inline]
    fn record_arrival(&mut self, wire: u64) {
        let q = self.queued_bytes;
        self.queued_bytes += wire;
        self.max_queue_bytes = self.max_queue_bytes.max(q);
        self.queue_sample_sum += q as u128;
        self.queue_samples += 1;
        let cells = q.div_ceil(CELL_BYTES).min(u32::MAX as u64);
        self.queue_batch[self.queue_batch_len as usize] = queue_depth::index_of(cells) as u16;
        self.queue_batch_len += 1;
        if self.queue_batch_len as usize == QUEUE_BATCH {
            self.flush_stats();
        }
    }

    /// Moves the batched queue-depth samples into the histogram (the run calls it when
    /// it ends, before anything reads the histogram).
    pub fn flush_stats(&mut self) {
        if self.queue_batch_len == 0 {
            return;
        }
        self.queue_hist.record_indices(
            &self.queue_batch[..self.queue_batch_len as usize],
            self.hist_cells,
        );
        self.queue_batch_len = 0;
    }

    /// PFC: whether the data class is held at `now`.
    #[inline]
    pub fn pause_gate(&mut self, now: SimTime) -> Gate {
        if self.paused_until > now {
            let wake = (!self.wake_pending).then(|| {
                self.wake_pending = true;
                self.paused_until
            });
            return Gate::Paused(wake);
        }
        Gate::Open
    }

    /// IB: whether there is credit for a `wire`-byte packet; starts or ends the timing
    /// of a stall. Always open without credits.
    #[inline]
    pub fn credit_gate(&mut self, now: SimTime, wire: u64) -> Gate {
        if let Some(c) = self.credits {
            if c < credit_blocks(wire) {
                self.stall_since.get_or_insert(now);
                return Gate::NoCredit;
            }
            if let Some(s) = self.stall_since.take() {
                self.stall_ps += now.0 - s.0;
            }
        }
        Gate::Open
    }

    /// Both gates, in order (pause first).
    #[inline]
    pub fn data_gate(&mut self, now: SimTime, wire: u64) -> Gate {
        match self.pause_gate(now) {
            Gate::Open => self.credit_gate(now, wire),
            held => held,
        }
    }

    /// Whether `data_gate` would open, without its bookkeeping.
    #[inline]
    pub fn data_gate_open(&self, now: SimTime, wire: u64) -> bool {
        self.gate_open_with(now, wire, self.credits)
    }

    /// `data_gate_open` had the port `credits`.
    #[inline]
    fn gate_open_with(&self, now: SimTime, wire: u64, credits: Option<u64>) -> bool {
        self.paused_until <= now && credits.map_or(true, |c| c >= credit_blocks(wire))
    }

    /// IB: spends the credits of a `wire`-byte data packet (after an open gate).
    #[inline]
    pub fn spend_credits(&mut self, wire: u64) {
        if let Some(c) = &mut self.credits {
            *c -= credit_blocks(wire);
        }
    }

    /// The wake-up scheduled by `pause_gate` happened.
    pub fn handle_wake(&mut self) {
        self.wake_pending = false;
    }

    /// IB: `blocks` credits came back.
    pub fn handle_credits(&mut self, blocks: u64) {
        if let Some(c) = &mut self.credits {
            *c += blocks;
        }
    }

    /// What an adaptive choice weighs at this port (`LoadSignal::QueueAndCredits`): the
    /// bytes queued, plus under IB credits those the next switch still holds from this
    /// port, plus `held_bytes` if PFC or a lack of credit holds a `wire`-byte packet;
    /// the credits on their way back under key `upto` or earlier counted as landed.
    /// It only reads, so that in a run split over threads, where a port whose credits
    /// another partition returns has what its own events do to its credit bookkeeping
    /// logged and replayed (`sim::parallel`), nothing else changes it. Landing the
    /// credits due (`land_credits`) and then reading gives the same figure, and the
    /// port's own events then find what they would have: a port waiting for credit has
    /// a wake-up pending under its first return's key, so none of its returns is due
    /// when a later event reads it, and for any other port landing only adds.
    #[inline]
    pub fn adaptive_load(&self, now: SimTime, wire: u64, upto: u128, held_bytes: u64) -> u64 {
        let credits = self.credits.map(|c| {
            c + self
                .returning
                .iter()
                .take_while(|&&(key, _)| key <= upto)
                .map(|&(_, blocks)| blocks as u64)
                .sum::<u64>()
        });
        let held = !self.gate_open_with(now, wire, credits);
        self.queued_bytes + self.downstream_with(credits) + held as u64 * held_bytes
    }

    /// IB: `blocks` credits will land under engine key `key` (later than any before).
    /// Returns the key to schedule a wake-up under, if the port waits for credit.
    #[inline]
    pub fn credits_returning(&mut self, key: u128, blocks: u32) -> Option<u128> {
        debug_assert!(self.returning.back().map_or(true, |&(k, _)| k < key));
        self.returning.push_back((key, blocks));
        self.credit_wake_due()
    }

    /// IB: lands every credit on its way back whose key is `upto` or earlier (every
    /// event before the one being handled, and that one).
    #[inline]
    pub fn land_credits(&mut self, upto: u128) {
        // Without IB credits nothing comes back: the check reads line 2, which every
        // packet reads, where `returning` lies on line 4 (permutation-8192: a miss in
        // 4% of the run, at every switch port's start of a packet).
        if self.credits.is_none() {
            debug_assert!(self.returning.is_empty());
            return;
        }
        while let Some(&(key, blocks)) = self.returning.front() {
            if key > upto {
                break;
            }
            self.returning.pop_front();
            self.credit_wake = false;
            self.handle_credits(blocks as u64);
        }
    }

    /// IB, a run split over threads (`sim::parallel`): whether the port waits for credit,
    /// whether a wake-up is scheduled, and the keys of the credits on their way back.
    pub fn credit_state(&self) -> (bool, bool, impl ExactSizeIterator<Item = u128> + '_) {
        (
            self.stall_since.is_some(),
            self.credit_wake,
            self.returning.iter().map(|e| e.0),
        )
    }

    /// IB, a run split over threads: credits on their way back, taken at a barrier
    /// without deciding a wake-up (`sim::parallel` decides it as one thread would have),
    /// and whether a wake-up is scheduled.
    pub fn credits_returning_as(&mut self, key: u128, blocks: u32, wake_scheduled: bool) {
        debug_assert!(self.returning.back().map_or(true, |&(k, _)| k < key));
        self.returning.push_back((key, blocks));
        self.credit_wake = wake_scheduled;
    }

    /// IB: the key of the first credit on its way back, once, if the port waits for
    /// credit (its data head found too little) and no wake-up is scheduled for it.
    #[inline]
    pub fn credit_wake_due(&mut self) -> Option<u128> {
        if self.stall_since.is_none() || self.credit_wake {
            return None;
        }
        let &(key, _) = self.returning.front()?;
        self.credit_wake = true;
        Some(key)
    }

    /// PFC: a PAUSE (hold the data class for one hold time from now) or a RESUME takes
    /// effect. Returns whether the port may be able to send again (a RESUME).
    pub fn handle_pause(&mut self, now: SimTime, pause: bool) -> bool {
        if pause {
            if self.paused_until <= now {
                // A new pause: close the books on the last one.
                self.paused_ps += self.paused_until.0.saturating_sub(self.paused_from.0);
                self.paused_from = now;
            }
            self.paused_until = now + self.pause_hold;
            false
        } else {
            if self.paused_until > now {
                self.paused_until = now;
            }
            true
        }
    }

    /// Whether a PAUSE holds the data class at `now` (for sampling).
    pub fn is_paused(&self, now: SimTime) -> bool {
        self.paused_until > now
    }

    /// A switch port that is idle picks its next packet: a control packet first among
    /// packets that are ready (one still inside the switch does not hold up a data
    /// packet that is ready sooner), else data if the gates allow.
    ///
    /// `Err(Some(t))`: nothing can start, and a wake-up is needed at `t` (pause end).
    #[inline]
    pub fn poll_transmit(&mut self, now: SimTime) -> Result<Transmit, Option<SimTime>> {
        if self.busy() {
            return Err(None);
        }
        let take_ctrl = match (self.ctrl.front(), self.queue.front()) {
            (Some(c), Some(d)) => {
                c.ready.max(now) <= d.ready.max(now) || !self.data_gate_open(now, d.wire as u64)
            }
            (Some(_), None) => true,
            _ => false,
        };
        let next = if take_ctrl {
            self.ctrl.pop_front().expect("ctrl head")
        } else {
            let Some(&head) = self.queue.front() else {
                return Err(None);
            };
            match self.data_gate(now, head.wire as u64) {
                Gate::Open => {}
                Gate::Paused(wake) => return Err(wake),
                Gate::NoCredit => return Err(None),
            }
            self.spend_credits(head.wire as u64);
            self.queue.pop_front().expect("head")
        };
        // An emptied queue starts again at its first slot (`VecDeque::clear` puts the
        // ring's head there), so a port that empties often keeps using the same few
        // lines instead of cycling through the whole ring it once grew to.
        if self.queue.is_empty() {
            self.queue.clear();
        }
        if self.ctrl.is_empty() {
            self.ctrl.clear();
        }
        // The next packet's slot, a hint: the next end of serialization reads it, and on
        // a deep queue it was written long ago (websearch-128: the head's read missed the
        // last-level cache more than any other read; 0.971x the wall time, 4 pairs).
        if let Some(n) = self.queue.front() {
            crate::engine::prefetch_whole(n as *const Queued);
        }
        Ok(self.transmit(next, now.max(next.ready)))
    }

    /// Starts serializing a packet at `start` (a host's packet: queued by nobody; a
    /// switch's: from `poll_transmit`). An ECN-capable packet may be marked here.
    #[inline]
    pub fn transmit(&mut self, q: Queued, start: SimTime) -> Transmit {
        debug_assert!(!self.busy(), "a port sends one packet at a time");
        let wire = q.wire as u64;
        let mut ecn_marked = false;
        if q.ect {
            if let Some(b) = &mut self.red {
                let (red, rng) = &mut **b;
                let behind = self.queued_bytes.saturating_sub(wire);
                let prob = red.probability(behind);
                if prob > 0.0 && (prob >= 1.0 || rng.gen::<f64>() < prob) {
                    self.ecn_marked += 1;
                    ecn_marked = true;
                }
            }
        }
        let end = start + serialization_delay_at(wire, self.link.rate, self.ps_per_byte);
        debug_assert_eq!(end, start + serialization_delay(wire, self.link.rate));
        self.in_service = Some(Sent {
            wire,
            ingress: q.ingress,
            ctrl: q.ctrl,
        });
        Transmit {
            pkt: q.pkt,
            route: q.route,
            wire,
            start,
            end,
            ecn_marked,
        }
    }

    /// The telemetry record of the packet that started at `start` (HPCC §3.2: INT at
    /// egress): the bytes queued at this port, counting the packet in service and those
    /// behind it; the bytes transmitted before it; the time; the link rate.
    #[inline]
    pub fn telemetry(&self, start: SimTime) -> HopTelemetry {
        HopTelemetry {
            queue_bytes: self.queued_bytes,
            tx_bytes: self.tx_bytes,
            time: start,
            rate: self.link.rate,
        }
    }

    /// A host's own packet (never queued, never marked) starts at `start`.
    #[inline]
    pub fn transmit_own(
        &mut self,
        pkt: PktId,
        route: RouteInfo,
        wire: u64,
        start: SimTime,
    ) -> Transmit {
        self.transmit(
            Queued {
                ready: start,
                pkt,
                route,
                wire: wire as u32,
                ect: false,
                ctrl: false,
                ingress: NO_PORT,
            },
            start,
        )
    }

    /// What the port reads when its packet's serialization ends (for a prefetch): the
    /// ingress the packet came over, and the packet it starts next.
    #[inline(always)]
    pub fn next_reads(&self) -> (Option<u32>, Option<&Queued>) {
        let ingress = self.in_service.as_ref().map(|s| s.ingress);
        (ingress, self.ctrl.front().or(self.queue.front()))
    }

    /// The packet in service has left (its last bit is out): counted now, so a run cut
    /// by `duration` counts only what was sent. A switch port's queue releases its bytes.
    #[inline]
    pub fn handle_tx_done(&mut self) -> Sent {
        let sent = self.in_service.take().expect("a port finishing a packet");
        self.tx_bytes += sent.wire;
        self.tx_packets += 1;
        if self.switch.is_some() {
            self.queued_bytes -= sent.wire;
        }
        sent
    }

    #[inline]
    pub fn count_drop(&mut self, reason: DropReason, wire: u64) {
        self.drops[reason as usize] += 1;
        self.drop_bytes += wire;
    }

    pub fn dropped_packets(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Time spent paused up to `end` (closing an open pause at `end`).
    pub fn paused_time(&self, end: SimTime) -> u64 {
        let open = if self.paused_until > self.paused_from {
            self.paused_until
                .min(end)
                .0
                .saturating_sub(self.paused_from.0)
        } else {
            0
        };
        self.paused_ps + open
    }

    /// Time spent with data waiting and no credit, up to `end`.
    pub fn stalled_time(&self, end: SimTime) -> u64 {
        self.stall_ps + self.stall_since.map_or(0, |s| end.0.saturating_sub(s.0))
    }

    /// Mean queue depth seen by arriving packets, bytes.
    pub fn mean_queue_bytes(&self) -> f64 {
        if self.queue_samples == 0 {
            0.0
        } else {
            self.queue_sample_sum as f64 / self.queue_samples as f64
        }
    }

    /// The queue depths seen by arriving packets, in 64-byte cells (2 significant
    /// digits), if any were: the batched samples count too, so it may be asked mid-run.
    pub fn queue_histogram(&self) -> Option<Histogram<u32>> {
        let pending = &self.queue_batch[..self.queue_batch_len as usize];
        if pending.is_empty() {
            return (!self.queue_hist.is_empty()).then(|| self.queue_hist.histogram());
        }
        let mut counts = self.queue_hist.clone();
        counts.record_indices(pending, self.hist_cells);
        Some(counts.histogram())
    }

    /// The 99th percentile queue depth seen by arriving packets, bytes (64-byte cells,
    /// rounded up, 2 significant digits).
    pub fn p99_queue_bytes(&self) -> u64 {
        match self.queue_histogram() {
            // The histogram rounds up to its bucket; never report more than was seen.
            Some(h) if !h.is_empty() => {
                (h.value_at_quantile(0.99) * CELL_BYTES).min(self.max_queue_bytes)
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
#[path = "port_tests.rs"]
mod tests;

//! A NIC's RC queue pair as the NIC runs it: the two protocol halves (`transport::rc`),
//! the congestion control and pacing of each direction, the DCQCN notification points,
//! the READ responses being streamed, the send-queue backlog and the timer bookkeeping.
//!
//! Models (sans-IO, like the halves it holds):
//! - two directions: `Forward` (requester to responder: WRITE/SEND data, READ
//!   requests) and `Reverse` (responder to requester: READ responses). Each has its own
//!   congestion control ([`crate::cc::CongestionControl`]) and its own pacing: after a
//!   packet of `wire` bytes leaves at `t`, the next may leave at `t + wire / rate`
//!   (the rate limiter of DCQCN §3.1, Zhu et al., SIGCOMM 2015), at the rate in force
//!   when it asks: a rate that changes while the next packet waits moves its time, as
//!   HPCC's ns-3 does (`RdmaHw::ChangeRate` shifts `m_nextAvail` by the new minus the
//!   old serialization time of the last packet) and as a NIC's rate limiter does;
//! - the receiver of each direction is a DCQCN notification point: an ECN-marked packet
//!   asks for a CNP, at most one per `cnp_interval` (DCQCN §3.2);
//! - an ACK goes to the requester and, with what it acknowledged, to the forward
//!   direction's congestion control, whose window then bounds the requester;
//! - a READ request asks for every response to the end of its message: the responder
//!   streams them one per send turn (IBTA vol. 1 §9.7.5.1.5);
//! - one timer event pending per queue pair, at or before the requester's deadline.
//!
//! The event loop (`sim::transport`) feeds it packets and turns and keeps the flows'
//! records; this file decides nothing about flows, packets in the pool or events.
//!
//! Leaves out: unreliable transports, shared receive queues, more than one outstanding
//! READ stream per queue pair (READs of one queue pair execute in order).

use crate::cc::dcqcn::NotificationPoint;
use crate::cc::{AckFeedback, CcParams, CcPath, CongestionControl, Telemetry};
use crate::engine::FlowId;
use crate::transport::rc::{psn_add, AckInfo, RcParams, Requester, Responder};
use crate::units::{serialization_delay, BitsPerSec, SimDuration, SimTime};
use std::collections::VecDeque;

/// A direction of a queue pair's traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Requester to responder: WRITE and SEND data, READ requests.
    Forward = 0,
    /// Responder to requester: READ responses.
    Reverse = 1,
}

/// One RC queue pair at its NIC.
#[derive(Debug)]
pub struct QueuePair {
    /// Requester's host and responder's host, and the connection number (0: one queue
    /// pair per flow; a collective's channels number theirs from 1).
    pub src: u32,
    pub dst: u32,
    pub conn: u32,
    /// Its packets' ECMP hash (their 5-tuple's), and that of the packets going back
    /// (ACKs, READ responses).
    pub flow_hash: u32,
    pub reverse_hash: u32,
    /// Flows waiting for send-queue room (`max_send_wr`), in arrival order.
    pub backlog: VecDeque<FlowId>,
    /// Work requests posted by software and still in the host/NIC pipeline (not yet
    /// known to the requester), in posting order: the requester takes them in this
    /// order, however fast each gets through the pipeline (RC executes in order).
    pub pipeline: VecDeque<FlowId>,
    pub req: Requester,
    pub resp: Responder,
    /// The flow whose READ responses are streaming.
    pub read_flow: FlowId,
    /// READ responses still to stream: next PSN and how many.
    read_next_psn: u32,
    read_left: u32,
    /// Whether the requester (and the READ responder) is in its host's job list.
    pub req_listed: bool,
    pub read_listed: bool,
    /// The requester finished and retired the queue pair (the requester's counters are
    /// taken then, the responder's when the slot is reused).
    pub dead: bool,
    /// Once `dead`: the responder still answers what reaches it before this time (a
    /// late duplicate is ACKed again, IBTA vol. 1 §9.7.5.1.2), one path latency after
    /// the requester retired, when the requester's disconnect reaches it (RDMA CM's
    /// DREQ); the slot is reused after it, once no host lists the queue pair.
    /// `SimTime::MAX` while the requester is live.
    responder_until: SimTime,
    /// Bumped each time the slot is reused.
    pub gen: u32,
    /// Time of the pending requester timer event, if any.
    timer_at: Option<SimTime>,
    /// Out-of-order RC: time of the pending hole timer event of the responder, if any
    /// (its own event, on the responder's host: a split run handles the two halves in
    /// different partitions).
    hole_timer_at: Option<SimTime>,
    /// Per direction: congestion control, notification point, and when the last packet
    /// left with its bytes on the wire (0 bytes: none yet).
    cc: [CongestionControl; 2],
    np: [NotificationPoint; 2],
    last_sent: [(SimTime, u64); 2],
}

impl QueuePair {
    /// Starts loading what a packet of this queue pair reads (for a prefetch): the
    /// requester's state (sending, an ACK) or the responder's (a request), and the
    /// slot's liveness and pacing. A hint only.
    #[inline(always)]
    pub fn prefetch_hot(&self, requester: bool) {
        use crate::engine::{prefetch, prefetch_lines};
        if requester {
            prefetch_lines(&self.req, 7);
            prefetch(&self.cc);
        } else {
            prefetch_lines(&self.resp, 4);
        }
        prefetch(&self.gen);
        prefetch(&self.dead);
    }

    /// Starts loading what a work request that became ready reads, at depth `stage`:
    /// the requester's state and the pipeline of posted requests, then the request at
    /// the pipeline's front (read from the line the stage before brought). A hint only.
    #[inline(always)]
    pub fn prefetch_pipeline(&self, stage: usize) {
        match stage {
            0 => {
                crate::engine::prefetch(&self.pipeline);
                self.prefetch_hot(true);
            }
            _ => {
                if let Some(front) = self.pipeline.front() {
                    crate::engine::prefetch(front);
                }
            }
        }
    }

    /// A queue pair opening at `now` between hosts `src` and `dst`, its receiver with
    /// `recv_wqes` receive WQEs posted (the requester learns them as credits), on links
    /// of `line_rate_bps`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        now: SimTime,
        src: u32,
        dst: u32,
        conn: u32,
        flow_hash: u32,
        first_flow: FlowId,
        rc: RcParams,
        recv_wqes: u32,
        cc: Option<CcParams>,
        path: CcPath,
    ) -> QueuePair {
        QueuePair {
            src,
            dst,
            conn,
            flow_hash,
            reverse_hash: flow_hash ^ 0x5bd1_e995,
            backlog: VecDeque::new(),
            pipeline: VecDeque::new(),
            req: Requester::new(rc, recv_wqes),
            resp: Responder::new(rc, recv_wqes),
            read_flow: first_flow,
            read_next_psn: 0,
            read_left: 0,
            req_listed: false,
            read_listed: false,
            dead: false,
            responder_until: SimTime::MAX,
            gen: 0,
            timer_at: None,
            hole_timer_at: None,
            cc: [
                CongestionControl::new(cc, path, now),
                CongestionControl::new(cc, path, now),
            ],
            np: [NotificationPoint::default(), NotificationPoint::default()],
            last_sent: [(now, 0), (now, 0)],
        }
    }

    /// When direction `d` should look again at sending, asked at `now`: the last
    /// packet's departure plus its serialization time at the current rate (if that is
    /// later than `now`, the direction must wait); but no later than the next time the
    /// algorithm may raise its rate on a timer, when the wait is worked out anew.
    #[inline]
    pub fn ready_at(&mut self, now: SimTime, d: Direction) -> SimTime {
        let (at, wire) = self.last_sent[d as usize];
        if wire == 0 {
            return at;
        }
        let cc = &mut self.cc[d as usize];
        cc.handle_timeout(now);
        let Some(rate) = cc.rate_bps() else {
            return at;
        };
        let ready = at + serialization_delay(wire, BitsPerSec(rate.max(1.0) as u64));
        match cc.next_rate_rise() {
            Some(t) if ready > now && t < ready => t,
            _ => ready,
        }
    }

    /// A packet of `wire` bytes of direction `d` left at `now`: if its congestion control
    /// paces, the next waits (see [`Self::ready_at`]).
    #[inline]
    pub fn on_sent(&mut self, now: SimTime, d: Direction, wire: u64) {
        let cc = &mut self.cc[d as usize];
        cc.handle_timeout(now);
        self.last_sent[d as usize] = (now, wire);
        cc.on_send(now, wire);
    }

    /// A CNP for direction `d` arrived (its algorithm may cut at its next check).
    #[inline]
    pub fn handle_cnp(&mut self, now: SimTime, d: Direction) {
        self.cc[d as usize].on_cnp(now)
    }

    /// Rate cuts both directions made up to `now` (their due timers fire first).
    pub fn rate_cuts(&mut self, now: SimTime) -> u64 {
        self.cc
            .iter_mut()
            .map(|cc| {
                cc.handle_timeout(now);
                cc.rate_cuts()
            })
            .sum()
    }

    /// An ECN-marked packet of direction `d` reached its receiver; returns whether the
    /// receiver sends a CNP (at most one per `cnp_interval`).
    #[inline]
    pub fn handle_marked(&mut self, now: SimTime, d: Direction, cnp_interval: SimDuration) -> bool {
        self.np[d as usize].on_marked(now, cnp_interval)
    }

    /// An ACK or NAK reached the requester. The forward direction's congestion control
    /// hears what it acknowledged (in path-MTU packets of `mtu` payload bytes) and sets
    /// the requester's window (in packets of `mtu_wire` bytes on the wire).
    #[inline]
    pub fn handle_ack(
        &mut self,
        now: SimTime,
        ack: AckInfo,
        mtu: u64,
        mtu_wire: u64,
        telemetry: Option<&Telemetry>,
        rtt: Option<SimDuration>,
    ) {
        // Newly acknowledged: how far the oldest unacknowledged packet moved (a NAK
        // rewinds what is in flight without acknowledging what it rewinds).
        let before = self.req.acked_packets();
        let nak = matches!(
            ack.kind,
            crate::transport::rc::AckKind::NakSeq | crate::transport::rc::AckKind::NakSelective
        );
        self.req.handle_ack(now, ack);
        let acked = self.req.acked_packets() - before;
        let cc = &mut self.cc[Direction::Forward as usize];
        if nak {
            cc.on_loss(now, false);
        }
        cc.on_ack(
            now,
            &AckFeedback {
                acked_bytes: acked * mtu,
                rtt,
                telemetry,
                acked_packets: self.req.acked_packets(),
                next_packet: self.req.sent_packets(),
                newly_acked: acked,
            },
        );
        let window = cc.cwnd_packets(mtu_wire);
        self.req.set_cc_window(window);
    }

    /// The requester's timer fired at `now`: a retransmission timeout also tells the
    /// forward direction's congestion control of a loss, whose window (in packets of
    /// `mtu_wire` bytes) then bounds the resend.
    pub fn handle_timeout(&mut self, now: SimTime, mtu_wire: u64) {
        let before = self.req.stats.timeouts;
        self.req.handle_timeout(now);
        if self.req.stats.timeouts > before {
            let cc = &mut self.cc[Direction::Forward as usize];
            cc.on_loss(now, true);
            let window = cc.cwnd_packets(mtu_wire);
            self.req.set_cc_window(window);
        }
    }

    /// Direction `d`'s sending rate now (`None`: unpaced, line rate).
    pub fn rate_bps(&mut self, now: SimTime, d: Direction) -> Option<f64> {
        let cc = &mut self.cc[d as usize];
        cc.handle_timeout(now);
        cc.rate_bps()
    }

    /// The requester retired the queue pair; its responder answers what arrives before
    /// `responder_until` (a split run's responder copy learns it at a barrier).
    pub fn retire(&mut self, responder_until: SimTime) {
        self.dead = true;
        self.responder_until = responder_until;
    }

    /// When the responder stops answering (`SimTime::MAX` while the requester is live).
    pub fn responder_until(&self) -> SimTime {
        self.responder_until
    }

    /// Whether the responder takes a request arriving at `now`.
    #[inline]
    pub fn responder_answers(&self, now: SimTime) -> bool {
        now < self.responder_until
    }

    /// The requester's deadline moved: returns the time of a timer event to schedule,
    /// if none is pending at or before it.
    #[inline]
    pub fn arm_timer(&mut self) -> Option<SimTime> {
        arm(&mut self.timer_at, self.req.next_timeout())
    }

    /// A requester timer event scheduled for `now` fired: whether it is the pending one
    /// (a superseded one is stale and does nothing).
    #[inline]
    pub fn take_timer(&mut self, now: SimTime) -> bool {
        take(&mut self.timer_at, now)
    }

    /// Out-of-order RC: the responder's hole deadline moved: the time of a hole timer
    /// event to schedule, if none is pending at or before it.
    pub fn arm_hole_timer(&mut self) -> Option<SimTime> {
        arm(&mut self.hole_timer_at, self.resp.next_timeout())
    }

    /// A hole timer event scheduled for `now` fired: whether it is the pending one.
    pub fn take_hole_timer(&mut self, now: SimTime) -> bool {
        take(&mut self.hole_timer_at, now)
    }

    /// A READ request for `packets` responses from `psn` on: the responder streams them.
    pub fn start_read_responses(&mut self, flow: FlowId, psn: u32, packets: u32) {
        self.read_flow = flow;
        self.read_next_psn = psn;
        self.read_left = packets;
    }

    /// The next READ response to send: its PSN and how many were left before it (its
    /// count from the end of the message), and whether more follow.
    #[inline]
    pub fn next_read_response(&mut self) -> Option<(u32, u32, bool)> {
        if self.read_left == 0 {
            return None;
        }
        let (psn, left) = (self.read_next_psn, self.read_left);
        self.read_next_psn = psn_add(psn, 1);
        self.read_left -= 1;
        Some((psn, left, self.read_left > 0))
    }

    /// READ responses still to send.
    pub fn read_left(&self) -> u32 {
        self.read_left
    }

    /// Nothing left to do: no work request outstanding or waiting, no READ response.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.req.outstanding_wrs() == 0
            && self.read_left == 0
            && self.backlog.is_empty()
            && self.pipeline.is_empty()
    }
}

/// A deadline `t` for a timer whose pending event is at `pending`: the time of an event
/// to schedule, if none is pending at or before it.
#[inline]
fn arm(pending: &mut Option<SimTime>, t: Option<SimTime>) -> Option<SimTime> {
    let t = t?;
    if pending.is_some_and(|s| s <= t) {
        return None;
    }
    *pending = Some(t);
    Some(t)
}

/// A timer event for `now` fired: whether it is the pending one, which it then clears.
#[inline]
fn take(pending: &mut Option<SimTime>, now: SimTime) -> bool {
    if *pending != Some(now) {
        return false;
    }
    *pending = None;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::dcqcn::Preset;
    use crate::transport::rc::{AckKind, Op};

    const LINE: f64 = 100e9;

    fn rc() -> RcParams {
        RcParams {
            path_mtu: 1000,
            ..RcParams::default()
        }
    }

    fn qp(cc: Option<CcParams>) -> QueuePair {
        let path = CcPath {
            line_rate_bps: LINE,
            switches: 1,
        };
        QueuePair::new(SimTime::ZERO, 0, 1, 0, 7, 0, rc(), 16, cc, path)
    }

    fn ack(kind: AckKind, psn: u32) -> AckInfo {
        AckInfo {
            kind,
            psn,
            credits: 0,
            rnr_code: 0,
            count: 0,
        }
    }

    fn dcqcn() -> Option<CcParams> {
        Some(CcParams::Dcqcn(Preset::Paper.params(LINE)))
    }

    #[test]
    fn without_congestion_control_a_direction_is_never_paced() {
        let mut q = qp(None);
        q.on_sent(SimTime(0), Direction::Forward, 1000);
        assert_eq!(q.ready_at(SimTime(0), Direction::Forward), SimTime(0));
        q.handle_cnp(SimTime(5), Direction::Forward);
        assert_eq!(q.rate_cuts(SimTime(5)), 0, "nothing to cut");
        assert_eq!(q.rate_bps(SimTime(5), Direction::Forward), None);
    }

    #[test]
    fn a_paced_direction_waits_one_serialization_time_at_its_rate() {
        let mut q = qp(dcqcn());
        // At line rate, 1000 B take 80 ns.
        q.on_sent(SimTime(0), Direction::Forward, 1000);
        assert_eq!(q.ready_at(SimTime(0), Direction::Forward), SimTime(80_000));
        // A CNP cuts the forward rate only (the paper's preset cuts at once); the next
        // packet waits longer.
        let t = SimTime(100_000);
        q.handle_cnp(t, Direction::Forward);
        assert_eq!(q.rate_cuts(t), 1);
        let r = q.rate_bps(t, Direction::Forward).unwrap();
        assert!(r < LINE, "cut to {r}");
        assert_eq!(q.rate_bps(t, Direction::Reverse), Some(LINE));
        q.on_sent(t, Direction::Forward, 1000);
        let gap = q.ready_at(t, Direction::Forward).0 - t.0;
        let want = serialization_delay(1000, BitsPerSec(r as u64)).0;
        assert_eq!(gap, want);
        assert!(gap > 80_000);
        assert_eq!(
            q.ready_at(t, Direction::Reverse),
            SimTime(0),
            "reverse untouched"
        );
    }

    /// A rate rise while a packet waits brings it forward (ns-3 `RdmaHw::ChangeRate`):
    /// hand computation with the `hpcc` preset's rules, a 2 Mb/s rate on the first CNP
    /// and a 1 Mb/s floor. CNP at 0: R_C = R_T = 2 Mb/s, alpha 1; the check at 4 us,
    /// after four alpha decays (a = (255/256)^4), cuts R_C to 2 (1 - a/2) = 1.016 Mb/s
    /// and starts the 300 us increase timer. A 1000 B packet sent at 10 us would wait
    /// 7.9 ms at that rate; instead the direction looks again at 304 us (fast recovery:
    /// R_C = (2 + 1.016) / 2 Mb/s), at 604 us (additive increase: R_T = 2 + R_AI 20 Mb/s,
    /// R_C = (22 + 1.508) / 2 = 11.75 Mb/s), and may send at 10 us + 8000 bits / R_C
    /// = 690.8 us, before the next rise at 904 us.
    #[test]
    fn a_rate_rise_while_a_packet_waits_brings_it_forward() {
        let p = crate::cc::dcqcn::DcqcnParams {
            rate_on_first_cnp_bps: Some(2e6),
            rate_min_bps: 1e6,
            ..Preset::Hpcc.params(LINE)
        };
        let mut q = qp(Some(CcParams::Dcqcn(p)));
        let us = |x: u64| SimTime(x * 1_000_000);
        q.handle_cnp(SimTime::ZERO, Direction::Forward);
        let a = (255.0f64 / 256.0).powi(4);
        let cut = 2e6 * (1.0 - a / 2.0);
        assert_eq!(q.rate_bps(us(5), Direction::Forward), Some(cut));
        q.on_sent(us(10), Direction::Forward, 1000);
        assert_eq!(q.ready_at(us(10), Direction::Forward), us(304));
        assert_eq!(q.ready_at(us(304), Direction::Forward), us(604));
        let fast = (2e6 + cut) / 2.0;
        assert_eq!(q.rate_bps(us(304), Direction::Forward), Some(fast));
        let at = q.ready_at(us(604), Direction::Forward);
        let rc = (2e6 + 20e6 + fast) / 2.0;
        assert_eq!(q.rate_bps(us(604), Direction::Forward), Some(rc));
        assert_eq!(
            at,
            us(10) + serialization_delay(1000, BitsPerSec(rc as u64))
        );
        assert!(at > us(604) && at < us(904), "{at:?}");
        // Asked later, the time stays put.
        assert_eq!(q.ready_at(us(700), Direction::Forward), at);
    }

    #[test]
    fn a_receiver_asks_for_at_most_one_cnp_per_interval_per_direction() {
        let mut q = qp(dcqcn());
        let iv = SimDuration::from_us(50);
        assert!(q.handle_marked(SimTime(0), Direction::Forward, iv));
        assert!(!q.handle_marked(SimTime(1_000), Direction::Forward, iv));
        assert!(
            q.handle_marked(SimTime(1_000), Direction::Reverse, iv),
            "its own"
        );
        assert!(q.handle_marked(SimTime(0) + iv, Direction::Forward, iv));
    }

    #[test]
    fn an_ack_advances_the_requester_and_keeps_its_window() {
        let mut q = qp(None);
        q.req.post(1, Op::Write, 3000);
        let sent: Vec<u32> = std::iter::from_fn(|| q.req.poll_transmit(SimTime(0)))
            .map(|t| t.psn)
            .collect();
        assert_eq!(sent, vec![0, 1, 2]);
        q.handle_ack(SimTime(10), ack(AckKind::Ack, 1), 1000, 1026, None, None);
        assert_eq!(q.req.in_flight_packets(), 1);
        assert_eq!(q.req.acked_packets(), 2);
        // A sequence NAK for PSN 2 rewinds to it: nothing more is acknowledged.
        q.handle_ack(SimTime(20), ack(AckKind::NakSeq, 2), 1000, 1026, None, None);
        assert_eq!(q.req.acked_packets(), 2);
        assert_eq!(q.req.in_flight_packets(), 0, "rewound, to be sent again");
        assert_eq!(
            q.req.window(),
            None,
            "neither RC nor DCQCN sets a window here"
        );
    }

    #[test]
    fn one_timer_event_pending_at_or_before_the_deadline() {
        let mut q = qp(None);
        assert_eq!(q.arm_timer(), None, "nothing outstanding, no deadline");
        q.req.post(1, Op::Write, 1000);
        q.req.poll_transmit(SimTime(0)).unwrap();
        let t = q.arm_timer().expect("the local ACK timer is armed");
        assert_eq!(q.arm_timer(), None, "already pending");
        assert!(
            !q.take_timer(SimTime(t.0 - 1)),
            "a stale event does nothing"
        );
        assert!(q.take_timer(t));
        assert_eq!(q.arm_timer(), Some(t), "fired, so it is scheduled again");
    }

    /// Out-of-order RC: a hole at the responder arms the responder's own hole timer,
    /// not the requester's (a split run handles them in different partitions).
    #[test]
    fn a_hole_arms_the_responders_timer_only() {
        let p = RcParams {
            out_of_order: Some(crate::transport::rc::OutOfOrder {
                reorder_timeout: SimDuration::from_us(100),
                selective_nak: false,
            }),
            ..rc()
        };
        let path = CcPath {
            line_rate_bps: LINE,
            switches: 1,
        };
        let mut q = QueuePair::new(SimTime::ZERO, 0, 1, 0, 7, 0, p, 16, None, path);
        assert_eq!(q.arm_hole_timer(), None, "no hole, no deadline");
        // PSN 1 overtakes PSN 0: a hole.
        let req = crate::transport::rc::TxRequest {
            psn: 1,
            op: Op::Write,
            payload: 1000,
            first: false,
            last: true,
            read_packets: 0,
            retransmission: false,
            wr_id: 0,
        };
        q.resp.handle_request(SimTime(5), &req);
        let t = q.arm_hole_timer().expect("the hole's timer is armed");
        assert_eq!(t, SimTime(5) + SimDuration::from_us(100));
        assert_eq!(q.arm_timer(), None, "the requester has nothing outstanding");
        assert_eq!(q.arm_hole_timer(), None, "already pending");
        assert!(!q.take_timer(t), "not the requester's event");
        assert!(q.take_hole_timer(t));
    }

    #[test]
    fn read_responses_stream_in_psn_order_counting_down() {
        let mut q = qp(None);
        q.start_read_responses(3, 0xff_fffe, 3);
        assert_eq!(q.next_read_response(), Some((0xff_fffe, 3, true)));
        assert_eq!(q.next_read_response(), Some((0xff_ffff, 2, true)));
        assert_eq!(
            q.next_read_response(),
            Some((0, 1, false)),
            "PSNs wrap at 2^24"
        );
        assert_eq!(q.next_read_response(), None);
        assert!(q.is_idle());
        assert_eq!(q.read_flow, 3);
    }
}

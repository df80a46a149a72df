//! Congestion control at the NICs: one interface, one enum arm per algorithm.
//!
//! | algorithm | file | signal | acts on |
//! |---|---|---|---|
//! | none | this file | - | nothing: line rate, the transport's own window |
//! | DCQCN | `dcqcn.rs` | ECN marks at switches, CNPs from the receiver (Zhu et al., SIGCOMM 2015; rules as NVIDIA's firmware and HPCC's ns-3 run them) | a per-direction rate limiter |
//! | Swift | `swift.rs` | round-trip times from NIC timestamps echoed on ACKs (Kumar et al., SIGCOMM 2020) | a delay-based window, paced below one packet |
//! | HPCC | `hpcc.rs` | per-hop telemetry stamped at switch egresses, echoed on ACKs (Li et al., SIGCOMM 2019; HPCC's ns-3) | a window of rate x T, paced at the rate |
//!
//! Each queue-pair direction (requester to responder for WRITE/SEND data, responder to
//! requester for READ responses) has its own [`CongestionControl`]. The interface covers
//! rate-based and window-based algorithms alike, sans-IO like the queue pair:
//! - `on_send(now, wire_bytes)`: a packet left (byte counters, pacing);
//! - `on_ack(now, feedback)`: an acknowledgement arrived, with what it carries (bytes
//!   newly acknowledged, an RTT sample from NIC timestamps, per-hop telemetry);
//! - `on_cnp(now)`: a congestion notification arrived;
//! - `rate_bps()`: the pacing rate (`None`: unpaced), `cwnd_bytes()`: the window (`None`:
//!   the transport's own); the RC requester sends no more than the smaller window;
//! - `next_timeout()` / `handle_timeout(now)`: its timers.
//!
//! Per-hop telemetry ([`Telemetry`], in-band network telemetry as HPCC uses it: queue
//! length, bytes transmitted, a timestamp and the link rate at each switch egress) is
//! stamped by the egress port when an algorithm asks for it (`wants_telemetry`).
//!
//! A new algorithm is one new file and one arm of [`CongestionControl`] (and of
//! [`CcParams`] for its parameters).
//!
//! Leaves out: algorithms that change the switches' behaviour beyond marking and
//! telemetry (per-flow queues, trimming).

pub mod dcqcn;
pub mod hpcc;
pub mod swift;

use crate::units::{BitsPerSec, SimDuration, SimTime};
use dcqcn::{DcqcnParams, ReactionPoint};
use hpcc::{HpccParams, HpccSender};
use swift::{SwiftParams, SwiftSender};

/// What a queue-pair direction's algorithm knows of its path when it starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CcPath {
    /// The sending host's link rate, bits per second.
    pub line_rate_bps: f64,
    /// Switches between the two hosts (1 under one leaf, 3 across a spine).
    pub switches: u32,
}

/// An algorithm and its parameters, as a scenario resolves them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CcParams {
    Dcqcn(DcqcnParams),
    Hpcc(HpccParams),
    Swift(SwiftParams),
}

impl CcParams {
    /// The receiver's minimum spacing of congestion notifications (CNPs), for algorithms
    /// that use them.
    pub fn cnp_interval(&self) -> Option<SimDuration> {
        match self {
            CcParams::Dcqcn(p) => Some(p.cnp_interval),
            CcParams::Hpcc(_) | CcParams::Swift(_) => None,
        }
    }

    /// Whether the algorithm reads per-hop telemetry (then data packets ask switch
    /// egresses to stamp it).
    pub fn wants_telemetry(&self) -> bool {
        match self {
            CcParams::Dcqcn(_) | CcParams::Swift(_) => false,
            CcParams::Hpcc(_) => true,
        }
    }

    /// Whether ACKs echo their data packet's send time (the algorithm measures RTTs).
    pub fn wants_timestamps(&self) -> bool {
        matches!(self, CcParams::Swift(_))
    }

    /// The algorithm's name, as scenarios write it.
    pub fn name(&self) -> &'static str {
        match self {
            CcParams::Dcqcn(_) => "dcqcn",
            CcParams::Hpcc(_) => "hpcc",
            CcParams::Swift(_) => "swift",
        }
    }
}

/// One switch egress's record in a packet's telemetry (HPCC §3.2, INT).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HopTelemetry {
    /// Bytes queued at the egress when the packet left it.
    pub queue_bytes: u64,
    /// Bytes the egress had transmitted before this packet.
    pub tx_bytes: u64,
    /// When the packet started leaving.
    pub time: SimTime,
    /// The egress link's rate.
    pub rate: BitsPerSec,
}

/// Most switch hops a packet crosses in a two-tier Clos (leaf, spine, leaf), with room
/// for one more.
pub const MAX_HOPS: usize = 4;

/// A packet's telemetry: one record per switch egress it left, in path order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Telemetry {
    pub hops: [HopTelemetry; MAX_HOPS],
    pub len: u8,
}

impl Telemetry {
    /// Appends a hop (a path longer than `MAX_HOPS` keeps its first hops).
    pub fn push(&mut self, hop: HopTelemetry) {
        if (self.len as usize) < MAX_HOPS {
            self.hops[self.len as usize] = hop;
            self.len += 1;
        }
    }

    pub fn hops(&self) -> &[HopTelemetry] {
        &self.hops[..self.len as usize]
    }
}

/// What an acknowledgement tells the sender's congestion control.
#[derive(Clone, Copy, Debug, Default)]
pub struct AckFeedback<'a> {
    /// Payload bytes this ACK newly acknowledged, counted in whole path-MTU packets.
    pub acked_bytes: u64,
    /// Round-trip time measured from NIC timestamps, if the ACK carries one.
    pub rtt: Option<SimDuration>,
    /// The data packet's telemetry, echoed back, if the algorithm asked for it.
    pub telemetry: Option<&'a Telemetry>,
    /// Packets acknowledged so far (the oldest unacknowledged packet's sequence number).
    pub acked_packets: u64,
    /// The next new packet's sequence number (packets sent so far).
    pub next_packet: u64,
    /// Packets this ACK newly acknowledged.
    pub newly_acked: u64,
}

/// The congestion control of one queue-pair direction.
#[derive(Clone, Debug, PartialEq)]
pub enum CongestionControl {
    /// No congestion control: line rate, the transport's own window.
    None,
    /// Boxed: the reaction point carries its parameters (about 240 bytes), and a queue
    /// pair without congestion control should not pay for them twice.
    Dcqcn(Box<ReactionPoint>),
    Hpcc(Box<HpccSender>),
    Swift(Box<SwiftSender>),
}

impl CongestionControl {
    /// A direction starting at `now` on `path`.
    pub fn new(params: Option<CcParams>, path: CcPath, now: SimTime) -> Self {
        let line_rate_bps = path.line_rate_bps;
        match params {
            None => CongestionControl::None,
            Some(CcParams::Dcqcn(p)) => {
                CongestionControl::Dcqcn(Box::new(ReactionPoint::new(p, line_rate_bps, now)))
            }
            Some(CcParams::Hpcc(p)) => {
                CongestionControl::Hpcc(Box::new(HpccSender::new(p, line_rate_bps)))
            }
            Some(CcParams::Swift(p)) => {
                CongestionControl::Swift(Box::new(SwiftSender::new(p, path.switches)))
            }
        }
    }

    /// Whether packets of this direction should carry per-hop telemetry.
    pub fn wants_telemetry(&self) -> bool {
        match self {
            CongestionControl::None | CongestionControl::Dcqcn(_) | CongestionControl::Swift(_) => {
                false
            }
            CongestionControl::Hpcc(_) => true,
        }
    }

    /// A packet of `wire_bytes` left at `now` (after `handle_timeout(now)`).
    pub fn on_send(&mut self, _now: SimTime, wire_bytes: u64) {
        match self {
            CongestionControl::None | CongestionControl::Hpcc(_) | CongestionControl::Swift(_) => {}
            CongestionControl::Dcqcn(rp) => rp.on_bytes_sent(wire_bytes),
        }
    }

    /// An acknowledgement arrived. DCQCN learns of congestion from CNPs only (its timers
    /// run when it is next asked for its rate); HPCC reads the echoed telemetry.
    pub fn on_ack(&mut self, now: SimTime, feedback: &AckFeedback) {
        match self {
            CongestionControl::None | CongestionControl::Dcqcn(_) => {}
            CongestionControl::Hpcc(s) => {
                if let Some(t) = feedback.telemetry {
                    s.on_ack(feedback.acked_packets, feedback.next_packet, t);
                }
            }
            CongestionControl::Swift(s) => {
                if let Some(rtt) = feedback.rtt {
                    s.on_ack(now, rtt, feedback.newly_acked);
                }
            }
        }
    }

    /// The transport detected a loss: a retransmission timeout (`timeout`) or a sequence
    /// NAK. Swift reacts (Algorithm 1); DCQCN and HPCC leave loss to RC.
    pub fn on_loss(&mut self, now: SimTime, timeout: bool) {
        match self {
            CongestionControl::None | CongestionControl::Dcqcn(_) | CongestionControl::Hpcc(_) => {}
            CongestionControl::Swift(s) => {
                if timeout {
                    s.on_timeout(now)
                } else {
                    s.on_nak(now)
                }
            }
        }
    }

    /// A congestion notification arrived (DCQCN cuts at its next decrease check).
    pub fn on_cnp(&mut self, now: SimTime) {
        match self {
            CongestionControl::None | CongestionControl::Hpcc(_) | CongestionControl::Swift(_) => {}
            CongestionControl::Dcqcn(rp) => {
                rp.handle_timeout(now);
                rp.on_cnp(now);
            }
        }
    }

    /// Rate cuts made so far (after `handle_timeout(now)` they include those due): DCQCN's
    /// cuts, HPCC's multiplicative decreases.
    pub fn rate_cuts(&self) -> u64 {
        match self {
            CongestionControl::None => 0,
            CongestionControl::Dcqcn(rp) => rp.stats.rate_cuts,
            CongestionControl::Hpcc(s) => s.stats.decreases,
            CongestionControl::Swift(s) => s.stats.decreases,
        }
    }

    /// The rate to pace at, bits per second; `None`: unpaced (line rate).
    pub fn rate_bps(&self) -> Option<f64> {
        match self {
            CongestionControl::None => None,
            CongestionControl::Dcqcn(rp) => Some(rp.rate_bps()),
            CongestionControl::Hpcc(s) => Some(s.rate_bps()),
            CongestionControl::Swift(s) => s.pacing_bps(),
        }
    }

    /// The window, bytes; `None`: only the transport's own.
    pub fn cwnd_bytes(&self) -> Option<u64> {
        match self {
            CongestionControl::None | CongestionControl::Dcqcn(_) => None,
            CongestionControl::Hpcc(s) => Some(s.cwnd_bytes()),
            CongestionControl::Swift(s) => Some(s.cwnd_bytes()),
        }
    }

    /// The window in packets of `mtu_wire` bytes (at least one), if there is one.
    pub fn cwnd_packets(&self, mtu_wire: u64) -> Option<u32> {
        self.cwnd_bytes()
            .map(|w| w.div_ceil(mtu_wire.max(1)).clamp(1, u32::MAX as u64) as u32)
    }

    /// When the algorithm next needs `handle_timeout`.
    pub fn next_timeout(&self) -> Option<SimTime> {
        match self {
            CongestionControl::None | CongestionControl::Hpcc(_) | CongestionControl::Swift(_) => {
                None
            }
            CongestionControl::Dcqcn(rp) => rp.next_timeout(),
        }
    }

    /// The next time a timer may raise the rate (a paced packet waiting longer looks
    /// again then). Algorithms that change their rate only on ACKs have none.
    pub fn next_rate_rise(&self) -> Option<SimTime> {
        match self {
            CongestionControl::None | CongestionControl::Hpcc(_) | CongestionControl::Swift(_) => {
                None
            }
            CongestionControl::Dcqcn(rp) => rp.next_rate_rise(),
        }
    }

    /// Timers that are due by `now` fire.
    pub fn handle_timeout(&mut self, now: SimTime) {
        match self {
            CongestionControl::None | CongestionControl::Hpcc(_) | CongestionControl::Swift(_) => {}
            CongestionControl::Dcqcn(rp) => rp.handle_timeout(now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dcqcn::Preset;

    #[test]
    fn none_is_unpaced_and_windowless() {
        let path = CcPath {
            line_rate_bps: 100e9,
            switches: 1,
        };
        let mut cc = CongestionControl::new(None, path, SimTime::ZERO);
        assert_eq!(cc.rate_bps(), None);
        assert_eq!(cc.cwnd_bytes(), None);
        assert_eq!(cc.next_timeout(), None);
        cc.on_cnp(SimTime(5));
        assert_eq!(cc.rate_cuts(), 0);
        assert!(!cc.wants_telemetry());
    }

    #[test]
    fn dcqcn_through_the_interface_matches_its_reaction_point() {
        let p = Preset::Paper.params(40e9);
        let path = CcPath {
            line_rate_bps: 40e9,
            switches: 1,
        };
        let mut cc = CongestionControl::new(Some(CcParams::Dcqcn(p)), path, SimTime::ZERO);
        let mut rp = ReactionPoint::new(p, 40e9, SimTime::ZERO);
        assert_eq!(cc.rate_bps(), Some(40e9));
        // A CNP at 10 us, bytes, then 200 us of timers: the same trace as the reaction
        // point driven directly.
        cc.on_cnp(SimTime::ZERO + SimDuration::from_us(10));
        rp.handle_timeout(SimTime::ZERO + SimDuration::from_us(10));
        rp.on_cnp(SimTime::ZERO + SimDuration::from_us(10));
        cc.on_send(SimTime(0), 1_000_000);
        rp.on_bytes_sent(1_000_000);
        let t = SimTime::ZERO + SimDuration::from_us(210);
        cc.handle_timeout(t);
        rp.handle_timeout(t);
        assert_eq!(cc.rate_bps(), Some(rp.rate_bps()));
        assert!(rp.rate_bps() < 40e9);
        assert_eq!(cc.next_timeout(), rp.next_timeout());
        assert_eq!(cc.rate_cuts(), 1);
        assert_eq!(cc.cwnd_packets(1082), None);
    }

    #[test]
    fn telemetry_keeps_hops_in_path_order_and_bounded() {
        let mut t = Telemetry::default();
        for i in 0..6u64 {
            t.push(HopTelemetry {
                queue_bytes: i,
                ..Default::default()
            });
        }
        let q: Vec<u64> = t.hops().iter().map(|h| h.queue_bytes).collect();
        assert_eq!(q, vec![0, 1, 2, 3]);
    }
}

//! Swift: a delay-based window, from round-trip times the NICs timestamp.
//!
//! Source: Kumar et al., "Swift: Delay is Simple and Effective for Congestion Control in
//! the Datacenter", SIGCOMM 2020 (§3, Algorithm 1, and §3.3's target scaling):
//! - every ACK carries the send time of the packet it answers (NIC timestamps), so the
//!   sender measures the RTT;
//! - the target delay is a base target, plus `hop_scale` per switch on the path, plus a
//!   flow-scaling term that grows as the window shrinks: alpha / sqrt(cwnd) + beta,
//!   within [0, `fs_range`], with alpha = fs_range / (1/sqrt(fs_min_cwnd) -
//!   1/sqrt(fs_max_cwnd)) and beta = -alpha / sqrt(fs_max_cwnd), so many flows sharing a
//!   bottleneck (each with a small window) accept a longer queue;
//! - an RTT below the target grows the window additively: ai / cwnd per packet
//!   acknowledged (ai per packet below a window of one);
//! - an RTT above it shrinks the window multiplicatively, at most once per RTT:
//!   cwnd x max(1 - beta_md (rtt - target) / rtt, 1 - max_mdf);
//! - the window stays within [min_cwnd, max_cwnd]; below one packet the sender paces one
//!   packet per RTT / cwnd.
//!
//! - losses (Algorithm 1): a retransmission timeout shrinks the window by max_mdf (at
//!   most once per RTT), or to min_cwnd after `retx_reset` timeouts in a row; a sequence
//!   NAK (RC's go-back-N, standing for the paper's fast recovery) shrinks it by max_mdf
//!   (at most once per RTT) and, like any ACK, restarts the timeout count.
//!
//! Left out: the endpoint-delay window (in doorbell the responder NIC sends an ACK as soon
//! as its port is free, ahead of data, so the endpoint delay is at most one packet's
//! serialization and the fabric window always binds), and per-packet pacing above a
//! window of one.

use crate::units::{SimDuration, SimTime};

/// Swift parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwiftParams {
    /// Base target delay, for the path's fixed part (default: the fabric's longest base
    /// RTT plus 5 us of queueing).
    pub base_target: SimDuration,
    /// Added to the target per switch on the path.
    pub hop_scale: SimDuration,
    /// The flow-scaling term's largest value.
    pub fs_range: SimDuration,
    /// Windows at which flow scaling gives its full range and nothing (packets).
    pub fs_min_cwnd: f64,
    pub fs_max_cwnd: f64,
    /// Additive increase per RTT, packets.
    pub ai_packets: f64,
    /// Multiplicative-decrease gain.
    pub beta: f64,
    /// Largest multiplicative decrease at once.
    pub max_mdf: f64,
    /// Window bounds, packets.
    pub min_cwnd: f64,
    pub max_cwnd: f64,
    /// Bytes of a full packet on the wire (the window's unit).
    pub mtu_wire: u64,
    /// Retransmission timeouts in a row after which the window drops to min_cwnd
    /// (Algorithm 1's RETX_RESET_THRESHOLD; the paper gives no value: 5 assumed).
    pub retx_reset: u32,
}

impl SwiftParams {
    /// The paper's shape for a fabric whose longest base RTT is `base_rtt` and whose
    /// bandwidth-delay product is `bdp_packets`: a target 5 us above the base RTT, 1 us
    /// more per switch, flow scaling over 5 us between windows of 0.1 and 100 packets,
    /// ai 1 packet, beta 0.8, max_mdf 0.5, windows from 0.001 packets to 2 BDPs.
    pub fn paper(base_rtt: SimDuration, bdp_packets: f64, mtu_wire: u64) -> SwiftParams {
        SwiftParams {
            base_target: base_rtt + SimDuration::from_us(5),
            hop_scale: SimDuration::from_us(1),
            fs_range: SimDuration::from_us(5),
            fs_min_cwnd: 0.1,
            fs_max_cwnd: 100.0,
            ai_packets: 1.0,
            beta: 0.8,
            max_mdf: 0.5,
            min_cwnd: 0.001,
            max_cwnd: (2.0 * bdp_packets).max(1.0),
            mtu_wire,
            retx_reset: 5,
        }
    }
}

/// Counters a Swift sender keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwiftStats {
    pub decreases: u64,
}

/// One queue pair's Swift sender.
#[derive(Clone, Debug, PartialEq)]
pub struct SwiftSender {
    p: SwiftParams,
    /// Switches on the path.
    hops: u32,
    /// The window, packets.
    cwnd: f64,
    /// The latest RTT sample.
    rtt: Option<SimDuration>,
    last_decrease: Option<SimTime>,
    /// Retransmission timeouts since the last ACK.
    retransmits: u32,
    pub stats: SwiftStats,
}

impl SwiftSender {
    /// Starts with the largest window (the paper starts at line rate).
    pub fn new(p: SwiftParams, hops: u32) -> SwiftSender {
        SwiftSender {
            p,
            hops,
            cwnd: p.max_cwnd,
            rtt: None,
            last_decrease: None,
            retransmits: 0,
            stats: SwiftStats::default(),
        }
    }

    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// The target delay at the current window.
    pub fn target(&self) -> SimDuration {
        let p = &self.p;
        let inv = |w: f64| 1.0 / w.sqrt();
        let alpha = p.fs_range.0 as f64 / (inv(p.fs_min_cwnd) - inv(p.fs_max_cwnd));
        let beta = -alpha * inv(p.fs_max_cwnd);
        let fs = (alpha * inv(self.cwnd) + beta).clamp(0.0, p.fs_range.0 as f64);
        SimDuration(p.base_target.0 + self.hops as u64 * p.hop_scale.0 + fs as u64)
    }

    /// An ACK arrived at `now` with an RTT sample, acknowledging `acked` more packets.
    pub fn on_ack(&mut self, now: SimTime, rtt: SimDuration, acked: u64) {
        self.rtt = Some(rtt);
        self.retransmits = 0;
        let target = self.target();
        if rtt < target {
            let n = acked as f64;
            self.cwnd += if self.cwnd >= 1.0 {
                self.p.ai_packets / self.cwnd * n
            } else {
                self.p.ai_packets * n
            };
        } else if self.can_decrease(now) {
            let r = rtt.0 as f64;
            let factor = (1.0 - self.p.beta * (r - target.0 as f64) / r).max(1.0 - self.p.max_mdf);
            self.decrease(now, factor);
        }
        self.cwnd = self.cwnd.clamp(self.p.min_cwnd, self.p.max_cwnd);
    }

    /// At most one decrease per RTT (the latest sample's; any before the first).
    fn can_decrease(&self, now: SimTime) -> bool {
        let rtt = self.rtt.unwrap_or(SimDuration::ZERO);
        !matches!(self.last_decrease, Some(t) if now.0 < t.0 + rtt.0)
    }

    fn decrease(&mut self, now: SimTime, factor: f64) {
        self.cwnd = (self.cwnd * factor).clamp(self.p.min_cwnd, self.p.max_cwnd);
        self.last_decrease = Some(now);
        self.stats.decreases += 1;
    }

    /// A retransmission timeout at `now` (Algorithm 1): the window drops to min_cwnd once
    /// `retx_reset` have come in a row, else shrinks by max_mdf (at most once per RTT).
    pub fn on_timeout(&mut self, now: SimTime) {
        self.retransmits += 1;
        if self.retransmits >= self.p.retx_reset {
            self.cwnd = self.p.min_cwnd;
            self.last_decrease = Some(now);
            self.stats.decreases += 1;
        } else if self.can_decrease(now) {
            self.decrease(now, 1.0 - self.p.max_mdf);
        }
    }

    /// A sequence NAK at `now` (RC's go-back-N, for Algorithm 1's fast recovery): the
    /// timeout count restarts and the window shrinks by max_mdf (at most once per RTT).
    pub fn on_nak(&mut self, now: SimTime) {
        self.retransmits = 0;
        if self.can_decrease(now) {
            self.decrease(now, 1.0 - self.p.max_mdf);
        }
    }

    /// The window in bytes (at least one packet: below that the pacing rate limits).
    pub fn cwnd_bytes(&self) -> u64 {
        (self.cwnd.max(1.0) * self.p.mtu_wire as f64).ceil() as u64
    }

    /// Below a window of one packet: one packet per RTT / cwnd, as a rate; `None`
    /// otherwise.
    pub fn pacing_bps(&self) -> Option<f64> {
        let rtt = self.rtt?;
        (self.cwnd < 1.0)
            .then(|| self.cwnd * self.p.mtu_wire as f64 * 8.0 / rtt.as_secs_f64().max(1e-12))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SwiftParams {
        SwiftParams::paper(SimDuration::from_us(10), 100.0, 1000)
    }

    fn us(n: u64) -> SimDuration {
        SimDuration::from_us(n)
    }

    #[test]
    fn the_target_grows_per_hop_and_as_the_window_shrinks() {
        let p = params();
        let mut s = SwiftSender::new(p, 3);
        // A window of 200 packets (above fs_max_cwnd): no flow scaling; 10 + 5 + 3 x 1 us.
        assert_eq!(s.target(), us(18));
        // At fs_min_cwnd the full 5 us range.
        s.cwnd = 0.1;
        assert_eq!(s.target(), us(23));
        // At 1 packet: alpha (1 - 1/10), alpha = 5 us / (sqrt(10) - 1/10).
        s.cwnd = 1.0;
        let alpha = 5e6 / (10f64.sqrt() - 0.1);
        let want = 18e6 + alpha * 0.9;
        assert!(
            (s.target().0 as f64 - want).abs() <= 1.0,
            "{:?} vs {want}",
            s.target()
        );
    }

    /// Algorithm 1's loss reactions by hand: a NAK halves the window (max_mdf 0.5) once
    /// per RTT; timeouts halve it too, and the fifth in a row drops it to min_cwnd; an ACK
    /// restarts the count.
    #[test]
    fn losses_shrink_the_window_once_per_rtt_and_repeated_timeouts_reset_it() {
        let mut s = SwiftSender::new(params(), 1);
        s.cwnd = 40.0;
        s.on_ack(SimTime::ZERO, us(11), 0);
        s.on_nak(SimTime::ZERO + us(1));
        assert_eq!(s.cwnd(), 20.0);
        s.on_nak(SimTime::ZERO + us(5));
        assert_eq!(
            s.cwnd(),
            20.0,
            "within one RTT (11 us) of the last decrease"
        );
        s.on_timeout(SimTime::ZERO + us(20));
        assert_eq!(s.cwnd(), 10.0);
        for k in 2..5 {
            s.on_timeout(SimTime::ZERO + us(20 + 20 * k));
        }
        assert_eq!(s.cwnd(), 10.0 / 8.0, "timeouts 2-4 halve it");
        s.on_timeout(SimTime::ZERO + us(200));
        assert_eq!(s.cwnd(), s.p.min_cwnd, "the fifth in a row resets it");
        // An ACK restarts the count: the next timeout only halves.
        s.cwnd = 8.0;
        s.on_ack(SimTime::ZERO + us(300), us(11), 0);
        s.on_timeout(SimTime::ZERO + us(400));
        assert_eq!(s.cwnd(), 4.0);
    }

    #[test]
    fn below_the_target_the_window_grows_by_ai_per_rtt() {
        let mut s = SwiftSender::new(params(), 1);
        s.cwnd = 50.0;
        // 50 packets acknowledged (one window) at a low RTT: + ai = 1 packet.
        for i in 0..50 {
            s.on_ack(SimTime::ZERO + us(i), us(11), 1);
        }
        assert!((s.cwnd() - 51.0).abs() < 0.02, "{}", s.cwnd());
        s.cwnd = 0.5;
        s.on_ack(SimTime::ZERO + us(60), us(11), 1);
        assert_eq!(s.cwnd(), 1.5, "below one packet: + ai per packet");
    }

    /// Above the target: one multiplicative decrease per RTT, by beta (rtt - target) /
    /// rtt, at most max_mdf.
    #[test]
    fn above_the_target_the_window_shrinks_once_per_rtt() {
        let mut s = SwiftSender::new(params(), 1);
        s.cwnd = 150.0; // no flow scaling: target 16 us
        s.on_ack(SimTime::ZERO + us(100), us(20), 1);
        let want = 150.0 * (1.0 - 0.8 * (20.0 - 16.0) / 20.0);
        assert!((s.cwnd() - want).abs() < 1e-9, "{} vs {want}", s.cwnd());
        // Within the RTT: no second decrease.
        s.on_ack(SimTime::ZERO + us(110), us(20), 1);
        assert!((s.cwnd() - want).abs() < 1e-9);
        // A huge delay, one RTT (of that sample) later: bounded by max_mdf.
        s.on_ack(SimTime::ZERO + us(1100), us(1000), 1);
        assert!((s.cwnd() - want * 0.5).abs() < 1e-9);
        assert_eq!(s.stats.decreases, 2);
    }

    #[test]
    fn below_one_packet_the_sender_paces_one_packet_per_rtt_over_cwnd() {
        let mut s = SwiftSender::new(params(), 1);
        assert_eq!(s.pacing_bps(), None, "no RTT yet");
        s.cwnd = 0.25;
        s.rtt = Some(us(20));
        // 0.25 x 1000 B per 20 us = 100 Mb/s.
        let r = s.pacing_bps().unwrap();
        assert!((r - 100e6).abs() < 1.0, "{r}");
        assert_eq!(
            s.cwnd_bytes(),
            1000,
            "the window never binds below a packet"
        );
        s.cwnd = 4.0;
        assert_eq!(s.pacing_bps(), None);
        assert_eq!(s.cwnd_bytes(), 4000);
    }

    #[test]
    fn the_window_stays_within_its_bounds() {
        let p = params();
        let mut s = SwiftSender::new(p, 1);
        assert_eq!(s.cwnd(), 200.0, "starts at the largest window");
        for i in 0..100u64 {
            s.on_ack(SimTime::ZERO + us(i * 1000), us(900), 1);
        }
        assert_eq!(s.cwnd(), p.min_cwnd);
        for i in 0..100_000u64 {
            s.on_ack(SimTime::ZERO + us(200_000 + i), us(11), 1);
        }
        assert_eq!(s.cwnd(), p.max_cwnd);
    }
}

//! HPCC: a sender that sets its window and pacing rate from per-hop telemetry (in-band
//! network telemetry, INT) echoed back on every ACK.
//!
//! Sources: Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019 (§3,
//! Algorithm 1), and HPCC's ns-3 (`rdma-hw.cc`: `HandleAckHp`, `UpdateRateHp`,
//! `FastReactHp`, single-rate mode), whose rules this follows:
//! - every switch egress a data packet leaves stamps its queue length, the bytes it has
//!   transmitted, a timestamp and its link rate; the receiver echoes them on the ACK;
//! - on an ACK, for each hop: tx rate = bytes transmitted since the previous record / the
//!   time between them; u = tx rate / link rate + min(queue, previous queue) / (link rate
//!   x T) (the queue in units of the hop's bandwidth-delay product), T the base RTT; the
//!   most utilised hop's u and its interval tau update an EWMA U = (U (T - tau) + u tau)
//!   / T (tau at most T);
//! - with k = U / eta: if k >= 1 or the sender has increased `max_stage` times in a row,
//!   multiplicative: R = R_c / k + R_AI (stage 0); else additive: R = R_c + R_AI (stage
//!   +1); R within [R_min, line rate];
//! - a full update (R_c and the stage committed) happens once per RTT: on the first ACK
//!   past the sequence number that was next to send at the previous full update; the
//!   ACKs between only set the current rate from R_c ("fast react");
//! - the window is R x T (ns-3's `m_var_win`: the BDP scaled by R / line rate), and
//!   packets are paced at R.
//!
//! T is one constant for the fabric (ns-3's GLOBAL_T: the longest path's base RTT).
//! Only the requester-to-responder direction is controlled (READ responses have no ACK
//! to carry telemetry back). Left out: ns-3's per-hop-rate mode (`MULTI_RATE`) and
//! sampled feedback.

use super::{HopTelemetry, Telemetry, MAX_HOPS};
use crate::units::SimDuration;

/// Bytes of INT every data packet and ACK carries with HPCC: ns-3's `IntHeader`, a hop
/// count and five 8-byte hop records (`IntHeader::GetStaticSize`, 2 + 5 x 8).
pub const INT_BYTES: u64 = 42;

/// HPCC parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HpccParams {
    /// Target utilisation eta (paper: 0.95).
    pub target_utilization: f64,
    /// Additive increases before a multiplicative step is forced (paper: maxStage 5).
    pub max_stage: u32,
    /// Additive increase W_AI, as a rate: bits per second.
    pub rate_ai_bps: f64,
    /// Lowest rate, bits per second (HPCC's artifact `run.py`: `MIN_RATE 1000Mb/s` for
    /// every algorithm; ns-3's `RdmaHw` default of 100 Mb/s is not what its runs use).
    pub rate_min_bps: f64,
    /// Base RTT T of the fabric's longest path.
    pub base_rtt: SimDuration,
}

impl HpccParams {
    /// The paper's settings for a host link of `line_rate_bps` and a fabric whose
    /// longest base RTT is `base_rtt`: eta 0.95, maxStage 5, and W_AI = W_init (1 - eta)
    /// / N with N = 100 concurrent flows (§3.3), so R_AI = line x 0.0005 (50 Mb/s at
    /// 100 Gb/s).
    pub fn paper(line_rate_bps: f64, base_rtt: SimDuration) -> HpccParams {
        HpccParams {
            target_utilization: 0.95,
            max_stage: 5,
            // (1 - 0.95) / 100 = 1 / 2000, written so that it is exact.
            rate_ai_bps: line_rate_bps / 2000.0,
            rate_min_bps: 1e9,
            base_rtt,
        }
    }
}

/// Counters an HPCC sender keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HpccStats {
    /// Full (once per RTT) updates.
    pub updates: u64,
    /// Multiplicative decreases among them (k >= 1).
    pub decreases: u64,
}

/// One queue pair's HPCC sender.
#[derive(Clone, Debug, PartialEq)]
pub struct HpccSender {
    p: HpccParams,
    line_rate_bps: f64,
    /// The rate in force (pacing, and the window with T).
    rate: f64,
    /// R_c: the rate committed at the last full update.
    committed: f64,
    stage: u32,
    /// U, the EWMA of the most utilised hop's utilisation.
    utilization: f64,
    /// The sequence number that was next to send at the last full update (`None`
    /// before the first ACK with telemetry).
    last_update_seq: Option<u64>,
    /// The previous telemetry record of each hop.
    hops: [HopTelemetry; MAX_HOPS],
    nhops: usize,
    pub stats: HpccStats,
}

impl HpccSender {
    /// Starts at line rate (the window a BDP).
    pub fn new(p: HpccParams, line_rate_bps: f64) -> HpccSender {
        HpccSender {
            p,
            line_rate_bps,
            rate: line_rate_bps,
            committed: line_rate_bps,
            stage: 0,
            utilization: 0.0,
            last_update_seq: None,
            hops: [HopTelemetry::default(); MAX_HOPS],
            nhops: 0,
            stats: HpccStats::default(),
        }
    }

    pub fn rate_bps(&self) -> f64 {
        self.rate
    }

    pub fn utilization(&self) -> f64 {
        self.utilization
    }

    /// The window: the rate over one base RTT, bytes.
    pub fn cwnd_bytes(&self) -> u64 {
        (self.rate * self.p.base_rtt.0 as f64 / 8e12).ceil() as u64
    }

    /// An ACK arrived carrying `t`, acknowledging every packet before `acked`, while
    /// `next` was the next new packet to send.
    pub fn on_ack(&mut self, acked: u64, next: u64, t: &Telemetry) {
        let hops = t.hops();
        if hops.is_empty() {
            return;
        }
        let Some(last) = self.last_update_seq else {
            // The first RTT: only remember the records.
            self.remember(hops);
            self.last_update_seq = Some(next);
            return;
        };
        let full = acked > last;
        self.update(hops, full);
        if full {
            self.last_update_seq = Some(next.max(last));
        }
    }

    fn remember(&mut self, hops: &[HopTelemetry]) {
        self.nhops = hops.len();
        self.hops[..hops.len()].copy_from_slice(hops);
    }

    /// `UpdateRateHp`: the most utilised hop, the EWMA, the new rate; committed when
    /// `full`.
    fn update(&mut self, hops: &[HopTelemetry], full: bool) {
        let t_ps = self.p.base_rtt.0.max(1) as f64;
        let bdp_bits_per_rate = self.p.base_rtt.as_secs_f64();
        let (mut u_max, mut tau_max) = (None::<f64>, 0.0);
        for (i, h) in hops.iter().enumerate() {
            let Some(prev) = (i < self.nhops).then(|| self.hops[i]) else {
                continue;
            };
            let tau = h.time.0.saturating_sub(prev.time.0) as f64;
            if tau <= 0.0 || h.rate.0 == 0 {
                continue;
            }
            let rate = h.rate.0 as f64;
            let tx_bps = h.tx_bytes.saturating_sub(prev.tx_bytes) as f64 * 8.0 / (tau * 1e-12);
            let queue = h.queue_bytes.min(prev.queue_bytes) as f64 * 8.0;
            let u = tx_bps / rate + queue / (rate * bdp_bits_per_rate);
            if !matches!(u_max, Some(m) if m >= u) {
                u_max = Some(u);
                tau_max = tau;
            }
        }
        self.remember(hops);
        let Some(u) = u_max else { return };
        let tau = tau_max.min(t_ps);
        self.utilization = (self.utilization * (t_ps - tau) + u * tau) / t_ps;
        let k = self.utilization / self.p.target_utilization;
        let (rate, stage) = if k >= 1.0 || self.stage >= self.p.max_stage {
            (
                self.committed / k.max(f64::MIN_POSITIVE) + self.p.rate_ai_bps,
                0,
            )
        } else {
            (self.committed + self.p.rate_ai_bps, self.stage + 1)
        };
        self.rate = rate.clamp(self.p.rate_min_bps, self.line_rate_bps);
        if full {
            self.committed = self.rate;
            self.stage = stage;
            self.stats.updates += 1;
            self.stats.decreases += (k >= 1.0) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{BitsPerSec, SimTime};

    const LINE: f64 = 100e9;

    fn params() -> HpccParams {
        HpccParams::paper(LINE, SimDuration::from_us(10))
    }

    /// One hop's record at `t_us`, after `tx` bytes, with `queue` bytes queued.
    fn tel(t_us: f64, tx: u64, queue: u64) -> Telemetry {
        let mut t = Telemetry::default();
        t.push(HopTelemetry {
            queue_bytes: queue,
            tx_bytes: tx,
            time: SimTime((t_us * 1e6) as u64),
            rate: BitsPerSec(100_000_000_000),
        });
        t
    }

    #[test]
    fn the_first_ack_only_remembers_the_records() {
        let mut s = HpccSender::new(params(), LINE);
        s.on_ack(1, 10, &tel(0.0, 0, 0));
        assert_eq!(s.rate_bps(), LINE);
        assert_eq!(s.stats, HpccStats::default());
        // The window is a BDP at line rate: 100 Gb/s x 10 us = 125,000 B.
        assert_eq!(s.cwnd_bytes(), 125_000);
    }

    /// A hop sending at line rate with a queue of half a BDP: u = 1 + 0.5; over a whole
    /// T the EWMA takes it fully; k = 1.5 / 0.95 and R = R_c / k + R_AI.
    #[test]
    fn an_overloaded_hop_cuts_the_rate_multiplicatively() {
        let p = params();
        let mut s = HpccSender::new(p, LINE);
        s.on_ack(1, 10, &tel(0.0, 0, 62_500));
        // 10 us later: 125,000 B sent (line rate), 62,500 B still queued.
        s.on_ack(11, 20, &tel(10.0, 125_000, 62_500));
        let u = 1.0 + 0.5;
        assert!((s.utilization() - u).abs() < 1e-9, "{}", s.utilization());
        let want = LINE / (u / 0.95) + p.rate_ai_bps;
        assert!(
            (s.rate_bps() - want).abs() < 1.0,
            "{} vs {want}",
            s.rate_bps()
        );
        assert_eq!(
            s.stats,
            HpccStats {
                updates: 1,
                decreases: 1
            }
        );
    }

    /// An idle hop: additive increases for `max_stage` updates, then a multiplicative
    /// step up (R_c / k with k < 1).
    #[test]
    fn an_idle_path_increases_additively_then_multiplicatively() {
        let p = HpccParams {
            rate_min_bps: 1e9,
            ..params()
        };
        let mut s = HpccSender::new(p, LINE);
        // Start from a low committed rate: a full overload (ten BDPs queued) first.
        s.on_ack(1, 10, &tel(0.0, 0, 1_250_000));
        s.on_ack(11, 20, &tel(10.0, 125_000, 1_250_000));
        let mut committed = s.rate_bps();
        assert!(committed < 10e9, "{committed}");
        // Then the hop carries 10% of its rate and no queue, one record per T.
        let mut tx = 125_000;
        let mut u = s.utilization();
        let mut stage = 0;
        for i in 0..7u64 {
            tx += 12_500;
            s.on_ack(
                21 + 10 * i,
                30 + 10 * i,
                &tel(20.0 + 10.0 * i as f64, tx, 0),
            );
            u = 0.1; // tau = T: the EWMA takes the new sample whole
            let k = u / 0.95;
            // Five additive steps, the sixth multiplicative (stage 5), then again.
            let want = if stage < 5 {
                stage += 1;
                committed + p.rate_ai_bps
            } else {
                stage = 0;
                committed / k + p.rate_ai_bps
            };
            let want = want.clamp(p.rate_min_bps, LINE);
            assert!(
                (s.rate_bps() - want).abs() < 1.0,
                "update {i}: {} vs {want}",
                s.rate_bps()
            );
            committed = s.rate_bps();
        }
        assert!((s.utilization() - u).abs() < 1e-9);
    }

    /// ACKs within one RTT of the last full update only set the rate from R_c (fast
    /// react); the stage and R_c move at the next full update.
    #[test]
    fn acks_within_an_rtt_react_without_committing() {
        let p = params();
        let mut s = HpccSender::new(p, LINE);
        s.on_ack(1, 10, &tel(0.0, 0, 0));
        s.on_ack(11, 20, &tel(10.0, 125_000, 0)); // full: u = 1, k = 1.05
        let committed = s.rate_bps();
        // Acked 15 < 20 (the sequence next to send at that update): fast react.
        s.on_ack(15, 25, &tel(15.0, 187_500, 125_000));
        assert!(s.rate_bps() < committed, "reacts to the queue at once");
        assert_eq!(s.stats.updates, 1, "not committed");
        s.on_ack(21, 30, &tel(20.0, 250_000, 0));
        assert_eq!(s.stats.updates, 2);
    }

    #[test]
    fn the_rate_stays_between_the_minimum_and_line() {
        let p = params();
        let mut s = HpccSender::new(p, LINE);
        s.on_ack(1, 10, &tel(0.0, 0, 0));
        for i in 1..50u64 {
            s.on_ack(
                10 * i + 1,
                10 * i + 10,
                &tel(10.0 * i as f64, 125_000 * i, 100_000_000),
            );
        }
        assert_eq!(s.rate_bps(), p.rate_min_bps);
        for i in 50..500u64 {
            s.on_ack(
                10 * i + 1,
                10 * i + 10,
                &tel(10.0 * i as f64, 125_000 * 50, 0),
            );
        }
        assert_eq!(s.rate_bps(), LINE);
    }
}

//! DCQCN: the notification point (receiver) and the reaction point (sender's rate
//! limiter), as sans-IO state machines.
//!
//! Follows Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015
//! (section 3 and its fluid model, `fluidmodel/dcqcn` in the authors' repository), with
//! the parameter sets of the design reference: the paper's (default), NVIDIA's firmware
//! (DOCA "DCQCN CC Parameters") and the HPCC simulator's (`rdma-hw.cc`, `run.py`).
//!
//! - Notification point (NP, the receiving NIC): on an ECN-marked packet it sends a CNP to
//!   the sender, at most one per flow per `cnp_interval` (DCQCN §3.2).
//! - Reaction point (RP, the sending NIC), per queue pair. On a CNP: the target rate
//!   R_T takes the current rate R_C; alpha = (1 - g) alpha + g; R_C = max(R_min,
//!   R_C (1 - alpha / 2)); the increase counters restart (§3.1, eqs. 1-2). Every
//!   `alpha_period` without a CNP: alpha = (1 - g) alpha (eq. 3). A timer (period T) and a
//!   byte counter (every B bytes sent) each count increase events: while both counts are
//!   below F, fast recovery R_C = (R_T + R_C) / 2; once one reaches F, additive increase
//!   R_T += R_AI first; once both do, hyper increase R_T += i R_HAI with
//!   i = min(counts) - F + 1; then R_C = (R_T + R_C) / 2 (§3.1, figure 7).
//!
//! Neither touches the event queue: they take `now` and inputs and say when they next
//! need a call (`next_timeout`). Rates are f64 bits per second; every operation is the
//! same on every machine for the same inputs, so runs stay reproducible.
//!
//! Leaves out: the CNP's own priority handling (the fabric gives it the control class),
//! per-packet rate-limiter granularity beyond exact pacing, and QCN-style feedback values.

use crate::units::{SimDuration, SimTime};

/// DCQCN parameters (design reference, "ECN marking and DCQCN").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnParams {
    /// Alpha gain g.
    pub g: f64,
    /// At most one CNP per flow per this interval (notification point).
    pub cnp_interval: SimDuration,
    /// Alpha decays by (1 - g) every period without a CNP.
    pub alpha_period: SimDuration,
    /// Rate-increase timer period T.
    pub rate_increase_period: SimDuration,
    /// Byte counter B: an increase event every B bytes sent; `None` disables it.
    pub byte_counter: Option<u64>,
    /// Fast-recovery steps F.
    pub fast_recovery_steps: u32,
    /// Additive increase R_AI, bits per second.
    pub rate_ai_bps: f64,
    /// Hyper increase R_HAI, bits per second.
    pub rate_hai_bps: f64,
    /// Minimum rate, bits per second.
    pub rate_min_bps: f64,
}

/// The named parameter sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// Zhu et al. 2015, 40 Gb/s: g 1/256, CNP 50 us, alpha 55 us, T 55 us, B 10 MB, F 5,
    /// R_AI 40 Mb/s (R_HAI not given in the paper: 10 x R_AI assumed).
    Paper,
    /// NVIDIA firmware defaults: g ~5/1024, CNP 4 us, alpha 1 us, T 300 us,
    /// B 32767 B, F 1, R_AI 5 Mb/s, R_HAI 50 Mb/s.
    Nvidia,
    /// HPCC's simulator: g 1/256, a CNP per marked ACK (interval 0), alpha 1 us, T 300 us,
    /// no byte counter, F 1, R_AI 5 Mb/s and R_HAI 50 Mb/s scaled by rate / 25 Gb/s.
    Hpcc,
}

impl Preset {
    /// The preset's parameters for a link of `line_rate_bps`.
    pub fn params(self, line_rate_bps: f64) -> DcqcnParams {
        match self {
            Preset::Paper => DcqcnParams {
                g: 1.0 / 256.0,
                cnp_interval: SimDuration::from_us(50),
                alpha_period: SimDuration::from_us(55),
                rate_increase_period: SimDuration::from_us(55),
                byte_counter: Some(10_000_000),
                fast_recovery_steps: 5,
                rate_ai_bps: 40e6,
                rate_hai_bps: 400e6,
                rate_min_bps: 10e6,
            },
            Preset::Nvidia => DcqcnParams {
                g: 5.0 / 1024.0,
                cnp_interval: SimDuration::from_us(4),
                alpha_period: SimDuration::from_us(1),
                rate_increase_period: SimDuration::from_us(300),
                byte_counter: Some(32767),
                fast_recovery_steps: 1,
                rate_ai_bps: 5e6,
                rate_hai_bps: 50e6,
                rate_min_bps: 10e6,
            },
            Preset::Hpcc => {
                let scale = line_rate_bps / 25e9;
                DcqcnParams {
                    g: 1.0 / 256.0,
                    cnp_interval: SimDuration::ZERO,
                    alpha_period: SimDuration::from_us(1),
                    rate_increase_period: SimDuration::from_us(300),
                    byte_counter: None,
                    fast_recovery_steps: 1,
                    rate_ai_bps: 5e6 * scale,
                    rate_hai_bps: 50e6 * scale,
                    rate_min_bps: 100e6,
                }
            }
        }
    }
}

/// The notification point of one flow: decides whether a marked packet earns a CNP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotificationPoint {
    last_cnp: Option<SimTime>,
    pub cnps_sent: u64,
}

impl NotificationPoint {
    /// An ECN-marked packet of this flow arrived: `true` if a CNP goes back now (at most
    /// one per `interval`, DCQCN §3.2).
    pub fn on_marked(&mut self, now: SimTime, interval: SimDuration) -> bool {
        match self.last_cnp {
            Some(t) if now < t + interval => false,
            _ => {
                self.last_cnp = Some(now);
                self.cnps_sent += 1;
                true
            }
        }
    }
}

/// Counters a reaction point keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpStats {
    pub cnps_received: u64,
    pub rate_cuts: u64,
}

/// The reaction point of one queue pair: its sending rate.
#[derive(Clone, Debug, PartialEq)]
pub struct ReactionPoint {
    p: DcqcnParams,
    line_rate_bps: f64,
    /// Current rate R_C.
    rc: f64,
    /// Target rate R_T.
    rt: f64,
    alpha: f64,
    /// Increase events counted by the timer and by the byte counter since the last cut.
    timer_count: u32,
    byte_count: u32,
    /// Bytes sent since the byte counter last fired.
    bytes: u64,
    alpha_deadline: SimTime,
    increase_deadline: SimTime,
    /// A CNP arrived during the current alpha period.
    cnp_this_period: bool,
    pub stats: RpStats,
}

impl ReactionPoint {
    /// Starts at line rate with alpha = 1 (the paper's initial value).
    pub fn new(p: DcqcnParams, line_rate_bps: f64, now: SimTime) -> ReactionPoint {
        ReactionPoint {
            p,
            line_rate_bps,
            rc: line_rate_bps,
            rt: line_rate_bps,
            alpha: 1.0,
            timer_count: 0,
            byte_count: 0,
            bytes: 0,
            alpha_deadline: now + p.alpha_period,
            increase_deadline: now + p.rate_increase_period,
            cnp_this_period: false,
            stats: RpStats::default(),
        }
    }

    /// The current sending rate R_C, bits per second.
    pub fn rate_bps(&self) -> f64 {
        self.rc
    }

    pub fn target_bps(&self) -> f64 {
        self.rt
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// A CNP arrived: cut the rate (DCQCN §3.1, eqs. 1-2).
    pub fn on_cnp(&mut self, now: SimTime) {
        self.stats.cnps_received += 1;
        self.stats.rate_cuts += 1;
        self.rt = self.rc;
        self.alpha = (1.0 - self.p.g) * self.alpha + self.p.g;
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(self.p.rate_min_bps);
        self.timer_count = 0;
        self.byte_count = 0;
        self.bytes = 0;
        self.cnp_this_period = true;
        self.increase_deadline = now + self.p.rate_increase_period;
    }

    /// `bytes` were sent: the byte counter may fire an increase event.
    pub fn on_bytes_sent(&mut self, bytes: u64) {
        let Some(b) = self.p.byte_counter else {
            return;
        };
        self.bytes += bytes;
        while self.bytes >= b {
            self.bytes -= b;
            self.byte_count += 1;
            self.increase();
        }
    }

    /// One increase event (figure 7): fast recovery, additive or hyper increase.
    fn increase(&mut self) {
        let f = self.p.fast_recovery_steps;
        let (t, b) = (self.timer_count, self.byte_count);
        // Without a byte counter, only the timer counts (HPCC's configuration).
        let b = if self.p.byte_counter.is_some() { b } else { t };
        if t >= f && b >= f {
            let i = t.min(b) - f + 1;
            self.rt += i as f64 * self.p.rate_hai_bps;
        } else if t >= f || b >= f {
            self.rt += self.p.rate_ai_bps;
        }
        self.rt = self.rt.min(self.line_rate_bps);
        self.rc = ((self.rt + self.rc) / 2.0).min(self.line_rate_bps);
    }

    /// When the reaction point next needs `handle_timeout`.
    pub fn next_timeout(&self) -> SimTime {
        self.alpha_deadline.min(self.increase_deadline)
    }

    /// Timers that are due fire, in a fixed order (alpha first, then the increase timer).
    pub fn handle_timeout(&mut self, now: SimTime) {
        while self.alpha_deadline <= now {
            // eq. 3: alpha decays in every period that saw no CNP.
            if !self.cnp_this_period {
                self.alpha *= 1.0 - self.p.g;
            }
            self.cnp_this_period = false;
            self.alpha_deadline += self.p.alpha_period.max(SimDuration(1));
        }
        while self.increase_deadline <= now {
            self.timer_count += 1;
            self.increase();
            self.increase_deadline += self.p.rate_increase_period.max(SimDuration(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: f64 = 100e9;

    fn paper() -> DcqcnParams {
        Preset::Paper.params(LINE)
    }

    #[test]
    fn one_cnp_at_alpha_one_halves_the_rate() {
        let mut rp = ReactionPoint::new(paper(), LINE, SimTime::ZERO);
        rp.on_cnp(SimTime::ZERO);
        // alpha stays 1 ((1 - g) 1 + g); R_C = R_C (1 - 1/2); R_T keeps the old rate.
        assert_eq!(rp.alpha(), 1.0);
        assert_eq!(rp.rate_bps(), LINE / 2.0);
        assert_eq!(rp.target_bps(), LINE);
        assert_eq!(rp.stats.rate_cuts, 1);
    }

    #[test]
    fn alpha_decays_by_one_minus_g_per_period_without_cnps() {
        let p = paper();
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        let t = SimTime::ZERO + p.alpha_period + p.alpha_period + p.alpha_period;
        rp.handle_timeout(t);
        let want = (1.0 - p.g).powi(3);
        assert!((rp.alpha() - want).abs() < 1e-15);
    }

    #[test]
    fn a_period_with_a_cnp_does_not_decay_alpha() {
        let p = paper();
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        rp.on_cnp(SimTime(1));
        rp.handle_timeout(SimTime::ZERO + p.alpha_period);
        assert_eq!(rp.alpha(), 1.0);
    }

    #[test]
    fn cnp_raises_alpha_by_g_towards_one() {
        let p = paper();
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        // Let alpha decay to 0.5-ish, then a CNP: alpha = (1 - g) a + g.
        rp.handle_timeout(SimTime::ZERO + SimDuration(p.alpha_period.0 * 100));
        let a = rp.alpha();
        let rc = rp.rate_bps();
        rp.on_cnp(SimTime::ZERO + SimDuration(p.alpha_period.0 * 100));
        let a2 = (1.0 - p.g) * a + p.g;
        assert!((rp.alpha() - a2).abs() < 1e-15);
        assert!((rp.rate_bps() - rc * (1.0 - a2 / 2.0)).abs() < 1e-3);
    }

    #[test]
    fn fast_recovery_halves_the_gap_to_the_target() {
        let p = paper();
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        rp.on_cnp(SimTime::ZERO); // R_C = 50G, R_T = 100G
        let t1 = SimTime::ZERO + p.rate_increase_period;
        rp.handle_timeout(t1);
        assert_eq!(rp.target_bps(), LINE, "fast recovery keeps the target");
        assert_eq!(rp.rate_bps(), 75e9);
        rp.handle_timeout(t1 + p.rate_increase_period);
        assert_eq!(rp.rate_bps(), 87.5e9);
    }

    #[test]
    fn additive_then_hyper_increase() {
        // F = 1 so the stages come quickly; a line rate far above the rate so the target
        // is not capped.
        let p = DcqcnParams {
            fast_recovery_steps: 1,
            byte_counter: Some(1000),
            ..paper()
        };
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        for _ in 0..4 {
            rp.on_cnp(SimTime::ZERO);
        }
        let (rc, rt) = (rp.rate_bps(), rp.target_bps());
        // One timer event: timer count 1 >= F, byte count 0 < F: additive.
        rp.handle_timeout(SimTime::ZERO + p.rate_increase_period);
        assert_eq!(rp.target_bps(), rt + p.rate_ai_bps);
        assert_eq!(rp.rate_bps(), (rt + p.rate_ai_bps + rc) / 2.0);
        // Then 1000 bytes: both counts reach F = 1: hyper with i = min(1, 1) - 1 + 1 = 1.
        let (rc, rt) = (rp.rate_bps(), rp.target_bps());
        rp.on_bytes_sent(1000);
        assert_eq!(rp.target_bps(), rt + p.rate_hai_bps);
        assert_eq!(rp.rate_bps(), (rt + p.rate_hai_bps + rc) / 2.0);
        // A second byte-counter event: counts 1 and 2, i = 1 again.
        let rt = rp.target_bps();
        rp.on_bytes_sent(1000);
        assert_eq!(rp.target_bps(), rt + p.rate_hai_bps);
        // A second timer event: counts 2 and 2: i = 2.
        let rt = rp.target_bps();
        rp.handle_timeout(SimTime::ZERO + p.rate_increase_period + p.rate_increase_period);
        assert_eq!(rp.target_bps(), rt + 2.0 * p.rate_hai_bps);
    }

    #[test]
    fn a_cnp_restarts_the_increase_stages() {
        let p = DcqcnParams {
            fast_recovery_steps: 1,
            ..paper()
        };
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        rp.on_cnp(SimTime::ZERO);
        rp.handle_timeout(SimTime::ZERO + p.rate_increase_period); // additive
        let t = SimTime::ZERO + p.rate_increase_period;
        rp.on_cnp(t);
        let (rc, rt) = (rp.rate_bps(), rp.target_bps());
        assert_eq!(
            rt,
            rc / (1.0 - rp.alpha() / 2.0),
            "R_T took the pre-cut rate"
        );
        // The increase timer restarted at the CNP: nothing happens one period after the
        // old deadline would have fired if it were not reset.
        rp.handle_timeout(t + SimDuration(p.rate_increase_period.0 - 1));
        assert_eq!(rp.rate_bps(), rc);
        // Counts were reset: the next timer event is the first again, which with F = 1
        // is already additive.
        rp.handle_timeout(t + p.rate_increase_period);
        assert_eq!(
            rp.target_bps(),
            rt + p.rate_ai_bps,
            "F = 1: timer count 1 is additive"
        );
    }

    #[test]
    fn rates_stay_between_min_and_line() {
        let p = paper();
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        for _ in 0..1000 {
            rp.on_cnp(SimTime::ZERO);
        }
        assert_eq!(rp.rate_bps(), p.rate_min_bps);
        let mut t = SimTime::ZERO;
        for _ in 0..10_000 {
            t += p.rate_increase_period;
            rp.handle_timeout(t);
            rp.on_bytes_sent(p.byte_counter.unwrap());
        }
        assert_eq!(rp.rate_bps(), LINE);
        assert_eq!(rp.target_bps(), LINE);
    }

    #[test]
    fn notification_point_sends_at_most_one_cnp_per_interval() {
        let mut np = NotificationPoint::default();
        let iv = SimDuration::from_us(50);
        let sent: Vec<bool> = [0u64, 10, 49, 50, 51, 99, 100]
            .iter()
            .map(|&us| np.on_marked(SimTime::ZERO + SimDuration::from_us(us), iv))
            .collect();
        assert_eq!(sent, vec![true, false, false, true, false, false, true]);
        assert_eq!(np.cnps_sent, 3);
    }

    #[test]
    fn hpcc_preset_scales_increase_with_line_rate() {
        let p25 = Preset::Hpcc.params(25e9);
        let p100 = Preset::Hpcc.params(100e9);
        assert_eq!(p25.rate_ai_bps, 5e6);
        assert_eq!(p100.rate_ai_bps, 20e6);
        assert_eq!(p100.rate_hai_bps, 200e6);
        assert_eq!(p100.byte_counter, None);
    }
}

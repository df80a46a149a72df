//! DCQCN: the notification point (receiver) and the reaction point (sender's rate
//! limiter), as sans-IO state machines, rule for rule as ConnectX NICs and the reference
//! simulator run them.
//!
//! Sources: Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM
//! 2015 (the algorithm and its `paper` parameters); NVIDIA DOCA "DCQCN CC Parameters"
//! (the firmware's rules and the `nvidia` defaults; each field below names its
//! parameter); HPCC's ns-3 `rdma-hw.cc` (the Mellanox-mode functions `cnp_received_mlx`,
//! `UpdateAlphaMlx`, `CheckRateDecreaseMlx`, `RateIncEventTimerMlx`, `FastRecoveryMlx`,
//! `ActiveIncreaseMlx`, `HyperIncreaseMlx`) and its `run.py` (the `hpcc` parameters).
//!
//! - Notification point (NP, the receiving NIC): on an ECN-marked packet it sends a CNP
//!   to the sender, at most one per flow per `cnp_interval` (`min_time_between_cnps`).
//! - Reaction point (RP, the sending NIC), per queue-pair direction, at line rate until
//!   its first CNP. That CNP sets alpha to `initial_alpha` (`initial_alpha_value`),
//!   optionally sets the rate (`rate_to_set_on_first_cnp`), and starts two timers:
//!   - every `alpha_period` (`dce_tcp_rtt`): alpha = (1 - g) alpha + g if a CNP arrived in
//!     the period, else (1 - g) alpha (the first CNP itself does not count);
//!   - every `rate_reduce_period` (`rate_reduce_monitor_period`): if a CNP arrived since
//!     the last check, cut once: R_T = R_C only if `clamp_target_rate`
//!     (`clamp_tgt_rate`), or if the rate rose since the previous cut (by the timer
//!     alone with `clamp_target_after_timer`, `clamp_tgt_rate_after_time_inc`); then
//!     R_C = max(R_min, R_C max(1 - alpha / 2, `min_decrease_factor`)) (`rpg_min_dec_fac`),
//!     the increase counts restart and the increase timer restarts. With a period of 0
//!     (the paper) every CNP cuts at once.
//! - Increase events come from a timer (`rate_increase_period`, `rpg_time_reset`,
//!   running from the first cut) and a byte counter (`byte_counter`, `rpg_byte_reset`).
//!   Each acts on the counts before it, then counts itself (ns-3 `RateIncEventTimerMlx`):
//!   fast recovery R_C = (R_T + R_C) / 2 while both counts are below F
//!   (`fast_recovery_steps`, `rpg_threshold`); hyper increase R_T += R_HAI
//!   (`rpg_hai_rate`) once both have reached F and one has passed it; additive increase
//!   R_T += R_AI (`rpg_ai_rate`) in between; each then R_C = (R_T + R_C) / 2. Without a
//!   byte counter (ns-3) the timer's count stands for both: F events of fast recovery, one
//!   additive, then hyper.
//!
//! Timers are lazy: the state catches up to `now` whenever it is asked (`handle_timeout`),
//! firing due timers in time order, ties in the order alpha, increase, decrease (ns-3's
//! order: the increase event was scheduled earlier; the decrease check runs 1 ns after
//! the alpha update). Runs of timer events that change nothing but the counts (alpha
//! decaying with no CNP, checks with no CNP, increases at line rate) are taken in one step.
//! Rates are f64 bits per second; every operation is the same on every machine.
//!
//! Leaves out: NVIDIA's `rpg_gd` (its default 11 with alpha in 1/1024 units is the
//! paper's and ns-3's alpha / 2, the cut here), the paper's growing hyper increase
//! (i x R_HAI; ns-3 adds R_HAI per event, and NVIDIA does not document which), the
//! CNP's own priority handling (the fabric gives it the control class) and per-packet
//! rate-limiter granularity beyond exact pacing.

use crate::units::{SimDuration, SimTime};

/// DCQCN parameters; each names NVIDIA's firmware parameter it stands for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnParams {
    /// Alpha gain g (`dce_tcp_g`: g = (1024 - dce_tcp_g) / 1024).
    pub g: f64,
    /// At most one CNP per flow per this interval, at the NP (`min_time_between_cnps`).
    pub cnp_interval: SimDuration,
    /// Alpha is updated once per period (`dce_tcp_rtt`).
    pub alpha_period: SimDuration,
    /// Alpha on the first CNP (`initial_alpha_value` / 1024).
    pub initial_alpha: f64,
    /// The rate set on the first CNP (`rate_to_set_on_first_cnp`; `None`: keep it).
    pub rate_on_first_cnp_bps: Option<f64>,
    /// At most one cut per period (`rate_reduce_monitor_period`); zero: every CNP cuts.
    pub rate_reduce_period: SimDuration,
    /// Every cut sets R_T = R_C (`clamp_tgt_rate`).
    pub clamp_target_rate: bool,
    /// Otherwise R_T = R_C at a cut only if the timer raised the rate since the previous
    /// cut (`clamp_tgt_rate_after_time_inc` 1); with `false`, if anything raised it.
    pub clamp_target_after_timer: bool,
    /// A cut keeps at least this fraction of the rate (`rpg_min_dec_fac`, 50%: 0.5).
    pub min_decrease_factor: f64,
    /// Rate-increase timer period T (`rpg_time_reset`).
    pub rate_increase_period: SimDuration,
    /// Byte counter B: an increase event every B bytes sent (`rpg_byte_reset`); `None`
    /// disables it.
    pub byte_counter: Option<u64>,
    /// Fast-recovery steps F (`rpg_threshold`).
    pub fast_recovery_steps: u32,
    /// Additive increase R_AI, bits per second (`rpg_ai_rate`).
    pub rate_ai_bps: f64,
    /// Hyper increase R_HAI, bits per second (`rpg_hai_rate`).
    pub rate_hai_bps: f64,
    /// Minimum rate, bits per second (`rpg_min_rate`).
    pub rate_min_bps: f64,
}

/// The named parameter sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// Zhu et al. 2015, 40 Gb/s: g 1/256, CNP 50 us, alpha 55 us, T 55 us, B 10 MB, F 5,
    /// R_AI 40 Mb/s (R_HAI not given in the paper: 10 x R_AI assumed); every CNP cuts
    /// and sets R_T = R_C (the paper's equations 1-2); alpha starts at 1.
    Paper,
    /// NVIDIA firmware defaults (DOCA "DCQCN CC Parameters"): g 5/1024 per 1 us, initial
    /// alpha 1023/1024, CNP 4 us, at most one cut per 4 us, no clamp (but after a timer
    /// increase), min decrease 50%, T 300 us, B 32767 B, F 1, R_AI 5 Mb/s, R_HAI 50 Mb/s,
    /// R_min 1 Mb/s (`rpg_min_rate`).
    Nvidia,
    /// HPCC's ns-3 (`run.py`, 100 Gb/s runs): g 1/256 per 1 us, initial alpha 1, a CNP
    /// per marked packet, at most one cut per 4 us (RATE_DECREASE_INTERVAL), clamp only
    /// after a timer increase (CLAMP_TARGET_RATE 0), T 300 us, no byte counter, F 1,
    /// R_AI 5 Mb/s and R_HAI 50 Mb/s scaled by rate / 25 Gb/s, R_min 1 Gb/s (`run.py`'s
    /// `MIN_RATE 1000Mb/s`; `RdmaHw`'s own default of 100 Mb/s is not what its runs use).
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
                initial_alpha: 1.0,
                rate_on_first_cnp_bps: None,
                rate_reduce_period: SimDuration::ZERO,
                clamp_target_rate: true,
                clamp_target_after_timer: true,
                min_decrease_factor: 0.5,
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
                initial_alpha: 1023.0 / 1024.0,
                rate_on_first_cnp_bps: None,
                rate_reduce_period: SimDuration::from_us(4),
                clamp_target_rate: false,
                clamp_target_after_timer: true,
                min_decrease_factor: 0.5,
                rate_increase_period: SimDuration::from_us(300),
                byte_counter: Some(32767),
                fast_recovery_steps: 1,
                rate_ai_bps: 5e6,
                rate_hai_bps: 50e6,
                rate_min_bps: 1e6,
            },
            Preset::Hpcc => {
                let scale = line_rate_bps / 25e9;
                DcqcnParams {
                    g: 1.0 / 256.0,
                    cnp_interval: SimDuration::ZERO,
                    alpha_period: SimDuration::from_us(1),
                    initial_alpha: 1.0,
                    rate_on_first_cnp_bps: None,
                    rate_reduce_period: SimDuration::from_us(4),
                    clamp_target_rate: false,
                    clamp_target_after_timer: true,
                    min_decrease_factor: 0.5,
                    rate_increase_period: SimDuration::from_us(300),
                    byte_counter: None,
                    fast_recovery_steps: 1,
                    rate_ai_bps: 5e6 * scale,
                    rate_hai_bps: 50e6 * scale,
                    rate_min_bps: 1e9,
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
    /// Rate cuts made (at most one per `rate_reduce_period`, however many CNPs).
    pub rate_cuts: u64,
}

/// Which increase stage an event is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    FastRecovery,
    Additive,
    Hyper,
}

/// The reaction point of one queue-pair direction: its sending rate.
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
    /// A CNP arrived in the current alpha period / since the last decrease check.
    cnp_for_alpha: bool,
    cnp_for_decrease: bool,
    /// Timers (none before the first CNP; the increase timer from the first cut).
    alpha_deadline: Option<SimTime>,
    decrease_deadline: Option<SimTime>,
    increase_deadline: Option<SimTime>,
    pub stats: RpStats,
}

impl ReactionPoint {
    /// Starts at line rate, with no timers running until the first CNP.
    pub fn new(p: DcqcnParams, line_rate_bps: f64, _now: SimTime) -> ReactionPoint {
        ReactionPoint {
            p,
            line_rate_bps,
            rc: line_rate_bps,
            rt: line_rate_bps,
            alpha: p.initial_alpha,
            timer_count: 0,
            byte_count: 0,
            bytes: 0,
            cnp_for_alpha: false,
            cnp_for_decrease: false,
            alpha_deadline: None,
            decrease_deadline: None,
            increase_deadline: None,
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

    /// The stage the next increase event acts in (on the counts so far).
    pub fn stage(&self) -> Stage {
        let f = self.p.fast_recovery_steps;
        let t = self.timer_count;
        // Without a byte counter, the timer's count stands for both (ns-3).
        let b = if self.p.byte_counter.is_some() {
            self.byte_count
        } else {
            t
        };
        if t < f && b < f {
            Stage::FastRecovery
        } else if t >= f && b >= f && t.max(b) > f {
            Stage::Hyper
        } else {
            Stage::Additive
        }
    }

    /// A CNP arrived (after `handle_timeout(now)`): the first starts the timers; every
    /// later one counts for alpha; each asks for a cut at the next decrease check (or at
    /// once with no monitor period).
    pub fn on_cnp(&mut self, now: SimTime) {
        self.stats.cnps_received += 1;
        if self.alpha_deadline.is_none() {
            // ns-3 `cnp_received_mlx`: alpha takes its initial value and this CNP does
            // not count towards the first alpha update.
            self.alpha = self.p.initial_alpha;
            self.alpha_deadline = Some(now + self.p.alpha_period.max(SimDuration(1)));
            if let Some(r) = self.p.rate_on_first_cnp_bps {
                self.rc = r.min(self.line_rate_bps);
                self.rt = self.rc;
            }
            if self.p.rate_reduce_period > SimDuration::ZERO {
                self.decrease_deadline = Some(now + self.p.rate_reduce_period);
            }
        } else {
            self.cnp_for_alpha = true;
        }
        if self.p.rate_reduce_period == SimDuration::ZERO {
            self.cut(now);
        } else {
            self.cnp_for_decrease = true;
        }
    }

    /// One rate cut at `at`.
    fn cut(&mut self, at: SimTime) {
        let rose = if self.p.clamp_target_after_timer {
            self.timer_count > 0
        } else {
            self.timer_count > 0 || self.byte_count > 0
        };
        if self.p.clamp_target_rate || rose {
            self.rt = self.rc;
        }
        let keep = (1.0 - self.alpha / 2.0).max(self.p.min_decrease_factor);
        self.rc = (self.rc * keep).max(self.p.rate_min_bps);
        self.timer_count = 0;
        self.byte_count = 0;
        self.bytes = 0;
        self.cnp_for_decrease = false;
        self.increase_deadline = Some(at + self.p.rate_increase_period.max(SimDuration(1)));
        self.stats.rate_cuts += 1;
    }

    /// `bytes` were sent (after `handle_timeout(now)`): the byte counter may fire
    /// increase events. It runs once the rate has been cut.
    pub fn on_bytes_sent(&mut self, bytes: u64) {
        let Some(b) = self.p.byte_counter else {
            return;
        };
        if self.increase_deadline.is_none() {
            return;
        }
        self.bytes += bytes;
        while self.bytes >= b {
            self.bytes -= b;
            self.increase();
            self.byte_count = self.byte_count.saturating_add(1);
        }
    }

    /// One increase event, in the stage the counts so far give.
    fn increase(&mut self) {
        match self.stage() {
            Stage::FastRecovery => {}
            Stage::Additive => self.rt += self.p.rate_ai_bps,
            Stage::Hyper => self.rt += self.p.rate_hai_bps,
        }
        self.rt = self.rt.min(self.line_rate_bps);
        self.rc = ((self.rt + self.rc) / 2.0).min(self.line_rate_bps);
    }

    /// When the increase timer next fires (`None`: not running): the next time the rate
    /// may rise other than by bytes sent.
    pub fn next_rate_rise(&self) -> Option<SimTime> {
        self.increase_deadline
    }

    /// When the reaction point next has a timer due (`None`: none running).
    pub fn next_timeout(&self) -> Option<SimTime> {
        [
            self.alpha_deadline,
            self.increase_deadline,
            self.decrease_deadline,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Timers that are due by `now` fire, in time order (ties: alpha, increase, decrease).
    pub fn handle_timeout(&mut self, now: SimTime) {
        loop {
            let a = self.alpha_deadline.filter(|&t| t <= now);
            let i = self.increase_deadline.filter(|&t| t <= now);
            let d = self.decrease_deadline.filter(|&t| t <= now);
            let first = [a, i, d].into_iter().flatten().min();
            let Some(t) = first else { return };
            if a == Some(t) {
                self.fire_alpha(t, now.min(d.unwrap_or(now)));
            } else if i == Some(t) {
                self.fire_increase(t, now.min(d.unwrap_or(now)));
            } else {
                self.fire_decrease(t, now);
            }
        }
    }

    /// The alpha timer at `t`; with no CNP pending, every alpha update up to `until`
    /// (nothing else reads alpha before then) is taken at once.
    fn fire_alpha(&mut self, t: SimTime, until: SimTime) {
        let period = self.p.alpha_period.max(SimDuration(1));
        let decay = 1.0 - self.p.g;
        if self.cnp_for_alpha {
            self.alpha = decay * self.alpha + self.p.g;
            self.cnp_for_alpha = false;
            self.alpha_deadline = Some(t + period);
            return;
        }
        let k = (until.0 - t.0) / period.0 + 1;
        self.alpha *= decay.powi(k.min(i32::MAX as u64) as i32);
        self.alpha_deadline = Some(SimTime(t.0 + k * period.0));
    }

    /// The increase timer at `t`; at line rate (nothing left to raise) every event up to
    /// `until` is only counted.
    fn fire_increase(&mut self, t: SimTime, until: SimTime) {
        let period = self.p.rate_increase_period.max(SimDuration(1));
        if self.rc >= self.line_rate_bps && self.rt >= self.line_rate_bps {
            let k = (until.0 - t.0) / period.0 + 1;
            self.timer_count = self
                .timer_count
                .saturating_add(k.min(u32::MAX as u64) as u32);
            self.increase_deadline = Some(SimTime(t.0 + k * period.0));
            return;
        }
        self.increase();
        self.timer_count = self.timer_count.saturating_add(1);
        self.increase_deadline = Some(t + period);
    }

    /// The decrease check at `t`: a cut if a CNP arrived since the last; with none, every
    /// check up to `until` passes at once.
    fn fire_decrease(&mut self, t: SimTime, until: SimTime) {
        let period = self.p.rate_reduce_period;
        if self.cnp_for_decrease {
            self.cut(t);
            self.decrease_deadline = Some(t + period);
            return;
        }
        let k = (until.0 - t.0) / period.0 + 1;
        self.decrease_deadline = Some(SimTime(t.0 + k * period.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: f64 = 100e9;

    fn us(n: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_us(n)
    }

    fn hpcc() -> DcqcnParams {
        Preset::Hpcc.params(LINE)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn nothing_runs_before_the_first_cnp() {
        let mut rp = ReactionPoint::new(Preset::Nvidia.params(LINE), LINE, SimTime::ZERO);
        assert_eq!(rp.next_timeout(), None);
        rp.handle_timeout(us(1_000_000));
        rp.on_bytes_sent(1 << 30);
        assert_eq!((rp.rate_bps(), rp.target_bps()), (LINE, LINE));
        assert_eq!(rp.stats, RpStats::default());
    }

    /// NVIDIA: the first CNP sets alpha to 1023/1024 and starts the timers; the cut waits
    /// for the first decrease check, 4 us later, after four alpha updates (the first CNP
    /// does not count towards them), and keeps the target (no clamp).
    #[test]
    fn the_first_cnp_starts_the_timers_and_the_cut_waits_for_the_check() {
        let p = Preset::Nvidia.params(LINE);
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        rp.on_cnp(us(10));
        assert_eq!(rp.alpha(), 1023.0 / 1024.0);
        assert_eq!(rp.rate_bps(), LINE, "no cut yet");
        assert_eq!(rp.next_timeout(), Some(us(11)));
        rp.handle_timeout(SimTime(us(14).0 - 1));
        assert_eq!((rp.rate_bps(), rp.stats.rate_cuts), (LINE, 0));
        rp.handle_timeout(us(14));
        let alpha = 1023.0 / 1024.0 * (1.0 - p.g).powi(4);
        assert!(close(rp.alpha(), alpha), "{} vs {alpha}", rp.alpha());
        assert!(close(rp.rate_bps(), LINE * (1.0 - alpha / 2.0)));
        assert_eq!(rp.target_bps(), LINE);
        assert_eq!(rp.stats.rate_cuts, 1);
    }

    #[test]
    fn many_cnps_in_one_monitor_period_make_one_cut() {
        let mut rp = ReactionPoint::new(hpcc(), LINE, SimTime::ZERO);
        for t in [0, 1, 2, 3] {
            rp.handle_timeout(us(t));
            rp.on_cnp(us(t));
        }
        rp.handle_timeout(us(4));
        assert_eq!(rp.stats.cnps_received, 4);
        assert_eq!(rp.stats.rate_cuts, 1);
        // The next check (8 us) finds no new CNP: no cut.
        rp.handle_timeout(us(8));
        assert_eq!(rp.stats.rate_cuts, 1);
    }

    /// The hand computation of an HPCC-preset trace: CNPs at 0, 5 and 309 us.
    /// - 0 us: alpha = 1, timers start (alpha every 1 us, checks every 4 us);
    /// - 4 us: alpha = (1 - g)^4 (no CNP counted), cut: R_C = 100G (1 - alpha/2), R_T stays;
    /// - 6 us: the period holding the 5 us CNP ends: alpha = (1 - g) alpha + g; 7, 8 us:
    ///   decay; 8 us: cut again, R_T still 100G (no increase since the last cut);
    /// - 308 us: the increase timer (from the 8 us cut): fast recovery R_C = (R_T + R_C)/2;
    /// - 312 us: the 309 us CNP's cut: a timer increase happened, so R_T = R_C first.
    #[test]
    fn the_target_is_kept_between_back_to_back_cuts_and_clamped_after_a_timer_increase() {
        let p = hpcc();
        let g = p.g;
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        rp.on_cnp(us(0));
        rp.handle_timeout(us(4));
        let mut alpha = (1.0 - g).powi(4);
        let mut rc = LINE * (1.0 - alpha / 2.0);
        assert!(close(rp.rate_bps(), rc));
        rp.handle_timeout(us(5));
        alpha *= 1.0 - g;
        rp.on_cnp(us(5));
        rp.handle_timeout(us(8));
        alpha = (1.0 - g) * alpha + g;
        alpha *= (1.0 - g) * (1.0 - g);
        rc *= 1.0 - alpha / 2.0;
        assert!(close(rp.alpha(), alpha));
        assert!(close(rp.rate_bps(), rc), "{} vs {rc}", rp.rate_bps());
        assert_eq!(
            rp.target_bps(),
            LINE,
            "no increase since the last cut: R_T kept"
        );
        assert_eq!(rp.stats.rate_cuts, 2);
        rp.handle_timeout(us(308));
        rc = (LINE + rc) / 2.0;
        assert!(close(rp.rate_bps(), rc), "fast recovery");
        rp.handle_timeout(us(309));
        rp.on_cnp(us(309));
        rp.handle_timeout(us(312));
        assert!(
            close(rp.target_bps(), rc),
            "clamped to the rate before the cut"
        );
        assert!(rp.rate_bps() < rc);
        assert_eq!(rp.stats.rate_cuts, 3);
    }

    /// The paper's preset: every CNP cuts at once and sets R_T = R_C (equations 1-2).
    #[test]
    fn the_paper_cuts_on_every_cnp_and_clamps_the_target() {
        let p = Preset::Paper.params(40e9);
        let mut rp = ReactionPoint::new(p, 40e9, SimTime::ZERO);
        rp.on_cnp(us(0));
        assert_eq!((rp.rate_bps(), rp.target_bps()), (20e9, 40e9));
        rp.on_cnp(us(1));
        assert_eq!(rp.target_bps(), 20e9, "clamped");
        assert_eq!(rp.rate_bps(), 10e9);
        assert_eq!(rp.stats.rate_cuts, 2);
    }

    /// ns-3 without a byte counter (F = 1), counted after acting: after a cut, one fast
    /// recovery, one additive increase, then hyper increases of R_HAI each.
    #[test]
    fn increase_stages_follow_ns3_without_a_byte_counter() {
        let p = hpcc();
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        rp.on_cnp(us(0));
        rp.handle_timeout(us(304)); // cut at 4 us, fast recovery at 304 us
        rp.on_cnp(us(305));
        rp.handle_timeout(us(308)); // clamped cut: R_T = R_C below line
        let (mut rc, mut rt) = (rp.rate_bps(), rp.target_bps());
        assert!(rt < LINE);
        let mut t = 308;
        for stage in [
            Stage::FastRecovery,
            Stage::Additive,
            Stage::Hyper,
            Stage::Hyper,
        ] {
            assert_eq!(rp.stage(), stage);
            t += 300;
            rp.handle_timeout(us(t));
            match stage {
                Stage::FastRecovery => {}
                Stage::Additive => rt += p.rate_ai_bps,
                Stage::Hyper => rt += p.rate_hai_bps,
            }
            rc = (rt + rc) / 2.0;
            assert_eq!(
                (rp.rate_bps(), rp.target_bps()),
                (rc, rt),
                "{stage:?} at {t} us"
            );
        }
    }

    /// With a byte counter (F = 1): fast recovery while both counts are 0, additive while
    /// only one has reached F, hyper once both have and one has passed it.
    #[test]
    fn with_a_byte_counter_the_stages_need_both_counts() {
        let p = DcqcnParams {
            byte_counter: Some(1000),
            rate_reduce_period: SimDuration::ZERO,
            clamp_target_rate: true,
            ..Preset::Nvidia.params(LINE)
        };
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        rp.on_cnp(us(0));
        rp.on_cnp(us(0));
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(rp.stage());
            rp.on_bytes_sent(1000);
        }
        seen.push(rp.stage());
        rp.handle_timeout(us(300));
        seen.push(rp.stage());
        use Stage::*;
        assert_eq!(seen, [FastRecovery, Additive, Additive, Additive, Hyper]);
    }

    /// `clamp_target_after_timer`: byte-counter increases alone do not clamp the target;
    /// without it, any increase does.
    #[test]
    fn byte_counter_increases_clamp_only_without_after_timer() {
        for (after_timer, clamped) in [(true, false), (false, true)] {
            let p = DcqcnParams {
                clamp_target_after_timer: after_timer,
                byte_counter: Some(1000),
                ..hpcc()
            };
            let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
            rp.on_cnp(us(0));
            rp.handle_timeout(us(4));
            rp.on_bytes_sent(1000);
            let before = rp.rate_bps();
            rp.on_cnp(us(5));
            rp.handle_timeout(us(8));
            assert_eq!(
                rp.target_bps() == before,
                clamped,
                "after_timer {after_timer}"
            );
        }
    }

    #[test]
    fn min_decrease_factor_bounds_one_cut() {
        let p = DcqcnParams {
            min_decrease_factor: 0.8,
            ..hpcc()
        };
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        rp.on_cnp(us(0));
        rp.handle_timeout(us(4));
        assert!(close(rp.rate_bps(), 0.8 * LINE), "alpha ~1 would halve it");
    }

    #[test]
    fn rate_on_first_cnp_sets_rate_and_target() {
        let p = DcqcnParams {
            rate_on_first_cnp_bps: Some(25e9),
            ..hpcc()
        };
        let mut rp = ReactionPoint::new(p, LINE, SimTime::ZERO);
        rp.on_cnp(us(0));
        assert_eq!((rp.rate_bps(), rp.target_bps()), (25e9, 25e9));
    }

    /// Lazy timers give the rates eager ones do: one reaction point asked every 0.5 us,
    /// one only when a CNP or bytes come, over the same inputs (NVIDIA preset, with its
    /// byte counter).
    #[test]
    fn lazy_timers_match_eager_ones() {
        let p = Preset::Nvidia.params(LINE);
        let mut eager = ReactionPoint::new(p, LINE, SimTime::ZERO);
        let mut lazy = ReactionPoint::new(p, LINE, SimTime::ZERO);
        let cnps = [3u64, 5, 6, 30, 31, 400, 401, 402, 1_500];
        let mut half_us = 0u64;
        while half_us <= 4_000 {
            let t = SimTime(half_us * 500_000);
            eager.handle_timeout(t);
            if half_us % 2 == 0 && cnps.contains(&(half_us / 2)) {
                eager.on_cnp(t);
                lazy.handle_timeout(t);
                lazy.on_cnp(t);
            }
            if half_us % 7 == 0 {
                eager.on_bytes_sent(6_000);
                lazy.handle_timeout(t);
                lazy.on_bytes_sent(6_000);
            }
            half_us += 1;
        }
        lazy.handle_timeout(us(2_000));
        assert!(close(eager.rate_bps(), lazy.rate_bps()));
        assert!(close(eager.target_bps(), lazy.target_bps()));
        assert!((eager.alpha() - lazy.alpha()).abs() < 1e-12);
        assert_eq!(eager.stats, lazy.stats);
        assert!(eager.stats.rate_cuts >= 4, "{:?}", eager.stats);
    }

    #[test]
    fn rates_stay_between_min_and_line() {
        let p = Preset::Paper.params(LINE);
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

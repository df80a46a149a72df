//! Interrupt moderation on a completion queue, as a sans-IO state machine.
//!
//! Models the NIC's event moderation (mlx5e "CQ moderation", ethtool `rx-usecs` /
//! `rx-frames`): after a completion arrives on an armed CQ, the interrupt fires `usecs`
//! after the first pending completion or as soon as `frames` completions are pending,
//! whichever comes first (design reference, "NIC, host and GPU": mlx5e defaults 16 us /
//! 32 completions). Adaptive moderation steps between levels like Linux's DIM
//! (`lib/dim/net_dim.c`, the CQE-based profile: (2 us, 256), (8, 128), (16, 64), (32, 64),
//! (64, 64)): every `window` interrupts it looks at the completion rate and moves one
//! level up (more moderation) when the rate rose by more than 10%, one level down when it
//! fell by more than 10%, and stays otherwise; at the lowest level it stops stepping down
//! and at the highest it stops stepping up. That is DIM's "better or worse than last
//! time" walk reduced to its rate signal; it leaves out DIM's tie-breaking on bytes and
//! its parking states.
//!
//! The moderator takes `on_completion(now)` and `handle_timeout(now)` and answers with the
//! interrupt, if one fires; `next_timeout()` says when it must be called next.

use crate::units::{SimDuration, SimTime};

/// One moderation level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moderation {
    /// Fire this long after the first pending completion.
    pub usecs: SimDuration,
    /// Fire at this many pending completions.
    pub frames: u32,
}

impl Moderation {
    /// mlx5e's default: 16 us / 32 completions.
    pub const MLX5E_DEFAULT: Moderation = Moderation {
        usecs: SimDuration(16_000_000),
        frames: 32,
    };
}

/// Linux DIM's CQE-based profile for receive moderation (`net_dim.c`).
pub const DIM_LEVELS: [Moderation; 5] = [
    Moderation {
        usecs: SimDuration(2_000_000),
        frames: 256,
    },
    Moderation {
        usecs: SimDuration(8_000_000),
        frames: 128,
    },
    Moderation {
        usecs: SimDuration(16_000_000),
        frames: 64,
    },
    Moderation {
        usecs: SimDuration(32_000_000),
        frames: 64,
    },
    Moderation {
        usecs: SimDuration(64_000_000),
        frames: 64,
    },
];

/// An interrupt: when, and how many completions it reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interrupt {
    pub at: SimTime,
    pub completions: u32,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModeratorStats {
    pub completions: u64,
    pub interrupts: u64,
    pub level_changes: u64,
}

/// The moderator of one completion queue.
#[derive(Clone, Debug)]
pub struct InterruptModerator {
    levels: Vec<Moderation>,
    level: usize,
    adaptive: bool,
    /// Interrupts between adaptive decisions.
    window: u32,
    pending: u32,
    first_pending: Option<SimTime>,
    // adaptive bookkeeping
    window_start: SimTime,
    window_irqs: u32,
    window_completions: u64,
    last_rate: Option<f64>,
    pub stats: ModeratorStats,
}

impl InterruptModerator {
    /// Fixed moderation.
    pub fn fixed(m: Moderation) -> InterruptModerator {
        InterruptModerator::new(vec![m], 0, false)
    }

    /// DIM-like adaptive moderation over `levels`, starting at `start`.
    pub fn adaptive(levels: Vec<Moderation>, start: usize) -> InterruptModerator {
        let start = start.min(levels.len().saturating_sub(1));
        InterruptModerator::new(levels, start, true)
    }

    fn new(levels: Vec<Moderation>, level: usize, adaptive: bool) -> InterruptModerator {
        assert!(!levels.is_empty(), "at least one moderation level");
        InterruptModerator {
            levels,
            level,
            adaptive,
            window: 16,
            pending: 0,
            first_pending: None,
            window_start: SimTime::ZERO,
            window_irqs: 0,
            window_completions: 0,
            last_rate: None,
            stats: ModeratorStats::default(),
        }
    }

    /// The moderation in force.
    pub fn current(&self) -> Moderation {
        self.levels[self.level]
    }

    pub fn level(&self) -> usize {
        self.level
    }

    /// A completion was written to the CQ.
    pub fn on_completion(&mut self, now: SimTime) -> Option<Interrupt> {
        self.stats.completions += 1;
        self.window_completions += 1;
        self.pending += 1;
        self.first_pending.get_or_insert(now);
        if self.pending >= self.current().frames.max(1) {
            return Some(self.fire(now));
        }
        None
    }

    /// When the moderator next needs `handle_timeout`.
    pub fn next_timeout(&self) -> Option<SimTime> {
        self.first_pending.map(|t| t + self.current().usecs)
    }

    /// The usecs timer may have expired.
    pub fn handle_timeout(&mut self, now: SimTime) -> Option<Interrupt> {
        match self.next_timeout() {
            Some(t) if t <= now && self.pending > 0 => Some(self.fire(now)),
            _ => None,
        }
    }

    fn fire(&mut self, now: SimTime) -> Interrupt {
        let irq = Interrupt {
            at: now,
            completions: self.pending,
        };
        self.pending = 0;
        self.first_pending = None;
        self.stats.interrupts += 1;
        if self.adaptive {
            self.window_irqs += 1;
            if self.window_irqs >= self.window {
                self.adapt(now);
            }
        }
        irq
    }

    /// DIM's walk on the completion rate: up when it rose, down when it fell.
    fn adapt(&mut self, now: SimTime) {
        let span = now.since(self.window_start).as_secs_f64();
        if span > 0.0 {
            let rate = self.window_completions as f64 / span;
            if let Some(last) = self.last_rate {
                let before = self.level;
                if rate > 1.1 * last && self.level + 1 < self.levels.len() {
                    self.level += 1;
                } else if rate < 0.9 * last && self.level > 0 {
                    self.level -= 1;
                }
                if self.level != before {
                    self.stats.level_changes += 1;
                }
            }
            self.last_rate = Some(rate);
        }
        self.window_start = now;
        self.window_irqs = 0;
        self.window_completions = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `n` completions every `gap` from `t`, firing due timers before each (a timer
    /// and a completion at the same instant: the timer first). Returns the time after.
    fn drive(m: &mut InterruptModerator, mut t: SimTime, gap: SimDuration, n: u64) -> SimTime {
        for _ in 0..n {
            while let Some(due) = m.next_timeout().filter(|&d| d <= t) {
                m.handle_timeout(due);
            }
            m.on_completion(t);
            t += gap;
        }
        t
    }

    /// Interrupts per second for `n` periodic completions every `gap`.
    fn rate(m: &mut InterruptModerator, gap: SimDuration, n: u64) -> f64 {
        drive(m, SimTime::ZERO, gap, n);
        if let Some(due) = m.next_timeout() {
            m.handle_timeout(due);
        }
        m.stats.interrupts as f64 / (n as f64 * gap.as_secs_f64())
    }

    #[test]
    fn frames_bound_at_high_completion_rates() {
        // One completion every 100 ns (10 M/s): 32 of them arrive within 3.2 us, long
        // before 16 us: an interrupt every 32 completions, 312,500 per second.
        let mut m = InterruptModerator::fixed(Moderation::MLX5E_DEFAULT);
        let r = rate(&mut m, SimDuration::from_ns(100), 320_000);
        assert!((r / 312_500.0 - 1.0).abs() < 0.02, "{r}");
    }

    #[test]
    fn usecs_bound_at_moderate_rates() {
        // One completion every 1 us (1 M/s): 32 would take 31 us, so the 16 us timer
        // fires first, collecting the completions at 0, 1, ..., 15 us (the one at 16 us
        // comes after the timer at the same instant and opens the next batch): one
        // interrupt every 16 us, 62,500 per second = min(completion rate, what usecs and
        // frames allow).
        let mut m = InterruptModerator::fixed(Moderation::MLX5E_DEFAULT);
        let r = rate(&mut m, SimDuration::from_us(1), 100_000);
        assert!((r / 62_500.0 - 1.0).abs() < 0.02, "{r}");
    }

    #[test]
    fn sparse_completions_each_get_an_interrupt() {
        // One completion every 50 us (20 k/s), more than 16 us apart: one interrupt each.
        let mut m = InterruptModerator::fixed(Moderation::MLX5E_DEFAULT);
        let r = rate(&mut m, SimDuration::from_us(50), 10_000);
        assert!((r / 20_000.0 - 1.0).abs() < 0.02, "{r}");
    }

    #[test]
    fn the_timer_fires_usecs_after_the_first_pending_completion() {
        let mut m = InterruptModerator::fixed(Moderation::MLX5E_DEFAULT);
        assert_eq!(m.on_completion(SimTime(5)), None);
        assert_eq!(m.on_completion(SimTime(900)), None);
        assert_eq!(
            m.next_timeout(),
            Some(SimTime(5) + SimDuration::from_us(16))
        );
        assert_eq!(m.handle_timeout(SimTime(1000)), None, "not yet");
        let irq = m
            .handle_timeout(SimTime(5) + SimDuration::from_us(16))
            .unwrap();
        assert_eq!(irq.completions, 2);
        assert_eq!(m.next_timeout(), None);
    }

    #[test]
    fn adaptive_moderation_steps_up_when_the_rate_climbs_and_down_when_it_falls() {
        let mut m = InterruptModerator::adaptive(DIM_LEVELS.to_vec(), 0);
        let mut t = SimTime::ZERO;
        // A rising completion rate: the gap halves every 2000 completions.
        let mut gap = 8_000_000u64;
        for _ in 0..8 {
            t = drive(&mut m, t, SimDuration(gap), 2000);
            gap /= 2;
        }
        let high = m.level();
        assert!(high >= 3, "climbed to level {high}");
        // Then a falling rate.
        for _ in 0..8 {
            gap *= 2;
            t = drive(&mut m, t, SimDuration(gap), 2000);
        }
        assert!(
            m.level() < high,
            "stepped down from {high} to {}",
            m.level()
        );
        assert!(m.stats.level_changes >= 2);
    }
}

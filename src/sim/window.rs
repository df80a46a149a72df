//! What the partitions of a split run (`parallel`) do between windows: meet at a
//! barrier that spins before it sleeps ([`WindowBarrier`]), and merge their logs of the
//! packets in flight into the run's peak ([`Flight`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The barrier the partitions meet at, twice a window: a thread that arrives first spins
/// a while, then sleeps until the last one arrives. A window is often shorter than a
/// sleeping thread takes to wake, and a late thread's wake-up makes the next meeting
/// late too: websearch-128 meets 34 thousand times, and with std's `Barrier` (which
/// sleeps at once) its two partitions waited 3.2 s each of a 9.2 s run, against 0.3 s
/// spinning. Each thread adapts how long it spins (`wait`'s `budget`, in nanoseconds):
/// it halves, to no less than `SPIN_FLOOR`, after a spin that ended asleep (a thread
/// was not running: the machine is busy with other work) and doubles, up to `SPIN_MOST`,
/// after one that did not; with more threads than cores it never spins.
pub(super) struct WindowBarrier {
    n: usize,
    /// Threads arrived at the current meeting.
    arrived: AtomicUsize,
    /// Meetings completed so far; a waiter leaves when it moves.
    meetings: AtomicUsize,
    /// Threads asleep (or about to be) on `woken`: the last to arrive wakes them.
    sleepers: AtomicUsize,
    /// A thread panicked: no meeting will complete, every wait returns false.
    broken: AtomicBool,
    lock: Mutex<()>,
    woken: Condvar,
}

/// The longest and the shortest spin before a waiting thread sleeps, nanoseconds.
const SPIN_MOST: u32 = 1_000_000;
const SPIN_FLOOR: u32 = 50_000;

impl WindowBarrier {
    pub(super) fn new(n: usize) -> Self {
        WindowBarrier {
            n,
            arrived: AtomicUsize::new(0),
            meetings: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            broken: AtomicBool::new(false),
            lock: Mutex::new(()),
            woken: Condvar::new(),
        }
    }

    /// The spin budget a thread starts with: none when the threads outnumber the cores.
    pub(super) fn first_budget(&self) -> u32 {
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        if self.n <= cores {
            SPIN_MOST
        } else {
            0
        }
    }

    /// A thread panicked: the waiting threads leave, and every later wait returns at
    /// once.
    fn break_all(&self) {
        self.broken.store(true, Ordering::SeqCst);
        let _held = lock(&self.lock);
        self.woken.notify_all();
    }

    /// Returns true once all `n` threads have called it (for this meeting); what each
    /// wrote before is seen by all after. False if the barrier was broken (a thread
    /// panicked). `budget`: how long this thread spins before it sleeps, nanoseconds
    /// (0: it never spins).
    pub(super) fn wait(&self, budget: &mut u32) -> bool {
        let meeting = self.meetings.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.meetings
                .store(meeting.wrapping_add(1), Ordering::SeqCst);
            // A sleeper counts itself before it looks at `meetings` (both in one total
            // order), so either it sees the move or it is seen here; it looks and sleeps
            // under the lock, so the wake-up cannot come between the two.
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                let _held = lock(&self.lock);
                self.woken.notify_all();
            }
            return !self.broken.load(Ordering::SeqCst);
        }
        if *budget > 0 {
            let start = std::time::Instant::now();
            let most = std::time::Duration::from_nanos(*budget as u64);
            loop {
                for _ in 0..64 {
                    if self.meetings.load(Ordering::Acquire) != meeting {
                        *budget = budget.saturating_mul(2).min(SPIN_MOST);
                        return !self.broken.load(Ordering::SeqCst);
                    }
                    std::hint::spin_loop();
                }
                if start.elapsed() >= most || self.broken.load(Ordering::SeqCst) {
                    break;
                }
            }
            *budget = (*budget / 2).max(SPIN_FLOOR);
        }
        let mut held = lock(&self.lock);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while self.meetings.load(Ordering::SeqCst) == meeting && !self.broken.load(Ordering::SeqCst)
        {
            held = self.woken.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        !self.broken.load(Ordering::SeqCst)
    }
}

/// Breaks the barrier if its thread unwinds (a panic in a partition).
pub(super) struct BreakOnPanic<'a>(pub(super) &'a WindowBarrier);

impl Drop for BreakOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.break_all();
        }
    }
}

/// The packets in flight across partitions: the running count and its peak, from the
/// partitions' logs of one window merged in key order.
#[derive(Default)]
pub(super) struct Flight {
    alive: i64,
    pub(super) peak: i64,
}

impl Flight {
    /// Takes one window's logs, each in key order (a partition handles its events in
    /// that order): merged by key, in one pass (before: a sort of all of them, on the
    /// first partition's thread while the others waited at the barrier).
    pub(super) fn fold(&mut self, logs: &mut [&mut Vec<(u128, i64, i64)>]) {
        debug_assert!(logs.iter().all(|l| l.windows(2).all(|w| w[0].0 < w[1].0)));
        let mut at = vec![0usize; logs.len()];
        loop {
            let mut next: Option<(usize, u128)> = None;
            for (i, l) in logs.iter().enumerate() {
                if let Some(e) = l.get(at[i]) {
                    if next.map_or(true, |(_, k)| e.0 < k) {
                        next = Some((i, e.0));
                    }
                }
            }
            let Some((i, _)) = next else { break };
            let (_, change, rise) = logs[i][at[i]];
            at[i] += 1;
            self.peak = self.peak.max(self.alive + rise);
            self.alive += change;
        }
        for l in logs.iter_mut() {
            l.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The peak of packets in flight across partitions is the peak of their sum in key
    /// order, rises within an event included, not the sum of each one's peak.
    #[test]
    fn the_peak_in_flight_follows_the_merged_order() {
        let mut f = Flight::default();
        // Partition 0 makes 3 packets at key 1 and frees them at key 4; partition 1
        // makes 2 at key 2, and at key 3 makes one and frees two (it rose by 1 within).
        let mut logs = [vec![(1, 3, 3), (4, -3, 0)], vec![(2, 2, 2), (3, -1, 1)]];
        f.fold(&mut logs.iter_mut().collect::<Vec<_>>());
        assert_eq!((f.alive, f.peak), (1, 6));
        assert!(logs.iter().all(Vec::is_empty));
        // The next window starts from what is alive.
        let mut logs = [vec![(5, 2, 2)], vec![]];
        f.fold(&mut logs.iter_mut().collect::<Vec<_>>());
        assert_eq!((f.alive, f.peak), (3, 6));
        let mut logs = [vec![(6, 5, 5)], vec![(7, -8, 0)]];
        f.fold(&mut logs.iter_mut().collect::<Vec<_>>());
        assert_eq!((f.alive, f.peak), (0, 8));
    }

    /// `f(i, barrier, budget)` on `threads` threads meeting at one barrier, each with a
    /// spin budget of `first` and the barrier broken if it panics; what each returned.
    fn meeting<T: Send>(
        threads: usize,
        first: u32,
        f: impl Fn(usize, &WindowBarrier, &mut u32) -> T + Sync,
    ) -> Vec<std::thread::Result<T>> {
        let b = WindowBarrier::new(threads);
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|i| {
                    let (b, f) = (&b, &f);
                    s.spawn(move || {
                        let _breaks = BreakOnPanic(b);
                        let mut budget = first;
                        f(i, b, &mut budget)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join()).collect()
        })
    }

    /// The window barrier lets no thread past a meeting before all have arrived, and
    /// what each wrote before it is seen after it: spinning (budget left), sleeping
    /// (budget 0) and with more threads than this machine has cores.
    #[test]
    fn the_window_barrier_holds_every_thread_until_all_arrive() {
        for (threads, first) in [(2, SPIN_MOST), (3, 0), (3, SPIN_MOST), (5, SPIN_FLOOR)] {
            let count = AtomicUsize::new(0);
            let got = meeting(threads, first, |_, b, budget| {
                for meeting in 0..500 {
                    count.fetch_add(1, Ordering::Relaxed);
                    assert!(b.wait(budget));
                    assert_eq!(count.load(Ordering::Relaxed), (meeting + 1) * threads);
                    assert!(b.wait(budget));
                    assert!(*budget == 0 || (SPIN_FLOOR..=SPIN_MOST).contains(budget));
                }
            });
            assert!(got.iter().all(|g| g.is_ok()));
            assert_eq!(count.into_inner(), 500 * threads);
        }
    }

    /// A thread that panics breaks the barrier: the others leave their wait (spinning
    /// or asleep) instead of waiting for it for ever. Run 20 times for the races.
    #[test]
    fn a_panicking_thread_breaks_the_window_barrier() {
        for first in [0, SPIN_MOST].repeat(10) {
            let got = meeting(3, first, |i, b, budget| {
                let mut met = 0;
                while b.wait(budget) {
                    met += 1;
                    if i == 0 && met == 10 {
                        panic!("partition 0 fails on purpose");
                    }
                }
                met
            });
            assert!(got[0].is_err());
            // They leave: at the meeting the panic followed (a thread that woke from it
            // after the break is told false) or at the next.
            for g in &got[1..] {
                assert!(matches!(g.as_ref().ok(), Some(9 | 10)), "{g:?}");
            }
        }
    }
}

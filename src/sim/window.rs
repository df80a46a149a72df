//! What the partitions of a split run (`parallel`) do between windows: meet at a
//! barrier that spins before it sleeps ([`WindowBarrier`]), and merge their logs of the
//! packets in flight into the run's peak ([`Flight`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The barrier the partitions meet at, once a window (twice until stop 44): a thread
/// that arrives first spins a while, then sleeps until the last one arrives. A window is
/// often shorter than a sleeping thread takes to wake, and a late thread's wake-up makes
/// the next meeting late too: websearch-128 met 34 thousand times, and with std's
/// `Barrier` (which sleeps at once) its two partitions waited 3.2 s each of a 9.2 s run,
/// against 0.3 s spinning. Each thread adapts how long it spins (`wait`'s `budget`, in
/// nanoseconds): it halves, to no less than `SPIN_FLOOR`, after a spin that ended asleep
/// (a thread was not running: the machine is busy with other work) and doubles, up to
/// `SPIN_MOST`, after one that did not; with more threads than cores it never spins.
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

/// One partition's changes to the packets alive in one window: per event that changed
/// them, its key, the change and the most they rose within it; with the window's whole
/// change and the most its running sum rose above where it started (`top`, at least 0),
/// kept as entries are added so that a window that cannot raise the peak is not merged
/// ([`Flight::fold`]).
#[derive(Debug, Default)]
pub(super) struct PoolLog {
    entries: Vec<(u128, i64, i64)>,
    change: i64,
    top: i64,
}

impl PoolLog {
    /// The event with key `key` changed the packets alive by `change`, after rising by
    /// `rise` within it (keys in increasing order).
    #[inline]
    pub(super) fn push(&mut self, key: u128, change: i64, rise: i64) {
        debug_assert!(self.entries.last().map_or(true, |e| e.0 < key));
        self.entries.push((key, change, rise));
        self.top = self.top.max(self.change + rise);
        self.change += change;
    }

    /// Moves `later`'s entries (all after this log's) to the end of this one.
    pub(super) fn append(&mut self, later: &mut PoolLog) {
        self.entries.append(&mut later.entries);
        self.top = self.top.max(self.change + later.top);
        self.change += later.change;
        (later.change, later.top) = (0, 0);
    }

    /// No entries, and nothing to count.
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.change == 0 && self.top == 0
    }

    fn clear(&mut self) {
        self.entries.clear();
        (self.change, self.top) = (0, 0);
    }
}

/// The packets in flight across partitions: the running count and its peak, from the
/// partitions' logs of one window merged in key order.
#[derive(Default)]
pub(super) struct Flight {
    alive: i64,
    pub(super) peak: i64,
    /// Windows merged entry by entry (the others could not raise the peak).
    merged: u64,
}

impl Flight {
    /// Takes one window's logs, each in key order (a partition handles its events in
    /// that order): merged by key, in one pass (before: a sort of all of them, on the
    /// first partition's thread while the others waited at the barrier). A window whose
    /// logs cannot together rise above the peak is not merged: at any point of the
    /// merged order each log has risen by at most its `top` above where the window
    /// began, so the count never passes `alive` plus the sum of the tops, and the
    /// window only moves `alive` (websearch-128: with every window merged, the merge
    /// took 69 ms of a 3 s split run on the first partition's thread, measured when the
    /// partitions met twice a window and the other waited for it; 21 ms after).
    pub(super) fn fold(&mut self, logs: &mut [&mut PoolLog]) {
        debug_assert!(logs
            .iter()
            .all(|l| l.entries.windows(2).all(|w| w[0].0 < w[1].0)));
        let bound: i64 = logs.iter().map(|l| l.top).sum();
        if self.alive + bound <= self.peak {
            self.alive += logs.iter().map(|l| l.change).sum::<i64>();
        } else {
            self.merged += 1;
            let mut at = vec![0usize; logs.len()];
            loop {
                let mut next: Option<(usize, u128)> = None;
                for (i, l) in logs.iter().enumerate() {
                    if let Some(e) = l.entries.get(at[i]) {
                        if next.map_or(true, |(_, k)| e.0 < k) {
                            next = Some((i, e.0));
                        }
                    }
                }
                let Some((i, _)) = next else { break };
                let (_, change, rise) = logs[i].entries[at[i]];
                at[i] += 1;
                self.peak = self.peak.max(self.alive + rise);
                self.alive += change;
            }
        }
        for l in logs.iter_mut() {
            l.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(entries: &[(u128, i64, i64)]) -> PoolLog {
        let mut l = PoolLog::default();
        for &(key, change, rise) in entries {
            l.push(key, change, rise);
        }
        l
    }

    /// The peak of packets in flight across partitions is the peak of their sum in key
    /// order, rises within an event included, not the sum of each one's peak.
    #[test]
    fn the_peak_in_flight_follows_the_merged_order() {
        let mut f = Flight::default();
        // Partition 0 makes 3 packets at key 1 and frees them at key 4; partition 1
        // makes 2 at key 2, and at key 3 makes one and frees two (it rose by 1 within).
        let mut logs = [log(&[(1, 3, 3), (4, -3, 0)]), log(&[(2, 2, 2), (3, -1, 1)])];
        f.fold(&mut logs.iter_mut().collect::<Vec<_>>());
        assert_eq!((f.alive, f.peak), (1, 6));
        assert!(logs.iter().all(|l| l.entries.is_empty() && l.top == 0));
        // The next window starts from what is alive.
        let mut logs = [log(&[(5, 2, 2)]), log(&[])];
        f.fold(&mut logs.iter_mut().collect::<Vec<_>>());
        assert_eq!((f.alive, f.peak), (3, 6));
        let mut logs = [log(&[(6, 5, 5)]), log(&[(7, -8, 0)])];
        f.fold(&mut logs.iter_mut().collect::<Vec<_>>());
        assert_eq!((f.alive, f.peak), (0, 8));
        // The second window (alive 1, tops 2 and 0, below the peak of 6) was only
        // counted; the first and third were merged.
        assert_eq!(f.merged, 2);
        // Tops 5 and 4 over 0 alive could pass 8 if both logs peaked together: merged,
        // and they do not (partition 0 is back to 0 before partition 1 rises).
        let mut logs = [log(&[(8, 5, 5), (9, -5, 0)]), log(&[(10, 4, 4)])];
        f.fold(&mut logs.iter_mut().collect::<Vec<_>>());
        assert_eq!((f.alive, f.peak, f.merged), (4, 8, 3));
        // Tops 1 and 2 over 4 alive cannot pass 8: only counted.
        let mut logs = [
            log(&[(11, 1, 1), (12, -1, 0)]),
            log(&[(13, 2, 2), (14, -2, 0)]),
        ];
        f.fold(&mut logs.iter_mut().collect::<Vec<_>>());
        assert_eq!((f.alive, f.peak, f.merged), (4, 8, 3));
    }

    /// Windows skipped by the bound end where merging every one ends: random logs of
    /// 2-3 partitions over 3,000 windows, against a merge of all of them in key order;
    /// most windows are skipped, and a log appended to another keeps its bound.
    #[test]
    fn skipped_windows_leave_the_same_peak() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for parts in [2usize, 3] {
            let (mut f, mut alive, mut peak) = (Flight::default(), 0i64, 0i64);
            let mut key = 0u128;
            let windows = 3_000;
            for _ in 0..windows {
                let mut all = Vec::new();
                let mut logs: Vec<PoolLog> = (0..parts).map(|_| PoolLog::default()).collect();
                for _ in 0..rand(12) {
                    key += 1 + rand(3) as u128;
                    // A change of -3..=3 that never takes the count below zero, and a
                    // rise within the event of at least the change and zero.
                    let change = (rand(7) as i64 - 3).max(-alive);
                    let rise = change.max(0) + rand(2) as i64;
                    let p = rand(parts as u64) as usize;
                    // Half the time a log is built in two parts and appended.
                    if rand(2) == 0 {
                        let mut later = PoolLog::default();
                        later.push(key, change, rise);
                        logs[p].append(&mut later);
                    } else {
                        logs[p].push(key, change, rise);
                    }
                    all.push((key, change, rise));
                    peak = peak.max(alive + rise);
                    alive += change;
                }
                f.fold(&mut logs.iter_mut().collect::<Vec<_>>());
                assert_eq!((f.alive, f.peak), (alive, peak), "{parts} partitions");
            }
            assert!(
                f.merged < windows / 2,
                "{parts} partitions: {} of {windows} windows merged",
                f.merged
            );
        }
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

//! IB credits in a run split over threads (`parallel`): a switch port whose credits come
//! back from another partition logs what each of its events did to its credit
//! bookkeeping, and the barrier replays the log against the returns in key order,
//! scheduling the wake-ups one thread would have (see `Sim::reconcile_credits`).

use super::{Part, DIVERGED};
use crate::engine::{Event, PortId};
use crate::sim::Sim;
use crate::units::SimTime;

/// What an event did to a port's credit bookkeeping (IB, a run split over threads):
/// credits landed, whether it then waited for credit, whether it asked for a wake-up
/// and under which key one was scheduled.
#[derive(Debug, Clone, Copy)]
pub(super) struct CreditStep {
    key: u128,
    landed: u32,
    stalled: bool,
    asked: bool,
    got: Option<u128>,
}

impl Part {
    /// Whether `port`'s credit bookkeeping is logged (its credits come back from
    /// another partition).
    #[inline]
    pub fn logs_credits(&self, port: PortId) -> bool {
        self.credit_cross.get(port)
    }
}

/// A port's credit state before its first logged event of the window: whether it
/// waited for credit, whether a wake-up was scheduled, and its returns' keys
/// (`CreditLogs::keys[first..first + len]`).
#[derive(Debug, Clone, Copy)]
pub(super) struct CreditStart {
    stalled: bool,
    credit_wake: bool,
    first: u32,
    len: u32,
}

/// The window's logs of the ports whose credits come back from another partition, by
/// port (no hashing, no sort: until stop 58 a map and a sort of the steps by port
/// were 2% of a split ring's instructions): each touched port's state before the
/// window and its steps in key order; the ports touched, to clear at the barrier.
#[derive(Debug, Default)]
pub(super) struct CreditLogs {
    start: Vec<Option<CreditStart>>,
    steps: Vec<Vec<CreditStep>>,
    touched: Vec<PortId>,
    keys: Vec<u128>,
}

/// `reconcile_credits`' working lists, kept from one meeting to the next.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    old: Vec<u128>,
    new: Vec<u128>,
    one: Vec<u128>,
    mine: Vec<u128>,
}

impl Sim {
    /// `try_start` on a switch port whose credits come back from another partition:
    /// the same, and what it did to the port's credit bookkeeping is logged for the
    /// barrier (`reconcile_credits`).
    pub(in crate::sim) fn try_start_logged(&mut self, now: SimTime, port: PortId) {
        let key = self.q.current_key();
        let p = &mut self.ports[port as usize];
        let part = self.part.as_deref_mut().expect("a partition");
        let (stalled, credit_wake, keys) = p.credit_state();
        let before = keys.len();
        drop(keys);
        let logs = &mut part.credit_logs;
        let i = port as usize;
        if logs.start.len() <= i {
            logs.start.resize(i + 1, None);
            logs.steps.resize_with(i + 1, Vec::new);
        }
        if logs.start[i].is_none() {
            let first = logs.keys.len() as u32;
            logs.keys.extend(p.credit_state().2);
            logs.start[i] = Some(CreditStart {
                stalled,
                credit_wake,
                first,
                len: before as u32,
            });
            logs.touched.push(port);
        }
        p.land_credits(key);
        let landed = (before - p.credit_state().2.len()) as u32;
        let polled = p.poll_transmit(now);
        let (asked, got) = match polled {
            Err(None) => (true, p.credit_wake_due()),
            _ => (false, None),
        };
        let stalled = p.credit_state().0;
        logs.steps[i].push(CreditStep {
            key,
            landed,
            stalled,
            asked,
            got,
        });
        self.after_poll(port, polled, got);
    }

    /// At a barrier, IB: the credits the other partitions let go in the last window
    /// join their ports' returns, and each port's wake-ups become those one thread
    /// would have scheduled. One thread decides a wake-up as each return is let go (if
    /// the port waits for credit and none is scheduled) and each time the port finds too
    /// little credit (under the first return's key), so the port's log and the returns
    /// are replayed in key order: a wake-up one thread would have scheduled and this
    /// partition did not is scheduled now (its key is past the window: returns land a
    /// link's latency after they are let go); one due inside the window, or one this
    /// partition scheduled and one thread would not have, cannot be mended, and the run
    /// goes again on one thread.
    pub(super) fn reconcile_credits(&mut self) {
        let part = self.part.as_deref_mut().expect("a partition");
        let mut returns = std::mem::take(&mut part.returns);
        // By port, each port's in the order they were let go (one partition sends them).
        returns.sort_by_key(|r| r.0);
        let mut logs = std::mem::take(&mut part.credit_logs);
        let mut sc = std::mem::take(&mut part.credit_scratch);
        let window_end = part.window_end;
        let mut i = 0;
        while i < returns.len() {
            let port = returns[i].0;
            let mut j = i;
            while j < returns.len() && returns[j].0 == port {
                j += 1;
            }
            sc.old.clear();
            let (mut stalled, mut cw) = match logs.start.get(port as usize).copied().flatten() {
                Some(b) => {
                    let keys = &logs.keys[b.first as usize..(b.first + b.len) as usize];
                    sc.old.extend_from_slice(keys);
                    (b.stalled, b.credit_wake)
                }
                None => {
                    let (s, c, keys) = self.ports[port as usize].credit_state();
                    sc.old.extend(keys);
                    (s, c)
                }
            };
            // `old` is taken from the front: `popped` of it are gone.
            let mut popped = 0;
            sc.new.clear();
            sc.one.clear();
            sc.mine.clear();
            let steps: &[CreditStep] = logs.steps.get(port as usize).map_or(&[], |v| v);
            let mut own = steps.iter().peekable();
            let mut pushes = returns[i..j].iter().peekable();
            loop {
                let step_first = match (own.peek(), pushes.peek()) {
                    (Some(s), Some(r)) => s.key < r.1,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                let front = |popped: usize, old: &[u128], new: &[u128]| {
                    old.get(popped).or(new.first()).copied()
                };
                if step_first {
                    let s = own.next().expect("peeked");
                    popped = (popped + s.landed as usize).min(sc.old.len());
                    if s.landed > 0 {
                        cw = false;
                    }
                    stalled = s.stalled;
                    if s.asked && stalled && !cw {
                        if let Some(f) = front(popped, &sc.old, &sc.new) {
                            sc.one.push(f);
                            cw = true;
                        }
                    }
                    sc.mine.extend(s.got);
                } else {
                    let r = pushes.next().expect("peeked");
                    sc.new.push(r.2);
                    if stalled && !cw {
                        let f = front(popped, &sc.old, &sc.new).expect("a return");
                        sc.one.push(f);
                        cw = true;
                    }
                }
            }
            for &k in &sc.one {
                if sc.mine.contains(&k) {
                    continue;
                }
                if (k >> 64) as u64 >= window_end.0 {
                    self.q
                        .schedule_reserved(k, Event::Credit { port, blocks: 0 });
                } else {
                    let part = self.part.as_deref_mut().expect("a partition");
                    part.diverged.get_or_insert(DIVERGED);
                }
            }
            if sc.mine.iter().any(|k| !sc.one.contains(k)) {
                let part = self.part.as_deref_mut().expect("a partition");
                part.diverged.get_or_insert(DIVERGED);
            }
            for &(_, _, key, blocks) in &returns[i..j] {
                self.ports[port as usize].credits_returning_as(key, blocks, cw);
            }
            i = j;
        }
        // Every list back, emptied, with its allocation.
        for &p in &logs.touched {
            logs.start[p as usize] = None;
            logs.steps[p as usize].clear();
        }
        logs.touched.clear();
        logs.keys.clear();
        returns.clear();
        let part = self.part.as_deref_mut().expect("a partition");
        (part.returns, part.credit_logs, part.credit_scratch) = (returns, logs, sc);
    }
}

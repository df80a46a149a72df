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
    port: PortId,
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
        self.credit_cross
            .get(port as usize)
            .copied()
            .unwrap_or(false)
    }
}

impl Sim {
    /// `try_start` on a switch port whose credits come back from another partition:
    /// the same, and what it did to the port's credit bookkeeping is logged for the
    /// barrier (`reconcile_credits`).
    pub(in crate::sim) fn try_start_logged(&mut self, now: SimTime, port: PortId) {
        let key = self.q.current_key();
        let p = &mut self.ports[port as usize];
        let part = self.part.as_deref_mut().expect("a partition");
        let (stalled, cw, keys) = p.credit_state();
        let before = keys.count();
        part.credit_start.entry(port).or_insert_with(|| {
            let (_, _, keys) = p.credit_state();
            (stalled, cw, keys.collect())
        });
        p.land_credits(key);
        let landed = (before - p.credit_state().2.count()) as u32;
        let polled = p.poll_transmit(now);
        let (asked, got) = match polled {
            Err(None) => (true, p.credit_wake_due()),
            _ => (false, None),
        };
        let stalled = p.credit_state().0;
        part.credit_steps.push(CreditStep {
            port,
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
        let steps = std::mem::take(&mut part.credit_steps);
        let mut start = std::mem::take(&mut part.credit_start);
        let window_end = part.window_end;
        let mut i = 0;
        while i < returns.len() {
            let port = returns[i].0;
            let mut j = i;
            while j < returns.len() && returns[j].0 == port {
                j += 1;
            }
            let (mut stalled, mut cw, old) = start.remove(&port).unwrap_or_else(|| {
                let (s, c, keys) = self.ports[port as usize].credit_state();
                (s, c, keys.collect())
            });
            let mut old: std::collections::VecDeque<u128> = old.into();
            let mut new: Vec<u128> = Vec::new();
            let (mut one, mut mine) = (Vec::new(), Vec::new());
            let mut own = steps.iter().filter(|s| s.port == port).peekable();
            let mut pushes = returns[i..j].iter().peekable();
            loop {
                let step_first = match (own.peek(), pushes.peek()) {
                    (Some(s), Some(r)) => s.key < r.1,
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (None, None) => break,
                };
                if step_first {
                    let s = own.next().expect("peeked");
                    for _ in 0..s.landed {
                        old.pop_front();
                    }
                    if s.landed > 0 {
                        cw = false;
                    }
                    stalled = s.stalled;
                    if s.asked && stalled && !cw {
                        if let Some(&front) = old.front().or(new.first()) {
                            one.push(front);
                            cw = true;
                        }
                    }
                    mine.extend(s.got);
                } else {
                    let r = pushes.next().expect("peeked");
                    new.push(r.2);
                    if stalled && !cw {
                        let front = *old.front().or(new.first()).expect("a return");
                        one.push(front);
                        cw = true;
                    }
                }
            }
            for &k in &one {
                if mine.contains(&k) {
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
            if mine.iter().any(|k| !one.contains(k)) {
                let part = self.part.as_deref_mut().expect("a partition");
                part.diverged.get_or_insert(DIVERGED);
            }
            for &(_, _, key, blocks) in &returns[i..j] {
                self.ports[port as usize].credits_returning_as(key, blocks, cw);
            }
            i = j;
        }
    }
}

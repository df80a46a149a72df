//! Out-of-order placement for RC: which packets of a queue pair's sequence space arrived
//! ahead of the first missing one, which message ends they carry, and since when a gap
//! has been open.
//!
//! Models what NICs built for adaptive routing do (NVIDIA documents that ConnectX HCAs
//! place RDMA WRITE data "out of order directly to memory" under InfiniBand adaptive
//! routing and on Spectrum-X Ethernet; IRN, Mittal et al., SIGCOMM 2018, §3 gives the
//! receiver a bitmap over the PSN window and a cumulative ACK): a packet ahead of the
//! expected one is placed at once and remembered here; the expected one, when it comes,
//! moves the in-order point past every packet already placed behind it, and the messages
//! whose last packet it passes complete, in order.
//!
//! Sequence numbers are 64-bit counts (the caller maps 24-bit PSNs onto them), so a long
//! transfer never confuses two laps of the PSN space. The window is one byte per
//! sequence number between the in-order point and the furthest packet placed: memory
//! follows what is in flight, never what already finished.
//!
//! Leaves out: a bound on the window below the PSN space's half (IBTA 9.7.1 already
//! rejects a PSN more than 2^23 ahead), and placement of READ requests ahead of order.

use crate::units::SimTime;
use std::collections::VecDeque;

/// The packets of one direction of a queue pair placed ahead of its in-order point.
#[derive(Clone, Debug, Default)]
pub struct ReorderBuffer {
    /// The first sequence number not yet received (the in-order point).
    next: u64,
    /// `placed[i]`: whether sequence `next + i` arrived (index 0 never has: it is the
    /// hole). Empty when nothing waits beyond the in-order point.
    placed: VecDeque<bool>,
    /// Message ends placed ahead: (sequence of the last packet, work request), by
    /// sequence.
    ends: VecDeque<(u64, u64)>,
    /// Since when the current hole at `next` has held packets up; `None` without one.
    gap_since: Option<SimTime>,
}

/// What placing a packet ahead of the in-order point did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// It had arrived before: nothing new.
    Duplicate,
    /// New data, placed. `new_hole`: the sequence numbers this packet showed missing for
    /// the first time (from the furthest placed so far to it), as (first, count).
    Ahead { new_hole: Option<(u64, u64)> },
}

impl ReorderBuffer {
    pub fn new(next: u64) -> ReorderBuffer {
        ReorderBuffer {
            next,
            ..ReorderBuffer::default()
        }
    }

    /// The first sequence number not yet received.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Whether anything waits beyond a hole.
    pub fn has_gap(&self) -> bool {
        !self.placed.is_empty()
    }

    /// Whether `seq` (ahead of the in-order point) was placed already.
    pub fn is_placed(&self, seq: u64) -> bool {
        seq < self.next
            || self
                .placed
                .get((seq - self.next) as usize)
                .copied()
                .unwrap_or(false)
    }

    /// Places `seq` (> the in-order point) at `now`; `end` is the work request whose
    /// last packet it is, if it is one.
    pub fn place(&mut self, now: SimTime, seq: u64, end: Option<u64>) -> Placed {
        debug_assert!(seq > self.next);
        if self.is_placed(seq) {
            return Placed::Duplicate;
        }
        let i = (seq - self.next) as usize;
        // Everything below `known_end` was either placed or already known missing.
        let known_end = self.next + self.placed.len() as u64;
        let new_hole = (seq > known_end).then(|| (known_end, seq - known_end));
        if i >= self.placed.len() {
            self.placed.resize(i + 1, false);
        }
        self.placed[i] = true;
        if let Some(wr) = end {
            let at = self.ends.partition_point(|&(s, _)| s < seq);
            self.ends.insert(at, (seq, wr));
        }
        self.gap_since.get_or_insert(now);
        Placed::Ahead { new_hole }
    }

    /// The in-order packet arrived at `now` and took `k` sequence numbers (a READ
    /// request takes its responses'): the in-order point moves past it and past every
    /// packet placed behind it. Returns how many placed packets it moved past; the work
    /// requests whose last packet it passed are pushed onto `done`, in order.
    pub fn advance(&mut self, now: SimTime, k: u64, done: &mut VecDeque<u64>) -> u64 {
        let passed = self.move_past(k, Some(done));
        // A new hole (or none) from now on.
        self.gap_since = self.has_gap().then_some(now);
        passed
    }

    fn move_past(&mut self, k: u64, mut done: Option<&mut VecDeque<u64>>) -> u64 {
        self.next += k;
        for _ in 0..k.min(self.placed.len() as u64) {
            self.placed.pop_front();
        }
        let mut passed = 0;
        while self.placed.front() == Some(&true) {
            self.placed.pop_front();
            self.next += 1;
            passed += 1;
        }
        while let Some(&(s, wr)) = self.ends.front() {
            if s >= self.next {
                break;
            }
            self.ends.pop_front();
            if let Some(d) = done.as_deref_mut() {
                d.push_back(wr);
            }
        }
        passed
    }

    /// Moves the in-order point to at least `seq` without receiving (the sender learnt
    /// by other means that everything before it arrived); what was placed below goes.
    /// The hole timer keeps running if a hole is left.
    pub fn skip_to(&mut self, seq: u64) {
        if seq > self.next {
            self.move_past(seq - self.next, None);
            if !self.has_gap() {
                self.gap_since = None;
            }
        }
    }

    /// A packet at `seq` (ahead of the in-order point) was seen but could not be placed
    /// (a READ request or a SEND's first packet overtaking others): it counts as
    /// missing, so the hole timer runs and asks for it again.
    pub fn mark_missing(&mut self, now: SimTime, seq: u64) {
        let i = (seq - self.next) as usize;
        if i >= self.placed.len() {
            self.placed.resize(i + 1, false);
        }
        self.gap_since.get_or_insert(now);
    }

    /// When the current hole will have held packets up for `timeout`.
    pub fn deadline(&self, timeout: crate::units::SimDuration) -> Option<SimTime> {
        self.gap_since.map(|t| t + timeout)
    }

    /// The hole timer fired at `now`: it starts again (a resend may be lost too).
    pub fn restart_gap_timer(&mut self, now: SimTime) {
        if self.has_gap() {
            self.gap_since = Some(now);
        }
    }

    /// The missing runs below the furthest placed packet, as (first, count), at most
    /// `max` of them, oldest first.
    pub fn holes(&self, max: usize) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut start: Option<usize> = None;
        for (i, &have) in self.placed.iter().enumerate() {
            match (have, start) {
                (false, None) => start = Some(i),
                (true, Some(s)) => {
                    out.push((self.next + s as u64, (i - s) as u64));
                    start = None;
                    if out.len() == max {
                        break;
                    }
                }
                _ => {}
            }
        }
        // A run open at the end: packets seen but not placed (`mark_missing`).
        if let (Some(s), true) = (start, out.len() < max) {
            out.push((self.next + s as u64, (self.placed.len() - s) as u64));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: SimTime = SimTime(0);

    #[test]
    fn packets_ahead_wait_for_the_hole_and_complete_their_messages_in_order() {
        let mut b = ReorderBuffer::new(0);
        // Message A is 0..=2 (work request 10), message B is 3..=4 (11); 0 is late.
        assert_eq!(
            b.place(T, 2, Some(10)),
            Placed::Ahead {
                new_hole: Some((0, 2))
            }
        );
        assert_eq!(
            b.place(T, 4, Some(11)),
            Placed::Ahead {
                new_hole: Some((3, 1))
            }
        );
        assert_eq!(b.place(T, 1, None), Placed::Ahead { new_hole: None });
        assert_eq!(b.place(T, 1, None), Placed::Duplicate);
        assert_eq!(b.holes(8), vec![(0, 1), (3, 1)]);
        let mut done = VecDeque::new();
        // 0 arrives: the in-order point passes 1 and 2; message A completes.
        assert_eq!(b.advance(T, 1, &mut done), 2);
        assert_eq!(b.next(), 3);
        assert_eq!(done, vec![10]);
        assert!(b.has_gap(), "4 waits for 3");
        assert_eq!(b.advance(T, 1, &mut done), 1);
        assert_eq!(done, vec![10, 11]);
        assert!(!b.has_gap());
        assert_eq!(b.next(), 5);
    }

    #[test]
    fn the_gap_timer_runs_from_the_hole_and_restarts_with_a_new_one() {
        let us = |x: u64| SimTime(x * 1_000_000);
        let to = crate::units::SimDuration::from_us(10);
        let mut b = ReorderBuffer::new(0);
        assert_eq!(b.deadline(to), None);
        b.place(us(1), 2, None);
        b.place(us(3), 3, None);
        assert_eq!(
            b.deadline(to),
            Some(us(11)),
            "from the first packet held up"
        );
        b.place(us(4), 5, None);
        let mut done = VecDeque::new();
        // 0 arrives at 5 us: the point moves to 1 (still a hole): a new hole, a new clock.
        b.advance(us(5), 1, &mut done);
        assert_eq!(b.deadline(to), Some(us(15)));
        b.skip_to(6);
        assert_eq!(b.deadline(to), None, "nothing left ahead");
        assert_eq!(b.next(), 6);
    }
}

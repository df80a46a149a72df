//! A collective run split over threads (`run --threads N`, issue 17; `sim::parallel`).
//!
//! Every partition keeps a copy of the run. A copy handles the ranks it owns, those on
//! its hosts: their sends (`issue`), their receives landing (`on_done`) and the
//! clear-to-sends that reach them. What it keeps of the others' ranks is never read.
//! The transfers a copy posts are numbered `fresh x parts + me` (or reuse one of its own
//! that landed), so that two partitions never give out the same number; a transfer that
//! lands at another partition's rank goes there with its record (`transfer`,
//! `put_transfer`) and its number comes back when it has landed (`drain_given_back`,
//! `give_back`).
//!
//! An iteration ends when every rank is done. A copy cannot know that alone: when its
//! own ranks are done it says when (`done_here`), and at the partitions' next meeting,
//! once every copy has said so, each ends the iteration at the latest of those times
//! (`end_iteration`), as one thread would have in that rank's last event. The next
//! launch is then scheduled from the meeting, under the key one thread gives it (the
//! run's own event source, `sim::Sources::run`).
//!
//! A tree (stop 59) is split the same way: its transfers are the graph's, numbered by
//! their place in it in every copy, so none is given out or given back; each copy counts
//! the dependencies of its own ranks' sends, which wait only for transfers landing at
//! those ranks (`dag::Dag::deps_land_at_sender`), and a transfer landing at another
//! copy's rank takes what it carries there with it (`transfer`, `put_transfer`).
//!
//! Leaves out: the other graph algorithms (hierarchical, whose leaders' ring waits for
//! what lands at the receiver; NVLSTree; in-network), which a split run does not take
//! (`sim::parallel::unsupported`).

use super::{CollectiveRun, Xfer};
use crate::units::SimTime;

/// What a partition's copy of a run owns.
#[derive(Clone, Debug)]
pub(super) struct Share {
    /// Per rank: whether this copy handles it.
    pub(super) owned: Vec<bool>,
    owned_count: u32,
    parts: u32,
    me: u32,
    /// Transfer numbers given out fresh here so far.
    fresh: u32,
    /// When this copy's ranks all finished the current iteration.
    done_at: Option<SimTime>,
    /// Numbers of other partitions' transfers that landed here, to give back.
    given_back: Vec<u32>,
    /// The current size's graph has a transfer that waits for what lands at its
    /// receiver (`split_unsound`).
    pub(super) unsound: bool,
}

impl CollectiveRun {
    /// This copy handles the ranks `owned` marks, partition `me` of `parts`.
    pub fn split(&mut self, owned: Vec<bool>, parts: u32, me: u32) {
        assert_eq!(owned.len(), self.n as usize, "a mark per rank");
        let owned_count = owned.iter().filter(|&&o| o).count() as u32;
        self.share = Some(Share {
            owned,
            owned_count,
            parts,
            me,
            fresh: 0,
            done_at: None,
            given_back: Vec::new(),
            unsound: false,
        });
    }

    /// Whether this split copy's current graph cannot be run split: a transfer waits
    /// for what lands at its receiver, which another partition may see first
    /// (`dag::Dag::deps_land_at_sender`; the planner takes only trees, which never do).
    pub fn split_unsound(&self) -> bool {
        self.share.as_ref().is_some_and(|s| s.unsound)
    }

    /// Whether this copy handles rank `p` (every rank, on one thread).
    #[inline(always)]
    pub(super) fn owns(&self, p: u32) -> bool {
        self.share.as_ref().map_or(true, |s| s.owned[p as usize])
    }

    /// The ranks this copy handles.
    #[inline(always)]
    pub(super) fn ranks_here(&self) -> u32 {
        self.share.as_ref().map_or(self.n, |s| s.owned_count)
    }

    /// Every rank this copy handles is done with the iteration (now): on one thread the
    /// iteration ends; split, the partitions' meeting decides.
    pub(super) fn ranks_here_done(&mut self, now: SimTime) {
        match self.share.as_mut() {
            None => self.finish_iteration(now),
            Some(s) => s.done_at = Some(now),
        }
    }

    /// A number for a new transfer.
    #[inline(always)]
    pub(super) fn new_xfer_id(&mut self, x: Xfer) -> u32 {
        if let Some(i) = self.free_xfers.pop() {
            self.xfers[i as usize] = x;
            return i;
        }
        let id = match self.share.as_mut() {
            None => self.xfers.len() as u32,
            Some(s) => {
                s.fresh += 1;
                (s.fresh - 1) * s.parts + s.me
            }
        };
        self.put_ring_transfer(id, x);
        id
    }

    /// Transfer `xfer` has landed: its number may be given out again, by the partition
    /// that gave it.
    #[inline(always)]
    pub(super) fn free_xfer(&mut self, xfer: u32) {
        match self.share.as_mut() {
            Some(s) if xfer % s.parts != s.me => s.given_back.push(xfer),
            _ => self.free_xfers.push(xfer),
        }
    }

    /// Transfer `xfer`'s record, for the partition where it lands: a ring's; of a
    /// graph's, what it carries (its place names the rest: every copy holds the graph).
    pub fn transfer(&mut self, xfer: u32) -> Xfer {
        if self.is_graph() {
            let at = self.graph.at(xfer);
            let (count, sum) = self.graph.snap(at).map_or((0, 0), |s| *s);
            return Xfer {
                count,
                sum,
                ..Xfer::default()
            };
        }
        self.xfers[xfer as usize]
    }

    /// Puts transfer `xfer`'s record (given out here, or by the partition that sent it).
    pub fn put_transfer(&mut self, xfer: u32, x: Xfer) {
        if self.is_graph() {
            if let Some(s) = self.graph.snap(self.graph.at(xfer)) {
                *s = (x.count, x.sum);
            }
            return;
        }
        self.put_ring_transfer(xfer, x);
    }

    #[inline(always)]
    fn put_ring_transfer(&mut self, xfer: u32, x: Xfer) {
        let i = xfer as usize;
        if self.xfers.len() <= i {
            self.xfers.resize(i + 1, Xfer::default());
        }
        self.xfers[i] = x;
    }

    /// The numbers of other partitions' transfers that landed here since the last call,
    /// each to go back to the partition that gave it (`xfer % parts`).
    #[inline(always)]
    pub fn drain_given_back(&mut self) -> impl Iterator<Item = u32> + '_ {
        self.share.iter_mut().flat_map(|s| s.given_back.drain(..))
    }

    /// Transfer number `xfer`, given out here, landed at another partition.
    pub fn give_back(&mut self, xfer: u32) {
        self.free_xfers.push(xfer);
    }

    /// When this copy's ranks all finished the current iteration, if they have.
    pub fn done_here(&self) -> Option<SimTime> {
        self.share.as_ref().and_then(|s| s.done_at)
    }

    /// Every partition's ranks are done: the iteration ends at `at`, the latest of
    /// their times (its wake-up, if another iteration follows, is in `take_wake`).
    pub fn end_iteration(&mut self, at: SimTime) {
        if let Some(s) = self.share.as_mut() {
            s.done_at = None;
        }
        self.finish_iteration(at);
    }

    /// Adds the wrong pieces another partition's copy counted (its ranks').
    pub fn add_wrong_from(&mut self, other: &CollectiveRun) {
        for (row, o) in self.rows.iter_mut().zip(&other.rows) {
            row.wrong += o.wrong;
        }
    }
}

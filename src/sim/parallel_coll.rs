//! The collectives' side of a run split over threads (`parallel`, issue 17).
//!
//! A ring's rank belongs to the partition of its host; with the host model a server's
//! NICs are one partition's (`Plan::servers_whole`), so its ranks' NVLink transfers are
//! too. A rank's sends, its receives landing and the clear-to-sends it is told of are
//! that partition's events (`CollDone` and the transfer's completion where it lands,
//! `CollClear` where its sender is). Every partition handles each run's start and
//! wake-ups, for the ranks it owns (`collective::share`).
//!
//! What crosses between partitions, besides the packets:
//! - a transfer between hosts is a flow record made where it is sent, in a slot of that
//!   partition's own (`fresh_transfer_slot`: every `parts`-th); its receiver's partition,
//!   if another, gets a copy at the same slot (`Msg::Transfer`), with the run's record of
//!   the transfer, before any of its packets can reach it (they cross a link of the
//!   lookahead or longer). Other partitions hold none, or an older record of the slot's;
//!   the end of run merges the sender's and the receiver's;
//! - a clear-to-send goes to the sender's partition under the key it gets where it is
//!   sent (`Msg::Event`), one path latency later, past the window;
//! - a landed transfer's number goes back to the partition that gave it
//!   (`Msg::GiveBack`);
//! - with several queue pairs a connection, what a transfer's landing reads (its parts
//!   still to land when split over the queue pairs; its place in its connection's
//!   sending order, in which the receiver takes them) is kept where it lands: told to
//!   the receiver's partition with its records (`Msg::Landing`, since stop 58), in the
//!   sending partition's mail order, which is the connection's sending order;
//! - the end of an iteration is decided at the meeting after the window in which the
//!   last partition's ranks finished (`end_iterations`).
//!
//! The records' numbers and their retiring are `parallel_retire`'s.
//!
//! Trees split as rings do (since stop 59): a tree's transfer is named by its place in
//! the graph every partition holds, so its number is never given back, and its record
//! carries what it holds to the receiver's partition (`CollectiveRun::transfer`); it
//! waits only for what lands at its sender, so no dependency crosses partitions.
//!
//! Leaves out (such runs go on one thread: `parallel::unsupported`): the other graph
//! algorithms (hierarchical, NVLSTree, in-network), raw packets, training jobs, and
//! fewer servers than partitions where no grouping of leaves keeps them whole (with
//! more, their NICs are placed apart from their leaves: `Plan::servers_apart`).

use super::parallel::Msg;
use super::partition::Plan;
use super::{host_message, CollConn, FlowState, Sim};
use crate::collective::{Collective, CollectiveAlgorithm, Xfer};
use crate::components::host::{Message, MsgTimes};
use crate::engine::{Event, FlowId, Source};
use crate::scenario::{Scenario, Transport};
use crate::units::SimTime;
use crate::workload::FlowDef;

/// A slot no transfer took: its record is a placeholder, dropped at the end.
pub(super) const HOLE: u32 = u32::MAX;

/// What a placeholder record carries.
pub(super) fn hole_def() -> FlowDef {
    FlowDef {
        src: 0,
        dst: 0,
        size: 0,
        start: SimTime::ZERO,
        workload: 0,
        after: None,
    }
}

impl FlowState {
    /// A placeholder for a slot another partition has not used (yet).
    pub(super) fn hole(sc: &crate::scenario::Scenario) -> FlowState {
        let mut f = FlowState::with_ideal(sc, 0, hole_def(), crate::units::SimDuration::ZERO);
        f.num = HOLE;
        f
    }
}

impl Sim {
    /// Partition `me`'s copy: each collective item starts again in its new queue
    /// (under its run's own key) and handles the ranks on this partition's hosts; every
    /// transfer record is kept.
    pub(super) fn split_collectives(&mut self, plan: &Plan, me: u16) {
        for run in 0..self.colls.len() as u32 {
            let r = &mut self.colls[run as usize];
            let owned = r.ranks.iter().map(|l| plan.host(l.port) == me).collect();
            r.split(owned, plan.parts as u32, me as u32);
            let start = SimTime(r.cfg.start.0);
            self.q
                .schedule(start, self.src.run(run), Event::CollStart { run });
        }
        self.slots.sweep_at_meetings();
    }

    /// A fresh slot for a transfer record made here: past the workload's flows,
    /// every `parts`-th from this partition's place.
    pub(super) fn fresh_transfer_slot(&mut self) -> Option<FlowId> {
        let part = self.part.as_deref_mut()?;
        let id = self.slots.base() + part.fresh_transfers * part.plan.parts as u32 + part.me as u32;
        part.fresh_transfers += 1;
        Some(id)
    }

    /// Puts record `f` in slot `id`, past the end if need be (the slots between wait
    /// for the other partitions' records).
    pub(super) fn place_record(&mut self, id: FlowId, f: FlowState) {
        let i = id as usize;
        if self.flows.len() <= i {
            let hole = FlowState::hole(&self.sc);
            self.flows.resize(i + 1, hole);
        }
        self.flows[i] = f;
    }

    /// Transfer record `id`, run `run`'s transfer `xfer` from rank `src_rank`, was just
    /// made: the log of what this partition made (for its number) gets its key, and the
    /// receiver's partition, if another, a copy.
    pub(super) fn share_transfer(&mut self, id: FlowId, run: u32, xfer: u32, src_rank: u32) {
        let key = self.q.current_key();
        let Some(part) = self.part.as_deref_mut() else {
            return;
        };
        // One thread makes a wake-up's transfers rank by rank (a ring's), or in the
        // graph's order (a tree's roots, by their place in it).
        let sub = match (part.coll_wake, self.colls[run as usize].is_graph()) {
            (false, _) => 0,
            (true, false) => src_rank + 1,
            (true, true) => xfer + 1,
        };
        part.created.push((key, sub, id));
        let to = part.plan.host(self.flows[id as usize].def.dst);
        if to != part.me {
            let record = self.colls[run as usize].transfer(xfer);
            part.outbox[to as usize].push(Msg::Transfer {
                id,
                state: Box::new(self.flows[id as usize].clone()),
                run,
                xfer,
                record,
            });
        }
    }

    /// Another partition's transfer record arrived: its copy here.
    pub(super) fn take_transfer(
        &mut self,
        id: FlowId,
        state: FlowState,
        run: u32,
        xfer: u32,
        record: Xfer,
    ) {
        let msg = host_message(&state.def);
        self.place_record(id, state);
        self.place_message(id, msg);
        self.colls[run as usize].put_transfer(xfer, record);
    }

    /// Slot `id`'s host-model message (if the run has the host model), past the end if
    /// need be.
    pub(super) fn place_message(&mut self, id: FlowId, msg: Message) {
        if let Some(h) = self.hostm.as_mut() {
            h.place_message(id, msg, host_message(&hole_def()));
        }
    }

    /// The partition of host port `to`, if this is a split run and it is another's.
    pub(super) fn host_elsewhere(&self, to: u32) -> Option<usize> {
        let part = self.part.as_deref()?;
        let dest = part.plan.host(to);
        (dest != part.me).then_some(dest as usize)
    }

    /// A split run's transfer `xfer` (see `expect_landing`) lands at host port `to`: if
    /// that is another partition's, what its landing reads goes there (in the mail that
    /// carries its records, before any of its packets can reach it), and true is
    /// returned.
    pub(super) fn landing_elsewhere(
        &mut self,
        to: u32,
        xfer: u32,
        conn: CollConn,
        parts: u32,
        in_order: bool,
    ) -> bool {
        let Some(dest) = self.host_elsewhere(to) else {
            return false;
        };
        let part = self.part.as_deref_mut().expect("a partition");
        part.outbox[dest].push(Msg::Landing {
            xfer,
            conn,
            parts,
            in_order,
        });
        true
    }

    /// The numbers of other partitions' transfers that landed here go back to them.
    pub(super) fn give_back_transfers(&mut self, run: u32) {
        let Some(part) = self.part.as_deref_mut() else {
            return;
        };
        let parts = part.plan.parts as u32;
        for xfer in self.colls[run as usize].drain_given_back() {
            part.outbox[(xfer % parts) as usize].push(Msg::GiveBack { run, xfer });
        }
    }

    /// A clear-to-send of run `run` for connection `conn` is due at `at` at rank port
    /// `to` (its sender's host): if that is another partition's, it goes there under the
    /// key `source` gives it here, and true is returned.
    pub(super) fn clear_to_send_elsewhere(
        &mut self,
        at: SimTime,
        source: Source,
        run: u32,
        conn: u32,
        to: u32,
    ) -> bool {
        let Some(dest) = self.host_elsewhere(to) else {
            return false;
        };
        // A path between partitions crosses a link of the lookahead or longer: the word
        // arrives past the window it was sent in (`schedule_reserved` there refuses a key
        // in the past).
        let key = self.q.reserve(at, source);
        let part = self.part.as_deref_mut().expect("a partition");
        part.outbox[dest].push(Msg::Event {
            key,
            event: Event::CollClear { run, conn },
        });
        true
    }

    /// The partition that handles collective event `ev` (a debug check of the split):
    /// this one for a run's start and wake-ups, which every partition handles; the
    /// receiver's for a transfer's arrival and landing, the sender's for a
    /// clear-to-send.
    #[cfg(debug_assertions)]
    pub(super) fn coll_event_owner(&self, ev: &Event) -> Option<u16> {
        let part = self.part.as_deref()?;
        let rank_owner = |run: u32, rank: u32| {
            let r = &self.colls[run as usize];
            part.plan.host(r.ranks[rank as usize].port)
        };
        Some(match *ev {
            Event::CollStart { .. } | Event::CollWake { .. } => part.me,
            Event::CollArrive { run, xfer } | Event::CollDone { run, xfer } => {
                rank_owner(run, self.colls[run as usize].transfer_ends(xfer).1)
            }
            Event::CollClear { run, conn } => {
                rank_owner(run, conn / self.colls[run as usize].cfg.channels)
            }
            _ => return None,
        })
    }

    /// When each run's ranks here finished the current iteration (`u64::MAX`: not yet),
    /// for the meeting.
    pub(super) fn iterations_done_here(&self, into: &mut [u64]) {
        for (slot, r) in into.iter_mut().zip(&self.colls) {
            *slot = r.done_here().map_or(u64::MAX, |t| t.0);
        }
    }

    /// At a meeting: each run whose ranks are done in every partition (`ends[run]`: the
    /// latest of their times) ends its iteration there, and its next one's wake-up is
    /// scheduled under the key one thread gives it. Returns the earliest wake-up
    /// scheduled. A wake-up within the window that ended the iteration (a launch shorter
    /// than the lookahead) cannot follow one thread: the run is marked diverged.
    pub(super) fn end_iterations(&mut self, ends: &[Option<SimTime>]) -> Option<u64> {
        let mut first: Option<u64> = None;
        let mut latest: Option<SimTime> = None;
        for (run, end) in ends.iter().enumerate() {
            let Some(at) = *end else {
                continue;
            };
            let r = &mut self.colls[run];
            r.end_iteration(at);
            latest = latest.max(Some(at));
            if let Some(wake) = r.take_wake() {
                let part = self.part.as_deref_mut().expect("a partition");
                if wake < part.window_end {
                    part.diverged.get_or_insert(LAUNCH_IN_WINDOW);
                    continue;
                }
                let run = run as u32;
                self.q
                    .schedule(wake, self.src.run(run), Event::CollWake { run });
                first = Some(first.map_or(wake.0, |f| f.min(wake.0)));
            }
        }
        if let (Some(at), true) = (latest, self.runs_done()) {
            self.sampling.runs_ended_at(at);
        }
        first
    }
}

/// Why collective item `item` cannot be split over threads, if it cannot (what
/// `parallel_coll` leaves out): every size must run as a ring (as given, or as NCCL's
/// tuner picks it for `auto`, on the ranks the run places as `Sim::new` does).
pub(super) fn collective_unsupported(
    sc: &Scenario,
    item: usize,
    c: &Collective,
) -> Option<&'static str> {
    if matches!(sc.transport, Transport::Raw) {
        return Some("collectives over raw packets");
    }
    let hosts = sc.topology.hosts();
    let Ok(ranks) = crate::collective::place_on(c, sc.host.as_ref(), hosts, sc.seed, item) else {
        return Some("a collective that cannot be placed");
    };
    // A tree's transfers wait only for what lands at their sender
    // (`Dag::deps_land_at_sender`); the hierarchy's leaders' ring also waits for what
    // lands at the receiver.
    let splits =
        |a: CollectiveAlgorithm| matches!(a, CollectiveAlgorithm::Ring | CollectiveAlgorithm::Tree);
    let all_split = crate::collective::tuner::choices(c, &ranks, super::tuner_net_gbps(sc))
        .iter()
        .all(|&(a, _)| splits(a));
    if !all_split || !(splits(c.algorithm) || c.algorithm == CollectiveAlgorithm::Auto) {
        return Some("collectives other than rings and trees");
    }
    None
}

/// Why a split run went again on one thread: a collective's graph has a transfer that
/// waits for what lands at its receiver (`CollectiveRun::split_unsound`).
pub(super) const GRAPH_UNSOUND: &str =
    "a collective graph whose transfers wait for what lands at their receiver";

/// Why a split run went again on one thread: see `Sim::end_iterations`.
pub(super) const LAUNCH_IN_WINDOW: &str =
    "a collective's next iteration launched within the window its last rank finished in";

/// At the end of a split run: the records in their numbers' order (each numbered at
/// the meeting after it was made: `Sim::number_window`), the placeholders dropped, and
/// their host-model messages (`msgs`) likewise.
pub(super) fn order_transfers(flows: &mut Vec<FlowState>, msgs: Option<&mut Vec<MsgTimes>>) {
    let mut order: Vec<usize> = (0..flows.len()).filter(|&i| flows[i].num != HOLE).collect();
    order.sort_by_key(|&i| flows[i].num);
    *flows = order.iter().map(|&i| flows[i].clone()).collect();
    if let Some(m) = msgs {
        *m = order.iter().map(|&i| m[i]).collect();
    }
}

//! A collective's transfer records in a run split over threads (`parallel_coll`, issue
//! 17): numbered as one thread numbers them, and retired as the run goes (`retire` on
//! one thread), so that memory follows what is in flight on many cores too.
//!
//! Numbers: each partition logs the transfers it makes in a window, under the key of
//! the event that made each (`Part::created`); at the next meeting every partition reads
//! every log, merges them in key order (a run's wake-up, which every partition handles
//! under one key, rank by rank) and numbers its own from the count so far
//! (`number_window`).
//!
//! Retiring: a record is its sender's partition's (it made it, and gives its slot out
//! again). Its copy where it lands counts its receiving side, which is sent to the
//! sender's partition once done (`Msg::RxSide`, when the message is done there); a
//! packet of it lost in any other partition is counted at the sender's (`Msg::Dropped`;
//! the slot names that partition), so that the sender's partition holds the whole record
//! before it folds it. A sweep takes two meetings: at the first, when any partition
//! holds enough records (`Slots::wants_sweep`), each lists the records of its own that
//! are done on both sides (`sweep_candidates`, as `retire::sweep` asks on one thread)
//! and the transfers its packets name (the window's mail already taken); at the second
//! each retires those of its candidates no partition's packets named
//! (`retire_candidates`). A record done on both sides makes no new packet, so one not
//! named at the first meeting is named by none later. Its fold is what one thread's
//! would be: the sides put together as at the end of a run (`merge_copies`,
//! `merge_sides`), checked against the per-flow invariants; the partitions' folds are
//! summed at the end (`RetiredTransfers::merge`), and a slot retired and not given out
//! again is dropped there.

use super::parallel::merge::merge_copies;
use super::parallel::{Made, Msg};
use super::{FlowState, MsgTimes, Outcome, Sim};
use crate::components::host::merge_sides;
use crate::engine::FlowId;
use crate::metrics::host::MsgAcc;

/// What a record's receiving side did, sent to its sender's partition.
#[derive(Debug, Clone)]
pub(super) struct RxSide {
    pub state: FlowState,
    pub msg: Option<MsgTimes>,
}

/// Each transfer of `logs[me]` with its place in all `logs` merged in key order, the
/// logs (each in key order) taken as a stable sort of them one after another would:
/// its place in its own log plus the others' transfers of a smaller (key, rank), or of
/// the same one in a log listed earlier.
pub(super) fn merged_places(logs: &[&[Made]], me: usize, mut place: impl FnMut(FlowId, usize)) {
    debug_assert!(logs
        .iter()
        .all(|l| l.windows(2).all(|w| (w[0].0, w[0].1) <= (w[1].0, w[1].1))));
    let mut seen = vec![0usize; logs.len()];
    for (i, &(key, sub, id)) in logs[me].iter().enumerate() {
        let mut before = i;
        for (p, log) in logs.iter().enumerate() {
            if p == me {
                continue;
            }
            let at = &mut seen[p];
            while let Some(&(k, s, _)) = log.get(*at) {
                if (k, s) < (key, sub) || ((k, s) == (key, sub) && p < me) {
                    *at += 1;
                } else {
                    break;
                }
            }
            before += *at;
        }
        place(id, before);
    }
}

impl Sim {
    /// The partition that made transfer record `flow` (its sender's: a record's slot
    /// names it), if it is another partition's transfer in a split run. This partition
    /// may hold no copy of it (one the packet only passes through).
    fn transfer_elsewhere(&self, flow: FlowId) -> Option<usize> {
        let part = self.part.as_deref()?;
        let k = flow.checked_sub(self.slots.base())? as usize % part.plan.parts as usize;
        (k != part.me as usize).then_some(k)
    }

    /// A packet of `flow` was lost here.
    pub(super) fn count_drop(&mut self, flow: FlowId) {
        match self.transfer_elsewhere(flow) {
            None => self.flows[flow as usize].packets_dropped += 1,
            Some(to) => {
                let part = self.part.as_deref_mut().expect("a partition");
                part.outbox[to].push(Msg::Dropped { id: flow });
            }
        }
    }

    /// `flow` is done where it landed: if it is another partition's transfer, its
    /// receiving side goes there.
    pub(super) fn send_rx_side(&mut self, flow: FlowId) {
        let Some(to) = self.transfer_elsewhere(flow) else {
            return;
        };
        let side = RxSide {
            state: self.flows[flow as usize].clone(),
            msg: self.hostm.as_ref().map(|h| *h.message(flow)),
        };
        let part = self.part.as_deref_mut().expect("a partition");
        part.outbox[to].push(Msg::RxSide {
            id: flow,
            side: Box::new(side),
        });
    }

    /// At a meeting: numbers the transfers every partition made in the last window
    /// (`logs`, one per partition, each in the order it made them), this partition's
    /// own from `base + numbered`. Returns how many there were.
    ///
    /// Each log is in key order (a partition handles its events in key order, a
    /// wake-up's ranks one by one), so the logs are merged without a sort or a copy
    /// ([`merged_places`]; until stop 58 each partition copied and sorted all of them:
    /// 1.2-1.5 s of the 2,048-GPU ring's 80 s on two threads).
    pub(super) fn number_window(&mut self, logs: &[&[Made]], numbered: u32) -> u32 {
        let me = self.part.as_deref().expect("a partition").me as usize;
        let first = self.slots.base() + numbered;
        merged_places(logs, me, |id, place| {
            self.flows[id as usize].num = first + place as u32;
        });
        logs.iter().map(|l| l.len() as u32).sum()
    }

    /// At a meeting where a sweep starts: this partition's records done on both sides
    /// (candidates), and the transfers its packets name (sorted).
    pub(super) fn sweep_candidates(&mut self) -> (Vec<FlowId>, Vec<FlowId>) {
        let part = self.part.as_deref().expect("a partition");
        let now = part.window_end;
        let candidates = self
            .slots
            .held()
            .iter()
            .copied()
            .filter(|&id| {
                let f = &self.flows[id as usize];
                let sender_done = f.coll.is_some()
                    && !f.raw
                    && f.outcome == Outcome::Completed
                    && f.finish.is_some_and(|t| t <= now);
                let rx_here = part.plan.host(f.def.dst) == part.me;
                let receiver_done = if rx_here {
                    self.hostm.as_ref().map_or(true, |h| h.message(id).done())
                } else {
                    part.rx_sides.contains_key(&id)
                };
                let send_closed = self.hostm.as_ref().map_or(true, |h| !h.send_open(id, now));
                sender_done && receiver_done && send_closed
            })
            .collect();
        let mut named = Vec::new();
        self.pool.for_each_live(|p| named.push(p.flow));
        // A live queue pair names its `read_flow` in what it sends unasked (a READ's
        // responses, a selective NAK), as `retire::sweep` counts on one thread: before
        // stop 65 a split run retired it, and a later selective NAK named the slot's
        // next record, another queue pair's (found by `fuzz::long_split` with
        // `DOORBELL_SWEEP_MIN=1`).
        named.extend(self.qps.iter().filter(|q| !q.dead).map(|q| q.read_flow));
        named.sort_unstable();
        named.dedup();
        (candidates, named)
    }

    /// At the meeting after a sweep started: retires `candidates` that no partition's
    /// packets named (`named`, each sorted) and that hold every per-flow invariant.
    pub(super) fn retire_candidates(&mut self, candidates: &[FlowId], named: &[&[FlowId]]) {
        // The one-thread sweep's marks (unused in a split run) mark what leaves.
        let mut gone = std::mem::take(&mut self.slots.named);
        gone.clear();
        gone.resize(self.flows.len(), false);
        let mut freed: Vec<FlowId> = Vec::new();
        for &id in candidates {
            if named.iter().any(|n| n.binary_search(&id).is_ok()) {
                continue;
            }
            let part = self.part.as_deref_mut().expect("a partition");
            let own = &self.flows[id as usize];
            let own_msg = self.hostm.as_ref().map(|h| *h.message(id));
            let merged = part.rx_sides.get(&id).map(|rx| {
                (
                    merge_copies(vec![own.clone(), rx.state.clone()], 0),
                    own_msg.zip(rx.msg).map(|(t, r)| merge_sides(&t, &r)),
                )
            });
            let (f, msg) = match &merged {
                Some((f, msg)) => (f, *msg),
                None => (own, own_msg),
            };
            if !crate::metrics::invariants::finished_record_holds(f) {
                continue;
            }
            self.retired.add(f);
            if let Some(h) = &mut self.hostm {
                // Its sender's CQE, computed ahead, is due (a candidate's send side is
                // closed): counted as it goes, by the sender's partition.
                h.count_send_cqe(id);
            }
            if let (Some(h), Some(m)) = (&self.hostm, msg) {
                self.retired.host.get_or_insert_with(MsgAcc::new).add(
                    h.cfg(),
                    self.nics.len(),
                    f,
                    &m,
                );
            }
            if merged.is_some() {
                part.rx_sides.remove(&id);
            }
            gone[id as usize] = true;
            freed.push(id);
        }
        // Freed in slot order, as before stop 58 (nothing orders by a slot: `retire`).
        freed.sort_unstable();
        let held: Vec<FlowId> = self
            .slots
            .held()
            .iter()
            .copied()
            .filter(|&id| !gone[id as usize])
            .collect();
        self.slots.named = gone;
        self.slots.swept(held, freed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The places found by walking the logs are those of a stable sort of the logs one
    /// after another by (key, rank), for 1-4 partitions whose logs share keys (a
    /// wake-up every partition handles) and (key, rank) pairs (a start).
    #[test]
    fn merged_places_are_those_of_a_stable_sort() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(58);
        for round in 0..300 {
            let parts = 1 + round % 4;
            let mut id = 0;
            let logs: Vec<Vec<Made>> = (0..parts)
                .map(|_| {
                    let mut log: Vec<Made> = (0..rng.gen_range(0..40))
                        .map(|_| {
                            id += 1;
                            (rng.gen_range(0..12u128), rng.gen_range(0..3u32), id)
                        })
                        .collect();
                    log.sort_by_key(|e| (e.0, e.1));
                    log
                })
                .collect();
            let mut all: Vec<Made> = logs.iter().flatten().copied().collect();
            all.sort_by_key(|e| (e.0, e.1));
            let lists: Vec<&[Made]> = logs.iter().map(|l| l.as_slice()).collect();
            for (me, log) in logs.iter().enumerate() {
                let mut got = Vec::new();
                merged_places(&lists, me, |id, place| got.push((id, place)));
                assert_eq!(got.len(), log.len());
                for (id, place) in got {
                    assert_eq!(all[place].2, id, "round {round}, partition {me}");
                }
            }
        }
    }
}

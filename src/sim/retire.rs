//! Retiring a collective's finished transfers, so that a run's memory follows what is
//! in flight, not what already finished (issue 17).
//!
//! Every transfer of a collective or training job that crosses servers is a flow record
//! (`FlowState`, and a `MsgTimes` in the host model): a 256 MiB ring allreduce over 4,096
//! GPUs makes 67 million of them per operation. Once a transfer has completed and
//! nothing can name it again, its record is folded into [`RetiredTransfers`] (counters,
//! minima and maxima, the host model's histograms: sums and extremes that do not depend
//! on the order of folding) and its slot is reused by a later transfer. Every figure
//! reported is the same as with every record kept: the statistics read the fold plus
//! the records left (tested: the reference results are byte-identical, and
//! `retire_keeps_every_figure`).
//!
//! A record retires when, at a sweep:
//! - it is a collective's or training job's transfer between hosts (bare-packet
//!   transfers to and from switches stay), it completed (failed and unfinished ones stay, for the
//!   stall and dead-link reports), its finish is not in the future, and it holds every
//!   per-flow invariant (`metrics::invariants::finished_record_holds`: a record that
//!   breaks one stays, so the end-of-run check reports it as before);
//! - no packet in the pool names it (a late duplicate, an ACK, a CNP), no queue pair
//!   names it as the flow its selective NAKs and READ responses are charged to;
//! - in the host model, both ends are done with it: its receiver's completion handled
//!   (`T_DONE`) and its sender's CQE, if one is coming, handled too.
//!
//! Sweeps run when the transfers still held have doubled since the last one (at least
//! [`SWEEP_MIN`]), so their cost is linear in the transfers made and the records held
//! stay within about twice those in flight. Slots are handed out again in a fixed order
//! and nothing in the model orders by a record's slot (a record's hash and its number
//! in reports come from its logical number, [`FlowState::num`]), so runs are the same
//! whatever is retired. `run --flows` writes a row per transfer and keeps them all
//! ([`set_keep_transfer_records`]).

use super::{FlowState, Outcome, Sim};
use crate::engine::FlowId;
use crate::metrics::host::MsgAcc;
use crate::units::SimTime;

/// The fewest held transfers at which a sweep runs.
pub const SWEEP_MIN: usize = 4096;

static KEEP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static SWEEP_FROM: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(SWEEP_MIN);

/// Every later run in this process sweeps from `n` held transfers on (default
/// [`SWEEP_MIN`]): `DOORBELL_SWEEP_MIN=1` retires records as early as they can be, to
/// test that retiring changes nothing.
pub fn set_sweep_min(n: usize) {
    SWEEP_FROM.store(n.max(1), std::sync::atomic::Ordering::Relaxed);
}

fn sweep_min() -> usize {
    SWEEP_FROM.load(std::sync::atomic::Ordering::Relaxed)
}

/// Every later run in this process keeps every transfer's record (`run --flows`).
pub fn set_keep_transfer_records() {
    KEEP.store(true, std::sync::atomic::Ordering::Relaxed);
}

fn keep_records() -> bool {
    KEEP.load(std::sync::atomic::Ordering::Relaxed)
}

/// What retired transfers leave behind: what `metrics::summarize`, the invariants and
/// the host summary read of them.
#[derive(Debug, Clone, Default)]
pub struct RetiredTransfers {
    pub count: u64,
    pub payload_bytes: u64,
    pub delivered_bytes: u64,
    pub packets_sent: u64,
    /// The earliest start of one that sent a packet, ps.
    pub first_start: Option<u64>,
    /// The latest landing (or finish), ps.
    pub last_delivery: u64,
    /// Whether one of them lost a packet on the way (recovered by RC).
    pub any_dropped: bool,
    /// Their host-model messages, folded (host model only).
    pub host: Option<MsgAcc>,
    /// The most records held at once (a gauge of the memory they take).
    pub peak_held: u64,
}

impl RetiredTransfers {
    /// Adds what another partition's copy retired (`sim::parallel_coll`): sums, extremes
    /// and the host model's fold, whatever the order.
    pub(super) fn merge(&mut self, o: &RetiredTransfers) {
        self.count += o.count;
        self.payload_bytes += o.payload_bytes;
        self.delivered_bytes += o.delivered_bytes;
        self.packets_sent += o.packets_sent;
        self.first_start = match (self.first_start, o.first_start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_delivery = self.last_delivery.max(o.last_delivery);
        self.any_dropped |= o.any_dropped;
        if let Some(h) = &o.host {
            self.host.get_or_insert_with(MsgAcc::new).merge(h);
        }
        self.peak_held += o.peak_held;
    }

    pub(super) fn add(&mut self, f: &FlowState) {
        self.count += 1;
        self.payload_bytes += f.def.size;
        self.delivered_bytes += f.delivered;
        self.packets_sent += f.packets_sent as u64;
        if f.packets_sent > 0 {
            self.first_start = Some(
                self.first_start
                    .map_or(f.def.start.0, |s| s.min(f.def.start.0)),
            );
        }
        let fin = f.finish.expect("a retired transfer finished");
        self.last_delivery = self.last_delivery.max(f.landed.unwrap_or(fin).0);
        self.any_dropped |= f.packets_dropped > 0;
    }
}

/// The transfer slots and the sweep's state.
#[derive(Debug, Default)]
pub(super) struct Slots {
    /// Slots of retired records, to hand out again (last freed first).
    free: Vec<FlowId>,
    /// Transfer slots with a live record, in the order they were filled.
    held: Vec<FlowId>,
    /// Sweep when `held` reaches this.
    sweep_at: usize,
    /// Scratch marks: a slot named by a packet or a queue pair (one thread's sweep), or a
    /// record retired (a split run's, `retire_candidates`).
    pub(super) named: Vec<bool>,
    /// Logical number of the next record.
    pub next_num: u32,
    /// The workload's flows, before every transfer.
    base: u32,
    keep: bool,
    /// A split run's partition: sweeps are decided at the partitions' meetings
    /// (`parallel_retire`), not between events.
    at_meetings: bool,
}

impl Slots {
    /// The first transfer record's slot and number (after the workload's flows).
    pub fn base(&self) -> u32 {
        self.base
    }

    /// A split run's partition: its sweeps wait for the partitions' meetings.
    pub fn sweep_at_meetings(&mut self) {
        self.at_meetings = true;
    }

    /// A split run's partition holds enough records for a sweep (`sweep_due` between
    /// events on one thread).
    pub fn wants_sweep(&self) -> bool {
        self.held.len() >= self.sweep_at && !self.keep
    }

    /// Forgets the free slots (a split run's end: its records were put in order).
    pub fn clear_free(&mut self) {
        self.free.clear();
    }

    /// Slots of retired records, not yet given out again.
    pub fn free_slots(&self) -> &[FlowId] {
        &self.free
    }

    /// The records held (slots of transfers made here, in the order they were filled).
    pub fn held(&self) -> &[FlowId] {
        &self.held
    }

    /// After a sweep: the records still held, and the next sweep's threshold; `freed`
    /// slots may be given out again.
    pub fn swept(&mut self, held: Vec<FlowId>, freed: impl IntoIterator<Item = FlowId>) {
        self.sweep_at = (2 * held.len()).max(sweep_min());
        self.held = held;
        self.free.extend(freed);
    }

    pub fn new(flows: usize) -> Slots {
        Slots {
            sweep_at: sweep_min(),
            next_num: flows as u32,
            base: flows as u32,
            keep: keep_records(),
            ..Default::default()
        }
    }
}

impl Sim {
    /// A slot and a logical number for a new transfer record. In a split run the slot
    /// is this partition's own and the number is given at the end
    /// (`parallel_coll::number_transfers`).
    pub(super) fn transfer_slot(&mut self) -> (FlowId, usize) {
        let num = self.slots.next_num;
        self.slots.next_num += 1;
        let id = match self.slots.free.pop() {
            Some(id) => id,
            None => self
                .fresh_transfer_slot()
                .unwrap_or(self.flows.len() as FlowId),
        };
        (id, num as usize)
    }

    /// Puts transfer record `f` (and its host message) in slot `id` from
    /// [`Sim::transfer_slot`].
    pub(super) fn put_transfer(&mut self, id: FlowId, f: FlowState) {
        let msg = super::host_message(&f.def);
        if id as usize == self.flows.len() {
            self.flows.push(f);
            if let Some(h) = self.hostm.as_mut() {
                h.add_message(msg);
            }
        } else if id as usize > self.flows.len() {
            // A split run's own slot, past the others'.
            self.place_record(id, f);
            self.place_message(id, msg);
        } else {
            self.flows[id as usize] = f;
            if let Some(h) = self.hostm.as_mut() {
                h.set_message(id, msg);
            }
        }
        self.slots.held.push(id);
        let held = self.slots.held.len() as u64;
        self.retired.peak_held = self.retired.peak_held.max(held);
    }

    /// Whether a sweep is due (one comparison per event).
    #[inline]
    pub(super) fn sweep_due(&self) -> bool {
        self.slots.held.len() >= self.slots.sweep_at && !self.slots.keep && !self.slots.at_meetings
    }

    /// Retires every held transfer record nothing can name again (see the module).
    #[inline(always)]
    pub(super) fn sweep(&mut self, now: SimTime) {
        let named = &mut self.slots.named;
        named.clear();
        named.resize(self.flows.len(), false);
        self.pool.for_each_live(|p| {
            if let Some(n) = named.get_mut(p.flow as usize) {
                *n = true;
            }
        });
        for q in self.qps.iter().filter(|q| !q.dead) {
            if let Some(n) = named.get_mut(q.read_flow as usize) {
                *n = true;
            }
        }
        let mut held = std::mem::take(&mut self.slots.held);
        held.retain(|&id| {
            let f = &self.flows[id as usize];
            let done = f.coll.is_some()
                && !f.raw
                && f.outcome == Outcome::Completed
                && f.finish.is_some_and(|t| t <= now)
                && !self.slots.named[id as usize]
                && self.hostm.as_ref().map_or(true, |h| h.is_closed(id, now))
                && crate::metrics::invariants::finished_record_holds(f);
            if !done {
                return true;
            }
            self.retired.add(f);
            if let Some(h) = &mut self.hostm {
                // Its sender's CQE, computed ahead, is due: counted as it goes.
                h.count_send_cqe(id);
                self.retired.host.get_or_insert_with(MsgAcc::new).add(
                    h.cfg(),
                    self.nics.len(),
                    f,
                    h.message(id),
                );
            }
            self.slots.free.push(id);
            false
        });
        self.slots.sweep_at = (2 * held.len()).max(sweep_min());
        self.slots.held = held;
    }

    /// At the end of the run: drops the free slots and puts the records left in their
    /// logical order (the workload's flows first, as they always are, then transfers by
    /// number), so the outputs read them as if none had retired.
    pub(super) fn compact_records(&mut self) {
        // Reused slots are out of order even when none is free at the end.
        if self.retired.count == 0 {
            return;
        }
        let mut free = vec![false; self.flows.len()];
        for &id in &self.slots.free {
            free[id as usize] = true;
        }
        let flows = std::mem::take(&mut self.flows);
        let msgs = self.hostm.as_mut().map(|h| h.take_messages());
        let mut keep: Vec<usize> = (0..flows.len()).filter(|&i| !free[i]).collect();
        keep.sort_by_key(|&i| flows[i].num);
        self.flows = keep.iter().map(|&i| flows[i].clone()).collect();
        if let (Some(h), Some(m)) = (self.hostm.as_mut(), msgs) {
            h.put_messages(keep.iter().map(|&i| m[i]).collect());
        }
        self.slots.free.clear();
    }
}

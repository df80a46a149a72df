//! The NIC's side of a send computed at the message's hand-off (issue 17, stop 66): the
//! doorbell reaching the NIC, the WQE fetch, the send engine and the payload's first
//! read, which the stepped pipeline takes as three or four wake-ups (`on_doorbell`,
//! `request_read`, `process`, `wr_ready`), become one, the work request ready.
//!
//! Why the times are known at the hand-off, when the posting is computed there too
//! (`host_posting.rs`) and the NIC's messages all post in one mode (every WQE fetch of
//! the NIC then takes the same time: BlueFlame, or no inline data):
//! - The doorbells reach the NIC in hand-off order (one first-come first-served
//!   context), so the fetches end in that order, and the send engine, a first-come
//!   first-served server of `wqe_processing` a WQE, takes them in that order: its end
//!   for each message is known when the message is handed off.
//! - A DMA read waits only when the NIC's `max_outstanding_reads` slots are all taken. A
//!   message holds at most one slot, and only between its doorbell and its ready; so
//!   while no more messages than slots are in that stretch at once, no read waits, and
//!   each read takes its fixed time. Each hand-off checks that against the messages
//!   before it (their stretches are known, and later ones start later). A NIC that
//!   would break it marks the pipeline ([`HostPipeline::nic_side_overflowed`]) and the
//!   run goes again with these steps stepped (`Sim::run`): the read that would wait may
//!   be an earlier message's, computed already.
//!
//! Every timestamp and count is the stepped pipeline's: the counts are taken when the
//! work request is ready, or at the end of a run that stops before
//! (`settle_posting`), for the steps reached by then. The test
//! `folded_nic_side_matches_the_stepped_one` compares the two. One thing may differ:
//! the ready wake-up is numbered by its NIC at the hand-off, where the steps number
//! their last one later (`engine`: equal times go by source, then by that number), so
//! two of a NIC's messages ready at the same picosecond (a 1,000 B message and an empty
//! one after it, with a send engine as slow as the payload's read) reach their queue
//! pairs in hand-off order, where the steps could take them the other way round. Both
//! are one picosecond's order of simultaneous events, deterministic either way; no
//! reference result (`results/`) changed. Sources as in `components::host`.

use super::{HostAction, HostPipeline, HostWake, ST_READY, T_DOORBELL, T_FETCHED, T_RUNG};
use crate::engine::FlowId;
use crate::nic::config::PostingMode;
use crate::units::{serialization_delay, SimDuration, SimTime};

impl HostPipeline {
    /// Whether a message posted in `mode` has its NIC's side computed at the hand-off
    /// (`post_nic_side`): its posting is (`folds_posting`), every message of the run
    /// posts in one mode, and every WQE fetch takes the same time.
    pub(super) fn folds_nic_side(&self, mode: PostingMode) -> bool {
        self.nic_side && self.folds_posting(mode)
    }

    /// Whether every message of a run of `modes` (a posting mode per workload item) under
    /// `blueflame` and `inline_max` may have its NIC's side computed at the hand-off: one
    /// mode (so one posting context and one path's latencies a NIC), and WQE fetches of
    /// one size (none with BlueFlame, else no inline data).
    pub(super) fn nic_side_applies(
        modes: &[PostingMode],
        blueflame: bool,
        inline_max: u64,
    ) -> bool {
        modes.windows(2).all(|w| w[0] == w[1]) && (blueflame || inline_max == 0)
    }

    /// The steps from the doorbell (reaching the NIC at `doorbell`) to the work request
    /// ready, for a message whose posting was just computed: the send engine is taken
    /// now, the stamps up to the fetch's end are written, and one wake-up is asked for
    /// at the ready (`ST_READY`).
    pub(super) fn post_nic_side(
        &mut self,
        flow: FlowId,
        doorbell: SimTime,
        out: &mut Vec<HostAction>,
    ) {
        let msg = self.msg(flow);
        let path = self.tx(msg.src, msg.workload);
        let cfg = &self.cfg;
        let inline = msg.size <= cfg.inline_max;
        // The WQE (and any inline payload) rides on the doorbell with BlueFlame, else
        // the NIC reads it (`start_read`).
        let fetched = if cfg.blueflame {
            doorbell
        } else {
            doorbell
                + cfg.pcie_round_trip
                + SimDuration(2 * path.control_extra.0)
                + serialization_delay(self.fetch_bytes(flow), cfg.pcie_bandwidth)
        };
        let processed = fetched.max(self.nics[msg.src as usize].proc_free) + cfg.wqe_processing;
        let ready = if inline || self.read {
            processed
        } else {
            processed
                + cfg.pcie_round_trip
                + SimDuration(2 * path.payload_extra.0)
                + serialization_delay(msg.size.min(self.mtu), path.dma_bandwidth)
        };
        let slots = cfg.max_outstanding_reads as usize;
        let n = &mut self.nics[msg.src as usize];
        n.proc_free = processed;
        // The messages between their doorbell and their ready at this doorbell (one
        // ready at it may still hold its slot: ties go either way).
        n.nic_side_ready.retain(|&t| t >= doorbell.0);
        if n.nic_side_ready.len() + 1 > slots {
            self.overflowed = true;
        }
        n.nic_side_ready.push(ready.0);
        let m = &mut self.msgs[flow as usize];
        m.t[T_DOORBELL] = doorbell.0;
        m.t[T_FETCHED] = fetched.0;
        m.processed = processed.0;
        out.push(HostAction::Wake {
            at: ready,
            nic: msg.src,
            wake: HostWake::Stage {
                flow,
                stage: ST_READY,
            },
        });
    }

    /// Bytes of `flow`'s WQE fetch (or of its BlueFlame doorbell write): the WQE and any
    /// inline payload.
    pub(super) fn fetch_bytes(&self, flow: FlowId) -> u64 {
        let size = self.msg(flow).size;
        self.cfg.wqe_bytes + if size <= self.cfg.inline_max { size } else { 0 }
    }

    /// The work request computed at the hand-off is ready: what the steps counted, and
    /// the queue pair may send.
    pub(super) fn nic_side_ready(&mut self, now: SimTime, flow: FlowId, out: &mut Vec<HostAction>) {
        self.count_nic_side(flow, now);
        self.wr_ready(now, flow, out);
    }

    /// What the steps of `flow`'s NIC side had counted by `by`: the posting's, the
    /// doorbell's and the fetch's (PCIe bytes, the fetch) at the doorbell, the payload
    /// read's bytes when the send engine is done. Stamps past `by` are taken back.
    fn count_nic_side(&mut self, flow: FlowId, by: SimTime) {
        let m = &self.msgs[flow as usize];
        let (doorbell, fetched, processed) =
            (SimTime(m.t[T_DOORBELL]), m.t[T_FETCHED], m.processed);
        let (size, src) = (m.msg.size, m.msg.src);
        if doorbell > by {
            // The doorbell had not reached the NIC: the posting counts what it did.
            let t = &mut self.msgs[flow as usize].t;
            t[T_DOORBELL] = u64::MAX;
            t[T_FETCHED] = u64::MAX;
            self.count_posting(flow, by);
            return;
        }
        self.count_posting(flow, doorbell);
        let fetch = self.fetch_bytes(flow);
        let payload = size > self.cfg.inline_max && !self.read;
        let stats = &mut self.nics[src as usize].stats;
        if !self.cfg.blueflame {
            stats.wqe_fetches += 1;
        }
        stats.pcie_bytes += fetch;
        if payload && processed <= by.0 {
            stats.pcie_bytes += size;
        }
        if fetched > by.0 {
            self.msgs[flow as usize].t[T_FETCHED] = u64::MAX;
        }
    }

    /// At the end of a run that stopped at `end`: a message whose NIC side was computed
    /// at its hand-off and is not ready yet counts what its steps had reached.
    pub(super) fn settle_nic_side(&mut self, flow: FlowId, end: SimTime) -> bool {
        let m = &self.msgs[flow as usize];
        let pending =
            m.processed != u64::MAX && m.t[T_RUNG] != u64::MAX && m.t[super::T_READY] == u64::MAX;
        if pending {
            self.count_nic_side(flow, end);
        }
        pending
    }

    /// A NIC would have held more messages between doorbell and ready than its DMA read
    /// slots: a read may have waited, and the run must go again with the NIC's steps
    /// stepped ([`Self::unfold_nic_side`]).
    pub fn nic_side_overflowed(&self) -> bool {
        self.overflowed
    }

    /// Steps the NIC's side of every message (a run going again after
    /// [`Self::nic_side_overflowed`], or a test comparing the two).
    pub fn unfold_nic_side(&mut self) {
        self.nic_side = false;
    }
}

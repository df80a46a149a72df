//! The posting of a message computed at its hand-off (issue 17): with one posting
//! context for its mode and one WQE a doorbell (the defaults), the context is a
//! first-come first-served server with a fixed time a job, so the doorbell's ring is
//! known when the message reaches the context, and the three steps the context would
//! take as events (the hand-off, the WQE written, the doorbell rung) are none. Every
//! timestamp and every count is the stepped posting's (`enqueue_post`,
//! `on_poster_done`); the test `folded_posting_matches_the_stepped_posting` compares the
//! two. Sources as in `components::host`.

use super::{
    mode_index, HostAction, HostPipeline, HostWake, CPU_POSTING, NONE, ST_DOORBELL, T_DOORBELL,
    T_RUNG,
};
use crate::engine::FlowId;
use crate::nic::config::PostingMode;
use crate::units::{SimDuration, SimTime};

impl HostPipeline {
    /// Whether a message posted in `mode` skips the posting context's steps
    /// (`post_folded`): one context for the mode and a doorbell for every WQE (the
    /// defaults: `doorbell_batch` 1, one proxy or CPU thread per NIC), and no READ (whose
    /// hand-offs come from the responders' copy engines, not in posting order).
    pub(super) fn folds_posting(&self, mode: PostingMode) -> bool {
        let contexts = match mode {
            PostingMode::Cpu | PostingMode::CpuGdr => self.cfg.posting_threads,
            PostingMode::CpuProxy => 1,
            PostingMode::Gpu => self.cfg.gpu_posting_threads,
        };
        self.fold && !self.read && contexts == 1 && self.cfg.doorbell_batch == 1
    }

    /// The posting of a message handed to its context at `at`, computed at once (issue
    /// 17: three events fewer a message). With one context and one WQE a doorbell, the
    /// context is a first-come first-served server whose every job takes
    /// `wqe_build + doorbell_mmio`: it starts at `max(at, free_at)` whatever the order of
    /// equal-time events, and the hand-offs come in posting order (`at` is the post's
    /// time plus a constant, or the copy engine's end, which only grows). So the
    /// doorbell's ring time is known now, and the message's next wake-up is the doorbell
    /// reaching the NIC, as the stepped posting (`enqueue_post`, `on_poster_done`)
    /// schedules it. What the context counts at the ring (the doorbell, its 8 PCIe bytes,
    /// the CPU's time) is counted when the doorbell arrives (`on_doorbell`), or at the end
    /// of a run that stops before (`settle_posting`), so every figure is the stepped
    /// posting's.
    pub(super) fn post_folded(&mut self, at: SimTime, flow: FlowId, out: &mut Vec<HostAction>) {
        let msg = self.msg(flow);
        let mode = self.msgs[flow as usize].mode;
        let (build, mmio) = self.posting_costs(mode);
        let latency = SimDuration(self.cfg.pcie_round_trip.0 / 2);
        let extra = self.tx(msg.src, msg.workload).control_extra;
        let p = &mut self.nics[msg.src as usize].posters[mode_index(mode)][0];
        let rung = at.max(p.free_at) + build + mmio;
        p.free_at = rung;
        let m = &mut self.msgs[flow as usize];
        m.t[T_RUNG] = rung.0;
        m.batch_len = 1;
        m.next_in_batch = NONE;
        if self.folds_nic_side(mode) {
            self.post_nic_side(flow, rung + latency + extra, out);
            return;
        }
        out.push(HostAction::Wake {
            at: rung + latency + extra,
            nic: msg.src,
            wake: HostWake::Stage {
                flow,
                stage: ST_DOORBELL,
            },
        });
    }

    /// A posting context's time for a WQE and for ringing its doorbell (the stepped
    /// posting's too).
    pub(super) fn posting_costs(&self, mode: PostingMode) -> (SimDuration, SimDuration) {
        let c = &self.cfg.costs;
        if mode == PostingMode::Gpu {
            (c.gpu_wqe_build, c.gpu_doorbell)
        } else {
            (c.wqe_build, c.doorbell_mmio)
        }
    }

    /// What a folded posting's context counts, for the steps it had begun by `by`: the
    /// CPU's time for the WQE (from its start) and for the doorbell write (from the
    /// WQE's end), and the doorbell itself (from the ring).
    pub(super) fn count_posting(&mut self, flow: FlowId, by: SimTime) {
        let m = &self.msgs[flow as usize];
        let (mode, src, rung) = (m.mode, m.msg.src, SimTime(m.t[T_RUNG]));
        let (build, mmio) = self.posting_costs(mode);
        let stats = &mut self.nics[src as usize].stats;
        if matches!(mode, PostingMode::Cpu | PostingMode::CpuGdr) {
            let start = SimTime(rung.0 - mmio.0 - build.0);
            if start <= by {
                stats.cpu_ps[CPU_POSTING] += build.0;
            }
            if start + build <= by {
                stats.cpu_ps[CPU_POSTING] += mmio.0;
            }
        }
        if rung <= by {
            stats.doorbells += 1;
            stats.pcie_bytes += 8;
            stats.touch(rung);
        } else {
            self.msgs[flow as usize].t[T_RUNG] = u64::MAX;
        }
    }

    /// At the end of a run that stopped at `end` (its last event, or its time limit):
    /// the folded postings whose doorbell had not reached its NIC count what their
    /// context had done by then, as the stepped posting would have.
    pub fn settle_posting(&mut self, end: SimTime) {
        for flow in 0..self.msgs.len() as FlowId {
            if self.settle_nic_side(flow, end) {
                continue;
            }
            let m = &self.msgs[flow as usize];
            if m.t[T_RUNG] != u64::MAX && m.t[T_DOORBELL] == u64::MAX && self.folds_posting(m.mode)
            {
                self.count_posting(flow, end);
            }
        }
    }
}

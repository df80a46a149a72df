//! The host pipeline's completion path: a CQE is written to its NIC's completion queue
//! (after half a PCIe round trip, `cqe_latency`), the consumer learns of it by polling
//! (a GPU thread, NCCL's proxy or a CPU core) or by an interrupt that the NIC's
//! moderation releases (`fire_irq`, NAPI-style while the handler runs), and a received
//! message may still be copied back into GPU memory (`notified`). A sender's CQE that a
//! GPU, the proxy or a spinning core polls is computed at the ACK instead of stepped
//! (`folds_send_cqe`): its handling only counts, so the counts wait for the first look
//! at or after its time (the record's retirement, the end of the run). Sources as in
//! `components::host`; split out of it to keep each file to one idea.

use super::{
    HostAction, HostPipeline, HostWake, CPU_COPIES, CPU_INTERRUPTS, T_CQE, T_DONE, T_NOTIFIED,
};
use crate::engine::FlowId;
use crate::nic::config::{Notify, PostingMode};
use crate::units::{serialization_delay, SimDuration, SimTime};

impl HostPipeline {
    /// A CQE was written to `nic`'s completion queue.
    pub(super) fn on_cqe(
        &mut self,
        now: SimTime,
        flow: FlowId,
        recv: bool,
        out: &mut Vec<HostAction>,
    ) {
        let msg = self.msg(flow);
        let nic = if recv {
            self.data_receiver(&msg)
        } else {
            msg.src
        };
        // The consumer of this CQ works in its own NIC's mode (a `stage` fallback on one
        // side does not change the other).
        let mode = if recv {
            self.rx(nic, msg.workload).mode
        } else {
            self.tx(nic, msg.workload).mode
        };
        if recv {
            self.msgs[flow as usize].t[T_CQE] = now.0;
        }
        if self.polls(mode) {
            let notified = self.count_polled_cqe(nic, mode, now);
            self.notified(notified, flow, recv, out);
            return;
        }
        let cqe_bytes = self.cfg.cqe_bytes;
        let n = &mut self.nics[nic as usize];
        n.stats.completions += 1;
        n.stats.pcie_bytes += cqe_bytes;
        n.stats.touch(now);
        n.irq_pending.push_back((flow, recv));
        let m = n
            .moderator
            .as_mut()
            .expect("interrupt mode has a moderator");
        if let Some(irq) = m.on_completion(now) {
            self.fire_irq(now, nic, irq.completions, out);
        } else {
            self.sync_irq_timer(nic, out);
        }
    }

    /// Whether a consumer in `mode` polls its CQ (the GPU and the proxy always do; a
    /// CPU thread unless completions interrupt).
    fn polls(&self, mode: PostingMode) -> bool {
        !matches!(mode, PostingMode::Cpu | PostingMode::CpuGdr)
            || !matches!(self.cfg.notify, Notify::Interrupt(_))
    }

    /// A CQE written at `at` to `nic`'s CQ, which a consumer in `mode` polls: counts it
    /// and returns when the consumer knows of it.
    fn count_polled_cqe(&mut self, nic: u32, mode: PostingMode, at: SimTime) -> SimTime {
        let c = self.cfg.costs;
        let cqe_bytes = self.cfg.cqe_bytes;
        let n = &mut self.nics[nic as usize];
        n.stats.completions += 1;
        n.stats.pcie_bytes += cqe_bytes;
        let notified = match mode {
            PostingMode::Gpu => at + c.gpu_cqe_poll,
            PostingMode::CpuProxy => {
                n.stats.proxy_core = true;
                at + c.cqe_poll + c.proxy_handoff
            }
            PostingMode::Cpu | PostingMode::CpuGdr => {
                n.stats.poll_core = true;
                at + c.cqe_poll
            }
        };
        n.stats.touch(at);
        n.stats.touch(notified);
        notified
    }

    /// Whether the sender's CQE of a message from `nic` for `workload` is computed
    /// ahead (issue 17: an event fewer a message). Polled, its handling only counts (the
    /// completion, its PCIe bytes, the consumer's activity) and lets the message's
    /// record go (`send_open`), so the counts are taken at the first look at or after
    /// its time (`count_send_cqe`: the record's retirement, or the end of the run) and
    /// every figure is the stepped CQE's. An interrupt's moderation is shared by the
    /// NIC's completions in their order, so it keeps its wake-up.
    pub(super) fn folds_send_cqe(&self, nic: u32, workload: u16) -> bool {
        self.fold && self.polls(self.tx(nic, workload).mode)
    }

    /// Counts `flow`'s sender CQE computed ahead, if one waits.
    pub fn count_send_cqe(&mut self, flow: FlowId) {
        let m = &mut self.msgs[flow as usize];
        if m.send_cqe == 0 {
            return;
        }
        let at = SimTime(m.send_cqe);
        m.send_cqe = 0;
        let (nic, workload) = (m.msg.src, m.msg.workload);
        let mode = self.tx(nic, workload).mode;
        self.count_polled_cqe(nic, mode, at);
        self.send_cqes_counted_to = self.send_cqes_counted_to.max(at);
    }

    /// The latest sender's CQE computed ahead that is due by `by` or was counted, or
    /// zero: what [`Self::settle_send_cqes`] will return, read without counting (the
    /// run's last samples are taken up to it first, as its wake-up would have).
    pub fn send_cqes_end(&self, by: SimTime) -> SimTime {
        self.msgs
            .iter()
            .filter(|m| m.send_cqe != 0 && m.send_cqe <= by.0)
            .map(|m| SimTime(m.send_cqe))
            .fold(self.send_cqes_counted_to, SimTime::max)
    }

    /// At the end of a run: counts the senders' CQEs computed ahead that are due by
    /// `by` (the run's time limit, the time it stopped at, or without either every one)
    /// and returns the latest counted in the run (it lasted until then: a split run may
    /// have counted one at a meeting past its last event), or zero.
    pub fn settle_send_cqes(&mut self, by: SimTime) -> SimTime {
        for flow in 0..self.msgs.len() as FlowId {
            let at = self.msgs[flow as usize].send_cqe;
            if at != 0 && at <= by.0 {
                self.count_send_cqe(flow);
            }
        }
        self.send_cqes_counted_to
    }

    pub(super) fn sync_irq_timer(&mut self, nic: u32, out: &mut Vec<HostAction>) {
        let n = &mut self.nics[nic as usize];
        let Some(t) = n.moderator.as_ref().and_then(|m| m.next_timeout()) else {
            return;
        };
        if n.irq_at.map_or(true, |s| t < s) {
            n.irq_at = Some(t);
            out.push(HostAction::Wake {
                at: t,
                nic,
                wake: HostWake::Irq { nic },
            });
        }
    }

    /// Returns whether the moderation timer was due.
    pub(super) fn on_irq_timer(
        &mut self,
        now: SimTime,
        nic: u32,
        out: &mut Vec<HostAction>,
    ) -> bool {
        let n = &mut self.nics[nic as usize];
        if n.irq_at != Some(now) {
            return false;
        }
        n.irq_at = None;
        let m = n
            .moderator
            .as_mut()
            .expect("interrupt mode has a moderator");
        match m.handle_timeout(now) {
            Some(irq) => {
                self.fire_irq(now, nic, irq.completions, out);
                true
            }
            None => {
                self.sync_irq_timer(nic, out);
                false
            }
        }
    }

    /// The moderation says interrupt: a core runs the hard IRQ and the softirq, then
    /// handles each pending completion in turn. One core serves a CQ's interrupts: while
    /// its handler still runs the CQ is not re-armed, so completions the moderator
    /// releases meanwhile are picked up by the running handler (`cqe_poll` each) instead
    /// of raising another interrupt (NAPI-style).
    pub(super) fn fire_irq(
        &mut self,
        now: SimTime,
        nic: u32,
        completions: u32,
        out: &mut Vec<HostAction>,
    ) {
        let c = self.cfg.costs;
        let n = &mut self.nics[nic as usize];
        let mut at = if now >= n.irq_busy_until {
            n.stats.interrupts += 1;
            n.stats.cpu_ps[CPU_INTERRUPTS] += c.hard_irq.0 + c.softirq.0;
            now + c.hard_irq + c.softirq
        } else {
            n.irq_busy_until
        };
        n.stats.cpu_ps[CPU_INTERRUPTS] += completions as u64 * c.cqe_poll.0;
        n.irq_busy_until = at + SimDuration(completions as u64 * c.cqe_poll.0);
        let busy = n.irq_busy_until;
        n.stats.touch(busy);
        self.sync_irq_timer(nic, out);
        for _ in 0..completions {
            let (flow, recv) = self.nics[nic as usize]
                .irq_pending
                .pop_front()
                .expect("an interrupt reports pending completions");
            at += c.cqe_poll;
            self.notified(at, flow, recv, out);
        }
    }

    /// The consumer knows of the completion at `at`; a received message may still need
    /// its copy back into GPU memory.
    pub(super) fn notified(
        &mut self,
        at: SimTime,
        flow: FlowId,
        recv: bool,
        out: &mut Vec<HostAction>,
    ) {
        if !recv {
            self.msgs[flow as usize].send_open = false;
            return;
        }
        let msg = self.msg(flow);
        let rx = self.data_receiver(&msg);
        let staged = self.rx(rx, msg.workload).staged;
        let (copy_launch, pcie) = (self.cfg.costs.copy_launch, self.cfg.pcie_bandwidth);
        self.msgs[flow as usize].t[T_NOTIFIED] = at.0;
        let mut done = at;
        if staged {
            let n = &mut self.nics[rx as usize];
            let start = at.max(n.ce_free);
            done = start + copy_launch + serialization_delay(msg.size, pcie);
            n.ce_free = done;
            n.stats.cpu_ps[CPU_COPIES] += copy_launch.0;
            n.stats.pcie_bytes += msg.size;
        }
        self.nics[rx as usize].stats.touch(done);
        self.msgs[flow as usize].t[T_DONE] = done.0;
        out.push(HostAction::Done { at: done, flow });
    }

    /// From a message landing (or its ACK arriving) to its CQE being visible: half a PCIe
    /// round trip, plus the CPU interconnect when the CQ is in GPU memory across sockets
    /// or, for a received message, when its data (which the CQE follows in order) crosses
    /// it.
    pub(super) fn cqe_latency(&self, nic: u32, workload: u16, recv: bool) -> SimDuration {
        let p = if recv {
            self.rx(nic, workload)
        } else {
            self.tx(nic, workload)
        };
        let extra = if recv {
            p.control_extra.max(p.payload_extra)
        } else {
            p.control_extra
        };
        SimDuration(self.cfg.pcie_round_trip.0 / 2) + extra
    }
}

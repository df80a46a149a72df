//! Glue between the host and NIC model (`nic`) and the event queue: a message's life
//! from the moment its application wants to send it to the moment the receiver's
//! application may use it.
//!
//! Stages, each a timestamp in [`MsgTimes`] so that they sum to the end-to-end latency
//! exactly:
//! 1. `copy_in`: `cpu` mode with GPU memory: the CPU launches a GPU-to-host copy
//!    (`copy_launch`) and the copy engine moves the bytes at PCIe bandwidth.
//! 2. `post`: the CPU proxy hand-off (`cpu_proxy`), waiting for a posting thread, building
//!    the WQE and, once the batch is complete (`doorbell_batch` WQEs, or nothing else
//!    waiting), the doorbell's MMIO write.
//! 3. `doorbell`: the MMIO write crossing PCIe (half a round trip).
//! 4. `fetch`: the NIC's DMA read of the batch's WQEs (a round trip plus the bytes), after
//!    waiting for one of `max_outstanding_reads` read slots; none with BlueFlame (a single
//!    WQE pushed with its doorbell).
//! 5. `dma`: the NIC's send engine (`wqe_processing` per WQE, one at a time) and the
//!    payload's first read (a round trip plus the first packet's bytes; none for inline
//!    data); the rest of the payload streams at the DMA bandwidth while packets leave.
//! 6. `wire`: queue-pair scheduling, the fabric and any retransmission, until the last
//!    byte reaches the receiving NIC.
//! 7. `completion`: the CQE's DMA write (half a round trip, after the data).
//! 8. `notification`: the consumer learns of it: a spinning core or GPU thread reads the
//!    CQE (`cqe_poll`, `gpu_cqe_poll`), the proxy passes it on (`proxy_handoff`), or the
//!    moderated interrupt fires and its handler runs (`hard_irq + softirq` and
//!    `cqe_poll` per completion handled before this one).
//! 9. `copy_back`: `cpu` mode with GPU memory: the host-to-GPU copy, as in 1.
//!
//! The sender's own completion (after the ACK) goes through 7 and 8 too: it costs CPU and
//! interrupts but is not on the message's latency path.

use super::transport::job_requester;
use super::{Sim, NO_QP};
use crate::engine::{Event, FlowId};
use crate::nic::config::PostingMode;
use crate::nic::config::{DataPath, HostConfig, ModerationConfig, Notify};
use crate::nic::interrupts::{InterruptModerator, DIM_LEVELS};
use crate::transport::rc::Op;
use crate::units::{serialization_delay, SimDuration, SimTime};
use std::collections::VecDeque;

/// Message timestamps, in stage order.
pub const T_START: usize = 0;
pub const T_COPIED: usize = 1;
pub const T_RUNG: usize = 2;
pub const T_DOORBELL: usize = 3;
pub const T_FETCHED: usize = 4;
pub const T_READY: usize = 5;
pub const T_DELIVERED: usize = 6;
pub const T_CQE: usize = 7;
pub const T_NOTIFIED: usize = 8;
pub const T_DONE: usize = 9;

/// Stage names: stage `i` runs from timestamp `i` to timestamp `i + 1`.
pub const STAGES: [&str; 9] = [
    "copy_in",
    "post",
    "doorbell",
    "fetch",
    "dma",
    "wire",
    "completion",
    "notification",
    "copy_back",
];

/// `FlowStage` event stages.
pub const ST_TO_POSTER: u8 = 0;
pub const ST_DOORBELL: u8 = 1;
pub const ST_FETCHED: u8 = 2;
pub const ST_PROCESSED: u8 = 3;
pub const ST_PAYLOAD: u8 = 4;
pub const ST_RECV_CQE: u8 = 5;
pub const ST_SEND_CQE: u8 = 6;

const NONE: FlowId = FlowId::MAX;

/// CPU time categories.
pub const CPU_POSTING: usize = 0;
pub const CPU_INTERRUPTS: usize = 1;
pub const CPU_COPIES: usize = 2;
pub const CPU_POLLING: usize = 3;
pub const CPU_PROXY: usize = 4;
pub const CPU_CATEGORIES: [&str; 5] = ["posting", "interrupts", "copies", "polling", "proxy"];

/// A message's record.
#[derive(Clone, Copy, Debug)]
pub struct MsgTimes {
    /// Timestamps (ps); `u64::MAX` until reached.
    pub t: [u64; 10],
    /// Next WQE in the same doorbell batch.
    next_in_batch: FlowId,
    batch_len: u32,
    /// Posting mode index and whether its data is staged.
    pub mode: PostingMode,
}

impl MsgTimes {
    pub fn done(&self) -> bool {
        self.t[T_DONE] != u64::MAX
    }
}

/// A posting context: a CPU thread, the proxy thread or a GPU thread.
#[derive(Debug, Default)]
struct Poster {
    queue: VecDeque<FlowId>,
    busy: bool,
    /// Ringing the doorbell (else building a WQE).
    ringing: bool,
    batch_head: FlowId,
    batch_tail: FlowId,
    batch_len: u32,
}

/// Per-NIC counters, reported under `host` in `summary.json`.
#[derive(Clone, Debug, Default)]
pub struct NicStats {
    pub doorbells: u64,
    pub wqe_fetches: u64,
    pub pcie_bytes: u64,
    pub completions: u64,
    pub interrupts: u64,
    /// CPU time by category (`CPU_*`), ps.
    pub cpu_ps: [u64; 5],
    /// A core spins on this NIC's completions (`cpu`/`cpu_gdr` polling) or runs its proxy.
    pub poll_core: bool,
    pub proxy_core: bool,
    pub first_activity: Option<SimTime>,
    /// When its last completion was handled.
    pub last_activity: SimTime,
    pub moderation_level_changes: u64,
}

impl NicStats {
    /// Something happened on this NIC (or its host's side of it) at `t`.
    fn touch(&mut self, t: SimTime) {
        self.first_activity = Some(self.first_activity.map_or(t, |f| f.min(t)));
        self.last_activity = self.last_activity.max(t);
    }
}

struct NicState {
    posters: [Vec<Poster>; 4],
    reads_out: u32,
    read_wait: VecDeque<(FlowId, u8)>,
    proc_free: SimTime,
    /// The payload DMA may read the next packet's bytes from this time.
    pub dma_next: SimTime,
    /// Copy engine of the NIC's GPU.
    ce_free: SimTime,
    moderator: Option<InterruptModerator>,
    irq_at: Option<SimTime>,
    /// The core handling this NIC's interrupts is busy until then.
    irq_busy_until: SimTime,
    irq_pending: VecDeque<(FlowId, bool)>,
    stats: NicStats,
}

/// The host model's state for a run.
pub struct HostModel {
    pub cfg: HostConfig,
    nics: Vec<NicState>,
    pub msgs: Vec<MsgTimes>,
    /// Data path per local NIC, posting mode, and side: 0 where the data is read (the
    /// source memory), 1 where it is written (the destination memory).
    paths: Vec<[[Option<DataPath>; 2]; 4]>,
    /// Posting mode per workload item.
    modes: Vec<PostingMode>,
}

/// What the host model leaves behind for metrics.
#[derive(Debug)]
pub struct HostOutput {
    pub cfg: HostConfig,
    pub nics: Vec<NicStats>,
    pub msgs: Vec<MsgTimes>,
}

fn mode_index(m: PostingMode) -> usize {
    match m {
        PostingMode::Cpu => 0,
        PostingMode::CpuGdr => 1,
        PostingMode::CpuProxy => 2,
        PostingMode::Gpu => 3,
    }
}
const MODES: [PostingMode; 4] = [
    PostingMode::Cpu,
    PostingMode::CpuGdr,
    PostingMode::CpuProxy,
    PostingMode::Gpu,
];

impl HostModel {
    pub fn new(
        cfg: &HostConfig,
        hosts: u32,
        flows: usize,
        posting: &[Option<PostingMode>],
    ) -> Self {
        let paths = (0..cfg.nics_per_host)
            .map(|n| {
                let mut a = [[None; 2]; 4];
                for m in MODES {
                    a[mode_index(m)] = [
                        cfg.data_path(n, m, cfg.memory_source).ok(),
                        cfg.data_path(n, m, cfg.memory_destination).ok(),
                    ];
                }
                a
            })
            .collect();
        let nics = (0..hosts)
            .map(|_| {
                let posters = MODES.map(|m| {
                    let n = match m {
                        PostingMode::Cpu | PostingMode::CpuGdr => cfg.posting_threads,
                        PostingMode::CpuProxy => 1,
                        PostingMode::Gpu => cfg.gpu_posting_threads,
                    };
                    (0..n)
                        .map(|_| Poster {
                            batch_head: NONE,
                            batch_tail: NONE,
                            ..Poster::default()
                        })
                        .collect()
                });
                let moderator = match &cfg.notify {
                    Notify::Poll => None,
                    Notify::Interrupt(ModerationConfig::Off) => Some(InterruptModerator::fixed(
                        crate::nic::interrupts::Moderation {
                            usecs: SimDuration::ZERO,
                            frames: 1,
                        },
                    )),
                    Notify::Interrupt(ModerationConfig::Fixed(m)) => {
                        Some(InterruptModerator::fixed(*m))
                    }
                    Notify::Interrupt(ModerationConfig::Adaptive) => {
                        Some(InterruptModerator::adaptive(DIM_LEVELS.to_vec(), 2))
                    }
                };
                NicState {
                    posters,
                    reads_out: 0,
                    read_wait: VecDeque::new(),
                    proc_free: SimTime::ZERO,
                    dma_next: SimTime::ZERO,
                    ce_free: SimTime::ZERO,
                    moderator,
                    irq_at: None,
                    irq_busy_until: SimTime::ZERO,
                    irq_pending: VecDeque::new(),
                    stats: NicStats::default(),
                }
            })
            .collect();
        HostModel {
            modes: posting.iter().map(|m| m.unwrap_or(cfg.posting)).collect(),
            cfg: cfg.clone(),
            nics,
            msgs: vec![
                MsgTimes {
                    t: [u64::MAX; 10],
                    next_in_batch: NONE,
                    batch_len: 0,
                    mode: cfg.posting,
                };
                flows
            ],
            paths,
        }
    }

    fn path(&self, nic: u32, workload: u16, side: usize) -> DataPath {
        let mode = self.modes[workload as usize];
        self.paths[self.cfg.local_nic(nic) as usize][mode_index(mode)][side]
            .expect("every posting mode in use has a data path (checked by validation)")
    }

    /// The path on `nic` to a message's source buffer (and the posting side's mode).
    fn tx(&self, nic: u32, workload: u16) -> DataPath {
        self.path(nic, workload, 0)
    }

    /// The path on `nic` to a message's destination buffer.
    fn rx(&self, nic: u32, workload: u16) -> DataPath {
        self.path(nic, workload, 1)
    }

    /// A flow was added during the run (a collective's transfer).
    pub fn add_flow(&mut self) {
        self.msgs.push(MsgTimes {
            t: [u64::MAX; 10],
            next_in_batch: NONE,
            batch_len: 0,
            mode: self.cfg.posting,
        });
    }

    /// A message with no posting side (sent by a switch) starts at `t`: every stage up
    /// to `wire` takes no time.
    pub fn started_at(&mut self, flow: FlowId, t: SimTime) {
        let m = &mut self.msgs[flow as usize];
        for x in &mut m.t[T_START..=T_READY] {
            *x = t.0;
        }
    }

    /// When `nic` may DMA the next payload bytes.
    pub fn dma_next(&self, nic: u32) -> SimTime {
        self.nics[nic as usize].dma_next
    }

    pub fn into_output(self) -> HostOutput {
        HostOutput {
            cfg: self.cfg,
            nics: self
                .nics
                .into_iter()
                .map(|mut n| {
                    if let Some(m) = &n.moderator {
                        n.stats.moderation_level_changes = m.stats.level_changes;
                    }
                    n.stats
                })
                .collect(),
            msgs: self.msgs,
        }
    }
}

impl Sim {
    fn hm(&mut self) -> &mut HostModel {
        self.hostm.as_mut().expect("host model")
    }

    /// The NIC whose CQ reports `flow`'s data arriving: the receiver of its bytes.
    fn data_receiver(&self, flow: FlowId) -> u32 {
        let d = &self.flows[flow as usize].def;
        let read = self.rc.as_ref().is_some_and(|r| r.operation == Op::Read);
        if read {
            d.src
        } else {
            d.dst
        }
    }

    /// A message's application wants to send it: start its posting path.
    pub(super) fn begin_post(&mut self, now: SimTime, flow: FlowId) {
        let def = self.flows[flow as usize].def;
        let read = self.rc.as_ref().is_some_and(|r| r.operation == Op::Read);
        // The GPU holding the data stages it: the requester's, or for a READ the
        // responder's.
        let source = if read { def.dst } else { def.src };
        let h = self.hostm.as_mut().expect("host model");
        let path = h.tx(def.src, def.workload);
        let staged = h.tx(source, def.workload).staged;
        let cfg = &h.cfg;
        let (copy_launch, pcie, handoff) = (
            cfg.costs.copy_launch,
            cfg.pcie_bandwidth,
            cfg.costs.proxy_handoff,
        );
        let m = &mut h.msgs[flow as usize];
        m.mode = path.mode;
        m.t[T_START] = now.0;
        h.nics[def.src as usize].stats.touch(now);
        let nic = &mut h.nics[source as usize];
        let mut at = now;
        if staged {
            // GPU to host: launched by the CPU, carried by the GPU's copy engine.
            let start = now.max(nic.ce_free);
            at = start + copy_launch + serialization_delay(def.size, pcie);
            nic.ce_free = at;
            nic.stats.cpu_ps[CPU_COPIES] += copy_launch.0;
            nic.stats.pcie_bytes += def.size;
            nic.stats.touch(at);
        }
        m.t[T_COPIED] = at.0;
        if path.mode == PostingMode::CpuProxy {
            at += handoff;
        }
        if at > now {
            self.q.schedule(
                at,
                self.src.nic(source),
                Event::FlowStage {
                    flow,
                    stage: ST_TO_POSTER,
                },
            );
        } else {
            self.enqueue_post(now, flow);
        }
    }

    /// The WQE joins the least-loaded posting context of its mode.
    fn enqueue_post(&mut self, now: SimTime, flow: FlowId) {
        let src = self.flows[flow as usize].def.src;
        let h = self.hm();
        let mi = mode_index(h.msgs[flow as usize].mode);
        let posters = &mut h.nics[src as usize].posters[mi];
        let (p, _) = posters
            .iter()
            .enumerate()
            .min_by_key(|(i, p)| (p.busy as usize + p.queue.len(), *i))
            .expect("at least one posting context");
        posters[p].queue.push_back(flow);
        if !posters[p].busy {
            self.poster_step(now, src, (mi << 16 | p) as u32);
        }
    }

    /// The posting context starts its next WQE.
    fn poster_step(&mut self, now: SimTime, nic: u32, id: u32) {
        let (mi, pi) = ((id >> 16) as usize, (id & 0xffff) as usize);
        let h = self.hm();
        let mode = MODES[mi];
        let cost = if mode == PostingMode::Gpu {
            h.cfg.costs.gpu_wqe_build
        } else {
            h.cfg.costs.wqe_build
        };
        let n = &mut h.nics[nic as usize];
        let p = &mut n.posters[mi][pi];
        if p.queue.is_empty() {
            p.busy = false;
            return;
        }
        p.busy = true;
        p.ringing = false;
        if matches!(mode, PostingMode::Cpu | PostingMode::CpuGdr) {
            n.stats.cpu_ps[CPU_POSTING] += cost.0;
        }
        self.q.schedule(
            now + cost,
            self.src.nic(nic),
            Event::PosterDone { nic, poster: id },
        );
    }

    pub(super) fn on_poster_done(&mut self, now: SimTime, nic: u32, id: u32) {
        let (mi, pi) = ((id >> 16) as usize, (id & 0xffff) as usize);
        let h = self.hostm.as_mut().expect("host model");
        let mode = MODES[mi];
        let (batch_max, mmio, latency) = (
            h.cfg.doorbell_batch,
            if mode == PostingMode::Gpu {
                h.cfg.costs.gpu_doorbell
            } else {
                h.cfg.costs.doorbell_mmio
            },
            SimDuration(h.cfg.pcie_round_trip.0 / 2),
        );
        let n = &mut h.nics[nic as usize];
        let p = &mut n.posters[mi][pi];
        if p.ringing {
            // The doorbell write has left the CPU (or GPU): it reaches the NIC half a
            // PCIe round trip later, with the batch.
            let head = p.batch_head;
            p.batch_head = NONE;
            p.batch_tail = NONE;
            let len = p.batch_len;
            p.batch_len = 0;
            n.stats.doorbells += 1;
            n.stats.pcie_bytes += 8;
            n.stats.touch(now);
            let mut f = head;
            let mut extra = SimDuration::ZERO;
            while f != NONE {
                let m = &mut h.msgs[f as usize];
                m.t[T_RUNG] = now.0;
                f = m.next_in_batch;
            }
            h.msgs[head as usize].batch_len = len;
            let def = self.flows[head as usize].def;
            extra += h.tx(def.src, def.workload).control_extra;
            self.q.schedule(
                now + latency + extra,
                self.src.nic(nic),
                Event::FlowStage {
                    flow: head,
                    stage: ST_DOORBELL,
                },
            );
            self.poster_step(now, nic, id);
            return;
        }
        // A WQE is written: it joins the batch.
        let flow = p.queue.pop_front().expect("a WQE was being built");
        if p.batch_tail == NONE {
            p.batch_head = flow;
        } else {
            h.msgs[p.batch_tail as usize].next_in_batch = flow;
        }
        p.batch_tail = flow;
        p.batch_len += 1;
        h.msgs[flow as usize].next_in_batch = NONE;
        if p.batch_len >= batch_max || p.queue.is_empty() {
            p.ringing = true;
            if matches!(mode, PostingMode::Cpu | PostingMode::CpuGdr) {
                n.stats.cpu_ps[CPU_POSTING] += mmio.0;
            }
            self.q.schedule(
                now + mmio,
                self.src.nic(nic),
                Event::PosterDone { nic, poster: id },
            );
        } else {
            self.poster_step(now, nic, id);
        }
    }

    pub(super) fn on_flow_stage(&mut self, now: SimTime, flow: FlowId, stage: u8) {
        match stage {
            ST_TO_POSTER => self.enqueue_post(now, flow),
            ST_DOORBELL => self.on_doorbell(now, flow),
            ST_FETCHED => {
                self.read_done(now, flow);
                let mut f = flow;
                while f != NONE {
                    self.hm().msgs[f as usize].t[T_FETCHED] = now.0;
                    self.process(now, f);
                    f = self.hm().msgs[f as usize].next_in_batch;
                }
            }
            ST_PROCESSED => {
                let def = self.flows[flow as usize].def;
                let inline = def.size <= self.hm().cfg.inline_max;
                let read = self.rc.as_ref().is_some_and(|r| r.operation == Op::Read);
                if inline || read {
                    self.wr_ready(now, flow);
                } else {
                    self.request_read(now, flow, ST_PAYLOAD);
                }
            }
            ST_PAYLOAD => {
                self.read_done(now, flow);
                self.wr_ready(now, flow);
            }
            ST_RECV_CQE => self.on_cqe(now, flow, true),
            ST_SEND_CQE => self.on_cqe(now, flow, false),
            _ => unreachable!("unknown flow stage {stage}"),
        }
    }

    /// The doorbell (and with BlueFlame, the WQE) reaches the NIC.
    fn on_doorbell(&mut self, now: SimTime, head: FlowId) {
        let h = self.hm();
        let blueflame = h.cfg.blueflame;
        let len = h.msgs[head as usize].batch_len;
        let mut f = head;
        while f != NONE {
            let m = &mut h.msgs[f as usize];
            m.t[T_DOORBELL] = now.0;
            f = m.next_in_batch;
        }
        if blueflame && len == 1 {
            let def = self.flows[head as usize].def;
            let h = self.hm();
            // The WQE (with any inline payload) rode on the doorbell write.
            let inline = if def.size <= h.cfg.inline_max {
                def.size
            } else {
                0
            };
            let bytes = h.cfg.wqe_bytes + inline;
            h.nics[def.src as usize].stats.pcie_bytes += bytes;
            self.hm().msgs[head as usize].t[T_FETCHED] = now.0;
            self.process(now, head);
        } else {
            self.request_read(now, head, ST_FETCHED);
        }
    }

    /// The NIC's send engine takes one WQE at a time.
    fn process(&mut self, now: SimTime, flow: FlowId) {
        let src = self.flows[flow as usize].def.src;
        let h = self.hm();
        let cost = h.cfg.wqe_processing;
        let n = &mut h.nics[src as usize];
        let done = now.max(n.proc_free) + cost;
        n.proc_free = done;
        if done > now {
            self.q.schedule(
                done,
                self.src.nic(src),
                Event::FlowStage {
                    flow,
                    stage: ST_PROCESSED,
                },
            );
        } else {
            self.on_flow_stage(now, flow, ST_PROCESSED);
        }
    }

    /// A DMA read (a WQE fetch for a batch, or a payload's first read) asks for a slot.
    fn request_read(&mut self, now: SimTime, flow: FlowId, kind: u8) {
        let src = self.flows[flow as usize].def.src;
        let h = self.hm();
        let max = h.cfg.max_outstanding_reads;
        let n = &mut h.nics[src as usize];
        if n.reads_out < max {
            n.reads_out += 1;
            self.start_read(now, flow, kind);
        } else {
            n.read_wait.push_back((flow, kind));
        }
    }

    fn start_read(&mut self, now: SimTime, flow: FlowId, kind: u8) {
        let def = self.flows[flow as usize].def;
        let mtu = self.mtu;
        let h = self.hostm.as_mut().expect("host model");
        let path = h.tx(def.src, def.workload);
        let cfg = &h.cfg;
        let (bytes, extra, bw) = if kind == ST_FETCHED {
            // Every WQE of the batch, with any inline payload.
            let mut bytes = 0;
            let mut f = flow;
            while f != NONE {
                let size = self.flows[f as usize].def.size;
                bytes += cfg.wqe_bytes + if size <= cfg.inline_max { size } else { 0 };
                f = h.msgs[f as usize].next_in_batch;
            }
            h.nics[def.src as usize].stats.wqe_fetches += 1;
            (bytes, path.control_extra, cfg.pcie_bandwidth)
        } else {
            h.nics[def.src as usize].stats.pcie_bytes += def.size;
            (def.size.min(mtu), path.payload_extra, path.dma_bandwidth)
        };
        if kind == ST_FETCHED {
            h.nics[def.src as usize].stats.pcie_bytes += bytes;
        }
        let at =
            now + cfg.pcie_round_trip + SimDuration(2 * extra.0) + serialization_delay(bytes, bw);
        let source = self.src.nic(def.src);
        self.q
            .schedule(at, source, Event::FlowStage { flow, stage: kind });
    }

    /// A read finished: its slot goes to the next waiting read.
    fn read_done(&mut self, now: SimTime, flow: FlowId) {
        let src = self.flows[flow as usize].def.src;
        let n = &mut self.hm().nics[src as usize];
        if let Some((f, kind)) = n.read_wait.pop_front() {
            self.start_read(now, f, kind);
        } else {
            n.reads_out -= 1;
        }
    }

    /// The NIC has the WQE and the first payload bytes: the queue pair (or raw flow) may
    /// send.
    fn wr_ready(&mut self, now: SimTime, flow: FlowId) {
        self.hm().msgs[flow as usize].t[T_READY] = now.0;
        let src = self.flows[flow as usize].def.src;
        self.hm().nics[src as usize].stats.touch(now);
        if self.rc.is_none() || self.flows[flow as usize].raw {
            let job = if self.rc.is_none() {
                flow
            } else {
                super::RAW_JOB | flow
            };
            self.nics[src as usize].activate(job);
            self.kick(now, src);
            return;
        }
        let slot = self.flows[flow as usize].qp;
        debug_assert!(slot != NO_QP);
        let op = self.rc.as_ref().map_or(Op::Write, |r| r.operation);
        // The requester takes work requests in posting order: this one, and any later
        // ones that were ready first, once everything before them is.
        let h = self.hostm.as_ref().expect("host model");
        let qp = &mut self.qps[slot as usize];
        while let Some(&next) = qp.pipeline.front() {
            if h.msgs[next as usize].t[T_READY] == u64::MAX {
                break;
            }
            qp.pipeline.pop_front();
            qp.req
                .post(next as u64, op, self.flows[next as usize].def.size);
        }
        if !qp.req_listed && qp.req.has_work() {
            qp.req_listed = true;
            self.nics[src as usize].activate(job_requester(slot));
        }
        self.after_requester_input(now, slot);
    }

    /// The payload DMA read `payload` bytes of `flow` for a packet: the next may be read
    /// one transfer time later (PCIe read bandwidth caps the NIC's send rate).
    pub(super) fn dma_read(&mut self, now: SimTime, nic: u32, flow: FlowId, payload: u64) {
        let def = self.flows[flow as usize].def;
        let h = self.hm();
        if def.size <= h.cfg.inline_max {
            return; // the payload came with the WQE
        }
        let bw = h.tx(nic, def.workload).dma_bandwidth;
        let n = &mut h.nics[nic as usize];
        n.dma_next = n.dma_next.max(now) + serialization_delay(payload, bw);
    }

    /// The last byte of `flow` reached its receiver's NIC.
    pub(super) fn on_delivered(&mut self, now: SimTime, flow: FlowId) {
        if self.hostm.is_none() {
            self.message_done(now, flow);
            return;
        }
        let rx = self.data_receiver(flow);
        let def = self.flows[flow as usize].def;
        let h = self.hm();
        if h.msgs[flow as usize].t[T_DELIVERED] != u64::MAX {
            return;
        }
        h.msgs[flow as usize].t[T_DELIVERED] = now.0;
        let at = now + h.cqe_latency(rx, def.workload, true);
        let n = &mut h.nics[rx as usize];
        n.stats.pcie_bytes += def.size;
        n.stats.touch(now);
        self.q.schedule(
            at,
            self.src.nic(rx),
            Event::FlowStage {
                flow,
                stage: ST_RECV_CQE,
            },
        );
    }

    /// The requester's WRITE or SEND completed (its ACK arrived).
    pub(super) fn on_send_completed(&mut self, now: SimTime, flow: FlowId) {
        let def = self.flows[flow as usize].def;
        let Some(h) = self.hostm.as_mut() else {
            return;
        };
        let at = now + h.cqe_latency(def.src, def.workload, false);
        self.q.schedule(
            at,
            self.src.nic(def.src),
            Event::FlowStage {
                flow,
                stage: ST_SEND_CQE,
            },
        );
    }

    /// A CQE was written to `nic`'s completion queue.
    fn on_cqe(&mut self, now: SimTime, flow: FlowId, recv: bool) {
        let nic = if recv {
            self.data_receiver(flow)
        } else {
            self.flows[flow as usize].def.src
        };
        let workload = self.flows[flow as usize].def.workload;
        let h = self.hm();
        let c = h.cfg.costs;
        let cqe_bytes = h.cfg.cqe_bytes;
        // The consumer of this CQ works in its own NIC's mode (a `stage` fallback on one
        // side does not change the other).
        let mode = if recv {
            h.rx(nic, workload).mode
        } else {
            h.tx(nic, workload).mode
        };
        let interrupts = matches!(h.cfg.notify, Notify::Interrupt(_));
        if recv {
            h.msgs[flow as usize].t[T_CQE] = now.0;
        }
        let n = &mut h.nics[nic as usize];
        n.stats.completions += 1;
        n.stats.pcie_bytes += cqe_bytes;
        let notified = match mode {
            PostingMode::Gpu => now + c.gpu_cqe_poll,
            PostingMode::CpuProxy => {
                n.stats.proxy_core = true;
                now + c.cqe_poll + c.proxy_handoff
            }
            PostingMode::Cpu | PostingMode::CpuGdr if !interrupts => {
                n.stats.poll_core = true;
                now + c.cqe_poll
            }
            PostingMode::Cpu | PostingMode::CpuGdr => {
                n.stats.touch(now);
                n.irq_pending.push_back((flow, recv));
                let m = n
                    .moderator
                    .as_mut()
                    .expect("interrupt mode has a moderator");
                if let Some(irq) = m.on_completion(now) {
                    self.fire_irq(now, nic, irq.completions);
                } else {
                    self.sync_irq_timer(nic);
                }
                return;
            }
        };
        n.stats.touch(now);
        n.stats.touch(notified);
        self.notified(notified, flow, recv);
    }

    fn sync_irq_timer(&mut self, nic: u32) {
        let n = &mut self.hm().nics[nic as usize];
        let Some(t) = n.moderator.as_ref().and_then(|m| m.next_timeout()) else {
            return;
        };
        if n.irq_at.map_or(true, |s| t < s) {
            n.irq_at = Some(t);
            self.q.schedule(t, self.src.nic(nic), Event::Irq { nic });
        }
    }

    /// Returns whether the moderation timer was due.
    pub(super) fn on_irq_timer(&mut self, now: SimTime, nic: u32) -> bool {
        let n = &mut self.hm().nics[nic as usize];
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
                self.fire_irq(now, nic, irq.completions);
                true
            }
            None => {
                self.sync_irq_timer(nic);
                false
            }
        }
    }

    /// The moderation says interrupt: a core runs the hard IRQ and the softirq, then
    /// handles each pending completion in turn. One core serves a CQ's interrupts: while
    /// its handler still runs the CQ is not re-armed, so completions the moderator
    /// releases meanwhile are picked up by the running handler (`cqe_poll` each) instead
    /// of raising another interrupt (NAPI-style).
    fn fire_irq(&mut self, now: SimTime, nic: u32, completions: u32) {
        let h = self.hm();
        let c = h.cfg.costs;
        let n = &mut h.nics[nic as usize];
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
        self.sync_irq_timer(nic);
        for _ in 0..completions {
            let (flow, recv) = self.hm().nics[nic as usize]
                .irq_pending
                .pop_front()
                .expect("an interrupt reports pending completions");
            at += c.cqe_poll;
            self.notified(at, flow, recv);
        }
    }

    /// The consumer knows of the completion at `at`; a received message may still need
    /// its copy back into GPU memory.
    fn notified(&mut self, at: SimTime, flow: FlowId, recv: bool) {
        if !recv {
            return;
        }
        let rx = self.data_receiver(flow);
        let def = self.flows[flow as usize].def;
        let h = self.hm();
        let staged = h.rx(rx, def.workload).staged;
        let (copy_launch, pcie) = (h.cfg.costs.copy_launch, h.cfg.pcie_bandwidth);
        h.msgs[flow as usize].t[T_NOTIFIED] = at.0;
        let mut done = at;
        if staged {
            let n = &mut h.nics[rx as usize];
            let start = at.max(n.ce_free);
            done = start + copy_launch + serialization_delay(def.size, pcie);
            n.ce_free = done;
            n.stats.cpu_ps[CPU_COPIES] += copy_launch.0;
            n.stats.pcie_bytes += def.size;
        }
        h.nics[rx as usize].stats.touch(done);
        h.msgs[flow as usize].t[T_DONE] = done.0;
        self.message_done(done, flow);
    }

    /// `flow` is done (at `at`, now or later): flows waiting for it may start.
    pub(super) fn message_done(&mut self, at: SimTime, flow: FlowId) {
        // What follows is scheduled by the endpoint the message landed at: its host's
        // NIC, or a switch (in-network aggregation).
        let rx = self.data_receiver(flow);
        let hosts = self.graph.hosts();
        let source = if rx < hosts {
            self.src.nic(rx)
        } else {
            self.src.switch(rx - hosts)
        };
        if let Some((run, xfer)) = self.flows[flow as usize].coll {
            let done = self.colls[run as usize].landed(xfer, at);
            self.q.schedule(done, source, Event::CollDone { run, xfer });
            return;
        }
        let mut next = self.dep_head[flow as usize];
        while next != NONE {
            let start = at.max(self.flows[next as usize].def.start);
            self.q
                .schedule(start, source, Event::FlowStart { flow: next });
            next = self.dep_next[next as usize];
        }
    }
}

impl HostModel {
    /// From a message landing (or its ACK arriving) to its CQE being visible: half a PCIe
    /// round trip, plus the CPU interconnect when the CQ is in GPU memory across sockets
    /// or, for a received message, when its data (which the CQE follows in order) crosses
    /// it.
    fn cqe_latency(&self, nic: u32, workload: u16, recv: bool) -> SimDuration {
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

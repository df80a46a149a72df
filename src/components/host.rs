//! The host pipeline of a NIC and its server: a message's life from the moment its
//! application wants to send it to the moment the receiver's application may use it.
//!
//! Stages, each a timestamp in [`MsgTimes`] so that they sum to the end-to-end latency
//! exactly:
//! 1. `copy_in`: `cpu` mode with GPU memory: the CPU launches a GPU-to-host copy
//!    (`copy_launch`) and the copy engine moves the bytes at PCIe bandwidth.
//! 2. `post`: the CPU proxy hand-off (`cpu_proxy`), waiting for a posting thread, building
//!    the WQE and, once the batch is complete (`doorbell_batch` WQEs, or nothing else
//!    waiting), the doorbell's MMIO write. With one context for the mode and one WQE a
//!    doorbell it is computed at the hand-off, without the steps' events
//!    (`host_posting.rs`).
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
//! interrupts but is not on the message's latency path. Polled, it is computed at the ACK
//! without a wake-up and counted when next looked at (`host_completion.rs`,
//! `folds_send_cqe`).
//!
//! Sans-IO: [`HostPipeline`] takes `(now, input)` and appends [`HostAction`]s (wake me at
//! a time, this work request may be sent, this message is done); the event loop turns
//! them into events in the order given. The costs and their sources are in
//! `nic::config` (design reference, "Host and NIC"); the interrupt moderation is
//! `nic::interrupts`.
//!
//! Leaves out: the receive side's WQE fetch (a receive queue is assumed stocked ahead),
//! PCIe credit flow control and TLP-level arbitration, cache effects on the CPU costs.

use crate::engine::FlowId;
use crate::nic::config::{DataPath, HostConfig, ModerationConfig, Notify, PostingMode};
use crate::nic::interrupts::{InterruptModerator, Moderation, DIM_LEVELS};
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

/// What a message's wake-up ([`HostWake::Stage`]) resumes.
pub const ST_TO_POSTER: u8 = 0;
pub const ST_DOORBELL: u8 = 1;
pub const ST_FETCHED: u8 = 2;
pub const ST_PROCESSED: u8 = 3;
pub const ST_PAYLOAD: u8 = 4;
pub const ST_RECV_CQE: u8 = 5;
pub const ST_SEND_CQE: u8 = 6;
/// The work request is ready, its NIC's side computed at the hand-off (`host_nic_side.rs`).
pub const ST_READY: u8 = 7;

const NONE: FlowId = FlowId::MAX;

/// CPU time categories.
pub const CPU_POSTING: usize = 0;
pub const CPU_INTERRUPTS: usize = 1;
pub const CPU_COPIES: usize = 2;
pub const CPU_POLLING: usize = 3;
pub const CPU_PROXY: usize = 4;
pub const CPU_CATEGORIES: [&str; 5] = ["posting", "interrupts", "copies", "polling", "proxy"];

/// A message as the pipeline sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// The requester's NIC (topology host port): it posts the work request.
    pub src: u32,
    /// The responder's NIC.
    pub dst: u32,
    pub size: u64,
    /// The workload item it belongs to (its posting mode).
    pub workload: u16,
}

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
    /// The sender's CQE is on its way or not yet handled.
    send_open: bool,
    /// A polling consumer's send CQE computed ahead (`send_completed`): its time (ps),
    /// counted at the first look at or after it (`count_send_cqe`); 0 when none waits.
    send_cqe: u64,
    /// When the send engine is done with its WQE, for a NIC side computed at the
    /// hand-off (`post_nic_side`; ps), else `u64::MAX`.
    processed: u64,
    msg: Message,
}

impl MsgTimes {
    pub fn done(&self) -> bool {
        self.t[T_DONE] != u64::MAX
    }
}

/// A wake-up the pipeline asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostWake {
    /// Message `flow` resumes at stage `stage` (`ST_*`).
    Stage { flow: FlowId, stage: u8 },
    /// Posting context `poster` of `nic` finished its current step (a WQE or a
    /// doorbell).
    PosterDone { nic: u32, poster: u32 },
    /// `nic`'s interrupt moderation timer.
    Irq { nic: u32 },
}

/// What the pipeline wants done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostAction {
    /// Call back at `at` (a wake-up of NIC `nic`, the component that schedules it).
    Wake {
        at: SimTime,
        nic: u32,
        wake: HostWake,
    },
    /// The NIC holds `flow`'s work request and its first payload bytes: its queue pair
    /// (or raw flow) may send.
    Ready { flow: FlowId },
    /// The receiving application may use `flow` from `at` (now or later).
    Done { at: SimTime, flow: FlowId },
    /// A step of the pipeline happens at `at` (now or later) without a wake-up: the
    /// sender's CQE of a polling consumer (`send_completed`). The run lasts at least
    /// until then, and the step moves work as a wake-up would.
    Passes { at: SimTime },
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
    /// When a context whose posting is folded (`HostPipeline::folds_posting`) has rung
    /// the doorbell of every WQE handed to it so far.
    free_at: SimTime,
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

/// One NIC's pipeline state (opaque outside this module).
pub struct NicState {
    posters: [Vec<Poster>; 4],
    reads_out: u32,
    read_wait: VecDeque<(FlowId, u8)>,
    proc_free: SimTime,
    /// The payload DMA may read the next packet's bytes from this time.
    dma_next: SimTime,
    /// Copy engine of the NIC's GPU.
    ce_free: SimTime,
    moderator: Option<InterruptModerator>,
    irq_at: Option<SimTime>,
    /// The core handling this NIC's interrupts is busy until then.
    irq_busy_until: SimTime,
    irq_pending: VecDeque<(FlowId, bool)>,
    stats: NicStats,
    /// The ready times (ps) of the messages whose NIC side was computed at the hand-off
    /// and whose doorbell is not yet past (`post_nic_side`'s check of the read slots).
    nic_side_ready: Vec<u64>,
}

/// Every NIC's host pipeline for a run.
pub struct HostPipeline {
    pub cfg: HostConfig,
    nics: Vec<NicState>,
    pub msgs: Vec<MsgTimes>,
    /// Data path per local NIC, posting mode, and side: 0 where the data is read (the
    /// source memory), 1 where it is written (the destination memory).
    paths: Vec<[[Option<DataPath>; 2]; 4]>,
    /// Posting mode per workload item.
    modes: Vec<PostingMode>,
    /// The operation is an RDMA READ: the responder's memory is read, the requester's
    /// written, and the requester's NIC fetches no payload.
    read: bool,
    /// Payload bytes per packet: a payload's first read is one packet's worth.
    mtu: u64,
    /// Steps computed ahead instead of stepped through wake-ups: posting with one
    /// context and one WQE a doorbell (`post_folded`), a polling consumer's send CQE
    /// (`send_completed`); false only in tests that compare them with the steps.
    fold: bool,
    /// The NIC's side of a send computed at the hand-off too (`host_nic_side.rs`): one
    /// posting mode and one WQE fetch size.
    nic_side: bool,
    /// A NIC would have had more messages between doorbell and ready than read slots
    /// (`nic_side_overflowed`).
    overflowed: bool,
    /// The latest sender's CQE computed ahead and counted (`count_send_cqe`).
    send_cqes_counted_to: SimTime,
}

/// What the pipeline leaves behind for metrics.
#[derive(Debug)]
pub struct HostOutput {
    pub cfg: HostConfig,
    pub nics: Vec<NicStats>,
    pub msgs: Vec<MsgTimes>,
}

/// Posting context `id` of `nic` works for `cost` (a WQE or a doorbell write): a CPU
/// thread's time is charged to posting, and it wakes when done.
fn poster_busy(
    stats: &mut NicStats,
    mode: PostingMode,
    cost: SimDuration,
    now: SimTime,
    nic: u32,
    id: u32,
    out: &mut Vec<HostAction>,
) {
    if matches!(mode, PostingMode::Cpu | PostingMode::CpuGdr) {
        stats.cpu_ps[CPU_POSTING] += cost.0;
    }
    out.push(HostAction::Wake {
        at: now + cost,
        nic,
        wake: HostWake::PosterDone { nic, poster: id },
    });
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

impl HostPipeline {
    /// `hosts` NICs (topology host ports); `messages` known at the start; `posting`: a
    /// posting mode per workload item (`None`: the section's default).
    pub fn new(
        cfg: &HostConfig,
        hosts: u32,
        mtu: u64,
        read: bool,
        messages: impl IntoIterator<Item = Message>,
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
                    Notify::Interrupt(ModerationConfig::Off) => {
                        Some(InterruptModerator::fixed(Moderation {
                            usecs: SimDuration::ZERO,
                            frames: 1,
                        }))
                    }
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
                    nic_side_ready: Vec::new(),
                }
            })
            .collect();
        let modes: Vec<PostingMode> = posting.iter().map(|m| m.unwrap_or(cfg.posting)).collect();
        let mut p = HostPipeline {
            nic_side: Self::nic_side_applies(&modes, cfg.blueflame, cfg.inline_max),
            overflowed: false,
            modes,
            cfg: cfg.clone(),
            nics,
            msgs: Vec::new(),
            paths,
            read,
            mtu,
            fold: true,
            send_cqes_counted_to: SimTime::ZERO,
        };
        for m in messages {
            p.add_message(m);
        }
        p
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

    /// The NIC whose CQ reports a message's data arriving: the receiver of its bytes.
    fn data_receiver(&self, m: &Message) -> u32 {
        if self.read {
            m.src
        } else {
            m.dst
        }
    }

    fn msg(&self, flow: FlowId) -> Message {
        self.msgs[flow as usize].msg
    }

    fn new_record(&self, msg: Message) -> MsgTimes {
        MsgTimes {
            t: [u64::MAX; 10],
            next_in_batch: NONE,
            batch_len: 0,
            mode: self.cfg.posting,
            send_open: false,
            send_cqe: 0,
            processed: u64::MAX,
            msg,
        }
    }

    /// A message added during the run (a collective's transfer); its id is the next.
    pub fn add_message(&mut self, msg: Message) {
        let m = self.new_record(msg);
        self.msgs.push(m);
    }

    /// A message added during the run in the slot of a retired one (`sim::retire`).
    pub fn set_message(&mut self, flow: FlowId, msg: Message) {
        self.msgs[flow as usize] = self.new_record(msg);
    }

    /// A message in slot `flow`, past the end if need be: a split run's partitions give
    /// out their own slots, and the slots between take `hole` until their messages come
    /// (`sim::parallel_coll`).
    pub fn place_message(&mut self, flow: FlowId, msg: Message, hole: Message) {
        self.pad_messages(flow as usize + 1, hole);
        self.msgs[flow as usize] = self.new_record(msg);
    }

    /// Whether `flow`'s sender still waits at `now` for its send completion (a CQE to
    /// come, or one not yet handled).
    pub fn send_open(&self, flow: FlowId, now: SimTime) -> bool {
        let m = &self.msgs[flow as usize];
        m.send_open || m.send_cqe > now.0
    }

    /// Both ends are done with `flow` at `now`: its receiver's completion handled, and
    /// its sender's CQE, if one was written, handled too. Nothing of the pipeline names
    /// it again.
    pub fn is_closed(&self, flow: FlowId, now: SimTime) -> bool {
        self.msgs[flow as usize].done() && !self.send_open(flow, now)
    }

    pub fn cfg(&self) -> &HostConfig {
        &self.cfg
    }

    pub fn message(&self, flow: FlowId) -> &MsgTimes {
        &self.msgs[flow as usize]
    }

    /// The message records, taken out (to be put back reordered, `put_messages`).
    pub fn take_messages(&mut self) -> Vec<MsgTimes> {
        std::mem::take(&mut self.msgs)
    }

    pub fn put_messages(&mut self, msgs: Vec<MsgTimes>) {
        self.msgs = msgs;
    }

    /// A message with no posting side (sent by a switch) starts at `t`: every stage up
    /// to `wire` takes no time.
    pub fn started_at(&mut self, flow: FlowId, t: SimTime) {
        let m = &mut self.msgs[flow as usize];
        for x in &mut m.t[T_START..=T_READY] {
            *x = t.0;
        }
    }

    /// The NIC has handed `flow` to its queue pair ([`HostAction::Ready`] was returned).
    pub fn is_ready(&self, flow: FlowId) -> bool {
        self.msgs[flow as usize].t[T_READY] != u64::MAX
    }

    /// When `nic` may DMA the next payload bytes.
    #[inline]
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

    /// A message's application wants to send it: start its posting path.
    pub fn post(&mut self, now: SimTime, flow: FlowId, out: &mut Vec<HostAction>) {
        let msg = self.msg(flow);
        // The GPU holding the data stages it: the requester's, or for a READ the
        // responder's.
        let source = if self.read { msg.dst } else { msg.src };
        let path = self.tx(msg.src, msg.workload);
        let staged = self.tx(source, msg.workload).staged;
        let cfg = &self.cfg;
        let (copy_launch, pcie, handoff) = (
            cfg.costs.copy_launch,
            cfg.pcie_bandwidth,
            cfg.costs.proxy_handoff,
        );
        let m = &mut self.msgs[flow as usize];
        m.mode = path.mode;
        m.t[T_START] = now.0;
        self.nics[msg.src as usize].stats.touch(now);
        let nic = &mut self.nics[source as usize];
        let mut at = now;
        if staged {
            // GPU to host: launched by the CPU, carried by the GPU's copy engine.
            let start = now.max(nic.ce_free);
            at = start + copy_launch + serialization_delay(msg.size, pcie);
            nic.ce_free = at;
            nic.stats.cpu_ps[CPU_COPIES] += copy_launch.0;
            nic.stats.pcie_bytes += msg.size;
            nic.stats.touch(at);
        }
        m.t[T_COPIED] = at.0;
        if path.mode == PostingMode::CpuProxy {
            at += handoff;
        }
        if self.folds_posting(path.mode) {
            self.post_folded(at, flow, out);
            return;
        }
        if at > now {
            out.push(HostAction::Wake {
                at,
                nic: source,
                wake: HostWake::Stage {
                    flow,
                    stage: ST_TO_POSTER,
                },
            });
        } else {
            self.enqueue_post(now, flow, out);
        }
    }

    /// Starts loading what wake-up `wake` reads, at depth `stage` of its chain of lines
    /// (see `sim::prefetch`): a message's record first, then its NIC's state; a posting
    /// context's NIC first, then the context and the record of the message it builds.
    /// Only a hint: nothing is read that could change what runs.
    #[inline(always)]
    pub fn prefetch_wake(&self, wake: HostWake, stage: usize) {
        use crate::engine::{prefetch, prefetch_lines, prefetch_whole};
        match wake {
            HostWake::Stage { flow, .. } => {
                let Some(m) = self.msgs.get(flow as usize) else {
                    return;
                };
                match stage {
                    // 120 bytes: two lines from its start, and the last one.
                    0 => {
                        prefetch_lines(m, 2);
                        prefetch_whole(m);
                    }
                    1 => {
                        // The NIC that handles this stage: the sender's (posting,
                        // fetching, its CQE) or the receiver's (its CQE): both, as the
                        // stage's side is not worth a branch.
                        for nic in [m.msg.src, m.msg.dst] {
                            if let Some(n) = self.nics.get(nic as usize) {
                                prefetch_lines(n, 8);
                            }
                        }
                    }
                    _ => {}
                }
            }
            HostWake::PosterDone { nic, poster } => {
                let Some(n) = self.nics.get(nic as usize) else {
                    return;
                };
                let (mi, pi) = ((poster >> 16) as usize, (poster & 0xffff) as usize);
                let Some(p) = n.posters.get(mi).and_then(|v| v.get(pi)) else {
                    return;
                };
                match stage {
                    0 => prefetch_lines(n, 8),
                    1 => prefetch(p),
                    2 => {
                        // The message whose WQE it wrote (the queue's front), or the
                        // batch whose doorbell it rang.
                        let f = if p.ringing {
                            p.batch_head
                        } else {
                            p.queue.front().copied().unwrap_or(NONE)
                        };
                        if let Some(m) = self.msgs.get(f as usize) {
                            prefetch_lines(m, 2);
                        }
                        if let Some(m) = self.msgs.get(p.batch_tail as usize) {
                            prefetch(m);
                        }
                    }
                    _ => {}
                }
            }
            HostWake::Irq { nic } => {
                if let Some(n) = self.nics.get(nic as usize).filter(|_| stage == 0) {
                    prefetch_lines(n, 8);
                }
            }
        }
    }

    /// A wake-up asked for by [`HostAction::Wake`] is due. Returns whether it did
    /// anything (a moderation timer that was superseded did not).
    pub fn handle_wake(&mut self, now: SimTime, wake: HostWake, out: &mut Vec<HostAction>) -> bool {
        match wake {
            HostWake::Stage { flow, stage } => {
                self.on_stage(now, flow, stage, out);
                true
            }
            HostWake::PosterDone { nic, poster } => {
                self.on_poster_done(now, nic, poster, out);
                true
            }
            HostWake::Irq { nic } => self.on_irq_timer(now, nic, out),
        }
    }

    /// The WQE joins the least-loaded posting context of its mode.
    fn enqueue_post(&mut self, now: SimTime, flow: FlowId, out: &mut Vec<HostAction>) {
        let src = self.msg(flow).src;
        let mi = mode_index(self.msgs[flow as usize].mode);
        let posters = &mut self.nics[src as usize].posters[mi];
        let (p, _) = posters
            .iter()
            .enumerate()
            .min_by_key(|(i, p)| (p.busy as usize + p.queue.len(), *i))
            .expect("at least one posting context");
        posters[p].queue.push_back(flow);
        if !posters[p].busy {
            self.poster_step(now, src, (mi << 16 | p) as u32, out);
        }
    }

    /// The posting context starts its next WQE.
    fn poster_step(&mut self, now: SimTime, nic: u32, id: u32, out: &mut Vec<HostAction>) {
        let (mi, pi) = ((id >> 16) as usize, (id & 0xffff) as usize);
        let mode = MODES[mi];
        let (cost, _) = self.posting_costs(mode);
        let n = &mut self.nics[nic as usize];
        let p = &mut n.posters[mi][pi];
        if p.queue.is_empty() {
            p.busy = false;
            return;
        }
        p.busy = true;
        p.ringing = false;
        poster_busy(&mut n.stats, mode, cost, now, nic, id, out);
    }

    fn on_poster_done(&mut self, now: SimTime, nic: u32, id: u32, out: &mut Vec<HostAction>) {
        let (mi, pi) = ((id >> 16) as usize, (id & 0xffff) as usize);
        let mode = MODES[mi];
        let (_, mmio) = self.posting_costs(mode);
        let (batch_max, latency) = (
            self.cfg.doorbell_batch,
            SimDuration(self.cfg.pcie_round_trip.0 / 2),
        );
        let n = &mut self.nics[nic as usize];
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
            while f != NONE {
                let m = &mut self.msgs[f as usize];
                m.t[T_RUNG] = now.0;
                f = m.next_in_batch;
            }
            self.msgs[head as usize].batch_len = len;
            let head_msg = self.msg(head);
            let extra = self.tx(head_msg.src, head_msg.workload).control_extra;
            out.push(HostAction::Wake {
                at: now + latency + extra,
                nic,
                wake: HostWake::Stage {
                    flow: head,
                    stage: ST_DOORBELL,
                },
            });
            self.poster_step(now, nic, id, out);
            return;
        }
        // A WQE is written: it joins the batch.
        let flow = p.queue.pop_front().expect("a WQE was being built");
        if p.batch_tail == NONE {
            p.batch_head = flow;
        } else {
            self.msgs[p.batch_tail as usize].next_in_batch = flow;
        }
        p.batch_tail = flow;
        p.batch_len += 1;
        self.msgs[flow as usize].next_in_batch = NONE;
        if p.batch_len >= batch_max || p.queue.is_empty() {
            p.ringing = true;
            poster_busy(&mut n.stats, mode, mmio, now, nic, id, out);
        } else {
            self.poster_step(now, nic, id, out);
        }
    }

    fn on_stage(&mut self, now: SimTime, flow: FlowId, stage: u8, out: &mut Vec<HostAction>) {
        match stage {
            ST_TO_POSTER => self.enqueue_post(now, flow, out),
            ST_DOORBELL => self.on_doorbell(now, flow, out),
            ST_FETCHED => {
                self.read_done(now, flow, out);
                let mut f = flow;
                while f != NONE {
                    self.msgs[f as usize].t[T_FETCHED] = now.0;
                    self.process(now, f, out);
                    f = self.msgs[f as usize].next_in_batch;
                }
            }
            ST_PROCESSED => {
                let inline = self.msg(flow).size <= self.cfg.inline_max;
                if inline || self.read {
                    self.wr_ready(now, flow, out);
                } else {
                    self.request_read(now, flow, ST_PAYLOAD, out);
                }
            }
            ST_PAYLOAD => {
                self.read_done(now, flow, out);
                self.wr_ready(now, flow, out);
            }
            ST_RECV_CQE => self.on_cqe(now, flow, true, out),
            ST_SEND_CQE => self.on_cqe(now, flow, false, out),
            ST_READY => self.nic_side_ready(now, flow, out),
            _ => unreachable!("unknown flow stage {stage}"),
        }
    }

    /// The doorbell (and with BlueFlame, the WQE) reaches the NIC.
    fn on_doorbell(&mut self, now: SimTime, head: FlowId, out: &mut Vec<HostAction>) {
        if self.folds_posting(self.msgs[head as usize].mode) {
            self.count_posting(head, now);
        }
        let len = self.msgs[head as usize].batch_len;
        let mut f = head;
        while f != NONE {
            let m = &mut self.msgs[f as usize];
            m.t[T_DOORBELL] = now.0;
            f = m.next_in_batch;
        }
        if self.cfg.blueflame && len == 1 {
            let msg = self.msg(head);
            // The WQE (with any inline payload) rode on the doorbell write.
            let bytes = self.fetch_bytes(head);
            self.nics[msg.src as usize].stats.pcie_bytes += bytes;
            self.msgs[head as usize].t[T_FETCHED] = now.0;
            self.process(now, head, out);
        } else {
            self.request_read(now, head, ST_FETCHED, out);
        }
    }

    /// The NIC's send engine takes one WQE at a time.
    fn process(&mut self, now: SimTime, flow: FlowId, out: &mut Vec<HostAction>) {
        let src = self.msg(flow).src;
        let cost = self.cfg.wqe_processing;
        let n = &mut self.nics[src as usize];
        let done = now.max(n.proc_free) + cost;
        n.proc_free = done;
        if done > now {
            out.push(HostAction::Wake {
                at: done,
                nic: src,
                wake: HostWake::Stage {
                    flow,
                    stage: ST_PROCESSED,
                },
            });
        } else {
            self.on_stage(now, flow, ST_PROCESSED, out);
        }
    }

    /// A DMA read (a WQE fetch for a batch, or a payload's first read) asks for a slot.
    fn request_read(&mut self, now: SimTime, flow: FlowId, kind: u8, out: &mut Vec<HostAction>) {
        let src = self.msg(flow).src;
        let max = self.cfg.max_outstanding_reads;
        let n = &mut self.nics[src as usize];
        if n.reads_out < max {
            n.reads_out += 1;
            self.start_read(now, flow, kind, out);
        } else {
            n.read_wait.push_back((flow, kind));
        }
    }

    fn start_read(&mut self, now: SimTime, flow: FlowId, kind: u8, out: &mut Vec<HostAction>) {
        let msg = self.msg(flow);
        let path = self.tx(msg.src, msg.workload);
        let cfg = &self.cfg;
        let (bytes, extra, bw) = if kind == ST_FETCHED {
            // Every WQE of the batch, with any inline payload.
            let mut bytes = 0;
            let mut f = flow;
            while f != NONE {
                bytes += self.fetch_bytes(f);
                f = self.msgs[f as usize].next_in_batch;
            }
            let stats = &mut self.nics[msg.src as usize].stats;
            stats.wqe_fetches += 1;
            stats.pcie_bytes += bytes;
            (bytes, path.control_extra, cfg.pcie_bandwidth)
        } else {
            self.nics[msg.src as usize].stats.pcie_bytes += msg.size;
            (
                msg.size.min(self.mtu),
                path.payload_extra,
                path.dma_bandwidth,
            )
        };
        let at =
            now + cfg.pcie_round_trip + SimDuration(2 * extra.0) + serialization_delay(bytes, bw);
        out.push(HostAction::Wake {
            at,
            nic: msg.src,
            wake: HostWake::Stage { flow, stage: kind },
        });
    }

    /// A read finished: its slot goes to the next waiting read.
    fn read_done(&mut self, now: SimTime, flow: FlowId, out: &mut Vec<HostAction>) {
        let src = self.msg(flow).src;
        let n = &mut self.nics[src as usize];
        if let Some((f, kind)) = n.read_wait.pop_front() {
            self.start_read(now, f, kind, out);
        } else {
            n.reads_out -= 1;
        }
    }

    /// The NIC has the WQE and the first payload bytes.
    fn wr_ready(&mut self, now: SimTime, flow: FlowId, out: &mut Vec<HostAction>) {
        self.msgs[flow as usize].t[T_READY] = now.0;
        let src = self.msg(flow).src;
        self.nics[src as usize].stats.touch(now);
        out.push(HostAction::Ready { flow });
    }

    /// The payload DMA read `payload` bytes of `flow` on `nic` for a packet: the next may
    /// be read one transfer time later (PCIe read bandwidth caps the NIC's send rate).
    #[inline]
    pub fn dma_read(&mut self, now: SimTime, nic: u32, flow: FlowId, payload: u64) {
        let msg = self.msg(flow);
        if msg.size <= self.cfg.inline_max {
            return; // the payload came with the WQE
        }
        let bw = self.tx(nic, msg.workload).dma_bandwidth;
        let n = &mut self.nics[nic as usize];
        n.dma_next = n.dma_next.max(now) + serialization_delay(payload, bw);
    }

    /// The last byte of `flow` reached its receiver's NIC (only the first report counts).
    pub fn delivered(&mut self, now: SimTime, flow: FlowId, out: &mut Vec<HostAction>) {
        let msg = self.msg(flow);
        let rx = self.data_receiver(&msg);
        if self.msgs[flow as usize].t[T_DELIVERED] != u64::MAX {
            return;
        }
        self.msgs[flow as usize].t[T_DELIVERED] = now.0;
        let at = now + self.cqe_latency(rx, msg.workload, true);
        let n = &mut self.nics[rx as usize];
        n.stats.pcie_bytes += msg.size;
        n.stats.touch(now);
        out.push(HostAction::Wake {
            at,
            nic: rx,
            wake: HostWake::Stage {
                flow,
                stage: ST_RECV_CQE,
            },
        });
    }

    /// The requester's WRITE or SEND completed (its ACK arrived).
    pub fn send_completed(&mut self, now: SimTime, flow: FlowId, out: &mut Vec<HostAction>) {
        let msg = self.msg(flow);
        let at = now + self.cqe_latency(msg.src, msg.workload, false);
        if self.folds_send_cqe(msg.src, msg.workload) {
            // Polled: the CQE's handling changes nothing but counts, and the message's
            // record may go once it is due (`send_open`).
            self.msgs[flow as usize].send_cqe = at.0;
            out.push(HostAction::Passes { at });
            return;
        }
        self.msgs[flow as usize].send_open = true;
        out.push(HostAction::Wake {
            at,
            nic: msg.src,
            wake: HostWake::Stage {
                flow,
                stage: ST_SEND_CQE,
            },
        });
    }
}

#[cfg(test)]
#[path = "host_tests.rs"]
mod tests;

#[path = "host_completion.rs"]
mod completion;

#[path = "host_merge.rs"]
mod merge;

#[path = "host_posting.rs"]
mod posting;

#[path = "host_nic_side.rs"]
mod nic_side;
pub use merge::merge_sides;

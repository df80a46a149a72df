//! NCCL-style collectives over GPU ranks: which GPU each rank is, and a sans-IO runtime
//! that releases each rank's transfers as their dependencies complete.
//!
//! Models NCCL's ring algorithms (`src/device/all_reduce.h`, `prims_simple.h`): the
//! buffer is split across `channels` parallel rings (each with its own queue pairs); each
//! channel moves its share in loops of `ranks x chunk` bytes, split into one piece per
//! rank. In a loop, ring position p sends at step s the piece (p - s) mod n to its
//! successor, and each step after the first waits for the piece its predecessor sent at
//! the step before (received and, while reducing, added into its own copy at
//! `reduce_rate`):
//! - allreduce: 2(n - 1) steps, the first n - 1 reducing (reduce-scatter), the rest
//!   copying (allgather);
//! - reduce_scatter: n - 1 reducing steps; allgather: n - 1 copying steps;
//! - broadcast: the buffer in `chunk`-sized pieces pipelined down the ring from the root;
//! - alltoall: every rank sends its `1/n` of the buffer to every other rank at once.
//!
//! With Simple (and `chunk` not given), allreduce, reduce-scatter and allgather move a
//! chunk of 4 buffer steps (2 MiB) per rank and loop, each step as two slices of 2 slots
//! each (NCCL's `ProtoSimple<2, 2>`, `protocol::Slicing`): a slice waits only for the
//! same slice of the step before.
//!
//! Sends are posted in program order as soon as they are ready and the receiver has one
//! of its `NCCL_STEPS` buffer slots free (a slice takes two), as the sender knows: a
//! receiver on another server frees a slot by a clear-to-send, NCCL's FIFO write
//! (`net_ib`: `ncclIbPostFifo`), which the glue delivers one fabric latency later. An
//! iteration ends when the last rank has its last piece; the next is launched then (a
//! barrier, where nccl-tests only waits per rank): its kernel starts once the CPU has
//! enqueued it and after NCCL's launch latency (`protocol`). Each size runs with the
//! algorithm and protocol given, or NCCL's tuner's choice (`tuner`). Ranks on one host
//! exchange over the intra-host fabric (NVLink-like: each channel moves its transfers
//! one at a time at its copy rate, the GPU's link carries at most `intra_rate` in all,
//! and a step then costs the protocol's NVLink latency); others over the fabric, as RC
//! messages through the host and NIC model when there is one.
//!
//! Correctness is tracked, not assumed: every buffer piece on every rank carries the
//! multiset of ranks whose data it holds (a count and a sum of per-rank hashes); a piece
//! that does not hold exactly what the collective promises counts in `#wrong`. Rings
//! with more than `TRACKED_SLOTS` pieces per channel track an even sample of them; graph
//! algorithms track each channel's first and last chunk (`graph`).
//!
//! Tree, hierarchical, NVLSTree and in-network allreduce run as dependency graphs
//! (`dag`), one chunk's graph per channel run once per chunk (`graph`; in-network one
//! graph per operation); each channel's groups are rotated so that channels lead through
//! other GPUs and NICs; NVLSTree's buffer slots and whole-step copies are in `nvls`. Leaves out:
//! NVLS on one server and CollNet as NCCL runs them, NCCL's per-size reduction of
//! channels and threads, and slot flow control inside the tree, hierarchical and
//! in-network graphs.

pub mod dag;
pub mod defaults;
pub mod graph;
mod landing;
pub use landing::Landing;
mod nvls;
mod placement;
pub mod protocol;
mod ring;
mod share;
pub mod spec;
mod summary;
pub mod tuner;

pub use summary::{algorithm_name, collective_csv, nccl_table, summarize, CollectiveSummary, Row};

use crate::units::{BitsPerSec, SimDuration, SimTime};
use dag::TwoLevel;
use graph::GraphRun;
pub use placement::{place, place_job, place_on, ring_order, RankLoc};
pub use protocol::Protocol;
pub use spec::{CollectiveAlgorithm, CollectiveOp, PlacementSpec};
pub use tuner::choices;

/// Ring slots per channel whose contents each rank tracks (every slot when there are no
/// more; else an even sample), so that `#wrong` costs memory linear in the ranks.
pub const TRACKED_SLOTS: u32 = 64;

/// Bytes per element (nccl-tests' default `float`).
pub const ELEMENT_BYTES: u64 = 4;

/// A validated `collective:` workload item.
#[derive(Clone, Debug, PartialEq)]
pub struct Collective {
    pub op: CollectiveOp,
    pub algorithm: CollectiveAlgorithm,
    /// Buffer sizes to run, bytes (one, or nccl-tests' `-b` to `-e` by `-f`).
    pub sizes: Vec<u64>,
    pub iters: u32,
    pub warmup_iters: u32,
    pub ranks: Option<u32>,
    pub placement: PlacementSpec,
    pub channels: u32,
    pub chunk: u64,
    pub root: u32,
    pub start: SimDuration,
    pub intra_rate: BitsPerSec,
    /// The latency of one NVLink step; default the protocol's (`protocol`).
    pub intra_latency: Option<SimDuration>,
    /// NCCL's protocol; `None` lets the tuner choose per size.
    pub protocol: Option<Protocol>,
    /// The CPU time to enqueue one operation: back-to-back operations go no faster.
    pub launch_overhead: SimDuration,
    /// How fast one channel moves bytes over NVLink; default the protocol's
    /// (`protocol::channel_copy_rate`).
    pub channel_copy_rate: Option<BitsPerSec>,
    pub reduce_rate: BitsPerSec,
    /// Cross-host transfers leave through the sending host's NIC on the receiver's rail.
    pub pxn: bool,
    /// `chunk` was given (else it follows the algorithm's default).
    pub chunk_given: bool,
    /// `channels` was given (else two per NIC of a server).
    pub channels_given: bool,
    /// In-network: a switch adds a chunk into its aggregate after this latency, at this
    /// rate.
    pub switch_reduce_latency: SimDuration,
    pub switch_reduce_rate: BitsPerSec,
    /// Queue pairs per connection (`NCCL_IB_QPS_PER_CONNECTION`), each its own 5-tuple.
    pub qps_per_connection: u32,
    /// Each message split across the connection's queue pairs (`NCCL_IB_SPLIT_DATA_ON_QPS`
    /// = 1) rather than the queue pairs taken in turn, one message each (= 0).
    pub split_data_on_qps: bool,
    /// Messages below this many bytes are not routed per packet (`NCCL_IB_AR_THRESHOLD`).
    pub ar_threshold: u64,
    /// NVLink SHARP is there for NCCL to use (`NCCL_NVLS_ENABLE` and multicast-capable
    /// NVSwitches): `auto` then weighs NVLSTree too.
    pub nvls: bool,
    /// NVLSTree: how fast one channel copies between the user's buffers and the NVLS
    /// buffers (`defaults::NVLS_COPY_RATE`).
    pub nvls_copy_rate: BitsPerSec,
}

impl Collective {
    /// An all-reduce with every default, launched without the CPU's enqueue cost (for
    /// collectives a workload issues ahead of the GPU, such as a training step's), to
    /// be given its op, sizes and ranks.
    pub fn template() -> Collective {
        Collective {
            op: CollectiveOp::Allreduce,
            algorithm: CollectiveAlgorithm::Auto,
            sizes: Vec::new(),
            iters: 1,
            warmup_iters: 0,
            ranks: None,
            placement: PlacementSpec::Packed,
            channels: defaults::CHANNELS,
            chunk: defaults::CHUNK,
            root: 0,
            start: SimDuration::ZERO,
            intra_rate: defaults::INTRA_HOST_RATE,
            intra_latency: None,
            protocol: None,
            launch_overhead: SimDuration::ZERO,
            channel_copy_rate: None,
            reduce_rate: defaults::REDUCE_RATE,
            pxn: true,
            chunk_given: false,
            channels_given: false,
            switch_reduce_latency: defaults::SWITCH_REDUCE_LATENCY,
            switch_reduce_rate: defaults::SWITCH_REDUCE_RATE,
            qps_per_connection: defaults::QPS_PER_CONNECTION,
            split_data_on_qps: false,
            ar_threshold: defaults::AR_THRESHOLD,
            nvls: false,
            nvls_copy_rate: defaults::NVLS_COPY_RATE,
        }
    }

    pub fn op_name(&self) -> &'static str {
        op_name(self.op)
    }
}

pub fn op_name(op: CollectiveOp) -> &'static str {
    match op {
        CollectiveOp::Allreduce => "allreduce",
        CollectiveOp::ReduceScatter => "reduce_scatter",
        CollectiveOp::Allgather => "allgather",
        CollectiveOp::Broadcast => "broadcast",
        CollectiveOp::Alltoall => "alltoall",
    }
}

/// The default chunk for an algorithm.
pub fn default_chunk(a: CollectiveAlgorithm) -> u64 {
    if a == CollectiveAlgorithm::InNetwork {
        defaults::IN_NETWORK_CHUNK
    } else {
        defaults::CHUNK
    }
}

/// nccl-tests' bus bandwidth factor: busbw = algbw x factor (`doc/PERFORMANCE.md`).
pub fn busbw_factor(op: CollectiveOp, n: u32) -> f64 {
    let n = n as f64;
    match op {
        CollectiveOp::Allreduce => 2.0 * (n - 1.0) / n,
        CollectiveOp::ReduceScatter | CollectiveOp::Allgather | CollectiveOp::Alltoall => {
            (n - 1.0) / n
        }
        CollectiveOp::Broadcast => 1.0,
    }
}

/// A receiver's buffer slot came free and its sender on another server must hear of it
/// (NCCL's clear-to-send, `ring`): the glue delivers it one fabric latency later
/// ([`CollectiveRun::on_clear_to_send`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClearToSend {
    /// The rank that freed the slot, and the one told.
    pub receiver: u32,
    pub sender: u32,
    pub channel: u32,
}

/// A transfer the glue must carry: `bytes` from rank `src` to rank `dst` on `channel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Send {
    pub xfer: u32,
    pub src: u32,
    pub dst: u32,
    pub channel: u32,
    /// Bytes on the wire (the data in the protocol's framing).
    pub bytes: u64,
    /// How it moves under NVLink SHARP (`Nvls::No` but for NVLSTree's NVLink phases).
    pub nvls: dag::Nvls,
}

/// A ring transfer's record: who sends what to whom, and what it carries (a split run
/// hands it to the partition where it lands: `CollectiveRun::transfer`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Xfer {
    src: u32,
    dst: u32,
    channel: u32,
    slot: u32,
    reduce: bool,
    bytes: u64,
    /// What the piece held when it was sent.
    count: u32,
    sum: u64,
}

/// Per rank and channel: how far its program has got, with what a send or a receive
/// reads beside it (its send and receive counts, ring position and successor), so that
/// one rank and channel's step touches one cache line, not one per array (issue 17).
#[derive(Clone, Copy, Debug, Default)]
struct Progress {
    next_send: u32,
    /// A ring's: the first send of the loop `next_send` is in (`ring::issue`).
    loop_first: u32,
    recv_done: u32,
    /// Buffer slots its receiver has freed, as this sender knows of them: each free
    /// slot's clear-to-send (`ring`, `on_clear_to_send`).
    cleared: u32,
    /// `layout.sends` and `layout.recvs` of this rank and channel.
    sends: u32,
    recvs: u32,
    /// Its position on the channel's ring and the rank after it.
    pos: u32,
    next: u32,
}

/// In-network: ranks by host, each rank's leaf, and the fabric's leaves and spines.
type InNetworkShape = (Vec<Vec<u32>>, Vec<u32>, u32, u32);

/// One size's measured iterations.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeResult {
    pub size: u64,
    /// Timed iterations, ps.
    pub times_ps: Vec<u64>,
    /// Buffer pieces holding the wrong data, summed over timed iterations.
    pub wrong: u64,
    /// What the size ran with.
    pub algorithm: CollectiveAlgorithm,
    pub protocol: Protocol,
}

/// What a collective item produced.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveResult {
    pub workload: u16,
    pub op: CollectiveOp,
    pub algorithm: CollectiveAlgorithm,
    pub ranks: u32,
    pub root: Option<u32>,
    pub rows: Vec<SizeResult>,
    /// Every iteration of every size completed.
    pub complete: bool,
}

fn hash(rank: u32) -> u64 {
    // splitmix64
    let mut z = (rank as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The runtime of one collective item.
pub struct CollectiveRun {
    pub cfg: Collective,
    pub workload: u16,
    pub ranks: Vec<RankLoc>,
    n: u32,
    /// Per channel: ring position -> rank, and rank -> ring position.
    rings: Vec<Vec<u32>>,
    positions: Vec<Vec<u32>>,
    size_index: usize,
    /// Iteration within the size, warm-up included.
    iteration: u32,
    iter_start: SimTime,
    progress: Vec<Progress>,
    /// Per rank: its channels with sends or receives left (0: the rank is finished),
    /// kept as `progress` moves so no event scans a rank's channels.
    channels_left: Vec<u32>,
    /// Per rank: (count, sum) per buffer slot.
    buf: Vec<Vec<(u32, u64)>>,
    xfers: Vec<Xfer>,
    free_xfers: Vec<u32>,
    ranks_done: u32,
    rows: Vec<SizeResult>,
    done: bool,
    /// Per channel: elements, loops and per-loop layout for the current size.
    layout: Layout,
    /// Tree and hierarchical: the groups and the current size's graph.
    two_level: Option<(TwoLevel, Vec<Vec<u32>>)>,
    /// In-network: the ranks by host, each host's leaf, and the fabric's leaves and
    /// spines (switch `sw` is endpoint `n + sw`).
    in_network: Option<InNetworkShape>,
    /// The current size's graphs and their state (`graph`).
    graph: GraphRun,
    /// Transfers a graph transfer's end made ready (scratch).
    ready: Vec<u32>,
    /// Per receiving endpoint: when its reduction engine is free; per (endpoint,
    /// channel): each sender's last transfer and when it was done (a connection).
    reducer_free: Vec<SimTime>,
    /// The first sender's entry inline, any others after it in `in_order_more` (a
    /// ring's receiver has one sender per channel: one cache line).
    in_order: Vec<landing::FirstSender>,
    in_order_more: Vec<Vec<(u32, SimTime)>>,
    /// Whether a transfer that books no reduction may skip its arrival event
    /// (`land_at_send`; off only in the test that compares the two).
    land_early: bool,
    /// Distinct servers the ranks are on.
    nodes: u32,
    /// Per rank and channel: when its last NVLink transfer is moved (`channel_free`).
    chan_free: Vec<SimTime>,
    /// NVLSTree: per channel its elements, and a chunk's (`nvls_chunk_bytes`).
    nvls_layout: (Vec<u64>, u64),
    /// NVLSTree, per rank and channel: the scatter steps booked (chunk, when its copy
    /// ends), the gather steps waiting for their multicasts, and when the gather warps
    /// are free.
    scatter_steps: Vec<Vec<(u32, SimTime)>>,
    gather_wait: Vec<Vec<nvls::GatherStep>>,
    /// NVLSTree, per channel: copies of each pending multicast that are ready, by
    /// (chunk mod NCCL_STEPS, the multicast's node).
    mc_ready: Vec<Vec<u32>>,
    gather_free: Vec<SimTime>,
    /// Hierarchical: the ranks by server and each rail's leaf groups, when a leader per
    /// rail applies (`dag::rail_shape`).
    rail_shape: Option<dag::RailShape>,
    /// NVLSTree: the ranks by server, when it may run (`dag::nvls_servers`).
    nvls_servers: Option<Vec<Vec<u32>>>,
    /// When the CPU has enqueued the operations so far (nccl-tests enqueues them back
    /// to back and waits for the GPU after the warm-up and after each size).
    cpu_ready: SimTime,
    /// The current size's algorithm and protocol (`choices[size]`).
    algo: CollectiveAlgorithm,
    proto: Protocol,
    /// When the launched iteration's kernel starts moving data (the glue wakes the run
    /// then: `take_wake`, `on_wake`).
    wake: Option<SimTime>,
    /// Clear-to-sends across servers, for the glue to deliver (`take_clear_to_sends`).
    clear_to_send: Vec<ClearToSend>,
    /// Runs an iteration only when told (`trigger`), not back to back (a training
    /// step's collectives); `completions` counts the iterations done since asked.
    pub on_demand: bool,
    completions: u32,
    started: bool,
    /// In a run split over threads: the ranks this copy handles (`share`).
    share: Option<share::Share>,
}

#[derive(Clone, Debug, Default)]
struct Layout {
    /// Per channel: element counts per loop.
    loops: Vec<Vec<u64>>,
    /// The slots (per channel: loops x pieces) whose contents are tracked: every
    /// `stride`-th, `tracked` per channel (at most `TRACKED_SLOTS`, so that large rings
    /// keep a bounded record per rank).
    stride: u32,
    tracked: u32,
    /// Sends per rank and channel, receives likewise.
    sends: Vec<u32>,
    recvs: Vec<u32>,
    /// How each step's chunk is cut into transfers (slots count slices).
    slicing: protocol::Slicing,
}

impl CollectiveRun {
    /// `leaf_of` gives a topology host port's leaf (the hierarchical and in-network
    /// algorithms' groups); `leaves` and `spines` size the fabric's switches.
    /// `net_gbps` is a server's NIC bandwidth in GB/s (what NCCL's tuner sees of the
    /// network).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cfg: &Collective,
        workload: u16,
        ranks: Vec<RankLoc>,
        leaf_of: impl Fn(u32) -> u32,
        leaves: u32,
        spines: u32,
        net_gbps: f64,
    ) -> CollectiveRun {
        let n = ranks.len() as u32;
        let choices = tuner::choices(cfg, &ranks, net_gbps);
        let mut ranks_servers: Vec<u32> = ranks.iter().map(|r| r.server).collect();
        ranks_servers.sort_unstable();
        let kind = match cfg.algorithm {
            CollectiveAlgorithm::Tree => Some(TwoLevel::DoubleTree),
            CollectiveAlgorithm::Auto
                if choices.iter().any(|c| c.0 == CollectiveAlgorithm::Tree) =>
            {
                Some(TwoLevel::DoubleTree)
            }
            CollectiveAlgorithm::Hierarchical => Some(TwoLevel::LeaderRing),
            _ => None,
        };
        let two_level = kind.map(|k| (k, dag::groups(k, &ranks, &leaf_of)));
        let rail_shape = (kind == Some(TwoLevel::LeaderRing))
            .then(|| dag::rail_shape(&ranks, &leaf_of))
            .flatten();
        let nvls_servers = choices
            .iter()
            .any(|c| c.0 == CollectiveAlgorithm::NvlsTree)
            .then(|| dag::nvls_servers(&ranks))
            .flatten();
        let in_network = (cfg.algorithm == CollectiveAlgorithm::InNetwork).then(|| {
            // Ranks by host (the CollNet chain's groups), and each rank's leaf.
            let groups = dag::groups(TwoLevel::DoubleTree, &ranks, &leaf_of);
            let rank_leaf = ranks.iter().map(|r| leaf_of(r.port)).collect();
            (groups, rank_leaf, leaves, spines)
        });
        let rings: Vec<Vec<u32>> = (0..cfg.channels).map(|c| ring_order(&ranks, c)).collect();
        let positions = rings
            .iter()
            .map(|r| {
                let mut pos = vec![0; r.len()];
                for (q, &rank) in r.iter().enumerate() {
                    pos[rank as usize] = q as u32;
                }
                pos
            })
            .collect();
        CollectiveRun {
            cfg: cfg.clone(),
            workload,
            ranks,
            n,
            rings,
            positions,
            size_index: 0,
            iteration: 0,
            iter_start: SimTime::ZERO,
            progress: Vec::new(),
            channels_left: Vec::new(),
            buf: Vec::new(),
            xfers: Vec::new(),
            free_xfers: Vec::new(),
            ranks_done: 0,
            rows: cfg
                .sizes
                .iter()
                .zip(&choices)
                .map(|(&size, &(algorithm, protocol))| SizeResult {
                    size,
                    times_ps: Vec::new(),
                    wrong: 0,
                    algorithm,
                    protocol,
                })
                .collect(),
            done: false,
            layout: Layout::default(),
            two_level,
            in_network,
            graph: GraphRun::default(),
            ready: Vec::new(),
            reducer_free: Vec::new(),
            in_order: Vec::new(),
            in_order_more: Vec::new(),
            land_early: true,
            nodes: {
                let mut s: Vec<u32> = ranks_servers.clone();
                s.dedup();
                s.len() as u32
            },
            cpu_ready: SimTime::ZERO,
            chan_free: Vec::new(),
            nvls_layout: (Vec::new(), 1),
            scatter_steps: Vec::new(),
            gather_wait: Vec::new(),
            mc_ready: Vec::new(),
            gather_free: Vec::new(),
            rail_shape,
            nvls_servers,
            algo: choices[0].0,
            proto: choices[0].1,
            wake: None,
            clear_to_send: Vec::new(),
            on_demand: false,
            completions: 0,
            started: false,
            share: None,
        }
    }

    /// Runs the next iteration (the next size's when each size runs once), now.
    #[inline(always)]
    pub fn trigger(&mut self, now: SimTime) {
        if std::mem::replace(&mut self.started, true) {
            self.launch(now);
        } else {
            self.start(now);
        }
    }

    /// Iterations finished since the last call.
    pub fn take_completions(&mut self) -> u32 {
        std::mem::take(&mut self.completions)
    }

    /// The most data bytes one transfer moves: `chunk` when given (and in-network's
    /// default), else the protocol's buffer step.
    fn chunk_bytes(&self) -> u64 {
        if self.cfg.chunk_given || self.algo == CollectiveAlgorithm::InNetwork {
            self.cfg.chunk
        } else if self.ring_slicing() == protocol::Slicing::RING_SIMPLE {
            self.proto.step_data_bytes() * protocol::RING_SIMPLE_CHUNK_STEPS as u64
        } else {
            protocol::chunk_bytes(
                self.algo,
                self.proto,
                self.cfg.sizes[self.size_index],
                self.cfg.channels,
                self.nodes,
                self.n / self.nodes.max(1),
            )
        }
    }

    /// How the ring cuts a step's chunk (`protocol::Slicing::of`).
    pub(super) fn ring_slicing(&self) -> protocol::Slicing {
        protocol::Slicing::of(self.algo, self.cfg.op, self.proto, self.cfg.chunk_given)
    }

    /// How fast one channel moves bytes over NVLink with the current protocol.
    pub fn channel_rate(&self) -> BitsPerSec {
        self.cfg
            .channel_copy_rate
            .unwrap_or_else(|| protocol::channel_copy_rate(self.proto))
    }

    /// When rank `rank`'s channel `channel` has moved its last NVLink transfer.
    pub fn channel_free(&mut self, rank: u32, channel: u32) -> &mut SimTime {
        let k = self.rank_channel(rank, channel);
        if self.chan_free.len() <= k {
            self.chan_free.resize(k + 1, SimTime::ZERO);
        }
        &mut self.chan_free[k]
    }

    /// The time the run wants to be woken at (`on_wake`), once.
    pub fn take_wake(&mut self) -> Option<SimTime> {
        self.wake.take()
    }

    /// The previous iteration ended at `now`: the next one's kernel starts once the CPU
    /// has enqueued it (`launch_overhead` after the previous one) and the GPU is free,
    /// and moves data after NCCL's launch latency. nccl-tests waits for the GPU after
    /// the warm-up iterations and between sizes, so the CPU starts afresh then.
    fn launch(&mut self, now: SimTime) {
        let row = &self.rows[self.size_index];
        (self.algo, self.proto) = (row.algorithm, row.protocol);
        self.iter_start = now;
        if self.iteration == 0 || self.iteration == self.cfg.warmup_iters {
            self.cpu_ready = self.cpu_ready.max(now);
        }
        self.cpu_ready += self.cfg.launch_overhead;
        let start = now.max(self.cpu_ready);
        self.wake = Some(start + protocol::launch_latency(self.algo, self.proto));
    }

    /// The launched iteration starts moving data.
    pub fn on_wake(&mut self, now: SimTime, out: &mut Vec<Send>) {
        self.begin_iteration(now, out);
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    pub fn result(&self) -> CollectiveResult {
        CollectiveResult {
            workload: self.workload,
            op: self.cfg.op,
            algorithm: self.cfg.algorithm,
            ranks: self.n,
            root: (self.cfg.op == CollectiveOp::Broadcast).then_some(self.cfg.root),
            rows: self.rows.clone(),
            complete: self.done,
        }
    }

    /// Starts the first iteration of the first size.
    pub fn start(&mut self, now: SimTime) {
        self.size_index = 0;
        self.iteration = 0;
        self.launch(now);
    }

    fn begin_iteration(&mut self, now: SimTime, out: &mut Vec<Send>) {
        if self.is_graph() {
            if self.iteration == 0 {
                let size = self.cfg.sizes[self.size_index];
                let elems = size.div_ceil(ELEMENT_BYTES);
                let ch = self.cfg.channels as u64;
                let per_channel: Vec<u64> = (0..ch)
                    .map(|c| elems / ch + u64::from(c < elems % ch))
                    .collect();
                let chunk_elems = (self.chunk_bytes() / ELEMENT_BYTES).max(1);
                self.graph = self.build_graph(&per_channel, chunk_elems);
                if let Some(sh) = self.share.as_mut() {
                    // A split run's copy counts the transfers landing at its ranks
                    // (`share`), for every iteration of this size's graph.
                    sh.unsound = !self.graph.deps_land_at_sender();
                    let owned = &sh.owned;
                    self.graph.land_here(|p| owned[p as usize]);
                }
            } else {
                self.graph.reset();
            }
            // NVLSTree's steps are booked per iteration (chunk numbers start again).
            self.scatter_steps.iter_mut().for_each(Vec::clear);
            self.mc_ready.clear();
            debug_assert!(self.gather_wait.iter().all(Vec::is_empty));
            let cells = self.graph.cells_per_rank();
            // Ranks start with their own data; switches (in-network) with nothing.
            let switches = self.in_network.as_ref().map_or(0, |x| x.2 + x.3);
            self.buf = (0..self.n + switches)
                .map(|p| {
                    let own = if p < self.n { (1, hash(p)) } else { (0, 0) };
                    vec![own; cells]
                })
                .collect();
            // A split run's copy starts the ranks it handles.
            for i in self.graph.roots() {
                if self.owns(self.graph.node(self.graph.at(i)).src) {
                    self.issue_node(i, out);
                }
            }
            if self.graph.finished() {
                // A split run's copy none of whose ranks receives anything.
                self.ranks_here_done(now);
            }
            return;
        }
        if self.iteration == 0 {
            self.lay_out();
        }
        self.ranks_done = 0;
        let n = self.n as usize;
        let ch = self.cfg.channels as usize;
        let (tracked, stride) = (self.layout.tracked as usize, self.layout.stride);
        self.progress = (0..n * ch)
            .map(|i| {
                let (p, c) = (i / ch, i % ch);
                let pos = self.positions[c][p];
                Progress {
                    next_send: 0,
                    loop_first: 0,
                    recv_done: 0,
                    cleared: 0,
                    sends: self.layout.sends[i],
                    recvs: self.layout.recvs[i],
                    pos,
                    next: self.rings[c][(pos as usize + 1) % n],
                }
            })
            .collect();
        self.channels_left = (0..self.n)
            .map(|p| {
                (0..self.cfg.channels)
                    .filter(|&c| !self.channel_finished(self.rank_channel(p, c)))
                    .count() as u32
            })
            .collect();
        self.buf = (0..n as u32)
            .map(|p| {
                let mut v = vec![(0u32, 0u64); ch * tracked];
                for (i, x) in v.iter_mut().enumerate() {
                    let slot = (i % tracked) as u32 * stride;
                    let c = i / tracked;
                    let holds_own = match self.cfg.op {
                        CollectiveOp::Allreduce | CollectiveOp::ReduceScatter => true,
                        // Pieces are named by ring position: its own is its position's.
                        CollectiveOp::Allgather => {
                            slot / self.layout.slicing.slices % self.n
                                == self.positions[c][p as usize]
                        }
                        CollectiveOp::Broadcast => p == self.cfg.root,
                        CollectiveOp::Alltoall => false,
                    };
                    if holds_own {
                        *x = (1, hash(p));
                    }
                }
                v
            })
            .collect();
        // Ranks with nothing to do are done at once.
        // A split run's copy starts the ranks it handles (`share`).
        for p in 0..self.n {
            if self.owns(p) && self.rank_finished(p) {
                self.ranks_done += 1;
            }
        }
        for p in 0..self.n {
            if !self.owns(p) {
                continue;
            }
            for c in 0..self.cfg.channels {
                self.issue(p, c, out);
            }
        }
        if self.ranks_done == self.ranks_here() {
            // Nothing to move (cannot happen with 2+ ranks on one thread, kept for
            // safety; a split run's copy may hold no rank).
            self.ranks_here_done(now);
        }
    }

    /// The current size's graphs: per channel one chunk's (and the last chunk's when it
    /// is smaller), or in-network one graph of the whole operation.
    fn build_graph(&mut self, per_channel: &[u64], chunk_elems: u64) -> GraphRun {
        if let (None, Some((groups, rank_leaf, leaves, spines))) =
            (&self.two_level, &self.in_network)
        {
            if self.algo != CollectiveAlgorithm::NvlsTree {
                let dag = dag::build_in_network(
                    self.n,
                    groups,
                    rank_leaf,
                    *leaves,
                    (*spines).max(1),
                    per_channel,
                    chunk_elems,
                    ELEMENT_BYTES,
                    &self.ranks,
                );
                return GraphRun::whole(dag, self.cfg.channels);
            }
        }
        let chunk = |c: u32, ej: u64| {
            if self.algo == CollectiveAlgorithm::NvlsTree {
                let servers = self
                    .nvls_servers
                    .as_ref()
                    .expect("validation keeps NVLSTree to servers it can run on");
                return dag::nvls_tree_chunk(servers, c, ej, ELEMENT_BYTES);
            }
            match &self.two_level {
                Some((TwoLevel::LeaderRing, _)) if self.rail_shape.is_some() => {
                    let (servers, rails) = self.rail_shape.as_ref().expect("checked");
                    dag::rail_hierarchical_chunk(servers, rails, c, ej, ELEMENT_BYTES)
                }
                Some((kind, groups)) => {
                    let groups = dag::channel_groups(groups, &self.ranks, c);
                    dag::tree_chunk(*kind, &groups, c, ej, ELEMENT_BYTES)
                }
                None => unreachable!("a graph algorithm"),
            }
        };
        let channels = per_channel
            .iter()
            .enumerate()
            .map(|(c, &e)| {
                let c = c as u32;
                let chunks = e.div_ceil(chunk_elems).max(1);
                let last_elems = e - (chunks - 1) * chunk_elems;
                let full = chunk(c, chunk_elems.min(e));
                let last = (chunks > 1 && last_elems != chunk_elems).then(|| chunk(c, last_elems));
                (full, last, chunks as u32)
            })
            .collect();
        let run = GraphRun::chunked(channels);
        if self.algo == CollectiveAlgorithm::NvlsTree {
            self.nvls_layout = (per_channel.to_vec(), chunk_elems);
            // Each connection's NCCL_STEPS buffer slots bound the chunks in flight: the
            // scatter into the NVLS buffers, the reduction and the multicast each run at
            // most that far ahead of the one behind.
            return run.with_window(protocol::NCCL_STEPS);
        }
        run
    }

    /// Graph transfer `i` is ready: posts it (NVLSTree's multicast copies go together,
    /// `issue_multicast_copy`).
    fn issue_node(&mut self, i: u32, out: &mut Vec<Send>) {
        let nvls = self.graph.node(self.graph.at(i)).nvls;
        if matches!(nvls, dag::Nvls::Multicast | dag::Nvls::Replica) {
            self.issue_multicast_copy(i, out);
        } else {
            self.post_node(i, out);
        }
    }
    /// Posts graph transfer `i`, carrying what its sender holds now.
    fn post_node(&mut self, i: u32, out: &mut Vec<Send>) {
        let at = self.graph.at(i);
        let d = self.graph.node(at);
        if let Some(cell) = self.graph.cell(at, &d) {
            let held = self.buf[d.src as usize][cell];
            *self.graph.snap(at).expect("a tracked chunk") = held;
        }
        // Bytes to and from a switch are bare data (in-network aggregation).
        let bytes = if d.src >= self.n || d.dst >= self.n {
            d.bytes
        } else {
            self.proto.wire_bytes(d.bytes)
        };
        out.push(Send {
            xfer: i,
            src: d.src,
            dst: d.dst,
            channel: d.channel,
            bytes,
            nvls: d.nvls,
        });
    }

    /// Graph transfer `i` landed.
    fn on_node_done(&mut self, now: SimTime, i: u32, out: &mut Vec<Send>) {
        let at = self.graph.at(i);
        let d = self.graph.node(at);
        if let Some(cell) = self.graph.cell(at, &d) {
            let (count, sum) = *self.graph.snap(at).expect("a tracked chunk");
            let cell = &mut self.buf[d.dst as usize][cell];
            if d.reduce {
                cell.0 += count;
                cell.1 = cell.1.wrapping_add(sum);
            } else {
                *cell = (count, sum);
            }
        }
        let mut ready = std::mem::take(&mut self.ready);
        self.graph.complete(at, &mut ready);
        for next in ready.drain(..) {
            self.issue_node(next, out);
        }
        self.ready = ready;
        if self.graph.finished() {
            // On one thread the iteration ends; split, the partitions' meeting decides.
            self.ranks_here_done(now);
        }
    }

    /// Whether transfers come from a per-iteration graph (tree, hierarchical,
    /// in-network) rather than the lazy ring.
    pub fn is_graph(&self) -> bool {
        self.algo != CollectiveAlgorithm::Ring
    }

    /// Transfer `xfer`'s sender, receiver (ranks, or switches from `n`) and channel.
    #[inline]
    pub fn transfer_ends(&self, xfer: u32) -> (u32, u32, u32) {
        if self.is_graph() {
            let d = &self.graph.node(self.graph.at(xfer));
            (d.src, d.dst, d.channel)
        } else {
            let x = &self.xfers[xfer as usize];
            (x.src, x.dst, x.channel)
        }
    }

    /// Endpoints at or above this id are switches (`n + switch`).
    pub fn ranks_len(&self) -> u32 {
        self.n
    }

    /// Transfer `xfer` has landed (and been reduced): the receiver may go on.
    pub fn on_done(&mut self, now: SimTime, xfer: u32, out: &mut Vec<Send>) {
        if self.is_graph() {
            self.on_node_done(now, xfer, out);
        } else {
            self.on_ring_done(now, xfer, out);
        }
    }

    /// The place of rank `rank`'s state on channel `channel` in the per rank and channel
    /// arrays (`progress`, `chan_free`, `in_order`, a switch's streams).
    #[inline(always)]
    pub(crate) fn rank_channel(&self, rank: u32, channel: u32) -> usize {
        rank as usize * self.cfg.channels as usize + channel as usize
    }

    /// Pieces that do not hold what the collective promises.
    fn count_wrong(&self) -> u64 {
        let n = self.n;
        let all: u64 = (0..n).fold(0u64, |a, p| a.wrapping_add(hash(p)));
        if self.is_graph() {
            // Allreduce: every tracked cell of every rank holds every rank's data once.
            let cells = self.graph.used_cells();
            let mut wrong = 0;
            // A split run's copy counts its own ranks (the copies' counts are summed).
            for p in (0..n).filter(|&p| self.owns(p)) {
                let row = &self.buf[p as usize];
                wrong += cells.iter().filter(|&&k| row[k] != (n, all)).count() as u64;
            }
            return wrong;
        }
        let (tracked, stride) = (self.layout.tracked, self.layout.stride);
        let mut wrong = 0;
        // A split run's copy counts its own ranks (the copies' counts are summed).
        for p in (0..n).filter(|&p| self.owns(p)) {
            for c in 0..self.cfg.channels {
                for t in 0..tracked {
                    let slot = t * stride;
                    // Allreduce, reduce-scatter and allgather name a slot by its piece
                    // and slice.
                    let piece = slot / self.layout.slicing.slices;
                    let got = self.buf[p as usize][(c * tracked + t) as usize];
                    let q = self.positions[c as usize][p as usize];
                    let want = match self.cfg.op {
                        CollectiveOp::Allreduce => Some((n, all)),
                        // Ring position q ends with piece (q + 1) mod n reduced.
                        CollectiveOp::ReduceScatter => {
                            (piece % n == (q + 1) % n).then_some((n, all))
                        }
                        // Piece i is the data of the rank at ring position i.
                        CollectiveOp::Allgather => {
                            Some((1, hash(self.rings[c as usize][(piece % n) as usize])))
                        }
                        CollectiveOp::Broadcast => Some((1, hash(self.cfg.root))),
                        CollectiveOp::Alltoall => (slot != p).then(|| (1, hash(slot))),
                    };
                    // Pieces past a channel's data (an uneven split) hold nothing to check.
                    let empty = match self.cfg.op {
                        CollectiveOp::Broadcast => {
                            self.layout.loops[c as usize].len() as u32 <= slot
                        }
                        CollectiveOp::Alltoall => false,
                        _ => self.layout.loops[c as usize].len() as u32 <= piece / n,
                    };
                    if let (Some(w), false) = (want, empty) {
                        if got != w {
                            wrong += 1;
                        }
                    }
                }
            }
        }
        wrong
    }

    fn finish_iteration(&mut self, now: SimTime) {
        let row = &mut self.rows[self.size_index];
        if self.iteration >= self.cfg.warmup_iters {
            row.times_ps.push(now.0 - self.iter_start.0);
            let wrong = self.count_wrong();
            self.rows[self.size_index].wrong += wrong;
        }
        self.iteration += 1;
        if self.iteration >= self.cfg.warmup_iters + self.cfg.iters {
            self.size_index += 1;
            self.iteration = 0;
            if self.size_index >= self.cfg.sizes.len() {
                self.done = true;
                self.completions += u32::from(self.on_demand);
                return;
            }
        }
        if self.on_demand {
            self.completions += 1;
            return;
        }
        self.launch(now);
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod two_level_tests;

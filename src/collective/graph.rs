//! One iteration of a graph algorithm (tree, hierarchical, NVLSTree, in-network): the
//! graphs it runs and the state of each chunk as it runs.
//!
//! Every chunk of a channel moves the same transfers in the same order; only its slots,
//! and the last chunk's sizes, differ (`dag::tree_chunk` and its siblings). So the run
//! keeps one graph per channel, a second when the last chunk is smaller, and per chunk
//! only what changes: how many dependencies each transfer still waits for (4 bytes a
//! transfer, dropped when the chunk is done). A transfer's id is its place in the whole
//! operation, channel by channel, chunk by chunk, in the graph's order within a chunk:
//! the order a graph built whole would give it, so transfers are posted in the same
//! order and every result is the same. In-network aggregation, whose chunks depend on
//! each other (`dag::build_in_network`'s upload window), stays one graph per operation.
//!
//! What ranks hold is tracked, for `#wrong`, in each channel's first and last chunk (a
//! full chunk and the one that may be cut short; the others run the same graph on other
//! slots), as the ring tracks a sample of its slots: memory per rank stays a few cells
//! per channel however large the operation. Before, a 4,096-GPU tree allreduce of
//! 256 MiB built 30.7 M transfers of about 100 bytes each (graph, dependency counts,
//! carried records) and every rank's whole buffer record.

use super::dag::{DNode, Dag};

/// A channel's graph: the graph of its chunks, and of its last chunk when that is smaller.
#[derive(Clone, Debug, Default)]
struct ChannelGraph {
    full: Dag,
    last: Option<Dag>,
    chunks: u32,
    /// Id of its first chunk's first transfer.
    first_id: u32,
    /// Transfers per chunk.
    len: u32,
    /// Slots per chunk (a chunk's slots follow the chunk before's); 0 for a graph of a
    /// whole operation, whose slots are its own.
    slots_per_chunk: u32,
    /// Indices into `GraphRun::tracked` of its first and last chunk (when it has two).
    track: [Option<u32>; 2],
    /// Transfers per chunk that land here: `len`, or in a run split over threads those
    /// landing at this partition's ranks (`GraphRun::land_here`).
    len_here: u32,
}

impl ChannelGraph {
    /// The index in `GraphRun::tracked` of chunk `j`, if it is tracked.
    fn tracked(&self, j: u32) -> Option<u32> {
        if j == 0 {
            self.track[0]
        } else if j + 1 == self.chunks {
            self.track[1]
        } else {
            None
        }
    }

    fn graph(&self, j: u32) -> &Dag {
        match &self.last {
            Some(last) if j + 1 == self.chunks => last,
            _ => &self.full,
        }
    }
}

/// A tracked chunk: what each of its transfers carried when it was posted.
#[derive(Clone, Debug, Default)]
struct Tracked {
    snap: Vec<(u32, u64)>,
}

/// The graphs of one operation and the state of its chunks.
#[derive(Clone, Debug, Default)]
pub struct GraphRun {
    channels: Vec<ChannelGraph>,
    /// A graph of the whole operation (in-network): its slots per channel.
    whole_slots: Option<u32>,
    /// Per channel and chunk: dependencies left per transfer (empty once the chunk's
    /// transfers that land here are done), and transfers done here.
    deps_left: Vec<Vec<Vec<u32>>>,
    chunk_done: Vec<Vec<u32>>,
    tracked: Vec<Tracked>,
    /// Cells each tracked chunk keeps per rank.
    cells_per_chunk: u32,
    total: u64,
    /// Transfers that land here (`total`, or this partition's share: `land_here`), and
    /// of them those done.
    total_here: u64,
    done: u64,
    /// Chunks of a channel in flight at once (`with_window`): transfer t of chunk j
    /// also waits for transfer t of chunk j - window; 0 for no such limit.
    window: u32,
}

/// Where a transfer is: channel, chunk, place in the chunk's graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    pub channel: u32,
    pub chunk: u32,
    pub node: u32,
}

impl GraphRun {
    /// Per channel: the graph of a full chunk, that of the last when it is smaller (the
    /// same transfers, in the same order), and the channel's chunks.
    pub fn chunked(channels: Vec<(Dag, Option<Dag>, u32)>) -> GraphRun {
        let mut run = GraphRun::default();
        let mut id = 0u64;
        for (full, last, chunks) in channels {
            debug_assert!(last
                .as_ref()
                .map_or(true, |l| l.nodes.len() == full.nodes.len()));
            let len = full.nodes.len() as u32;
            let slots_per_chunk = full.slots_per_channel;
            run.cells_per_chunk = run.cells_per_chunk.max(slots_per_chunk);
            let mut g = ChannelGraph {
                full,
                last,
                chunks: chunks.max(1),
                first_id: id as u32,
                len,
                slots_per_chunk,
                track: [None, None],
                len_here: len,
            };
            g.track[0] = Some(run.tracked.len() as u32);
            run.tracked.push(Tracked::default());
            if g.chunks > 1 {
                g.track[1] = Some(run.tracked.len() as u32);
                run.tracked.push(Tracked::default());
            }
            id += len as u64 * g.chunks as u64;
            run.channels.push(g);
        }
        assert!(
            id <= u32::MAX as u64,
            "validation bounds a graph's transfers"
        );
        run.total = id;
        run.total_here = id;
        run.reset();
        run
    }

    /// A run split over threads (`share`): this partition's copy counts only the
    /// transfers landing at the ranks `here` marks, those it sees land. Their
    /// successors are sent from where they land (`deps_land_at_sender`, which a tree
    /// keeps), so every dependency a rank's transfer waits for is counted where the rank
    /// is; the partitions' meeting decides when all are done. Kept by `reset` (a new
    /// iteration of the same graph).
    pub fn land_here(&mut self, here: impl Fn(u32) -> bool) {
        let mut total = 0;
        for g in &mut self.channels {
            g.len_here = g.full.nodes.iter().filter(|d| here(d.dst)).count() as u32;
            total += g.len_here as u64 * g.chunks as u64;
        }
        self.total_here = total;
        self.reset();
    }

    /// A graph of the whole operation (in-network aggregation) over `channels` channels.
    pub fn whole(dag: Dag, channels: u32) -> GraphRun {
        let slots = dag.slots_per_channel;
        let mut run = GraphRun::chunked(vec![(dag, None, 1)]);
        run.channels[0].slots_per_chunk = 0;
        run.whole_slots = Some(slots);
        run.cells_per_chunk = slots * channels;
        run.reset();
        run
    }

    /// At most `window` chunks of a channel in flight: each transfer of a chunk waits
    /// for the same transfer of the chunk `window` before (its connection's buffer
    /// slot, `NCCL_STEPS` of them, is free again once that one is done).
    pub fn with_window(mut self, window: u32) -> GraphRun {
        self.window = window;
        self.reset();
        self
    }

    /// Every transfer waits for all its dependencies again (a new iteration).
    pub fn reset(&mut self) {
        self.done = 0;
        let w = self.window;
        self.deps_left = self
            .channels
            .iter()
            .map(|g| {
                (0..g.chunks)
                    .map(|j| {
                        if g.len_here == 0 {
                            // Nothing of it lands here: no count is ever read.
                            return Vec::new();
                        }
                        let mut d = g.graph(j).deps_init.clone();
                        if w > 0 && j >= w {
                            d.iter_mut().for_each(|x| *x += 1);
                        }
                        d
                    })
                    .collect()
            })
            .collect();
        self.chunk_done = self
            .channels
            .iter()
            .map(|g| vec![0; g.chunks as usize])
            .collect();
        for (k, t) in self.tracked.iter_mut().enumerate() {
            let g = self
                .channels
                .iter()
                .find(|g| g.track.contains(&Some(k as u32)))
                .expect("each tracked chunk belongs to a channel");
            t.snap = vec![(0, 0); g.len as usize];
        }
    }

    /// Whether every graph's transfers wait only for transfers that land at their
    /// sender (`Dag::deps_land_at_sender`), and no window of chunks in flight makes a
    /// transfer wait for the same one of an earlier chunk, which lands at its receiver
    /// (NVLSTree's `with_window`).
    pub fn deps_land_at_sender(&self) -> bool {
        self.window == 0
            && self.channels.iter().all(|g| {
                g.full.deps_land_at_sender()
                    && g.last.as_ref().map_or(true, Dag::deps_land_at_sender)
            })
    }

    /// Cells per rank its tracked chunks keep.
    pub fn cells_per_rank(&self) -> usize {
        self.tracked.len() * self.cells_per_chunk as usize
    }

    /// Transfers in one chunk of channel `channel`.
    pub fn chunk_len(&self, channel: u32) -> u32 {
        self.channels[channel as usize].len
    }

    /// Transfers of the operation.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Every transfer that lands here is done.
    pub fn finished(&self) -> bool {
        self.done == self.total_here
    }

    /// The transfers with no dependency, in id order.
    pub fn roots(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for g in &self.channels {
            let open = if self.window > 0 {
                g.chunks.min(self.window)
            } else {
                g.chunks
            };
            for j in 0..open {
                let base = g.first_id + j * g.len;
                out.extend(g.graph(j).roots().map(|t| base + t));
            }
        }
        out
    }

    /// Where transfer `id` is.
    pub fn at(&self, id: u32) -> At {
        let c = self.channels.partition_point(|g| g.first_id <= id) - 1;
        let g = &self.channels[c];
        let local = id - g.first_id;
        At {
            channel: c as u32,
            chunk: local / g.len,
            node: local % g.len,
        }
    }

    /// Transfer `at`, its slot that of its chunk.
    pub fn node(&self, at: At) -> DNode {
        let g = &self.channels[at.channel as usize];
        let mut d = g.graph(at.chunk).nodes[at.node as usize];
        d.slot += at.chunk * g.slots_per_chunk;
        d
    }

    /// The cell of a rank's record that transfer `at` (`d`) reads and writes, if its
    /// chunk is tracked.
    pub fn cell(&self, at: At, d: &DNode) -> Option<usize> {
        let g = &self.channels[at.channel as usize];
        let k = g.tracked(at.chunk)?;
        let local = match self.whole_slots {
            Some(spc) => d.channel * spc + d.slot,
            None => d.slot - at.chunk * g.slots_per_chunk,
        };
        Some((k * self.cells_per_chunk + local) as usize)
    }

    /// What transfer `at` carries (set when it is posted, if its chunk is tracked).
    pub fn snap(&mut self, at: At) -> Option<&mut (u32, u64)> {
        let g = &self.channels[at.channel as usize];
        let k = g.tracked(at.chunk)?;
        Some(&mut self.tracked[k as usize].snap[at.node as usize])
    }

    /// Transfer `at` is done: the ids of those it made ready go into `ready`, in the
    /// graph's order.
    pub fn complete(&mut self, at: At, ready: &mut Vec<u32>) {
        let g = &self.channels[at.channel as usize];
        let base = g.first_id + at.chunk * g.len;
        let deps = &mut self.deps_left[at.channel as usize][at.chunk as usize];
        for &next in g.graph(at.chunk).successors(at.node) {
            deps[next as usize] -= 1;
            if deps[next as usize] == 0 {
                ready.push(base + next);
            }
        }
        self.done += 1;
        let done = &mut self.chunk_done[at.channel as usize][at.chunk as usize];
        *done += 1;
        if *done == g.len_here {
            *deps = Vec::new();
        }
        let w = self.window;
        if w > 0 && at.chunk + w < g.chunks {
            // Its slot is free for the same transfer `window` chunks on.
            let later = at.chunk + w;
            let deps = &mut self.deps_left[at.channel as usize][later as usize];
            deps[at.node as usize] -= 1;
            if deps[at.node as usize] == 0 {
                ready.push(g.first_id + later * g.len + at.node);
            }
        }
    }

    /// The cells a correct run leaves holding every rank's data, per rank: every slot
    /// of each tracked chunk (a whole graph: the slots its channels use).
    pub fn used_cells(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for g in &self.channels {
            for k in g.track.iter().flatten() {
                let base = (k * self.cells_per_chunk) as usize;
                match self.whole_slots {
                    Some(spc) => {
                        for (c, &used) in g.full.slots_used.iter().enumerate() {
                            out.extend((0..used).map(|s| base + c * spc as usize + s as usize));
                        }
                    }
                    None => out.extend((0..g.slots_per_chunk as usize).map(|s| base + s)),
                }
            }
        }
        out
    }

    /// Bytes held now: the graphs, the dependency counts of chunks not yet done and the
    /// tracked chunks' records (not the ranks' cells).
    pub fn heap_bytes(&self) -> usize {
        let graphs: usize = self
            .channels
            .iter()
            .map(|g| g.full.heap_bytes() + g.last.as_ref().map_or(0, Dag::heap_bytes))
            .sum();
        let deps: usize = self
            .deps_left
            .iter()
            .flatten()
            .map(|d| d.capacity() * 4)
            .sum();
        let snaps: usize = self
            .tracked
            .iter()
            .map(|t| t.snap.capacity() * std::mem::size_of::<(u32, u64)>())
            .sum();
        graphs + deps + snaps
    }
}

/// Transfers per chunk and channel of a graph algorithm over `n` ranks on `servers`
/// servers (`n / servers` GPUs each) and at most `leaves` leaf groups, and of those the
/// ones between servers (network transfers, each a transfer record while it is in
/// flight): counted from the graphs `dag` builds, an upper bound where the groups vary.
/// - tree: chains into each server's leader and back, two pieces (one per tree), and
///   the leaders' two trees up and down: 4 (n - 1), of them 4 (servers - 1) between
///   servers;
/// - NVLSTree: per server g (g - 1) transfers into the heads and as many multicasts, two
///   pieces; per rail a double tree: 4 n (g - 1) + 4 g (servers - 1);
/// - hierarchical: pieces per chunk up to the leaf groups L; chains, the leaders' ring
///   and a reduce-scatter and all-gather inside each server: at most 2 n L g;
/// - in-network: a chain in each server, each server to its leaf and back, each leaf to
///   a spine and back: at most 2 n + 4 L.
pub fn transfers_per_chunk(
    algorithm: super::CollectiveAlgorithm,
    n: u64,
    servers: u64,
    leaves: u64,
) -> (f64, f64) {
    use super::CollectiveAlgorithm as A;
    let (n, s) = (n as f64, servers.max(1) as f64);
    let g = (n / s).max(1.0);
    let l = (leaves.max(1) as f64).min(s);
    match algorithm {
        A::NvlsTree => (
            4.0 * n * (g - 1.0) + 4.0 * g * (s - 1.0),
            4.0 * g * (s - 1.0),
        ),
        A::Hierarchical => (2.0 * n * l * g, 2.0 * g * l * s),
        A::InNetwork => (2.0 * n + 4.0 * l, 2.0 * s + 2.0 * l),
        _ => (4.0 * (n - 1.0).max(1.0), 4.0 * (s - 1.0)),
    }
}

/// The chunk a graph algorithm cuts `size` into (as `CollectiveRun` does: `chunk` when
/// given, and in-network's; else NCCL's, `protocol::chunk_bytes`), for `n` ranks on
/// `servers` servers.
pub fn chunk_of(
    c: &super::Collective,
    algorithm: super::CollectiveAlgorithm,
    protocol: super::Protocol,
    size: u64,
    n: u32,
    servers: u32,
) -> u64 {
    if c.chunk_given || algorithm == super::CollectiveAlgorithm::InNetwork {
        c.chunk
    } else {
        super::protocol::chunk_bytes(
            algorithm,
            protocol,
            size,
            c.channels,
            servers,
            n / servers.max(1),
        )
    }
}

/// Transfers of one operation of `size` bytes, and of them those between servers
/// (`transfers_per_chunk` x chunks per channel x channels).
pub fn operation_transfers(
    c: &super::Collective,
    algorithm: super::CollectiveAlgorithm,
    protocol: super::Protocol,
    size: u64,
    n: u32,
    servers: u32,
    leaves: u32,
) -> (f64, f64) {
    let chunk = chunk_of(c, algorithm, protocol, size, n, servers).max(1);
    let chunks = size
        .div_ceil(c.channels.max(1) as u64)
        .div_ceil(chunk)
        .max(1) as f64;
    let (all, between) = transfers_per_chunk(algorithm, n as u64, servers as u64, leaves as u64);
    let per_op = chunks * c.channels as f64;
    (all * per_op, between * per_op)
}

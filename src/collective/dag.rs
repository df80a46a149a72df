//! Two-level allreduce algorithms as explicit dependency graphs: the tree, hierarchical
//! and NVLSTree algorithms one chunk of one channel at a time (every chunk of a channel
//! is the same graph on its own slots; `graph::GraphRun` runs a copy per chunk), and
//! in-network aggregation as one graph per operation.
//!
//! Both reduce inside a group first (a chain towards the group's leader, each hop adding
//! its own data), run an algorithm among the leaders, and broadcast the result back down
//! the chain:
//! - `tree` (NCCL's double binary tree, `src/graph/trees.cc`): groups are hosts; the
//!   leaders form two binary trees, the second the mirror of the first, each carrying half
//!   of every chunk up (reducing) and back down (copying);
//! - `hierarchical` (the guide's "two-hop aggregation"): groups are leaves (a chain
//!   inside each host first, then between the leaf's hosts); the leaders, one per leaf,
//!   run a ring allreduce across the spines, so each chunk crosses the spine layer
//!   2(L - 1)/L times per leader instead of once per rank. When every server holds the
//!   same number of ranks (two or more), each on its own NIC, the hierarchy has a leader
//!   per rail instead
//!   (`rail_hierarchical_chunk`): a reduce-scatter inside each server, the two-level
//!   ring per rail on its shard, an all-gather inside each server, so each NIC carries
//!   its rail's share.
//!
//! The buffer is split across channels and into `chunk`-sized chunks that pipeline
//! through the graph; each chunk is cut into pieces (one per leader for the ring, one per
//! tree; for the rail hierarchy one per GPU and leader), and every transfer moves one
//! piece.

use super::RankLoc;

/// One transfer of the graph.
#[derive(Clone, Copy, Debug)]
pub struct DNode {
    pub src: u32,
    pub dst: u32,
    pub channel: u32,
    /// Buffer slot (per channel) it reads at `src` and writes at `dst`.
    pub slot: u32,
    pub bytes: u64,
    /// Added into the receiver's copy (else it replaces it).
    pub reduce: bool,
    /// How it moves under NVLink SHARP (`Nvls::No` for every other transfer).
    pub nvls: Nvls,
}

/// How a transfer inside a server moves under NVLink SHARP (NVLSTree).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Nvls {
    /// A plain NVLink or network transfer.
    #[default]
    No,
    /// Into the NVSwitch, which adds it into the receiver's shard (`multimem.ld_reduce`):
    /// the sender's link carries the bytes; the receiving GPU does no reduction.
    Reduce,
    /// The first copy of a multicast store (`multimem.st`): the sender's link carries
    /// the bytes once.
    Multicast,
    /// Every further copy of that multicast: the switch replicates it, so it costs the
    /// sender no link time and lands with the first (a multicast's copies are posted
    /// together, `CollectiveRun::issue_node`).
    Replica,
}

/// A graph of transfers: one chunk of one channel (`tree_chunk`, `rail_hierarchical_chunk`,
/// `nvls_tree_chunk`) or, in-network, a whole operation. Immutable: `graph::GraphRun`
/// keeps the execution state of each copy it runs.
#[derive(Clone, Debug, Default)]
pub struct Dag {
    pub nodes: Vec<DNode>,
    /// Successors of node i: `succ[succ_start[i]..succ_start[i + 1]]`.
    succ_start: Vec<u32>,
    succ: Vec<u32>,
    /// Each node's dependency count.
    pub deps_init: Vec<u32>,
    pub slots_per_channel: u32,
    /// Slots each channel uses (its chunks x pieces).
    pub slots_used: Vec<u32>,
}

impl Dag {
    pub fn successors(&self, i: u32) -> &[u32] {
        &self.succ[self.succ_start[i as usize] as usize..self.succ_start[i as usize + 1] as usize]
    }

    /// Nodes with no dependency.
    pub fn roots(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.nodes.len() as u32).filter(|&i| self.deps_init[i as usize] == 0)
    }

    /// Whether every transfer waits only for transfers that land at its sender (data
    /// it forwards or adds to): then a transfer is made ready where its dependencies
    /// land, by its sender, and a run split over threads can keep each rank's
    /// dependency counts in its own partition (`share`).
    pub fn deps_land_at_sender(&self) -> bool {
        (0..self.nodes.len() as u32).all(|i| {
            let dst = self.nodes[i as usize].dst;
            self.successors(i)
                .iter()
                .all(|&s| self.nodes[s as usize].src == dst)
        })
    }

    /// Bytes it holds (the memory footprint's count).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<DNode>()
            + (self.succ_start.len() + self.succ.len() + self.deps_init.len()) * 4
            + self.slots_used.len() * 4
    }
}

/// Which two-level algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TwoLevel {
    /// Leaders in two mirrored binary trees (groups: hosts).
    DoubleTree,
    /// Leaders in a ring (groups: leaves).
    LeaderRing,
}

#[derive(Default)]
struct Builder {
    nodes: Vec<DNode>,
    edges: Vec<(u32, u32)>,
}

impl Builder {
    fn node(&mut self, n: DNode, deps: &[u32]) -> u32 {
        let id = self.nodes.len() as u32;
        self.nodes.push(n);
        for &d in deps {
            self.edges.push((d, id));
        }
        id
    }
}

/// One chunk of the tree or hierarchical allreduce on channel `c` (`groups`: the
/// channel's groups, `channel_groups`), of `ej` elements: its slots are the chunk's own
/// (`0..pieces`); every chunk of a channel has the same transfers, in the same order, and
/// differs only in its slots and the last chunk's sizes (`graph::GraphRun` runs copies).
pub fn tree_chunk(kind: TwoLevel, groups: &[Vec<u32>], c: u32, ej: u64, elem_bytes: u64) -> Dag {
    let pieces = tree_pieces(kind, groups.len());
    let mut b = Builder::default();
    let piece_bytes = |i: u64| (ej / pieces + u64::from(i < ej % pieces)) * elem_bytes;
    two_level_chunk(
        &mut b,
        kind,
        groups,
        c,
        pieces,
        &|i| i as u32,
        &piece_bytes,
        &|_, _| Vec::new(),
    );
    finish(b, pieces as u32, vec![pieces as u32])
}

/// Pieces (slots) per chunk of the tree or hierarchical allreduce over `groups` groups:
/// one per tree, one per leader in the leaders' ring, one with a single group.
pub fn tree_pieces(kind: TwoLevel, groups: usize) -> u64 {
    match kind {
        _ if groups == 1 => 1,
        TwoLevel::DoubleTree => 2,
        TwoLevel::LeaderRing => groups as u64,
    }
}

/// One chunk of a two-level allreduce over `groups` (leader first), cut into `pieces`:
/// chains into the leaders (each hop adding its sender's data), the leaders' algorithm,
/// and chains back down. Piece `i` reads and writes slot `slot(i)` and moves
/// `piece_bytes(i)`; `ready(rank, i)` are the transfers that must land at `rank` before
/// it sends piece `i` on (its data is not complete before). Returns, per rank of the
/// groups and piece, the transfers after which it holds the final piece.
#[allow(clippy::too_many_arguments)]
fn two_level_chunk(
    b: &mut Builder,
    kind: TwoLevel,
    groups: &[Vec<u32>],
    c: u32,
    pieces: u64,
    slot: &dyn Fn(u64) -> u32,
    piece_bytes: &dyn Fn(u64) -> u64,
    ready: &dyn Fn(u32, u64) -> Vec<u32>,
) -> Vec<(u32, u64, Vec<u32>)> {
    let g_count = groups.len();
    let mut finals = Vec::new();
    // 1. Chains into each leader, per piece.
    let mut into_leader = vec![vec![None::<u32>; pieces as usize]; g_count];
    for (g, members) in groups.iter().enumerate() {
        for i in 0..pieces {
            let mut prev: Option<u32> = None;
            for idx in (1..members.len()).rev() {
                let mut deps: Vec<u32> = prev.into_iter().collect();
                deps.extend(ready(members[idx], i));
                prev = Some(b.node(
                    DNode {
                        src: members[idx],
                        dst: members[idx - 1],
                        channel: c,
                        slot: slot(i),
                        bytes: piece_bytes(i),
                        reduce: true,
                        nvls: Nvls::No,
                    },
                    &deps,
                ));
            }
            into_leader[g][i as usize] = prev;
        }
    }
    let leader = |g: usize| groups[g][0];
    // What the leader holds of its group: the chain into it, and its own data.
    let own = |g: usize, i: usize| -> Vec<u32> {
        let mut v: Vec<u32> = into_leader[g][i].into_iter().collect();
        v.extend(ready(leader(g), i as u64));
        v
    };
    // 2. Among the leaders; `final_deps[g][i]`: what makes piece i final at g.
    let mut final_deps: Vec<Vec<Vec<u32>>> = vec![vec![Vec::new(); pieces as usize]; g_count];
    if g_count == 1 {
        final_deps[0][0] = own(0, 0);
    } else {
        match kind {
            TwoLevel::LeaderRing => {
                let l = g_count as u64;
                // step s: position q sends piece (q - s) mod L to q + 1.
                let mut step_node = vec![vec![0u32; (2 * l - 2) as usize]; g_count];
                for s in 0..2 * l - 2 {
                    for q in 0..l {
                        let piece = ((q + l - s % l) % l) as usize;
                        let to = ((q + 1) % l) as usize;
                        let reduce = s < l - 1;
                        let mut deps = if s == 0 {
                            own(q as usize, piece)
                        } else {
                            vec![step_node[((q + l - 1) % l) as usize][(s - 1) as usize]]
                        };
                        if reduce {
                            // The receiver adds into its own group's partial.
                            deps.extend(own(to, piece));
                        }
                        step_node[q as usize][s as usize] = b.node(
                            DNode {
                                src: leader(q as usize),
                                dst: leader(to),
                                channel: c,
                                slot: slot(piece as u64),
                                bytes: piece_bytes(piece as u64),
                                reduce,
                                nvls: Nvls::No,
                            },
                            &deps,
                        );
                    }
                }
                // Piece p is final at q when the transfer that completes it lands.
                for q in 0..l {
                    let from = ((q + l - 1) % l) as usize;
                    // The last reduce-scatter step, then every allgather step.
                    for s in l - 2..2 * l - 2 {
                        let piece = ((from as u64 + l - s % l) % l) as usize;
                        final_deps[q as usize][piece] = vec![step_node[from][s as usize]];
                    }
                }
            }
            TwoLevel::DoubleTree => {
                let n = g_count;
                #[allow(clippy::needless_range_loop)] // i names the tree and its piece
                for i in 0..2usize {
                    // Tree 0 is a heap over group indices; tree 1 its mirror.
                    let id = |g: usize| if i == 0 { g } else { n - 1 - g };
                    let parent = |g: usize| -> Option<usize> {
                        let k = id(g);
                        (k > 0).then(|| id((k - 1) / 2))
                    };
                    let children = |g: usize| -> Vec<usize> {
                        let k = id(g);
                        [2 * k + 1, 2 * k + 2]
                            .into_iter()
                            .filter(|&x| x < n)
                            .map(id)
                            .collect()
                    };
                    // Up, leaves first: by decreasing heap index.
                    let mut up = vec![None::<u32>; n];
                    for k in (1..n).rev() {
                        let g = id(k);
                        let mut deps = own(g, i);
                        deps.extend(children(g).iter().filter_map(|&ch| up[ch]));
                        up[g] = Some(b.node(
                            DNode {
                                src: leader(g),
                                dst: leader(parent(g).expect("not the root")),
                                channel: c,
                                slot: slot(i as u64),
                                bytes: piece_bytes(i as u64),
                                reduce: true,
                                nvls: Nvls::No,
                            },
                            &deps,
                        ));
                    }
                    let root = id(0);
                    let mut root_deps = own(root, i);
                    root_deps.extend(children(root).iter().filter_map(|&ch| up[ch]));
                    final_deps[root][i] = root_deps;
                    // Down, root first: by increasing heap index.
                    for k in 0..n {
                        let g = id(k);
                        for ch in children(g) {
                            let deps = final_deps[g][i].clone();
                            let d = b.node(
                                DNode {
                                    src: leader(g),
                                    dst: leader(ch),
                                    channel: c,
                                    slot: slot(i as u64),
                                    bytes: piece_bytes(i as u64),
                                    reduce: false,
                                    nvls: Nvls::No,
                                },
                                &deps,
                            );
                            final_deps[ch][i] = vec![d];
                        }
                    }
                }
            }
        }
    }
    // 3. Back down each chain, per piece.
    for (g, members) in groups.iter().enumerate() {
        for i in 0..pieces {
            let mut deps = final_deps[g][i as usize].clone();
            finals.push((members[0], i, deps.clone()));
            for idx in 0..members.len().saturating_sub(1) {
                let d = b.node(
                    DNode {
                        src: members[idx],
                        dst: members[idx + 1],
                        channel: c,
                        slot: slot(i),
                        bytes: piece_bytes(i),
                        reduce: false,
                        nvls: Nvls::No,
                    },
                    &deps,
                );
                deps = vec![d];
                finals.push((members[idx + 1], i, deps.clone()));
            }
        }
    }
    finals
}

/// One chunk (`ej` elements, on channel `c`) of the hierarchical allreduce with a leader
/// per rail, for servers with the same number of ranks `g` (`servers[x]`: server x's
/// ranks, by GPU): the chunk is cut into `g` shards;
/// inside every server the ranks reduce-scatter over NVLink (GPU s gathers shard s),
/// each rail s (GPU s of every server, `rails[s]`: its ranks grouped by leaf, leader
/// first) runs the two-level allreduce of its shard (a chain inside each leaf, the
/// leaders' ring across the spines, back down), and the servers all-gather the shards.
/// So each NIC carries its rail's shard, not the whole buffer (NCCL's rail-aligned
/// hierarchy; PXN keeps every transfer on its rail).
pub fn rail_hierarchical_chunk(
    servers: &[Vec<u32>],
    rails: &[Vec<Vec<u32>>],
    c: u32,
    ej: u64,
    elem_bytes: u64,
) -> Dag {
    let g = servers[0].len() as u64;
    let pieces = rails[0].len().max(1) as u64;
    let per_chunk = g * pieces;
    let mut b = Builder::default();
    let n = servers.iter().map(|x| x.len()).sum::<usize>();
    let server_of = server_index(servers, n);
    let shard = |s: u64| ej / g + u64::from(s < ej % g);
    let bytes =
        |s: u64, i: u64| (shard(s) / pieces + u64::from(i < shard(s) % pieces)) * elem_bytes;
    let slot = |s: u64, i: u64| (s * pieces + i) as u32;
    // 1. Reduce-scatter inside each server: every rank sends shard s to GPU s.
    let into = scatter_to_owners(&mut b, servers, n, c, pieces, &slot, &bytes, Nvls::No);
    // 2. Each rail's shard across the servers, then 3. all-gather inside each.
    for (s, groups) in rails.iter().enumerate() {
        let s = s as u64;
        let finals = two_level_chunk(
            &mut b,
            TwoLevel::LeaderRing,
            groups,
            c,
            pieces,
            &|i| slot(s, i),
            &|i| bytes(s, i),
            &|rank, i| into[rank as usize * pieces as usize + i as usize].clone(),
        );
        for (rank, i, deps) in finals {
            let members = &servers[server_of[rank as usize]];
            for &k in members.iter().filter(|&&k| k != rank) {
                b.node(
                    DNode {
                        src: rank,
                        dst: k,
                        channel: c,
                        slot: slot(s, i),
                        bytes: bytes(s, i),
                        reduce: false,
                        nvls: Nvls::No,
                    },
                    &deps,
                );
            }
        }
    }
    finish(b, per_chunk as u32, vec![per_chunk as u32])
}

/// Each rank's server index, for `n` ranks grouped as `servers`.
fn server_index(servers: &[Vec<u32>], n: usize) -> Vec<usize> {
    let mut server_of = vec![0usize; n];
    for (x, members) in servers.iter().enumerate() {
        for &k in members {
            server_of[k as usize] = x;
        }
    }
    server_of
}

/// Inside each server every rank sends shard s of the chunk, piece by piece, to the
/// server's GPU s (moving as `nvls` says); per (owner rank, piece) the transfers into it.
#[allow(clippy::too_many_arguments)]
fn scatter_to_owners(
    b: &mut Builder,
    servers: &[Vec<u32>],
    n: usize,
    c: u32,
    pieces: u64,
    slot: &dyn Fn(u64, u64) -> u32,
    bytes: &dyn Fn(u64, u64) -> u64,
    nvls: Nvls,
) -> Vec<Vec<u32>> {
    let mut into: Vec<Vec<u32>> = vec![Vec::new(); n * pieces as usize];
    for members in servers {
        for (s, &owner) in members.iter().enumerate() {
            let s = s as u64;
            for i in 0..pieces {
                for &k in members.iter().filter(|&&k| k != owner) {
                    let d = b.node(
                        DNode {
                            src: k,
                            dst: owner,
                            channel: c,
                            slot: slot(s, i),
                            bytes: bytes(s, i),
                            reduce: true,
                            nvls,
                        },
                        &[],
                    );
                    into[owner as usize * pieces as usize + i as usize].push(d);
                }
            }
        }
    }
    into
}

/// One chunk (`ej` elements, on channel `c`) of the NVLSTree allreduce (NCCL's
/// `NCCL_ALGO_NVLS_TREE`, `src/device/all_reduce.h`
/// `runTreeSplit` over `src/transport/nvls.cc`'s multicast buffers), for servers with the
/// same number of ranks `g`, each on its own NIC (`servers[x]`: server x's ranks, by
/// GPU; GPU s is the NVLS head of rail s). The chunk is cut into `g` shards, shard s
/// into two pieces (one per tree):
/// 1. inside every server the NVSwitch adds every GPU's shard s and GPU s reads the sum
///    (`Nvls::Reduce`: each sender's link carries the shard, no GPU adds it);
/// 2. rail s's heads, one per server, run NCCL's double binary tree on the shard: up,
///    adding, and back down, over the network;
/// 3. GPU s multicasts the final shard to its server (`Nvls::Multicast`, then
///    `Nvls::Replica`: the sender's link carries it once).
///
/// So each GPU's link carries (1 + 1/g) x S each way where a unicast reduce-scatter and
/// all-gather carry 2 (g - 1)/g x S, and each NIC its rail's 1/g of the buffer.
pub fn nvls_tree_chunk(servers: &[Vec<u32>], c: u32, ej: u64, elem_bytes: u64) -> Dag {
    let g = servers[0].len() as u64;
    let pieces = 2u64;
    let per_chunk = g * pieces;
    let n = servers.iter().map(|x| x.len()).sum::<usize>();
    let server_of = server_index(servers, n);
    let mut b = Builder::default();
    let shard = |s: u64| ej / g + u64::from(s < ej % g);
    let bytes =
        |s: u64, i: u64| (shard(s) / pieces + u64::from(i < shard(s) % pieces)) * elem_bytes;
    let slot = |s: u64, i: u64| (s * pieces + i) as u32;
    // 1. The switch adds every GPU's shard s for GPU s.
    let into = scatter_to_owners(&mut b, servers, n, c, pieces, &slot, &bytes, Nvls::Reduce);
    // 2. Rail s's heads in a double binary tree, 3. each head's multicast.
    for s in 0..g {
        let heads: Vec<Vec<u32>> = servers.iter().map(|m| vec![m[s as usize]]).collect();
        let finals = two_level_chunk(
            &mut b,
            TwoLevel::DoubleTree,
            &heads,
            c,
            pieces,
            &|i| slot(s, i),
            &|i| bytes(s, i),
            &|rank, i| into[rank as usize * pieces as usize + i as usize].clone(),
        );
        for (rank, i, deps) in finals {
            let members = &servers[server_of[rank as usize]];
            for (idx, &k) in members.iter().filter(|&&k| k != rank).enumerate() {
                b.node(
                    DNode {
                        src: rank,
                        dst: k,
                        channel: c,
                        slot: slot(s, i),
                        bytes: bytes(s, i),
                        reduce: false,
                        nvls: if idx == 0 {
                            Nvls::Multicast
                        } else {
                            Nvls::Replica
                        },
                    },
                    &deps,
                );
            }
        }
    }
    finish(b, per_chunk as u32, vec![per_chunk as u32])
}

/// The ranks by server (by GPU) when NVLSTree can run: two or more servers, each with
/// the same number of ranks, more than two (NCCL's `ncclNvlsInit` needs more than two
/// GPUs), each on a NIC of its own (a head per rail).
pub fn nvls_servers(ranks: &[RankLoc]) -> Option<Vec<Vec<u32>>> {
    let servers = groups(TwoLevel::DoubleTree, ranks, &|_| 0);
    let g = servers[0].len();
    if servers.len() < 2 || g <= 2 || servers.iter().any(|m| m.len() != g) {
        return None;
    }
    let own_nics = servers.iter().all(|m| {
        let mut ports: Vec<u32> = m.iter().map(|&k| ranks[k as usize].port).collect();
        ports.sort_unstable();
        ports.dedup();
        ports.len() == g
    });
    own_nics.then_some(servers)
}

/// Channel `c`'s groups: each server's run of ranks inside a group rotated by `c`, so
/// that each channel's leader, and the NIC it crosses the fabric by, is another GPU (as
/// NCCL binds each tree channel to another GPU and NIC, `src/graph/connect.cc`).
pub fn channel_groups(groups: &[Vec<u32>], ranks: &[RankLoc], c: u32) -> Vec<Vec<u32>> {
    groups
        .iter()
        .map(|m| {
            let mut out = Vec::with_capacity(m.len());
            let mut i = 0;
            while i < m.len() {
                let server = ranks[m[i] as usize].server;
                let mut j = i + 1;
                while j < m.len() && ranks[m[j] as usize].server == server {
                    j += 1;
                }
                let run = &m[i..j];
                let k = c as usize % run.len();
                out.extend_from_slice(&run[k..]);
                out.extend_from_slice(&run[..k]);
                i = j;
            }
            out
        })
        .collect()
}

/// The ranks by server, and per rail its ranks grouped by leaf.
pub type RailShape = (Vec<Vec<u32>>, Vec<Vec<Vec<u32>>>);

/// The shape of a rail-aligned hierarchy: the ranks by server (by GPU) and, per rail
/// (GPU index), that rail's ranks grouped by leaf (by server inside a group). `None`
/// when servers hold different numbers of ranks, a server holds one, ranks of a server
/// share a NIC (no rail of its own to carry a shard), or rails span
/// different numbers of leaves (the plain hierarchy runs then).
pub fn rail_shape(ranks: &[RankLoc], leaf_of: &impl Fn(u32) -> u32) -> Option<RailShape> {
    let servers = groups(TwoLevel::DoubleTree, ranks, leaf_of);
    let g = servers[0].len();
    if g < 2 || servers.iter().any(|m| m.len() != g) {
        return None;
    }
    // Rails need NICs of their own: ranks sharing a NIC gain nothing from shards.
    let distinct_nics = servers.iter().all(|m| {
        let mut ports: Vec<u32> = m.iter().map(|&k| ranks[k as usize].port).collect();
        ports.sort_unstable();
        ports.dedup();
        ports.len() == g
    });
    if !distinct_nics {
        return None;
    }
    let rails: Vec<Vec<Vec<u32>>> = (0..g)
        .map(|s| {
            let rail: Vec<RankLoc> = servers.iter().map(|m| ranks[m[s] as usize]).collect();
            let ids: Vec<u32> = servers.iter().map(|m| m[s]).collect();
            let mut leaves: Vec<u32> = rail.iter().map(|r| leaf_of(r.port)).collect();
            leaves.sort_unstable();
            leaves.dedup();
            leaves
                .iter()
                .map(|&l| {
                    ids.iter()
                        .copied()
                        .filter(|&k| leaf_of(ranks[k as usize].port) == l)
                        .collect()
                })
                .collect()
        })
        .collect();
    let l = rails[0].len();
    rails
        .iter()
        .all(|r| r.len() == l)
        .then_some((servers, rails))
}

/// Groups for `kind`: hosts (tree) or leaves (hierarchical), each sorted so that a host's
/// ranks are adjacent (its hops go over the intra-host fabric), leader first.
pub fn groups(kind: TwoLevel, ranks: &[RankLoc], leaf_of: &impl Fn(u32) -> u32) -> Vec<Vec<u32>> {
    let key = |r: &RankLoc| match kind {
        TwoLevel::DoubleTree => r.server,
        TwoLevel::LeaderRing => leaf_of(r.port),
    };
    let mut keys: Vec<u32> = ranks.iter().map(key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.iter()
        .map(|&k| {
            let mut m: Vec<u32> = (0..ranks.len() as u32)
                .filter(|&r| key(&ranks[r as usize]) == k)
                .collect();
            m.sort_by_key(|&r| (ranks[r as usize].server, ranks[r as usize].gpu, r));
            m
        })
        .collect()
}

/// Chunks a host may have on their way to its leaf switch, per channel (assumption:
/// a few aggregation buffers per stream).
const UPLOAD_WINDOW: usize = 4;

/// In-network (SHARP-like) allreduce, as NCCL's CollNet chain runs it: inside each host
/// a chain adds the GPUs' chunks into the host's leader; the leader sends the host's
/// chunk once to its leaf switch, which adds its hosts' chunks and sends one to a spine
/// (chunk j to spine j mod spines); the spine adds the leaves' and sends the result back
/// to each leaf, which sends it to each host's leader, and a chain copies it to the
/// host's other GPUs. Endpoint ids: ranks `0..n`, switch `sw` is `n + sw` (leaves first,
/// then spines). `hosts` are the ranks by host (leader first) and `rank_leaf` each
/// rank's leaf (its NIC's). Each channel rotates every host's chain
/// (`channel_groups`), so its leader, and the rail and leaf it streams to, change
/// with the channel (NCCL's CollNet runs one SHARP tree per NIC).
#[allow(clippy::too_many_arguments)]
pub fn build_in_network(
    n: u32,
    hosts: &[Vec<u32>],
    rank_leaf: &[u32],
    leaves: u32,
    spines: u32,
    elems: &[u64],
    chunk_elems: u64,
    elem_bytes: u64,
    ranks: &[RankLoc],
) -> Dag {
    let mut b = Builder::default();
    // A host's leader streams its chunks to the leaf with at most `UPLOAD_WINDOW` of
    // them unconsumed per channel, so that chunks pipeline through the switches.
    let mut last_up: Vec<std::collections::VecDeque<u32>> =
        vec![std::collections::VecDeque::new(); hosts.len() * elems.len()];
    for (c, &e) in elems.iter().enumerate() {
        let hosts = channel_groups(hosts, ranks, c as u32);
        let host_leaf: Vec<u32> = hosts.iter().map(|m| rank_leaf[m[0] as usize]).collect();
        // The leaves in use, in order.
        let mut used_leaves: Vec<u32> = host_leaf.clone();
        used_leaves.sort_unstable();
        used_leaves.dedup();
        let c = c as u32;
        let chunks = e.div_ceil(chunk_elems).max(1);
        for j in 0..chunks {
            let bytes = (e - j * chunk_elems).min(chunk_elems) * elem_bytes;
            let slot = j as u32;
            let node = |src: u32, dst: u32, reduce: bool| DNode {
                src,
                dst,
                channel: c,
                slot,
                bytes,
                reduce,
                nvls: Nvls::No,
            };
            // Inside each host, to its leader; then the leader up to the leaf.
            let mut up_of_leaf: Vec<Vec<u32>> = vec![Vec::new(); used_leaves.len()];
            for (h, members) in hosts.iter().enumerate() {
                let mut deps: Vec<u32> = Vec::new();
                for idx in (1..members.len()).rev() {
                    let d = b.node(node(members[idx], members[idx - 1], true), &deps);
                    deps = vec![d];
                }
                let k = h * elems.len() + c as usize;
                if last_up[k].len() == UPLOAD_WINDOW {
                    deps.extend(last_up[k].pop_front());
                }
                let leaf = host_leaf[h];
                let up = b.node(node(members[0], n + leaf, true), &deps);
                last_up[k].push_back(up);
                let li = used_leaves.binary_search(&leaf).expect("a used leaf");
                up_of_leaf[li].push(up);
            }
            // Across the spine, when there is more than one leaf.
            let at_leaf: Vec<Vec<u32>> = if used_leaves.len() == 1 {
                up_of_leaf
            } else {
                let spine = n + leaves + (j % spines as u64) as u32;
                let up2: Vec<u32> = used_leaves
                    .iter()
                    .zip(&up_of_leaf)
                    .map(|(&leaf, deps)| b.node(node(n + leaf, spine, true), deps))
                    .collect();
                used_leaves
                    .iter()
                    .map(|&leaf| vec![b.node(node(spine, n + leaf, false), &up2)])
                    .collect()
            };
            // Down to each host's leader, then along the host's chain.
            for (h, members) in hosts.iter().enumerate() {
                let leaf = host_leaf[h];
                let li = used_leaves.binary_search(&leaf).expect("a used leaf");
                let mut deps = vec![b.node(node(n + leaf, members[0], false), &at_leaf[li])];
                for idx in 0..members.len() - 1 {
                    let d = b.node(node(members[idx], members[idx + 1], false), &deps);
                    deps = vec![d];
                }
            }
        }
    }
    finish_chunks(b, elems, chunk_elems, 1)
}

/// `finish` for a graph whose chunks each use `per_chunk` slots.
fn finish_chunks(b: Builder, elems: &[u64], chunk_elems: u64, per_chunk: u64) -> Dag {
    let chunks = |e: u64| e.div_ceil(chunk_elems).max(1);
    let max_chunks = elems.iter().map(|&e| chunks(e)).max().unwrap_or(1);
    finish(
        b,
        (max_chunks * per_chunk) as u32,
        elems
            .iter()
            .map(|&e| (chunks(e) * per_chunk) as u32)
            .collect(),
    )
}

/// Compressed successor lists and the initial dependency counts.
fn finish(b: Builder, slots_per_channel: u32, slots_used: Vec<u32>) -> Dag {
    let n = b.nodes.len();
    let mut count = vec![0u32; n + 1];
    let mut deps_init = vec![0u32; n];
    for &(a, z) in &b.edges {
        count[a as usize + 1] += 1;
        deps_init[z as usize] += 1;
    }
    for i in 0..n {
        count[i + 1] += count[i];
    }
    let mut fill = count.clone();
    let mut succ = vec![0u32; b.edges.len()];
    for &(a, z) in &b.edges {
        succ[fill[a as usize] as usize] = z;
        fill[a as usize] += 1;
    }
    Dag {
        nodes: b.nodes,
        succ_start: count,
        succ,
        deps_init,
        slots_per_channel,
        slots_used,
    }
}

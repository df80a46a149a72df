//! How `run --threads N` splits the fabric (issue 17): which partition owns each host,
//! switch, egress port, wire and ingress, and how far ahead each may run alone.
//!
//! A partition is a set of leaves with their hosts and a set of spines, so every
//! leaf-spine link whose ends fall apart crosses. They are contiguous blocks (leaf `l`
//! of `L` goes to partition `l * N / L`, spine `s` of `S` to `s * N / S`), unless the
//! run's flows load the leaves so unevenly that a split balanced by the events they are
//! expected to make is clearly more even ([`Plan::balanced`]). What the leaves and
//! spines leave uneven, a few hosts placed apart from their leaf even out, where their
//! own link is no shorter than the lookahead (its wire then crosses). A run with
//! collectives and the host model keeps each server's NICs in one partition instead,
//! so that its NVLink transfers are that partition's own: leaves holding NICs of one
//! server go together ([`Plan::servers_whole`]), or, where every server has a NIC on
//! every group of leaves, the servers go to the partitions in blocks with their NICs
//! placed apart from their leaves ([`Plan::servers_apart`]). An egress
//! port belongs to the node it leaves (its serializer, queues, PFC and credit gates), a
//! wire and the ingress at its far end to the node it reaches (the packet lands there,
//! the PFC frames and credits go back from there).
//!
//! Lookahead: whatever one end of a link does reaches the other end a link's
//! propagation delay later at the earliest (a packet's head or tail, a PAUSE or RESUME,
//! returning credits: `components::wire`, `components::ingress`), so partitions that
//! handle their events earlier than `T + lookahead`, where `T` is the earliest event
//! anywhere, never miss one another's effects. The lookahead is the shortest latency of
//! a link that crosses partitions (YAWNS, Nicol, "The cost of conservative
//! synchronization in parallel discrete event simulations", JACM 40(2), 1993: windows
//! of that width with a barrier between them).

use super::idmap::IdMap;
use crate::components::host::ST_RECV_CQE;
use crate::engine::{Event, PortId};
use crate::topology::graph::{Graph, GraphPort};
use crate::topology::Node;
use crate::units::SimDuration;

/// The split of a fabric into partitions.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Number of partitions (threads).
    pub parts: u16,
    host: Vec<u16>,
    switch: Vec<u16>,
    /// Partition of each port's sending node, and of its receiving node.
    port_from: Vec<u16>,
    port_to: Vec<u16>,
    /// The shortest latency of a link whose ends lie in different partitions
    /// (`SimDuration::MAX` when none does).
    pub lookahead: SimDuration,
    /// Links (one direction each) whose ends lie in different partitions.
    pub crossing_links: u32,
    /// Hosts placed apart from their leaf to even the partitions out ([`Plan::balanced`]).
    pub hosts_apart: u32,
}

/// Events one packet and its ACK make, by where they happen (`balanced`'s weights): a
/// path within a leaf makes 4 each way there (the host's end of serialization, the
/// leaf's arrival and end of serialization, the arrival at the host); a path through a
/// spine makes 3 each way at each end leaf's partition and 2 each way at the spine
/// (its arrival and end of serialization). websearch-128 split in two measured 30.66 M
/// and 28.81 M events where these weights predict 30.85 M and 28.54 M.
const EVENTS_WITHIN_LEAF: u64 = 8;
const EVENTS_AT_END_LEAF: u64 = 6;
const EVENTS_AT_SPINE: u64 = 4;
/// Of those, the events at each end host (a packet's end of serialization and its
/// ACK's arrival at the source, the arrival and the ACK's end of serialization at the
/// destination): what moves with a host placed apart from its leaf.
const EVENTS_AT_HOST: u64 = 2;

/// Hosts are moved apart from their leaf while the partitions' expected events differ
/// by more than this percentage of the busiest's: about the weights' own error (0.6-0.9%
/// per partition on websearch-128, below).
const HOST_BALANCE_PERCENT: u64 = 1;

/// How much more even, in percent of the busiest partition's expected events, the
/// balanced split must be to replace the contiguous blocks: more than the weights' own
/// error. Measured with 2 threads: the weights were off by 0.6-0.9% per partition on
/// websearch-128, whose 2.4% expected gain came out as 0.9% fewer events in the busier
/// partition and no gain in wall time (1.025x, 6 pairs); balanced, permutation-256 and
/// quickstart (evenly loaded leaves) were up to 3% less even than their blocks (how
/// ECMP's hashing spreads packets over the spines decides there).
const BALANCE_MARGIN_PERCENT: u128 = 5;

impl Plan {
    /// Splits `graph` (a fabric of `leaves` leaves, switches `0..leaves`, then spines)
    /// into `parts` partitions of contiguous blocks.
    pub fn new(graph: &Graph, leaves: u32, parts: u16) -> Plan {
        let parts = parts.max(1);
        let n = parts as u64;
        let switches = graph.switches();
        let spines = switches - leaves;
        let switch: Vec<u16> = (0..switches)
            .map(|s| {
                if s < leaves {
                    (s as u64 * n / leaves as u64) as u16
                } else {
                    ((s - leaves) as u64 * n / spines.max(1) as u64) as u16
                }
            })
            .collect();
        Plan::with_switches(graph, parts, switch)
    }

    /// Splits `graph` so that each partition expects about the same number of events,
    /// from the run's `traffic` (source host, destination host, packets of each flow):
    /// the leaves, heaviest first, each to the partition expecting the fewest so far,
    /// then the spines likewise, each expecting its share of what the leaves send over
    /// their uplinks (ECMP; a leaf of one plane reaches only that plane's spines). After Graham's
    /// longest-processing-time rule ("Bounds on multiprocessing timing anomalies", SIAM
    /// J. Appl. Math. 17(2), 1969), with the leaves placed before the spines and each
    /// partition given a leaf and a spine first. Without traffic, or unless the busiest
    /// partition then expects `BALANCE_MARGIN_PERCENT` fewer events than with them, the
    /// contiguous blocks of [`Plan::new`]. Then, while the busiest partition expects
    /// more than `HOST_BALANCE_PERCENT` more events than the idlest, its host with the
    /// most events that fits in half the difference moves to the idlest (each host at
    /// most once, only one whose links are no shorter than the lookahead, so the windows
    /// stay as wide). Which partition owns a component never changes a result, only
    /// how evenly the threads are loaded.
    pub fn balanced(
        graph: &Graph,
        leaves: u32,
        parts: u16,
        traffic: impl IntoIterator<Item = (u32, u32, u64)>,
    ) -> Plan {
        let parts = parts.max(1);
        let switches = graph.switches();
        let leaf_of = |h: u32| {
            let s = graph.attach(h);
            (s < leaves).then_some(s as usize)
        };
        let mut leaf_work = vec![0u64; leaves as usize];
        let mut host_work = vec![0u64; graph.hosts() as usize];
        // Packets (data or ACK) each leaf sends up to a spine.
        let mut up = vec![0u64; leaves as usize];
        for (src, dst, packets) in traffic {
            for h in [src, dst] {
                if let Some(w) = host_work.get_mut(h as usize) {
                    *w += EVENTS_AT_HOST * packets;
                }
            }
            match (leaf_of(src), leaf_of(dst)) {
                (Some(a), Some(b)) if a == b => leaf_work[a] += EVENTS_WITHIN_LEAF * packets,
                (Some(a), Some(b)) => {
                    leaf_work[a] += EVENTS_AT_END_LEAF * packets;
                    leaf_work[b] += EVENTS_AT_END_LEAF * packets;
                    up[a] += packets;
                    up[b] += packets;
                }
                _ => {}
            }
        }
        if leaf_work.iter().all(|&w| w == 0) {
            return Plan::new(graph, leaves, parts);
        }
        // A leaf's uplinks (ECMP spreads what it sends up over them equally; a leaf of
        // one plane reaches only that plane's spines).
        let uplink = |p: &GraphPort| match (p.from, p.to) {
            (Node::Switch(a), Node::Switch(s)) if a < leaves && s >= leaves => {
                Some((a as usize, s as usize))
            }
            _ => None,
        };
        let mut uplinks = vec![0u64; leaves as usize];
        for (a, _) in graph.ports.iter().filter_map(uplink) {
            uplinks[a] += 1;
        }
        // Each switch's expected events: a leaf's, then each spine's share of what the
        // leaves send up, half the events a packet and its ACK make at a spine each.
        let mut work = leaf_work;
        work.resize(switches as usize, 0);
        for (a, s) in graph.ports.iter().filter_map(uplink) {
            work[s] += EVENTS_AT_SPINE / 2 * up[a] / uplinks[a];
        }
        let mut load = vec![0u64; parts as usize];
        let mut switch = vec![0u16; switches as usize];
        // Leaves, then spines: heaviest first, each to the partition expecting the fewest
        // events among those without a switch of this tier yet, else among all; ties to
        // the lowest.
        for tier in [0..leaves, leaves..switches] {
            let mut order: Vec<u32> = tier.collect();
            order.sort_by_key(|&s| (std::cmp::Reverse(work[s as usize]), s));
            let mut has = vec![false; parts as usize];
            for s in order {
                let any_without = has.iter().any(|&h| !h);
                let p = (0..parts as usize)
                    .filter(|&p| !any_without || !has[p])
                    .min_by_key(|&p| (load[p], p))
                    .expect("a partition");
                switch[s as usize] = p as u16;
                load[p] += work[s as usize];
                has[p] = true;
            }
        }
        // The blocks unless this is clearly more even: the weights leave out how ECMP
        // spreads packets over the spines, which moves a few percent of the events.
        let blocks = Plan::new(graph, leaves, parts);
        let mut block_load = vec![0u64; parts as usize];
        for s in 0..switches {
            block_load[blocks.switch(s) as usize] += work[s as usize];
        }
        let most = |l: &[u64]| l.iter().copied().max().unwrap_or(0) as u128;
        let (plan, mut load) =
            if most(&load) * (100 + BALANCE_MARGIN_PERCENT) >= most(&block_load) * 100 {
                (blocks, block_load)
            } else {
                (Plan::with_switches(graph, parts, switch), load)
            };
        // A host may move where its links are no shorter than the lookahead.
        let mut shortest = vec![SimDuration::MAX; graph.hosts() as usize];
        for p in &graph.ports {
            for n in [p.from, p.to] {
                if let Node::Host(h) = n {
                    let s = &mut shortest[h as usize];
                    *s = (*s).min(p.link.latency);
                }
            }
        }
        let mut host = plan.host.clone();
        let moved = even_out(&mut host, &mut load, &host_work, |h| {
            shortest[h] >= plan.lookahead
        });
        if moved == 0 {
            return plan;
        }
        Plan {
            hosts_apart: moved,
            ..Plan::with_nodes(graph, parts, plan.switch, host)
        }
    }

    /// Splits `graph` keeping each server's NICs in one partition (`server_of(h)`: the
    /// server of host port h, if it is one's): a collective's ranks on one server move
    /// data over the intra-host fabric, handled where both ranks are (`parallel_coll`).
    /// Leaves holding NICs of one server are tied together (under rail wiring, leaf b of
    /// each rail's block of leaves, with the servers of block b), the groups go to the
    /// partitions in order, in blocks of about as many leaves, the spines in contiguous
    /// blocks, and every host stays with its leaf. `None` when there are fewer groups
    /// than partitions.
    pub fn servers_whole(
        graph: &Graph,
        leaves: u32,
        parts: u16,
        server_of: impl Fn(u32) -> Option<u32>,
    ) -> Option<Plan> {
        let parts = parts.max(1);
        // Union-find over the leaves: a server's NICs tie their leaves.
        let mut up: Vec<u32> = (0..leaves).collect();
        fn root(up: &mut [u32], mut x: u32) -> u32 {
            while up[x as usize] != x {
                up[x as usize] = up[up[x as usize] as usize];
                x = up[x as usize];
            }
            x
        }
        let mut first_leaf: IdMap<u32, u32> = IdMap::default();
        for h in 0..graph.hosts() {
            let (Some(server), leaf) = (server_of(h), graph.attach(h)) else {
                continue;
            };
            if leaf >= leaves {
                continue;
            }
            let other = *first_leaf.entry(server).or_insert(leaf);
            let (a, b) = (root(&mut up, leaf), root(&mut up, other));
            // The smaller leaf names the group.
            up[a.max(b) as usize] = a.min(b);
        }
        let group: Vec<u32> = (0..leaves).map(|l| root(&mut up, l)).collect();
        let mut firsts: Vec<u32> = group.clone();
        firsts.sort_unstable();
        firsts.dedup();
        if firsts.len() < parts as usize {
            return None;
        }
        // Groups in order of their first leaf, each to the partition its leaves so far
        // reach (blocks of about `leaves / parts` leaves).
        let mut size: IdMap<u32, u64> = IdMap::default();
        for &g in &group {
            *size.entry(g).or_insert(0) += 1;
        }
        let mut part_of: IdMap<u32, u16> = IdMap::default();
        let (mut before, n) = (0u64, parts as u64);
        for (i, &g) in firsts.iter().enumerate() {
            // Every partition gets a group: the last `parts - k` groups go one each.
            let left = (firsts.len() - i) as u64;
            let p = ((before * n / leaves as u64).max(n.saturating_sub(left))).min(n - 1);
            part_of.insert(g, p as u16);
            before += size[&g];
        }
        let switches = graph.switches();
        let spines = switches - leaves;
        let switch: Vec<u16> = (0..switches)
            .map(|s| {
                if s < leaves {
                    part_of[&group[s as usize]]
                } else {
                    ((s - leaves) as u64 * n / spines.max(1) as u64) as u16
                }
            })
            .collect();
        Some(Plan::with_switches(graph, parts, switch))
    }

    /// Splits `graph` by servers when no grouping of leaves keeps them whole (every
    /// server has a NIC on every group, as on a rail-optimized fabric of one leaf a
    /// rail): the servers (`server_of`, of `servers`) go to the partitions in blocks with
    /// their NICs, the leaves and spines in contiguous blocks, so a NIC whose leaf is
    /// another partition's is placed apart from it (its link crosses). `None` when there
    /// are fewer servers than partitions. Host links shorter than the fabric's links
    /// narrow the windows to them (the lookahead is the shortest link that crosses);
    /// a run whose windows then hold too little work goes on on one thread
    /// (`parallel::TOO_LITTLE_WORK`). Until stop 58 such fabrics ran on one thread:
    /// `allreduce-ring.yaml` (100 ns host links, 300 ns fabric links) now takes 0.88x
    /// its one-thread wall time with `--threads 2`.
    pub fn servers_apart(
        graph: &Graph,
        leaves: u32,
        parts: u16,
        servers: u32,
        server_of: impl Fn(u32) -> Option<u32>,
    ) -> Option<Plan> {
        let parts = parts.max(1);
        if servers < parts as u32 {
            return None;
        }
        let blocks = Plan::new(graph, leaves, parts);
        let host: Vec<u16> = (0..graph.hosts())
            .map(|h| match server_of(h) {
                Some(s) => (s as u64 * parts as u64 / servers as u64) as u16,
                None => blocks.host(h),
            })
            .collect();
        let moved = (0..graph.hosts())
            .filter(|&h| host[h as usize] != blocks.host(h))
            .count() as u32;
        let plan = Plan::with_nodes(graph, parts, blocks.switch, host);
        Some(Plan {
            hosts_apart: moved,
            ..plan
        })
    }

    /// The plan that puts switch s in partition `switch[s]` and each host with its leaf.
    fn with_switches(graph: &Graph, parts: u16, switch: Vec<u16>) -> Plan {
        let host: Vec<u16> = (0..graph.hosts())
            .map(|h| match graph.ports[graph.host_up(h) as usize].to {
                Node::Switch(s) => switch[s as usize],
                Node::Host(_) => 0,
            })
            .collect();
        Plan::with_nodes(graph, parts, switch, host)
    }

    /// The plan that puts switch s in partition `switch[s]` and host h in `host[h]`.
    fn with_nodes(graph: &Graph, parts: u16, switch: Vec<u16>, host: Vec<u16>) -> Plan {
        let of = |node: Node| match node {
            Node::Host(h) => host[h as usize],
            Node::Switch(s) => switch[s as usize],
        };
        let port_from: Vec<u16> = graph.ports.iter().map(|p| of(p.from)).collect();
        let port_to: Vec<u16> = graph.ports.iter().map(|p| of(p.to)).collect();
        let mut lookahead = SimDuration::MAX;
        let mut crossing_links = 0;
        for (p, gp) in graph.ports.iter().enumerate() {
            if port_from[p] != port_to[p] {
                crossing_links += 1;
                lookahead = lookahead.min(gp.link.latency);
            }
        }
        Plan {
            parts,
            host,
            switch,
            port_from,
            port_to,
            lookahead,
            crossing_links,
            hosts_apart: 0,
        }
    }

    /// The partition of host `h`.
    #[inline]
    pub fn host(&self, h: u32) -> u16 {
        self.host[h as usize]
    }

    /// The partition of switch `s`.
    #[inline]
    pub fn switch(&self, s: u32) -> u16 {
        self.switch[s as usize]
    }

    /// The partition that owns `port`'s sending side (its queues, serializer, gates).
    #[inline]
    pub fn sender(&self, port: PortId) -> u16 {
        self.port_from[port as usize]
    }

    /// The partition that owns `port`'s wire and the ingress at its far end.
    #[inline]
    pub fn receiver(&self, port: PortId) -> u16 {
        self.port_to[port as usize]
    }

    /// The partition that handles `event`; `None` for events a partitioned run does not
    /// carry (`flow_ends` gives a flow's source host and the host its data lands at,
    /// `qp_ends` a queue pair's requester and responder hosts). A flow's host-pipeline stages run on its
    /// source's NIC but for the receive completion, which runs on the receiver's
    /// (`components::host`).
    pub fn owner(
        &self,
        event: &Event,
        flow_ends: impl Fn(u32) -> (u32, u32),
        qp_ends: impl Fn(u32) -> (u32, u32),
    ) -> Option<u16> {
        Some(match *event {
            Event::FlowStart { flow } => self.host(flow_ends(flow).0),
            Event::FlowStage { flow, stage } => {
                let (src, rx) = flow_ends(flow);
                self.host(if stage == ST_RECV_CQE { rx } else { src })
            }
            Event::QpTimer { qp } => self.host(qp_ends(qp).0),
            // The responder's host posts its receive WQEs.
            Event::RecvPost { qp, .. } => self.host(qp_ends(qp).1),
            Event::HoleTimer { host, .. } => self.host(host),
            Event::TxDone { port }
            | Event::PortWake { port }
            | Event::Pfc { port, .. }
            | Event::Credit { port, .. } => self.sender(port),
            Event::Arrive { port } | Event::PfcRefresh { port } => self.receiver(port),
            Event::HostWake { host } => self.host(host),
            Event::PosterDone { nic, .. } | Event::Irq { nic } => self.host(nic),
            _ => return None,
        })
    }
}

/// Moves hosts from the partition expecting the most events (`load`) to the one
/// expecting the fewest while they differ by more than `HOST_BALANCE_PERCENT` of the
/// most: each time the host there with the most events (`work`) that fits in half the
/// difference (so the two never swap places), ties to the lowest; each host once, and
/// only those `may_move` allows. Returns how many moved.
fn even_out(
    host: &mut [u16],
    load: &mut [u64],
    work: &[u64],
    may_move: impl Fn(usize) -> bool,
) -> u32 {
    let mut moved = vec![false; host.len()];
    let mut count = 0;
    loop {
        let by_load = |&p: &usize| (load[p], std::cmp::Reverse(p));
        let (Some(hi), Some(lo)) = (
            (0..load.len()).max_by_key(by_load),
            (0..load.len()).min_by_key(|&p| (load[p], p)),
        ) else {
            return count;
        };
        let gap = load[hi] - load[lo];
        if gap * 100 <= load[hi] * HOST_BALANCE_PERCENT {
            return count;
        }
        let pick = (0..host.len())
            .filter(|&h| {
                host[h] as usize == hi
                    && !moved[h]
                    && work[h] > 0
                    && work[h] <= gap / 2
                    && may_move(h)
            })
            .max_by_key(|&h| (work[h], std::cmp::Reverse(h)));
        let Some(h) = pick else {
            return count;
        };
        host[h] = lo as u16;
        moved[h] = true;
        load[hi] -= work[h];
        load[lo] += work[h];
        count += 1;
    }
}

/// One bit per port, packed: a split run asks these of a port on every packet it sends
/// or lets through, and at 8,192 hosts a byte or a `u16` per port (`Plan`'s tables)
/// missed the cache there (perf: 18% of `launch`'s samples on its load from `Plan`).
#[derive(Debug, Default)]
pub struct PortBits(Vec<u64>);

impl PortBits {
    pub fn new(ports: usize, f: impl Fn(PortId) -> bool) -> PortBits {
        let mut words = vec![0u64; ports.div_ceil(64)];
        for p in 0..ports {
            if f(p as PortId) {
                words[p / 64] |= 1 << (p % 64);
            }
        }
        PortBits(words)
    }

    #[inline(always)]
    pub fn get(&self, port: PortId) -> bool {
        self.0
            .get(port as usize / 64)
            .is_some_and(|w| (w >> (port % 64)) & 1 != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{LinkParams, Tier, Topology};
    use crate::units::{BitsPerSec, SimDuration};

    fn fabric(leaves: u32, spines: u32, fabric_latency_ns: u64) -> (Topology, Graph) {
        fabric_with_hosts_at(leaves, spines, 100, fabric_latency_ns)
    }

    fn fabric_with_hosts_at(
        leaves: u32,
        spines: u32,
        host_latency_ns: u64,
        fabric_latency_ns: u64,
    ) -> (Topology, Graph) {
        let link = |ns| LinkParams {
            rate: BitsPerSec(100_000_000_000),
            latency: SimDuration::from_ns(ns),
        };
        let t = Topology {
            leaves,
            spines,
            hosts_per_leaf: 4,
            links_per_spine: 1,
            planes: 1,
            first_host: Vec::new(),
            host_link: link(host_latency_ns),
            fabric_link: link(fabric_latency_ns),
        };
        let g = t.graph();
        (t, g)
    }

    /// Leaves and spines split in contiguous blocks; hosts go with their leaf; only
    /// leaf-spine links cross; the lookahead is their latency.
    #[test]
    fn partitions_are_blocks_of_leaves_and_spines() {
        let (t, g) = fabric(4, 4, 700);
        let p = Plan::new(&g, t.leaves, 2);
        let sw: Vec<u16> = (0..8).map(|s| p.switch(s)).collect();
        assert_eq!(sw, [0, 0, 1, 1, 0, 0, 1, 1]);
        for h in 0..t.hosts() {
            assert_eq!(p.host(h), p.switch(t.leaf_of(h)), "host {h}");
        }
        for (i, gp) in g.ports.iter().enumerate() {
            let i = i as PortId;
            let crosses = p.sender(i) != p.receiver(i);
            if matches!(gp.class, Tier::HostToLeaf | Tier::LeafToHost) {
                assert!(!crosses, "a host link never crosses");
            }
        }
        // Leaves 0-1 reach spines 6-7 and leaves 2-3 spines 4-5: 2 x 2 x 2 pairs, both
        // directions.
        assert_eq!(p.crossing_links, 16);
        assert_eq!(p.lookahead, SimDuration::from_ns(700));
        // One partition: nothing crosses.
        let one = Plan::new(&g, t.leaves, 1);
        assert_eq!(one.crossing_links, 0);
        assert_eq!(one.lookahead, SimDuration::MAX);
    }

    /// Three partitions over 4 leaves and 2 spines: every partition gets a leaf and no
    /// index runs past the last partition.
    #[test]
    fn uneven_splits_stay_in_range() {
        let (t, g) = fabric(4, 2, 1000);
        let p = Plan::new(&g, t.leaves, 3);
        let leaves: Vec<u16> = (0..4).map(|s| p.switch(s)).collect();
        assert_eq!(leaves, [0, 0, 1, 2]);
        assert_eq!((p.switch(4), p.switch(5)), (0, 1));
        assert!(p.crossing_links > 0);
    }

    /// Skewed traffic: the two busy leaves go to different partitions, each partition
    /// gets a leaf and a spine, hosts stay with their leaf (their 100 ns links are
    /// shorter than the 700 ns lookahead), and the busiest partition expects fewer
    /// events than with the blocks. Even or no traffic: the blocks.
    #[test]
    fn a_skewed_run_is_balanced_and_an_even_one_keeps_the_blocks() {
        let (t, g) = fabric(4, 4, 700);
        let h = |leaf: u32, i: u32| leaf * 4 + i;
        // Leaves 0 and 1 (one block) exchange 1,000 packets per host pair; leaves 2 and
        // 3 send one packet each to leaf 0.
        let mut traffic = Vec::new();
        for i in 0..4 {
            traffic.push((h(0, i), h(1, i), 1000));
            traffic.push((h(1, i), h(0, i), 1000));
            traffic.push((h(2, i), h(0, i), 1));
            traffic.push((h(3, i), h(0, i), 1));
        }
        let p = Plan::balanced(&g, t.leaves, 2, traffic.iter().copied());
        assert_ne!(p.switch(0), p.switch(1), "the busy leaves apart");
        for part in 0..2 {
            assert!((0..4).any(|l| p.switch(l) == part), "a leaf in {part}");
            assert!((4..8).any(|s| p.switch(s) == part), "a spine in {part}");
        }
        for host in 0..t.hosts() {
            assert_eq!(p.host(host), p.switch(t.leaf_of(host)), "host {host}");
        }
        // Expected events per partition, by the weights: the blocks put all 8,000
        // packets' 12 events per packet at the leaves in partition 0.
        let expected = |p: &Plan| {
            let mut load = [0u64; 2];
            for &(a, b, n) in &traffic {
                let (la, lb) = (t.leaf_of(a), t.leaf_of(b));
                load[p.switch(la) as usize] += EVENTS_AT_END_LEAF * n;
                load[p.switch(lb) as usize] += EVENTS_AT_END_LEAF * n;
                for s in 4..8 {
                    load[p.switch(s) as usize] += EVENTS_AT_SPINE * n / 4;
                }
            }
            load.into_iter().max().unwrap()
        };
        let blocks = Plan::new(&g, t.leaves, 2);
        assert!(
            expected(&p) * 10 < expected(&blocks) * 6,
            "{} against {}",
            expected(&p),
            expected(&blocks)
        );
        // A permutation loads every leaf alike: the blocks, as without traffic.
        let even: Vec<_> = (0..t.hosts())
            .map(|a| (a, (a + 5) % t.hosts(), 100))
            .collect();
        for plan in [
            Plan::balanced(&g, t.leaves, 2, even),
            Plan::balanced(&g, t.leaves, 2, std::iter::empty()),
        ] {
            let sw: Vec<u16> = (0..8).map(|s| plan.switch(s)).collect();
            assert_eq!(sw, [0, 0, 1, 1, 0, 0, 1, 1]);
        }
    }

    /// Two leaves left uneven by their own traffic (4,800 expected events against
    /// 3,200): the busier one's light hosts move to the other partition, the largest
    /// that fits in half the difference first, until none fits; their links cross and
    /// the lookahead stays the fabric link's. With host links shorter than the
    /// lookahead, no host moves.
    #[test]
    fn hosts_even_out_what_the_leaves_leave() {
        // Within leaf 0: host 0 -> 1, 500 packets, host 2 -> 3, 100; within leaf 1:
        // host 4 -> 5, 400. At 8 events a packet within a leaf: 4,800 and 3,200.
        let traffic = [(0, 1, 500), (2, 3, 100), (4, 5, 400)];
        let (t, g) = fabric_with_hosts_at(2, 2, 1000, 700);
        let p = Plan::balanced(&g, t.leaves, 2, traffic);
        // Hosts 2 and 3 expect 200 events each (2 a packet at each end), hosts 0 and 1
        // 1,000: the difference 1,600 takes host 2 (fits in 800; host 0 would fit in
        // the whole difference and leave the partitions swapped, 3,800 against 4,200),
        // then host 3 (fits in 600), and leaves 800, where hosts 0 and 1 do not fit in
        // 400.
        let hosts: Vec<u16> = (0..t.hosts()).map(|h| p.host(h)).collect();
        assert_eq!(hosts, [0, 0, 1, 1, 1, 1, 1, 1]);
        assert_eq!(p.hosts_apart, 2);
        assert_eq!(p.lookahead, SimDuration::from_ns(700));
        let blocks = Plan::new(&g, t.leaves, 2);
        // Each moved host's link, both ways.
        assert_eq!(p.crossing_links, blocks.crossing_links + 4);
        for h in [2, 3] {
            let up = g.host_up(h);
            assert_eq!(
                p.owner(&Event::TxDone { port: up }, |_| (0, 0), |_| (0, 0)),
                Some(1)
            );
            assert_eq!(p.receiver(up), 0, "the leaf's ingress stays with the leaf");
        }
        // Host links shorter than the fabric's: the windows would narrow; none moves.
        let (t, g) = fabric_with_hosts_at(2, 2, 500, 700);
        let p = Plan::balanced(&g, t.leaves, 2, traffic);
        assert_eq!(p.hosts_apart, 0);
        assert_eq!(p.lookahead, SimDuration::from_ns(700));
    }

    /// `even_out` on random loads: the expected events are kept, no partition ends
    /// busier than the busiest began, each host moves at most once and only if allowed,
    /// and it stops only when the partitions are within `HOST_BALANCE_PERCENT` or no
    /// host of the busiest fits in half the difference.
    #[test]
    fn evening_out_never_overshoots() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        for _ in 0..500 {
            let parts = rng.gen_range(2..5usize);
            let hosts = rng.gen_range(1..40usize);
            let start: Vec<u16> = (0..hosts).map(|_| rng.gen_range(0..parts) as u16).collect();
            let work: Vec<u64> = (0..hosts).map(|_| rng.gen_range(0..1000)).collect();
            let fixed: Vec<bool> = (0..hosts).map(|_| rng.gen_bool(0.2)).collect();
            let base: Vec<u64> = (0..parts).map(|_| rng.gen_range(0..5000)).collect();
            let with_hosts = |host: &[u16]| {
                let mut load = base.clone();
                for h in 0..hosts {
                    load[host[h] as usize] += work[h];
                }
                load
            };
            let mut load = with_hosts(&start);
            let (before, total) = (*load.iter().max().unwrap(), load.iter().sum::<u64>());
            let mut host = start.clone();
            let moved = even_out(&mut host, &mut load, &work, |h| !fixed[h]);
            let changed: Vec<usize> = (0..hosts).filter(|&h| host[h] != start[h]).collect();
            assert_eq!(changed.len() as u32, moved);
            assert!(changed.iter().all(|&h| !fixed[h]));
            assert_eq!(load.iter().sum::<u64>(), total);
            assert_eq!(load, with_hosts(&host), "the loads follow the hosts");
            assert!(*load.iter().max().unwrap() <= before);
            let (hi, lo) = (
                (0..parts)
                    .max_by_key(|&p| (load[p], std::cmp::Reverse(p)))
                    .unwrap(),
                *load.iter().min().unwrap(),
            );
            let gap = load[hi] - lo;
            let fits = (0..hosts).any(|h| {
                host[h] as usize == hi
                    && host[h] == start[h]
                    && !fixed[h]
                    && work[h] > 0
                    && work[h] <= gap / 2
            });
            assert!(gap * 100 <= load[hi] * HOST_BALANCE_PERCENT || !fits);
        }
    }

    /// Events go to the partition of the component they name.
    #[test]
    fn events_belong_to_the_component_they_name() {
        let (t, g) = fabric(2, 2, 1000);
        let p = Plan::new(&g, t.leaves, 2);
        let up = g.host_up(t.hosts() - 1);
        let last = t.hosts() - 1;
        assert_eq!(
            p.owner(&Event::TxDone { port: up }, |_| (0, 0), |_| (0, 0)),
            Some(1)
        );
        assert_eq!(
            p.owner(&Event::FlowStart { flow: 3 }, |_| (last, 0), |_| (0, 0)),
            Some(1)
        );
        // A flow from the last host to host 0: its posting stages on the sender's NIC,
        // its receive completion on the receiver's.
        let stage = |stage| Event::FlowStage { flow: 3, stage };
        let host = crate::components::host::ST_DOORBELL;
        assert_eq!(p.owner(&stage(host), |_| (last, 0), |_| (0, 0)), Some(1));
        assert_eq!(
            p.owner(&stage(ST_RECV_CQE), |_| (last, 0), |_| (0, 0)),
            Some(0)
        );
        let irq = Event::Irq { nic: last };
        assert_eq!(p.owner(&irq, |_| (0, 0), |_| (0, 0)), Some(1));
        let poster = Event::PosterDone { nic: 0, poster: 1 };
        assert_eq!(p.owner(&poster, |_| (last, last), |_| (0, 0)), Some(0));
        // A queue pair from host 0 to the last: its requester's timer on host 0, its
        // responder's hole timer (out-of-order RC) on the last.
        assert_eq!(
            p.owner(&Event::QpTimer { qp: 2 }, |_| (0, 0), |_| (0, 0)),
            Some(0)
        );
        let hole = Event::HoleTimer { qp: 2, host: last };
        assert_eq!(p.owner(&hole, |_| (0, 0), |_| (0, 0)), Some(1));
        // Its receive WQEs posted late, by the responder's host.
        let post = Event::RecvPost { qp: 2, gen: 0 };
        assert_eq!(p.owner(&post, |_| (0, 0), |_| (0, last)), Some(1));
        let cross = (0..g.ports.len() as PortId)
            .find(|&q| p.sender(q) != p.receiver(q))
            .unwrap();
        assert_eq!(
            p.owner(&Event::Arrive { port: cross }, |_| (0, 0), |_| (0, 0)),
            Some(p.receiver(cross))
        );
        assert_eq!(
            p.owner(
                &Event::Pfc {
                    port: cross,
                    pause: true
                },
                |_| (0, 0),
                |_| (0, 0)
            ),
            Some(p.sender(cross))
        );
        assert_eq!(
            p.owner(&Event::CollWake { run: 0 }, |_| (0, 0), |_| (0, 0)),
            None
        );
    }

    /// Servers whole (stop 57): under rail wiring, 12 leaves of 4 NIC ports hold 12
    /// servers of 4 NICs, NIC k of server s at port `12k + s`, so rail k fills leaves
    /// 3k to 3k + 2 and server s touches leaf `3k + s / 4` of each rail: three groups of
    /// leaves ({0, 3, 6, 9}, {1, 4, 7, 10}, {2, 5, 8, 11}), one a partition at 3, two and
    /// one at 2; every server's NICs in one partition; too few groups for 4 partitions.
    /// Packed wiring (a server's NICs on one leaf) keeps contiguous blocks.
    #[test]
    fn servers_stay_whole() {
        let (_, g) = fabric(12, 4, 500);
        let rail = |port: u32| Some(port % 12);
        let p3 = Plan::servers_whole(&g, 12, 3, rail).expect("three groups");
        let leaves: Vec<u16> = (0..12).map(|l| p3.switch(l)).collect();
        assert_eq!(leaves, [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
        let p2 = Plan::servers_whole(&g, 12, 2, rail).expect("three groups");
        let leaves: Vec<u16> = (0..12).map(|l| p2.switch(l)).collect();
        assert_eq!(leaves, [0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1]);
        for p in [&p3, &p2] {
            for server in 0..12 {
                let parts: Vec<u16> = (0..4).map(|k| p.host(12 * k + server)).collect();
                assert!(
                    parts.iter().all(|&x| x == parts[0]),
                    "server {server}: {parts:?}"
                );
            }
            // Spines in blocks; hosts with their leaf.
            assert_eq!(p.switch(12), 0);
            assert_eq!(p.switch(15), p.parts - 1);
            assert_eq!(p.hosts_apart, 0);
        }
        assert!(Plan::servers_whole(&g, 12, 4, rail).is_none());
        let packed = Plan::servers_whole(&g, 12, 4, |port| Some(port / 4)).expect("12 groups");
        let leaves: Vec<u16> = (0..12).map(|l| packed.switch(l)).collect();
        assert_eq!(leaves, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
    }

    /// Servers apart (stop 57): 4 servers of 4 NICs under rail wiring (NIC k of server s
    /// at port `4k + s`, rail k filling leaf k) have a NIC on every leaf, so no grouping
    /// of leaves keeps them whole; the servers go to the partitions in blocks with their
    /// NICs (servers 0-1 and 2-3 at 2), leaves and spines in blocks, and the NICs away
    /// from their leaf's partition are placed apart. With host links shorter than the
    /// fabric's the lookahead is the host link's; with fewer servers than partitions
    /// there is no such plan.
    #[test]
    fn servers_apart_take_their_nics() {
        let (_, g) = fabric_with_hosts_at(4, 4, 500, 500);
        let rail = |port: u32| Some(port % 4);
        assert!(Plan::servers_whole(&g, 4, 2, rail).is_none());
        let p = Plan::servers_apart(&g, 4, 2, 4, rail).expect("long enough host links");
        for port in 0..16 {
            assert_eq!(p.host(port), (port % 4 / 2) as u16, "port {port}");
        }
        let leaves: Vec<u16> = (0..4).map(|l| p.switch(l)).collect();
        assert_eq!(leaves, [0, 0, 1, 1]);
        // Ports on leaves 0-1 of servers 2-3, and on leaves 2-3 of servers 0-1.
        assert_eq!(p.hosts_apart, 8);
        assert_eq!(p.lookahead, SimDuration::from_ns(500));
        let (_, short) = fabric_with_hosts_at(4, 4, 100, 500);
        let p = Plan::servers_apart(&short, 4, 2, 4, rail).expect("short host links");
        assert_eq!(p.lookahead, SimDuration::from_ns(100));
        assert!(Plan::servers_apart(&g, 4, 8, 4, rail).is_none());
    }

    /// The packed per-port bits answer as the predicate they were built from, across word
    /// boundaries and for a count of ports that is not a multiple of 64; a port past the
    /// end answers false.
    #[test]
    fn port_bits_answer_as_their_predicate() {
        for ports in [0usize, 1, 63, 64, 65, 130, 1000] {
            let pick = |p: PortId| p % 3 == 0 || p % 64 == 63;
            let bits = PortBits::new(ports, pick);
            for p in 0..ports as PortId {
                assert_eq!(bits.get(p), pick(p), "port {p} of {ports}");
            }
            assert!(!bits.get(ports as PortId + 64), "past the end of {ports}");
        }
    }
}

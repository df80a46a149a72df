//! How `run --threads N` splits the fabric (issue 17): which partition owns each host,
//! switch, egress port, wire and ingress, and how far ahead each may run alone.
//!
//! A partition is a block of leaves with their hosts and a block of spines (leaf `l` of
//! `L` goes to partition `l * N / L`, spine `s` of `S` to `s * N / S`), so a host's own
//! link never crosses and every leaf-spine link whose ends fall apart does. An egress
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

use crate::engine::{Event, PortId};
use crate::topology::graph::Graph;
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
}

impl Plan {
    /// Splits `graph` (a fabric of `leaves` leaves, switches `0..leaves`, then spines)
    /// into `parts` partitions.
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
        let host: Vec<u16> = (0..graph.hosts())
            .map(|h| match graph.ports[graph.host_up(h) as usize].to {
                Node::Switch(s) => switch[s as usize],
                Node::Host(_) => 0,
            })
            .collect();
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
    /// carry (`flow_src` and `qp_src` give a flow's and a queue pair's source host).
    pub fn owner(
        &self,
        event: &Event,
        flow_src: impl Fn(u32) -> u32,
        qp_src: impl Fn(u32) -> u32,
    ) -> Option<u16> {
        Some(match *event {
            Event::FlowStart { flow } => self.host(flow_src(flow)),
            Event::QpTimer { qp } => self.host(qp_src(qp)),
            Event::TxDone { port }
            | Event::PortWake { port }
            | Event::Pfc { port, .. }
            | Event::Credit { port, .. } => self.sender(port),
            Event::Arrive { port } | Event::PfcRefresh { port } => self.receiver(port),
            Event::HostWake { host } => self.host(host),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{LinkParams, Tier, Topology};
    use crate::units::{BitsPerSec, SimDuration};

    fn fabric(leaves: u32, spines: u32, fabric_latency_ns: u64) -> (Topology, Graph) {
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
            host_link: link(100),
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

    /// Events go to the partition of the component they name.
    #[test]
    fn events_belong_to_the_component_they_name() {
        let (t, g) = fabric(2, 2, 1000);
        let p = Plan::new(&g, t.leaves, 2);
        let up = g.host_up(t.hosts() - 1);
        assert_eq!(p.owner(&Event::TxDone { port: up }, |_| 0, |_| 0), Some(1));
        assert_eq!(
            p.owner(&Event::FlowStart { flow: 3 }, |_| t.hosts() - 1, |_| 0),
            Some(1)
        );
        let cross = (0..g.ports.len() as PortId)
            .find(|&q| p.sender(q) != p.receiver(q))
            .unwrap();
        assert_eq!(
            p.owner(&Event::Arrive { port: cross }, |_| 0, |_| 0),
            Some(p.receiver(cross))
        );
        assert_eq!(
            p.owner(
                &Event::Pfc {
                    port: cross,
                    pause: true
                },
                |_| 0,
                |_| 0
            ),
            Some(p.sender(cross))
        );
        assert_eq!(p.owner(&Event::Sample, |_| 0, |_| 0), None);
    }
}

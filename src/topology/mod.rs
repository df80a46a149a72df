//! The two-tier Clos (leaf-spine) fabric: hosts, leaves, spines, the ports between them,
//! and how a packet's next port is chosen.
//!
//! Models: `leaves` leaf switches with `hosts_per_leaf` hosts each, and `spines` spine
//! switches joined to every leaf by `links_per_spine` parallel links. A one-leaf fabric
//! (no spines) is valid, so one hop can be compared with two. Leaves may hold different
//! numbers of hosts (`hosts_per_leaf` as a list: a last rack half full). With `planes` P > 1 the
//! fabric is P disjoint copies side by side: a multi-plane fabric, where each NIC rail
//! (or each plane of a planarised NIC) gets switches of its own (NVIDIA Spectrum-X
//! Multiplane, "independent network planes", Network Operator docs v26.4; the dual-plane
//! compute fabric of NVIDIA's HGX B300 Enterprise Reference Architecture). Plane p holds leaves `p*L/P..(p+1)*L/P` (and
//! their hosts) and spines `p*S/P..(p+1)*S/P`, and a leaf links only to its plane's
//! spines. Nothing leads from one plane to another: validation refuses traffic that
//! would have to. Every link is two
//! unidirectional ports; ports live in one arena with a fixed arithmetic layout, so a
//! route is computed from the packet's destination and flow hash, never stored:
//!
//! | range | port | tier |
//! |---|---|---|
//! | `[0, H)` | host h -> its leaf | `host_to_leaf` |
//! | `[H, 2H)` | leaf -> host h | `leaf_to_host` |
//! | `[2H, 2H + L*U)` | leaf l uplink u -> spine (plane of l) * S/P + u / K | `leaf_to_spine` |
//! | `[2H + L*U, 2H + 2L*U)` | spine s parallel link k -> leaf l of its plane | `spine_to_leaf` |
//!
//! with H hosts, L leaves, S spines, P planes, K links per spine pair and U = S/P*K
//! uplinks per leaf; a spine's ports down are ordered by (spine, leaf within the plane,
//! link).
//!
//! Routing (design reference, "Switches and links"): `ecmp` hashes the flow (seeded) to
//! one uplink; `static` is destination-based d-mod-k as OpenSM's ftree programs it;
//! `spray` is per-packet round robin (over each flow's packets); `adaptive` picks the uplink with the fewest queued
//! bytes per packet.
//!
//! The shape builds a [`graph::Graph`] (`Topology::graph`): ports with their ends, class
//! and link, and per-switch next-hop tables by up/down routing; the event loop routes on
//! the graph's tables. Leaves out: failures, more than two switch levels.

pub mod graph;

use crate::units::{BitsPerSec, SimDuration};
use graph::{Graph, GraphPort};
use serde::Serialize;

/// A node a port delivers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Host(u32),
    /// A switch by switch index: leaves are `0..L`, spines `L..L+S`.
    Switch(u32),
}

/// Which tier a port belongs to, for reporting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    HostToLeaf,
    LeafToSpine,
    SpineToLeaf,
    LeafToHost,
}

impl Tier {
    pub const ALL: [Tier; 4] = [
        Tier::HostToLeaf,
        Tier::LeafToSpine,
        Tier::SpineToLeaf,
        Tier::LeafToHost,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Tier::HostToLeaf => "host_to_leaf",
            Tier::LeafToSpine => "leaf_to_spine",
            Tier::SpineToLeaf => "spine_to_leaf",
            Tier::LeafToHost => "leaf_to_host",
        }
    }
    pub fn arrow(self) -> &'static str {
        match self {
            Tier::HostToLeaf => "host->leaf",
            Tier::LeafToSpine => "leaf->spine",
            Tier::SpineToLeaf => "spine->leaf",
            Tier::LeafToHost => "leaf->host",
        }
    }
}

/// The shortest link latency a fabric may have: 1 ns (20 cm of cable). Every link
/// delays what crosses it by at least this much, so a fabric cut through its links into
/// partitions has that much lookahead: a partition can run 1 ns ahead of its neighbours
/// without missing an event from them (Chandy-Misra-Bryant conservative simulation).
pub const MIN_LINK_LATENCY: SimDuration = SimDuration::from_ns(1);

/// A link's rate and one-way propagation latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkParams {
    pub rate: BitsPerSec,
    pub latency: SimDuration,
}

/// The fabric's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub leaves: u32,
    pub spines: u32,
    /// Hosts under each leaf; with uneven leaves, the most under any leaf.
    pub hosts_per_leaf: u32,
    /// Uneven leaves: leaf l's hosts are `first_host[l]..first_host[l + 1]` (L + 1
    /// offsets); empty when every leaf has `hosts_per_leaf`.
    pub first_host: Vec<u32>,
    pub links_per_spine: u32,
    /// Disjoint planes, each `leaves / planes` leaves and `spines / planes` spines.
    pub planes: u32,
    pub host_link: LinkParams,
    pub fabric_link: LinkParams,
}

impl Topology {
    pub fn hosts(&self) -> u32 {
        match self.first_host.last() {
            Some(&n) => n,
            None => self.leaves * self.hosts_per_leaf,
        }
    }
    /// Hosts under `leaf`.
    pub fn hosts_on(&self, leaf: u32) -> u32 {
        if self.first_host.is_empty() {
            self.hosts_per_leaf
        } else {
            self.first_host[leaf as usize + 1] - self.first_host[leaf as usize]
        }
    }
    /// The first host under `leaf` (`hosts()` for `leaf == leaves`).
    pub fn first_host_of(&self, leaf: u32) -> u32 {
        if self.first_host.is_empty() {
            leaf * self.hosts_per_leaf
        } else {
            self.first_host[leaf as usize]
        }
    }
    pub fn switches(&self) -> u32 {
        self.leaves + self.spines
    }
    /// Uplinks per leaf (its plane's spines x parallel links).
    pub fn uplinks_per_leaf(&self) -> u32 {
        self.spines_per_plane() * self.links_per_spine
    }
    pub fn leaves_per_plane(&self) -> u32 {
        self.leaves / self.planes
    }
    pub fn spines_per_plane(&self) -> u32 {
        self.spines / self.planes
    }
    /// The plane a host is in.
    pub fn plane_of(&self, host: u32) -> u32 {
        self.leaf_of(host) / self.leaves_per_plane()
    }
    /// The plane of switch `switch` (leaves `0..L`, spines `L..L+S`).
    pub fn plane_of_switch(&self, switch: u32) -> u32 {
        if self.is_leaf(switch) {
            switch / self.leaves_per_plane()
        } else {
            (switch - self.leaves) / self.spines_per_plane()
        }
    }
    pub fn ports(&self) -> u32 {
        2 * self.hosts() + 2 * self.leaves * self.uplinks_per_leaf()
    }
    pub fn leaf_of(&self, host: u32) -> u32 {
        if self.first_host.is_empty() {
            host / self.hosts_per_leaf
        } else {
            self.first_host.partition_point(|&f| f <= host) as u32 - 1
        }
    }
    pub fn is_leaf(&self, switch: u32) -> bool {
        switch < self.leaves
    }

    /// Host-facing over spine-facing bandwidth per leaf (the most loaded leaf's, with
    /// uneven leaves); `None` on a fabric without spines.
    pub fn oversubscription(&self) -> Option<f64> {
        let up = self.uplinks_per_leaf() as f64 * self.fabric_link.rate.0 as f64;
        if up == 0.0 {
            return None;
        }
        Some(self.hosts_per_leaf as f64 * self.host_link.rate.0 as f64 / up)
    }

    // ---- port layout ----
    pub fn host_up(&self, host: u32) -> u32 {
        host
    }
    pub fn leaf_down(&self, host: u32) -> u32 {
        self.hosts() + host
    }
    pub fn leaf_up(&self, leaf: u32, uplink: u32) -> u32 {
        2 * self.hosts() + leaf * self.uplinks_per_leaf() + uplink
    }
    /// Spine `s`'s parallel link `k` down to `leaf` (a leaf of its plane).
    pub fn spine_down(&self, spine: u32, leaf: u32, k: u32) -> u32 {
        debug_assert_eq!(
            spine / self.spines_per_plane(),
            leaf / self.leaves_per_plane()
        );
        2 * self.hosts()
            + self.leaves * self.uplinks_per_leaf()
            + (spine * self.leaves_per_plane() + leaf % self.leaves_per_plane())
                * self.links_per_spine
            + k
    }

    /// Spine and parallel link of uplink `u` of `leaf`.
    fn uplink_ends(&self, leaf: u32, u: u32) -> (u32, u32) {
        let plane = leaf / self.leaves_per_plane();
        (
            plane * self.spines_per_plane() + u / self.links_per_spine,
            u % self.links_per_spine,
        )
    }

    /// Spine, leaf and parallel link of the `i`-th spine port down.
    fn downlink_ends(&self, i: u32) -> (u32, u32, u32) {
        let (k, lp) = (self.links_per_spine, self.leaves_per_plane());
        let spine = i / (lp * k);
        let plane = spine / self.spines_per_plane();
        (spine, plane * lp + (i / k) % lp, i % k)
    }

    /// Tier, link parameters, the switch whose buffer holds the port's queue (`None` for a
    /// host's own port) and the node the port delivers to.
    pub fn port_info(&self, port: u32) -> (Tier, LinkParams, Option<u32>, Node) {
        let h = self.hosts();
        let lu = self.leaves * self.uplinks_per_leaf();
        if port < h {
            (
                Tier::HostToLeaf,
                self.host_link,
                None,
                Node::Switch(self.leaf_of(port)),
            )
        } else if port < 2 * h {
            let host = port - h;
            (
                Tier::LeafToHost,
                self.host_link,
                Some(self.leaf_of(host)),
                Node::Host(host),
            )
        } else if port < 2 * h + lu {
            let i = port - 2 * h;
            let leaf = i / self.uplinks_per_leaf();
            let (spine, _) = self.uplink_ends(leaf, i % self.uplinks_per_leaf());
            (
                Tier::LeafToSpine,
                self.fabric_link,
                Some(leaf),
                Node::Switch(self.leaves + spine),
            )
        } else {
            let (spine, leaf, _) = self.downlink_ends(port - 2 * h - lu);
            (
                Tier::SpineToLeaf,
                self.fabric_link,
                Some(self.leaves + spine),
                Node::Switch(leaf),
            )
        }
    }

    /// A short name for a port, e.g. `leaf3->spine1#0`.
    pub fn port_name(&self, port: u32) -> String {
        let h = self.hosts();
        let lu = self.leaves * self.uplinks_per_leaf();
        if port < h {
            format!("host{}->leaf{}", port, self.leaf_of(port))
        } else if port < 2 * h {
            let host = port - h;
            format!("leaf{}->host{}", self.leaf_of(host), host)
        } else if port < 2 * h + lu {
            let i = port - 2 * h;
            let leaf = i / self.uplinks_per_leaf();
            let (spine, k) = self.uplink_ends(leaf, i % self.uplinks_per_leaf());
            format!("leaf{leaf}->spine{spine}#{k}")
        } else {
            let (spine, leaf, k) = self.downlink_ends(port - 2 * h - lu);
            format!("spine{spine}->leaf{leaf}#{k}")
        }
    }

    /// The port carrying traffic the other way over the same cable.
    pub fn reverse_port(&self, port: u32) -> u32 {
        let h = self.hosts();
        let lu = self.leaves * self.uplinks_per_leaf();
        if port < h {
            self.leaf_down(port)
        } else if port < 2 * h {
            self.host_up(port - h)
        } else if port < 2 * h + lu {
            let i = port - 2 * h;
            let leaf = i / self.uplinks_per_leaf();
            let (spine, k) = self.uplink_ends(leaf, i % self.uplinks_per_leaf());
            self.spine_down(spine, leaf, k)
        } else {
            let (spine, leaf, k) = self.downlink_ends(port - 2 * h - lu);
            let local = spine % self.spines_per_plane();
            self.leaf_up(leaf, local * self.links_per_spine + k)
        }
    }

    /// The fabric as a graph: every port with its ends, class and link, and the
    /// switches' next-hop tables (up/down routing).
    pub fn graph(&self) -> Graph {
        let ports = (0..self.ports())
            .map(|p| {
                let (class, link, switch, to) = self.port_info(p);
                GraphPort {
                    from: switch.map_or(Node::Host(p), Node::Switch),
                    to,
                    class,
                    link,
                    reverse: self.reverse_port(p),
                }
            })
            .collect();
        Graph::new(self.hosts(), self.switches(), ports)
            .expect("a leaf-spine shape is a routable graph")
    }

    /// Number of switches a packet from `src` to `dst` crosses: 1 under one leaf, 3 across
    /// the spines.
    pub fn switch_hops(&self, src: u32, dst: u32) -> u32 {
        if self.leaf_of(src) == self.leaf_of(dst) {
            1
        } else {
            3
        }
    }

    /// Parallel links at each hop of the path from `src` to `dst` (what per-packet
    /// routing may spread a flow over): a leaf's uplinks to its plane's spines, and as
    /// many ways down (each of those spines' links to the destination leaf).
    pub fn path_lanes(&self, src: u32, dst: u32) -> Vec<u32> {
        if self.switch_hops(src, dst) == 1 {
            vec![1, 1]
        } else {
            let u = self.uplinks_per_leaf();
            vec![1, u, u, 1]
        }
    }

    /// The sum of the link latencies from `src` to `dst`: how long after it leaves a
    /// message's first bit reaches the far host, queues, switches and serialization
    /// left out (the same on every path: all fabric links are alike).
    pub fn path_latency(&self, src: u32, dst: u32) -> SimDuration {
        let host = self.host_link.latency + self.host_link.latency;
        if self.switch_hops(src, dst) == 1 {
            host
        } else {
            host + self.fabric_link.latency + self.fabric_link.latency
        }
    }

    /// The links a packet from `src` to `dst` crosses, in order.
    pub fn path_links(&self, src: u32, dst: u32) -> Vec<LinkParams> {
        if self.switch_hops(src, dst) == 1 {
            vec![self.host_link, self.host_link]
        } else {
            vec![
                self.host_link,
                self.fabric_link,
                self.fabric_link,
                self.host_link,
            ]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topology {
        let l = LinkParams {
            rate: BitsPerSec(100_000_000_000),
            latency: SimDuration::from_ns(100),
        };
        Topology {
            leaves: 3,
            spines: 2,
            hosts_per_leaf: 4,
            links_per_spine: 2,
            planes: 1,
            first_host: Vec::new(),
            host_link: l,
            fabric_link: l,
        }
    }

    #[test]
    fn port_layout_is_a_bijection() {
        let t = topo();
        assert_eq!(t.ports(), 2 * 12 + 2 * 3 * 4);
        let mut names = std::collections::HashSet::new();
        for p in 0..t.ports() {
            assert!(names.insert(t.port_name(p)));
        }
        // leaf_up and spine_down agree with port_info.
        for leaf in 0..3 {
            for u in 0..4 {
                let (tier, _, sw, to) = t.port_info(t.leaf_up(leaf, u));
                assert_eq!(tier, Tier::LeafToSpine);
                assert_eq!(sw, Some(leaf));
                assert_eq!(to, Node::Switch(3 + u / 2));
            }
        }
        for s in 0..2 {
            for leaf in 0..3 {
                for k in 0..2 {
                    let (tier, _, sw, to) = t.port_info(t.spine_down(s, leaf, k));
                    assert_eq!(tier, Tier::SpineToLeaf);
                    assert_eq!(sw, Some(3 + s));
                    assert_eq!(to, Node::Switch(leaf));
                }
            }
        }
    }

    #[test]
    fn path_latency_sums_the_paths_links() {
        let mut t = topo();
        t.fabric_link.latency = SimDuration::from_ns(700);
        for src in 0..t.hosts() {
            for dst in 0..t.hosts() {
                let sum = t.path_links(src, dst).iter().map(|l| l.latency.0).sum();
                assert_eq!(t.path_latency(src, dst), SimDuration(sum));
            }
        }
        // Under one leaf two host links, across the spines two fabric links more.
        assert_eq!(t.path_latency(0, 1), SimDuration::from_ns(200));
        assert_eq!(t.path_latency(0, 4), SimDuration::from_ns(1600));
    }

    #[test]
    fn reverse_port_is_an_involution_across_the_same_cable() {
        let t = topo();
        for p in 0..t.ports() {
            let r = t.reverse_port(p);
            assert_ne!(p, r);
            assert_eq!(t.reverse_port(r), p);
        }
        assert_eq!(
            t.port_name(t.reverse_port(t.leaf_up(2, 3))),
            "spine1->leaf2#1"
        );
    }

    #[test]
    fn graph_tables_give_the_layouts_candidates_in_order() {
        // Every (switch, host) pair: the up/down table built from the wiring lists the
        // same ports, in the same order, as the arithmetic layout (so routing policies
        // choose the same port by index).
        let t = topo();
        let g = t.graph();
        for sw in 0..t.switches() {
            for dst in 0..t.hosts() {
                let want: Vec<u32> = if t.is_leaf(sw) {
                    if t.leaf_of(dst) == sw {
                        vec![t.leaf_down(dst)]
                    } else {
                        (0..t.uplinks_per_leaf())
                            .map(|u| t.leaf_up(sw, u))
                            .collect()
                    }
                } else {
                    let k = t.links_per_spine;
                    (0..k)
                        .map(|k| t.spine_down(sw - t.leaves, t.leaf_of(dst), k))
                        .collect()
                };
                assert_eq!(
                    g.next_hops(sw, dst),
                    want.as_slice(),
                    "switch {sw} host {dst}"
                );
            }
        }
        assert_eq!(g.links_between(0, 3), &[t.leaf_up(0, 0), t.leaf_up(0, 1)]);
        assert_eq!(
            g.links_between(4, 2),
            &[t.spine_down(1, 2, 0), t.spine_down(1, 2, 1)]
        );
        // Stored candidates: each switch's links per neighbour (3 leaves x 4 uplinks,
        // 2 spines x 3 leaves x 2 links) and each leaf's way up to its one class of
        // leaves (3 x 4); table entries: 3 leaves x 1 class up, 2 spines x 3 leaves down.
        assert_eq!(g.table_size(), (12 + 12 + 12, 3 + 6));
    }

    #[test]
    fn the_tables_grow_with_the_links_not_with_switches_squared() {
        // 512 leaves of one host under 512 spines: 0.5 M ports. Switches squared would
        // be a million entries per table; up/down needs one class of leaves.
        let l = topo().host_link;
        let t = Topology {
            leaves: 512,
            spines: 512,
            hosts_per_leaf: 1,
            links_per_spine: 1,
            planes: 1,
            first_host: Vec::new(),
            host_link: l,
            fabric_link: l,
        };
        let g = t.graph();
        let (hops, entries) = g.table_size();
        assert_eq!(
            entries,
            512 + 512 * 512,
            "up: one per leaf; down: spine x leaf"
        );
        assert!(
            hops <= 3 * t.ports() as usize,
            "{hops} candidates for {} ports",
            t.ports()
        );
        assert_eq!(
            g.next_hops(0, 511),
            (0..512)
                .map(|u| t.leaf_up(0, u))
                .collect::<Vec<_>>()
                .as_slice()
        );
        assert_eq!(g.next_hops(512 + 7, 300), &[t.spine_down(7, 300, 0)]);
    }

    /// A hand-wired fabric: two ports per cable, `a`-`b` then `b`-`a`.
    fn wire(ports: &mut Vec<GraphPort>, a: Node, b: Node, class: (Tier, Tier)) {
        let l = topo().host_link;
        let i = ports.len() as u32;
        ports.push(GraphPort {
            from: a,
            to: b,
            class: class.0,
            link: l,
            reverse: i + 1,
        });
        ports.push(GraphPort {
            from: b,
            to: a,
            class: class.1,
            link: l,
            reverse: i,
        });
    }

    #[test]
    fn uneven_leaves_and_two_rail_planes_are_data() {
        use Node::{Host, Switch};
        let hl = (Tier::HostToLeaf, Tier::LeafToHost);
        let ls = (Tier::LeafToSpine, Tier::SpineToLeaf);
        // Plane A: leaves 0 (hosts 0, 1, 2) and 1 (host 3), spine 4, two links to leaf 1.
        // Plane B (a second rail): leaves 2 (host 4) and 3 (hosts 5, 6), spine 5.
        // Hosts' own ports first (port h is host h's), then the leaves' ports down.
        let leaf_of = [0, 0, 0, 1, 2, 3, 3];
        let l = topo().host_link;
        let mut p: Vec<GraphPort> = (0..7u32)
            .map(|h| GraphPort {
                from: Host(h),
                to: Switch(leaf_of[h as usize]),
                class: hl.0,
                link: l,
                reverse: 7 + h,
            })
            .collect();
        for h in 0..7u32 {
            let up = p[h as usize];
            p.push(GraphPort {
                from: up.to,
                to: up.from,
                class: hl.1,
                reverse: h,
                ..up
            });
        }
        wire(&mut p, Switch(0), Switch(4), ls);
        wire(&mut p, Switch(1), Switch(4), ls);
        wire(&mut p, Switch(1), Switch(4), ls);
        wire(&mut p, Switch(2), Switch(5), ls);
        wire(&mut p, Switch(3), Switch(5), ls);
        let g = Graph::new(7, 6, p).unwrap();
        assert_eq!(g.next_hops(0, 1), &[8], "host 1 is below leaf 0");
        assert_eq!(g.next_hops(0, 3), &[14], "up to the spine");
        assert_eq!(g.next_hops(4, 3), &[17, 19], "down both parallel links");
        assert_eq!(g.next_hops(1, 2), &[16, 18], "up either parallel link");
        assert_eq!(g.next_hops(2, 5), &[20], "plane B routes on its own");
        assert_eq!(g.next_hops(5, 6), &[23]);
        // A rail stays in its plane: nothing leads from plane A to plane B.
        assert!(g.next_hops(0, 4).is_empty());
        assert!(!g.reachable(0, 4));
        assert!(g.reachable(4, 6) && g.reachable(3, 0) && g.reachable(1, 1));
        assert_eq!(g.attach(3), 1);
    }

    #[test]
    fn a_broken_reverse_a_host_on_two_switches_or_host_ports_out_of_order_are_refused() {
        use Node::{Host, Switch};
        let hl = (Tier::HostToLeaf, Tier::LeafToHost);
        let mut p = Vec::new();
        wire(&mut p, Host(0), Switch(0), hl);
        wire(&mut p, Host(0), Switch(1), hl);
        assert_eq!(
            Graph::new(1, 2, p.clone()).unwrap_err(),
            graph::GraphError::HostAttachment { host: 0 }
        );
        let mut q = Vec::new();
        wire(&mut q, Host(0), Switch(0), hl);
        wire(&mut q, Host(1), Switch(0), hl);
        assert_eq!(
            Graph::new(2, 1, q).unwrap_err(),
            graph::GraphError::HostPortOrder { port: 1 },
            "port 1 is the leaf's port down to host 0, not host 1's own"
        );
        p.truncate(2);
        // Port 0 says its reverse is port 1, which points at itself.
        p[1].reverse = 1;
        assert_eq!(
            Graph::new(1, 1, p).unwrap_err(),
            graph::GraphError::Reverse { port: 0 }
        );
    }

    #[test]
    fn planes_are_disjoint_copies_with_their_own_spines() {
        // 4 leaves x 2 hosts, 4 spines x 2 links, 2 planes: leaves 0-1 with spines 0-1
        // (switches 4, 5), leaves 2-3 with spines 2-3 (switches 6, 7).
        let t = Topology {
            leaves: 4,
            spines: 4,
            planes: 2,
            hosts_per_leaf: 2,
            ..topo()
        };
        assert_eq!(t.uplinks_per_leaf(), 4, "2 spines of its plane x 2 links");
        assert_eq!(t.ports(), 2 * 8 + 2 * 4 * 4);
        let mut names = std::collections::HashSet::new();
        for p in 0..t.ports() {
            assert!(names.insert(t.port_name(p)), "{}", t.port_name(p));
            assert_eq!(t.reverse_port(t.reverse_port(p)), p);
            // Both ends of every cable are in one plane.
            let (_, _, sw, to) = t.port_info(p);
            let end = |n: Node| match n {
                Node::Host(h) => t.plane_of(h),
                Node::Switch(s) => t.plane_of_switch(s),
            };
            let from = sw.map_or_else(|| t.plane_of(p), |s| t.plane_of_switch(s));
            assert_eq!(from, end(to), "{}", t.port_name(p));
        }
        assert_eq!(t.port_name(t.leaf_up(2, 3)), "leaf2->spine3#1");
        assert_eq!(t.port_name(t.spine_down(3, 2, 1)), "spine3->leaf2#1");
        assert_eq!(t.reverse_port(t.leaf_up(2, 3)), t.spine_down(3, 2, 1));
        let g = t.graph();
        // Hosts 0-3 are plane 0, hosts 4-7 plane 1.
        assert_eq!(
            g.next_hops(2, 6),
            (0..4)
                .map(|u| t.leaf_up(2, u))
                .collect::<Vec<_>>()
                .as_slice(),
            "leaf 2 reaches host 6 over its own plane's spines"
        );
        assert_eq!(
            g.next_hops(6, 6),
            &[t.spine_down(2, 3, 0), t.spine_down(2, 3, 1)]
        );
        assert!(g.reachable(0, 3) && g.reachable(4, 7));
        assert!(!g.reachable(0, 4) && !g.reachable(7, 1));
        assert!(g.next_hops(0, 4).is_empty());
        assert_eq!(
            t.oversubscription(),
            Some(0.5),
            "2 x 100G down, 4 x 100G up"
        );
    }

    #[test]
    fn oversubscription_is_host_over_uplink_bandwidth() {
        let mut t = topo();
        // 4 hosts x 100G over 2 spines x 2 links x 100G = 1:1.
        assert_eq!(t.oversubscription(), Some(1.0));
        t.links_per_spine = 1;
        assert_eq!(t.oversubscription(), Some(2.0));
        t.spines = 0;
        assert_eq!(t.oversubscription(), None);
    }
}

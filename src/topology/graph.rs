//! The fabric as a graph: nodes (hosts and switches), links (one port per direction,
//! each with its class, rate and latency), and a next-hop table per switch built by
//! up/down routing.
//!
//! Models: the graph a subnet manager sees and programs (OpenSM's up/down and ftree
//! engines, IBTA vol. 1 §14; Leiserson's fat trees). Every switch has a level (leaves 0,
//! spines 1, computed from the wiring: a switch a host attaches to is a leaf, a switch
//! linked only to leaves is a spine). A packet for host `d` at switch `s` goes:
//! - straight down if `d` attaches to `s`;
//! - down to the switch `d` attaches to, over every parallel link, if `s` is linked to it;
//! - otherwise up, over every link to a switch one level higher that reaches `d`'s
//!   switch going down (up/down: never down then up, so no credit loop and no deadlock).
//!
//! The candidates of each entry are ports in increasing port order; a routing policy
//! (`crate::routing`) chooses among them. The tables grow with the links, not with
//! switches squared: a spine keeps one entry per leaf it is linked to (a dense
//! spine x leaf table, never larger than the links between them); a leaf keeps one
//! entry per *class* of leaves, the leaves linked to the same set of spines (one class
//! in a full Clos, one per plane in a multi-plane fabric), since its way up to every
//! leaf of a class is the same.
//!
//! The shape (`Topology`) builds one such graph today: the two-tier Clos with parallel
//! links. Other wirings (rail-optimized planes, uneven leaves) are other lists of links
//! given to [`Graph::new`]; routing, reports and the components read only the graph.
//!
//! A wiring whose leaves cannot all reach each other (the planes of a rail-optimized
//! fabric) is valid: [`Graph::reachable`] tells which host pairs can talk.
//!
//! Leaves out: more than two switch levels, link failures re-routing the tables.

use super::{LinkParams, Node, Tier};
use crate::engine::PortId;

/// One direction of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphPort {
    pub from: Node,
    pub to: Node,
    /// The link's class, for reports (host to leaf, leaf to spine, ...).
    pub class: Tier,
    pub link: LinkParams,
    /// The port carrying the other direction over the same cable.
    pub reverse: PortId,
}

/// A fabric's nodes, links and next-hop tables.
#[derive(Clone, Debug)]
pub struct Graph {
    pub ports: Vec<GraphPort>,
    hosts: u32,
    switches: u32,
    /// The switch each host attaches to, and the port it is reached by from there.
    attach: Vec<u32>,
    host_down: Vec<PortId>,
    /// Per switch: its level (0 leaf, 1 spine, `u8::MAX` unconnected) and its rank
    /// among the switches of its level.
    level: Vec<u8>,
    rank: Vec<u32>,
    leaves: u32,
    /// Per leaf: its class (leaves linked to the same set of spines).
    class: Vec<u32>,
    classes: u32,
    /// `up[leaf_rank * classes + class]`: a leaf's way up toward the leaves of a class.
    up: Vec<u32>,
    /// `down[spine_rank * leaves + leaf_rank]`: a spine's links down to a leaf.
    down: Vec<u32>,
    /// Per switch: its links to each adjacent switch, as (switch, group), by switch.
    neighbors: Vec<Vec<(u32, u32)>>,
    /// Some leaf is linked straight to another leaf (not a Clos; looked up first).
    leaf_links: bool,
    /// Candidate groups: `groups[g]..groups[g + 1]` index `hops`.
    groups: Vec<u32>,
    hops: Vec<PortId>,
}

const NO_GROUP: u32 = u32::MAX;

/// Why a list of links is not a fabric the tables can route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphError {
    /// A host with no link, or with links to more than one switch.
    HostAttachment { host: u32 },
    /// A port whose `reverse` does not lead back over the same cable.
    Reverse { port: PortId },
    /// Port `h` must be host `h`'s own port (the event loop finds a host's port, and a
    /// host port's host, by number).
    HostPortOrder { port: PortId },
}

impl Graph {
    /// The graph of `hosts` hosts and `switches` switches wired by `ports`.
    pub fn new(hosts: u32, switches: u32, ports: Vec<GraphPort>) -> Result<Graph, GraphError> {
        let (h, s) = (hosts as usize, switches as usize);
        for (i, p) in ports.iter().enumerate() {
            let r = ports.get(p.reverse as usize);
            if !r.is_some_and(|r| r.from == p.to && r.to == p.from && r.reverse == i as u32) {
                return Err(GraphError::Reverse { port: i as PortId });
            }
        }
        let mut attach = vec![u32::MAX; h];
        let mut host_down = vec![u32::MAX; h];
        // Links between switches, in port order: out[s] = (port, to).
        let mut out: Vec<Vec<(PortId, u32)>> = vec![Vec::new(); s];
        for (i, p) in ports.iter().enumerate() {
            match (p.from, p.to) {
                (Node::Host(x), Node::Switch(sw)) | (Node::Switch(sw), Node::Host(x)) => {
                    let a = &mut attach[x as usize];
                    if *a != u32::MAX && *a != sw {
                        return Err(GraphError::HostAttachment { host: x });
                    }
                    *a = sw;
                    if matches!(p.to, Node::Host(_)) {
                        host_down[x as usize] = i as PortId;
                    }
                }
                (Node::Switch(a), Node::Switch(b)) => out[a as usize].push((i as PortId, b)),
                (Node::Host(x), Node::Host(_)) => {
                    return Err(GraphError::HostAttachment { host: x })
                }
            }
        }
        if let Some(x) = (0..h).find(|&x| attach[x] == u32::MAX || host_down[x] == u32::MAX) {
            return Err(GraphError::HostAttachment { host: x as u32 });
        }
        if let Some(x) =
            (0..h).find(|&x| ports.get(x).map(|p| p.from) != Some(Node::Host(x as u32)))
        {
            return Err(GraphError::HostPortOrder { port: x as PortId });
        }
        // Levels: a switch with hosts is a leaf (0); one linked to a leaf, a spine (1).
        let mut level = vec![u8::MAX; s];
        for &a in &attach {
            level[a as usize] = 0;
        }
        for sw in 0..s {
            if level[sw] == u8::MAX && out[sw].iter().any(|&(_, t)| level[t as usize] == 0) {
                level[sw] = 1;
            }
        }
        let mut rank = vec![u32::MAX; s];
        let mut count = [0u32; 2];
        for sw in 0..s {
            if let Some(c) = count.get_mut(level[sw] as usize) {
                rank[sw] = *c;
                *c += 1;
            }
        }
        let [leaves, spines] = count;
        let mut groups = vec![0u32];
        let mut hops: Vec<PortId> = Vec::new();
        let mut group = |c: &[PortId]| -> u32 {
            if c.is_empty() {
                return NO_GROUP;
            }
            hops.extend_from_slice(c);
            groups.push(hops.len() as u32);
            (groups.len() - 2) as u32
        };
        // Each switch's links to each neighbour, parallel links together in port order.
        let mut neighbors: Vec<Vec<(u32, u32)>> = Vec::with_capacity(s);
        for links in &out {
            let mut by_to: Vec<(u32, PortId)> = links.iter().map(|&(p, t)| (t, p)).collect();
            by_to.sort_unstable(); // by neighbour, then port
            let mut mine = Vec::new();
            let mut i = 0;
            while i < by_to.len() {
                let t = by_to[i].0;
                let j = i + by_to[i..].iter().take_while(|&&(u, _)| u == t).count();
                let ports: Vec<PortId> = by_to[i..j].iter().map(|&(_, p)| p).collect();
                mine.push((t, group(&ports)));
                i = j;
            }
            neighbors.push(mine);
        }
        // Classes of leaves: by the set of spines each is linked to.
        let mut class = vec![u32::MAX; s];
        let mut class_spines: Vec<Vec<bool>> = Vec::new();
        let mut seen: std::collections::HashMap<Vec<u32>, u32> = Default::default();
        for sw in (0..s).filter(|&sw| level[sw] == 0) {
            let set: Vec<u32> = neighbors[sw]
                .iter()
                .map(|&(t, _)| t)
                .filter(|&t| level[t as usize] == 1)
                .collect();
            let next = seen.len() as u32;
            class[sw] = *seen.entry(set.clone()).or_insert_with(|| {
                let mut member = vec![false; s];
                for &t in &set {
                    member[t as usize] = true;
                }
                class_spines.push(member);
                next
            });
        }
        let classes = class_spines.len() as u32;
        // A leaf's way up toward each class: its uplinks to the spines of that class.
        let mut up = vec![NO_GROUP; leaves as usize * classes as usize];
        for sw in (0..s).filter(|&sw| level[sw] == 0) {
            for (c, member) in class_spines.iter().enumerate() {
                let cands: Vec<PortId> = out[sw]
                    .iter()
                    .filter(|&&(_, t)| level[t as usize] == 1 && member[t as usize])
                    .map(|&(p, _)| p)
                    .collect();
                up[rank[sw] as usize * classes as usize + c] = group(&cands);
            }
        }
        // A spine's links down to each leaf.
        let mut down = vec![NO_GROUP; spines as usize * leaves as usize];
        for sw in (0..s).filter(|&sw| level[sw] == 1) {
            for &(t, g) in &neighbors[sw] {
                if level[t as usize] == 0 {
                    down[rank[sw] as usize * leaves as usize + rank[t as usize] as usize] = g;
                }
            }
        }
        let leaf_links = (0..s)
            .any(|sw| level[sw] == 0 && neighbors[sw].iter().any(|&(t, _)| level[t as usize] == 0));
        Ok(Graph {
            ports,
            hosts,
            switches,
            attach,
            host_down,
            level,
            rank,
            leaves,
            class,
            classes,
            up,
            down,
            neighbors,
            leaf_links,
            groups,
            hops,
        })
    }

    pub fn hosts(&self) -> u32 {
        self.hosts
    }

    pub fn switches(&self) -> u32 {
        self.switches
    }

    /// Host `h`'s own port, to its switch: port `h` (hosts' ports come first).
    #[inline]
    pub fn host_up(&self, host: u32) -> PortId {
        host
    }

    /// The port from host `h`'s switch down to it.
    #[inline]
    pub fn host_down(&self, host: u32) -> PortId {
        self.host_down[host as usize]
    }

    /// The switch host `h` attaches to.
    #[inline]
    pub fn attach(&self, host: u32) -> u32 {
        self.attach[host as usize]
    }

    fn group(&self, g: u32) -> &[PortId] {
        if g == NO_GROUP {
            return &[];
        }
        &self.hops[self.groups[g as usize] as usize..self.groups[g as usize + 1] as usize]
    }

    /// The candidate egress ports at switch `sw` toward host `dst`, in port order (empty:
    /// none, which a valid fabric never asks for).
    #[inline]
    pub fn next_hops(&self, sw: u32, dst: u32) -> &[PortId] {
        let t = self.attach[dst as usize];
        if t == sw {
            return std::slice::from_ref(&self.host_down[dst as usize]);
        }
        let (s, t) = (sw as usize, t as usize);
        match self.level[s] {
            0 => {
                if self.leaf_links {
                    let direct = self.links_between(sw, t as u32);
                    if !direct.is_empty() {
                        return direct;
                    }
                }
                let i = self.rank[s] as usize * self.classes as usize + self.class[t] as usize;
                self.group(self.up[i])
            }
            1 => self.group(
                self.down[self.rank[s] as usize * self.leaves as usize + self.rank[t] as usize],
            ),
            _ => &[],
        }
    }

    /// The ports from switch `sw` to the adjacent switch `to`, in port order.
    #[inline]
    pub fn links_between(&self, sw: u32, to: u32) -> &[PortId] {
        let n = &self.neighbors[sw as usize];
        match n.binary_search_by_key(&to, |&(t, _)| t) {
            Ok(i) => self.group(n[i].1),
            Err(_) => &[],
        }
    }

    /// Whether a packet from host `src` reaches host `dst` (up/down, at most two
    /// switch levels).
    pub fn reachable(&self, src: u32, dst: u32) -> bool {
        let (mut sw, t) = (self.attach(src), self.attach(dst));
        for _ in 0..3 {
            if sw == t {
                return true;
            }
            match self.next_hops(sw, dst).first() {
                Some(&p) => match self.ports[p as usize].to {
                    Node::Switch(next) => sw = next,
                    Node::Host(_) => return true,
                },
                None => return false,
            }
        }
        false
    }

    /// Candidate entries stored, and table entries (a measure of the tables' memory).
    pub fn table_size(&self) -> (usize, usize) {
        (self.hops.len(), self.up.len() + self.down.len())
    }
}

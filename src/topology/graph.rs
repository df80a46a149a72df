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
//! (`crate::routing`) chooses among them. Entries are kept per destination *switch*
//! (the one the host attaches to) and shared between switches with the same choice, so
//! the tables take switches x switches entries, not switches x hosts.
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
    /// `table[s * switches + t]`: the candidate group toward hosts attached to switch `t`,
    /// at switch `s` (`NO_GROUP` if none).
    table: Vec<u32>,
    /// Candidate groups: `groups[g]..groups[g + 1]` index `hops`.
    groups: Vec<u32>,
    hops: Vec<PortId>,
    /// Ports from switch `s` to adjacent switch `t`, as a group (for packets addressed
    /// to a switch, as in-network aggregation sends them).
    adjacent: Vec<u32>,
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
        let mut g = Graph {
            ports,
            hosts,
            switches,
            attach,
            host_down,
            table: vec![NO_GROUP; s * s],
            groups: vec![0],
            hops: Vec::new(),
            adjacent: vec![NO_GROUP; s * s],
        };
        // Dedupe identical candidate lists (a leaf's uplinks serve every remote leaf).
        let mut seen: std::collections::HashMap<Vec<PortId>, u32> = Default::default();
        let mut group = |hops: &mut Vec<PortId>, groups: &mut Vec<u32>, c: Vec<PortId>| {
            *seen.entry(c.clone()).or_insert_with(|| {
                hops.extend_from_slice(&c);
                groups.push(hops.len() as u32);
                (groups.len() - 2) as u32
            })
        };
        for sw in 0..s {
            for (t, &t_level) in level.iter().enumerate() {
                if sw == t {
                    continue;
                }
                let direct: Vec<PortId> = out[sw]
                    .iter()
                    .filter(|&&(_, to)| to as usize == t)
                    .map(|&(p, _)| p)
                    .collect();
                if !direct.is_empty() {
                    g.adjacent[sw * s + t] = group(&mut g.hops, &mut g.groups, direct.clone());
                }
                if t_level != 0 {
                    continue; // hosts attach to leaves only
                }
                let cands = if !direct.is_empty() {
                    direct // down (or across) to the destination's switch
                } else {
                    // Up, to every higher switch linked to the destination's switch.
                    out[sw]
                        .iter()
                        .filter(|&&(_, up)| {
                            level[up as usize] > level[sw]
                                && out[up as usize].iter().any(|&(_, to)| to as usize == t)
                        })
                        .map(|&(p, _)| p)
                        .collect()
                };
                if cands.is_empty() {
                    // Another plane (a rail fabric's planes do not meet), or a spine not
                    // linked to that leaf: no route; `reachable` says so.
                    continue;
                }
                g.table[sw * s + t] = group(&mut g.hops, &mut g.groups, cands);
            }
        }
        Ok(g)
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
        self.group(self.table[(sw * self.switches + t) as usize])
    }

    /// The ports from switch `sw` to the adjacent switch `to`, in port order.
    #[inline]
    pub fn links_between(&self, sw: u32, to: u32) -> &[PortId] {
        self.group(self.adjacent[(sw * self.switches + to) as usize])
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

    /// Candidate entries stored (a measure of the tables' memory).
    pub fn table_hops(&self) -> usize {
        self.hops.len()
    }
}

//! Routing: which of several equal-cost ports a switch sends a packet on.
//!
//! In a two-tier Clos a leaf chooses among its uplinks (spines x parallel links) for a
//! packet bound to another leaf, and a spine among its parallel links down to the
//! destination's leaf. Every policy is one file behind [`RoutingPolicy`]:
//!
//! | policy | file | choice | source |
//! |---|---|---|---|
//! | `ecmp` | `ecmp.rs` | hash of the flow, salted per switch | RFC 2992; Ethernet ECMP |
//! | `static` | `dmodk.rs` | destination mod k | OpenSM ftree (d-mod-k) |
//! | `spray` | `spray.rs` | per packet, round robin over a flow's packets | packet spraying (Dixit et al., INFOCOM 2013) |
//! | `adaptive` | `adaptive.rs` | per packet, the least-loaded port | IB adaptive routing (Quantum) |
//!
//! A policy sees the clock, the packet's routing key and the candidates (how many, and
//! each one's load), and may keep state of its own (flowlet tables, remote load), so a
//! new policy is one new file and one enum arm. Choices are deterministic: hashes are
//! seeded per run through the packet's flow hash.
//!
//! Leaves out: failures and rerouting around them, multi-tier fabrics.

mod adaptive;
mod dmodk;
mod ecmp;
mod spray;

pub use crate::rng::mix64;
pub use adaptive::Adaptive;
pub use dmodk::DModK;
pub use ecmp::Ecmp;
pub use spray::Spray;

use crate::units::SimTime;
use serde::{Deserialize, Serialize};

/// The routing policy a scenario names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// Per-flow hash (seeded), as Ethernet ECMP; flows may collide (default).
    #[default]
    Ecmp,
    /// Destination-based d-mod-k, as an InfiniBand subnet manager programs it.
    Static,
    /// Per-packet round robin over the uplinks (each flow's packets in turn).
    Spray,
    /// Per packet, the uplink with the fewest queued bytes.
    Adaptive,
}

impl Routing {
    /// Chooses a path per packet, so one flow may use every parallel path at once.
    pub fn per_packet(self) -> bool {
        matches!(self, Routing::Spray | Routing::Adaptive)
    }

    pub fn name(self) -> &'static str {
        match self {
            Routing::Ecmp => "ecmp",
            Routing::Static => "static",
            Routing::Spray => "spray",
            Routing::Adaptive => "adaptive",
        }
    }
}

/// What a switch knows of a packet when it routes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteKey {
    /// The switch choosing.
    pub switch: u32,
    /// Destination host.
    pub dst: u32,
    /// The flow's (or queue pair's) hash: its 5-tuple.
    pub flow_hash: u32,
    /// The packet's sequence number within its flow.
    pub seq: u32,
}

/// The ports a switch may choose among: `n` of them, with each one's load (queued bytes).
pub struct Candidates<F: Fn(u32) -> u64> {
    pub n: u32,
    pub load: F,
}

/// A routing policy with its state.
#[derive(Clone, Debug)]
pub enum RoutingPolicy {
    Ecmp(Ecmp),
    Static(DModK),
    Spray(Spray),
    Adaptive(Adaptive),
}

impl RoutingPolicy {
    pub fn new(routing: Routing) -> RoutingPolicy {
        match routing {
            Routing::Ecmp => RoutingPolicy::Ecmp(Ecmp),
            Routing::Static => RoutingPolicy::Static(DModK),
            Routing::Spray => RoutingPolicy::Spray(Spray),
            Routing::Adaptive => RoutingPolicy::Adaptive(Adaptive),
        }
    }

    /// Picks one of the candidates (an index below `c.n`) for the packet.
    #[inline]
    pub fn choose<F: Fn(u32) -> u64>(
        &mut self,
        now: SimTime,
        key: RouteKey,
        c: Candidates<F>,
    ) -> u32 {
        if c.n <= 1 {
            return 0;
        }
        match self {
            RoutingPolicy::Ecmp(p) => p.choose(now, key, c),
            RoutingPolicy::Static(p) => p.choose(now, key, c),
            RoutingPolicy::Spray(p) => p.choose(now, key, c),
            RoutingPolicy::Adaptive(p) => p.choose(now, key, c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(r: Routing, n: u32, switch: u32, dst: u32, hash: u32, seq: u32, q: &[u64]) -> u32 {
        let key = RouteKey {
            switch,
            dst,
            flow_hash: hash,
            seq,
        };
        let load = |i: u32| q.get(i as usize).copied().unwrap_or(0);
        RoutingPolicy::new(r).choose(SimTime::ZERO, key, Candidates { n, load })
    }

    #[test]
    fn one_candidate_is_always_taken() {
        for r in [
            Routing::Ecmp,
            Routing::Static,
            Routing::Spray,
            Routing::Adaptive,
        ] {
            assert_eq!(pick(r, 1, 3, 7, 11, 13, &[]), 0);
        }
    }

    #[test]
    fn static_is_destination_mod_k() {
        assert_eq!(pick(Routing::Static, 4, 0, 13, 0, 0, &[]), 1);
        // The same for every source (flow hash) and packet.
        assert_eq!(pick(Routing::Static, 4, 2, 13, 99, 5, &[]), 1);
    }

    #[test]
    fn spray_is_round_robin_over_a_flows_packets() {
        let picks: Vec<u32> = (0..6)
            .map(|i| pick(Routing::Spray, 3, 0, 0, 9, i, &[]))
            .collect();
        assert_eq!(picks[3..], picks[..3]);
        let mut first3 = picks[..3].to_vec();
        first3.sort();
        assert_eq!(first3, vec![0, 1, 2]);
    }

    #[test]
    fn adaptive_takes_the_least_loaded_and_breaks_ties_from_the_spray_choice() {
        assert_eq!(
            pick(Routing::Adaptive, 4, 0, 0, 0, 0, &[500, 100, 300, 100]),
            1
        );
        // On an idle fabric it spreads as spray does.
        for seq in 0..8 {
            assert_eq!(
                pick(Routing::Adaptive, 4, 1, 0, 5, seq, &[0; 4]),
                pick(Routing::Spray, 4, 1, 0, 5, seq, &[])
            );
        }
    }

    #[test]
    fn ecmp_keeps_a_flow_on_one_port_and_salts_per_switch() {
        let a = pick(Routing::Ecmp, 8, 2, 0, 77, 0, &[]);
        assert_eq!(a, pick(Routing::Ecmp, 8, 2, 5, 77, 9, &[]));
        // Over many flows, two switches do not make the same choices.
        let same = (0..64u32)
            .filter(|&h| {
                pick(Routing::Ecmp, 8, 0, 0, h, 0, &[]) == pick(Routing::Ecmp, 8, 1, 0, h, 0, &[])
            })
            .count();
        assert!(same < 32, "{same} of 64 flows hash alike at two switches");
    }
}

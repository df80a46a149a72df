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
//! | `adaptive` | `adaptive.rs` | per packet, the least-loaded port (optional hysteresis, load bands) | IB adaptive routing (Quantum); Spectrum-X |
//! | `flowlet` | `flowlet.rs` | per flowlet (idle gap), the least-loaded port | FLARE (CCR 2007), CONGA, LetFlow |
//!
//! Load is the port's queued bytes, or with [`LoadSignal::QueueAndCredits`] also what the
//! next switch holds from the port (IB credits in use) and whether it may send now (a
//! PFC pause or missing IB credits count as a full queue). A packet
//! that may not be routed per packet (NCCL sends messages below `NCCL_IB_AR_THRESHOLD`
//! so that they need no out-of-order placement) takes the flow's ECMP port under `spray`
//! and `adaptive`.
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
mod flowlet;
mod spray;

pub use crate::rng::mix64;
pub use adaptive::Adaptive;
pub use dmodk::DModK;
pub use ecmp::{five_tuple_hash, roce_qp_hashes, roce_udp_source_port, Ecmp, ROCEV2_UDP_PORT};
pub use flowlet::Flowlet;
pub use spray::Spray;

use crate::units::{SimDuration, SimTime};
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
    /// Per flowlet: a flow may move to the least-loaded uplink after an idle gap.
    Flowlet,
}

impl Routing {
    /// Chooses a path per packet, so one flow may use every parallel path at once.
    pub fn per_packet(self) -> bool {
        matches!(self, Routing::Spray | Routing::Adaptive)
    }

    /// May have one flow on several parallel paths at once: per packet, or per flowlet
    /// (a new flowlet can leave while the last one's packets still queue on another
    /// path), so a flow's ideal is the multipath one.
    pub fn multipath(self) -> bool {
        self.per_packet() || self == Routing::Flowlet
    }

    pub fn name(self) -> &'static str {
        match self {
            Routing::Ecmp => "ecmp",
            Routing::Static => "static",
            Routing::Spray => "spray",
            Routing::Adaptive => "adaptive",
            Routing::Flowlet => "flowlet",
        }
    }
}

/// What adaptive choices count as a port's load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadSignal {
    /// Bytes queued at the port (default; what a switch's egress counters show).
    #[default]
    Queue,
    /// Bytes queued, plus under IB credits the bytes the next switch still holds from
    /// this link (credits not yet returned: its queues for what this port sent); a port
    /// held by a PFC pause or out of credits counts as full. InfiniBand switches' adaptive
    /// routing weighs credit state besides the local queue (NVIDIA, "InfiniBand adaptive
    /// routing"); on PFC only the pause state reaches the sender.
    QueueAndCredits,
}

/// A routing policy with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoutingConfig {
    pub policy: Routing,
    /// `flowlet`: the idle gap after which a flow may move.
    pub flowlet_gap: SimDuration,
    /// `adaptive`: another port must be this many bytes lighter than the flow's ECMP
    /// port to be taken (0: always the lightest).
    pub hysteresis_bytes: u64,
    /// `adaptive`: loads are compared in bands of this many bytes (0 or 1: exactly).
    pub band_bytes: u64,
    pub load: LoadSignal,
}

impl RoutingConfig {
    /// `policy` with every parameter at its default.
    pub fn new(policy: Routing) -> RoutingConfig {
        RoutingConfig {
            policy,
            flowlet_gap: defaults::FLOWLET_GAP,
            hysteresis_bytes: 0,
            band_bytes: 0,
            load: LoadSignal::Queue,
        }
    }
}

impl RoutingConfig {
    /// The policy's name, with each parameter that is not its default (no commas, so it
    /// fits a CSV field): `adaptive hysteresis=8192B band=65536B load=queue_and_credits`.
    pub fn describe(&self) -> String {
        let mut s = self.policy.name().to_string();
        if self.policy == Routing::Flowlet && self.flowlet_gap != defaults::FLOWLET_GAP {
            s.push_str(&format!(" flowlet_gap={}ps", self.flowlet_gap.0));
        }
        if self.hysteresis_bytes > 0 {
            s.push_str(&format!(" hysteresis={}B", self.hysteresis_bytes));
        }
        if self.band_bytes > 0 {
            s.push_str(&format!(" band={}B", self.band_bytes));
        }
        if self.load != LoadSignal::Queue {
            s.push_str(" load=queue_and_credits");
        }
        s
    }
}

impl From<Routing> for RoutingConfig {
    fn from(policy: Routing) -> RoutingConfig {
        RoutingConfig::new(policy)
    }
}

/// Defaults, with their sources.
pub mod defaults {
    use crate::units::SimDuration;
    /// Flowlet gap: an assumption, a few times a two-tier fabric's base RTT plus the
    /// queueing two paths may differ by (CONGA's 500 us is for 10G TCP fabrics, whose
    /// RTTs are ten times longer).
    pub const FLOWLET_GAP: SimDuration = SimDuration::from_us(50);
    /// A port held by PFC or out of credits counts as this many bytes queued.
    pub const HELD_PORT_BYTES: u64 = 1 << 40;
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
    /// Whether per-packet policies may route this packet on its own (else it takes its
    /// flow's ECMP port).
    pub per_packet: bool,
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
    Flowlet(Flowlet),
}

impl RoutingPolicy {
    /// The policy `cfg` names, for a fabric of `switches` switches.
    pub fn new(cfg: RoutingConfig, switches: u32) -> RoutingPolicy {
        match cfg.policy {
            Routing::Ecmp => RoutingPolicy::Ecmp(Ecmp),
            Routing::Static => RoutingPolicy::Static(DModK),
            Routing::Spray => RoutingPolicy::Spray(Spray),
            Routing::Adaptive => {
                RoutingPolicy::Adaptive(Adaptive::new(cfg.hysteresis_bytes, cfg.band_bytes))
            }
            Routing::Flowlet => RoutingPolicy::Flowlet(Flowlet::new(cfg.flowlet_gap, switches)),
        }
    }

    /// The candidate `choose` will pick for `key` among `n`, when the policy decides by
    /// the packet alone (ECMP, D-mod-k, spraying, a flow's port under adaptive routing);
    /// `None` when it reads loads or timers (adaptive routing per packet, flowlets).
    /// Changes nothing: for a prefetch of the port the packet will leave by.
    #[inline]
    pub fn predict(&self, key: RouteKey, n: u32) -> Option<u32> {
        if n <= 1 {
            return Some(0);
        }
        match self {
            RoutingPolicy::Ecmp(_) => Some(ecmp::ecmp_choice(n, key)),
            RoutingPolicy::Static(_) => Some(dmodk::dmodk_choice(n, key)),
            RoutingPolicy::Spray(_) | RoutingPolicy::Adaptive(_) if !key.per_packet => {
                Some(ecmp::ecmp_choice(n, key))
            }
            RoutingPolicy::Spray(_) => Some(spray::spray_choice(n, key)),
            RoutingPolicy::Adaptive(_) | RoutingPolicy::Flowlet(_) => None,
        }
    }

    /// Picks one of the candidates (an index below `c.n`) for the packet.
    #[inline(always)]
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
            RoutingPolicy::Spray(_) | RoutingPolicy::Adaptive(_) if !key.per_packet => {
                ecmp::ecmp_choice(c.n, key)
            }
            RoutingPolicy::Spray(p) => p.choose(now, key, c),
            RoutingPolicy::Adaptive(p) => p.choose(now, key, c),
            RoutingPolicy::Flowlet(p) => p.choose(now, key, c),
        }
    }
}

/// The candidate with the least load, scanning from `start` (ties go to the first at or
/// after it).
#[inline]
pub(crate) fn least_loaded<F: Fn(u32) -> u64>(start: u32, c: &Candidates<F>) -> u32 {
    let n = c.n;
    let mut best = start;
    let mut best_q = (c.load)(start);
    for j in 1..n {
        let i = (start + j) % n;
        let q = (c.load)(i);
        if q < best_q {
            best = i;
            best_q = q;
        }
    }
    best
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
            per_packet: true,
        };
        let load = |i: u32| q.get(i as usize).copied().unwrap_or(0);
        RoutingPolicy::new(r.into(), 4).choose(SimTime::ZERO, key, Candidates { n, load })
    }

    #[test]
    fn one_candidate_is_always_taken() {
        for r in [
            Routing::Ecmp,
            Routing::Static,
            Routing::Spray,
            Routing::Adaptive,
            Routing::Flowlet,
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

#[cfg(test)]
mod policy_tests {
    use super::*;

    fn choose(cfg: RoutingConfig, per_packet: bool, seq: u32, q: &[u64]) -> u32 {
        let key = RouteKey {
            switch: 1,
            dst: 3,
            flow_hash: 0xabcd,
            seq,
            per_packet,
        };
        let load = |i: u32| q[i as usize];
        RoutingPolicy::new(cfg, 4).choose(
            SimTime::ZERO,
            key,
            Candidates {
                n: q.len() as u32,
                load,
            },
        )
    }

    #[test]
    fn packets_below_the_ar_threshold_keep_their_flows_ecmp_port() {
        let q = [9_000, 100, 5_000, 7_000];
        let ecmp = choose(Routing::Ecmp.into(), true, 0, &q);
        for r in [Routing::Spray, Routing::Adaptive] {
            for seq in 0..8 {
                assert_eq!(choose(r.into(), false, seq, &q), ecmp, "{r:?}");
            }
        }
        assert_eq!(choose(Routing::Adaptive.into(), true, 0, &q), 1);
    }

    #[test]
    fn adaptive_bands_spread_packets_over_ports_of_the_lightest_band_in_spray_order() {
        // Two ports within one 64 KiB band of each other, one far above it.
        let q = [10_000u64, 60_000, 200_000, 30_000];
        let cfg = |b| RoutingConfig {
            band_bytes: b,
            ..RoutingConfig::new(Routing::Adaptive)
        };
        let spray: Vec<u32> = (0..8)
            .map(|seq| choose(Routing::Spray.into(), true, seq, &[0; 4]))
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        for seq in 0..8 {
            let p = choose(cfg(65_536), true, seq, &q);
            assert_ne!(p, 2, "never the port in a higher band");
            // The first port of the lightest band at or after the spray choice.
            let want = (0..4)
                .map(|j| (spray[seq as usize] + j) % 4)
                .find(|&i| i != 2)
                .unwrap();
            assert_eq!(p, want, "seq {seq}");
            seen.insert(p);
        }
        assert_eq!(seen.len(), 3, "ports 0, 1 and 3 share the band");
        // Exact bytes: always the lightest.
        for seq in 0..8 {
            assert_eq!(choose(cfg(0), true, seq, &q), 0);
        }
        // The hysteresis counts in bands too: 3 bands lighter is beyond 128 KiB.
        let far = [400_000u64, 400_000, 400_000, 400_000];
        let home = choose(Routing::Ecmp.into(), true, 0, &far) as usize;
        let mut q = far;
        q[(home + 1) % 4] = 100_000;
        let both = RoutingConfig {
            hysteresis_bytes: 131_072,
            ..cfg(65_536)
        };
        assert_eq!(choose(both, true, 0, &q) as usize, (home + 1) % 4);
        let wide = RoutingConfig {
            hysteresis_bytes: 393_216,
            ..both
        };
        assert_eq!(choose(wide, true, 0, &q) as usize, home);
    }

    #[test]
    fn adaptive_hysteresis_keeps_the_ecmp_port_unless_another_is_lighter_by_more() {
        let mut q = [4_000u64; 4];
        let home = choose(Routing::Ecmp.into(), true, 0, &q) as usize;
        let other = (home + 1) % 4;
        q[other] = 1_000; // 3,000 B lighter
        let cfg = |h| RoutingConfig {
            hysteresis_bytes: h,
            ..RoutingConfig::new(Routing::Adaptive)
        };
        assert_eq!(
            choose(cfg(4_096), true, 0, &q) as usize,
            home,
            "within hysteresis"
        );
        assert_eq!(choose(cfg(2_048), true, 0, &q) as usize, other, "beyond it");
        assert_eq!(choose(cfg(0), true, 0, &q) as usize, other);
    }
}

#[cfg(test)]
mod describe_tests {
    use super::*;

    #[test]
    fn a_policy_is_described_with_the_parameters_it_changes() {
        assert_eq!(RoutingConfig::new(Routing::Adaptive).describe(), "adaptive");
        let c = RoutingConfig {
            hysteresis_bytes: 8192,
            load: LoadSignal::QueueAndCredits,
            ..RoutingConfig::new(Routing::Adaptive)
        };
        assert_eq!(
            c.describe(),
            "adaptive hysteresis=8192B load=queue_and_credits"
        );
        let f = RoutingConfig {
            flowlet_gap: SimDuration::from_us(5),
            ..RoutingConfig::new(Routing::Flowlet)
        };
        assert_eq!(f.describe(), "flowlet flowlet_gap=5000000ps");
    }
}

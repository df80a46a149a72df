//! NCCL's choice of algorithm and protocol: its tuner's latency/bandwidth model
//! (`src/graph/tuning.cc`, `ncclTopoTuneModel` and `ncclTopoGetAlgoTime`, NCCL 2.23 and
//! later; Hopper tables), evaluated for each size and the cheapest (algorithm,
//! protocol) taken, as `NCCL_ALGO`/`NCCL_PROTO` unset do. The run then simulates the
//! chosen pair; the model's own time is only the tuner's estimate.
//!
//! - time (us) = latency + bytes / (1000 x algorithm bandwidth in GB/s);
//! - ring latency = baseLat + (nsteps - nInterSteps) x max(NVLink hwLat, net overhead) +
//!   nInterSteps x net hwLat, x 1.4 for multi-node Simple allreduce ("plateau effect");
//! - tree latency = baseLat + 2 x ((ranks per node - 1) x NVLink hwLat + log2(nodes) x
//!   net hwLat);
//! - with one rank per node, network steps cost the tree's `hwLat[NET]` row whatever
//!   the algorithm;
//! - bus bandwidth = the graph's per-channel bandwidth x channels, then per protocol:
//!   ring LL min(llMaxBw, x 0.5), ring LL128 min(x 0.92, 36.7 GB/s per channel; NCCL
//!   counts its search graph's channels, here the communicator's: see `estimate_us`); tree
//!   min(x 0.92, perChMaxTreeBw per channel), tree LL min(/3.8, llMaxBw), tree LL128
//!   min(x 120/128 (7/9 on one node), 36.7 per channel) and the tree correction factor
//!   by size; algorithm bandwidth = bus bandwidth x nRanks/nsteps (ring) or 0.5 (tree).
//!
//! The graph bandwidth NCCL's topology search would find is taken from the fabric: on
//! one or two nodes NCCL uses its intra-node figure (the NVLink rate per GPU), beyond
//! that its inter-node one (the server's NICs). With `nvls` (NVLink SHARP there for
//! NCCL), allreduce across servers also weighs NVLSTree (Simple only): latency 25 us +
//! 2 x log2(nodes) x 14 us, bandwidth the NVLS graph's (`nvls_graph`) x 5/6. Leaves out:
//! NVLS on one server and with CollNet, CollNet, PAT, the per-size channel and thread
//! reduction (`getChannnelThreadInfo`) and tuner plugins.

use super::protocol::{launch_latency, net_step_latency, nvlink_step_latency, Protocol};
use super::{Collective, CollectiveAlgorithm, CollectiveOp, RankLoc};

/// What the tuner knows of the communicator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TunerInput {
    pub op: CollectiveOp,
    pub ranks: u32,
    /// Distinct servers the ranks are on.
    pub nodes: u32,
    pub channels: u32,
    /// NVLink bandwidth per GPU, GB/s.
    pub intra_gbps: f64,
    /// The NICs' bandwidth per server, GB/s.
    pub net_gbps: f64,
}

/// `llMaxBws` by node count (1, 2, more): on one node the GPU's row (Hopper), across
/// nodes the CPU's (row 0, x86 Intel, as `NET_OVERHEAD_US` assumes).
const LL_MAX_BW: [f64; 3] = [141.0, 39.0, 20.4];
/// `perChMaxTreeBws` for Hopper.
const PER_CH_MAX_TREE_BW: [f64; 3] = [38.7, 41.4, 36.0];
/// `perChMaxRingLL128Bws` and `perChMaxTreeLL128Bws` for Hopper.
const PER_CH_MAX_RING_LL128_BW: f64 = 36.7;
const PER_CH_MAX_TREE_LL128_BW: [f64; 3] = [36.7, 36.7, 29.0];
/// `treeCorrectionFactor[protocol][log2(bytes / 64)]` (LL, LL128, Simple).
const TREE_CORRECTION: [[f64; 23]; 3] = [
    [
        1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.0, 1.0, 1.0,
    ],
    [
        1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9,
        0.9, 0.9, 0.9, 1.0, 1.0,
    ],
    [
        0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8,
        0.7, 0.7, 0.8, 0.9, 0.9,
    ],
];
/// The bandwidths NCCL's topology search tries on Hopper, GB/s (`src/graph/search.cc`,
/// `sm90SpeedArrayIntra`, `sm90SpeedArrayInter`): a graph's bandwidth is the first that
/// fits.
const SM90_SPEED_INTRA: [f64; 11] = [
    60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0,
];
const SM90_SPEED_INTER: [f64; 17] = [
    48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
    0.12,
];

fn first_fitting(speeds: &[f64], limit: f64) -> f64 {
    speeds.iter().copied().find(|&s| s <= limit).unwrap_or(0.0)
}

/// NCCL's NVLS graph on servers of `ppn` GPUs, each with its own NIC: (channels,
/// bwIntra, bwInter). One channel per head GPU (`NCCL_MAX_NVLS_ARITY` allows more than
/// 8); a head's NVSwitch link carries twice a channel's bandwidth and every other GPU's
/// once, so (ppn + 1) x bwIntra fits the GPU's NVLink; bwInter, raised up to twice
/// bwIntra, fits the head's NIC (`ncclTopoSearchTryNvls`, search pass 2).
pub fn nvls_graph(ppn: f64, intra_gbps: f64, nic_gbps: f64) -> (f64, f64, f64) {
    let intra = first_fitting(&SM90_SPEED_INTRA, intra_gbps / (ppn + 1.0));
    let inter = first_fitting(&SM90_SPEED_INTER, nic_gbps.min(2.0 * intra));
    (ppn, intra, inter)
}

/// `NCCL_P2P_LL_THRESHOLD`'s default, bytes per peer.
const P2P_LL_THRESHOLD: u64 = 16_384;
/// `getNetOverhead()` on x86 Intel hosts, us (tripled for Simple).
const NET_OVERHEAD_US: f64 = 1.0;

fn us(d: crate::units::SimDuration) -> f64 {
    d.0 as f64 / 1e6
}

fn log2i(x: u64) -> u32 {
    63 - x.max(1).leading_zeros()
}

fn proto_index(p: Protocol) -> usize {
    match p {
        Protocol::Ll => 0,
        Protocol::Ll128 => 1,
        Protocol::Simple => 2,
    }
}

/// The tuner's estimate for `bytes` with `(a, p)`, us; `None` where NCCL does not run it
/// (tree for operations other than allreduce).
pub fn estimate_us(t: &TunerInput, a: CollectiveAlgorithm, p: Protocol, bytes: u64) -> Option<f64> {
    let n = t.ranks as f64;
    let nodes = t.nodes.max(1);
    let node_index = match nodes {
        1 => 0,
        2 => 1,
        _ => 2,
    };
    let ppn = (t.ranks / nodes).max(1) as f64;
    // NCCL's per-channel caps count the search graph's channels, half the
    // communicator's (`src/graph/connect.cc` duplicates every channel). Here they count
    // the communicator's: NCCL's real search result on a server is not known, and with
    // half of the default 16 the tuner would pick ring at 256 MiB on 8 x 8 H100 (360
    // GB/s) where the measured default reaches 320.7 GB/s (391.4 tuned), as the tree
    // NCCL picks with 16 does (312).
    let ch = t.channels.max(1) as f64;
    let allreduce = t.op == CollectiveOp::Allreduce;
    let nsteps = match t.op {
        CollectiveOp::Allreduce => 2.0 * (n - 1.0),
        CollectiveOp::Broadcast => n,
        _ => n - 1.0,
    };
    let graph_bw = if nodes <= 2 {
        t.intra_gbps
    } else {
        t.net_gbps.min(t.intra_gbps)
    };
    let mut bus_bw = graph_bw;
    let intra_lat = us(nvlink_step_latency(a, p));
    let inter_lat = us(net_step_latency(a, p, t.ranks <= nodes));
    let mut lat = us(launch_latency(a, p));
    let ratio;
    match a {
        // NVLSTree (Simple only, allreduce across servers): latency = NVLS's 25 us +
        // 2 x log2(nodes) x 14 us; bus bandwidth = the NVLS graph's channels x
        // min(bwIntra, bwInter, halved beyond two nodes), ratio 5/6.
        CollectiveAlgorithm::NvlsTree if allreduce && nodes > 1 && p == Protocol::Simple => {
            lat +=
                us(nvlink_step_latency(a, p)) * 2.0 + 2.0 * log2i(nodes as u64) as f64 * inter_lat;
            let (nvls_ch, intra, inter) = nvls_graph(ppn, t.intra_gbps, t.net_gbps / ppn);
            let inter = if nodes <= 2 { inter } else { inter / 2.0 };
            bus_bw = nvls_ch * intra.min(inter);
            ratio = 5.0 / 6.0;
        }
        CollectiveAlgorithm::Ring => {
            let n_inter = match (nodes, t.op) {
                (1, _) => 0.0,
                (_, CollectiveOp::Allreduce) => 2.0 * (nodes as f64 - 1.0),
                _ => nodes as f64 - 1.0,
            };
            let overhead = if nodes > 1 {
                NET_OVERHEAD_US * if p == Protocol::Simple { 3.0 } else { 1.0 }
            } else {
                0.0
            };
            lat += (nsteps - n_inter) * intra_lat.max(overhead) + n_inter * inter_lat;
            match p {
                Protocol::Ll => bus_bw = LL_MAX_BW[node_index].min(bus_bw * 0.5),
                Protocol::Ll128 => bus_bw = (bus_bw * 0.92).min(ch * PER_CH_MAX_RING_LL128_BW),
                Protocol::Simple => {}
            }
            if p == Protocol::Simple
                && nodes > 1
                && allreduce
                && bytes / (t.channels.max(1) as u64 * t.ranks as u64) >= 64
            {
                lat *= 1.4;
            }
            ratio = n / nsteps;
        }
        CollectiveAlgorithm::Tree if allreduce => {
            lat += 2.0 * ((ppn - 1.0) * intra_lat + log2i(nodes as u64) as f64 * inter_lat);
            bus_bw = (bus_bw * 0.92).min(ch * PER_CH_MAX_TREE_BW[node_index]);
            match p {
                Protocol::Ll => bus_bw = (bus_bw / 3.8).min(LL_MAX_BW[node_index]),
                Protocol::Ll128 => {
                    let f = if nodes == 1 { 7.0 / 9.0 } else { 120.0 / 128.0 };
                    bus_bw = (bus_bw * f).min(ch * PER_CH_MAX_TREE_LL128_BW[node_index]);
                }
                Protocol::Simple => {}
            }
            let log_size = log2i((bytes >> 6).max(1)) as usize;
            if bytes >= 64 && log_size < 23 {
                bus_bw *= TREE_CORRECTION[proto_index(p)][log_size];
            }
            ratio = 0.5;
        }
        _ => return None,
    }
    let alg_bw = bus_bw * ratio;
    Some(lat + bytes as f64 / (1000.0 * alg_bw))
}

/// NCCL's choice for `bytes` among `algorithms` x `protocols`: the lowest estimate
/// (ties to the earlier pair in NCCL's order: tree before ring, LL before LL128 before
/// Simple).
pub fn choose(
    t: &TunerInput,
    algorithms: &[CollectiveAlgorithm],
    protocols: &[Protocol],
    bytes: u64,
) -> Option<(CollectiveAlgorithm, Protocol)> {
    let mut best: Option<(f64, CollectiveAlgorithm, Protocol)> = None;
    // NCCL's algorithm order: Tree before Ring.
    let mut algs = algorithms.to_vec();
    algs.sort_by_key(|a| match a {
        CollectiveAlgorithm::Tree => 0,
        CollectiveAlgorithm::Ring => 1,
        CollectiveAlgorithm::NvlsTree => 2,
        _ => 3,
    });
    for &a in &algs {
        for &p in protocols {
            if let Some(time) = estimate_us(t, a, p, bytes) {
                if best.map_or(true, |(b, _, _)| time < b) {
                    best = Some((time, a, p));
                }
            }
        }
    }
    best.map(|(_, a, p)| (a, p))
}

/// Per size: the algorithm and protocol the run uses, as given or as NCCL's tuner
/// chooses under `auto`.
pub fn choices(
    c: &Collective,
    ranks: &[RankLoc],
    net_gbps: f64,
) -> Vec<(CollectiveAlgorithm, Protocol)> {
    let mut servers: Vec<u32> = ranks.iter().map(|r| r.server).collect();
    servers.sort_unstable();
    servers.dedup();
    let input = TunerInput {
        op: c.op,
        ranks: ranks.len() as u32,
        nodes: servers.len() as u32,
        channels: c.channels,
        intra_gbps: c.intra_rate.0 as f64 / 8e9,
        net_gbps,
    };
    let nvls = c.nvls && super::dag::nvls_servers(ranks).is_some();
    let algorithms: &[CollectiveAlgorithm] = match c.algorithm {
        CollectiveAlgorithm::Auto if c.op == CollectiveOp::Allreduce && nvls => &[
            CollectiveAlgorithm::Ring,
            CollectiveAlgorithm::Tree,
            CollectiveAlgorithm::NvlsTree,
        ],
        CollectiveAlgorithm::Auto if c.op == CollectiveOp::Allreduce => {
            &[CollectiveAlgorithm::Ring, CollectiveAlgorithm::Tree]
        }
        CollectiveAlgorithm::Auto => &[CollectiveAlgorithm::Ring],
        ref a => std::slice::from_ref(a),
    };
    let protocols: &[Protocol] = match &c.protocol {
        None => &Protocol::ALL,
        Some(p) => std::slice::from_ref(p),
    };
    c.sizes
        .iter()
        .map(|&size| {
            if c.op == CollectiveOp::Alltoall && c.protocol.is_none() {
                // Point-to-point, not a collective kernel: NCCL sends LL up to
                // `NCCL_P2P_LL_THRESHOLD` (16 KiB per peer, src/enqueue.cc), else Simple.
                let per_peer = size / ranks.len() as u64;
                let p = if per_peer <= P2P_LL_THRESHOLD {
                    Protocol::Ll
                } else {
                    Protocol::Simple
                };
                return (CollectiveAlgorithm::Ring, p);
            }
            choose(&input, algorithms, protocols, size)
                // Hierarchical and in-network are not NCCL's: they run as given (and
                // NVLSTree, when forced, with Simple, its only protocol).
                .unwrap_or((
                    algorithms[0],
                    if algorithms[0] == CollectiveAlgorithm::NvlsTree {
                        Protocol::Simple
                    } else {
                        protocols.last().copied().unwrap_or(Protocol::Simple)
                    },
                ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 servers x 8 H100 on NVLink 4 (NCCL's 18 x 20.6 GB/s), 8 x 400G NICs.
    fn h100_2x8(channels: u32) -> TunerInput {
        TunerInput {
            op: CollectiveOp::Allreduce,
            ranks: 16,
            nodes: 2,
            channels,
            intra_gbps: 370.8,
            net_gbps: 400.0,
        }
    }

    #[test]
    fn ring_latencies_follow_nccls_formula_by_hand() {
        let t = h100_2x8(16);
        // LL: 6.6 + 28 x max(0.6, 1.0) + 2 x 2.7 = 40.0 us, plus 8 B at
        // min(39, 370.8 x 0.5) x 16/30 = 20.8 GB/s.
        let ll = estimate_us(&t, CollectiveAlgorithm::Ring, Protocol::Ll, 8).unwrap();
        assert!((ll - (40.0 + 8.0 / 20_800.0)).abs() < 1e-6, "{ll}");
        // One rank per node: the network steps cost the tree's row (5.0 us for LL):
        // 6.6 + 0 + 2 x 5.0 = 16.6 us on 2 nodes of one rank.
        let one = TunerInput { ranks: 2, ..t };
        let ll1 = estimate_us(&one, CollectiveAlgorithm::Ring, Protocol::Ll, 0).unwrap();
        assert!((ll1 - 16.6).abs() < 1e-9, "{ll1}");
        // Simple, 8 B (below the plateau rule's 64 B per channel and rank):
        // 8.4 + 28 x max(3.4, 3.0) + 2 x 14 = 131.6 us.
        let s = estimate_us(&t, CollectiveAlgorithm::Ring, Protocol::Simple, 8).unwrap();
        assert!(
            (s - 131.6 - 8.0 / (370.8 * 16.0 / 30.0 * 1000.0)).abs() < 1e-6,
            "{s}"
        );
    }

    #[test]
    fn tree_latency_follows_nccls_formula_by_hand() {
        let t = h100_2x8(16);
        // LL: 6.8 + 2 x (7 x 0.6 + 1 x 5.0) = 25.2 us.
        let ll = estimate_us(&t, CollectiveAlgorithm::Tree, Protocol::Ll, 8).unwrap();
        assert!((ll - 25.2).abs() < 0.01, "{ll}");
        // Tree runs allreduce only.
        let ag = TunerInput {
            op: CollectiveOp::Allgather,
            ..t
        };
        assert_eq!(
            estimate_us(&ag, CollectiveAlgorithm::Tree, Protocol::Ll, 8),
            None
        );
    }

    #[test]
    fn the_choice_moves_from_ll_to_simple_as_sizes_grow() {
        let t = h100_2x8(16);
        let all = [CollectiveAlgorithm::Ring, CollectiveAlgorithm::Tree];
        let pick = |b| choose(&t, &all, &Protocol::ALL, b).unwrap();
        assert_eq!(pick(8), (CollectiveAlgorithm::Tree, Protocol::Ll));
        assert_eq!(pick(1 << 30).1, Protocol::Simple);
        // Forced protocol: the algorithm is still chosen.
        let ring_only = choose(&t, &[CollectiveAlgorithm::Ring], &[Protocol::Ll128], 8);
        assert_eq!(
            ring_only,
            Some((CollectiveAlgorithm::Ring, Protocol::Ll128))
        );
    }

    /// NVLSTree on 2 x 8 H100 (NCCL 2.26's model, worked by hand): the NVLS graph is 8
    /// channels of bwIntra 40 GB/s (370.8 / 9 = 41.2, the first Hopper speed below) and
    /// bwInter 48 (the NIC's 50, at most 2 x 40); bandwidth 8 x min(40, 48) x 5/6 = 266.7
    /// GB/s; latency 0 + 25 + 2 x 1 x 14 = 53 us: 56.93 us at 1 MiB. It beats tree LL128
    /// (59.1 us) there and every pair from 1 MiB to 256 MiB, as NCCL picks NVLSTree on
    /// such a cluster; it does not run on one server, nor with LL or LL128.
    #[test]
    fn nvls_tree_follows_nccls_model_by_hand() {
        assert_eq!(nvls_graph(8.0, 370.8, 50.0), (8.0, 40.0, 48.0));
        let t = h100_2x8(16);
        let a = CollectiveAlgorithm::NvlsTree;
        let x = estimate_us(&t, a, Protocol::Simple, 1 << 20).unwrap();
        assert!(
            (x - (53.0 + 1_048_576.0 / (1000.0 * 8.0 * 40.0 * 5.0 / 6.0))).abs() < 1e-9,
            "{x}"
        );
        assert_eq!(estimate_us(&t, a, Protocol::Ll128, 1 << 20), None);
        let one = TunerInput {
            ranks: 8,
            nodes: 1,
            ..t
        };
        assert_eq!(estimate_us(&one, a, Protocol::Simple, 1 << 20), None);
        let all = [CollectiveAlgorithm::Ring, CollectiveAlgorithm::Tree, a];
        for b in (20..=28).map(|k| 1u64 << k) {
            assert_eq!(
                choose(&t, &all, &Protocol::ALL, b),
                Some((a, Protocol::Simple)),
                "{b} B"
            );
        }
        assert_eq!(
            choose(&t, &all, &Protocol::ALL, 8),
            Some((CollectiveAlgorithm::Tree, Protocol::Ll))
        );
    }
}

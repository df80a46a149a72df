//! Collectives against the alpha-beta model and nccl-tests' arithmetic.

use crate::common::{scenario, scenario_with};
use doorbell::analytic::ideal_landed;
use doorbell::metrics::summarize;
use doorbell::sim::run;

/// One leaf of 8 hosts at 100 Gb/s, one GPU each (no host model), cut-through.
const LEAF: &str = "topology: { leaves: 1, spines: 0, hosts_per_leaf: 8, host_link: { rate: 100Gbps, latency: 200ns } }
switch: { latency: 300ns, forwarding: cut_through }
flow_control: { mode: ib_credit }";

/// Ring allreduce on an idle leaf, one channel and one loop: 2(n - 1) steps, each a
/// message of S / n whose time is alpha + (S / n) / B, with alpha and B the model's own
/// (alpha: a message's ideal time to land, `ideal_landed`, minus its payload time; B: the link's payload rate), plus
/// the reduction of each received piece in the first n - 1 steps, NCCL's launch latency
/// for ring Simple (`baseLat` 8.4 us) and, per network step, what NCCL's 14 us `hwLat`
/// has beyond the host path (7.3 us). So the time is 8.4 us + 2(n - 1)(alpha + 7.3 us) +
/// 2(n - 1)/n x S/B + (n - 1) x (S/n)/R, within 3% (the ACKs that share each host's
/// uplink with its data cost a few nanoseconds per step). The CPU's enqueue cost is set
/// to 0 (it is a floor between back-to-back operations, tested elsewhere).
#[test]
fn ring_allreduce_matches_alpha_beta() {
    let n = 8u64;
    for size in [4096u64, 1 << 20, 16 << 20, 64 << 20] {
        let sc = scenario(&format!(
            "{LEAF}
workload:
  - collective: {{ op: allreduce, algorithm: ring, protocol: simple, launch_overhead: 0us, size: {size}B, iters: 2, warmup_iters: 0, channels: 1, chunk: 1GiB }}"
        ));
        let out = run(&sc);
        let s = summarize(&sc, &out);
        let row = &s.collectives[0].rows[0];
        assert_eq!(row.wrong, 0);
        let piece = size / n;
        let fct = ideal_landed(&sc, 0, 1, piece).0 as f64;
        // Payload rate: 100 Gb/s x MTU / (MTU + overhead) (4096 B MTU, 26 B IB overhead).
        let b = 100e9 / 8.0 * 4096.0 / 4122.0 / 1e12; // bytes per ps
        let alpha = fct - piece as f64 / b;
        let reduce = piece as f64 * 8.0 / 8e12 * 1e12; // 8 Tb/s default, ps
        let steps = 2.0 * (n as f64 - 1.0);
        let model = 8.4e6
            + steps * (alpha + 7.3e6)
            + steps / n as f64 * size as f64 / b
            + (n as f64 - 1.0) * reduce;
        let measured = row.time_us * 1e6;
        let err = (measured - model).abs() / model;
        assert!(
            err < 0.03,
            "{size} B: measured {:.3} us, alpha-beta {:.3} us ({:.2}%)",
            measured / 1e6,
            model / 1e6,
            err * 100.0
        );
    }
}

/// At large sizes the bus bandwidth approaches the bottleneck's payload rate: 100 Gb/s x
/// 4096/4122 = 12.42 GB/s, within 3% (NCCL's defaults: 2 channels, 512 KiB chunks).
#[test]
fn large_allreduce_busbw_reaches_the_link_payload_rate() {
    let sc = scenario(&format!(
        "{LEAF}
workload:
  - collective: {{ op: allreduce, size: 256MiB, iters: 1, warmup_iters: 0 }}"
    ));
    let s = summarize(&sc, &run(&sc));
    let row = &s.collectives[0].rows[0];
    let bottleneck = 100e9 / 8.0 * 4096.0 / 4122.0 / 1e9;
    let err = (row.busbw_gbs - bottleneck).abs() / bottleneck;
    assert!(
        err < 0.03,
        "busbw {} GB/s vs {bottleneck:.3} GB/s ({:.2}%)",
        row.busbw_gbs,
        err * 100.0
    );
}

/// Every collective delivers the right data through the fabric, also when the fabric
/// loses packets (RC retransmits them) and with the host model on.
#[test]
fn every_collective_is_correct_through_a_lossy_fabric() {
    for op in [
        "allreduce",
        "reduce_scatter",
        "allgather",
        "broadcast",
        "alltoall",
    ] {
        let sc = scenario_with(
            &format!(
                "topology: {{ leaves: 2, spines: 2, hosts_per_leaf: 4, host_link: {{ rate: 100Gbps, latency: 200ns }} }}
faults: {{ drop_probability: 0.001 }}
transport: {{ rc: {{ timeout: 8 }} }}
host: {{ posting: cpu_proxy, memory: gpu, gpus_per_host: 2, nics_per_host: 1 }}
workload:
  - collective: {{ op: {op}, minbytes: 4KiB, maxbytes: 4MiB, stepfactor: 32, iters: 2, warmup_iters: 1, root: 3 }}"
            ),
            &[],
        );
        let out = run(&sc);
        assert!(
            out.rc.unwrap().retransmissions > 0,
            "{op}: the fabric lost packets"
        );
        let s = summarize(&sc, &out);
        let c = &s.collectives[0];
        assert!(c.complete, "{op} completed");
        assert_eq!(c.ranks, 16);
        assert_eq!(c.rows.len(), 3);
        for r in &c.rows {
            assert_eq!(r.wrong, 0, "{op} {} B", r.size);
            assert_eq!(r.iters, 2);
        }
    }
}

/// nccl-tests' arithmetic: algbw = size / time, busbw = algbw x factor, per operation.
#[test]
fn busbw_follows_nccl_tests_factors() {
    for (op, factor) in [
        ("allreduce", 2.0 * 7.0 / 8.0),
        ("reduce_scatter", 7.0 / 8.0),
        ("allgather", 7.0 / 8.0),
        ("alltoall", 7.0 / 8.0),
        ("broadcast", 1.0),
    ] {
        let sc = scenario(&format!(
            "{LEAF}
workload:
  - collective: {{ op: {op}, size: 1MB, iters: 1, warmup_iters: 0 }}"
        ));
        let s = summarize(&sc, &run(&sc));
        let r = &s.collectives[0].rows[0];
        let algbw = 1e6 / (r.time_us * 1e-6) / 1e9;
        assert!((r.algbw_gbs - algbw).abs() < 1e-3 * algbw, "{op}");
        assert!((r.busbw_gbs - algbw * factor).abs() < 1e-3 * algbw, "{op}");
    }
}

/// Payload bytes that crossed between leaves (over the spines).
fn cross_leaf_bytes(out: &doorbell::sim::RunOutput, hosts_per_leaf: u32) -> u64 {
    out.flows
        .iter()
        .filter(|f| f.def.src / hosts_per_leaf != f.def.dst / hosts_per_leaf)
        .map(|f| f.def.size)
        .sum()
}

/// Bytes over the spines, 8 ranks (2 GPUs on each of 4 hosts, 2 per leaf), one
/// iteration of a 4 MiB allreduce on one channel:
/// - flat ring, packed: 2 ring hops cross (leaf 0 -> 1 and back), each 2(n-1)/n x S;
/// - flat ring, striped (rank r on host r mod 4): 4 hops cross;
/// - hierarchical: only the 2 leaders' ring: 2(L - 1) x S.
///
/// (The guide's "falls by the number of ranks per leaf" is the striped case's order of
/// magnitude; against a packed ring the saving is L(n-1) / (n(L-1)) = 1.75x here.)
#[test]
fn hierarchical_cuts_cross_spine_bytes_as_the_algorithms_predict() {
    let size: u64 = 4 << 20;
    let n = 8.0;
    let per_hop = (2.0 * (n - 1.0) / n * size as f64) as u64;
    for (algorithm, placement, expected) in [
        ("ring", "packed", 2 * per_hop),
        ("ring", "striped", 4 * per_hop),
        // 2(L - 1) x S with L = 2 leaders.
        ("hierarchical", "packed", 2 * size),
    ] {
        let sc = scenario(&format!(
            "topology: {{ leaves: 2, spines: 2, hosts_per_leaf: 2, host_link: {{ rate: 100Gbps, latency: 200ns }} }}
host: {{ gpus_per_host: 2, posting: cpu_proxy, memory: gpu }}
workload:
  - collective: {{ op: allreduce, algorithm: {algorithm}, protocol: simple, placement: {placement}, size: {size}B, channels: 1, iters: 1, warmup_iters: 0 }}"
        ));
        let out = run(&sc);
        let s = summarize(&sc, &out);
        assert_eq!(s.collectives[0].rows[0].wrong, 0);
        assert_eq!(
            cross_leaf_bytes(&out, 2),
            expected,
            "{algorithm} {placement}"
        );
    }
}

/// A small allreduce over 16 hosts: the tree's depth grows with log2(hosts), the ring's
/// steps with 2(n - 1), so the tree is faster.
#[test]
fn tree_beats_ring_on_small_messages() {
    let time = |alg: &str| {
        let sc = scenario(&format!(
            "topology: {{ leaves: 2, spines: 2, hosts_per_leaf: 8, host_link: {{ rate: 100Gbps, latency: 200ns }} }}
workload:
  - collective: {{ op: allreduce, algorithm: {alg}, size: 64B, iters: 2, warmup_iters: 0, launch_overhead: 0us }}"
        ));
        summarize(&sc, &run(&sc)).collectives[0].rows[0].time_us
    };
    let (ring, tree) = (time("ring"), time("tree"));
    assert!(tree < ring / 2.0, "tree {tree} us vs ring {ring} us");
}

/// In-network aggregation: each rank's buffer crosses its host link up once and down
/// once, and each leaf's aggregate crosses the spine layer once each way: per iteration
/// n x S up from the ranks, L x S up to the spines, L x S down, n x S down to the ranks;
/// and the result is right.
#[test]
fn in_network_moves_each_ranks_data_over_each_link_once() {
    let size: u64 = 1 << 20;
    let sc = scenario(&format!(
        "topology: {{ leaves: 3, spines: 2, hosts_per_leaf: 2, host_link: {{ rate: 100Gbps, latency: 200ns }} }}
flow_control: {{ mode: ib_credit }}
workload:
  - collective: {{ op: allreduce, algorithm: in_network, size: {size}B, iters: 1, warmup_iters: 0 }}"
    ));
    let out = run(&sc);
    let s = summarize(&sc, &out);
    assert_eq!(s.collectives[0].rows[0].wrong, 0);
    let hosts = 6;
    let (n, leaves) = (6u64, 3u64);
    let sum = |pred: &dyn Fn(u32, u32) -> bool| -> u64 {
        out.flows
            .iter()
            .filter(|f| pred(f.def.src, f.def.dst))
            .map(|f| f.def.size)
            .sum()
    };
    let is_host = |e: u32| e < hosts;
    let is_leaf = |e: u32| e >= hosts && e < hosts + 3;
    let is_spine = |e: u32| e >= hosts + 3;
    assert_eq!(sum(&|a, b| is_host(a) && is_leaf(b)), n * size);
    assert_eq!(sum(&|a, b| is_leaf(a) && is_spine(b)), leaves * size);
    assert_eq!(sum(&|a, b| is_spine(a) && is_leaf(b)), leaves * size);
    assert_eq!(sum(&|a, b| is_leaf(a) && is_host(b)), n * size);
    assert_eq!(
        sum(&|a, b| is_host(a) && is_host(b)),
        0,
        "no host-to-host traffic"
    );
}

/// In-network aggregation rides InfiniBand-style lossless links: a lossy fabric is
/// refused before the run, naming the field.
#[test]
fn in_network_on_a_lossy_fabric_is_refused() {
    let err = doorbell::scenario::parse_str(
        "topology: { leaves: 1, spines: 0, hosts_per_leaf: 4, host_link: { rate: 100Gbps, latency: 200ns } }
workload:
  - collective: { op: allreduce, algorithm: in_network, size: 1MiB }",
        "x.yaml",
        "x",
        &doorbell::scenario::Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(err.path, "workload[0].collective.algorithm");
    assert!(err.message.contains("lossless"), "{}", err.message);
}

/// A small allreduce completes in one trip up and down the switches: far faster than a
/// ring's 2(n - 1) steps, even with NCCL's LL protocol the tuner picks for the ring at
/// 64 B (12.1 us against 31.9 us on 16 hosts without a host model: at least 2x).
#[test]
fn in_network_beats_ring_on_small_messages() {
    let time = |alg: &str| {
        let sc = scenario(&format!(
            "topology: {{ leaves: 2, spines: 2, hosts_per_leaf: 8, host_link: {{ rate: 100Gbps, latency: 200ns }} }}
flow_control: {{ mode: ib_credit }}
workload:
  - collective: {{ op: allreduce, algorithm: {alg}, size: 64B, iters: 2, warmup_iters: 0, launch_overhead: 0us }}"
        ));
        summarize(&sc, &run(&sc)).collectives[0].rows[0].time_us
    };
    let (ring, inn) = (time("ring"), time("in_network"));
    assert!(inn < ring / 2.0, "in_network {inn} us vs ring {ring} us");
}

/// Tree, hierarchical and in-network allreduce are right for uneven groups (3 hosts of 2
/// GPUs on 2 leaves, one with a single host), with the host model and under PFC.
#[test]
fn graph_algorithms_are_correct_with_uneven_groups() {
    for alg in ["tree", "hierarchical", "in_network"] {
        let sc = scenario(&format!(
            "topology: {{ leaves: 2, spines: 2, hosts_per_leaf: 2, host_link: {{ rate: 100Gbps, latency: 200ns }} }}
flow_control: {{ mode: pfc }}
host: {{ gpus_per_host: 2, posting: cpu_proxy, memory: gpu }}
workload:
  - collective: {{ op: allreduce, algorithm: {alg}, ranks: 6, placement: [0, 1, 2, 3, 4, 5], minbytes: 4KiB, maxbytes: 4MiB, stepfactor: 32, iters: 2, warmup_iters: 0, channels: 3 }}"
        ));
        let s = summarize(&sc, &run(&sc));
        let c = &s.collectives[0];
        assert!(c.complete, "{alg}");
        for r in &c.rows {
            assert_eq!(r.wrong, 0, "{alg} {} B", r.size);
        }
    }
}

/// Collectives that the model cannot carry faithfully are refused before the run, with
/// the field named: READ transport, in-network with faults, a compare set whose hosts no
/// longer hold the ranks, and chunks too small to track.
#[test]
fn collectives_refuse_what_they_cannot_carry() {
    let base = "topology: { leaves: 2, spines: 2, hosts_per_leaf: 2, host_link: { rate: 100Gbps, latency: 200ns } }
flow_control: { mode: ib_credit }
host: { gpus_per_host: 4 }
workload:
  - collective: { op: allreduce, size: 1MiB, ranks: 16 }";
    let refuse = |yaml: &str, path: &str| {
        let e = doorbell::scenario::parse_str(
            yaml,
            "x.yaml",
            "x",
            &doorbell::scenario::Overrides::default(),
        )
        .unwrap_err();
        assert_eq!(e.path, path, "{}", e.message);
    };
    refuse(
        &format!("{base}\ntransport: {{ rc: {{ operation: read }} }}"),
        "workload[0].collective.op",
    );
    refuse(
        &format!("{base}\nfaults: {{ ber: 1e-9 }}")
            .replace("op: allreduce,", "op: allreduce, algorithm: in_network,"),
        "workload[0].collective.algorithm",
    );
    refuse(
        &format!("{base}\ncompare:\n  - {{ name: small, host: {{ gpus_per_host: 2 }} }}"),
        "compare[0].collective.ranks",
    );
    refuse(
        &base.replace("size: 1MiB", "size: 1MiB, chunk: 64B"),
        "workload[0].collective.chunk",
    );
}

/// NCCL's clear-to-send (`net_ib`: the receiver's `ncclIbPostFifo`, an inline RDMA
/// WRITE into the sender's FIFO): a sender whose window of buffer slots is full goes on
/// only when its receiver's word arrives, one fabric latency after the slot came free.
/// A broadcast of 128 chunks of 4 KiB from rank 0 to rank 1 (two hosts on two leaves,
/// one spine, no host model) keeps 8 transfers out (`NCCL_STEPS` 8, one slot each), so
/// transfer k + 8 leaves a cycle after transfer k: its time to land, the step's
/// synchronisation and the clear-to-send's trip back. The last of 16 batches waits for
/// no word, so the iteration takes 15 cycles and one landing and step after the launch
/// latency, within 2% (the cycle's first send shares the uplink with ACKs). Links 1 us
/// longer then cost 15 x 8 + 4 = 124 link latencies, where a sender seeing the slot at
/// once would lose 16 x 4 = 64.
#[test]
fn a_full_window_waits_a_clear_to_send_round_trip() {
    use doorbell::analytic::ideal_inline_write;
    use doorbell::collective::protocol::{launch_latency, net_step_extra};
    use doorbell::collective::{CollectiveAlgorithm, Protocol};
    let time = |latency_us: u32| {
        let sc = scenario(&format!(
            "topology: {{ leaves: 2, spines: 1, hosts_per_leaf: 1, host_link: {{ rate: 100Gbps, latency: {latency_us}us }} }}
switch: {{ latency: 300ns, forwarding: cut_through }}
flow_control: {{ mode: ib_credit }}
workload:
  - collective: {{ op: broadcast, algorithm: ring, protocol: simple, root: 0, launch_overhead: 0us, size: 512KiB, chunk: 4KiB, channels: 1, iters: 1, warmup_iters: 0 }}"
        ));
        let s = summarize(&sc, &run(&sc));
        let row = &s.collectives[0].rows[0];
        assert_eq!(row.wrong, 0);
        let (ring, simple) = (CollectiveAlgorithm::Ring, Protocol::Simple);
        let step = net_step_extra(ring, simple, true).0 as f64;
        let cycle = ideal_landed(&sc, 0, 1, 4096).0 as f64
            + step
            + ideal_inline_write(&sc, 1, 0, 64).0 as f64;
        let model = launch_latency(ring, simple).0 as f64
            + 15.0 * cycle
            + ideal_landed(&sc, 0, 1, 4096).0 as f64
            + step;
        let measured = row.time_us * 1e6;
        let err = (measured - model).abs() / model;
        assert!(
            err < 0.02,
            "{latency_us} us links: measured {:.3} us, model {:.3} us ({:.2}%)",
            measured / 1e6,
            model / 1e6,
            err * 100.0
        );
        measured
    };
    let (short, long) = (time(1), time(2));
    let links = (long - short) / 1e6;
    assert!(
        (links - 124.0).abs() < 124.0 * 0.02,
        "1 us more per link cost {links:.1} link latencies, not 124"
    );
}

//! NCCL as it runs (issue 16): protocols, the tuner's choice, launch and per-step costs,
//! channels over every NIC, against the nccl-tests figures of H100 clusters.
//!
//! The measured figures are those issue 16 reports for NCCL 2.26 with its default
//! algorithm on servers of 8 H100 with 8 x 400G NDR InfiniBand NICs each, rail-wired,
//! running all_reduce_perf; `scenarios/nccl-tests-h100.yaml` models that cluster (2
//! servers; `topology.hosts_per_leaf` sets the server count).

use crate::common::scenario_with;
use doorbell::metrics::summarize;
use doorbell::sim::run;

fn h100(set: &[&str]) -> doorbell::scenario::Scenario {
    let path = format!(
        "{}/scenarios/nccl-tests-h100.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let yaml = std::fs::read_to_string(path).expect("the scenario ships");
    scenario_with(&yaml, set)
}

/// The scenario with one size, `iters` timed iterations and no warm-up, and `extra`.
fn h100_at(size: &str, iters: u32, extra: &[&str]) -> doorbell::scenario::Scenario {
    let owned = [
        format!("workload.0.collective.minbytes={size}"),
        format!("workload.0.collective.maxbytes={size}"),
        format!("workload.0.collective.iters={iters}"),
        "workload.0.collective.warmup_iters=0".to_string(),
    ];
    let mut set: Vec<&str> = owned.iter().map(String::as_str).collect();
    set.extend_from_slice(extra);
    h100(&set)
}

/// (size, time us, busbw GB/s, algorithm, protocol) per size.
fn table(set: &[&str]) -> Vec<(u64, f64, f64, String, String)> {
    table_of(h100(set))
}

fn table_of(sc: doorbell::scenario::Scenario) -> Vec<(u64, f64, f64, String, String)> {
    let out = run(&sc);
    let s = summarize(&sc, &out);
    let c = &s.collectives[0];
    assert!(c.complete);
    c.rows
        .iter()
        .map(|r| {
            assert_eq!(r.wrong, 0);
            (
                r.size,
                r.time_us,
                r.busbw_gbs,
                r.algorithm.to_string(),
                r.protocol.to_string(),
            )
        })
        .collect()
}

fn row(t: &[(u64, f64, f64, String, String)], size: u64) -> (f64, f64) {
    let r = t.iter().find(|r| r.0 == size).expect("size run");
    (r.1, r.2)
}

const MIB: u64 = 1 << 20;

/// Asserts `got` is within `tolerance` (a fraction, bound included) of the measured
/// figure, naming it.
fn within(what: &str, got: f64, measured: f64, tolerance: f64) {
    let err = (got - measured) / measured;
    assert!(
        err.abs() <= tolerance,
        "{what}: {got:.1} against {measured} measured ({:+.1}%, {:.0}% allowed)",
        err * 100.0,
        tolerance * 100.0
    );
}

/// 2 x 8 H100 with NCCL's default choice, as the cluster ran it (NVLink SHARP there,
/// `nvls: true` in the scenario; 5 timed iterations after 1 warm-up, nccl-tests' mean):
/// measured 71.9 / 94.4 / 267.9 / 748.3 / 1,282.8 us at 1 / 4 / 32 / 128 / 256 MiB
/// (NVIDIA/nccl-tests#309, NCCL 2.26; NVIDIA's engineer there says multi-node runs use
/// NVLSTree). doorbell picks NVLSTree with Simple at every one of these sizes, as NCCL's
/// tuner does, and takes 70.0 / 99.2 / 248.8 / 723.8 / 1,283.1 us (-2.6%, +5.1%,
/// -7.1%, -3.3%, +0.0%). Only NVLSTree's copy rate is calibrated, on another cluster's
/// sizes of 128 MiB and up (`defaults::NVLS_COPY_RATE`); the rise with size below, set
/// by NCCL's chunk sizes, its buffer slots and the copies' whole steps, is not fitted.
/// Asserted: within 10% at each size (the issue asks 15%; doorbell's worst is 7.1%, and
/// the two clusters measured 1.3% apart at 128 MiB) and the choice at each.
#[test]
fn two_servers_follow_the_measured_sizes() {
    let t = table(&[
        "workload.0.collective.minbytes=1MiB",
        "workload.0.collective.maxbytes=256MiB",
    ]);
    for (size, measured) in [
        (MIB, 71.9),
        (4 * MIB, 94.4),
        (32 * MIB, 267.9),
        (128 * MIB, 748.3),
        (256 * MIB, 1282.8),
    ] {
        let (time, _) = row(&t, size);
        within(&format!("{size} B, us"), time, measured, 0.10);
    }
    for r in &t {
        assert_eq!(
            (r.3.as_str(), r.4.as_str()),
            ("nvls_tree", "simple"),
            "{} B",
            r.0
        );
    }
}

/// The same cluster without NVLink SHARP (`nvls: false`, as NCCL_NVLS_ENABLE=0): NCCL's
/// choice is tree LL128 at 1 MiB and ring Simple at 256 MiB. No measured table of that
/// cluster without NVLS exists, so this compares tree and ring with what NVLSTree did:
/// not like for like, kept as a regression check of those two algorithms (doorbell 58.5
/// / 70.5 / 216.6 / 706.7 / 1,303.5 us: 19-25% below NVLSTree's times from 1 to 32 MiB,
/// within 6% at 128 and 256 MiB). Asserted: within 15% at 128 MiB and up and no more
/// than 35% below, so a change that moves tree or ring shows.
#[test]
fn without_nvls_tree_and_ring_run_as_before() {
    let t = table(&[
        "workload.0.collective.nvls=false",
        "workload.0.collective.minbytes=1MiB",
        "workload.0.collective.maxbytes=256MiB",
    ]);
    for (size, measured, tolerance) in [
        (MIB, 71.9, 0.35),
        (4 * MIB, 94.4, 0.35),
        (32 * MIB, 267.9, 0.35),
        (128 * MIB, 748.3, 0.15),
        (256 * MIB, 1282.8, 0.15),
    ] {
        let (time, _) = row(&t, size);
        within(&format!("{size} B, us"), time, measured, tolerance);
    }
    let at = |size| t.iter().find(|r| r.0 == size).unwrap();
    assert_eq!((at(MIB).3.as_str(), at(MIB).4.as_str()), ("tree", "ll128"));
    assert_eq!(
        (at(256 * MIB).3.as_str(), at(256 * MIB).4.as_str()),
        ("ring", "simple")
    );
}

/// 8-byte allreduce: measured about 35 us on 1 x 8 and on 4 x 8 H100. One server is the
/// point `launch_overhead` (the CPU's enqueue cost, 35 us) was calibrated on, so it
/// only checks the calibration holds (within 5%). On 4 x 8 the GPU's own time, with the
/// CPU's cost set to 0, is a check: NCCL's tree LL there (6.8 + 2 x (7 x 0.6 + 2 x 5.0)
/// us of latency, with the host model's network path) must be within 1.5x of 35 us.
#[test]
fn eight_bytes_take_what_nccl_tests_measure() {
    let time = |servers: &str, launch: &str| {
        let hosts = format!("topology.hosts_per_leaf={servers}");
        let launch = format!("workload.0.collective.launch_overhead={launch}");
        let t = table(&[
            &hosts,
            &launch,
            "workload.0.collective.minbytes=8B",
            "workload.0.collective.maxbytes=8B",
            "workload.0.collective.iters=20",
            "workload.0.collective.warmup_iters=5",
        ]);
        row(&t, 8).0
    };
    let one = time("1", "35us");
    assert!((one - 35.0).abs() <= 0.05 * 35.0, "1 x 8: {one} us");
    let four = time("4", "0us");
    assert!(
        four / 35.0 <= 1.5 && 35.0 / four <= 1.5,
        "4 x 8, GPU time only: {four} us against about 35 measured"
    );
}

/// Back-to-back operations go no faster than the CPU enqueues them: with
/// `launch_overhead: 100us` and 8 bytes, every timed iteration after the first takes
/// exactly 100 us (the GPU's work is shorter), so the median is 100 us.
#[test]
fn the_cpu_enqueue_cost_is_a_floor_between_operations() {
    let sc = h100(&[
        "workload.0.collective.minbytes=8B",
        "workload.0.collective.maxbytes=8B",
        "workload.0.collective.iters=9",
        "workload.0.collective.launch_overhead=100us",
    ]);
    let s = summarize(&sc, &run(&sc));
    let r = &s.collectives[0].rows[0];
    assert_eq!(r.p50_us, 100.0, "{r:?}");
    assert!(r.time_us > 100.0 && r.time_us < 110.0, "{r:?}");
}

/// One server on NVLink alone, NCCL's default choice: measured busbw 274.5 / 334.3 /
/// 347.6 / 360.1 GB/s at 32 MiB / 128 MiB / 256 MiB / 1 GiB; doorbell 290.2 / 351.0 /
/// 358.8 / 366.9 (+6%, +5%, +3%, +2%; 2 timed iterations), each within 15%. NVLink runs at NCCL's 18 x 20.6 GB/s,
/// not the 450 GB/s line rate.
#[test]
fn one_server_on_nvlink_matches_measured_busbw() {
    let t = table(&[
        "topology.hosts_per_leaf=1",
        "workload.0.collective.minbytes=32MiB",
        "workload.0.collective.maxbytes=1GiB",
        "workload.0.collective.iters=2",
    ]);
    for (size, measured) in [
        (32 * MIB, 274.5),
        (128 * MIB, 334.3),
        (256 * MIB, 347.6),
        (1024 * MIB, 360.1),
    ] {
        let (_, busbw) = row(&t, size);
        within(&format!("{size} B, GB/s"), busbw, measured, 0.15);
    }
}

/// The plateau falls with scale as measured: forced ring at 1 GiB on 2 servers within 5%
/// of 392.7 GB/s; the default at 256 MiB within 5% of 365.8 GB/s on 4 servers and of
/// 320.7 GB/s on 8 (NCCL's default tuning).
#[test]
fn the_busbw_plateau_falls_with_scale_as_measured() {
    let one = |size: &str, extra: &[&str], bytes: u64, measured: f64| {
        let t = table_of(h100_at(size, 2, extra));
        let (_, busbw) = row(&t, bytes);
        within(&format!("{size} {extra:?}, GB/s"), busbw, measured, 0.05);
    };
    one(
        "1GiB",
        &["workload.0.collective.algorithm=ring"],
        1024 * MIB,
        392.7,
    );
    for (servers, measured) in [("4", 365.8), ("8", 320.7)] {
        let hosts = format!("topology.hosts_per_leaf={servers}");
        one("256MiB", &[&hosts], 256 * MIB, measured);
    }
}

/// Tree and in-network allreduce bind each channel to another GPU and NIC, as NCCL
/// does: on 2 x 8 at 1 GiB every NIC carries data and both reach at least 90% of the
/// forced ring's measured 392.7 GB/s (doorbell: 377.2 and 377.3 GB/s; before, one NIC
/// per server carried everything and tree reached 92 GB/s).
#[test]
fn tree_and_in_network_use_every_nic() {
    for algorithm in ["tree", "in_network"] {
        let a = format!("workload.0.collective.algorithm={algorithm}");
        let sc = h100_at("1GiB", 1, &[&a]);
        let out = run(&sc);
        let s = summarize(&sc, &out);
        let busbw = s.collectives[0].rows[0].busbw_gbs;
        assert!(busbw >= 0.9 * 392.7, "{algorithm}: {busbw} GB/s");
        // Ports 0..16 are the 16 NICs' uplinks; each carries at least half its share.
        let total: u64 = out.ports[..16].iter().map(|p| p.tx_bytes).sum();
        for (i, p) in out.ports[..16].iter().enumerate() {
            assert!(
                p.tx_bytes * 32 >= total,
                "{algorithm}: NIC {i} sent {} of {total} B",
                p.tx_bytes
            );
        }
    }
}

/// LL puts twice the data on the wire and LL128 128/120 of it (in whole lines): the bytes
/// of an 8 MiB ring allreduce's network transfers, by protocol.
#[test]
fn protocols_frame_the_data_as_nccl_does() {
    let bytes = |proto: &str| -> u64 {
        let p = format!("workload.0.collective.protocol={proto}");
        let sc = h100_at("8MiB", 1, &[&p, "workload.0.collective.algorithm=ring"]);
        run(&sc).flows.iter().map(|f| f.def.size).sum()
    };
    let simple = bytes("simple");
    assert_eq!(bytes("ll"), 2 * simple);
    // Every piece is 8 MiB / 16 channels / 16 ranks = 32 KiB, in ceil(32768 / 120) = 274
    // lines of 128 B: 35,072 B.
    assert_eq!(bytes("ll128"), simple / 32_768 * 35_072);
}

/// Hierarchical allreduce with a leader per rail: each server reduce-scatters over
/// NVLink, each rail carries its 1/8 shard across the fabric, and the servers
/// all-gather. On 2 x 8 at 256 MiB every NIC sends its rail's shard once, S/8 = 32 MiB
/// plus headers and ACKs (1.4% more; before, each rail carried the whole buffer, 8x),
/// and the result is right.
#[test]
fn hierarchical_gives_each_rail_its_shard() {
    let sc = h100_at(
        "256MiB",
        1,
        &["workload.0.collective.algorithm=hierarchical"],
    );
    let out = run(&sc);
    let s = summarize(&sc, &out);
    assert_eq!(s.collectives[0].rows[0].wrong, 0);
    let shard = (256 * MIB / 8) as f64;
    for (i, p) in out.ports[..16].iter().enumerate() {
        let r = p.tx_bytes as f64 / shard;
        assert!((1.0..1.03).contains(&r), "NIC {i}: {r} shards");
    }
}

/// One channel (one thread block) copies at most `channel_copy_rate`: on one server with
/// 16 channels at 10 GB/s, a 1 GiB ring allreduce is bound by 16 x 10 = 160 GB/s, not by
/// NVLink's 370.8 (doorbell: 149.6 GB/s busbw; the ring's 14 steps per loop pay NCCL's
/// 3.4 us NVLink latency 16 times, 6% of the time); with a fast copy the NVLink rate
/// binds (367.4 GB/s).
#[test]
fn the_channel_copy_rate_bounds_a_servers_busbw() {
    let busbw = |rate: &str| {
        let r = format!("workload.0.collective.channel_copy_rate={rate}");
        let t = table_of(h100_at(
            "1GiB",
            1,
            &[
                &r,
                "topology.hosts_per_leaf=1",
                "workload.0.collective.algorithm=ring",
                "workload.0.collective.protocol=simple",
            ],
        ));
        row(&t, 1024 * MIB).1
    };
    let slow = busbw("10GB/s");
    assert!((0.9 * 160.0..=160.0).contains(&slow), "{slow}");
    let fast = busbw("1000GB/s");
    assert!((0.95 * 370.8..=370.8).contains(&fast), "{fast}");
}

/// A second cluster with NVLSTree forced: 2 x 8 H100 SXM with 8 InfiniBand NICs
/// (NVIDIA/nccl-tests#294, Crusoe, `NCCL_ALGO=NVLSTree`, NCCL 2.18.3, `all_reduce_perf
/// -b 128M -e 2048M -f 2 -n 10`): out-of-place 738.7 / 1,278.7 / 2,467.0 / 4,568.9 /
/// 9,063.6 us at 128 MiB to 2 GiB. doorbell (4 timed iterations after 1 warm-up): 725.6
/// / 1,284.8 / 2,403.3 / 4,640.3 / 9,114.2 us (-1.8%, +0.5%, -2.6%, +1.6%, +0.6%).
/// This is the table `defaults::NVLS_COPY_RATE` was calibrated on (about 240 GB/s of
/// algorithm bandwidth from size to size), so the large sizes check the calibration
/// holds and 128 MiB, where the pipeline's fill and latency are 23% of the time (725.6
/// us against 559 us of bytes at 240 GB/s), checks the fill. NCCL 2.26's own model of
/// NVLSTree (53 us + bytes / 266.7 GB/s: 1,059.6 us at 256 MiB) is 17% below the
/// cluster's time there, and doorbell is as slow as the cluster, not as the model.
/// Asserted: within 5% at each size, and at least 15% slower than the model at 256 MiB.
#[test]
fn nvls_tree_follows_a_second_cluster_with_it_forced() {
    let sc = h100(&[
        "workload.0.collective.algorithm=nvls_tree",
        "workload.0.collective.minbytes=128MiB",
        "workload.0.collective.maxbytes=2GiB",
        "workload.0.collective.iters=4",
        "workload.0.collective.warmup_iters=1",
    ]);
    let t = table_of(sc);
    for (size, measured) in [
        (128 * MIB, 738.7),
        (256 * MIB, 1278.7),
        (512 * MIB, 2467.0),
        (1024 * MIB, 4568.9),
        (2048 * MIB, 9063.6),
    ] {
        let (time, _) = row(&t, size);
        within(&format!("{size} B, us"), time, measured, 0.05);
    }
    let model = doorbell::collective::tuner::TunerInput {
        op: doorbell::collective::CollectiveOp::Allreduce,
        ranks: 16,
        nodes: 2,
        channels: 16,
        intra_gbps: 370.8,
        net_gbps: 400.0,
    };
    let m = doorbell::collective::tuner::estimate_us(
        &model,
        doorbell::collective::CollectiveAlgorithm::NvlsTree,
        doorbell::collective::Protocol::Simple,
        256 * MIB,
    )
    .expect("NVLSTree runs here");
    let (time, _) = row(&t, 256 * MIB);
    assert!(time >= 1.15 * m, "{time} us against NCCL's model {m} us");
}

/// With copies far faster than the links (`nvls_copy_rate` 1 TB/s) NVLSTree's pipeline
/// is bound by its links and latencies and each channel's NCCL_STEPS slots bind, so a
/// multicast's copies are made ready by different receivers' gathers; they still go as
/// one store (before, a copy made ready alone was booked as a scatter, and the run
/// stopped on an event scheduled in the past). 64 MiB on 1 channel: every GPU's NVLink
/// carries the 64 MiB once (67.1 MB at 370.8 GB/s: 181 us), so no run may be faster; and
/// the pipeline's fill and NCCL's 53 us of latency keep it within 1.5 x (181 + 53) us
/// (doorbell: 238.2 us).
#[test]
fn nvls_tree_with_fast_copies_runs_within_its_slots() {
    let sc = h100_at(
        "64MiB",
        2,
        &[
            "workload.0.collective.algorithm=nvls_tree",
            "workload.0.collective.nvls_copy_rate=8000Gbps",
            "workload.0.collective.channels=1",
        ],
    );
    let (time, _) = row(&table_of(sc), 64 * MIB);
    let link_us = (64 * MIB) as f64 / 370.8e3;
    assert!(
        time >= link_us && time <= 1.5 * (link_us + 53.0),
        "{time} us against {link_us:.0} us on NVLink"
    );
}

/// A second measured cluster: 2 servers of 8 H100 on 400G InfiniBand (8 NICs each, as
/// NVIDIA's engineer reads its 392 GB/s plateau), ring forced, in NVIDIA/nccl-tests#309
/// (comment by gj-aion, 2025-06-18): `NCCL_ALGO=Ring NCCL_MIN_CTAS=24
/// NCCL_IB_QPS_PER_CONNECTION=2 all_reduce_perf -b 1M -e 8G -f 2`, 20 iterations after
/// 5 warm-ups. Measured out-of-place: 1,355.9 / 2,649.9 / 5,236.2 us at 256 MiB / 512
/// MiB / 1 GiB (busbw 371.2 / 379.9 / 384.5 GB/s). Modelled on this scenario's cluster
/// with 24 channels and 2 queue pairs per connection, NCCL's two Simple slices per step:
/// 1,296.7 / 2,572.1 / 5,123.2 us (steady-state iterations), -4.4%, -2.9%, -2.2%.
/// Smaller sizes are not asserted: the thread does not say which protocol NCCL ran, and
/// the measured times (156.9 us at 1 MiB, flat to 2 MiB, 274.2 at 32 MiB) lie between
/// doorbell's ring Simple (207 / 208 / 272 us, +32% / +33% / -0.8%) and its ring LL128
/// (89 / 91 / 191 us), which NCCL's tuner would pick where LL128 is enabled. Asserted:
/// within 5% from 256 MiB to 1 GiB.
#[test]
fn a_second_cluster_with_the_ring_forced_follows_the_large_sizes() {
    for (size, bytes, measured) in [
        ("256MiB", 256 * MIB, 1355.9),
        ("512MiB", 512 * MIB, 2649.9),
        ("1GiB", 1024 * MIB, 5236.2),
    ] {
        let sc = h100_at(
            size,
            2,
            &[
                "workload.0.collective.algorithm=ring",
                "workload.0.collective.channels=24",
                "workload.0.collective.qps_per_connection=2",
            ],
        );
        let out = run(&sc);
        let s = summarize(&sc, &out);
        let r = &s.collectives[0].rows[0];
        assert_eq!((r.size, r.wrong), (bytes, 0));
        assert_eq!(r.protocol, "simple");
        within(&format!("{size}, us"), r.p50_us, measured, 0.05);
    }
}

/// NVLSTree runs where NCCL can run it, and says so otherwise: one server, or servers
/// whose GPUs share NICs (no head per rail), or a protocol other than Simple are refused
/// before the run, naming the field.
#[test]
fn nvls_tree_is_refused_where_nccl_cannot_run_it() {
    let refuse = |set: &[&str], field: &str, says: &str| {
        let path = format!(
            "{}/scenarios/nccl-tests-h100.yaml",
            env!("CARGO_MANIFEST_DIR")
        );
        let yaml = std::fs::read_to_string(path).expect("the scenario ships");
        let mut o = doorbell::scenario::Overrides::default();
        for s in set {
            o.set.push(s.to_string());
        }
        let err = doorbell::scenario::parse_str(&yaml, "x.yaml", "x", &o).unwrap_err();
        assert_eq!(
            err.path,
            format!("workload[0].collective.{field}"),
            "{set:?}"
        );
        assert!(err.message.contains(says), "{set:?}: {}", err.message);
    };
    let nvls = "workload.0.collective.algorithm=nvls_tree";
    refuse(
        &[nvls, "topology.hosts_per_leaf=1"],
        "algorithm",
        "two or more servers",
    );
    refuse(&[nvls, "host.nics_per_host=4"], "algorithm", "its own NIC");
    refuse(
        &[nvls, "workload.0.collective.protocol=ll128"],
        "protocol",
        "Simple",
    );
    refuse(
        &[
            "workload.0.collective.algorithm=nvls_tree",
            "workload.0.collective.op=allgather",
        ],
        "algorithm",
        "allreduce only",
    );
}

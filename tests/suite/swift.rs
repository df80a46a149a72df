//! Swift in the fabric: RTTs from echoed NIC timestamps, and the queueing delay held at
//! its target (Kumar et al., SIGCOMM 2020).

use crate::common::{finishes_us, flows_to_host0, reference_fabric};
use doorbell::scenario::{parse_str, Overrides};
use doorbell::sim::run;

/// N:1 incasts of 20 MB across the spine (4 leaves x 32 hosts, 32 spines, 100 Gb/s,
/// 1 us cables, 1000 B MTU, RoCEv2, PFC). Swift's target is the base target (the longest
/// base RTT + 5 us) plus 1 us per switch (three on this path) plus a flow-scaling term of
/// 0-5 us, so the bottleneck's queueing delay should sit between 8 and 13 us above the
/// path's base RTT. Measured (mean queue / line rate): 8.3 us at N = 2, 9.6 at 6, 12.6 at
/// 16 (the term grows as each flow's window shrinks), with the bottleneck 99.6-99.9%
/// busy and no pause. Asserted: 8-13 us, at least 99% busy, no pause frame.
#[test]
fn the_bottleneck_queue_sits_at_swifts_target() {
    for n in [2u32, 6, 16] {
        let sc = reference_fabric(
            4,
            32,
            32,
            "{ algorithm: swift }",
            &flows_to_host0(32, n, "20MB"),
        );
        let out = run(&sc);
        let port = &out.ports[sc.topology.leaf_down(0) as usize];
        let last = finishes_us(&out)[n as usize - 1];
        let busy = port.tx_bytes as f64 * 8.0 / (last * 1e-6) / 100e9;
        let queueing_us = port.mean_queue_bytes() * 8.0 / 100e9 * 1e6;
        assert!(
            (8.0..=13.0).contains(&queueing_us),
            "N {n}: queueing {queueing_us:.1} us"
        );
        assert!(busy >= 0.99, "N {n}: busy {:.1}%", busy * 100.0);
        assert_eq!(
            out.ingress.iter().map(|i| i.pause_frames()).sum::<u64>(),
            0,
            "N {n}: no pause"
        );
        assert!(out.cc.rate_cuts > 0, "Swift's window shrank");
    }
}

#[test]
fn swift_takes_only_its_own_fields() {
    let base = "
topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 100Gbps } }
workload:
  - flows: [ { src: 0, dst: 1, size: 100KB } ]
";
    for (field, want) in [
        (
            "preset: nvidia",
            "cc.preset: a DCQCN parameter; Swift takes",
        ),
        (
            "max_stage: 3",
            "cc.max_stage: an HPCC parameter; set `algorithm: hpcc`",
        ),
        ("beta: 1.5", "cc.beta: expected a fraction in (0, 1]"),
    ] {
        let e = parse_str(
            &format!("{base}cc: {{ algorithm: swift, {field} }}\n"),
            "s.yaml",
            "s",
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(want), "{field}: {e}");
    }
    let e = parse_str(
        &format!("{base}cc: {{ algorithm: dcqcn, fs_range: 2us }}\n"),
        "s.yaml",
        "s",
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cc.fs_range: a Swift parameter; set `algorithm: swift`"),
        "{e}"
    );
}

/// Swift's loss reactions (Algorithm 1) under RC: one 4 MB WRITE alone on a leaf, so the
/// RTT never reaches the target and only losses can shrink the window. Without loss the
/// window never shrinks; with 1% of packets dropped at random it shrinks, once per NAK or
/// timeout at most (at most once per RTT), and the flow still completes.
#[test]
fn losses_shrink_swifts_window() {
    let run_with = |drop: &str| {
        let sc = crate::common::scenario(&format!(
            "topology: {{ leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: {{ rate: 100Gbps, latency: 1us }} }}
cc: {{ algorithm: swift }}
faults: {{ drop_probability: {drop} }}
workload:
  - flows: [ {{ src: 0, dst: 1, size: 4MB }} ]
"
        ));
        let out = doorbell::sim::run(&sc);
        assert_eq!(out.flows[0].outcome, doorbell::sim::Outcome::Completed);
        let s = doorbell::metrics::summarize(&sc, &out);
        let rc = s.rc.unwrap();
        (out.cc.rate_cuts, rc.seq_naks + rc.timeouts)
    };
    assert_eq!(run_with("0"), (0, 0), "no loss, no decrease");
    let (cuts, losses) = run_with("0.01");
    assert!(losses > 0, "1% of packets lost");
    assert!(
        cuts > 0 && cuts <= losses,
        "{cuts} decreases for {losses} NAKs and timeouts"
    );
}

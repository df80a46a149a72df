//! DCQCN in the fabric: convergence, fairness, where it holds the queue, CNP pacing.

use doorbell::scenario::{parse_str, Overrides, Scenario};
use doorbell::sim::{run, RunOutput};

/// Four long WRITEs from hosts 1-4 into host 0 under one leaf (100 Gb/s, 1 us cables):
/// a 4:1 bottleneck at the leaf's port to host 0.
fn four_to_one(preset: &str, duration: &str) -> Scenario {
    parse_str(
        &format!(
            "
topology:
  leaves: 1
  spines: 0
  hosts_per_leaf: 5
  host_link: {{ rate: 100Gbps, latency: 1us }}
switch: {{ buffer: 64MiB, alpha: 1.0 }}
cc: {{ algorithm: dcqcn, preset: {preset} }}
duration: {duration}
workload:
  - flows:
      - {{ src: 1, dst: 0, size: 10GB }}
      - {{ src: 2, dst: 0, size: 10GB }}
      - {{ src: 3, dst: 0, size: 10GB }}
      - {{ src: 4, dst: 0, size: 10GB }}
"
        ),
        "d.yaml",
        "d",
        &Overrides::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The bottleneck port: the leaf's port to host 0.
fn bottleneck(sc: &Scenario) -> usize {
    sc.topology.leaf_down(0) as usize
}

/// Per-flow bytes delivered between the ends of two runs of the same scenario; the
/// shorter run is an exact prefix of the longer (same seed, same events up to its end).
fn steady(a: &RunOutput, b: &RunOutput) -> Vec<f64> {
    a.flows
        .iter()
        .zip(&b.flows)
        .map(|(x, y)| (y.delivered - x.delivered) as f64)
        .collect()
}

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    s * s / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>())
}

#[test]
fn long_flows_converge_to_a_fair_share_of_the_bottleneck() {
    // The paper's parameters. Over the second 50 ms of a 100 ms run (the first 50 ms hold
    // the start-up: every flow starts at line rate, is cut hard, and climbs back by
    // additive increase at 40 Mb/s per 55 us), the four flows share the port.
    let (a, b) = (four_to_one("paper", "50ms"), four_to_one("paper", "100ms"));
    let (ra, rb) = (run(&a), run(&b));
    let per_flow = steady(&ra, &rb);
    let seconds = 0.05;
    let util: f64 = per_flow.iter().sum::<f64>() * 8.0 / seconds / (100e9 * 4096.0 / 4122.0);
    // Jain's index (design reference): 1 is perfectly fair; 0.95 is the bar.
    let j = jain(&per_flow);
    assert!(j >= 0.95, "Jain {j:.4}, per flow {per_flow:?}");
    assert!(util >= 0.90, "utilisation {util:.4}");
    // The queue is held near the marking thresholds (Kmin 5 KB, Kmax 200 KB), not at the
    // buffer limit: the mean depth seen by packets arriving in the second half.
    let (pa, pb) = (&ra.ports[bottleneck(&a)], &rb.ports[bottleneck(&b)]);
    let mean = (pb.queue_sample_sum - pa.queue_sample_sum) as f64
        / (pb.queue_samples - pa.queue_samples) as f64;
    assert!(mean < 200_000.0, "mean queue {mean:.0} B");
    assert_eq!(
        rb.ports.iter().map(|p| p.dropped_packets()).sum::<u64>(),
        0,
        "no drops"
    );
}

#[test]
fn cnps_never_exceed_one_per_flow_per_interval() {
    for (preset, interval_us) in [("paper", 50.0f64), ("nvidia", 4.0)] {
        let sc = four_to_one(preset, "20ms");
        let out = run(&sc);
        let per_flow_bound = (20_000.0 / interval_us + 1.0).floor() as u64;
        assert!(out.cc.cnps_sent > 0, "{preset}: the bottleneck marks");
        assert!(
            out.cc.cnps_sent <= 4 * per_flow_bound,
            "{preset}: {} CNPs for 4 flows over 20 ms at one per {interval_us} us",
            out.cc.cnps_sent
        );
        assert_eq!(out.cc.cnps_sent, out.cc.cnps_received, "no CNP lost");
    }
}

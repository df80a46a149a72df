//! The sweep speed target: on this 2-core machine a 16-point sweep runs at least 1.8x
//! faster on two threads than on one (its own test binary, so no other test competes
//! for the cores). The points cost about the same (they change latencies by a few
//! percent), so the figure measures parallel execution, not how 16 unequal runs happen
//! to pack onto two threads.

use doorbell::scenario::Overrides;
use doorbell::sweep::{plan_str, run_jobs};
use std::time::Instant;

#[test]
fn two_threads_run_a_16_point_sweep_at_least_1_8x_faster() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        eprintln!("skipped: {cores} core");
        return;
    }
    let p = plan_str(
        "topology: { leaves: 4, spines: 4, hosts_per_leaf: 8, host_link: { rate: 100Gbps, latency: 500ns } }
flow_control: { mode: ib_credit }
workload:
  - poisson: { load: 0.5, sizes: websearch, until: 3ms }
sweep:
  grid:
    switch.latency: [300ns, 310ns, 320ns, 330ns]
    topology.host_link.latency: [500ns, 510ns, 520ns, 530ns]
",
        "speed.yaml",
        "speed",
        &Overrides::default(),
    )
    .unwrap();
    let jobs = p.jobs(None);
    assert_eq!(jobs.len(), 16);
    let time = |threads| {
        let t = Instant::now();
        let rows = run_jobs(&p, &jobs, threads, &|_| {});
        (t.elapsed().as_secs_f64(), rows)
    };
    let (one, rows1) = time(1);
    let (two, rows2) = time(2);
    assert_eq!(rows1, rows2);
    let speedup = one / two;
    eprintln!("16 points: {one:.2} s on 1 thread, {two:.2} s on 2: {speedup:.2}x");
    assert!(speedup >= 1.8, "{speedup:.2}x ({one:.2} s vs {two:.2} s)");
}

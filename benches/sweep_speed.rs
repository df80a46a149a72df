//! The sweep speed target: on the project's 2-core machine a 16-point sweep runs at least
//! 1.8x faster on two threads than on one. The points cost about the same (they change
//! latencies by a few percent), so the figure measures parallel execution, not how 16
//! unequal runs happen to pack onto two threads.
//!
//! Run: `cargo bench --bench sweep_speed` on an otherwise idle machine. It prints the
//! times on 1 and 2 threads and their ratio, checks that both give the same rows, and
//! fails below the target.
//! A wall-clock figure fails whenever the machine is busy, so it is not part of
//! `cargo test` (`sweep::a_sweep_is_the_same_on_one_thread_or_two` checks the rows there).

use doorbell::scenario::Overrides;
use doorbell::sweep::{plan_str, run_jobs};
use std::time::Instant;

const TARGET: f64 = 1.8;

fn main() {
    // `cargo bench [FILTER]` passes the filter to every bench: run only if it matches.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filters.is_empty() && !filters.iter().any(|f| "sweep_speed".contains(f.as_str())) {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        println!("sweep_speed: skipped, {cores} core");
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
    assert_eq!(rows1, rows2, "1 and 2 threads gave different rows");
    let speedup = one / two;
    println!("sweep_speed: 16 points: {one:.2} s on 1 thread, {two:.2} s on 2: {speedup:.2}x");
    if speedup < TARGET {
        eprintln!(
            "sweep_speed: below the {TARGET}x target (is the machine busy? `uptime` shows its load)"
        );
        std::process::exit(1);
    }
}

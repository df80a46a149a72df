//! Scale benchmarks (issue 17): whole runs of the cases issue 17 measures, one run
//! each (criterion's ten samples would take many minutes), printing events, wall time,
//! events per second and peak resident memory per case. Compare a change against the
//! previous main by running both builds' bench in turn (the machine is shared and
//! noisy: quote ratios of pairs, never one absolute time).
//!
//! - `permutation-256-pfc`: `scenarios/permutation-256.yaml` with PFC (htsim-like
//!   settings: 256 hosts, 100 Gb/s, 1 us links, 1000 B MTU, 2 MB per host, RC);
//! - `websearch-128`: `benches/scenarios/websearch-128.yaml`, web-search flows at 50%
//!   load from 128 hosts (about 2,200 flows);
//! - `permutation-8192`: `benches/scenarios/permutation-8192.yaml`, 8,192 hosts at
//!   400 Gb/s, a 1 MB permutation;
//! - `permutation-8192-threads-2`, `permutation-256-pfc-threads-2`,
//!   `websearch-128-threads-2`: the same split over two threads (`run --threads 2`, `sim::parallel`; same results);
//! - `allreduce-1024`: `benches/scenarios/allreduce-1024.yaml`, 1,024 GPUs, 256 MiB ring;
//!   `allreduce-1024-threads-2`: the same split over two threads (ring collectives split
//!   since stop 57: a rank in its host's partition, servers whole);
//! - `allreduce-4096` (only with `DOORBELL_BENCH_LARGE=1`: 7-18 CPU-minutes, by machine):
//!   `benches/scenarios/allreduce-4096.yaml`; `allreduce-4096-threads-2` likewise split
//!   (about 4.3 minutes of wall time on the 2-core Intel VM of stop 57);
//! - `allreduce-16384` (only with `DOORBELL_BENCH_LARGE=1`: about 8 minutes, 1.8 GiB):
//!   `benches/scenarios/allreduce-16384.yaml`, 16,384 GPUs, a 16 MiB allreduce as
//!   NCCL's tuner chooses.
//!
//! Peak memory is the process's high-water mark, reset before each case through
//! `/proc/self/clear_refs` (Linux); the allocator keeps some of what earlier cases
//! freed, so a case's own figure comes from running it alone (`-- NAME`).
//!
//! Run: `cargo bench --bench scale` (`-- NAME` runs the cases whose name contains NAME).

use doorbell::scenario::{load, Overrides};
use std::path::Path;
use std::time::Instant;

fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let large = std::env::var("DOORBELL_BENCH_LARGE").is_ok_and(|v| v == "1");
    // (name, scenario, overrides, threads: `run --threads`, the fabric split over them)
    let cases: Vec<(&str, &str, Vec<String>, usize)> = vec![
        (
            "permutation-256-pfc",
            "scenarios/permutation-256.yaml",
            vec!["flow_control.mode=pfc".into()],
            1,
        ),
        (
            "websearch-128",
            "benches/scenarios/websearch-128.yaml",
            vec![],
            1,
        ),
        (
            "permutation-8192",
            "benches/scenarios/permutation-8192.yaml",
            vec![],
            1,
        ),
        (
            "permutation-8192-threads-2",
            "benches/scenarios/permutation-8192.yaml",
            vec![],
            2,
        ),
        (
            "permutation-256-pfc-threads-2",
            "scenarios/permutation-256.yaml",
            vec!["flow_control.mode=pfc".into()],
            2,
        ),
        (
            "websearch-128-threads-2",
            "benches/scenarios/websearch-128.yaml",
            vec![],
            2,
        ),
        (
            "allreduce-1024",
            "benches/scenarios/allreduce-1024.yaml",
            vec![],
            1,
        ),
        (
            "allreduce-1024-threads-2",
            "benches/scenarios/allreduce-1024.yaml",
            vec![],
            2,
        ),
        (
            "allreduce-4096",
            "benches/scenarios/allreduce-4096.yaml",
            vec![],
            1,
        ),
        (
            "allreduce-4096-threads-2",
            "benches/scenarios/allreduce-4096.yaml",
            vec![],
            2,
        ),
        (
            "allreduce-16384",
            "benches/scenarios/allreduce-16384.yaml",
            vec![],
            1,
        ),
    ];
    for (name, file, set, threads) in cases {
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        if name.starts_with("allreduce-") && !name.starts_with("allreduce-1024") && !large {
            println!("{name}: skipped (DOORBELL_BENCH_LARGE=1 runs it: 8-25 minutes)");
            continue;
        }
        let sc = load(&root.join(file), &Overrides { seed: None, set }).expect("bench scenario");
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let wall = Instant::now();
        let out = if threads > 1 {
            doorbell::sim::run_split(&sc, threads).expect("a scenario the split covers")
        } else {
            doorbell::sim::run(&sc)
        };
        let secs = wall.elapsed().as_secs_f64();
        println!(
            "{name}: {} events in {secs:.2} s wall ({:.2} M events/s), peak RSS {}",
            out.events,
            out.events as f64 / secs / 1e6,
            peak_rss_mib().map_or("n/a".into(), |m| format!("{m:.1} MiB"))
        );
    }
}

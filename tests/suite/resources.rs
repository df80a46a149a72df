//! Bounded resources (issue 19, item 7): a run that cannot fit in memory is refused
//! before it starts (exit 2, saying what to shrink), one that outgrows the machine while
//! running stops with exit 2 instead of being killed or aborting, and `validate` prints
//! the estimate. Costs are in `sim::footprint`.

use crate::common::{assert_env_refused, bin, stderr};
use std::path::PathBuf;
use std::process::Command;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("doorbell-res-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// About 15 million 2-byte flows (under the per-item flow limit) used to abort on a
/// failed allocation (SIGABRT) under a 4 GiB limit. 16 senders x 0.5 x 100 Gb/s / 16 bits
/// x 300 us = 15 million flows, about 14 GiB at 992 B each.
const MANY_FLOWS: &str =
    "topology: { leaves: 1, spines: 0, hosts_per_leaf: 16, host_link: { rate: 100Gbps } }
workload:
  - poisson: { load: 0.5, sizes: { fixed: 2B }, until: 300us }
";

#[test]
fn a_run_that_cannot_fit_is_refused_before_it_starts() {
    let d = tmpdir("refused");
    let sc = d.join("many.yaml");
    std::fs::write(&sc, MANY_FLOWS).unwrap();
    // Under an address-space limit, as the reproduction ran.
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 4194304 && exec '{}' run '{}' --quiet --out '{}'",
            env!("CARGO_BIN_EXE_doorbell"),
            sc.display(),
            d.join("out").display()
        ))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("at least 13.9 GiB") && e.contains("(ulimit -v)") && e.contains("per_host_pair"),
        "{e}"
    );
    assert!(!d.join("out").exists(), "refused before claiming a folder");
    // Under the user's own cap, and in `validate` too.
    let o = bin()
        .env("DOORBELL_MEMORY_LIMIT", "8GiB")
        .arg("validate")
        .arg(&sc)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("memory   at least 13.9 GiB (15000000 flows, 15000000 queue pairs)"),
        "{out}"
    );
    assert!(
        stderr(&o).contains("8.0 GiB DOORBELL_MEMORY_LIMIT"),
        "{}",
        stderr(&o)
    );
    assert_env_refused(
        "DOORBELL_MEMORY_LIMIT",
        "plenty",
        &["validate".as_ref(), sc.as_os_str()],
        "DOORBELL_MEMORY_LIMIT: expected a size",
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_sweep_counts_the_runs_it_holds_at_once() {
    let d = tmpdir("sweep");
    let sc = d.join("sweep.yaml");
    // 500,000 flows per run, about 490 MiB; eight at once need about 3.8 GiB.
    std::fs::write(
        &sc,
        "topology: { leaves: 1, spines: 0, hosts_per_leaf: 16, host_link: { rate: 100Gbps } }
workload:
  - poisson: { load: 0.5, sizes: { fixed: 2B }, until: 10us }
sweep:
  grid:
    seed: [1, 2, 3, 4, 5, 6, 7, 8]
",
    )
    .unwrap();
    let o = bin()
        .env("DOORBELL_MEMORY_LIMIT", "2GiB")
        .args(["sweep", sc.to_str().unwrap(), "--quiet", "-j", "8", "--out"])
        .arg(d.join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("(8 runs at once)") && stderr(&o).contains("(-j)"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_run_that_outgrows_the_limit_stops_cleanly() {
    let d = tmpdir("outgrows");
    let sc = d.join("ring.yaml");
    // 64 ranks, a 64 MiB ring allreduce in 64 KiB chunks with a row per transfer kept
    // for flows.csv (`--flows`): about 30 MB at its peak, where the estimate's certain
    // part (16 MiB) passes a 16 MiB cap; the run stops once it holds more than 90% of it.
    std::fs::write(
        &sc,
        "topology: { leaves: 1, spines: 0, hosts_per_leaf: 64, host_link: { rate: 100Gbps, latency: 200ns } }
workload:
  - collective: { op: allreduce, minbytes: 64MiB, maxbytes: 64MiB, iters: 1, warmup_iters: 0, chunk: 64KiB }
",
    )
    .unwrap();
    let o = bin()
        .env("DOORBELL_MEMORY_LIMIT", "16MiB")
        .args(["run", sc.to_str().unwrap(), "--quiet", "--flows", "--out"])
        .arg(d.join("out"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("warning: the run may need up to"), "{e}");
    assert!(
        e.contains("stopped at") && e.contains("no results were written"),
        "{e}"
    );
    assert!(!d.join("out/summary.json").exists());
    assert!(
        !d.join("out/.doorbell.lock").exists(),
        "the lock is released"
    );
    // Without `--flows` finished transfers retire as the run goes (issue 17): the same
    // run peaks at about 11 MB (31 MB before, when every transfer's record stayed) and
    // finishes under a 24 MiB cap, where keeping every record stops at 21.6 MiB.
    let o = bin()
        .env("DOORBELL_MEMORY_LIMIT", "24MiB")
        .args(["run", sc.to_str().unwrap(), "--quiet", "--no-plot", "--out"])
        .arg(d.join("out2"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue 15, item 7: `validate` says how much work a run is. One 1 MB WRITE between two
/// hosts of a leaf, 4096 B MTU: 245 data packets and 245 ACKs, each crossing 2 links
/// with 2 events per link (transmission done, arrival): 1,960 events estimated; the run
/// takes 1,962 (the flow's start and its timer besides). On the shipped scenarios the
/// estimate is within a factor of about 3 of the events `summary.json` reports (0.7x for
/// quickstart, which its duration cuts; 0.75x websearch-load; 2.4x allreduce-ring).
/// Asserted: 0.5-2x on the simple case, and the line `validate` prints.
#[test]
fn validate_estimates_the_work_of_a_run() {
    let sc = crate::common::scenario(
        "topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 100Gbps } }
packet: { mtu: 4096B }
workload:
  - flows: [ { src: 0, dst: 1, size: 1MB } ]
",
    );
    let w = doorbell::sim::footprint::work(&sc);
    assert_eq!(w.payload_bytes, 1e6);
    assert_eq!(w.packets, 490.0);
    assert_eq!(w.events, 1960.0);
    let actual = doorbell::sim::run(&sc).events as f64;
    assert!(
        (0.5..=2.0).contains(&(actual / w.events)),
        "{actual} events against {} estimated",
        w.events
    );
    let o = bin()
        .args([
            "validate",
            &format!("{}/scenarios/quickstart.yaml", env!("CARGO_MANIFEST_DIR")),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("work     about 298 MiB of payload"), "{text}");
}

/// Issue 17, item 2: a collective's finished transfers retire as the run goes, so the
/// records held follow what is in flight, not what already finished
/// (`sim::retire`). 64 ranks on one leaf, a 64 MiB ring allreduce in 64 KiB chunks
/// over 2 channels: 129,024 transfers. A ring keeps at most NCCL_STEPS = 8 per rank and
/// channel in flight (1,024 here), so no more than one sweep's threshold (4,096) plus a
/// burst is ever held; before, all 129,024 were.
#[test]
fn finished_transfers_retire_and_held_records_follow_what_is_in_flight() {
    let sc = crate::common::scenario(
        "topology: { leaves: 1, spines: 0, hosts_per_leaf: 64, host_link: { rate: 100Gbps, latency: 200ns } }
workload:
  - collective: { op: allreduce, algorithm: ring, minbytes: 64MiB, maxbytes: 64MiB, iters: 1, warmup_iters: 0, chunk: 64KiB }
",
    );
    let out = doorbell::sim::run(&sc);
    let r = &out.retired;
    let s = doorbell::metrics::summarize(&sc, &out);
    let t = s.transfers.as_ref().expect("transfers");
    assert_eq!(t.count, 129_024);
    assert_eq!(t.completed, t.count);
    assert!(r.count > 120_000, "{} retired", r.count);
    assert_eq!(r.count + out.flows.len() as u64, t.count);
    assert!(
        (4096..4096 + 1024).contains(&r.peak_held),
        "peak held {}",
        r.peak_held
    );
    assert!(s.invariants.held(), "{:?}", s.invariants.violations);
}

/// Retiring transfers changes no figure: with the host model (its message histograms
/// fold too) and a training job (pipeline sends and gradient buckets), every result
/// file is byte-identical whether the records retire or are all kept (`--flows`, which
/// also writes a row per transfer, every one of them).
#[test]
fn retired_transfers_leave_every_result_file_as_it_was() {
    let d = tmpdir("retire-same");
    let sc = d.join("s.yaml");
    std::fs::write(
        &sc,
        "topology: { leaves: 2, spines: 2, hosts_per_leaf: 16, host_link: { rate: 400Gbps, latency: 500ns }, fabric_link: { rate: 400Gbps, latency: 500ns } }
host: { gpus_per_host: 8, nics_per_host: 8, wiring: rail, posting: cpu_proxy, memory: gpu, completion: interrupt }
workload:
  - collective: { op: allreduce, algorithm: ring, protocol: simple, minbytes: 4MiB, maxbytes: 16MiB, iters: 2, warmup_iters: 1, ranks: 32 }
  - flows: [ { src: 0, dst: 17, size: 1MB } ]
",
    )
    .unwrap();
    let run = |dir: &str, flows: bool| {
        let mut c = bin();
        c.args(["run", sc.to_str().unwrap(), "--quiet", "--no-plot", "--out"])
            .arg(d.join(dir));
        if flows {
            c.arg("--flows");
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    };
    run("retired", false);
    run("kept", true);
    for f in ["summary.json", "collective.csv", "host.csv", "ports.csv"] {
        let (a, b) = (d.join("retired").join(f), d.join("kept").join(f));
        if !a.exists() && !b.exists() {
            continue;
        }
        assert_eq!(
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            "{f} differs"
        );
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("retired/summary.json")).unwrap()).unwrap();
    let transfers = summary["transfers"]["count"].as_u64().unwrap();
    assert!(transfers > 20_000, "{transfers} transfers: enough to sweep");
    let rows = std::fs::read_to_string(d.join("kept/flows.csv"))
        .unwrap()
        .lines()
        .count() as u64
        - 1;
    assert_eq!(rows, transfers + 1, "a row per transfer and the flow");
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue 17: a 4,096-GPU ring allreduce of 256 MiB (512 servers x 8 rails of 400 Gb/s,
/// 16 channels) is accepted: the host-cost check asks whether its 537 million messages'
/// costs fit in a day spread over the 4,096 NICs (they do, with room), not one after
/// another; and the memory estimate counts the transfer records a ring holds at once
/// (twice NCCL_STEPS = 8 per rank and channel, plus a sweep's 4,096: 1,052,672), not
/// every transfer it makes.
#[test]
fn a_4096_gpu_ring_allreduce_is_accepted_and_its_held_records_estimated() {
    let sc = crate::common::scenario(
        "topology: { leaves: 64, spines: 32, hosts_per_leaf: 64, host_link: { rate: 400Gbps, latency: 100ns } }
flow_control: { mode: ib_credit }
host: { gpus_per_host: 8, nics_per_host: 8, wiring: rail, posting: cpu_proxy, memory: gpu }
workload:
  - collective: { op: allreduce, algorithm: ring, protocol: simple, channels: 16, size: 256MiB, iters: 1, warmup_iters: 0 }
",
    );
    let f = doorbell::sim::footprint::estimate(&sc);
    assert_eq!(f.transfers, (2 * 8 * 4096 * 16 + 4096) as f64);
    // Issue 16, item 6: the ring at 256 MiB and 1 GiB with NCCL's protocol and default
    // chunking is accepted too (it was refused: "would run past a simulated day").
    for size in ["256MiB", "1GiB"] {
        let sc = crate::common::scenario(&format!(
            "topology: {{ leaves: 64, spines: 32, hosts_per_leaf: 64, host_link: {{ rate: 400Gbps, latency: 100ns }} }}
flow_control: {{ mode: ib_credit }}
host: {{ gpus_per_host: 8, nics_per_host: 8, wiring: rail, posting: cpu_proxy, memory: gpu }}
workload:
  - collective: {{ op: allreduce, algorithm: ring, size: {size}, iters: 1, warmup_iters: 0 }}
"
        ));
        assert!(
            doorbell::sim::footprint::estimate(&sc).transfers > 0.0,
            "{size}"
        );
    }
}

/// Issue 17: a 16,384-GPU allreduce of 256 MiB with NCCL's choice (2,048 servers x 8
/// rails of 400 Gb/s, 256 leaves, 64 spines: tree LL128 in 144,000 B chunks) is accepted
/// and its memory estimated from the graph it runs: one chunk's graph per channel and
/// 4 bytes per transfer, 16 channels x 117 chunks x 4 (n - 1) = 122,675,328 transfers
/// (490 MB), and the records of those between servers, 4 x 2,047 per chunk and channel
/// (15.3 M of 154 B at most).
/// Before, validation refused it ("about 489684992 buffer pieces per iteration; at most
/// 2e8") and the run would have built every transfer at about 100 bytes (12 GB).
#[test]
fn a_16384_gpu_allreduce_with_nccls_choice_is_accepted_and_its_graph_sized() {
    let sc = crate::common::scenario(
        "topology: { leaves: 256, spines: 64, hosts_per_leaf: 64, host_link: { rate: 400Gbps, latency: 100ns } }
flow_control: { mode: ib_credit }
host: { gpus_per_host: 8, nics_per_host: 8, wiring: rail, posting: cpu_proxy, memory: gpu }
workload:
  - collective: { op: allreduce, size: 256MiB, iters: 1, warmup_iters: 0 }
",
    );
    let f = doorbell::sim::footprint::estimate(&sc);
    let (chunks, channels, n) = (117.0, 16.0, 16_384.0);
    assert_eq!(f.graph_transfers, chunks * channels * 4.0 * (n - 1.0));
    // One operation: its transfers between servers, fewer than twice them plus a sweep.
    assert_eq!(f.transfers, chunks * channels * 4.0 * 2_047.0);
    assert!(
        f.bytes_at_most() < 3.0 * (1u64 << 30) as f64,
        "{} B",
        f.bytes_at_most()
    );
}

/// `transfers_retired` summed over every perf.json under `dir`.
fn walk_perf(dir: &std::path::Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            n += walk_perf(&p);
        } else if p.file_name().is_some_and(|f| f == "perf.json") {
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            n += v["transfers_retired"].as_u64().unwrap();
        }
    }
    n
}

/// Retiring transfers as early as it can (`DOORBELL_SWEEP_MIN=1`: a sweep whenever a
/// record could go) changes no byte of any result file, against the default sweeps and
/// against keeping every record (`--flows`), on the shipped scenarios with collectives
/// and training jobs: ring, tree, hierarchical and in-network allreduce with the host
/// model (allreduce-2hop, guide-collectives), a collective beside web-search flows under
/// four flow-control sets (allreduce-contention), two planes (multi-plane), a trace
/// replayed (training-trace), and stragglers, degraded links and link flaps that fail
/// transfers mid-step (training-faults).
#[test]
fn retiring_as_early_as_possible_changes_no_result_file() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let d = tmpdir("retire-early");
    for name in [
        "allreduce-2hop",
        "guide-collectives",
        "allreduce-contention",
        "multi-plane",
        "training-trace",
        "training-faults",
    ] {
        let sc = root.join("scenarios").join(format!("{name}.yaml"));
        let run = |dir: &str, env: Option<&str>, flows: bool| {
            let out = d.join(name).join(dir);
            let mut c = bin();
            c.args(["run", sc.to_str().unwrap(), "--quiet", "--no-plot", "--out"])
                .arg(&out);
            if let Some(n) = env {
                c.env("DOORBELL_SWEEP_MIN", n);
            }
            if flows {
                c.arg("--flows");
            }
            let o = c.output().unwrap();
            assert!(
                matches!(o.status.code(), Some(0 | 4)),
                "{name}: {}",
                stderr(&o)
            );
            out
        };
        let default = run("default", None, false);
        let early = run("early", Some("1"), false);
        let kept = run("kept", None, true);
        let files = crate::common::result_files;
        // Early sweeps did retire transfers (perf.json says how many).
        let retired: u64 = walk_perf(&early);
        assert!(retired > 0, "{name}: nothing retired");
        let all = files(&default);
        assert!(all.iter().any(|f| f.ends_with("summary.json")), "{name}");
        assert_eq!(all, files(&early), "{name}: the same files");
        for f in &all {
            let a = std::fs::read(default.join(f)).unwrap();
            assert_eq!(a, std::fs::read(early.join(f)).unwrap(), "{name}: {f:?}");
            if !f.ends_with("flows.csv") && !f.ends_with("complete.json") {
                assert_eq!(
                    a,
                    std::fs::read(kept.join(f)).unwrap(),
                    "{name}: {f:?} with --flows"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

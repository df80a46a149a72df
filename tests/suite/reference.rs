//! The reference results in `results/` are what the current model produces.
//!
//! `results/<name>/` holds the committed output of each headline scenario so that a reader
//! sees what the tool produces without running it. This test re-runs each scenario and
//! compares the deterministic files byte for byte, so the folder cannot go stale: when the
//! model changes on purpose, regenerate with
//! `cargo run --release -- run scenarios/<name>.yaml` and review the diff.

use doorbell::metrics::{summarize, PerfReport};
use doorbell::report::write_files;
use doorbell::scenario::{load, Overrides};
use std::path::PathBuf;

/// One test per headline scenario, named after it (`reference::rc_tuning`), so that a
/// failure names the scenario and the scenarios run in parallel.
/// `scripts/regenerate-results.sh` reads the scenario names from this list.
macro_rules! reference {
    ($($test:ident => $name:literal,)*) => {
        $(
            #[test]
            fn $test() {
                check_scenario($name);
            }
        )*
    };
}

reference! {
    guide_two_hops => "guide-two-hops",
    incast_dcqcn => "incast-dcqcn",
    victim_flow => "victim-flow",
    spine_oversubscription => "spine-oversubscription",
    quickstart => "quickstart",
    one_vs_two_hops => "one-vs-two-hops",
    incast => "incast",
    ecmp_collisions => "ecmp-collisions",
    websearch_load => "websearch-load",
    credit_rtt => "credit-rtt",
    rc_timeout_cost => "rc-timeout-cost",
    rc_dead_link => "rc-dead-link",
    rc_tuning => "rc-tuning",
    doorbell => "doorbell",
    interrupt_coalescing => "interrupt-coalescing",
    pcie_topology => "pcie-topology",
    guide_doorbell => "guide-doorbell",
    allreduce_ring => "allreduce-ring",
    allreduce_2hop => "allreduce-2hop",
    allreduce_contention => "allreduce-contention",
    guide_collectives => "guide-collectives",
    cc_compare => "cc-compare",
}

fn check(root: &std::path::Path, rel: &str, fresh: &[u8], name: &str) {
    let committed = std::fs::read(root.join("results").join(rel))
        .unwrap_or_else(|e| panic!("results/{rel}: {e}"));
    assert!(
        fresh == committed.as_slice(),
        "results/{rel} is stale: regenerate with \
         `cargo run --release -- run scenarios/{name}.yaml` and review the diff"
    );
}

/// Re-runs `scenarios/<name>.yaml` and compares its deterministic files with
/// `results/<name>/`.
fn check_scenario(name: &str) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let sc = load(
        &root.join(format!("scenarios/{name}.yaml")),
        &Overrides::default(),
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("doorbell-ref-{}-{name}", std::process::id()));
    // A compare scenario writes compare.csv (and window.csv) and a folder per set.
    let mut runs = Vec::new();
    if sc.compare.is_empty() {
        let out = doorbell::sim::run(&sc);
        let summary = summarize(&sc, &out);
        runs.push((String::new(), sc.clone(), out, summary));
    } else {
        let sets = doorbell::compare::run_sets(&sc);
        check(
            &root,
            &format!("{name}/compare.csv"),
            doorbell::compare::compare_csv(&sets).as_bytes(),
            name,
        );
        if let Some(csv) = doorbell::compare::host_csv(&sets) {
            check(&root, &format!("{name}/host.csv"), csv.as_bytes(), name);
        }
        if let Some(csv) = doorbell::compare::collective_csv(&sets) {
            check(
                &root,
                &format!("{name}/collective.csv"),
                csv.as_bytes(),
                name,
            );
        }
        let rows = doorbell::compare::window_rows(&sets);
        if root.join("results").join(name).join("window.csv").exists() {
            check(
                &root,
                &format!("{name}/window.csv"),
                doorbell::compare::window_csv(&rows).as_bytes(),
                name,
            );
        }
        for s in sets {
            runs.push((format!("{}/", s.name), s.scenario, s.out, s.summary));
        }
    }
    for (sub, sc, out, summary) in runs {
        let d = dir.join(&sub);
        write_files(&d, &sc, &out, &summary, &PerfReport::new(&out), false).unwrap();
        // Host and collective scenarios run tens of thousands of messages per set:
        // only their small files are committed (summary.json, collective.csv, and
        // at the top compare.csv and host.csv).
        let big = sc.host.is_some()
            || sc
                .workload
                .iter()
                .any(|w| matches!(w, doorbell::workload::Workload::Collective(_)));
        if !summary.collectives.is_empty() {
            let fresh = std::fs::read(d.join("collective.csv")).unwrap();
            check(&root, &format!("{name}/{sub}collective.csv"), &fresh, name);
        }
        for file in ["summary.json", "flows.csv", "ports.csv", "timeseries.csv"] {
            if file == "timeseries.csv" && sc.timeseries.is_none() {
                continue;
            }
            if big && file != "summary.json" {
                continue;
            }
            let fresh = std::fs::read(d.join(file)).unwrap();
            check(&root, &format!("{name}/{sub}{file}"), &fresh, name);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

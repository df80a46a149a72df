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

const REFERENCE: [&str; 5] = [
    "quickstart",
    "one-vs-two-hops",
    "incast",
    "ecmp-collisions",
    "websearch-load",
];

#[test]
fn committed_results_match_a_fresh_run() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for name in REFERENCE {
        let sc = load(
            &root.join(format!("scenarios/{name}.yaml")),
            &Overrides::default(),
        )
        .unwrap();
        let out = doorbell::sim::run(&sc);
        let summary = summarize(&sc, &out);
        let dir = std::env::temp_dir().join(format!("doorbell-ref-{}-{name}", std::process::id()));
        write_files(&dir, &sc, &out, &summary, &PerfReport::new(&out)).unwrap();
        for file in ["summary.json", "flows.csv", "ports.csv"] {
            let fresh = std::fs::read(dir.join(file)).unwrap();
            let committed = std::fs::read(root.join("results").join(name).join(file))
                .unwrap_or_else(|e| panic!("results/{name}/{file}: {e}"));
            assert!(
                fresh == committed,
                "results/{name}/{file} is stale: regenerate with \
                 `cargo run --release -- run scenarios/{name}.yaml` and review the diff"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

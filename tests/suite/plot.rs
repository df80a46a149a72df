//! Plots: each standard chart is written as PNG and SVG, non-empty, at 1000 x 640.

use doorbell::scenario::Overrides;
use doorbell::sweep::{plan_str, run_jobs, write};

fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let be = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    (be(16), be(20))
}

/// Runs the scenario `yaml` and writes its result files into `dir`, as `run` does.
fn run_into(dir: &std::path::Path, yaml: &str) {
    let sc = doorbell::scenario::parse_str(yaml, "c.yaml", "c", &Overrides::default()).unwrap();
    let out = doorbell::sim::run(&sc);
    let summary = doorbell::metrics::summarize(&sc, &out);
    doorbell::report::write_files(
        dir,
        &sc,
        &out,
        &summary,
        &doorbell::metrics::PerfReport::new(&out),
        false,
    )
    .unwrap();
}

#[test]
fn sweep_run_and_collective_plots_are_drawn_at_the_expected_size() {
    let dir = std::env::temp_dir().join(format!("doorbell-plot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // A sweep with repeats (bands).
    let p = plan_str(
        "topology: { leaves: 2, spines: 2, hosts_per_leaf: 4, host_link: { rate: 100Gbps, latency: 200ns } }
flow_control: { mode: ib_credit }
workload:
  - poisson: { load: 0.3, sizes: websearch, until: 1ms }
sweep:
  grid:
    workload.0.poisson.load: [0.2, 0.4]
  repeats: 2
",
        "p.yaml",
        "p",
        &Overrides::default(),
    )
    .unwrap();
    let rows = run_jobs(&p, &p.jobs(None), 2, &|_| {});
    let sweep_dir = dir.join("sweep");
    write(&sweep_dir, &p.file(None, rows)).unwrap();
    let mut files = doorbell::plot::plot_dir(&sweep_dir).unwrap();
    // A run with a collective (busbw vs size) and flows (FCT CDF; a collective's
    // transfers are not flows).
    let run_dir = dir.join("run");
    run_into(
        &run_dir,
        "topology: { leaves: 1, spines: 0, hosts_per_leaf: 4, host_link: { rate: 100Gbps, latency: 200ns } }
workload:
  - collective: { op: allreduce, minbytes: 4KiB, maxbytes: 1MiB, stepfactor: 16, iters: 1, warmup_iters: 0 }
  - flows: [ { src: 0, dst: 1, size: 1MB }, { src: 2, dst: 3, size: 10KB } ]",
    );
    files.extend(doorbell::plot::plot_dir(&run_dir).unwrap());
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    for want in [
        "sweep-fct-p99.png",
        "sweep-fct-p999.svg",
        "sweep-goodput.png",
        "busbw.png",
        "busbw.svg",
        "fct-cdf.png",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert!(
            bytes.len() > 1000,
            "{} is {} bytes",
            f.display(),
            bytes.len()
        );
        if f.extension().is_some_and(|e| e == "png") {
            assert_eq!(png_size(&bytes), doorbell::plot::SIZE, "{}", f.display());
        } else {
            let text = String::from_utf8_lossy(&bytes);
            assert!(text.contains("width=\"1000\"") && text.contains("height=\"640\""));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 15, item 9: a compare folder gets one chart with every set's FCT CDF
/// (`compare-fct-cdf`), each set's curve named after it.
#[test]
fn a_compare_folder_overlays_its_sets_fct_cdfs() {
    let dir = std::env::temp_dir().join(format!("doorbell-overlay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (set, spines) in [("one", 1), ("two", 2)] {
        run_into(
            &dir.join(set),
            &format!("topology: {{ leaves: 2, spines: {spines}, hosts_per_leaf: 2, host_link: {{ rate: 100Gbps, latency: 200ns }} }}
workload:
  - flows: [ {{ src: 0, dst: 2, size: 1MB }}, {{ src: 1, dst: 3, size: 1MB }} ]"),
        );
    }
    std::fs::write(dir.join("compare.csv"), "set\none\ntwo\n").unwrap();
    let files = doorbell::plot::plot_dir(&dir).unwrap();
    let svg = files
        .iter()
        .find(|f| f.file_name().unwrap() == "compare-fct-cdf.svg")
        .unwrap_or_else(|| panic!("{files:?}"));
    let text = std::fs::read_to_string(svg).unwrap();
    assert!(
        text.contains("\none\n") && text.contains("\ntwo\n"),
        "both sets named"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run with a training item draws its steps as stacked bars (compute, pipeline bubble,
/// exposed communication) from `training.csv`, a bar per step.
#[test]
fn training_steps_are_drawn_as_stacked_bars() {
    let dir = std::env::temp_dir().join(format!("doorbell-train-plot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    run_into(
        &dir,
        "
topology:
  leaves: 1
  spines: 1
  hosts_per_leaf: 2
  host_link: { rate: 100Gbps, latency: 1us }
  fabric_link: { rate: 100Gbps, latency: 1us }
workload:
  - training: { model: { layers: 2, hidden: 1024, ffn_hidden: 4096, heads: 8, vocab: 0 }, parallelism: { pp: 2 }, microbatches: 2, steps: 2 }
",
    );
    let csv = std::fs::read_to_string(dir.join("training.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "a row per step: {csv}");
    doorbell::plot::plot_dir(&dir).unwrap();
    let svg = std::fs::read_to_string(dir.join("training-step.svg")).unwrap();
    for label in ["exposed communication", "pipeline bubble", "step 1"] {
        assert!(svg.contains(label), "{label} missing from the chart");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! Sweeps: deterministic whatever the thread count, shards that merge into the whole,
//! and merge's refusals.

use doorbell::scenario::Overrides;
use doorbell::sweep::{csv, merge, plan_str, run_jobs, SweepFile, SweepPlan};

const SWEEP: &str = "topology: { leaves: 2, spines: 2, hosts_per_leaf: 4, host_link: { rate: 100Gbps, latency: 200ns } }
flow_control: { mode: ib_credit }
workload:
  - poisson: { load: 0.3, sizes: websearch, until: 1ms }
sweep:
  grid:
    topology.spines: [1, 2]
    workload.0.poisson.load: [0.2, 0.4, 0.6]
  points:
    - { topology.spines: 4, cc.algorithm: dcqcn, flow_control.mode: pfc }
  repeats: 2
";

fn plan(text: &str) -> SweepPlan {
    plan_str(text, "s.yaml", "s", &Overrides::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn file(p: &SweepPlan, shard: Option<(u32, u32)>, threads: usize) -> SweepFile {
    p.file(shard, run_jobs(p, &p.jobs(shard), threads, &|_| {}))
}

#[test]
fn a_sweep_is_the_same_on_one_thread_or_two() {
    let p = plan(SWEEP);
    assert_eq!(p.points.len(), 7);
    let one = file(&p, None, 1);
    let two = file(&p, None, 2);
    assert_eq!(one.rows.len(), 14);
    assert_eq!(csv(&one.paths, &one.rows), csv(&two.paths, &two.rows));
    assert_eq!(
        serde_json::to_string(&one).unwrap(),
        serde_json::to_string(&two).unwrap()
    );
    // Repeats differ (their own seeds); the grid's first key is the slowest.
    assert_ne!(one.rows[0].seed, one.rows[1].seed);
    assert_eq!(one.rows[0].values["topology.spines"], "1");
    assert_eq!(one.rows[6].values["topology.spines"], "2");
}

#[test]
fn shards_merge_into_the_unsharded_sweep() {
    let p = plan(SWEEP);
    let whole = file(&p, None, 2);
    for n in [2u32, 3, 7] {
        let shards: Vec<SweepFile> = (0..n).map(|i| file(&p, Some((i, n)), 1)).collect();
        // Given in any order.
        let mut rev = shards.clone();
        rev.reverse();
        let merged = merge(&rev).unwrap();
        assert_eq!(merged, whole, "{n} shards");
        assert_eq!(
            csv(&merged.paths, &merged.rows),
            csv(&whole.paths, &whole.rows)
        );
    }
}

#[test]
fn merge_refuses_missing_duplicated_and_foreign_shards() {
    let p = plan(SWEEP);
    let shards: Vec<SweepFile> = (0..3).map(|i| file(&p, Some((i, 3)), 1)).collect();
    let e = merge(&[shards[0].clone(), shards[2].clone()]).unwrap_err();
    assert!(
        e.contains("points 1, 4 have not run") && e.contains("shards 1 of 3"),
        "{e}"
    );
    let e = merge(&[
        shards[0].clone(),
        shards[1].clone(),
        shards[1].clone(),
        shards[2].clone(),
    ])
    .unwrap_err();
    assert!(e.contains("given twice"), "{e}");
    let other = plan(&SWEEP.replace("until: 1ms", "until: 2ms"));
    let foreign = file(&other, Some((1, 3)), 1);
    let e = merge(&[shards[0].clone(), foreign, shards[2].clone()]).unwrap_err();
    assert!(e.contains("another scenario"), "{e}");
}

#[test]
fn a_bad_sweep_path_is_named() {
    let e = plan_str(
        &SWEEP.replace("topology.spines: [1, 2]", "topology.spinez: [1, 2]"),
        "s.yaml",
        "s",
        &Overrides::default(),
    )
    .unwrap_err();
    assert!(
        e.message.contains("spinez") && e.message.contains("sweep point 0"),
        "{e}"
    );
    let e = plan_str(
        &SWEEP.replace("repeats: 2", "repeats: 0"),
        "s.yaml",
        "s",
        &Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(e.path, "sweep.repeats");
}

/// The command line: a bad sweep path exits 2 naming it; `merge` exits 2 on an
/// incomplete set of shards and writes the whole sweep from a complete one.
#[test]
fn sweep_and_merge_on_the_command_line() {
    let dir = std::env::temp_dir().join(format!("doorbell-sweep-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = env!("CARGO_BIN_EXE_doorbell");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        SWEEP.replace("topology.spines: [1, 2]", "topology.spinez: [1, 2]"),
    )
    .unwrap();
    let out = std::process::Command::new(bin)
        .args(["sweep", bad.to_str().unwrap(), "--quiet", "--out"])
        .arg(dir.join("x"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("spinez"), "{stderr}");
    let good = dir.join("good.yaml");
    std::fs::write(&good, SWEEP).unwrap();
    for i in 0..2 {
        let st = std::process::Command::new(bin)
            .args([
                "sweep",
                good.to_str().unwrap(),
                "--quiet",
                "--shard",
                &format!("{i}/2"),
                "--out",
            ])
            .arg(dir.join(format!("s{i}")))
            .status()
            .unwrap();
        assert!(st.success());
    }
    let merge = |dirs: &[&str]| {
        let mut c = std::process::Command::new(bin);
        c.arg("merge");
        for d in dirs {
            c.arg(dir.join(d));
        }
        c.arg("--out").arg(dir.join("m")).output().unwrap()
    };
    assert_eq!(merge(&["s0"]).status.code(), Some(2));
    assert!(merge(&["s0", "s1"]).status.success());
    let whole = std::process::Command::new(bin)
        .args([
            "sweep",
            good.to_str().unwrap(),
            "--quiet",
            "-j",
            "2",
            "--out",
        ])
        .arg(dir.join("w"))
        .status()
        .unwrap();
    assert!(whole.success());
    assert_eq!(
        std::fs::read(dir.join("m/sweep.csv")).unwrap(),
        std::fs::read(dir.join("w/sweep.csv")).unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 15, item 2: comparisons are paired. Repeat r uses the same seed at every point
/// (common random numbers), so two points that differ only in a parameter the traffic
/// never exercises (`retry_cnt` on a lossless fabric) give identical rows repeat by
/// repeat: their paired difference is exactly 0, where independent seeds would show the
/// two seeds' luck as a difference. `sweep-stats.csv` gives each point's mean and 95%
/// half-width over repeats (Student's t) and the paired difference from point 0.
#[test]
fn repeats_are_paired_across_points_and_summed_up_with_confidence() {
    let text = "topology: { leaves: 2, spines: 1, hosts_per_leaf: 4, host_link: { rate: 100Gbps, latency: 200ns } }
flow_control: { mode: ib_credit }
workload:
  - poisson: { load: 0.3, sizes: websearch, until: 300us }
sweep:
  grid:
    transport.rc.retry_cnt: [7, 3]
  repeats: 3
";
    let p = plan(text);
    let f = file(&p, None, 2);
    assert_eq!(f.rows.len(), 6);
    for r in 0..3 {
        let a = f
            .rows
            .iter()
            .find(|x| x.point == 0 && x.repeat == r)
            .unwrap();
        let b = f
            .rows
            .iter()
            .find(|x| x.point == 1 && x.repeat == r)
            .unwrap();
        assert_eq!(a.seed, b.seed, "repeat {r}: one seed at every point");
        let without = |m: &std::collections::BTreeMap<String, serde_json::Value>| {
            let mut m = m.clone();
            m.remove("rc.retry_cnt");
            m
        };
        assert_eq!(
            without(&a.metrics),
            without(&b.metrics),
            "repeat {r}: same draws, same figures"
        );
    }
    assert_ne!(f.rows[0].seed, f.rows[1].seed, "repeats differ");
    let stats = doorbell::sweep::stats_csv(&f.paths, &f.rows);
    let mut lines = stats.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let p1: Vec<&str> = lines.nth(1).unwrap().split(',').collect();
    assert_eq!(p1[col("repeats")], "3");
    assert_eq!(p1[col("fct_us.p99.vs_point0.mean")], "0");
    assert_eq!(p1[col("fct_us.p99.vs_point0.ci95")], "0");
    assert!(!p1[col("fct_us.p99.ci95")].is_empty());
    assert_eq!(p1[col("fct_us.p99.lower_bound_runs")], "0");
    // The interval by hand: 1, 2, 3 -> mean 2, s = 1, t(2 dof) = 4.303, 4.303 / sqrt 3.
    let (m, ci) = doorbell::sweep::mean_ci95(&[1.0, 2.0, 3.0]);
    assert_eq!(m, 2.0);
    assert!((ci.unwrap() - 4.303 / 3f64.sqrt()).abs() < 1e-12);
    assert_eq!(doorbell::sweep::mean_ci95(&[5.0]).1, None);
}

/// Issue 15: compare sets were silently dropped inside sweeps (and plans). A scenario
/// with sets is now refused by both, naming `compare` and what to do instead.
#[test]
fn sweeps_and_plans_refuse_compare_sets_instead_of_dropping_them() {
    let text = "topology: { leaves: 2, spines: 1, hosts_per_leaf: 4, host_link: { rate: 100Gbps } }
workload:
  - flows: [ { src: 0, dst: 4, size: 10KB } ]
compare:
  - { name: a, timeout: 14 }
";
    let sweep = format!("{text}sweep:\n  grid: {{ topology.spines: [1, 2] }}\n");
    let Err(e) = plan_str(&sweep, "s.yaml", "s", &Overrides::default()) else {
        panic!("a sweep with sets was accepted");
    };
    let e = e.to_string();
    assert!(
        e.contains("compare: a sweep runs the scenario once per point"),
        "{e}"
    );
    let plan = format!("{text}plan:\n  targets: {{ p99_fct_max: 1ms }}\n  candidates: [ {{ topology.spines: 1 }} ]\n");
    let Err(e) = doorbell::plan::plan_str(&plan, "p.yaml", "p", &Overrides::default()) else {
        panic!("a plan with sets was accepted");
    };
    let e = e.to_string();
    assert!(
        e.contains("compare: a plan runs the scenario once per candidate"),
        "{e}"
    );
}

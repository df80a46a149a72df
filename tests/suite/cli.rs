//! The command line as a user meets it: scenarios validate, runs are byte-identical, bad
//! input exits 2 with the file, line, column and field.

use crate::common::{bin, stderr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("doorbell-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A fresh folder holding `yaml` as `<name>.yaml`: (the folder, the file).
fn scenario_file(name: &str, yaml: &str) -> (PathBuf, PathBuf) {
    let d = tmpdir(name);
    let f = d.join(format!("{name}.yaml"));
    std::fs::write(&f, yaml).unwrap();
    (d, f)
}

fn run_ok(args: &[&str]) -> Output {
    let o = bin().args(args).output().unwrap();
    assert!(
        o.status.success(),
        "doorbell {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

#[test]
fn every_shipped_scenario_validates() {
    // The examples, and the benchmarks' scenarios (too large to run in a test).
    let mut n = [0; 2];
    for (k, dir) in ["scenarios", "benches/scenarios"].iter().enumerate() {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "yaml") {
                let o = run_ok(&["validate", p.to_str().unwrap()]);
                let s = String::from_utf8_lossy(&o.stdout);
                assert!(s.contains("ok"), "{s}");
                assert!(s.contains("BDP"), "validate prints the BDP per path: {s}");
                n[k] += 1;
            }
        }
    }
    assert!(
        n[0] >= 5,
        "expected the five foundation scenarios, found {}",
        n[0]
    );
    assert!(
        n[1] >= 6,
        "expected the six benchmark scenarios, found {}",
        n[1]
    );
}

fn read_results(dir: &Path) -> Vec<(String, Vec<u8>)> {
    ["summary.json", "flows.csv", "ports.csv"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read(dir.join(f)).unwrap()))
        .collect()
}

#[test]
fn two_runs_are_byte_identical_and_the_seed_matters() {
    let sc = root().join("scenarios/quickstart.yaml");
    let sc = sc.to_str().unwrap();
    let (a, b, c) = (tmpdir("det-a"), tmpdir("det-b"), tmpdir("det-c"));
    run_ok(&["run", sc, "--quiet", "--out", a.to_str().unwrap()]);
    run_ok(&["run", sc, "--quiet", "--out", b.to_str().unwrap()]);
    run_ok(&[
        "run",
        sc,
        "--quiet",
        "--out",
        c.to_str().unwrap(),
        "--seed",
        "8",
    ]);
    let (ra, rb, rc) = (read_results(&a), read_results(&b), read_results(&c));
    for ((name, x), (_, y)) in ra.iter().zip(&rb) {
        assert!(!x.is_empty());
        assert!(x == y, "{name} differs between two runs of the same seed");
    }
    assert!(
        ra[1].1 != rc[1].1,
        "a different seed should change flows.csv"
    );
    assert!(a.join("perf.json").exists());
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("summary.json")).unwrap()).unwrap();
    for key in [
        "/flows/count",
        "/flows/completed",
        "/fct_us/mean",
        "/fct_us/p50",
        "/fct_us/p90",
        "/fct_us/p99",
        "/fct_us/p999",
        "/fct_us/max",
        "/slowdown/p50",
        "/slowdown/p99",
        "/goodput_gbps/aggregate",
        "/drops/packets",
        "/topology/hosts",
        "/topology/leaves",
        "/topology/spines",
        "/topology/oversubscription",
        "/events",
    ] {
        assert!(summary.pointer(key).is_some(), "summary.json lacks {key}");
    }
    for d in [a, b, c] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn set_overrides_a_field() {
    let sc = root().join("scenarios/quickstart.yaml");
    let o = run_ok(&[
        "validate",
        sc.to_str().unwrap(),
        "--set",
        "topology.spines=8",
        "--set",
        "workload[0].permutation.size=1MB",
    ]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("8 spines"), "{s}");
    assert!(s.contains("1:1"), "8 spines make the quickstart 1:1: {s}");
}

/// Writes `yaml` to a file, runs `validate` and `run` on it, asserts exit code 2 and
/// that nothing was written, and returns the error message.
fn expect_bad(name: &str, yaml: &str) -> String {
    let d = tmpdir(name);
    let f = d.join(format!("{name}.yaml"));
    std::fs::write(&f, yaml).unwrap();
    let out = d.join("out");
    let mut last = String::new();
    for args in [
        vec!["validate", f.to_str().unwrap()],
        vec!["run", f.to_str().unwrap(), "--out", out.to_str().unwrap()],
    ] {
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        last = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(
            last.contains(&format!("{name}.yaml")),
            "names the file: {last}"
        );
    }
    assert!(!out.exists(), "nothing is written for bad input");
    let _ = std::fs::remove_dir_all(d);
    last
}

const GOOD: &str = "topology:
  leaves: 2
  spines: 1
  hosts_per_leaf: 4
  host_link: { rate: 100Gbps, latency: 100ns }
switch:
  buffer: 1MiB
workload:
  - incast: { senders: 3, receiver: 0, size: 64KB }
";

#[test]
fn the_good_base_case_runs() {
    let d = tmpdir("good");
    let f = d.join("good.yaml");
    std::fs::write(&f, GOOD).unwrap();
    run_ok(&[
        "run",
        f.to_str().unwrap(),
        "--quiet",
        "--out",
        d.join("o").to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn a_typo_d_field_is_an_error_with_line_and_column() {
    let e = expect_bad("typo", &GOOD.replace("{ rate: 100Gbps", "{ rat: 100Gbps"));
    assert!(e.contains(":5:"), "line 5: {e}");
    assert!(e.contains("topology.host_link"), "field path: {e}");
    assert!(e.contains("unknown field `rat`"), "{e}");
    assert!(e.contains("`rate`"), "says what was expected: {e}");
}

#[test]
fn a_negative_rate_is_an_error() {
    let e = expect_bad("negative", &GOOD.replace("100Gbps", "-100Gbps"));
    assert!(e.contains("topology.host_link.rate"), "{e}");
    assert!(e.contains("negative"), "{e}");
}

#[test]
fn a_link_shorter_than_one_nanosecond_is_an_error() {
    // The engine's lookahead: every link delays by at least 1 ns.
    let e = expect_bad(
        "zerolatency",
        &GOOD.replace("latency: 100ns", "latency: 500ps"),
    );
    assert!(e.contains(":5:"), "line 5: {e}");
    assert!(e.contains("topology.host_link.latency"), "{e}");
    assert!(
        e.contains("at least 1ns") && e.contains("found 500ps"),
        "{e}"
    );
    let d = tmpdir("onens");
    let f = d.join("onens.yaml");
    std::fs::write(&f, GOOD.replace("latency: 100ns", "latency: 1ns")).unwrap();
    let o = bin()
        .args(["validate", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "1 ns is accepted: {o:?}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn a_missing_unit_is_an_error() {
    let e = expect_bad("nounit", &GOOD.replace("latency: 100ns", "latency: 100"));
    assert!(e.contains("topology.host_link.latency"), "{e}");
    assert!(e.contains("unit"), "{e}");
    assert!(e.contains("ns"), "suggests a unit: {e}");
}

#[test]
fn impossible_values_are_rejected_before_the_run() {
    let e = expect_bad("zerorate", &GOOD.replace("100Gbps", "0Gbps"));
    assert!(e.contains("rate") && e.contains("zero"), "{e}");
    let e = expect_bad(
        "bigmtu",
        &GOOD.replace(
            "switch:\n  buffer: 1MiB",
            "switch:\n  buffer: 2KiB\npacket: { mtu: 4096B }",
        ),
    );
    assert!(
        e.contains("switch.buffer") && e.contains("does not fit"),
        "{e}"
    );
    let e = expect_bad("senders", &GOOD.replace("senders: 3", "senders: 9"));
    assert!(e.contains("workload[0].incast.senders"), "{e}");
    assert!(e.contains(":9:"), "points at the line: {e}");
    let e = expect_bad("nohost", &GOOD.replace("receiver: 0", "receiver: 8"));
    assert!(e.contains("host 8 does not exist"), "{e}");
    let e = expect_bad("spines", &GOOD.replace("spines: 1", "spines: 0"));
    assert!(e.contains("topology.spines"), "{e}");
    let e = expect_bad("kind", &GOOD.replace("- incast:", "- incest:"));
    assert!(e.contains("unknown variant `incest`"), "{e}");
    let e = expect_bad("notyaml", "topology: [unclosed\n");
    assert!(e.contains("notyaml.yaml:"), "{e}");
    let e = expect_bad(
        "load",
        &GOOD.replace(
            "  - incast: { senders: 3, receiver: 0, size: 64KB }",
            "  - poisson: { load: 1.5, sizes: websearch, until: 1ms }",
        ),
    );
    assert!(e.contains("workload[0].poisson.load"), "{e}");
}

#[test]
fn a_missing_file_exits_2() {
    let o = bin().args(["run", "/nonexistent/x.yaml"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read"));
}

#[test]
fn bad_set_overrides_exit_2() {
    let sc = root().join("scenarios/quickstart.yaml");
    for (set, want) in [
        ("topology.spinez=4", "spinez"),
        ("topology.spines=-1", "topology.spines"),
        ("nonsense", "dotted.path=value"),
    ] {
        let o = bin()
            .args(["validate", sc.to_str().unwrap(), "--set", set])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{set}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(want), "{set}: {e}");
    }
}

#[test]
fn a_cdf_file_is_read_relative_to_the_scenario() {
    // A two-point CDF: half the flows 1000 B, then uniform up to 3000 B.
    let d = tmpdir("cdf");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(
        d.join("sub/sizes.txt"),
        "# size percent\n1000 50\n3000 100\n",
    )
    .unwrap();
    let sc = d.join("sub/cdf.yaml");
    std::fs::write(
        &sc,
        GOOD.replace(
            "  - incast: { senders: 3, receiver: 0, size: 64KB }",
            "  - poisson: { load: 0.2, sizes: { cdf_file: sizes.txt }, until: 200us }",
        ),
    )
    .unwrap();
    let out = d.join("out");
    run_ok(&[
        "run",
        sc.to_str().unwrap(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let flows = std::fs::read_to_string(out.join("flows.csv")).unwrap();
    let sizes: Vec<u64> = flows
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(5).unwrap().parse().unwrap())
        .collect();
    // load 0.2 x 100 Gb/s / (8 x 1500 B mean) = 1.67 M arrivals/s per host, 8 hosts, 200 us:
    // about 2670 flows.
    assert!(sizes.len() > 2000, "{} flows", sizes.len());
    assert!(sizes.iter().all(|&s| (1000..=3000).contains(&s)));
    let at_1000 = sizes.iter().filter(|&&s| s == 1000).count() as f64 / sizes.len() as f64;
    // Half the mass sits at 1000 B: binomial sd at n = 2670 is 1%, so 5% is five sigma.
    assert!((at_1000 - 0.5).abs() < 0.05, "{at_1000}");
    let _ = std::fs::remove_dir_all(d);
}

/// A `compare:` set goes through the same validation as the top level: a set whose
/// spine layer is far too large is refused by `validate` with the set's field path,
/// file, line and column, exit code 2, before any simulation.
#[test]
fn compare_set_topology_is_validated_like_the_top_level() {
    let d = tmpdir("compare-set-topology");
    let file = d.join("sets.yaml");
    std::fs::write(
        &file,
        "topology:
  leaves: 2
  spines: 2
  hosts_per_leaf: 2
  host_link: { rate: 100Gbps }
workload:
  - permutation: { size: 1MB }
compare:
  - { name: a, timeout: 14 }
  - { name: b, topology: { spines: 4000000 } }
",
    )
    .unwrap();
    // `validate` resolves the sets without simulating them.
    let o = bin()
        .args(["validate", file.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("sets.yaml:10:") && err.contains("compare[1].topology.spines"),
        "{err}"
    );
    assert!(err.contains("4096"), "{err}");
    let _ = std::fs::remove_dir_all(d);
}

/// A run that can never finish says why on stderr, even with `--quiet`, and exits 0 (the
/// model as configured); stdout's summary lists the invariants it held.
#[test]
fn a_stall_is_explained_on_stderr_even_when_quiet() {
    let dir = tmpdir("stall");
    let yaml = dir.join("stall.yaml");
    std::fs::write(
        &yaml,
        "topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 100Gbps } }
transport: { mode: raw }
faults: { drop_probability: 0.5 }
workload:
  - flows: [{ src: 0, dst: 1, size: 64KiB }]
",
    )
    .unwrap();
    let out = dir.join("out");
    let args = |quiet: bool| {
        let mut a = vec![
            "run".to_string(),
            yaml.display().to_string(),
            "--out".into(),
            out.display().to_string(),
            "--no-plot".into(),
        ];
        if quiet {
            a.push("--quiet".into());
        }
        a
    };
    let o = bin().args(args(true)).output().unwrap();
    // The results are written, and exit code 4 says flows were left that could never
    // finish (issue 15, item 4).
    assert_eq!(o.status.code(), Some(4));
    assert!(out.join("summary.json").exists() && out.join("complete.json").exists());
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("can never finish")
            && err.contains("flow 0: a packet of it was lost and bare packets are never resent"),
        "{err}"
    );
    let o = bin().args(args(false)).output().unwrap();
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        shown.contains("checks   8 invariants held (lossless_no_drop,"),
        "{shown}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reader that stops reading (`doorbell validate X | head -1`) is not an error:
/// writing to a pipe whose reader is gone, `validate` and `run` exit 0, not 101 on a
/// "failed printing to stdout" panic. (The reader exits at once; doorbell starts writing
/// 0.3 s later.)
#[test]
fn a_closed_stdout_is_not_a_panic() {
    let out = tmpdir("closed-stdout");
    let sc = root().join("scenarios/quickstart.yaml");
    for args in [
        format!("validate '{}'", sc.display()),
        format!("run '{}' --no-plot --out '{}'", sc.display(), out.display()),
    ] {
        let o = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "set -o pipefail; (sleep 0.3; exec '{}' {args}) | (exit 0)",
                env!("CARGO_BIN_EXE_doorbell")
            ))
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{args}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(
        out.join("complete.json").exists(),
        "the run finished its files"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Issue 15, item 3: `plan --out` keeps the evidence: plan.txt as printed, plan.csv and
/// plan.json with every candidate (run or not) and the answer, in a sealed folder.
#[test]
fn plan_writes_its_evidence_with_out() {
    let (d, scenario) = scenario_file(
        "plan-out",
        "topology: { leaves: 2, spines: 4, hosts_per_leaf: 2, host_link: { rate: 100Gbps, latency: 200ns } }
transport: { mode: raw }
routing: static
workload:
  - flows: [ { src: 0, dst: 2, size: 1MB }, { src: 1, dst: 3, size: 1MB } ]
plan:
  targets: { goodput_min: 150Gbps }
  candidates: [ { topology.spines: 1 }, { topology.spines: 2 }, { topology.spines: 4 } ]
",
    );
    let out = d.join("out");
    let o = run_ok(&[
        "plan",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let printed = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(
        std::fs::read_to_string(out.join("plan.txt")).unwrap(),
        printed
    );
    let csv = std::fs::read_to_string(out.join("plan.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(
        csv.lines().nth(2).unwrap().ends_with(",true"),
        "2 spines is the answer: {csv}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("plan.json")).unwrap()).unwrap();
    assert_eq!(json["choice"], 1);
    assert_eq!(json["candidates"].as_array().unwrap().len(), 3);
    assert!(out.join("complete.json").is_file(), "sealed");
    // A second plan into the same folder replaces a sealed one's files.
    run_ok(&[
        "plan",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue 15, item 8: a collective is reported per operation; its chunk transfers are not
/// flows. Without `--flows`, flows.csv has the workload's flows only and the FCT
/// statistics count them only (here one 1 MB flow beside a 16-rank allreduce); with
/// `--flows` every transfer gets a row too. summary.json counts the transfers apart.
#[test]
fn collective_transfers_reach_flows_csv_only_with_flows() {
    let (d, scenario) = scenario_file(
        "transfers",
        "topology: { leaves: 2, spines: 2, hosts_per_leaf: 8, host_link: { rate: 100Gbps, latency: 200ns } }
workload:
  - collective: { op: allreduce, algorithm: ring, size: 1MiB, iters: 2, warmup_iters: 0 }
  - flows: [ { src: 0, dst: 9, size: 1MB } ]
",
    );
    let (a, b) = (d.join("a"), d.join("b"));
    let o = run_ok(&[
        "run",
        scenario.to_str().unwrap(),
        "--out",
        a.to_str().unwrap(),
    ]);
    run_ok(&[
        "run",
        scenario.to_str().unwrap(),
        "--out",
        b.to_str().unwrap(),
        "--flows",
        "--quiet",
    ]);
    let rows = |dir: &Path| {
        std::fs::read_to_string(dir.join("flows.csv"))
            .unwrap()
            .lines()
            .count()
            - 1
    };
    assert_eq!(rows(&a), 1, "the one workload flow");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("summary.json")).unwrap()).unwrap();
    let transfers = summary["transfers"]["count"].as_u64().unwrap();
    assert!(transfers > 100, "{transfers} transfers");
    assert_eq!(
        summary["transfers"]["completed"].as_u64().unwrap(),
        transfers
    );
    assert_eq!(summary["flows"]["count"], 1);
    assert_eq!(
        rows(&b),
        1 + transfers as usize,
        "--flows adds a row per transfer"
    );
    // The same statistics either way: the rows are output, not a change of model.
    assert_eq!(
        std::fs::read(a.join("summary.json")).unwrap(),
        std::fs::read(b.join("summary.json")).unwrap()
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("transfers") && text.contains("collective transfers completed"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue 15, item 9: `validate` says how servers meet the fabric: 16 servers of 2 GPUs
/// and 2 NICs on rails, 4 leaves of 8 ports: rail 0 fills leaves 0-1, rail 1 leaves 2-3.
#[test]
fn validate_shows_servers_and_the_leaves_of_each_rail() {
    let o = run_ok(&[
        "validate",
        root().join("scenarios/multi-plane.yaml").to_str().unwrap(),
    ]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("servers  16 x 2 GPUs, 2 NICs each, wiring rail"),
        "{s}"
    );
    assert!(s.contains("rails    0: leaves 0-1; 1: leaves 2-3"), "{s}");
}

/// Every result file under `dir` (but `perf.json`), by path, with its bytes.
fn tree(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    crate::common::result_files(dir)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(dir.join(&p)).unwrap();
            (p, bytes)
        })
        .collect()
}

/// `run -j N` runs compare sets and repeats N at a time: the folder is the same, file
/// for file and byte for byte, as with one at a time; `-j 0` is refused.
#[test]
fn compare_sets_on_several_cores_write_the_same_bytes() {
    let sc = root().join("scenarios/victim-flow.yaml");
    let sc = sc.to_str().unwrap();
    let (a, b) = (tmpdir("jobs-1"), tmpdir("jobs-3"));
    for (d, j) in [(&a, "1"), (&b, "3")] {
        run_ok(&[
            "run",
            sc,
            "--quiet",
            "--no-plot",
            "--set",
            "repeats=3",
            "-j",
            j,
            "--force",
            "--out",
            d.to_str().unwrap(),
        ]);
    }
    let (ta, tb) = (tree(&a), tree(&b));
    assert!(
        ta.contains_key(Path::new("compare-stats.csv")),
        "{:?}",
        ta.keys()
    );
    assert!(ta.len() > 10, "{:?}", ta.keys());
    assert_eq!(ta.keys().collect::<Vec<_>>(), tb.keys().collect::<Vec<_>>());
    for (p, x) in &ta {
        assert!(x == &tb[p], "{} differs between -j 1 and -j 3", p.display());
    }
    let o = bin().args(["run", sc, "-j", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(crate::common::stderr(&o).contains("-j/--jobs"));
    for d in [a, b] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Spraying or adaptive routing over plain RC is valid but misleads a comparison of
/// routing policies (resends decide the figures): `validate` and `run` say so on
/// standard error, with `--quiet` too, and the run still succeeds; with out-of-order RC
/// nothing is said.
#[test]
fn routing_that_reorders_over_plain_rc_is_warned_of() {
    let sc = root().join("scenarios/quickstart.yaml");
    let d = tmpdir("reorder-warning");
    let out = d.join("run");
    let validate = ["validate", sc.to_str().unwrap()];
    let run = [
        "run",
        sc.to_str().unwrap(),
        "--quiet",
        "--no-plot",
        "--force",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "duration=20us",
    ];
    for (set, warned) in [
        (vec!["routing=adaptive"], true),
        (vec!["routing=spray"], true),
        (
            vec!["routing=adaptive", "transport.rc.out_of_order=true"],
            false,
        ),
    ] {
        for command in [&validate[..], &run[..]] {
            let mut args = command.to_vec();
            for s in &set {
                args.extend(["--set", s]);
            }
            let o = run_ok(&args);
            assert_eq!(
                stderr(&o).contains("over plain (in-order) RC: packets that overtake"),
                warned,
                "{} {set:?}: {}",
                command[0],
                stderr(&o)
            );
        }
    }
}

/// A sweep whose points route per packet over plain RC says so on standard error,
/// once per warning with how many points earn it, and still runs.
#[test]
fn sweep_points_spraying_over_plain_rc_are_warned_of_once() {
    let (d, sc) = scenario_file(
        "sweep-warning",
        "topology: { leaves: 2, spines: 2, hosts_per_leaf: 2, host_link: { rate: 100Gbps, latency: 200ns } }
workload:
  - permutation: { size: 100KB }
sweep:
  grid:
    routing: [ecmp, spray, adaptive]
    seed: [1, 2]
",
    );
    let out = d.join("out");
    let o = run_ok(&[
        "sweep",
        sc.to_str().unwrap(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    for policy in ["spray", "adaptive"] {
        let line = format!("warning: 2 of 6 sweep points: routing `{policy}` over plain");
        assert_eq!(
            stderr(&o).matches(&line).count(),
            1,
            "{policy}: {}",
            stderr(&o)
        );
    }
}

//! Whole outputs (issue 19, item 6): a folder holds one finished run's files or says it
//! does not. A rerun clears the previous run's files (stale compare-set folders included);
//! output a stopped run left is refused without `--force`; two writers cannot share a
//! folder; a killed sweep resumes to the same bytes as an unbroken one; `plot` and `merge`
//! refuse folders that are not finished.

use crate::common::{bin, stderr};
use std::path::{Path, PathBuf};
use std::process::Output;

fn scenario(name: &str) -> String {
    format!("{}/scenarios/{name}.yaml", env!("CARGO_MANIFEST_DIR"))
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("doorbell-out-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn doorbell(args: &[&str], out: &Path) -> Output {
    bin().args(args).arg("--out").arg(out).output().unwrap()
}

#[test]
fn a_rerun_replaces_the_previous_runs_files_and_keeps_the_users() {
    let d = tmpdir("rerun");
    // A compare run writes a folder per set; a plain run into the same folder must not
    // leave them beside its own files.
    std::fs::create_dir_all(&d).unwrap();
    let compare = d.join("compare.yaml");
    std::fs::write(
        &compare,
        "topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 100Gbps, latency: 200ns } }
workload:
  - flows: [ { src: 0, dst: 1, size: 64KB } ]
compare:
  - { name: guide_default_lossy, window_packets: 16 }
  - { name: wide, window_packets: 128 }
",
    )
    .unwrap();
    let o = doorbell(
        &["run", compare.to_str().unwrap(), "--quiet", "--no-plot"],
        &d,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(d.join("guide_default_lossy/summary.json").exists());
    std::fs::write(d.join("notes.txt"), "mine").unwrap();
    let o = doorbell(
        &["run", &scenario("quickstart"), "--quiet", "--no-plot"],
        &d,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        !d.join("guide_default_lossy").exists(),
        "a stale set folder"
    );
    assert!(!d.join("compare.csv").exists(), "a stale compare.csv");
    assert!(d.join("flows.csv").exists() && d.join("complete.json").exists());
    assert!(
        d.join("notes.txt").exists(),
        "a file doorbell never writes stays"
    );
    assert!(compare.exists(), "the scenario file stays");
    assert!(
        !d.join(".doorbell.lock").exists(),
        "the lock goes when the run ends"
    );
    let marker = std::fs::read_to_string(d.join("complete.json")).unwrap();
    let flows = std::fs::metadata(d.join("flows.csv")).unwrap().len();
    assert!(
        marker.contains(&format!("\"flows.csv\": {flows}")),
        "the marker records flows.csv's size ({flows}): {marker}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn output_of_a_stopped_run_is_refused_until_forced_and_plot_refuses_it() {
    let d = tmpdir("stopped");
    let o = doorbell(
        &["run", &scenario("quickstart"), "--quiet", "--no-plot"],
        &d,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // What a kill while writing leaves: files, no marker, a half-written file.
    std::fs::remove_file(d.join("complete.json")).unwrap();
    std::fs::write(d.join(".doorbell-tmp.ports.csv"), "port,na").unwrap();
    let p = bin().arg("plot").arg(&d).output().unwrap();
    assert_eq!(p.status.code(), Some(2), "{}", stderr(&p));
    assert!(stderr(&p).contains("no complete.json"), "{}", stderr(&p));
    let o = doorbell(
        &["run", &scenario("quickstart"), "--quiet", "--no-plot"],
        &d,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("did not finish") && stderr(&o).contains("--force"),
        "{}",
        stderr(&o)
    );
    let o = doorbell(
        &[
            "run",
            &scenario("quickstart"),
            "--quiet",
            "--no-plot",
            "--force",
        ],
        &d,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!d.join(".doorbell-tmp.ports.csv").exists());
    // A data file cut after the run: plot names it and its sizes.
    let full = std::fs::read(d.join("flows.csv")).unwrap();
    std::fs::write(d.join("flows.csv"), &full[..full.len() / 2]).unwrap();
    let p = bin().arg("plot").arg(&d).output().unwrap();
    assert_eq!(p.status.code(), Some(2), "{}", stderr(&p));
    assert!(
        stderr(&p).contains(&format!(
            "flows.csv has {} bytes where its run wrote {}",
            full.len() / 2,
            full.len()
        )),
        "{}",
        stderr(&p)
    );
    // Whole again, plot draws and the marker then lists the charts.
    std::fs::write(d.join("flows.csv"), &full).unwrap();
    let p = bin().arg("plot").arg(&d).output().unwrap();
    assert!(p.status.success(), "{}", stderr(&p));
    let marker = std::fs::read_to_string(d.join("complete.json")).unwrap();
    assert!(marker.contains("fct-cdf.png"), "{marker}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_folder_in_use_is_refused() {
    let d = tmpdir("locked");
    std::fs::create_dir_all(&d).unwrap();
    // This test's own process is alive: its lock is not stale.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    std::fs::write(
        d.join(".doorbell.lock"),
        format!("{} {host}\n", std::process::id()),
    )
    .unwrap();
    let o = doorbell(
        &["run", &scenario("quickstart"), "--quiet", "--no-plot"],
        &d,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("in use by another doorbell"),
        "{}",
        stderr(&o)
    );
    assert!(!d.join("summary.json").exists(), "refused before running");
    let o = doorbell(
        &["sweep", &scenario("sweep-load"), "--quiet", "--no-plot"],
        &d,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

/// Rows of a journal file that are whole lines (the header excluded).
fn journal_rows(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("sweep-progress.jsonl"))
        .map(|t| t.matches('\n').count().saturating_sub(1))
        .unwrap_or(0)
}

#[test]
fn a_killed_sweep_resumes_to_the_bytes_of_an_unbroken_one() {
    let (a, b) = (tmpdir("sweep-killed"), tmpdir("sweep-whole"));
    // 12 runs of about 0.2 s each at -j 1 (shorter runs in a debug build): long enough
    // to be killed part-way.
    let until = if cfg!(debug_assertions) {
        "workload.0.poisson.until=1ms"
    } else {
        "workload.0.poisson.until=8ms"
    };
    let args = [
        "sweep",
        &scenario("sweep-load"),
        "--quiet",
        "--no-plot",
        "-j",
        "1",
        "--set",
        until,
    ];
    let mut child = bin()
        .args(args)
        .arg("--out")
        .arg(&a)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill once two runs are recorded (the journal is written as runs finish).
    let mut killed = false;
    for _ in 0..6000 {
        if journal_rows(&a) >= 2 {
            child.kill().unwrap();
            killed = true;
            break;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.wait().unwrap();
    assert!(
        killed,
        "the sweep ended before two of its twelve runs were recorded"
    );
    let done = journal_rows(&a);
    assert!(done < 12, "killed with {done} of 12 runs done");
    assert!(!a.join("complete.json").exists() && !a.join("sweep.csv").exists());
    // A plain rerun is refused and says how to resume.
    let o = bin().args(args).arg("--out").arg(&a).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));
    // Resuming runs only the rest.
    let resume = |extra: &[&str]| {
        bin()
            .args(args)
            .args(extra)
            .args(["--resume", "--out"])
            .arg(&a)
            .output()
            .unwrap()
    };
    let o = resume(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = bin().args(args).arg("--out").arg(&b).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["sweep.csv", "sweep.json"] {
        assert!(
            std::fs::read(a.join(f)).unwrap() == std::fs::read(b.join(f)).unwrap(),
            "{f}: the resumed sweep differs from the unbroken one"
        );
    }
    assert!(
        !a.join("sweep-progress.jsonl").exists(),
        "the journal goes at the end"
    );
    // Resuming a finished sweep does nothing; resuming another sweep there is refused.
    let o = resume(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = resume(&["--seed", "3"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("another sweep"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn a_journal_line_cut_by_a_kill_is_run_again() {
    let d = tmpdir("journal-cut");
    let args = ["sweep", &scenario("sweep-load"), "--quiet", "--no-plot"];
    let o = bin().args(args).arg("--out").arg(&d).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let whole = std::fs::read(d.join("sweep.csv")).unwrap();
    // Rebuild the journal such a sweep leaves when killed mid-row: a header, three
    // rows, and half of a fourth.
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("sweep.json")).unwrap()).unwrap();
    let header = serde_json::json!({
        "scenario": file["scenario"], "hash": file["hash"],
        "points": file["points"], "repeats": file["repeats"],
    });
    let rows = file["rows"].as_array().unwrap();
    let mut journal = format!("{header}\n");
    for r in &rows[..3] {
        journal.push_str(&format!("{r}\n"));
    }
    let cut = rows[3].to_string();
    journal.push_str(&cut[..cut.len() / 2]);
    for f in ["complete.json", "sweep.csv", "sweep.json"] {
        std::fs::remove_file(d.join(f)).unwrap();
    }
    std::fs::write(d.join("sweep-progress.jsonl"), journal).unwrap();
    let o = bin()
        .args(args)
        .args(["--resume", "--out"])
        .arg(&d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(d.join("sweep.csv")).unwrap() == whole);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn merge_refuses_a_shard_that_did_not_finish() {
    let d = tmpdir("merge");
    let sc = scenario("sweep-load");
    for i in 0..2 {
        let o = doorbell(
            &["sweep", &sc, "--quiet", "--shard", &format!("{i}/2")],
            &d.join(format!("s{i}")),
        );
        assert!(o.status.success(), "{}", stderr(&o));
    }
    std::fs::remove_file(d.join("s1/complete.json")).unwrap();
    let o = bin()
        .arg("merge")
        .arg(d.join("s0"))
        .arg(d.join("s1"))
        .arg("--out")
        .arg(d.join("m"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no complete.json"), "{}", stderr(&o));
    assert!(!d.join("m/sweep.csv").exists());
    let _ = std::fs::remove_dir_all(&d);
}

/// Issue 15, item 6: output stays where the user points it. A run without `--out` goes to
/// `out/<stem>/` under the working directory (git-ignored), never to `results/`, which
/// holds the committed reference output; a compare set's name, which names its folder,
/// cannot lead out of the output folder.
#[test]
fn default_output_is_out_stem_and_set_names_stay_inside_it() {
    let d = tmpdir("default-out");
    std::fs::create_dir_all(&d).unwrap();
    let yaml = "topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 100Gbps } }
workload:
  - flows: [ { src: 0, dst: 1, size: 10KB } ]
";
    std::fs::write(d.join("tiny.yaml"), yaml).unwrap();
    let o = bin()
        .current_dir(&d)
        .args(["run", "tiny.yaml", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(d.join("out/tiny/summary.json").exists());
    assert!(d.join("out/tiny/complete.json").exists());
    assert!(!d.join("results").exists());
    for bad in ["../../escaped", "a/b", ".hidden", "..", "x\\\\y"] {
        std::fs::write(
            d.join("sets.yaml"),
            format!("{yaml}compare:\n  - {{ name: \"{bad}\", timeout: 14 }}\n"),
        )
        .unwrap();
        let o = bin()
            .current_dir(&d)
            .args(["run", "sets.yaml", "--quiet"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("compare[0].name") && e.contains("letters, digits"),
            "{bad}: {e}"
        );
    }
    assert!(!d.parent().unwrap().join("escaped").exists());
    // A name that is a file doorbell writes beside the sets, or two names that differ
    // only in case, would clash in the output folder.
    for (sets, want) in [
        (
            "  - { name: compare.csv, timeout: 14 }\n",
            "is a file or folder doorbell writes",
        ),
        (
            "  - { name: Points, timeout: 14 }\n",
            "is a file or folder doorbell writes",
        ),
        (
            "  - { name: a, timeout: 14 }\n  - { name: A, timeout: 18 }\n",
            "differ only in case",
        ),
    ] {
        std::fs::write(d.join("sets.yaml"), format!("{yaml}compare:\n{sets}")).unwrap();
        let o = bin()
            .current_dir(&d)
            .args(["run", "sets.yaml", "--quiet"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{sets}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{sets}: {}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&d);
}

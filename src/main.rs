//! The `doorbell` command line.

use anyhow::Context;
use clap::{Parser, Subcommand};
use doorbell::metrics::{summarize, PerfReport};
use doorbell::report::{describe_fabric, render_summary, write_files};
use doorbell::scenario::{self, Overrides};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "doorbell",
    version,
    about = "Deterministic packet-level simulator of leaf-spine RDMA fabrics"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario and write its results.
    Run {
        /// The scenario YAML file.
        scenario: PathBuf,
        /// Output folder; default `results/<scenario file stem>/`.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Override a field: `--set topology.spines=4` (repeatable; the value is YAML).
        #[arg(long = "set", value_name = "PATH=VALUE")]
        set: Vec<String>,
        /// Print nothing but errors.
        #[arg(long)]
        quiet: bool,
    },
    /// Check a scenario and print the resolved fabric.
    Validate {
        scenario: PathBuf,
        #[arg(long = "set", value_name = "PATH=VALUE")]
        set: Vec<String>,
    },
}

fn default_out(scenario: &Path) -> PathBuf {
    let stem = scenario
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into());
    PathBuf::from("results").join(stem)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.cmd {
        Cmd::Validate { scenario, set } => {
            match scenario::load(&scenario, &Overrides { seed: None, set }) {
                Ok(sc) => {
                    println!(
                        "{}: ok ({} workload items)",
                        scenario.display(),
                        sc.workload.len()
                    );
                    print!("{}", describe_fabric(&sc));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Cmd::Run {
            scenario,
            out,
            seed,
            set,
            quiet,
        } => {
            let sc = match scenario::load(&scenario, &Overrides { seed, set }) {
                Ok(sc) => sc,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let dir = out.unwrap_or_else(|| default_out(&scenario));
            match run(&sc, &dir, quiet) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

fn run(sc: &scenario::Scenario, dir: &Path, quiet: bool) -> anyhow::Result<()> {
    if !sc.compare.is_empty() {
        return run_compare(sc, dir, quiet);
    }
    let out = doorbell::sim::run(sc);
    let summary = summarize(sc, &out);
    let perf = PerfReport::new(&out);
    write_files(dir, sc, &out, &summary, &perf)
        .with_context(|| format!("writing results to {}", dir.display()))?;
    if !quiet {
        print!("{}", render_summary(sc, &summary, &perf));
        println!(
            "results  {}/{{summary.json, flows.csv, ports.csv, perf.json}}",
            dir.display()
        );
    }
    Ok(())
}

/// `compare:`: the same scenario once per RC parameter set, side by side.
fn run_compare(sc: &scenario::Scenario, dir: &Path, quiet: bool) -> anyhow::Result<()> {
    use doorbell::compare;
    let sets = compare::run_sets(sc);
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for s in &sets {
        let sub = dir.join(&s.name);
        write_files(
            &sub,
            &s.scenario,
            &s.out,
            &s.summary,
            &PerfReport::new(&s.out),
        )
        .with_context(|| format!("writing results to {}", sub.display()))?;
    }
    std::fs::write(dir.join("compare.csv"), compare::compare_csv(&sets))
        .with_context(|| format!("writing {}", dir.join("compare.csv").display()))?;
    let windows = compare::window_rows(&sets);
    // The window table needs explicit flows to report and a window to compare with.
    let varied_window = !windows.is_empty()
        && sets.iter().any(|s| {
            matches!(&s.scenario.transport, scenario::Transport::Rc(rc) if rc.params.window_packets.is_some())
        });
    if varied_window {
        std::fs::write(dir.join("window.csv"), compare::window_csv(&windows))
            .with_context(|| format!("writing {}", dir.join("window.csv").display()))?;
    }
    let host_csv = compare::host_csv(&sets);
    if let Some(csv) = &host_csv {
        std::fs::write(dir.join("host.csv"), csv)
            .with_context(|| format!("writing {}", dir.join("host.csv").display()))?;
    }
    let coll_csv = compare::collective_csv(&sets);
    if let Some(csv) = &coll_csv {
        std::fs::write(dir.join("collective.csv"), csv)
            .with_context(|| format!("writing {}", dir.join("collective.csv").display()))?;
    }
    if !quiet {
        println!(
            "doorbell: {} (seed {}), {} RC parameter sets",
            sc.name,
            sc.seed,
            sets.len()
        );
        print!("{}", describe_fabric(sc));
        print!("{}", compare::render_table(&sets));
        if varied_window {
            print!("{}", compare::render_window_table(&windows));
        }
        if host_csv.is_some() {
            print!("{}", compare::render_host_table(&sets));
        }
        if coll_csv.is_some() {
            print!("{}", compare::render_collective_table(&sets));
        }
        println!(
            "results  {}/{{compare.csv{}{}{}}} and one folder per set",
            dir.display(),
            if varied_window { ", window.csv" } else { "" },
            if host_csv.is_some() { ", host.csv" } else { "" },
            if coll_csv.is_some() {
                ", collective.csv"
            } else {
                ""
            }
        );
    }
    Ok(())
}

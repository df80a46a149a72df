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

//! The `doorbell` command line.

use anyhow::Context;
use clap::{Parser, Subcommand};
use doorbell::metrics::{summarize, PerfReport};
use doorbell::outdir::{self, write_atomic, Claim};
use doorbell::report::{describe_fabric, render_summary, write_files};
use doorbell::scenario::{self, Overrides};
use doorbell::sim::footprint;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `print!` that ignores a closed stdout (`doorbell validate X | head -1`): a reader that
/// stopped reading is not an error, and the results are in files anyway. `print!` would
/// panic there (exit 101).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

/// `println!` that ignores a closed stdout (see [`out!`]).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod cli_progress;
mod cli_resources;
mod cli_validate;
use cli_progress::{clear_progress, show_progress};
use cli_resources::{footprint_of, preflight, threads_for_run};

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
        /// Output folder; default `out/<scenario file stem>/`.
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
        /// Do not draw the plots.
        #[arg(long)]
        no_plot: bool,
        /// Clear doorbell output left in the folder by a run that did not finish.
        #[arg(long)]
        force: bool,
        /// Also write a row per collective transfer into flows.csv.
        #[arg(long)]
        flows: bool,
        /// Compare sets (and repeats) run at once, each on its own core; default 1. The
        /// results are the same for any value.
        #[arg(short = 'j', long = "jobs")]
        jobs: Option<usize>,
        /// Split each run's fabric over this many threads (blocks of leaves and spines,
        /// advancing side by side in conservative windows); default 1. The results are
        /// the same for any value. A scenario the split does not cover yet runs on one
        /// thread, and the run says why.
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Draw the standard curves from a run's or sweep's results folder (PNG and SVG).
    Plot { dir: PathBuf },
    /// Find the cheapest candidate fabric in the scenario's `plan:` that meets its targets.
    Plan {
        scenario: PathBuf,
        #[arg(long = "set", value_name = "PATH=VALUE")]
        set: Vec<String>,
        /// Also write plan.txt, plan.csv and plan.json (the evidence) into this folder.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Clear doorbell output left in `--out` by a plan that did not finish.
        #[arg(long)]
        force: bool,
    },
    /// Run a scenario's `sweep:` points (in parallel; a shard of them with --shard).
    Sweep {
        scenario: PathBuf,
        /// Output folder; default `out/<stem>/sweep/` (or `sweep-shard-I-of-N/`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Threads; default: every core.
        #[arg(short = 'j', long = "jobs")]
        jobs: Option<usize>,
        /// Run shard I of N (points i with i mod N == I); default from
        /// SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT when set.
        #[arg(long, value_name = "I/N")]
        shard: Option<String>,
        /// Also write each point's full results under `points/`.
        #[arg(long)]
        keep_points: bool,
        #[arg(long)]
        seed: Option<u64>,
        #[arg(long = "set", value_name = "PATH=VALUE")]
        set: Vec<String>,
        /// No progress bar, no table.
        #[arg(long)]
        quiet: bool,
        /// Do not draw the plots.
        #[arg(long)]
        no_plot: bool,
        /// Clear doorbell output left in the folder by a sweep that did not finish.
        #[arg(long, conflicts_with = "resume")]
        force: bool,
        /// Finish a sweep that was stopped: run only the points its folder lacks.
        #[arg(long)]
        resume: bool,
    },
    /// Join sweep shards into one `sweep.csv`, as the unsharded sweep writes it.
    Merge {
        /// Shard folders (each with a `sweep.json`).
        dirs: Vec<PathBuf>,
        #[arg(long)]
        out: PathBuf,
        /// Clear doorbell output left in the folder by a merge that did not finish.
        #[arg(long)]
        force: bool,
    },
    /// Check a scenario and print the resolved fabric.
    Validate {
        scenario: PathBuf,
        #[arg(long = "set", value_name = "PATH=VALUE")]
        set: Vec<String>,
    },
    /// Write the first training item's step as a doorbell training trace (JSON), to
    /// replay with `workload: - trace: { file }` or edit.
    Trace {
        scenario: PathBuf,
        #[arg(long = "set", value_name = "PATH=VALUE")]
        set: Vec<String>,
        /// The trace file to write.
        #[arg(long)]
        out: PathBuf,
    },
}

fn default_out(scenario: &Path) -> PathBuf {
    let stem = scenario
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into());
    // `results/` holds the committed reference output (`scripts/regenerate-results.sh`
    // writes it, with `--out`); a user's runs go under `out/`, which git ignores.
    PathBuf::from("out").join(stem)
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
    // A testing knob: retire finished transfers as early as they can be
    // (`sim::retire`), to show that retiring them changes no result.
    if let Ok(v) = std::env::var("DOORBELL_SWEEP_MIN") {
        match v.trim().parse::<usize>() {
            Ok(n) if n >= 1 => doorbell::sim::retire::set_sweep_min(n),
            _ => {
                eprintln!(
                    "error: DOORBELL_SWEEP_MIN: expected a whole number of at least 1, found `{v}`"
                );
                return ExitCode::from(2);
            }
        }
    }
    // How much work a split run must find per window to stay split (`run --threads`;
    // 0: always split).
    if let Ok(v) = std::env::var("DOORBELL_SPLIT_MIN_EVENTS") {
        match v.trim().parse::<u64>() {
            Ok(n) => doorbell::sim::set_min_events_per_window(n),
            _ => {
                eprintln!(
                    "error: DOORBELL_SPLIT_MIN_EVENTS: expected a whole number of events (0 or more), found `{v}`"
                );
                return ExitCode::from(2);
            }
        }
    }
    match cli.cmd {
        Cmd::Validate { scenario, set } => cli_validate::validate_cmd(&scenario, set),
        Cmd::Trace { scenario, set, out } => cli_validate::trace_cmd(&scenario, set, &out),
        Cmd::Sweep {
            scenario,
            out,
            jobs,
            shard,
            keep_points,
            seed,
            set,
            quiet,
            no_plot,
            force,
            resume,
        } => sweep_cmd(SweepArgs {
            scenario,
            out,
            jobs,
            shard,
            keep_points,
            overrides: Overrides { seed, set },
            quiet,
            plot: !no_plot,
            claim: if resume {
                Claim::Resume
            } else if force {
                Claim::Force
            } else {
                Claim::Fresh
            },
        }),
        Cmd::Plot { dir } => plot_cmd(&dir),
        Cmd::Merge { dirs, out, force } => merge_cmd(&dirs, &out, force),
        Cmd::Plan {
            scenario,
            set,
            out,
            force,
        } => match doorbell::plan::load(&scenario, &Overrides { seed: None, set }) {
            Ok(mut p) => {
                // The output folder is checked before the candidates run, not after.
                let how = if force { Claim::Force } else { Claim::Fresh };
                if let Some(Err(e)) = out.as_ref().map(|d| outdir::claim(d, how)) {
                    eprintln!("error: {e}");
                    return ExitCode::from(e.exit_code());
                }
                for (w, n) in p.advisories() {
                    eprintln!("warning: {n} of {} candidates: {w}", p.candidates.len());
                }
                p.progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
                let (choice, ev) = p.decide();
                out!("{}", p.report(choice, &ev));
                if let Some(Err(e)) = out.map(|d| p.write_files(&d, force, choice, &ev)) {
                    eprintln!("error: {e:#}");
                    return ExitCode::from(1);
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Cmd::Run {
            scenario,
            out,
            seed,
            set,
            quiet,
            no_plot,
            force,
            flows,
            jobs,
            threads,
        } => {
            let jobs = match jobs {
                Some(0) => {
                    eprintln!("error: -j/--jobs: expected at least 1 (runs at once)");
                    return ExitCode::from(2);
                }
                j => j.unwrap_or(1),
            };
            let threads = match threads {
                Some(0) => {
                    eprintln!("error: --threads: expected at least 1 (threads per run)");
                    return ExitCode::from(2);
                }
                t => t.unwrap_or(1),
            };
            let sc = match scenario::load(&scenario, &Overrides { seed, set }) {
                Ok(sc) => sc,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            // Printed with --quiet too: the figures the run writes depend on them.
            for w in scenario::advice::advisories(&sc) {
                eprintln!("warning: {w}");
            }
            let (f, runs) = footprint_of(&sc);
            let (threads, copies) = threads_for_run(&sc, threads, jobs, runs, quiet);
            doorbell::sim::set_threads(threads);
            // Each partition holds a copy of the whole fabric and workload.
            let f = (1..copies).fold(f, |a, _| a + f);
            if let Err(code) = preflight(f, runs) {
                return code;
            }
            let dir = out.unwrap_or_else(|| default_out(&scenario));
            // Claimed before the run, so a refusal costs nothing.
            let claimed = match outdir::claim(&dir, if force { Claim::Force } else { Claim::Fresh })
            {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(e.exit_code());
                }
            };
            // One progress line follows one run at a time.
            show_progress(quiet || (jobs > 1 && sc.compare.len() > 1));
            match run(&sc, &claimed, quiet, !no_plot, flows, jobs) {
                Ok(Checks {
                    held: true,
                    stalled: false,
                }) => ExitCode::SUCCESS,
                // The results are written, but the model broke one of its own rules.
                Ok(Checks { held: false, .. }) => ExitCode::from(3),
                // The results are written, but flows were left that could never finish.
                Ok(Checks { stalled: true, .. }) => ExitCode::from(4),
                Err(e) if e.downcast_ref::<Refused>().is_some() => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// An input the run cannot honour: exit 2, not 1.
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// A run stopped for memory: its results are not whole, and nothing is written.
fn out_of_memory(label: Option<&str>, out: &doorbell::sim::RunOutput) -> Result<(), Refused> {
    match out.out_of_memory {
        None => Ok(()),
        Some(rss) => Err(Refused(format!(
            "the run{} stopped at {:.1} us of simulated time: it held {} of memory, past 90% of what this machine allows (set {} to change the limit); shrink the workload (fewer sizes, iterations or ranks; fewer or larger flows); no results were written",
            label.map_or(String::new(), |n| format!(" ({n})")),
            out.end.as_us_f64(),
            footprint::human(rss as f64),
            footprint::LIMIT_VAR
        ))),
    }
}

/// Draws the folder's charts (when asked) and seals it, its sealed-to-be sub-folders
/// (`subs`) first.
fn plot_and_seal(dir: &Path, kind: &str, subs: &[PathBuf], plot: bool) -> anyhow::Result<()> {
    if plot {
        doorbell::plot::plot_dir(dir)
            .map_err(|e| anyhow::anyhow!("plotting {}: {e}", dir.display()))?;
    }
    for s in subs {
        outdir::seal(s, "run").with_context(|| format!("sealing {}", s.display()))?;
    }
    outdir::seal(dir, kind).with_context(|| format!("sealing {}", dir.display()))
}

/// What a finished run's self-checks found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Checks {
    /// Every invariant held (else: exit 3).
    held: bool,
    /// The run (or a compare set) stalled with flows that could never finish (exit 4).
    stalled: bool,
}

/// Runs `sc` into the claimed folder; returns what its self-checks found.
fn run(
    sc: &scenario::Scenario,
    claimed: &outdir::OutDir,
    quiet: bool,
    plot: bool,
    transfers: bool,
    jobs: usize,
) -> anyhow::Result<Checks> {
    let dir = claimed.path();
    if transfers {
        // A row per transfer: keep their records (they retire otherwise).
        doorbell::sim::retire::set_keep_transfer_records();
    }
    if !sc.compare.is_empty() {
        return run_compare(sc, dir, quiet, plot, transfers, jobs);
    }
    let out = doorbell::sim::run(sc);
    clear_progress();
    out_of_memory(None, &out)?;
    let summary = summarize(sc, &out);
    let perf = PerfReport::new(&out);
    write_files(dir, sc, &out, &summary, &perf, transfers)
        .with_context(|| format!("writing results to {}", dir.display()))?;
    plot_and_seal(dir, "run", &[], plot)?;
    if !quiet {
        out!("{}", render_summary(sc, &summary, &perf));
        let extra = [
            (!summary.collectives.is_empty(), ", collective.csv"),
            (!summary.training.is_empty(), ", training.csv"),
        ]
        .iter()
        .filter(|x| x.0)
        .map(|x| x.1)
        .collect::<String>();
        outln!(
            "results  {}/{{summary.json, flows.csv, ports.csv, perf.json{extra}}}",
            dir.display()
        );
    }
    Ok(report_checks(None, &summary))
}

/// Says on stderr (so `--quiet` does not hide it) why a stalled run stalled and which
/// invariant a run broke.
fn report_checks(set: Option<&str>, s: &doorbell::metrics::Summary) -> Checks {
    let at = set.map_or(String::new(), |n| format!(" (set {n})"));
    if let Some(w) = &s.watchdog {
        eprintln!(
            "warning{at}: the watchdog stopped the run at {:.3} s of simulated time: nothing moved for {:.3} s (its bound, `watchdog`, is {:.3} s) and only timers were left; it can never finish:",
            w.stopped_at_us / 1e6,
            (w.stopped_at_us - w.last_progress_us) / 1e6,
            w.bound_us / 1e6
        );
    } else if s.stalled {
        eprintln!("warning{at}: the run ran out of events with work left; it can never finish:");
    }
    if s.stalled {
        for st in &s.invariants.stalls {
            match st.flow {
                Some(f) => eprintln!("  flow {f}: {}", st.reason),
                None => eprintln!("  {}", st.reason),
            }
        }
    }
    for v in &s.invariants.violations {
        eprintln!(
            "error{at}: invariant {} broken: {} (a bug in doorbell: please report it with the scenario; results are in summary.json `invariants`)",
            v.rule, v.detail
        );
    }
    Checks {
        held: s.invariants.held(),
        stalled: s.stalled,
    }
}

/// `compare:`: the same scenario once per RC parameter set, side by side.
fn run_compare(
    sc: &scenario::Scenario,
    dir: &Path,
    quiet: bool,
    plot: bool,
    transfers: bool,
    jobs: usize,
) -> anyhow::Result<Checks> {
    use doorbell::compare;
    let sets = compare::run_sets_on(sc, jobs);
    for s in &sets {
        out_of_memory(Some(&format!("set {}", s.name)), &s.out)?;
    }
    // `repeats`: the sets again at repeats 1..N, one seed per repeat for every set (all
    // run before anything is written, so a run stopped for memory leaves nothing).
    let more =
        compare::repeat_summaries_on(sc, jobs, |label, out| out_of_memory(Some(label), out))?;
    clear_progress();
    for s in &sets {
        let sub = dir.join(&s.name);
        write_files(
            &sub,
            &s.scenario,
            &s.out,
            &s.summary,
            &PerfReport::new(&s.out),
            transfers,
        )
        .with_context(|| format!("writing results to {}", sub.display()))?;
    }
    write_atomic(
        &dir.join("compare.csv"),
        compare::compare_csv(&sets).as_bytes(),
    )
    .with_context(|| format!("writing {}", dir.join("compare.csv").display()))?;
    let windows = compare::window_rows(&sets);
    // The window table needs explicit flows to report and a window to compare with.
    let varied_window = !windows.is_empty()
        && sets.iter().any(|s| {
            matches!(&s.scenario.transport, scenario::Transport::Rc(rc) if rc.params.window_packets.is_some())
        });
    if varied_window {
        write_atomic(
            &dir.join("window.csv"),
            compare::window_csv(&windows).as_bytes(),
        )
        .with_context(|| format!("writing {}", dir.join("window.csv").display()))?;
    }
    let host_csv = compare::host_csv(&sets);
    if let Some(csv) = &host_csv {
        write_atomic(&dir.join("host.csv"), csv.as_bytes())
            .with_context(|| format!("writing {}", dir.join("host.csv").display()))?;
    }
    let coll_csv = compare::collective_csv(&sets);
    if let Some(csv) = &coll_csv {
        write_atomic(&dir.join("collective.csv"), csv.as_bytes())
            .with_context(|| format!("writing {}", dir.join("collective.csv").display()))?;
    }
    let train_csv = compare::training_csv(&sets);
    if let Some(csv) = &train_csv {
        write_atomic(&dir.join("training.csv"), csv.as_bytes())
            .with_context(|| format!("writing {}", dir.join("training.csv").display()))?;
    }
    if !more.is_empty() {
        write_atomic(
            &dir.join("compare-stats.csv"),
            compare::stats_csv(&sets, &more).as_bytes(),
        )
        .with_context(|| format!("writing {}", dir.join("compare-stats.csv").display()))?;
    }
    let subs: Vec<PathBuf> = sets.iter().map(|s| dir.join(&s.name)).collect();
    plot_and_seal(dir, "compare", &subs, plot)?;
    if !quiet {
        outln!(
            "doorbell: {} (seed {}), {} RC parameter sets",
            sc.name,
            sc.seed,
            sets.len()
        );
        out!("{}", describe_fabric(sc));
        out!("{}", compare::render_table(&sets));
        if varied_window {
            out!("{}", compare::render_window_table(&windows));
        }
        if host_csv.is_some() {
            out!("{}", compare::render_host_table(&sets));
        }
        if coll_csv.is_some() {
            out!("{}", compare::render_collective_table(&sets));
        }
        if train_csv.is_some() {
            out!("{}", compare::render_training_table(&sets));
        }
        if !more.is_empty() {
            out!("{}", compare::render_stats_table(&sets, &more));
        }
        outln!(
            "results  {}/{{compare.csv{}{}{}{}{}}} and one folder per set",
            dir.display(),
            if more.is_empty() {
                ""
            } else {
                ", compare-stats.csv"
            },
            if varied_window { ", window.csv" } else { "" },
            if host_csv.is_some() { ", host.csv" } else { "" },
            if coll_csv.is_some() {
                ", collective.csv"
            } else {
                ""
            },
            if train_csv.is_some() {
                ", training.csv"
            } else {
                ""
            }
        );
    }
    let mut all = Checks {
        held: true,
        stalled: false,
    };
    let named = sets.iter().map(|s| (s.name.clone(), &s.summary));
    let repeated = more.iter().enumerate().flat_map(|(r, rep)| {
        sets.iter()
            .zip(rep)
            .map(move |(s, m)| (format!("{}, repeat {}", s.name, r + 1), m))
    });
    for (name, summary) in named.chain(repeated) {
        let c = report_checks(Some(&name), summary);
        all.held &= c.held;
        all.stalled |= c.stalled;
    }
    Ok(all)
}

struct SweepArgs {
    scenario: PathBuf,
    out: Option<PathBuf>,
    jobs: Option<usize>,
    shard: Option<String>,
    keep_points: bool,
    overrides: Overrides,
    quiet: bool,
    plot: bool,
    claim: Claim,
}

fn sweep_cmd(a: SweepArgs) -> ExitCode {
    use doorbell::sweep;
    use std::sync::atomic::{AtomicU64, Ordering};
    let plan = match sweep::plan(&a.scenario, &a.overrides) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // One pass over the points' scenarios: the warnings they earn (printed with --quiet
    // too: the figures the points write depend on them) and the biggest point's memory.
    let mut biggest = footprint::Footprint::default();
    let points = plan.points.iter().filter_map(|p| plan.scenario(p, 0).ok());
    let advice = doorbell::scenario::advice::across(points.inspect(|sc| {
        let f = footprint::estimate(sc);
        // The last of equals, as `max_by` takes it.
        if f.bytes_at_most() >= biggest.bytes_at_most() {
            biggest = f;
        }
    }));
    for (w, n) in advice {
        eprintln!("warning: {n} of {} sweep points: {w}", plan.points.len());
    }
    let shard = match doorbell::sweep::shard_of(a.shard.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let dir = a.out.clone().unwrap_or_else(|| {
        let base = default_out(&a.scenario);
        match shard {
            None => base.join("sweep"),
            Some((i, n)) => base.join(format!("sweep-shard-{i}-of-{n}")),
        }
    });
    let claimed = match outdir::claim(&dir, a.claim) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let header = plan.journal_header(shard);
    let all_jobs = plan.jobs(shard);
    let resume = a.claim == Claim::Resume;
    let done = match resumed_rows(&dir, resume, &claimed, &header, &plan, shard, &all_jobs) {
        Ok(Some(rows)) => rows,
        Ok(None) => {
            if !a.quiet {
                outln!("{}: this sweep is already complete", dir.display());
            }
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    };
    let journal = if resume && dir.join(outdir::JOURNAL).exists() {
        sweep::Journal::reopen(&dir)
    } else {
        sweep::Journal::start(&dir, &header)
    };
    let journal = match journal {
        Ok(j) => j,
        Err(e) => {
            eprintln!("error: {}: {e}", dir.join(outdir::JOURNAL).display());
            return ExitCode::from(1);
        }
    };
    let finished: std::collections::BTreeSet<(u32, u32)> =
        done.iter().map(|r| (r.point, r.repeat)).collect();
    let jobs: Vec<(u32, u32)> = all_jobs
        .iter()
        .copied()
        .filter(|j| !finished.contains(j))
        .collect();
    let threads = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // Memory: the biggest point's run, as many at once as there are threads.
    let concurrent = threads.min(jobs.len()).max(1);
    let together = (1..concurrent).fold(biggest, |acc, _| acc + biggest);
    if let Err(code) = preflight(together, concurrent) {
        return code;
    }
    let bar = if a.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let b = indicatif::ProgressBar::new(jobs.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} points, {elapsed} elapsed, ETA {eta}, {msg}",
            )
            .expect("template"),
        );
        b
    };
    let started = std::time::Instant::now();
    let events = AtomicU64::new(0);
    let keep = a.keep_points.then(|| dir.join("points"));
    // The first failure: its exit code and message.
    let failed: std::sync::Mutex<Option<(u8, String)>> = std::sync::Mutex::new(None);
    let mut rows = sweep::run_jobs(&plan, &jobs, threads, &|res| {
        let total = events.fetch_add(res.events, Ordering::Relaxed) + res.events;
        bar.set_message(format!(
            "{:.1} M events/s",
            total as f64 / started.elapsed().as_secs_f64().max(1e-9) / 1e6
        ));
        bar.inc(1);
        let fail = |code: u8, e: String| {
            failed.lock().expect("lock").get_or_insert((code, e));
        };
        if let Err(e) = out_of_memory(
            Some(&format!(
                "point {} repeat {}",
                res.row.point, res.row.repeat
            )),
            &res.out,
        ) {
            // Not journalled: a resumed sweep runs it again.
            fail(2, e.to_string());
            return;
        }
        if let Some(k) = &keep {
            let d = k.join(format!("p{}-r{}", res.row.point, res.row.repeat));
            let written = write_files(
                &d,
                &res.scenario,
                &res.out,
                &res.summary,
                &PerfReport::new(&res.out),
                false,
            )
            .and_then(|()| outdir::seal(&d, "run"));
            if let Err(e) = written {
                fail(1, format!("writing {}: {e}", d.display()));
            }
        }
        // Recorded after its point's files, so a resumed sweep never lacks them.
        if let Err(e) = journal.record(&res.row) {
            fail(1, format!("{}: {e}", dir.join(outdir::JOURNAL).display()));
        }
    });
    bar.finish_and_clear();
    if let Some((code, e)) = failed.lock().expect("lock").take() {
        eprintln!("error: {e}");
        return ExitCode::from(code);
    }
    rows.extend(done.iter().cloned());
    rows.sort_by_key(|r| (r.point, r.repeat));
    let file = plan.file(shard, rows);
    let finish = || -> anyhow::Result<()> {
        sweep::write(&dir, &file).with_context(|| format!("writing {}", dir.display()))?;
        let subs: Vec<PathBuf> = keep.iter().cloned().collect();
        for k in &subs {
            outdir::seal(k, "points").with_context(|| format!("sealing {}", k.display()))?;
        }
        // Point folders are sealed as they are written; `points/` and the sweep last.
        plot_and_seal(&dir, "sweep", &[], a.plot && shard.is_none())?;
        std::fs::remove_file(dir.join(outdir::JOURNAL))
            .with_context(|| format!("removing {}", dir.join(outdir::JOURNAL).display()))
    };
    if let Err(e) = finish() {
        eprintln!("error: {e:#}");
        return ExitCode::from(1);
    }
    if !a.quiet {
        outln!(
            "doorbell: sweep of {} ({} points x {} repeats{}) on {threads} threads in {:.2} s{}",
            plan.stem,
            plan.points.len(),
            plan.repeats,
            shard.map_or(String::new(), |(i, n)| format!(
                ", shard {i} of {n}: {} runs",
                all_jobs.len()
            )),
            started.elapsed().as_secs_f64(),
            if done.is_empty() {
                String::new()
            } else {
                format!(
                    "; resumed: {} of {} runs were already done",
                    done.len(),
                    all_jobs.len()
                )
            }
        );
        outln!("results  {}/{{sweep.csv, sweep.json}}", dir.display());
    }
    ExitCode::SUCCESS
}

/// For `sweep --resume`: the rows the folder's journal already holds (none for a fresh
/// start), or `None` when the folder holds this sweep finished. Refuses a journal or a
/// finished sweep of another scenario, shard or set of overrides.
fn resumed_rows(
    dir: &Path,
    resume: bool,
    claimed: &outdir::OutDir,
    header: &doorbell::sweep::JournalHeader,
    plan: &doorbell::sweep::SweepPlan,
    shard: Option<(u32, u32)>,
    jobs: &[(u32, u32)],
) -> Result<Option<Vec<doorbell::sweep::Row>>, String> {
    if !resume {
        return Ok(Some(Vec::new()));
    }
    let Some(prev) = &claimed.previous else {
        // Nothing finished there: the journal's rows, if any.
        return match doorbell::sweep::read_journal(dir)? {
            Some((h, rows)) => {
                if &h != header {
                    return Err(format!(
                        "{} belongs to another sweep (scenario {}, hash {}, shard {:?}); run without --resume to start this one over",
                        outdir::JOURNAL, h.scenario, h.hash, h.shard
                    ));
                }
                let wanted: std::collections::BTreeSet<&(u32, u32)> = jobs.iter().collect();
                Ok(Some(
                    rows.into_iter()
                        .filter(|r| wanted.contains(&(r.point, r.repeat)))
                        .collect(),
                ))
            }
            None => Ok(Some(Vec::new())),
        };
    };
    // Resuming a folder whose output is finished: this sweep's, or refuse.
    let same = prev.kind == "sweep"
        && std::fs::read_to_string(dir.join("sweep.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<doorbell::sweep::SweepFile>(&t).ok())
            .is_some_and(|f| f.hash == plan.hash && f.shard == shard.map(|(i, n)| [i, n]));
    if same {
        let _ = std::fs::remove_file(dir.join(outdir::JOURNAL));
        Ok(None)
    } else {
        Err(format!(
            "holds the finished output of another {}; run without --resume to replace it",
            if prev.kind == "sweep" { "sweep" } else { "run" }
        ))
    }
}
fn merge_cmd(dirs: &[PathBuf], out: &Path, force: bool) -> ExitCode {
    use doorbell::sweep;
    let mut shards = Vec::new();
    for d in dirs {
        // A shard stopped part-way has rows missing: refuse it rather than merge less.
        if let Err(e) = outdir::check_whole(d) {
            eprintln!("error: shard {e}");
            return ExitCode::from(e.exit_code());
        }
        let path = d.join("sweep.json");
        let parsed = std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<sweep::SweepFile>(&t).map_err(|e| e.to_string()));
        match parsed {
            Ok(s) => shards.push(s),
            Err(e) => {
                eprintln!("error: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    let all = match sweep::merge(&shards) {
        Ok(all) => all,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let claimed = match outdir::claim(out, if force { Claim::Force } else { Claim::Fresh }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let written = sweep::write(claimed.path(), &all).and_then(|()| outdir::seal(out, "merge"));
    match written {
        Ok(()) => {
            outln!(
                "merged {} shards: {} rows -> {}/{{sweep.csv, sweep.json}}",
                shards.len(),
                all.rows.len(),
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: writing {}: {e}", out.display());
            ExitCode::from(1)
        }
    }
}

/// `plot DIR`: draws from a finished output folder only, then seals it again so that its
/// marker lists the charts.
fn plot_cmd(dir: &Path) -> ExitCode {
    if !dir.is_dir() {
        eprintln!("error: {}: no such folder", dir.display());
        return ExitCode::from(2);
    }
    let marker =
        outdir::claim(dir, Claim::Resume).and_then(|c| outdir::check_whole(dir).map(|m| (c, m)));
    let (_claimed, marker) = match marker {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let files = match doorbell::plot::plot_dir(dir) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: plotting {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    };
    if files.is_empty() {
        eprintln!("error: {}: nothing to plot (no sweep.csv, collective.csv, flows.csv, timeseries.csv or window.csv)", dir.display());
        return ExitCode::from(2);
    }
    if let Err(e) = outdir::reseal(dir, &marker) {
        eprintln!("error: sealing {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    outln!("plots    {} files in {}", files.len(), dir.display());
    ExitCode::SUCCESS
}

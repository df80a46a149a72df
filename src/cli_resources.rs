//! What a run may use of the machine: memory (the estimate checked against the limit
//! before a run, and the budget at which a run stops) and cores (the threads a run is
//! split over, shared with the compare sets that run beside it).

use doorbell::scenario::{self, Scenario};
use doorbell::sim::footprint;
use std::process::ExitCode;

/// The memory limit runs must fit (see `sim::footprint`), also set as the budget at
/// which a run stops (90% of it: the rest is for writing the results). A bad
/// `DOORBELL_MEMORY_LIMIT` is an input error.
fn memory_limit() -> Result<Option<(u64, &'static str)>, String> {
    let user = match std::env::var(footprint::LIMIT_VAR) {
        Ok(v) => Some(
            doorbell::units::parse_bytes(v.trim())
                .map_err(|e| format!("{}: {e}", footprint::LIMIT_VAR))?
                .0,
        ),
        Err(_) => None,
    };
    let limit = footprint::memory_limit(user);
    if let Some((b, _)) = limit {
        doorbell::sim::set_memory_budget(b / 10 * 9);
    }
    Ok(limit)
}

/// Refuses (exit 2) runs that together need more memory than the machine allows; warns
/// when they may.
pub fn preflight(f: footprint::Footprint, runs: usize) -> Result<(), ExitCode> {
    let limit = match memory_limit() {
        Ok(Some(l)) => l,
        Ok(None) => return Ok(()),
        Err(e) => {
            eprintln!("error: {e}");
            return Err(ExitCode::from(2));
        }
    };
    match footprint::check(f, runs, limit) {
        Ok(None) => Ok(()),
        Ok(Some(w)) => {
            eprintln!("warning: {w}");
            Ok(())
        }
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::from(2))
        }
    }
}

/// The estimate of a scenario's run, or of its compare sets (all held at once).
pub fn footprint_of(sc: &scenario::Scenario) -> (footprint::Footprint, usize) {
    if sc.compare.is_empty() {
        (footprint::estimate(sc), 1)
    } else {
        let f = sc
            .compare
            .iter()
            .map(|set| footprint::estimate(&doorbell::compare::set_scenario(sc, set)))
            .fold(footprint::Footprint::default(), |a, b| a + b);
        (f, sc.compare.len())
    }
}

/// The threads a run of `sc` is split over for `--threads threads` and `-j jobs` (`runs`:
/// its compare sets, 1 without), shared with the sets that run beside it (a note says
/// so when that is fewer), and the copies of the run the memory check counts. A
/// scenario the split does not cover gets a note and one copy, and the run still asks
/// for the threads, so that its `perf.json` says why it went on one
/// (`one_thread_because`).
pub fn threads_for_run(
    sc: &Scenario,
    threads: usize,
    jobs: usize,
    runs: usize,
    quiet: bool,
) -> (usize, usize) {
    let parts = match doorbell::sim::plan_threads(sc, threads) {
        Ok(p) => Ok(p as usize),
        Err(why) => {
            if !quiet {
                eprintln!(
                    "note: --threads {threads}: runs on one thread (not split over threads yet: {why})"
                );
            }
            Err(threads)
        }
    };
    // A compare's sets run side by side under -j (the sets, then their repeats): their
    // threads share the cores.
    let at_once = if sc.compare.is_empty() {
        1
    } else {
        jobs.min(runs * sc.repeats.saturating_sub(1).max(1) as usize)
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match parts {
        Ok(parts) => {
            let shared = doorbell::sim::threads_per_run(parts, at_once, cores);
            if shared < parts && !quiet {
                eprintln!(
                    "note: --threads {threads} with -j {jobs}: {shared} thread{} per run, so that {at_once} runs at once share this machine's {cores} cores",
                    if shared == 1 { "" } else { "s" }
                );
            }
            (shared, shared)
        }
        Err(asked) => (doorbell::sim::threads_per_run(asked, at_once, cores), 1),
    }
}

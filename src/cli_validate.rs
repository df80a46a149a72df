//! `doorbell validate` (check a scenario, print the fabric, the footprint and the work)
//! and `doorbell trace` (write a training item's step as a trace).

use super::{footprint_of, preflight};
use doorbell::report::describe_fabric;
use doorbell::scenario::{self, Overrides};
use doorbell::sim::footprint;
use std::path::Path;
use std::process::ExitCode;

pub fn validate_cmd(scenario: &Path, set: Vec<String>) -> ExitCode {
    match scenario::load(scenario, &Overrides { seed: None, set }) {
        Ok(sc) => {
            outln!(
                "{}: ok ({} workload items)",
                scenario.display(),
                sc.workload.len()
            );
            out!("{}", describe_fabric(&sc));
            let (f, runs) = footprint_of(&sc);
            outln!(
                "memory   at least {} ({:.0} flows, {:.0} queue pairs){}",
                footprint::human(f.bytes_at_least()),
                f.flows,
                f.queue_pairs,
                if f.transfers > 0.0 {
                    format!(
                        "; collectives up to {} more ({:.0} transfer records held at most{})",
                        footprint::human(f.bytes_at_most() - f.bytes_at_least()),
                        f.transfers,
                        if f.graph_transfers > 0.0 {
                            format!(", {:.3e} graph transfers at 4 B", f.graph_transfers)
                        } else {
                            String::new()
                        }
                    )
                } else {
                    String::new()
                }
            );
            let w = footprint::work(&sc);
            let secs = w.events / footprint::EVENTS_PER_SECOND;
            outln!(
                "work     about {} of payload, {:.2e} packets, {:.2e} events (within a factor of about 3): {} of wall time per run at {:.0} M events/s",
                footprint::human(w.payload_bytes),
                w.packets,
                w.events,
                if secs < 1.0 {
                    "under a second".to_string()
                } else {
                    format!(
                        "roughly {}",
                        indicatif::HumanDuration(std::time::Duration::from_secs_f64(
                            secs.min(1e9)
                        ))
                    )
                },
                footprint::EVENTS_PER_SECOND / 1e6
            );
            let rc = match &sc.transport {
                scenario::Transport::Rc(r) => Some(r.params),
                scenario::Transport::Raw => None,
            };
            outln!(
                "watchdog stops a run with only timers left after {:.3} s of simulated time without progress ({})",
                sc.watchdog
                    .unwrap_or_else(|| doorbell::sim::watchdog::default_bound(rc.as_ref()))
                    .0 as f64
                    / 1e12,
                if sc.watchdog.is_some() {
                    "the scenario's `watchdog`"
                } else {
                    "default: twice the longest a queue pair waits before it fails, at least 1 s"
                }
            );
            for a in scenario::advice::advisories(&sc) {
                eprintln!("warning: {a}");
            }
            if w.events > footprint::LARGE_RUN_EVENTS {
                eprintln!(
                    "warning: a large run (about {:.1e} events): shorten it (`duration`, Poisson `until`, fewer iterations or sizes) or run it on a big machine",
                    w.events
                );
            }
            match preflight(f, runs) {
                Ok(()) => ExitCode::SUCCESS,
                Err(code) => code,
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes the first training item of `scenario` as a native trace into `out`.
pub fn trace_cmd(scenario: &Path, set: Vec<String>, out: &Path) -> ExitCode {
    let sc = match scenario::load(scenario, &Overrides { seed: None, set }) {
        Ok(sc) => sc,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(t) = sc.workload.iter().find_map(|w| match w {
        doorbell::workload::Workload::Training(t) => Some(t),
        _ => None,
    }) else {
        eprintln!(
            "error: {}: the workload has no `training` item to write",
            scenario.display()
        );
        return ExitCode::from(2);
    };
    let (name, par, mb) = match &t.trace {
        Some(tr) => (tr.name.clone(), tr.parallelism, tr.microbatches),
        None => (
            t.model.name.clone(),
            [t.dp, t.tp, t.pp, t.ep],
            t.microbatches,
        ),
    };
    let text = doorbell::training::trace::write_native(&t.graph(), &name, par, mb);
    match doorbell::outdir::write_atomic(out, text.as_bytes()) {
        Ok(()) => {
            outln!("trace    {} ({} bytes)", out.display(), text.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: writing {}: {e}", out.display());
            ExitCode::from(1)
        }
    }
}

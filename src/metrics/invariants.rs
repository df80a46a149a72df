//! What every run must satisfy, checked at its end (cheap and always on), and why a run
//! that stalled did.
//!
//! Invariants (a violation is a bug in doorbell, reported in `summary.json`
//! `invariants.violations`, on stderr and by exit code 3):
//! - `lossless_no_drop`: with PFC or IB credits no switch drops a packet (headroom and
//!   credits are sized to make that so; validation refuses fabrics that cannot be);
//! - `delivered_within_size`: no flow is delivered more payload than it has, and a
//!   completed flow exactly its size;
//! - `fct_at_least_ideal`: no flow finishes sooner than its ideal FCT on an empty fabric
//!   (`analytic::ideal_fct`, multipath-aware), so slowdown >= 1;
//! - `finish_within_run`: no flow finishes after the run's end or before its start;
//! - `landed_before_finish`: a finished flow's last byte landed, and no later than the
//!   sender learned of it (its last ACK under RC);
//! - `stall_has_reason`: a run that ran out of events with work left names, for each
//!   pending flow (and unfinished collective), a reason the model allows: a packet lost
//!   under the raw transport, a loss or an out-of-order discard with `timeout: 0`
//!   (never retransmit), a flow it waits for that failed, a collective transfer that
//!   failed; a run the watchdog stopped (`sim::watchdog`: only timers left, nothing to
//!   come that could move work) names each flow's queue-pair state;
//! - `time_within_horizon`: the run ends before `units::TIME_HORIZON` (100 simulated
//!   days; the clock's end is 213), so simulated time never wraps;
//! - `time_advances`: no more than `sim::LIVELOCK_EVENTS` events happen at one instant
//!   (a model that keeps rescheduling itself at `now` would hang the run).
//!
//! Leaves out: checks that need per-packet history (each packet delivered once), which
//! the unit tests of the components cover rule by rule.

use crate::scenario::{Scenario, Transport};
use crate::sim::{FlowState, Outcome, RunOutput};
use serde::Serialize;

/// The rules checked, in `summary.json` order.
pub const RULES: [&str; 8] = [
    "lossless_no_drop",
    "delivered_within_size",
    "fct_at_least_ideal",
    "finish_within_run",
    "landed_before_finish",
    "stall_has_reason",
    "time_within_horizon",
    "time_advances",
];

/// One broken rule.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Violation {
    pub rule: &'static str,
    pub detail: String,
}

/// Why a pending flow of a stalled run could never finish.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Stall {
    /// The flow, or `null` for a collective that could not go on.
    pub flow: Option<u32>,
    pub reason: String,
}

/// `summary.json` `invariants`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct InvariantReport {
    pub checked: Vec<&'static str>,
    pub violations: Vec<Violation>,
    /// For a stalled run: why each pending flow stopped (at most 20 listed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<Stall>,
}

impl InvariantReport {
    pub fn held(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Whether a finished record holds every per-flow rule `check` applies to it (at any
/// end of run at or after its finish): `sim::retire` folds only such records, so a
/// record that breaks a rule stays for `check` to report. Keep in step with `check`.
pub fn finished_record_holds(f: &FlowState) -> bool {
    let Some(fin) = f.finish else { return false };
    f.delivered <= f.def.size
        && (f.outcome != Outcome::Completed || f.delivered == f.def.size)
        && f.landed.is_some_and(|l| l <= fin)
        && fin >= f.def.start
        && fin.0 - f.def.start.0 >= f.ideal.0
}

/// Details listed per rule before the rest are counted.
const LISTED: usize = 5;

/// Checks `out` against the rules; `dropped` is the switches' drop count.
pub fn check(sc: &Scenario, out: &RunOutput, dropped: u64) -> InvariantReport {
    let mut r = InvariantReport {
        checked: RULES.to_vec(),
        ..Default::default()
    };
    let mut add = |rule: &'static str, detail: String| {
        let n = r.violations.iter().filter(|v| v.rule == rule).count();
        if n < LISTED {
            r.violations.push(Violation { rule, detail });
        }
    };
    if sc.flow_control.lossless() && dropped > 0 {
        add(
            "lossless_no_drop",
            format!(
                "{dropped} packets dropped on a lossless fabric ({})",
                sc.flow_control.name()
            ),
        );
    }
    for f in &out.flows {
        let i = f.num;
        if f.delivered > f.def.size
            || (f.outcome == Outcome::Completed && f.delivered != f.def.size)
        {
            add(
                "delivered_within_size",
                format!(
                    "flow {i}: {} of {} B delivered ({:?})",
                    f.delivered, f.def.size, f.outcome
                ),
            );
        }
        if let Some(fin) = f.finish {
            if !f.landed.is_some_and(|l| l <= fin) {
                add(
                    "landed_before_finish",
                    format!(
                        "flow {i}: finished at {} ps, its last byte landed {}",
                        fin.0,
                        f.landed
                            .map_or("never".into(), |l| format!("at {} ps", l.0))
                    ),
                );
            }
            // A run stopped by `duration` may have recorded a finish a packet's tail
            // later (cut-through hands a packet over at its header).
            let after_end = fin > out.end && !out.stopped_by_duration;
            if fin < f.def.start || after_end {
                add(
                    "finish_within_run",
                    format!(
                        "flow {i}: finished at {} ps, started {} ps, the run ended at {} ps",
                        fin.0, f.def.start.0, out.end.0
                    ),
                );
            } else if fin.0 - f.def.start.0 < f.ideal.0 {
                add(
                    "fct_at_least_ideal",
                    format!(
                        "flow {i} ({} -> {}, {} B): FCT {} ps below its ideal {} ps",
                        f.def.src,
                        f.def.dst,
                        f.def.size,
                        fin.0 - f.def.start.0,
                        f.ideal.0
                    ),
                );
            }
        }
    }
    if out.stalled {
        stall_reasons(sc, out, &mut r);
    }
    if out.livelock {
        r.violations.push(Violation {
            rule: "time_advances",
            detail: format!(
                "{} events in a row at {} ps without time advancing: the run was stopped there",
                crate::sim::LIVELOCK_EVENTS,
                out.end.0
            ),
        });
    }
    if out.horizon_reached {
        r.violations.push(Violation {
            rule: "time_within_horizon",
            detail: format!(
                "the run reached {} simulated days, where it stops so the clock cannot wrap; validation should have refused its work",
                crate::units::TIME_HORIZON.0 / 86_400_000_000_000_000
            ),
        });
    }
    r
}

/// Names why each pending flow of a stalled run stopped; a flow with no reason the
/// model allows is a violation.
fn stall_reasons(sc: &Scenario, out: &RunOutput, r: &mut InvariantReport) {
    let raw = matches!(sc.transport, Transport::Raw);
    let never_retransmit = matches!(&sc.transport, Transport::Rc(rc) if rc.params.timeout == 0);
    let lost_any = out.retired.any_dropped || out.flows.iter().any(|f| f.packets_dropped > 0);
    // Plain RC discards packets that arrive out of order (per-packet routing reorders
    // them) after one sequence NAK; without a timeout a discarded tail is never resent.
    let discarded = out.rc.as_ref().is_some_and(|t| t.seq_naks > 0);
    let failed = |i: usize| matches!(out.flows[i].outcome, Outcome::Failed(_));
    // A reason of its own for each pending flow, then (to a fixed point) for those that
    // wait for a flow that failed or can never finish.
    let mut reasons: Vec<Option<String>> = out
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if f.outcome != Outcome::Pending {
                None
            } else if out.watchdog.is_some() {
                Some(match out.stuck.binary_search_by_key(&(i as u32), |s| s.0) {
                    Ok(k) => out.stuck[k].1.clone(),
                    Err(_) => {
                        "the watchdog stopped the run: no payload moved and only timers were left"
                            .to_string()
                    }
                })
            } else if (raw || f.raw) && f.packets_dropped > 0 {
                Some("a packet of it was lost and bare packets are never resent".to_string())
            } else if raw && lost_any {
                Some("it waits behind a flow whose lost packets are never resent".to_string())
            } else if never_retransmit && lost_any {
                Some(
                    "packets were lost and `timeout: 0` never retransmits (flows behind them \
                     on their queue pairs wait too)"
                        .to_string(),
                )
            } else if never_retransmit && discarded {
                Some(
                    "plain RC discarded packets that arrived out of order and `timeout: 0` \
                     never retransmits them (flows behind them on their queue pairs wait too)"
                        .to_string(),
                )
            } else {
                None
            }
        })
        .collect();
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..out.flows.len() {
            let f = &out.flows[i];
            if f.outcome != Outcome::Pending || reasons[i].is_some() {
                continue;
            }
            let Some(a) = f.def.after else { continue };
            let why = if failed(a as usize) {
                format!("it waits for flow {a}, which failed")
            } else if reasons[a as usize].is_some() {
                format!("it waits for flow {a}, which can never finish")
            } else {
                continue;
            };
            reasons[i] = Some(why);
            changed = true;
        }
    }
    let mut unexplained = 0u64;
    for (i, f) in out.flows.iter().enumerate() {
        if f.outcome != Outcome::Pending {
            continue;
        }
        match &reasons[i] {
            Some(reason) if r.stalls.len() < 20 => r.stalls.push(Stall {
                flow: Some(f.num),
                reason: reason.clone(),
            }),
            Some(_) => {}
            None => unexplained += 1,
        }
    }
    let coll_failed = out.retired.any_dropped
        || out.flows.iter().any(|f| {
            f.coll.is_some() && (matches!(f.outcome, Outcome::Failed(_)) || f.packets_dropped > 0)
        });
    for (c, res) in out.collectives.iter().enumerate() {
        if res.complete {
            continue;
        }
        if let Some(w) = out.watchdog {
            r.stalls.push(Stall {
                flow: None,
                reason: format!(
                    "collective {c}: the watchdog stopped the run at {:.3} s: nothing moved for {:.3} s",
                    w.at.0 as f64 / 1e12,
                    (w.at.0 - w.since.0) as f64 / 1e12
                ),
            });
        } else if coll_failed
            || (lost_any && (raw || never_retransmit))
            || (never_retransmit && discarded)
        {
            r.stalls.push(Stall {
                flow: None,
                reason: format!("collective {c}: a transfer failed or lost packets for good"),
            });
        } else {
            unexplained += 1;
        }
    }
    for t in out.training.iter().filter(|t| !t.complete) {
        if coll_failed || (lost_any && (raw || never_retransmit)) || (never_retransmit && discarded)
        {
            r.stalls.push(Stall {
                flow: None,
                reason: format!(
                    "training job {}: a transfer failed or lost packets for good",
                    t.job
                ),
            });
        } else {
            unexplained += 1;
        }
    }
    if unexplained > 0 {
        r.violations.push(Violation {
            rule: "stall_has_reason",
            detail: format!(
                "{unexplained} pending flows or collectives stopped with no reason the model allows"
            ),
        });
    }
}

//! Capacity planning: the cheapest fabric that meets every target.
//!
//! A scenario's `plan:` section gives targets, a cost model and candidate fabrics:
//! ```yaml
//! plan:
//!   targets: { busbw_min: 40GB/s, p99_fct_max: 50us, goodput_min: 3Tbps }
//!   cost: { per_spine: 30000, per_link: 900 }
//!   candidates:
//!     - { topology.spines: 2 }
//!     - { topology.spines: 4 }
//!     - { topology.spines: 8, topology.fabric_link.rate: 400Gbps }
//! ```
//! A candidate's cost is `per_spine x spines + per_link x (leaves x spines x
//! links_per_spine)`. When the candidates differ only in `topology.spines` (more spines
//! never hurt, the monotone case) the cheapest passing one is found by bisection over the
//! spine count; otherwise every candidate runs, cheapest first, and the first that meets
//! every target is the answer. Every candidate's figures are reported, run or skipped.

use crate::metrics::{summarize, Summary};
use crate::scenario::{parse_str, set_value, Overrides, Scenario, ScenarioError};
use crate::units::{parse_duration, parse_rate};
use std::fmt::Write as _;
use std::path::Path;

/// The targets; each is optional.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Targets {
    /// Bus bandwidth of the first collective, averaged over its sizes, GB/s.
    pub busbw_min_gbs: Option<f64>,
    /// P99 flow completion time, us.
    pub p99_fct_max_us: Option<f64>,
    /// Aggregate goodput, Gb/s.
    pub goodput_min_gbps: Option<f64>,
    /// Training step time of the first training item, ms.
    pub step_time_max_ms: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct Candidate {
    pub index: usize,
    pub set: Vec<(String, String)>,
    pub spines: u32,
    pub links: u64,
    pub cost: f64,
}

/// What a candidate run showed.
#[derive(Clone, Debug)]
pub struct Evidence {
    /// Each figure is the mean over the plan's repeats (one run without `repeats`).
    pub busbw_gbs: Option<f64>,
    pub p99_fct_us: Option<f64>,
    /// The P99's 95% confidence half-width over the repeats (`None` with one run).
    pub p99_ci95_us: Option<f64>,
    /// Unfinished flows make the P99 only a lower bound.
    pub p99_lower_bound: bool,
    pub goodput_gbps: f64,
    /// The first training item's step time, ms (mean over its steps).
    pub step_ms: Option<f64>,
    pub pass: bool,
    /// Which targets failed.
    pub failed: Vec<&'static str>,
    /// Targets this candidate could not meet even on an empty fabric, each with why.
    pub unmeetable: Vec<String>,
}

/// What a candidate's run allows at best: on an empty fabric every flow would finish at
/// its ideal FCT, and hosts cannot deliver more than their links carry.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    /// P99 of the counted flows' ideal FCTs, us (nearest rank; the workload's flows,
    /// as the P99 judged).
    p99_ideal_us: Option<f64>,
    /// Every host link's payload rate, summed, Gb/s.
    goodput_max_gbps: f64,
    /// The first training item's step had its communication taken no time, ms.
    step_no_comm_ms: Option<f64>,
}

impl Bounds {
    /// Over the flows the FCT statistics count (finished, or started and unfinished).
    fn of(sc: &Scenario, out: &crate::sim::RunOutput) -> Bounds {
        let mut ideal: Vec<u64> = out
            .flows
            .iter()
            .filter(|f| {
                f.coll.is_none()
                    && (f.finish.is_some()
                        || (f.def.start <= out.end && (f.def.after.is_none() || f.started)))
            })
            .map(|f| f.ideal.0)
            .collect();
        ideal.sort_unstable();
        let p99_ideal_us = (!ideal.is_empty()).then(|| {
            let rank = ((ideal.len() as f64 * 0.99).ceil() as usize).clamp(1, ideal.len());
            ideal[rank - 1] as f64 / 1e6
        });
        let eff = sc.encapsulation.payload_efficiency(sc.mtu);
        let hosts = sc.topology.hosts();
        // Bytes delivered to switches (in-network aggregation) count in the aggregate
        // too, beyond what host links carry: no bound then.
        let to_switch = out
            .flows
            .iter()
            .any(|f| f.def.src >= hosts || f.def.dst >= hosts);
        let goodput_max_gbps = if to_switch {
            f64::INFINITY
        } else {
            hosts as f64 * sc.topology.host_link.rate.0 as f64 * eff / 1e9
        };
        let step_no_comm_ms = out.training.first().and_then(|t| {
            let n = t.no_comm_step_ps.len();
            (n > 0).then(|| t.no_comm_step_ps.iter().sum::<u64>() as f64 / n as f64 / 1e9)
        });
        Bounds {
            p99_ideal_us,
            goodput_max_gbps,
            step_no_comm_ms,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub targets: Targets,
    pub candidates: Vec<Candidate>,
    pub bisect: bool,
    /// Runs per candidate (`plan.repeats`), with seeds shared across candidates.
    pub repeats: u32,
    /// Say on stderr which candidate runs (`doorbell plan` on a terminal).
    pub progress: bool,
    text: String,
    file: String,
    stem: String,
    overrides: Overrides,
}

/// Reads the `plan:` section; each candidate must make a valid scenario.
pub fn plan_str(
    text: &str,
    file: &str,
    stem: &str,
    overrides: &Overrides,
) -> Result<Plan, ScenarioError> {
    // `--set plan.targets.p99_fct_max=800us` reaches the plan as any other field: the
    // plan is read from the tree with the overrides applied (an unknown `plan.` field is
    // then refused below, not ignored).
    let (base, tree) = crate::scenario::runner_input(
        text,
        file,
        stem,
        overrides,
        "a plan runs the scenario once per candidate",
        "give the sets' fields as candidates instead, or remove `compare:`",
    )?;
    let plan = tree
        .get("plan")
        .and_then(|p| p.as_mapping())
        .ok_or_else(|| {
            ScenarioError::at(
                file,
                "plan",
                "no `plan:` section (targets, cost, candidates)",
            )
        })?;
    let mut targets = Targets::default();
    let (mut per_spine, mut per_link) = (0.0, 0.0);
    let mut sets: Vec<Vec<(String, String)>> = Vec::new();
    let mut repeats = 1u32;
    for (k, v) in plan {
        match k.as_str().unwrap_or("") {
            "targets" => {
                let m = v
                    .as_mapping()
                    .ok_or_else(|| ScenarioError::at(file, "plan.targets", "expected a map"))?;
                for (tk, tv) in m {
                    let name = tk.as_str().unwrap_or("");
                    let path = format!("plan.targets.{name}");
                    let s = set_value(tv);
                    match name {
                        "busbw_min" => {
                            let r = parse_rate(&s)
                                .map_err(|e| ScenarioError::at(file, &path, e.to_string()))?;
                            targets.busbw_min_gbs = Some(r.0 as f64 / 8e9);
                        }
                        "goodput_min" => {
                            let r = parse_rate(&s)
                                .map_err(|e| ScenarioError::at(file, &path, e.to_string()))?;
                            targets.goodput_min_gbps = Some(r.0 as f64 / 1e9);
                        }
                        "p99_fct_max" => {
                            let d = parse_duration(&s)
                                .map_err(|e| ScenarioError::at(file, &path, e.to_string()))?;
                            targets.p99_fct_max_us = Some(d.as_us_f64());
                        }
                        "step_time_max" => {
                            let d = parse_duration(&s)
                                .map_err(|e| ScenarioError::at(file, &path, e.to_string()))?;
                            targets.step_time_max_ms = Some(d.as_us_f64() / 1e3);
                        }
                        _ => return Err(ScenarioError::at(
                            file,
                            &path,
                            "unknown target, expected `busbw_min`, `p99_fct_max`, `goodput_min` or `step_time_max`",
                        )),
                    }
                }
            }
            "cost" => {
                let m = v.as_mapping().ok_or_else(|| {
                    ScenarioError::at(file, "plan.cost", "expected { per_spine, per_link }")
                })?;
                for (ck, cv) in m {
                    let name = ck.as_str().unwrap_or("");
                    let x = cv
                        .as_f64()
                        .filter(|x| x.is_finite() && *x >= 0.0)
                        .ok_or_else(|| {
                            ScenarioError::at(
                                file,
                                &format!("plan.cost.{name}"),
                                "expected a number >= 0",
                            )
                        })?;
                    match name {
                        "per_spine" => per_spine = x,
                        "per_link" => per_link = x,
                        _ => {
                            return Err(ScenarioError::at(
                                file,
                                &format!("plan.cost.{name}"),
                                "unknown field, expected `per_spine` or `per_link`",
                            ))
                        }
                    }
                }
            }
            "repeats" => {
                repeats = v
                    .as_u64()
                    .filter(|r| (1..=100).contains(r))
                    .ok_or_else(|| {
                        ScenarioError::at(
                            file,
                            "plan.repeats",
                            "expected 1 to 100 runs per candidate",
                        )
                    })? as u32;
            }
            "candidates" => {
                let list = v.as_sequence().filter(|l| !l.is_empty()).ok_or_else(|| {
                    ScenarioError::at(
                        file,
                        "plan.candidates",
                        "expected a non-empty list of overrides",
                    )
                })?;
                for (i, c) in list.iter().enumerate() {
                    let m = c.as_mapping().ok_or_else(|| {
                        ScenarioError::at(
                            file,
                            &format!("plan.candidates[{i}]"),
                            "expected a map of path: value",
                        )
                    })?;
                    sets.push(
                        m.iter()
                            .map(|(k, v)| (k.as_str().unwrap_or("").to_string(), set_value(v)))
                            .collect(),
                    );
                }
            }
            other => {
                return Err(ScenarioError::at(
                    file,
                    &format!("plan.{other}"),
                    "unknown field, expected `targets`, `cost`, `candidates` or `repeats`",
                ))
            }
        }
    }
    if targets == Targets::default() {
        return Err(ScenarioError::at(
            file,
            "plan.targets",
            "expected at least one target",
        ));
    }
    let has_collective = base
        .workload
        .iter()
        .any(|w| matches!(w, crate::workload::Workload::Collective(_)));
    if targets.busbw_min_gbs.is_some() && !has_collective {
        return Err(ScenarioError::at(
            file,
            "plan.targets.busbw_min",
            "bus bandwidth needs a collective in the workload",
        ));
    }
    let has_training = base
        .workload
        .iter()
        .any(|w| matches!(w, crate::workload::Workload::Training(_)));
    if targets.step_time_max_ms.is_some() && !has_training {
        return Err(ScenarioError::at(
            file,
            "plan.targets.step_time_max",
            "a step time needs a `training` item in the workload",
        ));
    }
    if sets.is_empty() {
        return Err(ScenarioError::at(
            file,
            "plan.candidates",
            "expected at least one candidate",
        ));
    }
    let mut p = Plan {
        targets,
        candidates: Vec::new(),
        bisect: false,
        repeats,
        progress: false,
        text: text.to_string(),
        file: file.to_string(),
        stem: stem.to_string(),
        overrides: overrides.clone(),
    };
    for (i, set) in sets.into_iter().enumerate() {
        let c = Candidate {
            index: i,
            set,
            spines: 0,
            links: 0,
            cost: 0.0,
        };
        let sc = p.scenario(&c).map_err(|mut e| {
            e.message = format!("{} (plan candidate {i})", e.message);
            e
        })?;
        let t = &sc.topology;
        // Leaf-spine cables: each leaf to its plane's spines.
        let links = t.leaves as u64 * t.uplinks_per_leaf() as u64;
        p.candidates.push(Candidate {
            spines: t.spines,
            links,
            cost: per_spine * t.spines as f64 + per_link * links as f64,
            ..c
        });
    }
    p.bisect = p.candidates.len() > 2
        && p.candidates
            .iter()
            .all(|c| c.set.iter().all(|(k, _)| k == "topology.spines"));
    Ok(p)
}

/// [`plan_str`] on a file.
pub fn load(path: &Path, overrides: &Overrides) -> Result<Plan, ScenarioError> {
    let (text, file, stem) = crate::scenario::read_file(path)?;
    plan_str(&text, &file, &stem, overrides)
}

impl Plan {
    /// The warnings the candidates' scenarios earn, each once, with how many earn it
    /// (`scenario::advice`).
    pub fn advisories(&self) -> Vec<(String, usize)> {
        crate::scenario::advice::across(
            self.candidates.iter().filter_map(|c| self.scenario(c).ok()),
        )
    }

    fn scenario(&self, c: &Candidate) -> Result<Scenario, ScenarioError> {
        let mut set = self.overrides.set.clone();
        set.extend(c.set.iter().map(|(k, v)| format!("{k}={v}")));
        let mut sc = parse_str(
            &self.text,
            &self.file,
            &self.stem,
            &Overrides {
                seed: self.overrides.seed,
                set,
            },
        )?;
        sc.compare.clear();
        Ok(sc)
    }

    /// Judges a candidate on its runs (one per repeat): the targets apply to the means.
    fn judge(&self, runs: &[Summary], bounds: Bounds) -> Evidence {
        let mean = |x: Vec<f64>| (x.len() == runs.len()).then(|| crate::sweep::mean_ci95(&x));
        let busbw = mean(
            runs.iter()
                .filter_map(|s| s.collectives.first().map(|c| c.avg_busbw_gbs))
                .collect(),
        )
        .map(|m| m.0);
        let p99_stat = mean(
            runs.iter()
                .filter_map(|s| s.fct_us.as_ref().map(|f| f.p99))
                .collect(),
        );
        let p99 = p99_stat.map(|m| m.0);
        // With unfinished flows a P99 may be only a lower bound (so is a mean over it):
        // it cannot show that the target is met.
        let p99_bound = runs
            .iter()
            .any(|s| s.fct_us.as_ref().is_some_and(|f| f.is_lower_bound("p99")));
        let goodput =
            mean(runs.iter().map(|s| s.goodput_gbps.aggregate).collect()).map_or(f64::NAN, |m| m.0);
        // A job that did not finish its steps has no step time to judge.
        let step = mean(
            runs.iter()
                .filter_map(|s| {
                    s.training
                        .first()
                        .filter(|t| t.complete)
                        .and_then(|t| t.step_ms)
                })
                .collect(),
        )
        .map(|m| m.0);
        let mut failed = Vec::new();
        if let Some(min) = self.targets.busbw_min_gbs {
            if !busbw.is_some_and(|b| b >= min) {
                failed.push("busbw_min");
            }
        }
        if let Some(max) = self.targets.p99_fct_max_us {
            if !p99.is_some_and(|p| p <= max) {
                failed.push("p99_fct_max");
            } else if p99_bound {
                failed.push("p99_fct_max (the P99 is only a lower bound: unfinished flows)");
            }
        }
        if let Some(min) = self.targets.goodput_min_gbps {
            if goodput.is_nan() || goodput < min {
                failed.push("goodput_min");
            }
        }
        if let Some(max) = self.targets.step_time_max_ms {
            if !step.is_some_and(|s| s <= max) {
                failed.push("step_time_max");
            }
        }
        let mut unmeetable = Vec::new();
        if let (Some(max), Some(floor)) = (self.targets.step_time_max_ms, bounds.step_no_comm_ms) {
            if floor > max {
                unmeetable.push(format!(
                    "step_time_max: the step takes {floor:.3} ms with communication taking no time (compute and pipeline bubble)"
                ));
            }
        }
        if let (Some(max), Some(ideal)) = (self.targets.p99_fct_max_us, bounds.p99_ideal_us) {
            if ideal > max {
                unmeetable.push(format!(
                    "p99_fct_max: the P99 of the ideal FCTs is {ideal:.2} us, what every flow would take on an empty fabric"
                ));
            }
        }
        if let Some(min) = self.targets.goodput_min_gbps {
            if bounds.goodput_max_gbps < min {
                unmeetable.push(format!(
                    "goodput_min: the host links carry at most {:.2} Gb/s of payload",
                    bounds.goodput_max_gbps
                ));
            }
        }
        Evidence {
            busbw_gbs: busbw,
            p99_fct_us: p99,
            p99_ci95_us: p99_stat.and_then(|m| m.1),
            p99_lower_bound: p99_bound,
            goodput_gbps: goodput,
            step_ms: step,
            pass: failed.is_empty() && !runs.iter().any(|s| s.stalled),
            failed,
            unmeetable,
        }
    }

    /// Runs candidate `i`, once per repeat: repeat r with one seed shared by every
    /// candidate (the scenario's own for r = 0), so candidates are compared on the same
    /// draws.
    pub fn evaluate(&self, i: usize) -> Evidence {
        let sc = self
            .scenario(&self.candidates[i])
            .expect("every candidate was checked when the plan was read");
        if self.progress {
            let c = &self.candidates[i];
            let name: Vec<String> = c.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
            eprintln!(
                "plan     running candidate {i} ({}), {} run(s)",
                name.join(", "),
                self.repeats
            );
        }
        let mut bounds = None;
        let runs: Vec<Summary> = (0..self.repeats)
            .map(|r| {
                let mut s = sc.clone();
                s.seed = crate::compare::repeat_seed(&sc, r);
                let out = crate::sim::run(&s);
                bounds.get_or_insert_with(|| Bounds::of(&s, &out));
                summarize(&s, &out)
            })
            .collect();
        let bounds = bounds.expect("at least one repeat");
        self.judge(&runs, bounds)
    }

    /// Finds the cheapest candidate that meets every target. Returns it (if any) and the
    /// evidence per candidate (`None`: not run, decided by bisection).
    ///
    /// Bisection over the spine count assumes more spines never do worse, which one
    /// seed's figures need not obey (a P99 can be lower at 3 spines than at 4). So its
    /// answer is checked on the evidence: the two cheaper candidates below it run too,
    /// and if either passes, or the figures the runs gave are not monotone in the spine
    /// count, every cheaper candidate runs and the cheapest passing one is the answer.
    pub fn decide(&self) -> (Option<usize>, Vec<Option<Evidence>>) {
        let mut ev: Vec<Option<Evidence>> = vec![None; self.candidates.len()];
        if self.bisect {
            let mut order: Vec<usize> = (0..self.candidates.len()).collect();
            order.sort_by_key(|&i| (self.candidates[i].spines, i));
            let (mut lo, mut hi) = (0usize, order.len());
            while lo < hi {
                let mid = (lo + hi) / 2;
                let e = self.evaluate(order[mid]);
                let pass = e.pass;
                ev[order[mid]] = Some(e);
                if pass {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            // The neighbours below the answer (or the two most expensive, if none passed).
            for k in lo.saturating_sub(2)..lo.min(order.len()) {
                if ev[order[k]].is_none() {
                    ev[order[k]] = Some(self.evaluate(order[k]));
                }
            }
            let monotone = self.monotone(&order, &ev);
            if monotone
                && !order[..lo]
                    .iter()
                    .any(|&i| ev[i].as_ref().is_some_and(|e| e.pass))
            {
                return ((lo < order.len()).then(|| order[lo]), ev);
            }
            // The evidence breaks the assumption: every cheaper candidate, cheapest first.
            for (k, &i) in order.iter().enumerate() {
                if ev[i].is_none() && k < lo {
                    ev[i] = Some(self.evaluate(i));
                }
                if ev[i].as_ref().is_some_and(|e| e.pass) {
                    return (Some(i), ev);
                }
            }
            return (None, ev);
        }
        let mut order: Vec<usize> = (0..self.candidates.len()).collect();
        order.sort_by(|&a, &b| {
            self.candidates[a]
                .cost
                .total_cmp(&self.candidates[b].cost)
                .then(a.cmp(&b))
        });
        for &i in &order {
            let e = self.evaluate(i);
            let pass = e.pass;
            ev[i] = Some(e);
            if pass {
                return (Some(i), ev);
            }
        }
        (None, ev)
    }

    /// Whether the figures of the candidates run so far never get worse with more spines
    /// (`order`: by spine count): bus bandwidth and goodput never fall, the P99 never
    /// rises, by more than 1% (the figures' own rounding and histogram precision).
    fn monotone(&self, order: &[usize], ev: &[Option<Evidence>]) -> bool {
        let run: Vec<&Evidence> = order.iter().filter_map(|&i| ev[i].as_ref()).collect();
        run.windows(2).all(|w| {
            let (a, b) = (w[0], w[1]);
            let rises = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) => y >= x * 0.99,
                _ => true,
            };
            let falls = |x: Option<f64>, y: Option<f64>| match (x, y) {
                (Some(x), Some(y)) => y <= x * 1.01,
                _ => true,
            };
            rises(a.busbw_gbs, b.busbw_gbs)
                && rises(Some(a.goodput_gbps), Some(b.goodput_gbps))
                && falls(a.p99_fct_us, b.p99_fct_us)
                && falls(a.step_ms, b.step_ms)
        })
    }

    /// `plan.csv`: one row per candidate with its evidence (empty figures where it was not
    /// run) and whether it is the answer.
    pub fn csv(&self, choice: Option<usize>, ev: &[Option<Evidence>]) -> String {
        let mut o = String::from("candidate,set,spines,links,cost,run,busbw_gbs,p99_fct_us,p99_ci95_us,p99_lower_bound,goodput_gbps,step_ms,pass,failed,unmeetable,chosen\n");
        let f = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
        for (i, c) in self.candidates.iter().enumerate() {
            let set: Vec<String> = c.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let e = ev[i].as_ref();
            let _ = writeln!(
                o,
                "{i},\"{}\",{},{},{},{},{},{},{},{},{},{},{},\"{}\",\"{}\",{}",
                set.join(" "),
                c.spines,
                c.links,
                c.cost,
                e.is_some(),
                f(e.and_then(|e| e.busbw_gbs)),
                f(e.and_then(|e| e.p99_fct_us)),
                f(e.and_then(|e| e.p99_ci95_us)),
                e.is_some_and(|e| e.p99_lower_bound),
                f(e.map(|e| e.goodput_gbps).filter(|g| g.is_finite())),
                f(e.and_then(|e| e.step_ms)),
                e.is_some_and(|e| e.pass),
                e.map_or(String::new(), |e| e.failed.join("; ")),
                e.map_or(String::new(), |e| e.unmeetable.join("; ").replace('"', "'")),
                Some(i) == choice,
            );
        }
        o
    }

    /// `plan.json`: the targets, the decision and every candidate's evidence.
    pub fn json(&self, choice: Option<usize>, ev: &[Option<Evidence>]) -> serde_json::Value {
        let candidates: Vec<serde_json::Value> = self
            .candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let e = ev[i].as_ref();
                serde_json::json!({
                    "candidate": i,
                    "set": c.set.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
                    "spines": c.spines,
                    "links": c.links,
                    "cost": c.cost,
                    "run": e.is_some(),
                    "busbw_gbs": e.and_then(|e| e.busbw_gbs),
                    "p99_fct_us": e.and_then(|e| e.p99_fct_us),
                    "p99_ci95_us": e.and_then(|e| e.p99_ci95_us),
                    "p99_lower_bound": e.map(|e| e.p99_lower_bound),
                    "goodput_gbps": e.map(|e| e.goodput_gbps).filter(|g| g.is_finite()),
                    "step_ms": e.and_then(|e| e.step_ms),
                    "pass": e.map(|e| e.pass),
                    "failed": e.map(|e| e.failed.clone()),
                    "unmeetable": e.map(|e| e.unmeetable.clone()),
                })
            })
            .collect();
        serde_json::json!({
            "targets": {
                "busbw_min_gbs": self.targets.busbw_min_gbs,
                "p99_fct_max_us": self.targets.p99_fct_max_us,
                "goodput_min_gbps": self.targets.goodput_min_gbps,
                "step_time_max_ms": self.targets.step_time_max_ms,
            },
            "bisect": self.bisect,
            "repeats": self.repeats,
            "choice": choice,
            "candidates": candidates,
        })
    }

    /// Writes `plan.txt` (the printed report), `plan.csv` and `plan.json` into `dir`
    /// (claimed as a run's folder is: refused if it holds unfinished output, unless
    /// `force`), then seals it.
    pub fn write_files(
        &self,
        dir: &Path,
        force: bool,
        choice: Option<usize>,
        ev: &[Option<Evidence>],
    ) -> anyhow::Result<()> {
        use crate::outdir::{claim, seal, write_atomic, Claim};
        let _claimed = claim(dir, if force { Claim::Force } else { Claim::Fresh })?;
        write_atomic(&dir.join("plan.txt"), self.report(choice, ev).as_bytes())?;
        write_atomic(&dir.join("plan.csv"), self.csv(choice, ev).as_bytes())?;
        let json = serde_json::to_string_pretty(&self.json(choice, ev))? + "\n";
        write_atomic(&dir.join("plan.json"), json.as_bytes())?;
        seal(dir, "plan")?;
        Ok(())
    }

    /// The decision and its evidence, as printed.
    pub fn report(&self, choice: Option<usize>, ev: &[Option<Evidence>]) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "plan     {} candidates, {}; targets:{}{}{}{}",
            self.candidates.len(),
            if self.bisect {
                "bisecting over the spine count"
            } else {
                "cheapest first"
            },
            self.targets
                .busbw_min_gbs
                .map_or(String::new(), |x| format!(" busbw >= {x} GB/s")),
            self.targets
                .p99_fct_max_us
                .map_or(String::new(), |x| format!(" P99 FCT <= {x} us")),
            self.targets
                .goodput_min_gbps
                .map_or(String::new(), |x| format!(" goodput >= {x} Gb/s")),
            self.targets
                .step_time_max_ms
                .map_or(String::new(), |x| format!(" step <= {x} ms")),
        );
        // The step column shows only where a step is judged (the reference plans'
        // tables stay as they were).
        let steps = self.targets.step_time_max_ms.is_some();
        if self.repeats > 1 {
            let _ = writeln!(
                o,
                "repeats  {} runs per candidate, one seed per repeat shared by every candidate; figures and targets on the means (P99 +- 95% half-width)",
                self.repeats
            );
        }
        let _ = writeln!(
            o,
            "  {:<4} {:<36} {:>6} {:>6} {:>12} {:>11} {:>12} {:>13}{}  verdict",
            "#",
            "candidate",
            "spines",
            "links",
            "cost",
            "busbw GB/s",
            "P99 FCT us",
            "goodput Gb/s",
            if steps {
                format!(" {:>10}", "step ms")
            } else {
                String::new()
            }
        );
        for (i, c) in self.candidates.iter().enumerate() {
            let name: Vec<String> = c.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
            let (busbw, p99, goodput, verdict) = match &ev[i] {
                None => (
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "not run (bisection)".to_string(),
                ),
                Some(e) => (
                    f(e.busbw_gbs),
                    match e.p99_fct_us {
                        Some(v) if e.p99_lower_bound => format!(">={v:.2}"),
                        Some(v) if e.p99_ci95_us.is_some() => {
                            format!("{v:.1}+-{:.1}", e.p99_ci95_us.unwrap_or(0.0))
                        }
                        v => f(v),
                    },
                    format!("{:.2}", e.goodput_gbps),
                    if e.pass {
                        "meets every target".to_string()
                    } else if !e.unmeetable.is_empty() {
                        format!("misses {} (unmeetable on this fabric)", e.failed.join(", "))
                    } else {
                        format!("misses {}", e.failed.join(", "))
                    },
                ),
            };
            let mark = if Some(i) == choice { "*" } else { " " };
            let _ = writeln!(
                o,
                "{mark} {:<4} {:<36} {:>6} {:>6} {:>12.0} {:>11} {:>12} {:>13}{}  {verdict}",
                i,
                name.join(", "),
                c.spines,
                c.links,
                c.cost,
                busbw,
                p99,
                goodput,
                if steps {
                    let v = ev[i].as_ref().and_then(|e| e.step_ms);
                    format!(" {:>10}", v.map_or("-".into(), |v| format!("{v:.3}")))
                } else {
                    String::new()
                }
            );
        }
        if self.bisect {
            let mut order: Vec<usize> = (0..self.candidates.len()).collect();
            order.sort_by_key(|&i| (self.candidates[i].spines, i));
            // Verdicts that flip back (a pass, then a miss with more spines) overrule the
            // bisection as much as figures that get worse.
            let verdicts: Vec<bool> = order
                .iter()
                .filter_map(|&i| ev[i].as_ref().map(|e| e.pass))
                .collect();
            let flips = verdicts.windows(2).any(|w| w[0] && !w[1]);
            if !self.monotone(&order, ev) || flips {
                let _ = writeln!(
                    o,
                    "note     the figures are not monotone in the spine count (more spines did worse somewhere), so bisection alone could mislead: every cheaper candidate was run"
                );
            }
        }
        match choice {
            Some(i) => {
                let _ = writeln!(
                    o,
                    "decision candidate {i} ({} spines, {} links) at cost {:.0}: the cheapest that meets every target",
                    self.candidates[i].spines, self.candidates[i].links, self.candidates[i].cost
                );
            }
            None => {
                let _ = writeln!(o, "decision none of the candidates meets every target");
            }
        }
        // Targets no candidate could meet even with the fabric empty: no spine count
        // helps; the target, the hosts or the workload must change.
        let run: Vec<&Evidence> = ev.iter().flatten().collect();
        if let Some(first) = run.first().filter(|_| choice.is_none()) {
            for why in &first.unmeetable {
                let target = why.split(':').next().unwrap_or("");
                if run
                    .iter()
                    .all(|e| e.unmeetable.iter().any(|u| u.starts_with(target)))
                {
                    let _ = writeln!(
                        o,
                        "unmeetable {why}: no candidate can meet it even on an empty fabric (more spines cannot help)"
                    );
                }
            }
        }
        o
    }
}

//! Parameter sweeps: the same scenario at many points of its parameter space, run in
//! parallel, deterministically, and optionally split into shards across machines.
//!
//! A scenario's `sweep:` section names the points:
//! ```yaml
//! sweep:
//!   grid:                       # the cartesian product, first key slowest
//!     topology.spines: [2, 4, 8]
//!     workload.0.poisson.load: [0.1, 0.5]
//!   points:                     # and/or an explicit list
//!     - { topology.spines: 16, cc.algorithm: dcqcn }
//!   repeats: 3                  # each point with 3 seeds
//! ```
//! Paths are those of `--set`. Repeat r runs with the scenario seed
//! `stream_seed(seed, Sweep, 0, r)` at every point: common random numbers, so the points
//! of one repeat see the same draws (arrivals, sizes, hashes, marks where the parameters
//! leave them alike) and a difference between two points is paired, not the luck of two
//! seeds. A row does not depend on which thread, process or machine ran it: `-j 1` and
//! `-j 8` write the same bytes, and the shards of a sweep merge into exactly the
//! unsharded result.
//!
//! `sweep-stats.csv` sums the repeats up per point: for each headline figure (FCT P50,
//! P99 and P99.9, P99 slowdown, aggregate goodput, completed flows, each collective's bus
//! bandwidth) the mean over repeats and its 95% confidence half-width (Student's t on
//! the repeats' spread; empty with one repeat), and the same for the paired difference
//! from point 0 (repeat by repeat).
//!
//! Each row of `sweep.csv` is a point and repeat: its swept values (columns `set.<path>`),
//! then every scalar of that run's `summary.json`, flattened to dotted names (columns are
//! the union over all rows, sorted, so that shards agree). `sweep.json` holds the same rows and, for a
//! shard, which shard of how many, over which scenario (a hash of the scenario text and
//! its overrides), so that `merge` can refuse shards that do not belong together.

use crate::metrics::{r4, summarize};
use crate::outdir::write_atomic;
use crate::rng::{stream_seed, Stream};
use crate::scenario::{parse_str, set_value, Overrides, Scenario, ScenarioError};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One point of a sweep: the assignments that make it.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub index: u32,
    /// (dotted path, YAML value in flow style).
    pub set: Vec<(String, String)>,
}

/// A sweep ready to run.
#[derive(Clone, Debug)]
pub struct SweepPlan {
    pub file: String,
    pub stem: String,
    text: String,
    overrides: Overrides,
    pub points: Vec<Point>,
    pub repeats: u32,
    pub seed: u64,
    /// The swept paths, in column order.
    pub paths: Vec<String>,
    /// Identifies the scenario and its overrides (hex FNV-1a).
    pub hash: String,
}

/// One run's row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub point: u32,
    pub repeat: u32,
    pub seed: u64,
    /// Swept path -> value (as written in the sweep).
    pub values: BTreeMap<String, String>,
    /// Flattened summary.json scalars.
    pub metrics: BTreeMap<String, Json>,
}

/// `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepFile {
    pub scenario: String,
    pub hash: String,
    pub points: u32,
    pub repeats: u32,
    pub paths: Vec<String>,
    /// `[index, count]` for a shard's file; absent for a whole sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<[u32; 2]>,
    pub rows: Vec<Row>,
}

/// FNV-1a, 64 bits, as 16 hex digits.
fn fnv(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Reads a scenario's `sweep:` section and checks every point (each must make a valid
/// scenario: a bad path or value is reported like a `--set` error).
pub fn plan(path: &Path, overrides: &Overrides) -> Result<SweepPlan, ScenarioError> {
    let (text, file, stem) = crate::scenario::read_file(path)?;
    plan_str(&text, &file, &stem, overrides)
}

/// [`plan`] on scenario text.
pub fn plan_str(
    text: &str,
    file: &str,
    stem: &str,
    overrides: &Overrides,
) -> Result<SweepPlan, ScenarioError> {
    // The base scenario must be valid on its own.
    let (base, tree) = crate::scenario::runner_input(
        text,
        file,
        stem,
        overrides,
        "a sweep runs the scenario once per point",
        "sweep the sets' fields as points instead (for example `points: [ { transport.rc.timeout: 14 }, { transport.rc.timeout: 18 } ]`), or run the sets with `doorbell run` and `repeats:`",
    )?;
    let sweep = tree
        .get("sweep")
        .cloned()
        .filter(|v| !v.is_null())
        .ok_or_else(|| ScenarioError::at(file, "sweep", "no `sweep:` section to run"))?;
    let map = sweep.as_mapping().ok_or_else(|| {
        ScenarioError::at(
            file,
            "sweep",
            "expected a map with `grid`, `points` and `repeats`",
        )
    })?;
    let mut grid: Vec<(String, Vec<String>)> = Vec::new();
    let mut listed: Vec<Vec<(String, String)>> = Vec::new();
    let mut repeats = 1u32;
    for (k, v) in map {
        let key = k.as_str().unwrap_or("");
        match key {
            "grid" => {
                let g = v.as_mapping().ok_or_else(|| {
                    ScenarioError::at(file, "sweep.grid", "expected a map of path: [values]")
                })?;
                for (p, vals) in g {
                    let p = p.as_str().ok_or_else(|| {
                        ScenarioError::at(file, "sweep.grid", "expected field paths as keys")
                    })?;
                    let vals = vals
                        .as_sequence()
                        .filter(|s| !s.is_empty())
                        .ok_or_else(|| {
                            ScenarioError::at(
                                file,
                                &format!("sweep.grid.{p}"),
                                "expected a non-empty list of values",
                            )
                        })?;
                    grid.push((p.to_string(), vals.iter().map(set_value).collect()));
                }
            }
            "points" => {
                let list = v.as_sequence().ok_or_else(|| {
                    ScenarioError::at(file, "sweep.points", "expected a list of maps")
                })?;
                for (i, pt) in list.iter().enumerate() {
                    let m = pt.as_mapping().ok_or_else(|| {
                        ScenarioError::at(
                            file,
                            &format!("sweep.points[{i}]"),
                            "expected a map of path: value",
                        )
                    })?;
                    let mut set = Vec::new();
                    for (p, val) in m {
                        let p = p.as_str().ok_or_else(|| {
                            ScenarioError::at(
                                file,
                                &format!("sweep.points[{i}]"),
                                "expected field paths as keys",
                            )
                        })?;
                        set.push((p.to_string(), set_value(val)));
                    }
                    listed.push(set);
                }
            }
            "repeats" => {
                repeats = v
                    .as_u64()
                    .filter(|&r| (1..=1000).contains(&r))
                    .ok_or_else(|| ScenarioError::at(file, "sweep.repeats", "expected 1 to 1000"))?
                    as u32;
            }
            other => {
                return Err(ScenarioError::at(
                    file,
                    &format!("sweep.{other}"),
                    "unknown field, expected `grid`, `points` or `repeats`",
                ))
            }
        }
    }
    // The grid's cartesian product, first key slowest, then the listed points.
    let mut sets: Vec<Vec<(String, String)>> = Vec::new();
    if !grid.is_empty() {
        let total: usize = grid
            .iter()
            .try_fold(1usize, |a, (_, v)| a.checked_mul(v.len()))
            .unwrap_or(usize::MAX);
        if total > 100_000 {
            return Err(ScenarioError::at(
                file,
                "sweep.grid",
                format!("{total} points; at most 100000"),
            ));
        }
        for i in 0..total {
            let mut rest = i;
            let mut set = vec![(String::new(), String::new()); grid.len()];
            for (g, (p, vals)) in grid.iter().enumerate().rev() {
                set[g] = (p.clone(), vals[rest % vals.len()].clone());
                rest /= vals.len();
            }
            sets.push(set);
        }
    }
    sets.extend(listed);
    if sets.is_empty() {
        return Err(ScenarioError::at(
            file,
            "sweep",
            "no points: give `grid` or `points`",
        ));
    }
    let mut paths: Vec<String> = Vec::new();
    for set in &sets {
        for (p, _) in set {
            if !paths.contains(p) {
                paths.push(p.clone());
            }
        }
    }
    let points: Vec<Point> = sets
        .into_iter()
        .enumerate()
        .map(|(i, set)| Point {
            index: i as u32,
            set,
        })
        .collect();
    let plan = SweepPlan {
        file: file.to_string(),
        stem: stem.to_string(),
        // The scenario text, its overrides and seed, and the simulator's version.
        hash: fnv(format!(
            "{text}\u{0}{}\u{0}{:?}\u{0}{}",
            overrides.set.join("\u{0}"),
            overrides.seed,
            env!("CARGO_PKG_VERSION")
        )
        .as_bytes()),
        text: text.to_string(),
        overrides: overrides.clone(),
        points,
        repeats,
        seed: overrides.seed.unwrap_or(base.seed),
        paths,
    };
    // Every point must make a valid scenario (errors name the path and the point).
    for p in &plan.points {
        plan.scenario(p, 0).map_err(|mut e| {
            let set: Vec<String> = p.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
            e.message = format!(
                "{} (sweep point {}: {})",
                e.message,
                p.index,
                set.join(", ")
            );
            e
        })?;
    }
    Ok(plan)
}

impl SweepPlan {
    /// The scenario of point `p`, repeat `r`.
    pub fn scenario(&self, p: &Point, r: u32) -> Result<Scenario, ScenarioError> {
        let mut set = self.overrides.set.clone();
        set.extend(p.set.iter().map(|(k, v)| format!("{k}={v}")));
        parse_str(
            &self.text,
            &self.file,
            &self.stem,
            &Overrides {
                // The same seed for repeat r at every point: paired comparisons.
                seed: Some(stream_seed(self.seed, Stream::Sweep, 0, r as u64)),
                set,
            },
        )
    }

    /// The `sweep.json` contents for `rows`, run as shard `shard` (or all of it).
    pub fn file(&self, shard: Option<(u32, u32)>, rows: Vec<Row>) -> SweepFile {
        SweepFile {
            scenario: self.stem.clone(),
            hash: self.hash.clone(),
            points: self.points.len() as u32,
            repeats: self.repeats,
            paths: self.paths.clone(),
            shard: shard.map(|(i, n)| [i, n]),
            rows,
        }
    }

    /// The (point, repeat) pairs of shard `index` of `count` (points `i` with
    /// `i mod count == index`, all their repeats).
    pub fn jobs(&self, shard: Option<(u32, u32)>) -> Vec<(u32, u32)> {
        let (i, n) = shard.unwrap_or((0, 1));
        self.points
            .iter()
            .filter(|p| p.index % n == i)
            .flat_map(|p| (0..self.repeats).map(move |r| (p.index, r)))
            .collect()
    }
}

/// Flattens a JSON value's scalars into dotted names.
pub(crate) fn flatten(prefix: &str, v: &Json, out: &mut BTreeMap<String, Json>) {
    match v {
        Json::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        // Lists are numbered (`tiers.1.util_mean`, `collectives.0.avg_busbw_gbs`);
        // absent sections (null) make no column.
        Json::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), x, out);
            }
        }
        Json::Null => {}
        scalar => {
            out.insert(prefix.to_string(), scalar.clone());
        }
    }
}

/// What one run produced, and the events it took (for the progress bar).
pub struct RunResult {
    pub row: Row,
    pub events: u64,
    pub scenario: Scenario,
    pub out: crate::sim::RunOutput,
    pub summary: crate::metrics::Summary,
}

/// Runs point `point`, repeat `repeat`.
pub fn run_one(plan: &SweepPlan, point: u32, repeat: u32) -> RunResult {
    let p = &plan.points[point as usize];
    let mut sc = plan
        .scenario(p, repeat)
        .expect("every point was checked when the sweep was planned");
    // A sweep point is one run (a scenario with sets is refused when planned).
    sc.compare.clear();
    let out = crate::sim::run(&sc);
    let summary = summarize(&sc, &out);
    let json = serde_json::to_value(&summary).unwrap_or(Json::Null);
    let mut metrics = BTreeMap::new();
    flatten("", &json, &mut metrics);
    RunResult {
        row: Row {
            point,
            repeat,
            seed: sc.seed,
            values: p.set.iter().cloned().collect(),
            metrics,
        },
        events: out.events,
        scenario: sc,
        out,
        summary,
    }
}

/// Runs `jobs` on `threads` threads; `each` sees every finished run (in completion
/// order) for progress and per-point files. Rows come back sorted by point and repeat.
pub fn run_jobs(
    plan: &SweepPlan,
    jobs: &[(u32, u32)],
    threads: usize,
    each: &(dyn Fn(&RunResult) + Sync),
) -> Vec<Row> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .expect("a thread pool");
    let mut rows: Vec<Row> = pool.install(|| {
        // One run per work item, so that an idle thread can take any waiting run.
        jobs.par_iter()
            .with_max_len(1)
            .map(|&(p, r)| {
                let res = run_one(plan, p, r);
                each(&res);
                res.row
            })
            .collect()
    });
    rows.sort_by_key(|r| (r.point, r.repeat));
    rows
}

/// Student's t for a two-sided 95% interval with `dof` degrees of freedom (standard
/// table; 1.96, the normal's, beyond 30).
fn t95(dof: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    T.get(dof.wrapping_sub(1)).copied().unwrap_or(1.96)
}

/// Mean and 95% confidence half-width of `x` (`None` for the half-width below two
/// values).
pub fn mean_ci95(x: &[f64]) -> (f64, Option<f64>) {
    let n = x.len();
    let mean = x.iter().sum::<f64>() / n.max(1) as f64;
    if n < 2 {
        return (mean, None);
    }
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64;
    (mean, Some(t95(n - 1) * (var / n as f64).sqrt()))
}

/// Whether flattened metric `key` (`fct_us.p99`) is only a lower bound in one run's
/// flattened metrics: its section's `lower_bounds` list names it.
pub(crate) fn bounded(metrics: &BTreeMap<String, Json>, key: &str) -> bool {
    let Some((section, stat)) = key.rsplit_once('.') else {
        return false;
    };
    let prefix = format!("{section}.lower_bounds.");
    metrics
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .any(|(_, v)| v.as_str() == Some(stat))
}

/// Whether a flattened metric is one `sweep-stats.csv` sums up.
pub(crate) fn headline(key: &str) -> bool {
    matches!(
        key,
        "fct_us.p50"
            | "fct_us.p99"
            | "fct_us.p999"
            | "slowdown.p99"
            | "goodput_gbps.aggregate"
            | "flows.completed"
    ) || (key.starts_with("collectives.") && key.ends_with(".avg_busbw_gbs"))
}

/// `sweep-stats.csv`: per point, its swept values, how many repeats, then for each
/// headline metric `<m>.mean, <m>.ci95, <m>.vs_point0.mean, <m>.vs_point0.ci95` (the
/// paired difference from point 0, repeat by repeat; empty for point 0) and
/// `<m>.lower_bound_runs` (the runs in which it was only a lower bound).
pub fn stats_csv(paths: &[String], rows: &[Row]) -> String {
    let num = |r: &Row, k: &str| r.metrics.get(k).and_then(|v| v.as_f64());
    let keys: BTreeSet<&String> = rows
        .iter()
        .flat_map(|r| r.metrics.keys())
        .filter(|k| headline(k))
        .collect();
    let mut points: BTreeMap<u32, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        points.entry(r.point).or_default().push(r);
    }
    let base: BTreeMap<u32, &Row> = points
        .get(&0)
        .map(|v| v.iter().map(|r| (r.repeat, *r)).collect())
        .unwrap_or_default();
    let mut o = String::from("point");
    for p in paths {
        o.push_str(",set.");
        o.push_str(p);
    }
    o.push_str(",repeats");
    for k in &keys {
        for s in [
            "mean",
            "ci95",
            "vs_point0.mean",
            "vs_point0.ci95",
            "lower_bound_runs",
        ] {
            o.push_str(&format!(",{k}.{s}"));
        }
    }
    o.push('\n');
    let f = |x: Option<f64>| x.map_or(String::new(), |v| r4(v).to_string());
    for (point, rs) in &points {
        o.push_str(&point.to_string());
        for p in paths {
            o.push(',');
            o.push_str(rs[0].values.get(p).map_or("", |v| v.as_str()));
        }
        o.push_str(&format!(",{}", rs.len()));
        for k in &keys {
            let x: Vec<f64> = rs.iter().filter_map(|r| num(r, k)).collect();
            let (m, ci) = mean_ci95(&x);
            o.push_str(&format!(",{},{}", f((!x.is_empty()).then_some(m)), f(ci)));
            let d: Vec<f64> = rs
                .iter()
                .filter_map(|r| Some(num(r, k)? - num(base.get(&r.repeat)?, k)?))
                .collect();
            if *point == 0 || d.is_empty() {
                o.push_str(",,");
            } else {
                let (m, ci) = mean_ci95(&d);
                o.push_str(&format!(",{},{}", f(Some(m)), f(ci)));
            }
            // Runs in which the figure was only a lower bound (unfinished flows): the
            // mean then is one too.
            let n = rs.iter().filter(|r| bounded(&r.metrics, k)).count();
            o.push_str(&format!(",{n}"));
        }
        o.push('\n');
    }
    o
}

/// `sweep.csv`: `point, repeat, seed`, the swept paths, then every metric (the union
/// over rows, sorted); a missing value is empty.
pub fn csv(paths: &[String], rows: &[Row]) -> String {
    let keys: BTreeSet<&String> = rows.iter().flat_map(|r| r.metrics.keys()).collect();
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut o = String::from("point,repeat,seed");
    for p in paths {
        o.push_str(",set.");
        o.push_str(&quote(p));
    }
    for k in &keys {
        o.push(',');
        o.push_str(&quote(k));
    }
    o.push('\n');
    for r in rows {
        o.push_str(&format!("{},{},{}", r.point, r.repeat, r.seed));
        for p in paths {
            o.push(',');
            o.push_str(&quote(r.values.get(p).map_or("", |v| v.as_str())));
        }
        for k in &keys {
            o.push(',');
            let v = match r.metrics.get(*k) {
                None | Some(Json::Null) => String::new(),
                Some(Json::String(s)) => quote(s),
                Some(x) => x.to_string(),
            };
            o.push_str(&v);
        }
        o.push('\n');
    }
    o
}

/// Writes `sweep.csv` and `sweep.json` into `dir` (each whole or not at all).
pub fn write(dir: &Path, file: &SweepFile) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    write_atomic(
        &dir.join("sweep.csv"),
        csv(&file.paths, &file.rows).as_bytes(),
    )?;
    write_atomic(
        &dir.join("sweep-stats.csv"),
        stats_csv(&file.paths, &file.rows).as_bytes(),
    )?;
    let mut j = serde_json::to_string_pretty(file).map_err(std::io::Error::other)?;
    j.push('\n');
    write_atomic(&dir.join("sweep.json"), j.as_bytes())
}

/// The first line of a sweep's journal: which sweep, and which shard of it, its rows
/// belong to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalHeader {
    pub scenario: String,
    pub hash: String,
    pub points: u32,
    pub repeats: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<[u32; 2]>,
}

impl SweepPlan {
    /// The journal header of shard `shard` of this sweep (or all of it).
    pub fn journal_header(&self, shard: Option<(u32, u32)>) -> JournalHeader {
        JournalHeader {
            scenario: self.stem.clone(),
            hash: self.hash.clone(),
            points: self.points.len() as u32,
            repeats: self.repeats,
            shard: shard.map(|(i, n)| [i, n]),
        }
    }
}

/// An unfinished sweep's journal ([`crate::outdir::JOURNAL`]): a header line, then one
/// JSON row per finished run, appended as runs finish, so that `sweep --resume` reruns
/// only what is missing. A line cut by a kill has no newline and is ignored on reading.
pub struct Journal {
    file: std::sync::Mutex<std::fs::File>,
}

impl Journal {
    /// Starts a new journal in `dir`.
    pub fn start(dir: &Path, header: &JournalHeader) -> std::io::Result<Journal> {
        let mut line = serde_json::to_string(header).map_err(std::io::Error::other)?;
        line.push('\n');
        let mut f = std::fs::File::create(dir.join(crate::outdir::JOURNAL))?;
        std::io::Write::write_all(&mut f, line.as_bytes())?;
        Ok(Journal {
            file: std::sync::Mutex::new(f),
        })
    }

    /// Appends to the journal already in `dir`. A line cut by a kill is ended first, so
    /// that it stays one unreadable line and the next row starts a line of its own.
    pub fn reopen(dir: &Path) -> std::io::Result<Journal> {
        let path = dir.join(crate::outdir::JOURNAL);
        let ends_whole = std::fs::read(&path)?.last() == Some(&b'\n');
        let mut f = std::fs::OpenOptions::new().append(true).open(&path)?;
        if !ends_whole {
            std::io::Write::write_all(&mut f, b"\n")?;
        }
        Ok(Journal {
            file: std::sync::Mutex::new(f),
        })
    }

    /// Records a finished run (one write, so a kill cuts at most this line).
    pub fn record(&self, row: &Row) -> std::io::Result<()> {
        let mut line = serde_json::to_string(row).map_err(std::io::Error::other)?;
        line.push('\n');
        let mut f = self.file.lock().expect("journal lock");
        std::io::Write::write_all(&mut *f, line.as_bytes())
    }
}

/// Reads `dir`'s journal: its header and the rows of the runs it recorded (the first of
/// any repeated run). `None` when there is no journal; an error names the line that does
/// not parse. A line cut by a kill (the unterminated last one, or a terminated line that
/// does not parse right before more rows) is skipped: its run runs again.
pub fn read_journal(dir: &Path) -> Result<Option<(JournalHeader, Vec<Row>)>, String> {
    let path = dir.join(crate::outdir::JOURNAL);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut lines = text.split_inclusive('\n').filter(|l| l.ends_with('\n'));
    let header: JournalHeader = lines
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| format!("{}: line 1 is not a sweep journal header", path.display()))?;
    let mut seen = BTreeSet::new();
    let mut rows = Vec::new();
    for l in lines {
        // A line cut by a kill and ended by `reopen` does not parse: its run reruns.
        let Ok(row) = serde_json::from_str::<Row>(l) else {
            continue;
        };
        if seen.insert((row.point, row.repeat)) {
            rows.push(row);
        }
    }
    Ok(Some((header, rows)))
}

/// Joins shards' `sweep.json` files into the whole sweep. Refuses shards of different
/// scenarios or shard counts, a point given twice, and points no shard has.
pub fn merge(shards: &[SweepFile]) -> Result<SweepFile, String> {
    let first = shards.first().ok_or("no shards to merge")?;
    let mut seen: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    let mut rows = Vec::new();
    let mut shard_ids = BTreeSet::new();
    for (k, s) in shards.iter().enumerate() {
        if s.hash != first.hash || s.points != first.points || s.repeats != first.repeats {
            return Err(format!(
                "shard {} is from another scenario or sweep (hash {} vs {}); merge only shards of one sweep",
                k + 1,
                s.hash,
                first.hash
            ));
        }
        let [i, n] = s.shard.unwrap_or([0, 1]);
        let [_, n0] = first.shard.unwrap_or([0, 1]);
        if n == 0 || i >= n {
            return Err(format!("shard {} says it is shard {i} of {n}", k + 1));
        }
        if let Some(r) = s
            .rows
            .iter()
            .find(|r| r.point >= s.points || r.repeat >= s.repeats)
        {
            return Err(format!(
                "shard {} has point {} repeat {}, outside its sweep of {} points x {} repeats",
                k + 1,
                r.point,
                r.repeat,
                s.points,
                s.repeats
            ));
        }
        if n != n0 {
            return Err(format!(
                "shard {} was cut {n} ways, the first {n0} ways",
                k + 1
            ));
        }
        if !shard_ids.insert(i) {
            return Err(format!("shard {i} of {n} is given twice"));
        }
        for r in &s.rows {
            if let Some(prev) = seen.insert((r.point, r.repeat), k) {
                return Err(format!(
                    "point {} repeat {} is in two shards ({} and {})",
                    r.point,
                    r.repeat,
                    prev + 1,
                    k + 1
                ));
            }
            rows.push(r.clone());
        }
    }
    let missing: Vec<u32> = (0..first.points)
        .filter(|&p| (0..first.repeats).any(|r| !seen.contains_key(&(p, r))))
        .collect();
    if !missing.is_empty() {
        let n = first.shard.map_or(1, |s| s[1]).max(1);
        let shards_missing: BTreeSet<u32> = missing.iter().map(|p| p % n).collect();
        return Err(format!(
            "incomplete: points {} have not run (shards {} of {n}); run those shards and merge again",
            list(&missing),
            shards_missing
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    rows.sort_by_key(|r| (r.point, r.repeat));
    Ok(SweepFile {
        shard: None,
        rows,
        ..first.clone()
    })
}

fn list(v: &[u32]) -> String {
    if v.len() <= 12 {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        format!(
            "{} and {} more",
            v[..12]
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            v.len() - 12
        )
    }
}

/// `I/N` from `--shard`, else from Slurm's array variables (arrays may start at 1:
/// the index counts from SLURM_ARRAY_TASK_MIN).
pub fn shard_of(arg: Option<&str>) -> Result<Option<(u32, u32)>, String> {
    let parse = |i: &str, n: &str, what: &str| -> Result<(u32, u32), String> {
        let (i, n): (u32, u32) = (
            i.trim()
                .parse()
                .map_err(|_| format!("{what}: `{i}` is not a shard index"))?,
            n.trim()
                .parse()
                .map_err(|_| format!("{what}: `{n}` is not a shard count"))?,
        );
        if n == 0 || i >= n {
            return Err(format!(
                "{what}: expected I/N with 0 <= I < N, found {i}/{n}"
            ));
        }
        Ok((i, n))
    };
    if let Some(a) = arg {
        let (i, n) = a
            .split_once('/')
            .ok_or_else(|| format!("--shard: expected I/N, found `{a}`"))?;
        return parse(i, n, "--shard").map(Some);
    }
    let var = |k: &str| std::env::var(k).ok();
    match (var("SLURM_ARRAY_TASK_ID"), var("SLURM_ARRAY_TASK_COUNT")) {
        (Some(id), Some(count)) => {
            let number = |k: &str, v: Option<String>, default: u32| -> Result<u32, String> {
                match v {
                    None => Ok(default),
                    Some(v) => v
                        .trim()
                        .parse()
                        .map_err(|_| format!("{k}: `{v}` is not a number")),
                }
            };
            let id = number("SLURM_ARRAY_TASK_ID", Some(id), 0)?;
            let min = number("SLURM_ARRAY_TASK_MIN", var("SLURM_ARRAY_TASK_MIN"), 0)?;
            let step = number("SLURM_ARRAY_TASK_STEP", var("SLURM_ARRAY_TASK_STEP"), 1)?.max(1);
            if id < min || (id - min) % step != 0 {
                return Err(format!(
                    "SLURM_ARRAY_TASK_ID {id} is not on the array's steps (first {min}, step {step}): give --shard I/N"
                ));
            }
            parse(
                &((id - min) / step).to_string(),
                &count,
                "SLURM_ARRAY_TASK_ID/COUNT",
            )
            .map(Some)
        }
        (None, None) => Ok(None),
        _ => Err(
            "only one of SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT is set: give --shard I/N"
                .into(),
        ),
    }
}

//! Training traces in and out: doorbell's own versioned JSON format (a step's tasks with
//! their dependencies), and an importer for the SimAI/AICB workload file.
//!
//! The native format, version 1 (`doorbell trace` writes it from a `training` item;
//! `workload: - trace: { file }` replays it):
//! ```json
//! { "format": "doorbell-training-trace", "version": 1, "ranks": 16,
//!   "name": "my job", "microbatches": 4,
//!   "groups": [[0, 1, 2, 3], [4, 5, 6, 7]],
//!   "pairs": [[[0, 8], [1, 9]]],
//!   "tasks": [
//!     { "compute_ps": 120000000, "lane": 0 },
//!     { "collective": "allreduce", "groups": [0, 1], "bytes": 33554432,
//!       "class": "tp", "deps": [0] },
//!     { "send": 0, "bytes": 4194304, "deps": [1], "step": 0 } ] }
//! ```
//! A task is compute (`compute_ps`, or `compute_us`, on compute lane `lane`: the ranks
//! that run it, for the report's busiest-lane figure), a collective (`collective`: op,
//! over every group of `groups` at once, each of `bytes`, nccl-tests' size), or a send
//! (`send`: every rank pair of `pairs[i]` sends `bytes`). `deps` name earlier tasks (by
//! position), so a file is acyclic by construction; `step` (default 0) says which
//! training step a task belongs to. Collectives over the same groups and of the same
//! class run in file order, as operations on one NCCL communicator do (a job's data- and
//! expert-parallel groups may hold the same ranks, on communicators of their own).
//!
//! The SimAI workload file (AICB's output; `aliyun/SimAI`, `example/*.txt`): a header
//! (`HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 ... ga: 1
//! all_gpus: 64 ...`), the number of layers, and per layer its name, a reserved field,
//! then forward, input-gradient and weight-gradient (compute time, communication type,
//! bytes) and the update time. SimAI runs each of `ga` microbatches forward through the
//! layers and back (forward and input-gradient communication in line, over the
//! tensor-parallel group), and the last microbatch's weight-gradient communication over
//! the data-parallel group without waiting for it; suffixes `_EP` and `_DP_EP` name the
//! expert-parallel and expert-data-parallel groups. Times are nanoseconds (`time_unit`
//! changes that). Leaves out: `pp` > 1 in SimAI files (refused), `vpp`, checkpoints.

use super::graph::{CommClass, GroupSet, StepGraph, Task, TaskKind};
use crate::collective::{op_name, CollectiveOp};
use crate::units::SimDuration;
use serde::Deserialize;
use std::collections::HashMap;

/// The native format's name and version.
pub const FORMAT: &str = "doorbell-training-trace";
pub const VERSION: u32 = 1;

/// What a trace describes.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub graph: StepGraph,
    pub name: String,
    /// dp, tp, pp, ep as the trace states them (for the report).
    pub parallelism: [u32; 4],
    pub microbatches: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NativeFile {
    format: String,
    version: u32,
    ranks: u32,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    parallelism: Option<NativeParallelism>,
    #[serde(default)]
    microbatches: Option<u32>,
    #[serde(default)]
    groups: Vec<Vec<u32>>,
    #[serde(default)]
    pairs: Vec<Vec<[u32; 2]>>,
    tasks: Vec<NativeTask>,
}

#[derive(Deserialize, serde::Serialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct NativeParallelism {
    dp: u32,
    tp: u32,
    pp: u32,
    ep: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NativeTask {
    #[serde(default)]
    deps: Vec<u32>,
    #[serde(default)]
    step: u32,
    #[serde(default)]
    lane: u32,
    #[serde(default)]
    compute_ps: Option<u64>,
    #[serde(default)]
    compute_us: Option<f64>,
    #[serde(default)]
    collective: Option<CollectiveOp>,
    #[serde(default)]
    groups: Option<Vec<u32>>,
    #[serde(default)]
    bytes: Option<u64>,
    #[serde(default)]
    class: Option<String>,
    #[serde(default)]
    send: Option<u32>,
}

/// The most tasks, groups and ranks a trace may hold, and the most bytes one collective
/// or send may move (1 TiB).
const MAX_TASKS: usize = 20_000_000;
const MAX_BYTES: u64 = 1 << 40;
const MAX_RANKS: u32 = 1 << 20;

/// Builds graphs from tasks: sets keyed by (groups, op), collectives over the same groups
/// ordered as given.
struct GraphBuilder {
    g: StepGraph,
    sets: HashMap<(Vec<Vec<u32>>, u8, u8), u32>,
    last_on_groups: HashMap<(Vec<Vec<u32>>, u8), u32>,
    ranks: u32,
}

impl GraphBuilder {
    fn new(ranks: u32) -> GraphBuilder {
        GraphBuilder {
            g: StepGraph {
                ranks,
                steps: 1,
                ..StepGraph::default()
            },
            sets: HashMap::new(),
            last_on_groups: HashMap::new(),
            ranks,
        }
    }

    fn push(
        &mut self,
        kind: TaskKind,
        lane: u32,
        step: u32,
        class: Option<CommClass>,
        deps: &[u32],
    ) -> u32 {
        let id = self.g.tasks.len() as u32;
        self.g.tasks.push(Task {
            kind,
            stage: lane,
            step,
            class,
        });
        for &d in deps {
            self.g.edges.push((d, id));
        }
        self.g.steps = self.g.steps.max(step + 1);
        if let TaskKind::Compute(d) = kind {
            if self.g.stage_compute.len() <= lane as usize {
                self.g
                    .stage_compute
                    .resize(lane as usize + 1, SimDuration::ZERO);
            }
            let c = &mut self.g.stage_compute[lane as usize];
            *c = SimDuration(c.0.saturating_add(d.0));
        }
        id
    }

    /// A collective over `groups` (rank lists); `None` when no group has two ranks.
    fn collective(
        &mut self,
        op: CollectiveOp,
        groups: Vec<Vec<u32>>,
        bytes: u64,
        class: CommClass,
        (lane, step): (u32, u32),
        deps: &[u32],
    ) -> Option<u32> {
        if groups.iter().all(|g| g.len() < 2) || bytes == 0 {
            return None;
        }
        let n = groups[0].len() as u64;
        let unit = if op == CollectiveOp::Alltoall {
            4 * n
        } else {
            4
        };
        let bytes = bytes.div_ceil(unit).saturating_mul(unit);
        // One communicator per group list and class: its collectives run in order.
        let flat = (groups.clone(), class as u8);
        let key = (groups.clone(), class as u8, op as u8);
        let set = match self.sets.get(&key) {
            Some(&s) => s,
            None => {
                self.g.sets.push(GroupSet {
                    class,
                    op,
                    groups,
                    sizes: Vec::new(),
                });
                let s = self.g.sets.len() as u32 - 1;
                self.sets.insert(key, s);
                s
            }
        };
        self.g.sets[set as usize].sizes.push(bytes);
        let mut all: Vec<u32> = deps.to_vec();
        if let Some(&prev) = self.last_on_groups.get(&flat) {
            all.push(prev);
        }
        all.sort_unstable();
        all.dedup();
        let t = self.push(TaskKind::Collective { set }, lane, step, Some(class), &all);
        self.last_on_groups.insert(flat, t);
        Some(t)
    }

    fn finish(mut self) -> StepGraph {
        let steps = self.g.steps.max(1) as u64;
        for d in &mut self.g.stage_compute {
            *d = SimDuration(d.0 / steps);
        }
        let _ = self.ranks;
        self.g
    }
}

/// Reads a trace: doorbell's JSON, or a SimAI workload file. Errors name the line (and
/// column) and what was expected.
pub fn read(text: &str, time_unit_ps: u64) -> Result<Trace, String> {
    if text.trim_start().starts_with('{') {
        read_native(text)
    } else {
        read_simai(text, time_unit_ps)
    }
}

fn read_native(text: &str) -> Result<Trace, String> {
    let f: NativeFile = serde_json::from_str(text)
        .map_err(|e| format!("line {}, column {}: {e}", e.line(), e.column()))?;
    if f.format != FORMAT {
        return Err(format!("`format` is `{}`, expected `{FORMAT}`", f.format));
    }
    if f.version != VERSION {
        return Err(format!(
            "`version` {} is not one this doorbell reads (it reads {VERSION})",
            f.version
        ));
    }
    if f.ranks < 2 || f.ranks > MAX_RANKS {
        return Err(format!(
            "`ranks`: expected 2 to {MAX_RANKS}, found {}",
            f.ranks
        ));
    }
    if f.tasks.is_empty() || f.tasks.len() > MAX_TASKS {
        return Err(format!(
            "`tasks`: expected 1 to {MAX_TASKS} tasks, found {}",
            f.tasks.len()
        ));
    }
    for (i, g) in f.groups.iter().enumerate() {
        let mut seen = std::collections::HashSet::new();
        for (j, &r) in g.iter().enumerate() {
            if r >= f.ranks {
                return Err(format!(
                    "groups[{i}][{j}]: rank {r} does not exist (ranks: {})",
                    f.ranks
                ));
            }
            if !seen.insert(r) {
                return Err(format!("groups[{i}][{j}]: rank {r} is in the group twice"));
            }
        }
    }
    for (i, p) in f.pairs.iter().enumerate() {
        for (j, &[a, b]) in p.iter().enumerate() {
            if a >= f.ranks || b >= f.ranks || a == b {
                return Err(format!(
                    "pairs[{i}][{j}]: expected two different ranks below {}, found [{a}, {b}]",
                    f.ranks
                ));
            }
        }
    }
    let mut b = GraphBuilder::new(f.ranks);
    // File positions to graph tasks (a collective over groups of one rank makes none).
    let mut id: Vec<Option<u32>> = Vec::with_capacity(f.tasks.len());
    for (i, t) in f.tasks.iter().enumerate() {
        let at = |m: String| format!("tasks[{i}]: {m}");
        let mut deps = Vec::with_capacity(t.deps.len());
        for &d in &t.deps {
            if d as usize >= i {
                return Err(at(format!(
                    "depends on task {d}, which does not come before it (a task may only depend on earlier ones)"
                )));
            }
            deps.extend(id[d as usize]);
        }
        if t.step > 1000 {
            return Err(at(format!("`step` {} is above 1000", t.step)));
        }
        let kinds = [
            t.compute_ps.is_some() || t.compute_us.is_some(),
            t.collective.is_some(),
            t.send.is_some(),
        ];
        if kinds.iter().filter(|&&k| k).count() != 1 {
            return Err(at(
                "expected exactly one of `compute_ps` (or `compute_us`), `collective` and `send`"
                    .into(),
            ));
        }
        let class = match &t.class {
            None => None,
            Some(c) => Some(CommClass::from_name(c).ok_or_else(|| {
                at(format!(
                    "unknown class `{c}`, expected one of {}",
                    CommClass::ALL.map(|c| c.name()).join(", ")
                ))
            })?),
        };
        let made = if let Some(op) = t.collective {
            let groups = t
                .groups
                .as_ref()
                .ok_or_else(|| at("a collective needs `groups`".into()))?;
            let bytes = t
                .bytes
                .ok_or_else(|| at("a collective needs `bytes`".into()))?;
            if bytes > MAX_BYTES {
                return Err(at(format!("`bytes` {bytes} is above {MAX_BYTES}")));
            }
            let mut lists = Vec::with_capacity(groups.len());
            let mut used = std::collections::HashSet::new();
            for &g in groups {
                if !used.insert(g) {
                    return Err(at(format!("group {g} is given twice")));
                }
                let list = f.groups.get(g as usize).ok_or_else(|| {
                    at(format!(
                        "group {g} does not exist ({} groups)",
                        f.groups.len()
                    ))
                })?;
                if !lists.is_empty()
                    && list.len() != lists.first().map_or(0, |l: &Vec<u32>| l.len())
                {
                    return Err(at("every group of a collective needs as many ranks".into()));
                }
                lists.push(list.clone());
            }
            if lists.is_empty() {
                return Err(at("`groups` is empty".into()));
            }
            let mut ranks = std::collections::HashSet::new();
            if !lists.iter().flatten().all(|&r| ranks.insert(r)) {
                return Err(at(
                    "its groups share a rank: a collective's groups run at once, so each rank may be in one".into(),
                ));
            }
            // A collective with nothing to move (groups of one rank, no bytes) still
            // passes its dependencies on.
            b.collective(
                op,
                lists,
                bytes,
                class.unwrap_or(CommClass::Other),
                (t.lane, t.step),
                &deps,
            )
            .or_else(|| {
                Some(b.push(
                    TaskKind::Compute(SimDuration::ZERO),
                    t.lane,
                    t.step,
                    None,
                    &deps,
                ))
            })
        } else if let Some(p) = t.send {
            let bytes = t
                .bytes
                .filter(|&x| x > 0 && x <= MAX_BYTES)
                .ok_or_else(|| at(format!("a send needs `bytes` from 1 to {MAX_BYTES}")))?;
            let list = f.pairs.get(p as usize).ok_or_else(|| {
                at(format!(
                    "pair list {p} does not exist ({} lists)",
                    f.pairs.len()
                ))
            })?;
            if list.is_empty() {
                return Err(at(format!("pair list {p} is empty")));
            }
            let pairs = list.iter().map(|&[a, b]| (a, b)).collect();
            let idx = match b.g.pairs.iter().position(|x| *x == pairs) {
                Some(k) => k as u32,
                None => {
                    b.g.pairs.push(pairs);
                    b.g.pairs.len() as u32 - 1
                }
            };
            Some(b.push(
                TaskKind::Send { pairs: idx, bytes },
                t.lane,
                t.step,
                Some(class.unwrap_or(CommClass::PpSend)),
                &deps,
            ))
        } else {
            let ps = match (t.compute_ps, t.compute_us) {
                (Some(ps), None) => ps,
                (None, Some(us)) if (0.0..1e12).contains(&us) => (us * 1e6).round() as u64,
                (None, Some(us)) => {
                    return Err(at(format!(
                        "`compute_us`: expected a duration of 0 to 1e12 us, found {us}"
                    )))
                }
                _ => return Err(at("give `compute_ps` or `compute_us`, not both".into())),
            };
            if ps > 86_400 * crate::units::PS_PER_SEC {
                return Err(at("a compute phase longer than a simulated day".into()));
            }
            if t.lane > 1_000_000 {
                return Err(at(format!("`lane` {} is above 1000000", t.lane)));
            }
            Some(b.push(
                TaskKind::Compute(SimDuration(ps)),
                t.lane,
                t.step,
                None,
                &deps,
            ))
        };
        id.push(made);
    }
    let mut used = vec![false; b.g.steps as usize];
    for t in &b.g.tasks {
        used[t.step as usize] = true;
    }
    if let Some(k) = used.iter().position(|u| !u) {
        return Err(format!(
            "`step` numbers must run from 0 without gaps: no task belongs to step {k}"
        ));
    }
    let p = f.parallelism.unwrap_or(NativeParallelism {
        dp: f.ranks,
        tp: 1,
        pp: 1,
        ep: 1,
    });
    Ok(Trace {
        graph: b.finish(),
        name: f.name.unwrap_or_else(|| "trace".into()),
        parallelism: [p.dp, p.tp, p.pp, p.ep],
        microbatches: f.microbatches.unwrap_or(1),
    })
}

/// Writes `g` in the native format, tasks in an order where every dependency comes
/// first (ties by the graph's own order, so the file is the same every time).
pub fn write_native(g: &StepGraph, name: &str, parallelism: [u32; 4], microbatches: u32) -> String {
    let (succ, mut deps_left) = g.adjacency();
    let mut preds = vec![Vec::new(); g.tasks.len()];
    for &(a, b) in &g.edges {
        preds[b as usize].push(a);
    }
    let mut ready: std::collections::BTreeSet<u32> = (0..g.tasks.len() as u32)
        .filter(|&i| deps_left[i as usize] == 0)
        .collect();
    let mut order = Vec::with_capacity(g.tasks.len());
    let mut pos = vec![0u32; g.tasks.len()];
    while let Some(i) = ready.pop_first() {
        pos[i as usize] = order.len() as u32;
        order.push(i);
        for &n in &succ[i as usize] {
            deps_left[n as usize] -= 1;
            if deps_left[n as usize] == 0 {
                ready.insert(n);
            }
        }
    }
    // Groups and pair lists, numbered in order of first use (so that a file read back
    // and written again is the same file).
    let mut groups: Vec<Vec<u32>> = Vec::new();
    let mut set_groups: Vec<Option<Vec<u32>>> = vec![None; g.sets.len()];
    let mut pair_ids: Vec<Option<u32>> = vec![None; g.pairs.len()];
    let mut pairs: Vec<Vec<[u32; 2]>> = Vec::new();
    for &i in &order {
        match g.tasks[i as usize].kind {
            TaskKind::Collective { set } if set_groups[set as usize].is_none() => {
                let mut ids = Vec::new();
                for grp in &g.sets[set as usize].groups {
                    let k = match groups.iter().position(|x| x == grp) {
                        Some(k) => k,
                        None => {
                            groups.push(grp.clone());
                            groups.len() - 1
                        }
                    };
                    ids.push(k as u32);
                }
                set_groups[set as usize] = Some(ids);
            }
            TaskKind::Send { pairs: p, .. } if pair_ids[p as usize].is_none() => {
                pair_ids[p as usize] = Some(pairs.len() as u32);
                pairs.push(g.pairs[p as usize].iter().map(|&(a, b)| [a, b]).collect());
            }
            _ => {}
        }
    }
    let mut next_size = vec![0usize; g.sets.len()];
    let mut tasks = Vec::with_capacity(order.len());
    // Collectives over the same groups run in file order when read back: the order is
    // written out as a dependency too (it is implied already), so that a file read and
    // written again is the same file.
    let mut last_on_groups: HashMap<(Vec<Vec<u32>>, u8), u32> = HashMap::new();
    for &i in &order {
        let t = &g.tasks[i as usize];
        let mut d: Vec<u32> = preds[i as usize].iter().map(|&p| pos[p as usize]).collect();
        if let TaskKind::Collective { set } = t.kind {
            let s = &g.sets[set as usize];
            let flat = (s.groups.clone(), s.class as u8);
            if let Some(prev) = last_on_groups.insert(flat, pos[i as usize]) {
                d.push(prev);
            }
        }
        d.sort_unstable();
        d.dedup();
        let mut o = serde_json::Map::new();
        match t.kind {
            TaskKind::Compute(ps) => {
                o.insert("compute_ps".into(), ps.0.into());
                o.insert("lane".into(), t.stage.into());
            }
            TaskKind::Collective { set } => {
                let s = &g.sets[set as usize];
                o.insert("collective".into(), op_name(s.op).into());
                o.insert(
                    "groups".into(),
                    set_groups[set as usize].clone().unwrap_or_default().into(),
                );
                o.insert("bytes".into(), s.sizes[next_size[set as usize]].into());
                next_size[set as usize] += 1;
                o.insert("class".into(), s.class.name().into());
                o.insert("lane".into(), t.stage.into());
            }
            TaskKind::Send { pairs: p, bytes } => {
                o.insert("send".into(), pair_ids[p as usize].unwrap_or(0).into());
                o.insert("bytes".into(), bytes.into());
                if let Some(c) = t.class.filter(|&c| c != CommClass::PpSend) {
                    o.insert("class".into(), c.name().into());
                }
                o.insert("lane".into(), t.stage.into());
            }
        }
        if t.step > 0 {
            o.insert("step".into(), t.step.into());
        }
        if !d.is_empty() {
            o.insert("deps".into(), d.into());
        }
        tasks.push(serde_json::Value::Object(o));
    }
    let [dp, tp, pp, ep] = parallelism;
    let doc = serde_json::json!({
        "format": FORMAT,
        "version": VERSION,
        "ranks": g.ranks,
        "name": name,
        "parallelism": { "dp": dp, "tp": tp, "pp": pp, "ep": ep },
        "microbatches": microbatches,
        "groups": groups,
        "pairs": pairs,
        "tasks": tasks,
    });
    // One task per line: readable, and diffs stay small.
    let mut out = String::from("{\n");
    let obj = doc.as_object().expect("an object");
    let n = obj.len();
    for (k, (key, v)) in obj.iter().enumerate() {
        out.push_str(&format!("  {}: ", serde_json::Value::String(key.clone())));
        match v {
            serde_json::Value::Array(a) if key == "tasks" || key == "groups" || key == "pairs" => {
                out.push_str("[\n");
                for (j, x) in a.iter().enumerate() {
                    out.push_str("    ");
                    out.push_str(&x.to_string());
                    out.push_str(if j + 1 < a.len() { ",\n" } else { "\n" });
                }
                out.push_str("  ]");
            }
            _ => out.push_str(&v.to_string()),
        }
        out.push_str(if k + 1 < n { ",\n" } else { "\n" });
    }
    out.push_str("}\n");
    out
}

/// The SimAI communication types and the group each runs over.
fn simai_comm(kind: &str, wg: bool) -> Result<Option<(CollectiveOp, &'static str)>, String> {
    if kind == "NONE" {
        return Ok(None);
    }
    let (base, group) = if let Some(b) = kind.strip_suffix("_DP_EP") {
        (b, "expert_dp")
    } else if let Some(b) = kind.strip_suffix("_EP") {
        (b, "ep")
    } else {
        (kind, if wg { "dp" } else { "tp" })
    };
    let op = match base {
        "ALLREDUCE" => CollectiveOp::Allreduce,
        "ALLGATHER" => CollectiveOp::Allgather,
        "REDUCESCATTER" => CollectiveOp::ReduceScatter,
        "ALLTOALL" => CollectiveOp::Alltoall,
        _ => {
            return Err(format!(
                "unknown communication type `{kind}`, expected NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER or ALLTOALL (optionally with _EP or _DP_EP)"
            ))
        }
    };
    Ok(Some((op, group)))
}

fn read_simai(text: &str, unit_ps: u64) -> Result<Trace, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or("the file is empty")?;
    let mut tok = header.split_whitespace();
    let kind = tok.next().unwrap_or("");
    if !matches!(
        kind,
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD" | "HYBRID_TRANSFORMER" | "DATA"
    ) {
        return Err(format!(
            "line 1: expected a doorbell JSON trace (`{{`) or a SimAI workload file starting with HYBRID_TRANSFORMER_FWD_IN_BCKWD, HYBRID_TRANSFORMER or DATA, found `{kind}`"
        ));
    }
    let mut keys: HashMap<&str, u64> = HashMap::new();
    let rest: Vec<&str> = tok.collect();
    let mut i = 0;
    while i < rest.len() {
        let k = rest[i].trim_end_matches(':');
        if let Some(v) = rest.get(i + 1).and_then(|v| v.parse::<u64>().ok()) {
            keys.insert(k, v);
            i += 2;
        } else {
            i += 1;
        }
    }
    let get = |k: &str, d: u64| keys.get(k).copied().unwrap_or(d);
    let n = get("all_gpus", 0);
    let tp = if kind == "DATA" {
        1
    } else {
        get("model_parallel_NPU_group", 1)
    };
    let (ep, pp, ga) = (get("ep", 1), get("pp", 1), get("ga", 1));
    if !(2..=MAX_RANKS as u64).contains(&n) {
        return Err(format!(
            "line 1: `all_gpus` expected 2 to {MAX_RANKS}, found {n}"
        ));
    }
    if pp != 1 {
        return Err(format!("line 1: pp {pp}: SimAI files with pipeline parallelism are not imported (pp 1 only); describe the job as a `training` item or a doorbell trace"));
    }
    if tp == 0 || n % tp != 0 || ep == 0 || (n / tp) % ep != 0 {
        return Err(format!("line 1: all_gpus {n} is not a whole number of tensor groups of {tp} with expert groups of {ep}"));
    }
    if ga == 0 || ga > 10_000 {
        return Err(format!("line 1: `ga` expected 1 to 10000, found {ga}"));
    }
    let (n, tp, ep) = (n as u32, tp as u32, ep as u32);
    let dp = n / tp;
    let (line_no, count) = lines
        .next()
        .ok_or("line 2: expected the number of layers")?;
    let layers: usize = count.trim().parse().map_err(|_| {
        format!(
            "line {}: expected the number of layers, found `{}`",
            line_no + 1,
            count.trim()
        )
    })?;
    if layers == 0 || layers > 100_000 {
        return Err(format!(
            "line {}: expected 1 to 100000 layers, found {layers}",
            line_no + 1
        ));
    }
    if (layers as u64) * ga * 6 > MAX_TASKS as u64 {
        return Err(format!(
            "line {}: {layers} layers x {ga} microbatches make more than {MAX_TASKS} tasks",
            line_no + 1
        ));
    }
    struct Layer {
        c: [u64; 3],
        comm: [Option<(CollectiveOp, &'static str, u64)>; 3],
        update: u64,
    }
    let mut rows = Vec::with_capacity(layers);
    for _ in 0..layers {
        let (ln, l) = lines
            .next()
            .ok_or(format!("the file ends before its {layers} layers"))?;
        let f: Vec<&str> = l.split_whitespace().collect();
        let at = |m: String| format!("line {}: {m}", ln + 1);
        if f.len() < 12 {
            return Err(at(format!("expected 12 fields (name, reserved, then compute, type and bytes for forward, input gradient and weight gradient, then update time), found {}", f.len())));
        }
        let num = |k: usize| -> Result<u64, String> {
            f[k].parse::<u64>().map_err(|_| {
                at(format!(
                    "field {} (`{}`): expected a whole number",
                    k + 1,
                    f[k]
                ))
            })
        };
        let mut c = [0; 3];
        let mut comm = [None, None, None];
        for p in 0..3 {
            c[p] = num(2 + 3 * p)?.saturating_mul(unit_ps);
            let bytes = num(4 + 3 * p)?;
            comm[p] = simai_comm(f[3 + 3 * p], p == 2)
                .map_err(at)?
                .map(|(op, g)| (op, g, bytes));
        }
        rows.push(Layer {
            c,
            comm,
            update: num(11)?.saturating_mul(unit_ps),
        });
    }
    // Groups (as Megatron orders ranks: tensor fastest, then data).
    let r = |t: u32, d: u32| t + tp * d;
    let tp_groups: Vec<Vec<u32>> = (0..dp)
        .map(|d| (0..tp).map(|t| r(t, d)).collect())
        .collect();
    let dp_groups: Vec<Vec<u32>> = (0..tp)
        .map(|t| (0..dp).map(|d| r(t, d)).collect())
        .collect();
    let ep_groups: Vec<Vec<u32>> = (0..tp)
        .flat_map(|t| {
            (0..dp / ep).map(move |blk| (0..ep).map(move |e| r(t, blk * ep + e)).collect())
        })
        .collect();
    let edp_groups: Vec<Vec<u32>> = (0..tp)
        .flat_map(|t| {
            (0..ep).map(move |e| (0..dp / ep).map(move |blk| r(t, blk * ep + e)).collect())
        })
        .collect();
    let groups_of = |g: &str| match g {
        "tp" => (tp_groups.clone(), CommClass::TpAllreduce),
        "dp" => (dp_groups.clone(), CommClass::DpAllreduce),
        "ep" => (ep_groups.clone(), CommClass::EpAlltoall),
        _ => (edp_groups.clone(), CommClass::ExpertDpAllreduce),
    };
    let mut b = GraphBuilder::new(n);
    let mut last: Option<u32> = None;
    let mut grads: Vec<u32> = Vec::new();
    let mut pending = SimDuration::ZERO;
    // Compute merges until the next communication in line.
    let flush = |b: &mut GraphBuilder, last: &mut Option<u32>, pending: &mut SimDuration| {
        if *pending > SimDuration::ZERO {
            let deps: Vec<u32> = last.iter().copied().collect();
            *last = Some(b.push(TaskKind::Compute(*pending), 0, 0, None, &deps));
            *pending = SimDuration::ZERO;
        }
    };
    for mb in 0..ga {
        for l in &rows {
            pending += SimDuration(l.c[0]);
            if let Some((op, g, bytes)) = l.comm[0] {
                flush(&mut b, &mut last, &mut pending);
                let (gs, class) = groups_of(g);
                let deps: Vec<u32> = last.iter().copied().collect();
                last = b.collective(op, gs, bytes, class, (0, 0), &deps).or(last);
            }
        }
        for l in rows.iter().rev() {
            pending += SimDuration(l.c[1]);
            if let Some((op, g, bytes)) = l.comm[1] {
                flush(&mut b, &mut last, &mut pending);
                let (gs, class) = groups_of(g);
                let deps: Vec<u32> = last.iter().copied().collect();
                last = b.collective(op, gs, bytes, class, (0, 0), &deps).or(last);
            }
            pending += SimDuration(l.c[2]);
            if let Some((op, g, bytes)) = l.comm[2].filter(|_| mb == ga - 1) {
                // Weight gradients reduce without holding up the backward pass.
                flush(&mut b, &mut last, &mut pending);
                let (gs, class) = groups_of(g);
                let deps: Vec<u32> = last.iter().copied().collect();
                if let Some(t) = b.collective(op, gs, bytes, class, (0, 0), &deps) {
                    grads.push(t);
                }
            }
        }
    }
    flush(&mut b, &mut last, &mut pending);
    // The optimizer's update after every gradient is reduced.
    let update: u64 = rows.iter().map(|l| l.update).sum();
    let deps: Vec<u32> = last.iter().copied().chain(grads).collect();
    b.push(TaskKind::Compute(SimDuration(update)), 0, 0, None, &deps);
    Ok(Trace {
        graph: b.finish(),
        name: format!("SimAI {kind}"),
        parallelism: [dp, tp, 1, ep],
        microbatches: ga as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SimAI file as SimAI's `example/microAllReduce.txt` (one layer, one 512 MiB
    /// all-reduce over a tensor group of 8) reads as compute then the all-reduce.
    #[test]
    fn simai_micro_allreduce_reads_as_written() {
        let t = read(
            "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 ga: 1 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0\n1\nembedding_layer     -1 556000  ALLREDUCE   536870912      1       NONE 0        1      NONE   0      1\n",
            1000,
        )
        .unwrap();
        let g = &t.graph;
        assert_eq!(g.ranks, 8);
        assert_eq!(g.sets.len(), 1);
        assert_eq!(g.sets[0].sizes, vec![536_870_912]);
        assert_eq!(g.sets[0].groups, vec![(0..8).collect::<Vec<u32>>()]);
        // 556,000 ns of forward compute, then 1 + 1 ns of backward, then the update.
        assert_eq!(g.stage_compute[0], SimDuration(556_000_000 + 2_000 + 1_000));
        assert_eq!(t.parallelism, [1, 8, 1, 1]);
    }

    #[test]
    fn bad_files_name_their_line() {
        let e = read(
            "HYBRID_TRANSFORMER model_parallel_NPU_group: 8 pp: 2 all_gpus: 16\n1\n",
            1000,
        )
        .unwrap_err();
        assert!(e.contains("pp 2"), "{e}");
        let e = read("HYBRID_TRANSFORMER model_parallel_NPU_group: 2 all_gpus: 4\n1\nx -1 5 BOGUS 4 1 NONE 0 1 NONE 0 1\n", 1000).unwrap_err();
        assert!(e.starts_with("line 3") && e.contains("BOGUS"), "{e}");
        let e = read("{\"format\": \"doorbell-training-trace\", \"version\": 2, \"ranks\": 2, \"tasks\": []}", 1).unwrap_err();
        assert!(e.contains("version"), "{e}");
        let e = read(
            "{\"format\": \"doorbell-training-trace\", \"version\": 1, \"ranks\": 2, \"tasks\": [{\"compute_us\": 1, \"deps\": [0]}]}",
            1,
        )
        .unwrap_err();
        assert!(e.contains("tasks[0]") && e.contains("come before"), "{e}");
        let e = read("{\"format\": \"doorbell-training-trace\", \"version\": 1, \"ranks\": 2, \"tasks\": [{\"compute_us\": 1, \"bogus\": 1}]}", 1).unwrap_err();
        assert!(e.contains("line 1") && e.contains("bogus"), "{e}");
    }

    fn native(groups: &str, tasks: &str) -> Result<Trace, String> {
        read(
            &format!(
                "{{\"format\": \"doorbell-training-trace\", \"version\": 1, \"ranks\": 4, \"groups\": {groups}, \"tasks\": {tasks}}}"
            ),
            1,
        )
    }

    /// Review findings, each a rule: a collective with nothing to move still passes its
    /// dependencies on; one group of four and two groups of two are different sets;
    /// groups of one collective may not share a rank; steps run from 0 without gaps.
    #[test]
    fn traces_keep_their_order_and_their_groups_apart() {
        let t = native(
            "[[0], [0, 1, 2, 3], [0, 1], [2, 3]]",
            "[{\"compute_us\": 1}, {\"collective\": \"allreduce\", \"groups\": [0], \"bytes\": 64, \"deps\": [0]}, {\"compute_us\": 2, \"deps\": [1]}, \
             {\"collective\": \"allreduce\", \"groups\": [1], \"bytes\": 64, \"deps\": [2]}, {\"collective\": \"allreduce\", \"groups\": [2, 3], \"bytes\": 64, \"deps\": [3]}]",
        )
        .unwrap();
        // 1 us, then (through the empty collective) 2 us: 3 us without communication.
        assert_eq!(t.graph.no_comm_step_ends(), vec![SimDuration::from_us(3)]);
        assert_eq!(t.graph.sets.len(), 2);
        let e = native(
            "[[0, 1], [1, 2]]",
            "[{\"collective\": \"allreduce\", \"groups\": [0, 1], \"bytes\": 64}]",
        )
        .unwrap_err();
        assert!(e.contains("share a rank"), "{e}");
        let e = native(
            "[]",
            "[{\"compute_us\": 1}, {\"compute_us\": 1, \"step\": 2}]",
        )
        .unwrap_err();
        assert!(e.contains("step 1"), "{e}");
        let e = read(
            "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 ga: 10000 all_gpus: 4\n100000\n",
            1000,
        )
        .unwrap_err();
        assert!(e.contains("tasks"), "{e}");
    }

    /// A native graph written out and read back is the same graph (tasks in dependency
    /// order, so ids may move, but every task, set size and pair list survives).
    #[test]
    fn native_round_trip_keeps_the_graph() {
        let mut c = crate::training::tests_config();
        c.pp = 2;
        c.dp = 2;
        c.tp = 2;
        c.microbatches = 3;
        c.bucket_params = 3_000_000;
        let g = crate::training::graph::build(&c);
        let text = write_native(&g, "toy", [2, 2, 2, 1], 3);
        let t = read(&text, 1).unwrap();
        assert_eq!(t.graph.tasks.len(), g.tasks.len());
        assert!(t.graph.edges.len() >= g.edges.len());
        let sizes = |g: &StepGraph| {
            let mut v: Vec<(Vec<Vec<u32>>, Vec<u64>)> = g
                .sets
                .iter()
                .map(|s| (s.groups.clone(), s.sizes.clone()))
                .collect();
            v.sort();
            v
        };
        assert_eq!(sizes(&t.graph), sizes(&g));
        assert_eq!(t.graph.pairs, g.pairs);
        assert_eq!(t.graph.stage_compute, g.stage_compute);
        assert_eq!(t.graph.no_comm_step_ends(), g.no_comm_step_ends());
        // Written again, the same text.
        assert_eq!(write_native(&t.graph, "toy", [2, 2, 2, 1], 3), text);
    }
}

//! A training step as a dependency graph of tasks: compute phases, collectives over
//! groups of ranks, and pipeline sends, in the order Megatron-LM runs them.
//!
//! Ranks are numbered as Megatron-LM orders its groups (tensor fastest, then data, then
//! pipeline: rank = t + tp (d + dp s), `megatron/core/parallel_state.py`, order
//! "tp-dp-pp"); expert parallelism splits the data-parallel ranks into groups of `ep`
//! consecutive ones.
//!
//! Each pipeline stage has one stream of work (its GPUs' compute stream, where
//! tensor-parallel and expert collectives run in line, as Megatron issues them): the
//! microbatches' forward (F) and backward (B) passes in the 1F1B order of PipeDream-Flush
//! (Narayanan et al., SC'21, section 2.2.1: stage s runs min(p - s - 1, m) forward passes,
//! then alternates one forward and one backward, then drains the backward passes). A
//! forward pass waits for the previous stage's send of that microbatch's activations, a
//! backward pass for the next stage's send of their gradient. Gradients are all-reduced
//! over the data-parallel group in buckets as the last microbatch's backward pass
//! produces them (Megatron's `overlap_grad_reduce`, PyTorch DDP's buckets), on a stream of
//! their own; expert parameters over the expert-data-parallel group. The next step starts
//! a stage once its reductions are done (the optimizer's time is not charged).
//!
//! The stage's data-parallel replicas run in lockstep: a task is one phase of every
//! replica, and a collective task ends when the slowest of its groups ends.

use super::model::ModelShape;
use super::TrainingConfig;
use crate::collective::CollectiveOp;
use crate::units::SimDuration;

/// What a communication task is, for the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CommClass {
    /// Tensor-parallel all-reduce of a layer's activations (or their gradient).
    TpAllreduce,
    /// Expert-parallel all-to-all (dispatch or combine).
    EpAlltoall,
    /// A pipeline stage's send of a microbatch's activations or their gradient.
    PpSend,
    /// Data-parallel gradient all-reduce of one bucket.
    DpAllreduce,
    /// Expert-data-parallel gradient all-reduce of one bucket of expert parameters.
    ExpertDpAllreduce,
    /// A trace's collective of no stated class.
    Other,
}

impl CommClass {
    pub const ALL: [CommClass; 6] = [
        CommClass::TpAllreduce,
        CommClass::EpAlltoall,
        CommClass::PpSend,
        CommClass::DpAllreduce,
        CommClass::ExpertDpAllreduce,
        CommClass::Other,
    ];
    /// Its name in reports and traces: the group it runs over (a trace's collectives
    /// over a tensor-parallel group may be all-gathers as well as all-reduces).
    pub fn name(self) -> &'static str {
        match self {
            CommClass::TpAllreduce => "tp",
            CommClass::EpAlltoall => "ep",
            CommClass::PpSend => "pp_send",
            CommClass::DpAllreduce => "dp",
            CommClass::ExpertDpAllreduce => "expert_dp",
            CommClass::Other => "other",
        }
    }

    pub fn from_name(s: &str) -> Option<CommClass> {
        CommClass::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// What a task does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TaskKind {
    /// The stage's GPUs compute for this long.
    Compute(SimDuration),
    /// Every group of set `set` runs its next collective (the set's next size).
    Collective { set: u32 },
    /// Each (sender, receiver) rank pair of list `pairs` (`StepGraph::pairs`) sends
    /// `bytes` (a pipeline stage's ranks to the next stage's with the same data- and
    /// tensor-parallel index).
    Send { pairs: u32, bytes: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Task {
    pub kind: TaskKind,
    pub stage: u32,
    pub step: u32,
    /// The communication class (`None` for compute).
    pub class: Option<CommClass>,
}

/// Groups of ranks that run the same collectives at the same time: the tensor-parallel
/// groups of one stage, its data-parallel groups, and so on.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupSet {
    pub class: CommClass,
    pub op: CollectiveOp,
    pub groups: Vec<Vec<u32>>,
    /// Bytes of each collective the set runs, in the order its tasks run.
    pub sizes: Vec<u64>,
}

/// A whole run's tasks (every step) and the sets their collectives use.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepGraph {
    pub tasks: Vec<Task>,
    /// Dependencies as edges (before, after).
    pub edges: Vec<(u32, u32)>,
    pub sets: Vec<GroupSet>,
    pub ranks: u32,
    pub steps: u32,
    /// Per stage (a compute lane): compute time in one step.
    pub stage_compute: Vec<SimDuration>,
    /// Rank pairs of the sends.
    pub pairs: Vec<Vec<(u32, u32)>>,
}

/// Rank of tensor index `t`, data index `d`, stage `s`.
pub fn rank(c: &TrainingConfig, t: u32, d: u32, s: u32) -> u32 {
    t + c.tp * (d + c.dp * s)
}

/// How long `flops` take on one GPU.
fn compute_time(c: &TrainingConfig, flops: f64) -> SimDuration {
    SimDuration((flops / (c.peak_flops * c.efficiency) * 1e12).round() as u64)
}

/// Rounds a collective's bytes up to whole 4-byte elements, `n` pieces of them.
fn elems(bytes: u64, n: u32) -> u64 {
    let unit = 4 * n.max(1) as u64;
    bytes.div_ceil(unit).max(1) * unit
}

struct Builder<'a> {
    c: &'a TrainingConfig,
    g: StepGraph,
    /// Per stage: the last task of its stream, and compute not yet emitted.
    last: Vec<Option<u32>>,
    pending: Vec<SimDuration>,
    /// Per stage: set ids of its tp, ep, dp and expert-dp groups.
    tp_set: Vec<Option<u32>>,
    ep_set: Vec<Option<u32>>,
    dp_set: Vec<Option<u32>>,
    edp_set: Vec<Option<u32>>,
    step: u32,
    /// Per stage: its slowest GPU's factor on compute time.
    slowdown: Vec<f64>,
}

impl Builder<'_> {
    fn task(&mut self, kind: TaskKind, stage: u32, class: Option<CommClass>, deps: &[u32]) -> u32 {
        let id = self.g.tasks.len() as u32;
        self.g.tasks.push(Task {
            kind,
            stage,
            step: self.step,
            class,
        });
        for &d in deps {
            self.g.edges.push((d, id));
        }
        id
    }

    /// Adds compute to stage `s`'s stream (merged with the compute before it), at the
    /// pace of the stage's slowest GPU.
    fn compute(&mut self, s: u32, flops: f64) {
        let d = compute_time(self.c, flops * self.slowdown[s as usize]);
        self.pending[s as usize] += d;
        self.g.stage_compute[s as usize] += d;
    }

    /// Emits stage `s`'s pending compute as a task; returns the stream's last task.
    fn flush(&mut self, s: u32) -> Option<u32> {
        let d = std::mem::take(&mut self.pending[s as usize]);
        if d > SimDuration::ZERO {
            let deps: Vec<u32> = self.last[s as usize].into_iter().collect();
            let t = self.task(TaskKind::Compute(d), s, None, &deps);
            self.last[s as usize] = Some(t);
        }
        self.last[s as usize]
    }

    /// A collective of `bytes` on set `set`, in line on stage `s`'s stream.
    fn collective(&mut self, s: u32, set: Option<u32>, bytes: u64) {
        let Some(set) = set else { return };
        let deps: Vec<u32> = self.flush(s).into_iter().collect();
        let n = self.g.sets[set as usize].groups[0].len() as u32;
        self.g.sets[set as usize].sizes.push(elems(bytes, n));
        let class = self.g.sets[set as usize].class;
        let t = self.task(TaskKind::Collective { set }, s, Some(class), &deps);
        self.last[s as usize] = Some(t);
    }

    fn add_set(
        &mut self,
        class: CommClass,
        op: CollectiveOp,
        groups: Vec<Vec<u32>>,
    ) -> Option<u32> {
        if groups.first().map_or(true, |g| g.len() < 2) {
            return None;
        }
        self.g.sets.push(GroupSet {
            class,
            op,
            groups,
            sizes: Vec::new(),
        });
        Some(self.g.sets.len() as u32 - 1)
    }
}

/// The graph of `steps` training steps of `c`.
pub fn build(c: &TrainingConfig) -> StepGraph {
    let m: &ModelShape = &c.model;
    let (tp, pp, dp, ep) = (c.tp, c.pp, c.dp, c.ep);
    let mut b = Builder {
        c,
        g: StepGraph {
            ranks: tp * pp * dp,
            steps: c.steps,
            stage_compute: vec![SimDuration::ZERO; pp as usize],
            ..StepGraph::default()
        },
        last: vec![None; pp as usize],
        pending: vec![SimDuration::ZERO; pp as usize],
        tp_set: Vec::new(),
        ep_set: Vec::new(),
        dp_set: Vec::new(),
        edp_set: Vec::new(),
        step: 0,
        slowdown: (0..pp)
            .map(|s| {
                c.stragglers
                    .iter()
                    .filter(|&&(r, _)| r / (tp * dp) == s)
                    .fold(1.0, |m, &(_, f)| f64::max(m, f))
            })
            .collect(),
    };
    for s in 0..pp {
        let tp_groups = (0..dp)
            .map(|d| (0..tp).map(|t| rank(c, t, d, s)).collect())
            .collect();
        let set = b.add_set(CommClass::TpAllreduce, CollectiveOp::Allreduce, tp_groups);
        b.tp_set.push(set);
        let ep_groups = if m.is_moe() {
            (0..tp)
                .flat_map(|t| {
                    (0..dp / ep).map(move |blk| (0..ep).map(move |e| rank(c, t, blk * ep + e, s)))
                })
                .map(|g| g.collect())
                .collect()
        } else {
            Vec::new()
        };
        let set = b.add_set(CommClass::EpAlltoall, CollectiveOp::Alltoall, ep_groups);
        b.ep_set.push(set);
        let dp_groups = (0..tp)
            .map(|t| (0..dp).map(|d| rank(c, t, d, s)).collect())
            .collect();
        let set = b.add_set(CommClass::DpAllreduce, CollectiveOp::Allreduce, dp_groups);
        b.dp_set.push(set);
        // Expert parameters are replicated over the data ranks holding the same experts:
        // one per expert group.
        let edp_groups = if m.is_moe() {
            (0..tp)
                .flat_map(|t| {
                    (0..ep).map(move |e| (0..dp / ep).map(move |blk| rank(c, t, blk * ep + e, s)))
                })
                .map(|g| g.collect())
                .collect()
        } else {
            Vec::new()
        };
        let set = b.add_set(
            CommClass::ExpertDpAllreduce,
            CollectiveOp::Allreduce,
            edp_groups,
        );
        b.edp_set.push(set);
    }
    let tokens = c.microbatch_size as u64 * c.sequence_length;
    let seq = c.sequence_length;
    let layers = m.layers / pp;
    let tpf = tp as f64;
    let act = tokens * m.hidden * c.activation_bytes;
    let attn_f = m.attention_flops(tokens, seq) / tpf;
    let mlp_f = m.mlp_flops(tokens) / tpf;
    let logits_f = m.logits_flops(tokens) / tpf;
    // Per rank: one layer's dense parameters, and its experts'.
    let dense_params = if m.is_moe() {
        m.attention_params() / tp as u64
    } else {
        (m.attention_params() + m.mlp_params()) / tp as u64
    };
    let expert_params = if m.is_moe() {
        (m.experts / ep) as u64 * m.mlp_params() / tp as u64
    } else {
        0
    };
    let embed_params = m.vocab * m.hidden / tp as u64;
    let a2a = tokens * m.hidden * c.activation_bytes * m.top_k as u64 / tp as u64;
    let mbs = c.microbatches;
    for step in 0..c.steps {
        b.step = step;
        // Per stage and microbatch: the first and last task of its forward and backward
        // passes (the sends between stages are joined in after every stage is built).
        let mut fwd = vec![vec![(0u32, 0u32); mbs as usize]; pp as usize];
        let mut bwd = fwd.clone();
        let mut reductions: Vec<Vec<u32>> = vec![Vec::new(); pp as usize];
        for s in 0..pp {
            let warmup = (pp - s - 1).min(mbs);
            let mut order = Vec::new();
            for i in 0..warmup {
                order.push((true, i));
            }
            for i in 0..mbs - warmup {
                order.push((true, warmup + i));
                order.push((false, i));
            }
            for i in mbs - warmup..mbs {
                order.push((false, i));
            }
            let (tps, eps) = (b.tp_set[s as usize], b.ep_set[s as usize]);
            let (dps, edps) = (b.dp_set[s as usize], b.edp_set[s as usize]);
            let mut last_dp: Option<u32> = None;
            let mut last_edp: Option<u32> = None;
            for (forward, i) in order {
                let first = b.g.tasks.len() as u32;
                // The pass's first task must be a fresh one (a send joins in there).
                let mark = b.task(
                    TaskKind::Compute(SimDuration::ZERO),
                    s,
                    None,
                    &b.last[s as usize].into_iter().collect::<Vec<_>>(),
                );
                b.last[s as usize] = Some(mark);
                debug_assert_eq!(first, mark);
                let last_mb = !forward && i == mbs - 1;
                // Gradients ready in the last microbatch's backward pass, not yet reduced.
                let (mut dense_ready, mut expert_ready) = (0u64, 0u64);
                let mut bucket =
                    |b: &mut Builder, dense: &mut u64, expert: &mut u64, force: bool| {
                        for (ready, set, last_red, class_dp) in [
                            (dense, dps, &mut last_dp, true),
                            (expert, edps, &mut last_edp, false),
                        ] {
                            if *ready == 0 || (!force && *ready < c.bucket_params) {
                                continue;
                            }
                            let Some(set) = set else {
                                *ready = 0;
                                continue;
                            };
                            let after = b.flush(s);
                            let deps: Vec<u32> = after.into_iter().chain(*last_red).collect();
                            let n = b.g.sets[set as usize].groups[0].len() as u32;
                            b.g.sets[set as usize]
                                .sizes
                                .push(elems(*ready * c.grad_bytes, n));
                            let class = if class_dp {
                                CommClass::DpAllreduce
                            } else {
                                CommClass::ExpertDpAllreduce
                            };
                            let t = b.task(TaskKind::Collective { set }, s, Some(class), &deps);
                            *last_red = Some(t);
                            reductions[s as usize].push(t);
                            *ready = 0;
                        }
                    };
                if forward {
                    for _ in 0..layers {
                        b.compute(s, attn_f);
                        b.collective(s, tps, act);
                        if m.is_moe() {
                            b.collective(s, eps, a2a);
                            b.compute(s, mlp_f);
                            b.collective(s, eps, a2a);
                        } else {
                            b.compute(s, mlp_f);
                            b.collective(s, tps, act);
                        }
                    }
                    if s == pp - 1 {
                        b.compute(s, logits_f);
                    }
                } else {
                    if s == pp - 1 {
                        b.compute(s, 2.0 * logits_f);
                        if last_mb {
                            dense_ready += embed_params;
                        }
                    }
                    for _ in 0..layers {
                        if m.is_moe() {
                            b.collective(s, eps, a2a);
                            b.compute(s, 2.0 * mlp_f);
                            b.collective(s, eps, a2a);
                        } else {
                            b.compute(s, 2.0 * mlp_f);
                            b.collective(s, tps, act);
                        }
                        b.compute(s, 2.0 * attn_f);
                        b.collective(s, tps, act);
                        if last_mb {
                            dense_ready += dense_params;
                            expert_ready += expert_params;
                            bucket(&mut b, &mut dense_ready, &mut expert_ready, false);
                        }
                    }
                    if s == 0 && last_mb {
                        dense_ready += embed_params;
                    }
                }
                let end = b.flush(s).expect("a pass has tasks");
                if last_mb {
                    bucket(&mut b, &mut dense_ready, &mut expert_ready, true);
                }
                if forward {
                    fwd[s as usize][i as usize] = (first, end);
                } else {
                    bwd[s as usize][i as usize] = (first, end);
                }
            }
        }
        // Sends between stages: activations forward, their gradients back.
        let send = (act / tp as u64).max(1);
        for s in 0..pp.saturating_sub(1) {
            let (up, down) = (
                stage_pairs(&mut b.g, c, s, s + 1),
                stage_pairs(&mut b.g, c, s + 1, s),
            );
            for i in 0..mbs as usize {
                let t = b.task(
                    TaskKind::Send {
                        pairs: up,
                        bytes: send,
                    },
                    s,
                    Some(CommClass::PpSend),
                    &[fwd[s as usize][i].1],
                );
                b.g.edges.push((t, fwd[s as usize + 1][i].0));
                let t = b.task(
                    TaskKind::Send {
                        pairs: down,
                        bytes: send,
                    },
                    s + 1,
                    Some(CommClass::PpSend),
                    &[bwd[s as usize + 1][i].1],
                );
                b.g.edges.push((t, bwd[s as usize][i].0));
            }
        }
        // The next step starts a stage once its gradients are reduced.
        for (s, red) in reductions.iter().enumerate() {
            if !red.is_empty() {
                // A zero-length task joins the stream and the reductions.
                let deps: Vec<u32> = b.last[s].into_iter().chain(red.iter().copied()).collect();
                let j = b.task(TaskKind::Compute(SimDuration::ZERO), s as u32, None, &deps);
                b.last[s] = Some(j);
            }
        }
    }
    for d in &mut b.g.stage_compute {
        *d = SimDuration(d.0 / c.steps.max(1) as u64);
    }
    b.g
}

/// The pair list of stage `from`'s ranks sending to stage `to`'s (made once).
fn stage_pairs(g: &mut StepGraph, c: &TrainingConfig, from: u32, to: u32) -> u32 {
    let list: Vec<(u32, u32)> = (0..c.dp)
        .flat_map(|d| (0..c.tp).map(move |t| (rank(c, t, d, from), rank(c, t, d, to))))
        .collect();
    if let Some(i) = g.pairs.iter().position(|p| *p == list) {
        return i as u32;
    }
    g.pairs.push(list);
    g.pairs.len() as u32 - 1
}

impl StepGraph {
    /// Successor lists and dependency counts.
    pub fn adjacency(&self) -> (Vec<Vec<u32>>, Vec<u32>) {
        let mut succ = vec![Vec::new(); self.tasks.len()];
        let mut deps = vec![0u32; self.tasks.len()];
        for &(a, bb) in &self.edges {
            succ[a as usize].push(bb);
            deps[bb as usize] += 1;
        }
        (succ, deps)
    }

    /// When each step would end if communication took no time (the longest path
    /// through compute alone), from time zero.
    pub fn no_comm_step_ends(&self) -> Vec<SimDuration> {
        let (succ, mut deps) = self.adjacency();
        let mut finish = vec![SimDuration::ZERO; self.tasks.len()];
        let mut start = vec![SimDuration::ZERO; self.tasks.len()];
        let mut ready: Vec<u32> = (0..self.tasks.len() as u32)
            .filter(|&i| deps[i as usize] == 0)
            .collect();
        let mut ends = vec![SimDuration::ZERO; self.steps as usize];
        while let Some(i) = ready.pop() {
            let t = &self.tasks[i as usize];
            let d = match t.kind {
                TaskKind::Compute(d) => d,
                _ => SimDuration::ZERO,
            };
            let f = start[i as usize] + d;
            finish[i as usize] = f;
            let e = &mut ends[t.step as usize];
            *e = (*e).max(f);
            for &n in &succ[i as usize] {
                start[n as usize] = start[n as usize].max(f);
                deps[n as usize] -= 1;
                if deps[n as usize] == 0 {
                    ready.push(n);
                }
            }
        }
        ends
    }
}

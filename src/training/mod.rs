//! Training steps: a model split over data, tensor, pipeline and expert parallelism,
//! expanded into compute phases and the collectives each parallelism needs (`graph`),
//! and a sans-IO runtime that releases them as their dependencies complete.
//!
//! Compute takes its FLOPs (`model`) over the GPU's peak times an efficiency (a
//! roofline with one number: the share of peak a layer's kernels reach). Collectives run
//! through the same collective model as nccl-tests items (`collective`): NVLink inside a
//! server, RC messages through the host and NIC model across servers. The CPU enqueues a
//! step's collectives ahead of the GPU (PyTorch launches asynchronously), so an
//! operation pays NCCL's kernel launch latency but not the 35 us CPU enqueue cost that
//! nccl-tests' back-to-back loop sees.
//!
//! What a step costs is split three ways: compute (the busiest stage's), the pipeline
//! bubble (the same graph with communication taking no time, less compute), and the
//! exposed communication (the step, less that). Leaves out: the optimizer's time,
//! activation recomputation, ZeRO/FSDP parameter gathers, and load imbalance between
//! experts.

pub mod graph;
pub mod model;
pub mod summary;
pub mod trace;

use crate::units::{SimDuration, SimTime};
use graph::{CommClass, StepGraph, TaskKind};
use model::ModelShape;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Defaults, with their sources.
pub mod defaults {
    /// H100 SXM's dense BF16 peak, FLOP/s (NVIDIA H100 Tensor Core GPU datasheet).
    pub const PEAK_TFLOPS: f64 = 989.4;
    /// Assumption: the share of peak a transformer layer's kernels reach. Large BF16
    /// GEMMs reach about 70% on H100; Llama 3's training reached 38-43% of peak for the
    /// whole step, communication and bubbles included (Dubey et al. 2024, Table 4).
    pub const EFFICIENCY: f64 = 0.5;
    /// BF16 activations and gradients.
    pub const ACTIVATION_BYTES: u64 = 2;
    pub const GRAD_BYTES: u64 = 2;
    /// Megatron-LM's gradient bucket: max(40 M, 1 M x dp) parameters
    /// (`megatron/training/training.py`, `bucket_size` unset).
    pub const BUCKET_PARAMS: u64 = 40_000_000;
    pub const SEQUENCE_LENGTH: u64 = 4096;
}

/// A validated `training:` workload item.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainingConfig {
    pub model: ModelShape,
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub ep: u32,
    /// Microbatches per step (gradient accumulation), and sequences in each.
    pub microbatches: u32,
    pub microbatch_size: u32,
    pub sequence_length: u64,
    /// FLOP/s of one GPU at peak, and the share of it compute reaches.
    pub peak_flops: f64,
    pub efficiency: f64,
    pub activation_bytes: u64,
    pub grad_bytes: u64,
    /// Parameters per gradient bucket.
    pub bucket_params: u64,
    pub steps: u32,
    /// The collectives' settings (channels, algorithm, queue pairs...); its sizes,
    /// ranks, iterations and start are the training's.
    pub collective: crate::collective::Collective,
    pub placement: crate::collective::PlacementSpec,
    pub start: SimDuration,
    /// A trace replayed instead of the model's step (`trace`): its graph, name and
    /// stated parallelism; `dp` is then its rank count and `tp`, `pp`, `ep` are 1.
    pub trace: Option<std::sync::Arc<trace::Trace>>,
    /// GPUs that compute slower: (rank, factor on its compute time). A stage runs at its
    /// slowest GPU's pace: its tensor-parallel all-reduces and the step's gradient
    /// reductions wait for it.
    pub stragglers: Vec<(u32, f64)>,
    /// The job's name in reports.
    pub job: String,
}

impl TrainingConfig {
    pub fn ranks(&self) -> u32 {
        self.tp * self.pp * self.dp
    }

    /// The step graph: the trace's, or the model's.
    pub fn graph(&self) -> StepGraph {
        match &self.trace {
            Some(t) => t.graph.clone(),
            None => graph::build(self),
        }
    }

    /// Bytes the job puts on the network over every step, all ranks (an estimate for
    /// validation's cost check): each rank's gradients twice (a ring all-reduce), its
    /// all-to-alls and pipeline sends once; tensor parallelism is taken to stay inside
    /// servers (NVLink).
    pub fn bytes_estimate(&self) -> f64 {
        if let Some(t) = &self.trace {
            let g = &t.graph;
            let coll: f64 = g
                .sets
                .iter()
                .map(|s| {
                    let per = if s.op == crate::collective::CollectiveOp::Allreduce {
                        2.0
                    } else {
                        1.0
                    };
                    let ranks: usize = s.groups.iter().map(|x| x.len()).sum();
                    per * ranks as f64 * s.sizes.iter().sum::<u64>() as f64
                })
                .sum();
            let sends: f64 = g
                .tasks
                .iter()
                .filter_map(|t| match t.kind {
                    TaskKind::Send { pairs, bytes } => {
                        Some(g.pairs[pairs as usize].len() as f64 * bytes as f64)
                    }
                    _ => None,
                })
                .sum();
            return coll + sends;
        }
        let m = &self.model;
        let tokens = (self.microbatch_size as u64 * self.sequence_length) as f64;
        let act = tokens * m.hidden as f64 * self.activation_bytes as f64;
        let layers = (m.layers / self.pp) as f64;
        let per_rank_params = m.params() as f64 / (self.tp * self.pp) as f64;
        let mb = self.microbatches as f64;
        let ep = if m.is_moe() && self.ep > 1 {
            4.0 * layers * act * m.top_k as f64 / self.tp as f64
        } else {
            0.0
        };
        let pp = if self.pp > 1 {
            2.0 * act / self.tp as f64
        } else {
            0.0
        };
        let dp = if self.dp > 1 {
            2.0 * per_rank_params * self.grad_bytes as f64
        } else {
            0.0
        };
        self.steps as f64 * self.ranks() as f64 * (dp + mb * (ep + pp))
    }

    /// Network transfers the job makes over the run (an estimate: pieces of about a
    /// quarter of NCCL's Simple buffer step).
    pub fn transfers_estimate(&self) -> f64 {
        self.bytes_estimate() / (128.0 * 1024.0)
    }

    /// A collective over every rank of the job, to place them (`collective::place_on`).
    pub fn placement_collective(&self) -> crate::collective::Collective {
        let mut c = self.collective.clone();
        c.ranks = Some(self.ranks());
        c.placement = self.placement.clone();
        c
    }
}

/// What the runtime asks the glue to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Every group of `set` runs its next collective; tell `set_done` when all have.
    Trigger { set: u32 },
    /// Carry out send task `task`; tell `add_parts` how many parts it has, and
    /// `part_done` as each lands.
    Send { task: u32 },
}

/// Per communication class: how many tasks and how long they took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClassStats {
    pub count: u64,
    pub total_ps: u64,
    pub max_ps: u64,
}

/// What a training item produced.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainingResult {
    pub workload: u16,
    pub job: String,
    pub model: String,
    pub parallelism: [u32; 4],
    pub microbatches: u32,
    /// Ranks (GPUs) of the job.
    pub ranks: u32,
    /// Per finished step: its time, and its time had communication taken none, ps.
    pub step_ps: Vec<u64>,
    pub no_comm_step_ps: Vec<u64>,
    /// The busiest stage's compute in one step, ps.
    pub compute_ps: u64,
    pub classes: Vec<(CommClass, ClassStats)>,
    pub steps: u32,
    pub complete: bool,
}

/// The runtime of one training item.
pub struct TrainingRun {
    pub cfg: TrainingConfig,
    pub workload: u16,
    pub graph: StepGraph,
    succ: Vec<Vec<u32>>,
    deps_left: Vec<u32>,
    /// Compute tasks' ends and send parts landing over NVLink: (time, task).
    timers: BinaryHeap<Reverse<(SimTime, u32)>>,
    set_active: Vec<Option<u32>>,
    set_queue: Vec<VecDeque<u32>>,
    parts_left: Vec<u32>,
    started: Vec<SimTime>,
    finished: Vec<SimTime>,
    done: usize,
    start: SimTime,
    step_end: Vec<SimTime>,
    step_left: Vec<u32>,
}

impl TrainingRun {
    pub fn new(cfg: &TrainingConfig, workload: u16) -> TrainingRun {
        let graph = cfg.graph();
        let (succ, deps_left) = graph.adjacency();
        let n = graph.tasks.len();
        let steps = graph.steps.max(1);
        let mut step_left = vec![0u32; steps as usize];
        for t in &graph.tasks {
            step_left[t.step as usize] += 1;
        }
        TrainingRun {
            cfg: cfg.clone(),
            workload,
            set_active: vec![None; graph.sets.len()],
            set_queue: vec![VecDeque::new(); graph.sets.len()],
            graph,
            succ,
            deps_left,
            timers: BinaryHeap::new(),
            parts_left: vec![0; n],
            started: vec![SimTime::MAX; n],
            finished: vec![SimTime::MAX; n],
            done: 0,
            start: SimTime::ZERO,
            step_end: vec![SimTime::ZERO; steps as usize],
            step_left,
        }
    }

    pub fn is_done(&self) -> bool {
        self.done == self.graph.tasks.len()
    }

    /// The earliest time the runtime wants `on_timer` called.
    pub fn next_timeout(&self) -> Option<SimTime> {
        self.timers.peek().map(|r| r.0 .0)
    }

    /// The job starts: every task without dependencies runs.
    pub fn start(&mut self, now: SimTime, out: &mut Vec<Action>) {
        self.start = now;
        let roots: Vec<u32> = (0..self.graph.tasks.len() as u32)
            .filter(|&i| self.deps_left[i as usize] == 0)
            .collect();
        for t in roots {
            if self.run(now, t, out) {
                self.complete(now, t, out);
            }
        }
    }

    /// Timers due by `now` fire.
    pub fn on_timer(&mut self, now: SimTime, out: &mut Vec<Action>) {
        while let Some(&Reverse((at, task))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            if matches!(self.graph.tasks[task as usize].kind, TaskKind::Send { .. }) {
                self.part_done(at, task, out);
            } else {
                self.complete(at, task, out);
            }
        }
    }

    /// Every group of `set` finished its collective.
    pub fn set_done(&mut self, now: SimTime, set: u32, out: &mut Vec<Action>) {
        let task = self.set_active[set as usize]
            .take()
            .expect("a set reports only the collective it was given");
        if let Some(next) = self.set_queue[set as usize].pop_front() {
            self.set_active[set as usize] = Some(next);
            self.started[next as usize] = now;
            out.push(Action::Trigger { set });
        }
        self.complete(now, task, out);
    }

    /// Send task `task` has `n` more parts to land.
    pub fn add_parts(&mut self, task: u32, n: u32) {
        self.parts_left[task as usize] += n;
    }

    /// One part of send task `task` lands at `at` (now or later, over NVLink).
    pub fn part_at(&mut self, task: u32, at: SimTime) {
        self.parts_left[task as usize] += 1;
        self.timers.push(Reverse((at, task)));
    }

    /// A counted part of send task `task` lands at `at`, later than now.
    pub fn land_at(&mut self, task: u32, at: SimTime) {
        self.timers.push(Reverse((at, task)));
    }

    pub fn part_done(&mut self, now: SimTime, task: u32, out: &mut Vec<Action>) {
        let left = &mut self.parts_left[task as usize];
        *left -= 1;
        if *left == 0 {
            self.complete(now, task, out);
        }
    }

    /// Starts `task`; returns whether it ended at once (a zero-length compute task).
    fn run(&mut self, now: SimTime, task: u32, out: &mut Vec<Action>) -> bool {
        self.started[task as usize] = now;
        match self.graph.tasks[task as usize].kind {
            TaskKind::Compute(d) if d == SimDuration::ZERO => return true,
            TaskKind::Compute(d) => self.timers.push(Reverse((now + d, task))),
            TaskKind::Collective { set } => {
                if self.set_active[set as usize].is_some() {
                    self.set_queue[set as usize].push_back(task);
                } else {
                    self.set_active[set as usize] = Some(task);
                    out.push(Action::Trigger { set });
                }
            }
            TaskKind::Send { .. } => out.push(Action::Send { task }),
        }
        false
    }

    /// `task` ends now: its successors whose dependencies are all done start (a
    /// work-list, not recursion, so a long chain of zero-length tasks cannot overflow the
    /// stack).
    fn complete(&mut self, now: SimTime, task: u32, out: &mut Vec<Action>) {
        let mut ended = vec![task];
        while let Some(t) = ended.pop() {
            self.finished[t as usize] = now;
            self.done += 1;
            let step = self.graph.tasks[t as usize].step as usize;
            self.step_left[step] -= 1;
            self.step_end[step] = self.step_end[step].max(now);
            for i in 0..self.succ[t as usize].len() {
                let n = self.succ[t as usize][i];
                self.deps_left[n as usize] -= 1;
                if self.deps_left[n as usize] == 0 && self.run(now, n, out) {
                    ended.push(n);
                }
            }
        }
    }

    pub fn result(&self) -> TrainingResult {
        let nocomm = self.graph.no_comm_step_ends();
        let mut step_ps = Vec::new();
        let mut no_comm_step_ps = Vec::new();
        let mut prev = self.start;
        for (k, &end) in self.step_end.iter().enumerate() {
            if self.step_left[k] > 0 {
                break;
            }
            step_ps.push(end.0.saturating_sub(prev.0));
            prev = prev.max(end);
            let before = if k == 0 {
                SimDuration::ZERO
            } else {
                nocomm[k - 1]
            };
            no_comm_step_ps.push(nocomm[k].0.saturating_sub(before.0));
        }
        let mut classes: Vec<(CommClass, ClassStats)> = Vec::new();
        for c in CommClass::ALL {
            let mut s = ClassStats::default();
            for (i, t) in self.graph.tasks.iter().enumerate() {
                if t.class == Some(c) && self.finished[i] != SimTime::MAX {
                    let d = self.finished[i].0 - self.started[i].0;
                    s.count += 1;
                    s.total_ps += d;
                    s.max_ps = s.max_ps.max(d);
                }
            }
            if s.count > 0 {
                classes.push((c, s));
            }
        }
        let (model, parallelism, microbatches) = match &self.cfg.trace {
            Some(t) => (t.name.clone(), t.parallelism, t.microbatches),
            None => (
                self.cfg.model.name.clone(),
                [self.cfg.dp, self.cfg.tp, self.cfg.pp, self.cfg.ep],
                self.cfg.microbatches,
            ),
        };
        TrainingResult {
            workload: self.workload,
            job: self.cfg.job.clone(),
            model,
            parallelism,
            microbatches,
            ranks: self.graph.ranks,
            step_ps,
            no_comm_step_ps,
            compute_ps: self
                .graph
                .stage_compute
                .iter()
                .map(|d| d.0)
                .max()
                .unwrap_or(0),
            classes,
            steps: self.graph.steps,
            complete: self.is_done(),
        }
    }
}

/// A model with no embedding (so every stage computes the same) and round numbers.
#[cfg(test)]
pub(crate) fn toy(layers: u32) -> ModelShape {
    ModelShape {
        name: "toy".into(),
        layers,
        hidden: 1024,
        ffn_hidden: 4096,
        heads: 8,
        kv_heads: 8,
        vocab: 0,
        gated_mlp: false,
        experts: 1,
        top_k: 1,
    }
}

#[cfg(test)]
pub(crate) fn test_config(model: ModelShape, tp: u32, pp: u32, dp: u32, m: u32) -> TrainingConfig {
    TrainingConfig {
        model,
        tp,
        pp,
        dp,
        ep: 1,
        microbatches: m,
        microbatch_size: 1,
        sequence_length: 1024,
        peak_flops: 1e15,
        efficiency: 0.5,
        activation_bytes: 2,
        grad_bytes: 2,
        bucket_params: u64::MAX,
        steps: 1,
        collective: crate::collective::Collective::template(),
        placement: crate::collective::PlacementSpec::Packed,
        start: SimDuration::ZERO,
        trace: None,
        stragglers: Vec::new(),
        job: "job0".into(),
    }
}

#[cfg(test)]
pub(crate) fn tests_config() -> TrainingConfig {
    test_config(toy(4), 1, 1, 1, 1)
}

#[cfg(test)]
mod tests;

//! Glue between training jobs (`training`) and the fabric: a job's collectives run as
//! collective runs told when to go (one per group of each group set), its pipeline sends
//! as RC messages between the stages' GPUs (over NVLink when both share a server), and
//! its compute as the job's own timers.

use super::collective_glue::CollInput;
use super::{FlowState, Sim, Sources};
use crate::collective::{CollectiveRun, RankLoc};
use crate::engine::Event;
use crate::training::graph::TaskKind;
use crate::training::{Action, TrainingConfig, TrainingRun};
use crate::units::{serialization_delay, SimTime};
use crate::workload::FlowDef;

/// A transfer's `coll` run id at or above this is a training job's send (job = id -
/// base), not a collective run's.
pub(super) const SEND_RUN_BASE: u32 = u32::MAX - (1 << 16);

/// The runs and ranks of one job.
pub(super) struct JobGlue {
    pub run: TrainingRun,
    /// Per group set: its collective runs, and how many have not finished the current
    /// collective.
    pub sets: Vec<Vec<u32>>,
    pub set_left: Vec<u32>,
    pub ranks: Vec<RankLoc>,
    /// The earliest wake-up scheduled for the job's timers.
    pub wake: Option<SimTime>,
    /// Connection keys of the job's pipeline sends start here.
    pub conn_base: u32,
}

/// What the glue builds a job from.
pub(super) struct JobEnv<'a> {
    pub leaf_of: &'a dyn Fn(u32) -> u32,
    pub leaves: u32,
    pub spines: u32,
    pub net_gbps: f64,
}

/// The job's runtime, and a collective run per group of each of its sets (appended to
/// `colls`, their owners to `owner`).
pub(super) fn build_job(
    cfg: &TrainingConfig,
    workload: u16,
    ranks: Vec<RankLoc>,
    colls: &mut Vec<CollectiveRun>,
    owner: &mut Vec<Option<(u32, u32)>>,
    job: u32,
    env: &JobEnv,
) -> JobGlue {
    let run = TrainingRun::new(cfg, workload);
    let mut sets = Vec::with_capacity(run.graph.sets.len());
    for (si, set) in run.graph.sets.iter().enumerate() {
        let mut c = cfg.collective.clone();
        c.op = set.op;
        c.sizes = set.sizes.clone();
        c.iters = 1;
        c.warmup_iters = 0;
        let mut ids = Vec::with_capacity(set.groups.len());
        if !c.sizes.is_empty() {
            for g in &set.groups {
                c.ranks = Some(g.len() as u32);
                let locs = g.iter().map(|&r| ranks[r as usize]).collect();
                let mut r = CollectiveRun::new(
                    &c,
                    workload,
                    locs,
                    env.leaf_of,
                    env.leaves,
                    env.spines,
                    env.net_gbps,
                );
                r.on_demand = true;
                ids.push(colls.len() as u32);
                colls.push(r);
                owner.push(Some((job, si as u32)));
            }
        }
        sets.push(ids);
    }
    JobGlue {
        set_left: vec![0; sets.len()],
        sets,
        run,
        ranks,
        wake: None,
        conn_base: 0,
    }
}

/// Every training item's job, in workload order: its ranks (a random placement draws
/// around the jobs placed before it), a collective run per group (appended to `colls`)
/// and its start on `q`; and which job and group set owns each collective run.
pub(super) fn build_jobs(
    sc: &crate::scenario::Scenario,
    topo: &crate::topology::Topology,
    colls: &mut Vec<CollectiveRun>,
    q: &mut crate::engine::EventQueue,
) -> (Vec<JobGlue>, Vec<Option<(u32, u32)>>) {
    let gpus = sc.host.as_ref().map_or(1, |h| h.gpus_per_host);
    let servers = sc.host.as_ref().map_or(topo.hosts(), |h| h.servers);
    let mut taken = vec![false; (servers * gpus) as usize];
    let mut owner = vec![None; colls.len()];
    let mut jobs: Vec<JobGlue> = Vec::new();
    let net_gbps =
        sc.host.as_ref().map_or(1, |h| h.nics_per_host) as f64 * topo.host_link.rate.0 as f64 / 8e9;
    let leaf_of = |port| topo.leaf_of(port);
    let env = JobEnv {
        leaf_of: &leaf_of,
        leaves: topo.leaves,
        spines: topo.spines,
        net_gbps,
    };
    for (i, w) in sc.workload.iter().enumerate() {
        let crate::workload::Workload::Training(t) = w else {
            continue;
        };
        let c = t.placement_collective();
        let ranks =
            crate::collective::place_job(&c, sc.host.as_ref(), topo.hosts(), sc.seed, i, &taken)
                .expect("placement checked by validation");
        for r in &ranks {
            taken[(r.server * gpus + r.gpu) as usize] = true;
        }
        let job = jobs.len() as u32;
        q.schedule(
            SimTime(t.start.0),
            Sources::WORKLOAD,
            Event::TrainStart { job },
        );
        jobs.push(build_job(t, i as u16, ranks, colls, &mut owner, job, &env));
    }
    // Pipeline sends' connections come after every collective run's.
    let mut next =
        1 + colls.len() as u32 * 64 * crate::collective::defaults::MAX_QPS_PER_CONNECTION;
    for g in jobs.iter_mut() {
        g.conn_base = next;
        next += g.run.graph.pairs.len() as u32;
    }
    (jobs, owner)
}

impl Sim {
    /// Job `job` is told `input` (through `f`); what it asks for is carried out and its
    /// next wake-up scheduled.
    #[inline(always)]
    pub(super) fn train_step(
        &mut self,
        now: SimTime,
        job: u32,
        f: impl FnOnce(&mut TrainingRun, &mut Vec<crate::training::Action>),
    ) {
        let mut out = std::mem::take(&mut self.train_out);
        f(&mut self.jobs[job as usize].run, &mut out);
        let mut i = 0;
        while i < out.len() {
            let a = out[i];
            i += 1;
            match a {
                Action::Trigger { set } => {
                    let runs = self.jobs[job as usize].sets[set as usize].clone();
                    self.jobs[job as usize].set_left[set as usize] = runs.len() as u32;
                    for r in runs {
                        self.colls[r as usize].trigger(now);
                        if let Some(at) = self.colls[r as usize].take_wake() {
                            self.q
                                .schedule(at, Sources::WORKLOAD, Event::CollWake { run: r });
                        }
                    }
                }
                Action::Send { task } => self.pipeline_send(now, job, task),
            }
        }
        out.clear();
        self.train_out = out;
        let g = &mut self.jobs[job as usize];
        if let Some(t) = g.run.next_timeout() {
            if g.wake.map_or(true, |w| t < w) {
                g.wake = Some(t);
                self.q
                    .schedule(t, Sources::WORKLOAD, Event::TrainWake { job });
            }
        }
    }

    /// The job's timers may be due.
    #[inline(always)]
    pub(super) fn on_train_wake(&mut self, now: SimTime, job: u32) {
        let g = &mut self.jobs[job as usize];
        if g.wake.is_some_and(|w| w <= now) {
            g.wake = None;
        }
        self.train_step(now, job, |r, out| r.on_timer(now, out));
    }

    /// Collective run `run`, a job's, finished `n` collectives.
    pub(super) fn train_coll_done(&mut self, now: SimTime, run: u32, n: u32) {
        let Some((job, set)) = self.coll_owner[run as usize] else {
            return;
        };
        for _ in 0..n {
            let left = &mut self.jobs[job as usize].set_left[set as usize];
            *left -= 1;
            if *left == 0 {
                self.train_step(now, job, |r, out| r.set_done(now, set, out));
            }
        }
    }

    /// A part of send task `task` of job `job` landed at `at` (now or later).
    pub(super) fn train_send_landed(&mut self, now: SimTime, at: SimTime, job: u32, task: u32) {
        if at > now {
            self.jobs[job as usize].run.land_at(task, at);
            self.train_step(now, job, |_, _| {});
        } else {
            self.train_step(now, job, |r, out| r.part_done(now, task, out));
        }
    }

    /// Send task `task`: one message per rank pair of its list.
    fn pipeline_send(&mut self, now: SimTime, job: u32, task: u32) {
        let g = &self.jobs[job as usize];
        let TaskKind::Send { pairs, bytes } = g.run.graph.tasks[task as usize].kind else {
            unreachable!("a send task")
        };
        let workload = g.run.workload;
        let intra_rate = g.run.cfg.collective.intra_rate;
        // One connection per pair list (each direction between two stages has its own).
        let conn = g.conn_base + pairs;
        let pairs: Vec<(RankLoc, RankLoc)> = g.run.graph.pairs[pairs as usize]
            .iter()
            .map(|&(a, b)| (g.ranks[a as usize], g.ranks[b as usize]))
            .collect();
        let mut flows = 0;
        for (a, b) in pairs {
            if a.server == b.server {
                // NVLink: the pair's bytes at the GPU's link rate.
                let at = now + serialization_delay(bytes, intra_rate);
                self.jobs[job as usize].run.part_at(task, at);
                continue;
            }
            let def = FlowDef {
                src: a.port,
                dst: b.port,
                size: bytes,
                start: now,
                workload,
                after: None,
            };
            let (id, num) = self.transfer_slot();
            let mut f = FlowState::new(&self.sc, &self.graph, &mut self.ideal_cache, num, def);
            f.conn = conn;
            f.coll = Some((SEND_RUN_BASE + job, task));
            self.put_transfer(id, f);
            flows += 1;
            self.todo_starts.push(id);
        }
        self.jobs[job as usize].run.add_parts(task, flows);
        for id in std::mem::take(&mut self.todo_starts) {
            self.start_flow(now, id);
        }
    }

    /// Coll step for a run, then its owner told of what it finished.
    pub(super) fn coll_step_owned(&mut self, now: SimTime, run: u32, input: CollInput) {
        self.coll_step(now, run, input);
        if self.coll_owner[run as usize].is_some() {
            let n = self.colls[run as usize].take_completions();
            if n > 0 {
                self.train_coll_done(now, run, n);
            }
        }
    }
}

//! Time series (`timeseries:`): the state of chosen ports and flows every `interval`.
//!
//! A sample at `t` shows the state after every event earlier than `t` and before any at
//! `t`. Samples are not events: the event loop takes those due before it handles an
//! event at or after their time (`Sim::sample_through`), so a split run's partitions
//! each take them at the same times, for the objects they own, and the end of run puts
//! them together (`merge`). They run from time 0 while the run has events left (up to
//! its `duration` when that cut it short) and end with the first sample at which no
//! workload flow, collective or training job is left unfinished (`Sim::cut_samples`):
//! sampling never keeps a run alive nor extends it.
//!
//! Leaves out: samples between events finer than the interval (a queue that fills and
//! drains within one interval is not seen).

use super::{Metric, Sample, Sim, NO_QP};
use crate::components::qp::Direction;
use crate::transport::rc::Op;
use crate::units::{SimDuration, SimTime};

/// When the next sample is due, and the interval.
#[derive(Clone, Copy, Debug)]
pub(super) struct Sampling {
    /// The next sample's time; `SimTime::MAX` without a time series.
    pub next: SimTime,
    interval: SimDuration,
    /// The first sample at which every collective and training job was done (in a
    /// split run, set at the meeting that ends the last iteration: `runs_ended_at`).
    runs_done_at: Option<SimTime>,
    /// The workload's flows before this one are all completed or failed (a cursor that
    /// only moves forward: a resolved flow stays so), and the latest time one of them
    /// was (`samples_end`).
    resolved_upto: usize,
    resolved_at: SimTime,
    /// Where `cut_samples` will cut, once that is known (`samples_end` on one thread;
    /// in a split run, from what every partition said at a meeting before a long gap,
    /// `Sim::resolved_here` and `Sampling::know_end`): no sample past it is taken.
    known_end: Option<SimTime>,
}

/// A gap to the next event longer than this many intervals asks whether the samples
/// past it would all be cut (`Sim::sample_through`).
const LONG_GAP: u64 = 1024;

impl Sampling {
    /// The last sample kept once every workload flow was resolved by `flows` (`any`:
    /// there were some) and every collective and job done at `runs`: the first sample
    /// after the last flow was done, or when the runs were.
    fn cut_at(&self, flows: SimTime, any: bool, runs: SimTime) -> SimTime {
        let first_after = if any {
            self.first_after(flows)
        } else {
            SimTime::ZERO
        };
        first_after.max(runs)
    }

    /// The first sample that sees an event at `t` (a sample sees the events before it).
    fn first_after(&self, t: SimTime) -> SimTime {
        let iv = self.interval.0;
        SimTime((t.0 / iv + 1) * iv)
    }

    /// A split run's meeting ended the last collective's last iteration at `at`: every
    /// run is done from the first sample after it, as on one thread, where the sample
    /// would see it (a partition's samples in the window before the meeting did not).
    pub fn runs_ended_at(&mut self, at: SimTime) {
        if self.runs_done_at.is_none() && self.next != SimTime::MAX {
            self.runs_done_at = Some(self.first_after(at));
        }
    }

    pub fn new(interval: Option<SimDuration>) -> Sampling {
        Sampling {
            next: if interval.is_some() {
                SimTime::ZERO
            } else {
                SimTime::MAX
            },
            interval: interval.unwrap_or(SimDuration(1)).max(SimDuration(1)),
            runs_done_at: None,
            resolved_upto: 0,
            resolved_at: SimTime::ZERO,
            known_end: None,
        }
    }

    /// Whether the gap from the next sample to `t` is long enough to ask where the
    /// samples end (a split run's partitions all ask at the same meeting: they share
    /// `t` and take the same samples).
    pub fn long_gap_to(&self, t: SimTime) -> bool {
        self.next != SimTime::MAX
            && self.known_end.is_none()
            && t.0.saturating_sub(self.next.0) > LONG_GAP * self.interval.0
    }

    /// A split run: every partition's word on the workload's flows, put together
    /// (`Resolved::join`), gives where the samples end if it is known.
    pub fn know_end(&mut self, all: &Resolved) {
        if let (true, Some(runs)) = (all.every_flow(), all.runs_done_at) {
            self.known_end = Some(self.cut_at(all.latest, all.any, runs));
        }
    }
}

/// What a partition's copy knows of the workload's flows and runs, for a split run's
/// long gap (`Sim::resolved_here`): which flows it saw completed or failed (a flow is
/// resolved where its requester or its last packet is, in one copy; the others keep it
/// pending), the latest time one was, and when every collective and job was done by
/// the next sample.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    bits: Vec<u64>,
    flows: usize,
    latest: SimTime,
    any: bool,
    runs_done_at: Option<SimTime>,
}

impl Resolved {
    /// Every partition's word put together: a flow is resolved where any copy saw it
    /// so. The latest time is the latest any copy saw, no earlier than the merged
    /// records' (each takes the earliest of its copies'), so the samples stop no earlier
    /// than the end of run's cut.
    pub fn join(parts: &[std::sync::Mutex<Resolved>]) -> Resolved {
        let mut all = super::window::lock(&parts[0]).clone();
        for p in &parts[1..] {
            let p = super::window::lock(p);
            for (a, b) in all.bits.iter_mut().zip(&p.bits) {
                *a |= b;
            }
            all.latest = all.latest.max(p.latest);
            all.runs_done_at = match (all.runs_done_at, p.runs_done_at) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
        all
    }

    fn every_flow(&self) -> bool {
        (0..self.flows).all(|i| self.bits[i / 64] >> (i % 64) & 1 == 1)
    }
}

impl Sim {
    /// Takes every sample due at or before `t` (the next event's time, or the end of a
    /// run its duration cut short).
    ///
    /// Over a long gap (a run whose workload is done, waiting for a stale timer: a queue
    /// pair's local ACK timeout is seconds away) the samples stop once they are past the
    /// point `cut_samples` will cut them at, so that they are never held: the same
    /// samples are kept. One thread asks its own records (`samples_end`); a split run's
    /// partitions, whose copies of other partitions' flows are not kept up to date, put
    /// their words together at the meeting before the gap (`resolved_here`,
    /// `Sampling::know_end`), so that every partition stops at the same sample.
    #[inline]
    pub(super) fn sample_through(&mut self, t: SimTime) {
        while self.sampling.next <= t {
            let at = self.sampling.next;
            self.sample(at);
            self.sampling.next = at + self.sampling.interval;
            if self.sampling.known_end.is_none()
                && t.0 - at.0 > LONG_GAP * self.sampling.interval.0
                && self.part.is_none()
            {
                self.sampling.known_end = self.samples_end();
            }
            if self
                .sampling
                .known_end
                .is_some_and(|end| self.sampling.next > end)
            {
                self.sampling.next = SimTime::MAX;
            }
        }
    }

    /// A split run's partition, at a meeting before a long gap: what its copy knows of
    /// the workload's flows (every one of them, resolved here or not) and the runs.
    pub(super) fn resolved_here(&self) -> Resolved {
        let workload = (self.slots.base() as usize).min(self.flows.len());
        let mut r = Resolved {
            bits: vec![0; workload.div_ceil(64)],
            flows: workload,
            latest: SimTime::ZERO,
            any: false,
            runs_done_at: self
                .sampling
                .runs_done_at
                .or_else(|| self.runs_done().then_some(self.sampling.next)),
        };
        for (i, f) in self.flows[..workload].iter().enumerate() {
            let at = if f.coll.is_some() {
                Some(SimTime::ZERO)
            } else {
                r.any = true;
                resolved_at(f)
            };
            if let Some(at) = at {
                r.bits[i / 64] |= 1 << (i % 64);
                r.latest = r.latest.max(at);
            }
        }
        r
    }

    /// The host whose partition samples flow `f`'s rate: its requester's under RC
    /// (its congestion control, and the completion it learns of), its receiver's for
    /// bare packets (a bare flow is done where its last packet lands, and its sender's
    /// copy never hears of it).
    pub(super) fn rate_host(&self, f: u32) -> u32 {
        let def = &self.flows[f as usize].def;
        if self.rc.is_none() || self.flows[f as usize].raw {
            def.dst
        } else {
            def.src
        }
    }

    /// Every collective and training job is done.
    pub(super) fn runs_done(&self) -> bool {
        self.colls.iter().all(|c| c.is_done()) && self.jobs.iter().all(|j| j.run.is_done())
    }

    /// Where `cut_samples` cuts, if that is known now: every workload flow completed or
    /// failed and every collective and training job done (`None` otherwise).
    fn samples_end(&mut self) -> Option<SimTime> {
        let runs = self.sampling.runs_done_at?;
        let workload = self.slots.base() as usize;
        while self.sampling.resolved_upto < workload.min(self.flows.len()) {
            let f = &self.flows[self.sampling.resolved_upto];
            if f.coll.is_none() {
                let at = resolved_at(f)?;
                self.sampling.resolved_at = self.sampling.resolved_at.max(at);
            }
            self.sampling.resolved_upto += 1;
        }
        Some(
            self.sampling
                .cut_at(self.sampling.resolved_at, workload > 0, runs),
        )
    }

    /// Takes every sample due before `t` (the end of a split run's window).
    pub(super) fn sample_before(&mut self, t: SimTime) {
        if t > SimTime::ZERO {
            self.sample_through(SimTime(t.0 - 1));
        }
    }

    fn sample(&mut self, now: SimTime) {
        let Some(ts) = &self.sc.timeseries else {
            return;
        };
        if self.sampling.runs_done_at.is_none() && self.runs_done() {
            self.sampling.runs_done_at = Some(now);
        }
        let part = self.part.as_deref();
        let mut rows: Vec<(Metric, f64)> = Vec::with_capacity(3);
        let mut obj = 0u32;
        for &p in &ts.ports {
            // A host's packet whose end no event marks (`launch`) and that ended before
            // `now` is counted as its event would have been.
            let unmarked = self.nics.get(p as usize).map_or(0, |n| n.tx_end_unmarked);
            if unmarked != 0 && unmarked >> 64 < now.0 as u128 {
                super::fabric::count_unmarked_end(&mut self.nics, &mut self.ports, p as usize);
            }
            // Read only: a partition's copy of a port it does not own gives a value the
            // end of run leaves out.
            let port = &self.ports[p as usize];
            rows.extend([
                (Metric::QueueBytes, port.queued_bytes as f64),
                (Metric::Paused, port.is_paused(now) as u8 as f64),
                (Metric::TxBytes, port.tx_bytes as f64),
            ]);
            Self::push_samples(&mut self.samples, now, obj, &mut rows);
            obj += 1;
        }
        let line = self.topo.host_link.rate.0 as f64;
        let read = self.rc.as_ref().is_some_and(|r| r.operation == Op::Read);
        for &f in &ts.flows {
            let flow = &self.flows[f as usize];
            // The rate is the requester's (its congestion control moves on when read),
            // or for bare packets the line's until the last one lands: only the
            // partition that knows it reads it (`rate_host`).
            let mine = part.map_or(true, |p| p.plan.host(self.rate_host(f)) == p.me);
            let live_qp = flow.qp != NO_QP
                && !self.qps[flow.qp as usize].dead
                && self.qps[flow.qp as usize].gen == flow.qp_gen;
            let rate = match flow.outcome {
                _ if !mine => 0.0,
                super::Outcome::Pending if live_qp => {
                    let qp = &mut self.qps[flow.qp as usize];
                    // The data direction: requester to responder, or back for a READ.
                    let d = if read {
                        Direction::Reverse
                    } else {
                        Direction::Forward
                    };
                    qp.rate_bps(now, d).unwrap_or(line)
                }
                super::Outcome::Pending if flow.def.start <= now => line,
                _ => 0.0,
            };
            rows.extend([
                (Metric::RateGbps, rate / 1e9),
                (
                    Metric::DeliveredBytes,
                    self.flows[f as usize].delivered as f64,
                ),
            ]);
            Self::push_samples(&mut self.samples, now, obj, &mut rows);
            obj += 1;
        }
    }

    fn push_samples(
        out: &mut Vec<Sample>,
        time: SimTime,
        object: u32,
        rows: &mut Vec<(Metric, f64)>,
    ) {
        out.extend(rows.drain(..).map(|(metric, value)| Sample {
            time,
            object,
            metric,
            value,
        }));
    }

    /// At the end of the run: the samples past its last event (a split run's last
    /// window takes them up to its end) go, unless its duration cut it short, and so do
    /// those after the first at which nothing was left unfinished: every workload flow
    /// completed or failed before it, and every collective and training job done.
    pub(super) fn cut_samples(&mut self, last_event: SimTime, stopped: bool) {
        if self.samples.is_empty() {
            return;
        }
        let mut end = if stopped { SimTime::MAX } else { last_event };
        // The workload's flows (a collective's or a job's transfers count with it).
        let (mut resolved, mut any) = (Some(SimTime::ZERO), false);
        for f in self.flows.iter().filter(|f| f.coll.is_none()) {
            any = true;
            resolved = match (resolved, resolved_at(f)) {
                (Some(r), Some(a)) => Some(r.max(a)),
                _ => None,
            };
        }
        if let (Some(flows), Some(runs)) = (resolved, self.sampling.runs_done_at) {
            end = end.min(self.sampling.cut_at(flows, any, runs));
        }
        self.samples.retain(|s| s.time <= end);
    }
}

/// When workload flow `f` was completed or failed; `None` while it is pending.
fn resolved_at(f: &super::FlowState) -> Option<SimTime> {
    match f.outcome {
        super::Outcome::Pending => None,
        super::Outcome::Completed => f.finish,
        super::Outcome::Failed(_) => f.failed_at,
    }
}

/// A split run's samples put together: each partition took every sample at the same
/// times, in the same order; each value comes from the partition `owner` names for its
/// object and metric.
pub(super) fn merge(
    mut copies: Vec<Vec<Sample>>,
    owner: impl Fn(u32, Metric) -> usize,
) -> Vec<Sample> {
    let len = copies.iter().map(Vec::len).min().unwrap_or(0);
    debug_assert!(
        copies.iter().all(|c| c.len() == len),
        "every partition samples at the same times"
    );
    let mut out = std::mem::take(&mut copies[0]);
    out.truncate(len);
    for (i, s) in out.iter_mut().enumerate() {
        let o = owner(s.object, s.metric);
        if o != 0 {
            s.value = copies[o][i].value;
        }
    }
    out
}

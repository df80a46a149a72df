//! The event loop: pops the earliest event and hands it to what it names
//! ([`Sim::advance`]), and the end of a run: what the components hold becomes the run's
//! output ([`Sim::finish`]). One run on one thread calls `advance` once, to the end; a
//! run split over threads (`sim::parallel`) calls it once per window of each partition.

use super::collective_glue::CollInput;
use super::{
    footprint, watchdog, HostPipeline, HostWake, Outcome, RunOutput, Sim, LIVELOCK_CHECK,
    LIVELOCK_EVENTS, MEMORY_BUDGET, PROGRESS,
};
use crate::engine::Event;
use crate::units::{SimDuration, SimTime, TIME_HORIZON};
use std::time::Instant;

/// Where a run's loop stands between calls of [`Sim::advance`].
#[derive(Debug)]
pub(super) struct LoopState {
    pub wall: Instant,
    /// The run's end: `duration`, else the time horizon.
    pub limit: SimTime,
    /// An event after `limit` was left: the run was cut short.
    pub stopped: bool,
    /// The last time anything happened: timer events that find nothing to do (a
    /// queue pair that finished, a deadline that moved) do not extend the run.
    pub last: SimTime,
    /// A split run's: the time of the last event any partition handled, whatever it
    /// did (time-series samples are taken up to it: `sampler`); one thread's is its
    /// event queue's `now`.
    pub popped: SimTime,
    // A model that keeps scheduling at `now` would never let time advance (a hang).
    // Every `LIVELOCK_CHECK` events the loop looks whether time moved since the last
    // look; after `LIVELOCK_EVENTS` events without it moving the run stops, and the
    // end-of-run check reports it. (One mask test per event, not a comparison.)
    instant: SimTime,
    still: u64,
    pub livelock: bool,
    pub out_of_memory: Option<u64>,
    pub watchdog_stop: Option<watchdog::WatchdogStop>,
    budget: Option<u64>,
}

impl LoopState {
    pub fn new(duration: Option<SimDuration>) -> LoopState {
        LoopState {
            wall: Instant::now(),
            limit: duration
                .map(|d| SimTime(d.0))
                .unwrap_or(TIME_HORIZON)
                .min(TIME_HORIZON),
            stopped: false,
            last: SimTime::ZERO,
            popped: SimTime::ZERO,
            instant: SimTime::MAX,
            still: 0,
            livelock: false,
            out_of_memory: None,
            watchdog_stop: None,
            budget: MEMORY_BUDGET.get().copied(),
        }
    }

    /// Why a split run's partition stops at its next meeting, if it must: the livelock
    /// check, the watchdog or the memory budget stopped it, or its NICs' sends must go
    /// again stepped (`rerun_stepped`).
    pub fn halt_reason(&self, rerun_stepped: bool) -> Option<&'static str> {
        if self.livelock {
            Some("the livelock check stopped a partition")
        } else if self.watchdog_stop.is_some() {
            Some("the watchdog stopped a partition")
        } else if self.out_of_memory.is_some() {
            Some("the memory budget stopped a partition")
        } else if rerun_stepped {
            Some(READS_OVERFLOWED)
        } else {
            None
        }
    }
}

/// Why a split run went on one thread: a partition's NIC would have had more messages
/// between doorbell and ready than read slots (`HostPipeline::nic_side_overflowed`).
pub(super) const READS_OVERFLOWED: &str =
    "a NIC's DMA reads would have waited for a read slot (max_outstanding_reads)";

impl Sim {
    /// Whether this run must go again with every send's NIC side stepped: a NIC would
    /// have had more messages between doorbell and ready than read slots, so a read
    /// computed at its hand-off may have waited (`HostPipeline::nic_side_overflowed`).
    pub(super) fn must_rerun_stepped(&self) -> bool {
        self.hostm
            .as_ref()
            .is_some_and(HostPipeline::nic_side_overflowed)
    }

    /// A new run of `sim`'s scenario with every send's NIC side stepped
    /// (`HostPipeline::unfold_nic_side`), and the ways `sim` was set to run (tests'
    /// comparisons) kept; `sim` is dropped first.
    pub(super) fn stepped_again(sim: Sim) -> Sim {
        let (sc, marks, credits, deep) = (
            sim.sc.clone(),
            sim.mark_every_tx_end,
            sim.credit_event_per_return,
            sim.deep_prefetch,
        );
        drop(sim);
        let mut again = Sim::new(&sc);
        again.mark_every_tx_end = marks;
        again.credit_event_per_return = credits;
        again.deep_prefetch = deep;
        if let Some(h) = again.hostm.as_mut() {
            h.unfold_nic_side();
        }
        again
    }

    /// Runs until no work is left or `duration` has elapsed.
    pub fn run(mut self) -> RunOutput {
        let mut st = LoopState::new(self.sc.duration);
        self.advance(&mut st, None);
        if self.must_rerun_stepped() {
            // A NIC's DMA reads could have waited for a slot: the sends' NIC side
            // computed at their hand-off may not be the steps' (`host_nic_side.rs`), so
            // the run goes again with the steps.
            return Sim::stepped_again(self).run();
        }
        let (events, peak) = (self.q.events_processed(), self.pool.peak_live());
        self.finish(st, events, peak)
    }

    /// Handles the events earlier than `until` (every event, without it), in key order.
    /// Returns false when the run must stop: an event lies past its end, or the
    /// livelock check, the watchdog or the memory budget stopped it; true when no event
    /// is left before `until`.
    pub(super) fn advance(&mut self, st: &mut LoopState, until: Option<SimTime>) -> bool {
        if self.hostm.is_some() || !self.colls.is_empty() {
            self.advance_with::<true>(st, until)
        } else {
            self.advance_with::<false>(st, until)
        }
    }

    /// [`Self::advance`], in the copy for runs with (`HOST`) or without a host model or
    /// a collective: only the first loads ahead for their events (`prefetch`), whose
    /// stages in the one loop cost runs without them 3.6% more instructions
    /// (permutation-8192, cachegrind; issue 17's stop 55).
    ///
    /// Called from two copies, the handlers the loop inlined as their one call site
    /// would be called out of line (+1.9% instructions on permutation-8192): those on
    /// the packets' path (`on_tx_done`, `on_arrive` and what they inline, down to
    /// `RoutingPolicy::choose`) are marked `#[inline(always)]`. With them, stop 56
    /// measured permutation-8192 at +0.64% instructions and 1.000x the user time, the
    /// 2,048-GPU ring 0.968x (the host model's events loaded ahead); marking PFC's and
    /// adaptive routing's helpers too ran permutation-256 1.017x, so they are not.
    fn advance_with<const HOST: bool>(
        &mut self,
        st: &mut LoopState,
        until: Option<SimTime>,
    ) -> bool {
        while let Some(t) = self.q.peek_time() {
            // A split run's window ends first: a partition whose next event lies past
            // the duration may still get mail that makes earlier ones, so its samples
            // up to the end are taken only when every partition is past it (the
            // driver's `sample_through`; before, they were taken here and missed what
            // such mail did).
            if until.is_some_and(|u| t >= u) {
                break;
            }
            if t > st.limit {
                self.sample_through(st.limit);
                st.stopped = true;
                return false;
            }
            // Time-series samples due by now see every event before them (`sampler`).
            if t >= self.sampling.next {
                self.sample_through(t);
            }
            if self.q.events_processed() & (LIVELOCK_CHECK - 1) == 0 {
                if t == st.instant {
                    st.still += LIVELOCK_CHECK;
                    if st.still >= LIVELOCK_EVENTS {
                        st.livelock = true;
                        return false;
                    }
                } else {
                    (st.instant, st.still) = (t, 0);
                }
                // A run that must go again with the NIC's steps stops here (`run`).
                if HOST && self.must_rerun_stepped() {
                    return false;
                }
                // A split run's progress is told by its driver, for all partitions.
                if let Some(p) = PROGRESS.get().filter(|_| self.part.is_none()) {
                    p(
                        t,
                        self.sc.duration.map(|d| SimTime(d.0)),
                        self.q.events_processed(),
                    );
                }
                // Only timers left, and nothing to come that could move work: stuck.
                let (q, nics) = (&self.q, &self.nics);
                let verdict = self.watchdog.check(t, self.delivered_total, || {
                    let queued = q.earliest_where(watchdog::moves_work);
                    // The ends of hosts' packets that no event marks (`launch`).
                    let unmarked = nics
                        .iter()
                        .map(|n| n.tx_end_unmarked)
                        .filter(|&k| k > q.current_key())
                        .min()
                        .map(|k| SimTime((k >> 64) as u64));
                    queued.into_iter().chain(unmarked).min()
                });
                if let watchdog::Verdict::Stuck { since } = verdict {
                    st.watchdog_stop = Some(watchdog::WatchdogStop {
                        since,
                        at: t,
                        bound: self.watchdog.bound(),
                    });
                    return false;
                }
                // Memory grows with the run (collective transfers, flows started): stop
                // cleanly before the system kills the process.
                if let Some(b) = st.budget {
                    if let Some(r) = footprint::resident_bytes().filter(|&r| r > b) {
                        st.out_of_memory = Some(r);
                        return false;
                    }
                }
            }
            let (now, ev) = self.q.pop().expect("peeked");
            #[cfg(debug_assertions)]
            if let Some(part) = self.part.as_deref() {
                let owner = part.plan.owner(
                    &ev,
                    // A split run carries no READ: data lands at `dst`.
                    |f| {
                        let d = &self.flows[f as usize].def;
                        (d.src, d.dst)
                    },
                    |q| (self.qps[q as usize].src, self.qps[q as usize].dst),
                );
                // A collective's events go by its ranks' partitions (`Sim::coll_event_owner`).
                let owner = owner.or_else(|| self.coll_event_owner(&ev));
                assert_eq!(
                    owner,
                    Some(part.me),
                    "{ev:?} handled by partition {}",
                    part.me
                );
            }
            self.prefetch_ahead::<HOST>();
            let acted = match ev {
                Event::FlowStart { flow } => {
                    self.on_flow_start(now, flow);
                    true
                }
                Event::TxDone { port } => {
                    self.on_tx_done(now, port);
                    true
                }
                Event::Arrive { port } => {
                    self.on_arrive(now, port);
                    true
                }
                Event::QpTimer { qp } => self.on_qp_timer(now, qp),
                Event::HoleTimer { qp, .. } => self.on_hole_timer(now, qp),
                Event::HostWake { host } => {
                    self.nics[host as usize].wake_at = None;
                    self.kick(now, host);
                    true
                }
                Event::Pfc { port, pause } => {
                    self.on_pfc(now, port, pause);
                    true
                }
                Event::PfcRefresh { port } => self.on_pfc_refresh(now, port),
                Event::PortWake { port } => {
                    self.ports[port as usize].handle_wake();
                    self.wake_port(now, port);
                    true
                }
                Event::Credit { port, blocks } => {
                    self.on_credit(now, port, blocks);
                    true
                }
                Event::RecvPost { qp, gen } => self.on_recv_post(now, qp, gen),
                Event::FlowStage { flow, stage } => {
                    self.on_host_wake(now, HostWake::Stage { flow, stage })
                }
                Event::PosterDone { nic, poster } => {
                    self.on_host_wake(now, HostWake::PosterDone { nic, poster })
                }
                Event::Irq { nic } => self.on_host_wake(now, HostWake::Irq { nic }),
                Event::CollStart { run } => {
                    self.coll_step(now, run, CollInput::Start);
                    true
                }
                Event::CollWake { run } => {
                    self.coll_step_owned(now, run, CollInput::Wake);
                    true
                }
                Event::TrainStart { job } => {
                    self.train_step(now, job, |r, out| r.start(now, out));
                    true
                }
                Event::TrainWake { job } => {
                    self.on_train_wake(now, job);
                    true
                }
                Event::CollArrive { run, xfer } => {
                    let mut done = std::mem::take(&mut self.coll_done);
                    self.colls[run as usize].arrived(xfer, now, &mut done);
                    for (xfer, at) in done.drain(..) {
                        // Taken by its receiver.
                        let (_, dst, _) = self.colls[run as usize].transfer_ends(xfer);
                        let source = self.endpoint_source(run, dst);
                        self.q.schedule(at, source, Event::CollDone { run, xfer });
                    }
                    self.coll_done = done;
                    true
                }
                Event::CollDone { run, xfer } => {
                    self.coll_step_owned(now, run, CollInput::Done(xfer));
                    true
                }
                Event::CollClear { run, conn } => {
                    self.coll_step_owned(now, run, CollInput::Clear(conn));
                    true
                }
            };
            if self.part.is_some() {
                self.log_pool(self.q.current_key());
            }
            if acted {
                st.last = now;
                if watchdog::moves_work(&ev) {
                    self.watchdog.progress(now);
                }
                if self.sweep_due() {
                    self.sweep(now);
                }
            }
        }
        // A split run's window ends: the samples due in it, whether or not this
        // partition had events then.
        if let Some(u) = until {
            self.sample_before(u);
        }
        true
    }

    /// The end of the run: what the components hold becomes its output. `events` were
    /// handled, at most `peak_packets_in_flight` packets were alive at once.
    pub(super) fn finish(
        mut self,
        st: LoopState,
        events: u64,
        peak_packets_in_flight: u32,
    ) -> RunOutput {
        // The ends of hosts' packets that no event marks (`launch`) and that the run
        // reached: every one, unless it stopped between two events.
        let stopped_early = st.livelock || st.out_of_memory.is_some() || st.watchdog_stop.is_some();
        // Senders' CQEs computed ahead (`HostPipeline::send_completed`) that the run
        // reached count, and the run lasted until the last of them, as their wake-ups
        // would have made it: the samples due by then are taken too (before the ends of
        // packets no event marks are counted, which the samples count up to their own
        // times), as such a wake-up would have (before, one thread left them out and
        // a split run's last window took them: stop 65's split fuzzing).
        let passed_by = if st.stopped {
            st.limit
        } else if stopped_early {
            SimTime(self.q.now().0.saturating_sub(1))
        } else {
            SimTime::MAX
        };
        if !st.stopped && !stopped_early {
            if let Some(end) = self.hostm.as_ref().map(|h| h.send_cqes_end(passed_by)) {
                self.sample_through(end);
            }
        }
        let reached = if stopped_early {
            self.q.current_key() + 1
        } else {
            u128::MAX
        };
        self.settle_tx_before(reached, st.limit);
        let passed = self
            .hostm
            .as_mut()
            .map_or(SimTime::ZERO, |h| h.settle_send_cqes(passed_by));
        self.compact_records();
        self.cut_samples(st.popped.max(self.q.now()).max(passed), st.stopped);
        let end = if st.stopped {
            st.limit
        } else {
            st.last.max(passed)
        };
        // Postings computed ahead (`HostPipeline::post_folded`) count what the run reached.
        if let Some(h) = self.hostm.as_mut() {
            h.settle_posting(end);
        }
        // Cuts the live queue pairs made (their decrease checks up to the end).
        for qp in self.qps.iter_mut().filter(|q| !q.dead) {
            self.cc_totals.rate_cuts += qp.rate_cuts(end);
        }
        let rc = self.rc.as_ref().map(|_| {
            // A retired queue pair's requester was counted as it retired, its
            // responder only when its slot is reused.
            let mut t = self.rc_totals;
            for qp in &self.qps {
                if !qp.dead {
                    t.add(&qp.req.stats);
                }
                t.add_responder(&qp.resp.stats);
            }
            t
        });
        let stuck = match st.watchdog_stop {
            Some(w) => self.stuck_reasons(w),
            None => Vec::new(),
        };
        let stalled = !st.stopped
            && !st.livelock
            && st.out_of_memory.is_none()
            && (self.flows.iter().any(|f| f.outcome == Outcome::Pending)
                || self.colls.iter().any(|c| !c.is_done())
                || self.jobs.iter().any(|j| !j.run.is_done()));
        for p in &mut self.ports {
            p.flush_stats();
        }
        RunOutput {
            events,
            peak_packets_in_flight,
            flows: self.flows,
            ports: self.ports,
            wires: self.wires,
            ingress: self.ingress,
            switches: self.switches,
            end,
            stopped_by_duration: st.stopped
                && self.sc.duration.is_some_and(|d| SimTime(d.0) == st.limit),
            horizon_reached: st.stopped && st.limit == TIME_HORIZON,
            livelock: st.livelock,
            out_of_memory: st.out_of_memory,
            stalled,
            watchdog: st.watchdog_stop,
            stuck,
            retired: self.retired,
            rc,
            faults: self.fault_totals,
            cc: self.cc_totals,
            samples: self.samples,
            wall_seconds: st.wall.elapsed().as_secs_f64(),
            threads: 1,
            partition_events: Vec::new(),
            partition_work_seconds: Vec::new(),
            partition_wait_seconds: Vec::new(),
            windows: 0,
            hosts_apart: 0,
            one_thread_because: None,
            host: self.hostm.map(HostPipeline::into_output),
            collectives: self
                .colls
                .iter()
                .zip(&self.coll_owner)
                .filter(|(_, o)| o.is_none())
                .map(|(c, _)| c.result())
                .collect(),
            training: self.jobs.iter().map(|j| j.run.result()).collect(),
        }
    }
}

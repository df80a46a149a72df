//! The watchdog: ends a run in which nothing can move any more but timers keep firing.
//!
//! A run whose flows can never finish usually runs out of events and ends by itself (a
//! stall, `RunOutput::stalled`). One that keeps only timers alive does not: a SEND that
//! meets an empty receive queue with `rnr_retry: 7` is RNR-NAKed and retried forever
//! (IBTA 9.7.5.2.8: 7 means retry without limit), and the event loop would go on until
//! the clock's horizon, minutes or hours of wall time with nothing to show. The watchdog
//! watches for *progress*: a payload byte delivered, or any event of the workload, the
//! host pipeline, a collective or a training job (those move work along by
//! themselves). When simulated time runs `bound` past the last progress and the event
//! queue holds no such event still to come (a flow that starts later, a receive WQE
//! posted later, a compute phase), no flow can ever move again: the run stops there and
//! reports each pending flow's queue-pair state as the reason.
//!
//! The bound (`scenario.watchdog`, default [`default_bound`]) must exceed the longest
//! quiet spell a healthy run can have: a queue pair that waits out `retry_cnt + 1`
//! local ACK timeouts before failing (4.3 s each at NCCL's timeout 20), and its finite
//! RNR retries. Twice that, and at least 1 s, is the default, so a dead link's detection
//! (`rc-dead-link.yaml`, 34.4 s at timeout 20) is never cut short.
//!
//! Sans-IO: the loop tells it of progress and asks it, every so many events, whether the
//! run is stuck; it never touches the event queue.
//!
//! Leaves out: progress too slow to matter (a flow paced at 1 kb/s still progresses).

use super::{Outcome, Sim, NO_QP};
use crate::engine::{Event, FlowId};
use crate::transport::rc::{local_ack_timeout, rnr_timer, RcParams};
use crate::units::{SimDuration, SimTime};

/// The least default bound: 1 s of simulated time.
pub const MIN_BOUND: SimDuration = SimDuration(1_000_000_000_000);

/// The default bound for queue pairs with `rc` (none: 1 s): twice the longest a queue
/// pair can wait without progress before it fails, at least [`MIN_BOUND`].
pub fn default_bound(rc: Option<&RcParams>) -> SimDuration {
    let Some(p) = rc else { return MIN_BOUND };
    let retries = local_ack_timeout(p.timeout).map_or(0, |t| t.0 * (p.retry_cnt as u64 + 1));
    // rnr_retry 7 retries forever: only a receive WQE posted later ends that wait, and
    // such a post is an event the watchdog sees coming.
    let rnr = if p.rnr_retry < 7 {
        rnr_timer(p.min_rnr_timer).0 * (p.rnr_retry as u64 + 1)
    } else {
        0
    };
    SimDuration((2 * (retries + rnr)).max(MIN_BOUND.0))
}

/// Whether handling `ev` moves work along by itself: the workload's, the host
/// pipeline's, a collective's and a training job's events. The packet machinery
/// (serialization, arrivals, queue-pair timers, PFC, credits, pacing) and samples do
/// not: a packet counts only when it delivers payload.
pub fn moves_work(ev: &Event) -> bool {
    match ev {
        Event::FlowStart { .. }
        | Event::RecvPost { .. }
        | Event::FlowStage { .. }
        | Event::PosterDone { .. }
        | Event::Irq { .. }
        | Event::CollStart { .. }
        | Event::CollWake { .. }
        | Event::CollArrive { .. }
        | Event::CollDone { .. }
        | Event::CollClear { .. }
        | Event::TrainStart { .. }
        | Event::TrainWake { .. } => true,
        Event::TxDone { .. }
        | Event::Arrive { .. }
        | Event::QpTimer { .. }
        | Event::HoleTimer { .. }
        | Event::HostWake { .. }
        | Event::Pfc { .. }
        | Event::PfcRefresh { .. }
        | Event::PortWake { .. }
        | Event::Credit { .. } => false,
    }
}

/// Where a run the watchdog stopped stood.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchdogStop {
    /// The last progress.
    pub since: SimTime,
    /// When it stopped the run.
    pub at: SimTime,
    pub bound: SimDuration,
}

/// The watchdog's state.
#[derive(Clone, Debug)]
pub struct Watchdog {
    bound: SimDuration,
    /// Last time something moved.
    last_progress: SimTime,
    /// Payload bytes delivered by then (all flows and transfers).
    delivered: u64,
    /// No verdict before this time: an event that will move work is pending until then.
    quiet_until: SimTime,
}

/// What [`Watchdog::check`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Fine,
    /// Nothing moved since `since` and nothing pending can move it: stop the run.
    Stuck {
        since: SimTime,
    },
}

impl Watchdog {
    pub fn new(bound: SimDuration) -> Watchdog {
        Watchdog {
            bound,
            last_progress: SimTime::ZERO,
            delivered: 0,
            quiet_until: SimTime::ZERO,
        }
    }

    pub fn bound(&self) -> SimDuration {
        self.bound
    }

    /// An event of the workload, host, collective or training kind was handled at `now`,
    /// or a step of the host pipeline computed ahead happens then (a later time).
    #[inline]
    pub fn progress(&mut self, now: SimTime) {
        self.last_progress = self.last_progress.max(now);
    }

    /// Asked at `now`, with `delivered` payload bytes delivered so far. `next_mover`
    /// finds the earliest pending event that moves work by itself (asked only when the
    /// bound has passed, so its cost, a scan of the event queue, is paid rarely).
    pub fn check(
        &mut self,
        now: SimTime,
        delivered: u64,
        next_mover: impl FnOnce() -> Option<SimTime>,
    ) -> Verdict {
        if delivered != self.delivered {
            self.delivered = delivered;
            self.last_progress = now;
        }
        if now < self.quiet_until || now.0 - self.last_progress.0.min(now.0) <= self.bound.0 {
            return Verdict::Fine;
        }
        match next_mover() {
            Some(t) => {
                self.quiet_until = t;
                Verdict::Fine
            }
            None => Verdict::Stuck {
                since: self.last_progress,
            },
        }
    }
}

impl Sim {
    /// Each pending flow of a run the watchdog stopped, with what its queue pair was
    /// doing: the reason it is stuck.
    pub(super) fn stuck_reasons(&self, w: WatchdogStop) -> Vec<(FlowId, String)> {
        let quiet = (w.at.0 - w.since.0) as f64 / 1e12;
        let rc = self.rc.as_ref().map(|r| r.params);
        let mut out = Vec::new();
        // The first few, as the report lists them; the rest get the watchdog's reason
        // without their queue pair's.
        for (i, f) in self.flows.iter().enumerate() {
            if out.len() == 20 {
                break;
            }
            if f.outcome != Outcome::Pending || !f.started {
                continue;
            }
            let qp = self
                .qps
                .get(f.qp as usize)
                .filter(|q| f.qp != NO_QP && q.gen == f.qp_gen && !q.dead);
            let why = match (qp, rc) {
                (Some(q), Some(p)) => {
                    let st = &q.req.stats;
                    let forever = if p.rnr_retry == 7 {
                        " (rnr_retry 7 retries forever)"
                    } else {
                        ""
                    };
                    format!(
                        "no payload moved for {quiet:.3} s of simulated time (watchdog bound {:.3} s) and only timers were left: its queue pair {} -> {} had {} RNR NAKs{forever}, {} local ACK timeouts and {} sequence NAKs; {} of {} B delivered",
                        w.bound.0 as f64 / 1e12,
                        q.src,
                        q.dst,
                        st.rnr_naks,
                        st.timeouts,
                        st.seq_naks,
                        f.delivered,
                        f.def.size
                    )
                }
                _ => format!(
                    "no payload moved for {quiet:.3} s of simulated time (watchdog bound {:.3} s) and only timers were left; {} of {} B delivered",
                    w.bound.0 as f64 / 1e12,
                    f.delivered,
                    f.def.size
                ),
            };
            out.push((i as FlowId, why));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc(timeout: u8, retry_cnt: u8, rnr_retry: u8, min_rnr_timer: u8) -> RcParams {
        RcParams {
            timeout,
            retry_cnt,
            rnr_retry,
            min_rnr_timer,
            max_rd_atomic: 1,
            path_mtu: 4096,
            window_packets: None,
            ack_every: 1,
            e2e_credits: false,
            initial_psn: 0,
            out_of_order: None,
        }
    }

    #[test]
    fn the_default_bound_is_twice_the_longest_wait_before_a_queue_pair_fails() {
        // NCCL's timeout 20 (4.294967 s) x 8 tries, twice: 68.72 s.
        assert_eq!(
            default_bound(Some(&rc(20, 7, 7, 12))),
            SimDuration((2 * 8 * 4_096_000) << 20)
        );
        // Timeout 12 (16.8 ms) x 4 tries + 4 RNR waits of 0.64 ms, twice: 136.9 ms,
        // below the 1 s floor.
        assert_eq!(default_bound(Some(&rc(12, 3, 3, 12))), MIN_BOUND);
        // Timeout 18 (1.07 s) x 8 + 8 x 491.52 ms (code 31), twice: 25.04 s.
        let t18 = 4_096_000u64 << 18;
        assert_eq!(
            default_bound(Some(&rc(18, 7, 7 - 1, 31))),
            SimDuration(2 * (8 * t18 + 7 * 491_520_000_000))
        );
        // No timers at all: the floor.
        assert_eq!(default_bound(Some(&rc(0, 7, 7, 12))), MIN_BOUND);
        assert_eq!(default_bound(None), MIN_BOUND);
    }

    #[test]
    fn it_waits_the_bound_then_looks_for_work_still_to_come() {
        let mut w = Watchdog::new(SimDuration::from_us(100));
        let at = |us: u64| SimTime(us * 1_000_000);
        // Bytes keep moving: fine however late.
        assert_eq!(w.check(at(50), 10, || None), Verdict::Fine);
        assert_eq!(w.check(at(150), 20, || None), Verdict::Fine);
        // Nothing moved since 150 us: fine up to the bound, exactly.
        assert_eq!(w.check(at(250), 20, || unreachable!()), Verdict::Fine);
        // Past it, with a flow still to start at 900 us: quiet until then, no scan.
        assert_eq!(w.check(at(251), 20, || Some(at(900))), Verdict::Fine);
        assert_eq!(w.check(at(899), 20, || unreachable!()), Verdict::Fine);
        // The start was handled (progress) at 900 us; then nothing again.
        w.progress(at(900));
        assert_eq!(w.check(at(1000), 20, || unreachable!()), Verdict::Fine);
        assert_eq!(
            w.check(at(1001), 20, || None),
            Verdict::Stuck { since: at(900) }
        );
    }
}

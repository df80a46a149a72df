//! The end of a split run (`parallel`): the partitions' copies put together, each
//! component from the partition that owns it, each flow's sending side from its
//! source's partition and its receiving side from its destination's, counters summed,
//! the host pipelines and time series by owner; then the one-thread end of run.

use super::{Plan, RcTotals, RunOutput, Sim};
use crate::components::host::HostPipeline;
use crate::engine::{FlowId, PortId};
use crate::sim::run_loop::LoopState;
use crate::sim::{FlowState, Metric, Outcome, Sample};
use crate::units::SimTime;

/// The partitions' time-series samples put together: a port's from its sender's
/// partition, a flow's rate from its source's and its bytes delivered from its
/// destination's.
fn merge_samples(sims: &mut [Sim], plan: &Plan) -> Vec<Sample> {
    let Some(ts) = sims[0].sc.timeseries.clone() else {
        return Vec::new();
    };
    let ends: Vec<(u32, u32)> = ts
        .flows
        .iter()
        .map(|&f| (sims[0].rate_host(f), sims[0].flows[f as usize].def.dst))
        .collect();
    let copies = sims
        .iter_mut()
        .map(|s| std::mem::take(&mut s.samples))
        .collect();
    crate::sim::sampler::merge(copies, |object, metric| {
        let ports = ts.ports.len() as u32;
        (if object < ports {
            plan.sender(ts.ports[object as usize])
        } else {
            let (rate, dst) = ends[(object - ports) as usize];
            plan.host(if metric == Metric::RateGbps {
                rate
            } else {
                dst
            })
        }) as usize
    })
}

/// Of the partitions' copies of a component vector (`field`), the owner's of each
/// (`owner(i)` for the i-th); the copies are taken out of the partitions.
fn pick<T>(
    sims: &mut [Sim],
    field: impl Fn(&mut Sim) -> &mut Vec<T>,
    owner: impl Fn(usize) -> u16,
) -> Vec<T> {
    let mut copies: Vec<_> = sims
        .iter_mut()
        .map(|s| std::mem::take(field(s)).into_iter())
        .collect();
    let len = copies.first().map_or(0, |c| c.len());
    (0..len)
        .map(|i| {
            let o = owner(i) as usize;
            let mut mine = None;
            for (k, c) in copies.iter_mut().enumerate() {
                let x = c.next().expect("every partition holds every component");
                if k == o {
                    mine = Some(x);
                }
            }
            mine.expect("an owner among the partitions")
        })
        .collect()
}

/// Puts the partitions' copies together: each component from its owner, each flow's
/// sending side from its source's partition and its receiving side from its
/// destination's, counters summed; then the one-thread end of run.
pub(super) fn merge(
    parts: Vec<(Sim, LoopState, bool)>,
    plan: &Plan,
    wall: std::time::Instant,
    peak: i64,
) -> RunOutput {
    let per_part: Vec<u64> = parts.iter().map(|p| p.0.q.events_processed()).collect();
    // A run's start and wake-ups are every partition's: one thread's count has each once.
    let everywhere: u64 = parts
        .iter()
        .skip(1)
        .map(|p| p.0.part.as_deref().map_or(0, |x| x.everywhere))
        .sum();
    let events: u64 = per_part.iter().sum::<u64>() - everywhere;
    let stopped = parts.iter().any(|p| p.2);
    let last = parts
        .iter()
        .map(|p| p.1.last)
        .max()
        .unwrap_or(SimTime::ZERO);
    let popped = parts
        .iter()
        .map(|p| p.0.q.now())
        .max()
        .unwrap_or(SimTime::ZERO);
    let (mut sims, mut states): (Vec<Sim>, Vec<LoopState>) =
        parts.into_iter().map(|(sim, st, _)| (sim, st)).unzip();
    let mut st = states.swap_remove(0);
    st.stopped = stopped;
    st.last = last;
    st.popped = popped;
    let samples = merge_samples(&mut sims, plan);
    st.wall = wall;
    let ports = pick(&mut sims, |s| &mut s.ports, |p| plan.sender(p as PortId));
    let wires = pick(&mut sims, |s| &mut s.wires, |p| plan.receiver(p as PortId));
    let ingress = pick(
        &mut sims,
        |s| &mut s.ingress,
        |p| plan.receiver(p as PortId),
    );
    let switches = pick(&mut sims, |s| &mut s.switches, |s| plan.switch(s as u32));
    let nics = pick(&mut sims, |s| &mut s.nics, |h| plan.host(h as u32));
    // Collectives (`parallel_coll`, `parallel_retire`): every copy holds every transfer
    // record, padded to the same slots; a slot its maker retired and did not give out
    // again holds none. The partitions' folds of what they retired, and each run's
    // wrong pieces (counted where their ranks are), are summed.
    let collectives = !sims[0].colls.is_empty();
    let records = sims.iter().map(|s| s.flows.len()).max().unwrap_or(0);
    for s in sims.iter_mut() {
        let hole = FlowState::hole(&s.sc);
        if let Some(h) = s.hostm.as_mut() {
            h.pad_messages(records, super::super::host_message(&hole.def));
        }
        s.flows.resize(records, hole);
    }
    let freed: Vec<FlowId> = sims
        .iter()
        .flat_map(|s| s.slots.free_slots().iter().copied())
        .collect();
    for s in sims.iter_mut() {
        for &id in &freed {
            s.flows[id as usize].num = super::super::parallel_coll::HOLE;
        }
    }
    let (first, rest) = sims.split_at_mut(1);
    for o in rest.iter() {
        for (r, other) in first[0].colls.iter_mut().zip(&o.colls) {
            r.add_wrong_from(other);
        }
        first[0].retired.merge(&o.retired);
    }
    let mut copies: Vec<_> = sims
        .iter_mut()
        .map(|s| std::mem::take(&mut s.flows).into_iter())
        .collect();
    let count = copies.first().map_or(0, |c| c.len());
    let mut flows = Vec::with_capacity(count);
    let base = sims[0].slots.base() as usize;
    for i in 0..count {
        let all: Vec<_> = copies
            .iter_mut()
            .map(|c| c.next().expect("every partition holds every flow"))
            .collect();
        let f = if i < base {
            let tx = plan.host(all[0].def.src) as usize;
            merge_copies(all, tx)
        } else {
            // A transfer record's slot names the partition that made it, its sender's;
            // only its receiver's partition holds the other side (the others hold none,
            // or an older record of the slot's).
            let tx = (i - base) % plan.parts as usize;
            let rx = plan.host(all[tx].def.dst) as usize;
            if rx == tx {
                all[tx].clone()
            } else {
                merge_copies(vec![all[tx].clone(), all[rx].clone()], 0)
            }
        };
        flows.push(f);
    }
    // Queue pairs: each requester's own, from its partition; the responder copies give
    // the responders' counters (those of a slot reused were counted then).
    let mut qps = Vec::new();
    let mut responders = RcTotals::default();
    for sim in sims.iter_mut() {
        let part = sim.part.take().expect("a partition");
        for (i, qp) in std::mem::take(&mut sim.qps).into_iter().enumerate() {
            if !part.mirror.get(i).copied().unwrap_or(false) {
                qps.push(qp);
            } else {
                responders.add_responder(&qp.resp.stats);
            }
        }
    }
    let hostm = sims[0].hostm.is_some().then(|| {
        let nics = pick(
            &mut sims,
            |s| {
                s.hostm
                    .as_mut()
                    .expect("every copy has the host model")
                    .nics_mut()
            },
            |h| plan.host(h as u32),
        );
        let copies = sims
            .iter_mut()
            .map(|s| s.hostm.take().expect("taken once"))
            .collect();
        let ends = |j: usize| {
            let d = &flows[j].def;
            (plan.host(d.src) as usize, plan.host(d.dst) as usize)
        };
        let mut p = HostPipeline::merge_messages(copies, ends);
        *p.nics_mut() = nics;
        p
    });
    let mut sim = sims.swap_remove(0);
    sim.hostm = hostm;
    if collectives {
        let mut msgs = sim.hostm.as_mut().map(|h| h.take_messages());
        super::super::parallel_coll::order_transfers(&mut flows, msgs.as_mut());
        // Their slots are gone with them (the end of run has nothing to compact).
        sim.slots.swept(Vec::new(), []);
        sim.slots.clear_free();
        if let (Some(h), Some(m)) = (sim.hostm.as_mut(), msgs) {
            h.put_messages(m);
        }
    }
    sim.rc_totals.merge(&responders);
    for o in &sims {
        sim.rc_totals.merge(&o.rc_totals);
        sim.cc_totals.cnps_sent += o.cc_totals.cnps_sent;
        sim.cc_totals.cnps_received += o.cc_totals.cnps_received;
        sim.cc_totals.rate_cuts += o.cc_totals.rate_cuts;
        sim.fault_totals.corrupted += o.fault_totals.corrupted;
        sim.fault_totals.random_drops += o.fault_totals.random_drops;
        sim.fault_totals.flap_drops += o.fault_totals.flap_drops;
        sim.delivered_total += o.delivered_total;
    }
    sim.ports = ports;
    sim.wires = wires;
    sim.ingress = ingress;
    sim.switches = switches;
    sim.nics = nics;
    sim.flows = flows;
    sim.qps = qps;
    sim.samples = samples;
    sim.part = None;
    let mut out = sim.finish(st, events, peak.max(0) as u32);
    out.threads = plan.parts;
    out.partition_events = per_part;
    out
}

/// One flow's copies put together: each side counts what it did; a time is set where it
/// happened (on one side, or first where the requester also sets it on completion:
/// `landed`); the rest is the copy of `tx`, its source's partition.
pub(in crate::sim) fn merge_copies(mut all: Vec<FlowState>, tx: usize) -> FlowState {
    let sum = |get: fn(&FlowState) -> u64| all.iter().map(get).sum::<u64>();
    let first = |get: fn(&FlowState) -> Option<SimTime>| all.iter().filter_map(get).min();
    let (segmented, delivered) = (sum(|f| f.segmented), sum(|f| f.delivered));
    let packets_sent = sum(|f| f.packets_sent as u64) as u32;
    let packets_dropped = sum(|f| f.packets_dropped as u64) as u32;
    let retransmissions = sum(|f| f.retransmissions as u64) as u32;
    let (landed, finish, failed_at) = (
        first(|f| f.landed),
        first(|f| f.finish),
        first(|f| f.failed_at),
    );
    let started = all.iter().any(|f| f.started);
    let outcome = all
        .iter()
        .map(|f| f.outcome)
        .find(|o| *o != Outcome::Pending)
        .unwrap_or(Outcome::Pending);
    let mut f = all.swap_remove(tx);
    f.segmented = segmented;
    f.delivered = delivered;
    f.packets_sent = packets_sent;
    f.packets_dropped = packets_dropped;
    f.retransmissions = retransmissions;
    f.landed = landed;
    f.finish = finish;
    f.failed_at = failed_at;
    f.started = started;
    f.outcome = outcome;
    f
}

//! The end of a split run (`parallel`): the partitions' copies put together, each
//! component from the partition that owns it, each flow's sending side from its
//! source's partition and its receiving side from its destination's, counters summed,
//! the host pipelines and time series by owner; then the one-thread end of run.

use super::{Plan, RcTotals, RunOutput, Sim};
use crate::components::host::HostPipeline;
use crate::engine::PortId;
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
        .map(|&f| {
            (
                sims[0].flows[f as usize].def.src,
                sims[0].flows[f as usize].def.dst,
            )
        })
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
            let (src, dst) = ends[(object - ports) as usize];
            plan.host(if metric == Metric::RateGbps { src } else { dst })
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
    let events: u64 = per_part.iter().sum();
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
    let mut copies: Vec<_> = sims
        .iter_mut()
        .map(|s| std::mem::take(&mut s.flows).into_iter())
        .collect();
    let count = copies.first().map_or(0, |c| c.len());
    let mut flows = Vec::with_capacity(count);
    for _ in 0..count {
        let mut all: Vec<_> = copies
            .iter_mut()
            .map(|c| c.next().expect("every partition holds every flow"))
            .collect();
        let tx = plan.host(all[0].def.src) as usize;
        // Each side counts what it did; a time is set where it happened (on one side,
        // or first where the requester also sets it on completion: `landed`).
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
        let mut p = HostPipeline::merge_messages(copies, |nic| plan.host(nic) as usize);
        *p.nics_mut() = nics;
        p
    });
    let mut sim = sims.swap_remove(0);
    sim.hostm = hostm;
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

//! What the event loop asks the CPU to start loading for the events it will handle
//! next (issue 17: at thousands of GPUs the cache lines an event reads are out of the
//! caches, and each points to the next). A software pipeline of [`STAGES`] stages: the
//! event `STAGES` places ahead gets the lines its id names (its port, wire, ingress,
//! NIC); one place nearer, the lines those point to (the packet at the front of its
//! wire or queue), read from lines the stage before brought; and so on, to the next
//! event, which gets the last links of its chain (its flow, its queue pair). A hint
//! only: the same events run the same way. An event scheduled meanwhile can come
//! between and make a guess wrong: the stage then loads lines nothing reads, and its
//! own reads of the stage before's lines may miss.
//!
//! Runs with a host model or a collective also load ahead for those events (`HOST`,
//! their own copy of the event loop): a message's record, its NICs' host-side state and
//! its flow; a posting context's NIC, the context and the message it builds; a
//! transfer's record and what it names; a ready request's queue pair and the request at
//! its pipeline's front; and at a host's arrival, the message's record.
//!
//! Where a chain has stages to spare, a line is read two or three stages after it was
//! asked for, not one: on the 4,096-GPU ring the pops come faster than the memory
//! answers, and perf put 6% of the run on reading a transfer's record one pop after
//! asking for it, 3% on a message's flow (issue 17, stop 67). A transfer's record is
//! asked for at first sight and read three stages later; a message's flow with its
//! record (its id names both) and read two stages later.

use super::fabric::route_key;
use super::{Sim, NO_QP};
use crate::components::host::{HostWake, ST_PAYLOAD, ST_PROCESSED, ST_READY, ST_RECV_CQE};
use crate::components::{OnWire, NO_PORT};
use crate::engine::{prefetch, prefetch_lines, prefetch_whole, Event};
use crate::packet::PktKind;
use crate::topology::Node;

/// How many events ahead the first stage looks; stage `s` (from 0) looks `STAGES - s`
/// ahead, the next event's being the last (`STAGES - 1`).
pub(super) const STAGES: usize = 5;

/// A core's own cache (this machine's L2: 1 MiB): ports beyond it are fetched ahead.
const CORE_CACHE_BYTES: usize = 1 << 20;

/// Whether a fabric of `ports` ports gets the whole pipeline: its ports' hot lines
/// (the first four of each) outgrow a core's cache. Below that the loads mostly hit and
/// the pipeline's own work costs more than it saves (permutation-256: 1.08x the wall
/// time with it).
pub(super) fn deep_enough(ports: usize) -> bool {
    ports * 4 * 64 > CORE_CACHE_BYTES
}

impl Sim {
    /// Asks for what the next events read, each at its stage: an event `d` places ahead
    /// gets the stage after the one it got a pop ago, the first when it comes into
    /// sight (`STAGES` places ahead, or anywhere in a tick just refilled), so no stage
    /// reads lines the stage before did not ask for.
    ///
    /// `HOST`: the run has a host model or a collective, and its copy of the event loop
    /// (`Sim::advance`) also loads ahead for their events; a run with neither keeps the
    /// lean copy.
    #[inline(always)]
    pub(super) fn prefetch_ahead<const HOST: bool>(&self) {
        if let Some(next) = self.q.peek_next() {
            // An event scheduled into this tick since its refill comes without the
            // earlier stages: its first lines at least.
            self.prefetch_first::<HOST>(next);
        }
        if !self.deep_prefetch {
            return;
        }
        let age = self.q.due_age();
        for d in 1..=STAGES {
            if let Some(ev) = self.q.peek_ahead(d - 1) {
                self.prefetch_stage::<HOST>(ev, (d + age).min(STAGES) - d);
            }
        }
    }

    /// The first stage for the next event. On a fabric too small for the whole
    /// pipeline, a host-model event gets its message's first line only, as before the
    /// host stages: the record whole and the NIC's lines cost more than they save there
    /// (a 512-GPU ring, `allreduce-4096.yaml` with 8 leaves and 8 spines, 1.010x the
    /// user time with them, issue 17's stop 56).
    #[inline(always)]
    fn prefetch_first<const HOST: bool>(&self, ev: Event) {
        match ev {
            Event::FlowStage { flow, .. } if HOST && !self.deep_prefetch => {
                if let Some(m) = self.hostm.as_ref().and_then(|h| h.msgs.get(flow as usize)) {
                    prefetch(m);
                }
            }
            Event::PosterDone { .. } | Event::Irq { .. } if HOST && !self.deep_prefetch => {}
            _ => self.prefetch_stage::<HOST>(ev, 0),
        }
    }

    /// Starts loading what event `ev` reads at depth `stage` of its chain of lines, if
    /// the lines of the stage before are in. Only a hint: what runs is the same.
    #[inline(always)]
    fn prefetch_stage<const HOST: bool>(&self, ev: Event, stage: usize) {
        match ev {
            Event::TxDone { port } => self.prefetch_tx_done(port, stage),
            Event::Arrive { port } => self.prefetch_arrive::<HOST>(port, stage),
            Event::Credit { port, .. } if stage == 0 => {
                if let Some(p) = self.ports.get(port as usize) {
                    prefetch_lines(p, 3);
                }
            }
            Event::FlowStage { .. }
            | Event::PosterDone { .. }
            | Event::Irq { .. }
            | Event::CollArrive { .. }
            | Event::CollDone { .. }
                if HOST =>
            {
                self.prefetch_host_side(ev, stage)
            }
            _ => {}
        }
    }

    /// [`Self::prefetch_stage`] for the host model's and collectives' events: a
    /// message's stages, a posting context's step, an interrupt timer, a transfer's
    /// arrival or completion.
    #[inline(always)]
    fn prefetch_host_side(&self, ev: Event, stage: usize) {
        match ev {
            Event::FlowStage { flow, stage: st } => {
                if let Some(h) = self.hostm.as_ref() {
                    h.prefetch_wake(HostWake::Stage { flow, stage: st }, stage);
                }
                // The stages that hand the message on read its flow: a ready request
                // (`wr_ready`) or a landed message (`message_done`), and for a
                // collective's transfer, the transfer's record and what it names. The
                // flow's lines are asked for with the message's (its id names both),
                // and nothing is read from them before two stages later: a pop apart,
                // they were mostly not in yet (as a transfer's, below).
                if matches!(st, ST_PROCESSED | ST_PAYLOAD | ST_READY | ST_RECV_CQE) {
                    let Some(f) = self.flows.get(flow as usize) else {
                        return;
                    };
                    match stage {
                        // 160 bytes, whole: what these stages read is at both ends
                        // (its source, size and queue pair; its transfer and `raw`).
                        0 => prefetch_lines(f, 3),
                        // A ready request: its queue pair takes the posted requests
                        // at its pipeline's front (`wr_ready`), then sends.
                        2 | 3 if st == ST_READY && f.qp != NO_QP => {
                            if let Some(qp) = self.qps.get(f.qp as usize) {
                                qp.prefetch_pipeline(stage - 2);
                            }
                        }
                        2 | 3 if st == ST_RECV_CQE => {
                            if let Some((run, xfer)) = f.coll {
                                if let Some(r) = self.colls.get(run as usize) {
                                    r.prefetch_transfer(xfer, stage - 2);
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            Event::PosterDone { nic, poster } => {
                if let Some(h) = self.hostm.as_ref() {
                    h.prefetch_wake(HostWake::PosterDone { nic, poster }, stage);
                }
            }
            Event::Irq { nic } => {
                if let Some(h) = self.hostm.as_ref() {
                    h.prefetch_wake(HostWake::Irq { nic }, stage);
                }
            }
            Event::CollArrive { run, xfer } | Event::CollDone { run, xfer } => {
                // What the record names is read from it three stages after it was asked
                // for, not one: a pop apart, the record was mostly not in yet.
                let at = match stage {
                    0 => 0,
                    3 => 1,
                    _ => return,
                };
                if let Some(r) = self.colls.get(run as usize) {
                    r.prefetch_transfer(xfer, at);
                }
            }
            _ => {}
        }
    }

    /// A port's packet leaves: the port frees it, starts the next (a switch port from
    /// its queue, a host's from its NIC) and launches that onto its wire.
    #[inline(always)]
    fn prefetch_tx_done(&self, port: u32, stage: usize) {
        let Some(p) = self.ports.get(port as usize) else {
            return;
        };
        // Host ports are numbered by host (read from the id: the port's line may not be
        // in yet).
        let host = (port < self.graph.hosts()).then_some(port);
        match stage {
            0 => {
                // In service, queue heads, counters.
                prefetch_lines(p, 3);
                if let Some(w) = self.wires.get(port as usize) {
                    prefetch(w);
                }
                self.q.prefetch_source(self.src.port(port));
                self.q.prefetch_source(self.src.wire(port));
                if let Some(n) = host.and_then(|h| self.nics.get(h as usize)) {
                    prefetch_lines(n, 2);
                }
            }
            1 => {
                let (ingress, next) = p.next_reads();
                if let Some(i) = ingress.filter(|&i| i != NO_PORT) {
                    if let Some(i) = self.ingress.get(i as usize) {
                        prefetch_lines(i, 2);
                    }
                }
                if let Some(q) = next {
                    prefetch(q);
                }
                if let Some(w) = self.wires.get(port as usize) {
                    w.prefetch_tail();
                }
                if let Some(n) = host.and_then(|h| self.nics.get(h as usize)) {
                    let (ctrl, job) = n.next_send();
                    if let Some(c) = ctrl {
                        prefetch(c);
                    } else if let Some(j) = job {
                        prefetch(j);
                    }
                }
            }
            2 => {
                let Some(n) = host.and_then(|h| self.nics.get(h as usize)) else {
                    return;
                };
                match n.next_send() {
                    (Some(&pkt), _) => self.pool.prefetch(pkt),
                    (None, Some(&job)) => {
                        // Odd jobs are READ responders.
                        if let Some(qp) = self.qps.get((job >> 1) as usize) {
                            qp.prefetch_hot(job & 1 == 0);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// A packet reaches the far end of `port`'s wire: a switch routes it to an egress
    /// port, a host hands it to its queue pair.
    #[inline(always)]
    fn prefetch_arrive<const HOST: bool>(&self, port: u32, stage: usize) {
        if stage == 0 {
            if let Some(w) = self.wires.get(port as usize) {
                prefetch(w);
            }
            if let Some(p) = self.ports.get(port as usize) {
                prefetch(p);
            }
            if let Some(i) = self.ingress.get(port as usize) {
                prefetch_lines(i, 2);
            }
            return;
        }
        let Some(w) = self.wires.get(port as usize).and_then(|w| w.first()) else {
            return;
        };
        if stage == 1 {
            prefetch(w);
            return;
        }
        let Some(p) = self.ports.get(port as usize) else {
            return;
        };
        match (p.to, stage) {
            (Node::Switch(sw), 2) => self.prefetch_route(sw, w),
            (Node::Host(_), 2) => self.pool.prefetch(w.pkt),
            (Node::Host(_), 3 | 4) => {
                let Some(flow) = self.pool.try_get(w.pkt).map(|k| k.flow) else {
                    return;
                };
                let Some(f) = self.flows.get(flow as usize) else {
                    return;
                };
                if stage == 3 {
                    prefetch_lines(f, 3);
                    // With a host model, the message's record: a data packet's last
                    // byte is delivered (`HostPipeline::delivered`), an ACK completes
                    // the send (`send_completed`).
                    if HOST {
                        if let Some(m) = self.hostm.as_ref().and_then(|h| h.msgs.get(flow as usize))
                        {
                            prefetch_whole(m);
                        }
                    }
                } else if f.qp != NO_QP {
                    if let Some(qp) = self.qps.get(f.qp as usize) {
                        // ACKs, READ responses and CNPs go to the requester.
                        let requester = matches!(
                            w.route.kind,
                            PktKind::Ack | PktKind::ReadResponse | PktKind::Cnp
                        );
                        qp.prefetch_hot(requester);
                    }
                }
            }
            _ => {}
        }
    }

    /// The lines of the egress port a packet on the wire will leave switch `sw` by,
    /// when routing decides by the packet alone. (Its queue's free slot as well, a stage
    /// later: no faster, 1.00x the wall time of permutation-8192 in 5 pairs.)
    #[inline(always)]
    fn prefetch_route(&self, sw: u32, w: &OnWire) {
        if w.route.dst >= self.graph.hosts() {
            return;
        }
        let cands = self.graph.next_hops(sw, w.route.dst);
        let n = cands.len() as u32;
        if let Some(i) = self.routing.predict(route_key(sw, &w.route), n) {
            if let Some(o) = cands
                .get(i as usize)
                .and_then(|&o| self.ports.get(o as usize))
            {
                // Its queue, and the statistics an arrival updates.
                prefetch_lines(o, 4);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{RouteKey, RoutingPolicy};

    /// A run with the whole pipeline gives what it gives without it: every flow, port,
    /// wire and counter of the output the same (it only asks the CPU to load lines),
    /// on a fabric small enough to run it both ways: RC over ECMP with PFC and over
    /// spraying on a lossy fabric, whose routes it guesses, and adaptive routing under
    /// IB credits, whose per-packet routes it cannot; a ring allreduce through the host
    /// model (its messages' stages, posting contexts, transfers and clear-to-sends),
    /// its completions by polling and by interrupt. (The pipeline only reads; what this
    /// catches is a guess that panics, or one day a stage that writes.)
    #[test]
    fn the_pipeline_changes_nothing() {
        let fabric = |routing: &str, fc: &str| {
            format!(
                "name: t\nseed: 3\ntopology: {{ leaves: 4, spines: 2, hosts_per_leaf: 4, \
                 host_link: {{ rate: 100Gbps, latency: 1us }}, \
                 fabric_link: {{ rate: 100Gbps, latency: 1us }} }}\n\
                 routing: {routing}\nflow_control: {{ mode: {fc} }}\n"
            )
        };
        let flows = "workload:\n  - permutation: { size: 200KB }\n  - incast: { senders: 6, receiver: 0, size: 100KB }\n";
        let ring = |completion: &str| {
            format!(
                "host: {{ gpus_per_host: 2, nics_per_host: 2, wiring: rail, posting: cpu_proxy, \
                 memory: gpu, completion: {completion} }}\n\
                 workload:\n  - collective: {{ op: allreduce, algorithm: ring, channels: 2, \
                 size: 1MiB, iters: 1, warmup_iters: 0 }}\n"
            )
        };
        for (routing, fc, workload) in [
            ("ecmp", "pfc", flows.to_string()),
            ("adaptive", "ib_credit", flows.to_string()),
            ("spray", "lossy", flows.to_string()),
            ("ecmp", "ib_credit", ring("poll")),
            ("ecmp", "pfc", ring("interrupt")),
        ] {
            let yaml = fabric(routing, fc) + &workload;
            let sc = crate::scenario::parse_str(&yaml, "t.yaml", "t", &Default::default())
                .unwrap_or_else(|e| panic!("{yaml}: {e}"));
            let run = |deep: bool| {
                let mut sim = Sim::new(&sc);
                sim.deep_prefetch = deep;
                let mut out = sim.run();
                out.wall_seconds = 0.0;
                format!("{out:?}")
            };
            let (shallow, deep) = (run(false), run(true));
            assert!(
                shallow.len() > 10_000,
                "{routing}: the run made little output"
            );
            assert!(
                shallow == deep,
                "{routing}/{fc}: the pipeline changed the run"
            );
        }
    }

    /// Where routing decides by the packet alone, `predict` names the port `choose`
    /// picks; where it reads loads or a random stream, it makes no guess.
    #[test]
    fn route_guesses_match_the_choice() {
        use crate::routing::{Routing, RoutingConfig};
        use crate::units::SimTime;
        let key = |i: u32, per_packet: bool| RouteKey {
            switch: i % 7,
            dst: i * 31 % 97,
            flow_hash: i.wrapping_mul(2_654_435_761),
            seq: i,
            per_packet,
        };
        let loads = |i: u32| (i as u64 * 7919) % 13;
        for policy in [
            Routing::Ecmp,
            Routing::Static,
            Routing::Spray,
            Routing::Adaptive,
            Routing::Flowlet,
        ] {
            let mut r = RoutingPolicy::new(RoutingConfig::new(policy), 8);
            let mut guessed = 0;
            for i in 0..2_000u32 {
                let per_packet = i % 2 == 0;
                let n = 1 + i % 9;
                let k = key(i, per_packet);
                let guess = r.predict(k, n);
                let chosen = r.choose(
                    SimTime::ZERO,
                    k,
                    crate::routing::Candidates { n, load: loads },
                );
                if let Some(g) = guess {
                    assert_eq!(g, chosen, "{policy:?} {k:?} among {n}");
                    guessed += 1;
                }
            }
            // A packet with one candidate is always guessed (the 223 keys with i a
            // multiple of 9); adaptive routing guesses too the packets it sends by the
            // flow's port (the 1,000 odd keys; 111 keys are both), flowlets none other.
            let expected = match policy {
                Routing::Adaptive => 223 + 1_000 - 111,
                Routing::Flowlet => 223,
                _ => 2_000,
            };
            assert_eq!(guessed, expected, "{policy:?}");
        }
    }
}

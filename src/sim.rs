//! The simulation: hosts, ports and switches wired into one event loop.
//!
//! Models, per packet and per hop: a port serializes a packet (exact integer
//! picoseconds), the packet propagates for the link's latency, and arrives at the next
//! node. A switch routes it (see `topology`), admits it to the egress port's queue if the
//! shared buffer allows (see `fabric`), and the port may start sending it one port-to-port
//! latency after arrival: after the tail arrives (store-and-forward) or after the header
//! (cut-through, never so early that the egress would run ahead of the ingress).
//! Egress queues are FIFO; a switch is output-queued.
//!
//! Hosts (minimal for now, see `host`) segment each flow into MTU-sized packets and send
//! them back to back at line rate, round robin over their active flows; a flow completes
//! when its last byte reaches the destination host. The RC transport and NIC issues
//! replace `host` behind the same two calls: "the host port is free, what next?" and "a
//! packet reached this host".
//!
//! Two events per packet per hop (`TxDone` at the sender, `Arrive` at the receiver); a
//! packet waiting for the switch latency does not need a third, because the egress port
//! starts it at `max(now, ready_at)` and stays busy until it ends. Packets come from a
//! pool; queues are `VecDeque`s of packet ids that grow once and are reused.

use crate::analytic::ideal_fct;
use crate::engine::{Event, EventQueue, FlowId, PktId, PortId};
use crate::fabric::{admit, DropReason, Port, Switch};
use crate::host::Host;
use crate::packet::{Packet, PacketPool};
use crate::rng::{stream_seed, Stream};
use crate::scenario::schema::Forwarding;
use crate::scenario::Scenario;
use crate::topology::{choose, Node, Topology};
use crate::units::{serialization_delay, SimDuration, SimTime};
use crate::workload::{expand, FlowDef};
use std::collections::HashMap;
use std::time::Instant;

/// A flow's state during the run.
#[derive(Clone, Debug)]
pub struct FlowState {
    pub def: FlowDef,
    pub flow_hash: u32,
    /// Payload bytes already put into packets.
    pub segmented: u64,
    /// Payload bytes delivered to the destination.
    pub delivered: u64,
    pub packets_sent: u32,
    pub packets_dropped: u32,
    /// When the last byte arrived.
    pub finish: Option<SimTime>,
    /// FCT on an empty fabric.
    pub ideal: SimDuration,
}

/// Everything a run produced, for metrics and reports.
#[derive(Debug)]
pub struct RunOutput {
    pub flows: Vec<FlowState>,
    pub ports: Vec<Port>,
    pub switches: Vec<Switch>,
    /// When the run ended: the last event, or `duration`.
    pub end: SimTime,
    /// Whether `duration` cut the run short with work left.
    pub stopped_by_duration: bool,
    pub events: u64,
    pub peak_packets_in_flight: u32,
    /// Wall-clock seconds spent in the event loop (not deterministic: goes to perf.json).
    pub wall_seconds: f64,
}

/// The simulated world.
pub struct Sim {
    sc: Scenario,
    q: EventQueue,
    pool: PacketPool,
    ports: Vec<Port>,
    switches: Vec<Switch>,
    hosts: Vec<Host>,
    flows: Vec<FlowState>,
    topo: Topology,
    mtu: u64,
    overhead: u64,
    header: u64,
    cut_through: bool,
    switch_latency: SimDuration,
}

impl Sim {
    /// Builds the fabric and expands the workload into flows.
    pub fn new(sc: &Scenario) -> Sim {
        let topo = sc.topology.clone();
        let defs = expand(&sc.workload, topo.hosts(), topo.host_link.rate.0, sc.seed);
        let mut ideal_cache: HashMap<(u64, bool), SimDuration> = HashMap::new();
        let flows: Vec<FlowState> = defs
            .into_iter()
            .enumerate()
            .map(|(i, def)| {
                let same_leaf = topo.leaf_of(def.src) == topo.leaf_of(def.dst);
                let ideal = *ideal_cache
                    .entry((def.size, same_leaf))
                    .or_insert_with(|| ideal_fct(sc, def.src, def.dst, def.size));
                FlowState {
                    def,
                    flow_hash: stream_seed(sc.seed, Stream::FlowHash, i as u64, 0) as u32,
                    segmented: 0,
                    delivered: 0,
                    packets_sent: 0,
                    packets_dropped: 0,
                    finish: None,
                    ideal,
                }
            })
            .collect();
        let ports = (0..topo.ports())
            .map(|p| {
                let (tier, link, switch, to) = topo.port_info(p);
                Port::new(tier, link, switch, to, sc.switch.buffer_bytes)
            })
            .collect();
        let switches = (0..topo.switches()).map(|_| Switch::default()).collect();
        let hosts = (0..topo.hosts()).map(|_| Host::default()).collect();
        let mut q = EventQueue::new();
        for (i, f) in flows.iter().enumerate() {
            q.schedule(f.def.start, Event::FlowStart { flow: i as FlowId });
        }
        Sim {
            q,
            pool: PacketPool::new(),
            ports,
            switches,
            hosts,
            flows,
            mtu: sc.mtu,
            overhead: sc.encapsulation.overhead_bytes(),
            header: sc.encapsulation.header_bytes(),
            cut_through: sc.switch.forwarding == Forwarding::CutThrough,
            switch_latency: sc.switch.latency,
            topo,
            sc: sc.clone(),
        }
    }

    /// Number of flows the workload expanded into.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// Runs until no work is left or `duration` has elapsed.
    pub fn run(mut self) -> RunOutput {
        let wall = Instant::now();
        let limit = self
            .sc
            .duration
            .map(|d| SimTime(d.0))
            .unwrap_or(SimTime::MAX);
        let mut stopped = false;
        while let Some(t) = self.q.peek_time() {
            if t > limit {
                stopped = true;
                break;
            }
            let (now, ev) = self.q.pop().expect("peeked");
            match ev {
                Event::FlowStart { flow } => self.on_flow_start(now, flow),
                Event::TxDone { port } => self.on_tx_done(now, port),
                Event::Arrive { port, pkt } => self.on_arrive(now, port, pkt),
            }
        }
        let end = if stopped { limit } else { self.q.now() };
        RunOutput {
            events: self.q.events_processed(),
            peak_packets_in_flight: self.pool.peak_live(),
            flows: self.flows,
            ports: self.ports,
            switches: self.switches,
            end,
            stopped_by_duration: stopped,
            wall_seconds: wall.elapsed().as_secs_f64(),
        }
    }

    fn on_flow_start(&mut self, now: SimTime, flow: FlowId) {
        let src = self.flows[flow as usize].def.src;
        self.hosts[src as usize].activate(flow);
        if !self.ports[self.topo.host_up(src) as usize].busy {
            self.host_send(now, src);
        }
    }

    /// The host's port is free: send the next packet of the next active flow, if any.
    fn host_send(&mut self, now: SimTime, host: u32) {
        let mtu = self.mtu;
        let flows = &mut self.flows;
        let Some(flow) = self.hosts[host as usize].next_flow(|f| {
            let st = &flows[f as usize];
            st.def.size - st.segmented > mtu
        }) else {
            return;
        };
        let st = &mut flows[flow as usize];
        let payload = (st.def.size - st.segmented).min(mtu);
        st.segmented += payload;
        st.packets_sent += 1;
        let pkt = self.pool.alloc(Packet {
            flow,
            src: st.def.src,
            dst: st.def.dst,
            flow_hash: st.flow_hash,
            seq: st.packets_sent - 1,
            payload: payload as u32,
            wire: (payload + self.overhead) as u32,
            ready_at: now,
            tail_at: now,
        });
        self.start_tx(now, self.topo.host_up(host), pkt, now);
    }

    /// Starts serializing `pkt` on `port` at `start` (>= now) and schedules its end and its
    /// arrival at the far end.
    #[inline]
    fn start_tx(&mut self, _now: SimTime, port: PortId, pkt: PktId, start: SimTime) {
        let p = &mut self.ports[port as usize];
        let wire = self.pool.get(pkt).wire as u64;
        let ser = serialization_delay(wire, p.link.rate);
        let end = start + ser;
        p.busy = true;
        p.in_service = wire;
        p.tx_bytes += wire;
        p.tx_packets += 1;
        self.q.schedule(end, Event::TxDone { port });
        let tail = end + p.link.latency;
        let arrive = match p.to {
            Node::Switch(_) if self.cut_through => {
                start + serialization_delay(self.header.min(wire), p.link.rate) + p.link.latency
            }
            _ => tail,
        };
        self.pool.get_mut(pkt).tail_at = tail;
        self.q.schedule(arrive, Event::Arrive { port, pkt });
    }

    fn on_tx_done(&mut self, now: SimTime, port: PortId) {
        let p = &mut self.ports[port as usize];
        p.busy = false;
        match p.switch {
            None => {
                p.in_service = 0;
                let host = port; // host ports are numbered by host
                self.host_send(now, host);
            }
            Some(sw) => {
                let done = p.in_service;
                p.in_service = 0;
                p.queued_bytes -= done;
                self.switches[sw as usize].used -= done;
                if let Some(next) = p.queue.pop_front() {
                    let ready = self.pool.get(next).ready_at;
                    self.start_tx(now, port, next, now.max(ready));
                }
            }
        }
    }

    fn on_arrive(&mut self, now: SimTime, port: PortId, pkt: PktId) {
        match self.ports[port as usize].to {
            Node::Host(_) => self.deliver(now, pkt),
            Node::Switch(sw) => self.forward(now, sw, pkt),
        }
    }

    fn deliver(&mut self, now: SimTime, pkt: PktId) {
        let p = *self.pool.get(pkt);
        self.pool.free(pkt);
        let f = &mut self.flows[p.flow as usize];
        f.delivered += p.payload as u64;
        if f.delivered == f.def.size {
            f.finish = Some(now);
        }
    }

    fn forward(&mut self, now: SimTime, sw: u32, pkt: PktId) {
        let p = *self.pool.get(pkt);
        let topo = &self.topo;
        let routing = self.sc.routing;
        let ports = &self.ports;
        let out = if topo.is_leaf(sw) {
            if topo.leaf_of(p.dst) == sw {
                topo.leaf_down(p.dst)
            } else {
                let u = choose(
                    routing,
                    topo.uplinks_per_leaf(),
                    sw,
                    p.dst,
                    p.flow_hash,
                    p.seq,
                    |u| ports[topo.leaf_up(sw, u) as usize].queued_bytes,
                );
                topo.leaf_up(sw, u)
            }
        } else {
            let spine = sw - topo.leaves;
            let leaf = topo.leaf_of(p.dst);
            let k = choose(
                routing,
                topo.links_per_spine,
                sw,
                p.dst / topo.uplinks_per_leaf().max(1),
                p.flow_hash,
                p.seq,
                |k| ports[topo.spine_down(spine, leaf, k) as usize].queued_bytes,
            );
            topo.spine_down(spine, leaf, k)
        };
        let wire = p.wire as u64;
        let swst = &mut self.switches[sw as usize];
        let port = &mut self.ports[out as usize];
        if let Err(reason) = admit(&self.sc.switch, swst.used, port.queued_bytes, wire) {
            self.drop_packet(out, pkt, reason);
            return;
        }
        swst.used += wire;
        port.enqueued(wire);
        let mut ready = now + self.switch_latency;
        if self.cut_through {
            // Do not start so early that the egress would overtake the ingress tail.
            let ser_out = serialization_delay(wire, port.link.rate);
            let tail_ready = SimTime(
                (p.tail_at + self.switch_latency)
                    .0
                    .saturating_sub(ser_out.0),
            );
            ready = ready.max(tail_ready);
        }
        self.pool.get_mut(pkt).ready_at = ready;
        if port.busy {
            port.queue.push_back(pkt);
        } else {
            debug_assert!(port.queue.is_empty());
            self.start_tx(now, out, pkt, ready);
        }
    }

    fn drop_packet(&mut self, port: PortId, pkt: PktId, reason: DropReason) {
        let p = *self.pool.get(pkt);
        self.pool.free(pkt);
        self.ports[port as usize].count_drop(reason, p.wire as u64);
        self.flows[p.flow as usize].packets_dropped += 1;
    }
}

/// Builds and runs a scenario.
pub fn run(sc: &Scenario) -> RunOutput {
    Sim::new(sc).run()
}

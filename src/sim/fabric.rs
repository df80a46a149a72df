//! The event loop's glue for the fabric: it routes a packet from an egress port onto its
//! wire, from the wire into a switch (or a host), and from the switch into the next
//! egress port, turning what each component returns into events. The rules themselves
//! (serialization, marking, PFC, credits, admission, routing) live in `components` and
//! `routing`; nothing here decides anything a component could.

use super::parallel::Msg;
use super::Sim;
use crate::components::ingress::Upstream;
use crate::components::{Arrival, DropReason, EgressPort, Gate, Nic, OnWire, Transmit, NO_PORT};
use crate::engine::{Event, FlowId, PktId, PortId};
use crate::packet::{Packet, PktKind, RouteInfo, FLAG_ECN, FLAG_NO_AR, FLAG_TELEMETRY};
use crate::routing::defaults::HELD_PORT_BYTES;
use crate::routing::{Candidates, LoadSignal, RouteKey};
use crate::topology::Node;
use crate::units::SimTime;

impl Sim {
    /// A host's own packet starts on its port at `start`.
    #[inline]
    pub(super) fn start_tx(&mut self, port: PortId, pkt: PktId, wire: u64, start: SimTime) {
        let route = self.pool.get(pkt).route_info();
        let tx = self.ports[port as usize].transmit_own(pkt, route, wire, start);
        self.launch(port, tx);
    }

    /// A packet started on `port`: its end of serialization, and its arrival at the far
    /// end if it is alone on the wire. The packet itself is not touched unless marked:
    /// what the port needs travels beside its id, so a busy port does not miss the cache
    /// on every packet it sends.
    #[inline]
    pub(super) fn launch(&mut self, port: PortId, tx: Transmit) {
        if tx.ecn_marked {
            self.pool.get_mut(tx.pkt).flags |= FLAG_ECN;
        }
        // The telemetry hook at switch egress (only when an algorithm reads it).
        if self.telemetry
            && self.ports[port as usize].switch.is_some()
            && tx.route.flags & FLAG_TELEMETRY != 0
        {
            let hop = self.ports[port as usize].telemetry(tx.start);
            self.pool.stamp(tx.pkt, hop);
        }
        // A host's port (numbered by host) with nothing else to send and no pause to
        // look at: its end would find nothing to do, so it is an event only if
        // something comes to wait for it (`settle_tx`).
        if self.ports[port as usize].switch.is_none()
            && !self.mark_every_tx_end
            && self.nics[port as usize].is_idle()
            && !self.ports[port as usize].is_paused(tx.end)
        {
            let key = self.q.reserve(tx.end, self.src.port(port));
            debug_assert_eq!(
                self.nics[port as usize].tx_end_unmarked, 0,
                "one packet at a time"
            );
            self.nics[port as usize].tx_end_unmarked = key;
        } else {
            self.q
                .schedule(tx.end, self.src.port(port), Event::TxDone { port });
        }
        if let Some(part) = self.part.as_deref_mut() {
            // A run split over threads: the far end is another partition's, which puts
            // the packet on its copy of the wire (`parallel`).
            if part.far_elsewhere.get(port) {
                let to = part.plan.receiver(port);
                let w = self.wires[port as usize]
                    .in_flight(tx.pkt, tx.route, tx.wire, tx.start, tx.end);
                if self.telemetry || self.timestamps {
                    // What rides beside the packet in the pool (HPCC's, Swift's).
                    let side = (self.pool.telemetry(tx.pkt), self.pool.sent_at(tx.pkt));
                    part.side_out[to as usize].push(side);
                }
                // The packet itself is copied at the window's end (`Sim::copy_handed`).
                self.pool.hand_off(tx.pkt);
                part.outbox[to as usize].push(Msg::Packet {
                    port,
                    on_wire: w,
                    packet: Packet::default(),
                });
                return;
            }
        }
        if let Some(at) =
            self.wires[port as usize].launch(tx.pkt, tx.route, tx.wire, tx.start, tx.end)
        {
            self.q
                .schedule(at, self.src.wire(port), Event::Arrive { port });
            // Alone on its last hop: the host reads it whole when it lands, a link's
            // flight from now, and since the sender wrote it the caches have forgotten
            // it (websearch-128: 12% of the run waited on that read). A hint only; a
            // packet behind others on the wire gets it at the arrival before its own
            // (`on_arrive`), closer to when it is read.
            if matches!(self.ports[port as usize].to, Node::Host(_)) {
                self.pool.prefetch(tx.pkt);
            }
        }
    }

    /// What an ingress sends back to its link's sender, as events.
    #[inline]
    fn upstream(&mut self, port: PortId, u: Upstream) {
        let src = self.src.ingress(port);
        if let Some(part) = self.part.as_deref_mut() {
            // A run split over threads: the sender is another partition's; the frame or
            // credit goes to it under the key it would have had here (`parallel`).
            let away = match u {
                _ if !part.near_elsewhere.get(port) => None,
                // The ingress checks its own PAUSE: that stays here.
                Upstream::Refresh { .. } => None,
                Upstream::Pfc { at, pause } => Some(Msg::Event {
                    key: self.q.reserve(at, src),
                    event: Event::Pfc { port, pause },
                }),
                Upstream::Credit { at, blocks }
                    if at > self.q.now() && self.ports[port as usize].switch.is_some() =>
                {
                    Some(Msg::Returning {
                        port,
                        key: self.q.reserve(at, src),
                        blocks,
                        pushed: self.q.current_key(),
                    })
                }
                Upstream::Credit { at, blocks } => Some(Msg::Event {
                    key: self.q.reserve(at, src),
                    event: Event::Credit { port, blocks },
                }),
            };
            if let Some(m) = away {
                part.outbox[part.plan.sender(port) as usize].push(m);
                return;
            }
        }
        match u {
            Upstream::Pfc { at, pause } => self.q.schedule(at, src, Event::Pfc { port, pause }),
            Upstream::Refresh { at } => self.q.schedule(at, src, Event::PfcRefresh { port }),
            // A port keeps the credits coming back to it and asks for an event only
            // while it waits for them (`EgressPort::credits_returning`): a switch port's
            // start and a host's scheduler (`take_credits`) land those due first.
            Upstream::Credit { at, blocks }
                if at > self.q.now()
                    && (self.ports[port as usize].switch.is_some()
                        || !self.credit_event_per_return) =>
            {
                let key = self.q.reserve(at, src);
                self.keep_returning(port, key, blocks);
            }
            Upstream::Credit { at, blocks } => {
                self.q.schedule(at, src, Event::Credit { port, blocks })
            }
        }
    }

    /// IB: `blocks` credits will land at `port` under key `key`: the port keeps them on
    /// their way back, and if it waits for credit, asks for an event under the first
    /// return's key (`EgressPort::credits_returning`).
    #[inline]
    pub(super) fn keep_returning(&mut self, port: PortId, key: u128, blocks: u32) {
        if let Some(k) = self.ports[port as usize].credits_returning(key, blocks) {
            self.q
                .schedule_reserved(k, Event::Credit { port, blocks: 0 });
        }
    }

    /// IB: the credits of `wire` bytes that crossed `port` go back to its sender.
    #[inline(always)]
    fn credits_back(&mut self, now: SimTime, port: PortId, wire: u64) {
        if let Some(u) = self.ingress[port as usize].credits_back(now, wire) {
            self.upstream(port, u);
        }
    }

    #[inline(always)]
    pub(super) fn on_tx_done(&mut self, now: SimTime, port: PortId) {
        let sent = self.ports[port as usize].handle_tx_done();
        match self.ports[port as usize].switch {
            None => self.host_send(now, port), // host ports are numbered by host
            Some(sw) => {
                // Packets a switch made itself (in-network aggregation) never took
                // shared buffer.
                if sent.ingress != NO_PORT {
                    self.switches[sw as usize].handle_departure(sent.wire);
                    if !sent.ctrl {
                        if let Some(u) = self.ingress[sent.ingress as usize].handle_released(
                            now,
                            sent.wire,
                            self.switches[sw as usize].used,
                        ) {
                            self.upstream(sent.ingress, u);
                        }
                    }
                }
                self.try_start(now, port);
            }
        }
    }

    /// The first packet on `port`'s wire reaches the far end.
    #[inline(always)]
    pub(super) fn on_arrive(&mut self, now: SimTime, port: PortId) {
        let (w, next) = self.wires[port as usize].handle_arrive(now);
        if let Some(t) = next {
            self.q
                .schedule(t, self.src.wire(port), Event::Arrive { port });
            // The next packet to land at a host, a hint: the host reads it whole a
            // serialization time from now (`launch` asks only for a packet alone on the
            // wire). Its slot on the wire was just read for its arrival time.
            // (websearch-128: 0.986x the wall time, 6 pairs, against asking when its
            // arrival is the next event, whose read of the wire's slot stalled;
            // permutation-8192 0.973x, 2 pairs.)
            if matches!(self.ports[port as usize].to, Node::Host(_)) {
                if let Some(n) = self.wires[port as usize].first() {
                    self.pool.prefetch(n.pkt);
                }
            }
        }
        self.arrived(now, port, w);
    }

    #[inline(always)]
    fn arrived(&mut self, now: SimTime, port: PortId, w: OnWire) {
        let pkt = w.pkt;
        if let Some(loss) = self.wires[port as usize].fault(now, w.wire as u64) {
            self.fault_totals.count(loss);
            let p = *self.pool.get(pkt);
            // The receiver never buffered it: its credits go back.
            if !p.kind.is_control() {
                self.credits_back(now, port, w.wire as u64);
            }
            self.pool.free(pkt);
            self.count_drop(p.flow);
            return;
        }
        match self.ports[port as usize].to {
            Node::Host(h) => {
                // A host takes packets off the wire at once: its credits go straight back.
                if !w.route.kind.is_control() {
                    self.credits_back(now, port, w.wire as u64);
                }
                self.deliver(now, h, pkt)
            }
            Node::Switch(sw) => self.forward(now, sw, &w, port),
        }
    }

    /// Whether PFC holds `port`'s data class now (and if so, arranges a wake-up when the
    /// pause runs out).
    pub(super) fn data_paused(&mut self, now: SimTime, port: PortId) -> bool {
        match self.ports[port as usize].pause_gate(now) {
            Gate::Paused(wake) => {
                if let Some(t) = wake {
                    self.q
                        .schedule(t, self.src.port(port), Event::PortWake { port });
                }
                true
            }
            _ => false,
        }
    }

    /// IB: spends the credits for a `wire`-byte packet on host port `port`, or starts
    /// timing a stall and returns false. Always true without IB credits. The credits on
    /// their way back whose events would have come first are landed before the count is
    /// read; a port left waiting asks for an event under the first return's key (as a
    /// switch port's `try_start` does), so a return that finds the port not waiting is
    /// no event at all.
    #[inline]
    pub(super) fn take_credits(&mut self, now: SimTime, port: PortId, wire: u64) -> bool {
        let p = &mut self.ports[port as usize];
        p.land_credits(self.q.current_key());
        if p.credit_gate(now, wire) != Gate::Open {
            if let Some(key) = p.credit_wake_due() {
                self.q
                    .schedule_reserved(key, Event::Credit { port, blocks: 0 });
            }
            return false;
        }
        p.spend_credits(wire);
        true
    }

    /// Host `host`'s packet on the wire whose end no event marks (`launch`): counted if
    /// its end is already past in key order (its event would have found nothing to do);
    /// else, if something now waits for that end (`forced`, or the NIC has work listed),
    /// scheduled under the key it was given. The order of every other event is the same
    /// either way (`EventQueue::reserve`).
    #[inline]
    pub(super) fn settle_tx(&mut self, host: u32, forced: bool) {
        let key = self.nics[host as usize].tx_end_unmarked;
        if key == 0 {
            return;
        }
        // Host ports are numbered by host.
        if key < self.q.current_key() {
            count_unmarked_end(&mut self.nics, &mut self.ports, host as usize);
        } else if forced || !self.nics[host as usize].is_idle() {
            self.nics[host as usize].tx_end_unmarked = 0;
            self.q.schedule_reserved(key, Event::TxDone { port: host });
        }
    }

    /// Counts every host's packet whose end no event marks and that ends before `key`
    /// (the end of a run: what it reads includes them), at or before `limit`.
    pub(super) fn settle_tx_before(&mut self, key: u128, limit: SimTime) {
        for host in 0..self.nics.len() {
            let k = self.nics[host].tx_end_unmarked;
            if k != 0 && k < key && SimTime((k >> 64) as u64) <= limit {
                count_unmarked_end(&mut self.nics, &mut self.ports, host);
            }
        }
    }

    /// `port` may be able to send again (pause over, credits back).
    pub(super) fn wake_port(&mut self, now: SimTime, port: PortId) {
        match self.ports[port as usize].switch {
            None => self.kick(now, port), // host ports are numbered by host
            Some(_) => self.try_start(now, port),
        }
    }

    /// An idle switch port starts its next packet, if it can.
    pub(super) fn try_start(&mut self, now: SimTime, port: PortId) {
        if self.part.as_deref().is_some_and(|p| p.logs_credits(port)) {
            return self.try_start_logged(now, port);
        }
        let p = &mut self.ports[port as usize];
        p.land_credits(self.q.current_key());
        let polled = p.poll_transmit(now);
        let credit_wake = match polled {
            Err(None) => p.credit_wake_due(),
            _ => None,
        };
        self.after_poll(port, polled, credit_wake);
    }

    /// What a switch port's poll asks for, as events: the packet it starts, a wake-up at
    /// the end of a pause, or (`credit_wake`, when it waits for credits on their way
    /// back) an event under the key of the first to land.
    #[inline]
    pub(super) fn after_poll(
        &mut self,
        port: PortId,
        polled: Result<Transmit, Option<SimTime>>,
        credit_wake: Option<u128>,
    ) {
        match polled {
            Ok(tx) => self.launch(port, tx),
            Err(Some(wake)) => self
                .q
                .schedule(wake, self.src.port(port), Event::PortWake { port }),
            Err(None) => {
                if let Some(key) = credit_wake {
                    self.q
                        .schedule_reserved(key, Event::Credit { port, blocks: 0 });
                }
            }
        }
    }

    /// The refresh check of a PAUSE held against `port`'s sender; whether it acted.
    #[inline(always)]
    pub(super) fn on_pfc_refresh(&mut self, now: SimTime, port: PortId) -> bool {
        let Some(frames) = self.ingress[port as usize].handle_refresh(now) else {
            return false;
        };
        for f in frames.into_iter().flatten() {
            self.upstream(port, f);
        }
        true
    }

    /// A PFC frame takes effect at the sending side of `port`.
    #[inline(always)]
    pub(super) fn on_pfc(&mut self, now: SimTime, port: PortId, pause: bool) {
        if self.ports[port as usize].switch.is_none() {
            // Its end will look at the pause (`host_send`): it must be an event.
            self.settle_tx(port, true);
        }
        if self.ports[port as usize].handle_pause(now, pause) {
            self.wake_port(now, port);
        }
    }

    /// Credits came back to the sending side of `port`.
    pub(super) fn on_credit(&mut self, now: SimTime, port: PortId, blocks: u32) {
        self.ports[port as usize].handle_credits(blocks as u64);
        self.wake_port(now, port);
    }

    /// The egress port a packet at switch `sw` leaves by; `None` if it is addressed to
    /// `sw` itself (in-network aggregation).
    #[inline(always)]
    fn route(&mut self, now: SimTime, sw: u32, r: &RouteInfo, wire: u64) -> Option<PortId> {
        let dst = r.dst;
        let graph = &self.graph;
        let hosts = graph.hosts();
        if dst >= hosts {
            // Addressed to a switch, always an adjacent one: one fixed link per flow
            // (aggregation trees are static).
            let target = dst - hosts;
            if target == sw {
                return None;
            }
            let links = graph.links_between(sw, target);
            debug_assert!(!links.is_empty(), "switch {sw} is not linked to {target}");
            return Some(links[(r.flow_hash % links.len() as u32) as usize]);
        }
        let cands = graph.next_hops(sw, dst);
        if let [only] = cands {
            return Some(*only);
        }
        let key = route_key(sw, r);
        let ports = &self.ports;
        let n = cands.len() as u32;
        let choice = match self.sc.routing.load {
            LoadSignal::Queue => {
                let load = |i: u32| ports[cands[i as usize] as usize].queued_bytes;
                self.routing.choose(now, key, Candidates { n, load })
            }
            LoadSignal::QueueAndCredits => {
                // What waits here and what the next switch still holds from this port;
                // a port held by PFC or short of IB credits counts as full. The credits
                // due by now are landed first, as the port's next event would (so each
                // choice does not read them again), except at a port whose credits
                // another partition returns: its bookkeeping changes only in its own
                // events, which the barrier replays from their log, and the choice
                // counts them without landing them (`EgressPort::adaptive_load`).
                let upto = self.q.current_key();
                let part = self.part.as_deref();
                for &c in cands {
                    if !part.is_some_and(|p| p.logs_credits(c)) {
                        self.ports[c as usize].land_credits(upto);
                    }
                }
                let ports = &self.ports;
                let load = |i: u32| {
                    ports[cands[i as usize] as usize].adaptive_load(
                        now,
                        wire,
                        upto,
                        HELD_PORT_BYTES,
                    )
                };
                self.routing.choose(now, key, Candidates { n, load })
            }
        };
        Some(cands[choice as usize])
    }

    /// A packet reached switch `sw` over `in_port` (its tail arrives at `w.tail`): routed,
    /// admitted to the egress queue or dropped. Only what travels beside its id is read.
    #[inline(always)]
    fn forward(&mut self, now: SimTime, sw: u32, w: &OnWire, in_port: PortId) {
        let (pkt, wire, route) = (w.pkt, w.wire as u64, w.route);
        let Some(out) = self.route(now, sw, &route, wire) else {
            self.switch_consume(now, w.tail, pkt, in_port);
            return;
        };
        let ctrl = route.kind.is_control();
        let arrival = Arrival {
            pkt,
            route,
            wire,
            tail: w.tail,
            ctrl,
            ect: matches!(route.kind, PktKind::Data | PktKind::ReadResponse),
            ingress: in_port,
        };
        let port = &self.ports[out as usize];
        let (queued, rate) = (port.queued_bytes, port.link.rate);
        match self.switches[sw as usize].handle_arrival(now, arrival, queued, rate) {
            Err(reason) => {
                // A lossless fabric never drops for its thresholds: PFC headroom and IB
                // credits keep the buffer from overflowing; only a full buffer (a bug)
                // would drop, and the end-of-run check reports it
                // (`metrics::invariants`, rule `lossless_no_drop`).
                if !ctrl {
                    self.credits_back(now, in_port, wire);
                }
                self.drop_packet(out, pkt, reason);
            }
            Ok(q) => {
                self.ports[out as usize].enqueue(q);
                if !ctrl {
                    let held = self.switches[sw as usize].used;
                    let frames = self.ingress[in_port as usize].handle_admitted(now, wire, held);
                    for f in frames.into_iter().flatten() {
                        self.upstream(in_port, f);
                    }
                }
                self.try_start(now, out);
            }
        }
    }

    /// A packet addressed to this switch arrived: the switch's aggregation engine takes
    /// it (its credits go back at once, as at a host).
    #[inline(always)]
    fn switch_consume(&mut self, now: SimTime, tail: SimTime, pkt: PktId, in_port: PortId) {
        let p = *self.pool.get(pkt);
        self.pool.free(pkt);
        self.credits_back(now, in_port, p.wire as u64);
        // The switch has the packet once its tail is in (cut-through hands it over at
        // the head).
        let at = tail.max(now);
        self.delivered_total += p.payload as u64;
        let f = &mut self.flows[p.flow as usize];
        f.delivered += p.payload as u64;
        if f.delivered == f.def.size && f.finish.is_none() {
            f.landed = Some(at);
            f.finish = Some(at);
            f.outcome = super::Outcome::Completed;
            self.message_done(at, p.flow);
        }
    }

    /// A switch sends `flow` (all of it) out of `port`, as packets queued at once `now`
    /// plus the switch latency (in-network aggregation: a reduced or multicast chunk).
    pub(super) fn inject(&mut self, now: SimTime, port: PortId, flow: FlowId) {
        let (size, src, dst) = {
            let f = &self.flows[flow as usize];
            (f.def.size, f.def.src, f.def.dst)
        };
        let sw = self.ports[port as usize].switch.expect("a switch port");
        let packets = size.div_ceil(self.mtu).max(1);
        for i in 0..packets {
            let payload = (size - i * self.mtu).min(self.mtu);
            let mut pk = self.new_packet(flow, src, dst, PktKind::Data);
            pk.seq = i as u32;
            pk.payload = payload as u32;
            pk.wire = (payload + self.overhead) as u32;
            let wire = pk.wire as u64;
            let route = pk.route_info();
            let id = self.pool.alloc(pk);
            let f = &mut self.flows[flow as usize];
            f.packets_sent += 1;
            f.segmented += payload;
            let q = self.switches[sw as usize].own_packet(now, id, route, wire);
            self.ports[port as usize].enqueue(q);
        }
        self.try_start(now, port);
    }

    #[inline(always)]
    fn drop_packet(&mut self, port: PortId, pkt: PktId, reason: DropReason) {
        let p = *self.pool.get(pkt);
        self.pool.free(pkt);
        self.ports[port as usize].count_drop(reason, p.wire as u64);
        self.count_drop(p.flow);
    }
}

/// What routing at switch `sw` decides a packet's port by.
#[inline]
pub(super) fn route_key(sw: u32, r: &RouteInfo) -> RouteKey {
    RouteKey {
        switch: sw,
        dst: r.dst,
        flow_hash: r.flow_hash,
        seq: r.seq,
        per_packet: r.flags & FLAG_NO_AR == 0,
    }
}

/// Counts host `host`'s packet whose end no event marks (`Sim::settle_tx`) as that end's
/// event would have. Takes the two fields, so that a caller holding another of the
/// run's (the sampler, its scenario's series) can call it.
pub(super) fn count_unmarked_end(nics: &mut [Nic], ports: &mut [EgressPort], host: usize) {
    nics[host].tx_end_unmarked = 0;
    ports[host].handle_tx_done();
}

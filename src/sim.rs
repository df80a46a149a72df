//! The simulation: hosts, queue pairs, ports and switches wired into one event loop.
//!
//! Models, per packet and per hop: a port serializes a packet (exact integer
//! picoseconds), the packet propagates for the link's latency, and arrives at the next
//! node, where faults may destroy it (the receiving port's CRC check). A switch routes it
//! (see `topology`), admits it to the egress port's queue if the shared buffer allows (see
//! `fabric`), and the port may start sending it one port-to-port latency after arrival:
//! after the tail arrives (store-and-forward) or after the header (cut-through, never so
//! early that the egress would run ahead of the ingress). Egress queues are FIFO per
//! class: a control class (ACK, NAK, CNP) is served first and is never paused.
//!
//! Link-level flow control (`scenario::FlowControl`): under PFC (IEEE 802.1Qbb) a switch
//! counts the data bytes each ingress port has in its buffer, sends PAUSE upstream above
//! Xoff (refreshed at half the quanta while still above Xon) and RESUME at Xon; a frame
//! acts one 64-byte serialization, one cable and the reaction time later. Under IB credits
//! (IBTA vol. 1 7.9.4) a sender spends 64-byte credits as it starts a data packet and gets
//! them back once the packet leaves the next switch (or reaches a host), after the update
//! delay and the cable. Switches mark ECN at dequeue (RED); receivers send CNPs and
//! senders pace each queue-pair direction at its DCQCN rate (`cc::dcqcn`).
//!
//! Hosts send whenever their link is free: first any ACK/NAK/CNP waiting (so
//! acknowledgements never queue behind data at their source), then one packet from the
//! next job in round robin over their jobs with work: a flow (raw transport), an RC
//! requester, or an RC responder streaming READ responses. Under RC each flow is one
//! message on its own queue pair (`transport::rc`, sans-IO); this module is the only glue
//! between the queue pairs and the event queue. A queue pair keeps at most one timer
//! event pending, re-armed lazily: a timer event that finds its deadline moved later
//! re-schedules itself instead of acting.
//!
//! Two events per packet per hop (`TxDone` at the sender, `Arrive` at the receiver, one
//! pending per port: the wire is a ring); a packet waiting for the switch latency does
//! not need a third, because the egress port starts it at `max(now, ready)` and stays
//! busy until it ends. Packets come from a
//! pool; queues are `VecDeque`s of packet ids that grow once and are reused.

use crate::analytic::ideal_fct;
use crate::cc::dcqcn::{DcqcnParams, NotificationPoint, ReactionPoint};
use crate::engine::{Event, EventQueue, FlowId, PktId, PortId};
use crate::fabric::{admit, credit_blocks, DropReason, OnWire, Port, Queued, Switch, NO_PORT};
use crate::host::Host;
use crate::packet::{
    Packet, PacketPool, PktKind, AETH_BYTES, CNP_PAYLOAD_BYTES, FLAG_ECN, FLAG_FIRST, FLAG_LAST,
    FLAG_RETX, FLAG_REVERSE, RETH_BYTES,
};
use crate::rng::{stream, stream_seed, Stream};
use crate::scenario::schema::Forwarding;
use crate::scenario::FlowControl;
use crate::scenario::{Connections, LinkFaults, RcConfig, Scenario, Transport};
use crate::topology::{choose, Node, Tier, Topology};
use crate::transport::rc::{
    AckInfo, AckKind, Op, Requester, RequesterStats, Responder, TxRequest, WcStatus,
};
use crate::units::BitsPerSec;
use crate::units::{serialization_delay, SimDuration, SimTime};
use crate::workload::{expand, FlowDef};
use rand::rngs::StdRng;
use rand::Rng;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

mod collective_glue;
mod host_model;
use host_model::HostModel;
pub use host_model::{
    HostOutput, MsgTimes, NicStats, CPU_CATEGORIES, CPU_COPIES, CPU_INTERRUPTS, CPU_POLLING,
    CPU_POSTING, CPU_PROXY, STAGES, T_DONE, T_START,
};

/// How a flow ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Still running (or never started) when the run ended.
    Pending,
    Completed,
    /// Its queue pair failed (retry or RNR retry exhausted).
    Failed(WcStatus),
}

/// A flow's state during the run.
#[derive(Clone, Debug)]
pub struct FlowState {
    pub def: FlowDef,
    pub flow_hash: u32,
    /// Payload bytes already put into packets (first transmissions and retransmissions).
    pub segmented: u64,
    /// Payload bytes delivered to the destination memory.
    pub delivered: u64,
    pub packets_sent: u32,
    /// Packets lost: dropped at a full queue or destroyed by a fault.
    pub packets_dropped: u32,
    pub retransmissions: u32,
    /// When the last byte arrived.
    pub finish: Option<SimTime>,
    /// When the queue pair failed.
    pub failed_at: Option<SimTime>,
    pub outcome: Outcome,
    /// FCT on an empty fabric.
    pub ideal: SimDuration,
    /// Queue pair slot (RC only), and the slot's generation when the flow joined it: a
    /// slot is reused once its queue pair retires, and a late packet of an old flow must
    /// not reach the new queue pair.
    qp: u32,
    qp_gen: u32,
    /// Connection key (0, or 1 + channel for a collective's transfer).
    pub conn: u32,
    /// The collective transfer it carries: (run, transfer).
    pub coll: Option<(u32, u32)>,
    /// Sent as bare packets even under RC (in-network aggregation to and from switches,
    /// which end no queue pair).
    pub raw: bool,
}

const NO_QP: u32 = u32::MAX;

/// Host job ids of bare-packet flows under RC (queue-pair halves use the others).
const RAW_JOB: u32 = 1 << 31;

impl FlowState {
    /// Flow number `i` of the run; ideal FCTs are cached by size and same-leaf-or-not.
    fn new(
        sc: &Scenario,
        topo: &Topology,
        ideal_cache: &mut HashMap<(u64, bool), SimDuration>,
        i: usize,
        def: FlowDef,
    ) -> FlowState {
        let same_leaf = topo.leaf_of(def.src) == topo.leaf_of(def.dst);
        let ideal = *ideal_cache
            .entry((def.size, same_leaf))
            .or_insert_with(|| ideal_fct(sc, def.src, def.dst, def.size));
        FlowState::with_ideal(sc, i, def, ideal)
    }

    /// A flow whose ideal FCT is given (one to or from a switch).
    fn with_ideal(sc: &Scenario, i: usize, def: FlowDef, ideal: SimDuration) -> FlowState {
        FlowState {
            def,
            flow_hash: stream_seed(sc.seed, Stream::FlowHash, i as u64, 0) as u32,
            segmented: 0,
            delivered: 0,
            packets_sent: 0,
            packets_dropped: 0,
            retransmissions: 0,
            finish: None,
            failed_at: None,
            outcome: Outcome::Pending,
            ideal,
            qp: NO_QP,
            qp_gen: 0,
            conn: 0,
            coll: None,
            raw: false,
        }
    }
}

/// An RC queue pair: both halves, and the glue's bookkeeping for them.
#[derive(Debug)]
struct Qp {
    /// Requester's host and responder's host, and the connection (see `Sim::pairs`).
    src: u32,
    dst: u32,
    conn: u32,
    /// Its packets' ECMP hash: per connection when shared, else its flow's.
    flow_hash: u32,
    /// Flows waiting for send-queue room (`max_send_wr`), in arrival order.
    backlog: VecDeque<FlowId>,
    /// The flow whose READ responses are streaming.
    read_flow: FlowId,
    req: Requester,
    resp: Responder,
    /// Time of the pending timer event, if any.
    timer_at: Option<SimTime>,
    /// Whether the requester is in its host's job list.
    req_listed: bool,
    /// READ responses still to stream: next PSN and how many.
    read_next_psn: u32,
    read_left: u32,
    read_listed: bool,
    /// Finished; the slot is reused once no host lists it.
    dead: bool,
    /// Work requests posted by software and still in the host/NIC pipeline (not yet
    /// known to the requester), in posting order: the requester takes them in this
    /// order, however fast each gets through the pipeline (RC executes in order).
    pipeline: VecDeque<FlowId>,
    /// Bumped each time the slot is reused.
    gen: u32,
    /// DCQCN rate limiters: requester to responder (WRITE/SEND data), and responder to
    /// requester (READ responses); and the notification points that answer them.
    rp_fwd: Option<ReactionPoint>,
    rp_rev: Option<ReactionPoint>,
    np_fwd: NotificationPoint,
    np_rev: NotificationPoint,
    /// Earliest time each direction may send its next packet (pacing).
    next_fwd: SimTime,
    next_rev: SimTime,
}

/// RC counters summed over every queue pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RcTotals {
    pub first_transmissions: u64,
    pub retransmissions: u64,
    pub timeouts: u64,
    pub seq_naks: u64,
    pub rnr_naks: u64,
    pub qp_errors: u64,
    /// Request packets the responder had already received.
    pub duplicate_packets: u64,
    pub acks_sent: u64,
}

impl RcTotals {
    fn add(&mut self, s: &RequesterStats) {
        self.first_transmissions += s.first_transmissions;
        self.retransmissions += s.retransmissions;
        self.timeouts += s.timeouts;
        self.seq_naks += s.seq_naks;
        self.rnr_naks += s.rnr_naks;
        self.duplicate_packets += s.duplicate_read_responses;
    }
}

/// One time-series sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub time: SimTime,
    pub object: u32,
    pub metric: Metric,
    pub value: f64,
}

/// What a sample measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Port: bytes queued (waiting plus in service).
    QueueBytes,
    /// Port: 1 while its data class is paused by PFC, else 0.
    Paused,
    /// Port: bytes sent so far.
    TxBytes,
    /// Flow: the sending rate its congestion control allows, Gb/s (line rate without).
    RateGbps,
    /// Flow: bytes delivered so far.
    DeliveredBytes,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::QueueBytes => "queue_bytes",
            Metric::Paused => "paused",
            Metric::TxBytes => "tx_bytes",
            Metric::RateGbps => "rate_gbps",
            Metric::DeliveredBytes => "delivered_bytes",
        }
    }
}

/// Congestion-control counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CcTotals {
    pub cnps_sent: u64,
    pub cnps_received: u64,
    pub rate_cuts: u64,
}

/// Packets destroyed by faults, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultTotals {
    pub corrupted: u64,
    pub random_drops: u64,
    pub flap_drops: u64,
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
    /// The run ran out of events with flows still pending (nothing could ever move them
    /// again): a stall, which should not happen in a healthy scenario.
    pub stalled: bool,
    pub events: u64,
    pub peak_packets_in_flight: u32,
    pub rc: Option<RcTotals>,
    pub faults: FaultTotals,
    pub cc: CcTotals,
    /// Time-series samples: (time, object, metric, value); objects are the scenario's
    /// `timeseries.ports` then `timeseries.flows`, in order.
    pub samples: Vec<Sample>,
    /// Wall-clock seconds spent in the event loop (not deterministic: goes to perf.json).
    pub wall_seconds: f64,
    /// The host model's counters and message timestamps, when `host:` is set.
    pub host: Option<HostOutput>,
    /// One result per collective workload item.
    pub collectives: Vec<crate::collective::CollectiveResult>,
}

/// Per-port fault state.
#[derive(Debug)]
struct PortFaults {
    rates: LinkFaults,
    /// Down intervals [from, until) in ps.
    down: Vec<(u64, u64)>,
    rng: StdRng,
}

/// Host job ids: flows (raw) or queue-pair halves (RC).
#[inline]
fn job_requester(qp: u32) -> u32 {
    qp << 1
}
#[inline]
fn job_read_responder(qp: u32) -> u32 {
    (qp << 1) | 1
}

/// The simulated world.
pub struct Sim {
    sc: Scenario,
    q: EventQueue,
    /// Flow ids by start time, and how many have started.
    start_order: Vec<FlowId>,
    next_start: usize,
    pool: PacketPool,
    ports: Vec<Port>,
    switches: Vec<Switch>,
    hosts: Vec<Host>,
    flows: Vec<FlowState>,
    topo: Topology,
    rc: Option<RcConfig>,
    qps: Vec<Qp>,
    free_qps: Vec<u32>,
    /// Open queue pair per (requester host, responder host) when connections are shared.
    /// Keyed by (requester, responder, connection): connection 0 for ordinary flows,
    /// 1 + channel for a collective's.
    pairs: HashMap<(u32, u32, u32), u32>,
    rc_totals: RcTotals,
    faults: Vec<Option<PortFaults>>,
    cc: Option<DcqcnParams>,
    cc_totals: CcTotals,
    fc: FlowControl,
    samples: Vec<Sample>,
    fault_totals: FaultTotals,
    mtu: u64,
    overhead: u64,
    header: u64,
    cut_through: bool,
    switch_latency: SimDuration,
    /// Host and NIC model (`host:`), if any.
    hostm: Option<HostModel>,
    /// Flows waiting for a flow to be done: the first, and each one's next sibling.
    dep_head: Vec<FlowId>,
    dep_next: Vec<FlowId>,
    /// What `after_requester_input` gathered while a queue pair was borrowed.
    todo: Vec<(Todo, FlowId)>,
    /// Collective runs, the transfers they asked for, and when each GPU's intra-host link
    /// is next free (by global GPU id).
    colls: Vec<crate::collective::CollectiveRun>,
    coll_out: Vec<crate::collective::Send>,
    gpu_link_free: Vec<SimTime>,
    gpus_per_server: u32,
    ideal_cache: HashMap<(u64, bool), SimDuration>,
}

/// Follow-ups of a requester's completions.
#[derive(Clone, Copy, Debug)]
enum Todo {
    /// A READ's data arrived.
    Delivered,
    /// A WRITE or SEND was acknowledged.
    SendCompleted,
    /// A backlogged message got send-queue room: into the host pipeline.
    Post,
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
            .map(|(i, def)| FlowState::new(sc, &topo, &mut ideal_cache, i, def))
            .collect();
        let ports: Vec<Port> = (0..topo.ports())
            .map(|p| {
                let (tier, link, switch, to) = topo.port_info(p);
                Port::new(tier, link, switch, to, sc.switch.buffer_bytes)
            })
            .collect();
        let faults = (0..topo.ports())
            .map(|p| {
                let rates = sc.faults.for_port(p, ports[p as usize].tier);
                let down: Vec<(u64, u64)> = sc
                    .faults
                    .flaps
                    .iter()
                    .filter(|f| f.port == p)
                    .map(|f| (f.from.0, f.until.0))
                    .collect();
                (rates.any() || !down.is_empty()).then(|| PortFaults {
                    rates,
                    down,
                    rng: stream(sc.seed, Stream::Fault, p as u64, 0),
                })
            })
            .collect();
        let mut ports = ports;
        if let FlowControl::IbCredit { vl_buffer, .. } = sc.flow_control {
            for p in ports.iter_mut() {
                p.credits = vl_buffer / crate::fabric::CREDIT_BLOCK;
            }
        }
        for (i, p) in ports.iter_mut().enumerate() {
            if p.switch.is_some() {
                let t = Tier::ALL.iter().position(|t| *t == p.tier).unwrap_or(0);
                p.red = sc.ecn[t].map(|r| (r, stream(sc.seed, Stream::Ecn, i as u64, 0)));
            }
        }
        let switches = (0..topo.switches()).map(|_| Switch::default()).collect();
        let hosts = (0..topo.hosts()).map(|_| Host::default()).collect();
        // Only the next flow start is ever on the heap: the heap holds what is in
        // flight, not the whole workload.
        // Flows that wait for another start when it is done, not by the clock.
        let mut dep_head = vec![FlowId::MAX; flows.len()];
        let mut dep_next = vec![FlowId::MAX; flows.len()];
        for (i, f) in flows.iter().enumerate().rev() {
            if let Some(a) = f.def.after {
                dep_next[i] = dep_head[a as usize];
                dep_head[a as usize] = i as FlowId;
            }
        }
        let mut start_order: Vec<FlowId> = (0..flows.len() as FlowId)
            .filter(|&i| flows[i as usize].def.after.is_none())
            .collect();
        start_order.sort_by_key(|&i| (flows[i as usize].def.start, i));
        let mut q = EventQueue::new();
        if let Some(&first) = start_order.first() {
            q.schedule(
                flows[first as usize].def.start,
                Event::FlowStart { flow: first },
            );
        }
        let rc = match &sc.transport {
            Transport::Rc(c) => Some(c.clone()),
            Transport::Raw => None,
        };
        if sc.timeseries.is_some() {
            q.schedule(SimTime::ZERO, Event::Sample);
        }
        let hostm = sc
            .host
            .as_ref()
            .map(|h| HostModel::new(h, topo.hosts(), flows.len(), &sc.posting));
        // Collectives: their ranks, and their first iteration at their start time.
        let mut colls = Vec::new();
        for (i, w) in sc.workload.iter().enumerate() {
            if let crate::workload::Workload::Collective(c) = w {
                let ranks =
                    crate::collective::place_on(c, sc.host.as_ref(), topo.hosts(), sc.seed, i)
                        .expect("placement checked by validation");
                q.schedule(
                    SimTime(c.start.0),
                    Event::CollStart {
                        run: colls.len() as u32,
                    },
                );
                colls.push(crate::collective::CollectiveRun::new(
                    c,
                    i as u16,
                    ranks,
                    |port| topo.leaf_of(port),
                    topo.leaves,
                    topo.spines,
                ));
            }
        }
        let gpus_per_server = sc.host.as_ref().map_or(1, |h| h.gpus_per_host);
        let servers = sc.host.as_ref().map_or(topo.hosts(), |h| h.servers);
        Sim {
            colls,
            coll_out: Vec::new(),
            gpu_link_free: vec![SimTime::ZERO; (servers * gpus_per_server) as usize],
            gpus_per_server,
            ideal_cache,
            todo: Vec::new(),
            hostm,
            dep_head,
            dep_next,
            q,
            start_order,
            next_start: 0,
            pool: PacketPool::new(),
            ports,
            switches,
            hosts,
            flows,
            rc_totals: RcTotals::default(),
            rc,
            qps: Vec::new(),
            free_qps: Vec::new(),
            pairs: HashMap::new(),
            faults,
            fault_totals: FaultTotals::default(),
            cc: sc.cc,
            cc_totals: CcTotals::default(),
            fc: sc.flow_control,
            samples: Vec::new(),
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
        // The last time anything happened: timer events that find nothing to do (a
        // queue pair that finished, a deadline that moved) do not extend the run.
        let mut last = SimTime::ZERO;
        while let Some(t) = self.q.peek_time() {
            if t > limit {
                stopped = true;
                break;
            }
            let (now, ev) = self.q.pop().expect("peeked");
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
                    let w = self.ports[port as usize]
                        .wire
                        .pop_front()
                        .expect("an arrival event has a packet on the wire");
                    debug_assert_eq!(w.arrive, now);
                    if let Some(next) = self.ports[port as usize].wire.front() {
                        self.q.schedule(next.arrive, Event::Arrive { port });
                    }
                    self.on_arrive(now, port, w);
                    true
                }
                Event::QpTimer { qp } => self.on_qp_timer(now, qp),
                Event::HostWake { host } => {
                    self.hosts[host as usize].wake_at = None;
                    self.kick(now, host);
                    true
                }
                Event::Pfc { port, pause } => {
                    self.on_pfc(now, port, pause);
                    true
                }
                Event::PfcRefresh { port } => self.on_pfc_refresh(now, port),
                Event::PortWake { port } => {
                    self.ports[port as usize].wake_pending = false;
                    self.wake_port(now, port);
                    true
                }
                Event::Sample => {
                    self.sample(now);
                    // Sampling never keeps a finished run alive, nor extends it.
                    let work_left = self.flows.iter().any(|f| f.outcome == Outcome::Pending)
                        || self.colls.iter().any(|c| !c.is_done());
                    if work_left && !self.q.is_empty() {
                        let iv = self
                            .sc
                            .timeseries
                            .as_ref()
                            .map_or(SimDuration(1), |t| t.interval);
                        self.q.schedule(now + iv, Event::Sample);
                    }
                    false
                }
                Event::Credit { port, blocks } => {
                    let p = &mut self.ports[port as usize];
                    p.credits += blocks as u64;
                    self.wake_port(now, port);
                    true
                }
                Event::RecvPost { qp, gen } => self.on_recv_post(now, qp, gen),
                Event::FlowStage { flow, stage } => {
                    self.on_flow_stage(now, flow, stage);
                    true
                }
                Event::PosterDone { nic, poster } => {
                    self.on_poster_done(now, nic, poster);
                    true
                }
                Event::Irq { nic } => self.on_irq_timer(now, nic),
                Event::CollStart { run } => {
                    self.coll_step(now, run, None);
                    true
                }
                Event::CollDone { run, xfer } => {
                    self.coll_step(now, run, Some(xfer));
                    true
                }
            };
            if acted {
                last = now;
            }
        }
        let end = if stopped { limit } else { last };
        let rc = self.rc.as_ref().map(|_| {
            let mut t = self.rc_totals;
            for qp in self.qps.iter().filter(|q| !q.dead) {
                t.add(&qp.req.stats);
                t.duplicate_packets += qp.resp.stats.duplicates;
                t.acks_sent += qp.resp.stats.acks_sent;
            }
            t
        });
        let stalled = !stopped
            && (self.flows.iter().any(|f| f.outcome == Outcome::Pending)
                || self.colls.iter().any(|c| !c.is_done()));
        RunOutput {
            events: self.q.events_processed(),
            peak_packets_in_flight: self.pool.peak_live(),
            flows: self.flows,
            ports: self.ports,
            switches: self.switches,
            end,
            stopped_by_duration: stopped,
            stalled,
            rc,
            faults: self.fault_totals,
            cc: self.cc_totals,
            samples: self.samples,
            wall_seconds: wall.elapsed().as_secs_f64(),
            host: self.hostm.map(HostModel::into_output),
            collectives: self.colls.iter().map(|c| c.result()).collect(),
        }
    }

    fn kick(&mut self, now: SimTime, host: u32) {
        if !self.ports[self.topo.host_up(host) as usize].busy {
            self.host_send(now, host);
        }
    }

    fn on_flow_start(&mut self, now: SimTime, flow: FlowId) {
        if self.flows[flow as usize].def.after.is_some() {
            // Started by the flow it waited for: its start is now.
            self.flows[flow as usize].def.start = now;
        } else {
            self.next_start += 1;
            if let Some(&next) = self.start_order.get(self.next_start) {
                self.q.schedule(
                    self.flows[next as usize].def.start,
                    Event::FlowStart { flow: next },
                );
            }
        }
        self.start_flow(now, flow);
    }

    /// A flow (from the workload, or a collective's transfer) starts: onto its queue
    /// pair, or for the raw transport straight to its host.
    fn start_flow(&mut self, now: SimTime, flow: FlowId) {
        let src = self.flows[flow as usize].def.src;
        let conn = self.flows[flow as usize].conn;
        let raw = self.flows[flow as usize].raw;
        let job = match &self.rc {
            None => flow,
            Some(_) if raw => RAW_JOB | flow,
            Some(rc) => {
                let (params, depth, delay, op) = (
                    rc.params,
                    rc.recv_queue_depth,
                    rc.recv_post_delay,
                    rc.operation,
                );
                let max_send_wr = rc.max_send_wr;
                // A collective's channels keep their connections open.
                let shared = rc.connections == Connections::PerHostPair || conn > 0;
                let (src, dst) = {
                    let f = &self.flows[flow as usize];
                    (f.def.src, f.def.dst)
                };
                if let Some(&slot) = self.pairs.get(&(src, dst, conn)).filter(|_| shared) {
                    // An open connection: post to its send queue, or wait for room.
                    let qp = &mut self.qps[slot as usize];
                    self.flows[flow as usize].qp = slot;
                    self.flows[flow as usize].qp_gen = qp.gen;
                    if qp.req.outstanding_wrs() + qp.pipeline.len() < max_send_wr as usize {
                        self.post_wr(now, slot, flow);
                    } else {
                        qp.backlog.push_back(flow);
                    }
                    return;
                }
                // The receiver posts its receive WQEs `recv_post_delay` after the queue
                // pair opens; until then SENDs meet an empty receive queue. The requester
                // learns the initial credit count at connection setup.
                let posted_now = if delay == SimDuration::ZERO { depth } else { 0 };
                let line = self.topo.host_link.rate.0 as f64;
                let resp = Responder::new(params, posted_now);
                let req = Requester::new(params, posted_now);
                let _ = op;
                let qp = Qp {
                    conn,
                    // A shared connection keeps one 5-tuple however often it is reopened
                    // (a persistent connection); a queue pair per flow takes the flow's.
                    flow_hash: if shared {
                        stream_seed(
                            self.sc.seed,
                            Stream::FlowHash,
                            ((src as u64) << 32) | dst as u64,
                            1 + conn as u64,
                        ) as u32
                    } else {
                        self.flows[flow as usize].flow_hash
                    },
                    pipeline: VecDeque::new(),
                    src,
                    dst,
                    backlog: VecDeque::new(),
                    read_flow: flow,
                    req,
                    resp,
                    timer_at: None,
                    req_listed: false,
                    read_next_psn: 0,
                    read_left: 0,
                    read_listed: false,
                    dead: false,
                    gen: 0,
                    rp_fwd: self.cc.map(|p| ReactionPoint::new(p, line, now)),
                    rp_rev: self.cc.map(|p| ReactionPoint::new(p, line, now)),
                    np_fwd: NotificationPoint::default(),
                    np_rev: NotificationPoint::default(),
                    next_fwd: now,
                    next_rev: now,
                };
                let slot = match self.free_qps.pop() {
                    Some(s) => {
                        let gen = self.qps[s as usize].gen.wrapping_add(1);
                        self.qps[s as usize] = Qp { gen, ..qp };
                        s
                    }
                    None => {
                        self.qps.push(qp);
                        (self.qps.len() - 1) as u32
                    }
                };
                self.flows[flow as usize].qp = slot;
                self.flows[flow as usize].qp_gen = self.qps[slot as usize].gen;
                if shared {
                    self.pairs.insert((src, dst, conn), slot);
                }
                if delay > SimDuration::ZERO {
                    let gen = self.qps[slot as usize].gen;
                    self.q
                        .schedule(now + delay, Event::RecvPost { qp: slot, gen });
                }
                self.post_wr(now, slot, flow);
                return;
            }
        };
        if self.hostm.is_some() {
            self.begin_post(now, flow);
            return;
        }
        self.hosts[src as usize].activate(job);
        self.kick(now, src);
    }

    /// The application posts `flow` on queue pair `slot` (which has room): at once
    /// without a host model, else through the host and NIC pipeline.
    fn post_wr(&mut self, now: SimTime, slot: u32, flow: FlowId) {
        if self.hostm.is_some() {
            self.qps[slot as usize].pipeline.push_back(flow);
            self.begin_post(now, flow);
            return;
        }
        let op = self.rc.as_ref().map_or(Op::Write, |r| r.operation);
        let size = self.flows[flow as usize].def.size;
        let qp = &mut self.qps[slot as usize];
        let src = qp.src;
        qp.req.post(flow as u64, op, size);
        if !qp.req_listed {
            qp.req_listed = true;
            self.hosts[src as usize].activate(job_requester(slot));
        }
        self.kick(now, src);
    }

    fn sample(&mut self, now: SimTime) {
        let Some(ts) = &self.sc.timeseries else {
            return;
        };
        let mut rows: Vec<(Metric, f64)> = Vec::with_capacity(3);
        let mut obj = 0u32;
        for &p in &ts.ports {
            let port = &self.ports[p as usize];
            rows.extend([
                (Metric::QueueBytes, port.queued_bytes as f64),
                (Metric::Paused, (port.paused_until > now) as u8 as f64),
                (Metric::TxBytes, port.tx_bytes as f64),
            ]);
            Self::push_samples(&mut self.samples, now, obj, &mut rows);
            obj += 1;
        }
        let line = self.topo.host_link.rate.0 as f64;
        let read = self.rc.as_ref().is_some_and(|r| r.operation == Op::Read);
        for &f in &ts.flows {
            let flow = &self.flows[f as usize];
            let live_qp = flow.qp != NO_QP
                && !self.qps[flow.qp as usize].dead
                && self.qps[flow.qp as usize].gen == flow.qp_gen;
            let rate = match flow.outcome {
                Outcome::Pending if live_qp => {
                    let qp = &mut self.qps[flow.qp as usize];
                    // The data direction: requester to responder, or back for a READ.
                    let rp = if read { &mut qp.rp_rev } else { &mut qp.rp_fwd };
                    match rp {
                        Some(rp) => {
                            rp.handle_timeout(now);
                            rp.rate_bps()
                        }
                        None => line,
                    }
                }
                Outcome::Pending if flow.def.start <= now => line,
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

    /// Returns whether the queue pair was still live.
    fn on_recv_post(&mut self, _now: SimTime, slot: u32, gen: u32) -> bool {
        let depth = self.rc.as_ref().map_or(0, |r| r.recv_queue_depth);
        match self.qps.get_mut(slot as usize) {
            Some(qp) if !qp.dead && qp.gen == gen => {
                qp.resp.post_recv(depth);
                true
            }
            _ => false,
        }
    }

    /// The host's port is free: send an ACK if one waits, else the next job's packet.
    fn host_send(&mut self, now: SimTime, host: u32) {
        if let Some(pkt) = self.hosts[host as usize].ctrl.pop_front() {
            let wire = self.pool.get(pkt).wire as u64;
            self.start_tx(self.topo.host_up(host), pkt, wire, now);
            return;
        }
        let port = self.topo.host_up(host);
        // The data class may be paused (PFC).
        if self.data_paused(now, port) {
            return;
        }
        // A packet made earlier and held for lack of credit (IB) goes first.
        if let Some(pkt) = self.hosts[host as usize].held {
            let wire = self.pool.get(pkt).wire as u64;
            if self.take_credits(now, port, wire) {
                self.hosts[host as usize].held = None;
                self.start_tx(port, pkt, wire, now);
            }
            return;
        }
        // Try each listed job at most once.
        let mut tries = self.hosts[host as usize].jobs();
        let mut wake: Option<SimTime> = None;
        if let Some(h) = &self.hostm {
            // The NIC's payload DMA has not read the next packet's bytes yet.
            let t = h.dma_next(host);
            if t > now && tries > 0 {
                tries = 0;
                wake = Some(t);
            }
        }
        while tries > 0 {
            tries -= 1;
            let Some(job) = self.hosts[host as usize].pop_job() else {
                break;
            };
            let made = if self.rc.is_none() {
                self.raw_packet(job)
            } else if job & RAW_JOB != 0 {
                self.raw_packet(job & !RAW_JOB)
            } else if self.qps[(job >> 1) as usize].dead {
                let qp = &mut self.qps[(job >> 1) as usize];
                if job & 1 == 0 {
                    qp.req_listed = false;
                } else {
                    qp.read_listed = false;
                }
                if !qp.req_listed && !qp.read_listed {
                    self.free_qps.push(job >> 1);
                }
                None
            } else {
                // DCQCN pacing: a direction sends no sooner than its rate allows.
                let qp = &self.qps[(job >> 1) as usize];
                let next = if job & 1 == 0 {
                    qp.next_fwd
                } else {
                    qp.next_rev
                };
                if next > now {
                    self.hosts[host as usize].activate(job);
                    wake = Some(wake.map_or(next, |w| w.min(next)));
                    continue;
                }
                if job & 1 == 0 {
                    self.requester_packet(now, job >> 1)
                } else {
                    self.read_response_packet(job >> 1)
                }
            };
            if let Some((pkt, more)) = made {
                if more {
                    self.hosts[host as usize].activate(job);
                }
                let wire = self.pool.get(pkt).wire as u64;
                if self.hostm.is_some() {
                    let (flow, payload) = {
                        let p = self.pool.get(pkt);
                        (p.flow, p.payload as u64)
                    };
                    if payload > 0 {
                        self.dma_read(now, host, flow, payload);
                    }
                }
                if self.cc.is_some() && self.rc.is_some() && job & RAW_JOB == 0 {
                    self.pace(now, job, wire);
                }
                if !self.take_credits(now, port, wire) {
                    // Wait for credit with the packet in hand (the stall is timed).
                    self.hosts[host as usize].held = Some(pkt);
                    return;
                }
                self.start_tx(port, pkt, wire, now);
                return;
            }
        }
        if let Some(t) = wake {
            let h = &mut self.hosts[host as usize];
            if h.wake_at.map_or(true, |w| t < w) {
                h.wake_at = Some(t);
                self.q.schedule(t, Event::HostWake { host });
            }
        }
    }

    /// A paced direction sent `wire` bytes: its next packet may go one serialization time
    /// at the DCQCN rate later (the rate limiter of DCQCN §3.1).
    fn pace(&mut self, now: SimTime, job: u32, wire: u64) {
        let qp = &mut self.qps[(job >> 1) as usize];
        let (rp, next) = if job & 1 == 0 {
            (&mut qp.rp_fwd, &mut qp.next_fwd)
        } else {
            (&mut qp.rp_rev, &mut qp.next_rev)
        };
        if let Some(rp) = rp {
            rp.handle_timeout(now);
            let rate = BitsPerSec(rp.rate_bps().max(1.0) as u64);
            *next = now + serialization_delay(wire, rate);
            rp.on_bytes_sent(wire);
        }
    }

    fn new_packet(&mut self, flow: FlowId, src: u32, dst: u32, kind: PktKind) -> Packet {
        let f = &self.flows[flow as usize];
        // A queue pair's packets share its 5-tuple (RoCE's UDP source port is per queue
        // pair), so every message on it takes the same ECMP path and stays in order.
        let hash = if f.qp == NO_QP {
            f.flow_hash
        } else {
            self.qps[f.qp as usize].flow_hash
        };
        let reverse = matches!(kind, PktKind::Ack | PktKind::ReadResponse);
        Packet {
            kind,
            flow,
            src,
            dst,
            // The reverse direction hashes like a different 5-tuple.
            flow_hash: if reverse { hash ^ 0x5bd1_e995 } else { hash },
            ..Packet::default()
        }
    }

    /// The next packet of a raw flow; `more` if it has packets left.
    fn raw_packet(&mut self, flow: FlowId) -> Option<(PktId, bool)> {
        let mtu = self.mtu;
        let st = &mut self.flows[flow as usize];
        let payload = (st.def.size - st.segmented).min(mtu);
        st.segmented += payload;
        st.packets_sent += 1;
        let more = st.segmented < st.def.size;
        let (src, dst, seq) = (st.def.src, st.def.dst, st.packets_sent - 1);
        let mut p = self.new_packet(flow, src, dst, PktKind::Data);
        p.seq = seq;
        p.payload = payload as u32;
        p.wire = (payload + self.overhead) as u32;
        Some((self.pool.alloc(p), more))
    }

    /// The requester's next packet, or `None` (and the job leaves the list) if blocked.
    fn requester_packet(&mut self, now: SimTime, slot: u32) -> Option<(PktId, bool)> {
        let qp = &mut self.qps[slot as usize];
        let Some(tx) = qp.req.poll_transmit(now) else {
            qp.req_listed = false;
            self.sync_timer(slot);
            return None;
        };
        let flow = tx.wr_id as FlowId;
        self.sync_timer(slot);
        let f = &mut self.flows[flow as usize];
        f.packets_sent += 1;
        f.segmented += tx.payload as u64;
        if tx.retransmission {
            f.retransmissions += 1;
        }
        let (src, dst) = (f.def.src, f.def.dst);
        let kind = if tx.op == Op::Read {
            PktKind::ReadRequest
        } else {
            PktKind::Data
        };
        let mut p = self.new_packet(flow, src, dst, kind);
        let ext = match tx.op {
            Op::Write if tx.first => RETH_BYTES,
            Op::Read => RETH_BYTES,
            _ => 0,
        };
        p.psn = tx.psn;
        p.seq = tx.psn;
        p.aux = tx.read_packets;
        p.payload = tx.payload;
        p.wire = (tx.payload as u64 + self.overhead + ext) as u32;
        p.flags = (tx.first as u8 * FLAG_FIRST)
            | (tx.last as u8 * FLAG_LAST)
            | (tx.retransmission as u8 * FLAG_RETX);
        p.op = match tx.op {
            Op::Write => 0,
            Op::Send => 1,
            Op::Read => 2,
        };
        Some((self.pool.alloc(p), true))
    }

    /// The next READ response the responder streams back to the requester.
    fn read_response_packet(&mut self, slot: u32) -> Option<(PktId, bool)> {
        let mtu = self.mtu;
        let qp = &mut self.qps[slot as usize];
        if qp.read_left == 0 {
            qp.read_listed = false;
            return None;
        }
        let flow = qp.read_flow;
        let psn = qp.read_next_psn;
        let left = qp.read_left;
        qp.read_next_psn = crate::transport::rc::psn_add(psn, 1);
        qp.read_left -= 1;
        let more = qp.read_left > 0;
        if !more {
            qp.read_listed = false;
        }
        let f = &mut self.flows[flow as usize];
        // A READ request asks for every response to the end of its message, so the
        // packet's index in the message is its count from the end.
        let packets = f.def.size.div_ceil(mtu).max(1);
        let index = packets.saturating_sub(left as u64);
        let payload = (f.def.size - (index * mtu).min(f.def.size)).min(mtu);
        f.segmented += payload;
        f.packets_sent += 1;
        let (src, dst) = (f.def.dst, f.def.src);
        let mut p = self.new_packet(flow, src, dst, PktKind::ReadResponse);
        let first = index == 0;
        let last = index + 1 == packets;
        let aeth = if first || last { AETH_BYTES } else { 0 };
        p.psn = psn;
        p.seq = psn;
        p.payload = payload as u32;
        p.wire = (payload + self.overhead + aeth) as u32;
        p.flags = (first as u8 * FLAG_FIRST) | (last as u8 * FLAG_LAST);
        Some((self.pool.alloc(p), more))
    }

    /// Keeps one timer event pending at or before the requester's next deadline.
    fn sync_timer(&mut self, slot: u32) {
        let qp = &mut self.qps[slot as usize];
        if let Some(t) = qp.req.next_timeout() {
            if qp.timer_at.map_or(true, |s| t < s) {
                qp.timer_at = Some(t);
                self.q.schedule(t, Event::QpTimer { qp: slot });
            }
        }
    }

    /// Returns whether a timer was actually due.
    fn on_qp_timer(&mut self, now: SimTime, slot: u32) -> bool {
        let qp = &mut self.qps[slot as usize];
        if qp.timer_at != Some(now) {
            return false; // superseded by an earlier re-arm
        }
        qp.timer_at = None;
        if qp.dead {
            return false; // the queue pair finished
        }
        let due = qp.req.next_timeout().is_some_and(|t| t <= now);
        qp.req.handle_timeout(now);
        self.after_requester_input(now, slot);
        due
    }

    /// After the requester took an input: collect completions, list it if it can send,
    /// keep its timer, and wake its host.
    fn after_requester_input(&mut self, now: SimTime, slot: u32) {
        let max_send_wr = self.rc.as_ref().map_or(1, |r| r.max_send_wr) as usize;
        let op = self.rc.as_ref().map_or(Op::Write, |r| r.operation);
        let host_model = self.hostm.is_some();
        let qp = &mut self.qps[slot as usize];
        while let Some(c) = qp.req.pop_completion() {
            let f = &mut self.flows[c.wr_id as usize];
            match c.status {
                WcStatus::Success => {
                    // WRITE and SEND finished when their last byte landed; a READ when
                    // its last response did, which is now.
                    let first = f.finish.is_none();
                    f.finish.get_or_insert(now);
                    f.outcome = Outcome::Completed;
                    if op == Op::Read {
                        if first {
                            self.todo.push((Todo::Delivered, c.wr_id as FlowId));
                        }
                    } else if host_model {
                        self.todo.push((Todo::SendCompleted, c.wr_id as FlowId));
                    }
                }
                status => {
                    if status != WcStatus::Flushed {
                        self.rc_totals.qp_errors += 1;
                    }
                    if f.outcome == Outcome::Pending {
                        f.outcome = Outcome::Failed(status);
                        f.failed_at = Some(now);
                    }
                }
            }
        }
        // Flows waiting for send-queue room get it (or are flushed with the queue pair).
        while qp.req.outstanding_wrs() + qp.pipeline.len() < max_send_wr {
            let Some(next) = qp.backlog.pop_front() else {
                break;
            };
            if host_model {
                qp.pipeline.push_back(next);
                self.todo.push((Todo::Post, next));
                continue;
            }
            qp.req
                .post(next as u64, op, self.flows[next as usize].def.size);
            if let Some(c) = qp.req.pop_completion() {
                // The queue pair is in the error state: the work request is flushed.
                let f = &mut self.flows[c.wr_id as usize];
                f.outcome = Outcome::Failed(c.status);
                f.failed_at = Some(now);
            }
        }
        let src = qp.src;
        self.after_completions(now);
        let qp = &mut self.qps[slot as usize];
        // A collective's connections stay open (as NCCL's do) for its next transfers.
        if qp.req.outstanding_wrs() == 0
            && qp.read_left == 0
            && qp.backlog.is_empty()
            && qp.pipeline.is_empty()
            && qp.conn == 0
        {
            // Done: keep its counters and retire the queue pair.
            self.rc_totals.add(&qp.req.stats);
            self.rc_totals.duplicate_packets += qp.resp.stats.duplicates;
            self.rc_totals.acks_sent += qp.resp.stats.acks_sent;
            if self.pairs.get(&(qp.src, qp.dst, qp.conn)) == Some(&slot) {
                self.pairs.remove(&(qp.src, qp.dst, qp.conn));
            }
            qp.dead = true;
            if !qp.req_listed && !qp.read_listed {
                self.free_qps.push(slot);
            }
            return;
        }
        if qp.req.has_work() && !qp.req_listed {
            qp.req_listed = true;
            self.hosts[src as usize].activate(job_requester(slot));
        }
        self.sync_timer(slot);
        self.kick(now, src);
    }

    /// Hands on what `after_requester_input` collected: READs delivered, sends
    /// completed, backlog flows to post through the host pipeline.
    fn after_completions(&mut self, now: SimTime) {
        // In the order they were collected; the buffer is lent out and given back so
        // that its capacity is reused.
        let mut todo = std::mem::take(&mut self.todo);
        for &(what, f) in &todo {
            match what {
                Todo::Delivered => self.on_delivered(now, f),
                Todo::SendCompleted => self.on_send_completed(now, f),
                Todo::Post => self.begin_post(now, f),
            }
        }
        todo.clear();
        self.todo = todo;
    }

    /// Starts serializing `pkt` (`wire` bytes) on `port` at `start` (>= now) and schedules
    /// its end and its arrival at the far end. The packet itself is not touched: what the
    /// port needs travels beside its id, so a busy port does not miss the cache on every
    /// packet it sends.
    #[inline]
    fn start_tx(&mut self, port: PortId, pkt: PktId, wire: u64, start: SimTime) {
        self.start_tx_marked(port, pkt, wire, start, false)
    }

    /// [`Self::start_tx`] for a packet leaving a switch queue: an ECN-capable packet may
    /// be marked here, at dequeue, by RED on the bytes queued behind it. Marking at dequeue
    /// (as HPCC's simulator does) tells the receiver about the queue the packet leaves
    /// behind, one queueing delay fresher than marking at enqueue.
    fn start_tx_marked(&mut self, port: PortId, pkt: PktId, wire: u64, start: SimTime, ect: bool) {
        let p = &mut self.ports[port as usize];
        if ect {
            if let Some((red, rng)) = &mut p.red {
                let behind = p.queued_bytes.saturating_sub(wire);
                let prob = red.probability(behind);
                if prob > 0.0 && (prob >= 1.0 || rng.gen::<f64>() < prob) {
                    p.ecn_marked += 1;
                    self.pool.get_mut(pkt).flags |= FLAG_ECN;
                }
            }
        }
        let ser = serialization_delay(wire, p.link.rate);
        let end = start + ser;
        p.busy = true;
        p.in_service = wire;
        self.q.schedule(end, Event::TxDone { port });
        let tail = end + p.link.latency;
        let arrive = match p.to {
            Node::Switch(_) if self.cut_through => {
                start + serialization_delay(self.header.min(wire), p.link.rate) + p.link.latency
            }
            _ => tail,
        };
        // Packets leave a port in order and cross its wire in constant time, so they
        // arrive in order: only the first on the wire needs an event.
        debug_assert!(p.wire.back().map_or(true, |w| w.arrive <= arrive));
        if p.wire.is_empty() {
            self.q.schedule(arrive, Event::Arrive { port });
        }
        p.wire.push_back(OnWire {
            arrive,
            tail,
            pkt,
            wire: wire as u32,
        });
    }

    fn on_tx_done(&mut self, now: SimTime, port: PortId) {
        let p = &mut self.ports[port as usize];
        p.busy = false;
        // Counted when the last bit leaves, so a run cut by `duration` counts only what
        // was sent.
        p.tx_bytes += p.in_service;
        p.tx_packets += 1;
        match p.switch {
            None => {
                p.in_service = 0;
                let host = port; // host ports are numbered by host
                self.host_send(now, host);
            }
            Some(sw) => {
                let done = p.in_service;
                let ingress = p.in_service_ingress;
                let ctrl = p.in_service_ctrl;
                p.in_service = 0;
                p.queued_bytes -= done;
                // Packets a switch made itself (in-network aggregation) never took
                // shared buffer.
                if ingress != NO_PORT {
                    self.switches[sw as usize].used -= done;
                }
                if ingress != NO_PORT && !ctrl {
                    self.ingress_released(now, ingress, done);
                }
                self.try_start(now, port);
            }
        }
    }

    /// Whether a fault destroys the packet arriving over `port` (the receiver's CRC check
    /// fails, or the link was down).
    fn fault_loss(&mut self, now: SimTime, port: PortId, wire: u64) -> bool {
        let Some(f) = &mut self.faults[port as usize] else {
            return false;
        };
        if f.down.iter().any(|&(a, b)| now.0 >= a && now.0 < b) {
            self.fault_totals.flap_drops += 1;
            return true;
        }
        if f.rates.ber > 0.0 {
            // P(corrupt) = 1 - (1 - BER)^bits, computed without cancellation.
            let bits = (wire * 8) as f64;
            let p = -(bits * (-f.rates.ber).ln_1p()).exp_m1();
            if f.rng.gen::<f64>() < p {
                self.fault_totals.corrupted += 1;
                return true;
            }
        }
        if f.rates.drop_probability > 0.0 && f.rng.gen::<f64>() < f.rates.drop_probability {
            self.fault_totals.random_drops += 1;
            return true;
        }
        false
    }

    fn on_arrive(&mut self, now: SimTime, port: PortId, w: OnWire) {
        let pkt = w.pkt;
        if self.fault_loss(now, port, w.wire as u64) {
            let p = *self.pool.get(pkt);
            // The receiver never buffered it: its credits go back (IB resynchronises
            // credits with absolute counters, so a lost packet does not leak them).
            if let FlowControl::IbCredit { update_delay, .. } = self.fc {
                if !matches!(p.kind, PktKind::Ack | PktKind::Cnp) {
                    self.return_credits(now, port, w.wire as u64, update_delay);
                }
            }
            self.pool.free(pkt);
            self.ports[port as usize].fault_losses += 1;
            self.flows[p.flow as usize].packets_dropped += 1;
            return;
        }
        match self.ports[port as usize].to {
            Node::Host(h) => {
                // A host takes packets off the wire at once: its credits go straight back.
                if let FlowControl::IbCredit { update_delay, .. } = self.fc {
                    if !self.is_ctrl(pkt) {
                        self.return_credits(now, port, w.wire as u64, update_delay);
                    }
                }
                self.deliver(now, h, pkt)
            }
            Node::Switch(sw) => self.forward(now, sw, pkt, w.tail, port),
        }
    }

    fn is_ctrl(&self, pkt: PktId) -> bool {
        matches!(self.pool.get(pkt).kind, PktKind::Ack | PktKind::Cnp)
    }

    /// Credits for `wire` bytes that crossed `port` go back to its sender: the credit
    /// update crosses the link back after `delay` (IBTA 7.9.4 flow control packets).
    fn return_credits(&mut self, now: SimTime, port: PortId, wire: u64, delay: SimDuration) {
        let back = now + delay + self.ports[port as usize].link.latency;
        self.q.schedule(
            back,
            Event::Credit {
                port,
                blocks: credit_blocks(wire) as u32,
            },
        );
    }

    /// Whether PFC holds `port`'s data class now (and if so, arranges a wake-up when the
    /// pause runs out).
    fn data_paused(&mut self, now: SimTime, port: PortId) -> bool {
        let p = &mut self.ports[port as usize];
        if p.paused_until > now {
            if !p.wake_pending {
                p.wake_pending = true;
                let t = p.paused_until;
                self.q.schedule(t, Event::PortWake { port });
            }
            return true;
        }
        false
    }

    /// IB: spends the credits for a `wire`-byte packet on `port`, or starts timing a
    /// stall and returns false. Always true without IB credits.
    fn take_credits(&mut self, now: SimTime, port: PortId, wire: u64) -> bool {
        if let FlowControl::IbCredit { .. } = self.fc {
            let p = &mut self.ports[port as usize];
            let need = credit_blocks(wire);
            if p.credits < need {
                p.stall_since.get_or_insert(now);
                return false;
            }
            p.credits -= need;
            if let Some(s) = p.stall_since.take() {
                p.stall_ps += now.0 - s.0;
            }
        }
        true
    }

    /// Whether `port` may start a data packet of up to `wire` bytes now; if not, arranges
    /// to be woken (pause end) and accounts the stall (credits).
    /// Whether `data_may_start` would say yes, without its bookkeeping.
    fn data_may_start_peek(&self, now: SimTime, port: PortId, wire: u64) -> bool {
        let p = &self.ports[port as usize];
        p.paused_until <= now
            && match self.fc {
                FlowControl::IbCredit { .. } => p.credits >= credit_blocks(wire),
                _ => true,
            }
    }

    fn data_may_start(&mut self, now: SimTime, port: PortId, wire: u64) -> bool {
        let p = &mut self.ports[port as usize];
        if p.paused_until > now {
            if !p.wake_pending {
                p.wake_pending = true;
                let t = p.paused_until;
                self.q.schedule(t, Event::PortWake { port });
            }
            return false;
        }
        if let FlowControl::IbCredit { .. } = self.fc {
            if p.credits < credit_blocks(wire) {
                p.stall_since.get_or_insert(now);
                return false;
            }
            if let Some(s) = p.stall_since.take() {
                p.stall_ps += now.0 - s.0;
            }
        }
        true
    }

    /// `port` may be able to send again (pause over, credits back).
    fn wake_port(&mut self, now: SimTime, port: PortId) {
        match self.ports[port as usize].switch {
            None => self.kick(now, port), // host ports are numbered by host
            Some(_) => self.try_start(now, port),
        }
    }

    /// An idle switch port starts its next packet: control class first; data if not
    /// paused and (IB) it has the credits.
    fn try_start(&mut self, now: SimTime, port: PortId) {
        if self.ports[port as usize].busy {
            return;
        }
        // Control packets go first among packets that are ready; a control packet still
        // inside the switch (its port-to-port latency not yet over) does not hold up a
        // data packet that is ready sooner.
        let p = &self.ports[port as usize];
        let take_ctrl = match (p.ctrl.front(), p.queue.front()) {
            (Some(c), Some(d)) => {
                c.ready.max(now) <= d.ready.max(now)
                    || !self.data_may_start_peek(now, port, d.wire as u64)
            }
            (Some(_), None) => true,
            _ => false,
        };
        let next = if take_ctrl {
            self.ports[port as usize]
                .ctrl
                .pop_front()
                .expect("ctrl head")
        } else {
            let Some(&head) = self.ports[port as usize].queue.front() else {
                return;
            };
            if !self.data_may_start(now, port, head.wire as u64) {
                return;
            }
            if let FlowControl::IbCredit { .. } = self.fc {
                self.ports[port as usize].credits -= credit_blocks(head.wire as u64);
            }
            self.ports[port as usize].queue.pop_front().expect("head")
        };
        let p = &mut self.ports[port as usize];
        p.in_service_ingress = next.ingress;
        p.in_service_ctrl = next.ctrl;
        self.start_tx_marked(
            port,
            next.pkt,
            next.wire as u64,
            now.max(next.ready),
            next.ect,
        );
    }

    /// Data bytes that came in over `ingress` left the switch: PFC may resume the sender,
    /// IB credits go back to it.
    fn ingress_released(&mut self, now: SimTime, ingress: PortId, bytes: u64) {
        let p = &mut self.ports[ingress as usize];
        p.ingress_bytes -= bytes;
        match self.fc {
            FlowControl::Pfc { xon, .. } => {
                if p.pause_sent && p.ingress_bytes <= xon {
                    p.pause_sent = false;
                    p.pause_frames += 1;
                    let at = self.pfc_frame_arrival(now, ingress);
                    self.q.schedule(
                        at,
                        Event::Pfc {
                            port: ingress,
                            pause: false,
                        },
                    );
                }
            }
            FlowControl::IbCredit { update_delay, .. } => {
                self.return_credits(now, ingress, bytes, update_delay);
            }
            FlowControl::Lossy => {}
        }
    }

    /// When a PFC frame sent now by the switch `ingress` delivers to reaches and takes
    /// effect at `ingress`'s sender: one 64-byte frame's serialization and the cable
    /// back, plus the sender's reaction time (IEEE 802.1Qbb).
    fn pfc_frame_arrival(&self, now: SimTime, ingress: PortId) -> SimTime {
        let FlowControl::Pfc { reaction_time, .. } = self.fc else {
            return now;
        };
        let link = self.ports[ingress as usize].link;
        now + serialization_delay(64, link.rate) + link.latency + reaction_time
    }

    /// How long a PAUSE with the configured quanta holds a link: quanta x 512 bit times.
    fn pause_duration(&self, port: PortId) -> SimDuration {
        let FlowControl::Pfc { quanta, .. } = self.fc else {
            return SimDuration::ZERO;
        };
        serialization_delay(quanta as u64 * 64, self.ports[port as usize].link.rate)
    }

    /// Data bytes arrived over `ingress` into a switch: PFC pauses the sender above Xoff.
    fn ingress_admitted(&mut self, now: SimTime, ingress: PortId, bytes: u64) {
        let p = &mut self.ports[ingress as usize];
        p.ingress_bytes += bytes;
        if let FlowControl::Pfc { xoff, .. } = self.fc {
            if !p.pause_sent && p.ingress_bytes >= xoff {
                p.pause_sent = true;
                self.send_pause(now, ingress);
            }
        }
    }

    fn send_pause(&mut self, now: SimTime, ingress: PortId) {
        let at = self.pfc_frame_arrival(now, ingress);
        let dur = self.pause_duration(ingress);
        let p = &mut self.ports[ingress as usize];
        p.pause_frames += 1;
        // Refresh halfway through the quanta while still above Xon.
        p.refresh_at = now + SimDuration(dur.0 / 2).max(SimDuration(1));
        let r = p.refresh_at;
        self.q.schedule(
            at,
            Event::Pfc {
                port: ingress,
                pause: true,
            },
        );
        self.q.schedule(r, Event::PfcRefresh { port: ingress });
    }

    fn on_pfc_refresh(&mut self, now: SimTime, port: PortId) -> bool {
        let p = &self.ports[port as usize];
        if !p.pause_sent || p.refresh_at != now {
            return false;
        }
        self.send_pause(now, port);
        true
    }

    /// A PFC frame takes effect at the sending side of `port`.
    fn on_pfc(&mut self, now: SimTime, port: PortId, pause: bool) {
        let dur = self.pause_duration(port);
        let p = &mut self.ports[port as usize];
        if pause {
            if p.paused_until <= now {
                // A new pause: close the books on the last one.
                p.paused_ps += p.paused_until.0.saturating_sub(p.paused_from.0);
                p.paused_from = now;
            }
            p.paused_until = now + dur;
        } else {
            if p.paused_until > now {
                p.paused_until = now;
            }
            self.wake_port(now, port);
        }
    }

    fn deliver(&mut self, now: SimTime, host: u32, pkt: PktId) {
        let p = *self.pool.get(pkt);
        self.pool.free(pkt);
        if self.rc.is_none() || self.flows[p.flow as usize].raw {
            let f = &mut self.flows[p.flow as usize];
            f.delivered += p.payload as u64;
            if f.delivered == f.def.size {
                f.finish = Some(now);
                f.outcome = Outcome::Completed;
                self.on_delivered(now, p.flow);
            }
            return;
        }
        let (slot, gen) = {
            let f = &self.flows[p.flow as usize];
            (f.qp, f.qp_gen)
        };
        if slot == NO_QP || self.qps[slot as usize].dead || self.qps[slot as usize].gen != gen {
            // A straggler for a finished queue pair (a retransmission that crossed the
            // final ACK): nothing to do.
            self.rc_totals.duplicate_packets +=
                matches!(p.kind, PktKind::Data | PktKind::ReadRequest) as u64;
            return;
        }
        match p.kind {
            PktKind::Data | PktKind::ReadRequest => self.at_responder(now, host, slot, &p),
            PktKind::Ack => {
                let info = AckInfo {
                    kind: match p.ack_kind {
                        0 => AckKind::Ack,
                        1 => AckKind::NakSeq,
                        _ => AckKind::NakRnr,
                    },
                    psn: p.psn,
                    credits: p.aux,
                    rnr_code: p.rnr_code,
                };
                self.qps[slot as usize].req.handle_ack(now, info);
                self.after_requester_input(now, slot);
            }
            PktKind::ReadResponse => {
                if p.flags & FLAG_ECN != 0 {
                    self.notify(now, slot, &p, true);
                }
                let got = self.qps[slot as usize]
                    .req
                    .handle_read_response(now, p.psn, p.payload);
                let f = &mut self.flows[p.flow as usize];
                f.delivered += got as u64;
                self.after_requester_input(now, slot);
            }
            PktKind::Cnp => {
                // DCQCN §3.1: the reaction point of the congested direction cuts its rate.
                self.cc_totals.cnps_received += 1;
                let qp = &mut self.qps[slot as usize];
                let rp = if p.flags & FLAG_REVERSE != 0 {
                    &mut qp.rp_rev
                } else {
                    &mut qp.rp_fwd
                };
                if let Some(rp) = rp {
                    rp.handle_timeout(now);
                    rp.on_cnp(now);
                    self.cc_totals.rate_cuts += 1;
                }
            }
        }
    }

    /// An ECN-marked packet `p` reached its receiver: the notification point of its
    /// direction may send a CNP back to the sender (at most one per `cnp_interval`).
    fn notify(&mut self, now: SimTime, slot: u32, p: &Packet, reverse: bool) {
        let Some(cc) = self.cc else {
            return;
        };
        let qp = &mut self.qps[slot as usize];
        let np = if reverse {
            &mut qp.np_rev
        } else {
            &mut qp.np_fwd
        };
        if !np.on_marked(now, cc.cnp_interval) {
            return;
        }
        self.cc_totals.cnps_sent += 1;
        // The CNP goes from the receiver of `p` back to its sender.
        let mut c = self.new_packet(p.flow, p.dst, p.src, PktKind::Cnp);
        c.flow_hash ^= 0x2545_f491;
        c.psn = p.psn;
        c.seq = p.psn;
        c.flags = if reverse { FLAG_REVERSE } else { 0 };
        c.wire = (self.overhead + CNP_PAYLOAD_BYTES) as u32;
        let id = self.pool.alloc(c);
        self.hosts[p.dst as usize].ctrl.push_back(id);
        self.kick(now, p.dst);
    }

    fn at_responder(&mut self, now: SimTime, host: u32, slot: u32, p: &Packet) {
        let req = TxRequest {
            psn: p.psn,
            op: match p.op {
                0 => Op::Write,
                1 => Op::Send,
                _ => Op::Read,
            },
            payload: p.payload,
            first: p.flags & FLAG_FIRST != 0,
            last: p.flags & FLAG_LAST != 0,
            read_packets: p.aux,
            retransmission: p.flags & FLAG_RETX != 0,
            wr_id: p.flow as u64,
        };
        if p.flags & FLAG_ECN != 0 {
            self.notify(now, slot, p, false);
        }
        let qp = &mut self.qps[slot as usize];
        let a = qp.resp.handle_request(&req);
        if let Some((psn, n)) = a.read {
            // (Re)start streaming responses from `psn`.
            qp.read_flow = p.flow;
            qp.read_next_psn = psn;
            qp.read_left = n;
            if !qp.read_listed {
                qp.read_listed = true;
                self.hosts[host as usize].activate(job_read_responder(slot));
            }
        }
        if a.message_done && req.op == Op::Send {
            // The application keeps its receive queue full: it posts a new receive WQE
            // for each one a completed SEND consumed.
            qp.resp.post_recv(1);
        }
        let f = &mut self.flows[p.flow as usize];
        f.delivered += a.deliver as u64;
        if a.message_done && f.finish.is_none() {
            f.finish = Some(now);
            self.on_delivered(now, p.flow);
        }
        if let Some(ack) = a.reply {
            let mut r = self.new_packet(p.flow, p.dst, p.src, PktKind::Ack);
            r.psn = ack.psn;
            r.seq = ack.psn;
            r.aux = ack.credits;
            r.ack_kind = match ack.kind {
                AckKind::Ack => 0,
                AckKind::NakSeq => 1,
                AckKind::NakRnr => 2,
            };
            r.rnr_code = ack.rnr_code;
            r.wire = (self.overhead + AETH_BYTES) as u32;
            let id = self.pool.alloc(r);
            self.hosts[host as usize].ctrl.push_back(id);
        }
        self.kick(now, host);
    }

    /// A packet reached switch `sw` (its tail arrives at `tail`).
    fn forward(&mut self, now: SimTime, sw: u32, pkt: PktId, tail: SimTime, in_port: PortId) {
        let p = *self.pool.get(pkt);
        let topo = &self.topo;
        let routing = self.sc.routing;
        let ports = &self.ports;
        let hosts = topo.hosts();
        let out = if p.dst >= hosts {
            // Addressed to a switch (in-network aggregation).
            let target = p.dst - hosts;
            if target == sw {
                self.switch_consume(now, tail, pkt, in_port);
                return;
            }
            let k = p.flow_hash % topo.links_per_spine;
            if topo.is_leaf(sw) {
                topo.leaf_up(sw, (target - topo.leaves) * topo.links_per_spine + k)
            } else {
                topo.spine_down(sw - topo.leaves, target, k)
            }
        } else if topo.is_leaf(sw) {
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
                p.dst,
                p.flow_hash,
                p.seq,
                |k| ports[topo.spine_down(spine, leaf, k) as usize].queued_bytes,
            );
            topo.spine_down(spine, leaf, k)
        };
        let wire = p.wire as u64;
        let swst = &mut self.switches[sw as usize];
        let port = &mut self.ports[out as usize];
        // A lossless fabric never drops for its thresholds: PFC headroom and IB credits
        // keep the buffer from overflowing; only a full buffer (a bug) would drop.
        let admitted = if self.fc.lossless() {
            if swst.used + wire > self.sc.switch.buffer_bytes {
                Err(DropReason::BufferFull)
            } else {
                Ok(())
            }
        } else {
            admit(&self.sc.switch, swst.used, port.queued_bytes, wire)
        };
        if let Err(reason) = admitted {
            debug_assert!(!self.fc.lossless(), "a lossless fabric dropped a packet");
            if let FlowControl::IbCredit { update_delay, .. } = self.fc {
                let ctrl = matches!(p.kind, PktKind::Ack | PktKind::Cnp);
                if !ctrl {
                    self.return_credits(now, in_port, wire, update_delay);
                }
            }
            self.drop_packet(out, pkt, reason);
            return;
        }
        swst.used += wire;
        port.enqueued(wire);
        let mut ready = now + self.switch_latency;
        if self.cut_through {
            // Do not start so early that the egress would overtake the ingress tail.
            let ser_out = serialization_delay(wire, port.link.rate);
            let tail_ready = SimTime((tail + self.switch_latency).0.saturating_sub(ser_out.0));
            ready = ready.max(tail_ready);
        }
        let ect = matches!(p.kind, PktKind::Data | PktKind::ReadResponse);
        let ctrl = matches!(p.kind, PktKind::Ack | PktKind::Cnp);
        let q = Queued {
            ready,
            pkt,
            wire: wire as u32,
            ect,
            ctrl,
            ingress: in_port,
        };
        if ctrl {
            port.ctrl.push_back(q);
        } else {
            port.queue.push_back(q);
        }
        if !ctrl {
            self.ingress_admitted(now, in_port, wire);
        }
        self.try_start(now, out);
    }

    /// A packet addressed to this switch arrived: the switch's aggregation engine takes
    /// it (its credits go back at once, as at a host).
    fn switch_consume(&mut self, now: SimTime, tail: SimTime, pkt: PktId, in_port: PortId) {
        let p = *self.pool.get(pkt);
        self.pool.free(pkt);
        if let FlowControl::IbCredit { update_delay, .. } = self.fc {
            self.return_credits(now, in_port, p.wire as u64, update_delay);
        }
        // The switch has the packet once its tail is in (cut-through hands it over at
        // the head).
        let at = tail.max(now);
        let f = &mut self.flows[p.flow as usize];
        f.delivered += p.payload as u64;
        if f.delivered == f.def.size && f.finish.is_none() {
            f.finish = Some(at);
            f.outcome = Outcome::Completed;
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
            let id = self.pool.alloc(pk);
            let f = &mut self.flows[flow as usize];
            f.packets_sent += 1;
            f.segmented += payload;
            // The aggregation engine's output waits in its own memory, not in the
            // shared packet buffer (so it never pushes forwarded packets out).
            let _ = sw;
            let port_st = &mut self.ports[port as usize];
            port_st.enqueued(wire);
            port_st.queue.push_back(Queued {
                ready: now + self.switch_latency,
                pkt: id,
                wire: wire as u32,
                ect: true,
                ctrl: false,
                ingress: NO_PORT,
            });
        }
        self.try_start(now, port);
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

//! The simulation: the event loop, and the state it routes between components.
//!
//! A run is a pure function of the scenario and its seed. The loop pops the earliest
//! event and hands it to the component it names; whatever the component returns (a
//! packet to start, a frame to deliver, a timer) becomes new events. The rules live in
//! the components:
//! - `components::port` (egress queues, serializer, ECN marking, PFC/credit gates),
//!   `components::wire` (propagation, faults), `components::ingress` (PFC Xoff/Xon,
//!   credit return), `components::switch` (shared buffer, admission), `routing` (which
//!   port), `components::nic` (the send scheduler);
//! - `transport::rc` (queue pairs, sans-IO) and `cc` (congestion control);
//! - `components::host` (doorbells, WQE fetch, DMA, completions, interrupts) and
//!   `collective` (NCCL-style collectives).
//!
//! This module holds the loop and the run's bookkeeping; `fabric.rs` moves packets
//! between ports, wires and switches; `transport.rs` between packets and queue pairs;
//! `host_glue.rs` and `collective_glue.rs` between messages and the host pipeline or a
//! collective's schedule; `watchdog.rs` stops a run that only timers keep alive;
//! `retire.rs` folds finished transfers and reuses their slots (memory follows flight).
//!
//! Two events per packet per hop (`TxDone` at the sender, `Arrive` at the receiver, one
//! pending per wire: the wire is a ring); a packet waiting for the switch latency does
//! not need a third, because the egress port starts it at `max(now, ready)` and stays
//! busy until it ends. At most two, in fact: a host's port that starts a packet with
//! nothing else to send (no job listed, no ACK waiting, no pause) only reserves its end's
//! key (`EventQueue::reserve`); the end becomes an event if something comes to wait for
//! it before then, and is otherwise counted when next looked at (`Sim::settle_tx`), so
//! the order of every other event, and every result but the event count, is the same.
//! A queue pair keeps at most one timer event pending, re-armed
//! lazily: a timer event that finds its deadline moved later re-schedules itself instead
//! of acting. Packets come from a pool; queues are `VecDeque`s of packet ids that grow
//! once and are reused.

use crate::analytic::ideal_fct;
use crate::cc::CcParams;
use crate::components::{
    EgressPort, FlowControl, Forwarding, Ingress, Loss, Nic, Switch, Wire, WireFaults, CREDIT_BLOCK,
};
use crate::engine::{Event, EventQueue, FlowId, PortId, Source};
use crate::packet::PacketPool;
use crate::rng::{stream, stream_seed, Stream};
use crate::routing::RoutingPolicy;
use crate::scenario::{RcConfig, Scenario, Transport};
use crate::topology::graph::Graph;
use crate::topology::{Node, Tier, Topology};
use crate::transport::rc::{Op, WcStatus};
use crate::units::{SimDuration, SimTime};
use crate::workload::{expand, FlowDef};
use idmap::IdMap;
use std::collections::VecDeque;

mod collective_glue;
#[cfg(test)]
mod connection_tests;
mod fabric;
pub mod footprint;
mod host_glue;
mod idmap;
mod parallel;
mod parallel_coll;
mod parallel_retire;
pub mod partition;
mod prefetch;
pub mod retire;
mod run_loop;
mod sampler;
#[cfg(test)]
mod teardown_tests;
mod training_glue;
mod transport;
#[cfg(test)]
mod unmarked_tests;
pub mod watchdog;
mod window;
pub use crate::components::host::{
    HostOutput, MsgTimes, NicStats, CPU_CATEGORIES, CPU_COPIES, CPU_INTERRUPTS, CPU_POLLING,
    CPU_POSTING, CPU_PROXY, STAGES, T_DONE, T_START,
};
use crate::components::host::{HostPipeline, HostWake, Message};
use transport::Qp;
pub use transport::RcTotals;

/// A flow as the host pipeline sees it.
fn host_message(def: &FlowDef) -> Message {
    Message {
        src: def.src,
        dst: def.dst,
        size: def.size,
        workload: def.workload,
    }
}

/// What NCCL's tuner sees of the network: a server's NICs, in GB/s.
fn tuner_net_gbps(sc: &Scenario) -> f64 {
    sc.host.as_ref().map_or(1, |h| h.nics_per_host) as f64 * sc.topology.host_link.rate.0 as f64
        / 8e9
}

/// Events at one simulated instant after which a run is taken to be stuck: far more
/// than the largest legitimate burst (every one of `MAX_FLOWS` flows starting at once
/// takes a few events each).
pub const LIVELOCK_EVENTS: u64 = 200 * LIVELOCK_CHECK;

/// How often (in events) the loop checks that time advances: a power of two.
const LIVELOCK_CHECK: u64 = 1 << 20;

/// Resident memory at which a run stops with [`RunOutput::out_of_memory`] rather than be
/// killed by the system or abort on a failed allocation. Set once by the command line
/// (from [`footprint::memory_limit`]); unset, runs are not watched (the library and tests).
static MEMORY_BUDGET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// Sets the resident memory, bytes, at which every later run in this process stops.
pub fn set_memory_budget(bytes: u64) {
    let _ = MEMORY_BUDGET.set(bytes);
}

/// What a progress display hears every `LIVELOCK_CHECK` events: simulated time so far,
/// the run's end if it has one (`duration`), and events so far.
pub type ProgressHook = Box<dyn Fn(SimTime, Option<SimTime>, u64) + Send + Sync>;

/// Set once by the command line (a progress bar on a terminal); unset, nothing is told.
/// It only watches: the run's results do not depend on it.
static PROGRESS: std::sync::OnceLock<ProgressHook> = std::sync::OnceLock::new();

/// Sets the progress hook for every later run in this process.
pub fn set_progress(hook: ProgressHook) {
    let _ = PROGRESS.set(hook);
}

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
    /// The flow's number in the run: its index among every flow and transfer made, in
    /// the order they were made (flows.csv's `flow`; its hash is drawn from it). The
    /// workload's flows are `0..`, in their order; a collective's transfers follow.
    pub num: u32,
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
    /// When the last byte arrived where it was going (the destination's memory for raw
    /// packets, WRITE and SEND; the requester's for a READ).
    pub landed: Option<SimTime>,
    /// When the flow completed as its sender sees it: under RC, when the requester
    /// learned of it (the ACK of the last packet for WRITE and SEND, as a work
    /// completion reports it and HPCC's ns-3 and csg-htsim end FCT; the last response
    /// for READ, which is also when it landed). Raw packets and flows ending at a switch
    /// get no acknowledgement: they finish when they land. FCT ends here.
    pub finish: Option<SimTime>,
    /// When the queue pair failed.
    pub failed_at: Option<SimTime>,
    /// Its start event ran (for a flow that waits on another: the other finished).
    pub started: bool,
    pub outcome: Outcome,
    /// FCT on an empty fabric.
    pub ideal: SimDuration,
    /// Queue pair slot (RC only), and the slot's generation when the flow joined it: a
    /// slot is reused once its queue pair retired and its responder stopped answering,
    /// and a late packet of an old flow must not reach the new queue pair.
    qp: u32,
    qp_gen: u32,
    /// Connection key (0, or 1 + channel for a collective's transfer).
    pub conn: u32,
    /// The collective transfer it carries: (run, transfer).
    pub coll: Option<(u32, u32)>,
    /// Sent as bare packets even under RC (in-network aggregation to and from switches,
    /// which end no queue pair).
    pub raw: bool,
    /// Below NCCL's AR threshold: its packets are not routed per packet.
    pub no_ar: bool,
}

const NO_QP: u32 = u32::MAX;

/// A collective's connection: (run, sending rank, receiving rank, channel).
type CollConn = (u32, u32, u32, u32);

/// Host job ids of bare-packet flows under RC (queue-pair halves use the others).
const RAW_JOB: u32 = 1 << 31;

impl FlowState {
    /// Flow number `i` of the run; ideal FCTs are cached by size and same-leaf-or-not.
    fn new(
        sc: &Scenario,
        graph: &Graph,
        ideal_cache: &mut IdMap<(u64, bool), SimDuration>,
        i: usize,
        def: FlowDef,
    ) -> FlowState {
        let same_leaf = graph.attach(def.src) == graph.attach(def.dst);
        let ideal = *ideal_cache
            .entry((def.size, same_leaf))
            .or_insert_with(|| ideal_fct(sc, def.src, def.dst, def.size));
        FlowState::with_ideal(sc, i, def, ideal)
    }

    /// A flow whose ideal FCT is given (one to or from a switch).
    fn with_ideal(sc: &Scenario, i: usize, def: FlowDef, ideal: SimDuration) -> FlowState {
        FlowState {
            num: i as u32,
            def,
            flow_hash: stream_seed(sc.seed, Stream::FlowHash, i as u64, 0) as u32,
            segmented: 0,
            delivered: 0,
            packets_sent: 0,
            packets_dropped: 0,
            retransmissions: 0,
            landed: None,
            finish: None,
            failed_at: None,
            started: false,
            outcome: Outcome::Pending,
            ideal,
            qp: NO_QP,
            qp_gen: 0,
            conn: 0,
            coll: None,
            raw: false,
            no_ar: false,
        }
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

impl FaultTotals {
    fn count(&mut self, loss: Loss) {
        match loss {
            Loss::Down => self.flap_drops += 1,
            Loss::Corrupted => self.corrupted += 1,
            Loss::Random => self.random_drops += 1,
        }
    }
}

/// Everything a run produced, for metrics and reports.
#[derive(Debug)]
pub struct RunOutput {
    pub flows: Vec<FlowState>,
    /// Per link direction: its egress port (queues, statistics), its wire and the
    /// ingress at its far end (PFC frames sent), indexed by port id.
    pub ports: Vec<EgressPort>,
    pub wires: Vec<Wire>,
    pub ingress: Vec<Ingress>,
    pub switches: Vec<Switch>,
    /// When the run ended: the last event, or `duration`.
    pub end: SimTime,
    /// Whether `duration` cut the run short with work left.
    pub stopped_by_duration: bool,
    /// The run reached `units::TIME_HORIZON` (validation should make that impossible).
    pub horizon_reached: bool,
    /// The run stopped because time stood still for `LIVELOCK_EVENTS` events (a bug).
    pub livelock: bool,
    /// The run stopped because the process's resident memory passed the budget set by
    /// [`set_memory_budget`] (bytes it had then): its results are not whole.
    pub out_of_memory: Option<u64>,
    /// The run ran out of events with flows still pending (nothing could ever move them
    /// again), or the watchdog stopped it: a stall, which should not happen in a
    /// healthy scenario.
    pub stalled: bool,
    /// The watchdog stopped the run: only timers were left and nothing could move work
    /// again (`sim::watchdog`).
    pub watchdog: Option<watchdog::WatchdogStop>,
    /// For a run the watchdog stopped: each pending flow (by its position in `flows`,
    /// ascending; the first 20) and its queue pair's state, as the reason it is stuck.
    pub stuck: Vec<(FlowId, String)>,
    /// What the collective transfers retired during the run left behind (`retire`):
    /// they are no longer in `flows`.
    pub retired: retire::RetiredTransfers,
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
    /// Threads the fabric was split over (`parallel`; 1: not split). Goes to perf.json.
    pub threads: u16,
    /// Events each partition handled, when split (goes to perf.json: how evenly the
    /// threads were loaded).
    pub partition_events: Vec<u64>,
    /// Wall seconds each partition spent running its windows, and waiting at the
    /// barrier for the others, when split (perf.json; the rest of the wall time is the
    /// meetings' own work: mail, numbering, logs).
    pub partition_work_seconds: Vec<f64>,
    pub partition_wait_seconds: Vec<f64>,
    /// Windows a split run advanced in, each ended by a meeting of its partitions (goes
    /// to perf.json: events per window is the work each meeting pays for).
    pub windows: u64,
    /// Hosts a split run placed apart from their leaf to even the partitions out
    /// (`Plan::balanced`; goes to perf.json).
    pub hosts_apart: u32,
    /// Why a run asked to split over threads ran on one (goes to perf.json).
    pub one_thread_because: Option<&'static str>,
    /// The host model's counters and message timestamps, when `host:` is set.
    pub host: Option<HostOutput>,
    /// One result per collective workload item.
    pub collectives: Vec<crate::collective::CollectiveResult>,
    /// Per training item: its steps and their communication.
    pub training: Vec<crate::training::TrainingResult>,
}

/// The numbering of event sources for the engine's tie order ([`crate::engine::Source`]):
/// the workload (flow starts, training jobs, samples), then each collective item's run
/// (its start and its iterations' wake-ups: a source of its own, so that every partition
/// of a split run schedules a wake-up under the key one thread gives it), each egress
/// port (its ends of serialization and wake-ups), each wire (its arrivals), each ingress
/// (the PFC frames and credits it sends back), each NIC (its pacing, timers and host
/// pipeline), each switch (what a message landing at it starts, in in-network
/// aggregation).
#[derive(Clone, Copy, Debug)]
pub(super) struct Sources {
    runs: u32,
    ports: u32,
    hosts: u32,
    switches: u32,
}

impl Sources {
    pub(super) const WORKLOAD: Source = 0;

    pub(super) fn count(self) -> usize {
        1 + self.runs as usize
            + 3 * self.ports as usize
            + self.hosts as usize
            + self.switches as usize
    }
    /// Collective run `run`'s: a collective item's own, the workload's for a training
    /// job's runs (which follow the items').
    #[inline]
    pub(super) fn run(self, run: u32) -> Source {
        if run < self.runs {
            1 + run
        } else {
            Self::WORKLOAD
        }
    }
    #[inline]
    pub(super) fn port(self, port: PortId) -> Source {
        1 + self.runs + port
    }
    #[inline]
    pub(super) fn wire(self, port: PortId) -> Source {
        1 + self.runs + self.ports + port
    }
    #[inline]
    pub(super) fn ingress(self, port: PortId) -> Source {
        1 + self.runs + 2 * self.ports + port
    }
    #[inline]
    pub(super) fn nic(self, host: u32) -> Source {
        1 + self.runs + 3 * self.ports + host
    }
    #[inline]
    pub(super) fn switch(self, switch: u32) -> Source {
        1 + self.runs + 3 * self.ports + self.hosts + switch
    }
}

/// The simulated world.
pub struct Sim {
    sc: Scenario,
    /// This copy's partition, in a run split over threads (`parallel`); `None` on one.
    part: Option<Box<parallel::Part>>,
    q: EventQueue,
    src: Sources,
    /// Flow ids by start time, and how many have started.
    start_order: Vec<FlowId>,
    next_start: usize,
    pool: PacketPool,
    ports: Vec<EgressPort>,
    wires: Vec<Wire>,
    ingress: Vec<Ingress>,
    switches: Vec<Switch>,
    /// The send scheduler of each host's NIC port.
    nics: Vec<Nic>,
    /// Every end of a packet on a host's port is an event, none left unmarked
    /// (`launch`); on only in the test that compares the two.
    mark_every_tx_end: bool,
    /// Every IB credit returning to a host's port is an event, none kept on its way
    /// back (`upstream`); on only in the test that compares the two.
    credit_event_per_return: bool,
    routing: RoutingPolicy,
    flows: Vec<FlowState>,
    topo: Topology,
    /// The fabric's ports and next-hop tables.
    graph: Graph,
    rc: Option<RcConfig>,
    qps: Vec<Qp>,
    free_qps: Vec<u32>,
    /// Retired queue pairs no host lists, by when their responder stops answering
    /// (`QueuePair::responder_until`): their slots are free from then.
    closing_qps: std::collections::BinaryHeap<std::cmp::Reverse<(SimTime, u32)>>,
    /// Open queue pair per (requester host, responder host) when connections are shared.
    /// Keyed by (requester, responder, connection): connection 0 for ordinary flows,
    /// 1 + channel for a collective's.
    pairs: IdMap<(u32, u32, u32), u32>,
    /// A collective connection's next queue pair, taken in turn (NCCL's `qpIndex`):
    /// keyed by (run, sending rank, receiving rank, channel).
    qp_turn: IdMap<CollConn, u32>,
    /// Collective transfers split across queue pairs: parts still to land, by (run,
    /// transfer).
    parts_left: IdMap<(u32, u32), u32>,
    /// With several queue pairs per connection, transfers may land out of the order they
    /// were sent; the receiver takes them in that order (NCCL's proxy completes a
    /// connection's steps in order). Per connection (run, sending rank, receiving rank,
    /// channel): its transfers in sending order, with when each landed; and each
    /// transfer's connection.
    conn_order: IdMap<CollConn, VecDeque<(u32, Option<SimTime>)>>,
    xfer_conn: IdMap<(u32, u32), CollConn>,
    rc_totals: RcTotals,
    cc: Option<CcParams>,
    /// The ports alone outgrow a core's cache: the event loop fetches what the next
    /// events read several events ahead (`prefetch`), not just the next one's first
    /// line (on a small fabric that costs more than it saves).
    deep_prefetch: bool,
    /// Data packets ask switches for per-hop telemetry (the algorithm reads it).
    telemetry: bool,
    /// Data packets carry their send time and ACKs echo it (the algorithm reads RTTs).
    timestamps: bool,
    cc_totals: CcTotals,
    samples: Vec<Sample>,
    sampling: sampler::Sampling,
    fault_totals: FaultTotals,
    mtu: u64,
    overhead: u64,
    /// Telemetry bytes every data packet and ACK carries (HPCC), else 0.
    int_bytes: u64,
    header: u64,
    switch_latency: SimDuration,
    /// Host and NIC model (`host:`), if any.
    hostm: Option<HostPipeline>,
    /// Action buffers for the host pipeline's calls (a stack: calls may nest).
    host_out: Vec<Vec<crate::components::host::HostAction>>,
    /// Flows waiting for a flow to be done: the first, and each one's next sibling.
    dep_head: Vec<FlowId>,
    dep_next: Vec<FlowId>,
    /// What `after_requester_input` gathered while a queue pair was borrowed.
    todo: Vec<(Todo, FlowId)>,
    /// Collective runs, the transfers they asked for, and when each GPU's intra-host link
    /// is next free (by global GPU id).
    colls: Vec<crate::collective::CollectiveRun>,
    coll_out: Vec<crate::collective::Send>,
    /// Scratch: collective transfers done and when (`CollectiveRun::arrived`).
    coll_done: Vec<(u32, SimTime)>,
    /// Clear-to-sends being delivered (kept to reuse its allocation).
    coll_cts: Vec<crate::collective::ClearToSend>,
    /// Per run and connection, a clear-to-send's latency, once worked out.
    coll_cts_latency: Vec<Vec<Option<SimDuration>>>,
    /// Per run and sending rank's channel (`sender * channels + channel`), the queue
    /// pair its last network transfer went on (`NO_QP` if none yet): `start_flow_on`
    /// checks it before it hashes its way into `pairs` (a ring's rank sends to one peer
    /// a channel, so the check nearly always holds; issue 17's stop 56 measured 0.98x on
    /// a 512-GPU ring and no change on a 2,048-GPU one, whose few thousand connections
    /// stay in the cache).
    coll_qp_hint: Vec<Vec<u32>>,
    /// Training jobs, which job and group set owns each collective run, and scratch.
    jobs: Vec<training_glue::JobGlue>,
    coll_owner: Vec<Option<(u32, u32)>>,
    train_out: Vec<crate::training::Action>,
    todo_starts: Vec<u32>,
    gpu_link_free: Vec<SimTime>,
    gpus_per_server: u32,
    ideal_cache: IdMap<(u64, bool), SimDuration>,
    /// Payload bytes delivered so far, every flow and transfer (the watchdog's progress).
    delivered_total: u64,
    watchdog: watchdog::Watchdog,
    /// Transfer records' slots, and what retired ones left (`retire`).
    slots: retire::Slots,
    retired: retire::RetiredTransfers,
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
        let mut graph = topo.graph();
        // Degraded links run at their own rate (ports, wires and ingress take it from here;
        // ideal FCTs stay those of the healthy fabric).
        for &(p, rate) in &sc.faults.degraded {
            graph.ports[p as usize].link.rate = rate;
        }
        let defs = expand(&sc.workload, topo.hosts(), topo.host_link.rate.0, sc.seed);
        let mut ideal_cache: IdMap<(u64, bool), SimDuration> = IdMap::default();
        let flows: Vec<FlowState> = defs
            .into_iter()
            .enumerate()
            .map(|(i, def)| FlowState::new(sc, &graph, &mut ideal_cache, i, def))
            .collect();
        let fc = sc.flow_control;
        let cut_through = sc.switch.forwarding == Forwarding::CutThrough;
        let header = sc.encapsulation.header_bytes();
        let mut ports = Vec::with_capacity(graph.ports.len());
        let mut wires = Vec::with_capacity(graph.ports.len());
        let mut ingress = Vec::with_capacity(graph.ports.len());
        for (p, gp) in graph.ports.iter().enumerate() {
            let p = p as u32;
            let (tier, link, to) = (gp.class, gp.link, gp.to);
            let switch = match gp.from {
                Node::Switch(s) => Some(s),
                Node::Host(_) => None,
            };
            let mut port = EgressPort::new(tier, link, switch, to, sc.switch.buffer_bytes);
            match fc {
                FlowControl::Pfc { quanta, .. } => port = port.with_pfc(quanta),
                FlowControl::IbCredit { vl_buffer, .. } => {
                    port = port.with_credits(vl_buffer / CREDIT_BLOCK)
                }
                FlowControl::Lossy => {}
            }
            if switch.is_some() {
                let t = Tier::ALL.iter().position(|t| *t == tier).unwrap_or(0);
                if let Some(red) = sc.ecn[t] {
                    port = port.with_red(red, stream(sc.seed, Stream::Ecn, p as u64, 0));
                }
            }
            ports.push(port);
            let rates = sc.faults.for_port(p, tier);
            let down: Vec<(u64, u64)> = sc
                .faults
                .flaps
                .iter()
                .filter(|f| f.port == p)
                .map(|f| (f.from.0, f.until.0))
                .collect();
            let faults = (rates.any() || !down.is_empty()).then(|| WireFaults {
                rates,
                down,
                rng: stream(sc.seed, Stream::Fault, p as u64, 0),
            });
            let cut = (cut_through && matches!(to, Node::Switch(_))).then_some(header);
            wires.push(Wire::new(link, cut).with_faults(faults));
            ingress.push(Ingress::new(link, fc));
        }
        let switches = (0..topo.switches())
            .map(|_| Switch::new(sc.switch, fc.lossless()))
            .collect();
        let nics = (0..topo.hosts()).map(|_| Nic::default()).collect();
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
        let src = Sources {
            runs: sc
                .workload
                .iter()
                .filter(|w| matches!(w, crate::workload::Workload::Collective(_)))
                .count() as u32,
            ports: topo.ports(),
            hosts: topo.hosts(),
            switches: topo.switches(),
        };
        let mut q = EventQueue::new(src.count());
        if let Some(&first) = start_order.first() {
            q.schedule(
                flows[first as usize].def.start,
                Sources::WORKLOAD,
                Event::FlowStart { flow: first },
            );
        }
        let rc = match &sc.transport {
            Transport::Rc(c) => Some(c.clone()),
            Transport::Raw => None,
        };
        let hostm = sc.host.as_ref().map(|h| {
            let read = rc.as_ref().is_some_and(|r| r.operation == Op::Read);
            let messages = flows.iter().map(|f| host_message(&f.def));
            HostPipeline::new(h, topo.hosts(), sc.mtu, read, messages, &sc.posting)
        });
        // Collectives: their ranks, and their first iteration at their start time.
        let mut colls = Vec::new();
        for (i, w) in sc.workload.iter().enumerate() {
            if let crate::workload::Workload::Collective(c) = w {
                let ranks =
                    crate::collective::place_on(c, sc.host.as_ref(), topo.hosts(), sc.seed, i)
                        .expect("placement checked by validation");
                q.schedule(
                    SimTime(c.start.0),
                    src.run(colls.len() as u32),
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
                    tuner_net_gbps(sc),
                ));
            }
        }
        // Training jobs: their ranks, a collective run per group, their start.
        let (jobs, coll_owner) = training_glue::build_jobs(sc, &topo, &mut colls, &mut q);
        let gpus_per_server = sc.host.as_ref().map_or(1, |h| h.gpus_per_host);
        let servers = sc.host.as_ref().map_or(topo.hosts(), |h| h.servers);
        let workload_flows = flows.len();
        let deep_prefetch = prefetch::deep_enough(ports.len());
        let coll_qp_hint = colls
            .iter()
            .map(|r| vec![NO_QP; r.ranks_len() as usize * r.cfg.channels as usize])
            .collect();
        let watchdog_bound = sc
            .watchdog
            .unwrap_or_else(|| watchdog::default_bound(rc.as_ref().map(|r| &r.params)));
        Sim {
            jobs,
            coll_owner,
            train_out: Vec::new(),
            todo_starts: Vec::new(),
            colls,
            coll_out: Vec::new(),
            coll_done: Vec::new(),
            coll_cts: Vec::new(),
            coll_cts_latency: Vec::new(),
            coll_qp_hint,
            gpu_link_free: vec![SimTime::ZERO; (servers * gpus_per_server) as usize],
            gpus_per_server,
            ideal_cache,
            todo: Vec::new(),
            hostm,
            host_out: Vec::new(),
            dep_head,
            dep_next,
            q,
            src,
            start_order,
            next_start: 0,
            pool: PacketPool::new(),
            ports,
            wires,
            ingress,
            switches,
            nics,
            mark_every_tx_end: false,
            credit_event_per_return: false,
            routing: RoutingPolicy::new(sc.routing, sc.topology.switches()),
            flows,
            rc_totals: RcTotals::default(),
            rc,
            qps: Vec::new(),
            free_qps: Vec::new(),
            closing_qps: Default::default(),
            pairs: IdMap::default(),
            qp_turn: IdMap::default(),
            parts_left: IdMap::default(),
            conn_order: IdMap::default(),
            xfer_conn: IdMap::default(),
            fault_totals: FaultTotals::default(),
            cc: sc.cc,
            deep_prefetch,
            telemetry: sc.cc.is_some_and(|c| c.wants_telemetry()),
            timestamps: sc.cc.is_some_and(|c| c.wants_timestamps()),
            int_bytes: if sc.cc.is_some_and(|c| c.wants_telemetry()) {
                crate::cc::hpcc::INT_BYTES
            } else {
                0
            },
            cc_totals: CcTotals::default(),
            delivered_total: 0,
            slots: retire::Slots::new(workload_flows),
            retired: retire::RetiredTransfers::default(),
            watchdog: watchdog::Watchdog::new(watchdog_bound),
            samples: Vec::new(),
            sampling: sampler::Sampling::new(sc.timeseries.as_ref().map(|t| t.interval)),
            mtu: sc.mtu,
            overhead: sc.encapsulation.overhead_bytes(),
            header,
            switch_latency: sc.switch.latency,
            topo,
            graph,
            sc: sc.clone(),
            part: None,
        }
    }

    /// Number of flows the workload expanded into.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    fn kick(&mut self, now: SimTime, host: u32) {
        // Something listed since the port started its packet waits for its end.
        self.settle_tx(host, false);
        if !self.ports[self.graph.host_up(host) as usize].busy() {
            self.host_send(now, host);
        }
    }

    #[inline(always)]
    fn on_flow_start(&mut self, now: SimTime, flow: FlowId) {
        self.flows[flow as usize].started = true;
        if self.flows[flow as usize].def.after.is_some() {
            // Started by the flow it waited for: its start is now.
            self.flows[flow as usize].def.start = now;
        } else {
            self.next_start += 1;
            if let Some(&next) = self.start_order.get(self.next_start) {
                self.q.schedule(
                    self.flows[next as usize].def.start,
                    Sources::WORKLOAD,
                    Event::FlowStart { flow: next },
                );
            }
        }
        self.start_flow(now, flow);
    }
}

/// Threads a run may be split over (`run --threads`); 1 unless set.
static THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// Every later run in this process splits its fabric over `n` threads where it can
/// (`parallel`); the results are the same for any `n`.
pub fn set_threads(n: usize) {
    THREADS.store(n.max(1), std::sync::atomic::Ordering::Relaxed);
}

/// Builds and runs a scenario: on the threads [`set_threads`] gave, where the scenario
/// can be split (`parallel::plan_threads`), else on one.
pub fn run(sc: &Scenario) -> RunOutput {
    let threads = THREADS.load(std::sync::atomic::Ordering::Relaxed);
    if threads > 1 {
        match parallel::run(sc, threads, parallel::min_events_per_window()) {
            Ok(out) => return out,
            Err(why) => {
                let mut sim = Sim::new(sc);
                if why == run_loop::READS_OVERFLOWED {
                    // The one thread would overflow too: it runs stepped at once.
                    sim = Sim::stepped_again(sim);
                }
                let mut out = sim.run();
                out.one_thread_because = Some(why);
                return out;
            }
        }
    }
    Sim::new(sc).run()
}

/// Builds and runs a scenario split over `threads` partitions, if it can be
/// (`parallel::plan_threads`), however little work its windows hold (tests and
/// benchmarks ask for the split itself); why not otherwise.
pub fn run_split(sc: &Scenario, threads: usize) -> Result<RunOutput, &'static str> {
    parallel::run(sc, threads, 0)
}

pub use parallel::{
    plan_threads, set_min_events_per_window, threads_per_run, MIN_EVENTS_PER_WINDOW,
    WORK_CHECK_WINDOWS,
};

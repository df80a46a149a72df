//! One run on several cores with the same bytes (`run --threads N`, issue 17).
//!
//! The fabric is split into partitions (`partition::Plan`: blocks of leaves with their
//! hosts, and of spines, unless a split balanced by the events the run's flows are
//! expected to make is clearly more even), each a copy of the whole [`Sim`] on its own thread that
//! handles only the events of the components it owns, in the same key order as one
//! thread would. The partitions advance in conservative windows (YAWNS; Nicol, JACM
//! 1993): all of them handle their events earlier than `T + lookahead`, `T` the earliest
//! event anywhere and the lookahead the shortest latency of a link between partitions,
//! then meet at a barrier and exchange what crossed: packets put on a wire whose far end
//! is another partition's, PAUSE and RESUME frames and IB credits going back. YAWNS
//! rather than null messages because the lookahead is one fabric latency everywhere
//! (100 ns to 1 us) and every partition talks to every other through the spines: a
//! window costs one barrier, null messages one message per pair of partitions. The
//! barrier spins before it sleeps (`window`). Before it, each partition leaves its mail
//! and the earliest time of anything it or its mail will do; after it, each reads the
//! others' to find `T`, takes its mail and runs the window (those slots come in two
//! sets by the meeting's parity, so a partition already posting the next window's mail
//! never writes what another is still reading). Until stop 44 a window cost two
//! meetings (one after taking the mail, one after the window): one meeting measured the
//! same on two threads (0.9875-1.006x, within the noise) and 0.876-0.906x the wall time
//! of websearch-128 on 3 threads on 2 cores, where every wait is a sleep.
//!
//! Null messages were built and measured (Chandy and Misra, IEEE TSE 1979; here a
//! clock per partition in shared memory, each partition running up to a lookahead past
//! the others'): the same bytes and 1.0x the wall time of websearch-128 and
//! permutation-8192 on two threads, since what a partition waits for is a difference in
//! load lasting longer than one lookahead (its busier partition still waited 0.094 s of
//! 3.2 s).
//!
//! Why the bytes are the same: an event's key is (time, source, that source's counter)
//! (`engine`). Every source but two is one component, and only its owner schedules
//! from it, so its counter runs as on one thread; the workload's flow starts and a
//! wire's arrivals are scheduled from more than one place, but each keeps at most one
//! event pending, so its counter never decides an order. What crosses is put in place
//! at the barrier under the key it was given where it was made (`EventQueue::reserve`),
//! and is due a link's latency later, after the window. Each partition's copy of a
//! component the partition does not own is never touched; at the end the owners' copies
//! are put together ([`merge`]) and the one-thread end of run (`Sim::finish`) reads
//! them. The peak of packets in flight is found across partitions from a log of each
//! event's change (`PacketPool::take_marks`), merged in key order at each barrier
//! unless the window's logs cannot together rise above the peak (`window::Flight`).
//!
//! IB credits: whether one thread schedules a waiting switch port's wake-up depends on
//! the port's state when the far end lets a credit go, so such a port logs what its
//! events did to its credit bookkeeping and the barrier replays the log against the
//! returns in key order, scheduling the wake-ups one thread would have
//! (`Sim::reconcile_credits`). Adaptive routing that weighs credits reads such a
//! port's returns due by then without landing them (`EgressPort::adaptive_load`), so
//! its log holds all that changes its bookkeeping.
//!
//! The host model splits by NIC: a message's posting stages are its sender's NIC's
//! events, its receive completion its receiver's, and the end of run takes each side
//! from its owner (`HostPipeline::merge`). A flow that waits on another (a ping-pong's
//! reply) is started where that one lands, and leaves from there. Out-of-order RC's
//! hole timer is the responder's own event (`Event::HoleTimer`), on its host. A
//! retired queue pair's responder answers late duplicates for one path latency more
//! (`QueuePair::responder_until`), never less than the lookahead, so its partition
//! hears of the retirement (`Msg::QpClosed`) before it can matter. A time
//! series is taken by each partition for what it owns and put together at the end
//! (`sampler`).
//!
//! Ring and tree collectives split by rank, a rank in its host's partition, with each
//! server's NICs in one partition (`Plan::servers_whole`): transfer records copied to the
//! receiver's partition, clear-to-sends sent as events, iterations ended at the meetings
//! and the records numbered and retired there (`parallel_coll`, `parallel_retire`).
//!
//! What it leaves out (the run falls back to one thread, and says why: [`unsupported`]):
//! RDMA READ, a receive-posting delay shorter than the
//! lookahead (a longer one is told to the responder's partition, `Msg::RecvPost`),
//! collectives other than rings and trees (hierarchical, NVLSTree, in-network, and
//! `auto` where NCCL's tuner picks one of those for a size), collectives over raw
//! packets, fewer servers than partitions where no grouping of leaves keeps them whole
//! (else the servers go to the partitions with their NICs placed apart from their
//! leaves: `Plan::servers_apart`), training jobs, a
//! flow that waits on one landing at another host, a fabric of one leaf or one spine.
//! A run that the livelock check, the watchdog or the memory budget stops in any
//! partition, or in which a switch port's credit wake-ups cannot be made one thread's
//! (`reconcile_credits`), is run again on one thread, so that what it reports is the
//! one-thread run's; so is one whose windows hold too little work to pay for the
//! meetings ([`MIN_EVENTS_PER_WINDOW`]), after its first windows, and one whose
//! collective launches its next iteration within the window that ended the last (a
//! launch shorter than the lookahead: `parallel_coll::LAUNCH_IN_WINDOW`).

use super::idmap::IdMap;
use super::parallel_retire::RxSide;
use super::partition::{Plan, PortBits};
use super::run_loop::LoopState;
use super::sampler::Resolved;
use super::transport::QpOpen;
use super::window::{lock, BreakOnPanic, Flight, PoolLog, WindowBarrier};
use super::{FlowState, RcTotals, RunOutput, Sim, Sources, LIVELOCK_CHECK, PROGRESS};
use crate::cc::Telemetry;
use crate::collective::Xfer;
use crate::components::{FlowControl, OnWire};
use crate::engine::{Event, EventQueue, FlowId, PortId, Source};
use crate::packet::Packet;
use crate::scenario::{Scenario, Transport};
use crate::transport::rc::Op;
use crate::units::{SimDuration, SimTime};
use crate::workload::Workload;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one partition sends another at a barrier.
#[derive(Debug)]
pub(super) enum Msg {
    /// A packet put on `port`'s wire, whose far end is the other partition's.
    Packet {
        port: PortId,
        on_wire: OnWire,
        packet: Packet,
    },
    /// An event for one of the other partition's components, under the key it was
    /// given here.
    Event { key: u128, event: Event },
    /// IB credits on their way back to the other partition's switch port, under the key
    /// their event would have (`EgressPort::credits_returning`).
    Returning {
        port: PortId,
        key: u128,
        blocks: u32,
        /// The key of the event that let them go (where one thread would have decided
        /// the port's wake-up).
        pushed: u128,
    },
    /// A requester here opened queue pair `slot` (its number here) towards a responder
    /// there, which builds its own copy.
    QpOpen { slot: u32, open: QpOpen },
    /// `flow` goes over queue pair `slot`.
    FlowQp { flow: FlowId, slot: u32 },
    /// Queue pair `slot`'s responder posts its receive WQEs under `key` (at
    /// `recv_post_delay` after the queue pair opened, never within the window: the run
    /// splits only when the delay is no shorter than the lookahead).
    RecvPost { slot: u32, key: u128 },
    /// Queue pair `slot`'s requester retired it: its responder answers what reaches it
    /// before `until` (one path latency later, so never within the window it retired
    /// in: every path between partitions crosses a link of the lookahead or longer).
    QpClosed { slot: u32, until: SimTime },
    /// A collective's transfer record made there, in slot `id`: run `run`'s transfer
    /// `xfer` (`parallel_coll`).
    Transfer {
        id: FlowId,
        state: Box<FlowState>,
        run: u32,
        xfer: u32,
        record: Xfer,
    },
    /// Run `run`'s transfer `xfer`, numbered here, landed there: its number is free.
    GiveBack { run: u32, xfer: u32 },
    /// Transfer record `id`, made here, is done on its receiving side there
    /// (`parallel_retire`).
    RxSide { id: FlowId, side: Box<RxSide> },
    /// A packet of transfer record `id`, made here, was lost there.
    Dropped { id: FlowId },
    /// Transfer `xfer` of connection `conn` (its run first), sent here in `parts` parts,
    /// lands there: what its landing reads with several queue pairs a connection
    /// (`Sim::expect_landing`).
    Landing {
        xfer: u32,
        conn: super::CollConn,
        parts: u32,
        in_order: bool,
    },
}

impl Msg {
    /// No event this message makes at the far end is earlier (ps); `end`: the end of
    /// the window it was made in (credits on their way back may wake a port under an
    /// older key, never one before it).
    fn earliest(&self, end: SimTime) -> Option<u64> {
        match self {
            Msg::Packet { on_wire, .. } => Some(on_wire.arrive.0),
            Msg::Event { key, .. } | Msg::RecvPost { key, .. } => Some((key >> 64) as u64),
            Msg::Returning { .. } => Some(end.0),
            Msg::QpOpen { .. }
            | Msg::FlowQp { .. }
            | Msg::QpClosed { .. }
            | Msg::Transfer { .. }
            | Msg::GiveBack { .. }
            | Msg::RxSide { .. }
            | Msg::Dropped { .. }
            | Msg::Landing { .. } => None,
        }
    }
}

/// A transfer record made in a window: the key of the event that made it, its tie order
/// within that event, its slot (`parallel_retire::number_window`).
pub(super) type Made = (u128, u32, FlowId);

/// A packet's per-hop telemetry and send time, beside it in the pool.
pub(super) type Side = (Telemetry, SimTime);

/// What one partition sends another in a window: messages, and the side tables of the
/// packets among them (when the algorithm reads them), in the same order.
type Mail = (Vec<Msg>, Vec<Side>);

/// How many messages ahead a packet's memory is asked for as the mail is copied and put
/// in place.
const PREFETCH_AHEAD: usize = 16;

/// A partition's share of a run split over threads.
#[derive(Debug)]
pub(super) struct Part {
    pub me: u16,
    pub plan: Arc<Plan>,
    /// The ports whose far end (wire and ingress) is another partition's, and those
    /// whose sending side is (`Plan::receiver`, `Plan::sender` not `me`).
    pub far_elsewhere: PortBits,
    pub near_elsewhere: PortBits,
    /// What goes to each partition at the next barrier, in the order it was made.
    pub outbox: Vec<Vec<Msg>>,
    /// Beside each packet in `outbox`, when the algorithm reads them: its per-hop
    /// telemetry and send time (the pool's side tables).
    pub side_out: Vec<Vec<Side>>,
    /// Per event that changed the packets alive: its key, the change, and the most they
    /// rose within it.
    pub pool_log: PoolLog,
    /// The responder copies of other partitions' queue pairs: their slot here by
    /// (partition, slot there); per slot here, whether it is such a copy.
    mirrors: IdMap<(u16, u32), u32>,
    mirror: Vec<bool>,
    /// This partition could not follow the one-thread order, and why (a switch port's
    /// credit wake-ups, `reconcile_credits`): the run goes again on one thread.
    pub diverged: Option<&'static str>,
    /// IB: the switch ports here whose credits come back from another partition; for
    /// each touched in this window, its credit state before the window and what each
    /// of its events did (`CreditLogs`); the returns taken at the barrier; scratch for
    /// `reconcile_credits`.
    credit_cross: PortBits,
    credit_logs: credits::CreditLogs,
    returns: Vec<(PortId, u128, u128, u32)>,
    credit_scratch: credits::Scratch,
    /// The end of the last window: keys before it are handled.
    pub window_end: SimTime,
    /// Collectives (`parallel_coll`): transfer record slots given out here so far; the
    /// key, tie order and slot of each made here; whether the event being handled is a
    /// run's wake-up.
    pub fresh_transfers: u32,
    pub created: Vec<Made>,
    pub coll_wake: bool,
    /// Events every partition handles (a run's start and wake-ups), counted once in
    /// the run's events.
    pub everywhere: u64,
    /// Transfer records (`parallel_retire`): the receiving sides of those made here
    /// that landed elsewhere; a sweep's candidates between its two meetings, and the
    /// transfers this partition's packets named at the first.
    pub rx_sides: IdMap<FlowId, RxSide>,
    pub sweep: Option<Vec<FlowId>>,
    pub named: Vec<FlowId>,
}

/// Why `sc` cannot be split over threads, if it cannot.
pub fn unsupported(sc: &Scenario) -> Option<&'static str> {
    if let Transport::Rc(rc) = &sc.transport {
        if rc.operation == Op::Read {
            return Some("RDMA READ");
        }
    }
    for (item, w) in sc.workload.iter().enumerate() {
        match w {
            Workload::Collective(c) => {
                if let Some(why) = super::parallel_coll::collective_unsupported(sc, item, c) {
                    return Some(why);
                }
            }
            Workload::Training(_) => return Some("training jobs"),
            _ => {}
        }
    }
    None
}

/// The number of threads `run` splits a scenario over, or why it runs on one.
pub fn plan_threads(sc: &Scenario, threads: usize) -> Result<u16, &'static str> {
    if threads <= 1 {
        return Ok(1);
    }
    if let Some(why) = unsupported(sc) {
        return Err(why);
    }
    // No more partitions than leaves or spines: each takes at least one of each.
    let most = sc.topology.leaves.min(sc.topology.spines) as usize;
    if most < 2 {
        return Err("a fabric of one leaf or one spine");
    }
    Ok(threads.min(most).min(u16::MAX as usize) as u16)
}

/// Threads each run is split over when `runs_at_once` runs go side by side (a compare's
/// sets under `run -j`) on a machine of `cores` cores: the sets come first, since
/// they share nothing and keep a core busy without waiting at a barrier, and the runs'
/// threads together stay within the cores (at least one each). A single run keeps what
/// was asked (more threads than cores only costs time: its windows wait on each other).
pub fn threads_per_run(asked: usize, runs_at_once: usize, cores: usize) -> usize {
    if runs_at_once <= 1 {
        return asked.max(1);
    }
    asked.min(cores / runs_at_once).max(1)
}

impl Sim {
    /// Partition `me` of `plan`: the whole fabric, with only the flow starts of its own
    /// hosts scheduled.
    fn new_part(sc: &Scenario, plan: Arc<Plan>, me: u16) -> Sim {
        let mut sim = Sim::new(sc);
        let flows = &sim.flows;
        sim.start_order
            .retain(|&f| plan.host(flows[f as usize].def.src) == me);
        sim.q = EventQueue::new(sim.src.count());
        if let Some(&first) = sim.start_order.first() {
            let at = sim.flows[first as usize].def.start;
            sim.q
                .schedule(at, Sources::WORKLOAD, Event::FlowStart { flow: first });
        }
        let ib = matches!(sc.flow_control, FlowControl::IbCredit { .. });
        let ports = sim.ports.len();
        let credit_cross = PortBits::new(ports, |p| {
            ib && sim.ports[p as usize].switch.is_some()
                && plan.sender(p) == me
                && plan.receiver(p) != me
        });
        sim.part = Some(Box::new(Part {
            me,
            far_elsewhere: PortBits::new(ports, |p| plan.receiver(p) != me),
            near_elsewhere: PortBits::new(ports, |p| plan.sender(p) != me),
            outbox: (0..plan.parts).map(|_| Vec::new()).collect(),
            side_out: (0..plan.parts).map(|_| Vec::new()).collect(),
            plan,
            pool_log: PoolLog::default(),
            mirrors: IdMap::default(),
            mirror: Vec::new(),
            diverged: None,
            credit_cross,
            credit_logs: Default::default(),
            returns: Vec::new(),
            credit_scratch: Default::default(),
            window_end: SimTime::ZERO,
            fresh_transfers: 0,
            created: Vec::new(),
            coll_wake: false,
            everywhere: 0,
            rx_sides: IdMap::default(),
            sweep: None,
            named: Vec::new(),
        }));
        let plan = sim.part.as_ref().expect("just set").plan.clone();
        sim.split_collectives(&plan, me);
        sim
    }

    /// At a window's end (`end`): the packets handed off in it are copied into their
    /// messages (`PacketPool::hand_off`), together; returns the earliest time (ps) the
    /// outbox's messages make anything happen at the far end (`Msg::earliest`;
    /// `u64::MAX` for none), found in the same pass.
    fn copy_handed(&mut self, end: SimTime) -> u64 {
        let part = self.part.as_deref_mut().expect("a partition");
        let mut earliest = u64::MAX;
        for out in &mut part.outbox {
            for i in 0..out.len() {
                if let Some(Msg::Packet { on_wire, .. }) = out.get(i + PREFETCH_AHEAD) {
                    self.pool.prefetch(on_wire.pkt);
                }
                let m = &mut out[i];
                if let Msg::Packet {
                    on_wire, packet, ..
                } = m
                {
                    *packet = self.pool.release(on_wire.pkt);
                }
                if let Some(at) = m.earliest(end) {
                    earliest = earliest.min(at);
                }
            }
        }
        earliest
    }

    /// After an event, in a partition: logs its change to the packets alive.
    #[inline]
    pub(super) fn log_pool(&mut self, key: u128) {
        let (change, rise) = self.pool.take_marks();
        if change != 0 || rise != 0 {
            if let Some(p) = self.part.as_deref_mut() {
                p.pool_log.push(key, change, rise);
            }
        }
    }

    /// `flow` goes over queue pair `slot`, opened now if `open`: the responder's
    /// partition hears of it if it is another.
    pub(super) fn tell_responder(&mut self, flow: FlowId, slot: u32, open: Option<QpOpen>) {
        let Some(part) = self.part.as_deref_mut() else {
            return;
        };
        let to = part.plan.host(self.flows[flow as usize].def.dst);
        if to == part.me {
            return;
        }
        if let Some(open) = open {
            part.outbox[to as usize].push(Msg::QpOpen { slot, open });
        }
        part.outbox[to as usize].push(Msg::FlowQp { flow, slot });
    }

    /// In a split run where queue pair `slot`'s responder is another partition's: that
    /// partition.
    fn responder_elsewhere(&self, slot: u32) -> Option<usize> {
        self.host_elsewhere(self.qps[slot as usize].dst)
    }

    /// The receive WQEs of queue pair `slot` are posted at `at` by the responder's
    /// host: if that is another partition's, it is told (under the key the event gets
    /// from `source` here, as on one thread) and true is returned.
    pub(super) fn recv_post_elsewhere(&mut self, at: SimTime, source: Source, slot: u32) -> bool {
        let Some(to) = self.responder_elsewhere(slot) else {
            return false;
        };
        let key = self.q.reserve(at, source);
        let part = self.part.as_deref_mut().expect("a partition");
        part.outbox[to].push(Msg::RecvPost { slot, key });
        true
    }

    /// Queue pair `slot` retired now: the responder's partition hears of it.
    pub(super) fn tell_responder_closed(&mut self, slot: u32) {
        if let Some(to) = self.responder_elsewhere(slot) {
            let until = self.qps[slot as usize].responder_until();
            let part = self.part.as_deref_mut().expect("a partition");
            part.outbox[to].push(Msg::QpClosed { slot, until });
        }
    }

    /// At a barrier: puts in place what partition `from` sent this one.
    fn take_messages(&mut self, from: u16, (msgs, side): &mut Mail) {
        let mut side = side.drain(..);
        let mut msgs = msgs.drain(..);
        loop {
            // The wires and pool slots of packets some messages on, loaded while these
            // are put in place (each at a random place in memory): a wire's fields
            // first, then the slot its ring fills, with the pool slot that packet takes
            // if the messages between are packets too.
            let ahead = msgs.as_slice();
            if let Some(Msg::Packet { port, .. }) = ahead.get(2 * PREFETCH_AHEAD) {
                crate::engine::prefetch_ptr(&self.wires[*port as usize]);
            }
            if let Some(Msg::Packet { port, .. }) = ahead.get(PREFETCH_AHEAD) {
                self.wires[*port as usize].prefetch_tail();
                self.pool.prefetch_free(PREFETCH_AHEAD);
            }
            let Some(m) = msgs.next() else { break };
            match m {
                Msg::QpOpen { slot, open } => {
                    let params = self.rc.as_ref().expect("RC").params;
                    let qp = self.open_queue_pair(params, &open);
                    let part = self.part.as_deref_mut().expect("a partition");
                    match part.mirrors.get(&(from, slot)) {
                        Some(&local) => self.replace_queue_pair(local, qp),
                        None => {
                            let local = self.qps.len() as u32;
                            self.qps.push(qp);
                            part.mirrors.insert((from, slot), local);
                            part.mirror.resize(self.qps.len(), false);
                            part.mirror[local as usize] = true;
                        }
                    }
                }
                Msg::FlowQp { flow, slot } => {
                    let part = self.part.as_deref().expect("a partition");
                    let local = part.mirrors[&(from, slot)];
                    let f = &mut self.flows[flow as usize];
                    f.qp = local;
                    f.qp_gen = self.qps[local as usize].gen;
                }
                Msg::RecvPost { slot, key } => {
                    let part = self.part.as_deref().expect("a partition");
                    // Its queue pair came in the same mail, before it.
                    let local = part.mirrors[&(from, slot)];
                    let gen = self.qps[local as usize].gen;
                    self.q
                        .schedule_reserved(key, Event::RecvPost { qp: local, gen });
                }
                Msg::QpClosed { slot, until } => {
                    let part = self.part.as_deref_mut().expect("a partition");
                    debug_assert!(
                        until >= part.window_end,
                        "a responder stops answering within the window its requester retired in"
                    );
                    if until < part.window_end {
                        // A packet of the window may have been answered where one thread
                        // would have dropped it (never, while every path between
                        // partitions is no shorter than the lookahead).
                        part.diverged.get_or_insert(CLOSED_LATE);
                    }
                    let local = part.mirrors[&(from, slot)] as usize;
                    self.qps[local].retire(until);
                }
                Msg::Packet {
                    port,
                    mut on_wire,
                    packet,
                } => {
                    on_wire.pkt = self.pool.take_in(packet);
                    if self.telemetry || self.timestamps {
                        let (t, sent) = side.next().expect("a packet's side tables");
                        self.pool.set_telemetry(on_wire.pkt, t);
                        self.pool.set_sent_at(on_wire.pkt, sent);
                    }
                    if let Some(at) = self.wires[port as usize].receive(on_wire) {
                        self.q
                            .schedule(at, self.src.wire(port), Event::Arrive { port });
                    }
                }
                // Credits for a host's port from its leaf in another partition: kept on
                // their way back, as its leaf would keep them on one thread
                // (`Sim::upstream`), so the events are the same at any thread count.
                Msg::Event {
                    key,
                    event: Event::Credit { port, blocks },
                } if blocks > 0 && self.ports[port as usize].switch.is_none() => {
                    self.keep_returning(port, key, blocks)
                }
                Msg::Event { key, event } => self.q.schedule_reserved(key, event),
                Msg::Transfer {
                    id,
                    state,
                    run,
                    xfer,
                    record,
                } => self.take_transfer(id, *state, run, xfer, record),
                Msg::GiveBack { run, xfer } => self.colls[run as usize].give_back(xfer),
                Msg::RxSide { id, side } => {
                    let part = self.part.as_deref_mut().expect("a partition");
                    part.rx_sides.insert(id, *side);
                }
                Msg::Dropped { id } => self.flows[id as usize].packets_dropped += 1,
                Msg::Landing {
                    xfer,
                    conn,
                    parts,
                    in_order,
                } => self.expect_landing(xfer, conn, parts, in_order),
                Msg::Returning {
                    port,
                    key,
                    blocks,
                    pushed,
                } => {
                    let part = self.part.as_deref_mut().expect("a partition");
                    part.returns.push((port, pushed, key, blocks));
                }
            }
        }
    }
}

/// The earliest time (ps) with an event, `u64::MAX` for none.
fn next_time(q: &EventQueue) -> u64 {
    q.peek_time().map_or(u64::MAX, |t| t.0)
}

/// A split run pays for a meeting of its partitions each window (about 2.7 us on the
/// 2-core VM of stop 47, waiting and handing over included): one whose partitions
/// together handle fewer events a window than this, over its first
/// [`WORK_CHECK_WINDOWS`] windows, goes on on one thread. Measured on the shipped
/// scenarios at 2 threads against one (stop 47, one run each): 6-11 events a window
/// took 3.7-5.9x the one-thread time (`guide-doorbell`'s sets, windows of its 100 ns
/// links), 38-64 took 1.0-5.4x (`incast`, `incast-dcqcn`), 84 took 0.81x
/// (`one-vs-two-hops`), 271 and more 0.47-0.69x. `DOORBELL_SPLIT_MIN_EVENTS` sets it
/// (0: always split).
pub const MIN_EVENTS_PER_WINDOW: u64 = 64;

/// The windows over which a split run's work is weighed against
/// [`MIN_EVENTS_PER_WINDOW`]: what a split that does not pay wastes at most.
pub const WORK_CHECK_WINDOWS: u64 = 1024;

static MIN_EVENTS: AtomicU64 = AtomicU64::new(MIN_EVENTS_PER_WINDOW);

/// Every later split run in this process goes on on one thread when its partitions
/// handle fewer than `n` events a window over its first windows (0: never).
pub fn set_min_events_per_window(n: u64) {
    MIN_EVENTS.store(n, Ordering::Relaxed);
}

/// What [`set_min_events_per_window`] set.
pub fn min_events_per_window() -> u64 {
    MIN_EVENTS.load(Ordering::Relaxed)
}

/// Why a split run went on on one thread: see [`MIN_EVENTS_PER_WINDOW`].
const TOO_LITTLE_WORK: &str = "too few events per window to pay for the partitions' meetings \
     (on average over the first 1,024 windows, under DOORBELL_SPLIT_MIN_EVENTS: 64 unless set)";

/// Why a split run went again on one thread: see `reconcile_credits`.
const DIVERGED: &str = "a switch port's credit wake-ups differed from one thread's";
/// Why a split run went again on one thread: see `Msg::QpClosed`.
const CLOSED_LATE: &str = "a queue pair's responder heard of its retirement late";

/// The barrier's shared state. The partitions meet once a window; what each leaves for
/// the others before a meeting is read after it, while a partition may already be
/// writing what the next meeting's readers will need, so those slots come in two sets,
/// by the parity of the meeting (`[meeting % 2]`): a slot of one parity is written
/// again only after the next meeting, which every reader of it reaches only after
/// reading it.
struct Shared {
    barrier: WindowBarrier,
    /// `mail[parity][to][from]`: what partition `from` sent `to` in the window before
    /// the meeting.
    mail: [Vec<Vec<Mutex<Mail>>>; 2],
    /// `next[parity][i]`: no event of the run, partition `i`'s own or one its mail will
    /// make, is earlier (ps).
    next: [Vec<AtomicU64>; 2],
    /// `halt[parity][i]`: partition `i` stops at this meeting (the reason is in `why`).
    halt: [Vec<AtomicBool>; 2],
    /// `work[parity][i]`: the events partition `i` handled before the meeting.
    work: [Vec<AtomicU64>; 2],
    /// `logs[parity][i]`: partition `i`'s pool log of the window before the meeting.
    logs: [Vec<Mutex<PoolLog>>; 2],
    /// `done[parity][i * runs + r]`: when partition `i`'s ranks of collective run `r`
    /// finished its current iteration (`u64::MAX`: not yet), before the meeting.
    done: [Vec<AtomicU64>; 2],
    /// Transfer records (`parallel_retire`): `created[parity][i]` the transfers partition
    /// `i` made in the window before the meeting; `sweep[parity][i]` whether it holds
    /// enough records for a sweep; `named[parity][i]` the transfers its packets named at
    /// the meeting a sweep started.
    created: [Vec<Mutex<Vec<Made>>>; 2],
    sweep: [Vec<AtomicBool>; 2],
    named: [Vec<Mutex<Vec<FlowId>>>; 2],
    /// Each partition's events handled so far (for the progress line).
    events: Vec<AtomicU64>,
    /// Each partition's wall time running its windows and waiting at the barrier,
    /// nanoseconds (perf.json: where a split run's time went).
    worked_ns: Vec<AtomicU64>,
    waited_ns: Vec<AtomicU64>,
    /// A partition stopped for a reason of its own (livelock, watchdog, memory) or
    /// could not follow the one-thread order; and why.
    cut: AtomicBool,
    why: Mutex<Option<&'static str>>,
    /// `resolved[i]`: partition `i`'s word before a long gap (`sampler::Resolved`).
    resolved: Vec<Mutex<Resolved>>,
}

impl Shared {
    fn stop(&self, why: &'static str) {
        lock(&self.why).get_or_insert(why);
        self.cut.store(true, Ordering::SeqCst);
    }
}

/// Runs `sc` split over `threads` partitions; the reason instead when it cannot be
/// split (see [`plan_threads`]), its first windows held fewer than
/// `min_events_per_window` events each on average (0: never checked), or a partition
/// stopped for a reason of its own or could not follow the one-thread order (the
/// caller then runs it on one thread).
pub fn run(
    sc: &Scenario,
    threads: usize,
    min_events_per_window: u64,
) -> Result<RunOutput, &'static str> {
    let parts = plan_threads(sc, threads)?;
    if parts <= 1 {
        return Err("one thread asked for, or one leaf or spine to split");
    }
    let graph = sc.topology.graph();
    // The flows each partition's copy will make, weighed in packets to balance the split
    // (and dropped before the run starts).
    let plan = {
        let flows = crate::workload::expand(
            &sc.workload,
            sc.topology.hosts(),
            sc.topology.host_link.rate.0,
            sc.seed,
        );
        // A flow that waits on another (a ping-pong's reply) is started where that one
        // lands, by the receiver's NIC, so it must leave from there: one partition's.
        if flows
            .iter()
            .any(|f| f.after.is_some_and(|a| flows[a as usize].dst != f.src))
        {
            return Err("a flow waits on one that lands at another host");
        }
        let traffic = flows
            .iter()
            .map(|f| (f.src, f.dst, f.size.div_ceil(sc.mtu).max(1)));
        let collectives = sc
            .workload
            .iter()
            .any(|w| matches!(w, Workload::Collective(_)));
        match (&sc.host, collectives) {
            // A server's ranks move data between them where both are: servers whole.
            (Some(h), true) => {
                let server_of =
                    |port: u32| (port < h.servers * h.nics_per_host).then(|| h.server_of(port));
                let leaves = sc.topology.leaves;
                Arc::new(
                    Plan::servers_whole(&graph, leaves, parts, server_of)
                        .or_else(|| {
                            Plan::servers_apart(&graph, leaves, parts, h.servers, server_of)
                        })
                        .ok_or(
                            "servers spread over more leaves than the partitions can keep \
                             whole, and fewer servers than partitions",
                        )?,
                )
            }
            _ => Arc::new(Plan::balanced(&graph, sc.topology.leaves, parts, traffic)),
        }
    };
    if plan.crossing_links == 0 {
        return Err("no link between partitions");
    }
    if plan.lookahead.0 == 0 {
        return Err("a link between partitions has no latency (no lookahead)");
    }
    if let Transport::Rc(rc) = &sc.transport {
        // The responder's partition must hear of its queue pair's receive posting
        // before it is due.
        if rc.recv_post_delay > SimDuration::ZERO && rc.recv_post_delay < plan.lookahead {
            return Err("a receive-posting delay shorter than the lookahead");
        }
    }
    let n = parts as usize;
    let runs = sc
        .workload
        .iter()
        .filter(|w| matches!(w, Workload::Collective(_)))
        .count();
    let shared = Shared {
        barrier: WindowBarrier::new(n),
        mail: std::array::from_fn(|_| {
            (0..n)
                .map(|_| (0..n).map(|_| Mutex::new(Mail::default())).collect())
                .collect()
        }),
        next: std::array::from_fn(|_| (0..n).map(|_| AtomicU64::new(u64::MAX)).collect()),
        halt: std::array::from_fn(|_| (0..n).map(|_| AtomicBool::new(false)).collect()),
        work: std::array::from_fn(|_| (0..n).map(|_| AtomicU64::new(0)).collect()),
        logs: std::array::from_fn(|_| (0..n).map(|_| Mutex::new(PoolLog::default())).collect()),
        done: std::array::from_fn(|_| (0..n * runs).map(|_| AtomicU64::new(u64::MAX)).collect()),
        created: std::array::from_fn(|_| (0..n).map(|_| Mutex::new(Vec::new())).collect()),
        sweep: std::array::from_fn(|_| (0..n).map(|_| AtomicBool::new(false)).collect()),
        named: std::array::from_fn(|_| (0..n).map(|_| Mutex::new(Vec::new())).collect()),
        events: (0..n).map(|_| AtomicU64::new(0)).collect(),
        worked_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
        waited_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
        cut: AtomicBool::new(false),
        why: Mutex::new(None),
        resolved: (0..n).map(|_| Mutex::new(Resolved::default())).collect(),
    };
    let flight = Mutex::new(Flight::default());
    let wall = std::time::Instant::now();
    let lookahead = plan.lookahead;
    let limit = LoopState::new(sc.duration).limit;
    let min_work = min_events_per_window.saturating_mul(WORK_CHECK_WINDOWS);
    let windows = AtomicU64::new(0);
    let finished: Vec<(Sim, LoopState, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..parts)
            .map(|me| {
                let (shared, plan, flight, windows) = (&shared, plan.clone(), &flight, &windows);
                s.spawn(move || {
                    // A partition that panics breaks the barrier, so that the others
                    // leave instead of waiting for it; the panic then reaches the caller.
                    let _breaks = BreakOnPanic(&shared.barrier);
                    let mut sim = Sim::new_part(sc, plan, me);
                    let mut st = LoopState::new(sc.duration);
                    let m = me as usize;
                    let mut told = 0;
                    let mut budget = shared.barrier.first_budget();
                    let mut done_here = vec![u64::MAX; runs];
                    // Transfers numbered so far (the same count in every partition).
                    let mut numbered = 0u32;
                    let (mut worked, mut waited) = (Duration::ZERO, Duration::ZERO);
                    // Before the first meeting: no mail, the partition's own events.
                    let (mut meeting, mut next, mut halt) = (0usize, next_time(&sim.q), None);
                    let stopped = loop {
                        let b = meeting % 2;
                        shared.next[b][m].store(next, Ordering::SeqCst);
                        shared.halt[b][m].store(halt.is_some(), Ordering::SeqCst);
                        shared.work[b][m].store(sim.q.events_processed(), Ordering::SeqCst);
                        sim.iterations_done_here(&mut done_here);
                        for (r, &d) in done_here.iter().enumerate() {
                            shared.done[b][m * runs + r].store(d, Ordering::SeqCst);
                        }
                        {
                            // Each slot is read by every partition between this meeting
                            // and the next, and written again only after that one.
                            let part = sim.part.as_deref_mut().expect("a partition");
                            *lock(&shared.created[b][m]) = std::mem::take(&mut part.created);
                            shared.sweep[b][m].store(
                                part.sweep.is_none() && sim.slots.wants_sweep(),
                                Ordering::SeqCst,
                            );
                            let part = sim.part.as_deref_mut().expect("a partition");
                            *lock(&shared.named[b][m]) = std::mem::take(&mut part.named);
                        }
                        if let Some(why) = halt {
                            shared.stop(why);
                        }
                        let arrived = std::time::Instant::now();
                        let met = shared.barrier.wait(&mut budget);
                        waited += arrived.elapsed();
                        if !met {
                            break false;
                        }
                        meeting += 1;
                        // Every partition reads the same slots, so all stop at the same
                        // meeting, or none does.
                        if shared.halt[b].iter().any(|h| h.load(Ordering::SeqCst)) {
                            break false;
                        }
                        let t = shared.next[b]
                            .iter()
                            .map(|x| x.load(Ordering::SeqCst))
                            .min()
                            .unwrap_or(u64::MAX);
                        // Collectives whose ranks are done everywhere end their
                        // iteration; their next wake-ups count among the events.
                        let ends: Vec<Option<SimTime>> = (0..runs)
                            .map(|r| {
                                (0..n)
                                    .map(|i| shared.done[b][i * runs + r].load(Ordering::SeqCst))
                                    .try_fold(0u64, |latest, d| {
                                        (d != u64::MAX).then_some(latest.max(d))
                                    })
                                    .map(SimTime)
                            })
                            .collect();
                        let t = sim.end_iterations(&ends).map_or(t, |w| t.min(w));
                        {
                            let logs: Vec<_> = shared.created[b].iter().map(lock).collect();
                            let lists: Vec<&[Made]> = logs.iter().map(|g| g.as_slice()).collect();
                            numbered += sim.number_window(&lists, numbered);
                        }
                        if me == 0 {
                            {
                                // The window before the meeting's logs, folded in place:
                                // each log keeps its allocation.
                                let mut held: Vec<_> = shared.logs[b].iter().map(lock).collect();
                                let mut logs: Vec<&mut PoolLog> =
                                    held.iter_mut().map(|g| &mut **g).collect();
                                lock(flight).fold(&mut logs);
                            }
                            // The progress line hears of every partition's events (one
                            // thread tells it every LIVELOCK_CHECK events).
                            let all: u64 =
                                shared.events.iter().map(|e| e.load(Ordering::SeqCst)).sum();
                            if all >= told + LIVELOCK_CHECK {
                                told = all;
                                if let Some(p) = PROGRESS.get() {
                                    p(
                                        SimTime(t).min(limit),
                                        sc.duration.map(|d| SimTime(d.0)),
                                        all,
                                    );
                                }
                            }
                        }
                        // Each slot is emptied in place, its vectors' capacity kept for
                        // the writer's next window (not allocated anew each one); the
                        // writer writes the other parity's slots meanwhile.
                        for from in 0..n {
                            sim.take_messages(from as u16, &mut lock(&shared.mail[b][m][from]));
                        }
                        sim.reconcile_credits();
                        // A sweep of transfer records: its candidates and names at one
                        // meeting, the records retired at the next (`parallel_retire`).
                        let part = sim.part.as_deref_mut().expect("a partition");
                        if let Some(candidates) = part.sweep.take() {
                            let held: Vec<_> = shared.named[b].iter().map(lock).collect();
                            let named: Vec<&[FlowId]> = held.iter().map(|g| g.as_slice()).collect();
                            sim.retire_candidates(&candidates, &named);
                        } else if shared.sweep[b].iter().any(|s| s.load(Ordering::SeqCst)) {
                            let (candidates, named) = sim.sweep_candidates();
                            let part = sim.part.as_deref_mut().expect("a partition");
                            part.sweep = Some(candidates);
                            part.named = named;
                        }
                        // A time series' long gap: the partitions agree where the
                        // samples end (`Sampling::know_end`); all have the same samples
                        // and `t`, so all wait here a second time, or none.
                        if t != u64::MAX && sim.sampling.long_gap_to(SimTime(t.min(limit.0))) {
                            *lock(&shared.resolved[m]) = sim.resolved_here();
                            if !shared.barrier.wait(&mut budget) {
                                break false;
                            }
                            sim.sampling.know_end(&Resolved::join(&shared.resolved));
                        }
                        // The run ends at this meeting (every partition reads the same
                        // `t`) only now, with the last window's logs merged and its mail
                        // taken, so that a credit wake-up it got wrong is still found.
                        let ends = t == u64::MAX || t > limit.0;
                        // After the first windows (one meeting precedes the first), every
                        // partition weighs the same counts, before its own verdicts: all
                        // go on, or none (a run that ends here just ends).
                        if !ends
                            && meeting as u64 == WORK_CHECK_WINDOWS + 1
                            && shared.work[b]
                                .iter()
                                .map(|w| w.load(Ordering::SeqCst))
                                .sum::<u64>()
                                < min_work
                        {
                            shared.stop(TOO_LITTLE_WORK);
                            break false;
                        }
                        if let Some(why) = sim.part.as_deref().and_then(|p| p.diverged) {
                            if ends {
                                shared.stop(why);
                                break false;
                            }
                            // Not run further: the others stop at the next meeting.
                            (next, halt) = (t, Some(why));
                            continue;
                        }
                        if ends {
                            if t != u64::MAX {
                                // Cut short by the duration: its samples up to the end.
                                sim.sample_through(limit);
                            }
                            break t != u64::MAX;
                        }
                        let end = SimTime(t.saturating_add(lookahead.0).min(limit.0 + 1));
                        let started = std::time::Instant::now();
                        sim.advance(&mut st, Some(end));
                        worked += started.elapsed();
                        if me == 0 {
                            windows.fetch_add(1, Ordering::Relaxed);
                        }
                        sim.part.as_deref_mut().expect("a partition").window_end = end;
                        // The earliest event after the window, with those its mail makes
                        // at the far end: a packet's arrival, an event under its key,
                        // credits coming back (no earlier than the window's end), found
                        // as the handed packets are copied (nothing is mailed after).
                        next = next_time(&sim.q).min(sim.copy_handed(end));
                        let nb = meeting % 2;
                        let part = sim.part.as_deref_mut().expect("a partition");
                        for (to, out) in part.outbox.iter_mut().enumerate() {
                            if !out.is_empty() {
                                let mut mail = lock(&shared.mail[nb][to][m]);
                                // Into the vector its reader emptied, which keeps its
                                // capacity (a swap instead, so no copy: websearch-128
                                // 1.063x, 8 alternating pairs; stop 60 measured 1.009x).
                                mail.0.append(out);
                                mail.1.append(&mut part.side_out[to]);
                            }
                        }
                        lock(&shared.logs[nb][m]).append(&mut part.pool_log);
                        shared.events[m].store(sim.q.events_processed(), Ordering::SeqCst);
                        halt = st.halt_reason(sim.must_rerun_stepped());
                    };
                    shared.worked_ns[m].store(worked.as_nanos() as u64, Ordering::SeqCst);
                    shared.waited_ns[m].store(waited.as_nanos() as u64, Ordering::SeqCst);
                    (sim, st, stopped)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a partition's thread"))
            .collect()
    });
    if shared.cut.load(Ordering::SeqCst) {
        return Err(lock(&shared.why).unwrap_or("a partition stopped"));
    }
    // Every window's logs were merged, the last one's too.
    debug_assert!(shared.logs.iter().flatten().all(|l| lock(l).is_empty()));
    let peak = lock(&flight).peak;
    let mut out = merge(finished, &plan, wall, peak);
    out.hosts_apart = plan.hosts_apart;
    out.windows = windows.into_inner();
    let seconds = |v: &[AtomicU64]| -> Vec<f64> {
        v.iter()
            .map(|x| x.load(Ordering::SeqCst) as f64 * 1e-9)
            .collect()
    };
    out.partition_work_seconds = seconds(&shared.worked_ns);
    out.partition_wait_seconds = seconds(&shared.waited_ns);
    Ok(out)
}

#[path = "parallel_merge.rs"]
pub(super) mod merge;
use merge::merge;

#[cfg(test)]
#[path = "parallel_tests.rs"]
mod tests;

#[path = "parallel_credits.rs"]
mod credits;

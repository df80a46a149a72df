//! The event loop's glue for the transport: flows onto RC queue pairs (or bare packets),
//! the NIC's send scheduler picking the next packet, acknowledgements, READ responses,
//! completions and congestion notifications. The protocol rules live in
//! `transport::rc` (sans-IO queue pairs) and `cc`; this file moves their inputs and
//! outputs between the packets and the queue pairs.

use super::{Outcome, Sim, Todo, NO_QP, RAW_JOB};
use crate::components::qp::{Direction, QueuePair};
use crate::engine::{Event, FlowId, PktId};
use crate::packet::{
    Packet, PktKind, AETH_BYTES, CNP_PAYLOAD_BYTES, FLAG_ECN, FLAG_FIRST, FLAG_LAST, FLAG_NO_AR,
    FLAG_RETX, FLAG_REVERSE, FLAG_TELEMETRY, RETH_BYTES,
};
use crate::rng::{stream_seed, Stream};
use crate::routing::roce_qp_hashes;
use crate::scenario::Connections;
use crate::transport::rc::{AckInfo, AckKind, Op, RcParams, TxRequest, WcStatus};
use crate::units::{SimDuration, SimTime};

/// An RC queue pair (`components::qp`).
pub(super) type Qp = QueuePair;

/// What opens a queue pair: enough for either end to build it (`open_queue_pair`; a run
/// split over threads builds the responder's copy at its own end, `parallel`).
#[derive(Clone, Copy, Debug)]
pub(super) struct QpOpen {
    pub at: SimTime,
    pub src: u32,
    pub dst: u32,
    pub conn: u32,
    pub flow_hash: u32,
    pub reverse_hash: u32,
    pub flow: FlowId,
    pub posted_now: u32,
}

/// The direction a queue-pair job sends in: even jobs are requesters, odd ones READ
/// responders.
#[inline]
fn job_direction(job: u32) -> Direction {
    if job & 1 == 0 {
        Direction::Forward
    } else {
        Direction::Reverse
    }
}

/// Host job ids: flows (raw) or queue-pair halves (RC).
#[inline]
pub(super) fn job_requester(qp: u32) -> u32 {
    qp << 1
}
#[inline]
pub(super) fn job_read_responder(qp: u32) -> u32 {
    (qp << 1) | 1
}

impl Sim {
    /// A flow (from the workload, or a collective's transfer) starts: onto its queue
    /// pair, or for the raw transport straight to its host.
    pub(super) fn start_flow(&mut self, now: SimTime, flow: FlowId) {
        self.start_flow_on(now, flow, NO_QP);
    }

    /// `start_flow`, told the queue pair the flow's connection last went on (`hint`,
    /// `NO_QP` if none), which `open_connection` checks before it searches `pairs`.
    pub(super) fn start_flow_on(&mut self, now: SimTime, flow: FlowId, hint: u32) {
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
                let found = if shared {
                    self.open_connection(src, dst, conn, hint)
                } else {
                    None
                };
                if let Some(slot) = found {
                    // An open connection: post to its send queue, or wait for room.
                    self.tell_responder(flow, slot, None);
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
                let _ = op;
                // The queue-pair numbers at both ends, drawn from the run's seed as a
                // driver hands them out: a shared connection keeps its pair however often
                // it is reopened (a persistent connection), a queue pair per flow takes
                // the flow's. RoCEv2 derives the UDP source port from them, and ECMP
                // hashes the 5-tuple.
                let qpns = if shared {
                    stream_seed(
                        self.sc.seed,
                        Stream::FlowHash,
                        ((src as u64) << 32) | dst as u64,
                        1 + conn as u64,
                    )
                } else {
                    crate::rng::mix64(self.flows[flow as usize].flow_hash as u64)
                };
                let (flow_hash, reverse_hash) = roce_qp_hashes(qpns, src, dst);
                let open = QpOpen {
                    at: now,
                    src,
                    dst,
                    conn,
                    flow_hash,
                    reverse_hash,
                    flow,
                    posted_now,
                };
                let qp = self.open_queue_pair(params, &open);
                let slot = self.place_queue_pair(now, qp);
                self.flows[flow as usize].qp = slot;
                self.flows[flow as usize].qp_gen = self.qps[slot as usize].gen;
                self.tell_responder(flow, slot, Some(open));
                if shared {
                    self.pairs.insert((src, dst, conn), slot);
                }
                if delay > SimDuration::ZERO {
                    let gen = self.qps[slot as usize].gen;
                    // Scheduled by the requester's host as it opens the queue pair (the
                    // responder's host posts its receive WQEs then), in a split run
                    // where the responder is, if that is another partition.
                    let source = self.src.nic(src);
                    if !self.recv_post_elsewhere(now + delay, source, slot) {
                        self.q
                            .schedule(now + delay, source, Event::RecvPost { qp: slot, gen });
                    }
                }
                self.post_wr(now, slot, flow);
                return;
            }
        };
        if self.hostm.is_some() {
            self.begin_post(now, flow);
            return;
        }
        self.nics[src as usize].activate(job);
        self.kick(now, src);
    }

    /// The open queue pair of shared connection `(src, dst, conn)`, if any: `hint` if
    /// it is that one (the same requester, responder and connection, not retired: only
    /// one such queue pair is open at a time), else the one `pairs` names.
    pub(super) fn open_connection(&self, src: u32, dst: u32, conn: u32, hint: u32) -> Option<u32> {
        let q = self.qps.get(hint as usize);
        if q.is_some_and(|q| q.src == src && q.dst == dst && q.conn == conn && !q.dead) {
            return Some(hint);
        }
        self.pairs.get(&(src, dst, conn)).copied()
    }

    /// Puts a new queue pair in a slot whose responder has stopped answering (its
    /// counters taken first), else in a new one.
    pub(super) fn place_queue_pair(&mut self, now: SimTime, qp: Qp) -> u32 {
        while let Some(&std::cmp::Reverse((until, slot))) = self.closing_qps.peek() {
            if until > now {
                break;
            }
            self.closing_qps.pop();
            self.free_qps.push(slot);
        }
        match self.free_qps.pop() {
            Some(s) => {
                self.replace_queue_pair(s, qp);
                s
            }
            None => {
                self.qps.push(qp);
                (self.qps.len() - 1) as u32
            }
        }
    }

    /// Puts `qp` in retired queue pair `slot`'s place: the old responder's counters are
    /// taken, the slot's generation moves on.
    pub(super) fn replace_queue_pair(&mut self, slot: u32, qp: Qp) {
        let old = std::mem::replace(&mut self.qps[slot as usize], qp);
        debug_assert!(old.dead, "a slot reused before it retired");
        self.rc_totals.add_responder(&old.resp.stats);
        self.qps[slot as usize].gen = old.gen.wrapping_add(1);
    }

    /// Retired queue pair `slot` is no longer listed by its host: its slot is free once
    /// its responder stops answering.
    pub(super) fn release_queue_pair(&mut self, slot: u32) {
        let until = self.qps[slot as usize].responder_until();
        self.closing_qps.push(std::cmp::Reverse((until, slot)));
    }

    /// A queue pair as `open` describes it, both halves fresh.
    pub(super) fn open_queue_pair(&self, params: RcParams, open: &QpOpen) -> QueuePair {
        let (src, dst) = (open.src, open.dst);
        let line = crate::cc::CcPath {
            line_rate_bps: self.topo.host_link.rate.0 as f64,
            switches: if self.topo.leaf_of(src) == self.topo.leaf_of(dst) {
                1
            } else {
                3
            },
        };
        let mut qp = QueuePair::new(
            open.at,
            src,
            dst,
            open.conn,
            open.flow_hash,
            open.flow,
            params,
            open.posted_now,
            self.cc,
            line,
        );
        qp.reverse_hash = open.reverse_hash;
        qp
    }

    /// The application posts `flow` on queue pair `slot` (which has room): at once
    /// without a host model, else through the host and NIC pipeline.
    pub(super) fn post_wr(&mut self, now: SimTime, slot: u32, flow: FlowId) {
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
            self.nics[src as usize].activate(job_requester(slot));
        }
        self.kick(now, src);
    }

    /// Returns whether the queue pair was still live.
    pub(super) fn on_recv_post(&mut self, now: SimTime, slot: u32, gen: u32) -> bool {
        let depth = self.rc.as_ref().map_or(0, |r| r.recv_queue_depth);
        match self.qps.get_mut(slot as usize) {
            // The responder's, while it answers (a split run's copy may not know yet
            // that its requester retired).
            Some(qp) if qp.responder_answers(now) && qp.gen == gen => {
                qp.resp.post_recv(depth);
                true
            }
            _ => false,
        }
    }

    /// The host's port is free: send an ACK if one waits, else the next job's packet.
    pub(super) fn host_send(&mut self, now: SimTime, host: u32) {
        if let Some(pkt) = self.nics[host as usize].ctrl.pop_front() {
            let wire = self.pool.get(pkt).wire as u64;
            self.start_tx(self.graph.host_up(host), pkt, wire, now);
            return;
        }
        let port = self.graph.host_up(host);
        // The data class may be paused (PFC).
        if self.data_paused(now, port) {
            return;
        }
        // A packet made earlier and held for lack of credit (IB) goes first.
        if let Some(pkt) = self.nics[host as usize].held {
            let wire = self.pool.get(pkt).wire as u64;
            if self.take_credits(now, port, wire) {
                self.nics[host as usize].held = None;
                self.start_tx(port, pkt, wire, now);
            }
            return;
        }
        // Try each listed job at most once.
        let mut tries = self.nics[host as usize].jobs();
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
            let Some(job) = self.nics[host as usize].pop_job() else {
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
                    self.release_queue_pair(job >> 1);
                }
                None
            } else {
                // DCQCN pacing: a direction sends no sooner than its rate allows.
                let next = self.qps[(job >> 1) as usize].ready_at(now, job_direction(job));
                if next > now {
                    self.nics[host as usize].activate(job);
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
                    self.nics[host as usize].activate(job);
                }
                let wire = self.pool.get(pkt).wire as u64;
                if let Some(h) = self.hostm.as_mut() {
                    let p = self.pool.get(pkt);
                    if p.payload > 0 {
                        h.dma_read(now, host, p.flow, p.payload as u64);
                    }
                }
                if self.cc.is_some() && self.rc.is_some() && job & RAW_JOB == 0 {
                    self.qps[(job >> 1) as usize].on_sent(now, job_direction(job), wire);
                }
                if !self.take_credits(now, port, wire) {
                    // Wait for credit with the packet in hand (the stall is timed).
                    self.nics[host as usize].held = Some(pkt);
                    return;
                }
                self.start_tx(port, pkt, wire, now);
                return;
            }
        }
        if let Some(t) = wake {
            let h = &mut self.nics[host as usize];
            if h.wake_at.map_or(true, |w| t < w) {
                h.wake_at = Some(t);
                self.q
                    .schedule(t, self.src.nic(host), Event::HostWake { host });
            }
        }
    }

    pub(super) fn new_packet(&mut self, flow: FlowId, src: u32, dst: u32, kind: PktKind) -> Packet {
        let f = &self.flows[flow as usize];
        // A queue pair's packets share its 5-tuple (RoCE's UDP source port is per queue
        // pair), so every message on it takes the same ECMP path and stays in order.
        let reverse = matches!(kind, PktKind::Ack | PktKind::ReadResponse);
        let flow_hash = match (f.qp == NO_QP, reverse) {
            // A bare flow's reverse direction hashes like a different 5-tuple.
            (true, false) => f.flow_hash,
            (true, true) => f.flow_hash ^ 0x5bd1_e995,
            (false, false) => self.qps[f.qp as usize].flow_hash,
            (false, true) => self.qps[f.qp as usize].reverse_hash,
        };
        Packet {
            kind,
            flow,
            src,
            dst,
            flow_hash,
            ..Packet::default()
        }
    }

    /// The next packet of a raw flow; `more` if it has packets left.
    pub(super) fn raw_packet(&mut self, flow: FlowId) -> Option<(PktId, bool)> {
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
    pub(super) fn requester_packet(&mut self, now: SimTime, slot: u32) -> Option<(PktId, bool)> {
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
        p.wire = (tx.payload as u64 + self.overhead + ext + self.int_bytes) as u32;
        p.flags = (tx.first as u8 * FLAG_FIRST)
            | (tx.last as u8 * FLAG_LAST)
            | (tx.retransmission as u8 * FLAG_RETX)
            | (self.telemetry as u8 * FLAG_TELEMETRY)
            | (self.flows[flow as usize].no_ar as u8 * FLAG_NO_AR);
        p.op = match tx.op {
            Op::Write => 0,
            Op::Send => 1,
            Op::Read => 2,
        };
        let id = self.pool.alloc(p);
        if self.timestamps {
            // The NIC's send timestamp (Swift), echoed back on the ACK.
            self.pool.set_sent_at(id, now);
        }
        Some((id, true))
    }

    /// The next READ response the responder streams back to the requester.
    pub(super) fn read_response_packet(&mut self, slot: u32) -> Option<(PktId, bool)> {
        let mtu = self.mtu;
        let qp = &mut self.qps[slot as usize];
        let Some((psn, left, more)) = qp.next_read_response() else {
            qp.read_listed = false;
            return None;
        };
        let flow = qp.read_flow;
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
        p.wire = (payload + self.overhead + aeth + self.int_bytes) as u32;
        p.flags = (first as u8 * FLAG_FIRST)
            | (last as u8 * FLAG_LAST)
            | (self.telemetry as u8 * FLAG_TELEMETRY);
        Some((self.pool.alloc(p), more))
    }

    /// Keeps one timer event pending at or before the requester's next deadline.
    pub(super) fn sync_timer(&mut self, slot: u32) {
        let qp = &mut self.qps[slot as usize];
        if let Some(t) = qp.arm_timer() {
            self.q
                .schedule(t, self.src.nic(qp.src), Event::QpTimer { qp: slot });
        }
    }

    /// Out-of-order RC: keeps `slot`'s responder hole timer pending at its deadline,
    /// scheduled by the responder's host.
    fn sync_hole_timer(&mut self, slot: u32) {
        let qp = &mut self.qps[slot as usize];
        if let Some(t) = qp.arm_hole_timer() {
            let host = qp.dst;
            self.q
                .schedule(t, self.src.nic(host), Event::HoleTimer { qp: slot, host });
        }
    }

    /// Returns whether a timer was actually due.
    #[inline(always)]
    pub(super) fn on_qp_timer(&mut self, now: SimTime, slot: u32) -> bool {
        let mtu_wire = self.mtu + self.overhead + self.int_bytes;
        let qp = &mut self.qps[slot as usize];
        if !qp.take_timer(now) {
            return false; // superseded by an earlier re-arm
        }
        if qp.dead {
            return false; // the queue pair finished
        }
        let due = qp.req.next_timeout().is_some_and(|t| t <= now);
        qp.handle_timeout(now, mtu_wire);
        self.after_requester_input(now, slot);
        due
    }

    /// Out-of-order RC: the responder's hole timer; its selective NAKs go out if it was
    /// due, and it is kept pending while a hole is left. Returns whether it was due.
    #[inline(always)]
    pub(super) fn on_hole_timer(&mut self, now: SimTime, slot: u32) -> bool {
        let qp = &mut self.qps[slot as usize];
        if !qp.take_hole_timer(now) || !qp.responder_answers(now) {
            return false; // superseded, or the responder stopped answering
        }
        let due = self.qps[slot as usize]
            .resp
            .next_timeout()
            .is_some_and(|t| t <= now);
        if due {
            self.qps[slot as usize].resp.handle_timeout(now);
            self.send_selective_naks(now, slot);
        }
        self.sync_hole_timer(slot);
        due
    }

    /// After the requester took an input: collect completions, list it if it can send,
    /// keep its timer, and wake its host.
    pub(super) fn after_requester_input(&mut self, now: SimTime, slot: u32) {
        let max_send_wr = self.rc.as_ref().map_or(1, |r| r.max_send_wr) as usize;
        let op = self.rc.as_ref().map_or(Op::Write, |r| r.operation);
        let host_model = self.hostm.is_some();
        let qp = &mut self.qps[slot as usize];
        while let Some(c) = qp.req.pop_completion() {
            let f = &mut self.flows[c.wr_id as usize];
            match c.status {
                WcStatus::Success => {
                    // The requester learns of completion now: the last ACK of a WRITE
                    // or SEND (which landed before), the last response of a READ
                    // (which lands now).
                    let first = f.landed.is_none();
                    f.landed.get_or_insert(now);
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
        if qp.is_idle() && qp.conn == 0 {
            // Done: keep the requester's counters and retire the queue pair. Its
            // responder answers until the disconnect reaches it, and its counters are
            // taken when the slot is reused (or at the end).
            self.cc_totals.rate_cuts += qp.rate_cuts(now);
            self.rc_totals.add(&qp.req.stats);
            if self.pairs.get(&(qp.src, qp.dst, qp.conn)) == Some(&slot) {
                self.pairs.remove(&(qp.src, qp.dst, qp.conn));
            }
            qp.retire(now + self.topo.path_latency(qp.src, qp.dst));
            if !qp.req_listed && !qp.read_listed {
                self.release_queue_pair(slot);
            }
            self.tell_responder_closed(slot);
            return;
        }
        if qp.req.has_work() && !qp.req_listed {
            qp.req_listed = true;
            self.nics[src as usize].activate(job_requester(slot));
        }
        self.sync_timer(slot);
        self.kick(now, src);
    }

    /// Hands on what `after_requester_input` collected: READs delivered, sends
    /// completed, backlog flows to post through the host pipeline.
    pub(super) fn after_completions(&mut self, now: SimTime) {
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

    #[inline(always)]
    pub(super) fn deliver(&mut self, now: SimTime, host: u32, pkt: PktId) {
        let p = *self.pool.get(pkt);
        // What the switches stamped on a data packet, or an ACK echoes (HPCC).
        let telemetry = self.telemetry.then(|| self.pool.telemetry(pkt));
        // A data packet's send time, or the one an ACK echoes (Swift).
        let sent_at = self.timestamps.then(|| self.pool.sent_at(pkt));
        self.pool.free(pkt);
        if self.rc.is_none() || self.flows[p.flow as usize].raw {
            self.delivered_total += p.payload as u64;
            let f = &mut self.flows[p.flow as usize];
            f.delivered += p.payload as u64;
            if f.delivered == f.def.size {
                f.landed = Some(now);
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
        let request = matches!(p.kind, PktKind::Data | PktKind::ReadRequest);
        let live = slot != NO_QP && {
            let qp = &self.qps[slot as usize];
            // A retired queue pair's responder still answers for a while.
            qp.gen == gen && (!qp.dead || (request && qp.responder_answers(now)))
        };
        if !live {
            // A straggler for a finished queue pair (a retransmission that crossed the
            // final ACK, after its responder stopped answering; or an answer to a
            // requester that retired): nothing to do.
            self.rc_totals.duplicate_packets += request as u64;
            return;
        }
        match p.kind {
            PktKind::Data | PktKind::ReadRequest => {
                self.at_responder(now, host, slot, &p, telemetry, sent_at)
            }
            PktKind::Ack => {
                let kind = match p.ack_kind {
                    0 => AckKind::Ack,
                    1 => AckKind::NakSeq,
                    2 => AckKind::NakRnr,
                    _ => AckKind::NakSelective,
                };
                let selective = kind == AckKind::NakSelective;
                let info = AckInfo {
                    kind,
                    psn: p.psn,
                    // A selective NAK carries its run length where an ACK carries
                    // credits.
                    credits: if selective { 0 } else { p.aux },
                    rnr_code: p.rnr_code,
                    count: if selective { p.aux } else { 0 },
                };
                let mtu_wire = self.mtu + self.overhead + self.int_bytes;
                self.qps[slot as usize].handle_ack(
                    now,
                    info,
                    self.mtu,
                    mtu_wire,
                    telemetry.as_ref(),
                    sent_at.map(|t| SimDuration(now.0.saturating_sub(t.0))),
                );
                self.after_requester_input(now, slot);
            }
            PktKind::ReadResponse => {
                if p.flags & FLAG_ECN != 0 {
                    self.notify(now, slot, &p, true);
                }
                let got = self.qps[slot as usize]
                    .req
                    .handle_read_response(now, p.psn, p.payload);
                self.delivered_total += got as u64;
                let f = &mut self.flows[p.flow as usize];
                f.delivered += got as u64;
                self.after_requester_input(now, slot);
            }
            PktKind::Cnp => {
                // DCQCN §3.1: the reaction point of the congested direction cuts its rate.
                self.cc_totals.cnps_received += 1;
                let d = if p.flags & FLAG_REVERSE != 0 {
                    Direction::Reverse
                } else {
                    Direction::Forward
                };
                self.qps[slot as usize].handle_cnp(now, d);
            }
        }
    }

    /// An ECN-marked packet `p` reached its receiver: the notification point of its
    /// direction may send a CNP back to the sender (at most one per `cnp_interval`).
    pub(super) fn notify(&mut self, now: SimTime, slot: u32, p: &Packet, reverse: bool) {
        let Some(cnp_interval) = self.cc.and_then(|c| c.cnp_interval()) else {
            return;
        };
        let d = if reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        };
        if !self.qps[slot as usize].handle_marked(now, d, cnp_interval) {
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
        self.nics[p.dst as usize].ctrl.push_back(id);
        self.kick(now, p.dst);
    }

    pub(super) fn at_responder(
        &mut self,
        now: SimTime,
        host: u32,
        slot: u32,
        p: &Packet,
        telemetry: Option<crate::cc::Telemetry>,
        sent_at: Option<SimTime>,
    ) {
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
        let a = qp.resp.handle_request(now, &req);
        if qp.resp.next_timeout().is_some() {
            // Out-of-order RC: a hole holds packets up; its timer must be pending.
            self.sync_hole_timer(slot);
        }
        let qp = &mut self.qps[slot as usize];
        // (Re)start streaming responses from `psn`; not for a requester that retired
        // (its slot is not listed again: the responses would find no queue pair).
        if let Some((psn, n)) = a.read.filter(|_| !qp.dead) {
            qp.start_read_responses(p.flow, psn, n);
            if !qp.read_listed {
                qp.read_listed = true;
                self.nics[host as usize].activate(job_read_responder(slot));
            }
        }
        if a.message_done && req.op == Op::Send {
            // The application keeps its receive queue full: it posts a new receive WQE
            // for each one a completed SEND consumed.
            qp.resp.post_recv(1);
        }
        self.flows[p.flow as usize].delivered += a.deliver as u64;
        self.delivered_total += a.deliver as u64;
        if a.message_done {
            self.landed(now, p.flow);
        }
        // Out-of-order RC: the messages this packet completed, in order.
        while let Some(wr) = self.qps[slot as usize].resp.pop_done() {
            if req.op == Op::Send {
                self.qps[slot as usize].resp.post_recv(1);
            }
            self.landed(now, wr as FlowId);
        }
        if let Some(ack) = a.reply {
            self.send_ack(p.flow, p.dst, p.src, ack, telemetry, sent_at);
        }
        self.send_selective_naks(now, slot);
        self.kick(now, host);
    }

    /// A message of `flow` is all in the receiver's memory: landed; it completes when
    /// the requester hears of it (its ACK).
    fn landed(&mut self, now: SimTime, flow: FlowId) {
        let f = &mut self.flows[flow as usize];
        if f.landed.is_none() {
            f.landed = Some(now);
            self.on_delivered(now, flow);
        }
    }

    /// Queues an ACK or NAK of `flow` from `from` (the responder's host) to `to`.
    fn send_ack(
        &mut self,
        flow: FlowId,
        from: u32,
        to: u32,
        ack: AckInfo,
        telemetry: Option<crate::cc::Telemetry>,
        sent_at: Option<SimTime>,
    ) {
        let mut r = self.new_packet(flow, from, to, PktKind::Ack);
        r.psn = ack.psn;
        r.seq = ack.psn;
        r.aux = ack.credits;
        r.ack_kind = match ack.kind {
            AckKind::Ack => 0,
            AckKind::NakSeq => 1,
            AckKind::NakRnr => 2,
            AckKind::NakSelective => {
                r.aux = ack.count;
                3
            }
        };
        r.rnr_code = ack.rnr_code;
        r.wire = (self.overhead + AETH_BYTES + self.int_bytes) as u32;
        let id = self.pool.alloc(r);
        // HPCC: the ACK echoes the telemetry of the packet it answers.
        if let Some(t) = telemetry {
            self.pool.set_telemetry(id, t);
        }
        // Swift: the ACK echoes the send time of the packet it answers.
        if let Some(t) = sent_at {
            self.pool.set_sent_at(id, t);
        }
        self.nics[from as usize].ctrl.push_back(id);
    }

    /// Out-of-order RC: the selective NAKs the responder of `slot` queued go out.
    fn send_selective_naks(&mut self, now: SimTime, slot: u32) {
        let qp = &self.qps[slot as usize];
        let (src, dst, flow) = (qp.src, qp.dst, qp.read_flow);
        let mut any = false;
        while let Some(nak) = self.qps[slot as usize].resp.pop_nak() {
            self.send_ack(flow, dst, src, nak, None, None);
            any = true;
        }
        if any {
            self.kick(now, dst);
        }
    }
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
    /// Adds another part's totals (a run split over threads, `parallel`).
    pub(super) fn merge(&mut self, o: &RcTotals) {
        self.first_transmissions += o.first_transmissions;
        self.retransmissions += o.retransmissions;
        self.timeouts += o.timeouts;
        self.seq_naks += o.seq_naks;
        self.rnr_naks += o.rnr_naks;
        self.qp_errors += o.qp_errors;
        self.duplicate_packets += o.duplicate_packets;
        self.acks_sent += o.acks_sent;
    }

    pub(super) fn add(&mut self, s: &crate::transport::rc::RequesterStats) {
        self.first_transmissions += s.first_transmissions;
        self.retransmissions += s.retransmissions;
        self.timeouts += s.timeouts;
        self.seq_naks += s.seq_naks;
        self.rnr_naks += s.rnr_naks;
        self.duplicate_packets += s.duplicate_read_responses;
    }

    pub(super) fn add_responder(&mut self, s: &crate::transport::rc::ResponderStats) {
        self.duplicate_packets += s.duplicates;
        self.acks_sent += s.acks_sent;
    }
}

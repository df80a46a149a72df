//! Glue between the host pipeline ([`crate::components::host`]) and the event loop:
//! wake-ups become events scheduled by the NIC that asked for them, a ready work request
//! goes to its queue pair (or raw flow), and a finished message releases what waits for
//! it (a dependent flow, a collective's next step). Decides nothing itself.

use super::transport::job_requester;
use super::{Sim, NO_QP};
use crate::components::host::{HostAction, HostPipeline, HostWake};
use crate::engine::{Event, FlowId};
use crate::transport::rc::Op;
use crate::units::SimTime;

const NONE: FlowId = FlowId::MAX;

impl Sim {
    /// Runs `f` on the host pipeline, then routes its actions in the order given. An
    /// action may lead back into the pipeline (a ready request completes another's
    /// posting): each call takes its own action buffer from a small stack, so nothing is
    /// allocated once the stack is as deep as the nesting.
    fn with_host(
        &mut self,
        now: SimTime,
        f: impl FnOnce(&mut HostPipeline, &mut Vec<HostAction>) -> bool,
    ) -> bool {
        let mut out = self.host_out.pop().unwrap_or_default();
        let did = f(self.hostm.as_mut().expect("host model"), &mut out);
        for a in out.drain(..) {
            match a {
                HostAction::Wake { at, nic, wake } => {
                    let event = match wake {
                        HostWake::Stage { flow, stage } => Event::FlowStage { flow, stage },
                        HostWake::PosterDone { nic, poster } => Event::PosterDone { nic, poster },
                        HostWake::Irq { nic } => Event::Irq { nic },
                    };
                    self.q.schedule(at, self.src.nic(nic), event);
                }
                HostAction::Ready { flow } => self.wr_ready(now, flow),
                HostAction::Done { at, flow } => self.message_done(at, flow),
                // As its wake-up would have, the step moves work (the end of the run
                // takes its time: `HostPipeline::settle_send_cqes`).
                HostAction::Passes { at } => self.watchdog.progress(at),
            }
        }
        self.host_out.push(out);
        did
    }

    /// The NIC whose CQ reports `flow`'s data arriving: the receiver of its bytes.
    fn data_receiver(&self, flow: FlowId) -> u32 {
        let d = &self.flows[flow as usize].def;
        let read = self.rc.as_ref().is_some_and(|r| r.operation == Op::Read);
        if read {
            d.src
        } else {
            d.dst
        }
    }

    /// A message's application wants to send it: start its posting path.
    pub(super) fn begin_post(&mut self, now: SimTime, flow: FlowId) {
        self.with_host(now, |h, out| {
            h.post(now, flow, out);
            true
        });
    }

    /// A wake-up the host pipeline asked for; returns whether it did anything.
    pub(super) fn on_host_wake(&mut self, now: SimTime, wake: HostWake) -> bool {
        self.with_host(now, |h, out| h.handle_wake(now, wake, out))
    }

    /// The NIC has the WQE and the first payload bytes: the queue pair (or raw flow) may
    /// send.
    fn wr_ready(&mut self, now: SimTime, flow: FlowId) {
        let src = self.flows[flow as usize].def.src;
        if self.rc.is_none() || self.flows[flow as usize].raw {
            let job = if self.rc.is_none() {
                flow
            } else {
                super::RAW_JOB | flow
            };
            self.nics[src as usize].activate(job);
            self.kick(now, src);
            return;
        }
        let slot = self.flows[flow as usize].qp;
        debug_assert!(slot != NO_QP);
        let op = self.rc.as_ref().map_or(Op::Write, |r| r.operation);
        // The requester takes work requests in posting order: this one, and any later
        // ones that were ready first, once everything before them is.
        let h = self.hostm.as_ref().expect("host model");
        let qp = &mut self.qps[slot as usize];
        while let Some(&next) = qp.pipeline.front() {
            if !h.is_ready(next) {
                break;
            }
            qp.pipeline.pop_front();
            qp.req
                .post(next as u64, op, self.flows[next as usize].def.size);
        }
        if !qp.req_listed && qp.req.has_work() {
            qp.req_listed = true;
            self.nics[src as usize].activate(job_requester(slot));
        }
        self.after_requester_input(now, slot);
    }

    /// The last byte of `flow` reached its receiver's NIC.
    pub(super) fn on_delivered(&mut self, now: SimTime, flow: FlowId) {
        if self.hostm.is_none() {
            self.message_done(now, flow);
            return;
        }
        self.with_host(now, |h, out| {
            h.delivered(now, flow, out);
            true
        });
    }

    /// The requester's WRITE or SEND completed (its ACK arrived).
    pub(super) fn on_send_completed(&mut self, now: SimTime, flow: FlowId) {
        if self.hostm.is_none() {
            return;
        }
        self.with_host(now, |h, out| {
            h.send_completed(now, flow, out);
            true
        });
    }

    /// `flow` is done (at `at`, now or later): flows waiting for it may start.
    pub(super) fn message_done(&mut self, at: SimTime, flow: FlowId) {
        if self.part.is_some() {
            // A split run: the receiving side goes to the sender's partition.
            self.send_rx_side(flow);
        }
        // What follows is scheduled by the endpoint the message landed at: its host's
        // NIC, or a switch (in-network aggregation).
        let rx = self.data_receiver(flow);
        let hosts = self.graph.hosts();
        let source = if rx < hosts {
            self.src.nic(rx)
        } else {
            self.src.switch(rx - hosts)
        };
        if let Some((run, xfer)) = self.flows[flow as usize].coll {
            if run >= super::training_glue::SEND_RUN_BASE {
                let now = self.q.now();
                self.train_send_landed(now, at, run - super::training_glue::SEND_RUN_BASE, xfer);
                return;
            }
            // A transfer split across queue pairs lands with its last part. (Both maps
            // stay empty with one queue pair a connection, NCCL's default: no hashing.)
            if !self.parts_left.is_empty() {
                if let Some(left) = self.parts_left.get_mut(&(run, xfer)) {
                    *left -= 1;
                    if *left > 0 {
                        return;
                    }
                    self.parts_left.remove(&(run, xfer));
                }
            }
            let conn = if self.xfer_conn.is_empty() {
                None
            } else {
                self.xfer_conn.remove(&(run, xfer))
            };
            if let Some(key) = conn {
                // Several queue pairs: this and every transfer sent after it that landed
                // already are taken now, in sending order.
                let q = self.conn_order.get_mut(&key).expect("a connection's queue");
                if let Some(e) = q.iter_mut().find(|e| e.0 == xfer) {
                    e.1 = Some(at);
                }
                while let Some(&(x, Some(_))) = q.front() {
                    q.pop_front();
                    let done = self.colls[run as usize].landed(x, at);
                    self.q
                        .schedule(done, source, Event::CollDone { run, xfer: x });
                }
                if q.is_empty() {
                    self.conn_order.remove(&key);
                }
                return;
            }
            let done = self.colls[run as usize].landed(xfer, at);
            self.q.schedule(done, source, Event::CollDone { run, xfer });
            return;
        }
        let mut next = self.dep_head[flow as usize];
        while next != NONE {
            let start = at.max(self.flows[next as usize].def.start);
            self.q
                .schedule(start, source, Event::FlowStart { flow: next });
            next = self.dep_next[next as usize];
        }
    }
}

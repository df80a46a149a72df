//! Glue between collective runs (`collective`) and the fabric: each transfer a run asks
//! for goes over the intra-host link when both ranks share a server, else becomes a
//! flow (an RC message on the channel's queue pair, through the host model if any).

use super::Sources;
use super::{CollConn, FlowState, Sim};
use crate::analytic::{ideal_fct_on_path, ideal_inline_write};
use crate::collective::dag::Nvls;
use crate::collective::defaults::MAX_QPS_PER_CONNECTION as MAX_QPS;
use crate::collective::{Landing, Send};
use crate::engine::{Event, FlowId, Source};
use crate::topology::LinkParams;
use crate::units::BitsPerSec;
use crate::units::{serialization_delay, SimDuration, SimTime};
use crate::workload::FlowDef;

/// Bytes of a clear-to-send: NCCL's FIFO entry (`struct ncclIbSendFifo`: the slot's
/// address, size, keys, tag and index, padded to a 64-byte line; `net_ib`).
const CLEAR_TO_SEND_BYTES: u64 = 64;

/// What a collective run is told.
#[derive(Clone, Copy, Debug)]
pub(super) enum CollInput {
    /// Its start time came: it launches its first iteration.
    Start,
    /// The time it asked to be woken at came (a launched kernel starts).
    Wake,
    /// Transfer `xfer` landed (and was reduced).
    Done(u32),
    /// A clear-to-send reached the sender of connection `conn` (`sender * channels +
    /// channel`).
    Clear(u32),
}

impl Sim {
    /// Run `run` is told `input`: it releases what is now ready, the transfers go out
    /// (the buffer is lent and given back), and its wake-up, if it wants one, is
    /// scheduled.
    pub(super) fn coll_step(&mut self, now: SimTime, run: u32, input: CollInput) {
        let mut out = std::mem::take(&mut self.coll_out);
        if let Some(p) = self.part.as_deref_mut() {
            p.coll_wake = matches!(input, CollInput::Wake);
            p.everywhere += u64::from(matches!(input, CollInput::Start | CollInput::Wake));
        }
        let r = &mut self.colls[run as usize];
        match input {
            CollInput::Start => r.start(now),
            CollInput::Wake => {
                r.on_wake(now, &mut out);
                if r.split_unsound() {
                    let part = self.part.as_deref_mut().expect("a split copy");
                    part.diverged
                        .get_or_insert(super::parallel_coll::GRAPH_UNSOUND);
                }
            }
            CollInput::Done(x) => r.on_done(now, x, &mut out),
            CollInput::Clear(conn) => {
                let ch = r.cfg.channels;
                r.on_clear_to_send(now, conn / ch, conn % ch, &mut out);
            }
        }
        if let Some(at) = r.take_wake() {
            self.q
                .schedule(at, self.src.run(run), Event::CollWake { run });
        }
        self.send_clear_to_sends(now, run);
        self.dispatch_sends(now, run, &mut out);
        self.coll_out = out;
        if self.part.is_some() {
            self.give_back_transfers(run);
        }
    }

    /// Delivers run `run`'s clear-to-sends: each an inline RDMA WRITE of NCCL's FIFO
    /// entry (`CLEAR_TO_SEND_BYTES`) from the receiver's NIC to the sender's, landing
    /// after the path's latency on an empty fabric (`analytic::ideal_inline_write`),
    /// each pair's worked out once. Leaves out: the receiver proxy's posting costs, the
    /// sender proxy's polling of its FIFO, and the write's queueing or loss in the
    /// fabric (so the word is never later than this).
    fn send_clear_to_sends(&mut self, now: SimTime, run: u32) {
        let mut cts = std::mem::take(&mut self.coll_cts);
        self.colls[run as usize].take_clear_to_sends(&mut cts);
        for c in cts.drain(..) {
            let r = &self.colls[run as usize];
            let (from, to) = (
                r.ranks[c.receiver as usize].port,
                r.ranks[c.sender as usize].port,
            );
            let conn = c.sender * r.cfg.channels + c.channel;
            let cache = &mut self.coll_cts_latency;
            if cache.len() <= run as usize {
                cache.resize(run as usize + 1, Vec::new());
            }
            let lat = &mut cache[run as usize];
            if lat.len() <= conn as usize {
                lat.resize(conn as usize + 1, None);
            }
            let delay = *lat[conn as usize]
                .get_or_insert_with(|| ideal_inline_write(&self.sc, from, to, CLEAR_TO_SEND_BYTES));
            let (at, source) = (now + delay, self.src.nic(from));
            if !self.clear_to_send_elsewhere(at, source, run, conn, to) {
                self.q.schedule(at, source, Event::CollClear { run, conn });
            }
        }
        self.coll_cts = cts;
    }

    /// The event source of run `run`'s endpoint `e`: a rank's NIC (the rank's events are
    /// its server's, as its network transfers' are), or the workload's for a switch
    /// (in-network).
    pub(super) fn endpoint_source(&self, run: u32, e: u32) -> Source {
        let r = &self.colls[run as usize];
        match r.ranks.get(e as usize) {
            Some(loc) => self.src.nic(loc.port),
            None => Sources::WORKLOAD,
        }
    }

    /// Transfer `xfer` of connection `conn` (whose first field is its run) will land in
    /// `parts` parts (several queue pairs, the message split over them), and, `in_order`,
    /// its receiver takes the connection's transfers in sending order (several queue
    /// pairs): what `message_done` reads where it lands. Both maps stay empty with one
    /// queue pair a connection.
    pub(super) fn expect_landing(&mut self, xfer: u32, conn: CollConn, parts: u32, in_order: bool) {
        let run = conn.0;
        if parts > 1 {
            self.parts_left.insert((run, xfer), parts);
        }
        if in_order {
            self.conn_order
                .entry(conn)
                .or_default()
                .push_back((xfer, None));
            self.xfer_conn.insert((run, xfer), conn);
        }
    }

    /// Carries out the transfers in `out` (and empties it).
    pub(super) fn dispatch_sends(&mut self, now: SimTime, run: u32, out: &mut Vec<Send>) {
        // When the last NVLS multicast's first copy lands: its replicas land with it (a
        // multicast's copies are posted together, the first first: `issue_node`).
        let mut multicast_end = None;
        for s in out.drain(..) {
            let r = &self.colls[run as usize];
            let n = r.ranks_len();
            if s.src >= n || s.dst >= n {
                self.switch_transfer(now, run, s);
                continue;
            }
            let (a, b) = (r.ranks[s.src as usize], r.ranks[s.dst as usize]);
            if a.server == b.server {
                if let (Nvls::Replica, Some(end)) = (s.nvls, multicast_end) {
                    // The NVSwitch copies the multicast: no link or channel time.
                    let source = self.endpoint_source(run, s.src);
                    self.q
                        .schedule(end, source, Event::CollArrive { run, xfer: s.xfer });
                    continue;
                }
                let (rate, ch_rate) = (r.cfg.intra_rate, r.channel_rate());
                let end = if s.nvls != Nvls::No {
                    // NVLSTree: every channel streams, so each has its share of the GPU's
                    // link (a fair share, where a first-come booking of the link would let
                    // scatters issued ahead hold it against the multicasts). A channel's
                    // scatter warps copy its shards into the NVLS buffer (and their share
                    // of the rank's own) at their copy rate; the multicast is stored by
                    // other warps (NCCL's bcast warps), paced by the link share alone.
                    let r = &mut self.colls[run as usize];
                    let share = BitsPerSec(rate.0 / r.cfg.channels.max(1) as u64);
                    if s.nvls == Nvls::Multicast {
                        let end = now + serialization_delay(s.bytes, share);
                        // The multicast lands in the head's own buffer too.
                        let mut done = std::mem::take(&mut self.coll_done);
                        r.own_multicast(s.src, s.xfer, end, &mut done);
                        let source = self.endpoint_source(run, s.src);
                        for (xfer, at) in done.drain(..) {
                            self.q.schedule(at, source, Event::CollDone { run, xfer });
                        }
                        self.coll_done = done;
                        end
                    } else {
                        debug_assert_eq!(s.nvls, Nvls::Reduce, "a replica follows its multicast");
                        r.nvls_scatter_end(now, s.src, s.xfer, share)
                    }
                } else {
                    // NVLink-like: each channel moves its transfers one at a time at its
                    // copy rate, and the sending GPU's link carries at most its rate in
                    // all (its backlog counted from now, so a channel's wait does not
                    // idle the link).
                    let gpu = (a.server * self.gpus_per_server + a.gpu) as usize;
                    let link_end =
                        now.max(self.gpu_link_free[gpu]) + serialization_delay(s.bytes, rate);
                    self.gpu_link_free[gpu] = link_end;
                    // The channel is the run's own (each communicator has its thread
                    // blocks).
                    let chan = self.colls[run as usize].channel_free(s.src, s.channel);
                    let start = now.max(*chan);
                    let end = link_end.max(start + serialization_delay(s.bytes, ch_rate));
                    *chan = end;
                    end
                };
                if s.nvls == Nvls::Multicast {
                    multicast_end = Some(end);
                }
                if s.nvls == Nvls::No {
                    // A piece only copied needs no arrival event (`land_at_send`).
                    match self.colls[run as usize].land_at_send(s.xfer, end) {
                        Landing::OnArrival => {}
                        Landing::Done(done) => {
                            let source = self.endpoint_source(run, s.dst);
                            self.q
                                .schedule(done, source, Event::CollDone { run, xfer: s.xfer });
                            continue;
                        }
                        Landing::Deferred => continue,
                    }
                }
                // The receiver takes it when it has arrived (its reduction engine and
                // connection order are booked then, not now).
                let source = self.endpoint_source(run, s.src);
                self.q
                    .schedule(end, source, Event::CollArrive { run, xfer: s.xfer });
                continue;
            }
            // PXN: leave through this host's NIC on the receiver's rail (the relay to that
            // NIC's GPU over the intra-host fabric is not charged).
            let src_port = match (&self.sc.host, r.cfg.pxn) {
                (Some(h), true) => h.port_of(a.server, h.nic_of_gpu(b.gpu)),
                _ => a.port,
            };
            // NCCL's queue pairs per connection: a message goes whole on the next queue
            // pair in turn, or split over all of them in 128-byte-aligned parts
            // (`net_ib.cc`, `ncclIbMultiSend`).
            let (qps, split) = (r.cfg.qps_per_connection, r.cfg.split_data_on_qps);
            // NCCL routes a message adaptively when it is larger than the threshold
            // (`net_ib.cc`: `size > ncclParamIbArThreshold()`).
            let no_ar = s.bytes <= r.cfg.ar_threshold;
            let part = if split && qps > 1 {
                s.bytes.div_ceil(qps as u64).div_ceil(128) * 128
            } else {
                s.bytes
            };
            let parts = if part == 0 {
                1
            } else {
                s.bytes.div_ceil(part) as u32
            };
            // One queue pair per connection (NCCL's default): its turn is always the
            // first, so nothing is looked up.
            let first_qp = if split || qps <= 1 {
                0
            } else {
                let turn = self
                    .qp_turn
                    .entry((run, s.src, s.dst, s.channel))
                    .or_insert(0);
                let q = *turn;
                *turn = (q + 1) % qps;
                q
            };
            if parts > 1 || qps > 1 {
                let conn = (run, s.src, s.dst, s.channel);
                // Kept where it lands (`message_done`): here, or told to the receiver's
                // partition in a split run, before any of its packets can reach it.
                if !self.landing_elsewhere(b.port, s.xfer, conn, parts, qps > 1) {
                    self.expect_landing(s.xfer, conn, parts, qps > 1);
                }
            }
            for i in 0..parts {
                let def = FlowDef {
                    src: src_port,
                    dst: b.port,
                    size: (s.bytes - i as u64 * part).min(part),
                    start: now,
                    workload: self.colls[run as usize].workload,
                    after: None,
                };
                let (id, num) = self.transfer_slot();
                let mut f = FlowState::new(&self.sc, &self.graph, &mut self.ideal_cache, num, def);
                // One connection per run, channel and queue pair (at most 64 channels).
                f.conn = 1 + (run * 64 + s.channel) * MAX_QPS + first_qp + i;
                f.coll = Some((run, s.xfer));
                f.no_ar = no_ar;
                self.put_transfer(id, f);
                if self.part.is_some() {
                    self.share_transfer(id, run, s.xfer, s.src);
                }
                // The queue pair this sender's channel last went on, checked first.
                let at = self.colls[run as usize].rank_channel(s.src, s.channel);
                let hint = self.coll_qp_hint[run as usize][at];
                self.start_flow_on(now, id, hint);
                self.coll_qp_hint[run as usize][at] = self.flows[id as usize].qp;
            }
        }
    }

    /// In-network aggregation: a transfer to or from a switch (endpoint `n + switch`).
    /// A rank sends to its leaf as a bare-packet flow from its NIC; a switch sends by
    /// queueing the chunk on the egress port towards the receiver.
    fn switch_transfer(&mut self, now: SimTime, run: u32, s: Send) {
        let r = &self.colls[run as usize];
        let n = r.ranks_len();
        let hosts = self.topo.hosts();
        let endpoint = |e: u32| -> u32 {
            if e < n {
                r.ranks[e as usize].port
            } else {
                hosts + (e - n)
            }
        };
        let (src, dst) = (endpoint(s.src), endpoint(s.dst));
        let workload = r.workload;
        let graph = &self.graph;
        // The one link the transfer crosses, and (from a switch) the port it leaves by:
        // down to the rank's host, or one of the parallel links to the next switch
        // (chosen by transfer, so a chunk's transfers share the links).
        let port = if s.src < n {
            None
        } else {
            let sw = s.src - n;
            Some(if s.dst < n {
                graph.host_down(dst)
            } else {
                let links = graph.links_between(sw, s.dst - n);
                links[(s.xfer % links.len() as u32) as usize]
            })
        };
        let link: LinkParams =
            graph.ports[port.unwrap_or_else(|| graph.host_up(src)) as usize].link;
        let ideal = if s.bytes == 0 {
            SimDuration::ZERO
        } else {
            ideal_fct_on_path(
                &[link],
                self.switch_latency,
                self.sc.switch.forwarding,
                self.mtu,
                self.overhead,
                self.header,
                s.bytes,
                0,
                0,
                None,
            )
        };
        let def = FlowDef {
            src,
            dst,
            size: s.bytes,
            start: now,
            workload,
            after: None,
        };
        let (id, num) = self.transfer_slot();
        let mut f = FlowState::with_ideal(&self.sc, num, def, ideal);
        f.raw = true;
        f.coll = Some((run, s.xfer));
        self.put_transfer(id, f);
        match port {
            None => self.start_flow(now, id as FlowId),
            Some(p) => {
                // A switch posts nothing: its message starts on the wire's queue now.
                if let Some(h) = self.hostm.as_mut() {
                    h.started_at(id as FlowId, now);
                }
                self.inject(now, p, id as FlowId)
            }
        }
    }
}

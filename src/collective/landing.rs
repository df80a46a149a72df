//! How a transfer that has arrived becomes done at its receiver: the step's
//! synchronisation latency (NCCL's per-step cost, `protocol`), the reduction engine (a
//! GPU reduces one piece at a time at `reduce_rate`; a switch aggregates each port's
//! stream in parallel, SHARP-like) and the connection order (each sender's and
//! channel's pieces are taken in the order they were sent, as NCCL's FIFOs and CollNet
//! streams are). A ring's piece inside a server that books no reduction is done at a
//! time known when it is sent, so its arrival is not an event (`land_at_send`). Leaves
//! out: a GPU's reduction contending with its copies for memory bandwidth.

use super::{dag, protocol, CollectiveOp, CollectiveRun};
use crate::units::{serialization_delay, SimDuration, SimTime};

impl CollectiveRun {
    /// The latency of one step from rank `src` to rank `dst` after its bytes arrived:
    /// NCCL's NVLink step latency inside a server, what a network step costs beyond the
    /// host model across servers, nothing to or from a switch.
    pub(super) fn step_latency(&self, src: u32, dst: u32) -> SimDuration {
        if src >= self.n || dst >= self.n {
            return SimDuration::ZERO;
        }
        let a = self.algo;
        if self.ranks[src as usize].server == self.ranks[dst as usize].server {
            self.cfg
                .intra_latency
                .unwrap_or_else(|| protocol::nvlink_step_latency(a, self.proto))
        } else {
            protocol::net_step_extra(a, self.proto, self.n <= self.nodes)
        }
    }

    /// The receiver's reduction of `xfer`: (time its engine is busy, latency after).
    pub(super) fn reduce_parts(&self, xfer: u32) -> (SimDuration, SimDuration) {
        let (reduce, bytes, at_switch) = if self.is_graph() {
            let d = &self.graph.node(self.graph.at(xfer));
            // NVLink SHARP: the NVSwitch adds, not the receiving GPU.
            (
                d.reduce && d.nvls != dag::Nvls::Reduce,
                d.bytes,
                d.dst >= self.n,
            )
        } else {
            let x = &self.xfers[xfer as usize];
            (x.reduce, x.bytes, false)
        };
        match (reduce, at_switch) {
            (false, _) => (SimDuration::ZERO, SimDuration::ZERO),
            (true, false) => (
                serialization_delay(bytes, self.cfg.reduce_rate),
                SimDuration::ZERO,
            ),
            (true, true) => (
                serialization_delay(bytes, self.cfg.switch_reduce_rate),
                self.cfg.switch_reduce_latency,
            ),
        }
    }

    /// Time the receiver of `xfer` spends reducing it into its own buffer: a GPU at
    /// `reduce_rate`, or a switch's aggregation engine (its latency plus the bytes at
    /// its rate), when nothing else is queued for that engine.
    pub fn reduce_time(&self, xfer: u32) -> SimDuration {
        let (busy, latency) = self.reduce_parts(xfer);
        busy + latency
    }

    /// Transfer `xfer` landed at its receiver at `arrival`: when it is done there. A GPU
    /// reduces one piece at a time; a switch aggregates each incoming stream at port
    /// rate in parallel; every receiver takes each connection's (sender's and channel's)
    /// pieces in the order they were sent, as NCCL's FIFOs and CollNet streams do
    /// (NVLSTree's multicast pieces are gathered instead: `arrived`).
    pub fn landed(&mut self, xfer: u32, arrival: SimTime) -> SimTime {
        let (src, dst, channel) = self.transfer_ends(xfer);
        // The step's synchronisation comes before the receiver can use the bytes.
        let arrival = arrival + self.step_latency(src, dst);
        // The engine is busy for the bytes at its rate; a switch's aggregation latency
        // is a pipeline delay, not occupancy.
        let (busy, latency) = self.reduce_parts(xfer);
        let e = dst as usize;
        if self.reducer_free.len() <= e {
            self.reducer_free.resize(e + 1, SimTime::ZERO);
        }
        let mut done = arrival;
        if dst >= self.n {
            // A switch aggregates each port's stream at that port's rate, in parallel.
            done = arrival + busy + latency;
        } else if busy > SimDuration::ZERO {
            let free = arrival.max(self.reducer_free[e]) + busy;
            self.reducer_free[e] = free;
            done = free;
        }
        let k = self.connection(dst, channel);
        let first = &mut self.in_order[k];
        if first.sender == src || first.sender == u32::MAX {
            first.sender = src;
            done = done.max(first.done);
            first.done = done;
            return done;
        }
        if self.in_order_more.len() <= k {
            self.in_order_more.resize(k + 1, Vec::new());
        }
        let conns = &mut self.in_order_more[k];
        match conns.iter_mut().find(|c| c.0 == src) {
            Some(c) => {
                done = done.max(c.1);
                c.1 = done;
            }
            None => conns.push((src, done)),
        }
        done
    }

    /// A ring's transfer `xfer` inside a server is moved and will arrive at `arrival`:
    /// whether its arrival is an event, and when it is done if that is known now. A
    /// GPU's reduction engine is booked in the order transfers arrive, from every
    /// channel, so a transfer that books it has its arrival as an event (`arrived`).
    /// One that books none (nothing to reduce, or no bytes) is done at `landed`'s time
    /// once every transfer sent before it to its receiver on its channel is booked (a
    /// connection's transfers are booked in the order they were sent, and arrive in
    /// it: each channel moves one at a time, and a ring's receiver has one sender per
    /// channel): at once when none is on its way, else when the last of those arrives
    /// (one such transfer waits beside its connection, `FirstSender`; another has its
    /// arrival event). Either way it needs no arrival event of its own (issue 17:
    /// pieces only copied, and empty slices, are most of a rail-wired ring's
    /// intra-server transfers).
    /// Every time comes out as it would with an arrival event for every transfer
    /// (`tests::a_piece_only_copied_needs_no_arrival_event`).
    pub fn land_at_send(&mut self, xfer: u32, arrival: SimTime) -> Landing {
        if !self.counts_arrivals() {
            return Landing::OnArrival;
        }
        let x = &self.xfers[xfer as usize];
        let k = self.connection(x.dst, x.channel);
        let books_engine = self.reduce_parts(xfer).0 > SimDuration::ZERO;
        let first = &mut self.in_order[k];
        if first.arriving == 0 && !books_engine && self.land_early {
            // A waiting transfer is booked when the last arrival before it is taken.
            debug_assert_eq!(first.deferred, u32::MAX, "none waits with none on its way");
            return Landing::Done(self.landed(xfer, arrival));
        }
        // One transfer at a time waits beside the connection (a ring's usual case: a
        // step's empty second slice behind its first); any other has its event.
        if books_engine || !self.land_early || first.deferred != u32::MAX {
            first.arriving += 1;
            return Landing::OnArrival;
        }
        first.deferred = xfer;
        first.deferred_after = first.arriving;
        first.deferred_arrival = arrival;
        Landing::Deferred
    }

    /// Whether this run's arrivals are counted per connection (`land_at_send`): a
    /// ring's, but for an all-to-all, whose receiver has many senders on a channel,
    /// arriving in any order (a graph's transfers are its nodes).
    fn counts_arrivals(&self) -> bool {
        !self.is_graph() && self.cfg.op != CollectiveOp::Alltoall
    }

    /// Receiver `dst`'s connection order on `channel` (its place in `in_order`, made
    /// if new).
    fn connection(&mut self, dst: u32, channel: u32) -> usize {
        let k = self.rank_channel(dst, channel);
        if self.in_order.len() <= k {
            self.in_order.resize(k + 1, FirstSender::NONE);
        }
        k
    }

    /// A ring's transfer inside a server that `land_at_send` left to its arrival event
    /// has arrived and been booked: a transfer deferred behind it that no longer waits
    /// for any other is booked now, and when it is done goes into `out` (nothing for a
    /// run whose arrivals are not counted).
    pub(super) fn arrival_taken(&mut self, xfer: u32, out: &mut Vec<(u32, SimTime)>) {
        if !self.counts_arrivals() {
            return;
        }
        let x = &self.xfers[xfer as usize];
        let k = self.connection(x.dst, x.channel);
        let first = &mut self.in_order[k];
        first.arriving -= 1;
        if first.deferred == u32::MAX {
            return;
        }
        first.deferred_after -= 1;
        if first.deferred_after == 0 {
            let (x, arrival) = (first.deferred, first.deferred_arrival);
            first.deferred = u32::MAX;
            let done = self.landed(x, arrival);
            out.push((x, done));
        }
    }
}

/// What becomes of a ring's transfer inside a server when it is sent
/// (`land_at_send`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Landing {
    /// Its arrival is an event (`arrived`).
    OnArrival,
    /// It is done then; it needs no arrival event.
    Done(SimTime),
    /// It is booked when the last transfer sent before it on its connection arrives
    /// (`arrival_taken`); it needs no arrival event.
    Deferred,
}

/// A receiver's connection order on one channel: its first sender's last transfer and
/// when it was done (others' are kept apart), how many transfers to it on this channel
/// have an arrival event still to come, and the one transfer, if any, waiting to be
/// booked after the first `deferred_after` of those (`land_at_send`). 32 bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct FirstSender {
    /// `u32::MAX`: none yet.
    sender: u32,
    arriving: u32,
    done: SimTime,
    /// `u32::MAX`: none waits.
    deferred: u32,
    deferred_after: u32,
    deferred_arrival: SimTime,
}

impl FirstSender {
    const NONE: FirstSender = FirstSender {
        sender: u32::MAX,
        arriving: 0,
        done: SimTime::ZERO,
        deferred: u32::MAX,
        deferred_after: 0,
        deferred_arrival: SimTime::ZERO,
    };
}

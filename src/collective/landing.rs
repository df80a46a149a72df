//! How a transfer that has arrived becomes done at its receiver: the step's
//! synchronisation latency (NCCL's per-step cost, `protocol`), the reduction engine (a
//! GPU reduces one piece at a time at `reduce_rate`; a switch aggregates each port's
//! stream in parallel, SHARP-like) and the connection order (each sender's and
//! channel's pieces are taken in the order they were sent, as NCCL's FIFOs and CollNet
//! streams are). Leaves out: a GPU's reduction contending with its copies for memory
//! bandwidth.

use super::{dag, protocol, CollectiveRun};
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
        let k = e * self.cfg.channels as usize + channel as usize;
        if self.in_order.len() <= k {
            self.in_order.resize(k + 1, (u32::MAX, SimTime::ZERO));
        }
        let first = &mut self.in_order[k];
        if first.0 == src || first.0 == u32::MAX {
            first.0 = src;
            done = done.max(first.1);
            first.1 = done;
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
}

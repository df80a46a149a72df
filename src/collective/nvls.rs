//! NVLSTree as NCCL runs it without registered buffers (nccl-tests' default): the steps
//! a rank's scatter and gather warps copy, and a multicast posted as one store.
//!
//! Sources: `src/device/all_reduce.h` (`RunWorkColl<..., NCCL_ALGO_NVLS_TREE,
//! NCCL_PROTO_SIMPLE>`: scatter, reduce, bcast and gather warps), `prims_simple.h`
//! (`scatter` fills every head's slot of a step and posts them together; `gather` waits
//! for all its peers), `src/transport/nvls.cc` (`ncclNvlsBufferSetup`: a head's buffer
//! per channel is `nvlsChunkSize x NCCL_STEPS`). The copy rate is calibrated on
//! NVIDIA/nccl-tests#294 (`defaults::NVLS_COPY_RATE`).
//!
//! Leaves out: registered buffers (no copies), the tree root's larger share of warps,
//! and the NVSwitch's own reduction throughput.

use super::{dag, graph, protocol, CollectiveRun, Send, ELEMENT_BYTES};
use crate::units::{serialization_delay, BitsPerSec, SimTime};

/// NVLSTree: a rank's gather of one chunk, waiting for every head's multicast pieces.
#[derive(Clone, Debug)]
pub(super) struct GatherStep {
    pub(super) chunk: u32,
    /// Pieces in so far, and when the last came.
    pub(super) pieces: u32,
    pub(super) last: SimTime,
    pub(super) xfers: Vec<u32>,
}

impl CollectiveRun {
    /// NVLSTree: the bytes of chunk `chunk` of channel `channel`: what a rank's scatter
    /// warps copy into the NVLS buffers in one step (its own shard as well as the
    /// others') and its gather warps copy out.
    fn nvls_chunk_bytes(&self, channel: u32, chunk: u32) -> u64 {
        let (per_channel, chunk_elems) = &self.nvls_layout;
        let e = per_channel.get(channel as usize).copied().unwrap_or(0);
        let left = e.saturating_sub(chunk as u64 * chunk_elems);
        left.min(*chunk_elems) * ELEMENT_BYTES
    }

    /// NVLSTree: when rank `src`'s scatter of transfer `xfer`'s chunk into the NVLS
    /// buffers is done, booking the step if it is the chunk's first transfer. NCCL's
    /// scatter (`prims.scatter`, `src/device/prims_simple.h`) fills every head's slot of
    /// a step together and posts them when the whole step is copied, so all of a
    /// chunk's shards leave at once; `share` is the channel's share of the GPU's link,
    /// which carries the shards for the other heads.
    pub fn nvls_scatter_end(
        &mut self,
        now: SimTime,
        src: u32,
        xfer: u32,
        share: BitsPerSec,
    ) -> SimTime {
        let at = self.graph.at(xfer);
        let k = self.rank_channel(src, at.channel);
        if self.scatter_steps.len() <= k {
            self.scatter_steps.resize(k + 1, Vec::new());
        }
        if let Some(&(_, end)) = self.scatter_steps[k].iter().find(|e| e.0 == at.chunk) {
            return end;
        }
        let bytes = self.nvls_chunk_bytes(at.channel, at.chunk);
        let g = self
            .nvls_servers
            .as_ref()
            .map_or(1, |s| s[0].len() as u64)
            .max(1);
        let copy = serialization_delay(bytes, self.cfg.nvls_copy_rate)
            .max(serialization_delay(bytes * (g - 1) / g, share));
        let chan = self.channel_free(src, at.channel);
        let end = now.max(*chan) + copy;
        *chan = end;
        let steps = &mut self.scatter_steps[k];
        // Only chunks still in flight can be asked for again (NCCL_STEPS of them).
        steps.retain(|e| e.0 + protocol::NCCL_STEPS >= at.chunk);
        steps.push((at.chunk, end));
        end
    }

    /// Transfer `xfer` landed at `arrival`: what is done, and when, goes into `out`.
    /// Each transfer is done on its own (`landed`) except NVLSTree's multicast pieces:
    /// a rank's gather warps copy a chunk out of the multicast buffer in one step once
    /// every head's pieces of it are in (`prims.gather` waits for all its peers), so
    /// they are done together when that copy ends.
    pub fn arrived(&mut self, xfer: u32, arrival: SimTime, out: &mut Vec<(u32, SimTime)>) {
        let gathered = self.is_graph() && {
            let nvls = self.graph.node(self.graph.at(xfer)).nvls;
            matches!(nvls, dag::Nvls::Multicast | dag::Nvls::Replica)
        };
        if !gathered {
            out.push((xfer, self.landed(xfer, arrival)));
            self.arrival_taken(xfer, out);
            return;
        }
        let at = self.graph.at(xfer);
        let d = self.graph.node(at);
        let arrival = arrival + self.step_latency(d.src, d.dst);
        self.gather_piece(d.dst, at, arrival, Some(xfer), out);
    }

    /// NVLSTree: head `head` multicast transfer `xfer` (a piece of its own shard of a
    /// chunk), landing at `end`: the multicast writes its own copy of the multicast
    /// buffer too, which its gather waits for as for the other heads' pieces; what that
    /// completes goes into `out`.
    pub fn own_multicast(
        &mut self,
        head: u32,
        xfer: u32,
        end: SimTime,
        out: &mut Vec<(u32, SimTime)>,
    ) {
        let at = self.graph.at(xfer);
        let arrival = end + self.step_latency(head, head);
        self.gather_piece(head, at, arrival, None, out);
    }

    /// One piece of chunk `at.chunk` is in rank `rank`'s multicast buffer at `arrival`
    /// (the transfer it completes, if any): once all of a chunk's are (two per shard,
    /// one per tree, of every head of the server, the rank's own too), the gather copies
    /// the chunk out and the pieces are done.
    fn gather_piece(
        &mut self,
        rank: u32,
        at: graph::At,
        arrival: SimTime,
        xfer: Option<u32>,
        out: &mut Vec<(u32, SimTime)>,
    ) {
        let g = self.nvls_servers.as_ref().map_or(2, |s| s[0].len() as u32);
        let expected = 2 * g;
        let k = self.rank_channel(rank, at.channel);
        if self.gather_wait.len() <= k {
            self.gather_wait.resize(k + 1, Vec::new());
            self.gather_free.resize(k + 1, SimTime::ZERO);
        }
        let waits = &mut self.gather_wait[k];
        let i = match waits.iter().position(|w| w.chunk == at.chunk) {
            Some(i) => i,
            None => {
                waits.push(GatherStep {
                    chunk: at.chunk,
                    pieces: 0,
                    last: SimTime::ZERO,
                    xfers: Vec::new(),
                });
                waits.len() - 1
            }
        };
        let w = &mut waits[i];
        w.pieces += 1;
        w.last = w.last.max(arrival);
        w.xfers.extend(xfer);
        if w.pieces < expected {
            return;
        }
        let GatherStep { last, xfers, .. } = waits.swap_remove(i);
        let copy = serialization_delay(
            self.nvls_chunk_bytes(at.channel, at.chunk),
            self.cfg.nvls_copy_rate,
        );
        let done = last.max(self.gather_free[k]) + copy;
        self.gather_free[k] = done;
        out.extend(xfers.into_iter().map(|x| (x, done)));
    }

    /// NVLSTree's multicast of a piece goes as one store to every other GPU of the
    /// server, so its copies (the `Nvls::Multicast` node and the `Nvls::Replica` nodes
    /// after it) are posted together once every one is ready (each waits for its
    /// receiver's buffer slot): graph transfer `i`, one of them, is ready.
    pub(super) fn issue_multicast_copy(&mut self, i: u32, out: &mut Vec<Send>) {
        let at = self.graph.at(i);
        // The group's first node, the multicast (its replicas follow it).
        let mut first = at;
        while self.graph.node(first).nvls == dag::Nvls::Replica {
            first.node -= 1;
        }
        let copies = self
            .nvls_servers
            .as_ref()
            .map_or(1, |s| s[0].len() as u32 - 1);
        let len = self.graph.chunk_len(at.channel);
        let w = protocol::NCCL_STEPS;
        let c = at.channel as usize;
        if self.mc_ready.len() <= c {
            self.mc_ready.resize(c + 1, Vec::new());
        }
        if self.mc_ready[c].is_empty() {
            self.mc_ready[c] = vec![0; (w * len) as usize];
        }
        // At most NCCL_STEPS chunks' multicasts are pending on a channel: each copy of
        // chunk j + 8 waits for the same copy of chunk j, posted with its group.
        let k = ((at.chunk % w) * len + first.node) as usize;
        self.mc_ready[c][k] += 1;
        if self.mc_ready[c][k] < copies {
            return;
        }
        self.mc_ready[c][k] = 0;
        let base = i - at.node;
        for node in first.node..first.node + copies {
            self.post_node(base + node, out);
        }
    }
}

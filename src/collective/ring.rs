//! The ring runtime's rules (NCCL's `src/device/all_reduce.h`, `prims_simple.h`): how a
//! size is laid out in loops and pieces per channel, which piece a rank sends at each
//! step and to whom, and when a send is ready (its predecessor's piece has landed and
//! the receiver has a buffer slot free, as the sender knows: a receiver on another
//! server tells it with a clear-to-send, `slot_freed`). With Simple, allreduce,
//! reduce-scatter and allgather send each step's chunk as NCCL's two slices
//! (`protocol::Slicing`): slice j of a step waits only for slice j of the step before,
//! so the next rank forwards the first half while the second is still on its way. A
//! transfer's completion frees its record and moves its receiver and sender on
//! (`on_ring_done`); the event loop loads what that reads ahead (`prefetch_transfer`).
//! The state lives in `CollectiveRun`.

use super::{hash, CollectiveOp, CollectiveRun, Layout, Send, Xfer, ELEMENT_BYTES, TRACKED_SLOTS};
use crate::units::SimTime;

impl CollectiveRun {
    pub(super) fn steps_per_loop(&self) -> u32 {
        match self.cfg.op {
            CollectiveOp::Allreduce => 2 * (self.n - 1),
            _ => self.n - 1,
        }
    }

    /// Lays out the current size: per channel its elements, split into loops.
    pub(super) fn lay_out(&mut self) {
        let size = self.cfg.sizes[self.size_index];
        let elems = size.div_ceil(ELEMENT_BYTES);
        let ch = self.cfg.channels as u64;
        let n = self.n as u64;
        let chunk_elems = (self.chunk_bytes() / ELEMENT_BYTES).max(1);
        let per_loop = match self.cfg.op {
            CollectiveOp::Broadcast => chunk_elems,
            CollectiveOp::Alltoall => u64::MAX,
            _ => n * chunk_elems,
        };
        let mut loops = Vec::new();
        for c in 0..ch {
            let e = elems / ch + u64::from(c < elems % ch);
            let mut v = Vec::new();
            let mut left = e;
            loop {
                let take = left.min(per_loop);
                v.push(take);
                left -= take;
                if left == 0 {
                    break;
                }
            }
            loops.push(v);
        }
        let max_loops = loops.iter().map(|v| v.len()).max().unwrap_or(1) as u32;
        let slicing = self.ring_slicing();
        let (slots, sends, recvs): (u32, Vec<u32>, Vec<u32>) = match self.cfg.op {
            CollectiveOp::Broadcast => {
                // Per rank and channel: the root's successors down the ring forward.
                let ch = self.cfg.channels;
                let mut s = vec![0; (self.n * ch) as usize];
                let mut r = vec![0; (self.n * ch) as usize];
                for p in 0..self.n {
                    for c in 0..ch {
                        let q = self.rel_to_root(p, c);
                        let i = (p * ch + c) as usize;
                        s[i] = if q + 1 < self.n { max_loops } else { 0 };
                        r[i] = if q > 0 { max_loops } else { 0 };
                    }
                }
                (max_loops, s, r)
            }
            CollectiveOp::Alltoall => (
                self.n,
                vec![self.n - 1; (self.n * self.cfg.channels) as usize],
                vec![self.n - 1; (self.n * self.cfg.channels) as usize],
            ),
            _ => {
                // Each step's chunk goes as `slices` transfers, each its own slot.
                let spl = self.steps_per_loop() * slicing.slices;
                let k = (self.n * self.cfg.channels) as usize;
                (
                    max_loops * self.n * slicing.slices,
                    vec![max_loops * spl; k],
                    vec![max_loops * spl; k],
                )
            }
        };
        // A stride coprime with the ranks and slices, so the sample covers every piece
        // index (a multiple of n would track piece 0 of each loop only).
        let mut stride = slots.div_ceil(TRACKED_SLOTS).max(1);
        while stride > 1 && gcd(stride, self.n * slicing.slices) != 1 {
            stride += 1;
        }
        self.layout = Layout {
            loops,
            stride,
            tracked: slots.div_ceil(stride),
            sends,
            recvs,
            slicing,
        };
    }

    /// Where ring slot `slot` of channel `c` is kept in a rank's record, if it is one of
    /// the tracked slots.
    pub(super) fn cell(&self, c: u32, slot: u32) -> Option<usize> {
        let l = &self.layout;
        (slot % l.stride == 0).then(|| (c * l.tracked + slot / l.stride) as usize)
    }

    /// Elements in piece `piece` of loop `l` on channel `c` (0 past the channel's end).
    pub(super) fn piece_elems(&self, c: u32, l: u32, piece: u32) -> u64 {
        let Some(&e) = self.layout.loops[c as usize].get(l as usize) else {
            return 0;
        };
        match self.cfg.op {
            CollectiveOp::Broadcast => e,
            CollectiveOp::Alltoall => {
                let n = self.n as u64;
                e / n + u64::from((piece as u64) < e % n)
            }
            _ => {
                let n = self.n as u64;
                e / n + u64::from((piece as u64) < e % n)
            }
        }
    }

    pub(super) fn rank_finished(&self, p: u32) -> bool {
        self.channels_left[p as usize] == 0
    }

    /// Whether rank and channel `i` (`p * channels + c`) has nothing left to send or
    /// receive.
    pub(super) fn channel_finished(&self, i: usize) -> bool {
        let g = &self.progress[i];
        g.next_send >= g.sends && g.recv_done >= g.recvs
    }

    /// One of rank `p`'s channels just finished: the rank is, with its last.
    pub(super) fn channel_done(&mut self, p: u32) {
        let left = &mut self.channels_left[p as usize];
        *left -= 1;
        if *left == 0 {
            self.ranks_done += 1;
        }
    }

    /// Ring position of rank `p` on channel `c`, counted from the root's.
    pub(super) fn rel_to_root(&self, p: u32, c: u32) -> u32 {
        let pos = &self.positions[c as usize];
        (pos[p as usize] + self.n - pos[self.cfg.root as usize]) % self.n
    }

    /// Receiver `dst` has taken its receive `taken` (0-based) on channel `c` from
    /// `src`, freeing that buffer slot. Inside a server the sender sees it at once (it
    /// polls the receiver's head over NVLink, P2P transport); across servers the
    /// receiver's proxy posts the slot's receive and with it a clear-to-send, an inline
    /// RDMA WRITE into the sender's FIFO (`net_ib`: `ncclIbIrecv`, `ncclIbPostFifo`), which
    /// the glue delivers one fabric latency later. A slot past the sender's last send
    /// clears nothing it waits for, and is not told (so none is in flight when the
    /// iteration ends).
    pub(super) fn slot_freed(
        &mut self,
        src: u32,
        dst: u32,
        c: u32,
        taken: u32,
        out: &mut Vec<Send>,
    ) {
        let i = self.rank_channel(src, c);
        // Alltoall's receivers keep a slot per sender: no window to clear.
        if self.cfg.op == CollectiveOp::Alltoall
            || taken + self.layout.slicing.window() >= self.progress[i].sends
        {
            return;
        }
        if self.ranks[src as usize].server == self.ranks[dst as usize].server {
            self.progress[i].cleared += 1;
            self.issue(src, c, out);
        } else {
            self.clear_to_send.push(super::ClearToSend {
                receiver: dst,
                sender: src,
                channel: c,
            });
        }
    }

    /// The clear-to-sends the last input made, for the glue to deliver (and empties
    /// the list).
    pub fn take_clear_to_sends(&mut self, into: &mut Vec<super::ClearToSend>) {
        into.append(&mut self.clear_to_send);
    }

    /// Rank `sender`'s clear-to-send for channel `c` arrived (now): one more slot is free
    /// at its receiver.
    pub fn on_clear_to_send(&mut self, now: SimTime, sender: u32, c: u32, out: &mut Vec<Send>) {
        let i = self.rank_channel(sender, c);
        self.progress[i].cleared += 1;
        self.issue(sender, c, out);
        // On one thread the last rank finishes by a receive; a split run's copy may
        // finish its ranks with a send.
        if self.ranks_done == self.ranks_here() && self.share.is_some() {
            self.ranks_here_done(now);
        }
    }

    /// Posts every send of rank `p` on channel `c` that is ready, in program order.
    pub(super) fn issue(&mut self, p: u32, c: u32, out: &mut Vec<Send>) {
        let n = self.n;
        let idx = self.rank_channel(p, c);
        loop {
            let g = self.progress[idx];
            let k = g.next_send;
            if k >= g.sends {
                return;
            }
            // NCCL_STEPS buffer slots per connection, a slice taking `steps_per_slice` of
            // them: at most `window` transfers sent and not yet cleared by the receiver
            // (alltoall's peers each have their own). Checked first: it needs no
            // division (most calls find the send not ready, stop 58).
            if self.cfg.op != CollectiveOp::Alltoall
                && k >= g.cleared + self.layout.slicing.window()
            {
                return;
            }
            // What to send, to whom, and whether it waits for a receive; for a ring's
            // step, its loop, piece and slice, and the sends a loop takes.
            let (dst, slot, reduce, ready, (l, piece, j), loop_sends) = match self.cfg.op {
                CollectiveOp::Broadcast => {
                    let q = self.rel_to_root(p, c);
                    (g.next, k, false, q == 0 || g.recv_done > k, (0, 0, 0), 0)
                }
                CollectiveOp::Alltoall => {
                    let dst = (p + 1 + k) % n;
                    // The receiver stores it in the slot named after the sender.
                    (dst, p, false, true, (0, 0, 0), 0)
                }
                _ => {
                    // Send k is slice j of step s of loop l; slice j of the step before
                    // is `slices` receives back. Its place in its loop is counted from
                    // the loop's first send (`Progress::loop_first`), and `slices` is a
                    // power of two, so only a send divides (for its loop), not every
                    // call that finds the send waiting; s < 2n, so the piece s steps
                    // back along the ring needs none (each division is a dependent wait
                    // of tens of cycles).
                    let spl = self.steps_per_loop();
                    let slices = self.layout.slicing.slices;
                    debug_assert!(slices.is_power_of_two());
                    let tz = slices.trailing_zeros();
                    let off = k - g.loop_first;
                    let (s, j) = (off >> tz, off & (slices - 1));
                    debug_assert_eq!((s, j), ((k >> tz) % spl, k & (slices - 1)));
                    if g.recv_done + slices <= k && s != 0 {
                        return;
                    }
                    let l = g.loop_first / (spl << tz);
                    let back = if s >= n { s - n } else { s };
                    let piece = if g.pos >= back {
                        g.pos - back
                    } else {
                        g.pos + n - back
                    };
                    let reduce = match self.cfg.op {
                        CollectiveOp::Allreduce => s < n - 1,
                        CollectiveOp::ReduceScatter => true,
                        _ => false,
                    };
                    (
                        g.next,
                        (l * n + piece) * slices + j,
                        reduce,
                        true,
                        (l, piece, j),
                        spl << tz,
                    )
                }
            };
            if !ready {
                return;
            }
            let elems = match self.cfg.op {
                CollectiveOp::Broadcast => self.piece_elems(c, slot, 0),
                CollectiveOp::Alltoall => self.piece_elems(c, 0, p),
                _ => {
                    let step_elems = self.proto.step_data_bytes() / ELEMENT_BYTES;
                    self.layout
                        .slicing
                        .slice_elems(self.piece_elems(c, l, piece), j, step_elems)
                }
            };
            let (count, sum) = match self.cfg.op {
                // The sender's own data for that receiver.
                CollectiveOp::Alltoall => (1, hash(p)),
                // An untracked slot carries no record.
                _ => self
                    .cell(c, slot)
                    .map_or((0, 0), |i| self.buf[p as usize][i]),
            };
            let x = Xfer {
                src: p,
                dst,
                channel: c,
                slot,
                reduce,
                bytes: elems * ELEMENT_BYTES,
                count,
                sum,
            };
            let id = self.new_xfer_id(x);
            let pg = &mut self.progress[idx];
            pg.next_send += 1;
            if pg.next_send - pg.loop_first == loop_sends {
                pg.loop_first = pg.next_send;
            }
            let finished = self.channel_finished(idx);
            out.push(Send {
                xfer: id,
                src: p,
                dst,
                channel: c,
                bytes: self.proto.wire_bytes(x.bytes),
                nvls: super::dag::Nvls::No,
            });
            if finished {
                self.channel_done(p);
            }
        }
    }

    /// Starts loading what handling transfer `xfer`'s arrival or completion reads, at
    /// depth `stage` of its chain of lines (see `sim::prefetch`). Only a hint. At
    /// thousands of GPUs the transfers in flight outgrow a core's cache (81 thousand
    /// records of 48 bytes on the 4,096-GPU ring): with the second stage, a 2,048-GPU
    /// ring (`allreduce-4096.yaml` with 32 leaves) ran 0.97-0.98x the user time, pinned side
    /// by side (`scripts/side-by-side.sh`, issue 17's stop 55).
    #[inline(always)]
    pub fn prefetch_transfer(&self, xfer: u32, stage: usize) {
        // A graph's transfers are its nodes, not `xfers`.
        if self.is_graph() {
            return;
        }
        let Some(x) = self.xfers.get(xfer as usize) else {
            return;
        };
        match stage {
            // The record (48 bytes: one line in four straddles two).
            0 => crate::engine::prefetch_whole(x),
            // What it names, read from the record the stage before brought: the
            // receiver's progress on its channel and its connection order there
            // (`on_done`, `landed`), and the sender's progress (`slot_freed`).
            1 => {
                let at = |rank: u32| self.rank_channel(rank, x.channel);
                if let Some(p) = self.progress.get(at(x.dst)) {
                    crate::engine::prefetch_whole(p);
                }
                if let Some(f) = self.in_order.get(at(x.dst)) {
                    crate::engine::prefetch(f);
                }
                if let Some(p) = self.progress.get(at(x.src)) {
                    crate::engine::prefetch_whole(p);
                }
            }
            _ => {}
        }
    }

    /// A ring's transfer `xfer` has landed (and been reduced): its record is freed, the
    /// receiver's buffer and progress move on, and so may its sends and its sender's.
    pub(super) fn on_ring_done(&mut self, now: SimTime, xfer: u32, out: &mut Vec<Send>) {
        let x = self.xfers[xfer as usize];
        self.free_xfer(xfer);
        if let Some(i) = self.cell(x.channel, x.slot) {
            let cell = &mut self.buf[x.dst as usize][i];
            if x.reduce {
                cell.0 += x.count;
                cell.1 = cell.1.wrapping_add(x.sum);
            } else {
                *cell = (x.count, x.sum);
            }
        }
        let i = self.rank_channel(x.dst, x.channel);
        self.progress[i].recv_done += 1;
        // The receive that finishes the channel (if its sends are done too).
        if self.progress[i].recv_done == self.progress[i].recvs && self.channel_finished(i) {
            self.channel_done(x.dst);
        }
        self.issue(x.dst, x.channel, out);
        // A buffer slot came free at the receiver: its sender may go on once it knows.
        self.slot_freed(x.src, x.dst, x.channel, self.progress[i].recv_done - 1, out);
        if self.ranks_done == self.ranks_here() {
            self.ranks_here_done(now);
        }
    }
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

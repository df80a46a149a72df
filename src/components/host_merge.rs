//! A split run's host pipelines put together (`sim::parallel`, issue 17). Each
//! partition's copy of the pipeline is touched only for the NICs it owns: a NIC's
//! posting contexts, DMA engines, interrupt moderation and counters come from its
//! owner's copy (`HostPipeline::nics_mut`, picked like every other component); a
//! message's sender-side stamps (up to `T_READY`, its doorbell batch, its posting mode,
//! its open send completion) from its source's owner, and its receiver-side stamps
//! (`T_DELIVERED` on) from the owner of the host its data lands at.

use super::{HostPipeline, NicState, T_DELIVERED};

impl HostPipeline {
    /// Each NIC's state, to be taken from the partition that owns it.
    pub fn nics_mut(&mut self) -> &mut Vec<NicState> {
        &mut self.nics
    }

    /// Puts the messages of `copies` (one per partition, in partition order) together
    /// into the first; `owner(nic)` is the partition that owns `nic`. The copies hold
    /// the same messages in the same slots (a split run retires none: collectives run
    /// on one thread).
    pub fn merge_messages(
        mut copies: Vec<HostPipeline>,
        owner: impl Fn(u32) -> usize,
    ) -> HostPipeline {
        let msgs = (0..copies[0].msgs.len())
            .map(|j| {
                let m = copies[0].msgs[j].msg;
                let (tx, rx) = (owner(m.src), owner(copies[0].data_receiver(&m)));
                let mut out = copies[tx].msgs[j];
                let theirs = &copies[rx].msgs[j];
                debug_assert!(
                    tx == rx || theirs.t[..T_DELIVERED].iter().all(|&t| t == u64::MAX),
                    "message {j}: the receiver's partition stamped a sender's stage"
                );
                out.t[T_DELIVERED..].copy_from_slice(&theirs.t[T_DELIVERED..]);
                out
            })
            .collect();
        let mut p = copies.swap_remove(0);
        p.msgs = msgs;
        p
    }
}

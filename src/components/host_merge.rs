//! A split run's host pipelines put together (`sim::parallel`, issue 17). Each
//! partition's copy of the pipeline is touched only for the NICs it owns: a NIC's
//! posting contexts, DMA engines, interrupt moderation and counters come from its
//! owner's copy (`HostPipeline::nics_mut`, picked like every other component); a
//! message's sender-side stamps (up to `T_READY`, its doorbell batch, its posting mode,
//! its open send completion) from its source's owner, and its receiver-side stamps
//! (`T_DELIVERED` on) from the owner of the host its data lands at. The latest sender's
//! CQE computed ahead and counted is the latest of any copy's.

use super::{HostPipeline, MsgTimes, NicState, T_DELIVERED};

/// A message's sending side (`tx`: its stamps up to `T_READY`, batch, mode, open send
/// completion) with the receiving side's stamps (`rx`: `T_DELIVERED` on).
pub fn merge_sides(tx: &MsgTimes, rx: &MsgTimes) -> MsgTimes {
    let mut out = *tx;
    out.t[T_DELIVERED..].copy_from_slice(&rx.t[T_DELIVERED..]);
    out
}

impl HostPipeline {
    /// Each NIC's state, to be taken from the partition that owns it.
    pub fn nics_mut(&mut self) -> &mut Vec<NicState> {
        &mut self.nics
    }

    /// Puts the messages of `copies` (one per partition, in partition order) together
    /// into the first; `ends(j)` are the partitions of message j's sender and of the
    /// host its data lands at (a split run has no READ). The copies hold the messages in
    /// the same slots, padded to the same length (a collective's transfer is held by its
    /// sender's and its receiver's partitions).
    pub fn merge_messages(
        mut copies: Vec<HostPipeline>,
        ends: impl Fn(usize) -> (usize, usize),
    ) -> HostPipeline {
        let msgs = (0..copies[0].msgs.len())
            .map(|j| {
                let (tx, rx) = ends(j);
                debug_assert!(
                    tx == rx
                        || copies[rx].msgs[j].t[..T_DELIVERED]
                            .iter()
                            .all(|&t| t == u64::MAX),
                    "message {j}: the receiver's partition stamped a sender's stage"
                );
                merge_sides(&copies[tx].msgs[j], &copies[rx].msgs[j])
            })
            .collect();
        let counted_to = copies.iter().map(|c| c.send_cqes_counted_to).max();
        let mut p = copies.swap_remove(0);
        p.msgs = msgs;
        p.send_cqes_counted_to = counted_to.unwrap_or_default();
        p
    }

    /// Pads the messages to `len` slots with `hole` (a split run's slots no partition
    /// filled, dropped at the end).
    pub fn pad_messages(&mut self, len: usize, hole: super::Message) {
        if self.msgs.len() < len {
            let h = self.new_record(hole);
            self.msgs.resize(len, h);
        }
    }
}

//! The NIC's send scheduler: a line-rate sender that round-robins over its jobs.
//!
//! Models: a NIC segments each message into path-MTU packets and puts them on its link
//! back to back, one packet per turn for each job with work (a raw flow, an RC requester or
//! an RC responder streaming READ responses), the way a NIC's send scheduler interleaves
//! queue pairs; ACKs and NAKs go first. Packets are made only when the link is free, so a
//! host holds no data queue and its memory does not grow with message size.
//!
//! The host and NIC pipeline before the wire (doorbells, WQE fetch, DMA, completions) is
//! `components::host`; queue pairs are `transport::rc`; this scheduler is the seam between
//! them and the port: `activate` a job, `pop_job` when the port is free.
//!
//! Leaves out: weighted or strict priorities between queue pairs, per-QP rate limiters
//! other than congestion control's pacing.

use crate::engine::PktId;
use std::collections::VecDeque;

/// A NIC port's send scheduler.
#[derive(Debug, Default, Clone)]
pub struct Nic {
    /// Jobs (flows, or queue-pair halves) that may have a packet to send, in round-robin
    /// order.
    active: VecDeque<u32>,
    /// ACK/NAK and CNP packets waiting for the link: sent before any data.
    pub ctrl: VecDeque<PktId>,
    /// A wake-up is scheduled for when a paced job may send.
    pub wake_at: Option<crate::units::SimTime>,
    /// A data packet made and waiting for link credit (IB).
    pub held: Option<PktId>,
    /// The key reserved for the end of the packet on the port that no event marks
    /// (`EventQueue::reserve`), 0 if none: sent while the scheduler had nothing else,
    /// its end is an event only if something waits for it (`Sim::settle_tx`).
    pub tx_end_unmarked: u128,
}

impl Nic {
    /// A job has data to send: it joins the back of the round robin.
    #[inline]
    pub fn activate(&mut self, job: u32) {
        self.active.push_back(job);
    }

    /// The job whose turn it is; the caller puts it back with `activate` if it still has
    /// work after sending.
    #[inline]
    pub fn pop_job(&mut self) -> Option<u32> {
        self.active.pop_front()
    }

    /// What the NIC's next send reads (for a prefetch): its first control packet, else
    /// its first job (a packet `held` for credits goes before any job, and is not
    /// named).
    #[inline(always)]
    pub fn next_send(&self) -> (Option<&PktId>, Option<&u32>) {
        (self.ctrl.front(), self.active.front())
    }

    /// Jobs listed.
    #[inline]
    pub fn jobs(&self) -> usize {
        self.active.len()
    }

    #[inline]
    pub fn is_idle(&self) -> bool {
        self.active.is_empty() && self.ctrl.is_empty() && self.held.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_over_jobs() {
        let mut h = Nic::default();
        h.activate(1);
        h.activate(2);
        let mut left = [0u32, 2, 1];
        let mut order = vec![];
        while let Some(j) = h.pop_job() {
            order.push(j);
            left[j as usize] -= 1;
            if left[j as usize] > 0 {
                h.activate(j);
            }
        }
        assert_eq!(order, vec![1, 2, 1]);
        assert!(h.is_idle());
    }
}

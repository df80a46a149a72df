//! The minimal host: a line-rate sender that round-robins over its active flows.
//!
//! Models: a host segments each message into path-MTU packets and puts them on its link
//! back to back, one packet per turn for each active flow (the way a NIC's send scheduler
//! interleaves queue pairs). Packets are made only when the link is free, so a host holds
//! no packet queue and its memory does not grow with message size.
//!
//! Leaves out: everything between the application and the wire (doorbells, WQE fetch,
//! DMA, completions) and any transport (no ACKs, no retransmission: a dropped packet
//! leaves its flow incomplete). The NIC and RC transport issues replace this module
//! behind the same seam: `activate` a flow, ask `next_flow` when the port is free.

use crate::engine::FlowId;
use std::collections::VecDeque;

/// A host's send scheduler.
#[derive(Debug, Default, Clone)]
pub struct Host {
    /// Flows with bytes left to segment, in round-robin order.
    active: VecDeque<FlowId>,
}

impl Host {
    /// A flow has data to send.
    pub fn activate(&mut self, flow: FlowId) {
        self.active.push_back(flow);
    }

    /// The flow whose packet goes next, or `None` when idle. `more_after(f)` says whether
    /// flow `f` still has bytes left after this packet; if so it goes to the back.
    pub fn next_flow(&mut self, more_after: impl FnOnce(FlowId) -> bool) -> Option<FlowId> {
        let f = self.active.pop_front()?;
        if more_after(f) {
            self.active.push_back(f);
        }
        Some(f)
    }

    pub fn is_idle(&self) -> bool {
        self.active.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_over_active_flows() {
        let mut h = Host::default();
        h.activate(1);
        h.activate(2);
        let left = std::cell::RefCell::new([0u32, 2, 1]);
        let mut order = vec![];
        while let Some(f) = h.next_flow(|f| {
            let mut l = left.borrow_mut();
            l[f as usize] -= 1;
            l[f as usize] > 0
        }) {
            order.push(f);
        }
        assert_eq!(order, vec![1, 2, 1]);
        assert!(h.is_idle());
    }
}

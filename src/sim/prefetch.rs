//! What the event loop asks the CPU to start loading for the next event while it
//! handles this one (issue 17: at thousands of GPUs the first cache line an event reads
//! is out of the caches). A hint only: the same events run the same way.

use super::Sim;
use crate::engine::Event;

impl Sim {
    /// Starts loading the state event `ev` reads first (issue 17: at 4,096 GPUs most of
    /// an event's time went to waiting for that first cache line). Only a hint: what runs
    /// is the same.
    #[inline(always)]
    pub(super) fn prefetch_for(&self, ev: Event) {
        use crate::engine::prefetch;
        match ev {
            Event::TxDone { port } | Event::Credit { port, .. } => {
                if let Some(p) = self.ports.get(port as usize) {
                    prefetch(p);
                }
            }
            Event::Arrive { port } => {
                if let Some(w) = self.wires.get(port as usize) {
                    prefetch(w);
                }
            }
            Event::FlowStage { flow, .. } => {
                if let Some(m) = self.hostm.as_ref().and_then(|h| h.msgs.get(flow as usize)) {
                    prefetch(m);
                }
            }
            Event::CollArrive { run, xfer } | Event::CollDone { run, xfer } => {
                if let Some(r) = self.colls.get(run as usize) {
                    r.prefetch_transfer(xfer);
                }
            }
            _ => {}
        }
    }
}

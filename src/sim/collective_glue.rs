//! Glue between collective runs (`collective`) and the fabric: each transfer a run asks
//! for goes over the intra-host link when both ranks share a server, else becomes a
//! flow (an RC message on the channel's queue pair, through the host model if any).

use super::{FlowState, Sim};
use crate::collective::Send;
use crate::engine::Event;
use crate::units::{serialization_delay, SimTime};
use crate::workload::FlowDef;

impl Sim {
    /// Carries out the transfers in `out` (and empties it).
    pub(super) fn dispatch_sends(&mut self, now: SimTime, run: u32, out: &mut Vec<Send>) {
        for s in out.drain(..) {
            let r = &self.colls[run as usize];
            let (a, b) = (r.ranks[s.src as usize], r.ranks[s.dst as usize]);
            if a.server == b.server {
                // NVLink-like: one transfer at a time per sending GPU.
                let (rate, latency) = (r.cfg.intra_rate, r.cfg.intra_latency);
                let reduce = r.reduce_time(s.xfer);
                let gpu = (a.server * self.gpus_per_server + a.gpu) as usize;
                let end = now.max(self.gpu_link_free[gpu]) + serialization_delay(s.bytes, rate);
                self.gpu_link_free[gpu] = end;
                self.q.schedule(
                    end + latency + reduce,
                    Event::CollDone { run, xfer: s.xfer },
                );
                continue;
            }
            // PXN: leave through this host's NIC on the receiver's rail (the relay to that
            // NIC's GPU over the intra-host fabric is not charged).
            let src_port = match (&self.sc.host, r.cfg.pxn) {
                (Some(h), true) => h.port_of(a.server, h.nic_of_gpu(b.gpu)),
                _ => a.port,
            };
            let def = FlowDef {
                src: src_port,
                dst: b.port,
                size: s.bytes,
                start: now,
                workload: r.workload,
                after: None,
            };
            let id = self.flows.len();
            let mut f = FlowState::new(&self.sc, &self.topo, &mut self.ideal_cache, id, def);
            f.conn = 1 + s.channel;
            f.coll = Some((run, s.xfer));
            self.flows.push(f);
            if let Some(h) = self.hostm.as_mut() {
                h.add_flow();
            }
            self.start_flow(now, id as u32);
        }
    }
}

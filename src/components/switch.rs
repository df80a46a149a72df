//! The switch: an output-queued switch with one shared packet buffer.
//!
//! Models: a packet that arrives is routed to an egress port (see `routing` and
//! `topology`), then admitted to that port's queue if the shared buffer allows:
//! - the buffer has room for it, and
//! - the queue stays within its limit: the dynamic threshold (Choudhury & Hahne: a queue
//!   may hold at most alpha x the free buffer; alpha = 1/8 in HPCC's simulator, design
//!   reference "Link-level flow control") or a static per-port limit.
//!
//! Otherwise the packet is tail-dropped and the drop counted with its port and reason.
//! Under a lossless flow control (PFC headroom, IB credits) the thresholds never drop:
//! only a full buffer would, which validation must rule out. Buffer space is taken at
//! admission and released when the packet's last bit leaves the egress port.
//!
//! A packet may start leaving one port-to-port latency after it arrived: after its tail
//! (store-and-forward) or its header (cut-through, never so early that the egress would
//! overtake the ingress tail).
//!
//! Leaves out: input-queued architectures, per-priority buffer pools, headroom pools
//! separate from the shared buffer.

use super::port::Queued;
use super::DropReason;
use crate::engine::PktId;
use crate::packet::RouteInfo;
use crate::units::{serialization_delay, BitsPerSec, SimDuration, SimTime};
use serde::{Deserialize, Serialize};

/// Store-and-forward or cut-through switching.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Forwarding {
    /// Forward a packet after its last byte has arrived (default).
    #[default]
    StoreAndForward,
    /// Start forwarding once the header has arrived.
    CutThrough,
}

/// Switch buffer admission rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BufferLimit {
    /// A queue may hold at most alpha x (buffer - used) bytes (Choudhury & Hahne dynamic
    /// threshold; HPCC's simulator uses alpha = 1/8).
    Dynamic { alpha: f64 },
    /// A queue may hold at most this many bytes.
    PortLimit { bytes: u64 },
}

/// A switch's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwitchConfig {
    /// Port-to-port latency.
    pub latency: SimDuration,
    pub buffer_bytes: u64,
    pub limit: BufferLimit,
    pub forwarding: Forwarding,
}

/// Admission control for a packet of `wire` bytes at an egress queue holding `queued`
/// bytes in a switch whose buffer has `used` bytes taken.
#[inline]
pub fn admit(cfg: &SwitchConfig, used: u64, queued: u64, wire: u64) -> Result<(), DropReason> {
    if used + wire > cfg.buffer_bytes {
        return Err(DropReason::BufferFull);
    }
    match cfg.limit {
        BufferLimit::Dynamic { alpha } => {
            let free = (cfg.buffer_bytes - used) as f64;
            if (queued + wire) as f64 > alpha * free {
                return Err(DropReason::DynamicThreshold);
            }
        }
        BufferLimit::PortLimit { bytes } => {
            if queued + wire > bytes {
                return Err(DropReason::PortLimit);
            }
        }
    }
    Ok(())
}

/// A packet arriving at a switch, as admission sees it.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub pkt: PktId,
    pub route: RouteInfo,
    pub wire: u64,
    /// The time its tail is in (cut-through acts on its header, earlier).
    pub tail: SimTime,
    /// Control class (ACK, NAK, CNP).
    pub ctrl: bool,
    /// ECN-capable.
    pub ect: bool,
    /// The port it came in over.
    pub ingress: u32,
}

/// One switch: its shared buffer and parameters.
#[derive(Debug, Clone)]
pub struct Switch {
    cfg: SwitchConfig,
    /// Whether link-level flow control keeps the buffer from overflowing (thresholds do
    /// not drop).
    lossless: bool,
    /// Bytes of the shared buffer in use.
    pub used: u64,
}

impl Switch {
    pub fn new(cfg: SwitchConfig, lossless: bool) -> Switch {
        Switch {
            cfg,
            lossless,
            used: 0,
        }
    }

    /// Admits `a` to an egress queue holding `queued` bytes on a link of `out_rate`:
    /// takes its buffer space and says when the port may start it.
    #[inline]
    pub fn handle_arrival(
        &mut self,
        now: SimTime,
        a: Arrival,
        queued: u64,
        out_rate: BitsPerSec,
    ) -> Result<Queued, DropReason> {
        if self.lossless {
            if self.used + a.wire > self.cfg.buffer_bytes {
                return Err(DropReason::BufferFull);
            }
        } else {
            admit(&self.cfg, self.used, queued, a.wire)?;
        }
        self.used += a.wire;
        let mut ready = now + self.cfg.latency;
        if self.cfg.forwarding == Forwarding::CutThrough {
            // Do not start so early that the egress would overtake the ingress tail.
            let ser_out = serialization_delay(a.wire, out_rate);
            let tail_ready = SimTime((a.tail + self.cfg.latency).0.saturating_sub(ser_out.0));
            ready = ready.max(tail_ready);
        }
        Ok(Queued {
            ready,
            pkt: a.pkt,
            route: a.route,
            wire: a.wire as u32,
            ect: a.ect,
            ctrl: a.ctrl,
            ingress: a.ingress,
        })
    }

    /// A packet the switch made itself (in-network aggregation): its output waits in the
    /// aggregation engine's own memory, not the shared buffer, and is ready after the
    /// port-to-port latency.
    #[inline]
    pub fn own_packet(&self, now: SimTime, pkt: PktId, route: RouteInfo, wire: u64) -> Queued {
        Queued {
            ready: now + self.cfg.latency,
            pkt,
            route,
            wire: wire as u32,
            ect: true,
            ctrl: false,
            ingress: super::NO_PORT,
        }
    }

    /// A packet that came in over a port left: its buffer space is free again.
    #[inline]
    pub fn handle_departure(&mut self, wire: u64) {
        self.used -= wire;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(limit: BufferLimit) -> SwitchConfig {
        SwitchConfig {
            latency: SimDuration::from_ns(300),
            buffer_bytes: 100_000,
            limit,
            forwarding: Forwarding::StoreAndForward,
        }
    }

    fn arrival(wire: u64, tail: u64) -> Arrival {
        Arrival {
            pkt: 1,
            route: RouteInfo::default(),
            wire,
            tail: SimTime(tail),
            ctrl: false,
            ect: true,
            ingress: 3,
        }
    }

    const G100: BitsPerSec = BitsPerSec(100_000_000_000);

    #[test]
    fn dynamic_threshold_is_alpha_times_free_buffer() {
        let c = cfg(BufferLimit::Dynamic { alpha: 0.5 });
        // free 60_000 -> limit 30_000.
        assert_eq!(admit(&c, 40_000, 29_000, 1000), Ok(()));
        assert_eq!(
            admit(&c, 40_000, 29_001, 1000),
            Err(DropReason::DynamicThreshold)
        );
        assert_eq!(admit(&c, 99_500, 0, 1000), Err(DropReason::BufferFull));
    }

    #[test]
    fn static_port_limit() {
        let c = cfg(BufferLimit::PortLimit { bytes: 5000 });
        assert_eq!(admit(&c, 0, 4000, 1000), Ok(()));
        assert_eq!(admit(&c, 0, 4001, 1000), Err(DropReason::PortLimit));
    }

    #[test]
    fn admission_takes_buffer_and_departure_gives_it_back() {
        let mut s = Switch::new(cfg(BufferLimit::Dynamic { alpha: 1.0 }), false);
        let q = s
            .handle_arrival(SimTime(1000), arrival(1000, 1000), 0, G100)
            .unwrap();
        assert_eq!(s.used, 1000);
        // Store-and-forward: ready one port-to-port latency after the tail.
        assert_eq!(q.ready, SimTime(301_000));
        assert_eq!((q.ingress, q.wire, q.ect, q.ctrl), (3, 1000, true, false));
        s.handle_departure(1000);
        assert_eq!(s.used, 0);
    }

    #[test]
    fn a_lossless_switch_ignores_thresholds_but_not_the_buffer() {
        let mut s = Switch::new(cfg(BufferLimit::PortLimit { bytes: 10 }), true);
        assert!(s
            .handle_arrival(SimTime(0), arrival(1000, 0), 50_000, G100)
            .is_ok());
        s.used = 99_500;
        assert_eq!(
            s.handle_arrival(SimTime(0), arrival(1000, 0), 0, G100),
            Err(DropReason::BufferFull)
        );
    }

    #[test]
    fn cut_through_never_lets_the_egress_overtake_the_ingress_tail() {
        let mut c = cfg(BufferLimit::Dynamic { alpha: 1.0 });
        c.forwarding = Forwarding::CutThrough;
        let mut s = Switch::new(c, false);
        // Header in at t = 0, tail at 80 ns (1000 B at 100G). Out at 100G: the egress
        // may start at tail + latency - 80 ns = 300 ns, the same as header + latency.
        let q = s
            .handle_arrival(SimTime(0), arrival(1000, 80_000), 0, G100)
            .unwrap();
        assert_eq!(q.ready, SimTime(300_000));
        // Out at 400G (20 ns): it must wait until 80 + 300 - 20 = 360 ns.
        let q = s
            .handle_arrival(
                SimTime(0),
                arrival(1000, 80_000),
                0,
                BitsPerSec(400_000_000_000),
            )
            .unwrap();
        assert_eq!(q.ready, SimTime(360_000));
    }
}

//! The fabric's components, each owning its state behind a sans-IO interface.
//!
//! | component | file | owns |
//! |---|---|---|
//! | egress port | `port.rs` | egress queues (control and data), the serializer, ECN marking, the sender's PFC pause and IB credit gates |
//! | wire | `wire.rs` | propagation (a ring of packets in flight), link faults |
//! | ingress | `ingress.rs` | per-link buffer accounting at the receiving switch, PFC Xoff/Xon/refresh, credit return |
//! | switch | `switch.rs` | the shared buffer, admission (dynamic threshold, port limit), forwarding latency |
//! | NIC | `nic.rs` | the send scheduler over a host's jobs (round robin), its control queue |
//! | host pipeline | `host.rs` | each NIC's side of its server: posting threads, doorbells and batches, WQE fetch and DMA read slots, the send engine, payload DMA pacing, completions, interrupt moderation, staging copies (`host_posting.rs`: one context's posting computed at the hand-off) |
//! | queue pair | `qp.rs` | an RC queue pair at its NIC: both protocol halves, each direction's congestion control, pacing and CNP notification point, READ response streaming, its timer |
//!
//! A component takes `(now, input)` and returns what must happen next (a packet to
//! start, a frame or a credit update to deliver at a time, a wake-up); it never touches
//! the event queue. The event loop (`sim`) routes events to components and their outputs
//! into events, in the order the components return them. A link direction has one id
//! (`PortId`) shared by its egress port, its wire and the ingress at its far end.
//!
//! Leaves out: more than two traffic classes; switch architectures other than output
//! queueing over one shared buffer.

pub mod host;
pub mod ingress;
pub mod nic;
pub mod port;
pub mod qp;
mod queue_depth;
pub mod switch;
pub mod wire;

pub use ingress::{FlowControl, Ingress, Upstream};
pub use nic::Nic;
pub use port::{EgressPort, Gate, Queued, Red, Transmit};
pub use switch::{admit, Arrival, BufferLimit, Forwarding, Switch, SwitchConfig};
pub use wire::{LinkFaults, Loss, OnWire, Wire, WireFaults};

use serde::Serialize;

/// Queue depth histogram unit: 64-byte cells (the InfiniBand credit block).
pub const CELL_BYTES: u64 = 64;

/// Credits are counted in 64-byte blocks (IBTA vol. 1 7.9.4).
pub const CREDIT_BLOCK: u64 = 64;

/// Blocks a packet of `wire` bytes needs.
pub fn credit_blocks(wire: u64) -> u64 {
    wire.div_ceil(CREDIT_BLOCK)
}

/// No port (a packet a host or an aggregating switch made).
pub const NO_PORT: u32 = u32::MAX;

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The switch's shared buffer was full.
    BufferFull,
    /// The egress queue was over its dynamic threshold.
    DynamicThreshold,
    /// The egress queue was at its static port limit.
    PortLimit,
}

impl DropReason {
    pub const ALL: [DropReason; 3] = [
        DropReason::BufferFull,
        DropReason::DynamicThreshold,
        DropReason::PortLimit,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DropReason::BufferFull => "buffer_full",
            DropReason::DynamicThreshold => "dynamic_threshold",
            DropReason::PortLimit => "port_limit",
        }
    }
}
#[cfg(test)]
mod footprint {
    /// Every packet hop touches a port, a wire and an ingress: their size is the
    /// simulator's cache footprint per link. The optional parts with a random stream
    /// (RED marking, link faults; a ChaCha state is over 300 bytes) are boxed so the hot
    /// fields stay compact; an unboxed one makes a 256-host permutation measurably
    /// slower (1.09x wall before they were boxed). Each starts on a cache line: a wire
    /// is one line, an ingress two, and a port's per-packet fields its first three
    /// (`EgressPort`'s layout).
    #[test]
    fn per_link_state_stays_compact() {
        assert_eq!(std::mem::align_of::<super::Wire>(), 64);
        assert_eq!(std::mem::align_of::<super::Ingress>(), 64);
        assert_eq!(std::mem::align_of::<super::EgressPort>(), 64);
        assert!(std::mem::size_of::<super::Wire>() <= 64);
        assert!(std::mem::size_of::<super::Ingress>() <= 128);
        assert!(std::mem::size_of::<super::EgressPort>() <= 448);
    }
}

//! Links, egress ports and switch buffers.
//!
//! Models: a port is one direction of a link: a FIFO egress queue, a serializer at the
//! link rate and a propagation delay (htsim's Queue + Pipe). A switch's ports share one
//! packet buffer; a packet is admitted to an egress queue if the buffer has room and the
//! queue is within its limit: the dynamic threshold (Choudhury & Hahne: a queue may hold
//! at most alpha x the free buffer; alpha = 1/8 in HPCC's simulator, design reference
//! "Link-level flow control") or a static per-port limit. Otherwise the packet is
//! tail-dropped and the drop counted with its port and reason.
//!
//! A queue's depth counts the bytes waiting plus the packet being serialized; buffer
//! space is released when the packet's last bit leaves. Queue depth is sampled at every
//! enqueue (what an arriving packet sees) into a histogram in 64-byte cells.
//!
//! Each port also holds the state of link-level flow control for its link: PFC pause
//! state as the sender and per-ingress byte counts as the receiver's ingress, IB credits,
//! and a control-class queue (ACK, NAK, CNP) served before data; the rules live in
//! `sim.rs`. ECN marking state (RED thresholds and their random stream) sits here too.
//!
//! Leaves out: more than two priorities, and input-queued switch architectures.

use crate::engine::PktId;
use crate::scenario::{BufferLimit, SwitchConfig};
use crate::topology::{LinkParams, Node, Tier};
use crate::units::SimTime;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::VecDeque;

/// Queue depth histogram unit: 64-byte cells (the InfiniBand credit block).
pub const CELL_BYTES: u64 = 64;

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

/// A packet waiting in an egress queue: what the port needs to send it, beside its id.
#[derive(Clone, Copy, Debug)]
pub struct Queued {
    /// Earliest start: arrival plus the port-to-port latency (and the cut-through bound).
    pub ready: SimTime,
    pub pkt: PktId,
    pub wire: u32,
    /// ECN-capable (data, not ACKs or CNPs).
    pub ect: bool,
    /// Control class (ACK, NAK, CNP): strict priority, never paused, no credits.
    pub ctrl: bool,
    /// The port it arrived over (for per-ingress PFC accounting and credit return).
    pub ingress: u32,
}

/// No port (a packet a host made).
pub const NO_PORT: u32 = u32::MAX;

/// Credits are counted in 64-byte blocks (IBTA vol. 1 7.9.4).
pub const CREDIT_BLOCK: u64 = 64;

/// Blocks a packet of `wire` bytes needs.
pub fn credit_blocks(wire: u64) -> u64 {
    wire.div_ceil(CREDIT_BLOCK)
}

/// A packet on a link's wire.
#[derive(Clone, Copy, Debug)]
pub struct OnWire {
    /// When it reaches the far end (its tail, or its header at a cut-through switch).
    pub arrive: SimTime,
    /// When its tail reaches the far end.
    pub tail: SimTime,
    pub pkt: PktId,
    pub wire: u32,
}

/// One direction of a link.
#[derive(Debug)]
pub struct Port {
    pub tier: Tier,
    pub link: LinkParams,
    /// The switch whose buffer holds this port's queue; `None` for a host's port.
    pub switch: Option<u32>,
    pub to: Node,
    pub queue: VecDeque<Queued>,
    /// Control-class packets (ACK, NAK, CNP): sent before any data, never paused.
    pub ctrl: VecDeque<Queued>,
    /// Ingress port of the packet in service (`NO_PORT` for a host's own).
    pub in_service_ingress: u32,
    /// Control class of the packet in service.
    pub in_service_ctrl: bool,
    // ---- link-level flow control, as the sending side of this link ----
    /// PFC: the data class may not start a packet before this time.
    pub paused_until: SimTime,
    /// PFC: start of the current (or last) pause, for accounting.
    pub paused_from: SimTime,
    pub paused_ps: u64,
    /// A wake-up event is pending for the end of a pause.
    pub wake_pending: bool,
    /// IB credits: 64-byte blocks the receiver has room for.
    pub credits: u64,
    pub stall_since: Option<SimTime>,
    pub stall_ps: u64,
    // ---- as an ingress into the switch it delivers to ----
    /// Data bytes that came over this port and are still in the next switch's buffer.
    pub ingress_bytes: u64,
    /// PFC: a PAUSE is in force against this port's sender (refreshed until RESUME).
    pub pause_sent: bool,
    pub refresh_at: SimTime,
    /// PFC frames sent to this port's sender (PAUSE and refreshes).
    pub pause_frames: u64,
    /// Packets on the wire (serialized or being serialized), in arrival order.
    pub wire: VecDeque<OnWire>,
    /// Bytes queued, including the packet being serialized.
    pub queued_bytes: u64,
    /// Wire bytes of the packet being serialized (0 when idle).
    pub in_service: u64,
    pub busy: bool,
    // ---- statistics ----
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub max_queue_bytes: u64,
    /// Sum of queue depths seen by arriving packets (for the mean).
    pub queue_sample_sum: u128,
    pub queue_samples: u64,
    /// Queue depth seen by arriving packets, in 64-byte cells (made at the first packet,
    /// so idle ports cost no memory).
    pub queue_hist: Option<Histogram<u32>>,
    hist_cells: u64,
    pub drops: [u64; 3],
    pub drop_bytes: u64,
    /// Packets that arrived over this port destroyed by a fault (bit error, random loss,
    /// link down).
    pub fault_losses: u64,
    /// RED marking at dequeue, and its random stream.
    pub red: Option<(crate::scenario::Red, rand::rngs::StdRng)>,
    pub ecn_marked: u64,
}

impl Port {
    /// Time spent paused up to `end` (closing an open pause at `end`).
    pub fn paused_time(&self, end: SimTime) -> u64 {
        let open = if self.paused_until > self.paused_from {
            self.paused_until
                .min(end)
                .0
                .saturating_sub(self.paused_from.0)
        } else {
            0
        };
        self.paused_ps + open
    }

    /// Time spent with data waiting and no credit, up to `end`.
    pub fn stalled_time(&self, end: SimTime) -> u64 {
        self.stall_ps + self.stall_since.map_or(0, |s| end.0.saturating_sub(s.0))
    }

    pub fn new(tier: Tier, link: LinkParams, switch: Option<u32>, to: Node, buffer: u64) -> Port {
        Port {
            hist_cells: (buffer / CELL_BYTES).max(2) + 1,
            tier,
            link,
            switch,
            to,
            queue: VecDeque::new(),
            ctrl: VecDeque::new(),
            in_service_ingress: NO_PORT,
            in_service_ctrl: false,
            paused_until: SimTime::ZERO,
            paused_from: SimTime::ZERO,
            paused_ps: 0,
            wake_pending: false,
            credits: u64::MAX,
            stall_since: None,
            stall_ps: 0,
            ingress_bytes: 0,
            pause_sent: false,
            refresh_at: SimTime::ZERO,
            pause_frames: 0,
            wire: VecDeque::new(),
            queued_bytes: 0,
            in_service: 0,
            busy: false,
            tx_bytes: 0,
            tx_packets: 0,
            max_queue_bytes: 0,
            queue_sample_sum: 0,
            queue_samples: 0,
            queue_hist: None,
            drops: [0; 3],
            drop_bytes: 0,
            fault_losses: 0,
            red: None,
            ecn_marked: 0,
        }
    }

    /// Records a packet of `wire` bytes joining the queue: the depth it finds (bytes
    /// waiting plus the packet in service) is sampled before it is added.
    #[inline]
    pub fn enqueued(&mut self, wire: u64) {
        let q = self.queued_bytes;
        self.queued_bytes += wire;
        self.max_queue_bytes = self.max_queue_bytes.max(q);
        self.queue_sample_sum += q as u128;
        self.queue_samples += 1;
        let cells = self.hist_cells;
        self.queue_hist
            .get_or_insert_with(|| {
                Histogram::new_with_bounds(1, cells, 2).expect("valid histogram bounds")
            })
            .saturating_record(q.div_ceil(CELL_BYTES));
    }

    pub fn count_drop(&mut self, reason: DropReason, wire: u64) {
        self.drops[reason as usize] += 1;
        self.drop_bytes += wire;
    }

    pub fn dropped_packets(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Mean queue depth seen by arriving packets, bytes.
    pub fn mean_queue_bytes(&self) -> f64 {
        if self.queue_samples == 0 {
            0.0
        } else {
            self.queue_sample_sum as f64 / self.queue_samples as f64
        }
    }

    /// The 99th percentile queue depth seen by arriving packets, bytes (64-byte cells,
    /// rounded up, 2 significant digits).
    pub fn p99_queue_bytes(&self) -> u64 {
        match &self.queue_hist {
            // The histogram rounds up to its bucket; never report more than was seen.
            Some(h) if !h.is_empty() => {
                (h.value_at_quantile(0.99) * CELL_BYTES).min(self.max_queue_bytes)
            }
            _ => 0,
        }
    }
}

/// A switch's shared state.
#[derive(Debug, Default, Clone)]
pub struct Switch {
    /// Bytes of the shared buffer in use.
    pub used: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::schema::Forwarding;
    use crate::units::SimDuration;

    fn cfg(limit: BufferLimit) -> SwitchConfig {
        SwitchConfig {
            latency: SimDuration::ZERO,
            buffer_bytes: 100_000,
            limit,
            forwarding: Forwarding::StoreAndForward,
        }
    }

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
}

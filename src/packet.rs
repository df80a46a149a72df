//! Packets on the wire: encapsulation overheads and the packet pool.
//!
//! Models: a packet as the few integers a switch needs to forward it (source, destination,
//! a per-flow hash for ECMP) plus its payload and on-the-wire size. Wire size = payload +
//! the encapsulation's per-packet header and trailer bytes (design reference, "Wire
//! overheads"; Linux `include/rdma/ib_pack.h`, IBTA vol. 1 ch. 5 and 9):
//!
//! | encapsulation | bytes | made of |
//! |---|---|---|
//! | `ib` | 26 | LRH 8 + BTH 12 + ICRC 4 + VCRC 2 |
//! | `ib_grh` | 66 | the above + GRH 40 |
//! | `rocev2` | 82 | preamble/SFD 8 + Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4 + inter-frame gap 12 |
//!
//! Packets live in a pool (`PacketPool`) and are recycled through a free list, so the hot
//! path allocates nothing per packet once the pool has grown to the number in flight.
//!
//! RC's extension headers are counted where they apply: RETH (16 B) on the first packet
//! of a WRITE and on a READ request, AETH (4 B) on ACKs and on the first and last READ
//! responses; a CNP carries 16 B. Leaves out: GRH routing, immediate data, atomics.

use crate::cc::{HopTelemetry, Telemetry};
use crate::engine::{FlowId, PktId};
use crate::units::SimTime;
use serde::{Deserialize, Serialize};

/// The link-layer and transport headers a packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Encapsulation {
    /// InfiniBand within a subnet: LRH + BTH + ICRC + VCRC.
    #[default]
    Ib,
    /// InfiniBand with a global route header (GRH).
    IbGrh,
    /// RoCE v2 over Ethernet/IPv4/UDP, counting preamble and inter-frame gap.
    Rocev2,
}

impl Encapsulation {
    /// Header plus trailer bytes per packet, including everything that occupies wire time.
    pub const fn overhead_bytes(self) -> u64 {
        match self {
            Encapsulation::Ib => 8 + 12 + 4 + 2,
            Encapsulation::IbGrh => 8 + 40 + 12 + 4 + 2,
            Encapsulation::Rocev2 => 8 + 14 + 20 + 8 + 12 + 4 + 4 + 12,
        }
    }

    /// Bytes on the wire before the payload: what a cut-through switch must receive before
    /// it can start forwarding.
    pub const fn header_bytes(self) -> u64 {
        match self {
            Encapsulation::Ib => 8 + 12,
            Encapsulation::IbGrh => 8 + 40 + 12,
            Encapsulation::Rocev2 => 8 + 14 + 20 + 8 + 12,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encapsulation::Ib => "ib",
            Encapsulation::IbGrh => "ib_grh",
            Encapsulation::Rocev2 => "rocev2",
        }
    }

    /// Largest share of the line rate that carries payload at this MTU.
    pub fn payload_efficiency(self, mtu: u64) -> f64 {
        mtu as f64 / (mtu + self.overhead_bytes()) as f64
    }
}

/// What a packet carries (IBTA 9.2: the BTH opcode, reduced to what the model needs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PktKind {
    /// Payload: a raw packet, or an RC WRITE/SEND request packet.
    #[default]
    Data,
    /// An RC ACK or NAK (AETH, no payload).
    Ack,
    /// An RC READ request (RETH, no payload).
    ReadRequest,
    /// An RC READ response (payload; AETH on the first and last).
    ReadResponse,
    /// A DCQCN congestion notification packet, receiver to sender.
    Cnp,
}

impl PktKind {
    /// The control class (ACK/NAK, CNP): strict priority at switches, never paused, no
    /// link credits.
    #[inline]
    pub fn is_control(self) -> bool {
        matches!(self, PktKind::Ack | PktKind::Cnp)
    }
}

/// Extended transport header bytes (IBTA 9.3): RETH on the first packet of an RDMA WRITE
/// and on a READ request; AETH on ACKs and on the first and last READ responses.
pub const RETH_BYTES: u64 = 16;
pub const AETH_BYTES: u64 = 4;

/// Packet flags.
pub const FLAG_FIRST: u8 = 1;
pub const FLAG_LAST: u8 = 2;
pub const FLAG_RETX: u8 = 4;
/// ECN Congestion Experienced, set by a switch.
pub const FLAG_ECN: u8 = 8;
/// A CNP for the responder-to-requester direction (READ responses).
pub const FLAG_REVERSE: u8 = 16;

/// The packet asks switch egresses for per-hop telemetry (set by the sender when its
/// congestion control wants it).
pub const FLAG_TELEMETRY: u8 = 32;

/// The packet's message is below NCCL's `NCCL_IB_AR_THRESHOLD`: it is not routed per
/// packet (it takes its flow's ECMP port under `spray` and `adaptive`).
pub const FLAG_NO_AR: u8 = 64;

/// Payload of a RoCEv2 CNP (16 reserved bytes after the BTH).
pub const CNP_PAYLOAD_BYTES: u64 = 16;

/// One packet in flight.
#[derive(Clone, Copy, Debug, Default)]
pub struct Packet {
    pub kind: PktKind,
    /// Packet sequence number (RC; 24 bits).
    pub psn: u32,
    /// READ request: response packets asked for. ACK: AETH credit count.
    pub aux: u32,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// ACK syndrome: 0 ACK, 1 NAK sequence error, 2 RNR NAK.
    pub ack_kind: u8,
    /// RNR NAK timer code.
    pub rnr_code: u8,
    /// RC operation of a request: 0 WRITE, 1 SEND, 2 READ.
    pub op: u8,
    pub flow: FlowId,
    pub src: u32,
    pub dst: u32,
    /// Per-flow hash used by ECMP (stands in for the 5-tuple / flow label).
    pub flow_hash: u32,
    /// Index of this packet within its flow (0, 1, 2, ...).
    pub seq: u32,
    /// Payload bytes.
    pub payload: u32,
    /// Bytes on the wire, payload + encapsulation overhead.
    pub wire: u32,
}

/// What a switch reads of a packet to route and queue it, carried beside its id through
/// port queues and wires, so that a switch hop never loads the packet itself (the pool
/// is touched at random; the queues and wires in order). None of it changes in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteInfo {
    pub dst: u32,
    pub flow_hash: u32,
    pub seq: u32,
    /// The packet's `FLAG_*` bits when it was made (routing reads `FLAG_NO_AR`, the
    /// telemetry hook `FLAG_TELEMETRY`; ECN marks go on the packet itself).
    pub flags: u8,
    pub kind: PktKind,
}

impl Packet {
    /// What routing and queueing need of this packet.
    #[inline]
    pub fn route_info(&self) -> RouteInfo {
        RouteInfo {
            dst: self.dst,
            flow_hash: self.flow_hash,
            seq: self.seq,
            flags: self.flags,
            kind: self.kind,
        }
    }
}

/// A pool of packets recycled through a free list.
#[derive(Debug, Default)]
pub struct PacketPool {
    slots: Vec<Packet>,
    /// Per-hop telemetry beside each slot, grown only when a packet asks for it, so
    /// packets without telemetry stay small.
    telemetry: Vec<Telemetry>,
    /// Send times beside each slot, grown only when an algorithm measures RTTs.
    sent_at: Vec<SimTime>,
    free: Vec<PktId>,
    live: u32,
    peak_live: u32,
    /// Packets handed over to another partition's pool and taken from one (a run split
    /// over threads, `sim::parallel`): a packet that crosses stays one packet in flight.
    handed: i64,
    taken: i64,
    /// Packets alive anywhere, as this pool counts them (`live + handed - taken`), at
    /// the last [`PacketPool::take_marks`], and the most since.
    mark: i64,
    high: i64,
}

impl PacketPool {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn alloc(&mut self, p: Packet) -> PktId {
        self.live += 1;
        self.peak_live = self.peak_live.max(self.live);
        self.high = self.high.max(self.live as i64 + self.handed - self.taken);
        self.slot(p)
    }

    #[inline]
    fn slot(&mut self, p: Packet) -> PktId {
        if let Some(id) = self.free.pop() {
            self.slots[id as usize] = p;
            if let Some(t) = self.telemetry.get_mut(id as usize) {
                *t = Telemetry::default();
            }
            id
        } else {
            self.slots.push(p);
            (self.slots.len() - 1) as PktId
        }
    }

    #[inline]
    pub fn free(&mut self, id: PktId) {
        self.live -= 1;
        self.free.push(id);
    }

    /// Packet `id` leaves for another partition's pool: counted as gone from here (and
    /// still a packet in flight) now, its slot kept until [`PacketPool::release`] copies
    /// it out. A split run copies its window's hand-offs together at the window's end,
    /// where their loads overlap; copied one by one as they left, each waited on a line
    /// the port had not touched since the packet was queued.
    pub fn hand_off(&mut self, id: PktId) {
        debug_assert!(
            (id as usize) < self.slots.len(),
            "packet {id} is not in the pool"
        );
        self.live -= 1;
        self.handed += 1;
    }

    /// The copy of a packet handed off ([`PacketPool::hand_off`]); its slot is free.
    pub fn release(&mut self, id: PktId) -> Packet {
        self.free.push(id);
        self.slots[id as usize]
    }

    /// A packet handed over by another partition's pool ([`PacketPool::release`]).
    pub fn take_in(&mut self, p: Packet) -> PktId {
        self.live += 1;
        self.taken += 1;
        self.slot(p)
    }

    /// Since the last call: the change in packets alive and the most they rose above
    /// their count then (a run split over threads logs both per event, so the whole
    /// run's peak can be found across its partitions, `sim::parallel`).
    pub fn take_marks(&mut self) -> (i64, i64) {
        let now = self.live as i64 + self.handed - self.taken;
        let marks = (now - self.mark, self.high.max(now) - self.mark);
        self.mark = now;
        self.high = now;
        marks
    }

    #[inline]
    pub fn get(&self, id: PktId) -> &Packet {
        &self.slots[id as usize]
    }

    /// Asks the CPU to start loading packet `id` (a hint: see `engine::prefetch`), both
    /// its lines when its 44 bytes straddle two (websearch-128: 0.970x the wall time
    /// against asking for the first line only, 3 pairs; slots padded to a whole line
    /// each gained nothing more).
    #[inline(always)]
    pub fn prefetch(&self, id: PktId) {
        if let Some(p) = self.slots.get(id as usize) {
            crate::engine::prefetch_whole(p as *const Packet);
        }
    }

    /// Asks the CPU to start loading the slot the packet taken in `k` packets from now
    /// goes into (while none is freed between). A hint only.
    #[inline(always)]
    pub fn prefetch_free(&self, k: usize) {
        if let Some(&id) = self.free.len().checked_sub(k + 1).map(|i| &self.free[i]) {
            self.prefetch(id);
        }
    }

    /// Packet `id`'s slot, if there is one (a prefetch's guess may name a freed one).
    #[inline]
    pub fn try_get(&self, id: PktId) -> Option<&Packet> {
        self.slots.get(id as usize)
    }

    #[inline]
    pub fn get_mut(&mut self, id: PktId) -> &mut Packet {
        &mut self.slots[id as usize]
    }

    /// Appends a hop to packet `id`'s telemetry.
    pub fn stamp(&mut self, id: PktId, hop: HopTelemetry) {
        let i = id as usize;
        if self.telemetry.len() <= i {
            self.telemetry
                .resize(self.slots.len().max(i + 1), Telemetry::default());
        }
        self.telemetry[i].push(hop);
    }

    /// Gives packet `id` a copy of another's telemetry (an ACK echoing its data packet's).
    pub fn set_telemetry(&mut self, id: PktId, t: Telemetry) {
        let i = id as usize;
        if self.telemetry.len() <= i {
            self.telemetry
                .resize(self.slots.len().max(i + 1), Telemetry::default());
        }
        self.telemetry[i] = t;
    }

    /// Records packet `id`'s send time (or, on an ACK, the time it echoes).
    pub fn set_sent_at(&mut self, id: PktId, t: SimTime) {
        let i = id as usize;
        if self.sent_at.len() <= i {
            self.sent_at
                .resize(self.slots.len().max(i + 1), SimTime::ZERO);
        }
        self.sent_at[i] = t;
    }

    /// Packet `id`'s recorded send time (zero if none was recorded).
    pub fn sent_at(&self, id: PktId) -> SimTime {
        self.sent_at
            .get(id as usize)
            .copied()
            .unwrap_or(SimTime::ZERO)
    }

    /// Packet `id`'s telemetry (empty if no switch stamped it).
    pub fn telemetry(&self, id: PktId) -> Telemetry {
        self.telemetry.get(id as usize).copied().unwrap_or_default()
    }

    /// Calls `f` on every packet in use (a scan of the pool: for rare questions, never
    /// per packet).
    pub fn for_each_live(&self, mut f: impl FnMut(&Packet)) {
        let mut free = vec![false; self.slots.len()];
        for &id in &self.free {
            free[id as usize] = true;
        }
        for (p, _) in self.slots.iter().zip(&free).filter(|(_, &fr)| !fr) {
            f(p);
        }
    }

    /// Packets allocated and not yet freed.
    pub fn live(&self) -> u32 {
        self.live
    }

    /// The most packets ever in flight at once.
    pub fn peak_live(&self) -> u32 {
        self.peak_live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_travels_beside_a_packet_is_its_routing_fields_in_16_bytes() {
        let p = Packet {
            kind: PktKind::ReadResponse,
            dst: 7,
            flow_hash: 0xdead_beef,
            seq: 42,
            flags: FLAG_NO_AR | FLAG_TELEMETRY,
            ..Packet::default()
        };
        let r = p.route_info();
        assert_eq!(
            (r.dst, r.flow_hash, r.seq, r.flags, r.kind),
            (
                7,
                0xdead_beef,
                42,
                FLAG_NO_AR | FLAG_TELEMETRY,
                PktKind::ReadResponse
            )
        );
        assert!(std::mem::size_of::<RouteInfo>() <= 16);
    }

    #[test]
    fn overheads_match_design_reference() {
        assert_eq!(Encapsulation::Ib.overhead_bytes(), 26);
        assert_eq!(Encapsulation::IbGrh.overhead_bytes(), 66);
        assert_eq!(Encapsulation::Rocev2.overhead_bytes(), 82);
        // The table's goodput column, to the two decimals it prints.
        let pct = |e: Encapsulation, m| (e.payload_efficiency(m) * 10000.0).round() / 100.0;
        assert_eq!(pct(Encapsulation::Ib, 4096), 99.37);
        assert_eq!(pct(Encapsulation::Ib, 2048), 98.75);
        assert_eq!(pct(Encapsulation::IbGrh, 4096), 98.41);
        assert_eq!(pct(Encapsulation::IbGrh, 2048), 96.88);
        assert_eq!(pct(Encapsulation::Rocev2, 4096), 98.04);
        assert_eq!(pct(Encapsulation::Rocev2, 2048), 96.15);
    }

    #[test]
    fn pool_recycles() {
        let mut pool = PacketPool::new();
        let a = pool.alloc(Packet::default());
        let b = pool.alloc(Packet::default());
        pool.free(a);
        let c = pool.alloc(Packet::default());
        assert_eq!(c, a);
        assert_ne!(b, c);
        assert_eq!(pool.live(), 2);
        assert_eq!(pool.peak_live(), 2);
    }

    #[test]
    fn telemetry_is_per_packet_and_cleared_when_a_slot_is_reused() {
        let mut pool = PacketPool::new();
        let a = pool.alloc(Packet::default());
        let b = pool.alloc(Packet::default());
        assert_eq!(pool.telemetry(a).len, 0, "no side table until a stamp");
        let hop = |q| HopTelemetry {
            queue_bytes: q,
            ..Default::default()
        };
        pool.stamp(b, hop(7));
        pool.stamp(b, hop(9));
        let qs: Vec<u64> = pool
            .telemetry(b)
            .hops()
            .iter()
            .map(|h| h.queue_bytes)
            .collect();
        assert_eq!(qs, vec![7, 9]);
        assert_eq!(pool.telemetry(a).len, 0);
        pool.free(b);
        let c = pool.alloc(Packet::default());
        assert_eq!(c, b);
        assert_eq!(
            pool.telemetry(c).len,
            0,
            "a reused slot starts without hops"
        );
    }
}

//! ECMP: a flow's packets all take the port its hash picks (RFC 2992 hash-threshold, as
//! Ethernet switches and RoCE fabrics run it). The hash is the flow's 5-tuple: for RoCEv2
//! the UDP source port is derived from the queue-pair numbers ([`roce_udp_source_port`]),
//! so a queue pair is one flow; the QPNs are drawn per run from the seed, as a driver
//! hands them out. Each switch mixes in its own salt, as switches seed their hash
//! functions differently. Flows may collide on one port while another idles.

use super::{Candidates, RouteKey};
use crate::rng::mix64;
use crate::units::SimTime;

/// Per-flow hashing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ecmp;

impl Ecmp {
    #[inline]
    pub fn choose<F: Fn(u32) -> u64>(
        &mut self,
        _now: SimTime,
        k: RouteKey,
        c: Candidates<F>,
    ) -> u32 {
        ecmp_choice(c.n, k)
    }
}

/// The ECMP port of the packet's flow among `n`.
#[inline]
pub(crate) fn ecmp_choice(n: u32, k: RouteKey) -> u32 {
    (mix64(((k.switch as u64) << 32) | k.flow_hash as u64) % n as u64) as u32
}

/// RoCEv2's UDP destination port (IANA; IBTA RoCEv2 annex A17).
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// The UDP source port a RoCEv2 queue pair sends from, as Linux derives it from the two
/// queue-pair numbers (`rdma_calc_flow_label` and `rdma_flow_label_to_udp_sport` in
/// `include/rdma/ib_verbs.h`, used by mlx5): a 20-bit flow label from the product of
/// the QPNs, folded into 14 bits above 0xC000. Symmetric in the two QPNs, so both
/// directions of a connection use one port.
pub fn roce_udp_source_port(local_qpn: u32, remote_qpn: u32) -> u16 {
    let mut fl = local_qpn as u64 * remote_qpn as u64;
    fl ^= fl >> 20;
    fl ^= fl >> 40;
    let fl = (fl & 0x000F_FFFF) as u32;
    let (low, high) = (fl & 0x03FFF, fl & 0xFC000);
    ((low ^ (high >> 14)) | 0xC000) as u16
}

/// A switch-independent hash of a UDP 5-tuple (hosts stand for their addresses): what
/// ECMP hashes, before each switch mixes in its own seed.
pub fn five_tuple_hash(src_host: u32, dst_host: u32, src_port: u16, dst_port: u16) -> u32 {
    let h = mix64(((src_host as u64) << 32) | dst_host as u64);
    let h = mix64(h ^ (((src_port as u64) << 16) | dst_port as u64) ^ (17 << 40));
    (h ^ (h >> 32)) as u32
}

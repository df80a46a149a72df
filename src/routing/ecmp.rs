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

/// The ECMP hashes of a RoCEv2 queue pair between hosts `src` and `dst` whose two QPNs
/// are the low and high 24 bits of `qpns`: its packets', and those going back (the same
/// UDP ports, the addresses swapped).
pub fn roce_qp_hashes(qpns: u64, src: u32, dst: u32) -> (u32, u32) {
    let (local, remote) = ((qpns & 0xFF_FFFF) as u32, ((qpns >> 24) & 0xFF_FFFF) as u32);
    let sport = roce_udp_source_port(local, remote);
    (
        five_tuple_hash(src, dst, sport, ROCEV2_UDP_PORT),
        five_tuple_hash(dst, src, sport, ROCEV2_UDP_PORT),
    )
}

/// A switch-independent hash of a UDP 5-tuple (hosts stand for their addresses): what
/// ECMP hashes, before each switch mixes in its own seed.
pub fn five_tuple_hash(src_host: u32, dst_host: u32, src_port: u16, dst_port: u16) -> u32 {
    let h = mix64(((src_host as u64) << 32) | dst_host as u64);
    let h = mix64(h ^ (((src_port as u64) << 16) | dst_port as u64) ^ (17 << 40));
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream_seed, Stream};

    /// Hand computation of Linux's rule: QPNs 3 and 5 give flow label 15 and port
    /// 0xC000 | 15; 0x123456 x 0x654321 = 0x7336BF94116 folds (>> 20, >> 40) to the
    /// label 0xA77AE, whose high six bits 0x29 fold into the low fourteen (0x37AE):
    /// 0xC000 | (0x37AE ^ 0x29) = 0xF787.
    #[test]
    fn the_udp_source_port_follows_linux_and_is_symmetric() {
        assert_eq!(roce_udp_source_port(3, 5), 0xC00F);
        assert_eq!(roce_udp_source_port(5, 3), 0xC00F);
        let fl = {
            let mut f: u64 = 0x123456 * 0x654321;
            f ^= f >> 20;
            f ^= f >> 40;
            (f & 0xF_FFFF) as u32
        };
        let want = ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) | 0xC000;
        assert_eq!(want, 0xF787);
        assert_eq!(roce_udp_source_port(0x123456, 0x654321) as u32, want);
        assert_eq!(roce_udp_source_port(0x654321, 0x123456) as u32, want);
        assert!(want >= 0xC000);
    }

    /// k queue pairs of one connection hash like k independent balls into m bins: the
    /// expected number of distinct uplinks is m (1 - (1 - 1/m)^k). Over 4,000
    /// connections (QPNs drawn as the simulation draws them) the mean is within 0.05 of
    /// it (the count's standard deviation is under 0.8, so 0.05 is over 3.9 standard
    /// errors).
    #[test]
    fn qps_per_connection_spread_like_independent_hashes() {
        let m = 8u32;
        for k in [1u32, 2, 4, 8] {
            let mut total = 0u32;
            let conns = 4000u64;
            for c in 0..conns {
                let (src, dst) = ((c % 64) as u32, 64 + (c / 64) as u32);
                let mut used = 0u32;
                for q in 0..k {
                    let qpns = stream_seed(
                        9,
                        Stream::FlowHash,
                        ((src as u64) << 32) | dst as u64,
                        1 + q as u64,
                    );
                    let (h, _) = roce_qp_hashes(qpns, src, dst);
                    let key = RouteKey {
                        switch: 2,
                        dst,
                        flow_hash: h,
                        seq: 0,
                        per_packet: true,
                    };
                    used |= 1 << ecmp_choice(m, key);
                }
                total += used.count_ones();
            }
            let mean = total as f64 / conns as f64;
            let want = m as f64 * (1.0 - (1.0 - 1.0 / m as f64).powi(k as i32));
            assert!(
                (mean - want).abs() < 0.05,
                "k={k}: {mean:.3} distinct uplinks, balls-into-bins {want:.3}"
            );
        }
    }
}

//! ECMP: a flow's packets all take the port its hash picks (RFC 2992 hash-threshold, as
//! Ethernet switches and RoCE fabrics run it). The hash is the flow's 5-tuple (for RoCEv2
//! the UDP source port is chosen per queue pair, so a queue pair is one flow), mixed with
//! a per-switch salt, as switches seed their hash functions differently; the flow hash
//! itself is seeded per run. Flows may collide on one port while another idles.

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
        (mix64(((k.switch as u64) << 32) | k.flow_hash as u64) % c.n as u64) as u32
    }
}

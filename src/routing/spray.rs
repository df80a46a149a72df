//! Packet spraying: packet i of a flow takes port (offset + i) mod n, the offset hashed
//! from the flow and the switch (random packet spraying, Dixit et al., INFOCOM 2013, made
//! deterministic). A per-switch counter would lock into step with synchronized senders
//! (every host's k-th packet arriving in the same order each round) and turn spraying
//! into source routing. Reorders packets whenever paths differ in delay.

use super::{mix64, Candidates, RouteKey};
use crate::units::SimTime;

/// Per-packet round robin over a flow's packets.
#[derive(Clone, Copy, Debug, Default)]
pub struct Spray;

impl Spray {
    #[inline]
    pub fn choose<F: Fn(u32) -> u64>(
        &mut self,
        _now: SimTime,
        k: RouteKey,
        c: Candidates<F>,
    ) -> u32 {
        spray_choice(c.n, k)
    }
}

#[inline]
pub(super) fn spray_choice(n: u32, k: RouteKey) -> u32 {
    let offset = mix64(((k.switch as u64) << 32) | k.flow_hash as u64) % n as u64;
    ((offset + k.seq as u64) % n as u64) as u32
}

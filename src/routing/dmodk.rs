//! Static destination-based routing, d-mod-k: the port is the destination host's number
//! modulo the number of candidates, the same for every source, as OpenSM's fat-tree
//! routing engine (ftree) programs InfiniBand forwarding tables. Spreads a permutation
//! evenly when destinations are consecutive; never adapts to load.

use super::{Candidates, RouteKey};
use crate::units::SimTime;

/// d-mod-k.
#[derive(Clone, Copy, Debug, Default)]
pub struct DModK;

impl DModK {
    #[inline]
    pub fn choose<F: Fn(u32) -> u64>(
        &mut self,
        _now: SimTime,
        k: RouteKey,
        c: Candidates<F>,
    ) -> u32 {
        dmodk_choice(c.n, k)
    }
}

/// The d-mod-k port of the packet's destination among `n`.
#[inline]
pub(super) fn dmodk_choice(n: u32, k: RouteKey) -> u32 {
    k.dst % n
}

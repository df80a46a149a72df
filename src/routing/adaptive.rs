//! Local adaptive routing: per packet, the candidate port with the fewest queued bytes at
//! this switch, as InfiniBand adaptive routing (NVIDIA Quantum) and Ethernet AI fabrics
//! choose by local egress load. Ties go to the first at or after the spray choice, so an
//! idle fabric is spread as spraying spreads it. Sees only local queues (no remote state,
//! no hysteresis); reorders packets whenever paths differ in delay.

use super::spray::spray_choice;
use super::{Candidates, RouteKey};
use crate::units::SimTime;

/// Least local queue per packet.
#[derive(Clone, Copy, Debug, Default)]
pub struct Adaptive;

impl Adaptive {
    #[inline]
    pub fn choose<F: Fn(u32) -> u64>(
        &mut self,
        _now: SimTime,
        k: RouteKey,
        c: Candidates<F>,
    ) -> u32 {
        let n = c.n;
        let start = spray_choice(n, k);
        let mut best = start;
        let mut best_q = (c.load)(start);
        for j in 1..n {
            let i = (start + j) % n;
            let q = (c.load)(i);
            if q < best_q {
                best = i;
                best_q = q;
            }
        }
        best
    }
}

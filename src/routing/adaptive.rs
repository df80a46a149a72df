//! Local adaptive routing: per packet, the candidate port with the fewest queued bytes at
//! this switch, as InfiniBand adaptive routing (NVIDIA Quantum) and Ethernet AI fabrics
//! choose by local egress load. Ties go to the first at or after the spray choice, so an
//! idle fabric is spread as spraying spreads it. Sees only local state (no remote
//! congestion feedback); reorders packets whenever paths differ in delay.
//!
//! With a hysteresis of h bytes a packet stays on its flow's ECMP port unless another
//! port is lighter by more than h, so a lightly loaded fabric keeps flows in order and
//! only real imbalance moves packets (as switch vendors' AR thresholds do; the value is
//! the user's).

use super::spray::spray_choice;
use super::{least_loaded, Candidates, RouteKey};
use crate::units::SimTime;

/// Least local load per packet.
#[derive(Clone, Copy, Debug, Default)]
pub struct Adaptive {
    hysteresis_bytes: u64,
}

impl Adaptive {
    pub fn new(hysteresis_bytes: u64) -> Adaptive {
        Adaptive { hysteresis_bytes }
    }

    #[inline]
    pub fn choose<F: Fn(u32) -> u64>(
        &mut self,
        _now: SimTime,
        k: RouteKey,
        c: Candidates<F>,
    ) -> u32 {
        if self.hysteresis_bytes > 0 {
            let home = super::ecmp::ecmp_choice(c.n, k);
            let best = least_loaded(home, &c);
            let (lh, lb) = ((c.load)(home), (c.load)(best));
            return if lh > lb + self.hysteresis_bytes {
                best
            } else {
                home
            };
        }
        least_loaded(spray_choice(c.n, k), &c)
    }
}

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
//!
//! With a band of b bytes the switch compares port loads in bands (load / b), as switch
//! ASICs do: they quantise a port's load into a few levels before choosing (Broadcom's
//! dynamic load balancing rates each port in quality bands of queue size and recent
//! load; CONGA, Alizadeh et al. SIGCOMM 2014, a 3-bit metric). Ports in the lightest band
//! are taken in the spray order, so small differences do not draw every packet of a
//! switch to the same port at once. The default is 0 (exact bytes); the band is the
//! user's (vendors do not publish theirs).

use super::spray::spray_choice;
use super::{least_loaded, Candidates, RouteKey};
use crate::units::SimTime;

/// Least local load per packet.
#[derive(Clone, Copy, Debug, Default)]
pub struct Adaptive {
    hysteresis_bytes: u64,
    band_bytes: u64,
}

impl Adaptive {
    pub fn new(hysteresis_bytes: u64, band_bytes: u64) -> Adaptive {
        Adaptive {
            hysteresis_bytes,
            band_bytes,
        }
    }

    #[inline]
    pub fn choose<F: Fn(u32) -> u64>(
        &mut self,
        _now: SimTime,
        k: RouteKey,
        c: Candidates<F>,
    ) -> u32 {
        if self.band_bytes > 1 {
            // Loads and the hysteresis in bands.
            let band = self.band_bytes;
            let load = c.load;
            let banded = Candidates {
                n: c.n,
                load: move |i: u32| load(i) / band,
            };
            return choose_in(k, banded, self.hysteresis_bytes / band);
        }
        choose_in(k, c, self.hysteresis_bytes)
    }
}

/// The lightest port (from the spray choice on), or with a hysteresis of `h` (in the
/// loads' unit) the flow's ECMP port unless another is lighter by more than `h`.
#[inline]
fn choose_in<F: Fn(u32) -> u64>(k: RouteKey, c: Candidates<F>, h: u64) -> u32 {
    if h > 0 {
        let home = super::ecmp::ecmp_choice(c.n, k);
        let best = least_loaded(home, &c);
        let (lh, lb) = ((c.load)(home), (c.load)(best));
        return if lh > lb + h { best } else { home };
    }
    least_loaded(spray_choice(c.n, k), &c)
}

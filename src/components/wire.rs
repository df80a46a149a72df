//! The wire: propagation over one direction of a link, and what the link destroys.
//!
//! Models (htsim's Pipe): a packet whose serialization starts at `start` and ends at
//! `end` reaches the far end at `end + latency` (its tail); a cut-through switch may act
//! on it once its header is in (`start + serialization(header) + latency`). Packets
//! leave a port in order and cross its wire in constant time, so they arrive in order:
//! the wire is a ring, and only its first packet needs an arrival event.
//!
//! Faults act at the far end, as the receiver's CRC check would: a bit error rate
//! (P(corrupt) = 1 - (1 - BER)^bits), an independent drop probability, and intervals
//! during which the link is down; each wire draws from its own random stream.
//!
//! The wire is sans-IO: `launch` returns the arrival time to schedule when the wire was
//! empty, `handle_arrive` the next one. Leaves out: links with varying delay, corruption
//! of a packet's header only (a corrupted packet is simply lost).

use crate::engine::PktId;
use crate::packet::RouteInfo;
use crate::topology::LinkParams;
use crate::units::{serialization_delay, SimTime};
use rand::rngs::StdRng;
use rand::Rng;
use std::collections::VecDeque;

/// Loss rates on one link.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkFaults {
    /// Bit error rate.
    pub ber: f64,
    /// Probability that a packet is lost, independently of its size.
    pub drop_probability: f64,
}

impl LinkFaults {
    pub fn any(&self) -> bool {
        self.ber > 0.0 || self.drop_probability > 0.0
    }
}

/// Why a fault destroyed a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// The link was down (a flap).
    Down,
    /// A bit error: the CRC check failed.
    Corrupted,
    /// A random drop.
    Random,
}

/// A link direction's faults and their random stream.
#[derive(Debug)]
pub struct WireFaults {
    pub rates: LinkFaults,
    /// Down intervals [from, until) in ps.
    pub down: Vec<(u64, u64)>,
    pub rng: StdRng,
}

/// A packet on a link's wire.
#[derive(Clone, Copy, Debug)]
pub struct OnWire {
    /// When it reaches the far end (its tail, or its header at a cut-through switch).
    pub arrive: SimTime,
    /// When its tail reaches the far end.
    pub tail: SimTime,
    pub pkt: PktId,
    pub route: RouteInfo,
    pub wire: u32,
}

/// One direction of a link's propagation: one cache line (64 bytes, aligned), since
/// every packet's hop reads it twice (launch, arrival).
#[derive(Debug)]
#[repr(align(64))]
pub struct Wire {
    pub link: LinkParams,
    /// The far end acts on a packet's header (a cut-through switch): the header bytes.
    cut_through_header: Option<u32>,
    ring: VecDeque<OnWire>,
    /// Boxed: the random stream is large and most links have no faults, so the ring's
    /// fields stay on one cache line.
    faults: Option<Box<Faulty>>,
}

/// A link's faults and the packets they destroyed.
#[derive(Debug)]
struct Faulty {
    faults: WireFaults,
    losses: u64,
}

impl Wire {
    pub fn new(link: LinkParams, cut_through_header: Option<u64>) -> Wire {
        Wire {
            link,
            cut_through_header: cut_through_header
                .map(|h| u32::try_from(h).expect("a packet header fits 4 GB")),
            ring: VecDeque::new(),
            faults: None,
        }
    }

    pub fn with_faults(mut self, faults: Option<WireFaults>) -> Wire {
        self.faults = faults.map(|faults| Box::new(Faulty { faults, losses: 0 }));
        self
    }

    /// Packets that arrived destroyed by a fault.
    pub fn fault_losses(&self) -> u64 {
        self.faults.as_ref().map_or(0, |f| f.losses)
    }

    /// A packet of `wire` bytes whose serialization runs [start, end) enters the wire.
    /// Returns the arrival time to schedule if it is the only packet on the wire.
    #[inline]
    pub fn launch(
        &mut self,
        pkt: PktId,
        route: RouteInfo,
        wire: u64,
        start: SimTime,
        end: SimTime,
    ) -> Option<SimTime> {
        let w = self.in_flight(pkt, route, wire, start, end);
        self.receive(w)
    }

    /// A packet starting at `start` and ending at `end` as it will travel on this wire:
    /// when its head (cut-through) or tail reaches the far end.
    #[inline]
    pub fn in_flight(
        &self,
        pkt: PktId,
        route: RouteInfo,
        wire: u64,
        start: SimTime,
        end: SimTime,
    ) -> OnWire {
        let tail = end + self.link.latency;
        let arrive = match self.cut_through_header {
            Some(h) => {
                start
                    + serialization_delay((h as u64).min(wire), self.link.rate)
                    + self.link.latency
            }
            None => tail,
        };
        OnWire {
            arrive,
            tail,
            pkt,
            route,
            wire: wire as u32,
        }
    }

    /// Puts a packet from [`Wire::in_flight`] on the wire, behind those already on it
    /// (`launch`; a run split over threads hands it over from the sending partition).
    /// Returns its arrival time if it is alone on the wire.
    #[inline]
    pub fn receive(&mut self, w: OnWire) -> Option<SimTime> {
        debug_assert!(self.ring.back().map_or(true, |b| b.arrive <= w.arrive));
        let first = self.ring.is_empty();
        let arrive = w.arrive;
        self.ring.push_back(w);
        first.then_some(arrive)
    }

    /// The first packet reaches the far end at `now`. Returns it and the next arrival to
    /// schedule, if another packet is on the wire.
    #[inline]
    pub fn handle_arrive(&mut self, now: SimTime) -> (OnWire, Option<SimTime>) {
        let w = self
            .ring
            .pop_front()
            .expect("an arrival event has a packet on the wire");
        debug_assert_eq!(w.arrive, now);
        let next = self.ring.front().map(|n| n.arrive);
        if next.is_none() {
            // An empty wire starts again at its ring's first slot (`VecDeque::clear`
            // puts the head there): the lines the next packets use stay the same few.
            self.ring.clear();
        }
        (w, next)
    }

    /// The packet that reaches the far end next (for a prefetch: the next arrival reads
    /// it).
    #[inline(always)]
    pub fn first(&self) -> Option<&OnWire> {
        self.ring.front()
    }

    /// Starts loading the slot the next packet launched goes into. A hint only.
    #[inline(always)]
    pub fn prefetch_tail(&self) {
        if let Some(b) = self.ring.back() {
            // The slot after the last (if the ring wraps there, a wasted load).
            crate::engine::prefetch_ptr((b as *const OnWire).wrapping_add(1));
        }
    }

    /// Packets on the wire.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Whether a fault destroys the `wire`-byte packet arriving at `now`.
    #[inline(always)]
    pub fn fault(&mut self, now: SimTime, wire: u64) -> Option<Loss> {
        let Faulty { faults: f, losses } = &mut **self.faults.as_mut()?;
        let loss = if f.down.iter().any(|&(a, b)| now.0 >= a && now.0 < b) {
            Some(Loss::Down)
        } else if f.rates.ber > 0.0 && {
            // P(corrupt) = 1 - (1 - BER)^bits, computed without cancellation.
            let bits = (wire * 8) as f64;
            let p = -(bits * (-f.rates.ber).ln_1p()).exp_m1();
            f.rng.gen::<f64>() < p
        } {
            Some(Loss::Corrupted)
        } else if f.rates.drop_probability > 0.0 && f.rng.gen::<f64>() < f.rates.drop_probability {
            Some(Loss::Random)
        } else {
            None
        };
        if loss.is_some() {
            *losses += 1;
        }
        loss
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Stream};
    use crate::units::{BitsPerSec, SimDuration};

    fn link() -> LinkParams {
        LinkParams {
            rate: BitsPerSec(100_000_000_000),
            latency: SimDuration::from_ns(1000),
        }
    }

    #[test]
    fn packets_arrive_in_order_one_event_at_a_time() {
        let mut w = Wire::new(link(), None);
        assert_eq!(
            w.launch(1, RouteInfo::default(), 1000, SimTime(0), SimTime(80_000)),
            Some(SimTime(1_080_000))
        );
        // A second packet behind it needs no event of its own yet.
        assert_eq!(
            w.launch(
                2,
                RouteInfo::default(),
                1000,
                SimTime(80_000),
                SimTime(160_000)
            ),
            None
        );
        let (a, next) = w.handle_arrive(SimTime(1_080_000));
        assert_eq!(
            (a.pkt, a.tail, next),
            (1, SimTime(1_080_000), Some(SimTime(1_160_000)))
        );
        let (b, next) = w.handle_arrive(SimTime(1_160_000));
        assert_eq!((b.pkt, next), (2, None));
        assert!(w.is_empty());
    }

    #[test]
    fn a_cut_through_switch_acts_on_the_header() {
        // 20 header bytes at 100G = 1.6 ns, then the cable.
        let mut w = Wire::new(link(), Some(20));
        assert_eq!(
            w.launch(1, RouteInfo::default(), 1000, SimTime(0), SimTime(80_000)),
            Some(SimTime(1_001_600))
        );
        let (a, _) = w.handle_arrive(SimTime(1_001_600));
        assert_eq!(a.tail, SimTime(1_080_000));
    }

    #[test]
    fn a_down_link_destroys_everything_and_counts_it() {
        let f = WireFaults {
            rates: LinkFaults::default(),
            down: vec![(100, 200)],
            rng: stream(1, Stream::Fault, 0, 0),
        };
        let mut w = Wire::new(link(), None).with_faults(Some(f));
        assert_eq!(w.fault(SimTime(99), 1000), None);
        assert_eq!(w.fault(SimTime(100), 1000), Some(Loss::Down));
        assert_eq!(w.fault(SimTime(200), 1000), None);
        assert_eq!(w.fault_losses(), 1);
    }

    #[test]
    fn bit_errors_corrupt_packets_as_one_minus_one_minus_ber_to_the_bits() {
        // BER 1e-5 and 1000-byte packets: P = 1 - (1 - 1e-5)^8000 = 7.69%.
        let f = WireFaults {
            rates: LinkFaults {
                ber: 1e-5,
                drop_probability: 0.0,
            },
            down: vec![],
            rng: stream(9, Stream::Fault, 4, 0),
        };
        let mut w = Wire::new(link(), None).with_faults(Some(f));
        let n = 100_000;
        let lost = (0..n)
            .filter(|_| w.fault(SimTime(0), 1000).is_some())
            .count();
        let p = 1.0 - (1.0f64 - 1e-5).powi(8000);
        // sd = sqrt(n p (1-p)) = 84; allow 5 sd.
        assert!((lost as f64 - n as f64 * p).abs() < 420.0, "{lost}");
    }
}

//! Flowlet switching: a flow keeps its port while its packets come close together and may
//! move to the least-loaded port after an idle gap longer than `gap`, when the packets
//! before the gap have (very likely) left the old path, so moving cannot reorder them
//! (Kandula et al., "Dynamic load balancing without packet reordering", CCR 2007; CONGA,
//! Alizadeh et al., SIGCOMM 2014, §3.4; LetFlow, Vanini et al., NSDI 2017, which picks
//! the new port at random where this picks the least-loaded one).
//!
//! State is a direct-mapped flowlet table per switch, as switch ASICs keep it: a flow
//! hashes to one entry (last packet's time, port); two flows that share an entry share
//! a flowlet. Deterministic: the table starts empty and the first packet of a flowlet
//! takes the least-loaded port, ties broken from the flow's ECMP choice.
//!
//! Leaves out: remote congestion feedback (CONGA's leaf-to-leaf tables), flowlet table
//! ageing beyond the gap test.

use super::{least_loaded, Candidates, RouteKey};
use crate::rng::mix64;
use crate::units::{SimDuration, SimTime};

/// Entries per switch's flowlet table (CONGA: 64K per leaf; smaller here because a
/// simulated switch sees far fewer flows at once).
pub const TABLE_ENTRIES: usize = 4096;

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    /// When the entry's last packet passed (`None`: never used).
    last: Option<SimTime>,
    port: u32,
}

/// Per-flowlet choice of port.
#[derive(Clone, Debug)]
pub struct Flowlet {
    gap: SimDuration,
    table: Vec<Entry>,
}

impl Flowlet {
    /// A policy for `switches` switches, moving flows after `gap` of silence.
    pub fn new(gap: SimDuration, switches: u32) -> Flowlet {
        Flowlet {
            gap,
            table: vec![Entry::default(); switches as usize * TABLE_ENTRIES],
        }
    }

    #[inline]
    pub fn choose<F: Fn(u32) -> u64>(
        &mut self,
        now: SimTime,
        k: RouteKey,
        c: Candidates<F>,
    ) -> u32 {
        let slot = (mix64(k.flow_hash as u64) as usize) & (TABLE_ENTRIES - 1);
        let i = k.switch as usize * TABLE_ENTRIES + slot;
        let Some(e) = self.table.get_mut(i) else {
            // A switch beyond the table (cannot happen with the right count): hash.
            return super::ecmp::ecmp_choice(c.n, k);
        };
        let fresh = match e.last {
            None => true,
            Some(t) => now.0.saturating_sub(t.0) > self.gap.0 || e.port >= c.n,
        };
        if fresh {
            e.port = least_loaded(super::ecmp::ecmp_choice(c.n, k), &c);
        }
        e.last = Some(now);
        e.port
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(hash: u32) -> RouteKey {
        RouteKey {
            switch: 0,
            dst: 1,
            flow_hash: hash,
            seq: 0,
            per_packet: true,
        }
    }

    #[test]
    fn a_flow_moves_only_after_an_idle_gap_longer_than_the_threshold() {
        let mut f = Flowlet::new(SimDuration::from_us(10), 1);
        let us = |x: u64| SimTime(x * 1_000_000);
        let q = std::cell::Cell::new([0u64, 0, 0, 0]);
        let load = |i: u32| q.get()[i as usize];
        let first = f.choose(us(0), key(9), Candidates { n: 4, load });
        // Its port fills up, but packets keep coming within the gap: it stays.
        let mut loads = [0u64; 4];
        loads[first as usize] = 50_000;
        q.set(loads);
        for t in 1..=5 {
            assert_eq!(
                f.choose(us(2 * t), key(9), Candidates { n: 4, load }),
                first
            );
        }
        // 10 us of silence is not enough; 10.001 us is.
        assert_eq!(f.choose(us(20), key(9), Candidates { n: 4, load }), first);
        let moved = f.choose(SimTime(30_001_000), key(9), Candidates { n: 4, load });
        assert_ne!(moved, first, "a new flowlet takes a lighter port");
    }
}

//! Random number streams. Every component draws from its own stream, derived from the
//! scenario seed and the component's name and index, so adding a component (or a host)
//! does not shift the numbers any other one sees, and a run is reproducible.
//!
//! The generator is rand's `StdRng` (ChaCha12), locked in `Cargo.lock`.

use rand::rngs::StdRng;
use rand::SeedableRng;

/// Mixes 64 bits (SplitMix64's finalizer): the hash behind ECMP and seed derivation.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// Stream tags: one per kind of component that draws random numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Stream {
    /// Workload item `a` (host `b` for per-host generators).
    Workload = 1,
    /// Per-flow ECMP hash.
    FlowHash = 2,
    /// Link faults of port `a`.
    Fault = 3,
    /// ECN marking at port `a`.
    Ecn = 4,
    /// Sweep point `a`, repeat `b`: that run's scenario seed.
    Sweep = 5,
    /// Compare-set repeat `b`: the seed every set runs with.
    Repeat = 6,
}

/// The seed of stream (`tag`, `a`, `b`) under scenario seed `seed`.
pub fn stream_seed(seed: u64, tag: Stream, a: u64, b: u64) -> u64 {
    let mut h = mix64(seed ^ 0x6a09_e667_f3bc_c908);
    h = mix64(h ^ (tag as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    h = mix64(h ^ a.wrapping_mul(0xbb67_ae85_84ca_a73b));
    mix64(h ^ b.wrapping_mul(0x3c6e_f372_fe94_f82b))
}

/// A generator for stream (`tag`, `a`, `b`).
pub fn stream(seed: u64, tag: Stream, a: u64, b: u64) -> StdRng {
    StdRng::seed_from_u64(stream_seed(seed, tag, a, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_distinct_and_reproducible() {
        let a: u64 = stream(7, Stream::Workload, 0, 0).gen();
        let b: u64 = stream(7, Stream::Workload, 0, 0).gen();
        let c: u64 = stream(7, Stream::Workload, 0, 1).gen();
        let d: u64 = stream(8, Stream::Workload, 0, 0).gen();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }
}

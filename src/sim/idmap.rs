//! A hash map for the event loop's keys of small integer ids (queue-pair connections,
//! a collective's connections and transfers, the ideal FCTs by size).
//!
//! The standard map hashes with SipHash-1-3 under a random key, a defence against
//! inputs chosen to collide that a simulator's own ids do not need: on a 1,024-GPU ring
//! its hashing was about 3% of the instructions (cachegrind, issue 17). This is the
//! multiply-rotate hash of Firefox and rustc (`FxHasher`: each word is xored into the
//! state, which is then multiplied by a 64-bit odd constant; a final rotation brings the
//! product's well-mixed high bits down to the low bits a table indexes by, as
//! rustc-hash 2 does). It is fixed, so a run hashes the same way every time; nothing
//! reads these maps in hash order, so results do not depend on it either way.
//!
//! Leaves out: resistance to adversarial keys (none here come from outside the run).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// `HashMap` with [`IdHasher`].
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The multiplier of rustc's FxHasher (2^64 / the golden ratio, made odd).
const K: u64 = 0x517c_c1b7_2722_0a95;

/// FxHasher's rule over whole words.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdHasher {
    hash: u64,
}

impl IdHasher {
    #[inline(always)]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn hash<T: std::hash::Hash>(x: T) -> u64 {
        BuildHasherDefault::<IdHasher>::default().hash_one(x)
    }

    #[test]
    fn the_same_key_hashes_the_same_and_neighbours_differ() {
        assert_eq!(
            hash((1u32, 2u32, 3u32, 4u32)),
            hash((1u32, 2u32, 3u32, 4u32))
        );
        assert_ne!(hash((1u32, 2u32)), hash((2u32, 1u32)));
        // A table of 2^b buckets indexes by the low bits: a ring's connections (run 0,
        // rank r to r + 1, channel c) spread over them rather than piling up.
        let mut low = std::collections::HashSet::new();
        for r in 0..64u32 {
            for c in 0..16u32 {
                low.insert(hash((0u32, r, r + 1, c)) & 1023);
            }
        }
        // 1,024 keys into 1,024 buckets at random fill 1 - 1/e = 63% of them; a hash
        // that dropped a field would fill at most 64 or 16.
        assert!(low.len() > 550, "{} distinct buckets of 1,024", low.len());
    }

    #[test]
    fn a_map_keeps_every_entry() {
        let mut m: IdMap<(u32, u32), u32> = IdMap::default();
        for i in 0..10_000u32 {
            m.insert((i / 100, i % 100), i);
        }
        assert_eq!(m.len(), 10_000);
        assert!((0..10_000u32).all(|i| m[&(i / 100, i % 100)] == i));
    }
}

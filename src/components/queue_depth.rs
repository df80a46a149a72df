//! The queue-depth histogram of an egress port (`EgressPort::queue_hist`): what an
//! arriving packet finds queued, in 64-byte cells, with 2 significant digits
//! (hdrhistogram). It grows with the depths it sees and records them exactly as a
//! histogram sized for the switch's whole buffer would, which is what every result file
//! was made with; the report reads its 99th percentile per port and per tier.
//!
//! The port counts depths itself ([`DepthCounts`]), at the index such a histogram
//! gives them, and makes the histogram when the report reads it: the same counts, so
//! every figure read from it is the same, for less work per packet (stop 48:
//! websearch-128 0.980x the wall time; permutation-8192's peak 252 -> 244 MiB). The
//! port keeps each sample's index (16 bits) in a batch of 32 in its own lines and
//! counts a batch at a time into counts it holds unboxed, the clamp past the buffer
//! taken on the index (stop 49: permutation-8192 0.9625x and 0.940x, 3 and 4 pairs).
//!
//! Leaves out: nothing of the sized histogram's behaviour; only its memory.

use hdrhistogram::Histogram;

/// Depths in 64-byte cells counted as `queue_histogram()` counts them (lowest
/// discernible value 1, 2 significant digits: 256 sub-buckets, the lower half of each
/// bucket past the first unused), by the same index, grown to the deepest seen.
#[derive(Clone, Debug, Default)]
pub struct DepthCounts {
    counts: Vec<u32>,
}

/// hdrhistogram's sub-bucket count for 2 significant digits: 2 x 10^2 rounded up to a
/// power of two (`Histogram::new_with_bounds`), its half's magnitude, and the leading
/// zeros of a value in the first bucket (`leading_zero_count_base`: 64 - 8).
const SUB_BUCKETS: u64 = 256;
const HALF_MAGNITUDE: u32 = 7;
const LEADING_ZERO_BASE: u32 = 56;

impl DepthCounts {
    /// Counts depth `v` as `record_depth` records it for a buffer of `cells` (what
    /// the tests hold [`DepthCounts::record_indices`] to).
    #[cfg(test)]
    pub fn record(&mut self, v: u64, cells: u64) {
        self.record_indices(&[index_of(v) as u16], cells);
    }

    /// Counts depths given by their indices, `index_of(v)`, for a buffer of `cells`:
    /// as `record(v, cells)` does, the clamp past the buffer taken on the index (the
    /// index is monotone in the depth, and the first depth past a histogram's reach,
    /// a power of two, starts an index of its own, so `v > sized_top(cells)` exactly
    /// when its index is past the top's). A port keeps its samples' indices, which fit
    /// 16 bits, and counts them a batch at a time.
    #[inline]
    pub fn record_indices(&mut self, indices: &[u16], cells: u64) {
        let (top, clamp) = (index_of(sized_top(cells)), index_of(cells));
        for &i in indices {
            let i = if i as usize > top { clamp } else { i as usize };
            if i >= self.counts.len() {
                self.counts.resize(i + 1, 0);
            }
            self.counts[i] = self.counts[i].saturating_add(1);
        }
    }

    /// Whether no depth was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The histogram these counts make: each count recorded at its index's lowest value.
    pub fn histogram(&self) -> Histogram<u32> {
        let mut h = queue_histogram();
        for (i, &n) in self.counts.iter().enumerate() {
            if n > 0 {
                h.record_n(value_of(i), n)
                    .expect("a growing histogram takes any depth");
            }
        }
        h
    }
}

/// hdrhistogram's index of `v` (`index_for`, unit magnitude 0): its bucket is the
/// number of doublings past the first 256 values, its sub-bucket the value shifted down
/// by that many bits. Below 2^32 it is under 3,400 (it fits 16 bits).
#[inline]
pub fn index_of(v: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (v | (SUB_BUCKETS - 1)).leading_zeros();
    let sub = v >> bucket;
    (((bucket as u64 + 1) << HALF_MAGNITUDE) + sub - (SUB_BUCKETS / 2)) as usize
}

/// The lowest value at index `i` (the inverse of [`index_of`]).
fn value_of(i: usize) -> u64 {
    let i = i as u64;
    let half = SUB_BUCKETS / 2;
    let (mut bucket, mut sub) = ((i >> HALF_MAGNITUDE) as i64 - 1, (i & (half - 1)) + half);
    if bucket < 0 {
        sub -= half;
        bucket = 0;
    }
    sub << bucket
}

/// An empty histogram of queue depths in cells, 2 significant digits, that grows to the
/// depths it is given: it starts at 1 KiB (depths below 256 cells), where one sized for
/// the whole buffer at once took 6.5 KiB per port (a 32 MiB buffer), two pages apart
/// from the next port's (permutation-8192: some 100 MiB of its 365, and a page walk
/// at each port's batch).
pub(super) fn queue_histogram() -> Histogram<u32> {
    let mut h = Histogram::new_with_bounds(1, 2, 2).expect("valid histogram bounds");
    h.auto(true);
    h
}

/// Records depth `v` (cells) as a histogram sized for `cells` at once would, clamping
/// nothing it could hold: such a histogram holds every depth below the first power of
/// two above `cells` (at least 256: its counts reach that far) and records a deeper one
/// as `cells`. So the counts, and every quantile, are the same as that histogram's.
/// What the ports did until stop 48 (they count with [`DepthCounts::record`] now, by the
/// same rule); kept as the reference the tests hold the counts to.
#[cfg(test)]
pub(super) fn record_depth(h: &mut Histogram<u32>, v: u64, cells: u64) {
    h.record(clamped(v, cells))
        .expect("a growing histogram takes any depth");
}

/// Depth `v` as a histogram sized for `cells` holds it: itself up to its reach
/// ([`sized_top`]), `cells` past it. The reference the index's clamp
/// (`DepthCounts::record_indices`) is held to.
#[cfg(test)]
fn clamped(v: u64, cells: u64) -> u64 {
    if v > sized_top(cells) {
        cells
    } else {
        v
    }
}

/// The deepest depth a histogram made with `new_with_bounds(1, cells, 2)` records as
/// itself: its counts cover values below the least power of two (at least 2^8, its
/// 256 sub-buckets) above `cells`.
fn sized_top(cells: u64) -> u64 {
    (cells + 1).next_power_of_two().max(256) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counting by index makes the histogram recording makes: the same count at every
    /// value, so the same quantiles, least, greatest and total, and sums over ports.
    /// Depths of every bucket (both sides of each power of two, random ones to 2^31)
    /// for buffers of 255 cells to 32 MiB.
    /// What the report reads from a port's histogram is the same from `a` as from `b`:
    /// total, least, greatest, quantiles, and the same of a sum over ports (the
    /// per-tier depth).
    fn assert_same_figures(a: &Histogram<u32>, b: &Histogram<u32>, cells: u64) {
        let (mut sum_a, mut sum_b) = (a.clone(), b.clone());
        sum_a.add(a).unwrap();
        sum_b.add(b).unwrap();
        for (x, y, what) in [(a, b, "one port"), (&sum_a, &sum_b, "a sum")] {
            assert_eq!(x.len(), y.len(), "cells {cells}, {what}");
            assert_eq!(x.min(), y.min(), "cells {cells}, {what}");
            assert_eq!(x.max(), y.max(), "cells {cells}, {what}");
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
                assert_eq!(
                    x.value_at_quantile(q),
                    y.value_at_quantile(q),
                    "cells {cells}, {what}, quantile {q}"
                );
            }
        }
    }

    #[test]
    fn depths_counted_by_index_make_the_recorded_histogram() {
        let mut depths: Vec<u64> = (0..600).collect();
        for b in 8..32 {
            depths.extend([(1 << b) - 1, 1 << b, (1 << b) + 1, (3 << b) / 2]);
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            depths.push(x % (1 << (x % 32)).max(1));
        }
        for cells in [255u64, 256, 300, 524_289] {
            let (mut recorded, mut counted) = (queue_histogram(), DepthCounts::default());
            for &d in &depths {
                record_depth(&mut recorded, d, cells);
                counted.record(d, cells);
            }
            let made = counted.histogram();
            let bins = |h: &Histogram<u32>| -> Vec<(u64, u32)> {
                h.iter_recorded()
                    .map(|v| (v.value_iterated_to(), v.count_at_value()))
                    .collect()
            };
            assert_eq!(bins(&made), bins(&recorded), "cells {cells}");
            assert_same_figures(&made, &recorded, cells);
        }
    }

    /// The growing queue histogram holds what one sized for the buffer at once holds
    /// (the histogram every result file was made with): the same counts, so the same
    /// quantiles, total, least and greatest, for buffers of 2, 255, 256, 300, 511 and
    /// 524,289 cells (32 MiB), with depths on both sides of each one's reach, among
    /// them the deepest it holds as itself and the first it clamps.
    #[test]
    fn the_growing_queue_histogram_counts_as_one_sized_for_the_buffer() {
        for cells in [2u64, 255, 256, 300, 511, 524_289] {
            let top = sized_top(cells);
            let mut sized = Histogram::<u32>::new_with_bounds(1, cells, 2).unwrap();
            let mut growing = queue_histogram();
            let mut depths = vec![0, 1, 2, 3, 200, 255, 256, 257, 1000, 70_000];
            depths.extend([cells - 1, cells, cells + 1, top, top + 1, top * 3, 1 << 31]);
            for (i, &d) in depths.iter().enumerate() {
                for _ in 0..=i % 3 {
                    sized.saturating_record(d);
                    record_depth(&mut growing, d, cells);
                }
            }
            // The deepest depth the sized one holds as itself, and the first it clamps.
            let mut probe = Histogram::<u32>::new_with_bounds(1, cells, 2).unwrap();
            probe.saturating_record(top);
            assert!(probe.max() >= top, "cells {cells}: {top} held");
            let mut probe = Histogram::<u32>::new_with_bounds(1, cells, 2).unwrap();
            probe.saturating_record(top + 1);
            assert!(probe.max() <= top, "cells {cells}: {} clamped", top + 1);
            assert_same_figures(&growing, &sized, cells);
        }
    }
}

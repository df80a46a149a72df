//! The queue-depth histogram of an egress port (`EgressPort::queue_hist`): what an
//! arriving packet finds queued, in 64-byte cells, with 2 significant digits
//! (hdrhistogram). It grows with the depths it sees and records them exactly as a
//! histogram sized for the switch's whole buffer would, which is what every result file
//! was made with; the report reads its 99th percentile per port and per tier.
//!
//! Leaves out: nothing of the sized histogram's behaviour; only its memory.

use hdrhistogram::Histogram;

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
#[inline]
pub(super) fn record_depth(h: &mut Histogram<u32>, v: u64, cells: u64) {
    let v = if v > sized_top(cells) { cells } else { v };
    h.record(v).expect("a growing histogram takes any depth");
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
            assert_eq!(growing.len(), sized.len(), "cells {cells}");
            assert_eq!(growing.min(), sized.min(), "cells {cells}");
            assert_eq!(growing.max(), sized.max(), "cells {cells}");
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
                assert_eq!(
                    growing.value_at_quantile(q),
                    sized.value_at_quantile(q),
                    "cells {cells}, quantile {q}"
                );
            }
            // Their sums over ports (the report's per-tier depth) agree too.
            let (mut a, mut b) = (growing.clone(), sized.clone());
            a.add(&growing).unwrap();
            b.add(&sized).unwrap();
            assert_eq!(a.value_at_quantile(0.99), b.value_at_quantile(0.99));
            assert_eq!(a.len(), b.len());
        }
    }
}

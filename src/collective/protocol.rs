//! NCCL's three protocols and the fixed costs a collective pays on real GPUs: what each
//! protocol puts on the wire, how much data one buffer step holds, and the latency of a
//! step on NVLink and over the network, plus the per-operation launch latency.
//!
//! Sources (NCCL 2.18-2.26, `src/include/device.h`, `src/graph/tuning.cc`):
//! - **Simple**: data as is; a step is `NCCL_BUFFSIZE / NCCL_STEPS` = 4 MiB / 8 = 512 KiB;
//!   the receiver learns of it through a separate flag after a memory fence, and over the
//!   network through the proxy thread's completion handling (the slowest step).
//! - **LL** (low latency): every 16-byte line (`union ncclLLFifoLine`) carries two
//!   4-byte words of data, each with a 4-byte flag, so the wire carries twice the data; the buffer is `NCCL_LL_LINES_PER_THREAD x
//!   NCCL_LL_MAX_NTHREADS x NCCL_STEPS x 16 B` = 8 x 512 x 8 x 16 = 512 KiB, a step
//!   64 KiB of lines = 32 KiB of data; the receiver polls the flags in the data itself.
//! - **LL128**: 128-byte lines of 120 bytes of data and an 8-byte flag (128/120 of the
//!   data on the wire); the buffer is `NCCL_LL128_ELEMS_PER_THREAD x
//!   NCCL_LL128_MAX_NTHREADS x NCCL_STEPS x 8 B` = 120 x 640 x 8 x 8 = 4,915,200 B, a
//!   step 614,400 B of lines = 576,000 B of data.
//! - Per-step latencies are NCCL's tuner's `hwLat` (us) for NVLink and the network, per
//!   algorithm and protocol; launch latencies its `baseLat`. The tuner uses them to choose
//!   an algorithm; here they are charged on the transfers themselves:
//!   an NVLink step costs its `hwLat` after its bytes; a network step already pays the
//!   host model's posting, DMA, wire and completion (about 6.7 us for a small message
//!   with the CPU proxy on the default host), so only what NCCL's figure has beyond that
//!   is added: Simple's 14 us less 6.7 = 7.3 us (the proxy's flag and flush handling);
//!   LL's 2.7 us and LL128's 4.0 us are below the host path, so they add nothing.
//!
//! - **Ring Simple slices** (`src/include/collectives.h`, `src/device/prims_simple.h`,
//!   `calcCollChunking` in `src/enqueue.cc`): a ring allreduce, reduce-scatter or
//!   allgather with Simple moves a rank's chunk of `ALLREDUCE_CHUNKSTEPS` = 4 steps
//!   (2 MiB) per loop as `ProtoSimple<2, 2>`: two slices of `SLICESTEPS` = 2 buffer
//!   steps each, so four slices are in flight per connection. A slice holds half of the
//!   chunk, rounded up to 16 elements and at least `sliceSize / 32` (32 KiB of floats);
//!   a chunk of 32 KiB or less leaves its second slice empty, which NCCL still posts
//!   (`genericOp`'s loop over empty slices). Broadcast, LL, LL128 and the graph
//!   algorithms move one step per transfer (`chunkSteps` = `sliceSteps` = 1).
//!
//! - **NVLSTree** (NVLink SHARP inside servers, Simple only): `baseLat` 0, NVLink
//!   `hwLat` 25 us for the NVLS part of an operation, network `hwLat` 14 us per tree
//!   step; chunks of `NCCL_NVLS_CHUNKSIZE` (128 KiB) per head, smaller for small
//!   messages (`calcCollChunking`, NCCL 2.26); `NCCL_STEPS` chunks of a channel in
//!   flight (`ncclNvlsBufferSetup`, `src/transport/nvls.cc`: a head's buffer per channel
//!   is `nvlsChunkSize x NCCL_STEPS`); each rank's scatter and gather copy a whole chunk
//!   per step at `defaults::NVLS_COPY_RATE` (`CollectiveRun::nvls_scatter_end`,
//!   `CollectiveRun::arrived`).
//!
//! Leaves out: LL's and LL128's per-thread packing (modelled as a bandwidth factor), the
//! PCI rows of `hwLat` (GPUs and NICs are on NVLink/GPUDirect here), and NVLS within
//! one server or with CollNet.

use super::CollectiveAlgorithm;
use crate::units::SimDuration;

/// How a collective's data is framed (`collective.protocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// NCCL's LL: 16-byte lines, half of each flags.
    Ll,
    /// NCCL's LL128: 128-byte lines, 8 bytes of each a flag.
    Ll128,
    /// NCCL's Simple: bulk data, then a flag.
    Simple,
}

/// `NCCL_STEPS`: buffer slots per connection (`src/include/device.h`).
pub const NCCL_STEPS: u32 = 8;

/// `ALLREDUCE_CHUNKSTEPS` (= `ALLGATHER_`, `REDUCESCATTER_CHUNKSTEPS`, `NCCL_STEPS / 2`,
/// `src/include/collectives.h`): buffer steps in a ring Simple chunk.
pub const RING_SIMPLE_CHUNK_STEPS: u32 = NCCL_STEPS / 2;

/// `ALLREDUCE_SLICESTEPS` (`NCCL_STEPS / 4`): buffer steps one ring Simple slice takes.
pub const RING_SIMPLE_SLICE_STEPS: u32 = NCCL_STEPS / 4;

/// How a ring step's chunk is cut into transfers: slices per chunk and the buffer steps
/// each slice takes (`ProtoSimple<SlicePerChunk, StepPerSlice>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slicing {
    /// A power of two (1 or 2: the ring runtime divides by shifts).
    pub slices: u32,
    /// A power of two dividing `NCCL_STEPS` (1 or 2: `window` shifts).
    pub steps_per_slice: u32,
}

const _: () = assert!(Slicing::RING_SIMPLE.slices.is_power_of_two());
const _: () = assert!(Slicing::RING_SIMPLE.steps_per_slice.is_power_of_two());

impl Default for Slicing {
    fn default() -> Slicing {
        Slicing::WHOLE
    }
}

impl Slicing {
    /// One transfer per step, taking one buffer slot.
    pub const WHOLE: Slicing = Slicing {
        slices: 1,
        steps_per_slice: 1,
    };
    /// Ring allreduce, reduce-scatter and allgather with Simple: `ProtoSimple<2, 2>`.
    pub const RING_SIMPLE: Slicing = Slicing {
        slices: RING_SIMPLE_CHUNK_STEPS / RING_SIMPLE_SLICE_STEPS,
        steps_per_slice: RING_SIMPLE_SLICE_STEPS,
    };

    /// How NCCL cuts a step of algorithm `a` running `op` with protocol `p`: two slices
    /// for a ring allreduce, reduce-scatter or allgather with Simple, one transfer per
    /// step otherwise, and when the scenario gives `chunk` (the most one transfer moves).
    pub fn of(
        a: CollectiveAlgorithm,
        op: super::CollectiveOp,
        p: Protocol,
        chunk_given: bool,
    ) -> Slicing {
        use super::CollectiveOp as Op;
        let sliced_op = matches!(op, Op::Allreduce | Op::ReduceScatter | Op::Allgather);
        if a == CollectiveAlgorithm::Ring && p == Protocol::Simple && sliced_op && !chunk_given {
            Slicing::RING_SIMPLE
        } else {
            Slicing::WHOLE
        }
    }

    /// Transfers a sender may have posted and its receiver not yet taken.
    #[inline(always)]
    pub fn window(self) -> u32 {
        // A shift, not a division: the ring's `issue` asks for every send it weighs.
        debug_assert!(self.steps_per_slice.is_power_of_two());
        NCCL_STEPS >> self.steps_per_slice.trailing_zeros()
    }

    /// Elements in slice `j` of a chunk of `elems` elements (`genericOp`:
    /// `max(divUp(nelem, 16 x SlicePerChunk) x 16, stepSize x StepPerSlice / 32)`, the
    /// last slice what is left, 0 past the end).
    pub fn slice_elems(self, elems: u64, j: u32, step_elems: u64) -> u64 {
        if self.slices == 1 {
            return elems;
        }
        let floor = step_elems * self.steps_per_slice as u64 / 32;
        // elems.div_ceil(16 * slices), by a shift: slices is a power of two.
        debug_assert!(self.slices.is_power_of_two());
        let unit = 16 * self.slices as u64;
        let units = (elems >> unit.trailing_zeros()) + u64::from(elems & (unit - 1) != 0);
        let slice = (units * 16).max(floor);
        elems.saturating_sub(slice * j as u64).min(slice)
    }
}

const fn ns(t: u64) -> SimDuration {
    SimDuration(t * 1_000)
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ll => "ll",
            Protocol::Ll128 => "ll128",
            Protocol::Simple => "simple",
        }
    }

    /// Bytes on the wire for `data` bytes.
    pub fn wire_bytes(self, data: u64) -> u64 {
        match self {
            Protocol::Simple => data,
            Protocol::Ll => data.div_ceil(8) * 16,
            Protocol::Ll128 => data.div_ceil(120) * 128,
        }
    }

    /// Data bytes one buffer step holds (the most one transfer moves).
    pub fn step_data_bytes(self) -> u64 {
        match self {
            Protocol::Simple => 4 * 1024 * 1024 / NCCL_STEPS as u64,
            Protocol::Ll => 8 * 512 * 16 * 8 / NCCL_STEPS as u64 / 2,
            Protocol::Ll128 => 120 * 640 * 8 * 8 / NCCL_STEPS as u64 / 128 * 120,
        }
    }

    /// Index into NCCL's tables (LL, LL128, Simple).
    fn index(self) -> usize {
        match self {
            Protocol::Ll => 0,
            Protocol::Ll128 => 1,
            Protocol::Simple => 2,
        }
    }
}

/// NCCL's tuner tables (`src/graph/tuning.cc`, NCCL 2.23 and later, as in 2.26), in
/// nanoseconds, per protocol (LL, LL128, Simple).
mod nccl_tables {
    /// `baseLat`: Tree, Ring.
    pub const BASE_TREE: [u64; 3] = [6_800, 14_000, 8_400];
    pub const BASE_RING: [u64; 3] = [6_600, 14_000, 8_400];
    /// `hwLat[NCCL_HW_NVLINK]`: Tree, Ring.
    pub const NVLINK_TREE: [u64; 3] = [600, 1_250, 4_000];
    pub const NVLINK_RING: [u64; 3] = [600, 1_900, 3_400];
    /// `hwLat[NCCL_HW_NET]`: Tree, Ring.
    pub const NET_TREE: [u64; 3] = [5_000, 8_500, 14_000];
    pub const NET_RING: [u64; 3] = [2_700, 4_000, 14_000];
    /// NVLSTree, Simple only: `baseLat` 0, `hwLat[NVLINK]` 25 us, `hwLat[NET]` 14 us.
    pub const NVLS_TREE_NVLINK: u64 = 25_000;
    pub const NVLS_TREE_NET: u64 = 14_000;
}

/// `NCCL_NVLS_CHUNKSIZE`'s default (`src/transport/nvls.cc`), bytes per NVLS head.
pub const NVLS_CHUNK: u64 = 128 * 1024;

/// NVLSTree's data per NVLS head and chunk, as `calcCollChunking` (`src/enqueue.cc`,
/// NCCL 2.26) sets it for `channel_bytes` per channel and `heads` heads: from
/// `NVLS_CHUNK`, 64 KiB below 4 x heads x 128 KiB per channel, 32 KiB below heads x
/// 64 KiB (the larger rules start above 128 KiB and never apply to the default).
pub fn nvls_chunk(channel_bytes: u64, heads: u32) -> u64 {
    let ops = heads.max(1) as u64;
    let mut chunk = NVLS_CHUNK;
    if channel_bytes < 4 * ops * chunk && chunk > 65_536 {
        chunk = 65_536;
    }
    if channel_bytes < ops * chunk && chunk > 32_768 {
        chunk = 32_768;
    }
    chunk
}

/// The data one transfer of algorithm `a` moves with protocol `p`, as NCCL's
/// `calcCollChunking` (`src/enqueue.cc`) sets it: the protocol's buffer step, except
/// that tree LL128 shrinks its chunk for messages too small to fill the tree's pipeline
/// (`nstepsLL128 = 1 + log2(nodes) + 0.1 x ranks per node`; halve while
/// `bytes / (channels x chunk) < nstepsLL128 x 64 / ppn` and above 128 KiB, then while
/// `< nstepsLL128 x 16 / ppn` and above 32 KiB).
pub fn chunk_bytes(
    a: CollectiveAlgorithm,
    p: Protocol,
    bytes: u64,
    channels: u32,
    nodes: u32,
    ppn: u32,
) -> u64 {
    if a == CollectiveAlgorithm::NvlsTree {
        // A chunk holds one NVLS chunk per head (a head per GPU of a server).
        let heads = ppn.max(1);
        return heads as u64 * nvls_chunk(bytes / channels.max(1) as u64, heads);
    }
    let mut chunk = p.step_data_bytes();
    if a == CollectiveAlgorithm::Tree && p == Protocol::Ll128 {
        let ppn = ppn.max(1) as f64;
        let steps = 1.0 + (31 - nodes.max(1).leading_zeros()) as f64 + 0.1 * ppn;
        let per = |c: u64| bytes as f64 / (channels.max(1) as f64 * c as f64);
        while per(chunk) < steps * 64.0 / ppn && chunk > 131_072 {
            chunk /= 2;
        }
        while per(chunk) < steps * 16.0 / ppn && chunk > 32_768 {
            chunk /= 2;
        }
    }
    chunk
}

/// How fast one channel (one thread block of NCCL's kernel) moves bytes over NVLink, in
/// line bytes: NCCL's per-channel caps for Hopper (`tuning.cc`): `perChMaxTreeBws`
/// 38.7 GB/s on one node for Simple, `perChMaxRingLL128Bws` 36.7 GB/s for LL128;
/// assumption: LL's 16-byte lines go at LL128's rate (so half of it in data).
pub fn channel_copy_rate(p: Protocol) -> crate::units::BitsPerSec {
    crate::units::BitsPerSec(match p {
        Protocol::Simple => 309_600_000_000,
        Protocol::Ll128 | Protocol::Ll => 293_600_000_000,
    })
}

/// What the default host model already charges a small network message (posting by the
/// CPU proxy, doorbell, WQE fetch, DMA, two hops, completion and notification),
/// nanoseconds; see the module comment.
const HOST_PATH: u64 = 6_700;

/// NCCL's launch latency of one operation (`baseLat`).
pub fn launch_latency(a: CollectiveAlgorithm, p: Protocol) -> SimDuration {
    let t = match a {
        CollectiveAlgorithm::NvlsTree => return SimDuration::ZERO,
        CollectiveAlgorithm::Ring => nccl_tables::BASE_RING,
        _ => nccl_tables::BASE_TREE,
    };
    ns(t[p.index()])
}

/// The latency of one NVLink step (`hwLat[NVLINK]`). NVLSTree's 25 us is NCCL's for
/// the whole NVLS part of an operation (its tuner charges it once, `intraLat`), so each
/// of its two NVLS phases, the switch's reduction and the multicast, pays half.
pub fn nvlink_step_latency(a: CollectiveAlgorithm, p: Protocol) -> SimDuration {
    let t = match a {
        CollectiveAlgorithm::NvlsTree => return ns(nccl_tables::NVLS_TREE_NVLINK / 2),
        CollectiveAlgorithm::Ring => nccl_tables::NVLINK_RING,
        _ => nccl_tables::NVLINK_TREE,
    };
    ns(t[p.index()])
}

/// NCCL's latency of one network step (`hwLat[NET]`); with one rank per node NCCL
/// charges every algorithm the tree's row (`interLat`, NCCL 2.23+).
pub fn net_step_latency(
    a: CollectiveAlgorithm,
    p: Protocol,
    one_rank_per_node: bool,
) -> SimDuration {
    let t = match a {
        CollectiveAlgorithm::NvlsTree => return ns(nccl_tables::NVLS_TREE_NET),
        CollectiveAlgorithm::Ring if !one_rank_per_node => nccl_tables::NET_RING,
        _ => nccl_tables::NET_TREE,
    };
    ns(t[p.index()])
}

/// What a network step costs beyond the host model's path: NCCL's figure less the
/// host path, never negative.
pub fn net_step_extra(a: CollectiveAlgorithm, p: Protocol, one_rank_per_node: bool) -> SimDuration {
    SimDuration(
        net_step_latency(a, p, one_rank_per_node)
            .0
            .saturating_sub(ns(HOST_PATH).0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_bytes_follow_the_line_formats() {
        // LL: 8 data bytes per 16-byte line; LL128: 120 per 128.
        assert_eq!(Protocol::Ll.wire_bytes(8), 16);
        assert_eq!(Protocol::Ll.wire_bytes(4), 16);
        assert_eq!(Protocol::Ll.wire_bytes(4096), 8192);
        assert_eq!(Protocol::Ll128.wire_bytes(120), 128);
        assert_eq!(Protocol::Ll128.wire_bytes(121), 256);
        assert_eq!(Protocol::Simple.wire_bytes(4096), 4096);
    }

    #[test]
    fn ring_simple_slices_halve_a_chunk_down_to_32_kib() {
        let s = Slicing::RING_SIMPLE;
        assert_eq!((s.slices, s.steps_per_slice, s.window()), (2, 2, 4));
        // Floats: a 512 KiB step is 131,072 elements; the floor is 8,192 (32 KiB).
        let step = 131_072;
        // A full 2 MiB chunk: two 1 MiB slices.
        assert_eq!(s.slice_elems(524_288, 0, step), 262_144);
        assert_eq!(s.slice_elems(524_288, 1, step), 262_144);
        // 100,001 elements: ceil(100,001 / 32) x 16 = 50,016, then the rest.
        assert_eq!(s.slice_elems(100_001, 0, step), 50_016);
        assert_eq!(s.slice_elems(100_001, 1, step), 49_985);
        // 12,000 elements: the floor takes 8,192 first.
        assert_eq!(s.slice_elems(12_000, 0, step), 8_192);
        assert_eq!(s.slice_elems(12_000, 1, step), 3_808);
        // 5,000 elements fit the first slice; the second is posted empty.
        assert_eq!(s.slice_elems(5_000, 0, step), 5_000);
        assert_eq!(s.slice_elems(5_000, 1, step), 0);
        assert_eq!(Slicing::WHOLE.slice_elems(5_000, 0, step), 5_000);
        assert_eq!(Slicing::WHOLE.window(), NCCL_STEPS);
    }

    #[test]
    fn step_sizes_are_nccls_buffers_over_eight_slots() {
        assert_eq!(Protocol::Simple.step_data_bytes(), 524_288);
        assert_eq!(Protocol::Ll.step_data_bytes(), 32_768);
        assert_eq!(Protocol::Ll128.step_data_bytes(), 576_000);
    }

    #[test]
    fn tree_ll128_shrinks_its_chunk_for_small_messages_as_nccl_does() {
        // 16 MiB over 16 channels on 2 x 8: nstepsLL128 = 1 + 1 + 0.8 = 2.8; 1 MiB per
        // channel: 576000 -> 288000 -> 144000 -> 72000 (bytes / chunk 14.6 >= 5.6).
        let t = CollectiveAlgorithm::Tree;
        assert_eq!(chunk_bytes(t, Protocol::Ll128, 16 << 20, 16, 2, 8), 72_000);
        // Large enough: the full step.
        assert_eq!(chunk_bytes(t, Protocol::Ll128, 1 << 30, 16, 2, 8), 576_000);
        // Ring never shrinks.
        let r = CollectiveAlgorithm::Ring;
        assert_eq!(chunk_bytes(r, Protocol::Ll128, 1 << 20, 16, 2, 8), 576_000);
    }

    /// NCCL 2.26's `calcCollChunking` for NVLSTree on 8 heads and 16 channels: 64 KiB per
    /// channel at 1 MiB and 256 KiB at 4 MiB take 32 KiB chunks (below heads x 64 KiB =
    /// 512 KiB), 2 MiB at 32 MiB 64 KiB (below 4 x heads x 128 KiB = 4 MiB), 8 MiB at
    /// 128 MiB the full 128 KiB; a chunk of the graph holds one per head.
    #[test]
    fn nvls_tree_chunks_shrink_for_small_messages_as_nccl_does() {
        for (total, per_head) in [
            (1u64 << 20, 32_768u64),
            (4 << 20, 32_768),
            (32 << 20, 65_536),
            (128 << 20, 131_072),
            (256 << 20, 131_072),
        ] {
            assert_eq!(nvls_chunk(total / 16, 8), per_head, "{total} B");
            assert_eq!(
                chunk_bytes(
                    CollectiveAlgorithm::NvlsTree,
                    Protocol::Simple,
                    total,
                    16,
                    2,
                    8
                ),
                8 * per_head
            );
        }
        // NVLS latencies: nothing at launch, half of 25 us per NVLS phase, 14 us a tree step.
        let a = CollectiveAlgorithm::NvlsTree;
        assert_eq!(launch_latency(a, Protocol::Simple), SimDuration::ZERO);
        assert_eq!(
            nvlink_step_latency(a, Protocol::Simple),
            SimDuration(12_500_000)
        );
        assert_eq!(
            net_step_extra(a, Protocol::Simple, false),
            SimDuration(7_300_000)
        );
    }

    #[test]
    fn network_steps_add_what_the_host_path_does_not_charge() {
        // Simple ring: 14.0 us in NCCL's table, 6.7 us in the host path.
        assert_eq!(
            net_step_extra(CollectiveAlgorithm::Ring, Protocol::Simple, false),
            SimDuration(7_300_000)
        );
        assert_eq!(
            net_step_extra(CollectiveAlgorithm::Ring, Protocol::Ll, false),
            SimDuration::ZERO
        );
        assert_eq!(
            nvlink_step_latency(CollectiveAlgorithm::Ring, Protocol::Simple),
            SimDuration(3_400_000)
        );
    }
}

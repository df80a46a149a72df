//! Defaults of the collective model, with their sources.

use crate::units::{BitsPerSec, SimDuration};

/// NVLink 4 (H100) as NCCL counts it: 18 links x `SM90_NVLINK_BW` 20.6 GB/s =
/// 370.8 GB/s per GPU and direction (`src/graph/topo.h`; the line rate is 25 GB/s
/// per link, and NVIDIA quotes about 370 GB/s for NCCL's copies, nccl-tests #212).
pub const INTRA_HOST_RATE: BitsPerSec = BitsPerSec(2_966_400_000_000);
/// Assumption: a reduction reads two buffers and writes one: HBM3's 3.35 TB/s / 3.
pub const REDUCE_RATE: BitsPerSec = BitsPerSec(8_000_000_000_000);
/// NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8.
pub const CHUNK: u64 = 512 * 1024;
/// Assumption: in-network aggregation streams in small fragments (a switch cannot
/// hold large chunks per stream): 64 KiB.
pub const IN_NETWORK_CHUNK: u64 = 64 * 1024;
/// Channels without a host model (one NIC per server): NCCL's two rings per NIC.
pub const CHANNELS: u32 = 2;
/// Assumption: a SHARP-class switch aggregates at its port rate (400 Gb/s, Quantum-2
/// NDR) after about 1 us of aggregation-engine latency.
pub const SWITCH_REDUCE_RATE: BitsPerSec = BitsPerSec(400_000_000_000);
pub const SWITCH_REDUCE_LATENCY: SimDuration = SimDuration(1_000_000);
/// The CPU time to enqueue one collective (NCCL's enqueue and the kernel launch,
/// without CUDA graphs). Calibrated: nccl-tests on one 8 x H100 server (NCCL 2.26)
/// takes about 35 us for an 8-byte allreduce where the GPU's share (NCCL's ring LL
/// latency, 6.6 + 14 x 0.6 us) is 15 us; 4 x 8 H100 also take about 35 us.
pub const LAUNCH_OVERHEAD: SimDuration = SimDuration(35_000_000);
/// nccl-tests' `-n` and `-w` defaults.
pub const ITERS: u32 = 20;
/// NCCL's queue pairs per connection (`NCCL_IB_QPS_PER_CONNECTION`, `net_ib.cc`) and
/// the most it allows (`NCCL_IB_MAX_QPS`).
pub const QPS_PER_CONNECTION: u32 = 1;
pub const MAX_QPS_PER_CONNECTION: u32 = 128;
/// `NCCL_IB_AR_THRESHOLD` (`net_ib.cc`): data above it goes as a separate RDMA
/// WRITE that adaptive routing may spread.
pub const AR_THRESHOLD: u64 = 8192;
pub const WARMUP_ITERS: u32 = 5;
/// NVLSTree's copies between the user's buffers and NVLink SHARP's, per channel:
/// without registered buffers (nccl-tests' default) each channel's scatter warps copy
/// its whole share of the input into the NVLS buffer and its gather warps copy the
/// whole result out (`src/device/all_reduce.h`, `RunWorkColl<ncclFuncAllReduce, T,
/// RedOp, NCCL_ALGO_NVLS_TREE, NCCL_PROTO_SIMPLE>`: 6 scatter and 5 gather warps of
/// 20 in a channel with a parent), far fewer warps than a ring's copy. Calibrated:
/// 2 x 8 H100 with NVLSTree forced (nccl-tests #294, NCCL 2.18) on 16 channels adds
/// about 240 GB/s of algorithm bandwidth from size to size from 128 MiB to 2 GiB
/// (235 and 237 GB/s overall at 1 and 2 GiB), 15 GB/s per channel.
pub const NVLS_COPY_RATE: BitsPerSec = BitsPerSec(120_000_000_000);

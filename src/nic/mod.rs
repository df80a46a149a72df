//! The NIC and its host: doorbells, WQE fetch, PCIe DMA, completions and interrupts.
//!
//! Models, per message (the pipeline and its stages are in `components::host`): who posts
//! the work request (a CPU thread, a CPU proxy thread for the GPU, or a GPU thread, as in
//! IBGDA), the doorbell's MMIO write, the NIC's DMA read of the WQE (skipped by
//! BlueFlame) and of the payload, with a bounded number of reads in flight and a send
//! engine that takes one WQE at a time; staging copies between GPU and host memory when
//! the NIC cannot reach GPU memory; the CQE's DMA write, and how the consumer learns of
//! it: polling, or an interrupt moderated as mlx5e does ([`interrupts`]). CPU time is
//! charged per operation and per spinning core. Where GPUDirect needs peer-to-peer DMA
//! across root complexes, the PCIe topology refuses it, routes it over the CPU
//! interconnect, or falls back to staging, as configured. Every cost and its source is in
//! [`config`].
//!
//! Leaves out: PCIe contention between the NIC's DMA and staging copies, PCIe credit
//! flow control and TLP-level detail (a bandwidth and a round trip stand for them), the
//! receive side's PCIe write bandwidth, the READ responder's payload read, selective
//! signalling (every work request completes with a CQE), and cache effects of interrupts
//! on the application.

pub mod config;
pub mod interrupts;
pub mod spec;

//! The host and NIC parameters, their defaults and where each default comes from.
//!
//! This is the one place the host model's numbers live. Each default is either taken from
//! a cited source or is a stated assumption; users calibrate them to their hardware with
//! the `host:` section (README, "Host and NIC"). Times are per operation; bandwidths are
//! what a PCIe x16 link or the CPU interconnect carries after protocol overhead.

use crate::nic::interrupts::{Moderation, DIM_LEVELS};
pub use crate::nic::spec::{
    CompletionMode, CrossSocket, HostSpec, MemoryKind, ModerationSpec, PostingMode, Wiring,
};
use crate::units::{BitsPerSec, SimDuration};

/// One default: its value, and its source or the assumption behind it.
pub struct Sourced<T> {
    pub value: T,
    pub source: &'static str,
}

const fn ns(n: u64) -> SimDuration {
    SimDuration(n * 1_000)
}

/// Every default of the host model, with its source. `doorbell validate` and the README
/// table print these.
pub mod defaults {
    use super::*;
    pub const CORES: Sourced<u32> = Sourced {
        value: 112,
        source: "NVIDIA DGX H100: 2 x 56-core Xeon 8480C",
    };
    pub const GPUS_PER_HOST: Sourced<u32> = Sourced {
        value: 8,
        source: "NVIDIA DGX H100: 8 GPUs",
    };
    pub const NICS_PER_HOST: Sourced<u32> = Sourced {
        value: 1,
        source: "assumption: one fabric port per topology host (a DGX has 8; set nics_per_host)",
    };
    pub const POSTING_THREADS: Sourced<u32> = Sourced {
        value: 1,
        source: "perftest and NCCL post from one thread per NIC",
    };
    pub const GPU_POSTING_THREADS: Sourced<u32> = Sourced {
        value: 32,
        source: "assumption: one warp of NVSHMEM IBGDA posting threads per NIC",
    };
    pub const PCIE_BANDWIDTH: Sourced<BitsPerSec> = Sourced {
        value: BitsPerSec(400_000_000_000),
        source: "PCIe Gen5 x16: 63 GB/s raw, about 80% after TLP/DLLP overhead (Neugebauer et al., SIGCOMM 2018)",
    };
    pub const PCIE_ROUND_TRIP: Sourced<SimDuration> = Sourced {
        value: ns(800),
        source: "a small DMA read's round trip, 0.5-1 us (Neugebauer et al., SIGCOMM 2018; design reference)",
    };
    pub const ROOT_COMPLEXES: Sourced<u32> = Sourced {
        value: 2,
        source: "a dual-socket server: one root complex per socket",
    };
    pub const INTERCONNECT_BANDWIDTH: Sourced<BitsPerSec> = Sourced {
        value: BitsPerSec(80_000_000_000),
        source: "assumption: peer-to-peer across UPI/xGMI runs far below PCIe (10 GB/s); NCCL disables GDR across sockets for this reason (NCCL_NET_GDR_LEVEL)",
    };
    pub const INTERCONNECT_LATENCY: Sourced<SimDuration> = Sourced {
        value: ns(200),
        source: "assumption: one socket-to-socket hop",
    };
    pub const MAX_OUTSTANDING_READS: Sourced<u32> = Sourced {
        value: 64,
        source: "assumption: the NIC's DMA read tags in flight; calibrate with ib_write_bw -s 8 message rate",
    };
    pub const WQE_PROCESSING: Sourced<SimDuration> = Sourced {
        value: ns(5),
        source: "ConnectX-6: 215 million messages/s, about 5 ns per WQE (NVIDIA product brief)",
    };
    pub const WQE_BYTES: Sourced<u64> = Sourced {
        value: 64,
        source: "mlx5 send WQE basic block: 64 B (rdma-core providers/mlx5)",
    };
    pub const CQE_BYTES: Sourced<u64> = Sourced {
        value: 64,
        source: "mlx5 CQE: 64 B (rdma-core providers/mlx5)",
    };
    pub const WQE_BUILD: Sourced<SimDuration> = Sourced {
        value: ns(100),
        source: "assumption: ibv_post_send's software path, about 0.1 us (Kalia et al., ATC 2016)",
    };
    pub const DOORBELL_MMIO: Sourced<SimDuration> = Sourced {
        value: ns(150),
        source: "assumption: an MMIO write and store fence, the cost Kalia et al. (ATC 2016) batch doorbells to avoid",
    };
    pub const CQE_POLL: Sourced<SimDuration> = Sourced {
        value: ns(50),
        source: "assumption: ibv_poll_cq reading one CQE",
    };
    pub const HARD_IRQ: Sourced<SimDuration> = Sourced {
        value: ns(1_000),
        source: "assumption: interrupt entry, handler and exit, about 1 us",
    };
    pub const SOFTIRQ: Sourced<SimDuration> = Sourced {
        value: ns(2_000),
        source:
            "assumption: completion handler, CQ re-arm and waking the consumer thread, about 2 us",
    };
    pub const COPY_LAUNCH: Sourced<SimDuration> = Sourced {
        value: ns(5_000),
        source: "assumption: cudaMemcpyAsync launch and synchronisation, about 5 us",
    };
    pub const PROXY_HANDOFF: Sourced<SimDuration> = Sourced {
        value: ns(1_000),
        source: "assumption: the GPU writes a host-memory FIFO over PCIe and the proxy's loop picks it up",
    };
    pub const GPU_WQE_BUILD: Sourced<SimDuration> = Sourced {
        value: ns(200),
        source: "assumption: a GPU thread writing a WQE to GPU memory",
    };
    pub const GPU_DOORBELL: Sourced<SimDuration> = Sourced {
        value: ns(300),
        source:
            "assumption: a GPU thread's MMIO write to the NIC's doorbell over PCIe peer-to-peer",
    };
    pub const GPU_CQE_POLL: Sourced<SimDuration> = Sourced {
        value: ns(200),
        source: "assumption: a GPU thread reading a CQE from GPU memory",
    };
    pub const MODERATION: Sourced<Moderation> = Sourced {
        value: Moderation::MLX5E_DEFAULT,
        source: "mlx5e default CQ moderation: 16 us / 32 completions (design reference)",
    };
}

/// How completions are reaped in the CPU posting modes, and the interrupt moderation.
#[derive(Clone, Debug, PartialEq)]
pub enum Notify {
    Poll,
    Interrupt(ModerationConfig),
}

#[derive(Clone, Debug, PartialEq)]
pub enum ModerationConfig {
    /// Every completion interrupts at once.
    Off,
    Fixed(Moderation),
    /// DIM-like levels (`interrupts::DIM_LEVELS`).
    Adaptive,
}

/// CPU and GPU time per operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostCosts {
    pub wqe_build: SimDuration,
    pub doorbell_mmio: SimDuration,
    pub cqe_poll: SimDuration,
    pub hard_irq: SimDuration,
    pub softirq: SimDuration,
    pub copy_launch: SimDuration,
    pub proxy_handoff: SimDuration,
    pub gpu_wqe_build: SimDuration,
    pub gpu_doorbell: SimDuration,
    pub gpu_cqe_poll: SimDuration,
}

/// The validated `host:` section.
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    pub posting: PostingMode,
    /// Where a message's data is read from, and where it is written to.
    pub memory_source: MemoryKind,
    pub memory_destination: MemoryKind,
    pub notify: Notify,
    pub blueflame: bool,
    /// Messages up to this size travel inside their WQE (no payload read); 0: none.
    pub inline_max: u64,
    pub doorbell_batch: u32,
    pub cores: u32,
    pub gpus_per_host: u32,
    pub nics_per_host: u32,
    pub wiring: Wiring,
    /// Servers: topology host ports / `nics_per_host`.
    pub servers: u32,
    pub posting_threads: u32,
    pub gpu_posting_threads: u32,
    pub pcie_bandwidth: BitsPerSec,
    pub pcie_round_trip: SimDuration,
    pub root_complexes: u32,
    pub gpu_root_complex: Vec<u32>,
    pub nic_root_complex: Vec<u32>,
    /// PCIe switch of each GPU and NIC (default: one per root complex).
    pub gpu_switch: Vec<u32>,
    pub nic_switch: Vec<u32>,
    /// Peer-to-peer between switches of one root complex goes through it at this rate.
    pub root_complex_p2p_bandwidth: BitsPerSec,
    pub nic_gpu: Vec<u32>,
    pub cross_socket: CrossSocket,
    pub interconnect_bandwidth: BitsPerSec,
    pub interconnect_latency: SimDuration,
    pub max_outstanding_reads: u32,
    pub wqe_processing: SimDuration,
    pub wqe_bytes: u64,
    pub cqe_bytes: u64,
    pub costs: HostCosts,
}

/// How one NIC's messages in one posting mode reach memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DataPath {
    /// The mode in effect (`cpu` when `cross_socket: stage` fell back).
    pub mode: PostingMode,
    /// GPU data is copied through host memory (GPU to host before, host to GPU after).
    pub staged: bool,
    /// Bandwidth of the NIC's payload DMA.
    pub dma_bandwidth: BitsPerSec,
    /// Added to each one-way PCIe crossing to the payload buffer.
    pub payload_extra: SimDuration,
    /// Added to each one-way crossing to where WQEs, doorbells and CQEs live (GPU memory in
    /// the `gpu` mode).
    pub control_extra: SimDuration,
}

impl HostConfig {
    /// The server a topology host port belongs to.
    pub fn server_of(&self, port: u32) -> u32 {
        match self.wiring {
            Wiring::Packed => port / self.nics_per_host,
            Wiring::Rail => port % self.servers,
        }
    }

    /// Which of its server's NICs a topology host port is.
    pub fn local_nic(&self, port: u32) -> u32 {
        match self.wiring {
            Wiring::Packed => port % self.nics_per_host,
            Wiring::Rail => port / self.servers,
        }
    }

    /// The topology host port of NIC `nic` of server `server`.
    pub fn port_of(&self, server: u32, nic: u32) -> u32 {
        match self.wiring {
            Wiring::Packed => server * self.nics_per_host + nic,
            Wiring::Rail => nic * self.servers + server,
        }
    }

    /// The NIC GPU `gpu` of a server uses: NIC `gpu x nics / gpus` (with as many NICs as
    /// GPUs, GPU i's NIC is NIC i: its rail).
    pub fn nic_of_gpu(&self, gpu: u32) -> u32 {
        gpu * self.nics_per_host / self.gpus_per_host
    }

    /// `gpu`, `host`, or `gpu->host` (source to destination).
    pub fn memory_name(&self) -> String {
        let n = |m: MemoryKind| match m {
            MemoryKind::Gpu => "gpu",
            MemoryKind::Host => "host",
        };
        if self.memory_source == self.memory_destination {
            n(self.memory_source).to_string()
        } else {
            format!("{}->{}", n(self.memory_source), n(self.memory_destination))
        }
    }

    /// The data path on local NIC `nic` of a message posted in `mode` whose buffer at
    /// this NIC is in `memory`; an error when the mode needs peer-to-peer DMA that the
    /// PCIe topology refuses.
    pub fn data_path(
        &self,
        nic: u32,
        mode: PostingMode,
        memory: MemoryKind,
    ) -> Result<DataPath, String> {
        let gpu = self.nic_gpu[nic as usize];
        let (g_rc, n_rc) = (
            self.gpu_root_complex[gpu as usize],
            self.nic_root_complex[nic as usize],
        );
        let gpu_mem = memory == MemoryKind::Gpu;
        let wants_p2p = mode != PostingMode::Cpu && (gpu_mem || mode == PostingMode::Gpu);
        let mut path = DataPath {
            mode,
            staged: gpu_mem && mode == PostingMode::Cpu,
            dma_bandwidth: self.pcie_bandwidth,
            payload_extra: SimDuration::ZERO,
            control_extra: SimDuration::ZERO,
        };
        if !wants_p2p {
            return Ok(path);
        }
        if g_rc == n_rc {
            if self.gpu_switch[gpu as usize] != self.nic_switch[nic as usize] {
                // Under one root complex but not one switch: P2P turns in the root
                // complex, at its own peer-to-peer rate.
                if gpu_mem {
                    path.dma_bandwidth = self.pcie_bandwidth.min(self.root_complex_p2p_bandwidth);
                }
            }
            return Ok(path);
        }
        match self.cross_socket {
            CrossSocket::Refuse => Err(format!(
                "GPU {gpu} (root complex {g_rc}) and NIC {nic} (root complex {n_rc}) cannot do peer-to-peer DMA, which `{}` needs; set `host.pcie.cross_socket` to `interconnect` (P2P over the CPU interconnect) or `stage` (fall back to the CPU path), use `posting: cpu`, or put them under one root complex",
                mode.name()
            )),
            CrossSocket::Interconnect => {
                if gpu_mem {
                    path.dma_bandwidth = self.pcie_bandwidth.min(self.interconnect_bandwidth);
                    path.payload_extra = self.interconnect_latency;
                }
                if mode == PostingMode::Gpu {
                    path.control_extra = self.interconnect_latency;
                }
                Ok(path)
            }
            CrossSocket::Stage => Ok(DataPath {
                mode: PostingMode::Cpu,
                staged: gpu_mem,
                ..path
            }),
        }
    }
}

/// Resolves the `host:` section against the topology's host count. Errors are
/// (field path under `host`, message).
/// `strict`: refuse fields that have no effect (moderation while polling); off for a
/// compare set's merged section, which may switch to polling without clearing them.
pub fn resolve(
    spec: &HostSpec,
    topology_hosts: u32,
    strict: bool,
) -> Result<HostConfig, (String, String)> {
    use defaults as d;
    let e = |p: &str, m: String| Err((p.to_string(), m));
    let pos = |p: &str, v: Option<u32>, def: u32, max: u32| -> Result<u32, (String, String)> {
        let v = v.unwrap_or(def);
        if v == 0 || v > max {
            return Err((p.to_string(), format!("expected 1 to {max}, found {v}")));
        }
        Ok(v)
    };
    let cores = pos("cores", spec.cores, d::CORES.value, 4096)?;
    let gpus = pos(
        "gpus_per_host",
        spec.gpus_per_host,
        d::GPUS_PER_HOST.value,
        64,
    )?;
    let nics = pos(
        "nics_per_host",
        spec.nics_per_host,
        d::NICS_PER_HOST.value,
        64,
    )?;
    if topology_hosts % nics != 0 {
        return e(
            "nics_per_host",
            format!(
                "the topology has {topology_hosts} host ports, not a multiple of {nics} NICs per host"
            ),
        );
    }
    let posting_threads = pos(
        "posting_threads",
        spec.posting_threads,
        d::POSTING_THREADS.value,
        cores,
    )?;
    if nics * posting_threads > cores {
        return e(
            "posting_threads",
            format!(
                "{nics} NICs x {posting_threads} posting threads need {} cores; the host has {cores}",
                nics * posting_threads
            ),
        );
    }
    let gpu_posting_threads = pos(
        "gpu_posting_threads",
        spec.gpu_posting_threads,
        d::GPU_POSTING_THREADS.value,
        1024,
    )?;
    let doorbell_batch = pos("doorbell_batch", spec.doorbell_batch, 1, 1 << 16)?;
    let p = &spec.pcie;
    let rcs = pos(
        "pcie.root_complexes",
        p.root_complexes,
        d::ROOT_COMPLEXES.value,
        64,
    )?;
    let spread = |n: u32| -> Vec<u32> { (0..n).map(|i| i * rcs / n).collect() };
    let list = |path: &str,
                given: &Option<Vec<u32>>,
                n: u32,
                bound: u32,
                what: &str,
                default: Vec<u32>| {
        match given {
            None => Ok(default),
            Some(v) if v.len() != n as usize => Err((
                path.to_string(),
                format!("expected {n} entries (one per {what}), found {}", v.len()),
            )),
            Some(v) => match v.iter().position(|&x| x >= bound) {
                Some(i) => Err((
                    format!("{path}[{i}]"),
                    format!("expected a value below {bound}, found {}", v[i]),
                )),
                None => Ok(v.clone()),
            },
        }
    };
    let gpu_root_complex = list(
        "pcie.gpu_root_complex",
        &p.gpu_root_complex,
        gpus,
        rcs,
        "GPU",
        spread(gpus),
    )?;
    let nic_root_complex = list(
        "pcie.nic_root_complex",
        &p.nic_root_complex,
        nics,
        rcs,
        "NIC",
        spread(nics),
    )?;
    // PCIe switches: by default one per root complex (every device under a root complex
    // shares its switch).
    let gpu_switch = list(
        "pcie.gpu_switch",
        &p.gpu_switch,
        gpus,
        256,
        "GPU",
        gpu_root_complex.clone(),
    )?;
    let nic_switch = list(
        "pcie.nic_switch",
        &p.nic_switch,
        nics,
        256,
        "NIC",
        nic_root_complex.clone(),
    )?;
    // A switch hangs off one root complex.
    let mut switch_rc: std::collections::BTreeMap<u32, u32> = Default::default();
    for (what, sw, rc) in [
        ("gpu_switch", &gpu_switch, &gpu_root_complex),
        ("nic_switch", &nic_switch, &nic_root_complex),
    ] {
        for (i, (&s, &r)) in sw.iter().zip(rc.iter()).enumerate() {
            if let Some(&other) = switch_rc.get(&s) {
                if other != r {
                    return e(
                        &format!("pcie.{what}[{i}]"),
                        format!("switch {s} is under root complex {other}, but this device is under root complex {r}"),
                    );
                }
            }
            switch_rc.insert(s, r);
        }
    }
    let nic_gpu = list(
        "pcie.nic_gpu",
        &p.nic_gpu,
        nics,
        gpus,
        "NIC",
        (0..nics).map(|n| n * gpus / nics).collect(),
    )?;
    let rate = |path: &str, v: Option<crate::spec::Rate>, def: BitsPerSec| {
        let v = v.map_or(def, |r| r.0);
        if v.0 < 1_000_000 {
            return Err((
                path.to_string(),
                format!("expected at least 1 Mbps, found {v}"),
            ));
        }
        Ok(v)
    };
    let time = |path: &str, v: Option<crate::spec::Duration>, def: SimDuration| {
        let v = v.map_or(def, |t| t.0);
        if v > crate::spec::MAX_LATENCY {
            return Err((path.to_string(), format!("expected at most 1 s, found {v}")));
        }
        Ok(v)
    };
    let c = &spec.costs;
    let costs = HostCosts {
        wqe_build: time("costs.wqe_build", c.wqe_build, d::WQE_BUILD.value)?,
        doorbell_mmio: time(
            "costs.doorbell_mmio",
            c.doorbell_mmio,
            d::DOORBELL_MMIO.value,
        )?,
        cqe_poll: time("costs.cqe_poll", c.cqe_poll, d::CQE_POLL.value)?,
        hard_irq: time("costs.hard_irq", c.hard_irq, d::HARD_IRQ.value)?,
        softirq: time("costs.softirq", c.softirq, d::SOFTIRQ.value)?,
        copy_launch: time("costs.copy_launch", c.copy_launch, d::COPY_LAUNCH.value)?,
        proxy_handoff: time(
            "costs.proxy_handoff",
            c.proxy_handoff,
            d::PROXY_HANDOFF.value,
        )?,
        gpu_wqe_build: time(
            "costs.gpu_wqe_build",
            c.gpu_wqe_build,
            d::GPU_WQE_BUILD.value,
        )?,
        gpu_doorbell: time("costs.gpu_doorbell", c.gpu_doorbell, d::GPU_DOORBELL.value)?,
        gpu_cqe_poll: time("costs.gpu_cqe_poll", c.gpu_cqe_poll, d::GPU_CQE_POLL.value)?,
    };
    let moderation = match spec.moderation {
        None => ModerationConfig::Fixed(d::MODERATION.value),
        Some(ModerationSpec::Off) => ModerationConfig::Off,
        Some(ModerationSpec::Adaptive) => ModerationConfig::Adaptive,
        Some(ModerationSpec::Fixed { usecs, frames }) => {
            let usecs = time("moderation.usecs", usecs, d::MODERATION.value.usecs)?;
            let frames = frames.unwrap_or(d::MODERATION.value.frames);
            if frames == 0 {
                return e(
                    "moderation.frames",
                    "expected at least 1 completion per interrupt, found 0".into(),
                );
            }
            ModerationConfig::Fixed(Moderation { usecs, frames })
        }
    };
    let _ = DIM_LEVELS;
    let notify = match spec.completion.unwrap_or(CompletionMode::Poll) {
        CompletionMode::Poll => {
            if strict && spec.moderation.is_some() {
                return e(
                    "moderation",
                    "interrupt moderation needs `completion: interrupt` (completions are polled)"
                        .into(),
                );
            }
            Notify::Poll
        }
        CompletionMode::Interrupt => Notify::Interrupt(moderation),
    };
    let n = &spec.nic;
    let wqe_bytes = n.wqe_bytes.map_or(d::WQE_BYTES.value, |b| b.0 .0);
    let cqe_bytes = n.cqe_bytes.map_or(d::CQE_BYTES.value, |b| b.0 .0);
    for (path, b) in [("nic.wqe_bytes", wqe_bytes), ("nic.cqe_bytes", cqe_bytes)] {
        if b > 4096 {
            return e(path, format!("expected at most 4 KiB, found {b} B"));
        }
    }
    let inline_max = spec.inline_max.map_or(0, |b| b.0 .0);
    if inline_max > 4096 {
        return e(
            "inline_max",
            format!("expected at most 4 KiB of inline data, found {inline_max} B"),
        );
    }
    Ok(HostConfig {
        posting: spec.posting.unwrap_or(PostingMode::Cpu),
        memory_source: spec.memory.map_or(MemoryKind::Host, |m| m.source),
        memory_destination: spec.memory.map_or(MemoryKind::Host, |m| m.destination),
        notify,
        blueflame: spec.blueflame.unwrap_or(false),
        inline_max,
        doorbell_batch,
        cores,
        gpus_per_host: gpus,
        nics_per_host: nics,
        wiring: spec.wiring.unwrap_or(Wiring::Packed),
        servers: topology_hosts / nics,
        posting_threads,
        gpu_posting_threads,
        pcie_bandwidth: rate("pcie.bandwidth", p.bandwidth, d::PCIE_BANDWIDTH.value)?,
        pcie_round_trip: time("pcie.round_trip", p.round_trip, d::PCIE_ROUND_TRIP.value)?,
        root_complexes: rcs,
        gpu_root_complex,
        nic_root_complex,
        gpu_switch,
        nic_switch,
        root_complex_p2p_bandwidth: rate(
            "pcie.root_complex_p2p_bandwidth",
            p.root_complex_p2p_bandwidth,
            d::PCIE_BANDWIDTH.value,
        )?,
        nic_gpu,
        cross_socket: p.cross_socket.unwrap_or(CrossSocket::Refuse),
        interconnect_bandwidth: rate(
            "pcie.interconnect_bandwidth",
            p.interconnect_bandwidth,
            d::INTERCONNECT_BANDWIDTH.value,
        )?,
        interconnect_latency: time(
            "pcie.interconnect_latency",
            p.interconnect_latency,
            d::INTERCONNECT_LATENCY.value,
        )?,
        max_outstanding_reads: pos(
            "nic.max_outstanding_reads",
            n.max_outstanding_reads,
            d::MAX_OUTSTANDING_READS.value,
            1 << 16,
        )?,
        wqe_processing: time(
            "nic.wqe_processing",
            n.wqe_processing,
            d::WQE_PROCESSING.value,
        )?,
        wqe_bytes,
        cqe_bytes,
        costs,
    })
}

//! The `host:` section's parameter types: posting mode, memory, completions, interrupt
//! moderation, PCIe layout, NIC limits and per-operation costs, as a scenario writes them
//! (every field optional). [`super::config::resolve`] turns them into a [`super::config::HostConfig`]
//! with the defaults and their sources filled in.

use crate::spec::{null_default, Duration, NonZeroSize, Rate, Size};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Who posts work requests and reaps completions (`host.posting`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PostingMode {
    /// A CPU core posts; GPU data is staged through host memory by copies.
    Cpu,
    /// A CPU core posts; the NIC reads and writes GPU memory (GPUDirect RDMA).
    CpuGdr,
    /// The GPU hands each transfer to a CPU proxy thread that posts as `cpu_gdr`.
    CpuProxy,
    /// A GPU thread posts and polls (IBGDA).
    Gpu,
}

impl PostingMode {
    pub fn name(self) -> &'static str {
        match self {
            PostingMode::Cpu => "cpu",
            PostingMode::CpuGdr => "cpu_gdr",
            PostingMode::CpuProxy => "cpu_proxy",
            PostingMode::Gpu => "gpu",
        }
    }
}

/// `host.wiring`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wiring {
    Packed,
    Rail,
}

/// Where a message's source and destination buffers live (`host.memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    Gpu,
    Host,
}

/// `host.memory`: `gpu`, `host`, or `{ source: gpu, destination: host }`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemorySpec {
    pub source: MemoryKind,
    pub destination: MemoryKind,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryMapSpec {
    source: MemoryKind,
    destination: MemoryKind,
}

impl<'de> Deserialize<'de> for MemorySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str = "`gpu`, `host` or `{ source: gpu|host, destination: gpu|host }`";
        impl<'de> Visitor<'de> for V {
            type Value = MemorySpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<MemorySpec, E> {
                let k = match s {
                    "gpu" => MemoryKind::Gpu,
                    "host" => MemoryKind::Host,
                    _ => {
                        return Err(E::custom(format!(
                            "unknown memory `{s}`, expected {EXPECTED}"
                        )))
                    }
                };
                Ok(MemorySpec {
                    source: k,
                    destination: k,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<MemorySpec, A::Error> {
                let f = MemoryMapSpec::deserialize(de::value::MapAccessDeserializer::new(m))?;
                Ok(MemorySpec {
                    source: f.source,
                    destination: f.destination,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// How the CPU learns of completions in the `cpu` and `cpu_gdr` modes (`host.completion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionMode {
    /// A core spins on the completion queue.
    Poll,
    /// The CQ is armed; the NIC raises (moderated) interrupts.
    Interrupt,
}

/// What happens when GPU memory must be reached peer-to-peer across root complexes
/// (`host.pcie.cross_socket`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrossSocket {
    /// The scenario is rejected before the run.
    Refuse,
    /// P2P traffic crosses the CPU interconnect at its bandwidth and latency.
    Interconnect,
    /// The data path falls back to staging through host memory, as `cpu` does.
    Stage,
}

/// `host.moderation`: `off`, `adaptive`, or `{ usecs: 16us, frames: 32 }`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ModerationSpec {
    Off,
    Adaptive,
    Fixed {
        usecs: Option<Duration>,
        frames: Option<u32>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixedModerationSpec {
    #[serde(default)]
    usecs: Option<Duration>,
    #[serde(default)]
    frames: Option<u32>,
}

impl<'de> Deserialize<'de> for ModerationSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str = "`off`, `adaptive` or `{ usecs: DURATION, frames: N }`";
        impl<'de> Visitor<'de> for V {
            type Value = ModerationSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<ModerationSpec, E> {
                match s {
                    "off" => Ok(ModerationSpec::Off),
                    "adaptive" => Ok(ModerationSpec::Adaptive),
                    _ => Err(E::custom(format!(
                        "unknown moderation `{s}`, expected {EXPECTED}"
                    ))),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<ModerationSpec, A::Error> {
                let f = FixedModerationSpec::deserialize(de::value::MapAccessDeserializer::new(m))?;
                Ok(ModerationSpec::Fixed {
                    usecs: f.usecs,
                    frames: f.frames,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// `host:`: the servers around the NICs. Every field has a default (see `nic::config`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub posting: Option<PostingMode>,
    pub memory: Option<MemorySpec>,
    pub completion: Option<CompletionMode>,
    pub moderation: Option<ModerationSpec>,
    /// Push a single small WQE with its doorbell (no WQE fetch).
    pub blueflame: Option<bool>,
    /// Messages up to this size travel inside their WQE (no payload DMA read); default 0.
    pub inline_max: Option<Size>,
    /// WQEs per doorbell (a doorbell is rung earlier when nothing more is waiting).
    pub doorbell_batch: Option<u32>,
    pub cores: Option<u32>,
    pub gpus_per_host: Option<u32>,
    pub nics_per_host: Option<u32>,
    /// How a host's NICs are cabled to the leaves: `packed` (a host's NICs are
    /// consecutive ports: same leaf) or `rail` (NIC i of every host on rail i: NIC i's
    /// ports are consecutive).
    pub wiring: Option<Wiring>,
    /// CPU threads (one core each) posting for each NIC in the `cpu`/`cpu_gdr` modes.
    pub posting_threads: Option<u32>,
    /// GPU threads posting for each NIC in the `gpu` mode.
    pub gpu_posting_threads: Option<u32>,
    #[serde(default, deserialize_with = "null_default")]
    pub pcie: PcieSpec,
    #[serde(default, deserialize_with = "null_default")]
    pub nic: NicSpec,
    #[serde(default, deserialize_with = "null_default")]
    pub costs: HostCostsSpec,
}

/// `host.pcie:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieSpec {
    pub bandwidth: Option<Rate>,
    pub round_trip: Option<Duration>,
    pub root_complexes: Option<u32>,
    /// Root complex of each GPU; default: spread evenly.
    pub gpu_root_complex: Option<Vec<u32>>,
    /// Root complex of each NIC; default: spread evenly.
    pub nic_root_complex: Option<Vec<u32>>,
    /// The GPU whose memory each NIC's messages use; default: GPU `n x gpus / nics`.
    pub nic_gpu: Option<Vec<u32>>,
    /// PCIe switch of each GPU / NIC; default: one switch per root complex.
    pub gpu_switch: Option<Vec<u32>>,
    pub nic_switch: Option<Vec<u32>>,
    /// Peer-to-peer rate through a root complex (between its switches); default: the
    /// PCIe bandwidth.
    pub root_complex_p2p_bandwidth: Option<Rate>,
    pub cross_socket: Option<CrossSocket>,
    pub interconnect_bandwidth: Option<Rate>,
    /// Added to each one-way crossing of the CPU interconnect.
    pub interconnect_latency: Option<Duration>,
}

/// `host.nic:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    /// DMA reads (WQE fetches and payload reads) a NIC keeps in flight.
    pub max_outstanding_reads: Option<u32>,
    /// Time the NIC's send engine spends on each WQE.
    pub wqe_processing: Option<Duration>,
    pub wqe_bytes: Option<NonZeroSize>,
    pub cqe_bytes: Option<NonZeroSize>,
}

/// `host.costs:`: CPU and GPU time per operation.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCostsSpec {
    pub wqe_build: Option<Duration>,
    pub doorbell_mmio: Option<Duration>,
    pub cqe_poll: Option<Duration>,
    pub hard_irq: Option<Duration>,
    pub softirq: Option<Duration>,
    pub copy_launch: Option<Duration>,
    pub proxy_handoff: Option<Duration>,
    pub gpu_wqe_build: Option<Duration>,
    pub gpu_doorbell: Option<Duration>,
    pub gpu_cqe_poll: Option<Duration>,
}

/// Lays `over`'s given fields over `base` (a compare set's `host:` over the scenario's).
pub fn merge_host(base: &HostSpec, over: &HostSpec) -> HostSpec {
    macro_rules! pick {
        ($b:expr, $o:expr, $($f:ident),*) => {{
            let mut r = $b.clone();
            $( if $o.$f.is_some() { r.$f = $o.$f.clone(); } )*
            r
        }};
    }
    let mut r = pick!(
        base,
        over,
        posting,
        memory,
        completion,
        moderation,
        blueflame,
        inline_max,
        doorbell_batch,
        cores,
        gpus_per_host,
        nics_per_host,
        wiring,
        posting_threads,
        gpu_posting_threads
    );
    r.pcie = pick!(
        base.pcie,
        over.pcie,
        bandwidth,
        round_trip,
        root_complexes,
        gpu_root_complex,
        nic_root_complex,
        nic_gpu,
        gpu_switch,
        nic_switch,
        root_complex_p2p_bandwidth,
        cross_socket,
        interconnect_bandwidth,
        interconnect_latency
    );
    r.nic = pick!(
        base.nic,
        over.nic,
        max_outstanding_reads,
        wqe_processing,
        wqe_bytes,
        cqe_bytes
    );
    r.costs = pick!(
        base.costs,
        over.costs,
        wqe_build,
        doorbell_mmio,
        cqe_poll,
        hard_irq,
        softirq,
        copy_launch,
        proxy_handoff,
        gpu_wqe_build,
        gpu_doorbell,
        gpu_cqe_poll
    );
    r
}

//! The YAML scenario schema: every field, its unit and its default.
//!
//! Quantities are strings with units, parsed while the YAML is read (so a bad one is
//! reported with its line and column). Unknown fields are errors everywhere
//! (`deny_unknown_fields`). Cross-field checks (an MTU larger than the buffer, more incast
//! senders than hosts) happen afterwards in [`super::validate`].

//!
//! The parameter types the models own are declared beside them and re-exported here, so
//! the schema is whole in one namespace: the host section in [`crate::nic::spec`], the
//! collective operation, algorithm and placement in [`crate::collective::spec`], the
//! flow-size distribution in [`crate::workload`], unit quantities in [`crate::spec`].

pub use crate::collective::spec::{CollectiveAlgorithm, CollectiveOp, PlacementSpec, ProtocolSpec};
pub use crate::components::Forwarding;
pub use crate::nic::spec::{
    merge_host, CompletionMode, CrossSocket, HostCostsSpec, HostSpec, MemoryKind, MemorySpec,
    ModerationSpec, NicSpec, PcieSpec, PostingMode, Wiring,
};
use crate::packet::Encapsulation;
pub use crate::routing::{LoadSignal, Routing};
use crate::spec::null_default;
pub use crate::spec::{Duration, NonZeroSize, Rate, Size};
use crate::units::{Bytes, SimDuration};
pub use crate::workload::SizeDistSpec;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

pub mod routing;
pub mod training;
pub use routing::RoutingSpec;
pub use training::{TraceSpec, TrainingSpec};

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Free text naming the scenario; default: the file stem.
    #[serde(default)]
    pub name: Option<String>,
    /// Seed for every random stream in the run; default 1.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated time after which the run stops; default: run until all work completes.
    #[serde(default)]
    pub duration: Option<Duration>,
    /// Simulated time without progress (no payload delivered, no workload event) after
    /// which a run with only timers left is stopped as stuck; default: twice the longest
    /// a queue pair waits before it fails, at least 1 s.
    #[serde(default)]
    pub watchdog: Option<Duration>,
    pub topology: TopologySpec,
    #[serde(default, deserialize_with = "null_default")]
    pub switch: SwitchSpec,
    /// `ecmp` (default), `static`, `spray`, `adaptive` or `flowlet`, or
    /// `{ policy, flowlet_gap, hysteresis, band, load }`.
    #[serde(default, deserialize_with = "null_default")]
    pub routing: RoutingSpec,
    #[serde(default, deserialize_with = "null_default")]
    pub packet: PacketSpec,
    pub workload: Vec<WorkloadSpec>,
    /// How flows cross the fabric; default: RC with NCCL's attributes.
    #[serde(default, deserialize_with = "null_default")]
    pub transport: TransportSpec,
    /// Bit errors, random drops and link flaps; default none.
    #[serde(default, deserialize_with = "null_default")]
    pub faults: FaultsSpec,
    /// Named RC parameter sets to run the same traffic under, side by side.
    #[serde(default, deserialize_with = "null_default")]
    pub compare: Vec<CompareSpec>,
    /// Runs of every compare set, one seed per repeat shared by all sets; default 1.
    #[serde(default)]
    pub repeats: Option<u32>,
    /// ECN marking at switch egress queues; default: on with the `cc` preset's thresholds
    /// when `cc` is DCQCN, else off.
    #[serde(default)]
    pub ecn: Option<EcnSpec>,
    /// Congestion control at the NICs; default none.
    #[serde(default, deserialize_with = "null_default")]
    pub cc: CcSpec,
    /// Link-level flow control; default `lossy` (tail drop).
    #[serde(default, deserialize_with = "null_default")]
    pub flow_control: FlowControlSpec,
    /// Sample chosen ports and flows over time into `timeseries.csv`; default none.
    #[serde(default)]
    pub timeseries: Option<TimeseriesSpec>,
    /// The hosts and NICs: posting mode, PCIe, completions and interrupts; default none
    /// (hosts post instantly and are told of completions for free).
    #[serde(default)]
    pub host: Option<HostSpec>,
    /// Points to run with `doorbell sweep` (checked by `sweep`; `run` ignores it).
    #[serde(default)]
    pub sweep: Option<serde_yaml::Value>,
    /// Targets, costs and candidate fabrics for `doorbell plan` (checked by `plan`).
    #[serde(default)]
    pub plan: Option<serde_yaml::Value>,
}

/// `timeseries:`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeseriesSpec {
    /// Time between samples; default `10us`.
    pub interval: Option<Duration>,
    /// Ports by name as in ports.csv (queue depth, paused or not, bytes sent).
    #[serde(default, deserialize_with = "null_default")]
    pub ports: Vec<String>,
    /// Flows by id as in flows.csv (sending rate, bytes delivered).
    #[serde(default, deserialize_with = "null_default")]
    pub flows: Vec<u32>,
}

/// `flow_control:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowControlSpec {
    /// `lossy` (default), `pfc` or `ib_credit`.
    #[serde(default)]
    pub mode: FlowControlMode,
    /// PFC: an ingress queue sends PAUSE above this many bytes; default: the switch buffer
    /// less every ingress port's headroom, shared equally among the ingress ports.
    pub xoff: Option<Size>,
    /// PFC: RESUME below this many bytes; default `xoff` less two full packets.
    pub xon: Option<Size>,
    /// PFC: a dynamic Xoff, this fraction of the free shared buffer (instead of `xoff`).
    pub xoff_alpha: Option<f64>,
    /// PFC: time for a port to act on a PAUSE after it arrives; default `1us`.
    pub reaction_time: Option<Duration>,
    /// PFC: pause quanta in a PAUSE frame (512 bit times each); default 65535.
    pub quanta: Option<u32>,
    /// IB credits: receive buffer per link and virtual lane, advertised in 64-byte
    /// blocks; default: the switch buffer shared equally among its ingress ports.
    pub vl_buffer: Option<Size>,
    /// IB credits: delay before freed buffer is advertised back; default `100ns`.
    pub credit_update_delay: Option<Duration>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowControlMode {
    /// Tail drop when a packet does not fit.
    #[default]
    Lossy,
    /// IEEE 802.1Qbb priority flow control on the data class.
    Pfc,
    /// InfiniBand credit-based link flow control on the data lane.
    IbCredit,
}

/// RED marking thresholds.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedSpec {
    pub kmin: Option<Size>,
    pub kmax: Option<Size>,
    /// Marking probability at Kmax, in (0, 1].
    pub pmax: Option<f64>,
}

/// `ecn:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcnSpec {
    /// Mark at all; default true when the section is present.
    pub enabled: Option<bool>,
    pub kmin: Option<Size>,
    pub kmax: Option<Size>,
    pub pmax: Option<f64>,
    /// Per-tier thresholds (`leaf_to_spine`, ...), replacing the fabric-wide ones.
    #[serde(default, deserialize_with = "null_default")]
    pub tiers: std::collections::BTreeMap<String, RedSpec>,
}

/// `cc:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CcSpec {
    /// `none` (default) or `dcqcn`.
    #[serde(default)]
    pub algorithm: CcAlgorithm,
    /// `paper` (default), `nvidia` or `hpcc`.
    pub preset: Option<CcPreset>,
    pub g: Option<f64>,
    pub cnp_interval: Option<Duration>,
    pub alpha_period: Option<Duration>,
    pub rate_increase_period: Option<Duration>,
    /// Bytes per byte-counter event; `0B` disables the byte counter.
    pub byte_counter: Option<Size>,
    pub fast_recovery_steps: Option<u32>,
    pub rate_ai: Option<Rate>,
    pub rate_hai: Option<Rate>,
    pub rate_min: Option<Rate>,
    /// Alpha on the first CNP (NVIDIA `initial_alpha_value` / 1024).
    pub initial_alpha: Option<f64>,
    /// The rate set on the first CNP (`rate_to_set_on_first_cnp`); `0bps`: keep it.
    pub rate_on_first_cnp: Option<Rate>,
    /// At most one cut per period (`rate_reduce_monitor_period`); `0ns`: every CNP.
    pub rate_reduce_period: Option<Duration>,
    /// Every cut sets the target to the current rate (`clamp_tgt_rate`).
    pub clamp_target_rate: Option<bool>,
    /// Clamp only after a timer increase (`clamp_tgt_rate_after_time_inc`).
    pub clamp_target_after_timer: Option<bool>,
    /// A cut keeps at least this fraction of the rate (`rpg_min_dec_fac` / 100).
    pub min_decrease_factor: Option<f64>,
    /// HPCC: target utilisation eta.
    pub target_utilization: Option<f64>,
    /// HPCC: additive increases before a multiplicative step.
    pub max_stage: Option<u32>,
    /// HPCC: the base RTT T (default: the fabric's longest path's).
    pub base_rtt: Option<Duration>,
    /// Swift: the base target delay (default: the longest base RTT + 5 us).
    pub base_target: Option<Duration>,
    /// Swift: target added per switch on the path.
    pub hop_scale: Option<Duration>,
    /// Swift: the flow-scaling range.
    pub fs_range: Option<Duration>,
    /// Swift: the multiplicative-decrease gain.
    pub beta: Option<f64>,
    /// Swift: the largest decrease at once.
    pub max_mdf: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CcAlgorithm {
    #[default]
    None,
    Dcqcn,
    Hpcc,
    Swift,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CcPreset {
    #[default]
    Paper,
    Nvidia,
    Hpcc,
}

/// `transport:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransportSpec {
    /// `rc` (default) or `raw`.
    #[serde(default, deserialize_with = "null_default")]
    pub mode: TransportMode,
    /// RC queue-pair attributes (verbs names).
    #[serde(default, deserialize_with = "null_default")]
    pub rc: RcSpec,
}

/// Which transport carries flows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportMode {
    /// InfiniBand Reliable Connected queue pairs.
    #[default]
    Rc,
    /// No transport: packets at line rate, no ACKs, a lost packet is lost for good.
    Raw,
}

/// The RDMA operation every flow performs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationSpec {
    #[default]
    Write,
    Send,
    Read,
}

/// `transport.rc:` every field optional; defaults are NCCL's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RcSpec {
    /// `write` (default), `send` or `read`.
    pub operation: Option<OperationSpec>,
    /// Local ACK timeout exponent 0-31: 4.096 us x 2^timeout, 0 = never; default 20.
    pub timeout: Option<u8>,
    /// 0-7; default 7.
    pub retry_cnt: Option<u8>,
    /// 0-7, 7 = forever; default 7.
    pub rnr_retry: Option<u8>,
    /// 5-bit RNR timer code 0-31; default 12 (0.64 ms).
    pub min_rnr_timer: Option<u8>,
    /// Outstanding READs as requester, 1-64; default 1.
    pub max_rd_atomic: Option<u32>,
    /// Outstanding READs the responder accepts, 1-64; default 1.
    pub max_dest_rd_atomic: Option<u32>,
    /// Most unacknowledged packets in flight; default unlimited.
    pub window_packets: Option<u32>,
    /// Acknowledge every N packets (and every message end); default 1.
    pub ack_every: Option<u32>,
    /// Receive WQEs posted per queue pair; default 1 (each flow is one message).
    pub recv_queue_depth: Option<u32>,
    /// How long after a flow starts its receiver posts its receive WQEs; default `0ns`.
    pub recv_post_delay: Option<Duration>,
    /// Honour AETH end-to-end credits for SEND; default true.
    pub e2e_credits: Option<bool>,
    /// First PSN of every queue pair, 0 to 2^24-1; default 0.
    pub initial_psn: Option<u32>,
    /// `per_flow` (default) or `per_host_pair`.
    pub connections: Option<ConnectionsSpec>,
    /// Send queue depth, 1-65536; default 256.
    pub max_send_wr: Option<u32>,
    /// Place packets that overtook others instead of answering them with a sequence NAK
    /// (NICs built for adaptive routing); default false (plain RC).
    pub out_of_order: Option<bool>,
    /// Out-of-order RC: how long a hole may hold packets up before its PSNs are asked
    /// for again; default `100us` (IRN's RTO_low; NICs do not document theirs).
    pub reorder_timeout: Option<Duration>,
    /// Out-of-order RC: NAK a hole as soon as a later packet shows it (IRN-style);
    /// default false.
    pub selective_nak: Option<bool>,
}

/// Which flows share a queue pair.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionsSpec {
    /// One queue pair per flow (default).
    #[default]
    PerFlow,
    /// One queue pair per (source host, destination host); its flows are messages posted
    /// in order, at most `max_send_wr` at a time.
    PerHostPair,
}

/// One named parameter set under `compare:`: a name and `transport.rc` overrides.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareSpec {
    pub name: String,
    /// Replaces the scenario's `flow_control` for this set.
    #[serde(default)]
    pub flow_control: Option<FlowControlSpec>,
    /// Replaces the scenario's `routing` for this set.
    #[serde(default)]
    pub routing: Option<RoutingSpec>,
    /// Replaces the scenario's `cc` for this set.
    #[serde(default)]
    pub cc: Option<CcSpec>,
    /// Replaces the scenario's `ecn` for this set.
    #[serde(default)]
    pub ecn: Option<EcnSpec>,
    /// Changes the fabric's spine layer for this set (the hosts stay the same, so the
    /// traffic does).
    #[serde(default)]
    pub topology: Option<TopologyOverride>,
    /// Fields laid over the scenario's `host:` section for this set.
    #[serde(default)]
    pub host: Option<HostSpec>,
    /// Changes every collective workload item for this set.
    #[serde(default)]
    pub collective: Option<CollectiveOverride>,
    /// Changes every training workload item for this set.
    #[serde(default)]
    pub training: Option<training::TrainingOverride>,
    /// Replaces the scenario's `faults` for this set.
    #[serde(default)]
    pub faults: Option<FaultsSpec>,
    #[serde(flatten)]
    pub rc: RcSpec,
}

/// What a compare set may change in the topology: the spine layer and its planes.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyOverride {
    pub spines: Option<u32>,
    pub links_per_spine: Option<u32>,
    pub planes: Option<u32>,
    pub fabric_link: Option<LinkSpec>,
}

/// Fault rates for a set of links.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkFaultSpec {
    /// Bit error rate: a packet of b bits is corrupted with probability 1 - (1 - ber)^b.
    pub ber: Option<f64>,
    /// Probability that a packet is lost on the link, independent of its size.
    pub drop_probability: Option<f64>,
}

/// `faults:`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsSpec {
    /// Applies to every link.
    #[serde(default)]
    pub ber: Option<f64>,
    #[serde(default)]
    pub drop_probability: Option<f64>,
    /// Per-tier rates, replacing the fabric-wide ones on that tier.
    #[serde(default, deserialize_with = "null_default")]
    pub tiers: TierFaults,
    /// Per-link rates, replacing the tier's on that link (one direction).
    #[serde(default, deserialize_with = "null_default")]
    pub links: Vec<NamedLinkFaultSpec>,
    /// Scheduled link flaps.
    #[serde(default, deserialize_with = "null_default")]
    pub flaps: Vec<FlapSpec>,
    /// Links that run slower than the fabric's rate (a NIC or cable trained down).
    #[serde(default, deserialize_with = "null_default")]
    pub degraded: Vec<DegradedSpec>,
}

/// A link direction that runs at `rate` for the whole run.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DegradedSpec {
    /// Port name as in ports.csv, e.g. `host3->leaf0`.
    pub link: String,
    pub rate: Rate,
    /// The reverse direction too; default true.
    #[serde(default = "yes")]
    pub both_directions: bool,
}

/// Fault rates for one named link direction.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedLinkFaultSpec {
    /// Port name as in ports.csv, e.g. `leaf0->spine1#0`.
    pub link: String,
    pub ber: Option<f64>,
    pub drop_probability: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierFaults {
    pub host_to_leaf: Option<LinkFaultSpec>,
    pub leaf_to_spine: Option<LinkFaultSpec>,
    pub spine_to_leaf: Option<LinkFaultSpec>,
    pub leaf_to_host: Option<LinkFaultSpec>,
}

/// A link goes down at `at` for `for`: every packet arriving over it meanwhile is lost.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlapSpec {
    /// Port name as in ports.csv, e.g. `leaf0->spine1#0` or `host3->leaf0`.
    pub link: String,
    pub at: Duration,
    #[serde(rename = "for")]
    pub down_for: Duration,
    /// Take the reverse direction down too; default true.
    #[serde(default = "yes")]
    pub both_directions: bool,
}

fn yes() -> bool {
    true
}

fn default_seed() -> u64 {
    1
}

/// The two-tier Clos fabric.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// Leaf (top-of-rack) switches, at least 1.
    pub leaves: u32,
    /// Spine switches; may be 0 only with a single leaf (a one-hop fabric).
    pub spines: u32,
    /// Hosts under each leaf, at least 1 (2 in all): one count for every leaf, or a
    /// list with one count per leaf (uneven leaves).
    pub hosts_per_leaf: HostsPerLeaf,
    /// Host <-> leaf links.
    pub host_link: LinkSpec,
    /// Leaf <-> spine links; default: the same as `host_link`.
    #[serde(default)]
    pub fabric_link: Option<LinkSpec>,
    /// Parallel links between each leaf and each spine; default 1.
    #[serde(default = "one")]
    pub links_per_spine: u32,
    /// Disjoint planes (multi-plane fabrics: each NIC rail on its own leaves and spines);
    /// `leaves` and `spines` are split evenly among them. Default 1.
    #[serde(default = "one")]
    pub planes: u32,
}

fn one() -> u32 {
    1
}

/// `topology.hosts_per_leaf`: `8`, or `[8, 8, 4]` (one count per leaf).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostsPerLeaf {
    Every(u32),
    Each(Vec<u32>),
}

/// One leaf's host count in a `hosts_per_leaf` list.
struct HostCount(u32);

impl<'de> Deserialize<'de> for HostCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = HostCount;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number of hosts under this leaf")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<HostCount, E> {
                u32::try_from(n)
                    .map(HostCount)
                    .map_err(|_| E::custom(format!("{n} hosts under a leaf is too many")))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<HostCount, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::custom(format!(
                        "expected a whole number of hosts under this leaf, found {n}"
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for HostsPerLeaf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str = "a host count (`8`) or one count per leaf (`[8, 8, 4]`)";
        impl<'de> Visitor<'de> for V {
            type Value = HostsPerLeaf;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<HostsPerLeaf, E> {
                u32::try_from(v)
                    .map(HostsPerLeaf::Every)
                    .map_err(|_| E::custom(format!("{v} hosts per leaf is too many")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<HostsPerLeaf, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("expected {EXPECTED}, found {v}"))),
                }
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<HostsPerLeaf, A::Error> {
                let mut v = Vec::new();
                while let Some(HostCount(n)) = a.next_element::<HostCount>()? {
                    v.push(n);
                }
                Ok(HostsPerLeaf::Each(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// One link: a rate and a one-way propagation latency.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Line rate, e.g. `200Gbps`. Required.
    pub rate: Rate,
    /// One-way propagation delay (cable plus PHY/FEC); default `100ns`.
    #[serde(default = "default_link_latency")]
    pub latency: Duration,
}

fn default_link_latency() -> Duration {
    Duration(SimDuration::from_ns(100))
}

/// Switches (leaves and spines alike).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Port-to-port latency; default `300ns` (design reference, "Switches and links").
    #[serde(default = "default_switch_latency")]
    pub latency: Duration,
    /// Packet buffer shared by all ports of a switch; default `32MiB`.
    #[serde(default = "default_buffer")]
    pub buffer: NonZeroSize,
    /// Dynamic threshold: a queue may use at most alpha x the free buffer. Default 0.125
    /// (HPCC's simulator) when `port_limit` is not given.
    #[serde(default)]
    pub alpha: Option<f64>,
    /// Static per-port limit instead of the dynamic threshold.
    #[serde(default)]
    pub port_limit: Option<NonZeroSize>,
    /// `store_and_forward` (default) or `cut_through`.
    #[serde(default)]
    pub forwarding: Forwarding,
}

fn default_switch_latency() -> Duration {
    Duration(SimDuration::from_ns(300))
}
fn default_buffer() -> NonZeroSize {
    NonZeroSize(Bytes(32 << 20))
}

impl Default for SwitchSpec {
    fn default() -> Self {
        SwitchSpec {
            latency: default_switch_latency(),
            buffer: default_buffer(),
            alpha: None,
            port_limit: None,
            forwarding: Forwarding::default(),
        }
    }
}

/// Packet format.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketSpec {
    /// Path MTU: the most payload bytes per packet; default `4096B`.
    #[serde(default = "default_mtu")]
    pub mtu: NonZeroSize,
    /// `ib` (default), `ib_grh` or `rocev2`.
    #[serde(default)]
    pub encapsulation: Encapsulation,
}

fn default_mtu() -> NonZeroSize {
    NonZeroSize(Bytes(4096))
}

impl Default for PacketSpec {
    fn default() -> Self {
        PacketSpec {
            mtu: default_mtu(),
            encapsulation: Encapsulation::default(),
        }
    }
}

/// One item of the `workload:` list, written as a one-key map: `- permutation: { ... }`.
#[derive(Debug, Clone)]
pub enum WorkloadSpec {
    /// An explicit list of flows.
    Flows(Vec<FlowSpec>),
    /// Every host sends `size` to a distinct other host (a random derangement).
    Permutation(PermutationSpec),
    /// `senders` hosts each send `size` to `receiver`.
    Incast(IncastSpec),
    /// Every host sends `size` to every other host.
    AllToAll(AllToAllSpec),
    /// Open-loop Poisson arrivals at `load` x host link rate.
    Poisson(PoissonSpec),
    /// `count` messages from `src` to `dst`, one every `interval` (a message-rate test).
    Stream(StreamSpec),
    /// Messages bounced between two hosts, each sent when the previous one was received.
    PingPong(PingPongSpec),
    /// An NCCL-style collective over GPU ranks, optionally swept over sizes like
    /// nccl-tests.
    Collective(CollectiveSpec),
    /// Training steps of a model over data, tensor, pipeline and expert parallelism.
    Training(Box<TrainingSpec>),
    /// A training trace replayed: doorbell's JSON, or a SimAI workload file.
    Trace(TraceSpec),
}

const WORKLOAD_KINDS: &[&str] = &[
    "flows",
    "permutation",
    "incast",
    "all_to_all",
    "poisson",
    "stream",
    "ping_pong",
    "collective",
    "training",
    "trace",
];

impl<'de> Deserialize<'de> for WorkloadSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WorkloadSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(
                    f,
                    "a one-key map naming the workload kind ({})",
                    WORKLOAD_KINDS.join(", ")
                )
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<WorkloadSpec, A::Error> {
                let key: String = m
                    .next_key()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let v = match key.as_str() {
                    "flows" => WorkloadSpec::Flows(m.next_value()?),
                    "permutation" => WorkloadSpec::Permutation(m.next_value()?),
                    "incast" => WorkloadSpec::Incast(m.next_value()?),
                    "all_to_all" => WorkloadSpec::AllToAll(m.next_value()?),
                    "poisson" => WorkloadSpec::Poisson(m.next_value()?),
                    "stream" => WorkloadSpec::Stream(m.next_value()?),
                    "ping_pong" => WorkloadSpec::PingPong(m.next_value()?),
                    "collective" => WorkloadSpec::Collective(m.next_value()?),
                    "training" => WorkloadSpec::Training(m.next_value()?),
                    "trace" => WorkloadSpec::Trace(m.next_value()?),
                    other => return Err(de::Error::unknown_variant(other, WORKLOAD_KINDS)),
                };
                if let Some(extra) = m.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "one workload kind per list item, found a second key `{extra}` (start a new `- ` item)"
                    )));
                }
                Ok(v)
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size: NonZeroSize,
    /// Default `0us`.
    #[serde(default)]
    pub start: Option<Duration>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermutationSpec {
    pub size: NonZeroSize,
    #[serde(default)]
    pub start: Option<Duration>,
    /// Posting mode for this item's messages; default `host.posting`.
    #[serde(default)]
    pub posting: Option<PostingMode>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncastSpec {
    /// Number of senders, chosen at random (seeded) among the other hosts.
    pub senders: u32,
    pub receiver: u32,
    pub size: NonZeroSize,
    #[serde(default)]
    pub start: Option<Duration>,
    /// Posting mode for this item's messages; default `host.posting`.
    #[serde(default)]
    pub posting: Option<PostingMode>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllToAllSpec {
    pub size: NonZeroSize,
    #[serde(default)]
    pub start: Option<Duration>,
    /// Posting mode for this item's messages; default `host.posting`.
    #[serde(default)]
    pub posting: Option<PostingMode>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonSpec {
    /// Offered payload load per sending host, as a fraction of its host link rate, in
    /// (0, 1].
    pub load: f64,
    /// Flow-size distribution.
    pub sizes: SizeDistSpec,
    /// First arrival no earlier than this; default `0us`.
    #[serde(default)]
    pub start: Option<Duration>,
    /// No arrival at or after this time; default: the scenario `duration`.
    #[serde(default)]
    pub until: Option<Duration>,
    /// Hosts that send; default all.
    #[serde(default)]
    pub src_hosts: Option<Vec<u32>>,
    /// Hosts that receive (each flow picks one at random, never its sender); default all.
    #[serde(default)]
    pub dst_hosts: Option<Vec<u32>>,
    /// Posting mode for this item's messages; default `host.posting`.
    #[serde(default)]
    pub posting: Option<PostingMode>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    pub src: u32,
    pub dst: u32,
    pub size: NonZeroSize,
    /// Number of messages.
    pub count: u32,
    /// Time between posts; default `0us` (all posted at `start`: the pipeline's own pace).
    #[serde(default)]
    pub interval: Option<Duration>,
    #[serde(default)]
    pub start: Option<Duration>,
    #[serde(default)]
    pub posting: Option<PostingMode>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PingPongSpec {
    /// The two hosts: the first sends the first message.
    pub hosts: [u32; 2],
    pub size: NonZeroSize,
    /// Round trips (each is two messages).
    pub iterations: u32,
    #[serde(default)]
    pub start: Option<Duration>,
    #[serde(default)]
    pub posting: Option<PostingMode>,
}

/// `intra_host:`: the GPU-to-GPU fabric inside a host (NVLink-like), per GPU and
/// direction.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntraHostSpec {
    #[serde(default)]
    pub rate: Option<Rate>,
    #[serde(default)]
    pub latency: Option<Duration>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveSpec {
    pub op: CollectiveOp,
    /// `auto` (NCCL's tuner chooses ring or tree per size, the default; NVLSTree too with
    /// `nvls`), `ring`, `tree`, `hierarchical`, `in_network` or `nvls_tree`.
    #[serde(default)]
    pub algorithm: Option<CollectiveAlgorithm>,
    /// NCCL's protocol: `simple`, `ll`, `ll128` or `auto` (NCCL's tuner, per size, the
    /// default).
    #[serde(default)]
    pub protocol: Option<ProtocolSpec>,
    /// The CPU time to enqueue one operation (NCCL's enqueue and kernel launch); default
    /// 35us (nccl-tests on H100 servers, NCCL 2.26, no CUDA graphs).
    #[serde(default)]
    pub launch_overhead: Option<Duration>,
    /// How fast one channel moves bytes over NVLink (one thread block of NCCL's kernel);
    /// default NCCL's per-channel caps for Hopper: 38.7GB/s for Simple, 36.7GB/s for
    /// LL and LL128 (line bytes).
    #[serde(default)]
    pub channel_copy_rate: Option<Rate>,
    /// One size (bytes of the buffer, as nccl-tests' `size` column), or the sweep below.
    #[serde(default)]
    pub size: Option<NonZeroSize>,
    /// nccl-tests `-b`, `-e`, `-f`.
    #[serde(default)]
    pub minbytes: Option<NonZeroSize>,
    #[serde(default)]
    pub maxbytes: Option<NonZeroSize>,
    #[serde(default)]
    pub stepfactor: Option<u32>,
    /// Timed iterations per size (nccl-tests `-n`, default 20) and untimed ones before
    /// them (`-w`, default 5).
    #[serde(default)]
    pub iters: Option<u32>,
    #[serde(default)]
    pub warmup_iters: Option<u32>,
    /// Number of ranks; default every GPU.
    #[serde(default)]
    pub ranks: Option<u32>,
    #[serde(default)]
    pub placement: Option<PlacementSpec>,
    /// Parallel rings or trees, each with its own queue pairs; default two per NIC of a
    /// server (at least 2).
    #[serde(default)]
    pub channels: Option<u32>,
    /// Bytes a step moves at most, in one transfer; default the protocol's buffer step
    /// (NCCL's buffer over `NCCL_STEPS`: Simple 512KiB, LL 32KiB, LL128 576000B;
    /// in_network 64KiB), except that a ring allreduce, reduce-scatter or allgather with
    /// Simple moves 2MiB chunks as two slices, as NCCL does.
    #[serde(default)]
    pub chunk: Option<NonZeroSize>,
    /// Root rank of a broadcast; default 0.
    #[serde(default)]
    pub root: Option<u32>,
    #[serde(default)]
    pub start: Option<Duration>,
    #[serde(default)]
    pub intra_host: Option<IntraHostSpec>,
    /// Rate at which a GPU reduces received data into its own; default 1TB/s.
    #[serde(default)]
    pub reduce_rate: Option<Rate>,
    /// Send across hosts through the NIC on the receiving GPU's rail, relaying over the
    /// intra-host fabric (NCCL's PXN, on by default since NCCL 2.12); default true.
    #[serde(default)]
    pub pxn: Option<bool>,
    /// `in_network`: the switches' aggregation engine, `{ rate, latency }`; default
    /// 400 Gb/s after 1 us.
    #[serde(default)]
    pub switch_aggregation: Option<IntraHostSpec>,
    /// Queue pairs per connection, each its own 5-tuple (`NCCL_IB_QPS_PER_CONNECTION`);
    /// default 1.
    #[serde(default)]
    pub qps_per_connection: Option<u32>,
    /// Split every message across the connection's queue pairs instead of taking them in
    /// turn (`NCCL_IB_SPLIT_DATA_ON_QPS`); default false (NCCL's since 2.20).
    #[serde(default)]
    pub split_data_on_qps: Option<bool>,
    /// Messages below this are not routed per packet (`NCCL_IB_AR_THRESHOLD`); default
    /// 8KiB.
    #[serde(default)]
    pub ar_threshold: Option<Size>,
    /// NVLink SHARP for NCCL to use (multicast-capable NVSwitches, `NCCL_NVLS_ENABLE`):
    /// `auto` weighs NVLSTree too; default false.
    #[serde(default)]
    pub nvls: Option<bool>,
    /// NVLSTree: how fast one channel's warps copy between the user's buffers and the
    /// NVLS buffers (each way); default 120Gbps (15 GB/s, calibrated on 2 x 8 H100).
    #[serde(default)]
    pub nvls_copy_rate: Option<Rate>,
}

/// What a compare set may change in the scenario's collectives.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveOverride {
    pub algorithm: Option<CollectiveAlgorithm>,
    pub protocol: Option<ProtocolSpec>,
    pub placement: Option<PlacementSpec>,
    pub channels: Option<u32>,
    pub chunk: Option<NonZeroSize>,
    pub pxn: Option<bool>,
    pub qps_per_connection: Option<u32>,
    pub split_data_on_qps: Option<bool>,
    pub start: Option<Duration>,
}

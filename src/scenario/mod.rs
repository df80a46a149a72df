//! Scenarios: YAML in, a validated [`Scenario`] out, or a [`ScenarioError`] naming the
//! file, line, column and field path and saying what was expected.
//!
//! Parsing happens in one pass that never panics: serde reads the YAML into the schema
//! ([`schema`]), converting unit strings as it goes; then [`validate`] checks what one
//! field cannot know alone (ranges, host ids against the fabric size, an MTU against the
//! buffer) and resolves defaults. `--set a.b.c=value` overrides are applied to the YAML
//! tree before the second pass.

pub mod locate;
pub mod schema;

use crate::cc::dcqcn::{DcqcnParams, Preset};
pub use crate::components::ingress::pfc_headroom;
pub use crate::components::{BufferLimit, FlowControl, LinkFaults, Red, SwitchConfig};
use crate::nic::config::HostConfig;
use crate::packet::Encapsulation;
use crate::topology::Tier;
use crate::topology::{LinkParams, Topology};
use crate::transport::rc::{Op, RcParams, PSN_MASK};
use crate::units::SimDuration;
use crate::workload::{SizeDist, Workload};
use schema::PostingMode;
use schema::{
    FaultsSpec, LinkFaultSpec, OperationSpec, RcSpec, Routing, ScenarioFile, TransportMode,
    WorkloadSpec,
};
use std::fmt;
use std::path::Path;

/// A bad scenario: where, which field, and what was expected. Exit code 2.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioError {
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// Dotted field path, e.g. `workload[1].incast.senders` (empty when unknown).
    pub path: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        write!(f, ": ")?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ScenarioError {}

impl ScenarioError {
    /// An error in `file` at field `path`, with no line and column.
    pub fn at(file: &str, path: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: file.to_string(),
            line: None,
            column: None,
            path: path.to_string(),
            message: message.into(),
        }
    }
}

/// RC transport configuration, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct RcConfig {
    pub params: RcParams,
    pub connections: Connections,
    /// Send queue depth: work requests a queue pair holds at once.
    pub max_send_wr: u32,
    pub operation: Op,
    pub recv_queue_depth: u32,
    pub recv_post_delay: SimDuration,
}

/// Which flows share a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connections {
    /// Every flow has its own queue pair.
    PerFlow,
    /// Flows from one host to another share one queue pair, in order.
    PerHostPair,
}

/// The transport every flow uses.
#[derive(Clone, Debug, PartialEq)]
pub enum Transport {
    Rc(RcConfig),
    Raw,
}

/// A link direction that is down over [from, until).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flap {
    pub port: u32,
    pub from: SimDuration,
    pub until: SimDuration,
}

/// Faults, resolved per tier and per port.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// Indexed like `Tier::ALL`.
    pub tiers: [LinkFaults; 4],
    /// Per-port overrides: (port, rates).
    pub links: Vec<(u32, LinkFaults)>,
    pub flaps: Vec<Flap>,
}

impl Faults {
    pub fn for_tier(&self, t: Tier) -> LinkFaults {
        self.tiers[Tier::ALL.iter().position(|x| *x == t).unwrap_or(0)]
    }
    /// The rates on one port: its own if given, else its tier's.
    pub fn for_port(&self, port: u32, t: Tier) -> LinkFaults {
        self.links
            .iter()
            .rev()
            .find(|(p, _)| *p == port)
            .map_or_else(|| self.for_tier(t), |&(_, f)| f)
    }
    pub fn any(&self) -> bool {
        !self.flaps.is_empty()
            || self.tiers.iter().any(|t| t.any())
            || self.links.iter().any(|(_, f)| f.any())
    }
}

/// A validated scenario with every default filled in.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    pub duration: Option<SimDuration>,
    pub topology: Topology,
    pub switch: SwitchConfig,
    pub routing: Routing,
    /// Path MTU in payload bytes.
    pub mtu: u64,
    pub encapsulation: Encapsulation,
    pub workload: Vec<Workload>,
    pub transport: Transport,
    pub faults: Faults,
    /// Named parameter sets to compare (empty: run once).
    pub compare: Vec<CompareSet>,
    /// RED thresholds per tier (indexed like `Tier::ALL`); `None`: no marking there.
    pub ecn: [Option<Red>; 4],
    pub cc: Option<DcqcnParams>,
    pub flow_control: FlowControl,
    pub timeseries: Option<Timeseries>,
    /// The host model (`host:`); `None`: hosts post instantly and learn of completions
    /// for free.
    pub host: Option<HostConfig>,
    /// Posting mode per workload item, when it overrides `host.posting`.
    pub posting: Vec<Option<PostingMode>>,
}

/// What to sample over time.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeseries {
    pub interval: SimDuration,
    pub ports: Vec<u32>,
    pub flows: Vec<u32>,
}

/// Most rows `timeseries.csv` may get.
pub const MAX_TIMESERIES_ROWS: f64 = 5_000_000.0;
/// One named set under `compare:`: RC attributes, and optionally its own flow control,
/// congestion control and ECN marking.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareSet {
    pub name: String,
    pub topology: Topology,
    pub rc: RcConfig,
    pub flow_control: FlowControl,
    pub cc: Option<DcqcnParams>,
    pub ecn: [Option<Red>; 4],
    pub host: Option<HostConfig>,
    /// The workload with this set's collective overrides, if it has any.
    pub workload: Option<Vec<Workload>>,
}

impl Scenario {
    /// Bytes on the wire of a full-MTU packet.
    pub fn mtu_wire_bytes(&self) -> u64 {
        self.mtu + self.encapsulation.overhead_bytes()
    }
}

/// Options from the command line that change a scenario.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub seed: Option<u64>,
    /// `dotted.path=value` pairs; the value is read as YAML.
    pub set: Vec<String>,
}

/// Reads, parses and validates a scenario file.
pub fn load(path: &Path, overrides: &Overrides) -> Result<Scenario, ScenarioError> {
    let (text, file, stem) = read_file(path)?;
    parse_str(&text, &file, &stem, overrides)
}

/// A scenario file's text, its name for messages, and its stem.
pub fn read_file(path: &Path) -> Result<(String, String, String), ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScenarioError::at(&file, "", format!("cannot read the scenario: {e}")))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into());
    Ok((text, file, stem))
}

/// A YAML value as `--set` takes it: a scalar as written, anything else in flow style.
pub fn set_value(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Number(n) => n.to_string(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

fn yaml_error(file: &str, e: &serde_yaml::Error, located: bool) -> ScenarioError {
    let mut message = e.to_string();
    if let Some(i) = message.rfind(" at line ") {
        message.truncate(i);
    }
    let (line, column) = match (located, e.location()) {
        (true, Some(l)) => (Some(l.line()), Some(l.column())),
        _ => (None, None),
    };
    ScenarioError {
        file: file.to_string(),
        line,
        column,
        path: String::new(),
        message,
    }
}

/// Parses and validates scenario text. `file` names it in errors; `stem` is the default
/// name.
pub fn parse_str(
    text: &str,
    file: &str,
    stem: &str,
    overrides: &Overrides,
) -> Result<Scenario, ScenarioError> {
    // A byte-order mark is not YAML content (editors on Windows add one).
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let located = |e: serde_yaml::Error| yaml_error(file, &e, true);
    let parsed: ScenarioFile = if overrides.set.is_empty() {
        serde_yaml::from_str(text).map_err(located)?
    } else {
        let mut tree: serde_yaml::Value = serde_yaml::from_str(text).map_err(located)?;
        for s in &overrides.set {
            apply_set(&mut tree, s).map_err(|message| ScenarioError {
                file: "--set".into(),
                line: None,
                column: None,
                path: s.split('=').next().unwrap_or("").to_string(),
                message,
            })?;
        }
        // Re-read as text so that serde_yaml tracks the field path of any error.
        let merged = serde_yaml::to_string(&tree).map_err(|e| yaml_error(file, &e, false))?;
        serde_yaml::from_str(&merged).map_err(|e| {
            let err = yaml_error(file, &e, false);
            // The same error in the file itself has a line and column worth giving;
            // otherwise it came from an override.
            match serde_yaml::from_str::<ScenarioFile>(text) {
                Err(orig) if yaml_error(file, &orig, false).message == err.message => located(orig),
                _ => ScenarioError {
                    message: format!("{} (after --set overrides)", err.message),
                    ..err
                },
            }
        })?
    };
    let base_dir = Path::new(file).parent().unwrap_or(Path::new("."));
    let mut sc = validate(parsed, stem, base_dir).map_err(|(path, message)| {
        let loc = locate::locate(text, &path);
        ScenarioError {
            file: file.to_string(),
            line: loc.map(|l| l.0),
            column: loc.map(|l| l.1),
            path,
            message,
        }
    })?;
    if let Some(seed) = overrides.seed {
        sc.seed = seed;
    }
    Ok(sc)
}

/// Sets `a.b[2].c=value` (or `a.b.2.c=value`) in a YAML tree. The value is parsed as YAML,
/// so numbers stay numbers and `{ fixed: 4KB }` is a map.
pub fn apply_set(tree: &mut serde_yaml::Value, assignment: &str) -> Result<(), String> {
    use locate::Seg;
    let (path, value) = assignment
        .split_once('=')
        .ok_or_else(|| format!("expected `dotted.path=value`, found `{assignment}`"))?;
    let value: serde_yaml::Value = serde_yaml::from_str(value)
        .map_err(|e| format!("cannot read the value `{value}` as YAML: {e}"))?;
    let segs = locate::parse_path(path.trim())?;
    if segs.is_empty() {
        return Err("empty field path".into());
    }
    let mut node = tree;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        node = match seg {
            Seg::Key(k) => {
                let map = node
                    .as_mapping_mut()
                    .ok_or_else(|| format!("`{k}` is not inside a mapping"))?;
                let key = serde_yaml::Value::String(k.clone());
                if last {
                    map.insert(key, value);
                    return Ok(());
                }
                map.entry(key)
                    .or_insert_with(|| serde_yaml::Value::Mapping(Default::default()))
            }
            Seg::Index(n) => {
                let seq = node
                    .as_sequence_mut()
                    .ok_or_else(|| format!("index {n} is not inside a list"))?;
                let len = seq.len();
                let slot = seq
                    .get_mut(*n)
                    .ok_or_else(|| format!("index {n} is past the end of a list of {len}"))?;
                if last {
                    *slot = value;
                    return Ok(());
                }
                slot
            }
        };
    }
    Ok(())
}

type VResult<T> = Result<T, (String, String)>;

/// Largest fabric, in ports (unidirectional links), a scenario may describe.
pub const MAX_PORTS: u64 = 1 << 22;
/// Most flows a workload may expand into (each costs about 100 bytes of state).
pub const MAX_FLOWS: f64 = 20_000_000.0;
/// Latest time a scenario may name: one simulated day, far from u64 overflow.
pub const MAX_TIME: SimDuration = SimDuration(86_400 * 1_000_000_000_000);
/// Most packets one flow may need (packet indices are 32-bit).
pub const MAX_PACKETS_PER_FLOW: u64 = 1 << 31;

fn check_time(path: impl Into<String>, d: SimDuration) -> VResult<()> {
    if d > MAX_TIME {
        return err(
            path,
            format!("{d} is past the longest supported run (one simulated day)"),
        );
    }
    Ok(())
}

pub use crate::spec::MAX_LATENCY;

fn check_latency(path: &str, d: SimDuration) -> VResult<()> {
    if d > MAX_LATENCY {
        return err(path, format!("{d} is longer than the 1s supported"));
    }
    Ok(())
}

fn check_size(path: impl Into<String>, size: u64, mtu: u64) -> VResult<()> {
    if size.div_ceil(mtu) > MAX_PACKETS_PER_FLOW {
        return err(
            path,
            format!("{size} B is more than {MAX_PACKETS_PER_FLOW} packets of {mtu} B"),
        );
    }
    Ok(())
}

fn err<T>(path: impl Into<String>, msg: impl Into<String>) -> VResult<T> {
    Err((path.into(), msg.into()))
}

fn check_range<T: PartialOrd + std::fmt::Display + Copy>(
    path: String,
    v: Option<T>,
    default: T,
    lo: T,
    hi: T,
) -> VResult<T> {
    let v = v.unwrap_or(default);
    if v < lo || v > hi {
        return err(path, format!("expected {lo} to {hi}, found {v}"));
    }
    Ok(v)
}

/// Resolves `transport.rc` (with `over` taking precedence field by field) into an
/// [`RcConfig`]. `prefix` names the YAML path for errors.
pub fn resolve_rc(
    base: &RcSpec,
    over: Option<&RcSpec>,
    mtu: u64,
    prefix: &str,
) -> VResult<RcConfig> {
    macro_rules! pick {
        ($f:ident) => {
            over.and_then(|o| o.$f.clone()).or(base.$f.clone())
        };
    }
    let p = |f: &str| format!("{prefix}.{f}");
    let timeout = check_range(p("timeout"), pick!(timeout), 20, 0, 31)?;
    let retry_cnt = check_range(p("retry_cnt"), pick!(retry_cnt), 7, 0, 7)?;
    let rnr_retry = check_range(p("rnr_retry"), pick!(rnr_retry), 7, 0, 7)?;
    let min_rnr_timer = check_range(p("min_rnr_timer"), pick!(min_rnr_timer), 12, 0, 31)?;
    let max_rd_atomic = check_range(p("max_rd_atomic"), pick!(max_rd_atomic), 1, 1, 64)?;
    let max_dest = check_range(p("max_dest_rd_atomic"), pick!(max_dest_rd_atomic), 1, 1, 64)?;
    let window = pick!(window_packets);
    if window == Some(0) {
        return err(
            p("window_packets"),
            "expected at least 1 packet (omit it for no window)",
        );
    }
    let ack_every = check_range(p("ack_every"), pick!(ack_every), 1, 1, 1 << 20)?;
    let recv_queue_depth = check_range(
        p("recv_queue_depth"),
        pick!(recv_queue_depth),
        1,
        0,
        1 << 20,
    )?;
    let recv_post_delay = pick!(recv_post_delay).map(|d| d.0).unwrap_or_default();
    check_time(p("recv_post_delay"), recv_post_delay)?;
    let initial_psn = check_range(p("initial_psn"), pick!(initial_psn), 0, 0, PSN_MASK)?;
    let max_send_wr = check_range(p("max_send_wr"), pick!(max_send_wr), 256, 1, 1 << 16)?;
    let connections = match pick!(connections).unwrap_or_default() {
        schema::ConnectionsSpec::PerFlow => Connections::PerFlow,
        schema::ConnectionsSpec::PerHostPair => Connections::PerHostPair,
    };
    let operation = match pick!(operation).unwrap_or_default() {
        OperationSpec::Write => Op::Write,
        OperationSpec::Send => Op::Send,
        OperationSpec::Read => Op::Read,
    };
    if mtu > u32::MAX as u64 {
        return err("packet.mtu", "too large for RC");
    }
    Ok(RcConfig {
        params: RcParams {
            timeout,
            retry_cnt,
            rnr_retry,
            min_rnr_timer,
            // The responder accepts at most max_dest_rd_atomic; the requester keeps to
            // the smaller of the two, as ibv_modify_qp pairs them.
            max_rd_atomic: max_rd_atomic.min(max_dest),
            path_mtu: mtu as u32,
            window_packets: window,
            ack_every,
            e2e_credits: pick!(e2e_credits).unwrap_or(true),
            initial_psn,
        },
        connections,
        max_send_wr,
        operation,
        recv_queue_depth,
        recv_post_delay,
    })
}

/// The preset's switch thresholds (design reference table): paper 5 KB / 200 KB / 1%;
/// NVIDIA (Onyx) 150 KB / 1500 KB (Pmax not given: 1% assumed); HPCC 100 KB / 400 KB /
/// 20% at 25 Gb/s, scaled with the link rate.
fn preset_red(preset: schema::CcPreset, rate_bps: f64) -> Red {
    match preset {
        schema::CcPreset::Paper => Red {
            kmin: 5_000,
            kmax: 200_000,
            pmax: 0.01,
        },
        schema::CcPreset::Nvidia => Red {
            kmin: 150_000,
            kmax: 1_500_000,
            pmax: 0.01,
        },
        schema::CcPreset::Hpcc => {
            let scale = rate_bps / 25e9;
            Red {
                kmin: (100_000.0 * scale) as u64,
                kmax: (400_000.0 * scale) as u64,
                pmax: 0.2,
            }
        }
    }
}

type EcnTiers = [Option<Red>; 4];

/// Ingress ports of the busiest switch (a leaf: its hosts and its uplinks; a spine: one
/// link per leaf and parallel link).
fn max_ingress_ports(topo: &Topology) -> u64 {
    let leaf = topo.hosts_per_leaf as u64 + topo.uplinks_per_leaf() as u64;
    let spine = topo.leaves as u64 * topo.links_per_spine as u64;
    leaf.max(spine)
}

fn resolve_flow_control(
    spec: &schema::FlowControlSpec,
    topo: &Topology,
    buffer: u64,
    mtu_wire: u64,
) -> VResult<FlowControl> {
    let ingress = max_ingress_ports(topo).max(1);
    Ok(match spec.mode {
        schema::FlowControlMode::Lossy => FlowControl::Lossy,
        schema::FlowControlMode::Pfc => {
            let reaction = spec
                .reaction_time
                .map(|d| d.0)
                .unwrap_or(SimDuration::from_us(1));
            check_latency("flow_control.reaction_time", reaction)?;
            let quanta = spec.quanta.unwrap_or(65535);
            if quanta == 0 {
                return err("flow_control.quanta", "expected 1 to 65535 quanta");
            }
            if quanta > 65535 {
                return err(
                    "flow_control.quanta",
                    format!("expected 1 to 65535 quanta, found {quanta}"),
                );
            }
            // Headroom for the longest cable in the fabric (every ingress gets the same).
            let longest = if topo.fabric_link.latency > topo.host_link.latency {
                topo.fabric_link
            } else {
                topo.host_link
            };
            let headroom = pfc_headroom(&longest, reaction, mtu_wire).max(pfc_headroom(
                &topo.host_link,
                reaction,
                mtu_wire,
            ));
            let room = buffer.saturating_sub(headroom * ingress) / ingress;
            let xoff = match spec.xoff {
                Some(x) => x.0 .0,
                None => room,
            };
            if xoff < 2 * mtu_wire || xoff > room {
                return err(
                    "flow_control.xoff",
                    format!(
                        "xoff must leave each of {ingress} ingress ports {headroom} B of headroom in the {buffer} B buffer and hold two packets: at most {room} B and at least {} B, found {xoff} B",
                        2 * mtu_wire
                    ),
                );
            }
            let xon = spec.xon.map(|x| x.0 .0).unwrap_or(xoff - 2 * mtu_wire);
            if xon >= xoff {
                return err(
                    "flow_control.xon",
                    format!("expected xon below xoff ({xoff} B), found {xon} B"),
                );
            }
            FlowControl::Pfc {
                xoff,
                xon,
                reaction_time: reaction,
                quanta,
            }
        }
        schema::FlowControlMode::IbCredit => {
            let vl_buffer = spec.vl_buffer.map(|b| b.0 .0).unwrap_or(buffer / ingress);
            if vl_buffer < mtu_wire + 64 || vl_buffer * ingress > buffer {
                return err(
                    "flow_control.vl_buffer",
                    format!(
                        "each of {ingress} ingress ports needs room for a packet ({} B) and all must fit the {buffer} B buffer: at most {} B, found {vl_buffer} B",
                        mtu_wire + 64,
                        buffer / ingress
                    ),
                );
            }
            let update_delay = spec
                .credit_update_delay
                .map(|d| d.0)
                .unwrap_or(SimDuration::from_ns(100));
            check_latency("flow_control.credit_update_delay", update_delay)?;
            FlowControl::IbCredit {
                vl_buffer,
                update_delay,
            }
        }
    })
}

fn resolve_cc(
    spec: &schema::CcSpec,
    ecn: Option<&schema::EcnSpec>,
    topo: &Topology,
    transport: &Transport,
) -> VResult<(Option<DcqcnParams>, EcnTiers)> {
    let dcqcn = spec.algorithm == schema::CcAlgorithm::Dcqcn;
    if dcqcn && *transport == Transport::Raw {
        return err(
            "cc.algorithm",
            "DCQCN paces RC queue pairs: it needs `transport.mode: rc`",
        );
    }
    let host_rate = topo.host_link.rate.0 as f64;
    let cc = if dcqcn {
        let mut p = match spec.preset {
            schema::CcPreset::Paper => Preset::Paper,
            schema::CcPreset::Nvidia => Preset::Nvidia,
            schema::CcPreset::Hpcc => Preset::Hpcc,
        }
        .params(host_rate);
        if let Some(g) = spec.g {
            if !(g > 0.0 && g <= 1.0) {
                return err("cc.g", format!("expected a gain in (0, 1], found {g}"));
            }
            p.g = g;
        }
        if let Some(d) = spec.cnp_interval {
            p.cnp_interval = d.0;
        }
        for (name, v, slot) in [
            ("cc.alpha_period", spec.alpha_period, &mut p.alpha_period),
            (
                "cc.rate_increase_period",
                spec.rate_increase_period,
                &mut p.rate_increase_period,
            ),
        ] {
            if let Some(d) = v {
                if d.0 == SimDuration::ZERO {
                    return err(name, "expected a positive period");
                }
                check_time(name, d.0)?;
                *slot = d.0;
            }
        }
        if let Some(b) = spec.byte_counter {
            p.byte_counter = (b.0 .0 > 0).then_some(b.0 .0);
        }
        if let Some(f) = spec.fast_recovery_steps {
            if f == 0 || f > 1000 {
                return err(
                    "cc.fast_recovery_steps",
                    format!("expected 1 to 1000, found {f}"),
                );
            }
            p.fast_recovery_steps = f;
        }
        if let Some(r) = spec.rate_ai {
            p.rate_ai_bps = r.0 .0 as f64;
        }
        if let Some(r) = spec.rate_hai {
            p.rate_hai_bps = r.0 .0 as f64;
        }
        if let Some(r) = spec.rate_min {
            p.rate_min_bps = r.0 .0 as f64;
        }
        if p.rate_min_bps > host_rate {
            return err(
                "cc.rate_min",
                "the minimum rate is above the host link rate",
            );
        }
        Some(p)
    } else {
        None
    };
    let enabled = match ecn {
        Some(e) => e.enabled.unwrap_or(true),
        None => dcqcn,
    };
    let mut tiers: EcnTiers = [None; 4];
    if enabled {
        for (i, tier) in Tier::ALL.iter().enumerate() {
            let rate = match tier {
                Tier::HostToLeaf | Tier::LeafToHost => topo.host_link.rate.0,
                _ => topo.fabric_link.rate.0,
            } as f64;
            let mut red = preset_red(spec.preset, rate);
            let over = |r: &mut Red,
                        kmin: Option<schema::Size>,
                        kmax: Option<schema::Size>,
                        pmax: Option<f64>| {
                if let Some(k) = kmin {
                    r.kmin = k.0 .0;
                }
                if let Some(k) = kmax {
                    r.kmax = k.0 .0;
                }
                if let Some(p) = pmax {
                    r.pmax = p;
                }
            };
            if let Some(e) = ecn {
                over(&mut red, e.kmin, e.kmax, e.pmax);
                if let Some(t) = e.tiers.get(tier.name()) {
                    over(&mut red, t.kmin, t.kmax, t.pmax);
                }
            }
            let path = format!("ecn.tiers.{}", tier.name());
            if !(red.pmax > 0.0 && red.pmax <= 1.0) {
                return err(path, format!("expected pmax in (0, 1], found {}", red.pmax));
            }
            if red.kmin >= red.kmax {
                return err(
                    path,
                    format!("expected kmin < kmax, found {} >= {}", red.kmin, red.kmax),
                );
            }
            tiers[i] = Some(red);
        }
        if let Some(e) = ecn {
            if let Some(bad) = e
                .tiers
                .keys()
                .find(|k| !Tier::ALL.iter().any(|t| t.name() == k.as_str()))
            {
                return err(
                    format!("ecn.tiers.{bad}"),
                    "unknown tier (expected host_to_leaf, leaf_to_spine, spine_to_leaf or leaf_to_host)",
                );
            }
        }
    }
    Ok((cc, tiers))
}

fn resolve_link_faults(path: &str, f: &LinkFaultSpec, base: LinkFaults) -> VResult<LinkFaults> {
    let check = |field: &str, what: &str, v: Option<f64>, default: f64| -> VResult<f64> {
        match v {
            None => Ok(default),
            Some(x) if (0.0..1.0).contains(&x) => Ok(x),
            Some(x) => err(
                format!("{path}.{field}"),
                format!("expected {what} in [0, 1), found {x}"),
            ),
        }
    };
    Ok(LinkFaults {
        ber: check("ber", "a bit error rate", f.ber, base.ber)?,
        drop_probability: check(
            "drop_probability",
            "a probability",
            f.drop_probability,
            base.drop_probability,
        )?,
    })
}

fn resolve_faults(f: &FaultsSpec, topo: &Topology) -> VResult<Faults> {
    let all = resolve_link_faults(
        "faults",
        &LinkFaultSpec {
            ber: f.ber,
            drop_probability: f.drop_probability,
        },
        LinkFaults::default(),
    )?;
    let mut tiers = [all; 4];
    let per = [
        ("host_to_leaf", &f.tiers.host_to_leaf),
        ("leaf_to_spine", &f.tiers.leaf_to_spine),
        ("spine_to_leaf", &f.tiers.spine_to_leaf),
        ("leaf_to_host", &f.tiers.leaf_to_host),
    ];
    for (i, (name, spec)) in per.iter().enumerate() {
        if let Some(spec) = spec {
            tiers[i] = resolve_link_faults(&format!("faults.tiers.{name}"), spec, all)?;
        }
    }
    let find_port = |path: &str, name: &str| -> VResult<u32> {
        (0..topo.ports())
            .find(|&p| topo.port_name(p) == name)
            .ok_or_else(|| {
                (
                    format!("{path}.link"),
                    format!(
                        "no link named `{name}` (names as in ports.csv, e.g. `{}` or `{}`)",
                        topo.port_name(0),
                        topo.port_name(topo.ports() - 1)
                    ),
                )
            })
    };
    let mut links = Vec::new();
    for (i, l) in f.links.iter().enumerate() {
        let path = format!("faults.links[{i}]");
        let port = find_port(&path, &l.link)?;
        let base = tiers[Tier::ALL
            .iter()
            .position(|t| *t == topo.port_info(port).0)
            .unwrap_or(0)];
        let rates = resolve_link_faults(
            &path,
            &LinkFaultSpec {
                ber: l.ber,
                drop_probability: l.drop_probability,
            },
            base,
        )?;
        links.push((port, rates));
    }
    let mut flaps = Vec::new();
    for (i, fl) in f.flaps.iter().enumerate() {
        let path = format!("faults.flaps[{i}]");
        let port = find_port(&path, &fl.link)?;
        check_time(format!("{path}.at"), fl.at.0)?;
        check_time(format!("{path}.for"), fl.down_for.0)?;
        let from = fl.at.0;
        let until = fl.at.0 + fl.down_for.0;
        flaps.push(Flap { port, from, until });
        if fl.both_directions {
            flaps.push(Flap {
                port: topo.reverse_port(port),
                from,
                until,
            });
        }
    }
    Ok(Faults {
        tiers,
        links,
        flaps,
    })
}

/// What a collective must fit.
struct CollectiveEnv<'a> {
    host: Option<&'a HostConfig>,
    hosts: u32,
    seed: u64,
    item: usize,
    lossless: bool,
    read: bool,
    raw: bool,
    faults: bool,
}

/// A collective against its scenario: ranks that fit, a transport that carries its
/// data, and a size the run can hold. Errors are (field under the item, message).
fn check_collective_env(
    c: &crate::collective::Collective,
    env: &CollectiveEnv,
) -> Result<(), (String, String)> {
    let e = |p: &str, m: &str| Err((p.to_string(), m.to_string()));
    if env.read {
        return e(
            "op",
            "collectives write into their peers' buffers: they need `transport.rc.operation` `write` or `send`, not `read`",
        );
    }
    if env.raw && !env.lossless {
        return e(
            "op",
            "a collective over bare packets needs a lossless fabric (a lost packet is never resent): use `transport.mode: rc` or a lossless `flow_control`",
        );
    }
    if c.algorithm == schema::CollectiveAlgorithm::InNetwork {
        if !env.lossless {
            return e(
                "algorithm",
                "`in_network` needs a lossless fabric: set `flow_control.mode` to `ib_credit` or `pfc`",
            );
        }
        if env.faults {
            return e(
                "algorithm",
                "`in_network` streams to and from switches are not retransmitted: remove `faults` (or use another algorithm)",
            );
        }
    }
    if !(1024..=1 << 30).contains(&c.chunk) {
        return Err((
            "chunk".into(),
            format!("expected 1 KiB to 1 GiB, found {} B", c.chunk),
        ));
    }
    let ranks = crate::collective::place_on(c, env.host, env.hosts, env.seed, env.item)?;
    // Pieces the run tracks per iteration: each rank holds about size / chunk of them.
    let biggest = c.sizes.iter().copied().max().unwrap_or(0);
    let pieces = ranks.len() as f64
        * (biggest as f64 / c.chunk as f64).ceil().max(1.0)
        * ranks.len().min(64) as f64;
    if pieces > 2e8 {
        return Err((
            "chunk".into(),
            format!(
                "{} ranks moving {} B in {} B chunks make about {pieces:.0} buffer pieces per iteration; at most 2e8 (raise `chunk`)",
                ranks.len(),
                biggest,
                c.chunk
            ),
        ));
    }
    Ok(())
}

/// Whether `algorithm` can run `op`.
fn check_collective_algorithm(
    op: schema::CollectiveOp,
    algorithm: schema::CollectiveAlgorithm,
) -> Result<(), String> {
    use schema::CollectiveAlgorithm as A;
    match algorithm {
        A::Tree | A::Hierarchical | A::InNetwork if op != schema::CollectiveOp::Allreduce => Err(
            "`tree`, `hierarchical` and `in_network` run allreduce only (as NCCL's tree and SHARP do); use `ring` for other operations".into(),
        ),
        _ => Ok(()),
    }
}

/// Checks cross-field rules and fills defaults. Errors are (field path, message).
/// `base_dir` is where relative paths in the scenario (CDF files) are found: the
/// scenario file's folder.
pub fn validate(f: ScenarioFile, stem: &str, base_dir: &Path) -> VResult<Scenario> {
    // `sweep:` and `plan:` are read by their commands; here they must at least be plain
    // YAML (maps keyed by names, no tags), which their readers and `--set` can handle.
    fn plain(v: &serde_yaml::Value) -> bool {
        match v {
            serde_yaml::Value::Mapping(m) => m.iter().all(|(k, x)| k.is_string() && plain(x)),
            serde_yaml::Value::Sequence(s) => s.iter().all(plain),
            serde_yaml::Value::Tagged(_) => false,
            _ => true,
        }
    }
    for (name, v) in [("sweep", &f.sweep), ("plan", &f.plan)] {
        if let Some(v) = v {
            if !(v.is_null() || v.is_mapping() && plain(v)) {
                return err(
                    name,
                    "expected a map of plain fields (names as keys, no tags); see the README",
                );
            }
        }
    }
    let t = &f.topology;
    if t.leaves == 0 {
        return err("topology.leaves", "expected at least 1 leaf, found 0");
    }
    if t.hosts_per_leaf == 0 {
        return err(
            "topology.hosts_per_leaf",
            "expected at least 1 host per leaf, found 0",
        );
    }
    if t.leaves > 4096 || t.spines > 4096 || t.hosts_per_leaf > 4096 {
        return err("topology", "at most 4096 leaves, spines and hosts per leaf");
    }
    if t.leaves * t.hosts_per_leaf < 2 {
        return err(
            "topology.hosts_per_leaf",
            "a fabric needs at least 2 hosts to carry traffic",
        );
    }
    if t.leaves > 1 && t.spines == 0 {
        return err(
            "topology.spines",
            "expected at least 1 spine when there is more than one leaf",
        );
    }
    if t.links_per_spine == 0 || t.links_per_spine > 64 {
        return err(
            "topology.links_per_spine",
            format!(
                "expected 1 to 64 parallel links, found {}",
                t.links_per_spine
            ),
        );
    }
    let ports = 2 * t.leaves as u64 * t.hosts_per_leaf as u64
        + 2 * t.leaves as u64 * t.spines as u64 * t.links_per_spine as u64;
    if ports > MAX_PORTS {
        return err(
            "topology",
            format!("the fabric has {ports} ports; at most {MAX_PORTS} are supported"),
        );
    }
    for (path, l) in [
        ("topology.host_link.latency", Some(t.host_link)),
        ("topology.fabric_link.latency", t.fabric_link),
    ] {
        if let Some(l) = l {
            check_latency(path, l.latency.0)?;
        }
    }
    check_latency("switch.latency", f.switch.latency.0)?;
    let host_link = LinkParams {
        rate: t.host_link.rate.0,
        latency: t.host_link.latency.0,
    };
    let fabric_link = t
        .fabric_link
        .map(|l| LinkParams {
            rate: l.rate.0,
            latency: l.latency.0,
        })
        .unwrap_or(host_link);
    let topology = Topology {
        leaves: t.leaves,
        spines: t.spines,
        hosts_per_leaf: t.hosts_per_leaf,
        links_per_spine: t.links_per_spine,
        host_link,
        fabric_link,
    };

    let mtu = f.packet.mtu.0 .0;
    let encapsulation = f.packet.encapsulation;
    if mtu > 1 << 20 {
        return err(
            "packet.mtu",
            format!("expected at most 1MiB, found {mtu} B (InfiniBand's largest is 4096B)"),
        );
    }
    let mtu_wire = mtu + encapsulation.overhead_bytes();
    let s = &f.switch;
    let buffer_bytes = s.buffer.0 .0;
    if mtu_wire > buffer_bytes {
        return err(
            "switch.buffer",
            format!(
                "a {mtu_wire} B packet (MTU {mtu} B + {} B {} overhead) does not fit a {} buffer",
                encapsulation.overhead_bytes(),
                encapsulation.name(),
                s.buffer.0
            ),
        );
    }
    let limit = match (s.alpha, s.port_limit) {
        (Some(_), Some(_)) => {
            return err(
                "switch.port_limit",
                "give either `alpha` (dynamic threshold) or `port_limit`, not both",
            )
        }
        (Some(a), None) => {
            if !(a.is_finite() && a > 0.0 && a <= 1024.0) {
                return err(
                    "switch.alpha",
                    format!("expected a number in (0, 1024], found {a}"),
                );
            }
            // The largest queue a lone busy port can reach is alpha/(1+alpha) x buffer.
            let max_q = a / (1.0 + a) * buffer_bytes as f64;
            if max_q < mtu_wire as f64 {
                return err(
                    "switch.alpha",
                    format!(
                        "alpha {a} lets a queue hold at most {max_q:.0} B of the {buffer_bytes} B buffer, less than one {mtu_wire} B packet"
                    ),
                );
            }
            BufferLimit::Dynamic { alpha: a }
        }
        (None, Some(p)) => {
            if p.0 .0 < mtu_wire {
                return err(
                    "switch.port_limit",
                    format!("a {mtu_wire} B packet does not fit a {} port limit", p.0),
                );
            }
            BufferLimit::PortLimit { bytes: p.0 .0 }
        }
        (None, None) => {
            let a = 0.125;
            if a / (1.0 + a) * (buffer_bytes as f64) < mtu_wire as f64 {
                return err(
                    "switch.buffer",
                    format!(
                        "with the default alpha 0.125 a queue may hold at most 1/9 of the buffer, less than one {mtu_wire} B packet"
                    ),
                );
            }
            BufferLimit::Dynamic { alpha: a }
        }
    };
    let switch = SwitchConfig {
        latency: s.latency.0,
        buffer_bytes,
        limit,
        forwarding: s.forwarding,
    };

    let duration = f.duration.map(|d| d.0);
    if duration == Some(SimDuration::ZERO) {
        return err("duration", "expected a positive duration, found 0");
    }
    if let Some(d) = duration {
        check_time("duration", d)?;
    }
    if f.workload.is_empty() {
        return err("workload", "expected at least one workload item");
    }
    let hosts = topology.hosts();
    let host_check = |path: String, h: u32| -> VResult<()> {
        if h >= hosts {
            err(
                path,
                format!(
                    "host {h} does not exist: the fabric has {hosts} hosts, numbered 0 to {}",
                    hosts - 1
                ),
            )
        } else {
            Ok(())
        }
    };
    let mut workload = Vec::with_capacity(f.workload.len());
    let mut workload_posting: Vec<(String, Option<PostingMode>)> = Vec::new();
    for (i, w) in f.workload.into_iter().enumerate() {
        let (kind, posting) = match &w {
            WorkloadSpec::Flows(_) => ("flows", None),
            WorkloadSpec::Permutation(s) => ("permutation", s.posting),
            WorkloadSpec::Incast(s) => ("incast", s.posting),
            WorkloadSpec::AllToAll(s) => ("all_to_all", s.posting),
            WorkloadSpec::Poisson(s) => ("poisson", s.posting),
            WorkloadSpec::Stream(s) => ("stream", s.posting),
            WorkloadSpec::PingPong(s) => ("ping_pong", s.posting),
            WorkloadSpec::Collective(_) => ("collective", None),
        };
        workload_posting.push((format!("workload[{i}].{kind}.posting"), posting));
        let p = |kind: &str, field: &str| format!("workload[{i}].{kind}.{field}");
        let start = |s: Option<schema::Duration>| s.map(|d| d.0).unwrap_or_default();
        let item = match w {
            WorkloadSpec::Flows(list) => {
                if list.is_empty() {
                    return err(format!("workload[{i}].flows"), "expected at least one flow");
                }
                let mut flows = Vec::with_capacity(list.len());
                for (j, fl) in list.into_iter().enumerate() {
                    let fp = |field: &str| format!("workload[{i}].flows[{j}].{field}");
                    host_check(fp("src"), fl.src)?;
                    host_check(fp("dst"), fl.dst)?;
                    if fl.src == fl.dst {
                        return err(
                            fp("dst"),
                            format!(
                                "a flow needs two different hosts, found src = dst = {}",
                                fl.src
                            ),
                        );
                    }
                    check_size(fp("size"), fl.size.0 .0, mtu)?;
                    check_time(fp("start"), start(fl.start))?;
                    flows.push(crate::workload::ExplicitFlow {
                        src: fl.src,
                        dst: fl.dst,
                        size: fl.size.0 .0,
                        start: start(fl.start),
                    });
                }
                Workload::Flows(flows)
            }
            WorkloadSpec::Permutation(s) => {
                check_size(p("permutation", "size"), s.size.0 .0, mtu)?;
                check_time(p("permutation", "start"), start(s.start))?;
                Workload::Permutation {
                    size: s.size.0 .0,
                    start: start(s.start),
                }
            }
            WorkloadSpec::Incast(s) => {
                host_check(p("incast", "receiver"), s.receiver)?;
                if s.senders == 0 || s.senders > hosts - 1 {
                    return err(
                        p("incast", "senders"),
                        format!(
                            "expected 1 to {} senders (every host but the receiver), found {}",
                            hosts - 1,
                            s.senders
                        ),
                    );
                }
                check_size(p("incast", "size"), s.size.0 .0, mtu)?;
                check_time(p("incast", "start"), start(s.start))?;
                Workload::Incast {
                    senders: s.senders,
                    receiver: s.receiver,
                    size: s.size.0 .0,
                    start: start(s.start),
                }
            }
            WorkloadSpec::AllToAll(s) => {
                check_size(p("all_to_all", "size"), s.size.0 .0, mtu)?;
                check_time(p("all_to_all", "start"), start(s.start))?;
                let n = hosts as f64 * (hosts as f64 - 1.0);
                if n > MAX_FLOWS {
                    return err(
                        format!("workload[{i}].all_to_all"),
                        format!("{hosts} hosts make {n} flows; at most {MAX_FLOWS} are supported"),
                    );
                }
                Workload::AllToAll {
                    size: s.size.0 .0,
                    start: start(s.start),
                }
            }
            WorkloadSpec::Stream(s) => {
                host_check(p("stream", "src"), s.src)?;
                host_check(p("stream", "dst"), s.dst)?;
                if s.src == s.dst {
                    return err(
                        p("stream", "dst"),
                        format!(
                            "a stream needs two different hosts, found src = dst = {}",
                            s.src
                        ),
                    );
                }
                if s.count == 0 || s.count as f64 > MAX_FLOWS {
                    return err(
                        p("stream", "count"),
                        format!("expected 1 to {MAX_FLOWS} messages, found {}", s.count),
                    );
                }
                check_size(p("stream", "size"), s.size.0 .0, mtu)?;
                let st = start(s.start);
                let interval = start(s.interval);
                check_time(p("stream", "start"), st)?;
                check_time(
                    p("stream", "interval"),
                    SimDuration(st.0.saturating_add(interval.0.saturating_mul(s.count as u64))),
                )?;
                Workload::Stream {
                    src: s.src,
                    dst: s.dst,
                    size: s.size.0 .0,
                    count: s.count,
                    interval,
                    start: st,
                }
            }
            WorkloadSpec::Collective(s) => {
                let cp = |f: &str| p("collective", f);
                let algorithm = s.algorithm.unwrap_or(schema::CollectiveAlgorithm::Ring);
                check_collective_algorithm(s.op, algorithm).map_err(|m| (cp("algorithm"), m))?;
                let sizes: Vec<u64> = match (s.size, s.minbytes, s.maxbytes) {
                    (Some(sz), None, None) => vec![sz.0 .0],
                    (None, Some(lo), Some(hi)) => {
                        let (lo, hi) = (lo.0 .0, hi.0 .0);
                        if lo > hi {
                            return err(
                                cp("maxbytes"),
                                format!("expected at least minbytes ({lo} B), found {hi} B"),
                            );
                        }
                        let f = s.stepfactor.unwrap_or(2);
                        if f < 2 {
                            return err(
                                cp("stepfactor"),
                                format!("expected at least 2, found {f}"),
                            );
                        }
                        let mut v = Vec::new();
                        let mut x = lo;
                        while x <= hi && v.len() < 64 {
                            v.push(x);
                            x = match x.checked_mul(f as u64) {
                                Some(y) => y,
                                None => break,
                            };
                        }
                        v
                    }
                    (None, None, None) => {
                        return err(
                            format!("workload[{i}].collective"),
                            "give `size`, or `minbytes` and `maxbytes` (with `stepfactor`)",
                        )
                    }
                    _ => {
                        return err(
                            format!("workload[{i}].collective"),
                            "give either `size` or `minbytes` with `maxbytes`, not a mix",
                        )
                    }
                };
                for &sz in &sizes {
                    if sz % crate::collective::ELEMENT_BYTES != 0 {
                        return err(
                            cp(if s.size.is_some() { "size" } else { "minbytes" }),
                            format!("{sz} B is not a whole number of 4-byte floats"),
                        );
                    }
                    check_size(cp("size"), sz, mtu)?;
                }
                use crate::collective::defaults as cd;
                let iters = s.iters.unwrap_or(cd::ITERS);
                if iters == 0 || iters > 100_000 {
                    return err(cp("iters"), format!("expected 1 to 100000, found {iters}"));
                }
                let warmup_iters = s.warmup_iters.unwrap_or(cd::WARMUP_ITERS);
                if warmup_iters > 100_000 {
                    return err(
                        cp("warmup_iters"),
                        format!("expected at most 100000, found {warmup_iters}"),
                    );
                }
                let channels = s.channels.unwrap_or(cd::CHANNELS);
                if channels == 0 || channels > 64 {
                    return err(
                        cp("channels"),
                        format!("expected 1 to 64, found {channels}"),
                    );
                }
                let chunk = s
                    .chunk
                    .map_or(crate::collective::default_chunk(algorithm), |c| c.0 .0);
                for (path, r) in [
                    ("reduce_rate", s.reduce_rate),
                    ("intra_host.rate", s.intra_host.and_then(|x| x.rate)),
                    (
                        "switch_aggregation.rate",
                        s.switch_aggregation.and_then(|x| x.rate),
                    ),
                ] {
                    if let Some(r) = r {
                        if r.0 .0 < 1_000_000_000 {
                            return err(
                                cp(path),
                                format!("expected at least 1 Gbps, found {}", r.0),
                            );
                        }
                    }
                }
                if !(crate::collective::ELEMENT_BYTES..=1 << 30).contains(&chunk) {
                    return err(
                        cp("chunk"),
                        format!("expected 4 B to 1 GiB, found {chunk} B"),
                    );
                }
                let intra = s.intra_host.unwrap_or(schema::IntraHostSpec {
                    rate: None,
                    latency: None,
                });
                let intra_latency = intra.latency.map_or(cd::INTRA_HOST_LATENCY, |d| d.0);
                check_latency(&cp("intra_host.latency"), intra_latency)?;
                check_time(cp("start"), start(s.start))?;
                Workload::Collective(Box::new(crate::collective::Collective {
                    op: s.op,
                    algorithm,
                    sizes,
                    iters,
                    warmup_iters,
                    ranks: s.ranks,
                    placement: s.placement.clone().unwrap_or(schema::PlacementSpec::Packed),
                    channels,
                    chunk,
                    root: s.root.unwrap_or(0),
                    start: start(s.start),
                    intra_rate: intra.rate.map_or(cd::INTRA_HOST_RATE, |r| r.0),
                    intra_latency,
                    reduce_rate: s.reduce_rate.map_or(cd::REDUCE_RATE, |r| r.0),
                    pxn: s.pxn.unwrap_or(true),
                    chunk_given: s.chunk.is_some(),
                    switch_reduce_latency: {
                        let l = s
                            .switch_aggregation
                            .and_then(|a| a.latency)
                            .map_or(cd::SWITCH_REDUCE_LATENCY, |d| d.0);
                        check_latency(&cp("switch_aggregation.latency"), l)?;
                        l
                    },
                    switch_reduce_rate: s
                        .switch_aggregation
                        .and_then(|a| a.rate)
                        .map_or(cd::SWITCH_REDUCE_RATE, |r| r.0),
                }))
            }
            WorkloadSpec::PingPong(s) => {
                let [a, b] = s.hosts;
                host_check(format!("workload[{i}].ping_pong.hosts[0]"), a)?;
                host_check(format!("workload[{i}].ping_pong.hosts[1]"), b)?;
                if a == b {
                    return err(
                        p("ping_pong", "hosts"),
                        format!("a ping-pong needs two different hosts, found {a} twice"),
                    );
                }
                if s.iterations == 0 || 2.0 * s.iterations as f64 > MAX_FLOWS {
                    return err(
                        p("ping_pong", "iterations"),
                        format!(
                            "expected 1 to {} round trips, found {}",
                            MAX_FLOWS / 2.0,
                            s.iterations
                        ),
                    );
                }
                check_size(p("ping_pong", "size"), s.size.0 .0, mtu)?;
                check_time(p("ping_pong", "start"), start(s.start))?;
                Workload::PingPong {
                    hosts: s.hosts,
                    size: s.size.0 .0,
                    iterations: s.iterations,
                    start: start(s.start),
                }
            }
            WorkloadSpec::Poisson(s) => {
                if !(s.load.is_finite() && s.load > 0.0 && s.load <= 1.0) {
                    return err(
                        p("poisson", "load"),
                        format!(
                            "expected a fraction of the host link rate in (0, 1], found {}",
                            s.load
                        ),
                    );
                }
                let st = start(s.start);
                let until = match (s.until, duration) {
                    (Some(u), _) => u.0,
                    (None, Some(d)) => d,
                    (None, None) => {
                        return err(
                            p("poisson", "until"),
                            "a Poisson workload needs `until` (or a scenario `duration`) to know when arrivals stop",
                        )
                    }
                };
                if until <= st {
                    return err(
                        p("poisson", "until"),
                        format!("expected a time after start ({st}), found {until}"),
                    );
                }
                let all: Vec<u32> = (0..hosts).collect();
                let mut lists = [Vec::new(), Vec::new()];
                for (li, (name, given)) in
                    [("src_hosts", &s.src_hosts), ("dst_hosts", &s.dst_hosts)]
                        .into_iter()
                        .enumerate()
                {
                    let list = given.clone().unwrap_or_else(|| all.clone());
                    if list.is_empty() {
                        return err(p("poisson", name), "expected at least one host");
                    }
                    for (j, &h) in list.iter().enumerate() {
                        host_check(format!("workload[{i}].poisson.{name}[{j}]"), h)?;
                    }
                    lists[li] = list;
                }
                let [src_hosts, dst_hosts] = lists;
                if dst_hosts.len() == 1 && src_hosts == dst_hosts {
                    return err(
                        p("poisson", "dst_hosts"),
                        "the only receiver is the only sender: a host does not send to itself",
                    );
                }
                check_time(p("poisson", "start"), st)?;
                check_time(p("poisson", "until"), until)?;
                let dist = SizeDist::from_spec(&s.sizes, base_dir)
                    .map_err(|m| (p("poisson", "sizes"), m))?;
                check_size(p("poisson", "sizes"), dist.max(), mtu)?;
                // Expected arrivals: load x rate / (8 x mean size) per sender per second.
                let expected = s.load * host_link.rate.0 as f64 / (8.0 * dist.mean())
                    * (until - st).as_secs_f64()
                    * src_hosts.len() as f64;
                if expected.is_nan() || expected > MAX_FLOWS {
                    return err(
                        p("poisson", "until"),
                        format!(
                            "about {expected:.0} flows would arrive; at most {MAX_FLOWS} are supported (shorten `until` or use larger flows)"
                        ),
                    );
                }
                Workload::Poisson {
                    load: s.load,
                    dist,
                    start: st,
                    until,
                    src_hosts,
                    dst_hosts,
                }
            }
        };
        workload.push(item);
    }

    // A flow that alone takes more than a simulated day to serialize on the slowest link
    // would carry simulated time towards overflow: reject it.
    let slowest = topology.host_link.rate.min(topology.fabric_link.rate);
    for (i, w) in workload.iter().enumerate() {
        let biggest = w.max_size();
        let packets = biggest.div_ceil(mtu);
        let wire = biggest + packets * (encapsulation.overhead_bytes() + 16);
        if crate::units::serialization_delay(wire, slowest) > MAX_TIME {
            return err(
                format!("workload[{i}]"),
                format!(
                    "a {} flow takes more than a simulated day to send at {slowest}",
                    crate::units::Bytes(biggest)
                ),
            );
        }
    }
    let transport = match f.transport.mode {
        TransportMode::Raw => Transport::Raw,
        TransportMode::Rc => Transport::Rc(resolve_rc(&f.transport.rc, None, mtu, "transport.rc")?),
    };
    let faults = resolve_faults(&f.faults, &topology)?;
    let (cc, ecn) = resolve_cc(&f.cc, f.ecn.as_ref(), &topology, &transport)?;
    // The largest packet: a full MTU with the RETH of a first WRITE packet.
    let flow_control =
        resolve_flow_control(&f.flow_control, &topology, buffer_bytes, mtu_wire + 16)?;
    // Upper bound on messages (Poisson: twice the expected arrivals, plus a margin), for
    // the host model's serialized costs below.
    let rate = topology.host_link.rate.0;
    // (messages, largest message) per item; a collective's messages are its pieces.
    let message_load: Vec<(f64, u64)> = workload
        .iter()
        .map(|w| match w {
            Workload::Poisson { .. } => (2.0 * w.expected_flows(hosts, rate) + 100.0, w.max_size()),
            Workload::Collective(c) => (w.expected_flows(hosts, rate), c.chunk.min(w.max_size())),
            _ => (w.expected_flows(hosts, rate), w.max_size()),
        })
        .collect();
    let messages: f64 = message_load.iter().map(|m| m.0).sum();
    let resolve_host_at = |spec: &schema::HostSpec,
                           at: &str,
                           strict: bool|
     -> VResult<HostConfig> {
        let h = crate::nic::config::resolve(spec, topology.hosts(), strict)
            .map_err(|(p, m)| (format!("{at}.{p}"), m))?;
        // Posting threads, copy engines and interrupt cores serialize each message's
        // costs: all of them together must stay well inside simulated time.
        let c = &h.costs;
        let slowest = h
            .pcie_bandwidth
            .min(h.interconnect_bandwidth)
            .min(h.root_complex_p2p_bandwidth);
        let fixed = [
            c.wqe_build,
            c.doorbell_mmio,
            c.cqe_poll,
            c.hard_irq,
            c.softirq,
            c.copy_launch,
            c.copy_launch,
            c.proxy_handoff,
            c.gpu_wqe_build,
            c.gpu_doorbell,
            c.gpu_cqe_poll,
            h.wqe_processing,
            h.pcie_round_trip,
            h.pcie_round_trip,
        ]
        .iter()
        .map(|d| d.0 as f64)
        .sum::<f64>();
        let total: f64 = message_load
            .iter()
            .map(|&(n, size)| {
                n * (fixed + 3.0 * crate::units::serialization_delay(size, slowest).0 as f64)
            })
            .sum();
        if total > MAX_TIME.0 as f64 {
            return err(
                at,
                format!(
                    "about {messages:.0} messages at up to {:.1} us of host costs each would run past a simulated day",
                    total / messages.max(1.0) / 1e6
                ),
            );
        }
        // Every mode in use must have a data path on every NIC.
        for nic in 0..h.nics_per_host {
            for memory in [h.memory_source, h.memory_destination] {
                h.data_path(nic, h.posting, memory)
                    .map_err(|m| (format!("{at}.posting"), m))?;
                for (path, mode) in &workload_posting {
                    if let Some(mode) = mode {
                        h.data_path(nic, *mode, memory)
                            .map_err(|m| (path.clone(), m))?;
                    }
                }
            }
        }
        Ok(h)
    };
    let host = match &f.host {
        Some(spec) => Some(resolve_host_at(spec, "host", true)?),
        None => {
            if let Some((path, _)) = workload_posting.iter().find(|(_, m)| m.is_some()) {
                return err(
                    path.clone(),
                    "a posting mode needs the host model: add a `host:` section",
                );
            }
            None
        }
    };
    let posting: Vec<Option<PostingMode>> = workload_posting.iter().map(|(_, m)| *m).collect();
    // Collectives: their ranks must fit the GPUs; switches aggregate only on a lossless
    // fabric (SHARP runs on InfiniBand's credits: its streams to and from switches have
    // no retransmission here).
    let read = matches!(&transport, Transport::Rc(rc) if rc.operation == Op::Read);
    for (i, w) in workload.iter().enumerate() {
        if let Workload::Collective(c) = w {
            check_collective_env(
                c,
                &CollectiveEnv {
                    host: host.as_ref(),
                    hosts: topology.hosts(),
                    seed: f.seed,
                    item: i,
                    lossless: flow_control.lossless(),
                    read,
                    raw: f.transport.mode == TransportMode::Raw,
                    faults: faults.any(),
                },
            )
            .map_err(|(p, m)| (format!("workload[{i}].collective.{p}"), m))?;
        }
    }
    let mut compare: Vec<CompareSet> = Vec::new();
    for (i, c) in f.compare.iter().enumerate() {
        if f.transport.mode == TransportMode::Raw {
            return err(
                "compare",
                "`compare:` compares RC parameter sets; it needs `transport.mode: rc`",
            );
        }
        if c.name.trim().is_empty() || compare.iter().any(|x| x.name == c.name) {
            return err(
                format!("compare[{i}].name"),
                "expected a unique, non-empty name",
            );
        }
        let rc = resolve_rc(&f.transport.rc, Some(&c.rc), mtu, &format!("compare[{i}]"))?;
        let (set_cc, set_ecn) = if c.cc.is_some() || c.ecn.is_some() {
            resolve_cc(
                c.cc.as_ref().unwrap_or(&f.cc),
                c.ecn.as_ref().or(f.ecn.as_ref()),
                &topology,
                &transport,
            )
            .map_err(|(p, m)| (format!("compare[{i}].{p}"), m))?
        } else {
            (cc, ecn)
        };
        let mut set_topology = topology.clone();
        if let Some(t) = &c.topology {
            if let Some(sp) = t.spines {
                set_topology.spines = sp;
            }
            if let Some(k) = t.links_per_spine {
                set_topology.links_per_spine = k;
            }
            if let Some(l) = t.fabric_link {
                set_topology.fabric_link = LinkParams {
                    rate: l.rate.0,
                    latency: l.latency.0,
                };
                check_latency(
                    &format!("compare[{i}].topology.fabric_link.latency"),
                    l.latency.0,
                )?;
            }
            if set_topology.spines == 0 && set_topology.leaves > 1 {
                return err(
                    format!("compare[{i}].topology.spines"),
                    "expected at least 1 spine",
                );
            }
            if set_topology.links_per_spine == 0 || set_topology.links_per_spine > 64 {
                return err(
                    format!("compare[{i}].topology.links_per_spine"),
                    "expected 1 to 64",
                );
            }
        }
        // Flow control is sized for the set's own fabric (headroom per ingress port).
        let fc = resolve_flow_control(
            c.flow_control.as_ref().unwrap_or(&f.flow_control),
            &set_topology,
            buffer_bytes,
            mtu_wire + 16,
        )
        .map_err(|(p, m)| (format!("compare[{i}].{p}"), m))?;
        let set_host = match (&c.host, &f.host) {
            (None, _) => host.clone(),
            (Some(over), base) => {
                let merged = schema::merge_host(&base.clone().unwrap_or_default(), over);
                Some(resolve_host_at(
                    &merged,
                    &format!("compare[{i}].host"),
                    false,
                )?)
            }
        };
        let set_workload = match &c.collective {
            None => None,
            Some(o) => {
                let mut w = workload.clone();
                for item in w.iter_mut() {
                    if let Workload::Collective(col) = item {
                        let at = format!("compare[{i}].collective");
                        if let Some(a) = o.algorithm {
                            col.algorithm = a;
                            if !col.chunk_given && o.chunk.is_none() {
                                col.chunk = crate::collective::default_chunk(a);
                            }
                        }
                        if let Some(p) = &o.placement {
                            col.placement = p.clone();
                        }
                        if let Some(ch) = o.channels {
                            if ch == 0 || ch > 64 {
                                return err(
                                    format!("{at}.channels"),
                                    format!("expected 1 to 64, found {ch}"),
                                );
                            }
                            col.channels = ch;
                        }
                        if let Some(ck) = o.chunk {
                            col.chunk = ck.0 .0;
                        }
                        if let Some(x) = o.pxn {
                            col.pxn = x;
                        }
                        check_collective_algorithm(col.op, col.algorithm)
                            .map_err(|m| (format!("{at}.algorithm"), m))?;
                    }
                }
                Some(w)
            }
        };
        // Every set's collectives must suit the set's hosts, fabric and transport.
        for (j, item) in set_workload
            .as_ref()
            .unwrap_or(&workload)
            .iter()
            .enumerate()
        {
            if let Workload::Collective(col) = item {
                check_collective_env(
                    col,
                    &CollectiveEnv {
                        host: set_host.as_ref(),
                        hosts: set_topology.hosts(),
                        seed: f.seed,
                        item: j,
                        lossless: fc.lossless(),
                        read: rc.operation == Op::Read,
                        raw: false,
                        faults: faults.any(),
                    },
                )
                .map_err(|(p, m)| (format!("compare[{i}].collective.{p}"), m))?;
            }
        }
        compare.push(CompareSet {
            workload: set_workload,
            host: set_host,
            name: c.name.clone(),
            topology: set_topology,
            rc,
            flow_control: fc,
            cc: set_cc,
            ecn: set_ecn,
        });
    }

    let timeseries = match &f.timeseries {
        None => None,
        Some(ts) => {
            let interval = ts.interval.map(|d| d.0).unwrap_or(SimDuration::from_us(10));
            if interval == SimDuration::ZERO {
                return err("timeseries.interval", "expected a positive interval");
            }
            let mut ports = Vec::new();
            for (i, name) in ts.ports.iter().enumerate() {
                let p = (0..topology.ports())
                    .find(|&p| topology.port_name(p) == *name)
                    .ok_or_else(|| {
                        (
                            format!("timeseries.ports[{i}]"),
                            format!(
                                "no link named `{name}` (names as in ports.csv, e.g. `{}`)",
                                topology.port_name(0)
                            ),
                        )
                    })?;
                ports.push(p);
            }
            if !ts.flows.is_empty() {
                let n = crate::workload::expand(
                    &workload,
                    topology.hosts(),
                    topology.host_link.rate.0,
                    f.seed,
                )
                .len();
                if let Some((i, &id)) = ts
                    .flows
                    .iter()
                    .enumerate()
                    .find(|(_, &id)| id as usize >= n)
                {
                    return err(
                        format!("timeseries.flows[{i}]"),
                        format!("flow {id} does not exist: the workload makes {n} flows, numbered from 0"),
                    );
                }
            }
            let horizon = duration.map_or(0.05, |d| d.as_secs_f64());
            let rows =
                horizon / interval.as_secs_f64() * (3 * ts.ports.len() + 2 * ts.flows.len()) as f64;
            if rows > MAX_TIMESERIES_ROWS {
                return err(
                    "timeseries.interval",
                    format!("about {rows:.0} rows over the run; at most {MAX_TIMESERIES_ROWS} (sample less often, or fewer objects)"),
                );
            }
            Some(Timeseries {
                interval,
                ports,
                flows: ts.flows.clone(),
            })
        }
    };

    Ok(Scenario {
        host,
        posting,
        timeseries,
        transport,
        faults,
        compare,
        cc,
        ecn,
        flow_control,
        name: f.name.unwrap_or_else(|| stem.to_string()),
        seed: f.seed,
        duration,
        topology,
        switch,
        routing: f.routing,
        mtu,
        encapsulation,
        workload,
    })
}

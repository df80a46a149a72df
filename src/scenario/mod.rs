//! Scenarios: YAML in, a validated [`Scenario`] out, or a [`ScenarioError`] naming the
//! file, line, column and field path and saying what was expected.
//!
//! Parsing happens in one pass that never panics: serde reads the YAML into the schema
//! ([`schema`]), converting unit strings as it goes; then [`validate`] checks what one
//! field cannot know alone (ranges, host ids against the fabric size, an MTU against the
//! buffer) and resolves defaults. `--set a.b.c=value` overrides are applied to the YAML
//! tree before the second pass.

pub mod advice;
pub mod locate;
pub mod resolve;
pub mod schema;

pub use resolve::transport::resolve_rc;
pub use resolve::{validate, MAX_FLOWS, MAX_LATENCY, MAX_PACKETS_PER_FLOW, MAX_PORTS, MAX_TIME};

use crate::cc::CcParams;
pub use crate::components::ingress::pfc_headroom;
pub use crate::components::{BufferLimit, FlowControl, LinkFaults, Red, SwitchConfig};
use crate::nic::config::HostConfig;
use crate::packet::Encapsulation;
use crate::routing::RoutingConfig;
use crate::topology::Tier;
use crate::topology::Topology;
use crate::transport::rc::{Op, RcParams};
use crate::units::SimDuration;
use crate::workload::Workload;
use schema::PostingMode;
use schema::ScenarioFile;
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
    /// Ports that run at a lower rate than their tier's: (port, rate).
    pub degraded: Vec<(u32, crate::units::BitsPerSec)>,
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
    /// Simulated time without progress after which the watchdog stops a run whose only
    /// events left are timers (`sim::watchdog`); `None`: its default for the transport.
    pub watchdog: Option<SimDuration>,
    pub topology: Topology,
    pub switch: SwitchConfig,
    pub routing: RoutingConfig,
    /// Path MTU in payload bytes.
    pub mtu: u64,
    pub encapsulation: Encapsulation,
    pub workload: Vec<Workload>,
    pub transport: Transport,
    pub faults: Faults,
    /// Named parameter sets to compare (empty: run once).
    pub compare: Vec<CompareSet>,
    /// Runs of every compare set (1: once); repeat r > 0 uses one derived seed for
    /// every set (`compare::repeat_seed`).
    pub repeats: u32,
    /// RED thresholds per tier (indexed like `Tier::ALL`); `None`: no marking there.
    pub ecn: [Option<Red>; 4],
    pub cc: Option<CcParams>,
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
    pub routing: RoutingConfig,
    pub cc: Option<CcParams>,
    pub ecn: [Option<Red>; 4],
    pub host: Option<HostConfig>,
    /// Faults resolved on the set's fabric (its own `faults`, or the scenario's).
    pub faults: Faults,
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
    let text = crate::spec::read_text_file(path, crate::spec::MAX_SCENARIO_FILE)
        .map_err(|e| ScenarioError::at(&file, "", format!("cannot read the scenario: {e}")))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into());
    Ok((text, file, stem))
}

/// Deepest `[`/`{` nesting a scenario may have. The YAML reader's scanner costs time in
/// proportion to the nesting depth for every token, so 40,000 levels took 84 s to refuse;
/// its own recursion limit (128) refuses anything this deep anyway, and a scenario needs
/// fewer than ten.
pub const MAX_NESTING: usize = 100;

/// Where `text` first nests `[`/`{` deeper than [`MAX_NESTING`] (line and column, from
/// 1), if it does. A linear scan that skips quoted text and comments; a bracket inside a
/// plain scalar counts too, so it may over-count, never under-count real nesting.
pub fn nesting_too_deep(text: &str) -> Option<(usize, usize)> {
    let (mut depth, mut line, mut column) = (0usize, 1usize, 0usize);
    let mut quote: Option<char> = None;
    let mut prev = '\n';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
        match quote {
            Some('"') if c == '\\' => {
                chars.next();
                column += 1;
            }
            Some(q) if c == q => {
                // '' inside single quotes is an escaped quote.
                if q == '\'' && chars.peek() == Some(&'\'') {
                    chars.next();
                    column += 1;
                } else {
                    quote = None;
                }
            }
            Some(_) => {}
            None => match c {
                '#' if prev.is_whitespace() => {
                    while chars.peek().is_some_and(|&n| n != '\n') {
                        chars.next();
                    }
                }
                // A quote opens a quoted scalar only where a scalar may start.
                '"' | '\'' if matches!(prev, ' ' | '\t' | '\n' | '[' | '{' | ',' | ':') => {
                    quote = Some(c)
                }
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Some((line, column));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        prev = c;
    }
    None
}

/// Refuses text nested deeper than [`MAX_NESTING`], before the YAML reader sees it.
pub fn check_nesting(text: &str, file: &str) -> Result<(), ScenarioError> {
    match nesting_too_deep(text) {
        None => Ok(()),
        Some((line, column)) => Err(ScenarioError {
            file: file.into(),
            line: Some(line),
            column: Some(column),
            path: String::new(),
            message: format!(
                "lists and maps nested more than {MAX_NESTING} deep; a scenario needs fewer than ten levels"
            ),
        }),
    }
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

/// Rewrites the reader's Rust type names in a message into the user's words: `u32` is
/// "a whole number from 0 to 4294967295", `struct ScenarioFile` "a map of the scenario's
/// sections", a unit value "an empty value", a sequence "a list".
pub fn plain_words(message: &str) -> String {
    const WORDS: &[(&str, &str)] = &[
        (
            "struct ScenarioFile",
            "a map of the scenario's sections (topology, workload, ...)",
        ),
        ("u8", "a whole number from 0 to 255"),
        ("u16", "a whole number from 0 to 65535"),
        ("u32", "a whole number from 0 to 4294967295"),
        ("u64", "a whole number from 0 to 18446744073709551615"),
        ("usize", "a whole number from 0 to 18446744073709551615"),
        ("i64", "a whole number"),
        ("f64", "a number"),
        ("f32", "a number"),
    ];
    let mut out = message.replace("unit value", "an empty value");
    out = out.replace("invalid type: sequence", "invalid type: a list");
    for (rust, plain) in WORDS {
        let from = format!("expected {rust}");
        let mut rewritten = String::with_capacity(out.len());
        let mut rest = out.as_str();
        while let Some(i) = rest.find(&from) {
            let after = &rest[i + from.len()..];
            // Only the whole word: `expected u32`, not `expected u320`.
            let whole = !after.starts_with(|c: char| c.is_alphanumeric() || c == '_');
            rewritten.push_str(&rest[..i]);
            rewritten.push_str(if whole { "expected " } else { &from });
            if whole {
                rewritten.push_str(plain);
            }
            rest = after;
        }
        rewritten.push_str(rest);
        out = rewritten;
    }
    // Any other struct the reader names is a map of fields to the user.
    while let Some(i) = out.find("expected struct ") {
        let end = out[i + 16..]
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(out.len(), |j| i + 16 + j);
        out.replace_range(i..end, "expected a map");
    }
    out
}

fn yaml_error(file: &str, e: &serde_yaml::Error, located: bool) -> ScenarioError {
    let mut message = e.to_string();
    if let Some(i) = message.rfind(" at line ") {
        message.truncate(i);
    }
    let message = plain_words(&message);
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
    check_nesting(text, file)?;
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

/// What `sweep` and `plan` start from: the scenario as given (checked on its own) and
/// its YAML tree with every `--set` applied, for their own sections. A runner makes one
/// run per point or candidate, so a scenario with `compare:` sets is refused (`runs`:
/// what it runs once per, `instead`: what to do), not its sets silently dropped.
pub fn runner_input(
    text: &str,
    file: &str,
    stem: &str,
    overrides: &Overrides,
    runs: &str,
    instead: &str,
) -> Result<(Scenario, serde_yaml::Value), ScenarioError> {
    let base = parse_str(text, file, stem, overrides)?;
    if !base.compare.is_empty() {
        return Err(ScenarioError::at(
            file,
            "compare",
            format!("{runs} and does not expand `compare:` sets; {instead}"),
        ));
    }
    let mut tree: serde_yaml::Value = check_nesting(text, file).and_then(|()| {
        serde_yaml::from_str(text).map_err(|e| ScenarioError::at(file, "", e.to_string()))
    })?;
    for s in &overrides.set {
        apply_set(&mut tree, s).map_err(|m| ScenarioError::at("--set", s, m))?;
    }
    Ok((base, tree))
}

/// Sets `a.b[2].c=value` (or `a.b.2.c=value`) in a YAML tree. The value is parsed as YAML,
/// so numbers stay numbers and `{ fixed: 4KB }` is a map.
pub fn apply_set(tree: &mut serde_yaml::Value, assignment: &str) -> Result<(), String> {
    use locate::Seg;
    let (path, value) = assignment
        .split_once('=')
        .ok_or_else(|| format!("expected `dotted.path=value`, found `{assignment}`"))?;
    let segs = locate::parse_path(path.trim())?;
    if segs.is_empty() {
        return Err("empty field path".into());
    }
    // An empty value would read as YAML null and silently drop the field to its default.
    if value.trim().is_empty() {
        return Err(format!(
            "`{}` has no value after `=`: give one (e.g. `{}=...`); to use the default, leave the field out of the file",
            path.trim(),
            path.trim()
        ));
    }
    if nesting_too_deep(value).is_some() {
        return Err(format!(
            "the value nests lists and maps more than {MAX_NESTING} deep"
        ));
    }
    let value: serde_yaml::Value = serde_yaml::from_str(value)
        .map_err(|e| format!("cannot read the value `{value}` as YAML: {e}"))?;
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

//! From the schema to a [`Scenario`]: one resolver per YAML section, each checking what
//! one field cannot know alone (ranges, host ids against the fabric size, an MTU against
//! the buffer) and filling defaults. Errors are (field path, message); the caller adds
//! the file, line and column.
//!
//! [`validate`] runs the sections in dependency order: topology, switch and packet,
//! workload, transport, faults, cc and ecn, flow control, host, collectives against all of
//! these, compare sets, timeseries.

pub mod cc;
pub mod collective;
pub mod compare;
pub mod faults;
pub mod flow_control;
pub mod host;
pub mod routing;
pub mod switch;
pub mod timeseries;
pub mod topology;
pub mod training;
pub mod transport;
pub mod workload;

use super::schema::ScenarioFile;
use super::Scenario;
use crate::units::SimDuration;
use std::path::Path;

pub use crate::spec::MAX_LATENCY;
pub use topology::MAX_PORTS;

pub type VResult<T> = Result<T, (String, String)>;

/// Most flows a workload item may expand into. Each costs 177 B of state on a shared
/// queue pair and 992 B on its own (`sim::footprint`, measured), so this bounds an
/// item at 3.5-20 GB; whether the machine can hold the run is checked before it starts.
pub const MAX_FLOWS: f64 = 20_000_000.0;
/// Latest time a scenario may name: one simulated day, far from u64 overflow.
pub const MAX_TIME: SimDuration = SimDuration(86_400 * 1_000_000_000_000);
/// Most packets one flow may need (packet indices are 32-bit).
pub const MAX_PACKETS_PER_FLOW: u64 = 1 << 31;

pub fn check_time(path: impl Into<String>, d: SimDuration) -> VResult<()> {
    if d > MAX_TIME {
        return err(
            path,
            format!("{d} is past the longest supported run (one simulated day)"),
        );
    }
    Ok(())
}

pub fn check_latency(path: &str, d: SimDuration) -> VResult<()> {
    if d > MAX_LATENCY {
        return err(path, format!("{d} is longer than the 1s supported"));
    }
    Ok(())
}

pub fn check_size(path: impl Into<String>, size: u64, mtu: u64) -> VResult<()> {
    if size.div_ceil(mtu) > MAX_PACKETS_PER_FLOW {
        return err(
            path,
            format!("{size} B is more than {MAX_PACKETS_PER_FLOW} packets of {mtu} B"),
        );
    }
    Ok(())
}

pub fn err<T>(path: impl Into<String>, msg: impl Into<String>) -> VResult<T> {
    Err((path.into(), msg.into()))
}

pub fn check_range<T: PartialOrd + std::fmt::Display + Copy>(
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

/// `sweep:` and `plan:` are read by their commands; here they must at least be plain
/// YAML (maps keyed by names, no tags), which their readers and `--set` can handle.
fn check_plain_sections(f: &ScenarioFile) -> VResult<()> {
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
    Ok(())
}

/// Checks cross-field rules and fills defaults. Errors are (field path, message).
/// `base_dir` is where relative paths in the scenario (CDF files) are found: the
/// scenario file's folder.
pub fn validate(f: ScenarioFile, stem: &str, base_dir: &Path) -> VResult<Scenario> {
    let mut sc = resolve_document(&f, stem, base_dir, true)?;
    sc.compare = compare::resolve(&f, stem, base_dir)?;
    if let Some(r) = f.repeats {
        if !(1..=1000).contains(&r) {
            return err("repeats", format!("expected 1 to 1000 runs, found {r}"));
        }
        if r > 1 && sc.compare.is_empty() {
            return err(
                "repeats",
                "repeats runs every `compare:` set with shared seeds; this scenario has no sets (to repeat one scenario over seeds, use `sweep: { repeats: N }`)",
            );
        }
        sc.repeats = r;
    }
    Ok(sc)
}

/// Every section of `f` but `compare:`. `strict_host`: refuse host fields that have no
/// effect (off for a compare set's merged host section).
pub fn resolve_document(
    f: &ScenarioFile,
    stem: &str,
    base_dir: &Path,
    strict_host: bool,
) -> VResult<Scenario> {
    check_plain_sections(f)?;
    let topology = topology::resolve(&f.topology)?;
    let (switch, mtu, encapsulation) = switch::resolve(&f.switch, &f.packet)?;
    let mtu_wire = mtu + encapsulation.overhead_bytes();

    let duration = f.duration.map(|d| d.0);
    if duration == Some(SimDuration::ZERO) {
        return err("duration", "expected a positive duration, found 0");
    }
    if let Some(d) = duration {
        check_time("duration", d)?;
    }
    let watchdog = f.watchdog.map(|d| d.0);
    if watchdog == Some(SimDuration::ZERO) {
        return err("watchdog", "expected a positive duration, found 0");
    }
    if let Some(d) = watchdog {
        check_time("watchdog", d)?;
    }
    let (workload, postings) = workload::resolve(
        &f.workload,
        &topology,
        mtu,
        encapsulation,
        duration,
        base_dir,
    )?;
    let transport = transport::resolve(&f.transport, mtu)?;
    let faults = faults::resolve_faults(&f.faults, &topology)?;
    let (cc, ecn) = cc::resolve_cc(
        &f.cc,
        f.ecn.as_ref(),
        &topology,
        &transport,
        &cc::Wire {
            mtu,
            encapsulation,
            switch_latency: switch.latency,
        },
    )?;
    // The largest packet: a full MTU with the RETH of a first WRITE packet.
    let flow_control = flow_control::resolve_flow_control(
        &f.flow_control,
        &topology,
        switch.buffer_bytes,
        mtu_wire + 16,
    )?;
    let host = host::resolve(
        f.host.as_ref(),
        &host::HostEnv {
            hosts: topology.hosts(),
            host_link_bps: topology.host_link.rate.0,
            workload: &workload,
            postings: &postings,
            strict: strict_host,
        },
    )?;
    let mut workload = workload;
    collective::default_channels(&mut workload, host.as_ref());
    // Collectives: their ranks must fit the GPUs; switches aggregate only on a lossless
    // fabric (SHARP runs on InfiniBand's credits: its streams to and from switches have
    // no retransmission here).
    collective::check_all(
        &workload,
        |i| format!("workload[{i}]"),
        &collective::ScenarioEnv {
            host: host.as_ref(),
            topology: &topology,
            seed: f.seed,
            flow_control: &flow_control,
            transport: &transport,
            faults: &faults,
        },
    )?;
    let timeseries = match &f.timeseries {
        None => None,
        Some(ts) => Some(timeseries::resolve(
            ts, &topology, &workload, f.seed, duration,
        )?),
    };
    let posting = postings.iter().map(|(_, m)| *m).collect();
    let sc = Scenario {
        host,
        posting,
        timeseries,
        transport,
        faults,
        compare: Vec::new(),
        repeats: 1,
        cc,
        ecn,
        flow_control,
        name: f.name.clone().unwrap_or_else(|| stem.to_string()),
        seed: f.seed,
        duration,
        watchdog,
        topology,
        switch,
        routing: routing::resolve(&f.routing)?,
        mtu,
        encapsulation,
        workload,
    };
    Ok(sc)
}

//! Helpers shared by the integration tests.
#![allow(dead_code)]

use doorbell::scenario::{parse_str, Overrides, Scenario};
use doorbell::sim::RunOutput;
use std::process::{Command, Output};

/// Parses an inline YAML scenario, panicking with the error and the text.
pub fn scenario(yaml: &str) -> Scenario {
    scenario_with(yaml, &[])
}

/// Parses an inline YAML scenario with `--set` overrides.
pub fn scenario_with(yaml: &str, set: &[&str]) -> Scenario {
    parse_str(
        yaml,
        "inline.yaml",
        "inline",
        &Overrides {
            seed: None,
            set: set.iter().map(|s| s.to_string()).collect(),
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

/// Parses `yaml` (as `m.yaml`), expecting validation to refuse it; returns the error as
/// the command line shows it.
pub fn rejected(yaml: &str) -> String {
    match parse_str(yaml, "m.yaml", "m", &Overrides::default()) {
        Ok(_) => panic!("accepted:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

/// Flow completion time of flow `flow` (to when its sender learned of it), picoseconds.
pub fn fct_ps(out: &RunOutput, flow: usize) -> u64 {
    let f = &out.flows[flow];
    f.finish.expect("flow completed").0 - f.def.start.0
}

/// When flow `flow`'s last byte landed, picoseconds from its start.
pub fn landed_ps(out: &RunOutput, flow: usize) -> u64 {
    let f = &out.flows[flow];
    f.landed.expect("flow landed").0 - f.def.start.0
}

/// The incast fabric of the reference simulator's published runs (HPCC's ns-3): 100 Gb/s
/// hosts and fabric, 1 us cables, 1000 B MTU over RoCEv2, 32 MiB switch buffers (`run.py`:
/// 16 MB x bandwidth / 50 Gb/s), no switch latency beyond serialization (ns-3's switches
/// add none), and PFC with ns-3's dynamic Xoff: an eighth of the free shared buffer
/// (`USE_DYNAMIC_PFC_THRESHOLD 1`; `third.cc` sets `pfc_a_shift` 3 on NIC-rate ports,
/// `SwitchMmu::GetPfcThreshold`); `cc` is the scenario's `cc:` map and `flows` the items
/// of an explicit flow list.
pub fn reference_fabric(
    leaves: u32,
    spines: u32,
    hosts_per_leaf: u32,
    cc: &str,
    flows: &str,
) -> Scenario {
    scenario(&format!(
        "
topology:
  leaves: {leaves}
  spines: {spines}
  hosts_per_leaf: {hosts_per_leaf}
  host_link: {{ rate: 100Gbps, latency: 1us }}
  fabric_link: {{ rate: 100Gbps, latency: 1us }}
switch: {{ latency: 0ns, buffer: 32MiB }}
packet: {{ mtu: 1000B, encapsulation: rocev2 }}
flow_control: {{ mode: pfc, xoff_alpha: 0.125 }}
cc: {cc}
workload:
  - flows: [ {flows} ]
"
    ))
}

/// `n` flows of `size` from hosts `first`, `first + 1`, ... to host 0, as flow items.
pub fn flows_to_host0(first: u32, n: u32, size: &str) -> String {
    (first..first + n)
        .map(|s| format!("{{ src: {s}, dst: 0, size: {size} }}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Completion times of every flow, microseconds, sorted.
pub fn finishes_us(out: &RunOutput) -> Vec<f64> {
    let mut f: Vec<f64> = out
        .flows
        .iter()
        .map(|f| f.finish.expect("every flow completes").as_us_f64())
        .collect();
    f.sort_by(f64::total_cmp);
    f
}

/// The published 16:1 incast's senders (hosts 16, 23, ..., 121, on the other seven
/// leaves of the 128-host reference fabric), 1 MB each to host 0, as flow items.
pub fn incast_16_to_1_of_1mb() -> String {
    (0..16)
        .map(|i| format!("{{ src: {}, dst: 0, size: 1MB }}", 16 + i * 7))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Asserts that `measured` is within `tolerance` (a fraction) of the reference
/// simulator's `reference`, naming the figure.
pub fn assert_near_reference(what: &str, measured: f64, reference: f64, tolerance: f64) {
    assert!(
        (measured / reference - 1.0).abs() < tolerance,
        "{what} {measured:.0} us vs ns-3 {reference:.0}"
    );
}

/// The doorbell binary, to run as a user would.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_doorbell"))
}

/// What a finished command wrote on its standard error.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// `doorbell args`, with environment variable `var` set to `value`, is refused as bad
/// input (exit 2) with a message that contains `says`.
pub fn assert_env_refused(var: &str, value: &str, args: &[&std::ffi::OsStr], says: &str) {
    let o = bin().env(var, value).args(args).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{var}={value}: {}", stderr(&o));
    assert!(stderr(&o).contains(says), "{var}={value}: {}", stderr(&o));
}

/// Every result file under `dir` but `perf.json` (which holds wall times), as sorted
/// paths relative to `dir`.
pub fn result_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap() {
            let e = e.unwrap().path();
            if e.is_dir() {
                stack.push(e);
            } else if e.file_name().is_some_and(|n| n != "perf.json") {
                v.push(e.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    v.sort();
    v
}

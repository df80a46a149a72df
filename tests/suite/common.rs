//! Helpers shared by the integration tests.
#![allow(dead_code)]

use doorbell::scenario::{parse_str, Overrides, Scenario};
use doorbell::sim::RunOutput;

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

/// Flow completion time of flow `flow`, picoseconds.
pub fn fct_ps(out: &RunOutput, flow: usize) -> u64 {
    let f = &out.flows[flow];
    f.finish.expect("flow completed").0 - f.def.start.0
}

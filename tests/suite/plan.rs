//! Capacity planning picks the cheapest passing candidate on cases whose answer is
//! known: four flows leaf to leaf under static d-mod-k routing collide on an uplink
//! unless there are at least as many spines as destinations (4), so only 4 or more
//! spines reach the four flows' 4 x 99.4 Gb/s.

use doorbell::plan::plan_str;
use doorbell::scenario::Overrides;

const BASE: &str = "topology: { leaves: 2, spines: 4, hosts_per_leaf: 4, host_link: { rate: 100Gbps, latency: 200ns } }
transport: { mode: raw }
routing: static
workload:
  - flows:
      - { src: 0, dst: 4, size: 4MB }
      - { src: 1, dst: 5, size: 4MB }
      - { src: 2, dst: 6, size: 4MB }
      - { src: 3, dst: 7, size: 4MB }
";

fn decide(plan: &str) -> (Option<usize>, Vec<bool>) {
    let p = plan_str(
        &format!("{BASE}{plan}"),
        "p.yaml",
        "p",
        &Overrides::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (choice, ev) = p.decide();
    let report = p.report(choice, &ev);
    assert!(report.contains("decision"), "{report}");
    (
        choice,
        ev.iter()
            .map(|e| e.as_ref().is_some_and(|e| e.pass))
            .collect(),
    )
}

#[test]
fn bisection_over_spines_finds_the_fewest_that_pass() {
    let (choice, _) = decide(
        "plan:
  targets: { goodput_min: 390Gbps }
  cost: { per_spine: 1000, per_link: 10 }
  candidates: [ { topology.spines: 1 }, { topology.spines: 2 }, { topology.spines: 3 }, { topology.spines: 4 }, { topology.spines: 6 } ]
",
    );
    assert_eq!(choice, Some(3), "4 spines");
}

#[test]
fn without_monotony_the_cheapest_passing_candidate_wins() {
    // Not only spine counts differ, so every candidate runs, cheapest first. The 2-spine
    // fabric is cheapest but collides; 8 spines of 50 Gb/s links avoid collisions but
    // halve every flow; 4 spines at 100 Gb/s is the cheapest that passes.
    let (choice, passed) = decide(
        "plan:
  targets: { goodput_min: 390Gbps }
  cost: { per_spine: 1000, per_link: 100 }
  candidates:
    - { topology.spines: 8, topology.fabric_link: { rate: 50Gbps, latency: 200ns } }
    - { topology.spines: 4 }
    - { topology.spines: 2 }
",
    );
    assert_eq!(choice, Some(1));
    assert!(!passed[2], "2 spines fail");
}

#[test]
fn a_target_nobody_meets_is_reported() {
    let (choice, passed) = decide(
        "plan:
  targets: { goodput_min: 500Gbps }
  candidates: [ { topology.spines: 2 }, { topology.fabric_link: { rate: 100Gbps, latency: 100ns } } ]
",
    );
    assert_eq!(choice, None);
    assert!(passed.iter().all(|p| !p));
}

#[test]
fn a_bad_plan_is_named() {
    let e = plan_str(
        &format!("{BASE}plan:\n  targets: {{ goodput_min: 3 }}\n  candidates: [ {{ topology.spines: 2 }} ]\n"),
        "p.yaml",
        "p",
        &Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(e.path, "plan.targets.goodput_min");
}

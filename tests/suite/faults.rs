//! Faults: loss rates where they are configured, and nowhere else.

use doorbell::scenario::{parse_str, Overrides};
use doorbell::sim::run;

#[test]
fn a_per_link_ber_corrupts_packets_at_the_analytic_rate_on_that_link_only() {
    // Raw transport, so each packet crosses each link once. Host 0 sends 20,000 packets to
    // host 1 and 20,000 to host 2 (one leaf). Only `leaf0->host1` has a bit error rate:
    // a 4122 B packet (32,976 bits) is corrupted with probability 1 - (1 - 1e-6)^32976 =
    // 3.24%. Binomial sd at n = 20,000 is 0.125 percentage points: 0.5 is four sigma.
    let sc = parse_str(
        "
topology:
  leaves: 1
  spines: 0
  hosts_per_leaf: 3
  host_link: { rate: 100Gbps, latency: 100ns }
transport: { mode: raw }
faults:
  links: [ { link: \"leaf0->host1\", ber: 1e-6 } ]
workload:
  - flows:
      - { src: 0, dst: 1, size: 81920000B }
      - { src: 0, dst: 2, size: 81920000B }
",
        "f.yaml",
        "f",
        &Overrides::default(),
    )
    .unwrap();
    let out = run(&sc);
    let p = 1.0 - (1.0f64 - 1e-6).powi(4122 * 8);
    let to1 = &out.flows[0];
    let lost = to1.packets_dropped as f64 / to1.packets_sent as f64;
    assert_eq!(to1.packets_sent, 20_000);
    assert!(
        (lost - p).abs() < 0.005,
        "lost {lost:.4} vs 1 - (1 - BER)^bits = {p:.4}"
    );
    assert_eq!(out.flows[1].packets_dropped, 0, "the other link is clean");
    assert_eq!(out.faults.corrupted, to1.packets_dropped as u64);
}

#[test]
fn tier_drop_probability_applies_to_its_tier() {
    // drop_probability 1% on leaf_to_spine only: a cross-leaf flow loses about 1% of its
    // packets (sd 0.07 points at n = 20,000; 0.3 points is four sigma), a same-leaf flow
    // none.
    let sc = parse_str(
        "
topology:
  leaves: 2
  spines: 1
  hosts_per_leaf: 2
  host_link: { rate: 100Gbps, latency: 100ns }
transport: { mode: raw }
faults:
  tiers: { leaf_to_spine: { drop_probability: 0.01 } }
workload:
  - flows:
      - { src: 0, dst: 2, size: 81920000B }
      - { src: 1, dst: 0, size: 81920000B }
",
        "f.yaml",
        "f",
        &Overrides::default(),
    )
    .unwrap();
    let out = run(&sc);
    let cross = &out.flows[0];
    let lost = cross.packets_dropped as f64 / cross.packets_sent as f64;
    assert!((lost - 0.01).abs() < 0.003, "{lost}");
    assert_eq!(out.flows[1].packets_dropped, 0);
    assert_eq!(out.faults.random_drops, cross.packets_dropped as u64);
}

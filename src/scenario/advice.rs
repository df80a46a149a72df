//! Settings that are valid but give figures a user may misread: each becomes a
//! `warning:` line when the scenario is run or validated, or a sweep or plan runs a
//! point that earns it (once, with how many points), and the run goes on.
//!
//! - Spraying or adaptive routing over plain (in-order) RC. Both policies send a flow's
//!   packets over different paths, so packets overtake one another; plain RC takes every
//!   packet past a gap for a loss (a sequence-error NAK, then go-back-N; IBTA vol. 1
//!   §9.7.5.2.2), so the resends, not the routing, decide the figure. NICs built for
//!   adaptive routing place packets out of order (ConnectX under InfiniBand AR and
//!   Spectrum-X; IRN, SIGCOMM 2018), which is `transport.rc.out_of_order: true`.
//!   Measured (issue 17, stop 48): websearch-128 under IB credits, adaptive routing over
//!   plain RC delivered 513 Gb/s in its first 2 ms against ECMP's 3,286 Gb/s, and 4,208
//!   Gb/s with out-of-order RC; a planner comparing policies without it would conclude
//!   that adaptive routing is five times worse.
//!
//! Leaves out: settings the resolver refuses (those are errors, exit 2).

use super::{Scenario, Transport};
use crate::routing::Routing;

/// The warnings `sc` earns, one sentence each, naming the compare set where it has
/// sets (each set is a run of its own).
pub fn advisories(sc: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    if sc.compare.is_empty() {
        let ooo = match &sc.transport {
            Transport::Rc(rc) => Some(rc.params.out_of_order.is_some()),
            Transport::Raw => None,
        };
        reordering(sc.routing.policy, ooo, None, &mut out);
    } else {
        for set in &sc.compare {
            let ooo = Some(set.rc.params.out_of_order.is_some());
            reordering(set.routing.policy, ooo, Some(&set.name), &mut out);
        }
    }
    out
}

/// The warnings a sweep's points or a plan's candidates earn, each once, with how many
/// of the `scenarios` earn it, in the order first earned.
pub fn across(scenarios: impl IntoIterator<Item = Scenario>) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for sc in scenarios {
        for w in advisories(&sc) {
            match out.iter_mut().find(|(x, _)| *x == w) {
                Some((_, n)) => *n += 1,
                None => out.push((w, 1)),
            }
        }
    }
    out
}

/// Spraying or adaptive routing over in-order RC (`out_of_order`: `None` without RC).
fn reordering(
    policy: Routing,
    out_of_order: Option<bool>,
    set: Option<&str>,
    out: &mut Vec<String>,
) {
    if !matches!(policy, Routing::Spray | Routing::Adaptive) || out_of_order != Some(false) {
        return;
    }
    let name = policy.name();
    let (at, fix) = match set {
        Some(s) => (
            format!("compare set `{s}`: "),
            "`out_of_order: true` to the set",
        ),
        None => (String::new(), "`transport: { rc: { out_of_order: true } }`"),
    };
    out.push(format!(
        "{at}routing `{name}` over plain (in-order) RC: packets that overtake others are taken \
         for losses and resent (go-back-N), so goodput and completion times reflect the \
         resends, not the routing (websearch-128 under adaptive routing: a fifth of ECMP's \
         goodput). NICs that run adaptive routing place packets out of order: add {fix}"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{parse_str, Overrides};

    fn scenario(extra: &str) -> Scenario {
        let yaml = format!(
            "name: t\ntopology: {{ leaves: 2, spines: 2, hosts_per_leaf: 2, host_link: {{ rate: 100Gbps, latency: 1us }} }}\n{extra}\nworkload:\n  - permutation: {{ size: 1MB }}\n"
        );
        parse_str(&yaml, "t.yaml", "t", &Overrides::default()).expect("a valid scenario")
    }

    #[test]
    fn spraying_or_adaptive_routing_over_plain_rc_is_warned_of() {
        for policy in ["spray", "adaptive"] {
            let w = advisories(&scenario(&format!("routing: {policy}")));
            assert_eq!(w.len(), 1, "{policy}: {w:?}");
            assert!(w[0].contains(&format!("routing `{policy}`")), "{}", w[0]);
            assert!(w[0].contains("out_of_order: true"), "{}", w[0]);
            // Out-of-order RC, or a policy that keeps a flow on one path: nothing.
            let ooo = format!("routing: {policy}\ntransport: {{ rc: {{ out_of_order: true }} }}");
            assert!(advisories(&scenario(&ooo)).is_empty(), "{policy}");
        }
        for policy in ["ecmp", "static", "flowlet"] {
            assert!(advisories(&scenario(&format!("routing: {policy}"))).is_empty());
        }
        // Raw transport has no RC to resend.
        assert!(advisories(&scenario("routing: spray\ntransport: { mode: raw }")).is_empty());
    }

    #[test]
    fn many_runs_earn_each_warning_once_with_a_count() {
        let runs =
            ["spray", "ecmp", "spray", "adaptive"].map(|p| scenario(&format!("routing: {p}")));
        let w = across(runs);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].0.contains("routing `spray`") && w[0].1 == 2, "{w:?}");
        assert!(
            w[1].0.contains("routing `adaptive`") && w[1].1 == 1,
            "{w:?}"
        );
        assert!(across([scenario("routing: ecmp")]).is_empty());
    }

    #[test]
    fn each_compare_set_is_judged_on_its_own() {
        let sc = scenario(
            "compare:\n  - { name: ecmp }\n  - { name: spray_plain, routing: spray }\n  - { name: spray_ooo, routing: spray, out_of_order: true }",
        );
        let w = advisories(&sc);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("compare set `spray_plain`: routing `spray`"),
            "{}",
            w[0]
        );
        assert!(
            w[0].ends_with("add `out_of_order: true` to the set"),
            "{}",
            w[0]
        );
    }
}

//! The end-of-run checks (`metrics::invariants`) and the validation that keeps runs
//! within them: each rule fires on a run made to break it, stalls carry their reason,
//! and inputs that could only stall or run past the clock are refused.

use crate::common::{rejected, scenario};
use doorbell::metrics::summarize;
use doorbell::sim::run;
use doorbell::units::{SimDuration, SimTime};

const PAIR: &str = "
topology: { leaves: 2, spines: 1, hosts_per_leaf: 2, host_link: { rate: 100Gbps } }
flow_control: { mode: pfc }
workload:
  - flows: [{ src: 0, dst: 2, size: 64KiB }, { src: 1, dst: 3, size: 64KiB }]
";

fn rules(s: &doorbell::metrics::Summary) -> Vec<&'static str> {
    s.invariants.violations.iter().map(|v| v.rule).collect()
}

/// A clean run holds every rule; each tampering breaks exactly the rule it targets.
#[test]
fn each_rule_fires_on_a_run_that_breaks_it() {
    let sc = scenario(PAIR);
    let out = run(&sc);
    let s = summarize(&sc, &out);
    assert!(s.invariants.held(), "{:?}", s.invariants.violations);
    assert_eq!(s.invariants.checked.len(), 8);

    let mut o = run(&sc);
    o.ports[0].drops[0] = 3;
    assert_eq!(rules(&summarize(&sc, &o)), ["lossless_no_drop"]);

    let mut o = run(&sc);
    o.flows[1].delivered += 1;
    assert_eq!(rules(&summarize(&sc, &o)), ["delivered_within_size"]);

    let mut o = run(&sc);
    let f = &mut o.flows[0];
    f.finish = Some(SimTime(f.def.start.0 + f.ideal.0 - 1));
    f.landed = f.landed.min(f.finish);
    assert_eq!(rules(&summarize(&sc, &o)), ["fct_at_least_ideal"]);

    let mut o = run(&sc);
    let f = &mut o.flows[0];
    f.landed = f.finish.map(|t| t + SimDuration(1));
    assert_eq!(rules(&summarize(&sc, &o)), ["landed_before_finish"]);
    o.flows[0].landed = None;
    assert_eq!(rules(&summarize(&sc, &o)), ["landed_before_finish"]);

    let mut o = run(&sc);
    o.flows[0].finish = Some(o.end + SimDuration(1));
    assert_eq!(rules(&summarize(&sc, &o)), ["finish_within_run"]);

    let mut o = run(&sc);
    o.stalled = true;
    o.flows[0].outcome = doorbell::sim::Outcome::Pending;
    assert_eq!(rules(&summarize(&sc, &o)), ["stall_has_reason"]);

    let mut o = run(&sc);
    o.horizon_reached = true;
    assert_eq!(rules(&summarize(&sc, &o)), ["time_within_horizon"]);

    let mut o = run(&sc);
    o.livelock = true;
    assert_eq!(rules(&summarize(&sc, &o)), ["time_advances"]);
}

/// A raw-transport run that loses packets stalls, and says why for each flow.
#[test]
fn a_stall_names_its_reason() {
    let sc = scenario(
        "
topology: { leaves: 1, spines: 0, hosts_per_leaf: 4, host_link: { rate: 100Gbps } }
transport: { mode: raw }
faults: { ber: 1e-7 }
workload:
  - flows: [{ src: 0, dst: 1, size: 4MiB }, { src: 2, dst: 3, size: 4MiB }]
",
    );
    let out = run(&sc);
    let s = summarize(&sc, &out);
    assert!(s.stalled);
    assert!(s.invariants.held(), "{:?}", s.invariants.violations);
    assert_eq!(s.invariants.stalls.len(), 2);
    for st in &s.invariants.stalls {
        assert_eq!(
            st.reason,
            "a packet of it was lost and bare packets are never resent"
        );
    }
}

/// Regressions from issue 19's fuzz: `ack_every` above `window_packets` deadlocked
/// without any loss (a 1 MB flow took 128.8 s of timeouts); a long stream ran the
/// picosecond clock past its end.
#[test]
fn inputs_that_could_only_stall_or_overflow_are_refused() {
    let base = "
topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 1Gbps } }
transport: { rc: { window_packets: 4, ack_every: 8 } }
workload:
  - flows: [{ src: 0, dst: 1, size: 1MB }]
";
    let e = rejected(base);
    assert!(
        e.contains("transport.rc.ack_every: ack_every 8 is above window_packets 4")
            && e.contains("use at most 4"),
        "{e}"
    );
    scenario(&base.replace("ack_every: 8", "ack_every: 4"));
    // 20 million 1 MiB messages (256 packets of 26 B overhead each) at 1 Gb/s: 168,837 s.
    let e = rejected(
        &base
            .replace(
                "flows: [{ src: 0, dst: 1, size: 1MB }]",
                "stream: { src: 0, dst: 1, size: 1MiB, count: 20000000 }",
            )
            .replace("ack_every: 8", "ack_every: 1"),
    );
    assert!(
        e.contains("workload[0]: the stream's messages take at least 168837 s at 1Gbps after the start; a run may last at most a simulated day"),
        "{e}"
    );
}

/// A SEND with no receive WQE ever posted and rnr_retry 7 (retry forever) ran until it
/// was killed (issue 15): refused, with exit 2 on the command line. With finite RNR
/// retries the flow fails cleanly instead, and a depth of one runs to completion.
#[test]
fn a_send_that_could_never_complete_is_refused() {
    let base = "
topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 100Gbps } }
transport: { rc: { operation: send, recv_queue_depth: DEPTH, rnr_retry: RETRY } }
workload:
  - flows: [ { src: 0, dst: 1, size: 64KB } ]
";
    let yaml = |depth: &str, retry: &str| base.replace("DEPTH", depth).replace("RETRY", retry);
    let e = rejected(&yaml("0", "7"));
    assert!(
        e.contains("transport.rc.recv_queue_depth: a SEND needs a receive WQE"),
        "{e}"
    );
    let sc = scenario(&yaml("0", "3"));
    let s = summarize(&sc, &run(&sc));
    assert_eq!(s.flows.failed, 1, "RNR retries run out");
    let sc = scenario(&yaml("1", "7"));
    let s = summarize(&sc, &run(&sc));
    assert_eq!(s.flows.completed, 1);
}

/// The watchdog (issue 15, item 4): a run whose only events left are timers, with
/// nothing to come that could move work, is stopped once no payload has moved for its
/// bound, and each pending flow is named with its queue pair's state. The case is the
/// one validation refuses above (a SEND that meets an empty receive queue with
/// rnr_retry 7: RNR NAKs and retries for ever, IBTA 9.7.5.2.8), built past validation
/// to stand for any path to such a loop that validation does not foresee. Without the
/// watchdog it ran to the clock's horizon (100 simulated days: hours of wall time).
#[test]
fn the_watchdog_stops_a_run_that_only_retries_and_names_why() {
    let yaml = "
topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 100Gbps } }
transport: { rc: { operation: send, recv_queue_depth: 1, rnr_retry: 7, min_rnr_timer: 12 } }
workload:
  - flows: [ { src: 0, dst: 1, size: 64KB } ]
";
    let starved = |yaml: &str| {
        let mut sc = scenario(yaml);
        match &mut sc.transport {
            doorbell::scenario::Transport::Rc(rc) => rc.recv_queue_depth = 0,
            doorbell::scenario::Transport::Raw => unreachable!(),
        }
        sc
    };
    // The default bound at NCCL's timeout 20 and retry_cnt 7: 2 x 8 x 4.295 s = 68.72 s.
    let sc = starved(yaml);
    let out = run(&sc);
    let w = out.watchdog.expect("the watchdog stops the run");
    assert_eq!(w.bound, SimDuration(2 * 8 * (4_096_000 << 20)));
    // Nothing moved from the start; it stops at its first look past the bound, within
    // one look's worth of events (2^20 events of about 4 per 0.64 ms RNR round: 168 s).
    assert_eq!(w.since, SimTime::ZERO);
    let at = w.at.0 as f64 / 1e12;
    assert!((68.72..68.72 + 170.0).contains(&at), "stopped at {at} s");
    let s = summarize(&sc, &out);
    assert!(s.stalled && s.invariants.held(), "{:?}", s.invariants);
    assert_eq!(s.flows.completed, 0);
    let st = &s.invariants.stalls;
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].flow, Some(0));
    assert!(
        st[0]
            .reason
            .contains("RNR NAKs (rnr_retry 7 retries forever)")
            && st[0].reason.contains("0 of 64000 B delivered"),
        "{}",
        st[0].reason
    );
    let w = s.watchdog.as_ref().expect("summary.json says so");
    assert_eq!(w.bound_us, 68_719_476.736);
    // A bound of its own: stopped just past it.
    let sc = starved(&format!("watchdog: 20ms\n{yaml}"));
    let out = run(&sc);
    let w = out.watchdog.expect("stopped");
    let at = w.at.0 as f64 / 1e9;
    assert!((20.0..20.0 + 170_000.0).contains(&at), "stopped at {at} ms");
    // A flow still to start, far beyond the bound, is work to come: the run is not
    // stopped while it waits, and the late flow's own stall is caught after it starts.
    let late = yaml.replace(
        "size: 64KB } ]",
        "size: 64KB }, { src: 1, dst: 0, size: 64KB, start: 300s } ]",
    );
    let sc = starved(&format!("watchdog: 20ms\n{late}"));
    let out = run(&sc);
    let w = out.watchdog.expect("stopped");
    assert!(
        w.since.0 >= 300_000_000_000_000,
        "last progress {:?}",
        w.since
    );
    assert_eq!(out.flows[1].outcome, doorbell::sim::Outcome::Pending);
    // A healthy run is never stopped (nor is a dead link detected after 34.4 s of
    // timeouts: `reference::rc_dead_link` keeps rc-dead-link's results byte-identical).
    let sc = scenario(yaml);
    assert!(run(&sc).watchdog.is_none());
}

/// `watchdog` takes a positive duration.
#[test]
fn the_watchdog_bound_must_be_a_positive_duration() {
    let base = "
topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 100Gbps } }
workload:
  - flows: [ { src: 0, dst: 1, size: 64KB } ]
";
    let e = rejected(&format!("watchdog: 0s\n{base}"));
    assert!(e.contains("watchdog: expected a positive duration"), "{e}");
    let e = rejected(&format!("watchdog: 5\n{base}"));
    assert!(e.contains("watchdog") && e.contains("unit"), "{e}");
}

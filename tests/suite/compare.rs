//! Compare mode: the same traffic under several RC parameter sets.

use doorbell::compare::{compare_csv, run_sets, window_rows};
use doorbell::metrics::summarize;
use doorbell::scenario::{load, Overrides, Scenario};
use std::path::PathBuf;

fn shipped(name: &str) -> Scenario {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    load(
        &root.join(format!("scenarios/{name}.yaml")),
        &Overrides::default(),
    )
    .unwrap()
}

#[test]
fn sets_see_the_same_traffic_and_differ_only_by_their_parameters() {
    let sc = shipped("rc-tuning");
    let sets = run_sets(&sc);
    assert_eq!(sets.len(), 6);
    let defs = |s: &doorbell::compare::SetResult| -> Vec<_> {
        s.out.flows.iter().map(|f| (f.def, f.ideal)).collect()
    };
    for s in &sets[1..] {
        assert_eq!(
            defs(&sets[0]),
            defs(s),
            "set {} saw different traffic",
            s.name
        );
    }
    // The set with no overrides is the scenario's own transport: the same run, to the byte.
    let plain = {
        let mut s = sc.clone();
        s.compare.clear();
        let out = doorbell::sim::run(&s);
        summarize(&s, &out)
    };
    let nccl = sets
        .iter()
        .find(|s| s.name == "nccl_default_lossy")
        .unwrap();
    assert_eq!(
        serde_json::to_string(&nccl.summary).unwrap(),
        serde_json::to_string(&plain).unwrap()
    );
    // And the parameters that differ show up in the table, one row per set.
    let csv = compare_csv(&sets);
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 6);
    for (row, want) in rows.iter().zip([
        "guide_default_lossy,2,2,lossy,none,18,7,7,128,",
        "guide_tuned_lossy,2,2,lossy,none,12,3,7,64,",
        "nccl_default_lossy,2,2,lossy,none,20,7,7,,",
        "guide_default_pfc,2,2,pfc,none,18,7,7,128,",
        "guide_tuned_pfc,2,2,pfc,none,12,3,7,64,",
        "nccl_default_pfc,2,2,pfc,none,20,7,7,,",
    ]) {
        assert!(row.starts_with(want), "{row}");
    }
}

#[test]
fn the_window_table_tracks_the_analytic_bound() {
    // credit-rtt: two flows on disjoint paths, 8 windows. Each measured goodput is within
    // 1% below min(line x payload share, W x MTU / RTT): the only departure is the
    // transfer's start (the first RTT, before the window is open) over a 16 MB transfer.
    let sets = run_sets(&shipped("credit-rtt"));
    let rows = window_rows(&sets);
    assert_eq!(rows.len(), 16);
    for r in &rows {
        let ratio = r.measured_gbps / r.analytic_gbps;
        assert!(
            (0.99..=1.0001).contains(&ratio),
            "{} flow {}: {} vs {}",
            r.set,
            r.flow,
            r.measured_gbps,
            r.analytic_gbps
        );
    }
    // Two hops need a longer RTT, hence a bigger window, than one.
    let one = rows.iter().find(|r| r.hops == 1).unwrap();
    let two = rows.iter().find(|r| r.hops == 3).unwrap();
    assert!(two.bdp_packets > 2.0 * one.bdp_packets);
}

#[test]
fn the_cost_of_a_lost_packet_is_one_timeout() {
    // rc-timeout-cost: the only packet of a message is lost; it is resent exactly one
    // local ACK timeout after it was first sent, so FCT = 4.096 us x 2^timeout + ideal.
    for s in run_sets(&shipped("rc-timeout-cost")) {
        let doorbell::scenario::Transport::Rc(rc) = &s.scenario.transport else {
            panic!()
        };
        let t = doorbell::transport::rc::local_ack_timeout(rc.params.timeout).unwrap();
        let f = &s.out.flows[0];
        let fct = f.finish.unwrap().since(f.def.start);
        assert_eq!(fct.ps(), t.ps() + f.ideal.ps(), "{}", s.name);
        assert_eq!(f.retransmissions, 1);
    }
}

#[test]
fn a_dead_link_is_detected_after_retry_cnt_plus_one_timeouts() {
    for s in run_sets(&shipped("rc-dead-link")) {
        let doorbell::scenario::Transport::Rc(rc) = &s.scenario.transport else {
            panic!()
        };
        let t = doorbell::transport::rc::local_ack_timeout(rc.params.timeout).unwrap();
        let summary = &s.summary;
        let r = summary.rc.as_ref().unwrap();
        assert_eq!(r.qp_errors, 1, "{}", s.name);
        assert_eq!(r.timeouts, rc.params.retry_cnt as u64 + 1, "{}", s.name);
        // The link dies at 20 us while the 4 MB message is being sent. The timer runs from
        // the last transmission, and each round (the first, then every retry) sends the
        // unacknowledged rest of the message again, which takes at most its own send time
        // (4 MB at 200 Gb/s = 161 us; 170 us with headers). So detection takes
        // (retry_cnt + 1) timeouts plus at most (retry_cnt + 1) x 170 us.
        let detect = doorbell::compare::detect_dead_link_us(&s.scenario, &s.out).unwrap();
        let rounds = rc.params.retry_cnt as f64 + 1.0;
        let floor = rounds * t.as_us_f64();
        assert!(
            detect >= floor && detect <= floor + rounds * 170.0,
            "{}: {detect} us vs {floor} us",
            s.name
        );
    }
}

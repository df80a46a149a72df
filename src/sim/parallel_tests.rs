//! Unit tests of `sim::parallel`: what a split covers, the receive-posting delay it
//! takes, and the cores shared by runs side by side.

use super::*;

/// Scenarios the split does not cover say why; one that it does gets no more
/// partitions than it has leaves or spines.
#[test]
fn what_runs_on_one_thread_says_why() {
    let yaml = |extra: &str| {
        format!(
            "name: t\ntopology: {{ leaves: 4, spines: 2, hosts_per_leaf: 2, \
             host_link: {{ rate: 100Gbps, latency: 1us }}, \
             fabric_link: {{ rate: 100Gbps, latency: 1us }} }}\n\
             workload:\n  - permutation: {{ size: 1MB }}\n{extra}"
        )
    };
    let load =
        |y: String| crate::scenario::parse_str(&y, "t.yaml", "t", &Default::default()).unwrap();
    assert_eq!(plan_threads(&load(yaml("")), 8), Ok(2));
    assert_eq!(plan_threads(&load(yaml("")), 1), Ok(1));
    // A collective item joins the permutation: rings and trees split (with several
    // queue pairs a connection too), other algorithms do not.
    let coll = |more: &str| {
        format!("  - collective: {{ op: allreduce, algorithm: ring, size: 1MiB{more} }}\n")
    };
    assert_eq!(plan_threads(&load(yaml(&coll(""))), 2), Ok(2));
    let qps = coll(", qps_per_connection: 2, split_data_on_qps: true");
    assert_eq!(plan_threads(&load(yaml(&qps)), 2), Ok(2));
    let tree = coll("").replace("ring", "tree");
    assert_eq!(plan_threads(&load(yaml(&tree)), 2), Ok(2));
    let cases = [
        (
            "transport: { rc: { operation: read } }\n".to_string(),
            "READ",
        ),
        (
            coll("").replace("ring", "hierarchical"),
            "other than rings and trees",
        ),
    ];
    for (extra, why) in cases {
        let e = plan_threads(&load(yaml(&extra)), 2).unwrap_err();
        assert!(e.contains(why), "{extra}: {e}");
    }
}

/// A receive-posting delay splits when the responder's partition can hear of it in
/// time: no shorter than the lookahead (here the 1 us links).
#[test]
fn a_receive_posting_delay_splits_from_the_lookahead() {
    let sc = |delay: &str| {
        let y = format!(
            "name: t\ntopology: {{ leaves: 2, spines: 2, hosts_per_leaf: 2, \
             host_link: {{ rate: 100Gbps, latency: 1us }}, \
             fabric_link: {{ rate: 100Gbps, latency: 1us }} }}\n\
             transport: {{ rc: {{ operation: send, recv_post_delay: {delay}, \
             min_rnr_timer: 1 }} }}\n\
             workload:\n  - permutation: {{ size: 100KB }}\n"
        );
        crate::scenario::parse_str(&y, "t.yaml", "t", &Default::default()).unwrap()
    };
    let e = run(&sc("999ns"), 2, 0).err();
    assert_eq!(
        e,
        Some("a receive-posting delay shorter than the lookahead")
    );
    assert_eq!(run(&sc("1us"), 2, 0).expect("split").threads, 2);
    // Longer than a path (2-4 us): the first SENDs are RNR-NAKed.
    let split = run(&sc("10us"), 2, 0).expect("split");
    let one = Sim::new(&sc("10us")).run();
    assert!(
        one.rc.unwrap().rnr_naks > 0,
        "SENDs met empty receive queues"
    );
    // The same flows (their queue-pair slots are each partition's own).
    let seen = |o: &RunOutput| -> Vec<_> {
        o.flows
            .iter()
            .map(|f| (f.delivered, f.retransmissions, f.landed, f.finish))
            .collect()
    };
    assert_eq!(seen(&one), seen(&split));
    assert_eq!(one.rc.unwrap().rnr_naks, split.rc.unwrap().rnr_naks);
}

#[test]
fn runs_side_by_side_share_the_cores() {
    // One run keeps what was asked, even beyond the cores.
    assert_eq!(threads_per_run(4, 1, 2), 4);
    assert_eq!(threads_per_run(2, 1, 16), 2);
    // 4 sets at once on 16 cores: 4 threads each; on 8 cores, 2.
    assert_eq!(threads_per_run(8, 4, 16), 4);
    assert_eq!(threads_per_run(8, 4, 8), 2);
    // Fewer threads asked than the share: as asked.
    assert_eq!(threads_per_run(2, 4, 64), 2);
    // More runs at once than cores: one thread each, never none.
    assert_eq!(threads_per_run(4, 3, 2), 1);
    assert_eq!(threads_per_run(0, 3, 2), 1);
}

/// A partition whose next event lies past the run's duration (host 0's stale local ACK
/// timer, 4.3 s away) while another partition still has work for it (host 5's flow to
/// host 1, from 50 us) takes its samples up to the end only when every partition is
/// past it: before, it took them at the first window it had no event in, and the time
/// series of `leaf0->host1` missed the second flow (its queue at 52 us 0 bytes instead
/// of 20,610).
#[test]
fn a_partition_past_the_duration_samples_what_later_mail_does() {
    let sc = crate::scenario::parse_str(
        "name: t\nseed: 1\nduration: 1ms\n\
         topology: { leaves: 2, spines: 2, hosts_per_leaf: 4, \
         host_link: { rate: 400Gbps, latency: 100ns }, \
         fabric_link: { rate: 400Gbps, latency: 300ns } }\n\
         transport: { mode: rc }\n\
         timeseries: { interval: 1us, ports: [\"leaf0->host1\"] }\n\
         workload:\n  - flows: [ { src: 0, dst: 4, size: 64KB }, \
         { src: 5, dst: 1, size: 64KB, start: 50us } ]\n",
        "t.yaml",
        "t",
        &Default::default(),
    )
    .unwrap();
    let one = Sim::new(&sc).run();
    let split = run(&sc, 2, 0).expect("split over two threads");
    assert_eq!(split.threads, 2);
    // The second flow's packets queue at leaf0->host1 (the case tests what it says).
    assert!(
        one.samples
            .iter()
            .any(|s| s.metric == crate::sim::Metric::QueueBytes && s.value > 0.0),
        "no queue at leaf0->host1"
    );
    assert_eq!(one.samples, split.samples);
}

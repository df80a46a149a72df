//! A host's port that starts a packet with nothing else to send marks no event for its
//! end (`launch`, `Sim::settle_tx`): every result but the event count is the one that
//! an event at each end gives, under PFC pauses that reach the NICs, IB credits, a host
//! model's collective, a time series of host ports and a run cut short by `duration`.
//! Likewise a host's port keeps the IB credits on their way back to it, with an event
//! only while it waits for them (`Sim::take_credits`): the results of an event per
//! return, with fewer events. And a send's NIC side computed at its hand-off
//! (`components::host_nic_side`): the results of its steps, with fewer events, or the
//! steps themselves when a NIC's read slots could have made a read wait.

use super::Sim;
use crate::metrics::{summarize, Summary};
use crate::scenario::Scenario;

/// What a run leaves that the event count does not: its summary (events zeroed), its
/// time-series samples, and each port's packets and bytes sent, time paused and time
/// waiting for IB credit.
type Results = (Summary, Vec<String>, Vec<(u64, u64, u64, u64)>);

fn parse(yaml: &str) -> Scenario {
    crate::scenario::parse_str(yaml, "t.yaml", "t", &Default::default())
        .unwrap_or_else(|e| panic!("{yaml}: {e}"))
}

/// The run of `sc`, each end of a host's packet an event (`eager`) or not; and its
/// event count.
fn results(sc: &Scenario, eager: bool) -> (Results, u64) {
    run_with(sc, |sim| sim.mark_every_tx_end = eager)
}

/// The run of `sc` set up by `set`; its results and event count.
fn run_with(sc: &Scenario, set: impl FnOnce(&mut Sim)) -> (Results, u64) {
    let mut sim = Sim::new(sc);
    set(&mut sim);
    let out = sim.run();
    let mut summary = summarize(sc, &out);
    let events = std::mem::take(&mut summary.events);
    let samples = out.samples.iter().map(|s| format!("{s:?}")).collect();
    let ports = out
        .ports
        .iter()
        .map(|p| {
            let end = out.end;
            (
                p.tx_packets,
                p.tx_bytes,
                p.paused_time(end),
                p.stalled_time(end),
            )
        })
        .collect();
    ((summary, samples, ports), events)
}

/// Runs `yaml` both ways: the same results. Returns them, and the event counts
/// without the marks and with them.
fn same_results(yaml: &str) -> (Results, u64, u64) {
    let sc = parse(yaml);
    let (unmarked, fewer) = results(&sc, false);
    let (marked, all) = results(&sc, true);
    assert_eq!(unmarked.0, marked.0, "summary.json but its events differ");
    assert_eq!(unmarked.1, marked.1, "the time series differ");
    assert_eq!(unmarked.2, marked.2, "a port's counters differ");
    (unmarked, fewer, all)
}

/// The same, where some end is left unmarked.
fn same_but_fewer_events(yaml: &str) -> Results {
    let (results, fewer, all) = same_results(yaml);
    assert!(
        fewer < all,
        "{fewer} events without the marks, {all} with them: none was left out"
    );
    results
}

/// Fifteen senders into one host under PFC with a small buffer: the leaves pause the
/// senders' NICs while they send data, and a time series reads the receiver's port (its
/// ACKs) and a sender's every 100 ns.
const PFC_INCAST: &str = "name: t\nseed: 1\n\
    topology: { leaves: 2, spines: 2, hosts_per_leaf: 8, \
    host_link: { rate: 100Gbps, latency: 200ns }, fabric_link: { rate: 100Gbps, latency: 500ns } }\n\
    switch: { latency: 300ns, buffer: 1MiB }\n\
    flow_control: { mode: pfc }\n\
    timeseries: { interval: 100ns, ports: [\"host0->leaf0\", \"host9->leaf1\"] }\n\
    workload:\n  - incast: { senders: 15, receiver: 0, size: 256KB, start: 0us }\n";

#[test]
fn unmarked_ends_under_pfc_pauses_and_a_time_series_change_nothing_but_the_event_count() {
    let (_, samples, ports) = same_but_fewer_events(PFC_INCAST);
    // The pauses reached the senders' NICs (their ends are then marked: `on_pfc`).
    assert!(
        ports[1..16].iter().any(|p| p.2 > 0),
        "no NIC was paused: the case does not test what it says"
    );
    assert!(!samples.is_empty());
}

#[test]
fn a_run_cut_by_its_duration_counts_only_the_ends_it_reached() {
    // Cut while the incast is sending: an unmarked end after the cut is not counted.
    let cut = PFC_INCAST.replace("seed: 1\n", "seed: 1\nduration: 7us\n");
    let (summary, _, ports) = same_but_fewer_events(&cut);
    assert!(summary.stopped_by_duration, "the run was not cut");
    assert!(ports[1..16].iter().any(|p| p.0 > 0));
}

#[test]
fn unmarked_ends_under_ib_credits_and_a_host_models_ring_change_nothing_but_the_event_count() {
    same_but_fewer_events(
        "name: t\nseed: 1\n\
         topology: { leaves: 2, spines: 2, hosts_per_leaf: 4, \
         host_link: { rate: 400Gbps, latency: 100ns }, fabric_link: { rate: 400Gbps, latency: 300ns } }\n\
         switch: { latency: 300ns, forwarding: cut_through }\n\
         packet: { mtu: 4096B, encapsulation: ib }\n\
         flow_control: { mode: ib_credit }\n\
         host: { gpus_per_host: 2, nics_per_host: 2, wiring: rail, posting: cpu_proxy, memory: gpu }\n\
         workload:\n  - collective: { op: allreduce, algorithm: ring, size: 1MiB, iters: 2, \
         warmup_iters: 1, channels: 2 }\n",
    );
}

#[test]
fn an_end_left_unmarked_is_counted_at_the_end_of_a_run_only_if_the_run_reached_it() {
    // One 4 KB message over 10 Gb/s links: its one packet is on the sender's port for
    // about 3.3 us, and the responder's ACK is the last packet its port sends, with
    // nothing behind it.
    let one = "name: t\nseed: 1\n\
        topology: { leaves: 2, spines: 1, hosts_per_leaf: 2, \
        host_link: { rate: 10Gbps, latency: 200ns }, fabric_link: { rate: 10Gbps, latency: 500ns } }\n\
        workload:\n  - flows: [ { src: 0, dst: 2, size: 4KB } ]\n";
    let (whole, _, ports) = same_but_fewer_events(one);
    assert!(!whole.stopped_by_duration);
    assert_eq!(
        (ports[0].0, ports[2].0),
        (1, 1),
        "the data packet and its ACK"
    );
    // Without a transport the sender has nothing behind its packet either; cut at
    // 2 us, the packet's end is past the run's, and only the flow's start is handled.
    let cut = one.replace(
        "seed: 1\n",
        "seed: 1\nduration: 2us\ntransport: { mode: raw }\n",
    );
    let ((summary, _, ports), fewer, all) = same_results(&cut);
    assert_eq!((fewer, all), (1, 1));
    assert!(summary.stopped_by_duration);
    assert_eq!(
        ports[0].0, 0,
        "a packet still on the port at the cut is not counted"
    );
}

/// Two hosts each send to three others under IB credits with room for two 4 KiB
/// packets and a slow credit update, so that their ports wait for credit again and
/// again: the run with credits kept on their way back, and with an event per return
/// (`eager`).
fn credit_results(eager: bool) -> (Results, u64) {
    let sc = parse(
        "name: t\nseed: 1\n\
         topology: { leaves: 2, spines: 2, hosts_per_leaf: 4, \
         host_link: { rate: 400Gbps, latency: 100ns }, fabric_link: { rate: 400Gbps, latency: 300ns } }\n\
         switch: { latency: 300ns, forwarding: cut_through }\n\
         packet: { mtu: 4096B, encapsulation: ib }\n\
         flow_control: { mode: ib_credit, vl_buffer: 9KiB, credit_update_delay: 400ns }\n\
         workload:\n  - flows: [ { src: 0, dst: 4, size: 64KB }, { src: 0, dst: 5, size: 40KB }, \
         { src: 0, dst: 1, size: 24KB }, { src: 3, dst: 6, size: 64KB }, \
         { src: 3, dst: 2, size: 32KB, start: 1us }, { src: 3, dst: 7, size: 8KB, start: 2us } ]\n",
    );
    run_with(&sc, |sim| sim.credit_event_per_return = eager)
}

#[test]
fn credits_kept_on_their_way_back_to_a_hosts_port_change_nothing_but_the_event_count() {
    let (kept, fewer) = credit_results(false);
    let (heard, all) = credit_results(true);
    assert_eq!(kept.0, heard.0, "summary.json but its events differ");
    assert_eq!(
        kept.2, heard.2,
        "a port's counters or its time waiting for credit differ"
    );
    // The senders' ports (hosts 0 and 3) waited for credit: the case tests what it says.
    let stalled = |h: usize| kept.2[h].3;
    assert!(
        stalled(0) > 0 && stalled(3) > 0,
        "the senders' ports never waited for credit: {:?}",
        kept.2
    );
    assert!(
        fewer < all,
        "{fewer} events keeping the credits, {all} with an event each: none was left out"
    );
}

/// A time series at a fine interval over a run whose last event is a queue pair's stale
/// local ACK timer, 67 ms after the workload is done (`timeout: 14`): the samples past
/// the workload's end, which the end of the run cuts, are not taken (before, all 67
/// thousand intervals were sampled and held first: with the default timeout, 4.3 s,
/// a 50 ns interval held 6 GiB). The samples kept are the same either way, and the same
/// split over two threads, whose partitions say at the meeting before the gap which
/// flows they saw resolved (before, a split run sampled the whole gap: a 1 us interval
/// and the default timeout held 2.9 GB).
#[test]
fn a_time_series_stops_where_the_run_would_cut_it() {
    let yaml = "name: t\nseed: 1\n\
        topology: { leaves: 2, spines: 2, hosts_per_leaf: 4, \
        host_link: { rate: 400Gbps, latency: 100ns }, fabric_link: { rate: 400Gbps, latency: 300ns } }\n\
        transport: { mode: rc, rc: { timeout: 14 } }\n\
        timeseries: { interval: 1us, ports: [\"host0->leaf0\", \"leaf0->spine0#0\"], flows: [0, 1] }\n\
        workload:\n  - flows: [ { src: 0, dst: 4, size: 64KB }, { src: 3, dst: 6, size: 32KB, start: 2us }, \
        { src: 5, dst: 1, size: 128KB } ]\n";
    let sc = parse(yaml);
    let one = Sim::new(&sc).run();
    let split = super::parallel::run(&sc, 2, 0).expect("split over two threads");
    assert_eq!(split.threads, 2);
    assert_eq!(one.samples, split.samples, "the samples kept");
    for (out, how) in [(&one, "one thread"), (&split, "two threads")] {
        let kept = out.samples.len();
        assert!(kept > 0, "{how}: no samples");
        let last = out.samples.iter().map(|s| s.time).max().unwrap();
        assert!(
            last.0 < 20_000_000,
            "{how}: samples up to {last}: past the workload's end"
        );
        // What was taken: `retain` keeps the peak's capacity, and so does the split's
        // merge (the first partition's vector).
        assert!(
            out.samples.capacity() < 20 * kept,
            "{how}: {} samples held for {kept} kept",
            out.samples.capacity()
        );
    }
}

/// A 2 x 2 server ring allreduce under the host model (NCCL's proxy, GPU memory), and
/// `host` in its host section: its results with each send's NIC side computed at the
/// hand-off, and stepped (`unfold`); and the event counts.
fn nic_side_results(host: &str, extra: &str, unfold: bool) -> (Results, u64) {
    run_with(&nic_side_scenario(host, extra), |sim| {
        if unfold {
            sim.hostm.as_mut().expect("a host model").unfold_nic_side();
        }
    })
}

/// The scenario of [`nic_side_results`].
fn nic_side_scenario(host: &str, extra: &str) -> Scenario {
    parse(&format!(
        "name: t\nseed: 1\n{extra}\
         topology: {{ leaves: 2, spines: 2, hosts_per_leaf: 4, \
         host_link: {{ rate: 400Gbps, latency: 100ns }}, fabric_link: {{ rate: 400Gbps, latency: 300ns }} }}\n\
         switch: {{ latency: 300ns, forwarding: cut_through }}\n\
         packet: {{ mtu: 4096B, encapsulation: ib }}\n\
         flow_control: {{ mode: ib_credit }}\n\
         host: {{ gpus_per_host: 2, nics_per_host: 2, wiring: rail, memory: gpu, {host} }}\n\
         timeseries: {{ interval: 200ns, ports: [\"host0->leaf0\"], flows: [0] }}\n\
         workload:\n  - collective: {{ op: allreduce, algorithm: ring, size: 1MiB, iters: 2, \
         warmup_iters: 1, channels: 2 }}\n  - stream: {{ src: 1, dst: 6, size: 8KiB, count: 20 }}\n"
    ))
}

#[test]
fn a_sends_nic_side_computed_at_the_hand_off_changes_nothing_but_the_event_count() {
    for host in [
        "posting: cpu_proxy",
        "posting: cpu_gdr, completion: interrupt",
        "posting: gpu, gpu_posting_threads: 1, blueflame: true, inline_max: 64B",
    ] {
        // Whole, and cut while the first iteration's sends are on their way.
        for extra in ["", "duration: 9us\n"] {
            let (folded, fewer) = nic_side_results(host, extra, false);
            let (stepped, all) = nic_side_results(host, extra, true);
            assert_eq!(
                folded.0, stepped.0,
                "{host} {extra}: summary.json but its events differ"
            );
            assert_eq!(
                folded.1, stepped.1,
                "{host} {extra}: the time series differ"
            );
            assert_eq!(
                folded.2, stepped.2,
                "{host} {extra}: a port's counters differ"
            );
            assert_eq!(folded.0.stopped_by_duration, !extra.is_empty());
            assert!(
                fewer < all,
                "{host} {extra}: {fewer} events folded, {all} stepped"
            );
        }
    }
}

#[test]
fn a_nic_with_fewer_read_slots_than_sends_in_flight_runs_stepped() {
    // Twenty 8 KiB messages posted at once through one NIC (a WQE every 250 ns, each
    // holding a read slot for about a microsecond from its doorbell): two slots are
    // too few, and the run goes again with the steps, which it then is (the same
    // event count); 64 are enough.
    let host = "posting: cpu_proxy, nic: { max_outstanding_reads: 2 }";
    let (again, events) = nic_side_results(host, "", false);
    let (stepped, all) = nic_side_results(host, "", true);
    assert_eq!(again.0, stepped.0);
    assert_eq!(again.1, stepped.1);
    assert_eq!(events, all, "the run went again stepped");
    // Split, a partition halts and the run goes on one thread, stepped at once.
    let sc = nic_side_scenario(host, "");
    assert_eq!(
        super::parallel::run(&sc, 2, 0).err(),
        Some(super::run_loop::READS_OVERFLOWED)
    );
    let (_, fewer) = nic_side_results("posting: cpu_proxy", "", false);
    let (_, all) = nic_side_results("posting: cpu_proxy", "", true);
    assert!(fewer < all);
}

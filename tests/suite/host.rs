//! The host and NIC model against what can be computed by hand: each test builds a case
//! whose answer follows from the configured costs (issue: "The NIC and its host").

use crate::common::{scenario, scenario_with};
use doorbell::metrics::summarize;
use doorbell::sim::{run, RunOutput, STAGES, T_DONE, T_START};

/// Two hosts on one leaf, 200 Gb/s; `extra` is appended (workload and host sections).
fn two_hosts(extra: &str) -> String {
    format!(
        "topology: {{ leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: {{ rate: 200Gbps, latency: 100ns }} }}
switch: {{ latency: 300ns, forwarding: cut_through }}
transport: {{ rc: {{ connections: per_host_pair, max_send_wr: 16384 }} }}
{extra}"
    )
}

/// End-to-end latency of every done message, ps.
fn latencies(out: &RunOutput) -> Vec<u64> {
    let h = out.host.as_ref().expect("host model");
    h.msgs
        .iter()
        .filter(|m| m.done())
        .map(|m| m.t[T_DONE] - m.t[T_START])
        .collect()
}

fn ping_pong_latency(extra_host: &str, size: &str, sets: &[&str]) -> u64 {
    let sc = scenario_with(
        &two_hosts(&format!(
            "workload: [ {{ ping_pong: {{ hosts: [0, 1], size: {size}, iterations: 3 }} }} ]\nhost: {{ {extra_host} }}"
        )),
        sets,
    );
    let out = run(&sc);
    let l = latencies(&out);
    assert_eq!(l.len(), 6, "every message of the ping-pong is done");
    // An idle fabric: every message takes the same time.
    assert!(l.iter().all(|&x| x == l[0]), "{l:?}");
    l[0]
}

/// The `cpu` path stages GPU data through host memory both ways: it costs exactly one
/// copy launch plus S / PCIe bandwidth more at each end than `cpu_gdr`.
#[test]
fn staging_copies_cost_launch_plus_bytes_over_pcie_each_way() {
    for size in [8u64, 65536, 1 << 20] {
        let s = format!("{size}B");
        let cpu = ping_pong_latency("posting: cpu, memory: gpu", &s, &[]);
        let gdr = ping_pong_latency("posting: cpu_gdr, memory: gpu", &s, &[]);
        // Defaults: copy launch 5 us, PCIe 400 Gb/s = 50 B/ns: S bytes take S x 20 ps.
        let copy = 5_000_000 + (size * 8 * 1_000_000_000_000).div_ceil(400_000_000_000);
        assert_eq!(
            cpu - gdr,
            2 * copy,
            "size {size}: cpu {cpu} ps, cpu_gdr {gdr} ps"
        );
    }
}

/// BlueFlame pushes the WQE with the doorbell: exactly one WQE fetch (a PCIe round trip
/// plus 64 B at PCIe bandwidth) less.
#[test]
fn blueflame_removes_one_wqe_fetch() {
    let plain = ping_pong_latency("posting: cpu_gdr", "64B", &[]);
    let bf = ping_pong_latency("posting: cpu_gdr, blueflame: true", "64B", &[]);
    let fetch = 800_000 + (64u64 * 8 * 1_000_000_000_000).div_ceil(400_000_000_000);
    assert_eq!(plain - bf, fetch);
    // And with a different round trip, the saving follows it.
    let plain = ping_pong_latency("posting: cpu_gdr, pcie: { round_trip: 1us }", "64B", &[]);
    let bf = ping_pong_latency(
        "posting: cpu_gdr, blueflame: true, pcie: { round_trip: 1us }",
        "64B",
        &[],
    );
    assert_eq!(plain - bf, 1_000_000 + 1_280);
}

/// Stage by stage, a message's latency adds up to its end-to-end latency exactly, and
/// the `wire` stage ends when the last byte reaches the receiver (the flow's finish),
/// also under congestion, loss and interrupts.
#[test]
fn latency_breakdown_sums_exactly() {
    let sc = scenario(
        "topology: { leaves: 2, spines: 1, hosts_per_leaf: 4, host_link: { rate: 100Gbps, latency: 200ns } }
switch: { latency: 300ns, buffer: 1MiB }
faults: { drop_probability: 0.001 }
transport: { rc: { timeout: 8 } }
workload:
  - incast: { senders: 6, receiver: 0, size: 256KB }
  - ping_pong: { hosts: [1, 5], size: 4KB, iterations: 50 }
  - stream: { src: 2, dst: 6, size: 1KB, count: 500, interval: 100ns }
host: { posting: cpu, memory: gpu, completion: interrupt, doorbell_batch: 4 }",
    );
    let out = run(&sc);
    let h = out.host.as_ref().unwrap();
    let mut checked = 0;
    for (f, m) in out.flows.iter().zip(&h.msgs) {
        if !m.done() {
            continue;
        }
        let stages: u64 = (0..STAGES.len()).map(|k| m.t[k + 1] - m.t[k]).sum();
        assert_eq!(stages, m.t[T_DONE] - m.t[T_START]);
        assert_eq!(m.t[T_START], f.def.start.0, "latency starts with the flow");
        assert_eq!(m.t[6], f.landed.unwrap().0, "wire ends at the last byte");
        checked += 1;
    }
    assert_eq!(checked, out.flows.len(), "every message completed");
    // The summary's stage means add up to its mean latency (to its 4-decimal rounding).
    let s = summarize(&sc, &out).host.unwrap();
    let sum: f64 = s.breakdown.iter().map(|b| b.mean_us).sum();
    let mean = s.latency_us.unwrap().mean;
    assert!((sum - mean).abs() < 1e-3, "stages {sum} vs latency {mean}");
}

/// `gpu` mode: no CPU time and no interrupts, even with interrupts configured for the
/// CPU modes; the same traffic in `cpu_gdr` with interrupts has both.
#[test]
fn gpu_mode_has_no_cpu_and_no_interrupts() {
    let yaml = two_hosts(
        "workload: [ { stream: { src: 0, dst: 1, size: 4KB, count: 2000, interval: 1us } } ]
host: { posting: gpu, memory: gpu, completion: interrupt }",
    );
    let sc = scenario(&yaml);
    let s = summarize(&sc, &run(&sc)).host.unwrap();
    assert_eq!(s.messages, 2000);
    assert_eq!(s.interrupts, 0);
    assert_eq!(s.cpu_util.mean, 0.0);
    assert_eq!(s.cpu_util.max, 0.0);
    let sc = scenario_with(&yaml, &["host.posting=cpu_gdr"]);
    let s = summarize(&sc, &run(&sc)).host.unwrap();
    assert!(s.interrupts > 0 && s.cpu_util.max > 0.0);
}

/// Interrupts per second under moderation: min(completion rate, what `frames` allows
/// (rate / frames), what `usecs` allows (1 / usecs)), within 2%. Completions are the
/// receiver's (one per message) and the sender's (one per ACKed message), at the same
/// rate, so either host shows the figure.
#[test]
fn interrupt_rate_follows_moderation() {
    // (interval between messages, usecs, frames, expected interrupts/s)
    let cases: [(u64, u64, u32, f64); 3] = [
        // Sparse: every completion gets its own interrupt (completion rate).
        (50_000, 16, 32, 1e12 / 50_000_000.0),
        // Dense, frames bind: 5 M/s / 32.
        (200, 16, 32, 5e6 / 32.0),
        // Dense, usecs bind: 1 / 64 us.
        (500, 64, 1024, 1e6 / 64.0),
    ];
    for (interval_ns, usecs, frames, expected) in cases {
        let count = (20_000_000_000 / (interval_ns * 1000)).clamp(400, 40_000);
        let sc = scenario(&two_hosts(&format!(
            "workload: [ {{ stream: {{ src: 0, dst: 1, size: 64B, count: {count}, interval: {interval_ns}ns }} }} ]
host: {{ posting: cpu_gdr, completion: interrupt, moderation: {{ usecs: {usecs}us, frames: {frames} }},
        costs: {{ wqe_build: 20ns, doorbell_mmio: 20ns }} }}"
        )));
        let out = run(&sc);
        let h = out.host.as_ref().unwrap();
        // Rate over the span of the receiver's completions.
        let rx = &h.nics[1];
        let done: Vec<u64> = h.msgs.iter().map(|m| m.t[7]).collect();
        let span = (done.iter().max().unwrap() - done.iter().min().unwrap()) as f64 / 1e12;
        let rate = rx.interrupts as f64 / span;
        let err = (rate - expected).abs() / expected;
        assert!(
            err < 0.02,
            "interval {interval_ns} ns, {usecs} us / {frames}: {rate:.0}/s vs {expected:.0}/s ({:.2}%)",
            err * 100.0
        );
    }
}

/// Message rate of a burst of small messages saturates at the pipeline's slowest stage:
/// the posting thread (one WQE build + one doorbell per message), the NIC's DMA read
/// slots (a WQE fetch and a payload read per message, each a round trip plus its bytes),
/// the send engine (`wqe_processing` per WQE) or the staging copies. Within 1% of
/// `analytic::host::message_rate_limit`, itself checked against the hand formula.
#[test]
fn message_rate_saturates_at_the_pipeline_limit() {
    use doorbell::analytic::host::message_rate_limit;
    let rt = 800_000.0; // ps, default PCIe round trip
    let bw = 400e9 / 8.0 / 1e12; // bytes per ps
    let size = 8.0;
    let read_slots = 64.0 / ((rt + 64.0 / bw) + (rt + size / bw)) * 1e12;
    // (host section, what binds, the hand formula)
    let cases = [
        ("posting: cpu_gdr", "posting", 1e12 / 250_000.0),
        ("posting: cpu_proxy", "posting", 1e12 / 250_000.0),
        // 32 GPU threads x 500 ns: 64 M/s; the 64 read slots bind first.
        ("posting: gpu", "DMA read slots", read_slots),
        (
            "posting: gpu, nic: { max_outstanding_reads: 16 }",
            "DMA read slots",
            read_slots / 4.0,
        ),
        // BlueFlame: no WQE fetch, one read per message.
        (
            "posting: gpu, blueflame: true, gpu_posting_threads: 64",
            "DMA read slots",
            64.0 / (rt + size / bw) * 1e12,
        ),
        (
            "posting: gpu, nic: { wqe_processing: 50ns }",
            "NIC send engine",
            1e12 / 50_000.0,
        ),
        (
            "posting: cpu_gdr, doorbell_batch: 16",
            "posting",
            1e12 / (100_000.0 + 150_000.0 / 16.0),
        ),
        (
            "posting: cpu, memory: gpu",
            "staging copies",
            1e12 / (5_000_000.0 + size / bw),
        ),
    ];
    for (host, bound, hand) in cases {
        let sc = scenario(&two_hosts(&format!(
            "workload: [ {{ stream: {{ src: 0, dst: 1, size: 8B, count: 20000 }} }} ]\nhost: {{ {host} }}"
        )));
        let cfg = sc.host.as_ref().unwrap();
        let limit = message_rate_limit(&sc, cfg, cfg.posting, 8).unwrap();
        assert!(limit.bound_by.starts_with(bound), "{host}: {limit:?}");
        assert!(
            (limit.messages_per_s - hand).abs() / hand < 1e-9,
            "{host}: analytic {limit:?} vs hand {hand}"
        );
        // Staged copies are slow: fewer messages suffice to reach steady state.
        let s = summarize(&sc, &run(&sc)).host.unwrap();
        let err = (s.messages_per_s - hand).abs() / hand;
        assert!(
            err < 0.01,
            "{host}: {:.3} M/s vs {:.3} M/s ({:.2}%)",
            s.messages_per_s / 1e6,
            hand / 1e6,
            err * 100.0
        );
    }
}

/// GPUDirect between a GPU and a NIC under different root complexes: refused with a
/// clear error by default, degraded over the CPU interconnect, or staged like `cpu`.
#[test]
fn cross_socket_gdr_is_refused_degraded_or_staged() {
    let base = two_hosts(
        "workload: [ { ping_pong: { hosts: [0, 1], size: 1MB, iterations: 2 } } ]
host: { posting: cpu_gdr, memory: gpu, pcie: { nic_gpu: [4] } }",
    );
    let err = doorbell::scenario::parse_str(
        &base,
        "x.yaml",
        "x",
        &doorbell::scenario::Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(err.path, "host.posting");
    assert!(
        err.message
            .contains("GPU 4 (root complex 1) and NIC 0 (root complex 0)")
            && err.message.contains("cross_socket"),
        "{}",
        err.message
    );
    let lat = |set: &[&str]| {
        let out = run(&scenario_with(&base, set));
        latencies(&out)[0]
    };
    let same = lat(&["host.pcie.nic_gpu=[0]"]);
    let over = lat(&["host.pcie.cross_socket=interconnect"]);
    let staged = lat(&["host.pcie.cross_socket=stage"]);
    let cpu = lat(&["host.pcie.nic_gpu=[0]", "host.posting=cpu"]);
    assert!(over > same, "the interconnect is slower: {over} vs {same}");
    assert_eq!(staged, cpu, "stage falls back to the cpu path");
    // Over the interconnect (10 GB/s, +200 ns each way), a 1 MB message's DMA streams at
    // the interconnect's rate, below the 200 Gb/s line: at least 1 MB / 10 GB/s.
    assert!(over >= 100_000_000, "{over}");
}

/// A workload item may choose its own posting mode; without a `host:` section that is
/// an error naming the field.
#[test]
fn posting_per_workload() {
    let sc = scenario(&two_hosts(
        "workload:
  - { ping_pong: { hosts: [0, 1], size: 8B, iterations: 2, posting: gpu } }
  - { stream: { src: 0, dst: 1, size: 8B, count: 3, start: 1ms } }
host: { posting: cpu_gdr }",
    ));
    let out = run(&sc);
    let h = out.host.as_ref().unwrap();
    assert!(h.msgs[..4].iter().all(|m| m.mode.name() == "gpu"));
    assert!(h.msgs[4..].iter().all(|m| m.mode.name() == "cpu_gdr"));
    let err = doorbell::scenario::parse_str(
        &two_hosts(
            "workload: [ { stream: { src: 0, dst: 1, size: 8B, count: 3, posting: gpu } } ]",
        ),
        "x.yaml",
        "x",
        &doorbell::scenario::Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(err.path, "workload[0].stream.posting");
}

/// On an idle fabric every message of a ping-pong matches `analytic::host` stage by
/// stage, to the picosecond: each posting mode, polled and with interrupts (moderated,
/// unmoderated, adaptive), one hop and two, GPU or host memory, BlueFlame, inline data,
/// and GPUDirect over the CPU interconnect.
#[test]
fn ping_pong_matches_the_analytic_pipeline_stage_by_stage() {
    use doorbell::analytic::host::unloaded_stages;
    let mut checked = 0;
    for transport in ["write", "read"] {
        let fabric = format!("topology: {{ leaves: 2, spines: 1, hosts_per_leaf: 2, host_link: {{ rate: 400Gbps, latency: 150ns }}, fabric_link: {{ rate: 400Gbps, latency: 600ns }} }}
switch: {{ latency: 250ns }}
transport: {{ rc: {{ operation: {transport} }} }}");
        let hosts = [
        "posting: cpu, memory: gpu",
        "posting: cpu, memory: host, completion: interrupt",
        "posting: cpu_gdr, memory: gpu, completion: interrupt, moderation: off",
        "posting: cpu_gdr, memory: gpu, completion: interrupt, moderation: adaptive",
        "posting: cpu_gdr, memory: gpu, completion: interrupt, moderation: { usecs: 4us, frames: 1 }",
        "posting: cpu_proxy, memory: gpu",
        "posting: gpu, memory: gpu",
        "posting: gpu, memory: gpu, blueflame: true, inline_max: 64B",
        "posting: cpu_gdr, memory: gpu, pcie: { nic_gpu: [6], cross_socket: interconnect }",
        "posting: gpu, memory: gpu, pcie: { nic_gpu: [6], cross_socket: interconnect }",
        // Same root complex, different PCIe switches: P2P turns in the root complex.
        "posting: cpu_gdr, memory: gpu, pcie: { nic_switch: [5], root_complex_p2p_bandwidth: 100Gbps }",
        // Different memory at each end.
        "posting: cpu, memory: { source: gpu, destination: host }",
        "posting: cpu_gdr, memory: { source: host, destination: gpu }, pcie: { nic_gpu: [6], cross_socket: interconnect }",
    ];
        for host in hosts {
            for (a, b) in [(0, 1), (0, 3)] {
                for size in [8u64, 64, 9000, 1 << 20] {
                    let sc = scenario(&format!(
                        "{fabric}
workload: [ {{ ping_pong: {{ hosts: [{a}, {b}], size: {size}B, iterations: 2 }} }} ]
host: {{ {host} }}"
                    ));
                    let out = run(&sc);
                    let h = out.host.as_ref().unwrap();
                    let cfg = sc.host.as_ref().unwrap();
                    for (i, m) in h.msgs.iter().enumerate() {
                        assert!(m.done(), "{host}: message {i} done");
                        let (src, dst) = if i % 2 == 0 { (a, b) } else { (b, a) };
                        let want = unloaded_stages(&sc, cfg, cfg.posting, src, dst, size).unwrap();
                        for (k, w) in want.iter().enumerate() {
                            assert_eq!(
                                m.t[k + 1] - m.t[k],
                                w.0,
                                "{host}, {src}->{dst}, {size} B: stage {}",
                                STAGES[k]
                            );
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 2 * 13 * 2 * 4 * 4);
}

/// RC executes a queue pair's work requests in order: a small inline message posted just
/// after a large one gets through the pipeline first (no payload read) but still waits
/// for it on the shared queue pair.
#[test]
fn work_requests_keep_their_order_on_a_queue_pair() {
    let sc = scenario(&two_hosts(
        "workload:
  - { stream: { src: 0, dst: 1, size: 1MiB, count: 1 } }
  - { stream: { src: 0, dst: 1, size: 8B, count: 1, start: 1ns } }
host: { posting: cpu_gdr, inline_max: 64B, posting_threads: 2 }",
    ));
    let out = run(&sc);
    let h = out.host.as_ref().unwrap();
    assert!(
        h.msgs[1].t[5] < h.msgs[0].t[5],
        "the inline message is ready first"
    );
    assert!(out.flows[1].finish.unwrap() > out.flows[0].finish.unwrap());
}

/// Without completions at the sender (raw transport), its active span still covers its
/// posting: CPU shares stay shares.
#[test]
fn cpu_shares_stay_below_one_without_sender_completions() {
    let sc = scenario_with(
        &two_hosts(
            "workload: [ { stream: { src: 0, dst: 1, size: 4KB, count: 1000 } } ]
host: { posting: cpu_gdr, completion: interrupt }",
        ),
        &["transport.mode=raw"],
    );
    let s = summarize(&sc, &run(&sc)).host.unwrap();
    assert_eq!(s.messages, 1000);
    assert!(
        s.cpu_util.max > 0.0 && s.cpu_util.max <= 1.0,
        "{:?}",
        s.cpu_util
    );
}

/// Host costs that would serialize past a simulated day are refused before the run.
#[test]
fn host_costs_past_a_day_are_refused() {
    let err = doorbell::scenario::parse_str(
        &two_hosts(
            "workload: [ { stream: { src: 0, dst: 1, size: 8B, count: 20000000 } } ]
host: { costs: { wqe_build: 1s } }",
        ),
        "x.yaml",
        "x",
        &doorbell::scenario::Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(err.path, "host");
    assert!(err.message.contains("simulated day"), "{}", err.message);
}

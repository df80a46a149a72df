//! DCQCN in the fabric: convergence, fairness, where it holds the queue, CNP pacing, and
//! the incasts the reference simulator (HPCC's ns-3, `rdma-hw.cc`) publishes figures for.

use crate::common::{
    assert_near_reference, finishes_us, flows_to_host0, incast_16_to_1_of_1mb, reference_fabric,
};
use doorbell::scenario::{parse_str, Overrides, Scenario};

/// DCQCN with HPCC's ns-3 settings, as a `cc:` map.
const HPCC_PRESET: &str = "{ algorithm: dcqcn, preset: hpcc }";
use doorbell::components::ingress::FlowControl;
use doorbell::sim::{run, RunOutput};

/// Four long WRITEs from hosts 1-4 into host 0 under one leaf (100 Gb/s, 1 us cables):
/// a 4:1 bottleneck at the leaf's port to host 0.
fn four_to_one(preset: &str, duration: &str) -> Scenario {
    parse_str(
        &format!(
            "
topology:
  leaves: 1
  spines: 0
  hosts_per_leaf: 5
  host_link: {{ rate: 100Gbps, latency: 1us }}
switch: {{ buffer: 64MiB, alpha: 1.0 }}
cc: {{ algorithm: dcqcn, preset: {preset} }}
duration: {duration}
workload:
  - flows:
      - {{ src: 1, dst: 0, size: 10GB }}
      - {{ src: 2, dst: 0, size: 10GB }}
      - {{ src: 3, dst: 0, size: 10GB }}
      - {{ src: 4, dst: 0, size: 10GB }}
"
        ),
        "d.yaml",
        "d",
        &Overrides::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The bottleneck port: the leaf's port to host 0.
fn bottleneck(sc: &Scenario) -> usize {
    sc.topology.leaf_down(0) as usize
}

/// Per-flow bytes delivered between the ends of two runs of the same scenario; the
/// shorter run is an exact prefix of the longer (same seed, same events up to its end).
fn steady(a: &RunOutput, b: &RunOutput) -> Vec<f64> {
    a.flows
        .iter()
        .zip(&b.flows)
        .map(|(x, y)| (y.delivered - x.delivered) as f64)
        .collect()
}

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    s * s / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>())
}

#[test]
fn long_flows_converge_to_a_fair_share_of_the_bottleneck() {
    // The paper's parameters. Over the second 50 ms of a 100 ms run (the first 50 ms hold
    // the start-up: every flow starts at line rate, is cut hard, and climbs back by
    // additive increase at 40 Mb/s per 55 us), the four flows share the port.
    let (a, b) = (four_to_one("paper", "50ms"), four_to_one("paper", "100ms"));
    let (ra, rb) = (run(&a), run(&b));
    let per_flow = steady(&ra, &rb);
    let seconds = 0.05;
    let util: f64 = per_flow.iter().sum::<f64>() * 8.0 / seconds / (100e9 * 4096.0 / 4122.0);
    // Jain's index (design reference): 1 is perfectly fair; 0.95 is the bar.
    let j = jain(&per_flow);
    assert!(j >= 0.95, "Jain {j:.4}, per flow {per_flow:?}");
    assert!(util >= 0.90, "utilisation {util:.4}");
    // The queue is held near the marking thresholds (Kmin 5 KB, Kmax 200 KB), not at the
    // buffer limit: the mean depth seen by packets arriving in the second half.
    let (pa, pb) = (&ra.ports[bottleneck(&a)], &rb.ports[bottleneck(&b)]);
    let mean = (pb.queue_sample_sum - pa.queue_sample_sum) as f64
        / (pb.queue_samples - pa.queue_samples) as f64;
    assert!(mean < 200_000.0, "mean queue {mean:.0} B");
    assert_eq!(
        rb.ports.iter().map(|p| p.dropped_packets()).sum::<u64>(),
        0,
        "no drops"
    );
}

#[test]
fn cnps_never_exceed_one_per_flow_per_interval() {
    for (preset, interval_us) in [("paper", 50.0f64), ("nvidia", 4.0)] {
        let sc = four_to_one(preset, "20ms");
        let out = run(&sc);
        let per_flow_bound = (20_000.0 / interval_us + 1.0).floor() as u64;
        assert!(out.cc.cnps_sent > 0, "{preset}: the bottleneck marks");
        assert!(
            out.cc.cnps_sent <= 4 * per_flow_bound,
            "{preset}: {} CNPs for 4 flows over 20 ms at one per {interval_us} us",
            out.cc.cnps_sent
        );
        // The run stops at its duration with a few CNPs still on their way back (at most
        // one per flow per interval, and the path is a few microseconds long).
        assert!(
            out.cc.cnps_received <= out.cc.cnps_sent
                && out.cc.cnps_sent - out.cc.cnps_received <= 8,
            "{preset}: {} sent, {} received",
            out.cc.cnps_sent,
            out.cc.cnps_received
        );
        assert!(
            out.cc.rate_cuts <= out.cc.cnps_received,
            "at most one cut per CNP"
        );
    }
}

/// The 16:1 incast of 1 MB each on the 128-host fabric over `seeds` (each its own ECMP
/// placement), under `cc` with `extra` scenario lines: the means of the first, median and
/// last completion, and the first's smallest and largest, microseconds.
fn incast_16_to_1_over_seeds(
    cc: &str,
    extra: &str,
    seeds: std::ops::RangeInclusive<u64>,
) -> [f64; 5] {
    let n = seeds.clone().count() as f64;
    let (mut sums, mut lo, mut hi) = ([0.0f64; 3], f64::MAX, 0.0f64);
    for seed in seeds {
        let cc = format!("{cc}\n{extra}");
        let mut sc = reference_fabric(8, 16, 16, &cc, &incast_16_to_1_of_1mb());
        sc.seed = seed;
        let f = finishes_us(&run(&sc));
        for (sum, x) in sums.iter_mut().zip([f[0], f[8], f[15]]) {
            *sum += x / n;
        }
        (lo, hi) = (lo.min(f[0]), hi.max(f[0]));
    }
    [sums[0], sums[1], sums[2], lo, hi]
}

/// The 16:1 incast of 1 MB each on a 128-host 1:1 fabric (8 leaves x 16 hosts, 16
/// spines; senders 16, 23, ..., 121, on the other seven leaves), DCQCN with the `hpcc`
/// preset. HPCC's ns-3 DCQCN, one run: first / median / last completion 1,257 / 1,452 /
/// 1,723 us (issue 13; ideal 1,280 us), FCT ending at the sender's last ACK as here.
/// Measured, mean over seeds 1-20 (each seed its own ECMP placement): 1,000 / 1,454 /
/// 1,711 us (-20%, +0.1%, -0.7%); per seed the first ranges 850-1,390 us, the median
/// 1,309-1,675 and the last 1,649-1,802. With the static Xoff of an evenly split buffer
/// (1 MB per ingress, before ns-3's dynamic one) seeds 1-5 gave 882 / 1,440 / 1,754; before
/// the NIC rules (a cut and R_T = R_C on every CNP) the last was 3,118 us.
/// The first completion is an order statistic of the placement (see the next test):
/// ns-3's one run is one placement, and its first lies inside doorbell's range.
/// Asserted: the median's and the last's 20-seed means within 10% of ns-3's; ns-3's first
/// within the 20 seeds' range of first completions, and their mean within 25% of it.
#[test]
fn a_16_to_1_incast_of_1_mb_finishes_as_the_reference_simulator_does() {
    let [first, median, last, lo, hi] = incast_16_to_1_over_seeds(HPCC_PRESET, "", 1..=20);
    assert_near_reference("median", median, 1452.0, 0.10);
    assert_near_reference("last", last, 1723.0, 0.10);
    assert_near_reference("first", first, 1257.0, 0.25);
    assert!(
        (lo..=hi).contains(&1257.0),
        "ns-3's first completion outside doorbell's placements: {lo:.0}-{hi:.0} us"
    );
}

/// The same 16:1 incast with no congestion control, PFC alone: csg-htsim's RoCE (lossless
/// queues, no CC) finishes first / median / last at 761 / 1,282 / 1,370 us (issue 13;
/// ideal 1,280 us of payload, 1,385 us with doorbell's 82 B of RoCEv2 per packet on the
/// wire). Measured, mean over seeds 1-10: 864 / 1,332 / 1,393 us (+13.5%, +3.9%, +1.7%);
/// the last is the bottleneck's wire time, and the first again depends on which flows
/// share a spine (700-960 us over the seeds: a flow alone on its spine gets one share
/// of the ingress ports PFC takes turns with, not one share of the flows). Asserted: the
/// median's and the last's means within 10%, the first's within 20%.
#[test]
fn a_16_to_1_incast_without_congestion_control_finishes_as_csg_htsim_does() {
    let [first, median, last, ..] = incast_16_to_1_over_seeds("{ algorithm: none }", "", 1..=10);
    let near = |what: &str, x: f64, reference: f64, tolerance: f64| {
        assert!(
            (x / reference - 1.0).abs() < tolerance,
            "{what} {x:.0} us vs csg-htsim {reference:.0}"
        );
    };
    near("first", first, 761.0, 0.20);
    near("median", median, 1282.0, 0.10);
    near("last", last, 1370.0, 0.10);
}

/// Why the 16:1 incast's first completion moves with the seed: which flows share a
/// spine. Every sender starts at line rate and the bottleneck queue reaches about 5 MB
/// before the cuts take hold (each flow sends about 340 KB in the first 56 us, cut every
/// 4 us from its first CNP at about 20 us); while it drains (some 400 us) every flow sits
/// at R_min, each cut restarting its 300 us increase timer. Flows that share a spine
/// queue there first, so their packets reach the bottleneck later, their CNPs keep coming
/// longer and they recover later; a flow alone on its spine recovers first, takes the
/// link at half the line rate and finishes at up to 1.5x its fair share. Spraying
/// every flow's packets over all spines (out-of-order RC), so that no flow collides,
/// moves the first completion's mean over seeds 1-10 from 1,030 us to 1,353 us (+7.6% on
/// ns-3's 1,257; the median to 1,669, +15%). Asserted: spraying moves the first
/// completion at least 20% later, to within 10% of ns-3's.
#[test]
fn spine_collisions_decide_the_16_to_1_incasts_first_completion() {
    let [ecmp, ..] = incast_16_to_1_over_seeds(HPCC_PRESET, "", 1..=10);
    let spray = "routing: spray\ntransport: { rc: { out_of_order: true } }";
    let [sprayed, ..] = incast_16_to_1_over_seeds(HPCC_PRESET, spray, 1..=10);
    assert!(
        sprayed >= 1.2 * ecmp,
        "ECMP {ecmp:.0} us, spraying {sprayed:.0} us"
    );
    assert_near_reference("first (spraying)", sprayed, 1257.0, 0.10);
}

/// The bottleneck's busy share on an N:1 incast of 20 MB flows on the reference fabric
/// (4 leaves x 32 hosts, 32 spines): payload / last completion / payload line rate
/// (100 Gb/s x 1000 / 1082 with RoCEv2's 82 B per packet on the wire), one value per
/// seed. Senders from host 1 share the receiver's leaf (one hop); from host 32 they sit
/// under another leaf (two hops). `edit` changes the scenario before it runs.
fn busy_over_seeds_with(
    cc: &str,
    first: u32,
    n: u32,
    seeds: std::ops::RangeInclusive<u64>,
    edit: impl Fn(&mut Scenario),
) -> Vec<f64> {
    let payload_line = 100e9 * 1000.0 / 1082.0;
    let flows = flows_to_host0(first, n, "20MB");
    seeds
        .map(|seed| {
            let mut sc = reference_fabric(4, 32, 32, cc, &flows);
            sc.seed = seed;
            edit(&mut sc);
            let last = finishes_us(&run(&sc))[n as usize - 1];
            n as f64 * 20e6 * 8.0 / (last * 1e-6) / payload_line
        })
        .collect()
}

fn busy_over_seeds(cc: &str, first: u32, n: u32, seeds: std::ops::RangeInclusive<u64>) -> Vec<f64> {
    busy_over_seeds_with(cc, first, n, seeds, |_| {})
}

/// The static Xoff of an evenly split buffer instead of ns-3's dynamic one.
fn static_xoff(sc: &mut Scenario) {
    match &mut sc.flow_control {
        FlowControl::Pfc { dynamic, .. } => *dynamic = None,
        other => panic!("{other:?}"),
    }
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// N:1 incasts of 20 MB long flows under DCQCN `hpcc`. HPCC's ns-3 keeps the bottleneck
/// 84-93% busy (issue 13, one run per case). Measured here, mean over seeds 1-5 (range):
/// | N | one hop | two hops |
/// |---|---|---|
/// | 2 | 84.4% (80.0-87.0) | 83.1% (80.9-85.2) |
/// | 6 | 88.9% (85.0-90.5) | 89.3% (87.4-90.5) |
/// | 16 | 90.8% (87.1-94.3) | 90.7% (88.8-94.1) |
/// (With the static Xoff of an evenly split buffer: the same at N = 2, 88.9 / 88.7 at 6,
/// 89.5 / 92.2 at 16.) Over seeds 1-10 two senders across two hops average 83.7% (95% CI
/// +-1.1), in reach of the reference's 84%. One run's figure moves 2-3 points with the
/// seed (which packets RED marks), so a single ns-3 run carries the same spread.
/// Asserted: each case's 5-seed mean within 82-94% (the reference's range widened by
/// that mean's own 95% CI, 1.1-2.4 points) and every run within 78-96%.
#[test]
fn long_incasts_keep_the_bottleneck_busy_as_the_reference_simulator_does() {
    for n in [2u32, 6, 16] {
        for (hops, first) in [(1, 1u32), (2, 32)] {
            let busy = busy_over_seeds(HPCC_PRESET, first, n, 1..=5);
            let shown: Vec<String> = busy.iter().map(|b| format!("{:.1}%", b * 100.0)).collect();
            assert!(
                (0.82..=0.94).contains(&mean(&busy))
                    && busy.iter().all(|b| (0.78..=0.96).contains(b)),
                "N {n}, {hops} hop(s): busy {shown:?} (ns-3: 84-93%)"
            );
        }
    }
}

/// NVIDIA's documented defaults end to end (the NIC's DOCA DCQCN table, R_min 1 Mb/s;
/// the switch's RoCE ECN profile, 150 KB / 1.5 MB / 100%) on a 6:1 incast of 20 MB
/// flows, same fabric. Measured over seeds 1-10: across two hops 93.4% busy (89.6-94.5),
/// which issue 13's 85% asks; under one leaf 82.2% (81.2-82.7), short of it. In neither
/// does DCQCN hold the rate down: the bottleneck stays busy because PFC holds a queue
/// behind it, 6.6 MB on average under one leaf (13.4 MB at most; the senders paused
/// 1.4 ms in all, seed 1) and 10.9 MB across two hops (the spines' ports to the leaf
/// paused 35 ms in all over a 12 ms run, which stops every flow through them); the next
/// test shows why. With the static Xoff of an evenly split buffer (485 KB per ingress
/// here) the two-hop mean was 87.3% and the one-hop 57.6%, the senders paused 5.6 ms.
/// Asserted: the two-hop ten-seed mean at 85% or more, the one-hop at 78% or more.
#[test]
fn nvidia_defaults_on_a_6_to_1_incast() {
    let cc = "{ algorithm: dcqcn, preset: nvidia }";
    let two_hops = busy_over_seeds(cc, 32, 6, 1..=10);
    assert!(mean(&two_hops) >= 0.85, "two hops: {two_hops:?}");
    let one_hop = busy_over_seeds(cc, 1, 6, 1..=10);
    assert!(mean(&one_hop) >= 0.78, "one hop: {one_hop:?}");
}

/// Why the `nvidia` preset leaves the queue to PFC: its byte counter with a target rate
/// it does not clamp. On the 6:1 incast under one leaf every packet is marked and each
/// flow is cut every 4 us (`rate_reduce_monitor_period`), but no 300 us timer increase
/// comes between two cuts, so the target stays at the line rate (with
/// `clamp_tgt_rate_after_time_inc` only a timer increase clamps it) and each 32 KB the
/// byte counter counts (`rpg_byte_reset`) takes the rate halfway back to it. Seeds 1-5:
/// 82.2% busy with every default; 90.0% with the byte counter off (`rpg_byte_reset` 0),
/// the queue then 95 KB on average with no pause frame (seed 1); 83.3% with HPCC's
/// gentler marking (Pmax 20%), no better; 57.6% with the defaults and the static Xoff.
/// Asserted: with the byte counter off at least 87% busy and no pause; the defaults at
/// most 87%; with the static Xoff below 70%.
#[test]
fn the_nvidia_queue_comes_from_its_byte_counter() {
    let base = "{ algorithm: dcqcn, preset: nvidia }";
    let no_bytes = "{ algorithm: dcqcn, preset: nvidia, byte_counter: 0B }";
    let b = busy_over_seeds(base, 1, 6, 1..=5);
    assert!(mean(&b) <= 0.87, "defaults: {b:?}");
    let x = busy_over_seeds(no_bytes, 1, 6, 1..=5);
    assert!(mean(&x) >= 0.87, "byte counter off: {x:?}");
    let mut sc = reference_fabric(4, 32, 32, no_bytes, &flows_to_host0(1, 6, "20MB"));
    sc.seed = 1;
    let out = run(&sc);
    let pauses: u64 = out.ingress.iter().map(|i| i.pause_frames()).sum();
    assert_eq!(pauses, 0, "byte counter off: no pause");
    let s = busy_over_seeds_with(base, 1, 6, 1..=5, static_xoff);
    assert!(mean(&s) < 0.70, "static Xoff: {s:?}");
}

/// N long flows from hosts 1..=N into host 0 under one leaf at 40 Gb/s (1 us cables,
/// 1000 B MTU over RoCEv2: 1,082 B packets), DCQCN with the paper's preset, for 60 ms,
/// the bottleneck's queue and every flow's rate sampled each 20 us.
/// A sampled series: (seconds, value).
type Series = Vec<(f64, f64)>;

fn paper_incast_at_40g(n: u32) -> (Series, Series) {
    let flows: Vec<String> = (1..=n)
        .map(|s| format!("{{ src: {s}, dst: 0, size: 10GB }}"))
        .collect();
    let ids: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let sc = crate::common::scenario(&format!(
        "
topology:
  leaves: 1
  spines: 0
  hosts_per_leaf: {}
  host_link: {{ rate: 40Gbps, latency: 1us }}
switch: {{ buffer: 64MiB, alpha: 1.0, latency: 0ns }}
packet: {{ mtu: 1000B, encapsulation: rocev2 }}
flow_control: {{ mode: pfc }}
cc: {{ algorithm: dcqcn, preset: paper }}
duration: 60ms
timeseries: {{ interval: 20us, ports: [ leaf0->host0 ], flows: [ {} ] }}
workload:
  - flows: [ {} ]
",
        n + 1,
        ids.join(", "),
        flows.join(", ")
    ));
    let out = run(&sc);
    let mut queue = std::collections::BTreeMap::new();
    let mut rates = std::collections::BTreeMap::<u64, (f64, u32)>::new();
    for s in &out.samples {
        match s.metric {
            doorbell::sim::Metric::QueueBytes => {
                queue.insert(s.time.0, s.value);
            }
            doorbell::sim::Metric::RateGbps => {
                let e = rates.entry(s.time.0).or_default();
                e.0 += s.value * 1e9;
                e.1 += 1;
            }
            _ => {}
        }
    }
    let secs = |t: u64| t as f64 * 1e-12;
    (
        queue.into_iter().map(|(t, q)| (secs(t), q)).collect(),
        rates
            .into_iter()
            .map(|(t, (sum, k))| (secs(t), sum / k as f64))
            .collect(),
    )
}

/// Mean of a sampled series over [a, b) seconds.
fn window_mean(v: &[(f64, f64)], a: f64, b: f64) -> f64 {
    let w: Vec<f64> = v
        .iter()
        .filter(|(t, _)| *t >= a && *t < b)
        .map(|x| x.1)
        .collect();
    w.iter().sum::<f64>() / w.len() as f64
}

/// The value of a sampled series nearest to `t` seconds.
fn at(v: &[(f64, f64)], t: f64) -> f64 {
    v.iter()
        .min_by(|x, y| (x.0 - t).abs().total_cmp(&(y.0 - t).abs()))
        .expect("samples")
        .1
}

/// When a rate series, having fallen below half of `share`, first climbs back to 95%.
fn recovered(v: &[(f64, f64)], share: f64) -> f64 {
    let low = v
        .iter()
        .position(|(_, x)| *x < 0.5 * share)
        .expect("the start-up cuts below half the share");
    v[low..]
        .iter()
        .find(|(_, x)| *x >= 0.95 * share)
        .expect("the rate recovers")
        .0
}

/// The DCQCN paper's fluid model (Zhu et al. §5, `analytic::dcqcn_fluid`, the paper's
/// preset and RED 5 KB / 200 KB / 1%, feedback delay 4 us: the path's base RTT) against
/// the packet simulation of the same N:1 incast at 40 Gb/s, from the start-up on.
/// Measured (simulation / fluid model):
/// | N | back at 95% of C/N | climb, 1-3 ms | mean queue, 40-60 ms |
/// |---|---|---|---|
/// | 2 | (never below half) | - | 27.1 / 20.6 KB |
/// | 4 | 10.2 / 11.2 ms | 0.720 / 0.730 Gb/s per ms | 62.9 / 43.5 KB |
/// | 8 | 7.1 / 7.4 ms | 0.722 / 0.721 Gb/s per ms | 125.3 / 98.2 KB |
/// | 16 | 4.5 / 5.0 ms | - | 189.9 / 190.0 KB |
/// The start-up cuts every flow far below its share; it climbs back by additive increase
/// at R_AI per timer period (40 Mb/s per 55 us = 0.727 Gb/s per ms, closed form) and
/// then holds C/N. The simulation's flows are cut by discrete CNPs where the model's
/// shrink continuously: the simulation lands a little higher after the start-up (one
/// additive step or so: 4-10% earlier back at the share) and holds a deeper queue at
/// small N (its queue swings with each CNP). Asserted: the climb within 5% of the closed
/// form in both; back at 95% of the share within 15% of the model's time; the mean
/// queue at 0.8-1.6x the model's; the flows' mean rate within 3% of C/N in both.
#[test]
fn start_up_and_convergence_follow_the_papers_fluid_model() {
    use doorbell::analytic::dcqcn_fluid::FluidParams;
    for n in [2u32, 4, 8, 16] {
        let (queue, rate) = paper_incast_at_40g(n);
        let model = FluidParams::paper(n, 40e9, 1082.0, 4e-6).integrate(0.06, 1e-7, 200);
        let model_rate: Vec<(f64, f64)> = model.iter().map(|p| (p.time_s, p.rate_bps)).collect();
        let model_queue: Vec<(f64, f64)> =
            model.iter().map(|p| (p.time_s, p.queue_bytes)).collect();
        let share = 40e9 / n as f64;
        if matches!(n, 4 | 8) {
            let closed = 40e6 / 55e-6 * 1e-3; // b/s per ms
            for (who, v) in [("simulation", &rate), ("model", &model_rate)] {
                let climb = (at(v, 3e-3) - at(v, 1e-3)) / 2.0;
                assert!(
                    (climb / closed - 1.0).abs() < 0.05,
                    "N {n}, {who}: climbs {:.3} Gb/s per ms",
                    climb / 1e9
                );
            }
        }
        if n > 2 {
            let (sim, fluid) = (recovered(&rate, share), recovered(&model_rate, share));
            assert!(
                (sim / fluid - 1.0).abs() < 0.15,
                "N {n}: back at the share at {:.2} ms, model {:.2} ms",
                sim * 1e3,
                fluid * 1e3
            );
        }
        let (sim_q, fluid_q) = (
            window_mean(&queue, 0.04, 0.06),
            window_mean(&model_queue, 0.04, 0.06),
        );
        assert!(
            (0.8..=1.6).contains(&(sim_q / fluid_q)),
            "N {n}: mean queue {sim_q:.0} B, model {fluid_q:.0} B"
        );
        for (who, v) in [("simulation", &rate), ("model", &model_rate)] {
            let r = window_mean(v, 0.04, 0.06);
            assert!(
                (r / share - 1.0).abs() < 0.03,
                "N {n}, {who}: {:.2} Gb/s each",
                r / 1e9
            );
        }
    }
}

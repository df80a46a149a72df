//! Validation of the foundation fabric against closed-form results.
//!
//! Each test states the analytic figure, where it comes from and why its tolerance is what
//! it is. Scenarios are written inline as YAML so each test reads as a user would write it.

use crate::common::{fct_ps, landed_ps, scenario};

use doorbell::analytic::md1_mean_wait;
use doorbell::metrics::summarize;
use doorbell::sim::run;
use doorbell::units::{serialization_delay, BitsPerSec};

const TWO_HOP: &str = "
seed: 1
topology:
  leaves: 2
  spines: 1
  hosts_per_leaf: 1
  host_link: { rate: 100Gbps, latency: 200ns }
  fabric_link: { rate: 400Gbps, latency: 500ns }
switch: { latency: 300ns, forwarding: FORWARDING }
packet: { mtu: 4096B, encapsulation: ib }
workload:
  - flows: [ { src: 0, dst: 1, size: 1000B } ]
";

#[test]
fn one_packet_across_two_hops_store_and_forward_to_the_picosecond() {
    let sc = scenario(&TWO_HOP.replace("FORWARDING", "store_and_forward"));
    let out = run(&sc);
    // An RC WRITE-only packet: 1000 B + 26 B IB overhead + 16 B RETH = 1042 B = 8336 bits.
    // Serialization: 83_360 ps at 100 Gb/s (host links), 20_840 ps at 400 Gb/s (fabric).
    // host->leaf, leaf->spine, spine->leaf, leaf->host; three switches of 300 ns.
    let expected = 2 * 83_360 + 2 * 20_840 // serialization, four hops
        + 2 * 200_000 + 2 * 500_000        // propagation
        + 3 * 300_000; // port-to-port latency
    assert_eq!(landed_ps(&out, 0), expected);
    // The flow completes when the requester gets the ACK: 26 B + 4 B AETH = 30 B = 240
    // bits, 2_400 ps at 100 Gb/s and 600 ps at 400 Gb/s, back over the same four hops.
    let ack = 2 * 2_400 + 2 * 600 + 2 * 200_000 + 2 * 500_000 + 3 * 300_000;
    assert_eq!(fct_ps(&out, 0), expected + ack);
    assert_eq!(
        out.flows[0].ideal.0,
        expected + ack,
        "the analytic ideal agrees"
    );
    // Without a transport the packet has no RETH: 1026 B, 82_080 / 20_520 ps per hop.
    let raw = scenario(&format!(
        "{}transport: {{ mode: raw }}\n",
        TWO_HOP.replace("FORWARDING", "store_and_forward")
    ));
    let expected_raw = 2 * 82_080 + 2 * 20_520 + 2 * 200_000 + 2 * 500_000 + 3 * 300_000;
    // No ACK either: it completes when it lands.
    let raw = run(&raw);
    assert_eq!(fct_ps(&raw, 0), expected_raw);
    assert_eq!(landed_ps(&raw, 0), expected_raw);
}

#[test]
fn one_packet_across_two_hops_cut_through_to_the_picosecond() {
    let sc = scenario(&TWO_HOP.replace("FORWARDING", "cut_through"));
    let out = run(&sc);
    // The 1042 B packet (see above). Cut-through forwards once the 20 B header (LRH + BTH)
    // is in, 300 ns later, but never so early that the faster egress would overtake the
    // ingress tail:
    //  leaf:  header in at 1_600 + 200_000 = 201_600, tail at 283_360;
    //         start = max(201_600 + 300_000, 283_360 + 300_000 - 20_840) = 562_520
    //  spine: header in at 562_520 + 400 + 500_000 = 1_062_920 -> start 1_362_920
    //         (tail bound 1_083_360 + 300_000 - 20_840 = 1_362_520 is earlier)
    //  leaf:  header in at 1_362_920 + 400 + 500_000 = 1_863_320 -> start 2_163_320
    //  host:  tail in at 2_163_320 + 83_360 + 200_000 = 2_446_680
    assert_eq!(landed_ps(&out, 0), 2_446_680);
    // Its 30 B ACK (2_400 / 600 ps per hop) back, by the same rules, from 0:
    //  leaf:  header in at 1_600 + 200_000, tail at 202_400 -> start 501_800 (tail bound)
    //  spine: header in at 501_800 + 400 + 500_000 = 1_002_200 -> start 1_302_200
    //  leaf:  header in at 1_302_200 + 400 + 500_000 = 1_802_600 -> start 2_102_600
    //  host:  tail in at 2_102_600 + 2_400 + 200_000 = 2_305_000
    assert_eq!(fct_ps(&out, 0), 2_446_680 + 2_305_000);
    assert_eq!(out.flows[0].ideal.0, 2_446_680 + 2_305_000);
}

#[test]
fn long_flow_reaches_line_rate_times_payload_efficiency() {
    for (encap, overhead) in [("ib", 26.0), ("rocev2", 82.0)] {
        let sc = scenario(&format!(
            "
topology:
  leaves: 2
  spines: 1
  hosts_per_leaf: 1
  host_link: {{ rate: 200Gbps, latency: 1us }}
packet: {{ mtu: 4096B, encapsulation: {encap} }}
workload:
  - flows: [ {{ src: 0, dst: 1, size: 100MB }} ]
"
        ));
        let out = run(&sc);
        let fct_s = fct_ps(&out, 0) as f64 / 1e12;
        let goodput = 100e6 * 8.0 / fct_s;
        let analytic = 200e9 * 4096.0 / (4096.0 + overhead);
        // The only departure from the analytic rate is the one-way latency of the first
        // packet (~4 us) over a 4 ms transfer: 0.1%, well inside 0.5%.
        let err = (goodput / analytic - 1.0).abs();
        assert!(
            err < 0.005,
            "{encap}: goodput {goodput:.4e} vs {analytic:.4e}"
        );
        assert!(goodput < analytic, "cannot beat line rate");
    }
}

/// Poisson single-packet messages from one host: its NIC port is an M/D/1 queue.
fn md1_wait(rho: f64, seed: u64) -> (f64, f64) {
    // Each message is one RC WRITE-only packet: 1000 B + 26 B + 16 B RETH = 1042 B, so
    // s = 83.36 ns at 100 Gb/s. `load` is the offered payload fraction, so
    // rho = load x wire / payload. (The ACKs travel the other way, on other links.)
    let load = rho * 1000.0 / 1042.0;
    let sc = scenario(&format!(
        "
seed: {seed}
topology:
  leaves: 1
  spines: 0
  hosts_per_leaf: 2
  host_link: {{ rate: 100Gbps, latency: 100ns }}
packet: {{ mtu: 4096B }}
workload:
  - poisson: {{ load: {load}, sizes: {{ fixed: 1000B }}, until: 40ms, src_hosts: [0], dst_hosts: [1] }}
"
    ));
    let out = run(&sc);
    // The leaf's port to host 1 runs at the same rate, so packets leave the host at least
    // one service time apart and never queue again: FCT - ideal is the wait at the host.
    let waits: Vec<f64> = out
        .flows
        .iter()
        .map(|f| (f.finish.expect("completed").0 - f.def.start.0 - f.ideal.0) as f64)
        .collect();
    let measured = waits.iter().sum::<f64>() / waits.len() as f64;
    let s = serialization_delay(1042, BitsPerSec(100_000_000_000));
    (measured, md1_mean_wait(rho, s))
}

#[test]
fn poisson_arrivals_on_one_bottleneck_match_md1_mean_wait() {
    // 40 ms at these loads is ~240k (rho 0.5) and ~390k (rho 0.8) packets. The batch-means
    // standard error of the mean wait is about 0.6% at rho 0.5 and 1.3% at rho 0.8 (the
    // waits are correlated over ~1/(1-rho)^2 service times), so 5% is three sigma or more
    // at rho 0.8. Three seeds each, so a lucky seed cannot hide a biased model.
    for rho in [0.5, 0.8] {
        for seed in [1, 2, 3] {
            let (measured, analytic) = md1_wait(rho, seed);
            let err = (measured / analytic - 1.0).abs();
            assert!(
                err < 0.05,
                "rho {rho} seed {seed}: mean wait {measured:.0} ps vs M/D/1 {analytic:.0} ps ({:.1}%)",
                err * 100.0
            );
        }
    }
}

#[test]
fn incast_delivers_the_bottleneck_capacity() {
    let sc = scenario(
        "
topology:
  leaves: 2
  spines: 2
  hosts_per_leaf: 8
  host_link: { rate: 200Gbps, latency: 200ns }
  fabric_link: { rate: 400Gbps, latency: 500ns }
switch: { buffer: 64MiB, port_limit: 32MiB }
workload:
  - incast: { senders: 8, receiver: 0, size: 1MB }
",
    );
    let out = run(&sc);
    let s = summarize(&sc, &out);
    assert_eq!(s.drops.packets, 0, "the buffer holds the whole incast");
    assert_eq!(s.flows.completed, 8);
    // 8 MB through the receiver's 200 Gb/s port at 4096/4122 payload efficiency takes
    // 322 us; the first packet's path latency (~3 us) is the only overhead: under 1%.
    let capacity = 200.0 * 4096.0 / 4122.0;
    let g = s.goodput_gbps.aggregate;
    assert!(g <= capacity, "{g} exceeds capacity {capacity}");
    assert!(
        g / capacity > 0.99,
        "incast goodput {g} Gb/s vs capacity {capacity}"
    );
    // And the receiver's port was the one that queued.
    let leaf_to_host = s
        .tiers
        .iter()
        .find(|t| t.tier.name() == "leaf_to_host")
        .unwrap();
    assert!(leaf_to_host.queue_max_bytes > 1_000_000);
}

/// Routing alone, under the raw transport: RC would treat spraying's reordering as loss
/// (see `rc_treats_reordering_as_loss`).
fn permutation_efficiency(routing: &str) -> f64 {
    let sc = scenario(&format!(
        "
seed: 5
transport: {{ mode: raw }}
topology:
  leaves: 4
  spines: 4
  hosts_per_leaf: 4
  host_link: {{ rate: 100Gbps, latency: 500ns }}
switch: {{ buffer: 64MiB }}
routing: {routing}
workload:
  - permutation: {{ size: 2MB }}
"
    ));
    let out = run(&sc);
    let s = summarize(&sc, &out);
    assert_eq!(
        s.drops.packets, 0,
        "{routing}: no drops expected with a 64 MiB buffer"
    );
    assert_eq!(s.flows.completed, 16);
    // Aggregate goodput over 16 hosts' line rate x payload efficiency.
    s.goodput_gbps.aggregate / (16.0 * 100.0 * 4096.0 / 4122.0)
}

#[test]
fn permutation_on_a_one_to_one_fabric_spray_fills_it_ecmp_falls_short() {
    let spray = permutation_efficiency("spray");
    let adaptive = permutation_efficiency("adaptive");
    let ecmp = permutation_efficiency("ecmp");
    // Spray spreads each leaf's packets evenly over 4 uplinks that together match its 4
    // hosts: the only loss is start-up latency and transient spine queues.
    assert!(spray >= 0.95, "spray reached {spray:.3} of line rate");
    assert!(
        adaptive >= 0.95,
        "adaptive reached {adaptive:.3} of line rate"
    );
    // ECMP hashes 2 MB flows onto uplinks; with 12 cross-leaf flows over 16 uplinks a
    // collision (two flows on one 100G uplink) is near certain and halves those flows.
    assert!(
        ecmp < 0.9 * spray,
        "ecmp {ecmp:.3} should fall measurably short of spray {spray:.3}"
    );
}

#[test]
fn empty_fabric_flows_have_slowdown_one() {
    // Flows that never meet: each finishes exactly at its analytic ideal.
    let sc = scenario(
        "
topology:
  leaves: 2
  spines: 1
  hosts_per_leaf: 2
  host_link: { rate: 100Gbps, latency: 300ns }
  fabric_link: { rate: 200Gbps, latency: 700ns }
packet: { mtu: 2048B, encapsulation: ib_grh }
workload:
  - flows:
      - { src: 0, dst: 2, size: 1234567B }
      - { src: 1, dst: 0, size: 1B, start: 5ms }
      - { src: 3, dst: 2, size: 9000B, start: 10ms }
",
    );
    let out = run(&sc);
    for (i, f) in out.flows.iter().enumerate() {
        assert_eq!(fct_ps(&out, i), f.ideal.0, "flow {i}");
    }
}

/// Regression (issue 19's fuzz: "a slowdown below 1"): with per-packet routing over
/// fabric links slower than the host link, one flow uses every spine at once, so the
/// ideal is paced by the host link or the sum of the parallel paths, whichever binds.
/// 400G hosts over 4 spines of 100G: spray runs at the host link (4 x 100G keep up), ECMP
/// at one 100G path; each flow alone finishes exactly at its own ideal (slowdown 1, to
/// the picosecond), and the spray ideal is close to 4 MiB at 400G.
#[test]
fn per_packet_routing_has_a_multipath_ideal_and_slowdown_stays_at_least_one() {
    // Adaptive routing reorders packets, which plain RC takes for loss (go-back-N: 20x
    // the ideal here; issue 14), so it runs on bare packets.
    for (routing, transport, rate_gbps) in [
        ("spray", "rc", 400.0),
        ("adaptive", "raw", 400.0),
        ("ecmp", "rc", 100.0),
        ("static", "rc", 100.0),
    ] {
        let sc = scenario(&format!(
            "
topology: {{ leaves: 2, spines: 4, hosts_per_leaf: 1, host_link: {{ rate: 400Gbps, latency: 500ns }}, fabric_link: {{ rate: 100Gbps, latency: 500ns }} }}
routing: {routing}
transport: {{ mode: {transport} }}
workload:
  - flows: [{{ src: 0, dst: 1, size: 4MiB }}]
"
        ));
        let out = run(&sc);
        let f = &out.flows[0];
        assert_eq!(fct_ps(&out, 0), f.ideal.0, "{routing}");
        // The bytes at the bottleneck's payload rate (line rate x payload efficiency),
        // plus at most one packet's trip for the pipeline to fill.
        let eff = sc.encapsulation.payload_efficiency(sc.mtu);
        let bound = (4u64 << 20) as f64 * 8.0 / (rate_gbps * 1e9 * eff) * 1e12;
        let fill = doorbell::analytic::ideal_fct(&sc, 0, 1, sc.mtu).0 as f64;
        let ideal = f.ideal.0 as f64;
        assert!(
            ideal >= bound && ideal <= bound + fill,
            "{routing}: ideal {ideal} ps, bytes at the bottleneck {bound} ps, one packet {fill} ps"
        );
    }
}

#[test]
fn bytes_are_conserved_without_a_transport() {
    // Every payload byte sent is delivered or counted as dropped (with a tiny buffer that
    // forces drops).
    let sc = scenario(
        "
transport: { mode: raw }
topology:
  leaves: 2
  spines: 1
  hosts_per_leaf: 4
  host_link: { rate: 100Gbps, latency: 100ns }
switch: { buffer: 256KiB }
workload:
  - all_to_all: { size: 200KB }
",
    );
    let out = run(&sc);
    let s = summarize(&sc, &out);
    assert!(s.drops.packets > 0, "the scenario is built to drop");
    let sent: u64 = out.flows.iter().map(|f| f.segmented).sum();
    let delivered: u64 = out.flows.iter().map(|f| f.delivered).sum();
    let dropped_pkts: u64 = out.flows.iter().map(|f| f.packets_dropped as u64).sum();
    assert_eq!(dropped_pkts, s.drops.packets);
    let dropped_wire = s.drops.bytes;
    let dropped_payload = dropped_wire - dropped_pkts * 26;
    assert_eq!(sent, delivered + dropped_payload);
    assert!(out.peak_packets_in_flight > 0);
}

#[test]
fn static_routing_spreads_destinations_over_parallel_spine_links() {
    // 2 leaves x 8 hosts, 2 spines x 4 parallel links (1:1). d-mod-k sends host d over
    // uplink d mod 8 at the leaf and parallel link d mod 4 at the spine, so 8 flows to
    // hosts 8..15 use all 8 down links and never meet: slowdown exactly 1.
    let sc = scenario(
        "
transport: { mode: raw }
topology:
  leaves: 2
  spines: 2
  hosts_per_leaf: 8
  links_per_spine: 4
  host_link: { rate: 100Gbps, latency: 100ns }
routing: static
workload:
  - flows:
      - { src: 0, dst: 8, size: 1MB }
      - { src: 1, dst: 9, size: 1MB }
      - { src: 2, dst: 10, size: 1MB }
      - { src: 3, dst: 11, size: 1MB }
      - { src: 4, dst: 12, size: 1MB }
      - { src: 5, dst: 13, size: 1MB }
      - { src: 6, dst: 14, size: 1MB }
      - { src: 7, dst: 15, size: 1MB }
",
    );
    let out = run(&sc);
    for (i, f) in out.flows.iter().enumerate() {
        assert_eq!(fct_ps(&out, i), f.ideal.0, "flow {i} met another");
    }
}

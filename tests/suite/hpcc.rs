//! HPCC in the fabric: telemetry on the wire, the incasts HPCC's ns-3 publishes figures
//! for, and the near-empty queue at high utilisation the paper claims.

use crate::common::{
    assert_near_reference, finishes_us, flows_to_host0, incast_16_to_1_of_1mb, reference_fabric,
    rejected as refused, scenario,
};
use doorbell::sim::run;

const HPCC: &str = "{ algorithm: hpcc }";

/// Every data packet and every ACK carries 42 bytes of INT (ns-3's `IntHeader`: a hop
/// count and five 8-byte records), so the wire carries exactly that much more than
/// without HPCC: one 100 KB WRITE is 100 packets and 100 ACKs (`ack_every: 1`).
#[test]
fn telemetry_costs_42_bytes_per_data_packet_and_per_ack() {
    let base = "
topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 100Gbps } }
packet: { mtu: 1000B, encapsulation: rocev2 }
workload:
  - flows: [ { src: 0, dst: 1, size: 100KB } ]
";
    let plain = run(&scenario(base));
    let hpcc = run(&scenario(&format!("{base}cc: {{ algorithm: hpcc }}\n")));
    let sc = scenario(base);
    let (up, down) = (
        sc.topology.host_up(0) as usize,
        sc.topology.host_up(1) as usize,
    );
    assert_eq!(hpcc.ports[up].tx_bytes - plain.ports[up].tx_bytes, 100 * 42);
    assert_eq!(
        hpcc.ports[down].tx_bytes - plain.ports[down].tx_bytes,
        100 * 42
    );
}

/// The 16:1 incast of 1 MB each on the 128-host 1:1 fabric (senders 16, 23, ..., 121).
/// HPCC's ns-3 HPCC: first / median / last completion 792 / 1,383 / 1,503 us (issue 13;
/// ideal 1,280 us). Measured here: 899 / 1,419 / 1,650 us (+14%, +2.6%, +9.8%). doorbell's
/// packets are 42 B longer on the wire than ns-3's (RoCEv2's preamble and gap, its FCS
/// and ICRC: 1,124 B per 1,000 B payload with INT), which alone makes the ideal about 8%
/// longer. Asserted: median and last within 10%; the first, decided by the start-up
/// race, within 20%.
#[test]
fn a_16_to_1_incast_of_1_mb_finishes_as_hpccs_reference_does() {
    let out = run(&reference_fabric(8, 16, 16, HPCC, &incast_16_to_1_of_1mb()));
    let f = finishes_us(&out);
    assert_near_reference("first", f[0], 792.0, 0.20);
    assert_near_reference("median", f[8], 1383.0, 0.10);
    assert_near_reference("last", f[15], 1503.0, 0.10);
    assert_eq!(out.cc.cnps_sent, 0, "HPCC needs no CNP");
}

/// HPCC's claim (Li et al. §5): near-zero queues at high utilisation. N:1 incasts of
/// 20 MB on 4 leaves x 32 hosts (32 spines), one hop and two: the bottleneck's wire
/// utilisation until the last completion and its queue's 99th percentile. Measured
/// (util / P99 queue): N = 2: 93.3% / 1.2 KB and 93.0% / 1.2 KB; N = 6: 93.6% / 3.4 KB
/// and 93.4% / 4.5 KB; N = 16: 93.8% / 6.8 KB and 93.7% / 6.8 KB (the target eta is
/// 95%). The queue peaks at 0.1-1.6 MB in the first RTT, when every sender starts at line
/// rate. Asserted: utilisation 90-96%, P99 queue at most 8 KB (seven 1,124 B packets).
#[test]
fn long_incasts_run_near_the_target_utilisation_with_almost_no_queue() {
    for n in [2u32, 6, 16] {
        for first in [1u32, 32] {
            let sc = reference_fabric(4, 32, 32, HPCC, &flows_to_host0(first, n, "20MB"));
            let out = run(&sc);
            let last = finishes_us(&out)[n as usize - 1];
            let port = &out.ports[sc.topology.leaf_down(0) as usize];
            let util = port.tx_bytes as f64 * 8.0 / (last * 1e-6) / 100e9;
            let q99 = port.p99_queue_bytes();
            assert!(
                (0.90..=0.96).contains(&util),
                "N {n} from host {first}: utilisation {:.1}%",
                util * 100.0
            );
            assert!(q99 <= 8_000, "N {n} from host {first}: P99 queue {q99} B");
        }
    }
}

#[test]
fn hpcc_and_dcqcn_fields_do_not_mix() {
    let base = "
topology: { leaves: 1, spines: 0, hosts_per_leaf: 2, host_link: { rate: 100Gbps } }
workload:
  - flows: [ { src: 0, dst: 1, size: 100KB } ]
";
    let e = refused(&format!(
        "{base}cc: {{ algorithm: hpcc, preset: nvidia }}\n"
    ));
    assert!(e.contains("cc.preset: a DCQCN parameter"), "{e}");
    let e = refused(&format!(
        "{base}cc: {{ algorithm: dcqcn, target_utilization: 0.9 }}\n"
    ));
    assert!(
        e.contains("cc.target_utilization: an HPCC parameter"),
        "{e}"
    );
    let e = refused(&format!(
        "{base}cc: {{ algorithm: hpcc, target_utilization: 1.5 }}\n"
    ));
    assert!(e.contains("expected a fraction in (0, 1]"), "{e}");
    let e = refused(&format!(
        "{base}transport: {{ mode: raw }}\ncc: {{ algorithm: hpcc }}\n"
    ));
    assert!(e.contains("needs `transport.mode: rc`"), "{e}");
    // The defaults: the paper's eta and maxStage, R_AI = 0.05% of the line.
    let sc = scenario(&format!("{base}cc: {{ algorithm: hpcc }}\n"));
    match sc.cc {
        Some(doorbell::cc::CcParams::Hpcc(p)) => {
            assert_eq!((p.target_utilization, p.max_stage), (0.95, 5));
            assert_eq!(p.rate_ai_bps, 50e6);
            assert!(p.base_rtt.0 > 0);
        }
        other => panic!("{other:?}"),
    }
}

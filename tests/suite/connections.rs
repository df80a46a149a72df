//! Several messages on one queue pair: `connections: per_host_pair` and `max_send_wr`.

use doorbell::analytic::ideal_landed;
use doorbell::scenario::{parse_str, Overrides, Scenario};
use doorbell::sim::{run, Outcome};

fn scenario(max_send_wr: u32, op: &str) -> Scenario {
    let yaml = format!(
        "
topology:
  leaves: 2
  spines: 1
  hosts_per_leaf: 1
  host_link: {{ rate: 100Gbps, latency: 500ns }}
packet: {{ mtu: 4096B }}
transport:
  rc: {{ connections: per_host_pair, max_send_wr: {max_send_wr}, operation: {op}, recv_queue_depth: 2 }}
workload:
  - flows:
      - {{ src: 0, dst: 1, size: 64KiB }}
      - {{ src: 0, dst: 1, size: 64KiB }}
      - {{ src: 0, dst: 1, size: 64KiB }}
      - {{ src: 0, dst: 1, size: 64KiB }}
      - {{ src: 0, dst: 1, size: 64KiB }}
      - {{ src: 0, dst: 1, size: 64KiB }}
"
    );
    parse_str(&yaml, "c.yaml", "c", &Overrides::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn finishes(sc: &Scenario) -> Vec<u64> {
    let out = run(sc);
    out.flows
        .iter()
        .map(|f| {
            assert_eq!(f.outcome, Outcome::Completed);
            assert_eq!(f.delivered, f.def.size);
            f.finish.unwrap().0
        })
        .collect()
}

#[test]
fn messages_on_one_queue_pair_complete_in_order() {
    for op in ["write", "send", "read"] {
        for wr in [1, 2, 8] {
            let f = finishes(&scenario(wr, op));
            assert!(
                f.windows(2).all(|w| w[0] < w[1]),
                "{op} max_send_wr {wr}: {f:?}"
            );
        }
    }
}

#[test]
fn max_send_wr_1_waits_a_round_trip_between_messages() {
    // 64 KiB = 16 packets of 4122 B, +16 B RETH on the first. With room for all six
    // messages the send queue streams them back to back, so each finishes exactly one
    // message's serialization after the previous one: (16 x 4122 + 16) B at 100 Gb/s.
    let piped = finishes(&scenario(8, "write"));
    let message = (16 * 4122 + 16) * 80; // ps at 100 Gb/s: 80 ps per byte
    for w in piped.windows(2) {
        assert_eq!(w[1] - w[0], message);
    }
    // With max_send_wr 1 the next message is posted when the previous one's final ACK
    // arrives (which is when the previous one finishes), and then takes its own
    // empty-fabric FCT: the gap is exactly the ideal FCT, which is the message's one-way
    // trip plus its own final ACK's (30 B: 26 B headers + 4 B AETH, over 4 links of
    // 500 ns and 3 switches of 300 ns).
    let sc = scenario(1, "write");
    let ideal = run(&sc).flows[0].ideal.0;
    let ack_one_way = 4 * (30 * 80 + 500_000) + 3 * 300_000;
    assert_eq!(ideal, ideal_landed(&sc, 0, 1, 64 << 10).0 + ack_one_way);
    let serial = finishes(&sc);
    for w in serial.windows(2) {
        assert_eq!(w[1] - w[0], ideal);
    }
}

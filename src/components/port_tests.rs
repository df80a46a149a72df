//! Unit tests of the egress port (`port.rs`).

use super::*;
use crate::rng::{stream, Stream};
use crate::units::BitsPerSec;

const G100: BitsPerSec = BitsPerSec(100_000_000_000);

fn link() -> LinkParams {
    LinkParams {
        rate: G100,
        latency: SimDuration::from_ns(1000),
    }
}

fn switch_port() -> EgressPort {
    EgressPort::new(Tier::LeafToSpine, link(), Some(0), Node::Switch(1), 1 << 20)
}

fn q(pkt: PktId, wire: u32, ready: u64, ctrl: bool) -> Queued {
    Queued {
        ready: SimTime(ready),
        pkt,
        route: RouteInfo::default(),
        wire,
        ect: !ctrl,
        ctrl,
        ingress: 7,
    }
}

#[test]
fn serializes_at_the_link_rate_and_releases_at_the_end() {
    let mut p = switch_port();
    p.enqueue(q(1, 1000, 0, false));
    let tx = p.poll_transmit(SimTime(0)).unwrap();
    // 1000 B at 100 Gb/s = 80 ns.
    assert_eq!((tx.pkt, tx.start, tx.end), (1, SimTime(0), SimTime(80_000)));
    assert!(p.busy());
    assert_eq!(
        p.poll_transmit(SimTime(10)),
        Err(None),
        "one packet at a time"
    );
    assert_eq!(p.queued_bytes, 1000, "in service counts as queued");
    let sent = p.handle_tx_done();
    assert_eq!((sent.wire, sent.ingress, sent.ctrl), (1000, 7, false));
    assert_eq!((p.queued_bytes, p.tx_bytes, p.tx_packets), (0, 1000, 1));
}

#[test]
fn telemetry_stamps_queue_bytes_sent_time_and_rate_at_departure() {
    let mut p = switch_port();
    p.enqueue(q(1, 1000, 0, false));
    p.enqueue(q(2, 500, 0, false));
    let tx = p.poll_transmit(SimTime(0)).unwrap();
    // Packet 1 leaves with itself and packet 2 queued, nothing sent before it.
    let t1 = p.telemetry(tx.start);
    assert_eq!(
        (t1.queue_bytes, t1.tx_bytes, t1.time, t1.rate),
        (1500, 0, SimTime(0), G100)
    );
    p.handle_tx_done();
    let tx = p.poll_transmit(tx.end).unwrap();
    // Packet 2 leaves 80 ns later: 500 B queued (itself), 1000 B sent before it.
    let t2 = p.telemetry(tx.start);
    assert_eq!(
        (t2.queue_bytes, t2.tx_bytes, t2.time),
        (500, 1000, SimTime(80_000))
    );
}

#[test]
fn a_packet_waits_for_the_switch_latency_without_an_event() {
    let mut p = switch_port();
    p.enqueue(q(1, 1000, 300_000, false));
    let tx = p.poll_transmit(SimTime(100_000)).unwrap();
    assert_eq!(tx.start, SimTime(300_000));
    assert_eq!(tx.end, SimTime(380_000));
}

#[test]
fn control_goes_first_among_ready_packets_only() {
    let mut p = switch_port();
    p.enqueue(q(1, 1000, 0, false));
    p.enqueue(q(2, 64, 0, true));
    assert_eq!(
        p.poll_transmit(SimTime(0)).unwrap().pkt,
        2,
        "ready control first"
    );
    p.handle_tx_done();
    assert_eq!(p.poll_transmit(SimTime(0)).unwrap().pkt, 1);
    p.handle_tx_done();
    // A control packet still inside the switch does not hold up ready data.
    p.enqueue(q(3, 1000, 0, false));
    p.enqueue(q(4, 64, 50_000, true));
    assert_eq!(p.poll_transmit(SimTime(0)).unwrap().pkt, 3);
}

/// Sends `n` queued packets at time 0, one after the other: `field` of each, in order.
fn send_all<T>(p: &mut EgressPort, n: usize, field: impl Fn(&Transmit) -> T) -> Vec<T> {
    (0..n)
        .map(|_| {
            let v = field(&p.poll_transmit(SimTime(0)).unwrap());
            p.handle_tx_done();
            v
        })
        .collect()
}

#[test]
fn fifo_within_a_class() {
    let mut p = switch_port();
    for i in 0..5 {
        p.enqueue(q(i, 500, 0, false));
    }
    let order = send_all(&mut p, 5, |t| t.pkt);
    assert_eq!(order, vec![0, 1, 2, 3, 4]);
}

#[test]
fn pfc_pause_holds_data_for_the_quanta_and_resume_ends_it() {
    // 65535 quanta x 512 bit times at 100 Gb/s = 335.5392 us.
    let mut p = switch_port().with_pfc(65535);
    p.enqueue(q(1, 1000, 0, false));
    assert!(!p.handle_pause(SimTime(0), true));
    assert!(p.is_paused(SimTime(335_539_199)));
    assert!(!p.is_paused(SimTime(335_539_200)));
    // Paused: the first look asks for one wake-up at the pause's end, later ones not.
    assert_eq!(
        p.poll_transmit(SimTime(10)),
        Err(Some(SimTime(335_539_200)))
    );
    assert_eq!(p.poll_transmit(SimTime(20)), Err(None));
    // Control is never paused.
    p.enqueue(q(2, 64, 0, true));
    assert_eq!(p.poll_transmit(SimTime(30)).unwrap().pkt, 2);
    p.handle_tx_done();
    // RESUME ends the pause at once and says the port may send.
    assert!(p.handle_pause(SimTime(1_000_000), false));
    p.handle_wake();
    assert_eq!(p.poll_transmit(SimTime(1_000_000)).unwrap().pkt, 1);
    assert_eq!(p.paused_time(SimTime(5_000_000)), 1_000_000);
}

#[test]
fn a_refreshed_pause_is_one_pause_in_the_accounting() {
    let mut p = switch_port().with_pfc(1000);
    let hold = serialization_delay(64_000, G100).0;
    p.handle_pause(SimTime(0), true);
    p.handle_pause(SimTime(hold / 2), true);
    assert_eq!(p.paused_time(SimTime(10 * hold)), hold / 2 + hold);
}

#[test]
fn credits_are_spent_per_64_byte_block_and_stalls_are_timed() {
    let mut p = switch_port().with_credits(20);
    // 1000 B = 16 blocks.
    p.enqueue(q(1, 1000, 0, false));
    p.enqueue(q(2, 1000, 0, false));
    assert_eq!(p.poll_transmit(SimTime(0)).unwrap().pkt, 1);
    p.handle_tx_done();
    // 4 blocks left: packet 2 stalls from t = 100.
    assert_eq!(p.poll_transmit(SimTime(100)), Err(None));
    p.handle_credits(11);
    assert_eq!(p.poll_transmit(SimTime(150)), Err(None), "15 < 16 blocks");
    p.handle_credits(1);
    assert_eq!(p.poll_transmit(SimTime(400)).unwrap().pkt, 2);
    assert_eq!(p.stalled_time(SimTime(1000)), 300);
    // Control needs no credit.
    p.handle_tx_done();
    p.enqueue(q(3, 64, 0, true));
    assert_eq!(p.poll_transmit(SimTime(500)).unwrap().pkt, 3);
}

#[test]
fn credits_on_their_way_back_land_in_order_and_wake_a_waiting_port_once() {
    let mut p = switch_port().with_credits(20);
    // Not waiting: a return asks for no event.
    assert_eq!(p.credits_returning(10, 4), None);
    p.enqueue(q(1, 1000, 0, false));
    p.enqueue(q(2, 1000, 0, false));
    assert_eq!(p.poll_transmit(SimTime(0)).unwrap().pkt, 1);
    p.handle_tx_done();
    // 4 blocks left and 4 on their way (key 10): too few, so the port waits for the
    // first return, and asks once.
    assert_eq!(p.credits_returning(20, 8), None, "not waiting yet");
    assert_eq!(p.poll_transmit(SimTime(100)), Err(None));
    assert_eq!(p.credit_wake_due(), Some(10));
    assert_eq!(p.credit_wake_due(), None, "one wake-up at a time");
    // Up to key 9 nothing lands; key 10 lands the first (8 blocks: still short).
    p.land_credits(9);
    assert_eq!(p.downstream_bytes(), (20 - 4) * 64);
    p.land_credits(10);
    assert_eq!(p.downstream_bytes(), (20 - 8) * 64);
    assert_eq!(p.poll_transmit(SimTime(200)), Err(None));
    assert_eq!(p.credit_wake_due(), Some(20), "then the next return");
    p.land_credits(25);
    assert_eq!(p.poll_transmit(SimTime(300)).unwrap().pkt, 2);
    assert_eq!(p.stalled_time(SimTime(1000)), 200);
    // Nothing left on its way: a waiting port asks when the next return is made.
    p.handle_tx_done();
    p.enqueue(q(3, 1000, 0, false));
    assert_eq!(p.poll_transmit(SimTime(400)), Err(None));
    assert_eq!(p.credit_wake_due(), None);
    assert_eq!(p.credits_returning(30, 16), Some(30));
}

/// What adaptive routing weighs counts the returns due by its key as landed, and
/// lands nothing: the port's own events then find the same credits and the same
/// wake-up to ask for as they would have had the returns landed there.
#[test]
fn the_adaptive_load_counts_returns_due_without_landing_them() {
    let mut p = switch_port().with_credits(20);
    const HELD: u64 = 1 << 20;
    // 1,000 B take 16 blocks: 4 left, 16 held downstream, 1,000 B queued behind.
    p.enqueue(q(1, 1000, 0, false));
    p.enqueue(q(2, 1000, 0, false));
    assert_eq!(p.poll_transmit(SimTime(0)).unwrap().pkt, 1);
    p.handle_tx_done();
    assert_eq!(p.credits_returning(10, 4), None);
    assert_eq!(p.credits_returning(20, 8), None);
    // Under key 9 nothing is due: short of credit for 1,000 B, so held.
    assert_eq!(
        p.adaptive_load(SimTime(50), 1000, 9, HELD),
        1000 + 16 * 64 + HELD
    );
    // Under key 10: 8 blocks, still short; under 20: 16, enough (4 held downstream).
    assert_eq!(
        p.adaptive_load(SimTime(50), 1000, 10, HELD),
        1000 + 12 * 64 + HELD
    );
    assert_eq!(p.adaptive_load(SimTime(50), 1000, 20, HELD), 1000 + 4 * 64);
    // A smaller packet fits in what is there.
    assert_eq!(p.adaptive_load(SimTime(50), 64, 9, HELD), 1000 + 16 * 64);
    // Nothing landed: the port still finds 4 blocks and asks for the first return.
    assert_eq!(p.poll_transmit(SimTime(100)), Err(None));
    assert_eq!(p.credit_wake_due(), Some(10));
    p.land_credits(20);
    assert_eq!(p.downstream_bytes(), 4 * 64);
    assert_eq!(p.adaptive_load(SimTime(50), 1000, 20, HELD), 1000 + 4 * 64);
}

#[test]
fn red_marks_by_the_queue_left_behind() {
    let red = Red {
        kmin: 2000,
        kmax: 4000,
        pmax: 1.0,
    };
    assert_eq!(red.probability(2000), 0.0);
    assert_eq!(red.probability(3000), 0.5);
    assert_eq!(red.probability(4000), 1.0);
    assert_eq!(red.probability(4001), 1.0);
    let mut p = switch_port().with_red(red, stream(1, Stream::Ecn, 0, 0));
    // Five packets of 1000 B: the first leaves 4000 B behind (marked for sure), the
    // last leaves none; control packets are never marked.
    for i in 0..5 {
        p.enqueue(q(i, 1000, 0, false));
    }
    let marks = send_all(&mut p, 5, |t| t.ecn_marked);
    assert!(marks[0]);
    assert!(!marks[3] && !marks[4]);
    p.enqueue(q(9, 64, 0, true));
    for i in 0..8 {
        p.enqueue(q(i, 1000, 0, false));
    }
    assert!(!p.poll_transmit(SimTime(0)).unwrap().ecn_marked);
}

#[test]
fn red_marks_at_pmax_share_in_between() {
    // q behind = 3000 between kmin 2000 and kmax 4000 with pmax 0.2: p = 0.1.
    let red = Red {
        kmin: 2000,
        kmax: 4000,
        pmax: 0.2,
    };
    let mut p = switch_port().with_red(red, stream(3, Stream::Ecn, 5, 0));
    let n = 20_000;
    let mut marked = 0;
    for i in 0..n {
        for j in 0..4 {
            p.enqueue(q(i * 4 + j, 1000, 0, false));
        }
        marked += p.poll_transmit(SimTime(0)).unwrap().ecn_marked as u32;
        p.handle_tx_done();
        for _ in 0..3 {
            p.poll_transmit(SimTime(0)).unwrap();
            p.handle_tx_done();
        }
    }
    // Binomial(20000, 0.1): sd 42; 5 sd is 212.
    assert!((marked as i64 - 2000).abs() < 212, "{marked}");
}

#[test]
fn queue_depth_is_sampled_as_arrivals_find_it() {
    let mut p = switch_port();
    p.enqueue(q(1, 1000, 0, false));
    p.enqueue(q(2, 3000, 0, false));
    assert_eq!(p.max_queue_bytes, 1000);
    assert_eq!(p.mean_queue_bytes(), 500.0);
    assert_eq!(p.p99_queue_bytes(), 1000);
}

/// A port's depths, kept as indices in batches and counted a batch at a time, make the
/// histogram recording each depth as it came makes (`queue_depth::record_depth`, the
/// rule every result file was made with), with a partial batch pending and after
/// several whole ones, and with depths past what a histogram sized for the buffer
/// holds (a 16 KiB buffer: 257 cells, depths to 1,560). An idle port has none.
#[test]
fn batched_depth_indices_make_the_recorded_histogram() {
    let mut p = EgressPort::new(
        Tier::LeafToSpine,
        link(),
        Some(0),
        Node::Switch(1),
        16 << 10,
    );
    assert!(p.queue_histogram().is_none());
    let cells = (16 << 10) / CELL_BYTES + 1;
    let mut recorded = super::queue_depth::queue_histogram();
    for k in 0..100u64 {
        // Each 1,000-byte packet finds the k before it queued.
        super::queue_depth::record_depth(&mut recorded, (k * 1000).div_ceil(CELL_BYTES), cells);
        p.enqueue(q(k as PktId, 1000, 0, false));
        if k == 40 || k == 99 {
            let made = p.queue_histogram().expect("depths were seen");
            let bins = |h: &Histogram<u32>| -> Vec<(u64, u32)> {
                h.iter_recorded()
                    .map(|v| (v.value_iterated_to(), v.count_at_value()))
                    .collect()
            };
            assert_eq!(bins(&made), bins(&recorded), "after {} depths", k + 1);
        }
    }
    // Past the buffer's reach (511 cells) depths count as the buffer's 257: the 67
    // from the 34th packet's on (33,000 bytes, 516 cells). The deepest kept is the
    // 33rd's, 500 cells (in the bucket of 500 and 501).
    let h = p.queue_histogram().unwrap();
    assert_eq!((h.count_at(257), h.max()), (67, 501));
    p.flush_stats();
    assert_eq!(p.queue_histogram().unwrap().len(), 100);
}

/// A packet's serialization time is one multiplication where the link's rate makes a
/// byte a whole number of picoseconds, and the division otherwise: the same end either
/// way, to the picosecond, for every packet size up to a jumbo frame.
#[test]
fn serialization_takes_whole_picoseconds_per_byte_or_divides() {
    let gbps = |g: u64| BitsPerSec(g * 1_000_000_000);
    // (rate, its picoseconds per byte when whole): 100 Gb/s is 80 ps a byte; 3 Gb/s
    // (2,666.67) and 3.2 Tb/s (2.5) are not whole, so they divide.
    let cases = [
        (gbps(25), 320),
        (gbps(100), 80),
        (gbps(400), 20),
        (gbps(800), 10),
        (gbps(3), 0),
        (gbps(3_200), 0),
        (BitsPerSec(1_000), 0), // 8e9 ps a byte: more than 32 bits hold
    ];
    for (rate, whole) in cases {
        let mut p = EgressPort::new(
            Tier::LeafToSpine,
            LinkParams {
                rate,
                latency: SimDuration::from_ns(1000),
            },
            Some(0),
            Node::Switch(1),
            1 << 20,
        );
        assert_eq!(p.ps_per_byte, whole, "{rate:?}");
        for wire in (1..=9_216u32).step_by(7) {
            let start = SimTime(1_234_567);
            let tx = p.transmit(q(1, wire, 0, true), start);
            assert_eq!(
                tx.end,
                start + serialization_delay(wire as u64, rate),
                "{rate:?} {wire} B"
            );
            p.in_service = None;
        }
    }
}

//! Rule-by-rule tests of the RC requester and responder (IBTA vol. 1 §9.7).
use super::*;
use crate::units::SimTime;

fn params() -> RcParams {
    RcParams {
        path_mtu: 1000,
        timeout: 10,
        retry_cnt: 3,
        ..RcParams::default()
    }
}

const T0: SimTime = SimTime(0);

fn drain(r: &mut Requester, now: SimTime) -> Vec<TxRequest> {
    std::iter::from_fn(|| r.poll_transmit(now)).collect()
}

fn ack(psn: u32) -> AckInfo {
    AckInfo {
        kind: AckKind::Ack,
        psn,
        credits: 0,
        rnr_code: 0,
        count: 0,
    }
}

fn nak_seq(psn: u32) -> AckInfo {
    AckInfo {
        kind: AckKind::NakSeq,
        ..ack(psn)
    }
}

#[test]
fn psn_arithmetic_wraps_at_24_bits() {
    assert_eq!(psn_add(PSN_MASK, 1), 0);
    assert_eq!(psn_add(PSN_MASK - 1, 5), 3);
    assert_eq!(psn_diff(2, PSN_MASK), 3);
    assert_eq!(psn_diff(PSN_MASK, 2), -3);
    assert_eq!(psn_diff(0x80_0000, 0), -0x80_0000);
    assert_eq!(psn_diff(0x7F_FFFF, 0), 0x7F_FFFF);
}

#[test]
fn local_ack_timeout_is_4_096_us_times_2_pow_timeout() {
    assert_eq!(local_ack_timeout(0), None);
    assert_eq!(local_ack_timeout(1).unwrap().0, 8_192_000);
    // Design reference: 12 = 16.8 ms, 14 = 67.1 ms, 18 = 1.07 s, 20 = 4.3 s.
    assert_eq!(local_ack_timeout(12).unwrap().0, 16_777_216_000);
    assert_eq!(local_ack_timeout(14).unwrap().0, 67_108_864_000);
    assert_eq!(local_ack_timeout(18).unwrap().0, 1_073_741_824_000);
    assert_eq!(local_ack_timeout(20).unwrap().0, 4_294_967_296_000);
}

#[test]
fn rnr_timer_table_matches_linux() {
    assert_eq!(rnr_timer(1), SimDuration::from_us(10));
    assert_eq!(rnr_timer(12), SimDuration::from_us(640));
    assert_eq!(rnr_timer(14), SimDuration::from_us(1280));
    assert_eq!(rnr_timer(31), SimDuration::from_us(491_520));
    assert_eq!(rnr_timer(0), SimDuration::from_us(655_360));
}

#[test]
fn write_is_segmented_and_acked_cumulatively() {
    let mut r = Requester::new(params(), 0);
    r.post(7, Op::Write, 2500);
    let pkts = drain(&mut r, T0);
    assert_eq!(pkts.len(), 3);
    assert_eq!(
        pkts.iter().map(|p| p.payload).collect::<Vec<_>>(),
        vec![1000, 1000, 500]
    );
    assert!(pkts[0].first && !pkts[0].last && pkts[2].last);
    assert_eq!(
        pkts.iter().map(|p| p.psn).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    r.handle_ack(SimTime(10), ack(1));
    assert_eq!(
        r.pop_completion(),
        None,
        "not done until the last PSN is acked"
    );
    r.handle_ack(SimTime(20), ack(2));
    assert_eq!(
        r.pop_completion(),
        Some(Completion {
            wr_id: 7,
            status: WcStatus::Success
        })
    );
    assert_eq!(
        r.next_timeout(),
        None,
        "nothing outstanding: timer disarmed"
    );
}

#[test]
fn window_limits_packets_in_flight() {
    let mut r = Requester::new(
        RcParams {
            window_packets: Some(2),
            ..params()
        },
        0,
    );
    r.post(1, Op::Write, 5000);
    assert_eq!(drain(&mut r, T0).len(), 2);
    r.handle_ack(SimTime(5), ack(0));
    assert_eq!(drain(&mut r, SimTime(5)).len(), 1);
}

#[test]
fn congestion_control_window_and_window_packets_take_the_smaller() {
    let mut r = Requester::new(
        RcParams {
            window_packets: Some(3),
            ..params()
        },
        0,
    );
    r.set_cc_window(Some(1));
    assert_eq!(r.window(), Some(1));
    r.post(1, Op::Write, 5000);
    assert_eq!(drain(&mut r, T0).len(), 1, "the CC window of 1 binds");
    r.set_cc_window(Some(10));
    assert_eq!(r.window(), Some(3));
    assert_eq!(drain(&mut r, T0).len(), 2, "now window_packets = 3 binds");
    r.set_cc_window(None);
    assert_eq!(r.window(), Some(3));
    let mut u = Requester::new(params(), 0);
    u.set_cc_window(Some(2));
    u.post(1, Op::Write, 5000);
    assert_eq!(drain(&mut u, T0).len(), 2, "a CC window alone limits too");
    // A CC window below ack_every would wait for an ACK that needs more packets than it
    // may send (fuzz seed 21, case 299: HPCC at 1 Gb/s with ack_every 4): raised to it.
    let mut a = Requester::new(
        RcParams {
            ack_every: 4,
            ..params()
        },
        0,
    );
    a.set_cc_window(Some(2));
    assert_eq!(a.window(), Some(4));
}

#[test]
fn nak_seq_goes_back_to_the_naked_psn() {
    let mut r = Requester::new(params(), 0);
    r.post(1, Op::Write, 5000);
    assert_eq!(drain(&mut r, T0).len(), 5);
    r.handle_ack(SimTime(5), nak_seq(2));
    let again = drain(&mut r, SimTime(5));
    assert_eq!(
        again.iter().map(|p| p.psn).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    assert!(again.iter().all(|p| p.retransmission));
    assert_eq!(r.stats.retransmissions, 3);
    assert_eq!(r.stats.seq_naks, 1);
}

#[test]
fn timeout_fires_exactly_one_local_ack_timeout_after_the_last_send() {
    let mut r = Requester::new(params(), 0);
    r.post(1, Op::Write, 1000);
    drain(&mut r, SimTime(123));
    let t = local_ack_timeout(10).unwrap();
    assert_eq!(r.next_timeout(), Some(SimTime(123) + t));
    r.handle_timeout(SimTime(123) + t);
    assert_eq!(r.stats.timeouts, 1);
    let again = drain(&mut r, SimTime(123) + t);
    assert_eq!(again.len(), 1);
    assert!(again[0].retransmission);
}

#[test]
fn retry_cnt_retransmissions_then_error() {
    // retry_cnt 3: the original and 3 retransmissions, then the 4th timeout fails.
    let mut r = Requester::new(params(), 0);
    r.post(1, Op::Write, 1000);
    r.post(2, Op::Write, 1000);
    let mut now = T0;
    let mut sent = drain(&mut r, now).len();
    while r.state() == QpState::ReadyToSend {
        now = r.next_timeout().expect("armed");
        r.handle_timeout(now);
        sent += drain(&mut r, now).len();
    }
    assert_eq!(r.stats.retransmissions, 3 * 2);
    assert_eq!(sent, 2 + 3 * 2);
    assert_eq!(r.stats.timeouts, 4);
    assert_eq!(r.pop_completion().unwrap().status, WcStatus::RetryExceeded);
    assert_eq!(r.pop_completion().unwrap().status, WcStatus::Flushed);
    assert_eq!(r.next_timeout(), None);
}

/// Regression (issue 19's fuzz: a run that never ended): a queue pair failed by a NAK
/// (retry_cnt 0) kept its ACK deadline, so its timer fired at that same instant forever
/// (the event loop never advanced). An errored queue pair waits for nothing.
#[test]
fn a_queue_pair_failed_by_a_nak_has_no_timer_left() {
    let mut r = Requester::new(
        RcParams {
            retry_cnt: 0,
            ..params()
        },
        0,
    );
    r.post(1, Op::Write, 5000);
    drain(&mut r, T0);
    assert!(r.next_timeout().is_some(), "the ACK timer runs");
    r.handle_ack(SimTime(5), nak_seq(2));
    assert_eq!(r.state(), QpState::Error);
    assert_eq!(r.pop_completion().unwrap().status, WcStatus::RetryExceeded);
    assert_eq!(r.next_timeout(), None);
    r.handle_timeout(SimTime(1 << 40));
    assert_eq!(r.next_timeout(), None);
}

#[test]
fn progress_resets_the_retry_counter() {
    let mut r = Requester::new(params(), 0);
    r.post(1, Op::Write, 3000);
    drain(&mut r, T0);
    for i in 0..3u32 {
        let now = r.next_timeout().unwrap();
        r.handle_timeout(now);
        drain(&mut r, now);
        r.handle_ack(now, ack(i));
    }
    assert_eq!(r.state(), QpState::ReadyToSend);
    assert_eq!(r.pop_completion().unwrap().status, WcStatus::Success);
}

#[test]
fn responder_delivers_in_order_naks_a_gap_once_and_reacks_duplicates() {
    let mut resp = Responder::new(params(), 0);
    let mut r = Requester::new(params(), 0);
    r.post(1, Op::Write, 4000);
    let p = drain(&mut r, T0);
    let a0 = resp.handle_request(T0, &p[0]);
    assert_eq!(a0.deliver, 1000);
    assert_eq!(a0.reply.unwrap().kind, AckKind::Ack);
    // p[1] lost: p[2] and p[3] are out of sequence; only the first NAKs.
    let a2 = resp.handle_request(T0, &p[2]);
    assert_eq!(a2.reply.unwrap().kind, AckKind::NakSeq);
    assert_eq!(a2.reply.unwrap().psn, 1);
    assert_eq!(a2.deliver, 0);
    let a3 = resp.handle_request(T0, &p[3]);
    assert_eq!(a3.reply, None);
    // The expected PSN arrives: delivered, NAK state clears.
    let a1 = resp.handle_request(T0, &p[1]);
    assert_eq!(a1.deliver, 1000);
    // A duplicate is never delivered twice and is re-acked with the latest PSN.
    let dup = resp.handle_request(T0, &p[0]);
    assert!(dup.duplicate);
    assert_eq!(dup.deliver, 0);
    assert_eq!(dup.reply.unwrap().psn, 1);
}

#[test]
fn ack_every_coalesces_and_message_end_always_acks() {
    let p = RcParams {
        ack_every: 3,
        ..params()
    };
    let mut resp = Responder::new(p, 0);
    let mut r = Requester::new(p, 0);
    r.post(1, Op::Write, 4000);
    let acks: Vec<bool> = drain(&mut r, T0)
        .iter()
        .map(|x| resp.handle_request(T0, x).reply.is_some())
        .collect();
    assert_eq!(acks, vec![false, false, true, true]);
}

#[test]
fn send_consumes_a_receive_wqe_or_is_rnr_naked() {
    let p = RcParams {
        e2e_credits: false,
        min_rnr_timer: 1,
        rnr_retry: 1,
        ..params()
    };
    let mut resp = Responder::new(p, 1);
    let mut r = Requester::new(p, 0);
    r.post(1, Op::Send, 500);
    r.post(2, Op::Send, 500);
    let pk = drain(&mut r, T0);
    assert_eq!(resp.handle_request(T0, &pk[0]).deliver, 500);
    assert_eq!(resp.recv_wqes(), 0);
    let rnr = resp.handle_request(T0, &pk[1]).reply.unwrap();
    assert_eq!(rnr.kind, AckKind::NakRnr);
    assert_eq!(rnr.psn, 1);
    r.handle_ack(SimTime(100), ack(0));
    r.handle_ack(SimTime(100), rnr);
    // Waits the min_rnr_timer value (code 1 = 10 us) before resending.
    assert_eq!(r.poll_transmit(SimTime(100)), None);
    assert_eq!(
        r.next_timeout(),
        Some(SimTime(100) + SimDuration::from_us(10))
    );
    let t = SimTime(100) + SimDuration::from_us(10);
    r.handle_timeout(t);
    let again = r.poll_transmit(t).unwrap();
    assert_eq!(again.psn, 1);
    // A second RNR NAK exhausts rnr_retry 1.
    let rnr2 = resp.handle_request(T0, &again).reply.unwrap();
    r.handle_ack(t, rnr2);
    assert_eq!(r.pop_completion().unwrap().status, WcStatus::Success);
    assert_eq!(
        r.pop_completion().unwrap().status,
        WcStatus::RnrRetryExceeded
    );
}

#[test]
fn packets_behind_an_rnr_nak_are_dropped_silently() {
    let p = RcParams {
        e2e_credits: false,
        ..params()
    };
    let mut resp = Responder::new(p, 0);
    let mut r = Requester::new(p, 0);
    r.post(1, Op::Send, 3000);
    let pk = drain(&mut r, T0);
    assert_eq!(
        resp.handle_request(T0, &pk[0]).reply.unwrap().kind,
        AckKind::NakRnr
    );
    // The rest of the message draws no sequence NAK (which would spend retry_cnt).
    assert_eq!(resp.handle_request(T0, &pk[1]).reply, None);
    assert_eq!(resp.handle_request(T0, &pk[2]).reply, None);
    // Once a receive WQE is posted, the resent message is accepted from its start.
    resp.post_recv(1);
    let a = resp.handle_request(T0, &pk[0]);
    assert_eq!(a.deliver, 1000);
}

#[test]
fn rnr_retry_7_never_fails() {
    let p = RcParams {
        e2e_credits: false,
        rnr_retry: 7,
        min_rnr_timer: 1,
        ..params()
    };
    let mut resp = Responder::new(p, 0);
    let mut r = Requester::new(p, 0);
    r.post(1, Op::Send, 100);
    let mut now = T0;
    for _ in 0..100 {
        let pkt = r.poll_transmit(now).unwrap();
        let nak = resp.handle_request(T0, &pkt).reply.unwrap();
        r.handle_ack(now, nak);
        now = r.next_timeout().unwrap();
        r.handle_timeout(now);
    }
    assert_eq!(r.state(), QpState::ReadyToSend);
    resp.post_recv(1);
    let pkt = r.poll_transmit(now).unwrap();
    r.handle_ack(now, resp.handle_request(T0, &pkt).reply.unwrap());
    assert_eq!(r.pop_completion().unwrap().status, WcStatus::Success);
}

#[test]
fn credits_gate_new_send_messages() {
    let p = params();
    let mut r = Requester::new(p, 1);
    r.post(1, Op::Send, 100);
    r.post(2, Op::Send, 100);
    assert_eq!(drain(&mut r, T0).len(), 1, "one credit, one SEND");
    r.handle_ack(
        SimTime(1),
        AckInfo {
            kind: AckKind::Ack,
            psn: 0,
            credits: 1,
            rnr_code: 0,
            count: 0,
        },
    );
    assert_eq!(
        drain(&mut r, SimTime(1)).len(),
        1,
        "the ACK's AETH returned a credit"
    );
    // WRITE does not need credits.
    r.post(3, Op::Write, 100);
    assert_eq!(drain(&mut r, SimTime(1)).len(), 1);
}

#[test]
fn psns_wrap_across_2_pow_24() {
    let p = RcParams {
        initial_psn: PSN_MASK - 1,
        ..params()
    };
    let mut r = Requester::new(p, 0);
    let mut resp = Responder::new(p, 0);
    r.post(1, Op::Write, 5000);
    let pk = drain(&mut r, T0);
    assert_eq!(
        pk.iter().map(|x| x.psn).collect::<Vec<_>>(),
        vec![PSN_MASK - 1, PSN_MASK, 0, 1, 2]
    );
    let mut delivered = 0;
    for x in &pk {
        let a = resp.handle_request(T0, x);
        delivered += a.deliver;
        r.handle_ack(T0, a.reply.unwrap());
    }
    assert_eq!(delivered, 5000);
    assert_eq!(r.pop_completion().unwrap().status, WcStatus::Success);
    assert_eq!(resp.expected_psn(), 3);
}

#[test]
fn read_streams_responses_and_rerequests_from_a_gap() {
    let mut r = Requester::new(params(), 0);
    let mut resp = Responder::new(params(), 0);
    r.post(9, Op::Read, 3000);
    let req = r.poll_transmit(T0).unwrap();
    assert_eq!((req.op, req.read_packets, req.psn), (Op::Read, 3, 0));
    assert_eq!(
        r.poll_transmit(T0),
        None,
        "max_rd_atomic 1, one READ at a time"
    );
    let a = resp.handle_request(T0, &req);
    assert_eq!(a.read, Some((0, 3)));
    assert_eq!(resp.expected_psn(), 3);
    // Response 0 arrives, 1 is lost, 2 arrives out of order.
    assert_eq!(r.handle_read_response(T0, 0, 1000), 1000);
    assert_eq!(r.handle_read_response(T0, 2, 1000), 0);
    let again = r.poll_transmit(T0).unwrap();
    assert_eq!((again.psn, again.read_packets), (1, 2));
    // The responder sees a duplicate READ and answers it again.
    let a = resp.handle_request(T0, &again);
    assert!(a.duplicate);
    assert_eq!(a.read, Some((1, 2)));
    assert_eq!(r.handle_read_response(T0, 1, 1000), 1000);
    assert_eq!(r.handle_read_response(T0, 2, 1000), 1000);
    assert_eq!(r.pop_completion().unwrap().status, WcStatus::Success);
}

/// max_rd_atomic counts the READs ahead of a READ in the send queue, whatever WRITEs lie
/// between them, and a READ answered frees its slot (the count is kept beside the queue,
/// not by walking it).
#[test]
fn max_rd_atomic_counts_reads_between_writes() {
    let mut r = Requester::new(
        RcParams {
            max_rd_atomic: 2,
            ..params()
        },
        0,
    );
    for (id, op) in [
        (0, Op::Write),
        (1, Op::Read),
        (2, Op::Write),
        (3, Op::Read),
        (4, Op::Read),
    ] {
        r.post(id, op, 1000);
    }
    let sent: Vec<(Op, u32)> = drain(&mut r, T0).iter().map(|t| (t.op, t.psn)).collect();
    assert_eq!(
        sent,
        vec![(Op::Write, 0), (Op::Read, 1), (Op::Write, 2), (Op::Read, 3)],
        "the third READ waits: two are outstanding"
    );
    // The WRITE's ACK, then READ 1's response, retire both.
    r.handle_ack(T0, ack(0));
    assert_eq!(r.handle_read_response(T0, 1, 1000), 1000);
    let ids: Vec<u64> = std::iter::from_fn(|| r.pop_completion())
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(ids, vec![0, 1]);
    let next = r.poll_transmit(T0).unwrap();
    assert_eq!(
        (next.op, next.psn),
        (Op::Read, 4),
        "one READ outstanding: the next goes"
    );
}

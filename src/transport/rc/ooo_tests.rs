//! Rule-by-rule tests of out-of-order RC ([`OutOfOrder`]): placement ahead of ePSN,
//! in-order completion, cumulative ACKs, the hole timer, selective NAKs and resends of
//! the missing PSNs only.
use super::*;

const T0: SimTime = SimTime(0);

fn us(x: u64) -> SimTime {
    SimTime(x * 1_000_000)
}

fn ooo(selective_nak: bool) -> RcParams {
    RcParams {
        path_mtu: 1000,
        timeout: 10,
        retry_cnt: 3,
        out_of_order: Some(OutOfOrder {
            reorder_timeout: SimDuration::from_us(20),
            selective_nak,
        }),
        ..RcParams::default()
    }
}

fn drain(r: &mut Requester, now: SimTime) -> Vec<TxRequest> {
    std::iter::from_fn(|| r.poll_transmit(now)).collect()
}

fn dones(resp: &mut Responder) -> Vec<u64> {
    std::iter::from_fn(|| resp.pop_done()).collect()
}

#[test]
fn packets_that_overtake_are_placed_and_messages_complete_in_order() {
    let (mut r, mut resp) = (Requester::new(ooo(false), 0), Responder::new(ooo(false), 0));
    r.post(7, Op::Write, 3000); // PSNs 0-2
    r.post(8, Op::Write, 2000); // PSNs 3-4
    let p = drain(&mut r, T0);
    // Arrival order 2, 4, 3, 1, 0 (as spraying over paths of different delay would).
    for i in [2, 4, 3, 1] {
        let a = resp.handle_request(T0, &p[i]);
        assert_eq!(a.deliver, 1000, "PSN {i} placed at once");
        assert_eq!(a.reply, None, "no NAK, and nothing new to acknowledge");
        assert!(!a.message_done);
    }
    assert!(dones(&mut resp).is_empty(), "message 8 waits for message 7");
    let a = resp.handle_request(T0, &p[0]);
    assert_eq!(a.deliver, 1000);
    // One cumulative ACK for all five; both messages complete, in order.
    assert_eq!(a.reply.unwrap().kind, AckKind::Ack);
    assert_eq!(a.reply.unwrap().psn, 4);
    assert_eq!(dones(&mut resp), vec![7, 8]);
    assert_eq!(resp.expected_psn(), 5);
    // A late duplicate is never delivered twice.
    let dup = resp.handle_request(T0, &p[3]);
    assert!(dup.duplicate && dup.deliver == 0);
    // The requester completes both on that one ACK.
    r.handle_ack(T0, a.reply.unwrap());
    let ids: Vec<u64> = std::iter::from_fn(|| r.pop_completion())
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(ids, vec![7, 8]);
    assert_eq!(resp.stats.seq_naks_sent, 0);
}

#[test]
fn a_hole_past_the_reorder_timeout_draws_selective_naks_and_only_its_psns_are_resent() {
    let (mut r, mut resp) = (Requester::new(ooo(false), 0), Responder::new(ooo(false), 0));
    r.post(1, Op::Write, 8000); // PSNs 0-7
    let p = drain(&mut r, T0);
    // 1, 2 and 5 are lost.
    let mut last_ack = None;
    for i in [0, 3, 4, 6, 7] {
        let a = resp.handle_request(us(1), &p[i]);
        last_ack = a.reply.or(last_ack);
    }
    r.handle_ack(us(2), last_ack.unwrap());
    assert_eq!(r.acked_packets(), 1, "cumulative: PSN 0 only");
    // The hole timer runs from the first packet held up (1 us) for 20 us.
    assert_eq!(resp.next_timeout(), Some(us(21)));
    resp.handle_timeout(us(20));
    assert!(resp.pop_nak().is_none(), "not yet");
    resp.handle_timeout(us(21));
    let naks: Vec<(u32, u32)> = std::iter::from_fn(|| resp.pop_nak())
        .map(|n| {
            assert_eq!(n.kind, AckKind::NakSelective);
            (n.psn, n.count)
        })
        .collect();
    assert_eq!(naks, vec![(1, 2), (5, 1)]);
    assert_eq!(
        resp.next_timeout(),
        Some(us(41)),
        "again if the resends are lost"
    );
    for n in [(1, 2), (5, 1)] {
        r.handle_ack(
            us(22),
            AckInfo {
                kind: AckKind::NakSelective,
                psn: n.0,
                credits: 0,
                rnr_code: 0,
                count: n.1,
            },
        );
    }
    let again: Vec<(u32, bool)> = drain(&mut r, us(22))
        .iter()
        .map(|t| (t.psn, t.retransmission))
        .collect();
    assert_eq!(
        again,
        vec![(1, true), (2, true), (5, true)],
        "the missing PSNs only"
    );
    assert_eq!(r.stats.retransmissions, 3);
    let mut acks = Vec::new();
    for i in [1, 2, 5] {
        acks.extend(resp.handle_request(us(23), &p[i]).reply);
    }
    assert_eq!(acks.last().unwrap().psn, 7, "all eight, cumulatively");
    assert_eq!(dones(&mut resp), vec![1]);
    assert_eq!(resp.next_timeout(), None);
    for a in acks {
        r.handle_ack(us(24), a);
    }
    assert_eq!(r.pop_completion().unwrap().wr_id, 1);
    assert_eq!(r.outstanding_wrs(), 0);
}

#[test]
fn with_selective_nak_a_hole_is_asked_for_as_soon_as_a_later_packet_shows_it() {
    let mut resp = Responder::new(ooo(true), 0);
    let mut r = Requester::new(ooo(true), 0);
    r.post(1, Op::Write, 6000);
    let p = drain(&mut r, T0);
    resp.handle_request(T0, &p[0]);
    resp.handle_request(T0, &p[3]); // shows 1-2 missing
    resp.handle_request(T0, &p[4]); // nothing new
    resp.handle_request(T0, &p[2]); // fills part of a known hole: nothing new
    let n: Vec<(u32, u32)> = std::iter::from_fn(|| resp.pop_nak())
        .map(|n| (n.psn, n.count))
        .collect();
    assert_eq!(n, vec![(1, 2)]);
}

#[test]
fn plain_rc_still_naks_the_first_packet_out_of_sequence() {
    let p = RcParams {
        out_of_order: None,
        ..ooo(false)
    };
    let mut resp = Responder::new(p, 0);
    let mut r = Requester::new(p, 0);
    r.post(1, Op::Write, 3000);
    let pk = drain(&mut r, T0);
    let a = resp.handle_request(T0, &pk[1]);
    assert_eq!(a.reply.unwrap().kind, AckKind::NakSeq);
    assert_eq!(a.deliver, 0);
    assert_eq!(resp.next_timeout(), None, "no hole timer on plain RC");
}

#[test]
fn read_responses_are_placed_out_of_order_and_a_hole_is_asked_for_again_to_the_end() {
    let mut r = Requester::new(ooo(false), 0);
    r.post(3, Op::Read, 4000); // responses 0-3
    let req = drain(&mut r, T0);
    assert_eq!(req.len(), 1);
    assert_eq!(r.handle_read_response(us(1), 2, 1000), 1000, "placed ahead");
    assert_eq!(r.handle_read_response(us(1), 2, 1000), 0, "a duplicate");
    assert_eq!(r.handle_read_response(us(1), 0, 1000), 1000);
    assert_eq!(r.acked_packets(), 1);
    // Response 1 is lost and 3 never comes: after the hole timer the READ is asked for
    // again from response 1 to its end.
    assert_eq!(r.next_timeout(), Some(us(21)));
    r.handle_timeout(us(21));
    let again = drain(&mut r, us(21));
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].op, again[0].psn, again[0].read_packets),
        (Op::Read, 1, 3)
    );
    assert_eq!(r.handle_read_response(us(22), 1, 1000), 1000);
    assert_eq!(r.acked_packets(), 3, "past the placed response 2");
    assert_eq!(r.handle_read_response(us(22), 2, 1000), 0, "placed already");
    assert_eq!(r.handle_read_response(us(22), 3, 1000), 1000);
    assert_eq!(r.pop_completion().unwrap().wr_id, 3);
}

#[test]
fn a_read_request_that_overtakes_is_asked_for_again_not_run_early() {
    let (mut r, mut resp) = (Requester::new(ooo(false), 0), Responder::new(ooo(false), 0));
    r.post(1, Op::Write, 1000); // PSN 0
    r.post(2, Op::Read, 2000); // PSNs 1-2
    let p = drain(&mut r, T0);
    let a = resp.handle_request(us(1), &p[1]);
    assert_eq!(a.read, None, "not run ahead of the WRITE");
    resp.handle_request(us(2), &p[0]);
    assert_eq!(
        resp.next_timeout(),
        Some(us(22)),
        "its PSNs count as a hole"
    );
    resp.handle_timeout(us(22));
    let nak = resp.pop_nak().unwrap();
    assert_eq!((nak.psn, nak.count), (1, 1));
    r.handle_ack(us(23), nak);
    let again = drain(&mut r, us(23));
    assert_eq!(
        (again[0].op, again[0].psn, again[0].read_packets),
        (Op::Read, 1, 2)
    );
    let a = resp.handle_request(us(24), &again[0]);
    assert_eq!(a.read, Some((1, 2)));
}

/// READ responses that arrive before the ACK of the WRITE ahead of them are placed; the
/// ACK then moves the requester past them too (they are in its memory already).
#[test]
fn an_ack_moves_past_read_responses_placed_behind_it() {
    let mut r = Requester::new(ooo(false), 0);
    r.post(1, Op::Write, 1000); // PSN 0
    r.post(2, Op::Read, 2000); // PSNs 1-2
    assert_eq!(drain(&mut r, T0).len(), 2);
    assert_eq!(
        r.handle_read_response(us(1), 1, 1000),
        1000,
        "placed ahead of the ACK"
    );
    assert_eq!(r.handle_read_response(us(1), 2, 1000), 1000);
    r.handle_ack(
        us(2),
        AckInfo {
            kind: AckKind::Ack,
            psn: 0,
            credits: 0,
            rnr_code: 0,
            count: 0,
        },
    );
    assert_eq!(r.acked_packets(), 3, "the WRITE and both responses");
    let ids: Vec<u64> = std::iter::from_fn(|| r.pop_completion())
        .map(|c| c.wr_id)
        .collect();
    assert_eq!(ids, vec![1, 2]);
    assert_eq!(r.next_timeout(), None, "no hole left, nothing outstanding");
}

fn selective(psn: u32, count: u32) -> AckInfo {
    AckInfo {
        kind: AckKind::NakSelective,
        psn,
        credits: 0,
        rnr_code: 0,
        count,
    }
}

/// Review finding: a packet that is always lost must still fail the queue pair. Each
/// round of selective NAKs naming the oldest unacknowledged PSN spends a retry (retry_cnt
/// 3: the fourth such round fails it), a NAK for a later hole spends none, a repeated run
/// is queued once, and resends never push the local ACK timer back.
#[test]
fn selective_nak_rounds_without_progress_spend_retries_and_fail() {
    let mut r = Requester::new(ooo(false), 0);
    r.post(1, Op::Write, 4000);
    drain(&mut r, T0);
    let deadline = r.next_timeout().unwrap();
    for round in 0..3 {
        let now = us(10 + 100 * round);
        r.handle_ack(now, selective(3, 1)); // a later hole: no retry spent
        r.handle_ack(now, selective(0, 1));
        r.handle_ack(now, selective(0, 1)); // the same run again: queued once
        let again: Vec<u32> = drain(&mut r, now).iter().map(|t| t.psn).collect();
        assert_eq!(again, vec![3, 0], "round {round}");
        assert_eq!(r.next_timeout(), Some(deadline), "resends keep the timer");
        assert_eq!(r.state(), QpState::ReadyToSend);
    }
    r.handle_ack(us(400), selective(0, 1));
    assert_eq!(r.state(), QpState::Error);
    assert_eq!(r.pop_completion().unwrap().status, WcStatus::RetryExceeded);
}

/// Review finding: an RNR NAK clears the selective resends waiting (the back-off resends
/// everything from that PSN), and the responder does not NAK the PSN it RNR-NAKed.
#[test]
fn an_rnr_nak_clears_selective_resends_and_the_responder_does_not_nak_its_psn() {
    let p = RcParams {
        min_rnr_timer: 12,
        ..ooo(false)
    };
    let mut r = Requester::new(p, 1);
    let mut resp = Responder::new(p, 0);
    r.post(1, Op::Send, 5000);
    let pk = drain(&mut r, T0);
    // Packets 1-4 arrive first (placed), then 0 finds no receive WQE: RNR NAK.
    for p in &pk[1..5] {
        resp.handle_request(us(1), p);
    }
    let rnr = resp.handle_request(us(2), &pk[0]).reply.unwrap();
    assert_eq!(rnr.kind, AckKind::NakRnr);
    r.handle_ack(us(3), selective(0, 1));
    r.handle_ack(us(3), rnr);
    assert!(
        drain(&mut r, us(3)).is_empty(),
        "waiting out the back-off, nothing queued"
    );
    // The hole at PSN 0 outlives the reorder timeout: no NAK for it while RNR stands.
    resp.handle_timeout(us(40));
    assert!(resp.pop_nak().is_none());
}

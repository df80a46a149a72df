//! A retired queue pair's responder answers for one path latency after its requester
//! retired it (`QueuePair::responder_until`), and its slot is not reused before then.

use super::run_loop::LoopState;
use super::Sim;
use crate::packet::{Packet, PktKind, FLAG_FIRST, FLAG_RETX};
use crate::units::{SimDuration, SimTime};

/// The run up to `until` (every event, without it).
fn finished_flow(until: Option<SimTime>) -> Sim {
    finished(until, "")
}

/// The same with `transport` settings.
fn finished(until: Option<SimTime>, transport: &str) -> Sim {
    // Host 0 (leaf 0) to host 4 (leaf 1): two host links of 200 ns and two fabric
    // links of 500 ns, 1.4 us.
    let yaml = format!(
        "name: t\nseed: 1\ntopology: {{ leaves: 2, spines: 2, hosts_per_leaf: 4, \
         host_link: {{ rate: 100Gbps, latency: 200ns }}, \
         fabric_link: {{ rate: 100Gbps, latency: 500ns }} }}\n\
         flow_control: {{ mode: lossy }}\n{transport}\
         workload:\n  - flows: [ {{ src: 0, dst: 4, size: 8KB }} ]\n"
    );
    let sc = crate::scenario::parse_str(&yaml, "t.yaml", "t", &Default::default())
        .unwrap_or_else(|e| panic!("{yaml}: {e}"));
    let mut sim = Sim::new(&sc);
    let mut st = LoopState::new(None);
    assert!(sim.advance(&mut st, until));
    sim
}

/// A copy of the flow's first data packet, sent again (a go-back-N straggler).
fn duplicate(sim: &mut Sim) -> crate::engine::PktId {
    let qp = &sim.qps[sim.flows[0].qp as usize];
    sim.pool.alloc(Packet {
        kind: PktKind::Data,
        psn: 0,
        aux: 0,
        flags: FLAG_FIRST | FLAG_RETX,
        ack_kind: 0,
        rnr_code: 0,
        op: 0,
        flow: 0,
        src: 0,
        dst: 4,
        flow_hash: qp.flow_hash,
        seq: 0,
        payload: 4096,
        wire: 4096 + 26,
    })
}

fn acks_alive(sim: &Sim) -> usize {
    let mut n = 0;
    sim.pool
        .for_each_live(|p| n += (p.kind == PktKind::Ack) as usize);
    n
}

#[test]
fn a_late_duplicate_is_acked_until_the_disconnect_reaches_the_responder() {
    let whole = finished_flow(None);
    let slot = whole.flows[0].qp as usize;
    let finish = whole.flows[0].finish.expect("the flow completed");
    assert!(whole.qps[slot].dead, "the requester retired the queue pair");
    // It retired as the last ACK arrived, when the flow completed.
    let until = whole.qps[slot].responder_until();
    assert_eq!(until, finish + SimDuration::from_ns(1400));
    // The same run, up to just before then.
    let mut sim = finished_flow(Some(SimTime(until.0 - 1)));
    let qp = &sim.qps[slot];
    assert!(qp.dead);
    let (acks, dups) = (qp.resp.stats.acks_sent, sim.rc_totals.duplicate_packets);
    assert_eq!(acks_alive(&sim), 0);
    // Just before the disconnect reaches it, the responder ACKs a duplicate again.
    let p = duplicate(&mut sim);
    sim.deliver(SimTime(until.0 - 1), 4, p);
    let qp = &sim.qps[slot];
    assert_eq!(qp.resp.stats.acks_sent, acks + 1, "ACKed again");
    assert_eq!(qp.resp.stats.duplicates, 1);
    assert_eq!(acks_alive(&sim), 1, "the ACK is on its way");
    assert_eq!(sim.rc_totals.duplicate_packets, dups);
    // From then on, a straggler is dropped (and counted as a duplicate).
    let mut st = LoopState::new(None);
    sim.advance(&mut st, Some(until));
    let p = duplicate(&mut sim);
    sim.deliver(until, 4, p);
    assert_eq!(sim.qps[slot].resp.stats.acks_sent, acks + 1, "not answered");
    assert_eq!(sim.rc_totals.duplicate_packets, dups + 1);
    // An answer reaching the retired requester is dropped too.
    let ack = duplicate(&mut sim);
    sim.pool.get_mut(ack).kind = PktKind::Ack;
    sim.deliver(until, 0, ack);
    assert_eq!(sim.rc_totals.duplicate_packets, dups + 1);
}

#[test]
fn a_slot_is_reused_only_once_its_responder_stopped_answering() {
    let mut sim = finished_flow(None);
    let slot = sim.flows[0].qp;
    let until = sim.qps[slot as usize].responder_until();
    let fresh = |sim: &Sim| {
        let open = super::transport::QpOpen {
            at: SimTime::ZERO,
            src: 1,
            dst: 5,
            conn: 0,
            flow_hash: 9,
            reverse_hash: 10,
            flow: 0,
            posted_now: 0,
        };
        sim.open_queue_pair(sim.rc.as_ref().unwrap().params, &open)
    };
    let qp = fresh(&sim);
    let before = sim.place_queue_pair(SimTime(until.0 - 1), qp);
    assert_ne!(before, slot, "the responder still answers: a new slot");
    let qp = fresh(&sim);
    assert_eq!(sim.place_queue_pair(until, qp), slot, "free from then");
    assert_eq!(sim.qps[slot as usize].gen, 1);
}

/// A duplicate READ request reaching a retired queue pair's responder is not answered:
/// its responses would find no requester, and listing them would hand the slot back
/// twice.
#[test]
fn a_late_read_request_starts_no_responses() {
    let transport = "transport: { rc: { operation: read } }\n";
    let whole = finished(None, transport);
    let slot = whole.flows[0].qp as usize;
    let until = whole.qps[slot].responder_until();
    assert!(whole.qps[slot].dead && until < SimTime::MAX);
    let mut sim = finished(Some(SimTime(until.0 - 1)), transport);
    let p = duplicate(&mut sim);
    let pkt = sim.pool.get_mut(p);
    pkt.kind = PktKind::ReadRequest;
    pkt.op = 2;
    pkt.aux = 2;
    pkt.payload = 0;
    sim.deliver(SimTime(until.0 - 1), 4, p);
    let qp = &sim.qps[slot];
    assert_eq!(qp.resp.stats.duplicates, 1, "taken as a duplicate");
    assert!(!qp.read_listed, "no responses listed");
    let held = sim
        .closing_qps
        .iter()
        .filter(|c| c.0 .1 == slot as u32)
        .count();
    assert_eq!(held, 1, "the slot is handed back once");
}

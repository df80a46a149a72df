//! Rule-by-rule tests of the host pipeline, each against the closed form its stage
//! documents (the costs are the configuration's, so a changed default cannot make a test
//! pass by accident).

use super::*;
use crate::nic::config::{resolve, MemoryKind};
use crate::nic::spec::HostSpec;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const MTU: u64 = 4096;

/// Host memory on both sides, `cpu` posting, polling: no staging and no interconnect.
fn cfg() -> HostConfig {
    let mut c = resolve(&HostSpec::default(), 4, true).expect("defaults resolve");
    c.posting = PostingMode::Cpu;
    c.memory_source = MemoryKind::Host;
    c.memory_destination = MemoryKind::Host;
    c.notify = Notify::Poll;
    c.blueflame = false;
    c.inline_max = 0;
    c.doorbell_batch = 1;
    let p = c.data_path(0, PostingMode::Cpu, MemoryKind::Host).unwrap();
    assert!(!p.staged && p.payload_extra == SimDuration::ZERO);
    assert_eq!(p.control_extra, SimDuration::ZERO);
    c
}

fn msg(size: u64) -> Message {
    Message {
        src: 0,
        dst: 1,
        size,
        workload: 0,
    }
}

fn pipeline(cfg: &HostConfig, msgs: &[Message]) -> HostPipeline {
    HostPipeline::new(cfg, 4, MTU, false, msgs.iter().copied(), &[None])
}

/// Runs the pipeline's wake-ups in time order (ties in the order asked) until none is
/// left; returns every `Ready` and `Done` with its time.
fn drive(p: &mut HostPipeline, first: Vec<HostAction>) -> Vec<(SimTime, HostAction)> {
    let mut heap = BinaryHeap::new();
    let mut seq = 0u64;
    let mut seen = Vec::new();
    let mut route = |now: SimTime, acts: Vec<HostAction>, heap: &mut BinaryHeap<_>| {
        for a in acts {
            match a {
                HostAction::Wake { at, wake, .. } => {
                    assert!(at >= now, "a wake-up in the past");
                    heap.push(Reverse((at, seq, WakeKey(wake))));
                    seq += 1;
                }
                HostAction::Ready { .. } => seen.push((now, a)),
                HostAction::Done { at, .. } => seen.push((at, a)),
            }
        }
    };
    route(SimTime::ZERO, first, &mut heap);
    while let Some(Reverse((now, _, WakeKey(w)))) = heap.pop() {
        let mut out = Vec::new();
        p.handle_wake(now, w, &mut out);
        route(now, out, &mut heap);
    }
    seen
}

/// `HostWake` ordered only so it can sit in the heap (the sequence number decides).
#[derive(PartialEq, Eq)]
struct WakeKey(HostWake);
impl PartialOrd for WakeKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for WakeKey {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

fn post_all(p: &mut HostPipeline, flows: std::ops::Range<FlowId>) -> Vec<HostAction> {
    let mut out = Vec::new();
    for f in flows {
        p.post(SimTime::ZERO, f, &mut out);
    }
    out
}

fn ready_at(seen: &[(SimTime, HostAction)], flow: FlowId) -> SimTime {
    seen.iter()
        .find(|(_, a)| *a == HostAction::Ready { flow })
        .expect("the message became ready")
        .0
}

#[test]
fn one_message_is_ready_after_build_doorbell_fetch_processing_and_first_read() {
    let c = cfg();
    let size = 64 * 1024;
    let mut p = pipeline(&c, &[msg(size)]);
    let first = post_all(&mut p, 0..1);
    let seen = drive(&mut p, first);
    let half = SimDuration(c.pcie_round_trip.0 / 2);
    let dma = c
        .data_path(0, PostingMode::Cpu, MemoryKind::Host)
        .unwrap()
        .dma_bandwidth;
    let want = SimTime::ZERO
        + c.costs.wqe_build
        + c.costs.doorbell_mmio
        + half
        + c.pcie_round_trip
        + serialization_delay(c.wqe_bytes, c.pcie_bandwidth)
        + c.wqe_processing
        + c.pcie_round_trip
        + serialization_delay(MTU, dma);
    assert_eq!(ready_at(&seen, 0), want);
    let t = p.msgs[0].t;
    assert_eq!(t[T_RUNG], (c.costs.wqe_build + c.costs.doorbell_mmio).0);
    assert_eq!(t[T_DOORBELL] - t[T_RUNG], half.0);
    let s = &p.nics[0].stats;
    assert_eq!((s.doorbells, s.wqe_fetches), (1, 1));
    assert_eq!(
        s.cpu_ps[CPU_POSTING],
        (c.costs.wqe_build + c.costs.doorbell_mmio).0
    );
    // PCIe bytes: the doorbell (8), the WQE and the whole payload (read as it streams).
    assert_eq!(s.pcie_bytes, 8 + c.wqe_bytes + size);
}

#[test]
fn a_batch_shares_one_doorbell_and_one_fetch() {
    let mut c = cfg();
    c.doorbell_batch = 4;
    c.posting_threads = 1;
    let mut p = pipeline(&c, &[msg(1 << 20); 4]);
    let first = post_all(&mut p, 0..4);
    let seen = drive(&mut p, first);
    let rung = 4 * c.costs.wqe_build.0 + c.costs.doorbell_mmio.0;
    for f in 0..4 {
        assert_eq!(p.msgs[f].t[T_RUNG], rung, "WQE {f}");
        assert_eq!(p.msgs[f].t[T_FETCHED], p.msgs[0].t[T_FETCHED]);
    }
    let s = &p.nics[0].stats;
    assert_eq!((s.doorbells, s.wqe_fetches), (1, 1));
    // The send engine takes them one at a time: ready times step by wqe_processing
    // (the payload reads overlap, max_outstanding_reads allowing).
    assert!(c.max_outstanding_reads >= 4);
    for f in 1..4 {
        assert_eq!(
            ready_at(&seen, f) - ready_at(&seen, f - 1),
            c.wqe_processing,
            "WQE {f}"
        );
    }
    // Two threads with a batch of 1 ring twice as many doorbells for the same work.
    c.doorbell_batch = 1;
    c.posting_threads = 2;
    let mut p = pipeline(&c, &[msg(1 << 20); 4]);
    let first = post_all(&mut p, 0..4);
    drive(&mut p, first);
    assert_eq!(p.nics[0].stats.doorbells, 4);
}

#[test]
fn blueflame_pushes_a_lone_wqe_with_its_doorbell_and_inline_data_needs_no_read() {
    let mut c = cfg();
    c.blueflame = true;
    c.inline_max = 64;
    let mut p = pipeline(&c, &[msg(64)]);
    let first = post_all(&mut p, 0..1);
    let seen = drive(&mut p, first);
    let t = p.msgs[0].t;
    assert_eq!(t[T_FETCHED], t[T_DOORBELL], "no WQE fetch");
    assert_eq!(
        ready_at(&seen, 0).0,
        t[T_DOORBELL] + c.wqe_processing.0,
        "no payload read"
    );
    let s = &p.nics[0].stats;
    assert_eq!(s.wqe_fetches, 0);
    assert_eq!(s.pcie_bytes, 8 + c.wqe_bytes + 64);
}

#[test]
fn reads_wait_for_a_free_slot() {
    let mut c = cfg();
    c.max_outstanding_reads = 1;
    c.posting_threads = 2;
    // Two messages posted at once on two threads: two doorbells at the same time, but
    // one read slot, so the second fetch starts when the first ends.
    let mut p = pipeline(&c, &[msg(1 << 20); 2]);
    let first = post_all(&mut p, 0..2);
    drive(&mut p, first);
    let fetch = c.pcie_round_trip + serialization_delay(c.wqe_bytes, c.pcie_bandwidth);
    let (a, b) = (p.msgs[0].t, p.msgs[1].t);
    assert_eq!(a[T_DOORBELL], b[T_DOORBELL]);
    assert_eq!(a[T_FETCHED] - a[T_DOORBELL], fetch.0);
    assert_eq!(b[T_FETCHED] - a[T_FETCHED], fetch.0);
}

#[test]
fn payload_dma_paces_the_next_packet() {
    let c = cfg();
    let mut p = pipeline(&c, &[msg(1 << 20), msg(64)]);
    let dma = c
        .data_path(0, PostingMode::Cpu, MemoryKind::Host)
        .unwrap()
        .dma_bandwidth;
    let t0 = SimTime(1_000_000);
    p.dma_read(t0, 0, 0, MTU);
    assert_eq!(p.dma_next(0), t0 + serialization_delay(MTU, dma));
    // Back to back: the second read starts when the first ends.
    p.dma_read(t0, 0, 0, MTU);
    assert_eq!(p.dma_next(0), t0 + serialization_delay(2 * MTU, dma));
    // Inline data came with the WQE.
    let mut c2 = c.clone();
    c2.inline_max = 64;
    let mut q = pipeline(&c2, &[msg(1 << 20), msg(64)]);
    q.dma_read(t0, 0, 1, 64);
    assert_eq!(q.dma_next(0), SimTime::ZERO);
}

#[test]
fn polling_completes_half_a_round_trip_and_a_poll_after_the_data() {
    let c = cfg();
    let mut p = pipeline(&c, &[msg(4096)]);
    let t0 = SimTime(5_000_000);
    let mut out = Vec::new();
    p.delivered(t0, 0, &mut out);
    p.delivered(t0 + SimDuration(1), 0, &mut out);
    assert_eq!(out.len(), 1, "only the first delivery counts");
    let seen = drive(&mut p, out);
    let half = SimDuration(c.pcie_round_trip.0 / 2);
    assert_eq!(
        seen,
        vec![(
            t0 + half + c.costs.cqe_poll,
            HostAction::Done {
                at: t0 + half + c.costs.cqe_poll,
                flow: 0
            }
        )]
    );
    assert!(
        p.nics[1].stats.poll_core,
        "a core spins on the receiver's CQ"
    );
    assert_eq!(p.msgs[0].t[T_CQE], (t0 + half).0);
}

#[test]
fn an_unmoderated_interrupt_costs_hard_irq_softirq_and_a_poll() {
    let mut c = cfg();
    c.notify = Notify::Interrupt(ModerationConfig::Off);
    let mut p = pipeline(&c, &[msg(4096)]);
    let t0 = SimTime(5_000_000);
    let mut out = Vec::new();
    p.delivered(t0, 0, &mut out);
    let seen = drive(&mut p, out);
    let cqe = t0 + SimDuration(c.pcie_round_trip.0 / 2);
    let done = cqe + c.costs.hard_irq + c.costs.softirq + c.costs.cqe_poll;
    assert_eq!(seen, vec![(done, HostAction::Done { at: done, flow: 0 })]);
    let s = &p.nics[1].stats;
    assert_eq!(s.interrupts, 1);
    assert_eq!(
        s.cpu_ps[CPU_INTERRUPTS],
        (c.costs.hard_irq + c.costs.softirq + c.costs.cqe_poll).0
    );
}

#[test]
fn a_moderated_interrupt_waits_for_its_frames_and_serves_them_together() {
    // frames: 2, a long timer: the first completion waits, the second fires the
    // interrupt, and its handler serves both, one poll each.
    let mut c = cfg();
    c.notify = Notify::Interrupt(ModerationConfig::Fixed(Moderation {
        usecs: SimDuration::from_us(100),
        frames: 2,
    }));
    let mut p = pipeline(&c, &[msg(4096), msg(4096)]);
    let t0 = SimTime(5_000_000);
    let gap = SimDuration::from_us(1);
    let mut out = Vec::new();
    p.delivered(t0, 0, &mut out);
    p.delivered(t0 + gap, 1, &mut out);
    let seen = drive(&mut p, out);
    let irq = t0 + gap + SimDuration(c.pcie_round_trip.0 / 2) + c.costs.hard_irq + c.costs.softirq;
    let first = irq + c.costs.cqe_poll;
    let second = first + c.costs.cqe_poll;
    assert_eq!(
        seen,
        vec![
            (first, HostAction::Done { at: first, flow: 0 }),
            (
                second,
                HostAction::Done {
                    at: second,
                    flow: 1
                }
            ),
        ]
    );
    assert_eq!(p.nics[1].stats.interrupts, 1);
}

#[test]
fn staged_gpu_memory_copies_at_pcie_bandwidth_before_and_after() {
    let mut c = cfg();
    c.memory_source = MemoryKind::Gpu;
    c.memory_destination = MemoryKind::Gpu;
    let path = c.data_path(0, PostingMode::Cpu, MemoryKind::Gpu).unwrap();
    assert!(
        path.staged,
        "`cpu` posting stages GPU data through host memory"
    );
    let size = 1 << 20;
    let mut p = pipeline(&c, &[msg(size)]);
    let first = post_all(&mut p, 0..1);
    drive(&mut p, first);
    let copy = c.costs.copy_launch + serialization_delay(size, c.pcie_bandwidth);
    assert_eq!(p.msgs[0].t[T_COPIED], copy.0);
    let t0 = SimTime(50_000_000);
    let mut out = Vec::new();
    p.delivered(t0, 0, &mut out);
    let seen = drive(&mut p, out);
    let notified = SimTime(p.msgs[0].t[T_NOTIFIED]);
    assert_eq!(
        seen,
        vec![(
            notified + copy,
            HostAction::Done {
                at: notified + copy,
                flow: 0
            }
        )]
    );
}

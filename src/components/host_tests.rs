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
                HostAction::Passes { .. } => {}
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

/// Marsaglia's xorshift from `seed`: `next(m)` draws below `m` (a test's own stream).
fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed;
    move |m| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    }
}

/// In `drive_posts`' list, the send completion of the message (its ACK) instead of its
/// post.
const SEND_DONE: FlowId = 1 << 31;

/// Posts `msgs` (message, time) in time order between the pipeline's wake-ups (a post
/// before a wake-up at the same time; a message marked `SEND_DONE` has its send
/// completed instead) and runs everything due by `until`; returns each `Ready` with its
/// time.
fn drive_posts(
    p: &mut HostPipeline,
    posts: &[(FlowId, SimTime)],
    until: SimTime,
) -> Vec<(SimTime, FlowId)> {
    let mut heap = BinaryHeap::new();
    let mut seq = 0u64;
    for &(f, at) in posts {
        heap.push(Reverse((at, seq, None, f)));
        seq += 1;
    }
    let mut ready = Vec::new();
    while let Some(Reverse((now, _, wake, f))) = heap.pop() {
        if now > until {
            break;
        }
        let mut out = Vec::new();
        match wake {
            None if f & SEND_DONE != 0 => p.send_completed(now, f & !SEND_DONE, &mut out),
            None => p.post(now, f, &mut out),
            Some(WakeKey(w)) => {
                p.handle_wake(now, w, &mut out);
            }
        }
        for a in out {
            match a {
                HostAction::Wake { at, wake, .. } => {
                    assert!(at >= now, "a wake-up in the past");
                    heap.push(Reverse((at, seq, Some(WakeKey(wake)), 0)));
                    seq += 1;
                }
                HostAction::Ready { flow } => ready.push((now, flow)),
                HostAction::Done { .. } | HostAction::Passes { .. } => {}
            }
        }
    }
    ready
}

/// Sixty messages of 0 B to 1 MiB over four NICs, and their posts in time order: bursts
/// at the same picosecond, and posts spread over 20 us.
fn messages_and_posts(next: &mut impl FnMut(u64) -> u64) -> (Vec<Message>, Vec<(FlowId, SimTime)>) {
    let msgs = (0..60)
        .map(|i| Message {
            src: (i % 4) as u32,
            dst: ((i + 1) % 4) as u32,
            size: [0, 64, 4096, 1 << 20][next(4) as usize],
            workload: 0,
        })
        .collect();
    let mut posts: Vec<(FlowId, SimTime)> = (0..60)
        .map(|f| {
            let t = if next(3) == 0 {
                1_000_000
            } else {
                next(20_000_000)
            };
            (f as FlowId, SimTime(t))
        })
        .collect();
    posts.sort_by_key(|&(f, t)| (t, f));
    (msgs, posts)
}

/// With one posting context and a doorbell a WQE, the posting computed at the hand-off
/// (`host_posting.rs`) gives every message the stepped posting's timestamps and ready
/// time, and every NIC its counts (doorbells, PCIe bytes, CPU time, activity span): in
/// each posting mode, with host and (staged or direct) GPU memory, for messages posted
/// in bursts and alone on four NICs, whether the run goes to the end or stops while
/// contexts are busy (`settle_posting` then counts what the steps had reached).
#[test]
fn folded_posting_matches_the_stepped_posting() {
    let mut next = xorshift(0x9e37_79b9);
    let mut folded_somewhere = false;
    for mode in MODES {
        for memory in [MemoryKind::Host, MemoryKind::Gpu] {
            let mut c = cfg();
            c.posting = mode;
            c.memory_source = memory;
            c.memory_destination = memory;
            c.gpu_posting_threads = 1;
            c.inline_max = 64;
            if c.data_path(0, mode, memory).is_err() {
                continue;
            }
            let (msgs, posts) = messages_and_posts(&mut next);
            for until in [SimTime(u64::MAX), SimTime(3_000_000), SimTime(9_500_000)] {
                let mut stepped = HostPipeline::new(&c, 4, MTU, false, msgs.clone(), &[None]);
                stepped.fold = false;
                let mut folded = HostPipeline::new(&c, 4, MTU, false, msgs.clone(), &[None]);
                assert!(folded.folds_posting(mode));
                folded_somewhere = true;
                let a = drive_posts(&mut stepped, &posts, until);
                let b = drive_posts(&mut folded, &posts, until);
                if until != SimTime(u64::MAX) {
                    folded.settle_posting(until);
                } else {
                    assert_eq!(a.len(), 60, "{mode:?} {memory:?}: every message ready");
                }
                let what = format!("{mode:?}, {memory:?} memory, until {until}");
                let mut a_sorted = a.clone();
                a_sorted.sort();
                let mut b_sorted = b;
                b_sorted.sort();
                assert_eq!(a_sorted, b_sorted, "{what}: ready times");
                for f in 0..60 {
                    assert_eq!(stepped.msgs[f].t, folded.msgs[f].t, "{what}: message {f}");
                }
                for n in 0..4 {
                    assert_eq!(
                        format!("{:?}", stepped.nics[n].stats),
                        format!("{:?}", folded.nics[n].stats),
                        "{what}: NIC {n}"
                    );
                }
            }
        }
    }
    assert!(folded_somewhere);
    // A run that stops on a step's edge: at the WQE's end its doorbell write has begun
    // (its CPU time counted), at the ring the doorbell is counted, a picosecond before
    // neither.
    let c = cfg();
    let (build, mmio) = (c.costs.wqe_build.0, c.costs.doorbell_mmio.0);
    for until in [build - 1, build, build + mmio - 1, build + mmio] {
        let mut stepped = pipeline(&c, &[msg(4096)]);
        stepped.fold = false;
        let mut folded = pipeline(&c, &[msg(4096)]);
        drive_posts(&mut stepped, &[(0, SimTime::ZERO)], SimTime(until));
        drive_posts(&mut folded, &[(0, SimTime::ZERO)], SimTime(until));
        folded.settle_posting(SimTime(until));
        assert_eq!(stepped.msgs[0].t, folded.msgs[0].t, "until {until}");
        let (s, f) = (&stepped.nics[0].stats, &folded.nics[0].stats);
        assert_eq!(format!("{s:?}"), format!("{f:?}"), "until {until}");
        let want = if until < build { build } else { build + mmio };
        assert_eq!(f.cpu_ps[CPU_POSTING], want, "until {until}");
        assert_eq!(
            f.doorbells,
            u64::from(until == build + mmio),
            "until {until}"
        );
    }
}

/// The NIC's side of a send computed at the hand-off (`host_nic_side.rs`: the doorbell,
/// the WQE fetch, the send engine and the payload's first read as one wake-up) gives
/// every message the stepped pipeline's timestamps and ready time, and every NIC its
/// counts: in each posting mode, with host and GPU memory, with WQE fetches and with
/// BlueFlame (inline data then too), for messages of every size posted in bursts and
/// alone on four NICs, whether the run goes to the end or stops between the steps
/// (`settle_posting` then counts what the steps had reached). A burst of more messages
/// than read slots marks the pipeline for a stepped run instead.
#[test]
fn folded_nic_side_matches_the_stepped_one() {
    let mut next = xorshift(0x5851_f42d);
    let mut cases = 0;
    for mode in MODES {
        for memory in [MemoryKind::Host, MemoryKind::Gpu] {
            for blueflame in [false, true] {
                let mut c = cfg();
                c.posting = mode;
                c.memory_source = memory;
                c.memory_destination = memory;
                c.gpu_posting_threads = 1;
                c.blueflame = blueflame;
                c.inline_max = if blueflame { 64 } else { 0 };
                if c.data_path(0, mode, memory).is_err() {
                    continue;
                }
                let (msgs, posts) = messages_and_posts(&mut next);
                // Cuts at a random time, and at each step of one message, a picosecond
                // before and at it.
                let probe = pipeline_run(&c, &msgs, &posts, true, SimTime(u64::MAX));
                let t = probe.0.msgs[7].t;
                let mut cuts = vec![SimTime(u64::MAX), SimTime(next(20_000_000))];
                for stamp in [T_DOORBELL, T_FETCHED, T_READY] {
                    cuts.push(SimTime(t[stamp] - 1));
                    cuts.push(SimTime(t[stamp]));
                }
                for until in cuts {
                    let what = format!(
                        "{mode:?}, {memory:?} memory, blueflame {blueflame}, until {until}"
                    );
                    let stepped = pipeline_run(&c, &msgs, &posts, true, until);
                    let folded = pipeline_run(&c, &msgs, &posts, false, until);
                    assert!(folded.0.folds_nic_side(mode), "{what}");
                    assert!(!folded.0.nic_side_overflowed(), "{what}");
                    assert_eq!(stepped.1, folded.1, "{what}: ready times");
                    for f in 0..60 {
                        assert_eq!(
                            stepped.0.msgs[f].t, folded.0.msgs[f].t,
                            "{what}: message {f}"
                        );
                    }
                    for n in 0..4 {
                        assert_eq!(
                            format!("{:?}", stepped.0.nics[n].stats),
                            format!("{:?}", folded.0.nics[n].stats),
                            "{what}: NIC {n}"
                        );
                    }
                    cases += 1;
                }
            }
        }
    }
    assert!(cases >= 8 * 8);
    // Twelve messages posted at once through one NIC with two read slots: their
    // stretches from doorbell to ready overlap (a WQE every 250 ns, a read about 1 us).
    let mut c = cfg();
    let burst: Vec<(FlowId, SimTime)> = (0..12).map(|f| (f, SimTime::ZERO)).collect();
    let msgs = vec![msg(4096); 12];
    c.max_outstanding_reads = 2;
    let (p, _) = pipeline_run(&c, &msgs, &burst, false, SimTime(u64::MAX));
    assert!(
        p.nic_side_overflowed(),
        "two read slots for twelve messages"
    );
    c.max_outstanding_reads = 64;
    let (p, _) = pipeline_run(&c, &msgs, &burst, false, SimTime(u64::MAX));
    assert!(!p.nic_side_overflowed(), "64 read slots");
}

/// A pipeline of `msgs` driven through `posts` until `until` (settled there when cut),
/// with every step a wake-up (`stepped`: `fold` off) or as folded as it goes; its
/// ready times.
fn pipeline_run(
    c: &HostConfig,
    msgs: &[Message],
    posts: &[(FlowId, SimTime)],
    stepped: bool,
    until: SimTime,
) -> (HostPipeline, Vec<(SimTime, FlowId)>) {
    let mut p = HostPipeline::new(c, 4, MTU, false, msgs.iter().copied(), &[None]);
    p.fold = !stepped;
    let mut ready = drive_posts(&mut p, posts, until);
    if until != SimTime(u64::MAX) {
        p.settle_posting(until);
    }
    ready.sort();
    (p, ready)
}

/// A polling consumer's send CQE computed ahead (`send_completed`) counts as the stepped
/// one does (completions, PCIe bytes, the consumer's core and activity) once the end of
/// the run settles it, closes the message's send side at its time, and gives the run's
/// end as its last wake-up would; an interrupt-driven consumer keeps its wake-up.
#[test]
fn folded_send_cqes_match_the_stepped_ones() {
    let mut next = xorshift(0x2545_f491);
    let interrupt = Notify::Interrupt(crate::nic::config::ModerationConfig::Off);
    for (mode, notify) in [
        (PostingMode::Cpu, Notify::Poll),
        (PostingMode::CpuGdr, Notify::Poll),
        (PostingMode::CpuProxy, Notify::Poll),
        (PostingMode::Gpu, Notify::Poll),
        (PostingMode::CpuProxy, interrupt.clone()),
        (PostingMode::Cpu, interrupt),
    ] {
        let mut c = cfg();
        c.posting = mode;
        let polls = notify == Notify::Poll || !matches!(mode, PostingMode::Cpu);
        c.notify = notify.clone();
        let msgs: Vec<Message> = (0..40)
            .map(|i| Message {
                src: (i % 4) as u32,
                dst: ((i + 1) % 4) as u32,
                size: 4096,
                workload: 0,
            })
            .collect();
        let acks: Vec<(FlowId, SimTime)> = {
            let mut a: Vec<_> = (0..40)
                .map(|f| (f as FlowId | SEND_DONE, SimTime(next(5_000_000))))
                .collect();
            a.sort_by_key(|&(f, t)| (t, f));
            a
        };
        for until in [SimTime(u64::MAX), SimTime(2_500_000)] {
            let mut stepped = HostPipeline::new(&c, 4, MTU, false, msgs.clone(), &[None]);
            stepped.fold = false;
            let mut folded = HostPipeline::new(&c, 4, MTU, false, msgs.clone(), &[None]);
            assert_eq!(folded.folds_send_cqe(0, 0), polls, "{mode:?} {notify:?}");
            drive_posts(&mut stepped, &acks, until);
            drive_posts(&mut folded, &acks, until);
            let what = format!("{mode:?}, {notify:?}, until {until}");
            for f in 0..40 {
                assert_eq!(
                    stepped.send_open(f, until),
                    folded.send_open(f, until),
                    "{what}: message {f}"
                );
            }
            let last = folded.settle_send_cqes(until);
            for n in 0..4 {
                assert_eq!(
                    format!("{:?}", stepped.nics[n].stats),
                    format!("{:?}", folded.nics[n].stats),
                    "{what}: NIC {n}"
                );
            }
            // The stepped run's last wake-up: the latest CQE it handled.
            let latency = c.pcie_round_trip.0 / 2;
            let want = acks
                .iter()
                .map(|&(_, t)| t.0 + latency)
                .filter(|&t| t <= until.0)
                .max()
                .unwrap();
            assert_eq!(last.0, if polls { want } else { 0 }, "{what}");
            if polls {
                assert!(
                    folded.nics.iter().all(|n| n.stats.completions > 0),
                    "{what}"
                );
            }
        }
    }
}

//! Rule-by-rule tests of placement, rings and the ring runtime.

use super::*;

/// A collective with the defaults, for unit tests.
pub(super) fn collective(
    op: CollectiveOp,
    algorithm: CollectiveAlgorithm,
    size: u64,
    channels: u32,
    chunk: u64,
    iters: u32,
    root: u32,
) -> Collective {
    Collective {
        op,
        algorithm,
        sizes: vec![size],
        iters,
        warmup_iters: 0,
        ranks: None,
        placement: PlacementSpec::Packed,
        channels,
        chunk,
        root,
        start: SimDuration::ZERO,
        intra_rate: defaults::INTRA_HOST_RATE,
        intra_latency: None,
        protocol: Some(Protocol::Simple),
        launch_overhead: SimDuration::ZERO,
        channel_copy_rate: None,
        reduce_rate: defaults::REDUCE_RATE,
        pxn: true,
        chunk_given: true,
        channels_given: true,
        switch_reduce_latency: defaults::SWITCH_REDUCE_LATENCY,
        switch_reduce_rate: defaults::SWITCH_REDUCE_RATE,
        qps_per_connection: 1,
        split_data_on_qps: false,
        ar_threshold: defaults::AR_THRESHOLD,
        nvls: false,
        nvls_copy_rate: defaults::NVLS_COPY_RATE,
    }
}

/// Starts the launched iteration, if the run asked to be woken.
pub(super) fn wake(run: &mut CollectiveRun, out: &mut Vec<Send>) {
    if let Some(t) = run.take_wake() {
        run.on_wake(t, out);
    }
}

/// Transfer `xfer` is done at `t`, and the clear-to-sends it makes arrive at once;
/// returns how many there were.
pub(super) fn done(run: &mut CollectiveRun, t: SimTime, xfer: u32, out: &mut Vec<Send>) -> u32 {
    run.on_done(t, xfer, out);
    let mut cts = Vec::new();
    run.take_clear_to_sends(&mut cts);
    for c in &cts {
        run.on_clear_to_send(SimTime::ZERO, c.sender, c.channel, out);
    }
    cts.len() as u32
}

/// A run over `n` ranks, one per server, launched: its first transfers queued.
fn launched(c: &Collective, n: u32) -> (CollectiveRun, std::collections::VecDeque<Send>) {
    let ranks = (0..n)
        .map(|i| RankLoc {
            server: i,
            gpu: 0,
            port: i,
        })
        .collect();
    let mut run = CollectiveRun::new(c, 0, ranks, |p| p, 1, 0, 50.0);
    let mut out = Vec::new();
    run.start(SimTime::ZERO);
    wake(&mut run, &mut out);
    (run, out.into_iter().collect())
}

fn coll(op: CollectiveOp, size: u64, channels: u32, chunk: u64) -> Collective {
    collective(op, CollectiveAlgorithm::Ring, size, channels, chunk, 1, 1)
}

/// Delivers transfers one at a time in FIFO order (any order per connection that
/// keeps FIFO is a valid schedule), checking that no transfer is numbered as one still
/// in flight; returns the transfers and bytes sent.
fn drive(c: &Collective, n: u32) -> (CollectiveRun, u64, u64) {
    let (mut run, mut queue) = launched(c, n);
    let mut live: std::collections::HashSet<u32> = queue.iter().map(|s| s.xfer).collect();
    assert_eq!(
        live.len(),
        queue.len(),
        "{:?}: numbers in flight differ",
        c.op
    );
    let mut out = Vec::new();
    let (mut sends, mut bytes) = (0, 0);
    let mut t = 0;
    while let Some(s) = queue.pop_front() {
        sends += 1;
        bytes += s.bytes;
        t += 1;
        live.remove(&s.xfer);
        done(&mut run, SimTime(t), s.xfer, &mut out);
        wake(&mut run, &mut out);
        for s in &out {
            assert!(
                live.insert(s.xfer),
                "{:?}: {} still in flight",
                c.op,
                s.xfer
            );
        }
        queue.extend(out.drain(..));
    }
    assert!(run.is_done(), "{:?} finished", c.op);
    (run, sends, bytes)
}

#[test]
fn every_ring_collective_delivers_the_right_data() {
    for op in [
        CollectiveOp::Allreduce,
        CollectiveOp::ReduceScatter,
        CollectiveOp::Allgather,
        CollectiveOp::Broadcast,
        CollectiveOp::Alltoall,
    ] {
        for (n, size, channels, chunk) in
            [(2, 64, 1, 1024), (5, 10_000, 2, 256), (8, 1 << 20, 3, 4096)]
        {
            let (run, _, _) = drive(&coll(op, size, channels, chunk), n);
            assert_eq!(run.result().rows[0].wrong, 0, "{op:?} n={n} size={size}");
        }
    }
}

#[test]
fn ring_allreduce_moves_2_n_minus_1_over_n_of_the_buffer_per_rank() {
    // 8 ranks, 8 MiB, one channel, chunk large enough for one loop: each rank sends
    // 2(n-1) pieces of S/n.
    let n = 8u64;
    let s = 8u64 << 20;
    let (_, sends, bytes) = drive(&coll(CollectiveOp::Allreduce, s, 1, s), n as u32);
    assert_eq!(sends, n * 2 * (n - 1));
    assert_eq!(bytes, n * 2 * (n - 1) * s / n);
}

#[test]
fn a_lost_contribution_is_counted_wrong() {
    let c = coll(CollectiveOp::Allreduce, 4096, 1, 4096);
    let (mut run, mut queue) = launched(&c, 4);
    let mut out = Vec::new();
    let mut first = true;
    while let Some(s) = queue.pop_front() {
        if first {
            // Corrupt what the first transfer carries: its data is lost.
            run.xfers[s.xfer as usize].count = 0;
            run.xfers[s.xfer as usize].sum = 0;
            first = false;
        }
        done(&mut run, SimTime(1), s.xfer, &mut out);
        wake(&mut run, &mut out);
        queue.extend(out.drain(..));
    }
    assert!(run.result().rows[0].wrong > 0);
}

/// With more than `TRACKED_SLOTS` pieces per channel only a sample is tracked (4 ranks,
/// 1 MiB in 1 KiB chunks: 1,024 slots, stride 17, coprime with the 4 ranks so every
/// piece index is sampled); a lost contribution to a tracked piece is still counted.
#[test]
fn a_lost_contribution_is_counted_wrong_when_slots_are_sampled() {
    let c = coll(CollectiveOp::Allreduce, 1 << 20, 1, 1024);
    let (mut run, mut queue) = launched(&c, 4);
    let mut out = Vec::new();
    assert_eq!(run.layout.stride, 17);
    let pieces: std::collections::BTreeSet<u32> = (0..run.layout.tracked)
        .map(|t| t * run.layout.stride % 4)
        .collect();
    assert_eq!(pieces.len(), 4, "every piece index is sampled");
    let mut corrupted = false;
    while let Some(s) = queue.pop_front() {
        let x = run.xfers[s.xfer as usize];
        if !corrupted && run.cell(x.channel, x.slot).is_some() {
            run.xfers[s.xfer as usize].count = 0;
            run.xfers[s.xfer as usize].sum = 0;
            corrupted = true;
        }
        done(&mut run, SimTime(1), s.xfer, &mut out);
        wake(&mut run, &mut out);
        queue.extend(out.drain(..));
    }
    assert!(corrupted);
    assert!(run.result().rows[0].wrong > 0);
}

#[test]
fn busbw_factors_match_nccl_tests() {
    assert_eq!(busbw_factor(CollectiveOp::Allreduce, 8), 1.75);
    assert_eq!(busbw_factor(CollectiveOp::ReduceScatter, 8), 0.875);
    assert_eq!(busbw_factor(CollectiveOp::Allgather, 8), 0.875);
    assert_eq!(busbw_factor(CollectiveOp::Alltoall, 8), 0.875);
    assert_eq!(busbw_factor(CollectiveOp::Broadcast, 8), 1.0);
}

/// A ring with NCCL's default chunk (`chunk` not given): Simple slices apply.
fn sliced(op: CollectiveOp, size: u64, channels: u32) -> Collective {
    let mut c = coll(op, size, channels, defaults::CHUNK);
    c.chunk_given = false;
    c
}

/// NCCL's `ProtoSimple<2, 2>` (`all_reduce.h`, `prims_simple.h`): each step's chunk
/// goes as two slices, empty ones included, and every piece still ends right: 64 B
/// (second slices empty), 1 MiB over 5 ranks and 3 channels (uneven), 40 MiB over 4
/// ranks (five 8 MiB loops of 2 MiB chunks) and 1 GiB over 8 (64 loops, 1,024 slots a
/// channel, so only a sample is tracked).
#[test]
fn ring_simple_sends_each_step_as_two_slices_and_delivers_the_right_data() {
    for op in [
        CollectiveOp::Allreduce,
        CollectiveOp::ReduceScatter,
        CollectiveOp::Allgather,
    ] {
        let steps = if op == CollectiveOp::Allreduce { 2 } else { 1 };
        for (n, size, channels, loops) in [
            (2u64, 64u64, 1u32, 1u64),
            (5, 1 << 20, 3, 1),
            (4, 40 << 20, 1, 5),
            (8, 1 << 30, 1, 64),
        ] {
            let (run, sends, bytes) = drive(&sliced(op, size, channels), n as u32);
            assert_eq!(run.result().rows[0].wrong, 0, "{op:?} n={n} size={size}");
            assert_eq!(
                sends,
                n * steps * (n - 1) * loops * 2 * channels as u64,
                "{op:?} n={n} size={size}: two slices per step"
            );
            // Every piece's bytes once per step, however they are sliced.
            assert_eq!(bytes, steps * (n - 1) * size, "{op:?} n={n} size={size}");
        }
    }
    // Broadcast keeps one transfer per step (BROADCAST_SLICESTEPS 1).
    let (_, sends, _) = drive(&sliced(CollectiveOp::Broadcast, 4 << 20, 1), 4);
    assert_eq!(sends, 3 * 8, "3 hops x 8 chunks of 512 KiB");
}

/// Slice 0 of a step waits only for slice 0 of the step before: the next rank forwards
/// the first half of a chunk while the second is on its way.
#[test]
fn a_slice_waits_only_for_the_same_slice_of_the_step_before() {
    // 4 ranks, 4 MiB, one channel: 1 MiB pieces in two 512 KiB slices.
    let (mut run, queue) = launched(&sliced(CollectiveOp::Allreduce, 4 << 20, 1), 4);
    assert_eq!(
        queue.len(),
        8,
        "every rank posts both slices of its first step"
    );
    assert!(queue.iter().all(|s| s.bytes == 512 << 10));
    let first = queue.iter().find(|s| s.dst == 1).unwrap();
    let mut out = Vec::new();
    done(&mut run, SimTime(1), first.xfer, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].src, out[0].dst, out[0].bytes), (1, 2, 512 << 10));
    assert_eq!(run.xfers[out[0].xfer as usize].slot % 2, 0, "slice 0");
}

/// A slice takes `SLICESTEPS` = 2 of the `NCCL_STEPS` = 8 buffer slots, so a sender has
/// at most 4 transfers its receiver has not taken.
#[test]
fn four_slices_fill_a_receivers_eight_buffer_slots() {
    // 2 ranks, 16 MiB: four loops of 2 MiB chunks. Rank 1 takes nothing; rank 0 takes
    // all rank 1 sends, so only the slots hold rank 0 back.
    let (mut run, mut queue) = launched(&sliced(CollectiveOp::Allreduce, 16 << 20, 1), 2);
    let mut out = Vec::new();
    let mut sent_by_0 = queue.iter().filter(|s| s.src == 0).count();
    while let Some(s) = queue.pop_front() {
        if s.dst == 0 {
            done(&mut run, SimTime(1), s.xfer, &mut out);
            sent_by_0 += out.iter().filter(|s| s.src == 0).count();
            queue.extend(out.drain(..));
        }
    }
    assert_eq!(sent_by_0, 4);
}

/// A receiver on another server frees a slot by a clear-to-send (NCCL's FIFO write,
/// `net_ib`): its sender, with four slices out, sends the fifth only when that arrives.
/// Inside a server the sender sees the slot free at once. A slot past the sender's last
/// send is not told: 16 MiB over 2 ranks is 4 loops of 2 steps of 2 slices, 16 a rank,
/// so 12 clear-to-sends each.
#[test]
fn a_sender_waits_for_its_receivers_clear_to_send_across_servers() {
    for same_server in [false, true] {
        let c = sliced(CollectiveOp::Allreduce, 16 << 20, 1);
        let ranks = (0..2)
            .map(|i| RankLoc {
                server: if same_server { 0 } else { i },
                gpu: i,
                port: i,
            })
            .collect();
        let mut run = CollectiveRun::new(&c, 0, ranks, |p| p, 1, 0, 50.0);
        let mut out = Vec::new();
        run.start(SimTime::ZERO);
        wake(&mut run, &mut out);
        // Rank 0 takes all rank 1 sends (and rank 1 hears at once of each slot freed);
        // rank 1 takes nothing, so only the slots hold rank 0 back.
        let mut told = 0;
        let mut queue: std::collections::VecDeque<Send> = out.drain(..).collect();
        let mut held = std::collections::VecDeque::new();
        while let Some(s) = queue.pop_front() {
            if s.dst == 0 {
                told += done(&mut run, SimTime(1), s.xfer, &mut out);
                queue.extend(out.drain(..));
            } else {
                held.push_back(s);
            }
        }
        let mut queue = held;
        let from_0 = |q: &std::collections::VecDeque<Send>| q.iter().filter(|s| s.src == 0).count();
        assert_eq!(from_0(&queue), 4, "the window: four slices");
        // Rank 1 takes rank 0's first slice.
        let first = *queue.iter().find(|s| s.src == 0).unwrap();
        run.on_done(SimTime(1), first.xfer, &mut out);
        let mut cts = Vec::new();
        run.take_clear_to_sends(&mut cts);
        let fifth = out.iter().filter(|s| s.src == 0).count();
        if same_server {
            assert!(cts.is_empty());
            assert_eq!(fifth, 1, "inside a server the slot is free at once");
            continue;
        }
        assert_eq!(fifth, 0, "rank 0 waits for the clear-to-send");
        assert_eq!(
            cts,
            vec![ClearToSend {
                receiver: 1,
                sender: 0,
                channel: 0
            }]
        );
        run.on_clear_to_send(SimTime::ZERO, 0, 0, &mut out);
        assert_eq!(out.iter().filter(|s| s.src == 0).count(), 1, "now it sends");
        // The rest of the run, counting every clear-to-send.
        queue.retain(|s| s.xfer != first.xfer);
        queue.extend(out.drain(..));
        told += 1;
        while let Some(s) = queue.pop_front() {
            told += done(&mut run, SimTime(2), s.xfer, &mut out);
            queue.extend(out.drain(..));
        }
        assert!(run.is_done());
        assert_eq!(run.result().rows[0].wrong, 0);
        assert_eq!(told, 2 * 12, "each rank: 16 slices less the window of 4");
    }
}

/// Runs `c` over `n` ranks of one server with each channel moving one transfer at a
/// time at `rate`, as the fabric glue does (`dispatch_sends`), in a small event loop
/// ordered by (time, order of scheduling). With `at_send`, a transfer that books no
/// reduction skips its arrival event (`land_at_send`). Returns every transfer's done time, sorted, the
/// result, and the arrival events handled.
fn run_intra(
    c: &Collective,
    n: u32,
    rate: BitsPerSec,
    at_send: bool,
) -> (Vec<u64>, CollectiveResult, u32) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let ranks = (0..n)
        .map(|i| RankLoc {
            server: 0,
            gpu: i,
            port: 0,
        })
        .collect();
    let mut run = CollectiveRun::new(c, 0, ranks, |p| p, 1, 0, 50.0);
    run.land_early = at_send;
    let mut out = Vec::new();
    run.start(SimTime::ZERO);
    wake(&mut run, &mut out);
    // (time, seq, arrival?, xfer)
    let mut q = BinaryHeap::new();
    let mut seq = 0u64;
    let (mut dones, mut arrivals) = (Vec::new(), 0);
    let mut now = SimTime::ZERO;
    loop {
        for s in out.drain(..) {
            let chan = run.channel_free(s.src, s.channel);
            let end = now.max(*chan) + crate::units::serialization_delay(s.bytes, rate);
            *chan = end;
            seq += 1;
            match run.land_at_send(s.xfer, end) {
                Landing::Done(done) => q.push(Reverse((done.0, seq, false, s.xfer))),
                Landing::OnArrival => q.push(Reverse((end.0, seq, true, s.xfer))),
                Landing::Deferred => {}
            }
        }
        let Some(Reverse((t, _, arrival, xfer))) = q.pop() else {
            break;
        };
        now = SimTime(t);
        if arrival {
            arrivals += 1;
            let mut landed = Vec::new();
            run.arrived(xfer, now, &mut landed);
            for (x, at) in landed {
                seq += 1;
                q.push(Reverse((at.0, seq, false, x)));
            }
        } else {
            dones.push(t);
            done(&mut run, now, xfer, &mut out);
            if let Some(w) = run.take_wake() {
                run.on_wake(w.max(now), &mut out);
            }
        }
    }
    assert!(run.is_done(), "{:?} finished", c.op);
    dones.sort_unstable();
    (dones, run.result(), arrivals)
}

/// A piece only copied (or empty) is done at a time known when it is sent, so it needs
/// no arrival event (`land_at_send`); the run is the same transfer for transfer. A ring
/// allreduce of 8 GPUs on one server, 3 channels, NCCL's Simple slices, the reduction
/// at 50 GB/s against 150 GB/s copies (so the engine is booked across channels), at
/// 64 KiB (empty second slices) and 24 MiB: every done time and the result match the
/// run with an arrival event for every transfer (booking a transfer that waits for an
/// earlier one at once instead fails), and only the reduced pieces' arrivals are
/// left.
#[test]
fn a_piece_only_copied_needs_no_arrival_event() {
    let rate = BitsPerSec(1_200_000_000_000);
    for size in [64u64 << 10, 24 << 20] {
        let mut c = sliced(CollectiveOp::Allreduce, size, 3);
        c.reduce_rate = BitsPerSec(400_000_000_000);
        let (every, r_every, a_every) = run_intra(&c, 8, rate, false);
        let (skip, r_skip, a_skip) = run_intra(&c, 8, rate, true);
        assert_eq!(every, skip, "size {size}: done times");
        assert_eq!(r_every, r_skip, "size {size}: result");
        assert_eq!(r_skip.rows[0].wrong, 0);
        assert_eq!(a_every as usize, every.len(), "one arrival per transfer");
        // Only the reducing steps' pieces keep their arrival: 7 of the 14 steps, and
        // at 64 KiB (2.7 KiB pieces) only their first slice (the second is empty).
        let kept = if size == 64 << 10 { 4 } else { 2 };
        assert_eq!(a_skip * kept, a_every, "size {size}: arrivals left");
    }
}

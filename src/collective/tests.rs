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
    }
}

/// Starts the launched iteration, if the run asked to be woken.
pub(super) fn wake(run: &mut CollectiveRun, out: &mut Vec<Send>) {
    if let Some(t) = run.take_wake() {
        run.on_wake(t, out);
    }
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
/// keeps FIFO is a valid schedule); returns the transfers and bytes sent.
fn drive(c: &Collective, n: u32) -> (CollectiveRun, u64, u64) {
    let (mut run, mut queue) = launched(c, n);
    let mut out = Vec::new();
    let (mut sends, mut bytes) = (0, 0);
    let mut t = 0;
    while let Some(s) = queue.pop_front() {
        sends += 1;
        bytes += s.bytes;
        t += 1;
        run.on_done(SimTime(t), s.xfer, &mut out);
        wake(&mut run, &mut out);
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
        run.on_done(SimTime(1), s.xfer, &mut out);
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
        run.on_done(SimTime(1), s.xfer, &mut out);
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

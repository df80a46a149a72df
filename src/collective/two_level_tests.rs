//! Tests of the tree, hierarchical and in-network dependency graphs run end to end.

use super::tests::wake;
use super::*;

/// Rank i on server `servers[i]`; ports are servers.
fn ranks_on(servers: &[u32]) -> Vec<RankLoc> {
    servers
        .iter()
        .enumerate()
        .map(|(i, &s)| RankLoc {
            server: s,
            gpu: i as u32,
            port: s,
        })
        .collect()
}

fn run_two_level(
    alg: CollectiveAlgorithm,
    servers: &[u32],
    leaf_of_server: &[u32],
    size: u64,
    channels: u32,
    chunk: u64,
) -> (u64, u64) {
    let c = super::tests::collective(CollectiveOp::Allreduce, alg, size, channels, chunk, 2, 0);
    let ranks = ranks_on(servers);
    let table = leaf_of_server.to_vec();
    let mut run = CollectiveRun::new(&c, 0, ranks.clone(), move |p| table[p as usize], 4, 2, 50.0);
    let mut out = Vec::new();
    run.start(SimTime::ZERO);
    wake(&mut run, &mut out);
    let mut queue: std::collections::VecDeque<Send> = out.drain(..).collect();
    let mut cross = 0;
    while let Some(s) = queue.pop_front() {
        let (a, b) = (ranks[s.src as usize], ranks[s.dst as usize]);
        if leaf_of_server[a.server as usize] != leaf_of_server[b.server as usize] {
            cross += s.bytes;
        }
        run.on_done(SimTime(1), s.xfer, &mut out);
        wake(&mut run, &mut out);
        queue.extend(out.drain(..));
    }
    assert!(run.is_done());
    (run.result().rows[0].wrong, cross)
}

#[test]
fn tree_and_hierarchical_reduce_correctly_for_any_grouping() {
    let shapes: [(&[u32], &[u32]); 4] = [
        (&[0, 1], &[0, 1]),
        (&[0, 0, 1, 1, 1, 2], &[0, 0, 1]),
        (
            &[0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3],
            &[0, 0, 1, 1],
        ),
        (&[0, 1, 2, 3, 4, 5, 6], &[0, 1, 1, 2, 2, 2, 3]),
    ];
    for alg in [CollectiveAlgorithm::Tree, CollectiveAlgorithm::Hierarchical] {
        for (servers, leaves) in shapes {
            for (size, channels, chunk) in [(4096u64, 1, 1024u64), (1 << 20, 2, 65536), (100, 3, 8)]
            {
                let (wrong, _) = run_two_level(alg, servers, leaves, size, channels, chunk);
                assert_eq!(wrong, 0, "{alg:?} {servers:?} {size}");
            }
        }
    }
}

/// What lets a run split over threads take trees and not the hierarchy or NVLSTree (`share`,
/// `sim::parallel_coll`): every transfer of a tree waits only for transfers landing at
/// its sender, so its dependency counts are kept where its sender is; the hierarchy's
/// leaders' ring adds into the receiver's own partial, so a step also waits for what
/// lands at its receiver (with 2 or more leaves), and a split copy of it says it
/// cannot run split (`split_unsound`).
#[test]
fn tree_transfers_wait_only_for_what_lands_at_their_sender() {
    let shapes: [(&[u32], &[u32]); 3] = [
        (&[0, 0, 1, 1, 1, 2], &[0, 0, 1]),
        (
            &[0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3],
            &[0, 0, 1, 1],
        ),
        (&[0, 1, 2, 3, 4, 5, 6], &[0, 1, 1, 2, 2, 2, 3]),
    ];
    for (servers, leaves) in shapes {
        for alg in [CollectiveAlgorithm::Tree, CollectiveAlgorithm::Hierarchical] {
            // Two channels and a cut-short last chunk: every graph a run holds.
            let c = super::tests::collective(CollectiveOp::Allreduce, alg, 100_000, 2, 4096, 2, 0);
            let ranks = ranks_on(servers);
            let make = || {
                let table = leaves.to_vec();
                CollectiveRun::new(&c, 0, ranks.clone(), move |p| table[p as usize], 4, 2, 50.0)
            };
            let (mut run, mut copy) = (make(), make());
            run.start(SimTime::ZERO);
            wake(&mut run, &mut Vec::new());
            let want = alg == CollectiveAlgorithm::Tree;
            assert_eq!(run.graph.deps_land_at_sender(), want, "{alg:?} {servers:?}");
            // A split copy of a graph that does not says so (the run goes on one thread).
            let n = servers.len();
            copy.split((0..n).map(|p| p < n / 2).collect(), 2, 0);
            copy.start(SimTime::ZERO);
            wake(&mut copy, &mut Vec::new());
            assert_eq!(copy.split_unsound(), !want, "{alg:?} {servers:?}");
        }
    }
    // NVLSTree's window of chunks in flight: a transfer waits for the same one of the
    // chunk NCCL_STEPS before, which lands at its receiver.
    let (run, _) = nvls_started(64 << 20);
    assert!(!run.graph.deps_land_at_sender());
}

/// Hierarchical: only the leaders' ring crosses leaves: 2(L - 1) x S bytes per
/// iteration (two iterations here).
#[test]
fn hierarchical_crosses_leaves_with_the_leaders_ring_only() {
    let servers: Vec<u32> = (0..16).map(|r| r / 2).collect(); // 8 servers x 2 GPUs
    let leaves = [0, 0, 1, 1, 2, 2, 3, 3]; // L = 4 leaves of 2 servers
    let size = 4 << 20;
    let (wrong, cross) = run_two_level(
        CollectiveAlgorithm::Hierarchical,
        &servers,
        &leaves,
        size,
        2,
        1 << 20,
    );
    assert_eq!(wrong, 0);
    assert_eq!(cross, 2 * 2 * (4 - 1) * size);
}

/// NVLSTree on 2 servers of 8 GPUs, each on its own NIC: every piece ends where it
/// should, each GPU's NVLink carries S once per iteration ((g - 1)/g x S into the
/// NVSwitch, its own shard's multicast once: 1/g x S), where a unicast reduce-scatter and
/// all-gather inside the server would carry 2 (g - 1)/g x S = 1.75 S; each NIC sends its
/// rail's shard once across (S/8: half up one tree, half down the other).
#[test]
fn nvls_tree_reduces_correctly_and_loads_each_link_as_nvlink_sharp_does() {
    let g = 8u32;
    let size = 4u64 << 20;
    let iters = 2;
    let mut c = super::tests::collective(
        CollectiveOp::Allreduce,
        CollectiveAlgorithm::NvlsTree,
        size,
        2,
        g as u64 * 65_536,
        iters,
        0,
    );
    c.nvls = true;
    let ranks: Vec<RankLoc> = (0..2 * g)
        .map(|i| RankLoc {
            server: i / g,
            gpu: i % g,
            port: i,
        })
        .collect();
    let mut run = CollectiveRun::new(&c, 0, ranks.clone(), |_| 0, 1, 0, 400.0);
    let mut out = Vec::new();
    run.start(SimTime::ZERO);
    wake(&mut run, &mut out);
    let mut queue: std::collections::VecDeque<Send> = out.drain(..).collect();
    let mut link = vec![0u64; ranks.len()];
    let mut net = vec![0u64; ranks.len()];
    while let Some(s) = queue.pop_front() {
        let (a, b) = (ranks[s.src as usize], ranks[s.dst as usize]);
        if a.server == b.server {
            // Inside a server every transfer is NVLS: a switch reduction or a multicast.
            assert_ne!(s.nvls, dag::Nvls::No);
            if s.nvls != dag::Nvls::Replica {
                link[s.src as usize] += s.bytes;
            }
        } else {
            assert_eq!(s.nvls, dag::Nvls::No);
            assert_eq!(a.gpu, b.gpu, "a rail's heads talk to each other only");
            net[s.src as usize] += s.bytes;
        }
        run.on_done(SimTime(1), s.xfer, &mut out);
        wake(&mut run, &mut out);
        queue.extend(out.drain(..));
    }
    assert!(run.is_done());
    assert_eq!(run.result().rows[0].wrong, 0);
    for r in 0..ranks.len() {
        assert_eq!(link[r], iters as u64 * size, "rank {r}'s NVLink bytes");
        assert_eq!(
            net[r],
            iters as u64 * size / g as u64,
            "rank {r}'s network bytes"
        );
    }
}

/// Runs `c` over `servers` servers of `g` GPUs (each on its own NIC, one leaf) to the
/// end, in posting order: the transfers posted, the graph's bytes at the start and at
/// the end, and `#wrong`.
fn run_graph(c: &Collective, servers: u32, g: u32) -> (u64, usize, usize, u64, CollectiveRun) {
    let ranks: Vec<RankLoc> = (0..servers * g)
        .map(|i| RankLoc {
            server: i / g,
            gpu: i % g,
            port: i,
        })
        .collect();
    let mut run = CollectiveRun::new(c, 0, ranks, |_| 0, 1, 0, 400.0);
    let mut out = Vec::new();
    run.start(SimTime::ZERO);
    wake(&mut run, &mut out);
    let at_start = run.graph.heap_bytes();
    let mut queue: std::collections::VecDeque<Send> = out.drain(..).collect();
    let mut posted = queue.len() as u64;
    while let Some(s) = queue.pop_front() {
        run.on_done(SimTime(1), s.xfer, &mut out);
        posted += out.len() as u64;
        queue.extend(out.drain(..));
    }
    assert!(run.is_done());
    let at_end = run.graph.heap_bytes();
    let wrong = run.result().rows[0].wrong;
    (posted, at_start, at_end, wrong, run)
}

/// Issue 17, item 2: a graph algorithm holds one chunk's graph per channel (every chunk
/// of a channel is the same graph on its own slots) and 4 bytes per transfer of a chunk
/// not yet done, freed as each chunk ends; before, it built every transfer of the
/// operation (a 4,096-GPU tree allreduce of 256 MiB: 30.7 M of about 100 bytes). 16
/// servers x 8 GPUs, tree, 4 channels, 8 MiB in 64 KiB chunks, the last of each channel
/// cut short (8 MiB / 4 channels = 2,097,152 B = 32 chunks of 65,000 B and one of 17,152
/// B): 33 chunks x 4 (n - 1) = 508 transfers per channel, 67,056 in all, exactly what
/// `transfers_per_chunk` (the memory estimate's count) says; every tracked cell ends
/// holding every rank's data.
#[test]
fn a_graph_holds_one_chunks_graph_per_channel_and_four_bytes_per_transfer_left() {
    let (servers, g) = (16u32, 8u32);
    let n = (servers * g) as u64;
    let c = super::tests::collective(
        CollectiveOp::Allreduce,
        CollectiveAlgorithm::Tree,
        8 << 20,
        4,
        65_000,
        1,
        0,
    );
    let (posted, at_start, at_end, wrong, run) = run_graph(&c, servers, g);
    let chunks = (8u64 << 20) / 4 / 4;
    let chunks = chunks.div_ceil(65_000 / 4);
    assert_eq!(chunks, 33);
    let (per_chunk, between) =
        graph::transfers_per_chunk(CollectiveAlgorithm::Tree, n, servers as u64, 1);
    assert_eq!(per_chunk as u64, 4 * (n - 1));
    assert_eq!(between as u64, 4 * (servers as u64 - 1));
    let total = per_chunk as u64 * chunks * 4;
    assert_eq!(run.graph.total(), total);
    assert_eq!(posted, total, "every transfer posted once");
    assert_eq!(wrong, 0);
    // Two graphs per channel (a full chunk's and the last's), each 508 transfers of a
    // 40-byte record, 12 bytes of successors, start and count, and the tracked chunks'
    // carried records (16 bytes a transfer): about 160 KB; 4 bytes per transfer left.
    let graphs = 4 * 2 * 508 * (std::mem::size_of::<dag::DNode>() + 12) + 4 * 2 * 508 * 16;
    assert!(
        at_end <= graphs + 4096,
        "{at_end} B at the end, graphs {graphs}"
    );
    assert!(
        at_start <= at_end + 4 * total as usize + 4096,
        "{at_start} B at the start for {total} transfers"
    );
    assert!(
        at_start >= at_end + 4 * total as usize,
        "{at_start} B: dependency counts"
    );
    // The tracked cells are the ones checked: a rank missing one contribution shows.
    let mut run = run;
    run.buf[5][0].0 -= 1;
    assert_eq!(run.count_wrong(), 1);
}

/// The memory estimate's NVLSTree count is the graph's: per chunk and channel
/// 4 n (g - 1) + 4 g (servers - 1) transfers, 4 g (servers - 1) of them between servers.
#[test]
fn nvls_tree_transfers_are_counted_as_the_estimate_counts_them() {
    let (servers, g) = (3u32, 4u32);
    let mut c = super::tests::collective(
        CollectiveOp::Allreduce,
        CollectiveAlgorithm::NvlsTree,
        1 << 20,
        2,
        g as u64 * 65_536,
        1,
        0,
    );
    c.nvls = true;
    let (posted, _, _, wrong, run) = run_graph(&c, servers, g);
    let n = (servers * g) as f64;
    let (per_chunk, _) =
        graph::transfers_per_chunk(CollectiveAlgorithm::NvlsTree, n as u64, servers as u64, 1);
    assert_eq!(
        per_chunk,
        4.0 * n * (g as f64 - 1.0) + 4.0 * g as f64 * (servers as f64 - 1.0)
    );
    // 1 MiB over 2 channels in chunks of 4 x 64 KiB: 2 chunks per channel.
    assert_eq!(run.graph.total(), per_chunk as u64 * 2 * 2);
    assert_eq!(posted, run.graph.total());
    assert_eq!(wrong, 0);
}

/// An NVLSTree run on 2 servers of 8 GPUs, one channel, `size` bytes, started: the run
/// and the transfers it posted first.
fn nvls_started(size: u64) -> (CollectiveRun, Vec<Send>) {
    let mut c = super::tests::collective(
        CollectiveOp::Allreduce,
        CollectiveAlgorithm::NvlsTree,
        size,
        1,
        8 * 65_536,
        1,
        0,
    );
    c.nvls = true;
    let ranks: Vec<RankLoc> = (0..16)
        .map(|i| RankLoc {
            server: i / 8,
            gpu: i % 8,
            port: i,
        })
        .collect();
    let mut run = CollectiveRun::new(&c, 0, ranks, |_| 0, 1, 0, 400.0);
    let mut out = Vec::new();
    run.start(SimTime::ZERO);
    wake(&mut run, &mut out);
    (run, out)
}

/// NVLSTree's buffer slots (`NCCL_STEPS` = 8 per channel and head, `ncclNvlsBufferSetup`
/// in `src/transport/nvls.cc`): a 16 MiB allreduce on one channel is 32 chunks of 8 x 64
/// KiB, of which only the first 8 start; transfer t of chunk j + 8 is posted when
/// transfer t of chunk j is done (and its own dependencies are), and the run still ends
/// with every rank's data.
#[test]
fn nvls_tree_keeps_nccl_steps_chunks_in_flight_per_channel() {
    let (mut run, mut out) = nvls_started(16 << 20);
    let chunk_of = |run: &CollectiveRun, x: u32| run.graph.at(x).chunk;
    let first: std::collections::BTreeSet<u32> =
        out.iter().map(|s| chunk_of(&run, s.xfer)).collect();
    assert_eq!(first, (0..8).collect(), "chunks posted at the start");
    let mut queue: std::collections::VecDeque<Send> = out.drain(..).collect();
    let mut released_by_window = 0;
    while let Some(s) = queue.pop_front() {
        let at = run.graph.at(s.xfer);
        run.on_done(SimTime(1), s.xfer, &mut out);
        // A multicast's 7 copies are posted together, the multicast first.
        for (i, n) in out.iter().enumerate() {
            if n.nvls == dag::Nvls::Multicast {
                for (k, r) in out[i + 1..i + 7].iter().enumerate() {
                    assert_eq!(r.nvls, dag::Nvls::Replica);
                    assert_eq!((r.src, r.xfer), (n.src, n.xfer + 1 + k as u32));
                }
            }
            if n.nvls == dag::Nvls::Replica {
                assert!(out[..i]
                    .iter()
                    .any(|m| m.nvls == dag::Nvls::Multicast && m.src == n.src));
            }
        }
        for n in &out {
            let next = run.graph.at(n.xfer);
            assert!(next.chunk <= at.chunk + 8, "{at:?} released {next:?}");
            if next.chunk == at.chunk + 8 {
                assert_eq!(next.node, at.node);
                released_by_window += 1;
            }
        }
        queue.extend(out.drain(..));
    }
    assert!(run.is_done());
    assert_eq!(run.result().rows[0].wrong, 0);
    assert!(released_by_window > 0);
}

/// NVLSTree's copies go a whole step at a time (`prims.scatter` and `prims.gather` copy
/// every head's slot of a step and then post it): a rank's scatter of a 512 KiB chunk
/// (8 heads x 64 KiB) at `NVLS_COPY_RATE` (120 Gb/s) ends 34.95 us after it starts for
/// every shard of it, and the next chunk's 34.95 us later; a rank's 14 multicast pieces
/// of a chunk (2 per other head) are done together once its own 2 are in its buffer
/// too, 12.5 us (NCCL's NVLS latency, half per phase) after the last came in plus the
/// chunk's 34.95 us gather copy.
#[test]
fn nvls_tree_scatters_and_gathers_a_whole_step_at_a_time() {
    let (mut run, out) = nvls_started(16 << 20);
    let share = crate::units::BitsPerSec(2_966_400_000_000);
    let copy = SimDuration(34_952_534); // 524,288 B x 8 / 120 Gb/s, rounded up
    assert_eq!(
        crate::units::serialization_delay(524_288, defaults::NVLS_COPY_RATE),
        copy
    );
    let from0: Vec<&Send> = out.iter().filter(|s| s.src == 0).collect();
    let t0 = SimTime(1_000_000);
    let mut ends = std::collections::BTreeMap::new();
    for s in &from0 {
        assert_eq!(s.nvls, dag::Nvls::Reduce);
        let end = run.nvls_scatter_end(t0, 0, s.xfer, share);
        ends.entry(run.graph.at(s.xfer).chunk).or_insert(end);
        assert_eq!(end, ends[&run.graph.at(s.xfer).chunk], "one end per chunk");
    }
    assert_eq!(ends[&0], t0 + copy);
    assert_eq!(ends[&1], t0 + copy + copy);
    // Rank 3's multicast pieces of chunk 0.
    let pieces: Vec<u32> = (0..run.graph.total() as u32)
        .filter(|&x| {
            let at = run.graph.at(x);
            let d = run.graph.node(at);
            at.chunk == 0 && d.dst == 3 && d.nvls != dag::Nvls::Reduce && d.src / 8 == 0
        })
        .collect();
    assert_eq!(pieces.len(), 14);
    let mut done = Vec::new();
    for (i, &x) in pieces.iter().enumerate() {
        run.arrived(x, SimTime(10_000_000 + i as u64 * 1_000_000), &mut done);
    }
    assert!(done.is_empty(), "done before its own shard is in");
    // Rank 3's own multicasts of chunk 0 (its shard's two pieces), landing last.
    let own: Vec<u32> = (0..run.graph.total() as u32)
        .filter(|&x| {
            let at = run.graph.at(x);
            let d = run.graph.node(at);
            at.chunk == 0 && d.src == 3 && d.nvls == dag::Nvls::Multicast
        })
        .collect();
    assert_eq!(own.len(), 2);
    run.own_multicast(3, own[0], SimTime(5_000_000), &mut done);
    assert!(done.is_empty());
    let last = SimTime(10_000_000 + 14 * 1_000_000);
    run.own_multicast(3, own[1], last, &mut done);
    let want = last + SimDuration(12_500_000) + copy;
    assert_eq!(done.len(), 14);
    assert!(
        done.iter().all(|&(_, at)| at == want),
        "{done:?} against {want:?}"
    );
}

/// A tree split over two copies (`share`, as `sim::parallel_coll` runs one): each copy
/// posts only its own ranks' sends and counts only what lands at its ranks; a transfer
/// landing at the other copy's rank takes what it carries there (`transfer`,
/// `put_transfer`); an iteration ends once both copies' ranks are done. 8 servers of 2
/// GPUs, the first 4 servers one copy's: the copies post exactly the transfers one run
/// posts, each once, and every tracked piece ends holding every rank's data. Fails
/// without the carried record (`#wrong` 256) or with every copy posting every root.
#[test]
fn a_tree_split_over_two_copies_posts_and_reduces_as_one_run() {
    let ranks: Vec<RankLoc> = (0..16)
        .map(|i| RankLoc {
            server: i / 2,
            gpu: i % 2,
            port: i / 2,
        })
        .collect();
    let c = super::tests::collective(
        CollectiveOp::Allreduce,
        CollectiveAlgorithm::Tree,
        1 << 20,
        2,
        65536,
        2,
        0,
    );
    let make = || CollectiveRun::new(&c, 0, ranks.clone(), |_| 0, 4, 2, 50.0);
    // One run: every transfer lands in the order it was posted.
    let mut one = make();
    one.start(SimTime::ZERO);
    let mut out = Vec::new();
    let mut posted_one = Vec::new();
    while !one.is_done() {
        wake(&mut one, &mut out);
        let mut queue: std::collections::VecDeque<Send> = out.drain(..).collect();
        while let Some(s) = queue.pop_front() {
            posted_one.push(s.xfer);
            one.on_done(SimTime(1), s.xfer, &mut out);
            queue.extend(out.drain(..));
        }
    }
    // Two copies.
    let owned: [Vec<bool>; 2] = [
        ranks.iter().map(|l| l.server < 4).collect(),
        ranks.iter().map(|l| l.server >= 4).collect(),
    ];
    let mut copies = [make(), make()];
    for (k, copy) in copies.iter_mut().enumerate() {
        copy.split(owned[k].clone(), 2, k as u32);
        copy.start(SimTime::ZERO);
    }
    let mut posted = Vec::new();
    while !copies[0].is_done() {
        let mut queue = std::collections::VecDeque::new();
        for (k, copy) in copies.iter_mut().enumerate() {
            wake(copy, &mut out);
            queue.extend(out.drain(..).map(|s| (k, s)));
        }
        while let Some((k, s)) = queue.pop_front() {
            assert!(owned[k][s.src as usize], "posted by its sender's copy");
            posted.push(s.xfer);
            let to = usize::from(!owned[0][s.dst as usize]);
            if to != k {
                let x = copies[k].transfer(s.xfer);
                copies[to].put_transfer(s.xfer, x);
            }
            copies[to].on_done(SimTime(1), s.xfer, &mut out);
            queue.extend(out.drain(..).map(|s| (to, s)));
        }
        assert!(copies.iter().all(|c| c.done_here().is_some()));
        copies.iter_mut().for_each(|c| c.end_iteration(SimTime(1)));
    }
    assert!(copies[1].is_done());
    posted.sort_unstable();
    posted_one.sort_unstable();
    assert_eq!(posted, posted_one);
    let [mut a, b] = copies;
    a.add_wrong_from(&b);
    let rows = a.result().rows;
    assert_eq!((rows[0].wrong, rows[0].times_ps.len()), (0, 2));
}

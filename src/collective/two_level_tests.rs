//! Tests of the tree, hierarchical and in-network dependency graphs run end to end.

use super::tests::wake;
use super::*;

fn run_two_level(
    alg: CollectiveAlgorithm,
    servers: &[u32],
    leaf_of_server: &[u32],
    size: u64,
    channels: u32,
    chunk: u64,
) -> (u64, u64) {
    let c = super::tests::collective(CollectiveOp::Allreduce, alg, size, channels, chunk, 2, 0);
    // Rank i on server servers[i]; ports are servers; leaves from the table.
    let ranks: Vec<RankLoc> = servers
        .iter()
        .enumerate()
        .map(|(i, &s)| RankLoc {
            server: s,
            gpu: i as u32,
            port: s,
        })
        .collect();
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

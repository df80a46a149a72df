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

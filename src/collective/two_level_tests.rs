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

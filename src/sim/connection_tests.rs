//! A collective's connections: each sending rank's channel keeps the queue pair its last
//! network transfer went on (`coll_qp_hint`), and `open_connection` takes that hint only
//! while it is the connection's open queue pair, so the hint saves a search of `pairs`
//! and never changes which queue pair a message goes on.

use super::run_loop::LoopState;
use super::{Sim, NO_QP};

/// A ring allreduce over 4 servers of 2 rail-wired GPUs, run to the end with
/// `qps_per_connection` queue pairs a connection (taken in turn, so with 2 a channel's
/// hint names the other queue pair half the time).
fn ring(qps_per_connection: u32) -> Sim {
    let yaml = format!(
        "name: t\nseed: 5\ntopology: {{ leaves: 2, spines: 2, hosts_per_leaf: 4, \
         host_link: {{ rate: 100Gbps, latency: 1us }}, \
         fabric_link: {{ rate: 100Gbps, latency: 1us }} }}\n\
         flow_control: {{ mode: ib_credit }}\n\
         host: {{ gpus_per_host: 2, nics_per_host: 2, wiring: rail, posting: cpu_proxy, \
         memory: gpu }}\n\
         workload:\n  - collective: {{ op: allreduce, algorithm: ring, channels: 2, \
         size: 1MiB, iters: 1, warmup_iters: 0, qps_per_connection: {qps_per_connection} }}\n"
    );
    let sc = crate::scenario::parse_str(&yaml, "t.yaml", "t", &Default::default())
        .unwrap_or_else(|e| panic!("{yaml}: {e}"));
    let mut sim = Sim::new(&sc);
    let mut st = LoopState::new(None);
    assert!(sim.advance(&mut st, None));
    assert!(sim.colls[0].is_done(), "the allreduce finished");
    sim
}

#[test]
fn a_hint_is_taken_only_for_its_own_connection() {
    for qps in [1, 2] {
        let mut sim = ring(qps);
        // Every hint left names an open queue pair of a collective's connection, the
        // one `pairs` names for it.
        let hints: Vec<u32> = sim.coll_qp_hint[0]
            .iter()
            .copied()
            .filter(|&h| h != NO_QP)
            .collect();
        // 4 servers, 2 channels: each channel's ring leaves every server once.
        assert!(hints.len() >= 4, "{qps}: {} hints", hints.len());
        for &h in &hints {
            let q = &sim.qps[h as usize];
            assert!(!q.dead && q.conn > 0, "{qps}: hint {h}");
            assert_eq!(sim.pairs.get(&(q.src, q.dst, q.conn)), Some(&h));
        }
        // Each open connection is found whatever the hint: itself, none, or another
        // connection's queue pair.
        let open: Vec<((u32, u32, u32), u32)> = sim.pairs.iter().map(|(&k, &v)| (k, v)).collect();
        assert_eq!(open.len() as u32 % qps, 0, "{qps} queue pairs a connection");
        for &((src, dst, conn), slot) in &open {
            assert_eq!(sim.open_connection(src, dst, conn, slot), Some(slot));
            assert_eq!(sim.open_connection(src, dst, conn, NO_QP), Some(slot));
            for &(_, other) in open.iter().filter(|&&(_, o)| o != slot) {
                assert_eq!(sim.open_connection(src, dst, conn, other), Some(slot));
            }
            // A connection never opened: no hint opens it.
            assert_eq!(sim.open_connection(src, dst, conn + 1_000, slot), None);
        }
        // A retired queue pair is not taken, even under its own connection.
        let ((src, dst, conn), slot) = open[0];
        sim.pairs.remove(&(src, dst, conn));
        sim.qps[slot as usize].dead = true;
        assert_eq!(sim.open_connection(src, dst, conn, slot), None);
    }
}

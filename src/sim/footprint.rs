//! How much memory a run needs, estimated before it starts from measured per-object
//! costs, and how much the machine lets it have.
//!
//! Costs, measured with `/usr/bin/time -f %M` (peak resident set) on x86-64 Linux, as the
//! slope between two run sizes so that the fixed part cancels (16 hosts on one leaf,
//! 100 Gb/s, Poisson arrivals of 2-byte flows at load 0.5 until 5 us and 10 us:
//! 249,455 and 500,463 flows):
//! - a flow on its own queue pair (`connections: per_flow`): 992 B (247,968 and
//!   491,236 KB peak);
//! - a flow on a shared queue pair (`per_host_pair`): 177 B (51,936 and 95,424 KB), so a
//!   queue pair (its requester, responder and NIC state) is about 815 B;
//! - a collective transfer: 154 B (16 ranks, one 64 MiB ring allreduce with 2 channels and
//!   512 KiB chunks, one transfer per step, 1 and 3 iterations: 3,840 and 11,520
//!   transfers, 10,392 and 11,548 KB).
//!
//! Point-to-point flows and their queue pairs are counted exactly (Poisson arrivals at
//! their expected number). A collective's transfers are bounded above by the ring's count
//! (2(n-1) steps for allreduce, n-1 otherwise, per rank, channel and loop of
//! `channels x ranks x chunk` bytes, per size and iteration): transfers inside a host
//! count too, so the bound can be several times the real figure. Finished transfers
//! retire as the run goes (`sim::retire`): the records held at once stay within twice
//! what can be in flight (a ring's NCCL_STEPS = 8 per rank and channel; one operation's
//! for other algorithms and all-to-all), and at least a sweep's 4,096, so a collective
//! item counts the smaller of its transfers and that (`run --flows` keeps them all). A training item counts all its transfers (no per-operation figure). Only
//! the exact part refuses a run; the bound warns. Left out: packets in flight and queues (bounded by
//! buffers, a few MB), time series (their own limit), and the result files.

use crate::collective::protocol::{Protocol, Slicing, NCCL_STEPS, RING_SIMPLE_CHUNK_STEPS};
use crate::collective::{Collective, CollectiveAlgorithm, CollectiveOp};
use crate::scenario::{Connections, Scenario, Transport};
use crate::workload::Workload;

/// Bytes per flow record and its message state (measured; see the module comment).
pub const FLOW_BYTES: f64 = 177.0;
/// Bytes per queue pair beyond its flows (measured).
pub const QUEUE_PAIR_BYTES: f64 = 815.0;
/// Bytes per collective transfer (measured).
pub const TRANSFER_BYTES: f64 = 154.0;
/// Bytes per transfer of a graph algorithm's operation: its dependency count
/// (`collective::graph`; the graphs themselves are one chunk's per channel).
pub const GRAPH_TRANSFER_BYTES: f64 = 4.0;
/// The run's fixed part: the binary, the fabric's tables, buffers (measured at 5-10 MB
/// for small fabrics; 16 MiB leaves room).
pub const BASE_BYTES: f64 = 16.0 * 1024.0 * 1024.0;

/// A run's estimated memory.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Footprint {
    /// Point-to-point flows (expected, for Poisson arrivals).
    pub flows: f64,
    /// Queue pairs those flows use.
    pub queue_pairs: f64,
    /// Upper bound on collective transfers.
    pub transfers: f64,
    /// Transfers of the largest operation of a graph algorithm (tree, hierarchical,
    /// NVLSTree, in-network): each holds a dependency count while its chunk runs.
    pub graph_transfers: f64,
}

impl Footprint {
    /// Bytes the flows, their queue pairs and the fixed part need: what the run needs at
    /// least.
    pub fn bytes_at_least(&self) -> f64 {
        BASE_BYTES + self.flows * FLOW_BYTES + self.queue_pairs * QUEUE_PAIR_BYTES
    }

    /// Bytes with the collectives' upper bound added.
    pub fn bytes_at_most(&self) -> f64 {
        self.bytes_at_least()
            + self.transfers * TRANSFER_BYTES
            + self.graph_transfers * GRAPH_TRANSFER_BYTES
    }
}

impl std::ops::Add for Footprint {
    type Output = Footprint;
    fn add(self, o: Footprint) -> Footprint {
        Footprint {
            flows: self.flows + o.flows,
            queue_pairs: self.queue_pairs + o.queue_pairs,
            transfers: self.transfers + o.transfers,
            graph_transfers: self.graph_transfers + o.graph_transfers,
        }
    }
}

/// Transfers of a ring over `n` ranks for one operation of `size` bytes (an upper bound
/// for every algorithm; see the module comment).
fn ring_transfers(c: &Collective, n: f64, size: u64) -> f64 {
    let steps = match c.op {
        CollectiveOp::Allreduce => 2.0 * (n - 1.0),
        CollectiveOp::Alltoall => n - 1.0,
        _ => n - 1.0,
    };
    // NCCL's ring Simple sends each step's chunk (4 buffer steps) as 2 slices
    // (`collective::protocol::Slicing`); with the protocol left to the tuner, the
    // default step is kept as the chunk, so the bound stays above the count.
    let slicing = Slicing::of(
        CollectiveAlgorithm::Ring,
        c.op,
        c.protocol.unwrap_or(Protocol::Simple),
        c.chunk_given,
    );
    let sliced = slicing == Slicing::RING_SIMPLE;
    let chunk = match (sliced, c.protocol) {
        (true, Some(_)) => c.chunk * RING_SIMPLE_CHUNK_STEPS as u64,
        _ => c.chunk,
    };
    let slices = slicing.slices as f64;
    let per_loop = c.channels as f64 * n * chunk.max(1) as f64;
    let loops = (size as f64 / per_loop).ceil().max(1.0);
    steps * slices * n * c.channels as f64 * loops
}

/// For size `k` of collective item `item`, when NCCL's choice (or the one given) is a
/// graph algorithm: the operation's transfers, and of them those between servers (each
/// a transfer record while in flight), from `collective::graph::transfers_per_chunk`.
/// `None` for the ring (and all-to-all), or when the ranks cannot be placed (validation
/// says why).
fn graph_transfers(sc: &Scenario, item: usize, c: &Collective, k: usize) -> Option<(f64, f64)> {
    let ranks =
        crate::collective::place_on(c, sc.host.as_ref(), sc.topology.hosts(), sc.seed, item)
            .ok()?;
    let net_gbps = sc.host.as_ref().map_or(1, |h| h.nics_per_host) as f64
        * sc.topology.host_link.rate.0 as f64
        / 8e9;
    let (algorithm, protocol) = *crate::collective::choices(c, &ranks, net_gbps).get(k)?;
    if algorithm == CollectiveAlgorithm::Ring || c.op == CollectiveOp::Alltoall {
        return None;
    }
    let mut servers: Vec<u32> = ranks.iter().map(|r| r.server).collect();
    servers.sort_unstable();
    servers.dedup();
    let (n, servers) = (ranks.len() as u32, servers.len() as u32);
    Some(crate::collective::graph::operation_transfers(
        c,
        algorithm,
        protocol,
        c.sizes[k],
        n,
        servers,
        sc.topology.leaves,
    ))
}

/// What a run will do, roughly: payload bytes, packets (data, and under RC the ACKs)
/// and events (two per packet per link: its transmission ending and its arrival, the
/// engine's cost per packet-hop).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    pub payload_bytes: f64,
    pub packets: f64,
    pub events: f64,
}

/// Events per second a 2-core machine of the kind CI uses runs (`benches/`, the
/// README's Performance section: 6-10 M on small fabrics, less on large ones), to turn
/// events into a wall-time guess.
pub const EVENTS_PER_SECOND: f64 = 5e6;

/// Events above which `validate` warns that a run will be long.
pub const LARGE_RUN_EVENTS: f64 = 3e9;

/// The work estimate for `sc`: every packet crosses two links within a leaf, four across
/// the spines (the larger, when there are spines).
pub fn work(sc: &Scenario) -> Work {
    let hosts = sc.topology.hosts();
    let rate = sc.topology.host_link.rate.0;
    let bytes: f64 = sc
        .workload
        .iter()
        .map(|w| w.expected_bytes(hosts, rate))
        .sum();
    let data = (bytes / sc.mtu.max(1) as f64).ceil();
    let acks = match &sc.transport {
        Transport::Rc(rc) => data / rc.params.ack_every.max(1) as f64,
        Transport::Raw => 0.0,
    };
    let links = if sc.topology.spines > 0 { 4.0 } else { 2.0 };
    let packets = data + acks;
    Work {
        payload_bytes: bytes,
        packets,
        events: packets * links * 2.0,
    }
}

/// The estimate for `sc`.
pub fn estimate(sc: &Scenario) -> Footprint {
    let hosts = sc.topology.hosts() as f64;
    let rate = sc.topology.host_link.rate.0;
    let mut f = Footprint::default();
    for (item, w) in sc.workload.iter().enumerate() {
        match w {
            Workload::Collective(c) => {
                let n = c.ranks.map_or(hosts, |r| r as f64);
                let ops = (c.iters + c.warmup_iters) as f64;
                // Per size: transfer records of one operation, the most in flight, and
                // a graph algorithm's transfers.
                let per_size: Vec<(f64, f64, f64)> = c
                    .sizes
                    .iter()
                    .enumerate()
                    .map(|(k, &s)| match graph_transfers(sc, item, c, k) {
                        Some((all, between_servers)) => (between_servers, between_servers, all),
                        None => {
                            let one = ring_transfers(c, n, s);
                            // A ring (but for all-to-all) keeps at most NCCL_STEPS transfers
                            // in flight per rank and channel.
                            let window = if c.op == CollectiveOp::Alltoall {
                                one
                            } else {
                                NCCL_STEPS as f64 * n * c.channels as f64
                            };
                            (one, window.min(one), 0.0)
                        }
                    })
                    .collect();
                let all = per_size.iter().map(|x| x.0 * ops).sum::<f64>();
                let window = per_size.iter().map(|x| x.1).fold(0.0, f64::max);
                let held = 2.0 * window + crate::sim::retire::SWEEP_MIN as f64;
                f.transfers += all.min(held);
                f.graph_transfers += per_size.iter().map(|x| x.2).fold(0.0, f64::max);
            }
            Workload::Training(t) => f.transfers += t.transfers_estimate(),
            // Point-to-point items: the flows they expand to (Poisson: expected).
            other => f.flows += other.expected_flows(sc.topology.hosts(), rate),
        }
    }
    f.queue_pairs = match &sc.transport {
        Transport::Rc(rc) if rc.connections == Connections::PerFlow => f.flows,
        Transport::Rc(_) => f.flows.min(hosts * (hosts - 1.0)),
        // Without a transport a flow keeps only its record.
        Transport::Raw => 0.0,
    };
    f
}

/// The environment variable that caps the memory doorbell lets its runs use (a size:
/// `8GiB`), for a shared machine.
pub const LIMIT_VAR: &str = "DOORBELL_MEMORY_LIMIT";

/// The most memory this process may use, bytes, and what sets it: the smallest of
/// [`LIMIT_VAR`] (`user`, when set), the memory available when asked (`MemAvailable` in
/// /proc/meminfo, plus what the process already holds), a cgroup limit (v2
/// `memory.max`, v1 `memory.limit_in_bytes`) and the address-space limit (`ulimit -v`).
/// `None` where none of them is known.
pub fn memory_limit(user: Option<u64>) -> Option<(u64, &'static str)> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let mut best: Option<(u64, &'static str)> = user.map(|b| (b, LIMIT_VAR));
    let mut offer = |bytes: u64, what: &'static str| {
        if !matches!(best, Some((b, _)) if b <= bytes) {
            best = Some((bytes, what));
        }
    };
    if let Some(m) = read("/proc/meminfo") {
        if let Some(kb) = m
            .lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
        {
            offer(
                kb * 1024 + resident_bytes().unwrap_or(0),
                "the memory available on this machine",
            );
        }
    }
    for (p, what) in [
        ("/sys/fs/cgroup/memory.max", "the cgroup's memory.max"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "the cgroup's memory limit",
        ),
    ] {
        if let Some(v) = read(p).and_then(|t| t.trim().parse::<u64>().ok()) {
            offer(v, what);
        }
    }
    if let Some(l) = read("/proc/self/limits") {
        if let Some(v) = l
            .lines()
            .find(|l| l.starts_with("Max address space"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse::<u64>().ok())
        {
            offer(v, "the address-space limit (ulimit -v)");
        }
    }
    best
}

/// This process's resident memory, bytes (Linux: /proc/self/statm), if known.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Formats bytes as GiB or MiB.
pub fn human(bytes: f64) -> String {
    if bytes >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} GiB", bytes / (1024.0 * 1024.0 * 1024.0))
    } else {
        format!("{:.0} MiB", bytes / (1024.0 * 1024.0))
    }
}

/// Refuses runs whose estimates add up to `f` (`runs` of them held in memory at once)
/// when what they need at least exceeds `limit`: the message says how much, why, and
/// what to shrink. A collective bound above the limit is returned as a warning.
pub fn check(
    f: Footprint,
    runs: usize,
    limit: (u64, &'static str),
) -> Result<Option<String>, String> {
    // Each run has its own fixed part; the estimate counted one.
    let extra_base = (runs.max(1) - 1) as f64 * BASE_BYTES;
    let at_least = f.bytes_at_least() + extra_base;
    let (limit_bytes, what) = limit;
    let times = if runs > 1 {
        format!(" ({runs} runs at once)")
    } else {
        String::new()
    };
    if at_least > limit_bytes as f64 {
        return Err(format!(
            "the run needs at least {}{times}: {:.0} flows at {FLOW_BYTES:.0} B and {:.0} queue pairs at {QUEUE_PAIR_BYTES:.0} B each, \
             more than the {} {what} allows; shrink the workload (fewer or larger flows, a shorter Poisson `until`), \
             use `transport.rc.connections: per_host_pair` (queue pairs shared by host pair){}",
            human(at_least),
            f.flows,
            f.queue_pairs,
            human(limit_bytes as f64),
            if runs > 1 { ", or run fewer at once (-j)" } else { "" }
        ));
    }
    let at_most = f.bytes_at_most() + extra_base;
    Ok((at_most > limit_bytes as f64).then(|| {
        format!(
            "the run may need up to {}{times} ({:.0} collective transfer records held at most, {TRANSFER_BYTES:.0} B each), more than the {} {what} allows; it stops with an error if it runs out",
            human(at_most),
            f.transfers,
            human(limit_bytes as f64)
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(yaml: &str) -> Scenario {
        crate::scenario::parse_str(yaml, "m.yaml", "m", &Default::default())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    const TOPO: &str =
        "topology: { leaves: 1, spines: 0, hosts_per_leaf: 16, host_link: { rate: 100Gbps } }\n";

    #[test]
    fn flows_and_queue_pairs_are_counted_as_they_will_run() {
        // The measurement's own scenario: 16 senders x 0.5 x 100 Gb/s / 16 bits x 10 us.
        let sc = scenario(&format!(
            "{TOPO}workload:\n  - poisson: {{ load: 0.5, sizes: {{ fixed: 2B }}, until: 10us }}\n"
        ));
        let f = estimate(&sc);
        assert!((f.flows - 500_000.0).abs() < 1.0, "{f:?}");
        assert_eq!(f.queue_pairs, f.flows, "one queue pair per flow by default");
        // The measured peak was 491,236 KB; the estimate must be within 5% of it.
        let measured = 491_236.0 * 1024.0;
        assert!(
            (f.bytes_at_least() - measured).abs() < 0.05 * measured,
            "{} vs {measured}",
            f.bytes_at_least()
        );
        let shared = scenario(&format!(
            "{TOPO}transport: {{ rc: {{ connections: per_host_pair }} }}\nworkload:\n  - all_to_all: {{ size: 4KB }}\n  - permutation: {{ size: 4KB }}\n"
        ));
        let f = estimate(&shared);
        assert_eq!(f.flows, 16.0 * 15.0 + 16.0);
        assert_eq!(
            f.queue_pairs,
            16.0 * 15.0,
            "one per ordered host pair at most"
        );
    }

    #[test]
    fn a_ring_bounds_the_measured_collective() {
        // 16 ranks, 64 MiB, 2 channels, Simple: one loop of 2 MiB chunks, 30 steps x 2
        // slices x 16 ranks x 2 channels = 1,920 transfers, as the run counts them.
        let sc = scenario(&format!(
            "{TOPO}workload:\n  - collective: {{ op: allreduce, protocol: simple, minbytes: 64MiB, maxbytes: 64MiB, iters: 1, warmup_iters: 0 }}\n"
        ));
        assert_eq!(estimate(&sc).transfers, 1920.0);
        // Three iterations make 5,760, more than the ring can hold at once (below).
        let sc = scenario(&format!(
            "{TOPO}workload:\n  - collective: {{ op: allreduce, protocol: simple, minbytes: 64MiB, maxbytes: 64MiB, iters: 3, warmup_iters: 0 }}\n"
        ));
        assert_eq!(estimate(&sc).transfers, 4608.0);
        // The tuner's choice (one iteration), a ring: 512 KiB steps bound its transfers
        // (4 loops, 7,680), and the records held at once are at most twice NCCL_STEPS
        // per rank and channel plus a sweep's 4,096: 2 x 8 x 16 x 2 + 4,096.
        let sc = scenario(&format!(
            "{TOPO}workload:\n  - collective: {{ op: allreduce, minbytes: 64MiB, maxbytes: 64MiB, iters: 1, warmup_iters: 0 }}\n"
        ));
        assert_eq!(estimate(&sc).transfers, 4608.0);
        // A given chunk is one transfer per step.
        let sc = scenario(&format!(
            "{TOPO}workload:\n  - collective: {{ op: allreduce, chunk: 512KiB, minbytes: 64MiB, maxbytes: 64MiB, iters: 1, warmup_iters: 0 }}\n"
        ));
        assert_eq!(estimate(&sc).transfers, 3840.0);
    }

    #[test]
    fn a_run_too_big_for_the_limit_is_refused_with_what_to_shrink() {
        let sc = scenario(&format!(
            "{TOPO}workload:\n  - poisson: {{ load: 0.5, sizes: {{ fixed: 2B }}, until: 100us }}\n"
        ));
        let f = estimate(&sc);
        let e = check(f, 1, (4 << 30, "the address-space limit (ulimit -v)")).unwrap_err();
        assert!(
            e.contains("at least 4.6 GiB") && e.contains("per_host_pair"),
            "{e}"
        );
        assert!(check(f, 1, (64 << 30, "x")).unwrap().is_none());
        let eight = (0..7).fold(f, |a, _| a + f);
        let e = check(eight, 8, (32 << 30, "x")).unwrap_err();
        assert!(e.contains("8 runs at once") && e.contains("-j"), "{e}");
    }
}

//! `workload[].collective`: an NCCL-style collective item (operation, algorithm, sizes as
//! nccl-tests sweeps them, channels, chunk, intra-host and in-network parameters), and
//! the checks that need the rest of the scenario: ranks that fit the GPUs, a transport
//! that carries the data, and a lossless fabric for in-network aggregation.

use super::{check_latency, check_range, check_size, check_time, err, VResult};
use crate::collective::defaults as cd;
use crate::collective::Collective;
use crate::components::FlowControl;
use crate::nic::config::HostConfig;
use crate::scenario::schema::{self, CollectiveSpec};
use crate::scenario::{Faults, Transport};
use crate::topology::Topology;
use crate::transport::rc::Op;
use crate::workload::Workload;

/// Workload item `i`, a collective, for a path MTU of `mtu` payload bytes.
pub fn resolve_item(i: usize, s: &CollectiveSpec, mtu: u64) -> VResult<Workload> {
    let p = |kind: &str, field: &str| format!("workload[{i}].{kind}.{field}");
    let start = |s: Option<schema::Duration>| s.map(|d| d.0).unwrap_or_default();
    let cp = |f: &str| p("collective", f);
    let algorithm = s.algorithm.unwrap_or(schema::CollectiveAlgorithm::Auto);
    check_collective_algorithm(s.op, algorithm).map_err(|m| (cp("algorithm"), m))?;
    let sizes: Vec<u64> = match (s.size, s.minbytes, s.maxbytes) {
        (Some(sz), None, None) => vec![sz.0 .0],
        (None, Some(lo), Some(hi)) => {
            let (lo, hi) = (lo.0 .0, hi.0 .0);
            if lo > hi {
                return err(
                    cp("maxbytes"),
                    format!("expected at least minbytes ({lo} B), found {hi} B"),
                );
            }
            let f = s.stepfactor.unwrap_or(2);
            if f < 2 {
                return err(cp("stepfactor"), format!("expected at least 2, found {f}"));
            }
            let mut v = Vec::new();
            let mut x = lo;
            while x <= hi && v.len() < 64 {
                v.push(x);
                x = match x.checked_mul(f as u64) {
                    Some(y) => y,
                    None => break,
                };
            }
            v
        }
        (None, None, None) => {
            return err(
                format!("workload[{i}].collective"),
                "give `size`, or `minbytes` and `maxbytes` (with `stepfactor`)",
            )
        }
        _ => {
            return err(
                format!("workload[{i}].collective"),
                "give either `size` or `minbytes` with `maxbytes`, not a mix",
            )
        }
    };
    for &sz in &sizes {
        if sz % crate::collective::ELEMENT_BYTES != 0 {
            return err(
                cp(if s.size.is_some() { "size" } else { "minbytes" }),
                format!("{sz} B is not a whole number of 4-byte floats"),
            );
        }
        check_size(cp("size"), sz, mtu)?;
    }
    let iters = s.iters.unwrap_or(cd::ITERS);
    if iters == 0 || iters > 100_000 {
        return err(cp("iters"), format!("expected 1 to 100000, found {iters}"));
    }
    let warmup_iters = s.warmup_iters.unwrap_or(cd::WARMUP_ITERS);
    if warmup_iters > 100_000 {
        return err(
            cp("warmup_iters"),
            format!("expected at most 100000, found {warmup_iters}"),
        );
    }
    let channels = s.channels.unwrap_or(cd::CHANNELS);
    if channels == 0 || channels > 64 {
        return err(
            cp("channels"),
            format!("expected 1 to 64, found {channels}"),
        );
    }
    let chunk = s
        .chunk
        .map_or(crate::collective::default_chunk(algorithm), |c| c.0 .0);
    for (path, r) in [
        ("reduce_rate", s.reduce_rate),
        ("channel_copy_rate", s.channel_copy_rate),
        ("nvls_copy_rate", s.nvls_copy_rate),
        ("intra_host.rate", s.intra_host.and_then(|x| x.rate)),
        (
            "switch_aggregation.rate",
            s.switch_aggregation.and_then(|x| x.rate),
        ),
    ] {
        if let Some(r) = r {
            if r.0 .0 < 1_000_000_000 {
                return err(cp(path), format!("expected at least 1 Gbps, found {}", r.0));
            }
        }
    }
    if !(crate::collective::ELEMENT_BYTES..=1 << 30).contains(&chunk) {
        return err(
            cp("chunk"),
            format!("expected 4 B to 1 GiB, found {chunk} B"),
        );
    }
    let intra = s.intra_host.unwrap_or(schema::IntraHostSpec {
        rate: None,
        latency: None,
    });
    let intra_latency = intra.latency.map(|d| d.0);
    if let Some(l) = intra_latency {
        check_latency(&cp("intra_host.latency"), l)?;
    }
    check_time(cp("start"), start(s.start))?;
    Ok(Workload::Collective(Box::new(Collective {
        op: s.op,
        algorithm,
        sizes,
        iters,
        warmup_iters,
        ranks: s.ranks,
        placement: s.placement.clone().unwrap_or(schema::PlacementSpec::Packed),
        channels,
        chunk,
        root: s.root.unwrap_or(0),
        start: start(s.start),
        intra_rate: intra.rate.map_or(cd::INTRA_HOST_RATE, |r| r.0),
        intra_latency,
        channel_copy_rate: s.channel_copy_rate.map(|r| r.0),
        launch_overhead: {
            let l = s.launch_overhead.map_or(cd::LAUNCH_OVERHEAD, |d| d.0);
            check_latency(&cp("launch_overhead"), l)?;
            l
        },
        protocol: match s.protocol.unwrap_or(schema::ProtocolSpec::Auto) {
            schema::ProtocolSpec::Auto => None,
            schema::ProtocolSpec::Simple => Some(crate::collective::Protocol::Simple),
            schema::ProtocolSpec::Ll => Some(crate::collective::Protocol::Ll),
            schema::ProtocolSpec::Ll128 => Some(crate::collective::Protocol::Ll128),
        },
        reduce_rate: s.reduce_rate.map_or(cd::REDUCE_RATE, |r| r.0),
        pxn: s.pxn.unwrap_or(true),
        chunk_given: s.chunk.is_some(),
        channels_given: s.channels.is_some(),
        switch_reduce_latency: {
            let l = s
                .switch_aggregation
                .and_then(|a| a.latency)
                .map_or(cd::SWITCH_REDUCE_LATENCY, |d| d.0);
            check_latency(&cp("switch_aggregation.latency"), l)?;
            l
        },
        switch_reduce_rate: s
            .switch_aggregation
            .and_then(|a| a.rate)
            .map_or(cd::SWITCH_REDUCE_RATE, |r| r.0),
        qps_per_connection: check_range(
            cp("qps_per_connection"),
            s.qps_per_connection,
            cd::QPS_PER_CONNECTION,
            1,
            cd::MAX_QPS_PER_CONNECTION,
        )?,
        split_data_on_qps: s.split_data_on_qps.unwrap_or(false),
        ar_threshold: s.ar_threshold.map_or(cd::AR_THRESHOLD, |b| b.0 .0),
        nvls: s.nvls.unwrap_or(false),
        nvls_copy_rate: s.nvls_copy_rate.map_or(cd::NVLS_COPY_RATE, |r| r.0),
    })))
}

/// Channels where a collective does not give them: two per NIC of a server (NCCL's
/// search finds a ring per NIC and `src/graph/connect.cc` duplicates every channel),
/// at least 2 (one NIC, or no host model) and at most 64 (`MAXCHANNELS`).
pub fn default_channels(workload: &mut [Workload], host: Option<&HostConfig>) {
    let nics = host.map_or(1, |h| h.nics_per_host);
    for w in workload {
        let c = match w {
            Workload::Collective(c) => c.as_mut(),
            Workload::Training(t) => &mut t.collective,
            _ => continue,
        };
        if !c.channels_given {
            c.channels = (2 * nics).clamp(cd::CHANNELS, 64);
        }
    }
}

/// What a collective must fit.
pub struct CollectiveEnv<'a> {
    pub host: Option<&'a HostConfig>,
    pub topology: &'a Topology,
    pub seed: u64,
    pub item: usize,
    pub lossless: bool,
    pub read: bool,
    pub raw: bool,
    pub faults: bool,
}

/// A collective against its scenario: ranks that fit, a transport that carries its
/// data, and a size the run can hold. Errors are (field under the item, message).
pub fn check_collective_env(c: &Collective, env: &CollectiveEnv) -> Result<(), (String, String)> {
    let e = |p: &str, m: &str| Err((p.to_string(), m.to_string()));
    if env.read {
        return e(
            "op",
            "collectives write into their peers' buffers: they need `transport.rc.operation` `write` or `send`, not `read`",
        );
    }
    if env.raw && !env.lossless {
        return e(
            "op",
            "a collective over bare packets needs a lossless fabric (a lost packet is never resent): use `transport.mode: rc` or a lossless `flow_control`",
        );
    }
    if c.algorithm == schema::CollectiveAlgorithm::InNetwork {
        if !env.lossless {
            return e(
                "algorithm",
                "`in_network` needs a lossless fabric: set `flow_control.mode` to `ib_credit` or `pfc`",
            );
        }
        if env.faults {
            return e(
                "algorithm",
                "`in_network` streams to and from switches are not retransmitted: remove `faults` (or use another algorithm)",
            );
        }
    }
    if !(1024..=1 << 30).contains(&c.chunk) {
        return Err((
            "chunk".into(),
            format!("expected 1 KiB to 1 GiB, found {} B", c.chunk),
        ));
    }
    let ranks = crate::collective::place_on(c, env.host, env.topology.hosts(), env.seed, env.item)?;
    if c.algorithm == schema::CollectiveAlgorithm::NvlsTree {
        if c.protocol
            .is_some_and(|p| p != crate::collective::Protocol::Simple)
        {
            return e(
                "protocol",
                "`nvls_tree` runs NCCL's Simple protocol only: use `protocol: simple` or `auto`",
            );
        }
        if crate::collective::dag::nvls_servers(&ranks).is_none() {
            return e(
                "algorithm",
                "`nvls_tree` needs ranks on two or more servers, the same number on each and more than two (NCCL's NVLS needs more than two GPUs), each rank on its own NIC (`host.nics_per_host` equal to `gpus_per_host`)",
            );
        }
    }
    if env.topology.planes > 1 {
        check_planes(c, &ranks, env)?;
    }
    // Per size, with the algorithm and protocol it runs: a ring tracks at most
    // `TRACKED_SLOTS` pieces per rank and channel, at most 2e8 in all; a graph algorithm
    // names each transfer of an operation by a 32-bit id (`collective::graph`), and
    // holds 4 bytes per transfer of a chunk not yet done.
    let n = ranks.len() as f64;
    let net_gbps =
        env.host.map_or(1, |h| h.nics_per_host) as f64 * env.topology.host_link.rate.0 as f64 / 8e9;
    let choices = crate::collective::choices(c, &ranks, net_gbps);
    let mut servers: Vec<u32> = ranks.iter().map(|r| r.server).collect();
    servers.sort_unstable();
    servers.dedup();
    let servers = servers.len() as u32;
    for (&size, &(algorithm, protocol)) in c.sizes.iter().zip(&choices) {
        let name = crate::collective::algorithm_name(algorithm);
        if algorithm == schema::CollectiveAlgorithm::Ring {
            // Ring Simple: chunks of 4 buffer steps, each step sent as 2 slices.
            let slicing =
                crate::collective::protocol::Slicing::of(algorithm, c.op, protocol, c.chunk_given);
            let sliced = slicing == crate::collective::protocol::Slicing::RING_SIMPLE;
            let chunk = if c.chunk_given {
                c.chunk
            } else if sliced {
                protocol.step_data_bytes()
                    * crate::collective::protocol::RING_SIMPLE_CHUNK_STEPS as u64
            } else {
                protocol.step_data_bytes()
            };
            let ch = c.channels as f64;
            let per_loop = ch * n * chunk as f64;
            let loops = (size as f64 / per_loop).ceil().max(1.0);
            let pieces = n
                * ch
                * (loops * n * slicing.slices as f64).min(crate::collective::TRACKED_SLOTS as f64);
            if pieces > 2e8 {
                return Err((
                    "chunk".into(),
                    format!(
                        "{} ranks moving {size} B with {name} in {chunk} B chunks make about {pieces:.0} buffer pieces per iteration; at most 2e8 (raise `chunk`)",
                        ranks.len(),
                    ),
                ));
            }
            continue;
        }
        let ranks_n = ranks.len() as u32;
        let (transfers, _) = crate::collective::graph::operation_transfers(
            c,
            algorithm,
            protocol,
            size,
            ranks_n,
            servers,
            env.topology.leaves,
        );
        if transfers > u32::MAX as f64 {
            let chunk =
                crate::collective::graph::chunk_of(c, algorithm, protocol, size, ranks_n, servers);
            return Err((
                "chunk".into(),
                format!(
                    "{} ranks moving {size} B with {name} in {chunk} B chunks make about {transfers:.3e} transfers per operation; at most {} (raise `chunk`, or use fewer `channels`)",
                    ranks.len(),
                    u32::MAX,
                ),
            ));
        }
    }
    Ok(())
}

/// On a multi-plane fabric, every transfer between servers must stay in a plane. A
/// transfer leaves by the sender's NIC on the receiver's rail with PXN (the rule of
/// `sim::collective_glue`), else by the sender's own NIC: with PXN each rail must lie in
/// one plane on every server the ranks use (rail wiring with whole rails per plane does
/// that); without it, all ranks in one plane. In-network aggregation trees are refused
/// (their spine may be in another plane).
fn check_planes(
    c: &Collective,
    ranks: &[crate::collective::RankLoc],
    env: &CollectiveEnv,
) -> Result<(), (String, String)> {
    let t = env.topology;
    let planes = t.planes;
    if c.algorithm == schema::CollectiveAlgorithm::InNetwork {
        return Err((
            "algorithm".into(),
            format!("`in_network` aggregation over {planes} disjoint planes is not modelled (an aggregation tree's spine may be in another plane); use `ring`, `tree` or `hierarchical`"),
        ));
    }
    let servers: Vec<u32> = {
        let mut v: Vec<u32> = ranks.iter().map(|r| r.server).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    if servers.len() < 2 {
        return Ok(());
    }
    match env.host {
        Some(h) if c.pxn => {
            let rails: Vec<u32> = {
                let mut v: Vec<u32> = ranks.iter().map(|r| h.nic_of_gpu(r.gpu)).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            for &rail in &rails {
                let plane = t.plane_of(h.port_of(servers[0], rail));
                for &s in &servers[1..] {
                    let port = h.port_of(s, rail);
                    if t.plane_of(port) != plane {
                        return Err((
                            "ranks".into(),
                            format!(
                                "NIC {rail} of server {} (host {}) is in plane {plane} but NIC {rail} of server {s} (host {port}) in plane {}: with {planes} disjoint planes each rail must lie in one plane; use `host.wiring: rail` with `host.nics_per_host` a multiple of `topology.planes` and {} hosts per plane",
                                servers[0],
                                h.port_of(servers[0], rail),
                                t.plane_of(port),
                                h.servers
                            ),
                        ));
                    }
                }
            }
        }
        _ => {
            let plane = t.plane_of(ranks[0].port);
            if let Some(r) = ranks.iter().find(|r| t.plane_of(r.port) != plane) {
                return Err((
                    "ranks".into(),
                    format!(
                        "ranks on host {} (plane {plane}) and host {} (plane {}) talk through their own NICs, but the fabric's {planes} planes do not reach each other; place the ranks in one plane, or use rails (`host` with `wiring: rail`) and `pxn: true`",
                        ranks[0].port,
                        r.port,
                        t.plane_of(r.port)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Whether `algorithm` can run `op`.
pub fn check_collective_algorithm(
    op: schema::CollectiveOp,
    algorithm: schema::CollectiveAlgorithm,
) -> Result<(), String> {
    use schema::CollectiveAlgorithm as A;
    match algorithm {
        A::Tree | A::Hierarchical | A::InNetwork | A::NvlsTree
            if op != schema::CollectiveOp::Allreduce =>
        {
            Err("`tree`, `hierarchical`, `in_network` and `nvls_tree` run allreduce only (as NCCL's tree, NVLSTree and SHARP do); use `ring` for other operations".into())
        }
        _ => Ok(()),
    }
}

/// The rest of a scenario, as the collectives in its workload see it.
pub struct ScenarioEnv<'a> {
    pub host: Option<&'a HostConfig>,
    pub topology: &'a Topology,
    pub seed: u64,
    pub flow_control: &'a FlowControl,
    pub transport: &'a Transport,
    pub faults: &'a Faults,
}

/// Checks every collective item of `workload` against `env`; item `i`'s errors are under
/// the field path `at(i)`.
pub fn check_all(
    workload: &[Workload],
    at: impl Fn(usize) -> String,
    env: &ScenarioEnv,
) -> VResult<()> {
    let read = matches!(env.transport, Transport::Rc(rc) if rc.operation == Op::Read);
    let mut owner: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    let gpus = env.host.map_or(1, |h| h.gpus_per_host);
    let servers = env.host.map_or(env.topology.hosts(), |h| h.servers);
    let mut taken = vec![false; (servers * gpus) as usize];
    for (i, w) in workload.iter().enumerate() {
        let (kind, c) = match w {
            Workload::Collective(c) => ("collective", c.as_ref().clone()),
            Workload::Training(t) if t.trace.is_some() => ("trace", t.placement_collective()),
            Workload::Training(t) => ("training", t.placement_collective()),
            _ => continue,
        };
        // A job's rank count comes from its parallelism (or its trace).
        let field = |p: String| match (kind, p.as_str()) {
            ("training", "ranks") => "parallelism".to_string(),
            ("trace", "ranks") => "file".to_string(),
            _ => p,
        };
        check_collective_env(
            &c,
            &CollectiveEnv {
                host: env.host,
                topology: env.topology,
                seed: env.seed,
                item: i,
                lossless: env.flow_control.lossless(),
                read,
                raw: *env.transport == Transport::Raw,
                faults: env.faults.any(),
            },
        )
        .map_err(|(p, m)| (format!("{}.{kind}.{}", at(i), field(p)), m))?;
        // Training jobs own their GPUs: two on one GPU would share its compute, which
        // the model does not divide. Random placements draw around the jobs before.
        if kind != "collective" {
            let ranks = crate::collective::place_job(
                &c,
                env.host,
                env.topology.hosts(),
                env.seed,
                i,
                &taken,
            )
            .map_err(|(p, m)| (format!("{}.{kind}.{}", at(i), field(p)), m))?;
            for r in ranks {
                let g = r.server * gpus + r.gpu;
                if let Some(&j) = owner.get(&g) {
                    return Err((
                        format!("{}.{kind}.placement", at(i)),
                        format!("GPU {g} (server {}, GPU {}) is already workload[{j}]'s: training jobs need GPUs of their own (place them on other servers, e.g. `placement: {{ servers: [...] }}`)", r.server, r.gpu),
                    ));
                }
                owner.insert(g, i);
                taken[g as usize] = true;
            }
        }
    }
    Ok(())
}

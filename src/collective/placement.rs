//! Where a collective's ranks run: which GPU of which server each rank is (`packed`,
//! `striped`, `random` or a list), the NIC port it uses, and the order of each channel's
//! ring (NCCL's rings enter and leave a server through a different GPU per channel).

use super::{Collective, CollectiveOp, PlacementSpec};
use rand::Rng as _;

/// Where a rank runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankLoc {
    pub server: u32,
    pub gpu: u32,
    /// The topology host port of its NIC.
    pub port: u32,
}

/// The GPUs of the fabric: `servers x gpus_per_host`; global GPU id = server x gpus +
/// gpu. `port_of(server, gpu)` gives the NIC port a GPU uses.
pub fn place(
    c: &Collective,
    servers: u32,
    gpus_per_host: u32,
    port_of: impl Fn(u32, u32) -> u32,
    rng: &mut impl rand::Rng,
) -> Result<Vec<RankLoc>, (String, String)> {
    let total = servers * gpus_per_host;
    let n = c.ranks.unwrap_or(total);
    if n < 2 || n > total {
        return Err((
            "ranks".into(),
            format!("expected 2 to {total} ranks (the fabric's GPUs), found {n}"),
        ));
    }
    let ids: Vec<u32> = match &c.placement {
        PlacementSpec::Packed => (0..n).collect(),
        PlacementSpec::Striped => (0..n)
            .map(|r| (r % servers) * gpus_per_host + r / servers)
            .collect(),
        PlacementSpec::Random => {
            let mut all: Vec<u32> = (0..total).collect();
            for i in 0..n as usize {
                let j = rng.gen_range(i..all.len());
                all.swap(i, j);
            }
            all.truncate(n as usize);
            all
        }
        PlacementSpec::RandomServers => {
            let mut order: Vec<u32> = (0..servers).collect();
            for i in 0..order.len() {
                let j = rng.gen_range(i..order.len());
                order.swap(i, j);
            }
            (0..n)
                .map(|r| order[(r / gpus_per_host) as usize] * gpus_per_host + r % gpus_per_host)
                .collect()
        }
        PlacementSpec::Servers(list) => {
            let mut seen = vec![false; servers as usize];
            for (i, &s) in list.iter().enumerate() {
                if s >= servers {
                    return Err((
                        format!("placement.servers[{i}]"),
                        format!("server {s} does not exist: there are {servers} servers, numbered from 0"),
                    ));
                }
                if std::mem::replace(&mut seen[s as usize], true) {
                    return Err((
                        format!("placement.servers[{i}]"),
                        format!("server {s} is given twice"),
                    ));
                }
            }
            let need = n.div_ceil(gpus_per_host);
            if (list.len() as u32) < need {
                return Err((
                    "placement.servers".into(),
                    format!(
                        "{n} ranks need {need} servers of {gpus_per_host} GPUs, found {}",
                        list.len()
                    ),
                ));
            }
            (0..n)
                .map(|r| list[(r / gpus_per_host) as usize] * gpus_per_host + r % gpus_per_host)
                .collect()
        }
        PlacementSpec::List(v) => {
            if v.len() != n as usize {
                return Err((
                    "placement".into(),
                    format!("expected {n} GPU ids (one per rank), found {}", v.len()),
                ));
            }
            let mut seen = vec![false; total as usize];
            for (i, &g) in v.iter().enumerate() {
                if g >= total {
                    return Err((
                        format!("placement[{i}]"),
                        format!("GPU {g} does not exist: there are {total} GPUs, numbered from 0"),
                    ));
                }
                if std::mem::replace(&mut seen[g as usize], true) {
                    return Err((format!("placement[{i}]"), format!("GPU {g} is given twice")));
                }
            }
            v.clone()
        }
    };
    if c.op == CollectiveOp::Broadcast && c.root >= n {
        return Err((
            "root".into(),
            format!("expected a rank below {n}, found {}", c.root),
        ));
    }
    Ok(ids
        .into_iter()
        .map(|g| {
            let (server, gpu) = (g / gpus_per_host, g % gpus_per_host);
            RankLoc {
                server,
                gpu,
                port: port_of(server, gpu),
            }
        })
        .collect())
}

/// Places a collective's ranks on the fabric: on the host model's servers, GPUs and NICs
/// when there is one, else one GPU per topology host. The random placement draws from
/// the workload item's own stream.
pub fn place_on(
    c: &Collective,
    host: Option<&crate::nic::config::HostConfig>,
    topology_hosts: u32,
    seed: u64,
    item: usize,
) -> Result<Vec<RankLoc>, (String, String)> {
    let mut rng = crate::rng::stream(seed, crate::rng::Stream::Workload, item as u64, 1);
    match host {
        Some(h) => place(
            c,
            h.servers,
            h.gpus_per_host,
            |server, gpu| h.port_of(server, h.nic_of_gpu(gpu)),
            &mut rng,
        ),
        None => place(c, topology_hosts, 1, |server, _| server, &mut rng),
    }
}

/// Places a training job's ranks beside the jobs placed before it (`taken`: per global
/// GPU, whether an earlier job holds it). A random placement draws among the free GPUs
/// (`random`) or the wholly free servers (`random_servers`), as a scheduler would, so
/// jobs never share a GPU whatever the seed; other placements are as given (the caller
/// refuses an overlap).
pub fn place_job(
    c: &Collective,
    host: Option<&crate::nic::config::HostConfig>,
    topology_hosts: u32,
    seed: u64,
    item: usize,
    taken: &[bool],
) -> Result<Vec<RankLoc>, (String, String)> {
    if !taken.iter().any(|&t| t)
        || !matches!(
            c.placement,
            PlacementSpec::Random | PlacementSpec::RandomServers
        )
    {
        return place_on(c, host, topology_hosts, seed, item);
    }
    let (servers, gpus) = host.map_or((topology_hosts, 1), |h| (h.servers, h.gpus_per_host));
    let n = c.ranks.unwrap_or(servers * gpus);
    let mut rng = crate::rng::stream(seed, crate::rng::Stream::Workload, item as u64, 1);
    let mut pick = |mut pool: Vec<u32>, need: usize, what: &str| {
        if pool.len() < need {
            return Err((
                "placement".to_string(),
                format!(
                    "{need} {what} are needed, but only {} are free after the jobs before this one",
                    pool.len()
                ),
            ));
        }
        for i in 0..need {
            let j = rng.gen_range(i..pool.len());
            pool.swap(i, j);
        }
        pool.truncate(need);
        Ok(pool)
    };
    let ids: Vec<u32> = if c.placement == PlacementSpec::Random {
        let free = (0..servers * gpus)
            .filter(|&g| !taken[g as usize])
            .collect();
        pick(free, n as usize, "GPUs")?
    } else {
        let free = (0..servers)
            .filter(|&s| (0..gpus).all(|g| !taken[(s * gpus + g) as usize]))
            .collect();
        let chosen = pick(free, n.div_ceil(gpus) as usize, "whole servers")?;
        (0..n)
            .map(|r| chosen[(r / gpus) as usize] * gpus + r % gpus)
            .collect()
    };
    let mut given = c.clone();
    given.placement = PlacementSpec::List(ids);
    place_on(&given, host, topology_hosts, seed, item)
}

/// Channel `c`'s ring: the ranks in order, with each run of consecutive ranks on one
/// server rotated by `c`, so that each channel enters and leaves a server through
/// different GPUs (and with PXN, different rails), as NCCL's rings do.
pub fn ring_order(ranks: &[RankLoc], c: u32) -> Vec<u32> {
    let mut order = Vec::with_capacity(ranks.len());
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i + 1;
        while j < ranks.len() && ranks[j].server == ranks[i].server {
            j += 1;
        }
        let run: Vec<u32> = (i as u32..j as u32).collect();
        let k = c as usize % run.len();
        order.extend_from_slice(&run[k..]);
        order.extend_from_slice(&run[..k]);
        i = j;
    }
    order
}

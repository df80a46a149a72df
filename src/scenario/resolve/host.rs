//! `host:`: the host and NIC model (the parameters and their defaults are in
//! [`crate::nic::config`]), checked against the workload: every posting mode in use needs
//! a data path on every NIC, and the host costs of all messages must fit in simulated time.

use super::workload::Postings;
use super::{err, VResult, MAX_TIME};
use crate::nic::config::{HostConfig, HostSpec};
use crate::workload::Workload;

/// What the host section is checked against.
pub struct HostEnv<'a> {
    /// Hosts in the topology.
    pub hosts: u32,
    /// Host link rate, bits per second.
    pub host_link_bps: u64,
    pub workload: &'a [Workload],
    pub postings: &'a Postings,
    /// Refuse fields that have no effect (moderation while polling); off for a compare
    /// set's merged section, which may switch to polling without clearing them.
    pub strict: bool,
}

/// The `host:` section, or none; without one no workload item may name a posting mode.
pub fn resolve(spec: Option<&HostSpec>, env: &HostEnv) -> VResult<Option<HostConfig>> {
    match spec {
        Some(spec) => Ok(Some(resolve_at(spec, "host", env)?)),
        None => {
            if let Some((path, _)) = env.postings.iter().find(|(_, m)| m.is_some()) {
                return err(
                    path.clone(),
                    "a posting mode needs the host model: add a `host:` section",
                );
            }
            Ok(None)
        }
    }
}

/// A host section found at field path `at`.
pub fn resolve_at(spec: &HostSpec, at: &str, env: &HostEnv) -> VResult<HostConfig> {
    let (hosts, rate) = (env.hosts, env.host_link_bps);
    // Upper bound on messages (Poisson: twice the expected arrivals, plus a margin), for
    // the host model's serialized costs below.
    // (messages, largest message) per item; a collective's messages are its pieces.
    let message_load: Vec<(f64, u64)> = env
        .workload
        .iter()
        .map(|w| match w {
            Workload::Poisson { .. } => (2.0 * w.expected_flows(hosts, rate) + 100.0, w.max_size()),
            Workload::Collective(c) => (w.expected_flows(hosts, rate), c.chunk.min(w.max_size())),
            _ => (w.expected_flows(hosts, rate), w.max_size()),
        })
        .collect();
    let messages: f64 = message_load.iter().map(|m| m.0).sum();
    let h = crate::nic::config::resolve(spec, hosts, env.strict)
        .map_err(|(p, m)| (format!("{at}.{p}"), m))?;
    // Posting threads, copy engines and interrupt cores serialize each message's
    // costs on its NIC: spread as evenly as they could be over every NIC (a lower bound
    // on the run's length), they must stay inside simulated time.
    let c = &h.costs;
    let slowest = h
        .pcie_bandwidth
        .min(h.interconnect_bandwidth)
        .min(h.root_complex_p2p_bandwidth);
    let fixed = [
        c.wqe_build,
        c.doorbell_mmio,
        c.cqe_poll,
        c.hard_irq,
        c.softirq,
        c.copy_launch,
        c.copy_launch,
        c.proxy_handoff,
        c.gpu_wqe_build,
        c.gpu_doorbell,
        c.gpu_cqe_poll,
        h.wqe_processing,
        h.pcie_round_trip,
        h.pcie_round_trip,
    ]
    .iter()
    .map(|d| d.0 as f64)
    .sum::<f64>();
    let total: f64 = message_load
        .iter()
        .map(|&(n, size)| {
            n * (fixed + 3.0 * crate::units::serialization_delay(size, slowest).0 as f64)
        })
        .sum();
    if total / (hosts.max(1) as f64) > MAX_TIME.0 as f64 {
        return err(
            at,
            format!(
                "about {messages:.0} messages at up to {:.1} us of host costs each would run past a simulated day, even spread evenly over the {hosts} NICs",
                total / messages.max(1.0) / 1e6
            ),
        );
    }
    // Every mode in use must have a data path on every NIC.
    for nic in 0..h.nics_per_host {
        for memory in [h.memory_source, h.memory_destination] {
            h.data_path(nic, h.posting, memory)
                .map_err(|m| (format!("{at}.posting"), m))?;
            for (path, mode) in env.postings {
                if let Some(mode) = mode {
                    h.data_path(nic, *mode, memory)
                        .map_err(|m| (path.clone(), m))?;
                }
            }
        }
    }
    Ok(h)
}

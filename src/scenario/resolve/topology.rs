//! `topology:`: the two-tier Clos fabric's size, planes and links, and the rule that
//! traffic stays inside a plane.

use super::{check_latency, err, VResult};
use crate::scenario::schema::{HostsPerLeaf, TopologySpec};
use crate::topology::{LinkParams, Topology, MIN_LINK_LATENCY};

/// Largest fabric, in ports (unidirectional links), a scenario may describe.
pub const MAX_PORTS: u64 = 1 << 22;
/// Most leaves, spines or hosts per leaf.
pub const MAX_SWITCHES: u32 = 4096;

/// The `topology:` section: counts in range, a fabric that carries traffic and fits
/// [`MAX_PORTS`], link latencies from [`MIN_LINK_LATENCY`] to [`super::MAX_LATENCY`].
pub fn resolve(t: &TopologySpec) -> VResult<Topology> {
    if t.leaves == 0 {
        return err("topology.leaves", "expected at least 1 leaf, found 0");
    }
    // Hosts per leaf: one count, or one per leaf (equal counts are the even case).
    let (hosts_per_leaf, first_host) = match &t.hosts_per_leaf {
        HostsPerLeaf::Every(n) => (*n, Vec::new()),
        HostsPerLeaf::Each(list) => {
            if list.len() != t.leaves as usize {
                return err(
                    "topology.hosts_per_leaf",
                    format!(
                        "expected one host count per leaf ({} leaves), found {} counts",
                        t.leaves,
                        list.len()
                    ),
                );
            }
            let mut first = Vec::with_capacity(list.len() + 1);
            let mut total = 0u64;
            first.push(0);
            for (i, &n) in list.iter().enumerate() {
                if n == 0 || n > MAX_SWITCHES {
                    return err(
                        format!("topology.hosts_per_leaf[{i}]"),
                        format!("expected 1 to {MAX_SWITCHES} hosts under a leaf, found {n}"),
                    );
                }
                total += n as u64;
                first.push(total.min(u32::MAX as u64) as u32);
            }
            let most = list.iter().copied().max().unwrap_or(0);
            if list.iter().all(|&n| n == most) {
                (most, Vec::new())
            } else {
                (most, first)
            }
        }
    };
    if hosts_per_leaf == 0 {
        return err(
            "topology.hosts_per_leaf",
            "expected at least 1 host per leaf, found 0",
        );
    }
    for (field, n) in [
        ("leaves", t.leaves),
        ("spines", t.spines),
        ("hosts_per_leaf", hosts_per_leaf),
    ] {
        if n > MAX_SWITCHES {
            return err(
                format!("topology.{field}"),
                format!(
                    "at most {MAX_SWITCHES} leaves, spines and hosts per leaf; found {n} {}",
                    field.replace('_', " ")
                ),
            );
        }
    }
    let hosts = first_host
        .last()
        .map_or(t.leaves as u64 * hosts_per_leaf as u64, |&n| n as u64);
    if hosts < 2 {
        return err(
            "topology.hosts_per_leaf",
            "a fabric needs at least 2 hosts to carry traffic",
        );
    }
    if t.leaves > 1 && t.spines == 0 {
        return err(
            "topology.spines",
            "expected at least 1 spine when there is more than one leaf",
        );
    }
    if t.links_per_spine == 0 || t.links_per_spine > 64 {
        return err(
            "topology.links_per_spine",
            format!(
                "expected 1 to 64 parallel links, found {}",
                t.links_per_spine
            ),
        );
    }
    if t.planes == 0 || t.planes > 64 {
        return err(
            "topology.planes",
            format!("expected 1 to 64 planes, found {}", t.planes),
        );
    }
    if t.planes > 1 {
        for (field, n) in [("leaves", t.leaves), ("spines", t.spines)] {
            if n % t.planes != 0 {
                return err(
                    format!("topology.{field}"),
                    format!(
                        "{n} {field} do not split evenly into {} planes: expected a multiple of {}",
                        t.planes, t.planes
                    ),
                );
            }
        }
    }
    // Each leaf links to its own plane's spines only.
    let ports =
        2 * hosts + 2 * t.leaves as u64 * (t.spines / t.planes) as u64 * t.links_per_spine as u64;
    if ports > MAX_PORTS {
        return err(
            "topology",
            format!("the fabric has {ports} ports; at most {MAX_PORTS} are supported"),
        );
    }
    for (path, l) in [
        ("topology.host_link.latency", Some(t.host_link)),
        ("topology.fabric_link.latency", t.fabric_link),
    ] {
        if let Some(l) = l {
            check_latency(path, l.latency.0)?;
            if l.latency.0 < MIN_LINK_LATENCY {
                return err(
                    path,
                    format!(
                        "expected at least {MIN_LINK_LATENCY} (every link delays what \
                         crosses it; 1 ns is 20 cm of cable), found {}",
                        l.latency.0
                    ),
                );
            }
        }
    }
    let host_link = LinkParams {
        rate: t.host_link.rate.0,
        latency: t.host_link.latency.0,
    };
    let fabric_link = t
        .fabric_link
        .map(|l| LinkParams {
            rate: l.rate.0,
            latency: l.latency.0,
        })
        .unwrap_or(host_link);
    Ok(Topology {
        leaves: t.leaves,
        spines: t.spines,
        hosts_per_leaf,
        first_host,
        links_per_spine: t.links_per_spine,
        planes: t.planes,
        host_link,
        fabric_link,
    })
}

/// Hosts `a` and `b` are in one plane (always, with one plane); else an error under
/// `path` saying which planes they are in and which hosts a plane holds.
pub fn same_plane(topology: &Topology, path: impl Into<String>, a: u32, b: u32) -> VResult<()> {
    let (pa, pb) = (topology.plane_of(a), topology.plane_of(b));
    if pa == pb {
        return Ok(());
    }
    err(
        path,
        format!(
            "host {a} is in plane {pa} and host {b} in plane {pb}: the fabric's {} planes \
             do not reach each other (topology.planes); {}",
            topology.planes,
            plane_hosts(topology)
        ),
    )
}

/// Which hosts each plane holds ("plane 0: hosts 0 to 7, plane 1: hosts 8 to 15"; the
/// first four planes and the last).
pub fn plane_hosts(topology: &Topology) -> String {
    let lp = topology.leaves_per_plane();
    let range = |p: u32| {
        let (a, b) = (
            topology.first_host_of(p * lp),
            topology.first_host_of((p + 1) * lp),
        );
        format!("plane {p}: hosts {a} to {}", b - 1)
    };
    let planes = topology.planes;
    let mut shown: Vec<String> = (0..planes.min(4)).map(range).collect();
    if planes > 5 {
        shown.push("...".into());
    }
    if planes > 4 {
        shown.push(range(planes - 1));
    }
    shown.join(", ")
}

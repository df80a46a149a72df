//! `workload:`: flows, permutation, incast, all-to-all, Poisson arrivals, message streams
//! and ping-pongs checked against the fabric's hosts and the run's limits (collective
//! items are in [`super::collective`]), and each item's posting mode.

use super::topology::{plane_hosts, same_plane};
use super::{check_size, check_time, err, VResult, MAX_FLOWS, MAX_TIME};
use crate::nic::config::PostingMode;
use crate::packet::Encapsulation;
use crate::scenario::schema::{self, WorkloadSpec};
use crate::topology::Topology;
use crate::units::SimDuration;
use crate::workload::{SizeDist, Workload};
use std::path::Path;

/// Each item's posting mode, when it names one, with the field path it came from.
pub type Postings = Vec<(String, Option<PostingMode>)>;

/// The `workload:` list on `topology`, for a path MTU of `mtu` payload bytes. `duration`
/// ends Poisson arrivals that give no `until`; CDF files are found under `base_dir`.
pub fn resolve(
    items: &[WorkloadSpec],
    topology: &Topology,
    mtu: u64,
    encapsulation: Encapsulation,
    duration: Option<SimDuration>,
    base_dir: &Path,
) -> VResult<(Vec<Workload>, Postings)> {
    let host_link = topology.host_link;
    if items.is_empty() {
        return err("workload", "expected at least one workload item");
    }
    let hosts = topology.hosts();
    let host_check = |path: String, h: u32| -> VResult<()> {
        if h >= hosts {
            err(
                path,
                format!(
                    "host {h} does not exist: the fabric has {hosts} hosts, numbered 0 to {}",
                    hosts - 1
                ),
            )
        } else {
            Ok(())
        }
    };
    // Items that spread over every host cannot run on disjoint planes.
    let all_planes = |path: String, what: &str| -> VResult<()> {
        if topology.planes == 1 {
            return Ok(());
        }
        err(
            path,
            format!(
                "{what} spreads over every host, but the fabric's {} planes do not reach each \
                 other (topology.planes); use `flows`, `stream`, `ping_pong` or `poisson` \
                 (with src_hosts and dst_hosts) inside one plane ({}), or a collective on \
                 rails",
                topology.planes,
                plane_hosts(topology)
            ),
        )
    };
    let mut workload = Vec::with_capacity(items.len());
    let mut workload_posting: Vec<(String, Option<PostingMode>)> = Vec::new();
    for (i, w) in items.iter().enumerate() {
        let (kind, posting) = match &w {
            WorkloadSpec::Flows(_) => ("flows", None),
            WorkloadSpec::Permutation(s) => ("permutation", s.posting),
            WorkloadSpec::Incast(s) => ("incast", s.posting),
            WorkloadSpec::AllToAll(s) => ("all_to_all", s.posting),
            WorkloadSpec::Poisson(s) => ("poisson", s.posting),
            WorkloadSpec::Stream(s) => ("stream", s.posting),
            WorkloadSpec::PingPong(s) => ("ping_pong", s.posting),
            WorkloadSpec::Collective(_) => ("collective", None),
            WorkloadSpec::Training(_) => ("training", None),
            WorkloadSpec::Trace(_) => ("trace", None),
        };
        workload_posting.push((format!("workload[{i}].{kind}.posting"), posting));
        let p = |kind: &str, field: &str| format!("workload[{i}].{kind}.{field}");
        let start = |s: Option<schema::Duration>| s.map(|d| d.0).unwrap_or_default();
        let item = match w {
            WorkloadSpec::Flows(list) => {
                if list.is_empty() {
                    return err(format!("workload[{i}].flows"), "expected at least one flow");
                }
                let mut flows = Vec::with_capacity(list.len());
                for (j, fl) in list.iter().enumerate() {
                    let fp = |field: &str| format!("workload[{i}].flows[{j}].{field}");
                    host_check(fp("src"), fl.src)?;
                    host_check(fp("dst"), fl.dst)?;
                    if fl.src == fl.dst {
                        return err(
                            fp("dst"),
                            format!(
                                "a flow needs two different hosts, found src = dst = {}",
                                fl.src
                            ),
                        );
                    }
                    same_plane(topology, fp("dst"), fl.src, fl.dst)?;
                    check_size(fp("size"), fl.size.0 .0, mtu)?;
                    check_time(fp("start"), start(fl.start))?;
                    flows.push(crate::workload::ExplicitFlow {
                        src: fl.src,
                        dst: fl.dst,
                        size: fl.size.0 .0,
                        start: start(fl.start),
                    });
                }
                Workload::Flows(flows)
            }
            WorkloadSpec::Permutation(s) => {
                all_planes(format!("workload[{i}].permutation"), "a permutation")?;
                check_size(p("permutation", "size"), s.size.0 .0, mtu)?;
                check_time(p("permutation", "start"), start(s.start))?;
                Workload::Permutation {
                    size: s.size.0 .0,
                    start: start(s.start),
                }
            }
            WorkloadSpec::Incast(s) => {
                host_check(p("incast", "receiver"), s.receiver)?;
                all_planes(format!("workload[{i}].incast"), "an incast")?;
                if s.senders == 0 || s.senders > hosts - 1 {
                    return err(
                        p("incast", "senders"),
                        format!(
                            "expected 1 to {} senders (every host but the receiver), found {}",
                            hosts - 1,
                            s.senders
                        ),
                    );
                }
                check_size(p("incast", "size"), s.size.0 .0, mtu)?;
                check_time(p("incast", "start"), start(s.start))?;
                Workload::Incast {
                    senders: s.senders,
                    receiver: s.receiver,
                    size: s.size.0 .0,
                    start: start(s.start),
                }
            }
            WorkloadSpec::AllToAll(s) => {
                all_planes(format!("workload[{i}].all_to_all"), "an all-to-all")?;
                check_size(p("all_to_all", "size"), s.size.0 .0, mtu)?;
                check_time(p("all_to_all", "start"), start(s.start))?;
                let n = hosts as f64 * (hosts as f64 - 1.0);
                if n > MAX_FLOWS {
                    return err(
                        format!("workload[{i}].all_to_all"),
                        format!("{hosts} hosts make {n} flows; at most {MAX_FLOWS} are supported"),
                    );
                }
                Workload::AllToAll {
                    size: s.size.0 .0,
                    start: start(s.start),
                }
            }
            WorkloadSpec::Stream(s) => {
                host_check(p("stream", "src"), s.src)?;
                host_check(p("stream", "dst"), s.dst)?;
                if s.src == s.dst {
                    return err(
                        p("stream", "dst"),
                        format!(
                            "a stream needs two different hosts, found src = dst = {}",
                            s.src
                        ),
                    );
                }
                same_plane(topology, p("stream", "dst"), s.src, s.dst)?;
                if s.count == 0 || s.count as f64 > MAX_FLOWS {
                    return err(
                        p("stream", "count"),
                        format!("expected 1 to {MAX_FLOWS} messages, found {}", s.count),
                    );
                }
                check_size(p("stream", "size"), s.size.0 .0, mtu)?;
                let st = start(s.start);
                let interval = start(s.interval);
                check_time(p("stream", "start"), st)?;
                check_time(
                    p("stream", "interval"),
                    SimDuration(st.0.saturating_add(interval.0.saturating_mul(s.count as u64))),
                )?;
                Workload::Stream {
                    src: s.src,
                    dst: s.dst,
                    size: s.size.0 .0,
                    count: s.count,
                    interval,
                    start: st,
                }
            }
            WorkloadSpec::Collective(s) => super::collective::resolve_item(i, s, mtu)?,
            WorkloadSpec::Training(s) => super::training::resolve_item(i, s, mtu)?,
            WorkloadSpec::Trace(s) => super::training::resolve_trace(i, s, base_dir, mtu)?,
            WorkloadSpec::PingPong(s) => {
                let [a, b] = s.hosts;
                host_check(format!("workload[{i}].ping_pong.hosts[0]"), a)?;
                host_check(format!("workload[{i}].ping_pong.hosts[1]"), b)?;
                if a == b {
                    return err(
                        p("ping_pong", "hosts"),
                        format!("a ping-pong needs two different hosts, found {a} twice"),
                    );
                }
                same_plane(topology, format!("workload[{i}].ping_pong.hosts[1]"), a, b)?;
                if s.iterations == 0 || 2.0 * s.iterations as f64 > MAX_FLOWS {
                    return err(
                        p("ping_pong", "iterations"),
                        format!(
                            "expected 1 to {} round trips, found {}",
                            MAX_FLOWS / 2.0,
                            s.iterations
                        ),
                    );
                }
                check_size(p("ping_pong", "size"), s.size.0 .0, mtu)?;
                check_time(p("ping_pong", "start"), start(s.start))?;
                Workload::PingPong {
                    hosts: s.hosts,
                    size: s.size.0 .0,
                    iterations: s.iterations,
                    start: start(s.start),
                }
            }
            WorkloadSpec::Poisson(s) => {
                if !(s.load.is_finite() && s.load > 0.0 && s.load <= 1.0) {
                    return err(
                        p("poisson", "load"),
                        format!(
                            "expected a fraction of the host link rate in (0, 1], found {}",
                            s.load
                        ),
                    );
                }
                let st = start(s.start);
                let until = match (s.until, duration) {
                    (Some(u), _) => u.0,
                    (None, Some(d)) => d,
                    (None, None) => {
                        return err(
                            p("poisson", "until"),
                            "a Poisson workload needs `until` (or a scenario `duration`) to know when arrivals stop",
                        )
                    }
                };
                if until <= st {
                    return err(
                        p("poisson", "until"),
                        format!("expected a time after start ({st}), found {until}"),
                    );
                }
                let all: Vec<u32> = (0..hosts).collect();
                let given_lists = [s.src_hosts.is_some(), s.dst_hosts.is_some()];
                let mut lists = [Vec::new(), Vec::new()];
                for (li, (name, given)) in
                    [("src_hosts", &s.src_hosts), ("dst_hosts", &s.dst_hosts)]
                        .into_iter()
                        .enumerate()
                {
                    let list = given.clone().unwrap_or_else(|| all.clone());
                    if list.is_empty() {
                        return err(p("poisson", name), "expected at least one host");
                    }
                    for (j, &h) in list.iter().enumerate() {
                        host_check(format!("workload[{i}].poisson.{name}[{j}]"), h)?;
                    }
                    lists[li] = list;
                }
                let [src_hosts, dst_hosts] = lists;
                // Any sender may pick any receiver: all of them in one plane.
                let first = src_hosts[0];
                for (name, list) in [("src_hosts", &src_hosts), ("dst_hosts", &dst_hosts)] {
                    for (j, &h) in list.iter().enumerate() {
                        let at = if given_lists[usize::from(name == "dst_hosts")] {
                            format!("workload[{i}].poisson.{name}[{j}]")
                        } else {
                            p("poisson", name)
                        };
                        same_plane(topology, at, first, h)?;
                    }
                }
                if dst_hosts.len() == 1 && src_hosts == dst_hosts {
                    return err(
                        p("poisson", "dst_hosts"),
                        "the only receiver is the only sender: a host does not send to itself",
                    );
                }
                check_time(p("poisson", "start"), st)?;
                check_time(p("poisson", "until"), until)?;
                let dist = SizeDist::from_spec(&s.sizes, base_dir)
                    .map_err(|m| (p("poisson", "sizes"), m))?;
                check_size(p("poisson", "sizes"), dist.max(), mtu)?;
                // Expected arrivals: load x rate / (8 x mean size) per sender per second.
                let expected = s.load * host_link.rate.0 as f64 / (8.0 * dist.mean())
                    * (until - st).as_secs_f64()
                    * src_hosts.len() as f64;
                if expected.is_nan() || expected > MAX_FLOWS {
                    return err(
                        p("poisson", "until"),
                        format!(
                            "about {expected:.0} flows would arrive; at most {MAX_FLOWS} are supported (shorten `until` or use larger flows)"
                        ),
                    );
                }
                Workload::Poisson {
                    load: s.load,
                    dist,
                    start: st,
                    until,
                    src_hosts,
                    dst_hosts,
                }
            }
        };
        workload.push(item);
    }

    // An item whose busiest host link must carry more than a simulated day of bytes
    // (after its start) cannot finish within the run's bound: refuse it before it runs
    // (issue 19's fuzz: a long stream ran past the clock). A lower bound on the time
    // the item needs, so it never refuses what could run.
    let hosts = topology.hosts() as u128;
    for (i, w) in workload.iter().enumerate() {
        let wire = |size: u64| -> u128 {
            let packets = size.div_ceil(mtu).max(1);
            size as u128 + packets as u128 * encapsulation.overhead_bytes() as u128
        };
        // (item's start, bytes over its busiest host link, what that is)
        let (start, bytes, what) = match w {
            Workload::Flows(list) => {
                // Per host link: its earliest flow's start and all its bytes.
                let mut per: std::collections::HashMap<(u32, bool), (SimDuration, u128)> =
                    Default::default();
                for f in list {
                    for key in [(f.src, true), (f.dst, false)] {
                        let e = per.entry(key).or_insert((f.start, 0));
                        e.0 = e.0.min(f.start);
                        e.1 += wire(f.size);
                    }
                }
                let rate = topology.host_link.rate.0 as u128;
                let (start, bytes) = per
                    .values()
                    .copied()
                    .max_by_key(|&(s, b)| s.0 as u128 + b * 8 * 1_000_000_000_000 / rate)
                    .unwrap_or_default();
                (start, bytes, "its flows over one host link")
            }
            Workload::Incast {
                senders,
                size,
                start,
                ..
            } => (
                *start,
                *senders as u128 * wire(*size),
                "the receiver's link",
            ),
            Workload::AllToAll { size, start } => {
                (*start, (hosts - 1) * wire(*size), "each host's link")
            }
            Workload::Stream {
                size, count, start, ..
            } => (
                *start,
                *count as u128 * wire(*size),
                "the stream's messages",
            ),
            Workload::PingPong {
                size,
                iterations,
                start,
                ..
            } => (
                *start,
                2 * *iterations as u128 * wire(*size),
                "the round trips, one after another",
            ),
            _ => continue,
        };
        let ps = bytes * 8 * 1_000_000_000_000 / topology.host_link.rate.0 as u128;
        if start.0 as u128 + ps > MAX_TIME.0 as u128 {
            return err(
                format!("workload[{i}]"),
                format!(
                    "{what} take at least {:.0} s at {} after the start; a run may last at most a simulated day (86400 s)",
                    ps as f64 / 1e12,
                    topology.host_link.rate
                ),
            );
        }
    }

    // A flow that alone takes more than a simulated day to serialize on the slowest link
    // would carry simulated time towards overflow: reject it.
    let slowest = topology.host_link.rate.min(topology.fabric_link.rate);
    for (i, w) in workload.iter().enumerate() {
        let biggest = w.max_size();
        let packets = biggest.div_ceil(mtu);
        let wire = biggest + packets * (encapsulation.overhead_bytes() + 16);
        if crate::units::serialization_delay(wire, slowest) > MAX_TIME {
            return err(
                format!("workload[{i}]"),
                format!(
                    "a {} flow takes more than a simulated day to send at {slowest}",
                    crate::units::Bytes(biggest)
                ),
            );
        }
    }
    Ok((workload, workload_posting))
}

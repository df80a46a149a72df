//! `compare:`: named parameter sets, each resolved against the scenario it changes.

use super::collective::{check_collective_algorithm, check_collective_env, CollectiveEnv};
use super::host::HostEnv;
use super::{check_latency, err, VResult};
use crate::scenario::schema::{self, ScenarioFile, TransportMode};
use crate::scenario::{CompareSet, Scenario};
use crate::topology::LinkParams;
use crate::transport::rc::Op;
use crate::workload::Workload;

/// The `compare:` sets of `f`, whose other sections resolved to `base`. `host_env` has
/// the base workload; its `strict` is off for the sets' merged host sections.
pub fn resolve(f: &ScenarioFile, base: &Scenario, host_env: &HostEnv) -> VResult<Vec<CompareSet>> {
    let mut compare: Vec<CompareSet> = Vec::new();
    let topology = &base.topology;
    let (mtu, mtu_wire) = (base.mtu, base.mtu_wire_bytes());
    let buffer_bytes = base.switch.buffer_bytes;
    let workload = &base.workload;
    for (i, c) in f.compare.iter().enumerate() {
        if f.transport.mode == TransportMode::Raw {
            return err(
                "compare",
                "`compare:` compares RC parameter sets; it needs `transport.mode: rc`",
            );
        }
        if c.name.trim().is_empty() || compare.iter().any(|x| x.name == c.name) {
            return err(
                format!("compare[{i}].name"),
                "expected a unique, non-empty name",
            );
        }
        let rc = super::transport::resolve_rc(
            &f.transport.rc,
            Some(&c.rc),
            mtu,
            &format!("compare[{i}]"),
        )?;
        let (set_cc, set_ecn) = if c.cc.is_some() || c.ecn.is_some() {
            super::cc::resolve_cc(
                c.cc.as_ref().unwrap_or(&f.cc),
                c.ecn.as_ref().or(f.ecn.as_ref()),
                topology,
                &base.transport,
            )
            .map_err(|(p, m)| (format!("compare[{i}].{p}"), m))?
        } else {
            (base.cc, base.ecn)
        };
        let mut set_topology = topology.clone();
        if let Some(t) = &c.topology {
            if let Some(sp) = t.spines {
                set_topology.spines = sp;
            }
            if let Some(k) = t.links_per_spine {
                set_topology.links_per_spine = k;
            }
            if let Some(l) = t.fabric_link {
                set_topology.fabric_link = LinkParams {
                    rate: l.rate.0,
                    latency: l.latency.0,
                };
                check_latency(
                    &format!("compare[{i}].topology.fabric_link.latency"),
                    l.latency.0,
                )?;
            }
            if set_topology.spines == 0 && set_topology.leaves > 1 {
                return err(
                    format!("compare[{i}].topology.spines"),
                    "expected at least 1 spine",
                );
            }
            if set_topology.links_per_spine == 0 || set_topology.links_per_spine > 64 {
                return err(
                    format!("compare[{i}].topology.links_per_spine"),
                    "expected 1 to 64",
                );
            }
        }
        // Flow control is sized for the set's own fabric (headroom per ingress port).
        let fc = super::flow_control::resolve_flow_control(
            c.flow_control.as_ref().unwrap_or(&f.flow_control),
            &set_topology,
            buffer_bytes,
            mtu_wire + 16,
        )
        .map_err(|(p, m)| (format!("compare[{i}].{p}"), m))?;
        let set_host = match (&c.host, &f.host) {
            (None, _) => base.host.clone(),
            (Some(over), base) => {
                let merged = schema::merge_host(&base.clone().unwrap_or_default(), over);
                Some(super::host::resolve_at(
                    &merged,
                    &format!("compare[{i}].host"),
                    host_env,
                )?)
            }
        };
        let set_workload = match &c.collective {
            None => None,
            Some(o) => {
                let mut w = workload.clone();
                for item in w.iter_mut() {
                    if let Workload::Collective(col) = item {
                        let at = format!("compare[{i}].collective");
                        if let Some(a) = o.algorithm {
                            col.algorithm = a;
                            if !col.chunk_given && o.chunk.is_none() {
                                col.chunk = crate::collective::default_chunk(a);
                            }
                        }
                        if let Some(p) = &o.placement {
                            col.placement = p.clone();
                        }
                        if let Some(ch) = o.channels {
                            if ch == 0 || ch > 64 {
                                return err(
                                    format!("{at}.channels"),
                                    format!("expected 1 to 64, found {ch}"),
                                );
                            }
                            col.channels = ch;
                        }
                        if let Some(ck) = o.chunk {
                            col.chunk = ck.0 .0;
                        }
                        if let Some(x) = o.pxn {
                            col.pxn = x;
                        }
                        check_collective_algorithm(col.op, col.algorithm)
                            .map_err(|m| (format!("{at}.algorithm"), m))?;
                    }
                }
                Some(w)
            }
        };
        // Every set's collectives must suit the set's hosts, fabric and transport.
        for (j, item) in set_workload.as_ref().unwrap_or(workload).iter().enumerate() {
            if let Workload::Collective(col) = item {
                check_collective_env(
                    col,
                    &CollectiveEnv {
                        host: set_host.as_ref(),
                        hosts: set_topology.hosts(),
                        seed: f.seed,
                        item: j,
                        lossless: fc.lossless(),
                        read: rc.operation == Op::Read,
                        raw: false,
                        faults: base.faults.any(),
                    },
                )
                .map_err(|(p, m)| (format!("compare[{i}].collective.{p}"), m))?;
            }
        }
        compare.push(CompareSet {
            workload: set_workload,
            host: set_host,
            name: c.name.clone(),
            topology: set_topology,
            rc,
            flow_control: fc,
            cc: set_cc,
            ecn: set_ecn,
        });
    }

    Ok(compare)
}

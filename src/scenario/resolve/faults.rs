//! `faults:`: bit error and drop rates per fabric, tier and link, and scheduled link
//! flaps, resolved to port numbers.

use super::{check_time, err, VResult};
use crate::components::LinkFaults;
use crate::scenario::schema::{FaultsSpec, LinkFaultSpec};
use crate::scenario::{Faults, Flap};
use crate::topology::{Tier, Topology};

fn resolve_link_faults(path: &str, f: &LinkFaultSpec, base: LinkFaults) -> VResult<LinkFaults> {
    let check = |field: &str, what: &str, v: Option<f64>, default: f64| -> VResult<f64> {
        match v {
            None => Ok(default),
            Some(x) if (0.0..1.0).contains(&x) => Ok(x),
            Some(x) => err(
                format!("{path}.{field}"),
                format!("expected {what} in [0, 1), found {x}"),
            ),
        }
    };
    Ok(LinkFaults {
        ber: check("ber", "a bit error rate", f.ber, base.ber)?,
        drop_probability: check(
            "drop_probability",
            "a probability",
            f.drop_probability,
            base.drop_probability,
        )?,
    })
}

pub fn resolve_faults(f: &FaultsSpec, topo: &Topology) -> VResult<Faults> {
    let all = resolve_link_faults(
        "faults",
        &LinkFaultSpec {
            ber: f.ber,
            drop_probability: f.drop_probability,
        },
        LinkFaults::default(),
    )?;
    let mut tiers = [all; 4];
    let per = [
        ("host_to_leaf", &f.tiers.host_to_leaf),
        ("leaf_to_spine", &f.tiers.leaf_to_spine),
        ("spine_to_leaf", &f.tiers.spine_to_leaf),
        ("leaf_to_host", &f.tiers.leaf_to_host),
    ];
    for (i, (name, spec)) in per.iter().enumerate() {
        if let Some(spec) = spec {
            tiers[i] = resolve_link_faults(&format!("faults.tiers.{name}"), spec, all)?;
        }
    }
    let find_port = |path: &str, name: &str| -> VResult<u32> {
        (0..topo.ports())
            .find(|&p| topo.port_name(p) == name)
            .ok_or_else(|| {
                (
                    format!("{path}.link"),
                    format!(
                        "no link named `{name}` (names as in ports.csv, e.g. `{}` or `{}`)",
                        topo.port_name(0),
                        topo.port_name(topo.ports() - 1)
                    ),
                )
            })
    };
    let mut links = Vec::new();
    for (i, l) in f.links.iter().enumerate() {
        let path = format!("faults.links[{i}]");
        let port = find_port(&path, &l.link)?;
        let base = tiers[Tier::ALL
            .iter()
            .position(|t| *t == topo.port_info(port).0)
            .unwrap_or(0)];
        let rates = resolve_link_faults(
            &path,
            &LinkFaultSpec {
                ber: l.ber,
                drop_probability: l.drop_probability,
            },
            base,
        )?;
        links.push((port, rates));
    }
    let mut flaps = Vec::new();
    for (i, fl) in f.flaps.iter().enumerate() {
        let path = format!("faults.flaps[{i}]");
        let port = find_port(&path, &fl.link)?;
        check_time(format!("{path}.at"), fl.at.0)?;
        check_time(format!("{path}.for"), fl.down_for.0)?;
        let from = fl.at.0;
        let until = fl.at.0 + fl.down_for.0;
        flaps.push(Flap { port, from, until });
        if fl.both_directions {
            flaps.push(Flap {
                port: topo.reverse_port(port),
                from,
                until,
            });
        }
    }
    let mut degraded = Vec::new();
    let graph = (!f.degraded.is_empty()).then(|| topo.graph());
    for (i, d) in f.degraded.iter().enumerate() {
        let path = format!("faults.degraded[{i}]");
        let port = find_port(&path, &d.link)?;
        let full = graph.as_ref().expect("built when a link is degraded").ports[port as usize]
            .link
            .rate;
        let rate = d.rate.0;
        if rate.0 < 1_000_000 || rate.0 > full.0 {
            return err(
                format!("{path}.rate"),
                format!(
                    "expected 1 Mbps up to the link's own {}, found {}",
                    full, rate
                ),
            );
        }
        degraded.push((port, rate));
        if d.both_directions {
            degraded.push((topo.reverse_port(port), rate));
        }
    }
    Ok(Faults {
        tiers,
        links,
        flaps,
        degraded,
    })
}

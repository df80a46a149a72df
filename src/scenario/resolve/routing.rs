//! `routing:`: the policy and its parameters; each parameter belongs to one policy, and
//! one given to another is an error rather than silently ignored.

use super::{check_latency, err, VResult};
use crate::routing::{defaults, Routing, RoutingConfig};
use crate::scenario::schema::RoutingSpec;
use crate::units::SimDuration;

pub fn resolve(r: &RoutingSpec) -> VResult<RoutingConfig> {
    let name = r.policy.name();
    if r.flowlet_gap.is_some() && r.policy != Routing::Flowlet {
        return err(
            "routing.flowlet_gap",
            format!("applies to `policy: flowlet` only, not `{name}`"),
        );
    }
    if r.hysteresis.is_some() && r.policy != Routing::Adaptive {
        return err(
            "routing.hysteresis",
            format!("applies to `policy: adaptive` only, not `{name}`"),
        );
    }
    if r.band.is_some() && r.policy != Routing::Adaptive {
        return err(
            "routing.band",
            format!("applies to `policy: adaptive` only, not `{name}`"),
        );
    }
    if r.load.is_some() && !matches!(r.policy, Routing::Adaptive | Routing::Flowlet) {
        return err(
            "routing.load",
            format!("applies to `adaptive` and `flowlet`, which choose by load, not `{name}`"),
        );
    }
    let flowlet_gap = r.flowlet_gap.map_or(defaults::FLOWLET_GAP, |d| d.0);
    if flowlet_gap == SimDuration::ZERO {
        return err(
            "routing.flowlet_gap",
            "expected a time above 0 (with no gap every packet is a flowlet: use `adaptive`)",
        );
    }
    check_latency("routing.flowlet_gap", flowlet_gap)?;
    let hysteresis_bytes = r.hysteresis.map_or(0, |s| s.0 .0);
    if hysteresis_bytes > 1 << 40 {
        return err("routing.hysteresis", "expected at most 1TiB");
    }
    let band_bytes = r.band.map_or(0, |s| s.0 .0);
    if band_bytes > 1 << 40 {
        return err("routing.band", "expected at most 1TiB");
    }
    Ok(RoutingConfig {
        policy: r.policy,
        flowlet_gap,
        hysteresis_bytes,
        band_bytes,
        load: r.load.unwrap_or_default(),
    })
}

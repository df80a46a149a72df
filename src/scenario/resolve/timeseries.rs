//! `timeseries:`: which ports and flows to sample, and how often, within a row budget.

use super::{err, VResult};
use crate::scenario::schema::TimeseriesSpec;
use crate::scenario::{Timeseries, MAX_TIMESERIES_ROWS};
use crate::topology::Topology;
use crate::units::SimDuration;
use crate::workload::Workload;

/// The `timeseries:` section: port names on `topology`, flow ids among those `workload`
/// expands to with `seed`.
pub fn resolve(
    ts: &TimeseriesSpec,
    topology: &Topology,
    workload: &[Workload],
    seed: u64,
    duration: Option<SimDuration>,
) -> VResult<Timeseries> {
    let interval = ts.interval.map(|d| d.0).unwrap_or(SimDuration::from_us(10));
    if interval == SimDuration::ZERO {
        return err("timeseries.interval", "expected a positive interval");
    }
    let mut ports = Vec::new();
    for (i, name) in ts.ports.iter().enumerate() {
        let p = (0..topology.ports())
            .find(|&p| topology.port_name(p) == *name)
            .ok_or_else(|| {
                (
                    format!("timeseries.ports[{i}]"),
                    format!(
                        "no link named `{name}` (names as in ports.csv, e.g. `{}`)",
                        topology.port_name(0)
                    ),
                )
            })?;
        ports.push(p);
    }
    if !ts.flows.is_empty() {
        let n =
            crate::workload::expand(workload, topology.hosts(), topology.host_link.rate.0, seed)
                .len();
        if let Some((i, &id)) = ts
            .flows
            .iter()
            .enumerate()
            .find(|(_, &id)| id as usize >= n)
        {
            return err(
                format!("timeseries.flows[{i}]"),
                format!("flow {id} does not exist: the workload makes {n} flows, numbered from 0"),
            );
        }
    }
    let horizon = duration.map_or(0.05, |d| d.as_secs_f64());
    let rows = horizon / interval.as_secs_f64() * (3 * ts.ports.len() + 2 * ts.flows.len()) as f64;
    if rows > MAX_TIMESERIES_ROWS {
        return err(
                "timeseries.interval",
                format!("about {rows:.0} rows over the run; at most {MAX_TIMESERIES_ROWS} (sample less often, or fewer objects)"),
            );
    }
    Ok(Timeseries {
        interval,
        ports,
        flows: ts.flows.clone(),
    })
}

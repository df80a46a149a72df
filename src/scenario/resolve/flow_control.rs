//! `flow_control:`: tail drop, PFC thresholds sized from the buffer and each ingress
//! port's headroom, or InfiniBand credits per link and lane.

use super::{check_latency, err, VResult};
use crate::components::ingress::pfc_headroom;
use crate::components::FlowControl;
use crate::scenario::schema;
use crate::topology::Topology;
use crate::units::SimDuration;

/// Ingress ports of the busiest switch (a leaf: its hosts and its uplinks; a spine: one
/// link per leaf of its plane and parallel link).
fn max_ingress_ports(topo: &Topology) -> u64 {
    let leaf = topo.hosts_per_leaf as u64 + topo.uplinks_per_leaf() as u64;
    let spine = topo.leaves_per_plane() as u64 * topo.links_per_spine as u64;
    leaf.max(spine)
}

pub fn resolve_flow_control(
    spec: &schema::FlowControlSpec,
    topo: &Topology,
    buffer: u64,
    mtu_wire: u64,
) -> VResult<FlowControl> {
    let ingress = max_ingress_ports(topo).max(1);
    Ok(match spec.mode {
        schema::FlowControlMode::Lossy => FlowControl::Lossy,
        schema::FlowControlMode::Pfc => {
            let reaction = spec
                .reaction_time
                .map(|d| d.0)
                .unwrap_or(SimDuration::from_us(1));
            check_latency("flow_control.reaction_time", reaction)?;
            let quanta = spec.quanta.unwrap_or(65535);
            if quanta == 0 {
                return err("flow_control.quanta", "expected 1 to 65535 quanta");
            }
            if quanta > 65535 {
                return err(
                    "flow_control.quanta",
                    format!("expected 1 to 65535 quanta, found {quanta}"),
                );
            }
            // Headroom for the longest cable in the fabric (every ingress gets the same).
            let longest = if topo.fabric_link.latency > topo.host_link.latency {
                topo.fabric_link
            } else {
                topo.host_link
            };
            let headroom = pfc_headroom(&longest, reaction, mtu_wire).max(pfc_headroom(
                &topo.host_link,
                reaction,
                mtu_wire,
            ));
            let room = buffer.saturating_sub(headroom * ingress) / ingress;
            let xoff = match spec.xoff {
                Some(x) => x.0 .0,
                None => room,
            };
            if xoff < 2 * mtu_wire || xoff > room {
                return err(
                    "flow_control.xoff",
                    format!(
                        "xoff must leave each of {ingress} ingress ports {headroom} B of headroom in the {buffer} B buffer and hold two packets: at most {room} B and at least {} B, found {xoff} B",
                        2 * mtu_wire
                    ),
                );
            }
            let xon = spec.xon.map(|x| x.0 .0).unwrap_or(xoff - 2 * mtu_wire);
            if xon >= xoff {
                return err(
                    "flow_control.xon",
                    format!("expected xon below xoff ({xoff} B), found {xon} B"),
                );
            }
            FlowControl::Pfc {
                xoff,
                xon,
                reaction_time: reaction,
                quanta,
            }
        }
        schema::FlowControlMode::IbCredit => {
            let vl_buffer = spec.vl_buffer.map(|b| b.0 .0).unwrap_or(buffer / ingress);
            if vl_buffer < mtu_wire + 64 || vl_buffer * ingress > buffer {
                return err(
                    "flow_control.vl_buffer",
                    format!(
                        "each of {ingress} ingress ports needs room for a packet ({} B) and all must fit the {buffer} B buffer: at most {} B, found {vl_buffer} B",
                        mtu_wire + 64,
                        buffer / ingress
                    ),
                );
            }
            let update_delay = spec
                .credit_update_delay
                .map(|d| d.0)
                .unwrap_or(SimDuration::from_ns(100));
            check_latency("flow_control.credit_update_delay", update_delay)?;
            FlowControl::IbCredit {
                vl_buffer,
                update_delay,
            }
        }
    })
}

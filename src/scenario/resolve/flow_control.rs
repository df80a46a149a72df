//! `flow_control:`: tail drop, PFC thresholds sized from the buffer and each ingress
//! port's headroom, or InfiniBand credits per link and lane.

use super::{check_latency, err, VResult};
use crate::components::ingress::pfc_headroom;
use crate::components::ingress::DynamicXoff;
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
            // Each ingress port's headroom is its own link's (rate and cable), and the
            // switch's ports together must fit its buffer.
            let host_headroom = pfc_headroom(&topo.host_link, reaction, mtu_wire);
            let fabric_headroom = pfc_headroom(&topo.fabric_link, reaction, mtu_wire);
            // Every ingress port gets the largest headroom in the fabric (a port's own
            // would do, but one Xoff for all keeps the arithmetic simple and safe).
            let headroom = host_headroom.max(fabric_headroom);
            let reserve = headroom * ingress;
            let room = buffer.saturating_sub(reserve) / ingress;
            if let Some(alpha) = spec.xoff_alpha {
                if spec.xoff.is_some() || spec.xon.is_some() {
                    return err(
                        "flow_control.xoff_alpha",
                        "a dynamic Xoff replaces `xoff` and `xon`: give one or the other",
                    );
                }
                if !(alpha > 0.0 && alpha <= 64.0) {
                    return err(
                        "flow_control.xoff_alpha",
                        format!("expected a fraction of the free buffer in (0, 64], found {alpha}"),
                    );
                }
                if room < 2 * mtu_wire {
                    return err(
                        "switch.buffer",
                        format!(
                            "PFC cannot be lossless here: the busiest switch's {ingress} ingress ports reserve {headroom} B of headroom each, {reserve} B of the {buffer} B buffer, leaving less than two packets per port to share"
                        ),
                    );
                }
                return Ok(FlowControl::Pfc {
                    xoff: room,
                    xon: room - 2 * mtu_wire,
                    reaction_time: reaction,
                    quanta,
                    dynamic: Some(DynamicXoff {
                        alpha,
                        shared_bytes: buffer - reserve,
                        resume_offset: 2 * mtu_wire,
                    }),
                });
            }
            let xoff = match spec.xoff {
                Some(x) => x.0 .0,
                None => room,
            };
            if xoff < 2 * mtu_wire || xoff > room {
                let field = if spec.xoff.is_some() {
                    "flow_control.xoff"
                } else {
                    "switch.buffer"
                };
                return err(
                    field,
                    format!(
                        "PFC cannot be lossless here: each ingress port needs its link's headroom above Xoff ({host_headroom} B per host link, {fabric_headroom} B per fabric link: rate x (2 x cable + reaction time + a 64 B frame) + 2 packets), the busiest switch's {ingress} ingress ports reserve {headroom} B each, {reserve} B of the {buffer} B buffer, and Xoff must hold two packets: Xoff at most {room} B and at least {} B, found {xoff} B (a larger buffer, slower or shorter links, or a shorter reaction_time would fit)",
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
                dynamic: None,
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

//! `switch:` and `packet:`: the path MTU and encapsulation, and the shared buffer with its
//! per-queue limit (dynamic threshold or static), which must hold a full packet.

use super::{check_latency, err, VResult};
use crate::components::{BufferLimit, SwitchConfig};
use crate::packet::Encapsulation;
use crate::scenario::schema::{PacketSpec, SwitchSpec};

/// The switches, the MTU (payload bytes) and the encapsulation.
pub fn resolve(s: &SwitchSpec, p: &PacketSpec) -> VResult<(SwitchConfig, u64, Encapsulation)> {
    check_latency("switch.latency", s.latency.0)?;
    let mtu = p.mtu.0 .0;
    let encapsulation = p.encapsulation;
    if mtu > 1 << 20 {
        return err(
            "packet.mtu",
            format!("expected at most 1MiB, found {mtu} B (InfiniBand's largest is 4096B)"),
        );
    }
    let mtu_wire = mtu + encapsulation.overhead_bytes();
    let buffer_bytes = s.buffer.0 .0;
    if mtu_wire > buffer_bytes {
        return err(
            "switch.buffer",
            format!(
                "a {mtu_wire} B packet (MTU {mtu} B + {} B {} overhead) does not fit a {} buffer",
                encapsulation.overhead_bytes(),
                encapsulation.name(),
                s.buffer.0
            ),
        );
    }
    let limit = match (s.alpha, s.port_limit) {
        (Some(_), Some(_)) => {
            return err(
                "switch.port_limit",
                "give either `alpha` (dynamic threshold) or `port_limit`, not both",
            )
        }
        (Some(a), None) => {
            if !(a.is_finite() && a > 0.0 && a <= 1024.0) {
                return err(
                    "switch.alpha",
                    format!("expected a number in (0, 1024], found {a}"),
                );
            }
            // The largest queue a lone busy port can reach is alpha/(1+alpha) x buffer.
            let max_q = a / (1.0 + a) * buffer_bytes as f64;
            if max_q < mtu_wire as f64 {
                return err(
                    "switch.alpha",
                    format!(
                        "alpha {a} lets a queue hold at most {max_q:.0} B of the {buffer_bytes} B buffer, less than one {mtu_wire} B packet"
                    ),
                );
            }
            BufferLimit::Dynamic { alpha: a }
        }
        (None, Some(p)) => {
            if p.0 .0 < mtu_wire {
                return err(
                    "switch.port_limit",
                    format!("a {mtu_wire} B packet does not fit a {} port limit", p.0),
                );
            }
            BufferLimit::PortLimit { bytes: p.0 .0 }
        }
        (None, None) => {
            let a = 0.125;
            if a / (1.0 + a) * (buffer_bytes as f64) < mtu_wire as f64 {
                return err(
                    "switch.buffer",
                    format!(
                        "with the default alpha 0.125 a queue may hold at most 1/9 of the buffer, less than one {mtu_wire} B packet"
                    ),
                );
            }
            BufferLimit::Dynamic { alpha: a }
        }
    };
    let switch = SwitchConfig {
        latency: s.latency.0,
        buffer_bytes,
        limit,
        forwarding: s.forwarding,
    };
    Ok((switch, mtu, encapsulation))
}

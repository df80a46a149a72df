//! `transport:`: RC queue-pair attributes (verbs names, NCCL's defaults) or bare packets.

use super::{check_range, check_time, err, VResult};
use crate::scenario::schema::{self, OperationSpec, RcSpec, TransportMode, TransportSpec};
use crate::scenario::{Connections, RcConfig, Transport};
use crate::transport::rc::{Op, OutOfOrder, RcParams, PSN_MASK};
use crate::units::SimDuration;

/// Out-of-order RC's hole timer when the scenario names none. Neither NVIDIA nor the
/// IBTA documents a NIC's; this is IRN's RTO_low (Mittal et al., SIGCOMM 2018, §3.2:
/// 100 us), long against the queueing delay two paths of a lossless fabric differ by.
pub const DEFAULT_REORDER_TIMEOUT: SimDuration = SimDuration::from_us(100);

/// The `transport:` section for a path MTU of `mtu` payload bytes.
pub fn resolve(t: &TransportSpec, mtu: u64) -> VResult<Transport> {
    Ok(match t.mode {
        TransportMode::Raw => Transport::Raw,
        TransportMode::Rc => Transport::Rc(resolve_rc(&t.rc, None, mtu, "transport.rc")?),
    })
}

/// Resolves `transport.rc` (with `over` taking precedence field by field) into an
/// [`RcConfig`]. `prefix` names the YAML path for errors.
pub fn resolve_rc(
    base: &RcSpec,
    over: Option<&RcSpec>,
    mtu: u64,
    prefix: &str,
) -> VResult<RcConfig> {
    macro_rules! pick {
        ($f:ident) => {
            over.and_then(|o| o.$f.clone()).or(base.$f.clone())
        };
    }
    let p = |f: &str| format!("{prefix}.{f}");
    let timeout = check_range(p("timeout"), pick!(timeout), 20, 0, 31)?;
    let retry_cnt = check_range(p("retry_cnt"), pick!(retry_cnt), 7, 0, 7)?;
    let rnr_retry = check_range(p("rnr_retry"), pick!(rnr_retry), 7, 0, 7)?;
    let min_rnr_timer = check_range(p("min_rnr_timer"), pick!(min_rnr_timer), 12, 0, 31)?;
    let max_rd_atomic = check_range(p("max_rd_atomic"), pick!(max_rd_atomic), 1, 1, 64)?;
    let max_dest = check_range(p("max_dest_rd_atomic"), pick!(max_dest_rd_atomic), 1, 1, 64)?;
    let window = pick!(window_packets);
    if window == Some(0) {
        return err(
            p("window_packets"),
            "expected at least 1 packet (omit it for no window)",
        );
    }
    let ack_every = check_range(p("ack_every"), pick!(ack_every), 1, 1, 1 << 20)?;
    if let Some(w) = window.filter(|&w| ack_every > w) {
        // The responder would wait for more packets than the requester may have
        // unacknowledged: neither side moves until the ACK timeout (issue 19's fuzz: a
        // 1 MB flow took 128.8 s, or forever with timeout 0).
        return err(
            p("ack_every"),
            format!(
                "ack_every {ack_every} is above window_packets {w}: the responder would wait for more packets than the requester may send unacknowledged, and the flow would stall; use at most {w}"
            ),
        );
    }
    let recv_queue_depth = check_range(
        p("recv_queue_depth"),
        pick!(recv_queue_depth),
        1,
        0,
        1 << 20,
    )?;
    let recv_post_delay = pick!(recv_post_delay).map(|d| d.0).unwrap_or_default();
    check_time(p("recv_post_delay"), recv_post_delay)?;
    let initial_psn = check_range(p("initial_psn"), pick!(initial_psn), 0, 0, PSN_MASK)?;
    let max_send_wr = check_range(p("max_send_wr"), pick!(max_send_wr), 256, 1, 1 << 16)?;
    let connections = match pick!(connections).unwrap_or_default() {
        schema::ConnectionsSpec::PerFlow => Connections::PerFlow,
        schema::ConnectionsSpec::PerHostPair => Connections::PerHostPair,
    };
    let operation = match pick!(operation).unwrap_or_default() {
        OperationSpec::Write => Op::Write,
        OperationSpec::Send => Op::Send,
        OperationSpec::Read => Op::Read,
    };
    if mtu > u32::MAX as u64 {
        return err("packet.mtu", "too large for RC");
    }
    // A SEND consumes a receive WQE, and the application posts one only for each SEND
    // that completed: with none to start with, no SEND ever completes, and rnr_retry 7
    // (retry forever) would run until the clock's horizon (issue 15).
    if operation == Op::Send && recv_queue_depth == 0 && rnr_retry == 7 {
        return err(
            p("recv_queue_depth"),
            "a SEND needs a receive WQE and with recv_queue_depth 0 none is ever posted; with rnr_retry 7 (retry forever) the flow would never end: post at least one (recv_queue_depth >= 1) or let the RNR retries run out (rnr_retry below 7)",
        );
    }
    let out_of_order = match pick!(out_of_order).unwrap_or(false) {
        true => {
            let reorder_timeout = pick!(reorder_timeout)
                .map(|d| d.0)
                .unwrap_or(DEFAULT_REORDER_TIMEOUT);
            check_time(p("reorder_timeout"), reorder_timeout)?;
            if reorder_timeout == SimDuration::ZERO {
                return err(
                    p("reorder_timeout"),
                    "expected a time above 0 (a hole is asked for again once it has held packets up this long; use selective_nak: true to ask at once as well)",
                );
            }
            Some(OutOfOrder {
                reorder_timeout,
                selective_nak: pick!(selective_nak).unwrap_or(false),
            })
        }
        false => {
            for (field, given) in [
                ("reorder_timeout", pick!(reorder_timeout).is_some()),
                ("selective_nak", pick!(selective_nak).is_some()),
            ] {
                if given {
                    return err(
                        p(field),
                        "applies to out-of-order RC only: add out_of_order: true",
                    );
                }
            }
            None
        }
    };
    Ok(RcConfig {
        params: RcParams {
            timeout,
            retry_cnt,
            rnr_retry,
            min_rnr_timer,
            // The responder accepts at most max_dest_rd_atomic; the requester keeps to
            // the smaller of the two, as ibv_modify_qp pairs them.
            max_rd_atomic: max_rd_atomic.min(max_dest),
            path_mtu: mtu as u32,
            window_packets: window,
            ack_every,
            e2e_credits: pick!(e2e_credits).unwrap_or(true),
            initial_psn,
            out_of_order,
        },
        connections,
        max_send_wr,
        operation,
        recv_queue_depth,
        recv_post_delay,
    })
}

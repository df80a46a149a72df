//! The host and NIC pipeline in closed form: a message's unloaded latency stage by stage,
//! and the message rate a burst of small messages cannot exceed.
//!
//! These follow the rules of `components::host` with nothing else going on: every stage
//! takes its configured cost once (the `wire` stage is [`super::ideal_landed`]), and a burst
//! is limited by its slowest resource: the posting contexts, the NIC's DMA read slots, its
//! send engine, the link, or (when data is staged) the copy engine.

use crate::nic::config::{HostConfig, ModerationConfig, Notify, PostingMode};
use crate::nic::interrupts::DIM_LEVELS;
use crate::scenario::{Scenario, Transport};
use crate::transport::rc::Op;
use crate::units::{serialization_delay, SimDuration};

/// Stage times of one message on an idle fabric and idle hosts, in
/// `sim::STAGES` order; an error if `mode` has no data path on these NICs. The `wire`
/// stage is the ideal FCT with packets paced by the payload DMA's bandwidth.
pub fn unloaded_stages(
    sc: &Scenario,
    h: &HostConfig,
    mode: PostingMode,
    src: u32,
    dst: u32,
    size: u64,
) -> Result<[SimDuration; 9], String> {
    let read = matches!(&sc.transport, Transport::Rc(rc) if rc.operation == Op::Read);
    let rx = if read { src } else { dst };
    let (ms, md) = (h.memory_source, h.memory_destination);
    let tx_path = h.data_path(h.local_nic(src), mode, ms)?;
    let rx_path = h.data_path(h.local_nic(rx), mode, md)?;
    // The data is staged where it lives: for a READ, at the responder.
    let source = if read { dst } else { src };
    let source_path = h.data_path(h.local_nic(source), mode, ms)?;
    let c = &h.costs;
    let rt = h.pcie_round_trip;
    let half = SimDuration(rt.0 / 2);
    let copy = |staged: bool| {
        if staged {
            c.copy_launch + serialization_delay(size, h.pcie_bandwidth)
        } else {
            SimDuration::ZERO
        }
    };
    let mode = tx_path.mode;
    let (build, bell) = match mode {
        PostingMode::Gpu => (c.gpu_wqe_build, c.gpu_doorbell),
        _ => (c.wqe_build, c.doorbell_mmio),
    };
    let handoff = if mode == PostingMode::CpuProxy {
        c.proxy_handoff
    } else {
        SimDuration::ZERO
    };
    let inline = size <= h.inline_max;
    let fetch = if h.blueflame {
        SimDuration::ZERO
    } else {
        rt + SimDuration(2 * tx_path.control_extra.0)
            + serialization_delay(
                h.wqe_bytes + if inline { size } else { 0 },
                h.pcie_bandwidth,
            )
    };
    let payload = if inline || read {
        SimDuration::ZERO
    } else {
        rt + SimDuration(2 * tx_path.payload_extra.0)
            + serialization_delay(size.min(sc.mtu), tx_path.dma_bandwidth)
    };
    let notification = match rx_path.mode {
        PostingMode::Gpu => c.gpu_cqe_poll,
        PostingMode::CpuProxy => c.cqe_poll + c.proxy_handoff,
        _ => match &h.notify {
            Notify::Poll => c.cqe_poll,
            Notify::Interrupt(m) => {
                // A lone completion waits for the timer unless one completion is enough.
                let wait = match m {
                    ModerationConfig::Off => SimDuration::ZERO,
                    ModerationConfig::Fixed(x) if x.frames <= 1 => SimDuration::ZERO,
                    ModerationConfig::Fixed(x) => x.usecs,
                    ModerationConfig::Adaptive => DIM_LEVELS[2].usecs,
                };
                wait + c.hard_irq + c.softirq + c.cqe_poll
            }
        },
    };
    Ok([
        copy(source_path.staged),
        handoff + build + bell,
        half + tx_path.control_extra,
        fetch,
        h.wqe_processing + payload,
        super::ideal_landed_paced(sc, src, dst, size, Some(tx_path.dma_bandwidth)),
        half + rx_path.control_extra.max(rx_path.payload_extra),
        notification,
        copy(rx_path.staged),
    ])
}

/// What bounds a burst's message rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateBound {
    pub messages_per_s: f64,
    pub bound_by: &'static str,
}

/// The highest message rate a burst of `size`-byte messages from one NIC can reach in
/// `mode`: the minimum over the pipeline's resources.
pub fn message_rate_limit(
    sc: &Scenario,
    h: &HostConfig,
    mode: PostingMode,
    size: u64,
) -> Result<RateBound, String> {
    let path = h.data_path(0, mode, h.memory_source)?;
    let c = &h.costs;
    let ps = |d: SimDuration| d.0.max(1) as f64;
    let batch = h.doorbell_batch as f64;
    let mut bounds: Vec<(f64, &'static str)> = Vec::new();
    let (threads, build, bell) = match path.mode {
        PostingMode::Gpu => (h.gpu_posting_threads, c.gpu_wqe_build, c.gpu_doorbell),
        PostingMode::CpuProxy => (1, c.wqe_build, c.doorbell_mmio),
        _ => (h.posting_threads, c.wqe_build, c.doorbell_mmio),
    };
    bounds.push((
        threads as f64 * 1e12 / (ps(build) + ps(bell) / batch),
        "posting (WQE build + doorbell / batch)",
    ));
    let inline = size <= h.inline_max;
    let read = matches!(&sc.transport, Transport::Rc(rc) if rc.operation == Op::Read);
    let rt = h.pcie_round_trip;
    let mut slot_ps = 0.0;
    if !(h.blueflame && h.doorbell_batch == 1) {
        let bytes = h.doorbell_batch as u64 * (h.wqe_bytes + if inline { size } else { 0 });
        slot_ps += ps(rt
            + SimDuration(2 * path.control_extra.0)
            + serialization_delay(bytes, h.pcie_bandwidth))
            / batch;
    }
    if !(inline || read) {
        slot_ps += ps(rt
            + SimDuration(2 * path.payload_extra.0)
            + serialization_delay(size.min(sc.mtu), path.dma_bandwidth));
    }
    if slot_ps > 0.0 {
        bounds.push((
            h.max_outstanding_reads as f64 * 1e12 / slot_ps,
            "DMA read slots",
        ));
    }
    bounds.push((1e12 / ps(h.wqe_processing), "NIC send engine"));
    let rx_staged = h
        .data_path(0, mode, h.memory_destination)
        .is_ok_and(|p| p.staged);
    if path.staged || rx_staged {
        bounds.push((
            1e12 / ps(c.copy_launch + serialization_delay(size, h.pcie_bandwidth)),
            "staging copies",
        ));
    }
    let packets = size.div_ceil(sc.mtu).max(1);
    let reth = match &sc.transport {
        Transport::Rc(rc) if rc.operation == Op::Write => crate::packet::RETH_BYTES,
        _ => 0,
    };
    let wire = size + packets * sc.encapsulation.overhead_bytes() + reth;
    bounds.push((
        1e12 / ps(serialization_delay(wire, sc.topology.host_link.rate)),
        "host link",
    ));
    let (messages_per_s, bound_by) =
        bounds
            .into_iter()
            .fold((f64::INFINITY, ""), |a, b| if b.0 < a.0 { b } else { a });
    Ok(RateBound {
        messages_per_s,
        bound_by,
    })
}

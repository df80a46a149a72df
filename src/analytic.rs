//! Closed-form results the simulator is checked against, and which it reports beside its
//! measurements: the ideal flow completion time on an empty fabric, the bandwidth-delay
//! product, M/D/1 queueing delay, and ([`host`]) the host and NIC pipeline's unloaded
//! latency and message-rate bound.
//!
//! Ideal FCT follows the same timing rules as the simulated fabric (serialization per hop
//! in exact integer picoseconds, propagation, port-to-port latency, store-and-forward or
//! cut-through) with no other traffic: the first packet crosses every hop, the rest follow
//! at the bottleneck link's pace. It is computed by the flow-shop recurrence
//! `start(i, j+1) = max(ready(i, j+1), end(i-1, j+1))`, which is exact for any mix of link
//! rates and a short last packet. Once a middle packet shifts every hop's state by one
//! amount, the packets up to the last one do too (the recurrence is max-plus, and
//! commutes with adding a constant), so it jumps there: a 30 MB flow takes a handful of
//! steps, not 30,000.

pub mod dcqcn_fluid;
pub mod host;

use crate::components::Forwarding;
use crate::packet::{AETH_BYTES, RETH_BYTES};
use crate::scenario::{Scenario, Transport};
use crate::topology::LinkParams;
use crate::transport::rc::Op;
use crate::units::{serialization_delay, SimDuration};

/// FCT of `size` payload bytes from `src` to `dst` on an otherwise empty fabric, ending
/// where the simulator ends it ([`crate::sim::FlowState::finish`]): for raw packets, the
/// arrival of the last byte at `dst`; for an RC WRITE or SEND, the arrival back at `src`
/// of the ACK of the last packet, sent as soon as that packet landed; for an RC READ, the
/// arrival at `src` of its last response (after the request went out).
pub fn ideal_fct(sc: &Scenario, src: u32, dst: u32, size: u64) -> SimDuration {
    ideal_fct_paced(sc, src, dst, size, None)
}

/// [`ideal_fct`] when the sender's payload DMA reads at `dma` (the host model's PCIe
/// read rate): each packet may leave no sooner than its predecessor's payload took to
/// read.
pub fn ideal_fct_paced(
    sc: &Scenario,
    src: u32,
    dst: u32,
    size: u64,
    dma: Option<crate::units::BitsPerSec>,
) -> SimDuration {
    let landed = ideal_landed_paced(sc, src, dst, size, dma);
    match &sc.transport {
        // The last packet's ACK (an AETH, no payload) goes back as soon as it landed.
        Transport::Rc(rc) if rc.operation != Op::Read => {
            landed + one_way(sc, dst, src, 0, AETH_BYTES, 0, None)
        }
        _ => landed,
    }
}

/// When the last byte of `size` payload bytes from `src` to `dst` lands where it is
/// going, on an otherwise empty fabric (at `dst` for raw packets, RC WRITE and SEND; back
/// at `src` for an RC READ, which first sends a request): [`ideal_fct`] without the
/// final ACK's trip.
pub fn ideal_landed(sc: &Scenario, src: u32, dst: u32, size: u64) -> SimDuration {
    ideal_landed_paced(sc, src, dst, size, None)
}

/// [`ideal_landed`] with the sender's payload DMA reading at `dma` (see
/// [`ideal_fct_paced`]).
pub fn ideal_landed_paced(
    sc: &Scenario,
    src: u32,
    dst: u32,
    size: u64,
    dma: Option<crate::units::BitsPerSec>,
) -> SimDuration {
    match &sc.transport {
        Transport::Raw => one_way(sc, src, dst, size, 0, 0, dma),
        Transport::Rc(rc) => match rc.operation {
            Op::Write => one_way(sc, src, dst, size, RETH_BYTES, 0, dma),
            Op::Send => one_way(sc, src, dst, size, 0, 0, dma),
            // The request (RETH, no payload), then the responses (AETH on the first and
            // the last) stream back as soon as it has arrived.
            Op::Read => {
                one_way(sc, src, dst, 0, RETH_BYTES, 0, dma)
                    + one_way(sc, dst, src, size, AETH_BYTES, AETH_BYTES, dma)
            }
        },
    }
}

/// An RDMA WRITE of `bytes` inline from host `a` to host `b`, alone on the fabric: when
/// its last byte lands (a small control message, such as NCCL's clear-to-send).
pub fn ideal_inline_write(sc: &Scenario, a: u32, b: u32, bytes: u64) -> SimDuration {
    one_way(sc, a, b, bytes, RETH_BYTES, 0, None)
}

/// `bytes` of payload from `a` to `b` alone on the scenario's fabric, in MTU packets the
/// first of which carries `first_extra` more bytes and the last `last_extra` more.
fn one_way(
    sc: &Scenario,
    a: u32,
    b: u32,
    bytes: u64,
    first_extra: u64,
    last_extra: u64,
    dma: Option<crate::units::BitsPerSec>,
) -> SimDuration {
    // HPCC's switches stamp telemetry on every data packet and ACK (`cc::hpcc`).
    let int_bytes = if sc.cc.is_some_and(|c| c.wants_telemetry()) {
        crate::cc::hpcc::INT_BYTES
    } else {
        0
    };
    let links = sc.topology.path_links(a, b);
    // Per-packet (and flowlet) routing may spread a flow over every parallel path: each
    // hop has as many lanes as it has parallel links; per-flow routing keeps one.
    let lanes = if sc.routing.policy.multipath() {
        sc.topology.path_lanes(a, b)
    } else {
        vec![1; links.len()]
    };
    let timing = Timing {
        switch_lat: sc.switch.latency,
        forwarding: sc.switch.forwarding,
        mtu: sc.mtu,
        overhead: sc.encapsulation.overhead_bytes() + int_bytes,
        header: sc.encapsulation.header_bytes(),
        first_extra,
        last_extra,
        dma,
    };
    ideal_fct_on_lanes(&links, &lanes, &timing, bytes)
}

/// [`ideal_fct`] on an explicit path of links joined by switches of latency `switch_lat`.
/// The first packet carries `first_extra` more bytes and the last (of several)
/// `last_extra` more (extension headers). With `dma`, a packet starts no sooner than its
/// predecessor's start plus the time to read that predecessor's payload at `dma`.
#[allow(clippy::too_many_arguments)]
pub fn ideal_fct_on_path(
    links: &[LinkParams],
    switch_lat: SimDuration,
    forwarding: Forwarding,
    mtu: u64,
    overhead: u64,
    header: u64,
    size: u64,
    first_extra: u64,
    last_extra: u64,
    dma: Option<crate::units::BitsPerSec>,
) -> SimDuration {
    let args = (switch_lat, forwarding, mtu, overhead, header);
    followed(links, args, size, first_extra, last_extra, dma, true).0
}

/// [`ideal_fct_on_path`], and how many packets it followed one by one; without `jump`,
/// every packet (the tests' reference for the jump).
fn followed(
    links: &[LinkParams],
    (switch_lat, forwarding, mtu, overhead, header): (SimDuration, Forwarding, u64, u64, u64),
    size: u64,
    first_extra: u64,
    last_extra: u64,
    dma: Option<crate::units::BitsPerSec>,
    jump: bool,
) -> (SimDuration, u64) {
    assert!(!links.is_empty() && mtu > 0);
    let mut steps = 0;
    let mut prev_start0 = 0u64;
    let mut prev_payload = 0u64;
    let n = size.div_ceil(mtu).max(1);
    let hops = links.len();
    // end[j]: when the previous packet finished serializing on hop j.
    let mut prev_end = vec![0u64; hops];
    // The same before the packet being followed (for the jump below).
    let mut before = vec![0u64; hops];
    let mut last_arrival = 0u64;
    let mut i = 0;
    while i < n {
        steps += 1;
        before.copy_from_slice(&prev_end);
        let start_before = prev_start0;
        // Whether a cut-through bound was cut at zero (the step is then not a shift).
        let mut clipped = false;
        let payload = if i + 1 == n {
            size - (n - 1) * mtu
        } else {
            mtu
        };
        let mut wire = payload + overhead;
        if i == 0 {
            wire += first_extra;
        } else if i + 1 == n {
            wire += last_extra;
        }
        let mut start = if i == 0 { 0 } else { prev_end[0] };
        if let (Some(bw), true) = (dma, i > 0) {
            start = start.max(prev_start0 + serialization_delay(prev_payload, bw).0);
        }
        prev_start0 = start;
        prev_payload = payload;
        for j in 0..hops {
            let ser = serialization_delay(wire, links[j].rate).0;
            let end = start + ser;
            prev_end[j] = end;
            let prop = links[j].latency.0;
            if j + 1 == hops {
                last_arrival = end + prop;
            } else {
                let ready = match forwarding {
                    Forwarding::StoreAndForward => end + prop + switch_lat.0,
                    Forwarding::CutThrough => {
                        let head = start + serialization_delay(header, links[j].rate).0 + prop;
                        let tail = end + prop;
                        let ser_next = serialization_delay(wire, links[j + 1].rate).0;
                        clipped |= tail + switch_lat.0 < ser_next;
                        (head + switch_lat.0).max((tail + switch_lat.0).saturating_sub(ser_next))
                    }
                };
                // The next hop's port is free once it finished the previous packet (its
                // end was stored when that packet was processed).
                start = ready.max(if i == 0 { 0 } else { prev_end[j + 1] });
            }
        }
        // The packets between the first and the last are alike, and following one is a
        // max-plus map of the state (every hop's end, the DMA's start) that commutes
        // with adding a constant to all of it. So once a middle packet shifted the whole
        // state by one amount d, each middle packet after it shifts it by d again: jump
        // to the last middle packet (exact, checked against packet-by-packet in the
        // tests; a 30 MB flow of 1000-byte packets took 30,000 steps).
        let middle = i >= 1 && i + 2 < n;
        if jump && middle && !clipped {
            let d = prev_end[0].wrapping_sub(before[0]);
            let shifted = prev_end
                .iter()
                .zip(&before)
                .all(|(e, b)| e.wrapping_sub(*b) == d)
                && (dma.is_none() || prev_start0.wrapping_sub(start_before) == d);
            if shifted {
                let k = (n - 2) - i;
                for e in prev_end.iter_mut() {
                    *e += k * d;
                }
                prev_start0 += k * d;
                i = n - 2;
            }
        }
        i += 1;
    }
    (SimDuration(last_arrival), steps)
}

/// How a flow's packets are made and forwarded: what an ideal FCT needs besides the
/// path and the flow's size (see [`ideal_fct_on_path`] for each field's meaning).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub switch_lat: SimDuration,
    pub forwarding: Forwarding,
    pub mtu: u64,
    pub overhead: u64,
    pub header: u64,
    pub first_extra: u64,
    pub last_extra: u64,
    pub dma: Option<crate::units::BitsPerSec>,
}

impl Timing {
    /// Packet `i` of the `n` a flow of `size` bytes makes: its payload and its bytes on
    /// the wire (the first and the last carry their extension headers).
    fn packet(&self, size: u64, n: u64, i: u64) -> (u64, u64) {
        let payload = if i + 1 == n {
            size - (n - 1) * self.mtu
        } else {
            self.mtu
        };
        let extra = if i == 0 {
            self.first_extra
        } else if i + 1 == n {
            self.last_extra
        } else {
            0
        };
        (payload, payload + self.overhead + extra)
    }
}

/// [`ideal_fct_on_path`] where hop `j` has `lanes[j]` identical parallel links and a
/// packet may take any of them (per-packet routing). A lower bound for any routing, the
/// larger of two:
/// - every packet alone on a lane of its own at each multi-lane hop, queued in the order
///   it arrives (its tail, or with cut-through its header, as a switch's FIFO queue takes
///   it) at single-lane hops: a packet may overtake another, and the flow ends when its
///   last-arriving packet arrives;
/// - at each multi-lane hop, all the flow's bytes at the lanes' summed rate from the
///   first packet's arrival there, then the cables and switch latencies that remain.
///
/// So a hop of slow links in parallel paces the flow at their sum (the host link, or the
/// parallel paths, whichever binds). With one lane everywhere it is the single-path
/// flow-shop recurrence, exactly.
pub fn ideal_fct_on_lanes(
    links: &[LinkParams],
    lanes: &[u32],
    timing: &Timing,
    size: u64,
) -> SimDuration {
    let Timing {
        switch_lat,
        forwarding,
        mtu,
        overhead,
        header,
        first_extra,
        last_extra,
        dma,
    } = *timing;
    assert!(!links.is_empty() && mtu > 0 && lanes.len() == links.len());
    if lanes.iter().all(|&l| l <= 1) {
        return ideal_fct_on_path(
            links,
            switch_lat,
            forwarding,
            mtu,
            overhead,
            header,
            size,
            first_extra,
            last_extra,
            dma,
        );
    }
    if size.div_ceil(mtu) > LANE_PACKETS {
        // Too many packets to follow one by one: the same kind of bound from the first
        // and the last packet alone and each hop's capacity (memory per hop).
        return lane_bounds(links, lanes, timing, size);
    }
    let n = size.div_ceil(mtu).max(1) as usize;
    let payload = |i: usize| timing.packet(size, n as u64, i as u64).0;
    let wire: Vec<u64> = (0..n)
        .map(|i| timing.packet(size, n as u64, i as u64).1)
        .collect();
    // The first hop (the sender's own link): in order, each packet after the one before
    // and, with `dma`, no sooner than its predecessor's payload was read.
    let mut start = vec![0u64; n];
    let mut end = vec![0u64; n];
    let mut free = 0u64;
    for i in 0..n {
        let mut s = free;
        if let (Some(bw), true) = (dma, i > 0) {
            s = s.max(start[i - 1] + serialization_delay(payload(i - 1), bw).0);
        }
        start[i] = s;
        end[i] = s + serialization_delay(wire[i], links[0].rate).0;
        free = end[i];
    }
    let mut order: Vec<usize> = (0..n).collect();
    let mut queued = vec![0u64; n];
    let mut ready = vec![0u64; n];
    let total_wire: u64 = wire.iter().sum();
    let mut capacity_bound = 0u64;
    for j in 1..links.len() {
        let prop = links[j - 1].latency.0;
        for i in 0..n {
            let tail = end[i] + prop;
            let ser_next = serialization_delay(wire[i], links[j].rate).0;
            (queued[i], ready[i]) = match forwarding {
                Forwarding::StoreAndForward => (tail, tail + switch_lat.0),
                Forwarding::CutThrough => {
                    let head = start[i] + serialization_delay(header, links[j - 1].rate).0 + prop;
                    (
                        head,
                        (head + switch_lat.0).max((tail + switch_lat.0).saturating_sub(ser_next)),
                    )
                }
            };
        }
        if lanes[j] > 1 {
            // Parallel lanes: each packet as if alone on one ...
            for i in 0..n {
                start[i] = ready[i];
                end[i] = start[i] + serialization_delay(wire[i], links[j].rate).0;
            }
            // ... and all of the bytes at the lanes' summed rate from the first arrival,
            // then the cables and switches that remain.
            let first = ready.iter().copied().min().unwrap_or(0);
            let summed = crate::units::BitsPerSec(links[j].rate.0 * lanes[j] as u64);
            let rest: u64 = links[j..].iter().map(|l| l.latency.0).sum::<u64>()
                + (links.len() - 1 - j) as u64 * switch_lat.0;
            capacity_bound =
                capacity_bound.max(first + serialization_delay(total_wire, summed).0 + rest);
        } else {
            // One link: the switch queues packets as they come in.
            // (Packets mostly come in the order they left the previous hop.)
            if order
                .windows(2)
                .any(|w| (queued[w[0]], w[0]) > (queued[w[1]], w[1]))
            {
                order.sort_by_key(|&i| (queued[i], i));
            }
            let mut free = 0u64;
            for &i in &order {
                start[i] = ready[i].max(free);
                end[i] = start[i] + serialization_delay(wire[i], links[j].rate).0;
                free = end[i];
            }
        }
    }
    let prop = links[links.len() - 1].latency.0;
    let alone = end.iter().map(|&e| e + prop).max().unwrap_or(0);
    SimDuration(alone.max(capacity_bound))
}

/// Packets a multi-lane ideal follows one by one (above it, [`lane_bounds`]).
const LANE_PACKETS: u64 = 1 << 16;

/// A lower bound for a flow of many packets over parallel lanes, in memory per hop: the
/// largest of (a) its last packet, which leaves the sender after every other packet's
/// serialization, alone on the path; (b) at each hop, every byte at the hop's summed rate
/// from the first packet's arrival there (alone), then the cables and switches that
/// remain.
fn lane_bounds(links: &[LinkParams], lanes: &[u32], timing: &Timing, size: u64) -> SimDuration {
    let Timing {
        switch_lat,
        forwarding,
        mtu,
        header,
        dma,
        ..
    } = *timing;
    let n = size.div_ceil(mtu).max(1);
    let wire_of = |i: u64| timing.packet(size, n, i).1;
    // One packet alone from `t0` on the first hop: its ready time at each hop, and its
    // arrival at the end.
    let alone = |wire: u64, t0: u64| -> (Vec<u64>, u64) {
        let mut ready = vec![t0];
        let (mut start, mut end) = (t0, t0 + serialization_delay(wire, links[0].rate).0);
        for j in 1..links.len() {
            let prop = links[j - 1].latency.0;
            let tail = end + prop;
            let r = match forwarding {
                Forwarding::StoreAndForward => tail + switch_lat.0,
                Forwarding::CutThrough => {
                    let head = start + serialization_delay(header, links[j - 1].rate).0 + prop;
                    let ser_next = serialization_delay(wire, links[j].rate).0;
                    (head + switch_lat.0).max((tail + switch_lat.0).saturating_sub(ser_next))
                }
            };
            ready.push(r);
            start = r;
            end = r + serialization_delay(wire, links[j].rate).0;
        }
        (ready, end + links[links.len() - 1].latency.0)
    };
    // (a) The last packet leaves the sender after all the others were serialized (and,
    // with `dma`, read).
    // Packet i + 1 starts a step after packet i: its serialization, or with `dma` the
    // time to read its (full) payload, whichever is longer; the middle packets are alike.
    let step = |i: u64| {
        let ser = serialization_delay(wire_of(i), links[0].rate).0;
        dma.map_or(ser, |bw| ser.max(serialization_delay(mtu, bw).0))
    };
    let t_last = if n == 1 {
        0
    } else {
        step(0) + (n - 2) * step(1)
    };
    let (_, last) = alone(wire_of(n - 1), t_last);
    // (b) Each hop's capacity from the first packet's arrival.
    let (first, _) = alone(wire_of(0), 0);
    let total: u64 = if n == 1 {
        wire_of(0)
    } else {
        wire_of(0) + (n - 2) * wire_of(1) + wire_of(n - 1)
    };
    let mut bound = last;
    for j in 0..links.len() {
        let summed = crate::units::BitsPerSec(links[j].rate.0 * lanes[j].max(1) as u64);
        let rest: u64 = links[j..].iter().map(|l| l.latency.0).sum::<u64>()
            + (links.len() - 1 - j) as u64 * switch_lat.0;
        bound = bound.max(first[j] + serialization_delay(total, summed).0 + rest);
    }
    SimDuration(bound)
}

/// Round-trip time of one full packet and a minimal reply over a path: the time the
/// bandwidth-delay product is measured over (propagation both ways, switch latency both
/// ways, serialization of the data packet and of a header-only reply at every hop,
/// store-and-forward).
pub fn base_rtt(
    links: &[LinkParams],
    switch_lat: SimDuration,
    data_wire: u64,
    ack_wire: u64,
) -> SimDuration {
    let mut t = 0u64;
    for l in links {
        t += 2 * l.latency.0
            + serialization_delay(data_wire, l.rate).0
            + serialization_delay(ack_wire, l.rate).0;
    }
    t += 2 * (links.len() as u64 - 1) * switch_lat.0;
    SimDuration(t)
}

/// Mean waiting time in an M/D/1 queue with load `rho` and service time `s`
/// (Pollaczek-Khinchine: W = rho s / (2 (1 - rho))).
pub fn md1_mean_wait(rho: f64, service: SimDuration) -> f64 {
    rho * service.0 as f64 / (2.0 * (1.0 - rho))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::BitsPerSec;

    fn link(gbps: u64, ns: u64) -> LinkParams {
        LinkParams {
            rate: BitsPerSec(gbps * 1_000_000_000),
            latency: SimDuration::from_ns(ns),
        }
    }

    /// The jump over a flow's middle packets gives exactly what following every packet
    /// (the same loop without the jump) gives: 3,000 pseudo-random paths of 1 to 4 hops (rates from 1 to 800 Gb/s, so
    /// later hops may be slower or faster, latencies 0-2 us, switch latency 0-1 us),
    /// both forwarding modes, MTUs of 64 B to 9 KB, 0-3 MTUs plus a remainder up to
    /// 200 MTUs, extra bytes on the first and last packets, with and without a DMA
    /// rate (0.5-400 Gb/s). And a 30 MB flow of 30,000 packets takes a handful of
    /// steps.
    #[test]
    fn the_jump_over_middle_packets_is_exact() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let rates = [1u64, 10, 25, 100, 200, 400, 800];
        let mut jumped = 0;
        for _ in 0..3000 {
            let hops = 1 + next(4) as usize;
            let links: Vec<LinkParams> = (0..hops)
                .map(|_| LinkParams {
                    rate: BitsPerSec(rates[next(7) as usize] * 1_000_000_000),
                    latency: SimDuration(next(2_000_001)),
                })
                .collect();
            let switch_lat = SimDuration(next(1_000_001));
            let forwarding = if next(2) == 0 {
                Forwarding::StoreAndForward
            } else {
                Forwarding::CutThrough
            };
            let mtu = [64u64, 256, 1000, 1024, 4096, 9000][next(6) as usize];
            let overhead = next(100);
            let header = 1 + next(80);
            let size = if next(3) == 0 {
                1 + next(4 * mtu)
            } else {
                1 + next(200 * mtu)
            };
            let (first_extra, last_extra) = (next(40), next(40));
            let dma = (next(2) == 0).then(|| BitsPerSec((1 + next(800)) * 500_000_000));
            let timing = (switch_lat, forwarding, mtu, overhead, header);
            let (got, steps) = followed(&links, timing, size, first_extra, last_extra, dma, true);
            let (want, all) = followed(&links, timing, size, first_extra, last_extra, dma, false);
            assert_eq!(all, size.div_ceil(mtu));
            assert_eq!(
                got, want,
                "{links:?} {switch_lat:?} {forwarding:?} mtu {mtu} overhead {overhead} \
                 header {header} size {size} extras {first_extra} {last_extra} dma {dma:?}"
            );
            jumped += (steps < size.div_ceil(mtu)) as u32;
        }
        // Most multi-packet flows jump (about two thirds of the cases have more than
        // three packets).
        assert!(jumped > 1000, "{jumped} of 3,000 flows jumped");
        // A 30 MB flow of 1000-byte packets over three 100 Gb/s hops.
        let three = [link(100, 1000), link(100, 1000), link(100, 1000)];
        let lat = SimDuration::from_ns(300);
        let timing = (lat, Forwarding::StoreAndForward, 1000, 48, 48);
        let (fct, steps) = followed(&three, timing, 30_000_000, 0, 0, None, true);
        let (want, _) = followed(&three, timing, 30_000_000, 0, 0, None, false);
        assert_eq!(fct, want);
        assert!(steps <= 5, "{steps} packets followed one by one");
    }

    #[test]
    fn one_packet_store_and_forward_is_the_sum_of_hops() {
        // 1000 B payload + 26 B = 1026 B at 100 Gb/s = 82.08 ns per hop, 4 hops, 3
        // switches of 300 ns, 4 x 1 us of cable.
        let links = [link(100, 1000); 4];
        let t = ideal_fct_on_path(
            &links,
            SimDuration::from_ns(300),
            Forwarding::StoreAndForward,
            4096,
            26,
            20,
            1000,
            0,
            0,
            None,
        );
        assert_eq!(t.0, 4 * 82_080 + 3 * 300_000 + 4 * 1_000_000);
    }

    /// The many-packet bound (memory per hop) is a lower bound no higher than following
    /// every packet, and close to it: 400G host over 4 x 100G lanes, 3,000 packets, both
    /// forwarding modes, with and without a slow payload DMA.
    #[test]
    fn the_many_packet_lane_bound_stays_below_and_near_the_packet_by_packet_one() {
        let links = [
            link(400, 500),
            link(100, 500),
            link(100, 500),
            link(400, 500),
        ];
        let lanes = [1, 4, 4, 1];
        for fwd in [Forwarding::StoreAndForward, Forwarding::CutThrough] {
            for dma in [None, Some(BitsPerSec(200_000_000_000))] {
                let timing = Timing {
                    switch_lat: SimDuration::from_ns(300),
                    forwarding: fwd,
                    mtu: 4096,
                    overhead: 26,
                    header: 20,
                    first_extra: 16,
                    last_extra: 4,
                    dma,
                };
                let size = 3000 * 4096 - 100;
                let each = ideal_fct_on_lanes(&links, &lanes, &timing, size).0;
                let bound = lane_bounds(&links, &lanes, &timing, size).0;
                assert!(bound <= each, "{fwd:?} {dma:?}: {bound} > {each}");
                assert!(
                    bound as f64 > 0.995 * each as f64,
                    "{fwd:?} {dma:?}: {bound} vs {each}"
                );
            }
        }
    }

    #[test]
    fn many_packets_follow_at_the_bottleneck() {
        // 10 packets over 100G then 50G: the 50G hop paces them.
        let links = [link(100, 0), link(50, 0)];
        let t = ideal_fct_on_path(
            &links,
            SimDuration::ZERO,
            Forwarding::StoreAndForward,
            1000,
            0,
            0,
            10_000,
            0,
            0,
            None,
        );
        // first packet: 80 ns + 160 ns; then 9 more at 160 ns.
        assert_eq!(t.0, 80_000 + 160_000 + 9 * 160_000);
    }

    #[test]
    fn cut_through_forwards_after_the_header() {
        let links = [link(100, 0), link(100, 0)];
        let t = ideal_fct_on_path(
            &links,
            SimDuration::ZERO,
            Forwarding::CutThrough,
            1000,
            0,
            100,
            1000,
            0,
            0,
            None,
        );
        // header (8 ns) then the full packet (80 ns) on the second hop.
        assert_eq!(t.0, 8_000 + 80_000);
    }

    /// A clear-to-send (64 bytes inline, with its RETH) from a host on leaf 0 to one on
    /// leaf 1, store-and-forward: four links each carrying the one packet in full after
    /// the one before (its bytes at 100 Gb/s plus 1 us), and three switches' 500 ns.
    #[test]
    fn an_inline_write_crosses_each_hop_whole_store_and_forward() {
        let yaml = "name: t\ntopology: { leaves: 2, spines: 1, hosts_per_leaf: 1, \
                    host_link: { rate: 100Gbps, latency: 1us } }\n\
                    switch: { latency: 500ns, forwarding: store_and_forward }\n\
                    workload:\n  - permutation: { size: 1KB }\n";
        let sc = crate::scenario::parse_str(yaml, "t.yaml", "t", &Default::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let wire = 64 + RETH_BYTES + sc.encapsulation.overhead_bytes();
        // 8 bits at 100 Gb/s: 80 ps a byte.
        let hop = wire * 80 + 1_000_000;
        assert_eq!(ideal_inline_write(&sc, 0, 1, 64).0, 4 * hop + 3 * 500_000);
        assert_eq!(
            ideal_inline_write(&sc, 1, 0, 64),
            ideal_inline_write(&sc, 0, 1, 64)
        );
    }

    #[test]
    fn md1_formula() {
        assert_eq!(md1_mean_wait(0.5, SimDuration(1000)), 500.0);
        assert!((md1_mean_wait(0.8, SimDuration(1000)) - 2000.0).abs() < 1e-9);
    }
}

//! Reports: the human summary on stdout and the result files.
//!
//! Files under the output folder: `summary.json` ([`Summary`]), `flows.csv` (one row per
//! flow), `ports.csv` (one row per port) and `perf.json` (wall-clock figures, which differ
//! from run to run; keep it out of version control). All but `perf.json` are byte-identical
//! for the same scenario and seed.

use crate::analytic::base_rtt;
use crate::metrics::{r4, Percentiles, PerfReport, Summary};
use crate::outdir::{write_atomic, AtomicFile};
use crate::scenario::Scenario;
use crate::sim::RunOutput;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// Writes summary.json, flows.csv, ports.csv and perf.json into `dir`. flows.csv has a
/// row per workload flow, and one per collective transfer only with `transfers` (the
/// command line's `--flows`): a collective is reported per operation in collective.csv.
pub fn write_files(
    dir: &Path,
    sc: &Scenario,
    out: &RunOutput,
    summary: &Summary,
    perf: &PerfReport,
    transfers: bool,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut json = serde_json::to_string_pretty(summary).map_err(std::io::Error::other)?;
    json.push('\n');
    write_atomic(&dir.join("summary.json"), json.as_bytes())?;
    let mut pj = serde_json::to_string_pretty(perf).map_err(std::io::Error::other)?;
    pj.push('\n');
    write_atomic(&dir.join("perf.json"), pj.as_bytes())?;
    write_flows_csv(&dir.join("flows.csv"), sc, out, transfers)?;
    if let Some(ts) = &sc.timeseries {
        write_timeseries_csv(&dir.join("timeseries.csv"), sc, ts, out)?;
    }
    write_ports_csv(&dir.join("ports.csv"), sc, out)?;
    if !summary.collectives.is_empty() {
        write_atomic(
            &dir.join("collective.csv"),
            crate::collective::collective_csv(&summary.collectives).as_bytes(),
        )?;
    }
    if !summary.training.is_empty() {
        write_atomic(
            &dir.join("training.csv"),
            crate::training::summary::csv(&summary.training).as_bytes(),
        )?;
    }
    Ok(())
}

fn write_flows_csv(
    path: &Path,
    sc: &Scenario,
    out: &RunOutput,
    transfers: bool,
) -> std::io::Result<()> {
    let mut w = AtomicFile::create(path)?;
    writeln!(
        w,
        "flow,workload,kind,src,dst,size_bytes,start_us,finish_us,last_byte_us,fct_us,ideal_fct_us,slowdown,goodput_gbps,delivered_bytes,packets_sent,packets_dropped,retransmissions,status,failed_at_us{}",
        if out.host.is_some() {
            // End-to-end latency and its stages, in exact picoseconds.
            let mut h = String::from(",posting,latency_ps");
            for s in crate::sim::STAGES {
                h.push_str(&format!(",{s}_ps"));
            }
            h
        } else {
            String::new()
        }
    )?;
    for (i, f) in out.flows.iter().enumerate() {
        if f.coll.is_some() && !transfers {
            continue;
        }
        let kind = sc
            .workload
            .get(f.def.workload as usize)
            .map_or("?", |w| w.kind());
        let failed = matches!(f.outcome, crate::sim::Outcome::Failed(_));
        let (finish, fct, slow, gput, status) = match f.finish.filter(|_| !failed) {
            Some(fin) => {
                let fct = (fin.0 - f.def.start.0) as f64;
                (
                    format!("{}", r4(fin.as_us_f64())),
                    format!("{}", r4(fct / 1e6)),
                    format!("{}", r4(fct / f.ideal.0.max(1) as f64)),
                    format!("{}", r4(f.def.size as f64 * 8.0 / fct * 1e3)),
                    "completed",
                )
            }
            None => (
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                if let crate::sim::Outcome::Failed(st) = f.outcome {
                    match st {
                        crate::transport::rc::WcStatus::RnrRetryExceeded => {
                            "failed_rnr_retry_exceeded"
                        }
                        _ => "failed_retry_exceeded",
                    }
                } else if f.def.start > out.end {
                    "not_started"
                } else if f.packets_dropped > 0 && out.rc.is_none() {
                    "incomplete_lost_packets"
                } else if out.stalled {
                    "incomplete_stalled"
                } else {
                    "incomplete_duration"
                },
            ),
        };
        let host_cols = match &out.host {
            None => String::new(),
            Some(h) => {
                let m = &h.msgs[i];
                let mut c = format!(",{}", m.mode.name());
                if m.done() {
                    c.push_str(&format!(
                        ",{}",
                        m.t[crate::sim::T_DONE] - m.t[crate::sim::T_START]
                    ));
                    for k in 0..crate::sim::STAGES.len() {
                        c.push_str(&format!(",{}", m.t[k + 1] - m.t[k]));
                    }
                } else {
                    c.push_str(&",".repeat(1 + crate::sim::STAGES.len()));
                }
                c
            }
        };
        writeln!(
            w,
            "{},{},{kind},{},{},{},{},{finish},{},{fct},{},{slow},{gput},{},{},{},{},{status},{}{host_cols}",
            f.num,
            f.def.workload,
            f.def.src,
            f.def.dst,
            f.def.size,
            r4(f.def.start.as_us_f64()),
            f.landed
                .map_or(String::new(), |t| r4(t.as_us_f64()).to_string()),
            r4(f.ideal.as_us_f64()),
            f.delivered,
            f.packets_sent,
            f.packets_dropped,
            f.retransmissions,
            f.failed_at
                .map_or(String::new(), |t| r4(t.as_us_f64()).to_string()),
        )?;
    }
    w.commit()
}

/// `timeseries.csv`: one row per sample, `time_us,object,metric,value` (objects named as
/// in ports.csv and `flow<N>`).
fn write_timeseries_csv(
    path: &Path,
    sc: &Scenario,
    ts: &crate::scenario::Timeseries,
    out: &RunOutput,
) -> std::io::Result<()> {
    let names: Vec<String> = ts
        .ports
        .iter()
        .map(|&p| sc.topology.port_name(p))
        .chain(ts.flows.iter().map(|f| format!("flow{f}")))
        .collect();
    let mut w = AtomicFile::create(path)?;
    writeln!(w, "time_us,object,metric,value")?;
    for s in &out.samples {
        writeln!(
            w,
            "{},{},{},{}",
            r4(s.time.as_us_f64()),
            names[s.object as usize],
            s.metric.name(),
            r4(s.value)
        )?;
    }
    w.commit()
}

fn write_ports_csv(path: &Path, sc: &Scenario, out: &RunOutput) -> std::io::Result<()> {
    let mut w = AtomicFile::create(path)?;
    writeln!(
        w,
        "port,name,tier,rate_gbps,tx_bytes,tx_packets,utilisation,queue_mean_bytes,queue_p99_bytes,queue_max_bytes,drops,drop_bytes,drops_buffer_full,drops_dynamic_threshold,drops_port_limit"
    )?;
    let run_s = out.end.0 as f64 / 1e12;
    for (i, p) in out.ports.iter().enumerate() {
        writeln!(
            w,
            "{i},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            sc.topology.port_name(i as u32),
            p.tier.name(),
            p.link.rate.gbps_f64(),
            p.tx_bytes,
            p.tx_packets,
            r4(crate::metrics::port_utilisation(
                p.tx_bytes,
                p.link.rate.0,
                run_s
            )),
            r4(p.mean_queue_bytes()),
            p.p99_queue_bytes(),
            p.max_queue_bytes,
            p.dropped_packets(),
            p.drop_bytes,
            p.drops[0],
            p.drops[1],
            p.drops[2],
        )?;
    }
    w.commit()
}

fn pct_line(name: &str, unit: &str, p: &Option<Percentiles>) -> String {
    match p {
        None => format!("  {name:<10} (no flow started)\n"),
        Some(p) => {
            let v = |stat: &str, x: f64| bounded(p, stat, x, 9, 3);
            format!(
                "  {name:<10} mean {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {} {unit}\n",
                v("mean", p.mean),
                v("p50", p.p50),
                v("p90", p.p90),
                v("p99", p.p99),
                v("p999", p.p999),
                v("max", p.max)
            )
        }
    }
}

/// Statistic `stat` of `p` in `width` columns with `prec` decimals, prefixed by `>=` when
/// unfinished flows make it only a lower bound.
pub fn bounded(p: &Percentiles, stat: &str, x: f64, width: usize, prec: usize) -> String {
    let n = format!("{x:.prec$}");
    if p.is_lower_bound(stat) {
        format!("{:>width$}", format!(">={n}"))
    } else {
        format!("{n:>width$}")
    }
}

/// Describes the resolved fabric: what `doorbell validate` prints and `run` heads with.
pub fn describe_fabric(sc: &Scenario) -> String {
    let t = &sc.topology;
    let mut s = String::new();
    let per_leaf = if t.first_host.is_empty() {
        t.hosts_per_leaf.to_string()
    } else {
        let counts: Vec<String> = (0..t.leaves).map(|l| t.hosts_on(l).to_string()).collect();
        if counts.len() <= 8 {
            format!("({})", counts.join(", "))
        } else {
            format!("(up to {})", t.hosts_per_leaf)
        }
    };
    let _ = writeln!(
        s,
        "fabric   {} leaves x {} hosts = {} hosts, {} spines x {} link(s) per leaf",
        t.leaves,
        per_leaf,
        t.hosts(),
        t.spines,
        t.links_per_spine
    );
    if t.planes > 1 {
        let _ = writeln!(
            s,
            "planes   {} disjoint planes of {} leaves and {} spines (traffic stays in its plane)",
            t.planes,
            t.leaves_per_plane(),
            t.spines_per_plane()
        );
    }
    let _ = writeln!(
        s,
        "links    host {} / {} one-way, fabric {} / {} one-way",
        t.host_link.rate, t.host_link.latency, t.fabric_link.rate, t.fabric_link.latency
    );
    match t.oversubscription() {
        Some(o) => {
            let _ = writeln!(
                s,
                "oversub  {}:1 (per leaf {} Gb/s down, {} Gb/s up)",
                r4(o),
                t.hosts_per_leaf as f64 * t.host_link.rate.gbps_f64(),
                t.uplinks_per_leaf() as f64 * t.fabric_link.rate.gbps_f64()
            );
        }
        None => {
            let _ = writeln!(s, "oversub  n/a (one leaf, no spines)");
        }
    }
    let limit = match sc.switch.limit {
        crate::scenario::BufferLimit::Dynamic { alpha } => {
            format!("dynamic threshold alpha {alpha}")
        }
        crate::scenario::BufferLimit::PortLimit { bytes } => {
            format!("port limit {}", crate::units::Bytes(bytes))
        }
    };
    let _ = writeln!(
        s,
        "switch   {} port-to-port, {}, buffer {} shared, {}",
        sc.switch.latency,
        match sc.switch.forwarding {
            crate::components::Forwarding::StoreAndForward => "store-and-forward",
            crate::components::Forwarding::CutThrough => "cut-through",
        },
        crate::units::Bytes(sc.switch.buffer_bytes),
        limit
    );
    let _ = writeln!(
        s,
        "packets  MTU {} B + {} B {} overhead = {} B on the wire ({:.2}% payload), routing {}",
        sc.mtu,
        sc.encapsulation.overhead_bytes(),
        sc.encapsulation.name(),
        sc.mtu_wire_bytes(),
        sc.encapsulation.payload_efficiency(sc.mtu) * 100.0,
        sc.routing.policy.name()
    );
    // BDP per path: base RTT (a full packet out, an ACK back) x the bottleneck rate.
    let ack = sc.encapsulation.overhead_bytes() + crate::packet::AETH_BYTES;
    let mut paths = Vec::new();
    if t.hosts_on(0) > 1 {
        paths.push(("1 hop (same leaf)", 0u32, 1u32));
    }
    if t.leaves_per_plane() > 1 {
        paths.push(("2 hops (via spine)", 0, t.first_host_of(1)));
    }
    for (label, a, b) in paths {
        let links = t.path_links(a, b);
        let rtt = base_rtt(&links, sc.switch.latency, sc.mtu_wire_bytes(), ack);
        let bottleneck = links.iter().map(|l| l.rate).min().expect("path");
        let bdp = rtt.as_secs_f64() * bottleneck.0 as f64 / 8.0;
        let one_way = crate::analytic::ideal_landed(sc, a, b, sc.mtu);
        let _ = writeln!(
            s,
            "path     {label}: one MTU packet {:.3} us one-way, base RTT {:.3} us, BDP {:.0} B = {:.1} full packets",
            one_way.as_us_f64(),
            rtt.as_us_f64(),
            bdp,
            bdp / sc.mtu_wire_bytes() as f64,
        );
    }
    s.push_str(&describe_control(sc));
    if let Some(h) = &sc.host {
        s.push_str(&describe_host(sc, h));
    }
    s
}

/// Flow control, ECN marking and congestion control as resolved, defaults filled in.
fn describe_control(sc: &Scenario) -> String {
    use crate::cc::CcParams;
    use crate::components::FlowControl;
    let t = &sc.topology;
    let mut s = String::new();
    match sc.flow_control {
        FlowControl::Lossy => {
            let _ = writeln!(s, "flowctl  lossy: drops at the buffer's thresholds");
        }
        FlowControl::Pfc {
            xoff,
            xon,
            reaction_time,
            quanta,
            dynamic,
        } => {
            let mtu_wire = sc.mtu_wire_bytes();
            let host =
                crate::components::ingress::pfc_headroom(&t.host_link, reaction_time, mtu_wire);
            let fabric =
                crate::components::ingress::pfc_headroom(&t.fabric_link, reaction_time, mtu_wire);
            let threshold = match dynamic {
                None => format!("xoff {xoff} B, xon {xon} B per ingress port"),
                Some(d) => format!(
                    "dynamic xoff {} x the free shared buffer ({} B after headroom), resume {} B below it",
                    d.alpha, d.shared_bytes, d.resume_offset
                ),
            };
            let _ = writeln!(
                s,
                "flowctl  pfc: {threshold}; headroom {} B per port (host link {host} B, fabric link {fabric} B); reaction {reaction_time}, quanta {quanta}",
                host.max(fabric)
            );
        }
        FlowControl::IbCredit {
            vl_buffer,
            update_delay,
        } => {
            let _ = writeln!(
                s,
                "flowctl  ib_credit: {vl_buffer} B per link and lane ({} credits of 64 B), update delay {update_delay}",
                vl_buffer / 64
            );
        }
    }
    let tiers: Vec<String> = crate::topology::Tier::ALL
        .iter()
        .zip(&sc.ecn)
        .filter_map(|(tier, red)| {
            red.map(|r| format!("{} {}/{} B {}", tier.name(), r.kmin, r.kmax, r.pmax))
        })
        .collect();
    if !tiers.is_empty() {
        let _ = writeln!(s, "ecn      RED kmin/kmax pmax: {}", tiers.join(", "));
    }
    match sc.cc {
        None => {}
        Some(CcParams::Dcqcn(p)) => {
            let _ = writeln!(
                s,
                "cc       dcqcn: g {:.6}, cnp_interval {}, alpha_period {}, initial_alpha {:.6}, rate_reduce_period {}, clamp_target_rate {}, clamp_target_after_timer {}, min_decrease_factor {}, rate_increase_period {}, byte_counter {}, fast_recovery_steps {}, R_AI {:.0} Mb/s, R_HAI {:.0} Mb/s, R_min {:.0} Mb/s",
                p.g,
                p.cnp_interval,
                p.alpha_period,
                p.initial_alpha,
                p.rate_reduce_period,
                p.clamp_target_rate,
                p.clamp_target_after_timer,
                p.min_decrease_factor,
                p.rate_increase_period,
                p.byte_counter.map_or("off".to_string(), |b| format!("{b} B")),
                p.fast_recovery_steps,
                p.rate_ai_bps / 1e6,
                p.rate_hai_bps / 1e6,
                p.rate_min_bps / 1e6
            );
        }
        Some(CcParams::Hpcc(p)) => {
            let _ = writeln!(
                s,
                "cc       hpcc: target_utilization {}, max_stage {}, R_AI {:.0} Mb/s, R_min {:.0} Mb/s, base_rtt {}",
                p.target_utilization,
                p.max_stage,
                p.rate_ai_bps / 1e6,
                p.rate_min_bps / 1e6,
                p.base_rtt
            );
        }
        Some(CcParams::Swift(p)) => {
            let _ = writeln!(
                s,
                "cc       swift: base_target {}, hop_scale {}, fs_range {} (windows {} to {}), ai {} packet(s), beta {}, max_mdf {}, window {} to {:.1} packets",
                p.base_target,
                p.hop_scale,
                p.fs_range,
                p.fs_min_cwnd,
                p.fs_max_cwnd,
                p.ai_packets,
                p.beta,
                p.max_mdf,
                p.min_cwnd,
                p.max_cwnd
            );
        }
    }
    s
}

/// The human summary printed after a run.
pub fn render_summary(sc: &Scenario, s: &Summary, perf: &PerfReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "doorbell: {} (seed {})", s.scenario, s.seed);
    o.push_str(&describe_fabric(sc));
    let _ = writeln!(
        o,
        "run      {:.3} us simulated{}; {} events in {:.3} s ({:.1} M events/s), peak RSS {}",
        s.sim_time_us,
        if s.stopped_by_duration {
            " (stopped at duration)"
        } else {
            ""
        },
        s.events,
        perf.wall_seconds,
        perf.events_per_second / 1e6,
        perf.peak_rss_mib
            .map_or("n/a".to_string(), |m| format!("{m:.1} MiB"))
    );
    if let Some(w) = &s.watchdog {
        let _ = writeln!(
            o,
            "WARNING  the watchdog stopped the run: nothing moved for {:.3} s of simulated time (bound {:.3} s) with only timers left; the pending flows can never finish",
            (w.stopped_at_us - w.last_progress_us) / 1e6,
            w.bound_us / 1e6
        );
    } else if s.stalled {
        let _ = writeln!(
            o,
            "WARNING  the run ran out of events with flows still pending: they can never finish"
        );
    }
    if s.stalled {
        for st in s.invariants.stalls.iter().take(3) {
            let who = st.flow.map_or(String::new(), |f| format!("flow {f}: "));
            let _ = writeln!(o, "         {who}{}", st.reason);
        }
    }
    if s.invariants.held() {
        let _ = writeln!(
            o,
            "checks   {} invariants held ({})",
            s.invariants.checked.len(),
            s.invariants.checked.join(", ")
        );
    } else {
        for v in &s.invariants.violations {
            let _ = writeln!(o, "BROKEN   {}: {} (a bug in doorbell)", v.rule, v.detail);
        }
    }
    if s.flows.count > 0 || s.transfers.is_none() {
        let _ = writeln!(
            o,
            "flows    {} completed of {} ({} incomplete, {} failed); {} of {} payload bytes delivered",
            s.flows.completed,
            s.flows.count,
            s.flows.incomplete,
            s.flows.failed,
            s.flows.delivered_bytes,
            s.flows.payload_bytes
        );
    }
    if let Some(t) = &s.transfers {
        let _ = writeln!(
            o,
            "transfers {} of {} collective transfers completed; {} of {} bytes delivered (per operation in the collective table; not in the FCT statistics{})",
            t.completed,
            t.count,
            t.delivered_bytes,
            t.payload_bytes,
            if s.flows.count == 0 { ", which count the workload's flows only" } else { "" }
        );
    }
    if let Some(p) = s.fct_us.as_ref().filter(|p| p.unfinished > 0) {
        let _ = writeln!(
            o,
            "  (over every flow that started: {} unfinished count as what they had run, so values marked >= are lower bounds)",
            p.unfinished
        );
    }
    o.push_str(&pct_line("FCT", "us", &s.fct_us));
    o.push_str(&pct_line("slowdown", "x", &s.slowdown));
    for b in &s.by_size {
        if b.count > 0 {
            let label = format!("{} ({})", b.bucket, b.count);
            if let (Some(p), Some(sl)) = (&b.fct_us, &b.slowdown) {
                let _ = writeln!(
                    o,
                    "    {label:<18} FCT p50 {}  p99 {} us   slowdown p50 {}  p99 {}",
                    bounded(p, "p50", p.p50, 9, 3),
                    bounded(p, "p99", p.p99, 9, 3),
                    bounded(sl, "p50", sl.p50, 7, 3),
                    bounded(sl, "p99", sl.p99, 7, 3)
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "goodput  aggregate {:.2} Gb/s; per flow mean {:.2}, p50 {:.2}, min {:.2} Gb/s",
        s.goodput_gbps.aggregate,
        s.goodput_gbps.per_flow_mean,
        s.goodput_gbps.per_flow_p50,
        s.goodput_gbps.per_flow_min
    );
    let _ = writeln!(
        o,
        "  {:<12} {:>5} {:>9} {:>9} {:>12} {:>12} {:>8}",
        "tier", "ports", "util avg", "util max", "queue p99 B", "queue max B", "drops"
    );
    for t in &s.tiers {
        let _ = writeln!(
            o,
            "  {:<12} {:>5} {:>8.1}% {:>8.1}% {:>12} {:>12} {:>8}",
            t.tier.arrow(),
            t.ports,
            t.util_mean * 100.0,
            t.util_max * 100.0,
            t.queue_p99_bytes,
            t.queue_max_bytes,
            t.drops
        );
    }
    let _ = writeln!(
        o,
        "drops    {} packets ({} B): buffer full {}, dynamic threshold {}, port limit {}",
        s.drops.packets,
        s.drops.bytes,
        s.drops.buffer_full,
        s.drops.dynamic_threshold,
        s.drops.port_limit
    );
    match &s.rc {
        None => {
            if s.drops.packets > 0 {
                let _ = writeln!(
                    o,
                    "         (raw transport: flows that lost a packet stay incomplete)"
                );
            }
        }
        Some(rc) => {
            let _ = writeln!(
                o,
                "rc       {} (timeout {} = {}, retry_cnt {}): {} retransmitted of {} ({:.4}%), {} timeouts, {} seq NAKs, {} RNR NAKs, {} QP errors, {} duplicates",
                rc.operation,
                rc.timeout,
                crate::transport::rc::local_ack_timeout(rc.timeout)
                    .map_or("never".to_string(), |t| format!("{:.1} us", t.as_us_f64())),
                rc.retry_cnt,
                rc.retransmitted_packets,
                rc.first_transmissions,
                rc.retransmission_rate * 100.0,
                rc.timeouts,
                rc.seq_naks,
                rc.rnr_naks,
                rc.qp_errors,
                rc.duplicate_packets
            );
        }
    }
    match s.flow_control {
        "pfc" => {
            let t = &s.pfc.paused_time_us;
            let _ = writeln!(
                o,
                "pfc      {} frames; paused us by tier: host->leaf {:.1}, leaf->spine {:.1}, spine->leaf {:.1}, leaf->host {:.1}",
                s.pfc.pause_frames, t.host_to_leaf, t.leaf_to_spine, t.spine_to_leaf, t.leaf_to_host
            );
        }
        "ib_credit" => {
            let t = &s.credit.stall_time_us;
            let _ = writeln!(
                o,
                "credits  credit stall (us) by tier: host->leaf {:.1}, leaf->spine {:.1}, spine->leaf {:.1}, leaf->host {:.1}",
                t.host_to_leaf, t.leaf_to_spine, t.spine_to_leaf, t.leaf_to_host
            );
        }
        _ => {}
    }
    if let Some(cc) = &s.cc {
        let _ = writeln!(
            o,
            "cc       {}: {} ECN marks, {} CNPs sent, {} rate cuts",
            cc.algorithm, s.ecn.marked_packets, cc.cnps_sent, cc.rate_cuts
        );
    } else if s.ecn.marked_packets > 0 {
        let _ = writeln!(o, "ecn      {} packets marked", s.ecn.marked_packets);
    }
    let f = &s.faults;
    if f.corrupted_packets + f.random_drops + f.flap_drops > 0 {
        let _ = writeln!(
            o,
            "faults   {} corrupted, {} random drops, {} lost to link flaps",
            f.corrupted_packets, f.random_drops, f.flap_drops
        );
    }
    if let Some(h) = &s.host {
        o.push_str(&render_host(h));
    }
    for c in &s.collectives {
        o.push_str(&crate::collective::nccl_table(c));
    }
    for t in &s.training {
        o.push_str(&crate::training::summary::render(t));
    }
    o
}

/// The host model's lines of the run summary.
pub fn render_host(h: &crate::metrics::HostSummary) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "host     posting {}, {} memory, completions by {}; {} messages done, {:.3} M messages/s",
        h.posting,
        h.memory,
        h.completion,
        h.messages,
        h.messages_per_s / 1e6
    );
    o.push_str(&pct_line("latency", "us", &h.latency_us));
    let mut line = String::from("  stages mean (p99) us:");
    for st in &h.breakdown {
        let _ = write!(line, " {} {:.3} ({:.3})", st.stage, st.mean_us, st.p99_us);
    }
    let _ = writeln!(o, "{line}");
    let c = &h.cpu_util;
    let _ = writeln!(
        o,
        "  interrupts {} ({:.0}/s per host mean, {:.0} max; busiest IRQ core {:.1}% busy); CPU {:.2}% of {} cores mean, {:.2}% max (posting {:.2}%, interrupts {:.2}%, copies {:.2}%, polling {:.2}%, proxy {:.2}%)",
        h.interrupts,
        h.interrupts_per_s.mean,
        h.interrupts_per_s.max,
        h.interrupt_core_max * 100.0,
        c.mean * 100.0,
        h.cores_per_host,
        c.max * 100.0,
        c.posting * 100.0,
        c.interrupts * 100.0,
        c.copies * 100.0,
        c.polling * 100.0,
        c.proxy * 100.0
    );
    let _ = writeln!(
        o,
        "  {} doorbells, {} WQE fetches, {} B over PCIe, {} completions",
        h.doorbells, h.wqe_fetches, h.pcie_bytes, h.completions
    );
    o
}

/// Servers, GPUs and NICs, and which leaves each rail's NICs land on (the wiring decides
/// whether a job's traffic crosses the spines at all).
fn describe_servers(sc: &Scenario, h: &crate::nic::config::HostConfig) -> String {
    let topo = &sc.topology;
    let wiring = match h.wiring {
        crate::nic::spec::Wiring::Packed => "packed (a server's NICs on consecutive ports)",
        crate::nic::spec::Wiring::Rail => "rail (NIC i of every server on rail i)",
    };
    let mut s = format!(
        "servers  {} x {} GPUs, {} NICs each, wiring {wiring}\n",
        h.servers, h.gpus_per_host, h.nics_per_host
    );
    let leaves_of = |nic: u32| -> Vec<u32> {
        let mut l: Vec<u32> = (0..h.servers)
            .map(|srv| topo.leaf_of(h.port_of(srv, nic)))
            .collect();
        l.dedup();
        l
    };
    let span = |l: &[u32]| match (l.first(), l.last()) {
        (Some(a), Some(b)) if a == b => format!("leaf {a}"),
        (Some(a), Some(b)) if l.len() as u32 == b - a + 1 => format!("leaves {a}-{b}"),
        _ => format!("{} leaves", l.len()),
    };
    if h.nics_per_host > 1 {
        let rails: Vec<String> = (0..h.nics_per_host.min(8))
            .map(|n| format!("{n}: {}", span(&leaves_of(n))))
            .collect();
        let _ = writeln!(
            s,
            "rails    {}{}",
            rails.join("; "),
            if h.nics_per_host > 8 { "; ..." } else { "" }
        );
    }
    s
}

/// The host model's analytic figures: a small message's unloaded latency by stage and a
/// burst's message-rate bound (`analytic::host`), for the scenario's posting mode.
pub fn describe_host(sc: &Scenario, h: &crate::nic::config::HostConfig) -> String {
    let mut s = describe_servers(sc, h);
    let size = 8;
    let (src, dst) = (0, 1);
    match (
        crate::analytic::host::unloaded_stages(sc, h, h.posting, src, dst, size),
        crate::analytic::host::message_rate_limit(sc, h, h.posting, size),
    ) {
        (Ok(stages), Ok(rate)) => {
            let total: u64 = stages.iter().map(|d| d.0).sum();
            let mut parts = String::new();
            for (name, d) in crate::sim::STAGES.iter().zip(stages) {
                if d.0 > 0 {
                    let _ = write!(
                        parts,
                        "{}{name} {:.3}",
                        if parts.is_empty() { "" } else { ", " },
                        d.as_us_f64()
                    );
                }
            }
            let _ = writeln!(
                s,
                "host     posting {}: an {size} B message host {src} -> host {dst} takes {:.3} us unloaded ({parts}); a burst of {size} B messages reaches at most {:.3} M/s (bound: {})",
                h.posting.name(),
                total as f64 / 1e6,
                rate.messages_per_s / 1e6,
                rate.bound_by
            );
        }
        (Err(e), _) | (_, Err(e)) => {
            let _ = writeln!(s, "host     {e}");
        }
    }
    s
}

//! Comparing RC parameter sets: the same traffic and faults under each named set.
//!
//! Each set in a scenario's `compare:` list overrides `transport.rc` field by field; the
//! scenario (topology, workload, faults, seed) is otherwise the same, so the workload
//! expands to the same flows and any difference between rows comes from the parameters
//! (fault draws follow each packet's arrival, so their sequence diverges once the sets
//! send different packets). Results: one row per set in `compare.csv`, a side-by-side
//! table on stdout, and each set's full results in `<out>/<set>/`.
//!
//! When sets differ in `window_packets`, a second table (`window.csv`) shows every
//! explicit flow's measured goodput beside the analytic window bound
//! min(line rate x payload share, W x MTU / RTT) and marks the bandwidth-delay product.
//!
//! With `repeats: N` every set also runs N - 1 more times, repeat r with one seed shared
//! by all sets (common random numbers: the sets of one repeat draw the same arrivals,
//! sizes and hashes), and `compare-stats.csv` gives each set's mean and 95% confidence
//! half-width over the N runs for the headline figures, and the paired difference from
//! the first set, repeat by repeat. The per-set folders and `compare.csv` stay those of
//! the scenario's own seed (repeat 0).

use crate::analytic::base_rtt;
use crate::metrics::{r4, summarize, Summary};
use crate::packet::AETH_BYTES;
use crate::scenario::{RcConfig, Scenario, Transport};
use crate::sim::{run, Outcome, RunOutput};
use crate::units::SimTime;
use std::fmt::Write as _;

/// One parameter set's run.
pub struct SetResult {
    pub name: String,
    pub scenario: Scenario,
    pub out: RunOutput,
    pub summary: Summary,
}

/// The scenario set `set` runs: `sc` with the set's sections in place, without sets.
pub fn set_scenario(sc: &Scenario, set: &crate::scenario::CompareSet) -> Scenario {
    let mut s = sc.clone();
    s.topology = set.topology.clone();
    s.transport = Transport::Rc(set.rc.clone());
    s.flow_control = set.flow_control;
    s.routing = set.routing;
    s.cc = set.cc;
    s.ecn = set.ecn;
    s.host = set.host.clone();
    s.faults = set.faults.clone();
    if let Some(w) = &set.workload {
        s.workload = w.clone();
    }
    s.compare.clear();
    s
}

/// Runs the scenario once per `compare` set, one after another (every set's output is
/// kept for the tables).
pub fn run_sets(sc: &Scenario) -> Vec<SetResult> {
    run_sets_on(sc, 1)
}

/// [`run_sets`] with up to `threads` sets running at once. Each set is its own run with
/// its own random streams, so the results, and their order, are the same for any
/// `threads`.
pub fn run_sets_on(sc: &Scenario, threads: usize) -> Vec<SetResult> {
    on_threads(threads, &sc.compare, |set| {
        let s = set_scenario(sc, set);
        let out = run(&s);
        let summary = summarize(&s, &out);
        SetResult {
            name: set.name.clone(),
            scenario: s,
            out,
            summary,
        }
    })
}

/// `f` of every item, in the items' order, on up to `threads` threads (one item per
/// work unit, so an idle thread takes whichever run waits).
fn on_threads<T: Sync, R: Send>(threads: usize, items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use rayon::prelude::*;
    if threads <= 1 || items.len() <= 1 {
        return items.iter().map(f).collect();
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.min(items.len()))
        .build()
        .expect("a thread pool")
        .install(|| items.par_iter().with_max_len(1).map(&f).collect())
}

/// The seed of repeat `r` (> 0) of every set; repeat 0 is the scenario's own.
pub fn repeat_seed(sc: &Scenario, r: u32) -> u64 {
    if r == 0 {
        sc.seed
    } else {
        crate::rng::stream_seed(sc.seed, crate::rng::Stream::Repeat, 0, r as u64)
    }
}

/// The summaries of every set at repeats 1..N (repeat 0 is [`run_sets`]), outer index
/// the repeat; each run's full output is dropped once summed up, after `check` (named
/// `set <name>, repeat <r>`) has passed it: a run cut short (for memory) must not be
/// averaged in as if whole.
pub fn repeat_summaries<E>(
    sc: &Scenario,
    check: impl Fn(&str, &RunOutput) -> Result<(), E> + Sync,
) -> Result<Vec<Vec<Summary>>, E>
where
    E: Send,
{
    repeat_summaries_on(sc, 1, check)
}

/// [`repeat_summaries`] with up to `threads` runs at once (the same summaries, in the
/// same order, for any `threads`; the first failed check, in that order, is returned).
pub fn repeat_summaries_on<E>(
    sc: &Scenario,
    threads: usize,
    check: impl Fn(&str, &RunOutput) -> Result<(), E> + Sync,
) -> Result<Vec<Vec<Summary>>, E>
where
    E: Send,
{
    let jobs: Vec<(u32, usize)> = (1..sc.repeats)
        .flat_map(|r| (0..sc.compare.len()).map(move |i| (r, i)))
        .collect();
    let mut runs = on_threads(threads, &jobs, |&(r, i)| {
        let set = &sc.compare[i];
        let mut s = set_scenario(sc, set);
        s.seed = repeat_seed(sc, r);
        let out = run(&s);
        check(&format!("set {}, repeat {r}", set.name), &out)?;
        Ok(summarize(&s, &out))
    })
    .into_iter();
    (1..sc.repeats)
        .map(|_| runs.by_ref().take(sc.compare.len()).collect())
        .collect()
}

/// The headline figures of a summary, flattened (`fct_us.p99`, ...).
/// With each, whether it is only a lower bound (unfinished flows).
fn headline_figures(s: &Summary) -> std::collections::BTreeMap<String, (f64, bool)> {
    let mut all = std::collections::BTreeMap::new();
    let json = serde_json::to_value(s).expect("a summary serializes");
    crate::sweep::flatten("", &json, &mut all);
    all.iter()
        .filter(|(k, _)| crate::sweep::headline(k))
        .filter_map(|(k, v)| Some((k.clone(), (v.as_f64()?, crate::sweep::bounded(&all, k)))))
        .collect()
}

/// Per set and headline figure: (mean, 95% half-width) over repeats, and the same for
/// the paired difference from the first set.
type Stat = (f64, Option<f64>);
type SetStats = Vec<(String, Vec<(String, Option<Stat>, Option<Stat>, usize)>)>;

fn set_stats(sets: &[SetResult], more: &[Vec<Summary>]) -> SetStats {
    let runs: Vec<Vec<std::collections::BTreeMap<String, (f64, bool)>>> = sets
        .iter()
        .enumerate()
        .map(|(i, s)| {
            std::iter::once(headline_figures(&s.summary))
                .chain(more.iter().map(|rep| headline_figures(&rep[i])))
                .collect()
        })
        .collect();
    let keys: std::collections::BTreeSet<&String> =
        runs.iter().flatten().flat_map(|m| m.keys()).collect();
    sets.iter()
        .enumerate()
        .map(|(i, s)| {
            let rows = keys
                .iter()
                .map(|&k| {
                    let x: Vec<f64> = runs[i].iter().filter_map(|m| Some(m.get(k)?.0)).collect();
                    let bounded = runs[i]
                        .iter()
                        .filter(|m| m.get(k).is_some_and(|v| v.1))
                        .count();
                    // A figure the set never had is absent, not 0.
                    let stat = (!x.is_empty()).then(|| crate::sweep::mean_ci95(&x));
                    let d: Vec<f64> = runs[i]
                        .iter()
                        .zip(&runs[0])
                        .filter_map(|(m, b)| Some(m.get(k)?.0 - b.get(k)?.0))
                        .collect();
                    let diff = (i > 0 && !d.is_empty()).then(|| crate::sweep::mean_ci95(&d));
                    (k.clone(), stat, diff, bounded)
                })
                .collect();
            (s.name.clone(), rows)
        })
        .collect()
}

/// `compare-stats.csv`: per set, `repeats`, then for each headline figure `<f>.mean`,
/// `<f>.ci95`, `<f>.vs_first.mean`, `<f>.vs_first.ci95` (empty where undefined) and
/// `<f>.lower_bound_runs` (the runs in which it was only a lower bound).
pub fn stats_csv(sets: &[SetResult], more: &[Vec<Summary>]) -> String {
    let stats = set_stats(sets, more);
    let f = |x: Option<f64>| x.map_or(String::new(), |v| r4(v).to_string());
    let mut o = String::from("set,repeats");
    if let Some((_, rows)) = stats.first() {
        for (k, _, _, _) in rows {
            for s in [
                "mean",
                "ci95",
                "vs_first.mean",
                "vs_first.ci95",
                "lower_bound_runs",
            ] {
                let _ = write!(o, ",{k}.{s}");
            }
        }
    }
    o.push('\n');
    for (name, rows) in &stats {
        let _ = write!(o, "{name},{}", more.len() + 1);
        for (_, stat, diff, bounded) in rows {
            let _ = write!(
                o,
                ",{},{},{},{},{bounded}",
                f(stat.map(|s| s.0)),
                f(stat.and_then(|s| s.1)),
                f(diff.map(|d| d.0)),
                f(diff.and_then(|d| d.1))
            );
        }
        o.push('\n');
    }
    o
}

/// The repeats table printed after a compare run with `repeats`: P99 FCT and goodput,
/// mean +- 95% half-width, and the P99's paired difference from the first set.
pub fn render_stats_table(sets: &[SetResult], more: &[Vec<Summary>]) -> String {
    let stats = set_stats(sets, more);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "repeats  {} runs per set, one seed per repeat shared by every set; mean +- 95% half-width",
        more.len() + 1
    );
    let _ = writeln!(
        o,
        "{:<16} {:>24} {:>24} {:>30}",
        "set", "FCT p99 us", "goodput Gb/s", "FCT p99 vs first set us"
    );
    let pm = |v: Option<&(f64, Option<f64>)>| match v {
        Some((m, Some(ci))) => format!("{m:.2} +- {ci:.2}"),
        Some((m, None)) => format!("{m:.2}"),
        None => "-".to_string(),
    };
    for (name, rows) in &stats {
        let get = |key: &str| rows.iter().find(|(k, _, _, _)| k == key);
        let _ = writeln!(
            o,
            "{:<16} {:>24} {:>24} {:>30}",
            name,
            pm(get("fct_us.p99").and_then(|r| r.1.as_ref())),
            pm(get("goodput_gbps.aggregate").and_then(|r| r.1.as_ref())),
            pm(get("fct_us.p99").and_then(|r| r.2.as_ref())),
        );
    }
    o
}

/// Time from a link going down to the queue pair that used it failing: for each failed
/// flow, its failure time minus the later of its start and the last flap that began
/// before it failed; the largest over flows (us). `None` when no flow failed.
pub fn detect_dead_link_us(sc: &Scenario, out: &RunOutput) -> Option<f64> {
    out.flows
        .iter()
        .filter(|f| matches!(f.outcome, Outcome::Failed(_)))
        .filter_map(|f| {
            let failed = f.failed_at?;
            let down = sc
                .faults
                .flaps
                .iter()
                .map(|fl| SimTime(fl.from.0))
                .filter(|&t| t <= failed)
                .max()
                .unwrap_or(f.def.start)
                .max(f.def.start);
            Some(failed.since(down).as_us_f64())
        })
        .reduce(f64::max)
        .map(r4)
}

fn rc_of(sc: &Scenario) -> &RcConfig {
    match &sc.transport {
        Transport::Rc(rc) => rc,
        Transport::Raw => unreachable!("compare sets are RC by validation"),
    }
}

const HEADER: &str = "set,spines,oversubscription,flow_control,cc,timeout,retry_cnt,rnr_retry,window_packets,ack_every,max_rd_atomic,flows,completed,failed,goodput_gbps,fct_p50_us,fct_p99_us,fct_p999_us,fct_lower_bounds,retransmission_rate,timeouts,seq_naks,qp_errors,detect_dead_link_us,routing,out_of_order";

/// `compare.csv`.
pub fn compare_csv(sets: &[SetResult]) -> String {
    let mut o = String::from(HEADER);
    o.push('\n');
    for s in sets {
        let rc = rc_of(&s.scenario);
        let p = &rc.params;
        let sm = &s.summary;
        let pct = |f: fn(&crate::metrics::Percentiles) -> f64| {
            sm.fct_us
                .as_ref()
                .map_or(String::new(), |x| f(x).to_string())
        };
        let rcs = sm.rc.as_ref();
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            s.name,
            s.scenario.topology.spines,
            s.scenario
                .topology
                .oversubscription()
                .map_or(String::new(), |o| r4(o).to_string()),
            sm.flow_control,
            sm.cc.as_ref().map_or("none", |c| c.algorithm),
            p.timeout,
            p.retry_cnt,
            p.rnr_retry,
            p.window_packets.map_or(String::new(), |w| w.to_string()),
            p.ack_every,
            p.max_rd_atomic,
            sm.flows.count,
            sm.flows.completed,
            sm.flows.failed,
            sm.goodput_gbps.aggregate,
            pct(|x| x.p50),
            pct(|x| x.p99),
            pct(|x| x.p999),
            sm.fct_us
                .as_ref()
                .map_or(String::new(), |x| x.lower_bounds.join(" ")),
            rcs.map_or(0.0, |r| r.retransmission_rate),
            rcs.map_or(0, |r| r.timeouts),
            rcs.map_or(0, |r| r.seq_naks),
            rcs.map_or(0, |r| r.qp_errors),
            detect_dead_link_us(&s.scenario, &s.out).map_or(String::new(), |d| d.to_string()),
            s.scenario.routing.describe(),
            p.out_of_order.is_some(),
        );
    }
    o
}

/// The side-by-side table printed after a compare run.
pub fn render_table(sets: &[SetResult]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<16} {:>9} {:>5} {:>7} {:>5} {:>6} {:>11} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8} {:>6} {:>11}",
        "set",
        "fc",
        "cc",
        "timeout",
        "retry",
        "window",
        "completed",
        "goodput",
        "FCT p50",
        "FCT p99",
        "FCT p99.9",
        "retx %",
        "timeouts",
        "failed",
        "detect"
    );
    for s in sets {
        let p = &rc_of(&s.scenario).params;
        let sm = &s.summary;
        let f = |stat: &str| {
            sm.fct_us.as_ref().map_or("-".to_string(), |p| {
                let x = match stat {
                    "p50" => p.p50,
                    "p99" => p.p99,
                    _ => p.p999,
                };
                crate::report::bounded(p, stat, x, 7, 2)
            })
        };
        let _ = writeln!(
            o,
            "{:<16} {:>9} {:>5} {:>7} {:>5} {:>6} {:>11} {:>5.1} Gb/s {:>7} us {:>7} us {:>7} us {:>9.4} {:>8} {:>6} {:>11}",
            s.name,
            sm.flow_control,
            sm.cc.as_ref().map_or("none", |c| c.algorithm),
            p.timeout,
            p.retry_cnt,
            p.window_packets.map_or("-".to_string(), |w| w.to_string()),
            format!("{}/{}", sm.flows.completed, sm.flows.count),
            sm.goodput_gbps.aggregate,
            f("p50"),
            f("p99"),
            f("p999"),
            sm.rc.as_ref().map_or(0.0, |r| r.retransmission_rate * 100.0),
            sm.rc.as_ref().map_or(0, |r| r.timeouts),
            sm.flows.failed,
            detect_dead_link_us(&s.scenario, &s.out)
                .map_or("-".to_string(), |d| format!("{d:.1} us")),
        );
    }
    o
}

/// One row of the window table.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowRow {
    pub set: String,
    pub window: Option<u32>,
    pub flow: usize,
    pub hops: u32,
    pub measured_gbps: f64,
    pub analytic_gbps: f64,
    pub rtt_us: f64,
    pub bdp_packets: f64,
}

/// Measured goodput of every explicit flow beside min(line x payload share,
/// W x MTU / RTT), with RTT = `analytic::base_rtt` for a full WRITE packet out and an ACK
/// back on the flow's path.
pub fn window_rows(sets: &[SetResult]) -> Vec<WindowRow> {
    let mut rows = Vec::new();
    for s in sets {
        let sc = &s.scenario;
        let rc = rc_of(sc);
        let wire = sc.mtu_wire_bytes();
        let ack = sc.encapsulation.overhead_bytes() + AETH_BYTES;
        for (i, f) in s.out.flows.iter().enumerate() {
            let is_explicit = matches!(
                sc.workload.get(f.def.workload as usize),
                Some(crate::workload::Workload::Flows(_))
            );
            let Some(fin) = f.finish.filter(|_| is_explicit) else {
                continue;
            };
            let links = sc.topology.path_links(f.def.src, f.def.dst);
            let rtt = base_rtt(&links, sc.switch.latency, wire, ack);
            let rate = links.iter().map(|l| l.rate.0).min().unwrap_or(0) as f64;
            let line = rate * sc.encapsulation.payload_efficiency(sc.mtu);
            let window_bound = rc.params.window_packets.map_or(f64::INFINITY, |w| {
                w as f64 * sc.mtu as f64 * 8.0 / rtt.as_secs_f64()
            });
            let fct = fin.since(f.def.start).as_secs_f64();
            rows.push(WindowRow {
                set: s.name.clone(),
                window: rc.params.window_packets,
                flow: i,
                hops: sc.topology.switch_hops(f.def.src, f.def.dst),
                measured_gbps: r4(f.def.size as f64 * 8.0 / fct / 1e9),
                analytic_gbps: r4(line.min(window_bound) / 1e9),
                rtt_us: r4(rtt.as_us_f64()),
                bdp_packets: r4(rate * rtt.as_secs_f64() / 8.0 / wire as f64),
            });
        }
    }
    rows
}

/// `window.csv`.
pub fn window_csv(rows: &[WindowRow]) -> String {
    let mut o = String::from(
        "set,window_packets,flow,switch_hops,measured_gbps,analytic_gbps,rtt_us,bdp_packets\n",
    );
    for r in rows {
        let _ = writeln!(
            o,
            "{},{},{},{},{},{},{},{}",
            r.set,
            r.window.map_or(String::new(), |w| w.to_string()),
            r.flow,
            r.hops,
            r.measured_gbps,
            r.analytic_gbps,
            r.rtt_us,
            r.bdp_packets
        );
    }
    o
}

/// The window table for stdout, one block per path, marking where W first covers the BDP.
pub fn render_window_table(rows: &[WindowRow]) -> String {
    let mut o = String::new();
    let mut hops: Vec<(u32, usize)> = rows.iter().map(|r| (r.hops, r.flow)).collect();
    hops.sort_unstable();
    hops.dedup();
    for (h, flow) in hops {
        let mine: Vec<&WindowRow> = rows
            .iter()
            .filter(|r| r.hops == h && r.flow == flow)
            .collect();
        let Some(first) = mine.first() else { continue };
        let _ = writeln!(
            o,
            "flow {flow}, {} switch hop(s): base RTT {:.3} us, BDP {:.1} packets",
            h, first.rtt_us, first.bdp_packets
        );
        let _ = writeln!(
            o,
            "  {:>8} {:>14} {:>26} {:>7}",
            "window", "measured Gb/s", "min(line, W x MTU / RTT)", "ratio"
        );
        let mut marked = false;
        for r in mine {
            let w = r.window.map_or("none".to_string(), |w| w.to_string());
            let mark = match r.window {
                Some(w) if !marked && w as f64 >= r.bdp_packets => {
                    marked = true;
                    "  <- covers the BDP"
                }
                _ => "",
            };
            let _ = writeln!(
                o,
                "  {:>8} {:>14.2} {:>26.2} {:>7.3}{}",
                w,
                r.measured_gbps,
                r.analytic_gbps,
                r.measured_gbps / r.analytic_gbps,
                mark
            );
        }
    }
    o
}

/// `host.csv`: the host model's figures, one row per set and workload item (latency and
/// message rate of that item's messages; interrupts and CPU of the busiest host it uses),
/// when the sets have a `host:` section.
pub fn host_csv(sets: &[SetResult]) -> Option<String> {
    if !sets.iter().any(|s| s.summary.host.is_some()) {
        return None;
    }
    let mut o = String::from(
        "set,workload,kind,posting,memory,completion,blueflame,doorbell_batch,messages,latency_mean_us,latency_p99_us,messages_per_s,interrupts_per_s_max,cpu_util_max,cpu_posting,cpu_interrupts,cpu_copies,cpu_polling,cpu_proxy\n",
    );
    for s in sets {
        let (Some(h), Some(cfg)) = (&s.summary.host, &s.scenario.host) else {
            continue;
        };
        let c = &h.cpu_util;
        for w in &h.by_workload {
            let kind = s
                .scenario
                .workload
                .get(w.workload as usize)
                .map_or("?", |x| x.kind());
            let posting = s
                .scenario
                .posting
                .get(w.workload as usize)
                .copied()
                .flatten()
                .unwrap_or(cfg.posting);
            let _ = writeln!(
                o,
                "{},{},{kind},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                s.name,
                w.workload,
                posting.name(),
                h.memory,
                h.completion,
                cfg.blueflame,
                cfg.doorbell_batch,
                w.messages,
                w.latency_mean_us,
                w.latency_p99_us,
                w.messages_per_s,
                w.interrupts_per_s_max,
                w.cpu_util_max,
                c.posting,
                c.interrupts,
                c.copies,
                c.polling,
                c.proxy
            );
        }
    }
    Some(o)
}

/// The host model's side-by-side table: a row per set and workload item.
pub fn render_host_table(sets: &[SetResult]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<22} {:<12} {:>9} {:>5} {:>26} {:>11} {:>11} {:>10} {:>10} {:>8}",
        "set",
        "workload",
        "posting",
        "mem",
        "completion",
        "lat mean",
        "lat p99",
        "msgs/s",
        "irq/s max",
        "CPU max"
    );
    for s in sets {
        let Some(h) = &s.summary.host else {
            continue;
        };
        for w in &h.by_workload {
            let kind = s
                .scenario
                .workload
                .get(w.workload as usize)
                .map_or("?", |x| x.kind());
            let _ = writeln!(
                o,
                "{:<22} {:<12} {:>9} {:>5} {:>26} {:>8.3} us {:>8.3} us {:>9.3}M {:>10.0} {:>7.2}%",
                s.name,
                format!("{}:{kind}", w.workload),
                h.posting,
                h.memory,
                h.completion,
                w.latency_mean_us,
                w.latency_p99_us,
                w.messages_per_s / 1e6,
                w.interrupts_per_s_max,
                w.cpu_util_max * 100.0
            );
        }
    }
    o
}

/// `collective.csv` of a compare run: each set's collective rows, set first.
pub fn collective_csv(sets: &[SetResult]) -> Option<String> {
    if !sets.iter().any(|s| !s.summary.collectives.is_empty()) {
        return None;
    }
    let mut o = String::new();
    for (k, s) in sets.iter().enumerate() {
        let csv = crate::collective::collective_csv(&s.summary.collectives);
        for (i, line) in csv.lines().enumerate() {
            if i == 0 {
                if k == 0 {
                    let _ = writeln!(o, "set,{line}");
                }
            } else {
                let _ = writeln!(o, "{},{line}", s.name);
            }
        }
    }
    Some(o)
}

/// The collectives side by side: per set and size, time and bus bandwidth.
pub fn render_collective_table(sets: &[SetResult]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<24} {:>14} {:>12} {:>6} {:>12} {:>10} {:>10} {:>6}",
        "set", "op", "algorithm", "ranks", "size (B)", "time (us)", "busbw GB/s", "wrong"
    );
    for s in sets {
        for c in &s.summary.collectives {
            for r in &c.rows {
                let _ = writeln!(
                    o,
                    "{:<24} {:>14} {:>12} {:>6} {:>12} {:>10.2} {:>10.2} {:>6}",
                    s.name, c.op, c.algorithm, c.ranks, r.size, r.time_us, r.busbw_gbs, r.wrong
                );
            }
        }
    }
    o
}

/// `training.csv` of a compare run: each set's step rows, set first.
pub fn training_csv(sets: &[SetResult]) -> Option<String> {
    if !sets.iter().any(|s| !s.summary.training.is_empty()) {
        return None;
    }
    let mut o = String::new();
    for (k, s) in sets.iter().enumerate() {
        let csv = crate::training::summary::csv(&s.summary.training);
        for (i, line) in csv.lines().enumerate() {
            if i > 0 || k == 0 {
                let set = if i == 0 { "set" } else { &s.name };
                let _ = writeln!(o, "{set},{line}");
            }
        }
    }
    Some(o)
}

/// The training steps side by side: per set and job, the step and its parts.
pub fn render_training_table(sets: &[SetResult]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<24} {:>8} {:>6} {:>10} {:>11} {:>10} {:>12} {:>8}",
        "set", "job", "GPUs", "step ms", "compute ms", "bubble ms", "exposed ms", "exposed"
    );
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    for s in sets {
        for t in &s.summary.training {
            let _ = writeln!(
                o,
                "{:<24} {:>8} {:>6} {:>10} {:>11.3} {:>10} {:>12} {:>8}",
                s.name,
                t.job,
                t.gpus,
                f(t.step_ms),
                t.compute_ms,
                f(t.bubble_ms),
                f(t.exposed_comm_ms),
                t.exposed_comm_share
                    .map_or("-".into(), |x| format!("{:.1}%", 100.0 * x)),
            );
        }
    }
    o
}

//! Metrics: what a run measured, reduced to the figures a network engineer reads.
//!
//! Flow completion time (FCT, from a flow's start to when its sender learns it is
//! complete) and slowdown (FCT over the same flow's FCT on an empty fabric,
//! `analytic::ideal_fct`) go into hdrhistograms with 3 significant digits (FCT in ns,
//! slowdown in thousandths), overall and by size bucket; percentiles are the histogram's
//! (within 0.1%), means are exact.
//!
//! Every flow that started counts, finished or not: a percentile over finished flows
//! alone would drop the slowest (a run cut off by `duration`, a failed queue pair) and
//! read better than the fabric is. An unfinished flow counts as what it had run by the
//! end of the run (a failed flow never finishes), a lower bound on its FCT (right-censored). A statistic is
//! then exact only if no unfinished flow reaches down to it; the ones that are only
//! lower bounds are named (`lower_bounds`), and `unfinished` says how many flows were
//! censored.
//! Ports report bytes, utilisation (wire bytes x 8 / rate / run time) and queue depth
//! grouped by tier. Every figure here is a pure function of the scenario and seed: wall
//! clock figures live in `PerfReport`.

use crate::components::DropReason;
use crate::scenario::Scenario;
use crate::sim::RunOutput;
use crate::topology::Tier;
use hdrhistogram::Histogram;
use serde::Serialize;

pub mod host;
pub mod invariants;
pub use host::HostSummary;

/// Rounds to 4 decimals so that reports stay readable (and stay deterministic).
pub fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Percentiles {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    /// Flows counted that had not finished (each as what it had run): 0 when every
    /// counted flow finished, and then left out of the JSON.
    #[serde(skip_serializing_if = "is_zero")]
    pub unfinished: u64,
    /// The statistics above that are only lower bounds: an unfinished flow, whose true
    /// value lies somewhere above what it had run, reaches down to them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lower_bounds: Vec<&'static str>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Percentiles {
    /// `max` is the exact maximum (the histogram's would be rounded up to its bucket).
    fn from_hist(h: &Histogram<u64>, sum: f64, max: f64, scale: f64) -> Option<Percentiles> {
        Self::censored(h, sum, max, scale, 0, 0)
    }

    /// As [`Self::from_hist`], where `unfinished` of the recorded values are lower bounds
    /// (censored), the smallest of them `censored_min` (in the histogram's unit).
    fn censored(
        h: &Histogram<u64>,
        sum: f64,
        max: f64,
        scale: f64,
        unfinished: u64,
        censored_min: u64,
    ) -> Option<Percentiles> {
        if h.is_empty() {
            return None;
        }
        let mut lower_bounds = Vec::new();
        if unfinished > 0 {
            lower_bounds.push("mean");
        }
        // The histogram rounds up to its bucket; never report above the exact maximum.
        let mut q = |name: &'static str, p: f64| {
            let v = h.value_at_quantile(p);
            // Exact only if every censored value lies above it (in histogram buckets).
            if unfinished > 0 && v >= h.lowest_equivalent(censored_min) {
                lower_bounds.push(name);
            }
            r4((v as f64).min(max) / scale)
        };
        let (p50, p90, p99, p999) = (
            q("p50", 0.50),
            q("p90", 0.90),
            q("p99", 0.99),
            q("p999", 0.999),
        );
        if unfinished > 0 {
            lower_bounds.push("max");
        }
        Some(Percentiles {
            mean: r4(sum / h.len() as f64 / scale),
            p50,
            p90,
            p99,
            p999,
            max: r4(max / scale),
            unfinished,
            lower_bounds,
        })
    }

    /// Whether statistic `name` (`"p99"`, ...) is only a lower bound.
    pub fn is_lower_bound(&self, name: &str) -> bool {
        self.lower_bounds.contains(&name)
    }
}

/// FCT and slowdown accumulators.
struct FctAcc {
    fct_ns: Histogram<u64>,
    fct_sum_ns: f64,
    fct_max_ns: f64,
    slow_milli: Histogram<u64>,
    slow_sum_milli: f64,
    slow_max_milli: f64,
    /// Unfinished flows recorded, and their smallest values (ns, thousandths).
    unfinished: u64,
    censored_min_ns: u64,
    censored_min_milli: u64,
}

impl FctAcc {
    fn new() -> FctAcc {
        FctAcc {
            // 1 ns to ~13 days, 3 significant digits.
            fct_ns: Histogram::new_with_bounds(1, 1 << 50, 3).expect("hist"),
            fct_sum_ns: 0.0,
            fct_max_ns: 0.0,
            slow_max_milli: 0.0,
            slow_milli: Histogram::new_with_bounds(1, 1 << 50, 3).expect("hist"),
            slow_sum_milli: 0.0,
            unfinished: 0,
            censored_min_ns: u64::MAX,
            censored_min_milli: u64::MAX,
        }
    }
    /// Records a flow's FCT and slowdown; `finished: false` records what an unfinished
    /// flow had run, a lower bound.
    fn add(&mut self, fct_ps: u64, slowdown: f64, finished: bool) {
        let ns = fct_ps.div_ceil(1000).max(1);
        self.fct_ns.saturating_record(ns);
        self.fct_sum_ns += fct_ps as f64 / 1000.0;
        self.fct_max_ns = self.fct_max_ns.max(fct_ps as f64 / 1000.0);
        self.slow_max_milli = self.slow_max_milli.max(slowdown * 1000.0);
        let m = (slowdown * 1000.0).round().max(1.0) as u64;
        self.slow_milli.saturating_record(m);
        self.slow_sum_milli += slowdown * 1000.0;
        if !finished {
            self.unfinished += 1;
            self.censored_min_ns = self.censored_min_ns.min(ns);
            self.censored_min_milli = self.censored_min_milli.min(m);
        }
    }

    fn fct_us(&self) -> Option<Percentiles> {
        Percentiles::censored(
            &self.fct_ns,
            self.fct_sum_ns,
            self.fct_max_ns,
            1000.0,
            self.unfinished,
            self.censored_min_ns,
        )
    }

    fn slowdown(&self) -> Option<Percentiles> {
        Percentiles::censored(
            &self.slow_milli,
            self.slow_sum_milli,
            self.slow_max_milli,
            1000.0,
            self.unfinished,
            self.censored_min_milli,
        )
    }
}

/// Size buckets for the by-size breakdown: upper bounds (inclusive) in bytes.
pub const SIZE_BUCKETS: [(&str, u64); 5] = [
    ("le_10KB", 10_000),
    ("le_100KB", 100_000),
    ("le_1MB", 1_000_000),
    ("le_10MB", 10_000_000),
    ("gt_10MB", u64::MAX),
];

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SizeBucket {
    pub bucket: &'static str,
    pub count: u64,
    pub completed: u64,
    pub fct_us: Option<Percentiles>,
    pub slowdown: Option<Percentiles>,
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TopologySummary {
    pub hosts: u32,
    pub leaves: u32,
    pub spines: u32,
    /// Hosts under each leaf; with uneven leaves, the most under any leaf.
    pub hosts_per_leaf: u32,
    /// Hosts under each leaf, one count per leaf (written only when they differ).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_hosts: Option<Vec<u32>>,
    pub links_per_spine: u32,
    /// Disjoint planes (written only when more than one).
    #[serde(skip_serializing_if = "is_one")]
    pub planes: u32,
    pub host_link_gbps: f64,
    pub fabric_link_gbps: f64,
    /// Host-facing over spine-facing bandwidth per leaf; null without spines.
    pub oversubscription: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowCounts {
    pub count: u64,
    pub completed: u64,
    /// Flows not completed: failed, lost a packet under the raw transport, or cut off by
    /// `duration`.
    pub incomplete: u64,
    /// Flows whose queue pair failed (retries exhausted); counted in `incomplete` too.
    pub failed: u64,
    pub payload_bytes: u64,
    pub delivered_bytes: u64,
}

/// A collective's chunk transfers (each an RC message between two ranks; with
/// `split_data_on_qps` each part on its own queue pair counts as one), counted apart
/// from the workload's flows: the collective is reported per operation, and its
/// transfers' completion times are not flow completion times.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TransferCounts {
    pub count: u64,
    pub completed: u64,
    pub payload_bytes: u64,
    pub delivered_bytes: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Goodput {
    /// Delivered payload bits (flows' and a collective's transfers') over the span from
    /// the first start to the last delivery, Gb/s.
    pub aggregate: f64,
    /// Mean over completed flows of size x 8 / FCT, Gb/s.
    pub per_flow_mean: f64,
    pub per_flow_p50: f64,
    pub per_flow_min: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Drops {
    pub packets: u64,
    pub bytes: u64,
    pub buffer_full: u64,
    pub dynamic_threshold: u64,
    pub port_limit: u64,
    pub host_to_leaf: u64,
    pub leaf_to_spine: u64,
    pub spine_to_leaf: u64,
    pub leaf_to_host: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TierSummary {
    pub tier: Tier,
    pub ports: u32,
    pub tx_bytes: u64,
    pub util_mean: f64,
    pub util_max: f64,
    pub queue_max_bytes: u64,
    pub queue_p99_bytes: u64,
    pub drops: u64,
}

/// `summary.json` `watchdog`: where a run the watchdog stopped stood.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WatchdogSummary {
    /// When it stopped the run, us of simulated time.
    pub stopped_at_us: f64,
    /// The last payload byte delivered or workload event, us.
    pub last_progress_us: f64,
    /// Its bound: simulated time without progress, us.
    pub bound_us: f64,
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub scenario: String,
    pub seed: u64,
    pub topology: TopologySummary,
    pub routing: &'static str,
    pub mtu_bytes: u64,
    pub encapsulation: &'static str,
    /// Simulated time at the end of the run, us.
    pub sim_time_us: f64,
    pub stopped_by_duration: bool,
    /// The run ran out of events with flows pending (they could never finish), or the
    /// watchdog stopped it.
    pub stalled: bool,
    /// When the watchdog stopped the run (only timers left, nothing to come that could
    /// move work): absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<WatchdogSummary>,
    /// The workload's flows (not a collective's transfers).
    pub flows: FlowCounts,
    /// A collective's transfers, when the workload has collectives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfers: Option<TransferCounts>,
    pub fct_us: Option<Percentiles>,
    pub slowdown: Option<Percentiles>,
    pub by_size: Vec<SizeBucket>,
    pub goodput_gbps: Goodput,
    pub drops: Drops,
    pub tiers: Vec<TierSummary>,
    pub packets_sent: u64,
    pub peak_packets_in_flight: u32,
    /// RC transport counters; null under the raw transport.
    pub rc: Option<RcSummary>,
    pub faults: FaultSummary,
    pub ecn: EcnSummary,
    /// Congestion control counters; null without `cc`.
    pub cc: Option<CcSummary>,
    pub flow_control: &'static str,
    pub pfc: PfcSummary,
    pub credit: CreditSummary,
    pub events: u64,
    /// The host model's figures, when the scenario has `host:`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostSummary>,
    /// One entry per collective workload item.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub collectives: Vec<crate::collective::CollectiveSummary>,
    /// One entry per training workload item.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub training: Vec<crate::training::summary::TrainingSummary>,
    /// What the run was checked against at its end, what it broke (a bug), and why a
    /// stalled run stalled.
    pub invariants: invariants::InvariantReport,
}

/// Time per tier, microseconds (tiers: host_to_leaf, leaf_to_spine, spine_to_leaf,
/// leaf_to_host: the sending side of each link).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct PerTierUs {
    pub host_to_leaf: f64,
    pub leaf_to_spine: f64,
    pub spine_to_leaf: f64,
    pub leaf_to_host: f64,
}

impl PerTierUs {
    fn add(&mut self, t: Tier, us: f64) {
        match t {
            Tier::HostToLeaf => self.host_to_leaf += us,
            Tier::LeafToSpine => self.leaf_to_spine += us,
            Tier::SpineToLeaf => self.spine_to_leaf += us,
            Tier::LeafToHost => self.leaf_to_host += us,
        }
    }
    fn round(mut self) -> Self {
        self.host_to_leaf = r4(self.host_to_leaf);
        self.leaf_to_spine = r4(self.leaf_to_spine);
        self.spine_to_leaf = r4(self.spine_to_leaf);
        self.leaf_to_host = r4(self.leaf_to_host);
        self
    }
}

/// `pfc` in summary.json.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PfcSummary {
    /// PAUSE frames (and refreshes) and RESUME frames sent.
    pub pause_frames: u64,
    /// Of those: PAUSEs that started a pause, refreshes of a pause in force, RESUMEs.
    pub pauses: u64,
    pub refreshes: u64,
    pub resumes: u64,
    /// Time links' data classes spent paused, summed over the links of each tier.
    pub paused_time_us: PerTierUs,
}

/// `credit` in summary.json.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CreditSummary {
    /// Time links had data to send and no credit, summed over the links of each tier.
    pub stall_time_us: PerTierUs,
}

/// `ecn` in summary.json.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EcnSummary {
    /// Packets marked Congestion Experienced at switch egress queues.
    pub marked_packets: u64,
}

/// `cc` in summary.json.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CcSummary {
    pub algorithm: &'static str,
    pub cnps_sent: u64,
    pub cnps_received: u64,
    pub rate_cuts: u64,
}

/// `rc` in summary.json.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RcSummary {
    pub operation: &'static str,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub first_transmissions: u64,
    pub retransmitted_packets: u64,
    /// retransmitted / first transmissions.
    pub retransmission_rate: f64,
    pub timeouts: u64,
    pub seq_naks: u64,
    pub rnr_naks: u64,
    pub qp_errors: u64,
    /// Packets that reached their destination a second time (never delivered twice).
    pub duplicate_packets: u64,
    pub acks_sent: u64,
}

/// `faults` in summary.json: packets destroyed on links, by cause.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FaultSummary {
    pub corrupted_packets: u64,
    pub random_drops: u64,
    pub flap_drops: u64,
}

/// `perf.json`: wall-clock figures, different on every run.
#[derive(Debug, Clone, Serialize)]
pub struct PerfReport {
    pub wall_seconds: f64,
    pub events: u64,
    pub events_per_second: f64,
    pub peak_rss_mib: Option<f64>,
    /// The most collective-transfer records held at once, and how many retired during
    /// the run (`sim::retire`): what memory followed.
    pub transfer_records_peak: u64,
    pub transfers_retired: u64,
    /// Threads the run's fabric was split over (`run --threads`; 1: not split).
    pub threads: u16,
    /// Events each partition handled, when split (`Plan::balanced` aims to even them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partition_events: Vec<u64>,
    /// Wall seconds each partition spent running its windows, and waiting at the
    /// barrier for the others, when split (the rest: the meetings' own work).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partition_work_seconds: Vec<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partition_wait_seconds: Vec<f64>,
    /// Windows a split run advanced in (each ended by a meeting of its partitions).
    #[serde(skip_serializing_if = "is_zero")]
    pub windows: u64,
    /// Hosts placed apart from their leaf to even the partitions out, when split.
    #[serde(skip_serializing_if = "is_zero")]
    pub hosts_apart_from_leaf: u64,
    /// Why a run asked to split over threads ran on one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one_thread_because: Option<&'static str>,
}

/// Peak resident memory of this process, from /proc (Linux only).
pub fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(r4(kb / 1024.0))
}

impl PerfReport {
    pub fn new(out: &RunOutput) -> PerfReport {
        PerfReport {
            wall_seconds: out.wall_seconds,
            events: out.events,
            events_per_second: if out.wall_seconds > 0.0 {
                (out.events as f64 / out.wall_seconds).round()
            } else {
                0.0
            },
            peak_rss_mib: peak_rss_mib(),
            transfer_records_peak: out.retired.peak_held,
            transfers_retired: out.retired.count,
            threads: out.threads,
            partition_events: out.partition_events.clone(),
            partition_work_seconds: out.partition_work_seconds.iter().map(|&s| r4(s)).collect(),
            partition_wait_seconds: out.partition_wait_seconds.iter().map(|&s| r4(s)).collect(),
            windows: out.windows,
            hosts_apart_from_leaf: out.hosts_apart as u64,
            one_thread_because: out.one_thread_because,
        }
    }
}

/// Reduces a run to its summary.
pub fn summarize(sc: &Scenario, out: &RunOutput) -> Summary {
    let topo = &sc.topology;
    let mut all = FctAcc::new();
    let mut buckets: Vec<(FctAcc, u64, u64)> =
        SIZE_BUCKETS.iter().map(|_| (FctAcc::new(), 0, 0)).collect();
    // Transfers retired during the run (`sim::retire`) count as they left.
    let r = &out.retired;
    let mut transfers: Option<TransferCounts> = (r.count > 0).then_some(TransferCounts {
        count: r.count,
        completed: r.count,
        payload_bytes: r.payload_bytes,
        delivered_bytes: r.delivered_bytes,
    });
    // Every byte the fabric delivered, flows' and transfers' (aggregate goodput).
    let mut all_delivered = r.delivered_bytes;
    let mut counts = FlowCounts {
        count: out.flows.iter().filter(|f| f.coll.is_none()).count() as u64,
        completed: 0,
        incomplete: 0,
        failed: 0,
        payload_bytes: 0,
        delivered_bytes: 0,
    };
    let mut per_flow_gbps = Vec::new();
    let mut unfinished_transfers = false;
    let mut first_start: Option<u64> = r.first_start;
    let mut last_delivery = r.last_delivery;
    let mut packets_sent = r.packets_sent;
    for f in &out.flows {
        packets_sent += f.packets_sent as u64;
        all_delivered += f.delivered;
        if f.coll.is_some() {
            // A collective's transfer: counted apart, no FCT statistics.
            let t = transfers.get_or_insert(TransferCounts {
                count: 0,
                completed: 0,
                payload_bytes: 0,
                delivered_bytes: 0,
            });
            t.count += 1;
            t.payload_bytes += f.def.size;
            t.delivered_bytes += f.delivered;
            if f.packets_sent > 0 {
                first_start =
                    Some(first_start.map_or(f.def.start.0, |s: u64| s.min(f.def.start.0)));
            }
            match f
                .finish
                .filter(|_| !matches!(f.outcome, crate::sim::Outcome::Failed(_)))
            {
                Some(fin) => {
                    t.completed += 1;
                    last_delivery = last_delivery.max(f.landed.unwrap_or(fin).0);
                }
                None => unfinished_transfers = true,
            }
            continue;
        }
        counts.payload_bytes += f.def.size;
        counts.delivered_bytes += f.delivered;
        let b = SIZE_BUCKETS
            .iter()
            .position(|(_, hi)| f.def.size <= *hi)
            .unwrap_or(SIZE_BUCKETS.len() - 1);
        buckets[b].1 += 1;
        if f.packets_sent > 0 {
            first_start = Some(first_start.map_or(f.def.start.0, |s: u64| s.min(f.def.start.0)));
        }
        let failed = matches!(f.outcome, crate::sim::Outcome::Failed(_));
        if failed {
            counts.failed += 1;
        }
        match f.finish.filter(|_| !failed) {
            Some(fin) => {
                counts.completed += 1;
                buckets[b].2 += 1;
                let fct = fin.0 - f.def.start.0;
                let slow = fct as f64 / f.ideal.0.max(1) as f64;
                all.add(fct, slow, true);
                buckets[b].0.add(fct, slow, true);
                per_flow_gbps.push(f.def.size as f64 * 8.0 / (fct as f64 / 1e12) / 1e9);
                last_delivery = last_delivery.max(f.landed.unwrap_or(fin).0);
            }
            None => {
                counts.incomplete += 1;
                // Started and not finished (still running at the end, or failed): its
                // FCT is at least what it had run, and at least its ideal FCT (a lower
                // bound either way). A flow that never started (its start after the
                // end, or waiting on another) has no FCT.
                let started = f.def.start <= out.end && (f.def.after.is_none() || f.started);
                if started {
                    let ran = out
                        .end
                        .0
                        .saturating_sub(f.def.start.0)
                        .max(f.ideal.0)
                        .max(1);
                    let slow = ran as f64 / f.ideal.0.max(1) as f64;
                    all.add(ran, slow, false);
                    buckets[b].0.add(ran, slow, false);
                }
            }
        }
    }
    per_flow_gbps.sort_by(f64::total_cmp);
    // Span: first start to last delivery, or to the end of the run when flows are left.
    let span_end = if counts.incomplete > 0 || unfinished_transfers {
        out.end.0
    } else {
        last_delivery
    };
    let span_ps = first_start.map_or(0, |s| span_end.saturating_sub(s));
    let aggregate = if span_ps > 0 {
        all_delivered as f64 * 8.0 / (span_ps as f64 / 1e12) / 1e9
    } else {
        0.0
    };
    let goodput = Goodput {
        aggregate: r4(aggregate),
        per_flow_mean: r4(if per_flow_gbps.is_empty() {
            0.0
        } else {
            per_flow_gbps.iter().sum::<f64>() / per_flow_gbps.len() as f64
        }),
        per_flow_p50: r4(per_flow_gbps
            .get(per_flow_gbps.len().saturating_sub(1) / 2)
            .copied()
            .unwrap_or(0.0)),
        per_flow_min: r4(per_flow_gbps.first().copied().unwrap_or(0.0)),
    };

    // Ports by tier.
    let run_s = out.end.0 as f64 / 1e12;
    let mut drops = Drops {
        packets: 0,
        bytes: 0,
        buffer_full: 0,
        dynamic_threshold: 0,
        port_limit: 0,
        host_to_leaf: 0,
        leaf_to_spine: 0,
        spine_to_leaf: 0,
        leaf_to_host: 0,
    };
    let mut tiers = Vec::new();
    for tier in Tier::ALL {
        let mut ts = TierSummary {
            tier,
            ports: 0,
            tx_bytes: 0,
            util_mean: 0.0,
            util_max: 0.0,
            queue_max_bytes: 0,
            queue_p99_bytes: 0,
            drops: 0,
        };
        let mut hist: Option<Histogram<u32>> = None;
        let mut util_sum = 0.0;
        for p in out.ports.iter().filter(|p| p.tier == tier) {
            ts.ports += 1;
            ts.tx_bytes += p.tx_bytes;
            let u = port_utilisation(p.tx_bytes, p.link.rate.0, run_s);
            util_sum += u;
            ts.util_max = ts.util_max.max(u);
            ts.queue_max_bytes = ts.queue_max_bytes.max(p.max_queue_bytes);
            ts.drops += p.dropped_packets();
            if let Some(h) = p.queue_histogram() {
                match &mut hist {
                    None => hist = Some(h),
                    Some(acc) => acc.add(&h).expect("same bounds"),
                }
            }
            for r in DropReason::ALL {
                let n = p.drops[r as usize];
                match r {
                    DropReason::BufferFull => drops.buffer_full += n,
                    DropReason::DynamicThreshold => drops.dynamic_threshold += n,
                    DropReason::PortLimit => drops.port_limit += n,
                }
            }
            drops.bytes += p.drop_bytes;
        }
        if ts.ports == 0 {
            continue;
        }
        ts.util_mean = r4(util_sum / ts.ports as f64);
        ts.util_max = r4(ts.util_max);
        ts.queue_p99_bytes = hist
            .filter(|h| !h.is_empty())
            .map_or(0, |h| {
                h.value_at_quantile(0.99) * crate::components::CELL_BYTES
            })
            .min(ts.queue_max_bytes);
        match tier {
            Tier::HostToLeaf => drops.host_to_leaf = ts.drops,
            Tier::LeafToSpine => drops.leaf_to_spine = ts.drops,
            Tier::SpineToLeaf => drops.spine_to_leaf = ts.drops,
            Tier::LeafToHost => drops.leaf_to_host = ts.drops,
        }
        drops.packets += ts.drops;
        tiers.push(ts);
    }

    let drops_packets = drops.packets;
    Summary {
        scenario: sc.name.clone(),
        seed: sc.seed,
        topology: TopologySummary {
            hosts: topo.hosts(),
            leaves: topo.leaves,
            spines: topo.spines,
            hosts_per_leaf: topo.hosts_per_leaf,
            leaf_hosts: (!topo.first_host.is_empty())
                .then(|| (0..topo.leaves).map(|l| topo.hosts_on(l)).collect()),
            links_per_spine: topo.links_per_spine,
            planes: topo.planes,
            host_link_gbps: topo.host_link.rate.gbps_f64(),
            fabric_link_gbps: topo.fabric_link.rate.gbps_f64(),
            oversubscription: topo.oversubscription().map(r4),
        },
        routing: sc.routing.policy.name(),
        mtu_bytes: sc.mtu,
        encapsulation: sc.encapsulation.name(),
        sim_time_us: r4(out.end.as_us_f64()),
        stopped_by_duration: out.stopped_by_duration,
        stalled: out.stalled,
        watchdog: out.watchdog.map(|w| WatchdogSummary {
            stopped_at_us: r4(w.at.as_us_f64()),
            last_progress_us: r4(w.since.as_us_f64()),
            bound_us: r4(w.bound.0 as f64 / 1e6),
        }),
        flows: counts,
        transfers,
        fct_us: all.fct_us(),
        slowdown: all.slowdown(),
        by_size: SIZE_BUCKETS
            .iter()
            .zip(&buckets)
            .map(|((name, _), (acc, count, completed))| SizeBucket {
                bucket: name,
                count: *count,
                completed: *completed,
                fct_us: acc.fct_us(),
                slowdown: acc.slowdown(),
            })
            .collect(),
        goodput_gbps: goodput,
        drops,
        tiers,
        packets_sent,
        peak_packets_in_flight: out.peak_packets_in_flight,
        rc: match (&sc.transport, &out.rc) {
            (crate::scenario::Transport::Rc(c), Some(t)) => Some(RcSummary {
                operation: match c.operation {
                    crate::transport::rc::Op::Write => "write",
                    crate::transport::rc::Op::Send => "send",
                    crate::transport::rc::Op::Read => "read",
                },
                timeout: c.params.timeout,
                retry_cnt: c.params.retry_cnt,
                first_transmissions: t.first_transmissions,
                retransmitted_packets: t.retransmissions,
                retransmission_rate: if t.first_transmissions > 0 {
                    (t.retransmissions as f64 / t.first_transmissions as f64 * 1e8).round() / 1e8
                } else {
                    0.0
                },
                timeouts: t.timeouts,
                seq_naks: t.seq_naks,
                rnr_naks: t.rnr_naks,
                qp_errors: t.qp_errors,
                duplicate_packets: t.duplicate_packets,
                acks_sent: t.acks_sent,
            }),
            _ => None,
        },
        faults: FaultSummary {
            corrupted_packets: out.faults.corrupted,
            random_drops: out.faults.random_drops,
            flap_drops: out.faults.flap_drops,
        },
        ecn: EcnSummary {
            marked_packets: out.ports.iter().map(|p| p.ecn_marked).sum(),
        },
        flow_control: sc.flow_control.name(),
        pfc: {
            let mut t = PerTierUs::default();
            for p in &out.ports {
                t.add(p.tier, p.paused_time(out.end) as f64 / 1e6);
            }
            PfcSummary {
                pause_frames: out.ingress.iter().map(|i| i.pause_frames()).sum(),
                pauses: out.ingress.iter().map(|i| i.pauses).sum(),
                refreshes: out.ingress.iter().map(|i| i.refreshes).sum(),
                resumes: out.ingress.iter().map(|i| i.resumes).sum(),
                paused_time_us: t.round(),
            }
        },
        credit: {
            let mut t = PerTierUs::default();
            for p in &out.ports {
                t.add(p.tier, p.stalled_time(out.end) as f64 / 1e6);
            }
            CreditSummary {
                stall_time_us: t.round(),
            }
        },
        cc: sc.cc.map(|c| CcSummary {
            algorithm: c.name(),
            cnps_sent: out.cc.cnps_sent,
            cnps_received: out.cc.cnps_received,
            rate_cuts: out.cc.rate_cuts,
        }),
        events: out.events,
        host: out
            .host
            .as_ref()
            .map(|h| host::summarize_host(h, &out.flows, out.retired.host.as_ref())),
        collectives: out
            .collectives
            .iter()
            .map(crate::collective::summarize)
            .collect(),
        training: out
            .training
            .iter()
            .map(crate::training::summary::summarize)
            .collect(),
        invariants: invariants::check(sc, out, drops_packets),
    }
}

/// Share of the run a port spent serializing.
pub fn port_utilisation(tx_bytes: u64, rate_bps: u64, run_s: f64) -> f64 {
    if run_s <= 0.0 {
        return 0.0;
    }
    (tx_bytes as f64 * 8.0 / rate_bps as f64 / run_s).min(1.0)
}

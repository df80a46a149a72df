//! The `host` section of `summary.json`: interrupts, CPU time, PCIe traffic and each
//! message's latency broken into its pipeline stages (`components::host`).
//!
//! Rates and shares are over each host's active span: from its NICs' first activity (a
//! post, or a message arriving) to their last completion handled, so that a host that
//! finishes early is not diluted by the rest of the run. CPU shares are of the host's
//! cores: per-operation costs summed, plus one core per NIC that spins (a polling thread
//! in the `cpu`/`cpu_gdr` modes, the proxy thread in `cpu_proxy`) over the NIC's active
//! span. A polling thread also posts and launches copies, so its spinning share is what
//! is left of its core after those.

use super::r4;
use crate::nic::config::{HostConfig, ModerationConfig, Notify};
use crate::sim::{
    HostOutput, CPU_COPIES, CPU_INTERRUPTS, CPU_POLLING, CPU_POSTING, CPU_PROXY, STAGES, T_DONE,
    T_START,
};
use crate::units::SimTime;
use hdrhistogram::Histogram;
use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MeanMax {
    pub mean: f64,
    pub max: f64,
}

/// One stage's time over the messages that completed, us.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StageStat {
    pub stage: &'static str,
    pub mean_us: f64,
    pub p99_us: f64,
}

/// Share of a host's cores spent on networking, by what it was spent on (fractions).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CpuUtil {
    pub mean: f64,
    pub max: f64,
    /// Mean over hosts of each category's share.
    pub posting: f64,
    pub interrupts: f64,
    pub copies: f64,
    pub polling: f64,
    pub proxy: f64,
}

/// One workload item's messages, and the busiest of the hosts it uses.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WorkloadHost {
    pub workload: u16,
    pub messages: u64,
    pub latency_mean_us: f64,
    pub latency_p99_us: f64,
    pub messages_per_s: f64,
    /// Over the hosts this item's messages leave or reach.
    pub interrupts_per_s_max: f64,
    pub cpu_util_max: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HostSummary {
    pub posting: &'static str,
    pub memory: String,
    pub completion: String,
    pub hosts: u32,
    pub cores_per_host: u32,
    pub nics_per_host: u32,
    /// Messages that reached their receiver's application.
    pub messages: u64,
    /// Messages per second, between the first and the last one done.
    pub messages_per_s: f64,
    /// From the application wanting to send to the receiver's application having the
    /// data, us.
    pub latency_us: Option<super::Percentiles>,
    /// The same latency, stage by stage; the stage means add up to the mean latency.
    pub breakdown: Vec<StageStat>,
    pub completions: u64,
    pub interrupts: u64,
    /// Interrupts per second per host, over its active span.
    pub interrupts_per_s: MeanMax,
    pub cpu_util: CpuUtil,
    /// Busiest interrupt-handling core: the share of one core a NIC's interrupts take
    /// (what `top` shows for ksoftirqd and hard IRQs on that core).
    pub interrupt_core_max: f64,
    pub doorbells: u64,
    pub wqe_fetches: u64,
    pub pcie_bytes: u64,
    pub moderation_level_changes: u64,
    pub by_workload: Vec<WorkloadHost>,
}

fn completion_name(cfg: &HostConfig) -> String {
    match &cfg.notify {
        Notify::Poll => "poll".into(),
        Notify::Interrupt(ModerationConfig::Off) => "interrupt (no moderation)".into(),
        Notify::Interrupt(ModerationConfig::Adaptive) => "interrupt (adaptive)".into(),
        Notify::Interrupt(ModerationConfig::Fixed(m)) => {
            format!("interrupt ({} / {})", m.usecs, m.frames)
        }
    }
}

/// Each server's NICs (a server's NIC ports need not be consecutive: `wiring: rail`).
fn by_server(h: &HostOutput) -> Vec<Vec<&crate::sim::NicStats>> {
    let mut v: Vec<Vec<&crate::sim::NicStats>> = vec![Vec::new(); h.cfg.servers as usize];
    for (port, n) in h.nics.iter().enumerate() {
        v[h.cfg.server_of(port as u32) as usize].push(n);
    }
    v
}

/// CPU time per category for each host (ps), polling and proxy cores included.
pub fn cpu_ps_per_host(h: &HostOutput) -> Vec<[u64; 5]> {
    by_server(h)
        .iter()
        .map(|nics| {
            let mut t = [0u64; 5];
            for n in nics {
                for (c, v) in n.cpu_ps.iter().enumerate() {
                    t[c] += v;
                }
                let occupied = n
                    .first_activity
                    .map_or(0, |f| n.last_activity.0.max(f.0) - f.0);
                if n.poll_core {
                    let own = n.cpu_ps[CPU_POSTING] + n.cpu_ps[CPU_COPIES];
                    t[CPU_POLLING] += occupied.saturating_sub(own);
                }
                if n.proxy_core {
                    t[CPU_PROXY] += occupied;
                }
            }
            t
        })
        .collect()
}

fn latency_hist() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 1 << 50, 3).expect("hist")
}

/// Count, sum, p99 and rate of a set of done messages' latencies, folded one message at
/// a time in any order (integer sums, a histogram, min and max).
#[derive(Debug, Clone)]
struct LatencyAcc {
    hist: Histogram<u64>,
    n: u64,
    sum: u128,
    first: u64,
    last: u64,
}

impl LatencyAcc {
    fn new() -> LatencyAcc {
        LatencyAcc {
            hist: latency_hist(),
            n: 0,
            sum: 0,
            first: u64::MAX,
            last: 0,
        }
    }

    fn add(&mut self, m: &crate::sim::MsgTimes) {
        if !m.done() {
            return;
        }
        let lat = m.t[T_DONE] - m.t[T_START];
        self.hist.saturating_record(lat.div_ceil(1000).max(1));
        self.sum += lat as u128;
        self.n += 1;
        self.first = self.first.min(m.t[T_DONE]);
        self.last = self.last.max(m.t[T_DONE]);
    }

    /// Adds what `other` folded (the same figures as folding its messages here).
    fn merge(&mut self, other: &LatencyAcc) {
        self.hist
            .add(&other.hist)
            .expect("latency histograms of one shape");
        self.n += other.n;
        self.sum += other.sum;
        self.first = self.first.min(other.first);
        self.last = self.last.max(other.last);
    }

    /// Count, mean (us), p99 (us) and rate (messages/s).
    fn finish(&self) -> (u64, f64, f64, f64) {
        let n = self.n;
        if n == 0 {
            return (0, 0.0, 0.0, 0.0);
        }
        let rate = if n >= 2 && self.last > self.first {
            r4((n - 1) as f64 / ((self.last - self.first) as f64 / 1e12))
        } else {
            0.0
        };
        (
            n,
            r4(self.sum as f64 / n as f64 / 1e6),
            r4(self.hist.value_at_quantile(0.99) as f64 / 1e3),
            rate,
        )
    }
}

/// A workload item's messages: their latencies and the servers they touched.
#[derive(Debug, Clone)]
struct WorkloadAcc {
    lat: LatencyAcc,
    used: Vec<bool>,
}

/// Everything `summarize_host` reads of the messages, folded one message at a time in
/// any order, so that messages retired during a run (a collective's transfers,
/// `sim::retire`) and those still held at its end give the same figures as one pass
/// over all of them.
#[derive(Debug, Clone)]
pub struct MsgAcc {
    /// Every done message's latency, and the longest.
    all: LatencyAcc,
    max: u64,
    stage_hist: Vec<Histogram<u64>>,
    stage_sum: [u128; 9],
    /// Per workload item seen (`None`: no message of it yet).
    by_workload: Vec<Option<WorkloadAcc>>,
}

impl Default for MsgAcc {
    fn default() -> Self {
        MsgAcc::new()
    }
}

impl MsgAcc {
    pub fn new() -> MsgAcc {
        MsgAcc {
            all: LatencyAcc::new(),
            max: 0,
            stage_hist: STAGES.iter().map(|_| latency_hist()).collect(),
            stage_sum: [0; 9],
            by_workload: Vec::new(),
        }
    }

    /// Adds what `other` folded (a split run's partitions each fold the transfers they
    /// retire: `sim::parallel_coll`); folding is order-free, so this is the fold of both.
    pub fn merge(&mut self, other: &MsgAcc) {
        self.all.merge(&other.all);
        self.max = self.max.max(other.max);
        for (h, o) in self.stage_hist.iter_mut().zip(&other.stage_hist) {
            h.add(o).expect("stage histograms of one shape");
        }
        for (s, o) in self.stage_sum.iter_mut().zip(&other.stage_sum) {
            *s += o;
        }
        if self.by_workload.len() < other.by_workload.len() {
            self.by_workload.resize(other.by_workload.len(), None);
        }
        for (w, o) in self.by_workload.iter_mut().zip(&other.by_workload) {
            let Some(o) = o else {
                continue;
            };
            match w {
                None => *w = Some(o.clone()),
                Some(w) => {
                    w.lat.merge(&o.lat);
                    for (u, x) in w.used.iter_mut().zip(&o.used) {
                        *u |= x;
                    }
                }
            }
        }
    }

    /// Folds `f`'s message `m`; `nics` NIC ports, servers and wiring from `cfg`.
    pub fn add(
        &mut self,
        cfg: &HostConfig,
        nics: usize,
        f: &crate::sim::FlowState,
        m: &crate::sim::MsgTimes,
    ) {
        let w = f.def.workload as usize;
        if self.by_workload.len() <= w {
            self.by_workload.resize(w + 1, None);
        }
        let acc = self.by_workload[w].get_or_insert_with(|| WorkloadAcc {
            lat: LatencyAcc::new(),
            used: vec![false; cfg.servers as usize],
        });
        acc.lat.add(m);
        // Switches (in-network aggregation endpoints) are not hosts.
        for end in [f.def.src, f.def.dst] {
            if (end as usize) < nics {
                acc.used[cfg.server_of(end) as usize] = true;
            }
        }
        if !m.done() {
            return;
        }
        self.all.add(m);
        self.max = self.max.max(m.t[T_DONE] - m.t[T_START]);
        for (i, hs) in self.stage_hist.iter_mut().enumerate() {
            let d = m.t[i + 1] - m.t[i];
            self.stage_sum[i] += d as u128;
            hs.saturating_record(d.div_ceil(1000).max(1));
        }
    }
}

/// `retired`: the messages retired during the run (`RunOutput::retired`), if any.
pub fn summarize_host(
    h: &HostOutput,
    flows: &[crate::sim::FlowState],
    retired: Option<&MsgAcc>,
) -> HostSummary {
    let cfg = &h.cfg;
    let servers = by_server(h);
    let hosts = servers.len();
    // Each host's active span, ps (at least 1).
    let spans: Vec<f64> = servers
        .iter()
        .map(|n| {
            let first = n.iter().filter_map(|x| x.first_activity).min();
            let last = n
                .iter()
                .map(|x| x.last_activity)
                .max()
                .unwrap_or(SimTime::ZERO);
            first.map_or(1.0, |f| (last.0.saturating_sub(f.0)).max(1) as f64)
        })
        .collect();
    let per_host = cpu_ps_per_host(h);
    let share = |i: usize, ps: u64| ps as f64 / (cfg.cores as f64 * spans[i]);
    let shares: Vec<f64> = per_host
        .iter()
        .enumerate()
        .map(|(i, t)| share(i, t.iter().sum::<u64>()))
        .collect();
    let cat = |c: usize| {
        r4(per_host
            .iter()
            .enumerate()
            .map(|(i, t)| share(i, t[c]))
            .sum::<f64>()
            / hosts.max(1) as f64)
    };
    let irq_rates: Vec<f64> = servers
        .iter()
        .enumerate()
        .map(|(i, n)| n.iter().map(|x| x.interrupts).sum::<u64>() as f64 / (spans[i] / 1e12))
        .collect();
    let mean = |v: &[f64]| r4(v.iter().sum::<f64>() / v.len().max(1) as f64);
    let max = |v: &[f64]| r4(v.iter().copied().fold(0.0, f64::max));

    // Latency and its stages over the messages that are done: those retired during the
    // run, folded then, and those held at its end.
    let mut acc = retired.cloned().unwrap_or_default();
    for (f, m) in flows.iter().zip(&h.msgs) {
        acc.add(cfg, h.nics.len(), f, m);
    }
    let MsgAcc {
        all,
        max: total_max,
        stage_hist,
        stage_sum,
        by_workload,
    } = acc;
    let (n, _, _, messages_per_s) = all.finish();
    let by_workload = by_workload
        .into_iter()
        .enumerate()
        .filter_map(|(w, a)| {
            let a = a?;
            let (messages, mean, p99, rate) = a.lat.finish();
            let pick = |v: &[f64]| {
                r4(v.iter()
                    .zip(&a.used)
                    .filter(|(_, u)| **u)
                    .map(|(x, _)| *x)
                    .fold(0.0, f64::max))
            };
            Some(WorkloadHost {
                workload: w as u16,
                messages,
                latency_mean_us: mean,
                latency_p99_us: p99,
                messages_per_s: rate,
                interrupts_per_s_max: pick(&irq_rates),
                cpu_util_max: pick(&shares),
            })
        })
        .collect();
    let breakdown = STAGES
        .iter()
        .enumerate()
        .map(|(i, s)| StageStat {
            stage: s,
            mean_us: if n == 0 {
                0.0
            } else {
                r4(stage_sum[i] as f64 / n as f64 / 1e6)
            },
            p99_us: if n == 0 || stage_sum[i] == 0 {
                0.0
            } else {
                r4(stage_hist[i].value_at_quantile(0.99) as f64 / 1e3)
            },
        })
        .collect();
    HostSummary {
        posting: cfg.posting.name(),
        memory: cfg.memory_name(),
        completion: completion_name(cfg),
        hosts: hosts as u32,
        cores_per_host: cfg.cores,
        nics_per_host: cfg.nics_per_host,
        messages: n,
        messages_per_s,
        latency_us: super::Percentiles::from_hist(
            &all.hist,
            all.sum as f64 / 1000.0,
            total_max as f64 / 1000.0,
            1000.0,
        ),
        breakdown,
        completions: h.nics.iter().map(|x| x.completions).sum(),
        interrupts: h.nics.iter().map(|x| x.interrupts).sum(),
        interrupts_per_s: MeanMax {
            mean: mean(&irq_rates),
            max: max(&irq_rates),
        },
        cpu_util: CpuUtil {
            mean: mean(&shares),
            max: max(&shares),
            posting: cat(CPU_POSTING),
            interrupts: cat(CPU_INTERRUPTS),
            copies: cat(CPU_COPIES),
            polling: cat(CPU_POLLING),
            proxy: cat(CPU_PROXY),
        },
        interrupt_core_max: r4(h
            .nics
            .iter()
            .map(|x| {
                let span = x
                    .first_activity
                    .map_or(1, |f| x.last_activity.0.saturating_sub(f.0).max(1));
                x.cpu_ps[CPU_INTERRUPTS] as f64 / span as f64
            })
            .fold(0.0, f64::max)),
        doorbells: h.nics.iter().map(|x| x.doorbells).sum(),
        wqe_fetches: h.nics.iter().map(|x| x.wqe_fetches).sum(),
        pcie_bytes: h.nics.iter().map(|x| x.pcie_bytes).sum(),
        moderation_level_changes: h.nics.iter().map(|x| x.moderation_level_changes).sum(),
        by_workload,
    }
}

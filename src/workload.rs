//! Workloads: what traffic a scenario offers, expanded into a list of flows before the run.
//!
//! Models: explicit flows; a permutation (every host sends to a distinct other host: a
//! random derangement by Sattolo's algorithm); an N:1 incast; all-to-all; and open-loop
//! Poisson arrivals at a fraction of the host link rate with a flow-size distribution
//! (fixed, uniform, or an empirical CDF: the web-search CDF of DCTCP, Alizadeh et al.
//! SIGCOMM 2010, and the Facebook Hadoop CDF of Roy et al. SIGCOMM 2015, both as
//! distributed with the HPCC simulator's `traffic_gen/`, built in; or a CDF file in the
//! same `size_bytes cumulative_percent` format, linearly interpolated).
//!
//! Every random choice draws from the workload item's own stream (per sending host for
//! Poisson), so results are reproducible for a seed. Leaves out: closed-loop workloads and
//! collectives (a later issue).

use crate::rng::{stream, Stream};
use crate::spec::NonZeroSize;
use crate::units::{Bytes, SimDuration, SimTime};
use rand::Rng;
use rand_distr::{Distribution, Exp};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// A flow-size distribution: `websearch`, `hadoop`, `{ fixed: 4KB }`,
/// `{ uniform: [1KB, 64KB] }` or `{ cdf_file: path }`.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeDistSpec {
    WebSearch,
    Hadoop,
    Fixed(Bytes),
    Uniform(Bytes, Bytes),
    CdfFile(String),
}

impl<'de> Deserialize<'de> for SizeDistSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str =
            "`websearch`, `hadoop`, `{ fixed: SIZE }`, `{ uniform: [MIN, MAX] }` or `{ cdf_file: PATH }`";
        impl<'de> Visitor<'de> for V {
            type Value = SizeDistSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<SizeDistSpec, E> {
                match s {
                    "websearch" => Ok(SizeDistSpec::WebSearch),
                    "hadoop" => Ok(SizeDistSpec::Hadoop),
                    _ => Err(E::custom(format!(
                        "unknown size distribution `{s}`, expected {EXPECTED}"
                    ))),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<SizeDistSpec, A::Error> {
                let key: String = m
                    .next_key()?
                    .ok_or_else(|| de::Error::custom(format!("expected {EXPECTED}")))?;
                let v = match key.as_str() {
                    "fixed" => SizeDistSpec::Fixed(m.next_value::<NonZeroSize>()?.0),
                    "uniform" => {
                        let [a, b]: [NonZeroSize; 2] = m.next_value()?;
                        SizeDistSpec::Uniform(a.0, b.0)
                    }
                    "cdf_file" => SizeDistSpec::CdfFile(m.next_value()?),
                    other => {
                        return Err(de::Error::unknown_field(
                            other,
                            &["fixed", "uniform", "cdf_file"],
                        ))
                    }
                };
                if let Some(extra) = m.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "a size distribution takes one key, found a second `{extra}`"
                    )));
                }
                Ok(v)
            }
        }
        d.deserialize_any(V)
    }
}

/// A flow given explicitly.
#[derive(Clone, Debug, PartialEq)]
pub struct ExplicitFlow {
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub start: SimDuration,
}

/// One validated workload item.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    Flows(Vec<ExplicitFlow>),
    Permutation {
        size: u64,
        start: SimDuration,
    },
    Incast {
        senders: u32,
        receiver: u32,
        size: u64,
        start: SimDuration,
    },
    AllToAll {
        size: u64,
        start: SimDuration,
    },
    /// `count` messages, one every `interval`.
    Stream {
        src: u32,
        dst: u32,
        size: u64,
        count: u32,
        interval: SimDuration,
        start: SimDuration,
    },
    /// A collective over GPU ranks: its transfers are made during the run
    /// (`collective::CollectiveRun`), not here.
    Collective(Box<crate::collective::Collective>),
    /// Training steps (`training::TrainingRun`): their collectives and sends are made
    /// during the run.
    Training(Box<crate::training::TrainingConfig>),
    /// `iterations` round trips between `hosts[0]` and `hosts[1]`.
    PingPong {
        hosts: [u32; 2],
        size: u64,
        iterations: u32,
        start: SimDuration,
    },
    Poisson {
        /// Offered payload load per sender as a fraction of its host link rate.
        load: f64,
        dist: SizeDist,
        start: SimDuration,
        until: SimDuration,
        src_hosts: Vec<u32>,
        dst_hosts: Vec<u32>,
    },
}

impl Workload {
    /// Largest flow it can make, bytes.
    pub fn max_size(&self) -> u64 {
        match self {
            Workload::Flows(list) => list.iter().map(|x| x.size).max().unwrap_or(0),
            Workload::Permutation { size, .. }
            | Workload::Incast { size, .. }
            | Workload::AllToAll { size, .. }
            | Workload::Stream { size, .. }
            | Workload::PingPong { size, .. } => *size,
            Workload::Poisson { dist, .. } => dist.max(),
            Workload::Collective(c) => c.sizes.iter().copied().max().unwrap_or(0),
            Workload::Training(t) => t.collective.chunk,
        }
    }

    /// How many flows it expands to on `hosts` hosts (Poisson: the expected number of
    /// arrivals at `host_rate_bps`).
    pub fn expected_flows(&self, hosts: u32, host_rate_bps: u64) -> f64 {
        let h = hosts as f64;
        match self {
            Workload::Flows(list) => list.len() as f64,
            Workload::Permutation { .. } => h,
            Workload::Incast { senders, .. } => *senders as f64,
            Workload::AllToAll { .. } => h * (h - 1.0),
            Workload::Stream { count, .. } => *count as f64,
            Workload::PingPong { iterations, .. } => 2.0 * *iterations as f64,
            Workload::Training(t) => t.transfers_estimate(),
            Workload::Collective(c) => {
                // Upper bound: every rank sends 2(n - 1) pieces per loop per channel.
                let n = h.max(2.0);
                let loops: f64 = c
                    .sizes
                    .iter()
                    .map(|&s| (s as f64 / (c.chunk as f64 * n)).ceil().max(1.0))
                    .sum();
                n * 2.0 * (n - 1.0) * loops * c.channels as f64 * (c.iters + c.warmup_iters) as f64
            }
            Workload::Poisson {
                load,
                dist,
                start,
                until,
                src_hosts,
                ..
            } => {
                load * host_rate_bps as f64 / (8.0 * dist.mean())
                    * until.0.saturating_sub(start.0) as f64
                    / 1e12
                    * src_hosts.len() as f64
            }
        }
    }

    /// Payload bytes it moves on `hosts` hosts (Poisson: the expected arrivals' bytes at
    /// `host_rate_bps`; a collective: what a ring moves, 2 (n - 1) x size for an
    /// allreduce of n ranks and (n - 1) x size otherwise, per operation).
    pub fn expected_bytes(&self, hosts: u32, host_rate_bps: u64) -> f64 {
        let h = hosts as f64;
        match self {
            Workload::Flows(list) => list.iter().map(|f| f.size as f64).sum(),
            Workload::Permutation { size, .. } => h * *size as f64,
            Workload::Incast { senders, size, .. } => *senders as f64 * *size as f64,
            Workload::AllToAll { size, .. } => h * (h - 1.0) * *size as f64,
            Workload::Stream { count, size, .. } => *count as f64 * *size as f64,
            Workload::PingPong {
                iterations, size, ..
            } => 2.0 * *iterations as f64 * *size as f64,
            Workload::Training(t) => t.bytes_estimate(),
            Workload::Collective(c) => {
                let n = c.ranks.map_or(h, |r| r as f64).max(2.0);
                let per = match c.op {
                    crate::collective::CollectiveOp::Allreduce => 2.0 * (n - 1.0),
                    _ => n - 1.0,
                };
                let ops = (c.iters + c.warmup_iters) as f64;
                c.sizes.iter().map(|&s| per * s as f64 * ops).sum()
            }
            Workload::Poisson {
                load,
                start,
                until,
                src_hosts,
                ..
            } => {
                load * host_rate_bps as f64 / 8.0 * until.0.saturating_sub(start.0) as f64 / 1e12
                    * src_hosts.len() as f64
            }
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Workload::Flows(_) => "flows",
            Workload::Permutation { .. } => "permutation",
            Workload::Incast { .. } => "incast",
            Workload::AllToAll { .. } => "all_to_all",
            Workload::Poisson { .. } => "poisson",
            Workload::Stream { .. } => "stream",
            Workload::PingPong { .. } => "ping_pong",
            Workload::Collective(_) => "collective",
            Workload::Training(_) => "training",
        }
    }
}

/// A flow-size distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    Fixed(u64),
    /// Uniform on [min, max] bytes.
    Uniform(u64, u64),
    /// Piecewise-linear CDF: (size bytes, cumulative fraction in [0, 1]).
    Empirical {
        name: String,
        points: Vec<(f64, f64)>,
    },
}

const WEBSEARCH: &str = include_str!("data/websearch_cdf.txt");
const HADOOP: &str = include_str!("data/hadoop_cdf.txt");

impl SizeDist {
    /// Resolves a spec; a relative `cdf_file` is read from `base_dir`.
    pub fn from_spec(spec: &SizeDistSpec, base_dir: &std::path::Path) -> Result<SizeDist, String> {
        Ok(match spec {
            SizeDistSpec::WebSearch => parse_cdf("websearch", WEBSEARCH)?,
            SizeDistSpec::Hadoop => parse_cdf("hadoop", HADOOP)?,
            SizeDistSpec::Fixed(b) => SizeDist::Fixed(b.0),
            SizeDistSpec::Uniform(a, b) => {
                if a.0 > b.0 {
                    return Err(format!("uniform sizes need min <= max, found [{a}, {b}]"));
                }
                SizeDist::Uniform(a.0, b.0)
            }
            SizeDistSpec::CdfFile(path) => {
                let full = base_dir.join(path);
                let text = crate::spec::read_text_file(&full, crate::spec::MAX_CDF_FILE)
                    .map_err(|e| format!("cannot read CDF file `{}`: {e}", full.display()))?;
                parse_cdf(path, &text)?
            }
        })
    }

    pub fn name(&self) -> String {
        match self {
            SizeDist::Fixed(b) => format!("fixed {b} B"),
            SizeDist::Uniform(a, b) => format!("uniform [{a}, {b}] B"),
            SizeDist::Empirical { name, .. } => name.clone(),
        }
    }

    /// Largest size it can draw, bytes.
    pub fn max(&self) -> u64 {
        match self {
            SizeDist::Fixed(b) | SizeDist::Uniform(_, b) => *b,
            SizeDist::Empirical { points, .. } => points[points.len() - 1].0.round() as u64,
        }
    }

    /// Mean size in bytes (for the empirical CDF: of the piecewise-linear interpolation).
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(b) => *b as f64,
            SizeDist::Uniform(a, b) => (*a as f64 + *b as f64) / 2.0,
            SizeDist::Empirical { points, .. } => {
                let mut m = points[0].0 * points[0].1;
                for w in points.windows(2) {
                    m += (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0;
                }
                m
            }
        }
    }

    /// Draws a size in bytes (at least 1).
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        match self {
            SizeDist::Fixed(b) => *b,
            SizeDist::Uniform(a, b) => rng.gen_range(*a..=*b),
            SizeDist::Empirical { points, .. } => {
                let u: f64 = rng.gen();
                sample_cdf(points, u)
            }
        }
    }
}

/// Inverse of the piecewise-linear CDF at `u` in [0, 1).
fn sample_cdf(points: &[(f64, f64)], u: f64) -> u64 {
    let mut size = points[points.len() - 1].0;
    if u < points[0].1 {
        size = points[0].0;
    } else {
        for w in points.windows(2) {
            let ((s0, p0), (s1, p1)) = (w[0], w[1]);
            if u < p1 {
                size = if p1 > p0 {
                    s0 + (u - p0) / (p1 - p0) * (s1 - s0)
                } else {
                    s1
                };
                break;
            }
        }
    }
    (size.round() as u64).max(1)
}

/// Parses `size_bytes cumulative_percent` lines (blank lines and `#` comments skipped).
pub fn parse_cdf(name: &str, text: &str) -> Result<SizeDist, String> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
            return Err(format!(
                "{name} line {}: expected `size_bytes cumulative_percent`",
                i + 1
            ));
        };
        let s: f64 = a
            .parse()
            .map_err(|_| format!("{name} line {}: `{a}` is not a size in bytes", i + 1))?;
        let p: f64 = b
            .parse()
            .map_err(|_| format!("{name} line {}: `{b}` is not a percentage", i + 1))?;
        if !(s.is_finite() && s >= 0.0 && (0.0..=100.0).contains(&p)) {
            return Err(format!(
                "{name} line {}: expected size >= 0 and 0 <= percent <= 100",
                i + 1
            ));
        }
        if let Some(&(ps, pp)) = points.last() {
            if s < ps || p < pp * 100.0 {
                return Err(format!(
                    "{name} line {}: sizes and percentages must not decrease",
                    i + 1
                ));
            }
        }
        points.push((s, p / 100.0));
    }
    let dist = match points.last() {
        None => return Err(format!("{name}: no points")),
        Some(&(s, p)) if (p - 1.0).abs() > 1e-9 || s < 1.0 => {
            return Err(format!(
                "{name}: the last point must reach 100 percent at a size of at least 1 byte"
            ))
        }
        _ => SizeDist::Empirical {
            name: name.to_string(),
            points,
        },
    };
    // Draws are at least 1 byte; a CDF whose mass sits below that has no meaningful mean.
    if dist.mean() < 1.0 {
        return Err(format!("{name}: the mean flow size is below 1 byte"));
    }
    Ok(dist)
}

/// A flow to simulate, after expansion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowDef {
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub start: SimTime,
    /// Index of the workload item that made it.
    pub workload: u16,
    /// A flow that starts only when this one (by index) is done: received, and with a
    /// host model, notified and copied back (a ping-pong's reply). Its `start` is then
    /// the earliest it may start.
    pub after: Option<u32>,
}

/// Expands workload items into flows. `host_rate_bps` sizes Poisson arrivals.
pub fn expand(items: &[Workload], hosts: u32, host_rate_bps: u64, seed: u64) -> Vec<FlowDef> {
    let mut flows = Vec::new();
    for (wi, item) in items.iter().enumerate() {
        let w = wi as u16;
        let mut rng = stream(seed, Stream::Workload, wi as u64, u64::MAX);
        let at = |d: SimDuration| SimTime(d.0);
        match item {
            Workload::Flows(list) => flows.extend(list.iter().map(|f| FlowDef {
                src: f.src,
                dst: f.dst,
                size: f.size,
                start: at(f.start),
                workload: w,
                after: None,
            })),
            Workload::Permutation { size, start } => {
                // Sattolo's algorithm: a uniformly random single cycle, so no host sends
                // to itself and every host receives exactly once.
                let mut dst: Vec<u32> = (0..hosts).collect();
                for i in (1..hosts as usize).rev() {
                    let j = rng.gen_range(0..i);
                    dst.swap(i, j);
                }
                for src in 0..hosts {
                    flows.push(FlowDef {
                        src,
                        dst: dst[src as usize],
                        size: *size,
                        start: at(*start),
                        workload: w,
                        after: None,
                    });
                }
            }
            Workload::Incast {
                senders,
                receiver,
                size,
                start,
            } => {
                let mut pool: Vec<u32> = (0..hosts).filter(|h| h != receiver).collect();
                for i in 0..*senders as usize {
                    let j = rng.gen_range(i..pool.len());
                    pool.swap(i, j);
                }
                let mut chosen = pool[..*senders as usize].to_vec();
                chosen.sort_unstable();
                for src in chosen {
                    flows.push(FlowDef {
                        src,
                        dst: *receiver,
                        size: *size,
                        start: at(*start),
                        workload: w,
                        after: None,
                    });
                }
            }
            Workload::AllToAll { size, start } => {
                for src in 0..hosts {
                    for dst in 0..hosts {
                        if src != dst {
                            flows.push(FlowDef {
                                src,
                                dst,
                                size: *size,
                                start: at(*start),
                                workload: w,
                                after: None,
                            });
                        }
                    }
                }
            }
            Workload::Stream {
                src,
                dst,
                size,
                count,
                interval,
                start,
            } => {
                for k in 0..*count as u64 {
                    flows.push(FlowDef {
                        src: *src,
                        dst: *dst,
                        size: *size,
                        start: SimTime(start.0 + k * interval.0),
                        workload: w,
                        after: None,
                    });
                }
            }
            Workload::PingPong {
                hosts: [a, b],
                size,
                iterations,
                start,
            } => {
                for k in 0..2 * *iterations {
                    let (src, dst) = if k % 2 == 0 { (*a, *b) } else { (*b, *a) };
                    let after = (k > 0).then(|| flows.len() as u32 - 1);
                    flows.push(FlowDef {
                        src,
                        dst,
                        size: *size,
                        start: at(*start),
                        workload: w,
                        after,
                    });
                }
            }
            Workload::Collective(_) | Workload::Training(_) => {}
            Workload::Poisson {
                load,
                dist,
                start,
                until,
                src_hosts,
                dst_hosts,
            } => {
                // Arrivals per second so that the mean offered payload is load x rate.
                let lambda = load * host_rate_bps as f64 / (8.0 * dist.mean());
                let exp = Exp::new(lambda).expect("lambda > 0 by validation");
                let mut mine = Vec::new();
                for &src in src_hosts {
                    let dsts: Vec<u32> = dst_hosts.iter().copied().filter(|&d| d != src).collect();
                    if dsts.is_empty() {
                        continue;
                    }
                    let mut rng = stream(seed, Stream::Workload, wi as u64, src as u64);
                    let mut t = start.0 as f64;
                    loop {
                        let gap_s: f64 = exp.sample(&mut rng);
                        t += gap_s * 1e12;
                        if t >= until.0 as f64 {
                            break;
                        }
                        let size = dist.sample(&mut rng);
                        let dst = dsts[rng.gen_range(0..dsts.len())];
                        mine.push(FlowDef {
                            src,
                            dst,
                            size,
                            start: SimTime(t as u64),
                            workload: w,
                            after: None,
                        });
                    }
                }
                // Ordered by arrival time (then sender) so that flow ids follow time.
                mine.sort_by_key(|f| (f.start, f.src));
                flows.extend(mine);
            }
        }
    }
    flows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn websearch() -> SizeDist {
        SizeDist::from_spec(&SizeDistSpec::WebSearch, std::path::Path::new(".")).unwrap()
    }

    #[test]
    fn builtin_cdfs_reproduce_the_published_points() {
        let SizeDist::Empirical { points, .. } = websearch() else {
            panic!()
        };
        assert_eq!(points.len(), 12);
        assert_eq!(points[5], (80000.0, 0.53));
        assert_eq!(points[11], (30_000_000.0, 1.0));
        // The inverse CDF at a published point's percentile returns that point's size.
        assert_eq!(sample_cdf(&points, 0.53), 80000);
        assert_eq!(sample_cdf(&points, 0.90), 5_000_000);
        let h = SizeDist::from_spec(&SizeDistSpec::Hadoop, std::path::Path::new(".")).unwrap();
        let SizeDist::Empirical { points, .. } = &h else {
            panic!()
        };
        assert_eq!(sample_cdf(points, 0.50), 700);
    }

    #[test]
    fn websearch_mean_is_about_1_7_mb() {
        // data/README.md: "Mean about 1.7 MB (linear interpolation)".
        let m = websearch().mean();
        assert!((m - 1.7e6).abs() < 0.05e6, "mean {m}");
    }

    #[test]
    fn sampled_mean_matches_analytic_mean() {
        // 200k draws from a distribution with coefficient of variation ~2.4: the sample
        // mean's standard error is ~0.5%, so 2% is four sigma.
        let d = websearch();
        let mut rng = stream(1, Stream::Workload, 0, 0);
        let n = 200_000;
        let s: f64 = (0..n).map(|_| d.sample(&mut rng) as f64).sum::<f64>() / n as f64;
        assert!((s / d.mean() - 1.0).abs() < 0.02, "{s} vs {}", d.mean());
    }

    #[test]
    fn permutation_is_a_derangement() {
        let f = expand(
            &[Workload::Permutation {
                size: 10,
                start: SimDuration::ZERO,
            }],
            16,
            1,
            3,
        );
        let mut seen = [false; 16];
        for x in &f {
            assert_ne!(x.src, x.dst);
            assert!(!seen[x.dst as usize]);
            seen[x.dst as usize] = true;
        }
        assert_eq!(f.len(), 16);
    }

    #[test]
    fn poisson_arrival_rate_matches_load() {
        // load 0.5 of 100 Gb/s with fixed 10 KB flows: 625k arrivals/s per host; over
        // 10 ms, 6250 expected per host, 4 hosts: 25000 +- 158 (Poisson sd), so 3% is
        // about five sigma.
        let f = expand(
            &[Workload::Poisson {
                load: 0.5,
                dist: SizeDist::Fixed(10_000),
                start: SimDuration::ZERO,
                until: SimDuration::from_us(10_000),
                src_hosts: vec![0, 1, 2, 3],
                dst_hosts: vec![0, 1, 2, 3],
            }],
            4,
            100_000_000_000,
            9,
        );
        let n = f.len() as f64;
        assert!((n / 25_000.0 - 1.0).abs() < 0.03, "{n}");
        assert!(f.iter().all(|x| x.src != x.dst));
        assert!(f.windows(2).all(|w| w[0].start <= w[1].start));
    }

    #[test]
    fn bad_cdf_files_are_rejected() {
        assert!(parse_cdf("x", "10 50\n5 100\n").is_err());
        assert!(parse_cdf("x", "10 50\n").is_err());
        assert!(parse_cdf("x", "ten 50\n").is_err());
        assert!(parse_cdf("x", "").is_err());
        assert!(parse_cdf("x", "10 20\n100 100\n").is_ok());
    }
}

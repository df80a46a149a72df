//! nccl-tests' figures for a collective item's results: per-size time, algorithm and bus
//! bandwidth, the table as nccl-tests prints it, and `collective.csv`.

use super::{
    busbw_factor, op_name, CollectiveAlgorithm, CollectiveOp, CollectiveResult, ELEMENT_BYTES,
};

/// One row of the nccl-tests table.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Row {
    pub size: u64,
    pub count: u64,
    #[serde(rename = "type")]
    pub dtype: &'static str,
    pub redop: &'static str,
    pub root: i64,
    /// Mean over timed iterations, us.
    pub time_us: f64,
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
    pub wrong: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub iters: usize,
    /// The algorithm and protocol this size ran with (NCCL's choice under `auto`).
    pub algorithm: &'static str,
    pub protocol: &'static str,
}

/// A collective item's figures, as nccl-tests computes them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CollectiveSummary {
    pub workload: u16,
    pub op: &'static str,
    pub algorithm: &'static str,
    pub ranks: u32,
    pub complete: bool,
    pub rows: Vec<Row>,
    /// Mean of the rows' busbw, GB/s (nccl-tests' "Avg bus bandwidth").
    pub avg_busbw_gbs: f64,
}

fn r2(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// nccl-tests' figures: time = mean over iterations; algbw = size / time; busbw = algbw x
/// the operation's factor.
pub fn summarize(r: &CollectiveResult) -> CollectiveSummary {
    let rows: Vec<Row> = r
        .rows
        .iter()
        .filter(|row| !row.times_ps.is_empty())
        .map(|row| {
            let mut t: Vec<u64> = row.times_ps.clone();
            t.sort_unstable();
            let mean_ps = t.iter().map(|&x| x as f64).sum::<f64>() / t.len() as f64;
            let q = |p: f64| {
                t[((p * t.len() as f64).ceil() as usize).clamp(1, t.len()) - 1] as f64 / 1e6
            };
            let algbw = row.size as f64 / (mean_ps / 1e12) / 1e9;
            Row {
                size: row.size,
                // nccl-tests prints elements per rank for these.
                count: match r.op {
                    CollectiveOp::Allgather
                    | CollectiveOp::ReduceScatter
                    | CollectiveOp::Alltoall => row.size / ELEMENT_BYTES / r.ranks as u64,
                    _ => row.size / ELEMENT_BYTES,
                },
                dtype: "float",
                redop: match r.op {
                    CollectiveOp::Allreduce | CollectiveOp::ReduceScatter => "sum",
                    _ => "none",
                },
                root: r.root.map_or(-1, |x| x as i64),
                time_us: r2(mean_ps / 1e6),
                algbw_gbs: r2(algbw),
                busbw_gbs: r2(algbw * busbw_factor(r.op, r.ranks)),
                wrong: row.wrong,
                p50_us: r2(q(0.5)),
                p99_us: r2(q(0.99)),
                iters: t.len(),
                algorithm: algorithm_name(row.algorithm),
                protocol: row.protocol.name(),
            }
        })
        .collect();
    let avg = if rows.is_empty() {
        0.0
    } else {
        r2(rows.iter().map(|x| x.busbw_gbs).sum::<f64>() / rows.len() as f64)
    };
    CollectiveSummary {
        workload: r.workload,
        op: op_name(r.op),
        algorithm: algorithm_name(r.algorithm),
        ranks: r.ranks,
        complete: r.complete,
        rows,
        avg_busbw_gbs: avg,
    }
}

/// The scenario's name for an algorithm.
pub fn algorithm_name(a: CollectiveAlgorithm) -> &'static str {
    match a {
        CollectiveAlgorithm::Auto => "auto",
        CollectiveAlgorithm::Ring => "ring",
        CollectiveAlgorithm::Tree => "tree",
        CollectiveAlgorithm::Hierarchical => "hierarchical",
        CollectiveAlgorithm::InNetwork => "in_network",
        CollectiveAlgorithm::NvlsTree => "nvls_tree",
    }
}

/// The table as nccl-tests prints it (out-of-place and in-place columns; the model has
/// no in-place difference, so both show the same run), then p50 and p99 per size.
pub fn nccl_table(s: &CollectiveSummary) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# doorbell: {} ({}), {} ranks; nccl-tests layout (in-place equals out-of-place in the model)",
        s.op, s.algorithm, s.ranks
    );
    let _ = writeln!(o, "#                                                              out-of-place                       in-place          ");
    let _ = writeln!(o, "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong   p50(us)   p99(us)  algorithm protocol");
    let _ = writeln!(o, "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)");
    for r in &s.rows {
        let time = if r.time_us < 10_000.0 {
            format!("{:7.2}", r.time_us)
        } else {
            format!("{:7.0}", r.time_us)
        };
        let half = format!(
            "  {time:>7}  {:6.2}  {:6.2}  {:5}",
            r.algbw_gbs, r.busbw_gbs, r.wrong
        );
        let _ = writeln!(
            o,
            "{:12}  {:12}  {:>8}  {:>6}  {:6}{half}{half}  {:8.2}  {:8.2}  {:>9} {:>8}",
            r.size, r.count, r.dtype, r.redop, r.root, r.p50_us, r.p99_us, r.algorithm, r.protocol
        );
    }
    let _ = writeln!(o, "# Out of bounds values : 0 OK");
    let _ = writeln!(o, "# Avg bus bandwidth    : {:.4} ", s.avg_busbw_gbs);
    if !s.complete {
        let _ = writeln!(
            o,
            "# WARNING: the run ended before every iteration completed"
        );
    }
    o
}

/// `collective.csv`: one row per collective item and size.
pub fn collective_csv(all: &[CollectiveSummary]) -> String {
    use std::fmt::Write as _;
    let mut o = String::from(
        "workload,op,algorithm,protocol,ranks,size,count,type,redop,root,time_us,algbw_gbs,busbw_gbs,wrong,p50_us,p99_us,iters\n",
    );
    for s in all {
        for r in &s.rows {
            let _ = writeln!(
                o,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                s.workload,
                s.op,
                r.algorithm,
                r.protocol,
                s.ranks,
                r.size,
                r.count,
                r.dtype,
                r.redop,
                r.root,
                r.time_us,
                r.algbw_gbs,
                r.busbw_gbs,
                r.wrong,
                r.p50_us,
                r.p99_us,
                r.iters
            );
        }
    }
    o
}

//! What a training item's run says: the step time split into compute, pipeline bubble
//! and exposed communication, and each kind of communication's time; the text table and
//! `training.csv`.

use super::TrainingResult;

/// One kind of communication over the run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ClassRow {
    pub class: &'static str,
    pub count: u64,
    /// From launch to the last group's end, ms: whether compute hid it or not.
    pub mean_ms: f64,
    pub max_ms: f64,
    /// Summed over the run's operations, per step.
    pub per_step_ms: f64,
}

/// A training item's figures.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TrainingSummary {
    pub workload: u16,
    pub job: String,
    pub model: String,
    pub dp: u32,
    pub tp: u32,
    pub pp: u32,
    pub ep: u32,
    pub gpus: u32,
    pub microbatches: u32,
    /// Steps asked for and finished.
    pub steps: u32,
    pub steps_finished: u32,
    pub complete: bool,
    /// Each finished step's time, ms, and their mean.
    pub step_times_ms: Vec<f64>,
    pub step_ms: Option<f64>,
    /// Each finished step's time had communication taken none, ms.
    pub no_comm_step_times_ms: Vec<f64>,
    /// The busiest stage's compute in a step, ms.
    pub compute_ms: f64,
    /// The step without communication, less compute (1F1B's fill and drain), ms.
    pub bubble_ms: Option<f64>,
    /// The step less the step without communication, ms, and its share of the step.
    pub exposed_comm_ms: Option<f64>,
    pub exposed_comm_share: Option<f64>,
    pub communication: Vec<ClassRow>,
}

fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

pub fn summarize(r: &TrainingResult) -> TrainingSummary {
    let ms = |ps: u64| ps as f64 / 1e9;
    let n = r.step_ps.len();
    let mean = |v: &[u64]| (n > 0).then(|| v.iter().map(|&x| ms(x)).sum::<f64>() / n as f64);
    let step = mean(&r.step_ps);
    let no_comm = mean(&r.no_comm_step_ps);
    let compute = ms(r.compute_ps);
    let steps_div = n.max(1) as f64;
    TrainingSummary {
        workload: r.workload,
        job: r.job.clone(),
        model: r.model.clone(),
        dp: r.parallelism[0],
        tp: r.parallelism[1],
        pp: r.parallelism[2],
        ep: r.parallelism[3],
        gpus: r.ranks,
        microbatches: r.microbatches,
        steps: r.steps,
        steps_finished: n as u32,
        complete: r.complete,
        step_times_ms: r.step_ps.iter().map(|&x| r4(ms(x))).collect(),
        step_ms: step.map(r4),
        no_comm_step_times_ms: r.no_comm_step_ps.iter().map(|&x| r4(ms(x))).collect(),
        compute_ms: r4(compute),
        bubble_ms: no_comm.map(|x| r4((x - compute).max(0.0))),
        exposed_comm_ms: step.zip(no_comm).map(|(s, x)| r4(s - x)),
        exposed_comm_share: step.zip(no_comm).map(|(s, x)| r4((s - x) / s)),
        communication: r
            .classes
            .iter()
            .map(|(c, s)| ClassRow {
                class: c.name(),
                count: s.count,
                mean_ms: r4(ms(s.total_ps) / s.count as f64),
                max_ms: r4(ms(s.max_ps)),
                per_step_ms: r4(ms(s.total_ps) / steps_div),
            })
            .collect(),
    }
}

/// The summary's lines in the run report.
pub fn render(s: &TrainingSummary) -> String {
    let mut o = String::new();
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    o.push_str(&format!(
        "training {}: {} on {} GPUs (dp {} x tp {} x pp {} x ep {}), {} microbatches; {} of {} steps finished\n",
        s.job, s.model, s.gpus, s.dp, s.tp, s.pp, s.ep, s.microbatches, s.steps_finished, s.steps
    ));
    o.push_str(&format!(
        "  step {} ms = compute {:.3} + pipeline bubble {} + exposed communication {} ms ({})\n",
        f(s.step_ms),
        s.compute_ms,
        f(s.bubble_ms),
        f(s.exposed_comm_ms),
        s.exposed_comm_share
            .map_or("-".into(), |x| format!("{:.1}% of the step", 100.0 * x))
    ));
    o.push_str("  communication          count    mean ms     max ms  per step ms (launch to last group's end, hidden or not)\n");
    for c in &s.communication {
        o.push_str(&format!(
            "  {:<20} {:>7} {:>10.3} {:>10.3} {:>12.3}\n",
            c.class, c.count, c.mean_ms, c.max_ms, c.per_step_ms
        ));
    }
    o
}

/// `training.csv`: a row per job and finished step.
pub fn csv(all: &[TrainingSummary]) -> String {
    let mut o = String::from(
        "workload,job,model,dp,tp,pp,ep,gpus,microbatches,step,step_ms,compute_ms,bubble_ms,exposed_comm_ms,exposed_comm_share\n",
    );
    for s in all {
        for (k, (&t, &nc)) in s
            .step_times_ms
            .iter()
            .zip(&s.no_comm_step_times_ms)
            .enumerate()
        {
            o.push_str(&format!(
                "{},{},\"{}\",{},{},{},{},{},{},{},{},{},{},{},{}\n",
                s.workload,
                s.job,
                s.model.replace('"', "'"),
                s.dp,
                s.tp,
                s.pp,
                s.ep,
                s.gpus,
                s.microbatches,
                k,
                t,
                s.compute_ms,
                r4((nc - s.compute_ms).max(0.0)),
                r4(t - nc),
                r4((t - nc) / t),
            ));
        }
    }
    o
}

//! `workload[].training`: a training job (model shape, parallelism, batch, GPU), and the
//! checks that need the rest of the scenario (ranks that fit the GPUs).

use super::{check_range, check_time, err, VResult};
use crate::scenario::schema::training::{ModelSpec, TraceSpec, TrainingSpec, MODEL_FIELDS};
use crate::scenario::schema::PlacementSpec;
use crate::training::model::{ModelShape, PRESETS};
use crate::training::{defaults as td, TrainingConfig};
use crate::workload::Workload;

/// The most tasks a job may expand to (steps x microbatches x layers x a few).
pub const MAX_TASKS: u64 = 20_000_000;
/// The most communicator groups (each a collective run) and collectives over all groups
/// (each a row of its run's record) a job may have.
pub const MAX_GROUPS: u64 = 100_000;
pub const MAX_ROWS: u64 = 20_000_000;

fn model(path: &str, m: &ModelSpec) -> VResult<ModelShape> {
    let base = match &m.preset {
        Some(name) => ModelShape::preset(name).ok_or_else(|| {
            (
                format!("{path}.model"),
                format!(
                    "unknown model `{name}`, expected one of {}",
                    PRESETS.join(", ")
                ),
            )
        })?,
        None => {
            let missing: Vec<&str> = [
                ("layers", m.layers.is_none()),
                ("hidden", m.hidden.is_none()),
                ("ffn_hidden", m.ffn_hidden.is_none()),
                ("heads", m.heads.is_none()),
                ("vocab", m.vocab.is_none()),
            ]
            .into_iter()
            .filter_map(|(f, miss)| miss.then_some(f))
            .collect();
            if !missing.is_empty() {
                return err(
                    format!("{path}.model"),
                    format!(
                        "a model without `preset` needs {} (of {MODEL_FIELDS})",
                        missing.join(", ")
                    ),
                );
            }
            ModelShape {
                name: "custom".into(),
                layers: 0,
                hidden: 0,
                ffn_hidden: 0,
                heads: 0,
                kv_heads: 0,
                vocab: 0,
                gated_mlp: true,
                experts: 1,
                top_k: 1,
            }
        }
    };
    let mut s = base.clone();
    let heads = m.heads.unwrap_or(base.heads);
    s.layers = check_range(
        format!("{path}.model.layers"),
        m.layers,
        base.layers.max(1),
        1,
        1000,
    )?;
    s.hidden = check_range(
        format!("{path}.model.hidden"),
        m.hidden,
        base.hidden.max(1),
        1,
        1 << 20,
    )?;
    s.ffn_hidden = check_range(
        format!("{path}.model.ffn_hidden"),
        m.ffn_hidden,
        base.ffn_hidden.max(1),
        1,
        1 << 22,
    )?;
    s.heads = check_range(
        format!("{path}.model.heads"),
        m.heads,
        heads.max(1),
        1,
        4096,
    )?;
    s.kv_heads = check_range(
        format!("{path}.model.kv_heads"),
        m.kv_heads,
        if base.kv_heads == 0 {
            s.heads
        } else {
            base.kv_heads
        },
        1,
        s.heads,
    )?;
    s.vocab = check_range(
        format!("{path}.model.vocab"),
        m.vocab,
        base.vocab,
        0,
        1 << 24,
    )?;
    s.gated_mlp = m.gated_mlp.unwrap_or(base.gated_mlp);
    s.experts = check_range(
        format!("{path}.model.experts"),
        m.experts,
        base.experts,
        1,
        1024,
    )?;
    s.top_k = check_range(
        format!("{path}.model.top_k"),
        m.top_k,
        base.top_k.min(s.experts),
        1,
        s.experts,
    )?;
    if s.hidden % s.heads as u64 != 0 {
        return err(
            format!("{path}.model.heads"),
            format!("{} heads do not divide hidden {}", s.heads, s.hidden),
        );
    }
    if s.heads % s.kv_heads != 0 {
        return err(
            format!("{path}.model.kv_heads"),
            format!(
                "{} key-value heads do not divide {} heads",
                s.kv_heads, s.heads
            ),
        );
    }
    if s != base {
        s.name = match &m.preset {
            Some(p) => format!("{p} (changed)"),
            None => "custom".into(),
        };
    }
    Ok(s)
}

/// Workload item `i`, a training job.
pub fn resolve_item(i: usize, s: &TrainingSpec, mtu: u64) -> VResult<Workload> {
    let path = format!("workload[{i}].training");
    let p = |f: &str| format!("{path}.{f}");
    let m = model(&path, &s.model)?;
    let par = s.parallelism;
    let dp = check_range(p("parallelism.dp"), par.dp, 1, 1, 1 << 20)?;
    let tp = check_range(p("parallelism.tp"), par.tp, 1, 1, 1024)?;
    let pp = check_range(p("parallelism.pp"), par.pp, 1, 1, 1024)?;
    let ep = check_range(p("parallelism.ep"), par.ep, 1, 1, 1024)?;
    let ranks = dp as u64 * tp as u64 * pp as u64;
    if ranks < 2 {
        return err(
            p("parallelism"),
            "a job of one GPU has nothing to communicate: give dp x tp x pp of at least 2",
        );
    }
    if ranks > 1 << 20 {
        return err(
            p("parallelism"),
            format!("dp x tp x pp is {ranks}, expected at most 1048576"),
        );
    }
    if m.layers % pp != 0 {
        return err(
            p("parallelism.pp"),
            format!(
                "{pp} pipeline stages do not divide the model's {} layers",
                m.layers
            ),
        );
    }
    if m.heads % tp != 0 {
        return err(
            p("parallelism.tp"),
            format!(
                "{tp} tensor-parallel ranks do not divide the model's {} heads",
                m.heads
            ),
        );
    }
    if ep > 1 && !m.is_moe() {
        return err(
            p("parallelism.ep"),
            format!(
                "expert parallelism needs a model with experts; {} is dense",
                m.name
            ),
        );
    }
    if dp % ep != 0 {
        return err(
            p("parallelism.ep"),
            format!(
                "ep {ep} does not divide dp {dp} (experts are spread over data-parallel ranks)"
            ),
        );
    }
    if m.experts % ep != 0 {
        return err(
            p("parallelism.ep"),
            format!("ep {ep} does not divide the model's {} experts", m.experts),
        );
    }
    let microbatches = check_range(p("microbatches"), s.microbatches, 1, 1, 100_000)?;
    let microbatch_size = check_range(p("microbatch_size"), s.microbatch_size, 1, 1, 1 << 16)?;
    let sequence_length = check_range(
        p("sequence_length"),
        s.sequence_length,
        td::SEQUENCE_LENGTH,
        1,
        1 << 24,
    )?;
    let steps = check_range(p("steps"), s.steps, 1, 1, 100)?;
    let gpu = s.gpu.unwrap_or(crate::scenario::schema::training::GpuSpec {
        peak_tflops: None,
        efficiency: None,
    });
    let peak = gpu.peak_tflops.unwrap_or(td::PEAK_TFLOPS);
    if !(peak.is_finite() && (0.001..=1e6).contains(&peak)) {
        return err(
            p("gpu.peak_tflops"),
            format!("expected 0.001 to 1000000 TFLOP/s, found {peak}"),
        );
    }
    let efficiency = gpu.efficiency.unwrap_or(td::EFFICIENCY);
    if !(efficiency.is_finite() && efficiency > 0.0 && efficiency <= 1.0) {
        return err(
            p("gpu.efficiency"),
            format!("expected a share of peak in (0, 1], found {efficiency}"),
        );
    }
    let bucket_params = check_range(
        p("bucket_params"),
        s.bucket_params,
        td::BUCKET_PARAMS.max(1_000_000 * dp as u64),
        1000,
        1 << 40,
    )?;
    let layer_tasks = if m.is_moe() { 6 } else { 5 };
    let tasks = steps as u64 * microbatches as u64 * 2 * (m.layers as u64 * layer_tasks + 4);
    if tasks > MAX_TASKS {
        return err(
            path,
            format!(
                "{steps} steps of {microbatches} microbatches over {} layers make about {tasks} tasks, more than {MAX_TASKS}: use fewer steps, microbatches or layers",
                m.layers
            ),
        );
    }
    // What one rank moves at once, and what a step costs: bounded so that no
    // figure overflows and a run stays within a simulated day.
    let tokens = microbatch_size as u64 * sequence_length;
    let act = tokens as f64 * m.hidden as f64 * td::ACTIVATION_BYTES as f64;
    let a2a = act * m.top_k as f64 / tp as f64;
    let largest = act
        .max(a2a)
        .max(m.params() as f64 / (tp * pp) as f64 * td::GRAD_BYTES as f64);
    if largest > (1u64 << 40) as f64 {
        return err(
            p("sequence_length"),
            format!(
                "one rank would move {largest:.3e} B in one operation (activations of {tokens} tokens, or its gradients), more than 1 TiB: use shorter microbatches or a smaller model"
            ),
        );
    }
    if !m.is_moe() || ep == 1 {
        super::check_size(p("microbatch_size"), (act / tp as f64) as u64, mtu)?;
    }
    let per_step_flops = 3.0
        * microbatches as f64
        * ((m.layers / pp) as f64
            * (m.attention_flops(tokens, sequence_length) + m.mlp_flops(tokens))
            + m.logits_flops(tokens))
        / tp as f64;
    let step_s = per_step_flops / (peak * 1e12 * efficiency);
    if step_s * steps as f64 > super::MAX_TIME.0 as f64 / 1e12 {
        return err(
            p("gpu"),
            format!(
                "{steps} steps of about {step_s:.3e} s of compute each run past a simulated day: use fewer steps, microbatches or layers, or a faster GPU"
            ),
        );
    }
    // Collective runs (one per group) and what they record (one row per operation).
    let per_stage_ops = microbatches as u64 * (m.layers / pp) as u64 * 4;
    let groups = pp as u64
        * ((tp > 1) as u64 * dp as u64
            + (dp > 1) as u64 * tp as u64
            + (m.is_moe() && ep > 1) as u64 * (tp * dp / ep) as u64
            + (m.is_moe() && dp / ep > 1) as u64 * (tp * ep) as u64);
    let rows = steps as u64
        * pp as u64
        * per_stage_ops
        * ((tp > 1) as u64 * dp as u64 + (m.is_moe() && ep > 1) as u64 * (tp * dp / ep) as u64);
    if groups > MAX_GROUPS || rows > MAX_ROWS {
        return err(
            p("parallelism"),
            format!(
                "{groups} communicator groups running {rows} collectives in all: at most {MAX_GROUPS} groups and {MAX_ROWS} collectives; use fewer microbatches, layers or steps"
            ),
        );
    }
    let start = s.start.map(|d| d.0).unwrap_or_default();
    check_time(p("start"), start)?;
    let mut stragglers = Vec::with_capacity(s.stragglers.len());
    for (k, st) in s.stragglers.iter().enumerate() {
        if st.rank as u64 >= ranks {
            return err(
                p(&format!("stragglers[{k}].rank")),
                format!(
                    "rank {} does not exist: the job has {ranks} ranks, numbered from 0",
                    st.rank
                ),
            );
        }
        if !(st.slowdown.is_finite() && (1.0..=100.0).contains(&st.slowdown)) {
            return err(
                p(&format!("stragglers[{k}].slowdown")),
                format!(
                    "expected a factor from 1 to 100 (1.25: compute takes 25% longer), found {}",
                    st.slowdown
                ),
            );
        }
        stragglers.push((st.rank, st.slowdown));
    }
    let mut collective = crate::collective::Collective::template();
    if let Some(c) = s.channels {
        collective.channels = check_range(p("channels"), Some(c), 2, 1, 64)?;
        collective.channels_given = true;
    }
    collective.qps_per_connection = check_range(
        p("qps_per_connection"),
        s.qps_per_connection,
        crate::collective::defaults::QPS_PER_CONNECTION,
        1,
        crate::collective::defaults::MAX_QPS_PER_CONNECTION,
    )?;
    Ok(Workload::Training(Box::new(TrainingConfig {
        model: m,
        tp,
        pp,
        dp,
        ep,
        microbatches,
        microbatch_size,
        sequence_length,
        peak_flops: peak * 1e12,
        efficiency,
        activation_bytes: td::ACTIVATION_BYTES,
        grad_bytes: td::GRAD_BYTES,
        bucket_params,
        steps,
        collective,
        placement: s.placement.clone().unwrap_or(PlacementSpec::Packed),
        start,
        trace: None,
        stragglers,
        job: job_name(&path, i, s.name.as_deref())?,
    })))
}

/// The most bytes a trace file may hold (256 MiB: millions of tasks).
pub const MAX_TRACE_FILE: u64 = 256 << 20;

/// Workload item `i`, a trace replayed (`file` found under `base_dir`).
pub fn resolve_trace(
    i: usize,
    s: &TraceSpec,
    base_dir: &std::path::Path,
    mtu: u64,
) -> VResult<Workload> {
    let path = format!("workload[{i}].trace");
    let p = |f: &str| format!("{path}.{f}");
    let unit = match s.time_unit.as_deref().unwrap_or("ns") {
        "ps" => 1,
        "ns" => 1000,
        "us" => 1_000_000,
        "ms" => 1_000_000_000,
        other => {
            return err(
                p("time_unit"),
                format!("expected `ps`, `ns`, `us` or `ms`, found `{other}`"),
            )
        }
    };
    let file = base_dir.join(&s.file);
    let text = crate::spec::read_text_file(&file, MAX_TRACE_FILE)
        .map_err(|e| (p("file"), format!("{}: {e}", file.display())))?;
    let t = crate::training::trace::read(&text, unit)
        .map_err(|e| (p("file"), format!("{}: {e}", file.display())))?;
    let ranks = t.graph.ranks;
    let groups: u64 = t.graph.sets.iter().map(|s| s.groups.len() as u64).sum();
    let rows: u64 = t
        .graph
        .sets
        .iter()
        .map(|s| s.groups.len() as u64 * s.sizes.len() as u64)
        .sum();
    if groups > MAX_GROUPS || rows > MAX_ROWS {
        return err(
            p("file"),
            format!(
                "{}: {groups} communicator groups running {rows} collectives in all: at most {MAX_GROUPS} groups and {MAX_ROWS} collectives",
                file.display()
            ),
        );
    }
    if t.graph
        .stage_compute
        .iter()
        .any(|d| d.0 > super::MAX_TIME.0)
    {
        return err(
            p("file"),
            format!(
                "{}: a compute lane computes for more than a simulated day in a step",
                file.display()
            ),
        );
    }
    for (k, tk) in t.graph.tasks.iter().enumerate() {
        if let crate::training::graph::TaskKind::Send { bytes, .. } = tk.kind {
            super::check_size(format!("{}.file (tasks[{k}].bytes)", path), bytes, mtu)?;
        }
    }
    let mut cfg = TrainingConfig {
        model: ModelShape {
            name: t.name.clone(),
            layers: 0,
            hidden: 0,
            ffn_hidden: 0,
            heads: 1,
            kv_heads: 1,
            vocab: 0,
            gated_mlp: false,
            experts: 1,
            top_k: 1,
        },
        tp: 1,
        pp: 1,
        dp: ranks,
        ep: 1,
        microbatches: t.microbatches,
        microbatch_size: 1,
        sequence_length: 1,
        peak_flops: td::PEAK_TFLOPS * 1e12,
        efficiency: td::EFFICIENCY,
        activation_bytes: td::ACTIVATION_BYTES,
        grad_bytes: td::GRAD_BYTES,
        bucket_params: td::BUCKET_PARAMS,
        steps: t.graph.steps,
        collective: crate::collective::Collective::template(),
        placement: s.placement.clone().unwrap_or(PlacementSpec::Packed),
        start: s.start.map(|d| d.0).unwrap_or_default(),
        trace: Some(std::sync::Arc::new(t)),
        stragglers: Vec::new(),
        job: job_name(&path, i, s.name.as_deref())?,
    };
    check_time(p("start"), cfg.start)?;
    if let Some(c) = s.channels {
        cfg.collective.channels = check_range(p("channels"), Some(c), 2, 1, 64)?;
        cfg.collective.channels_given = true;
    }
    cfg.collective.qps_per_connection = check_range(
        p("qps_per_connection"),
        s.qps_per_connection,
        crate::collective::defaults::QPS_PER_CONNECTION,
        1,
        crate::collective::defaults::MAX_QPS_PER_CONNECTION,
    )?;
    Ok(Workload::Training(Box::new(cfg)))
}

/// A job's name: given (letters, digits, `-`, `_`, `.`; it labels rows of CSV files), or
/// `job<item>`.
fn job_name(path: &str, i: usize, name: Option<&str>) -> VResult<String> {
    match name {
        None => Ok(format!("job{i}")),
        Some(n)
            if !n.is_empty()
                && n.len() <= 64
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
        {
            Ok(n.to_string())
        }
        Some(n) => err(
            format!("{path}.name"),
            format!("expected 1 to 64 letters, digits, `-`, `_` or `.`, found `{n}`"),
        ),
    }
}

//! `workload[].training`: a training job's model, parallelism, batch and GPU.

use super::{Duration, PlacementSpec};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSpec {
    /// The job's name in reports; default `job<item>`.
    #[serde(default)]
    pub name: Option<String>,
    /// A named shape (`llama3-8b`, `llama3-70b`, `mixtral-8x7b`, `gpt3-175b`) or
    /// `{ preset, layers, hidden, ... }`.
    #[serde(deserialize_with = "model_spec")]
    pub model: ModelSpec,
    pub parallelism: ParallelismSpec,
    /// Microbatches per step per pipeline (gradient accumulation); default 1.
    #[serde(default)]
    pub microbatches: Option<u32>,
    /// Sequences per microbatch; default 1.
    #[serde(default)]
    pub microbatch_size: Option<u32>,
    /// Tokens per sequence; default 4096.
    #[serde(default)]
    pub sequence_length: Option<u64>,
    /// The GPU's compute: `{ peak_tflops, efficiency }`; default H100 SXM BF16 (989.4)
    /// at 0.5.
    #[serde(default)]
    pub gpu: Option<GpuSpec>,
    /// Parameters per data-parallel gradient bucket; default max(40 M, 1 M x dp)
    /// (Megatron-LM).
    #[serde(default)]
    pub bucket_params: Option<u64>,
    /// Steps to run; default 1.
    #[serde(default)]
    pub steps: Option<u32>,
    #[serde(default)]
    pub placement: Option<PlacementSpec>,
    #[serde(default)]
    pub start: Option<Duration>,
    /// Parallel rings or trees per collective; default two per NIC of a server.
    #[serde(default)]
    pub channels: Option<u32>,
    /// Queue pairs per connection (`NCCL_IB_QPS_PER_CONNECTION`); default 1.
    #[serde(default)]
    pub qps_per_connection: Option<u32>,
    /// GPUs that compute slower than the rest: `[{ rank, slowdown }]`.
    #[serde(default)]
    pub stragglers: Vec<StragglerSpec>,
}

/// A GPU whose compute takes `slowdown` times as long (1.25: 25% longer).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StragglerSpec {
    pub rank: u32,
    pub slowdown: f64,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParallelismSpec {
    #[serde(default)]
    pub dp: Option<u32>,
    #[serde(default)]
    pub tp: Option<u32>,
    #[serde(default)]
    pub pp: Option<u32>,
    #[serde(default)]
    pub ep: Option<u32>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    #[serde(default)]
    pub peak_tflops: Option<f64>,
    #[serde(default)]
    pub efficiency: Option<f64>,
}

/// A model: a preset's name, or a shape (a preset's with changes, or every field).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub layers: Option<u32>,
    #[serde(default)]
    pub hidden: Option<u64>,
    #[serde(default)]
    pub ffn_hidden: Option<u64>,
    #[serde(default)]
    pub heads: Option<u32>,
    #[serde(default)]
    pub kv_heads: Option<u32>,
    #[serde(default)]
    pub vocab: Option<u64>,
    #[serde(default)]
    pub gated_mlp: Option<bool>,
    #[serde(default)]
    pub experts: Option<u32>,
    #[serde(default)]
    pub top_k: Option<u32>,
}

/// The fields a shape needs when it names no preset.
pub const MODEL_FIELDS: &str =
    "layers, hidden, ffn_hidden, heads, kv_heads, vocab, gated_mlp, experts, top_k";

/// `model:` as a preset's name or as the map (`ModelSpec`).
fn model_spec<'de, D: Deserializer<'de>>(d: D) -> Result<ModelSpec, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = ModelSpec;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "a model name or `{{ preset, {MODEL_FIELDS} }}`")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<ModelSpec, E> {
            Ok(ModelSpec {
                preset: Some(s.to_string()),
                ..ModelSpec::default()
            })
        }
        fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<ModelSpec, A::Error> {
            ModelSpec::deserialize(de::value::MapAccessDeserializer::new(m))
        }
    }
    d.deserialize_any(V)
}

/// What a compare set may change in the scenario's training items.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingOverride {
    #[serde(default)]
    pub placement: Option<PlacementSpec>,
    #[serde(default)]
    pub microbatches: Option<u32>,
    #[serde(default)]
    pub channels: Option<u32>,
    #[serde(default)]
    pub qps_per_connection: Option<u32>,
    #[serde(default)]
    pub stragglers: Option<Vec<StragglerSpec>>,
}

/// `workload[].trace`: a training trace replayed (doorbell's JSON, or a SimAI workload
/// file).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// The job's name in reports; default `job<item>`.
    #[serde(default)]
    pub name: Option<String>,
    /// The file, relative to the scenario's folder.
    pub file: String,
    /// The unit of a SimAI file's compute times: `ps`, `ns` (default), `us` or `ms`.
    #[serde(default)]
    pub time_unit: Option<String>,
    #[serde(default)]
    pub placement: Option<PlacementSpec>,
    #[serde(default)]
    pub start: Option<Duration>,
    #[serde(default)]
    pub channels: Option<u32>,
    #[serde(default)]
    pub qps_per_connection: Option<u32>,
}

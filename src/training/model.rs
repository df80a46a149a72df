//! Transformer shapes and what one layer costs: parameters, forward FLOPs and the bytes
//! each parallelism moves.
//!
//! Sources:
//! - shapes: Llama 3 (Dubey et al., "The Llama 3 Herd of Models", 2024, Table 3: 8B and
//!   70B), Mixtral 8x7B (Jiang et al., "Mixtral of Experts", 2024, Table 1), GPT-3 175B
//!   (Brown et al., "Language Models are Few-Shot Learners", 2020, Table 2.1);
//! - FLOPs: a matrix product of a `t x a` by an `a x b` matrix costs `2tab`; a layer's
//!   forward pass costs twice its matrix parameters per token plus `4 s h` per token for
//!   the attention scores and their weighted sum (Narayanan et al., "Efficient
//!   Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21,
//!   section 5.1; the causal mask is not halved, as there); the backward pass costs
//!   twice the forward (the same paper);
//! - bytes: Megatron-LM's tensor parallelism (Shoeybi et al. 2019) all-reduces the
//!   layer's activations, `t x h` values, twice in the forward pass (after attention and
//!   after the MLP) and twice in the backward pass; pipeline stages exchange a
//!   microbatch's activations, split over the tensor-parallel ranks (Megatron's
//!   scatter-gather optimisation, Narayanan et al. section 4.1); expert parallelism
//!   sends each token's hidden state to its `top_k` experts and back (an all-to-all
//!   before and after the experts, Lepikhin et al., GShard, 2020).
//!
//! Leaves out: norms, biases and the router's parameters (under 0.1% of any preset's),
//! activation recomputation, sequence and context parallelism, and tied embeddings (the
//! input embedding and the output layer are counted as two matrices).

/// A decoder-only transformer.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    pub name: String,
    pub layers: u32,
    pub hidden: u64,
    /// The MLP's inner width (per expert for a mixture of experts).
    pub ffn_hidden: u64,
    pub heads: u32,
    pub kv_heads: u32,
    pub vocab: u64,
    /// A gated MLP (SwiGLU: three matrices) or a plain one (two).
    pub gated_mlp: bool,
    /// Experts per MoE layer (1: a dense model) and how many each token uses.
    pub experts: u32,
    pub top_k: u32,
}

/// The shapes `model:` may name.
pub const PRESETS: &[&str] = &["llama3-8b", "llama3-70b", "mixtral-8x7b", "gpt3-175b"];

impl ModelShape {
    /// A named shape (`PRESETS`), with its source in the module comment.
    pub fn preset(name: &str) -> Option<ModelShape> {
        let s = |layers, hidden, ffn_hidden, heads, kv_heads, vocab, gated, experts, top_k| {
            ModelShape {
                name: name.to_string(),
                layers,
                hidden,
                ffn_hidden,
                heads,
                kv_heads,
                vocab,
                gated_mlp: gated,
                experts,
                top_k,
            }
        };
        Some(match name {
            "llama3-8b" => s(32, 4096, 14336, 32, 8, 128_256, true, 1, 1),
            "llama3-70b" => s(80, 8192, 28672, 64, 8, 128_256, true, 1, 1),
            "mixtral-8x7b" => s(32, 4096, 14336, 32, 8, 32_000, true, 8, 2),
            "gpt3-175b" => s(96, 12288, 49152, 96, 96, 50_257, false, 1, 1),
            _ => return None,
        })
    }

    pub fn is_moe(&self) -> bool {
        self.experts > 1
    }

    /// Width of the keys and values (grouped-query attention).
    pub fn kv_dim(&self) -> u64 {
        self.hidden / self.heads as u64 * self.kv_heads as u64
    }

    /// Attention's parameters in one layer: Q and O (`h x h`), K and V (`h x kv_dim`).
    pub fn attention_params(&self) -> u64 {
        2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_dim()
    }

    /// One expert's (or the dense MLP's) parameters.
    pub fn mlp_params(&self) -> u64 {
        let matrices = if self.gated_mlp { 3 } else { 2 };
        matrices * self.hidden * self.ffn_hidden
    }

    /// Every parameter: layers, the input embedding and the output layer.
    pub fn params(&self) -> u64 {
        self.layers as u64 * (self.attention_params() + self.experts as u64 * self.mlp_params())
            + 2 * self.vocab * self.hidden
    }

    /// Forward FLOPs of one layer's attention block for `tokens` tokens of sequences
    /// `seq` long.
    pub fn attention_flops(&self, tokens: u64, seq: u64) -> f64 {
        let t = tokens as f64;
        2.0 * t * self.attention_params() as f64 + 4.0 * t * seq as f64 * self.hidden as f64
    }

    /// Forward FLOPs of one layer's MLP block (every token through `top_k` experts).
    pub fn mlp_flops(&self, tokens: u64) -> f64 {
        2.0 * tokens as f64 * self.mlp_params() as f64 * self.top_k as f64
    }

    /// Forward FLOPs of the output layer (the logits).
    pub fn logits_flops(&self, tokens: u64) -> f64 {
        2.0 * tokens as f64 * (self.vocab * self.hidden) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The presets' parameter counts against their papers' names: Llama 3 8B has 8.03 B
    /// parameters and 70B 70.6 B (Meta's model cards); Mixtral 8x7B 46.7 B (Jiang et
    /// al., section 2); GPT-3 175 B (Brown et al.). Within 1.5%: norms, biases and
    /// routers are left out, and GPT-3's tied embedding is counted twice (0.6 B).
    #[test]
    fn preset_parameter_counts_match_their_papers() {
        for (name, billions) in [
            ("llama3-8b", 8.03),
            ("llama3-70b", 70.6),
            ("mixtral-8x7b", 46.7),
            ("gpt3-175b", 175.0),
        ] {
            let m = ModelShape::preset(name).unwrap();
            let got = m.params() as f64 / 1e9;
            assert!(
                (got / billions - 1.0).abs() < 0.015,
                "{name}: {got:.2} B against {billions} B"
            );
        }
        assert!(ModelShape::preset("llama3-9b").is_none());
    }

    /// Forward FLOPs per token are about twice the parameters a token touches (the
    /// usual 2N): Llama 3 8B at 4,096 tokens, 6.98 B layer parameters plus the output
    /// layer's 0.53 B, plus the attention term 4 s h x 32 layers = 2.1 GFLOP.
    #[test]
    fn forward_flops_are_two_per_parameter_plus_attention() {
        let m = ModelShape::preset("llama3-8b").unwrap();
        let (t, s) = (4096, 4096);
        let per_layer = m.attention_flops(t, s) + m.mlp_flops(t);
        let total = per_layer * m.layers as f64 + m.logits_flops(t);
        let layer_params = m.layers as f64 * (m.attention_params() + m.mlp_params()) as f64;
        let expected = t as f64
            * (2.0 * (layer_params + (m.vocab * m.hidden) as f64)
                + 4.0 * s as f64 * m.hidden as f64 * m.layers as f64);
        assert!((total / expected - 1.0).abs() < 1e-12);
        // 2N per token with N = 7.5 B touched, plus 2.1 GFLOP of attention.
        assert!(
            (total / t as f64 / 1e9 - 17.15).abs() < 0.05,
            "{}",
            total / t as f64 / 1e9
        );
        // Mixtral: every token through 2 of 8 experts.
        let x = ModelShape::preset("mixtral-8x7b").unwrap();
        assert_eq!(x.mlp_flops(1), 2.0 * 2.0 * x.mlp_params() as f64);
    }
}

//! Training steps (issue 18): a step's compute and communication through the whole
//! fabric model, checked against closed forms, and the errors bad jobs get.

use crate::common::{rejected, scenario};
use doorbell::training::summary::{summarize, TrainingSummary};

/// A small dense model (no embedding, so every stage computes the same): per layer
/// 4 x 1024^2 attention and 2 x 1024 x 4096 MLP parameters, 12.58 M in all.
const TOY: &str = "{ layers: 2, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, vocab: 0, gated_mlp: false }";

/// `hosts` hosts of one GPU each on one leaf, 100 Gb/s, and a training item.
fn fabric(hosts: u32, training: &str) -> String {
    format!(
        "
topology:
  leaves: 1
  spines: 1
  hosts_per_leaf: {hosts}
  host_link: {{ rate: 100Gbps, latency: 1us }}
  fabric_link: {{ rate: 100Gbps, latency: 1us }}
packet: {{ mtu: 4096B, encapsulation: rocev2 }}
flow_control: {{ mode: pfc }}
workload:
  - training: {training}
"
    )
}

fn run(yaml: &str) -> TrainingSummary {
    let sc = scenario(yaml);
    let out = doorbell::sim::run(&sc);
    assert!(!out.stalled, "the run finished");
    summarize(&out.training[0])
}

/// Data parallelism with one bucket: the gradients (12.58 M x 2 layers x 2 B = 50.3 MB)
/// are all-reduced after the last backward pass, so the exposed communication is one
/// ring all-reduce of two ranks: each sends the whole buffer once (half in the
/// reduce-scatter, half in the all-gather), 50.3 MB at 100 Gb/s x 4096/4154 (RoCEv2
/// framing) = 4.08 ms. Measured 4.21 ms: within 6%, as NCCL's per-step network latency
/// (`hwLat[NET]`, charged on each of the ring's 24 transfers per channel: 6 loops of 2
/// MiB chunks, 2 steps of 2 slices each; then the kernel launch) adds about 3% at this
/// size.
#[test]
fn one_gradient_bucket_costs_one_ring_all_reduce() {
    let s = run(&fabric(
        2,
        &format!("{{ model: {TOY}, parallelism: {{ dp: 2 }}, microbatches: 2, bucket_params: 1000000000000 }}"),
    ));
    let params = 2.0 * (4.0 * 1024.0 * 1024.0 + 2.0 * 1024.0 * 4096.0);
    let ideal_ms = params * 2.0 * 8.0 / (100e9 * 4096.0 / 4154.0) * 1e3;
    let exposed = s.exposed_comm_ms.unwrap();
    assert!(
        (exposed / ideal_ms - 1.0).abs() < 0.06,
        "exposed {exposed} ms against {ideal_ms} ms"
    );
    assert_eq!(s.bubble_ms, Some(0.0));
    let dp = s.communication.iter().find(|c| c.class == "dp").unwrap();
    assert_eq!(dp.count, 1);
    assert!(
        (dp.mean_ms - exposed).abs() < 1e-3,
        "the reduction is all exposed"
    );
}

/// With a bucket per layer, the last layer's reduction (half the gradients, about 2.1
/// ms) runs while the first layer's backward pass computes (0.69 ms), so the exposed
/// time falls by that backward pass: two half-size reductions less the overlap.
#[test]
fn buckets_overlap_reductions_with_the_backward_pass() {
    let one = run(&fabric(
        2,
        &format!("{{ model: {TOY}, parallelism: {{ dp: 2 }}, microbatches: 2, bucket_params: 1000000000000 }}"),
    ));
    let two = run(&fabric(
        2,
        &format!("{{ model: {TOY}, parallelism: {{ dp: 2 }}, microbatches: 2, bucket_params: 12582912 }}"),
    ));
    let dp = two.communication.iter().find(|c| c.class == "dp").unwrap();
    assert_eq!(dp.count, 2, "a bucket per layer");
    let (e1, e2) = (one.exposed_comm_ms.unwrap(), two.exposed_comm_ms.unwrap());
    // compute = 2 microbatches x 2 layers x (t_F + t_B), t_B = 2 t_F.
    let layer_backward = one.compute_ms / 6.0;
    let expect = e1 - layer_backward;
    assert!(
        (e2 / expect - 1.0).abs() < 0.03,
        "one bucket exposed {e1} ms; two buckets {e2} ms against {expect}"
    );
    assert_eq!(one.compute_ms, two.compute_ms);
}

/// Two pipeline stages, one microbatch: the step is F(stage 0), send, F(1), B(1), send,
/// B(0), so the exposed communication is two sends of a microbatch's activations
/// (1024 tokens x 1024 x 2 B = 2 MiB at 100 Gb/s: 171 us each with RoCEv2 framing, plus
/// a few us of latency and posting).
#[test]
fn pipeline_sends_are_exposed_as_1f1b_says() {
    let s = run(&fabric(
        2,
        &format!(
            "{{ model: {TOY}, parallelism: {{ pp: 2 }}, microbatches: 1, sequence_length: 1024 }}"
        ),
    ));
    let send_ms = 2.0 * 1024.0 * 1024.0 * 8.0 / (100e9 * 4096.0 / 4154.0) * 1e3;
    let exposed = s.exposed_comm_ms.unwrap();
    assert!(
        exposed >= 2.0 * send_ms && exposed < 2.0 * send_ms * 1.1,
        "exposed {exposed} ms against 2 x {send_ms} ms"
    );
    // One microbatch over two stages: each stage idles for the other's passes.
    assert!((s.bubble_ms.unwrap() - s.compute_ms).abs() < 1e-3);
}

/// Tensor parallelism inside a server moves nothing over the network: with 2 servers of
/// 2 GPUs and tp 2, every network byte is the data-parallel reduction's.
#[test]
fn tensor_parallel_traffic_stays_on_nvlink() {
    let yaml = format!(
        "
topology:
  leaves: 2
  spines: 1
  hosts_per_leaf: 2
  host_link: {{ rate: 100Gbps, latency: 1us }}
  fabric_link: {{ rate: 100Gbps, latency: 1us }}
packet: {{ mtu: 4096B, encapsulation: rocev2 }}
flow_control: {{ mode: pfc }}
host: {{ gpus_per_host: 2, nics_per_host: 2, wiring: rail }}
workload:
  - training: {{ model: {TOY}, parallelism: {{ tp: 2, dp: 2 }}, microbatches: 1 }}
"
    );
    let sc = scenario(&yaml);
    let out = doorbell::sim::run(&sc);
    let s = summarize(&out.training[0]);
    let tp = s.communication.iter().find(|c| c.class == "tp").unwrap();
    assert_eq!(tp.count, 2 * 2 * 2, "2 layers x 2 passes x 2 all-reduces");
    let network: u64 = out.flows.iter().map(|f| f.def.size).sum();
    // Two DP groups of two ranks, each rank sending its half of the gradients (25.2 MB
    // over 2 tensor ranks) once.
    let grads = 2.0 * (4.0 * 1024.0 * 1024.0 + 2.0 * 1024.0 * 4096.0) * 2.0 / 2.0;
    let expect = 4.0 * grads;
    assert!(
        (network as f64 / expect - 1.0).abs() < 0.01,
        "{network} B on the network against {expect}"
    );
}

/// A mixture of experts exchanges tokens in all-to-alls over the expert-parallel groups,
/// and a job runs the same twice (the step and every class's figures).
#[test]
fn experts_all_to_all_and_the_same_twice() {
    let yaml = fabric(
        4,
        "{ model: { preset: mixtral-8x7b, layers: 1, vocab: 0 }, parallelism: { dp: 4, ep: 4 }, microbatches: 1, sequence_length: 512 }",
    );
    let a = run(&yaml);
    let b = run(&yaml);
    assert_eq!(a, b);
    let ep = a.communication.iter().find(|c| c.class == "ep").unwrap();
    assert_eq!(ep.count, 4, "dispatch and combine, forward and backward");
    assert!(a.exposed_comm_share.unwrap() > 0.0);
    assert!(
        !a.communication.iter().any(|c| c.class == "expert_dp"),
        "one replica of each expert"
    );
}

#[test]
fn bad_jobs_are_refused_with_their_field() {
    let job = |t: &str| rejected(&fabric(4, t));
    let e = job("{ model: llama3-9b, parallelism: { dp: 2 } }");
    assert!(
        e.contains("workload[0].training.model") && e.contains("llama3-8b"),
        "{e}"
    );
    let e = job("{ model: { layers: 2 }, parallelism: { dp: 2 } }");
    assert!(e.contains("needs hidden, ffn_hidden, heads, vocab"), "{e}");
    let e = job("{ model: llama3-8b, parallelism: { pp: 3 } }");
    assert!(
        e.contains("parallelism.pp") && e.contains("do not divide"),
        "{e}"
    );
    let e = job("{ model: llama3-8b, parallelism: { dp: 2, ep: 2 } }");
    assert!(e.contains("parallelism.ep") && e.contains("dense"), "{e}");
    let e = job("{ model: llama3-8b, parallelism: { dp: 8 } }");
    assert!(e.contains("ranks"), "{e}");
    let e = job("{ model: llama3-8b, parallelism: { dp: 2 }, gpu: { efficiency: 1.5 } }");
    assert!(e.contains("gpu.efficiency"), "{e}");
    let e = job("{ model: llama3-8b }");
    assert!(e.contains("parallelism"), "{e}");
    let e = job("{ model: llama3-8b, parallelism: { dp: 1 } }");
    assert!(e.contains("nothing to communicate"), "{e}");
    // Two jobs on one GPU.
    let two = fabric(4, "{ model: llama3-8b, parallelism: { dp: 2 } }")
        + "  - training: { model: llama3-8b, parallelism: { dp: 2 }, placement: [1, 2] }\n";
    let e = rejected(&two);
    assert!(
        e.contains("workload[1].training.placement") && e.contains("already workload[0]"),
        "{e}"
    );
    // Side by side they are fine.
    let side = fabric(4, "{ model: llama3-8b, parallelism: { dp: 2 } }")
        + "  - training: { model: llama3-8b, parallelism: { dp: 2 }, placement: { servers: [2, 3] } }\n";
    scenario(&side);
    // A compare set that changes a training item the workload lacks.
    let e = rejected(
        "
topology: { leaves: 1, spines: 1, hosts_per_leaf: 2, host_link: { rate: 100Gbps, latency: 1us }, fabric_link: { rate: 100Gbps, latency: 1us } }
workload:
  - permutation: { size: 1MiB }
compare:
  - { name: a, training: { placement: random } }
",
    );
    assert!(e.contains("compare[0].training"), "{e}");
}

/// `plan` judges a step time: a target below the step without communication can never
/// be met (more spines cannot help), one above it picks the cheapest candidate.
#[test]
fn plan_targets_the_step_time() {
    let base = fabric(
        2,
        &format!("{{ model: {TOY}, parallelism: {{ dp: 2 }}, microbatches: 2 }}"),
    );
    let plan = |target: &str| {
        format!(
            "{base}plan:\n  targets: {{ step_time_max: {target} }}\n  candidates:\n    - {{ topology.spines: 1 }}\n    - {{ topology.spines: 2 }}\n"
        )
    };
    let p = doorbell::plan::plan_str(&plan("1ms"), "p.yaml", "p", &Default::default()).unwrap();
    let (choice, ev) = p.decide();
    assert_eq!(choice, None);
    let report = p.report(choice, &ev);
    assert!(report.contains("step_time_max: the step takes"), "{report}");
    let p = doorbell::plan::plan_str(&plan("1s"), "p.yaml", "p", &Default::default()).unwrap();
    let (choice, ev) = p.decide();
    assert_eq!(choice, Some(0));
    assert!(p.report(choice, &ev).contains("step ms"));
    // Without a training item there is no step to judge.
    let e = doorbell::plan::plan_str(
        "
topology: { leaves: 1, spines: 1, hosts_per_leaf: 2, host_link: { rate: 100Gbps, latency: 1us }, fabric_link: { rate: 100Gbps, latency: 1us } }
workload:
  - permutation: { size: 1MiB }
plan:
  targets: { step_time_max: 1ms }
  candidates: [ { topology.spines: 1 } ]
",
        "p.yaml",
        "p",
        &Default::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("plan.targets.step_time_max"), "{e}");
}

fn load(path: &str, set: &[&str]) -> doorbell::scenario::Scenario {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    doorbell::scenario::load(
        &root.join(path),
        &doorbell::scenario::Overrides {
            seed: None,
            set: set.iter().map(|s| s.to_string()).collect(),
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Issue 18's "a shipped trace replays to the same step time as its native
/// description": `scenarios/traces/llama3-8b-4layers-32gpu.json` is what `doorbell
/// trace` writes for the item named in `scenarios/training-trace.yaml` today (so the
/// file cannot drift from the model), and replaying it gives the same step, and the same
/// summary, as the item itself.
#[test]
fn the_shipped_trace_replays_as_its_native_description() {
    let native_item = "{ model: { preset: llama3-8b, layers: 4 }, parallelism: { tp: 8, pp: 2, dp: 2 }, microbatches: 4 }";
    let replay = load("scenarios/training-trace.yaml", &[]);
    let native = load(
        "scenarios/training-trace.yaml",
        &[&format!("workload[0]={{ training: {native_item} }}")],
    );
    let doorbell::workload::Workload::Training(t) = &native.workload[0] else {
        panic!("a training item")
    };
    let shipped = std::fs::read_to_string(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios/traces/llama3-8b-4layers-32gpu.json"),
    )
    .unwrap();
    let fresh = doorbell::training::trace::write_native(
        &t.graph(),
        &t.model.name,
        [t.dp, t.tp, t.pp, t.ep],
        t.microbatches,
    );
    assert!(
        fresh == shipped,
        "the shipped trace is not what `doorbell trace` writes now"
    );
    let a = doorbell::sim::run(&native);
    let b = doorbell::sim::run(&replay);
    assert_eq!(a.training, b.training);
    assert_eq!(
        doorbell::metrics::summarize(&native, &a).training,
        doorbell::metrics::summarize(&replay, &b).training
    );
    // 42.526 ms: the figure the scenario's comment states.
    let step = summarize(&b.training[0]).step_ms.unwrap();
    assert!((step - 42.526).abs() < 0.001, "{step}");
}

/// The SimAI workload file shipped with the example: 3 layers, 2 microbatches, tensor
/// groups of 8 on 32 GPUs. Compute is the file's, summed: 2 x (1.7 + 2.8 + 1.7) ms plus
/// 300 ns of updates; tensor-parallel all-reduces run in line (3 forward, 2 input
/// gradient, per microbatch) and the last microbatch's weight gradients over the data
/// groups, one per layer.
#[test]
fn a_simai_workload_file_runs_as_simai_orders_it() {
    let sc = load(
        "scenarios/training-trace.yaml",
        &["workload[0].trace.file=traces/simai-3layer-32gpu.txt"],
    );
    let out = doorbell::sim::run(&sc);
    let s = summarize(&out.training[0]);
    assert!((s.compute_ms - 12.4003).abs() < 1e-4, "{}", s.compute_ms);
    let count = |c: &str| {
        s.communication
            .iter()
            .find(|x| x.class == c)
            .map(|x| x.count)
    };
    assert_eq!(count("tp"), Some(10));
    assert_eq!(count("dp"), Some(3));
    assert_eq!((s.tp, s.dp, s.gpus), (8, 4, 32));
    assert!(s.exposed_comm_ms.unwrap() > 0.0);
    // A missing file, or one in no known format, is named with its field.
    let e = rejected_at("workload[0].trace.file=traces/none.json");
    assert!(
        e.contains("workload[0].trace.file") && e.contains("none.json"),
        "{e}"
    );
    let e = rejected_at("workload[0].trace.file=training-step.yaml");
    assert!(e.contains("SimAI workload file"), "{e}");
}

fn rejected_at(set: &str) -> String {
    rejected_in("scenarios/training-trace.yaml", set)
}

/// Issue 18, item 4: what a slow GPU, a degraded NIC and a link flap cost the step of
/// `scenarios/training-faults.yaml` (healthy: 42.53 ms).
/// - a GPU 20% slower in the busiest stage makes that stage's compute 20% longer;
/// - a NIC link at 100G instead of 400G slows the data-parallel reduction it carries;
/// - a 1 ms flap during the gradient reduction costs one local ACK timeout: 4.096 us x
///   2^20 = 4.295 s at NCCL's default `timeout` 20, 4.096 us x 2^14 = 67.1 ms at 14 (RC
///   resends what the dead link swallowed only then).
#[test]
fn stragglers_degraded_links_and_flaps_cost_the_step() {
    let sc = load("scenarios/training-faults.yaml", &[]);
    let sets = doorbell::compare::run_sets(&sc);
    let get = |name: &str| {
        let s = sets.iter().find(|s| s.name == name).unwrap();
        s.summary.training[0].clone()
    };
    let healthy = get("healthy");
    assert!((healthy.step_ms.unwrap() - 42.526).abs() < 0.001);
    let slow = get("straggler");
    assert!((slow.compute_ms / healthy.compute_ms - 1.2).abs() < 1e-4);
    assert!(
        slow.step_ms.unwrap()
            > healthy.step_ms.unwrap() + 0.8 * (slow.compute_ms - healthy.compute_ms)
    );
    let dp_max = |t: &TrainingSummary| {
        t.communication
            .iter()
            .find(|c| c.class == "dp")
            .unwrap()
            .max_ms
    };
    let degraded = get("degraded");
    assert!(
        dp_max(&degraded) > 2.5 * dp_max(&healthy),
        "{} vs {}",
        dp_max(&degraded),
        dp_max(&healthy)
    );
    assert!(degraded.step_ms.unwrap() > healthy.step_ms.unwrap() + 10.0);
    for (name, timeout_ms) in [
        ("flap", 4.096e-3 * f64::from(1 << 20)),
        ("flap_t14", 4.096e-3 * f64::from(1 << 14)),
    ] {
        let t = get(name);
        let extra = t.step_ms.unwrap() - healthy.step_ms.unwrap();
        assert!(
            extra > timeout_ms && extra < timeout_ms + 5.0,
            "{name}: {extra} ms more than healthy, the timeout is {timeout_ms} ms"
        );
    }
    // Bad fault and straggler fields are named.
    let e = rejected_in(
        "scenarios/training-faults.yaml",
        "compare[2].faults.degraded[0].rate=800Gbps",
    );
    assert!(
        e.contains("compare[2].faults.degraded[0].rate") || e.contains("degraded[0].rate"),
        "{e}"
    );
    let e = rejected_in(
        "scenarios/training-faults.yaml",
        "compare[1].training.stragglers[0].rank=32",
    );
    assert!(
        e.contains("stragglers[0].rank") && e.contains("32 ranks"),
        "{e}"
    );
}

fn rejected_in(path: &str, set: &str) -> String {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match doorbell::scenario::load(
        &root.join(path),
        &doorbell::scenario::Overrides {
            seed: None,
            set: vec![set.to_string()],
        },
    ) {
        Ok(_) => panic!("accepted {set}"),
        Err(e) => e.to_string(),
    }
}

/// Issue 18, item 3, in small: two jobs on one fabric (4 leaves of 2 one-GPU hosts,
/// 100G). The training job's gradient all-reduce (50 MB over 2 ranks) shares the fabric
/// with a neighbour's all-to-alls. Leaf-local (each job under its own leaf) they never
/// meet: the step is the job's alone. Interleaved (each job on one host of each of two
/// leaves) both cross the spines: at 1:1 there is an uplink's worth for each if the
/// traffic is spread (spraying), but ECMP may hash both onto one uplink; at 2:1 they
/// share the one uplink per leaf.
#[test]
fn a_neighbours_all_to_all_slows_the_step_only_where_they_share_links() {
    let yaml = format!(
        "
topology:
  leaves: 4
  spines: 2
  hosts_per_leaf: 2
  host_link: {{ rate: 100Gbps, latency: 1us }}
  fabric_link: {{ rate: 100Gbps, latency: 1us }}
packet: {{ mtu: 4096B, encapsulation: rocev2 }}
flow_control: {{ mode: pfc }}
workload:
  - training: {{ name: job, model: {TOY}, parallelism: {{ dp: 2 }}, microbatches: 1, bucket_params: 1000000000000, placement: {{ servers: [0, 1] }} }}
  - collective: {{ op: alltoall, size: 16MiB, iters: 20, warmup_iters: 0, ranks: 2, placement: {{ servers: [2, 3] }} }}
compare:
  - {{ name: alone, collective: {{ start: 1s }} }}
  - {{ name: leaf_local_2to1, topology: {{ spines: 1 }} }}
  - {{ name: interleaved_1to1, training: {{ placement: {{ servers: [0, 2] }} }}, collective: {{ placement: {{ servers: [1, 3] }} }} }}
  - {{ name: interleaved_2to1, topology: {{ spines: 1 }}, training: {{ placement: {{ servers: [0, 2] }} }}, collective: {{ placement: {{ servers: [1, 3] }} }} }}
  - {{ name: interleaved_1to1_spray, routing: spray, out_of_order: true, training: {{ placement: {{ servers: [0, 2] }} }}, collective: {{ placement: {{ servers: [1, 3] }} }} }}
"
    );
    let sc = scenario(&yaml);
    let sets = doorbell::compare::run_sets(&sc);
    let step = |name: &str| {
        let s = sets.iter().find(|s| s.name == name).unwrap();
        assert_eq!(s.summary.training[0].job, "job");
        s.summary.training[0].step_ms.unwrap()
    };
    let alone = step("alone");
    let (ecmp, shared, spray) = (
        step("interleaved_1to1"),
        step("interleaved_2to1"),
        step("interleaved_1to1_spray"),
    );
    assert_eq!(step("leaf_local_2to1"), alone);
    // Measured: alone 6.37 ms; interleaved 1:1 with ECMP 9.42 (the two jobs' flows hash
    // onto one of the two uplinks), spraying 1:1 within 5% of alone, 2:1 12.68.
    assert!(
        (spray / alone - 1.0).abs() < 0.05,
        "spray {spray} ms against {alone} ms alone"
    );
    assert!(
        ecmp > alone * 1.2,
        "ECMP {ecmp} ms against {alone} ms alone"
    );
    assert!(shared > ecmp, "2:1 {shared} ms against 1:1 {ecmp} ms");
    // Two jobs on one GPU are refused (checked in `bad_jobs_are_refused_with_their_field`).
}

//! The step graph and runtime against closed forms, with a stand-in network where every
//! collective and send takes a fixed time.

use super::graph::{CommClass, TaskKind};
use super::*;
use crate::units::SimDuration;

use super::{test_config as config, toy};

/// Runs `c` with every collective taking `coll` and every send `send`; returns the
/// result and the collectives each set ran.
fn drive(c: &TrainingConfig, coll: SimDuration, send: SimDuration) -> (TrainingResult, Vec<u32>) {
    let mut r = TrainingRun::new(c, 0);
    let mut out = Vec::new();
    let mut net: std::collections::BinaryHeap<Reverse<(SimTime, u8, u32)>> = Default::default();
    let mut runs = vec![0u32; r.graph.sets.len()];
    r.start(SimTime::ZERO, &mut out);
    let mut now = SimTime::ZERO;
    for _ in 0..1_000_000 {
        for a in out.drain(..) {
            match a {
                Action::Trigger { set } => {
                    runs[set as usize] += 1;
                    net.push(Reverse((now + coll, 0, set)));
                }
                Action::Send { task } => {
                    r.add_parts(task, 1);
                    net.push(Reverse((now + send, 1, task)));
                }
            }
        }
        let t_net = net.peek().map(|x| x.0 .0);
        let t_timer = r.next_timeout();
        now = match (t_net, t_timer) {
            (None, None) => break,
            (a, b) => a.unwrap_or(SimTime::MAX).min(b.unwrap_or(SimTime::MAX)),
        };
        if t_timer == Some(now) {
            r.on_timer(now, &mut out);
            continue;
        }
        let Reverse((_, kind, id)) = net.pop().unwrap();
        if kind == 0 {
            r.set_done(now, id, &mut out);
        } else {
            r.part_done(now, id, &mut out);
        }
    }
    assert!(r.is_done(), "every task ran");
    (r.result(), runs)
}

fn compute_of(c: &TrainingConfig, flops: f64) -> f64 {
    flops / (c.peak_flops * c.efficiency) * 1e12
}

/// 1F1B (PipeDream-Flush) with communication free: a step takes (m + p - 1) x (t_F +
/// t_B) (Narayanan et al. SC'21, section 2.2.1: the bubble is (p - 1) passes of each
/// kind), here for p = 4 stages, m = 8 microbatches, t_B = 2 t_F.
#[test]
fn one_f_one_b_without_communication_is_the_closed_form() {
    let c = config(toy(8), 1, 4, 1, 8);
    let m = &c.model;
    let t = 1024;
    let per_layer = m.attention_flops(t, 1024) + m.mlp_flops(t);
    let t_f = compute_of(&c, per_layer * 2.0); // 2 layers per stage
    let expect = (8.0 + 4.0 - 1.0) * 3.0 * t_f;
    let (res, _) = drive(&c, SimDuration::ZERO, SimDuration::ZERO);
    let got = res.no_comm_step_ps[0] as f64;
    assert!((got / expect - 1.0).abs() < 1e-6, "{got} against {expect}");
    // With free communication the run is the same as its no-communication bound.
    assert_eq!(res.step_ps, res.no_comm_step_ps);
    // Each stage computes m (t_F + t_B); the bubble is the rest.
    assert!((res.compute_ps as f64 / (8.0 * 3.0 * t_f) - 1.0).abs() < 1e-6);
    let sends = res
        .classes
        .iter()
        .find(|x| x.0 == CommClass::PpSend)
        .unwrap()
        .1;
    assert_eq!(
        sends.count,
        2 * 3 * 8,
        "forward and backward, per stage boundary and microbatch"
    );
}

/// Pipeline sends on the critical path: with p = 2 and m = 1 the step is F0, send,
/// F1, B1, send, B0: 2 t_F + 2 t_B + 2 sends.
#[test]
fn pipeline_sends_lie_on_the_critical_path() {
    let c = config(toy(2), 1, 2, 1, 1);
    let send = SimDuration::from_us(7);
    let (res, _) = drive(&c, SimDuration::ZERO, send);
    let diff = res.step_ps[0] - res.no_comm_step_ps[0];
    assert_eq!(diff, 2 * send.0);
}

/// Data parallelism without overlap: one bucket for all gradients, reduced after the
/// last backward pass, so the step is compute plus one all-reduce, exactly.
#[test]
fn one_bucket_is_fully_exposed() {
    let c = config(toy(4), 1, 1, 4, 2);
    let ar = SimDuration::from_us(500);
    let (res, runs) = drive(&c, ar, SimDuration::ZERO);
    assert_eq!(res.step_ps[0], res.compute_ps + ar.0);
    assert_eq!(runs.iter().sum::<u32>(), 1);
}

/// Buckets of one layer overlap with the backward pass: only the last bucket's
/// reduction shows (a layer's backward takes longer than a reduction here), so the
/// exposed time is one all-reduce, not four.
#[test]
fn buckets_overlap_with_the_backward_pass() {
    let mut c = config(toy(4), 1, 1, 4, 2);
    let layer = c.model.attention_params() + c.model.mlp_params();
    c.bucket_params = layer;
    let t = 1024;
    let t_b = compute_of(
        &c,
        2.0 * (c.model.attention_flops(t, 1024) + c.model.mlp_flops(t)),
    );
    let ar = SimDuration((t_b * 0.5) as u64);
    let (res, runs) = drive(&c, ar, SimDuration::ZERO);
    assert_eq!(runs.iter().sum::<u32>(), 4, "a bucket per layer");
    assert_eq!(res.step_ps[0], res.compute_ps + ar.0);
    let dp = res
        .classes
        .iter()
        .find(|x| x.0 == CommClass::DpAllreduce)
        .unwrap()
        .1;
    assert_eq!(dp.total_ps, 4 * ar.0);
    // Reductions longer than a layer's backward pass queue behind each other.
    let slow = SimDuration((t_b * 2.0) as u64);
    let (res, _) = drive(&c, slow, SimDuration::ZERO);
    // The first bucket is ready one layer into the last backward pass; the four
    // reductions then run back to back.
    let first_ready = res.compute_ps as f64 - 3.0 * t_b;
    assert!((res.step_ps[0] as f64 - (first_ready + 4.0 * slow.0 as f64)).abs() < 4.0);
}

/// Tensor parallelism: two all-reduces per layer per pass, in line with compute, and
/// their bytes are a microbatch's activations (t x h x 2 B).
#[test]
fn tensor_parallel_all_reduces_are_in_line() {
    let c = config(toy(3), 4, 1, 1, 2);
    let ar = SimDuration::from_us(10);
    let (res, _) = drive(&c, ar, SimDuration::ZERO);
    let tp = res
        .classes
        .iter()
        .find(|x| x.0 == CommClass::TpAllreduce)
        .unwrap()
        .1;
    assert_eq!(
        tp.count,
        3 * 2 * 2 * 2,
        "layers x passes x microbatches x 2"
    );
    assert_eq!(res.step_ps[0] - res.no_comm_step_ps[0], tp.count * ar.0);
    let g = super::graph::build(&c);
    assert_eq!(g.sets[0].sizes[0], 1024 * 1024 * 2);
    assert_eq!(g.sets[0].groups, vec![vec![0, 1, 2, 3]]);
}

/// Mixture of experts: two all-to-alls per layer and pass over groups of `ep` data
/// ranks, each rank sending its tokens' hidden states x top_k; expert gradients reduce
/// over the ranks holding the same experts.
#[test]
fn experts_exchange_tokens_in_groups() {
    let mut m = toy(2);
    m.experts = 8;
    m.top_k = 2;
    let mut c = config(m, 1, 1, 8, 1);
    c.ep = 4;
    let g = super::graph::build(&c);
    let ep = g
        .sets
        .iter()
        .find(|s| s.class == CommClass::EpAlltoall)
        .unwrap();
    assert_eq!(ep.groups, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    assert_eq!(ep.sizes.len(), 2 * 2 * 2);
    assert_eq!(ep.sizes[0], 1024 * 1024 * 2 * 2);
    let edp = g
        .sets
        .iter()
        .find(|s| s.class == CommClass::ExpertDpAllreduce)
        .unwrap();
    assert_eq!(
        edp.groups,
        vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
    );
    // Each rank holds 2 of the 8 experts.
    assert_eq!(
        edp.sizes.iter().sum::<u64>(),
        2 * 2 * 2 * c.model.mlp_params()
    );
    let (res, _) = drive(&c, SimDuration::from_us(3), SimDuration::ZERO);
    assert!(res.complete);
    assert!(g
        .tasks
        .iter()
        .all(|t| !matches!(t.kind, TaskKind::Send { .. })));
}

/// Steps follow each other: the second starts a stage once its gradients are reduced,
/// so two steps take twice one.
#[test]
fn steps_follow_each_other() {
    let mut c = config(toy(4), 1, 2, 2, 4);
    let (one, _) = drive(&c, SimDuration::from_us(50), SimDuration::from_us(5));
    c.steps = 2;
    let (two, _) = drive(&c, SimDuration::from_us(50), SimDuration::from_us(5));
    assert_eq!(two.step_ps.len(), 2);
    assert_eq!(two.step_ps[0], one.step_ps[0]);
    assert_eq!(two.step_ps[1], one.step_ps[0]);
}

/// A trace written from a job and read back runs as the job: here a mixture of experts
/// whose expert-parallel groups hold the same ranks as its data-parallel ones (ep = dp),
/// on communicators of their own (a gradient reduction does not wait for an all-to-all).
#[test]
fn a_written_trace_runs_as_its_job() {
    let mut m = toy(4);
    m.experts = 4;
    m.top_k = 2;
    let mut c = config(m, 2, 2, 4, 3);
    c.ep = 4;
    c.bucket_params = 4_000_000;
    let text = super::trace::write_native(&super::graph::build(&c), "moe", [4, 2, 2, 4], 3);
    let mut replay = c.clone();
    replay.trace = Some(std::sync::Arc::new(super::trace::read(&text, 1).unwrap()));
    for (coll, send) in [(3, 5), (400, 1), (50, 300)] {
        let (coll, send) = (SimDuration::from_us(coll), SimDuration::from_us(send));
        let (a, _) = drive(&c, coll, send);
        let (b, _) = drive(&replay, coll, send);
        assert_eq!(a.step_ps, b.step_ps);
        assert_eq!(a.classes, b.classes);
    }
}

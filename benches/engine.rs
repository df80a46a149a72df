//! Engine benchmarks (criterion).
//!
//! - `event_queue`: schedule + pop on a queue holding 10,000 pending events (the steady
//!   state of a busy fabric), each next one 0-4 us ahead, reported as events per second.
//!   Most land beyond the wheel's 524 ns, in the far radix heap.
//! - `event_queue_near`: the same with each next event 0-300 ns ahead, as in real runs
//!   (97% of permutation-8192's and 99% of websearch-128's events are scheduled less
//!   than 262 ns ahead): 10,000 pending events over 300 ns, about 130 per 2 ns tick once rescheduled, a
//!   large fabric's crowded ticks.
//! - `permutation-256-rc` / `-raw`: the fixed 256-host permutation of
//!   `scenarios/permutation-256.yaml` (16 leaves x 16 hosts, 16 spines, 100 Gb/s, 1 us
//!   links, 1000 B MTU, 2 MB per host) over RC, without a transport, and over RC with
//!   PFC and DCQCN, whole run
//!   including building the fabric; throughput is its simulated events.
//! - `quickstart`: `scenarios/quickstart.yaml`.
//! - `doorbell-cpu_gdr-irq`: `scenarios/doorbell.yaml` (21,000 small messages) with the
//!   host model's every stage and moderated interrupts.
//! - `deep-send-queue`: `benches/scenarios/deep-send-queue.yaml`, 120,000 1 KB messages
//!   on two queue pairs with `max_send_wr: 65536` (the send-queue lookup per packet).
//!
//! Run: `cargo bench --bench engine`. Peak memory is not measured here: see the README
//! (`doorbell run scenarios/permutation-256.yaml` writes it to `perf.json`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use doorbell::engine::{Event, EventQueue};
use doorbell::scenario::{load, Overrides};
use doorbell::units::{SimDuration, SimTime};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

fn event_queue(c: &mut Criterion) {
    const PENDING: u64 = 10_000;
    const OPS: u64 = 100_000;
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(OPS));
    for (name, spacing_ps, ahead_ps) in [
        // The next event lands 0-4 us later, like a packet's next hop over long links.
        ("event_queue", 1000, 4_000_000),
        // 0-300 ns later.
        ("event_queue_near", 30, 300_000),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| queue_ops(PENDING, OPS, spacing_ps, ahead_ps))
        });
    }
    g.finish();
}

/// `pending` events `spacing_ps` apart, then `ops` pops, each scheduling its event again
/// 0 to `ahead_ps` later.
fn queue_ops(pending: u64, ops: u64, spacing_ps: u64, ahead_ps: u64) -> usize {
    let mut q = EventQueue::new(pending as usize);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..pending {
        q.schedule(
            SimTime(i * spacing_ps),
            i as u32,
            Event::TxDone { port: i as u32 },
        );
    }
    for _ in 0..ops {
        let (t, ev) = q.pop().expect("pending");
        // xorshift
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let src = match ev {
            Event::TxDone { port } => port,
            _ => 0,
        };
        q.schedule(t + SimDuration(x % ahead_ps), src, black_box(ev));
    }
    black_box(q.len())
}

fn scenario_runs(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut g = c.benchmark_group("scenario");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    for (label, name, set) in [
        ("permutation-256-rc", "permutation-256", vec![]),
        (
            "permutation-256-raw",
            "permutation-256",
            vec!["transport.mode=raw".to_string()],
        ),
        (
            "permutation-256-pfc-dcqcn",
            "permutation-256",
            vec![
                "flow_control.mode=pfc".to_string(),
                "cc.algorithm=dcqcn".to_string(),
            ],
        ),
        ("quickstart", "quickstart", vec![]),
        (
            "deep-send-queue",
            "../benches/scenarios/deep-send-queue",
            vec![],
        ),
        // The host model on: every message through posting, doorbell, DMA, CQE and
        // moderated interrupts (the CPU-posting GPUDirect set of doorbell.yaml).
        (
            "doorbell-cpu_gdr-irq",
            "doorbell",
            vec![
                "compare=[]".to_string(),
                "host.posting=cpu_gdr".to_string(),
                "host.completion=interrupt".to_string(),
            ],
        ),
    ] {
        let sc = load(
            &root.join(format!("scenarios/{name}.yaml")),
            &Overrides { seed: None, set },
        )
        .expect("shipped scenario");
        let events = doorbell::sim::run(&sc).events;
        g.throughput(Throughput::Elements(events));
        g.bench_with_input(BenchmarkId::from_parameter(label), &sc, |b, sc| {
            b.iter(|| black_box(doorbell::sim::run(sc).events))
        });
    }
    g.finish();
}

criterion_group!(benches, event_queue, scenario_runs);
criterion_main!(benches);

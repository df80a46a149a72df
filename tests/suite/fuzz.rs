//! A semantic fuzzer: valid scenarios drawn from the schema (every section and mode,
//! extreme but legal values, collectives beside flows, faults, planes and uneven
//! leaves), each run briefly and checked against the end-of-run invariants
//! (`metrics::invariants`), for determinism, and for bounded work.
//!
//! - `fuzz::ci_slice`: a fixed-seed slice that `cargo test` runs (and `.ci/run` again in a
//!   debug build, with overflow checks and `debug_assert!`s on);
//! - `fuzz::long_run` (ignored): `DOORBELL_FUZZ_CASES=10000 DOORBELL_FUZZ_SEED=7 cargo
//!   test --release --test suite fuzz::long_run -- --ignored --nocapture`
//!   (`DOORBELL_SWEEP_MIN=1` too: collective transfers retire as early as they can);
//! - `fuzz::split_slice` and `fuzz::long_split` (ignored): each case on one thread and
//!   split over two and three threads (`run --threads`), with a time series added: the
//!   same summary, samples and flows (`DOORBELL_FUZZ_CASES=5000 DOORBELL_FUZZ_SEED=11
//!   cargo test --release --test suite fuzz::long_split -- --ignored --nocapture`);
//! - `fuzz::regressions`: every case the fuzzing ever found, kept in
//!   `tests/fuzz-regressions/` (a first line `# expect: refused` means validation must
//!   now refuse it; otherwise it must run with every invariant held, and the same split
//!   over threads).
//!
//! A case that validation refuses is skipped (the generator aims at valid input; the
//! robustness tests cover refusals); one that panics, breaks an invariant, differs
//! between two runs or exceeds its event budget fails with its YAML printed.

use doorbell::metrics::summarize;
use doorbell::scenario::{parse_str, Overrides};
use doorbell::sim::run;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn pick<'a, T>(r: &mut StdRng, v: &'a [T]) -> &'a T {
    &v[r.gen_range(0..v.len())]
}

/// One scenario, as a user would write it. Sizes are kept small so a case runs in
/// milliseconds; rates, buffers, MTUs and latencies span their legal extremes.
pub fn generate(r: &mut StdRng) -> String {
    let planes: u32 = if r.gen_bool(0.15) { 2 } else { 1 };
    let leaves: u32 = planes * r.gen_range(1..=3);
    let spines: u32 = if leaves == 1 {
        0
    } else {
        planes * r.gen_range(1..=2)
    };
    let hosts_per_leaf = if r.gen_bool(0.2) {
        let v: Vec<String> = (0..leaves)
            .map(|_| r.gen_range(1..=4).to_string())
            .collect();
        format!("[{}]", v.join(", "))
    } else {
        r.gen_range(if leaves == 1 { 2 } else { 1 }..=4).to_string()
    };
    let rates = [
        "1Gbps", "10Gbps", "25Gbps", "100Gbps", "400Gbps", "800Gbps", "1600Gbps",
    ];
    let lats = ["1ns", "100ns", "1us", "10us"];
    let (hr, fr) = (pick(r, &rates), pick(r, &rates));
    let (hl, fl) = (pick(r, &lats), pick(r, &lats));
    let links = r.gen_range(1..=2);
    let mut y = format!(
        "seed: {}\nduration: 2ms\ntopology: {{ leaves: {leaves}, spines: {spines}, hosts_per_leaf: {hosts_per_leaf}, planes: {planes}, links_per_spine: {links}, host_link: {{ rate: {hr}, latency: {hl} }}, fabric_link: {{ rate: {fr}, latency: {fl} }} }}\n",
        r.gen::<u16>()
    );
    let limit = if r.gen_bool(0.2) {
        format!("port_limit: {}", pick(r, &["64KB", "256KB", "1MiB"]))
    } else {
        format!(
            "alpha: {}",
            pick(r, &["0.0625", "0.125", "1.0", "8.0", "64"])
        )
    };
    y += &format!(
        "switch: {{ latency: {}, forwarding: {}, buffer: {}, {limit} }}\n",
        pick(r, &["0ns", "150ns", "500ns"]),
        pick(r, &["store_and_forward", "cut_through"]),
        pick(r, &["256KB", "1MiB", "4MiB", "32MiB"]),
    );
    y += &format!(
        "packet: {{ mtu: {}, encapsulation: {} }}\n",
        pick(r, &["256B", "1024B", "4096B"]),
        pick(r, &["ib", "ib_grh", "rocev2"])
    );
    y += &format!(
        "routing: {}\n",
        pick(
            r,
            &[
                "ecmp",
                "static",
                "spray",
                "adaptive",
                "flowlet",
                "{ policy: adaptive, hysteresis: 8KiB, load: queue_and_credits }",
                "{ policy: adaptive, band: 16KiB }",
                "{ policy: flowlet, flowlet_gap: 2us, load: queue_and_credits }",
            ]
        )
    );
    let fc = *pick(r, &["lossy", "pfc", "ib_credit", "pfc_dynamic"]);
    y += &match fc {
        // PFC with a dynamic Xoff, from a small to a large share of the free buffer.
        "pfc_dynamic" => format!(
            "flow_control: {{ mode: pfc, xoff_alpha: {} }}\n",
            pick(r, &["0.0625", "0.125", "1", "8"])
        ),
        _ => format!("flow_control: {{ mode: {fc} }}\n"),
    };
    let raw = r.gen_bool(0.2);
    let mut read = false;
    if raw {
        y += "transport: { mode: raw }\n";
    } else {
        let window = r.gen_range(1..=64u32);
        let op = *pick(r, &["write", "write", "send", "read"]);
        read = op == "read";
        y += &format!(
            "transport: {{ mode: rc, rc: {{ operation: {op}, timeout: {}, retry_cnt: {}, window_packets: {window}, ack_every: {}, connections: {}, recv_queue_depth: {} }} }}\n",
            pick(r, &[0, 8, 12, 14, 20]),
            r.gen_range(0..=7),
            r.gen_range(1..=window.min(8)),
            pick(r, &["per_flow", "per_host_pair"]),
            r.gen_range(1..=8),
        );
        // Out-of-order RC, with a hole timer from far below an RTT to far above it.
        if r.gen_bool(0.4) {
            y = y.replacen(
                "recv_queue_depth",
                &format!(
                    "out_of_order: true, reorder_timeout: {}, selective_nak: {}, recv_queue_depth",
                    pick(r, &["1us", "20us", "100us", "1ms"]),
                    r.gen_bool(0.5)
                ),
                1,
            );
        }
        if r.gen_bool(0.3) {
            y += *pick(
                r,
                &[
                    "cc: { algorithm: dcqcn, preset: paper }\n",
                    "cc: { algorithm: dcqcn, preset: nvidia }\n",
                    "cc: { algorithm: dcqcn, preset: hpcc }\n",
                    "cc: { algorithm: hpcc }\n",
                    "cc: { algorithm: swift }\n",
                ],
            );
        }
    }
    if r.gen_bool(0.25) {
        y += &format!(
            "faults: {{ ber: {}, drop_probability: {} }}\n",
            pick(r, &["0", "1e-9", "1e-6"]),
            pick(r, &["0", "0.0001", "0.01"])
        );
    }
    let host = r.gen_bool(0.2);
    if host {
        y += &format!(
            "host: {{ posting: {}, memory: {}, completion: {}, doorbell_batch: {}, blueflame: {} }}\n",
            pick(r, &["cpu", "cpu_gdr", "cpu_proxy", "gpu"]),
            pick(r, &["host", "gpu"]),
            pick(r, &["poll", "interrupt"]),
            r.gen_range(1..=8),
            r.gen_bool(0.5)
        );
    }
    // Hosts of plane 0 (every item stays in one plane).
    let first_leaf_hosts: u32 = hosts_per_leaf
        .trim_matches(|c| c == '[' || c == ']')
        .split(", ")
        .map(|n| n.parse::<u32>().unwrap())
        .next()
        .unwrap();
    let plane0: u32 = if hosts_per_leaf.starts_with('[') {
        hosts_per_leaf
            .trim_matches(|c| c == '[' || c == ']')
            .split(", ")
            .take((leaves / planes) as usize)
            .map(|n| n.parse::<u32>().unwrap())
            .sum()
    } else {
        first_leaf_hosts * leaves / planes
    };
    y += "workload:\n";
    let sizes = ["1B", "100B", "4KiB", "64KiB", "256KiB"];
    let mut items = 0;
    for _ in 0..r.gen_range(1..=3) {
        let kind = r.gen_range(0..8);
        let spread = planes == 1;
        let start = pick(r, &["0us", "10us", "300us"]);
        let h = |r: &mut StdRng| r.gen_range(0..plane0.max(1));
        let item = match kind {
            0 if plane0 >= 2 => {
                let a = h(r);
                let b = (a + 1 + r.gen_range(0..plane0 - 1)) % plane0;
                format!(
                    "  - flows: [{{ src: {a}, dst: {b}, size: {}, start: {start} }}]\n",
                    pick(r, &sizes)
                )
            }
            1 if spread => format!(
                "  - permutation: {{ size: {}, start: {start} }}\n",
                pick(r, &sizes)
            ),
            2 if spread => format!(
                "  - incast: {{ senders: 1, receiver: 0, size: {}, start: {start} }}\n",
                pick(r, &sizes)
            ),
            3 if spread => format!(
                "  - all_to_all: {{ size: {}, start: {start} }}\n",
                pick(r, &["1B", "4KiB"])
            ),
            4 if plane0 >= 2 => format!(
                "  - stream: {{ src: 0, dst: 1, size: {}, count: {}, interval: {} }}\n",
                pick(r, &sizes),
                r.gen_range(1..=20),
                pick(r, &["0us", "1us", "50us"])
            ),
            5 if plane0 >= 2 => format!(
                "  - ping_pong: {{ hosts: [0, 1], size: {}, iterations: {} }}\n",
                pick(r, &sizes),
                r.gen_range(1..=5)
            ),
            6 if plane0 >= 2 => format!(
                "  - poisson: {{ load: {}, sizes: {{ uniform: [1B, 64KiB] }}, until: 200us, src_hosts: [0], dst_hosts: [1] }}\n",
                pick(r, &["0.1", "0.5", "1.0"])
            ),
            7 if spread && !raw && !read && !host => format!(
                "  - collective: {{ op: {}, algorithm: {}, size: {}, iters: 1, warmup_iters: 0, channels: {} }}\n",
                pick(r, &["allreduce", "allgather", "reduce_scatter", "broadcast"]),
                "ring",
                pick(r, &["4KiB", "64KiB"]),
                r.gen_range(1..=2)
            ),
            _ => continue,
        };
        y += &item;
        items += 1;
    }
    if items == 0 {
        y += "  - incast: { senders: 1, receiver: 0, size: 4KiB }\n";
    }
    y
}

/// One GPU cluster, as a collective's user would write it: servers of GPUs and NICs
/// (packed or rail-wired), the host model in every posting mode (batched doorbells,
/// BlueFlame, inline data, few DMA read slots, interrupts), and one or two collectives
/// (rings, trees or the tuner's choice, every protocol, several channels, queue pairs
/// per connection, PXN), sometimes beside a stream of messages. `generate` leaves the
/// host model out of collectives; this is the split fuzzer's second source
/// (`fuzz::split_cluster_slice`).
pub fn generate_cluster(r: &mut StdRng) -> String {
    let nics = *pick(r, &[1u32, 2, 4]);
    let gpus = (nics * *pick(r, &[1u32, 2]))
        .max(*pick(r, &[1u32, 2, 8]))
        .min(8);
    let servers_per_leaf = r.gen_range(1..=2u32);
    let wiring = *pick(r, &["packed", "rail"]);
    // A whole number of servers on each leaf (packed) or on the fabric (rail).
    let hosts_per_leaf = servers_per_leaf * nics;
    let leaves = r.gen_range(2..=4u32);
    let spines = r.gen_range(2..=3u32);
    let mut y = format!(
        "seed: {}\nduration: 2ms\ntopology: {{ leaves: {leaves}, spines: {spines}, hosts_per_leaf: {hosts_per_leaf}, host_link: {{ rate: {}, latency: {} }}, fabric_link: {{ rate: {}, latency: {} }} }}\n",
        r.gen::<u16>(),
        pick(r, &["25Gbps", "100Gbps", "400Gbps"]),
        pick(r, &["100ns", "1us"]),
        pick(r, &["25Gbps", "100Gbps", "400Gbps"]),
        pick(r, &["100ns", "1us"]),
    );
    let fc = *pick(r, &["ib_credit", "ib_credit", "pfc", "lossy"]);
    y += &format!(
        "switch: {{ latency: {}, forwarding: {}, buffer: {} }}\n",
        pick(r, &["0ns", "300ns"]),
        pick(r, &["store_and_forward", "cut_through"]),
        // PFC's headroom for fast long links needs the larger buffer.
        if fc == "pfc" {
            "16MiB"
        } else {
            pick(r, &["256KB", "4MiB"])
        },
    );
    y += &format!(
        "packet: {{ mtu: {}, encapsulation: ib }}\nrouting: {}\nflow_control: {{ mode: {fc} }}\n",
        pick(r, &["1024B", "4096B"]),
        pick(r, &["ecmp", "spray", "adaptive", "flowlet"]),
    );
    y += &format!(
        "transport: {{ mode: rc, rc: {{ timeout: {}, window_packets: {}, ack_every: {} }} }}\n",
        pick(r, &[8, 14, 20]),
        pick(r, &[4, 64]),
        pick(r, &[1, 4]),
    );
    if r.gen_bool(0.2) {
        y += &format!(
            "faults: {{ drop_probability: {} }}\n",
            pick(r, &["0.0001", "0.01"])
        );
    }
    y += &format!(
        "host: {{ gpus_per_host: {gpus}, nics_per_host: {nics}, wiring: {wiring}, posting: {}, memory: {}, completion: {}, doorbell_batch: {}, blueflame: {}, inline_max: {}, posting_threads: {}, nic: {{ max_outstanding_reads: {} }} }}\n",
        pick(r, &["cpu", "cpu_gdr", "cpu_proxy", "cpu_proxy", "gpu"]),
        pick(r, &["gpu", "gpu", "host"]),
        pick(r, &["poll", "poll", "interrupt"]),
        pick(r, &[1, 1, 2, 4]),
        r.gen_bool(0.3),
        pick(r, &["0B", "0B", "64B", "256B"]),
        pick(r, &[1, 1, 2]),
        pick(r, &[1, 2, 64, 64]),
    );
    y += "workload:\n";
    for _ in 0..r.gen_range(1..=2) {
        let op = *pick(
            r,
            &[
                "allreduce",
                "allreduce",
                "allgather",
                "reduce_scatter",
                "broadcast",
            ],
        );
        // Trees run allreduce only.
        let algorithm = if op == "allreduce" {
            *pick(r, &["ring", "ring", "tree", "auto"])
        } else {
            "ring"
        };
        y += &format!(
            "  - collective: {{ op: {op}, algorithm: {algorithm}, protocol: {}, size: {}, iters: {}, warmup_iters: {}, channels: {}, placement: {}, pxn: {}, qps_per_connection: {}, split_data_on_qps: {}, start: {} }}\n",
            pick(r, &["simple", "ll", "ll128", "auto"]),
            pick(r, &["1KiB", "16KiB", "256KiB"]),
            r.gen_range(1..=2),
            r.gen_range(0..=1),
            r.gen_range(1..=4),
            pick(r, &["packed", "packed", "striped"]),
            r.gen_bool(0.7),
            pick(r, &[1, 1, 2]),
            r.gen_bool(0.3),
            pick(r, &["0us", "5us"]),
        );
    }
    if r.gen_bool(0.3) {
        y += &format!(
            "  - stream: {{ src: 0, dst: {}, size: {}, count: {}, interval: 1us }}\n",
            leaves * hosts_per_leaf - 1,
            pick(r, &["64B", "4KiB", "64KiB"]),
            r.gen_range(1..=8),
        );
    }
    y
}

/// What one case did.
enum Case {
    Refused,
    Ran,
}

/// Runs one case: refused, or run twice with every invariant held, the same summary
/// both times, and no more than `max_events` events.
fn check(yaml: &str, twice: bool, max_events: u64) -> Result<Case, String> {
    let sc = match parse_str(yaml, "fuzz.yaml", "fuzz", &Overrides::default()) {
        Ok(sc) => sc,
        Err(e) => {
            let shown = e.to_string();
            if !shown.starts_with("fuzz.yaml:") {
                return Err(format!("an error without a position: {shown}"));
            }
            return Ok(Case::Refused);
        }
    };
    let one = || {
        catch_unwind(AssertUnwindSafe(|| {
            let out = run(&sc);
            let s = summarize(&sc, &out);
            (serde_json::to_string(&s).unwrap(), s, out.events)
        }))
        .map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    };
    let (json, s, events) = one().map_err(|m| format!("panicked: {m}"))?;
    if !s.invariants.held() {
        return Err(format!("invariants broken: {:?}", s.invariants.violations));
    }
    if events > max_events {
        return Err(format!(
            "{events} events, more than the {max_events} budgeted"
        ));
    }
    if twice {
        let (again, _, _) = one().map_err(|m| format!("panicked the second time: {m}"))?;
        if again != json {
            return Err("two runs of the same scenario and seed differ".into());
        }
    }
    Ok(Case::Ran)
}

/// What one case split over threads did.
enum Split {
    /// Validation refused it, or the split does not take it (`plan_threads` says why).
    NotSplit,
    /// It ran split and wrote what one thread does.
    Same,
}

/// Runs one case on one thread and split over two and three threads (where the split
/// takes it), with a time series added every microsecond (the first host's port, leaf
/// 0's port to spine 0 and spine 0's to leaf 1 where the fabric has them, and the first
/// flow): the same summary (every figure, `events` too), the same samples and each
/// workload flow's bytes and times, or an error naming what differs.
fn check_split(yaml: &str) -> Result<Split, String> {
    let series = |ports: &str| {
        format!("{yaml}timeseries: {{ interval: 1us, ports: [{ports}], flows: [0] }}\n")
    };
    let parse = |y: &str| parse_str(y, "fuzz.yaml", "fuzz", &Overrides::default()).ok();
    let Some(sc) = parse(&series(
        "\"host0->leaf0\", \"leaf0->spine0#0\", \"spine0->leaf1#0\"",
    ))
    .or_else(|| parse(&series("\"host0->leaf0\"")))
    .or_else(|| parse(yaml)) else {
        return Ok(Split::NotSplit);
    };
    let caught = |f: &dyn Fn() -> Option<doorbell::sim::RunOutput>| {
        catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    };
    let one = caught(&|| Some(run(&sc)))
        .map_err(|m| format!("panicked: {m}"))?
        .expect("one thread runs");
    let summary = |o: &doorbell::sim::RunOutput| serde_json::to_string(&summarize(&sc, o)).unwrap();
    let mut result = Split::NotSplit;
    for threads in [2, 3] {
        let Some(split) = caught(&|| doorbell::sim::run_split(&sc, threads).ok())
            .map_err(|m| format!("panicked split over {threads} threads: {m}"))?
        else {
            continue;
        };
        if summary(&one) != summary(&split) {
            return Err(format!(
                "summary.json differs split over {threads} threads:\n{}\n{}",
                summary(&one),
                summary(&split)
            ));
        }
        if one.samples != split.samples {
            let at = one
                .samples
                .iter()
                .zip(&split.samples)
                .position(|(a, b)| a != b);
            return Err(format!(
                "the time series differs split over {threads} threads ({} and {} samples; \
                 first difference at {at:?})",
                one.samples.len(),
                split.samples.len()
            ));
        }
        if flows(&one) != flows(&split) {
            return Err(format!("the flows differ split over {threads} threads"));
        }
        result = Split::Same;
    }
    Ok(result)
}

/// Each workload flow's number, bytes, retransmissions, times and outcome (a
/// collective's transfer records retire at different moments on one thread and split,
/// `DOORBELL_SWEEP_MIN`; what they leave behind is in the summary).
fn flows(o: &doorbell::sim::RunOutput) -> Vec<String> {
    o.flows
        .iter()
        .filter(|f| f.coll.is_none())
        .map(|f| {
            format!(
                "{} {} {} {:?} {:?} {:?} {:?}",
                f.num, f.delivered, f.retransmissions, f.landed, f.finish, f.failed_at, f.outcome
            )
        })
        .collect()
}
/// A source of cases: `generate` or `generate_cluster`.
type Generator = fn(&mut StdRng) -> String;

/// The generator a long run or `print_case` draws from: `generate_cluster` when
/// `DOORBELL_FUZZ_GEN=cluster`, else `generate`.
fn chosen_generator() -> Generator {
    match std::env::var("DOORBELL_FUZZ_GEN").as_deref() {
        Ok("cluster") => generate_cluster,
        _ => generate,
    }
}

/// `cases` cases of `gen` from `seed`, each run on one thread and split over two and
/// three threads (`check_split`): how many split.
fn fuzz_split(gen: Generator, seed: u64, cases: u32, progress: bool) -> u32 {
    let mut r = StdRng::seed_from_u64(seed);
    let mut split = 0;
    for i in 0..cases {
        let yaml = gen(&mut r);
        if progress {
            eprintln!("case {i}");
        }
        match check_split(&yaml) {
            Ok(Split::Same) => split += 1,
            Ok(Split::NotSplit) => {}
            Err(e) => panic!("fuzz case {i} (seed {seed}): {e}\n{yaml}"),
        }
    }
    split
}

fn fuzz(seed: u64, cases: u32, max_events: u64, progress: bool) -> (u32, u32) {
    let mut r = StdRng::seed_from_u64(seed);
    let (mut ran, mut refused) = (0, 0);
    for i in 0..cases {
        let yaml = generate(&mut r);
        if progress {
            eprintln!("case {i}");
        }
        match check(&yaml, i % 10 == 0, max_events) {
            Ok(Case::Ran) => ran += 1,
            Ok(Case::Refused) => refused += 1,
            Err(e) => panic!("fuzz case {i} (seed {seed}): {e}\n{yaml}"),
        }
    }
    (ran, refused)
}

/// 400 cases from seed 1 (a few seconds, about 10 s in a debug build); most must be
/// valid (the generator follows the schema), so the slice exercises the model and not
/// only validation.
#[test]
fn ci_slice() {
    let (ran, refused) = fuzz(1, 400, 3_000_000, false);
    println!("fuzz ci slice: {ran} ran, {refused} refused");
    assert!(
        ran >= 300,
        "only {ran} of 400 cases ran ({refused} refused)"
    );
}

/// A long run's cases and seed (`DOORBELL_FUZZ_CASES`, default `cases`;
/// `DOORBELL_FUZZ_SEED`, default 7). `DOORBELL_SWEEP_MIN=1` retires finished transfers as
/// early as they can go, so the cases check retirement too (invariants, two runs alike,
/// one thread and split alike).
fn long_run_settings(cases: u32) -> (u32, u64) {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    if let Ok(n) = std::env::var("DOORBELL_SWEEP_MIN") {
        doorbell::sim::retire::set_sweep_min(n.parse().expect("DOORBELL_SWEEP_MIN"));
    }
    (
        env("DOORBELL_FUZZ_CASES", cases as u64) as u32,
        env("DOORBELL_FUZZ_SEED", 7),
    )
}

/// 1,000 cases from seed 2 (200 in a debug build, which `.ci/run` runs again), each on
/// one thread and split over threads where the split takes it (`run --threads 2` and
/// `3`): the same bytes. About a fifth split (the others have one leaf, planes, or what
/// `plan_threads` leaves out).
#[test]
fn split_slice() {
    let cases = if cfg!(debug_assertions) { 200 } else { 1000 };
    let split = fuzz_split(generate, 2, cases, false);
    println!("fuzz split slice: {split} of {cases} split");
    assert!(
        split >= cases * 3 / 20,
        "only {split} of {cases} cases split"
    );
}

/// CLUSTER_CASES GPU clusters from seed 3 (`generate_cluster`; fewer in a debug build),
/// each on one thread and split over threads where the split takes it: the same bytes,
/// with the host model under the collectives.
#[test]
fn split_cluster_slice() {
    let cases = if cfg!(debug_assertions) { 40 } else { 200 };
    let split = fuzz_split(generate_cluster, 3, cases, false);
    println!("fuzz split cluster slice: {split} of {cases} split");
    assert!(split >= cases / 2, "only {split} of {cases} cases split");
}

/// `DOORBELL_FUZZ_CASES=2000 DOORBELL_FUZZ_SEED=7 cargo test --release --test suite
/// fuzz::long_split -- --ignored --nocapture`.
#[test]
#[ignore = "long: run on demand"]
fn long_split() {
    let (cases, seed) = long_run_settings(2_000);
    let split = fuzz_split(chosen_generator(), seed, cases, true);
    println!("fuzz split seed {seed}: {split} of {cases} split, all the same");
}

#[test]
#[ignore = "long: run on demand"]
fn long_run() {
    let (cases, seed) = long_run_settings(10_000);
    let (ran, refused) = fuzz(seed, cases, 50_000_000, true);
    println!("fuzz seed {seed}: {ran} ran, {refused} refused, no failure");
}

#[test]
fn regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "the kept cases are in {}", dir.display());
    for f in files {
        let yaml = std::fs::read_to_string(&f).unwrap();
        let refuse = yaml.starts_with("# expect: refused");
        match check(&yaml, false, 50_000_000) {
            Ok(Case::Refused) if refuse => {}
            Ok(Case::Ran) if !refuse => {}
            Ok(_) => panic!(
                "{}: expected {}",
                f.display(),
                if refuse { "a refusal" } else { "a run" }
            ),
            Err(e) => panic!("{}: {e}", f.display()),
        }
        // Split over threads too, where the split takes it (the `split-` cases were
        // found by `long_split`).
        if let Err(e) = check_split(&yaml) {
            panic!("{}: {e}", f.display());
        }
    }
}

/// Prints case `DOORBELL_FUZZ_CASE` of seed `DOORBELL_FUZZ_SEED` (to reproduce one with
/// `doorbell run`): `DOORBELL_FUZZ_SEED=7 DOORBELL_FUZZ_CASE=62 cargo test --release
/// --test suite fuzz::print_case -- --ignored --nocapture`.
#[test]
#[ignore = "a tool: prints one case"]
fn print_case() {
    let env = |k: &str| -> u64 {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let mut r = StdRng::seed_from_u64(env("DOORBELL_FUZZ_SEED"));
    let gen = chosen_generator();
    let mut yaml = String::new();
    for _ in 0..=env("DOORBELL_FUZZ_CASE") {
        yaml = gen(&mut r);
    }
    println!("{yaml}");
}

//! Robustness: bad input gets a clear error, never a panic.
//!
//! Three kinds of test live here:
//! - a deterministic mutation test: every shipped scenario is mangled a few thousand ways
//!   (a scalar replaced by a nasty value, a line deleted, duplicated or swapped, an unknown
//!   key inserted, the text cut short) and parsed; parsing may succeed or fail but must
//!   not panic, and a failure must name the file. A sample of the variants that parse is
//!   then run for 50 us of simulated time and summarized, again without a panic;
//! - targeted cases with the exact error each must give;
//! - regressions: bugs the mutation test found (and that are now fixed), each stating the
//!   behaviour it expects.

use doorbell::metrics::summarize;
use doorbell::scenario::{parse_str, Overrides, Scenario, ScenarioError};
use doorbell::sim::run;
use doorbell::units::serialization_delay;
use doorbell::workload::{parse_cdf, Workload};
use std::any::Any;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

// ---------------------------------------------------------------------------------------
// A small deterministic PRNG (SplitMix64), so every run mutates the same way.

struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// FNV-1a, to seed each scenario's stream from its file name.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

// ---------------------------------------------------------------------------------------
// Mutations.

/// Values to put where a scalar was: wrong types, zeros, overflows, unit-string edge cases,
/// YAML oddities, and some extreme values that are valid (so that runs see them).
const NASTY: &[&str] = &[
    "0",
    "-1",
    "4294967296",
    "1e308",
    ".nan",
    ".inf",
    "-.inf",
    "\"\"",
    "''",
    "0B",
    "0Gbps",
    "1e30Gbps",
    "99999999999999999999TiB",
    "1.5ps",
    "~",
    "null",
    "[1,2]",
    "[]",
    "{a: 1}",
    "{}",
    "999999s",
    "18446744073709551615",
    "18446744073709551616",
    "-0",
    "0x10",
    "1_000",
    "true",
    "yes",
    "1.0",
    "0.0000001",
    "1024",
    "1025",
    "65",
    "4096",
    "1B",
    "1KB",
    "1MiB",
    "2MiB",
    "1bps",
    "1Mbps",
    "800Gbps",
    "1ps",
    "0us",
    "0ns",
    "1.2us",
    "86400s",
    "86401s",
    "+5us",
    "-5us",
    "5 us",
    "5µs",
    "5fortnights",
    "us",
    ".",
    "1..2us",
    "0.0000000000001ms",
    "Gbps",
    "é",
    "\"\\u0000\"",
    "&a 1",
    "*a",
    "!!binary aGVsbG8=",
    "!foo 1",
    "|\n  text",
    "spray",
    "adaptive",
    "static",
    "cut_through",
    "rocev2",
    "ib_grh",
    "websearch",
    "hadoop",
    "{ fixed: 1B }",
    "{ uniform: [1B, 1B] }",
    "{ uniform: [2KB, 1KB] }",
    "{ uniform: [1KB] }",
    "{ cdf_file: no-such-file.txt }",
    "{ cdf_file: /dev/null }",
    "{ fixed: 1KB, uniform: [1B, 2B] }",
    "[ { src: 0, dst: 1, size: 1KB } ]",
    "{ senders: 1, receiver: 0, size: 1KB }",
];

/// Keys that no schema struct knows (or that duplicate one), to insert.
const UNKNOWN_KEYS: &[&str] = &[
    "bogus",
    "Leaves",
    "spine",
    "mtu_bytes",
    "leaves",
    "alpha",
    "seed",
    "<<",
    "\"\"",
];

/// A scalar token in a line: byte range and whether it sits in value position (after
/// `key:` or inside a `[...]` list) rather than being a key.
struct Span {
    line: usize,
    start: usize,
    end: usize,
    is_value: bool,
}

/// Finds scalar tokens in one line of a scenario (block or flow style).
fn scalar_spans(li: usize, line: &str, out: &mut Vec<Span>) {
    // Content ends at a comment.
    let end = match line.find(" #") {
        Some(i) => i,
        None if line.trim_start().starts_with('#') => return,
        None => line.len(),
    };
    let body = &line[..end];
    let mut stack: Vec<u8> = Vec::new();
    let mut prev = b'\n';
    let mut tok_start = 0;
    let push = |from: usize, to: usize, prev: u8, stack: &[u8], out: &mut Vec<Span>| {
        let tok = &body[from..to];
        let lead = tok.len() - tok.trim_start().len();
        let t = tok.trim();
        let t = t.strip_prefix("- ").unwrap_or(t);
        if t.is_empty() || t == "-" {
            return;
        }
        let start = from + lead + (tok.trim().len() - t.len());
        let is_value = prev == b':' || (matches!(prev, b'[' | b',') && stack.last() == Some(&b'['));
        out.push(Span {
            line: li,
            start,
            end: start + t.len(),
            is_value,
        });
    };
    for (i, c) in body.bytes().enumerate() {
        if matches!(c, b'{' | b'}' | b'[' | b']' | b',' | b':') {
            push(tok_start, i, prev, &stack, out);
            match c {
                b'{' | b'[' => stack.push(c),
                b'}' | b']' => {
                    stack.pop();
                }
                _ => {}
            }
            prev = c;
            tok_start = i + 1;
        }
    }
    push(tok_start, body.len(), prev, &stack, out);
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Applies one to three random mutations to `text`.
fn mutate(text: &str, rng: &mut SplitMix) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let ops = match rng.below(10) {
        0..=5 => 1,
        6..=8 => 2,
        _ => 3,
    };
    for _ in 0..ops {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let n = lines.len();
        match rng.below(100) {
            // Replace a scalar (mostly a value, sometimes a key) with a nasty value.
            0..=54 => {
                let mut spans = Vec::new();
                for (i, l) in lines.iter().enumerate() {
                    scalar_spans(i, l, &mut spans);
                }
                let values: Vec<&Span> = spans.iter().filter(|s| s.is_value).collect();
                let s = if !values.is_empty() && rng.below(100) < 85 {
                    *rng.pick(&values)
                } else if !spans.is_empty() {
                    rng.pick(&spans)
                } else {
                    continue;
                };
                let v = *rng.pick(NASTY);
                let l = &mut lines[s.line];
                // Keep the body of a block scalar indented under its line.
                let v = if v.contains('\n') {
                    v.replace('\n', &format!("\n{}", " ".repeat(indent_of(l))))
                } else {
                    v.to_string()
                };
                l.replace_range(s.start..s.end, &v);
            }
            // Delete a line.
            55..=64 => {
                lines.remove(rng.below(n));
            }
            // Duplicate a line.
            65..=72 => {
                let i = rng.below(n);
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            // Swap two lines.
            73..=80 => {
                let (i, j) = (rng.below(n), rng.below(n));
                lines.swap(i, j);
            }
            // Insert an unknown (or duplicate) key, as a block line or into a flow map.
            81..=92 => {
                let key = *rng.pick(UNKNOWN_KEYS);
                let i = rng.below(n);
                let with_brace: Vec<usize> = (0..n).filter(|&k| lines[k].contains("{ ")).collect();
                if rng.below(2) == 0 && !with_brace.is_empty() {
                    let k = *rng.pick(&with_brace);
                    let l = lines[k].replacen("{ ", &format!("{{ {key}: 1, "), 1);
                    lines[k] = l;
                } else {
                    let mut ind = indent_of(&lines[i]);
                    if lines[i].trim_start().starts_with("- ") {
                        ind += 2;
                    }
                    lines.insert(i + 1, format!("{}{key}: 1", " ".repeat(ind)));
                }
            }
            // Cut the text short at a random character.
            _ => {
                let joined = lines.join("\n");
                let mut cut = rng.below(joined.len().max(1));
                while !joined.is_char_boundary(cut) {
                    cut -= 1;
                }
                lines = joined[..cut].lines().map(String::from).collect();
            }
        }
    }
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

// ---------------------------------------------------------------------------------------
// Checks.

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `scenarios/*.yaml`, sorted by name: (file name, text).
fn shipped_scenarios() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(root().join("scenarios"))
        .expect("scenarios/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".into()
    }
}

/// What is wrong with an error for `text`, if anything: it must name the file first, say
/// something, and point inside the file when it gives a position.
fn error_problem(e: &ScenarioError, text: &str) -> Option<String> {
    let shown = e.to_string();
    if !shown.starts_with(FUZZ_FILE) {
        return Some(format!("error does not start with the file name: {shown}"));
    }
    if e.message.trim().is_empty() {
        return Some(format!("error has an empty message: {shown:?}"));
    }
    if let (Some(l), Some(c)) = (e.line, e.column) {
        let lines = text.lines().count().max(1);
        if l == 0 || c == 0 || l > lines + 1 {
            return Some(format!(
                "error points at {l}:{c}, outside a {lines}-line file: {shown}"
            ));
        }
    }
    None
}

/// Duration the runs are cut to.
const RUN_FOR: &str = "duration=50us";
const RUN_FOR_PS: f64 = 50e6;

/// Whether a 50 us run of `sc` is cheap: at most 64 hosts, and a bounded number of flows
/// (workload expansion ignores `duration`), of per-packet steps computing ideal FCTs, and
/// of packet events in 50 us at the host link rate.
fn cheap_to_run(sc: &Scenario) -> bool {
    let hosts = sc.topology.hosts() as f64;
    if hosts > 64.0 {
        return false;
    }
    let mtu = sc.mtu as f64;
    let rate = sc.topology.host_link.rate.0 as f64;
    let packets = |size: f64| (size / mtu).ceil().max(1.0);
    let (mut flows, mut ideal_steps) = (0.0f64, 0.0f64);
    for w in &sc.workload {
        let n = w.expected_flows(sc.topology.hosts(), rate as u64);
        // Ideal FCTs are cached by size and same-leaf-or-not, except for explicit flows
        // and Poisson arrivals (one per distinct size).
        let steps = match w {
            Workload::Flows(list) => list.iter().map(|f| packets(f.size as f64)).sum(),
            Workload::Poisson { dist, .. } => n * packets(dist.mean()) + packets(dist.max() as f64),
            _ => 2.0 * packets(w.max_size() as f64),
        };
        flows += n;
        ideal_steps += steps;
    }
    // Every packet but the last of each flow is a full one; a packet makes at most two
    // events on each of at most four hops.
    let full = serialization_delay(sc.mtu_wire_bytes(), sc.topology.host_link.rate).0;
    let events = 8.0 * (hosts * RUN_FOR_PS / full.max(1) as f64 + flows);
    flows.is_finite()
        && ideal_steps.is_finite()
        && flows <= 50_000.0
        && ideal_steps <= 5e6
        && events <= 2e6
}

const VARIANTS_PER_SCENARIO: usize = 5000;
/// The fuzzed text's file name: in `scenarios/`, so that files a scenario names (a
/// trace) are found beside it, as when the scenario is run from there.
const FUZZ_FILE: &str = "scenarios/m.yaml";
const MAX_RUNS: usize = 150;

#[test]
fn mutated_scenarios_never_panic() {
    let scenarios = shipped_scenarios();
    assert!(scenarios.len() >= 5, "found {} scenarios", scenarios.len());
    let mut failures: Vec<String> = Vec::new();
    let (mut parsed_ok, mut parsed_err) = (0usize, 0usize);
    // Variants worth running, per scenario (deduplicated).
    let mut to_run: Vec<Vec<(String, Scenario)>> = vec![Vec::new(); scenarios.len()];
    let mut seen: HashSet<String> = HashSet::new();
    let set = Overrides {
        seed: None,
        set: vec![RUN_FOR.into()],
    };

    for (si, (name, original)) in scenarios.iter().enumerate() {
        if let Err(e) = parse_str(original, FUZZ_FILE, "m", &Overrides::default()) {
            panic!("shipped scenario {name} does not parse: {e}");
        }
        let mut rng = SplitMix(fnv1a(name));
        // Most variants start from the scenario without its comment lines, so that fewer
        // mutations are spent on comments; one in four keeps them (errors must still point
        // at the right line through them).
        let bare: String = original
            .lines()
            .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
            .map(|l| format!("{l}\n"))
            .collect();
        for vi in 0..VARIANTS_PER_SCENARIO {
            let base = if vi % 4 == 0 { original } else { &bare };
            let text = mutate(base, &mut rng);
            let first = catch_unwind(|| parse_str(&text, FUZZ_FILE, "m", &Overrides::default()));
            match first {
                Err(p) => failures.push(format!(
                    "{name} variant {vi}: parse_str panicked: {}\n{text}",
                    panic_message(&*p)
                )),
                Ok(Err(e)) => {
                    parsed_err += 1;
                    if let Some(problem) = error_problem(&e, &text) {
                        failures.push(format!("{name} variant {vi}: {problem}\n{text}"));
                    }
                }
                Ok(Ok(_)) => {
                    parsed_ok += 1;
                    // The same text through the `--set` path, with a short duration.
                    match catch_unwind(|| parse_str(&text, FUZZ_FILE, "m", &set)) {
                        Err(p) => failures.push(format!(
                            "{name} variant {vi}: parse_str with --set {RUN_FOR} panicked: {}\n{text}",
                            panic_message(&*p)
                        )),
                        Ok(Err(e)) => {
                            // Only a Poisson item that relied on the duration can become
                            // invalid by shortening it.
                            // (An integer past u64 in a string field, e.g. `name:
                            // 18446744073709551616`, reads as text from the file but cannot be
                            // held by the serde_yaml::Value tree that `--set` edits; that is a
                            // serde_yaml limitation, reported as exit 2 with the field.)
                            let shown = e.to_string();
                            let expected =
                                shown.starts_with(FUZZ_FILE) && e.path.contains("poisson.until");
                            let value_limit = shown.contains("as u128, expected any YAML value");
                            if !expected && !value_limit {
                                failures.push(format!(
                                    "{name} variant {vi}: parses alone but not with --set {RUN_FOR}: {shown}\n{text}"
                                ));
                            }
                        }
                        Ok(Ok(sc)) => {
                            if to_run[si].len() < MAX_RUNS
                                && cheap_to_run(&sc)
                                && seen.insert(text.clone())
                            {
                                to_run[si].push((text, sc));
                            }
                        }
                    }
                }
            }
        }
    }

    // Run up to MAX_RUNS of them, taking scenarios in turn.
    let mut runs = 0usize;
    let mut ran = vec![0usize; scenarios.len()];
    let mut round = 0usize;
    while runs < MAX_RUNS && to_run.iter().any(|v| round < v.len()) {
        for (si, list) in to_run.iter().enumerate() {
            if runs >= MAX_RUNS {
                break;
            }
            let Some((text, sc)) = list.get(round) else {
                continue;
            };
            let r = catch_unwind(AssertUnwindSafe(|| {
                let out = run(sc);
                let summary = summarize(sc, &out);
                // A few invariants any run keeps.
                let f = &summary.flows;
                let transfers = summary.transfers.as_ref().map_or(0, |t| t.count);
                assert_eq!(f.count + transfers, out.flows.len() as u64);
                assert_eq!(f.completed + f.incomplete, f.count);
                assert!(f.delivered_bytes <= f.payload_bytes, "{f:?}");
                assert!(out.end.0 <= RUN_FOR_PS as u64, "ran to {}", out.end.0);
            }));
            if let Err(p) = r {
                failures.push(format!(
                    "{} run {round}: run/summarize panicked: {}\n{text}",
                    scenarios[si].0,
                    panic_message(&*p)
                ));
            }
            runs += 1;
            ran[si] += 1;
        }
        round += 1;
    }
    eprintln!(
        "robustness: {} variants ({parsed_ok} parse, {parsed_err} rejected); \
         {runs} runs of 50us ({})",
        parsed_ok + parsed_err,
        scenarios
            .iter()
            .zip(&ran)
            .map(|((name, _), n)| format!("{name} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(
        parsed_ok > 0 && parsed_err > 0,
        "mutations should both keep and break scenarios"
    );
    assert!(runs >= MAX_RUNS / 2, "only {runs} cheap variants were run");
    assert!(
        failures.is_empty(),
        "{} failures; the first ones:\n\n{}",
        failures.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n-----\n")
    );
}

// ---------------------------------------------------------------------------------------
// Targeted cases: the exact error each gives.

/// A small valid scenario: 2 leaves x 2 hosts, one spine.
const BASE: &str = "topology:
  leaves: 2
  spines: 1
  hosts_per_leaf: 2
  host_link: { rate: 100Gbps }
workload:
  - permutation: { size: 4KB }
";

/// A one-leaf fabric with a Poisson item whose fields are `FIELDS`.
const POISSON: &str = "topology:
  leaves: 1
  spines: 0
  hosts_per_leaf: 4
  host_link: { rate: 100Gbps }
workload:
  - poisson: { FIELDS }
";

fn parse(yaml: &str) -> Result<Scenario, ScenarioError> {
    parse_str(yaml, "m.yaml", "m", &Overrides::default())
}

/// Parses `yaml`, expecting an error that names `field`; returns it as displayed.
fn rejected(yaml: &str, field: &str) -> String {
    let e = match catch_unwind(|| parse(yaml)) {
        Ok(Ok(_)) => panic!("accepted, expected an error naming {field}:\n{yaml}"),
        Ok(Err(e)) => e,
        Err(p) => panic!("panicked: {}\n{yaml}", panic_message(&*p)),
    };
    let shown = e.to_string();
    assert!(
        shown.starts_with("m.yaml:"),
        "no file and position: {shown}"
    );
    assert!(shown.contains(field), "does not name {field}: {shown}");
    shown
}

#[test]
fn base_scenarios_are_valid() {
    parse(BASE).unwrap();
    parse(&POISSON.replace("FIELDS", "load: 0.5, sizes: websearch, until: 10us")).unwrap();
}

#[test]
fn zero_mtu_is_rejected() {
    assert_eq!(
        rejected(&format!("{BASE}packet: {{ mtu: 0B }}\n"), "packet.mtu"),
        "m.yaml:8:16: packet.mtu: `0B` is zero; a size must be greater than zero"
    );
}

#[test]
fn zero_leaves_is_rejected() {
    assert_eq!(
        rejected(&BASE.replace("leaves: 2", "leaves: 0"), "topology.leaves"),
        "m.yaml:2:3: topology.leaves: expected at least 1 leaf, found 0"
    );
}

#[test]
fn links_per_spine_out_of_range_is_rejected() {
    for (n, col) in [(0, 3), (65, 3)] {
        let yaml = BASE.replace(
            "hosts_per_leaf: 2",
            &format!("hosts_per_leaf: 2\n  links_per_spine: {n}"),
        );
        assert_eq!(
            rejected(&yaml, "topology.links_per_spine"),
            format!(
                "m.yaml:5:{col}: topology.links_per_spine: expected 1 to 64 parallel links, found {n}"
            )
        );
    }
}

#[test]
fn alpha_out_of_range_is_rejected() {
    for (alpha, shown) in [
        ("0", "0"),
        (".nan", "NaN"),
        (".inf", "inf"),
        ("-1", "-1"),
        ("1025", "1025"),
    ] {
        assert_eq!(
            rejected(
                &format!("{BASE}switch: {{ alpha: {alpha} }}\n"),
                "switch.alpha"
            ),
            format!("m.yaml:8:11: switch.alpha: expected a number in (0, 1024], found {shown}")
        );
    }
}

#[test]
fn alpha_too_small_for_one_packet_is_rejected() {
    assert_eq!(
        rejected(
            &format!("{BASE}switch: {{ alpha: 0.0001, buffer: 1MiB }}\n"),
            "switch.alpha"
        ),
        "m.yaml:8:11: switch.alpha: alpha 0.0001 lets a queue hold at most 105 B of the \
         1048576 B buffer, less than one 4122 B packet"
    );
}

#[test]
fn alpha_and_port_limit_together_are_rejected() {
    assert_eq!(
        rejected(
            &format!("{BASE}switch: {{ alpha: 0.5, port_limit: 1MiB }}\n"),
            "switch.port_limit"
        ),
        "m.yaml:8:23: switch.port_limit: give either `alpha` (dynamic threshold) or \
         `port_limit`, not both"
    );
}

#[test]
fn zero_duration_is_rejected() {
    assert_eq!(
        rejected(&format!("duration: 0us\n{BASE}"), "duration"),
        "m.yaml:1:1: duration: expected a positive duration, found 0"
    );
}

#[test]
fn duration_past_one_day_is_rejected() {
    assert_eq!(
        rejected(&format!("duration: 86401s\n{BASE}"), "duration"),
        "m.yaml:1:1: duration: 86401s is past the longest supported run (one simulated day)"
    );
    parse(&format!("duration: 86400s\n{BASE}")).unwrap();
}

#[test]
fn poisson_without_until_or_duration_is_rejected() {
    assert_eq!(
        rejected(
            &POISSON.replace("FIELDS", "load: 0.5, sizes: websearch"),
            "workload[0].poisson.until"
        ),
        "m.yaml:7:5: workload[0].poisson.until: a Poisson workload needs `until` (or a \
         scenario `duration`) to know when arrivals stop"
    );
    // A scenario duration is enough.
    parse(&format!(
        "duration: 10us\n{}",
        POISSON.replace("FIELDS", "load: 0.5, sizes: websearch")
    ))
    .unwrap();
}

#[test]
fn missing_cdf_file_is_rejected() {
    let shown = rejected(
        &POISSON.replace(
            "FIELDS",
            "load: 0.5, until: 10us, sizes: { cdf_file: no-such-dir/sizes.cdf }",
        ),
        "workload[0].poisson.sizes",
    );
    assert!(
        shown.starts_with(
            "m.yaml:7:40: workload[0].poisson.sizes: cannot read CDF file `no-such-dir/sizes.cdf`: "
        ),
        "{shown}"
    );
}

/// A CDF path that is a device, a FIFO or a file over 16 MiB is refused without reading
/// it: `/dev/zero` used to make `validate` read forever and a FIFO block it (issue 19).
/// The scenario file itself is held to the same rule.
#[test]
fn cdf_and_scenario_files_must_be_regular_and_bounded() {
    let dir = std::env::temp_dir().join(format!("doorbell-cdf-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("sizes.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo (coreutils)");
    assert!(made.success());
    let big = dir.join("big.cdf");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(17 << 20)
        .unwrap();
    for (path, why) in [
        ("/dev/zero", "is not a regular file"),
        (fifo.to_str().unwrap(), "is not a regular file"),
        (
            big.to_str().unwrap(),
            "is 17825792 bytes, more than the 16777216 bytes",
        ),
        (dir.to_str().unwrap(), "is a folder"),
    ] {
        let shown = rejected(
            &POISSON.replace(
                "FIELDS",
                &format!("load: 0.5, until: 10us, sizes: {{ cdf_file: \"{path}\" }}"),
            ),
            "workload[0].poisson.sizes",
        );
        assert!(shown.contains(why), "{path}: {shown}");
    }
    for path in ["/dev/zero", fifo.to_str().unwrap()] {
        let e = doorbell::scenario::load(std::path::Path::new(path), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a regular file"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reversed_uniform_sizes_are_rejected() {
    assert_eq!(
        rejected(
            &POISSON.replace(
                "FIELDS",
                "load: 0.5, until: 10us, sizes: { uniform: [2KB, 1KB] }"
            ),
            "workload[0].poisson.sizes"
        ),
        "m.yaml:7:40: workload[0].poisson.sizes: uniform sizes need min <= max, found [2KB, 1KB]"
    );
}

#[test]
fn poisson_load_out_of_range_is_rejected() {
    for (load, shown) in [("0", "0"), (".nan", "NaN"), ("1.5", "1.5")] {
        assert_eq!(
            rejected(
                &POISSON.replace(
                    "FIELDS",
                    &format!("load: {load}, until: 10us, sizes: websearch")
                ),
                "workload[0].poisson.load"
            ),
            format!(
                "m.yaml:7:16: workload[0].poisson.load: expected a fraction of the host link \
                 rate in (0, 1], found {shown}"
            )
        );
    }
}

#[test]
fn unit_strings_at_the_edges_are_rejected() {
    let size = |v: &str| BASE.replace("4KB", v);
    assert_eq!(
        rejected(
            &size("99999999999999999999TiB"),
            "workload[0].permutation.size"
        ),
        "m.yaml:7:26: workload[0].permutation.size: size `99999999999999999999TiB` is too large"
    );
    assert_eq!(
        rejected(
            &size("18446744073709551615B"),
            "workload[0].permutation.size"
        ),
        "m.yaml:7:20: workload[0].permutation.size: 18446744073709551615 B is more than \
         2147483648 packets of 4096 B"
    );
    assert_eq!(
        rejected(&size("~"), "workload[0].permutation.size"),
        "m.yaml:7:26: workload[0].permutation.size: invalid type: an empty value, expected a size"
    );
    let rate = |v: &str| BASE.replace("100Gbps", v);
    assert_eq!(
        rejected(&rate("0Gbps"), "topology.host_link.rate"),
        "m.yaml:5:22: topology.host_link.rate: `0Gbps` is zero; a rate must be greater than zero"
    );
    assert_eq!(
        rejected(&rate("1e30Gbps"), "topology.host_link.rate"),
        "m.yaml:5:22: topology.host_link.rate: unknown rate unit `e30Gbps` in `1e30Gbps` \
         (expected one of bps, Kbps, Mbps, Gbps, Tbps (or Gb/s, Gbit/s) for bits, B/s, KB/s, MB/s, GB/s, TB/s (or GBps) for bytes)"
    );
    assert_eq!(
        rejected(&format!("duration: 1.5ps\n{BASE}"), "duration"),
        "m.yaml:1:11: duration: duration `1.5ps` is not a whole number of picoseconds"
    );
    assert_eq!(
        rejected(
            &BASE.replace("leaves: 2", "leaves: 4294967296"),
            "topology.leaves"
        ),
        "m.yaml:2:11: topology.leaves: invalid value: integer `4294967296`, expected a whole number from 0 to 4294967295"
    );
}

#[test]
fn unknown_keys_are_rejected() {
    assert_eq!(
        rejected(
            &BASE.replace("leaves: 2", "leaves: 2\n  bogus: 1"),
            "topology"
        ),
        "m.yaml:3:3: topology: unknown field `bogus`, expected one of `leaves`, `spines`, \
         `hosts_per_leaf`, `host_link`, `fabric_link`, `links_per_spine`, `planes`"
    );
}

#[test]
fn documents_that_are_not_scenarios_are_rejected() {
    for (doc, msg) in [
        ("", "m.yaml:1:1: missing field `topology`"),
        (
            "~",
            "m.yaml:1:1: invalid type: an empty value, expected a map of the scenario's sections (topology, workload, ...)",
        ),
        (
            "42",
            "m.yaml:1:1: invalid type: integer `42`, expected a map of the scenario's sections (topology, workload, ...)",
        ),
        (
            "- 1\n- 2",
            "m.yaml:1:1: invalid type: a list, expected a map of the scenario's sections (topology, workload, ...)",
        ),
    ] {
        assert_eq!(parse(doc).unwrap_err().to_string(), msg, "{doc:?}");
    }
}

#[test]
fn set_overrides_that_cannot_apply_are_rejected() {
    for (set, msg) in [
        ("=", "--set: empty segment in field path ``"),
        // An empty value used to read as null and silently drop the duration.
        (
            "duration=",
            "--set: duration: `duration` has no value after `=`: give one (e.g. `duration=...`); to use the default, leave the field out of the file",
        ),
        (
            "duration",
            "--set: duration: expected `dotted.path=value`, found `duration`",
        ),
        (
            "topology.leaves.x=1",
            "--set: topology.leaves.x: `x` is not inside a mapping",
        ),
        (
            "workload[5].x=1",
            "--set: workload[5].x: index 5 is past the end of a list of 1",
        ),
        (
            "topology.leaves=0",
            "m.yaml:2:3: topology.leaves: expected at least 1 leaf, found 0",
        ),
    ] {
        let o = Overrides {
            seed: None,
            set: vec![set.into()],
        };
        let r = catch_unwind(|| parse_str(BASE, "m.yaml", "m", &o));
        match r {
            Ok(Err(e)) => assert_eq!(e.to_string(), msg, "--set {set}"),
            Ok(Ok(_)) => panic!("--set {set} was accepted"),
            Err(p) => panic!("--set {set} panicked: {}", panic_message(&*p)),
        }
    }
}

/// YAML tags read the same with and without `--set` (which rebuilds the document as a
/// `serde_yaml::Value`): a standard tag, an unknown one, and an enum variant written as a
/// tag, in the file and in a `--set` value.
#[test]
fn yaml_tags_read_the_same_with_and_without_set() {
    let tagged = format!(
        "seed: !!int 5\nname: !note tagged\n{BASE}switch: {{ forwarding: !cut_through }}\n"
    );
    let plain = parse(&tagged).unwrap_or_else(|e| panic!("{e}"));
    let with_set = |set: &str| {
        parse_str(
            &tagged,
            "m.yaml",
            "m",
            &Overrides {
                seed: None,
                set: vec![set.into()],
            },
        )
        .unwrap_or_else(|e| panic!("--set {set}: {e}"))
    };
    let set = with_set("topology.hosts_per_leaf=2");
    assert_eq!(format!("{:?}", set.switch), format!("{:?}", plain.switch));
    assert_eq!((set.seed, plain.seed), (5, 5));
    let retagged = with_set("switch.forwarding=!store_and_forward");
    assert_ne!(
        format!("{:?}", retagged.switch),
        format!("{:?}", plain.switch)
    );
}

/// Deep nesting is refused before the YAML reader sees it, with the line and column where
/// it passes 100 levels, read directly and through `--set` alike. The reader's scanner
/// costs time in proportion to the depth for every token, so 40,000 levels took 84 s to
/// refuse (issue 19); serde_yaml's own recursion limit (128) refused them anyway, and a
/// stack overflow would abort the process.
#[test]
fn deeply_nested_yaml_is_an_error() {
    let n = 40_000;
    let deep = format!("name: {}{}\n{BASE}", "[".repeat(n), "]".repeat(n));
    let want = "m.yaml:1:107: lists and maps nested more than 100 deep; a scenario needs fewer than ten levels";
    assert_eq!(parse(&deep).unwrap_err().to_string(), want);
    let set = Overrides {
        seed: None,
        set: vec!["seed=2".into()],
    };
    assert_eq!(
        parse_str(&deep, "m.yaml", "m", &set)
            .unwrap_err()
            .to_string(),
        want
    );
    let set = Overrides {
        seed: None,
        set: vec![format!("name={}", "{a: ".repeat(n))],
    };
    let e = parse_str(BASE, "m.yaml", "m", &set)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nests lists and maps more than 100 deep"), "{e}");
    // Brackets inside quotes and comments are text, not nesting.
    let quoted = format!(
        "name: \"{}\"\n# {}\n{BASE}",
        "[".repeat(500),
        "{".repeat(500)
    );
    parse(&quoted).unwrap_or_else(|e| panic!("{e}"));
}

// ---------------------------------------------------------------------------------------
// Regressions: bugs the mutation test found. Each test states the correct behaviour; the
// comments say what used to happen.

/// `check_time` is applied to the start of every workload kind but Poisson, and to no
/// `until`: a Poisson item may start or stop past the one-day limit.
#[test]
fn poisson_times_past_one_day_are_rejected() {
    rejected(
        &POISSON.replace(
            "FIELDS",
            "load: 0.5, sizes: websearch, start: 99999s, until: 100000s",
        ),
        "workload[0].poisson.start",
    );
    rejected(
        &POISSON.replace("FIELDS", "load: 0.5, sizes: websearch, until: 999999s"),
        "workload[0].poisson.until",
    );
}

/// all_to_all is capped at MAX_FLOWS; Poisson is not, so this scenario validates and then
/// `doorbell run` aborts with "memory allocation of ... bytes failed" (exit 134) while
/// expanding 25e9 flows per host.
#[test]
fn poisson_with_too_many_flows_is_rejected() {
    rejected(
        &POISSON.replace("FIELDS", "load: 1, sizes: { fixed: 1B }, until: 1s"),
        "workload[0].poisson",
    );
}

/// A CDF whose first point already reaches 100% at size 0 has `mean() == 0`, so the
/// Poisson rate is infinite, every gap is 0 and workload expansion never ends (it aborts
/// out of memory), although `sample()` only ever draws 1 B.
#[test]
fn cdf_with_all_mass_at_zero_has_a_positive_mean() {
    if let Ok(d) = parse_cdf("x", "0 100\n1 100\n") {
        assert!(d.mean() > 0.0, "mean {} of {d:?}", d.mean());
    }
}

/// Link and switch latencies are not bounded (durations and starts are, at one day), so a
/// latency near u64::MAX picoseconds overflows simulated time: in release the arithmetic
/// wraps and the run reports a 2.19 us FCT; in debug it panics with "attempt to add with
/// overflow".
#[test]
fn huge_latencies_are_rejected() {
    rejected(
        &BASE.replace("100Gbps", "100Gbps, latency: 18446744073709551615ps"),
        "topology.host_link.latency",
    );
    rejected(
        &format!("{BASE}switch: {{ latency: 18446744073709551615ps }}\n"),
        "switch.latency",
    );
}

/// A UTF-8 byte order mark (which some Windows editors write) makes serde_yaml see
/// something other than the scenario: a valid file is rejected with "m.yaml:1:2: missing
/// field `workload`" although `workload` is there. Stripping a leading U+FEFF before
/// parsing would fix it.
#[test]
fn byte_order_mark_is_accepted() {
    if let Err(e) = parse(&format!("\u{feff}{BASE}")) {
        panic!("{e}");
    }
}

/// `--set` paths are split by `locate::parse_path`, which silently drops a bracketed part
/// that is not a number: `seed[x]=5` sets `seed`, and `workload[abc]=...` (or an index
/// past usize) replaces the whole workload list.
#[test]
fn set_with_a_non_numeric_index_is_rejected() {
    for set in ["seed[x]=5", "workload[99999999999999999999]=[]"] {
        let o = Overrides {
            seed: None,
            set: vec![set.into()],
        };
        let r = parse_str(BASE, "m.yaml", "m", &o).map(|sc| sc.seed);
        assert!(r.is_err(), "--set {set} was accepted: seed {r:?}");
    }
}

/// The reader's Rust type names never reach the user (issue 15): `u32` becomes the range
/// a whole number may take, a struct a map, a unit value an empty value, a sequence a
/// list; a longer word that only starts like a type name is left alone.
#[test]
fn errors_say_what_is_expected_in_the_users_words() {
    use doorbell::scenario::plain_words;
    assert_eq!(
        plain_words("invalid value: integer `-1`, expected u32"),
        "invalid value: integer `-1`, expected a whole number from 0 to 4294967295"
    );
    assert_eq!(
        plain_words("expected u320; invalid type: sequence, expected struct LinkSpec"),
        "expected u320; invalid type: a list, expected a map"
    );
    let e = rejected(&BASE.replace("leaves: 2", "leaves: -1"), "topology.leaves");
    assert!(
        e.ends_with("expected a whole number from 0 to 4294967295"),
        "{e}"
    );
}

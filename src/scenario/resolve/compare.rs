//! `compare:`: named parameter sets, each a list of overrides laid over the scenario.
//!
//! A set is resolved the way the whole scenario is: its overrides are applied to the
//! document (`transport.rc` field by field, `flow_control`, `routing`, `cc` and `ecn` replaced, the
//! spine layer of `topology`, `host` field by field, and every collective item's
//! algorithm, placement, channels, chunk, PXN and queue pairs per connection), and the result goes through the same
//! [`super::resolve_document`] as the top level. Its errors are reported under the
//! set's own field path (`compare[0].topology.spines`) when the set gave that section,
//! else under the scenario's path with the set named. Sweep points and plan candidates
//! are `--set` overrides of the whole file, so their compare sets come through here too.

use super::{err, VResult};
use crate::scenario::schema::{
    merge_host, CompareSpec, RcSpec, ScenarioFile, TransportMode, WorkloadSpec,
};
use crate::scenario::{CompareSet, Transport};
use std::path::Path;

/// The `compare:` sets of `f` (whose other sections resolved without error).
pub fn resolve(f: &ScenarioFile, stem: &str, base_dir: &Path) -> VResult<Vec<CompareSet>> {
    let mut compare: Vec<CompareSet> = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    // The scenario without its sets, cloned once: each set's document copies this, not
    // the list of every set (which made validation quadratic in the number of sets).
    let base = ScenarioFile {
        compare: Vec::new(),
        ..f.clone()
    };
    for (i, c) in f.compare.iter().enumerate() {
        if f.transport.mode == TransportMode::Raw {
            return err(
                "compare",
                "`compare:` compares RC parameter sets; it needs `transport.mode: rc`",
            );
        }
        if c.name.trim().is_empty() || !names.insert(c.name.to_ascii_lowercase()) {
            return err(
                format!("compare[{i}].name"),
                "expected a unique, non-empty name (names that differ only in case clash on some file systems)",
            );
        }
        // The name is a folder under the output folder: nothing that could lead out of
        // it (a path separator, `..`) or hide it.
        let plain = c
            .name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'));
        if crate::outdir::reserved_name(&c.name) {
            return err(
                format!("compare[{i}].name"),
                format!(
                    "`{}` is a file or folder doorbell writes in the output folder: choose another name",
                    c.name
                ),
            );
        }
        if !plain || c.name.starts_with('.') || c.name.len() > 100 {
            return err(
                format!("compare[{i}].name"),
                format!(
                    "expected a name of letters, digits, `-`, `_` and `.` (not first), at most 100 characters, found `{}`: it names the set's folder in the output folder",
                    c.name
                ),
            );
        }
        let has = |kind: &str| {
            f.workload.iter().any(|w| match w {
                WorkloadSpec::Collective(_) => kind == "collective",
                WorkloadSpec::Training(_) => kind == "training",
                _ => false,
            })
        };
        for (given, kind) in [
            (c.collective.is_some(), "collective"),
            (c.training.is_some(), "training"),
        ] {
            if given && !has(kind) {
                return err(
                    format!("compare[{i}].{kind}"),
                    format!("the scenario's workload has no `{kind}` item for this to change"),
                );
            }
        }
        let (doc, renames) = set_document(&base, c, i);
        // A merged host section may switch to polling without clearing `moderation`.
        let s = super::resolve_document(&doc, stem, base_dir, false)
            .map_err(|(path, message)| rename(path, message, &renames, i, &c.name))?;
        let rc = match s.transport {
            Transport::Rc(rc) => rc,
            Transport::Raw => unreachable!("the set keeps the scenario's `transport.mode: rc`"),
        };
        compare.push(CompareSet {
            name: c.name.clone(),
            topology: s.topology,
            rc,
            flow_control: s.flow_control,
            routing: s.routing,
            cc: s.cc,
            ecn: s.ecn,
            host: s.host,
            faults: s.faults,
            workload: (c.collective.is_some() || c.training.is_some()).then_some(s.workload),
        });
    }
    Ok(compare)
}

/// The scenario `f` (without sets) with set `c`'s overrides applied, and (scenario path, set path) prefixes
/// for naming errors.
fn set_document(
    f: &ScenarioFile,
    c: &CompareSpec,
    i: usize,
) -> (ScenarioFile, Vec<(String, String)>) {
    let set = format!("compare[{i}]");
    let mut doc = f.clone();
    let mut renames = vec![
        ("transport.rc".to_string(), set.clone()),
        ("flow_control".to_string(), format!("{set}.flow_control")),
        ("cc".to_string(), format!("{set}.cc")),
        ("ecn".to_string(), format!("{set}.ecn")),
    ];
    doc.transport.rc = merge_rc(&f.transport.rc, &c.rc);
    if let Some(fc) = &c.flow_control {
        doc.flow_control = fc.clone();
    }
    if let Some(r) = c.routing {
        renames.push(("routing".into(), format!("{set}.routing")));
        doc.routing = r;
    }
    if let Some(cc) = &c.cc {
        doc.cc = cc.clone();
    }
    if let Some(ecn) = &c.ecn {
        doc.ecn = Some(ecn.clone());
    }
    if let Some(t) = &c.topology {
        renames.push(("topology".into(), format!("{set}.topology")));
        if let Some(s) = t.spines {
            doc.topology.spines = s;
        }
        if let Some(k) = t.links_per_spine {
            doc.topology.links_per_spine = k;
        }
        if let Some(p) = t.planes {
            doc.topology.planes = p;
        }
        if let Some(l) = t.fabric_link {
            doc.topology.fabric_link = Some(l);
        }
    }
    if let Some(fs) = &c.faults {
        renames.push(("faults".into(), format!("{set}.faults")));
        doc.faults = fs.clone();
    }
    if let Some(over) = &c.host {
        renames.push(("host".into(), format!("{set}.host")));
        doc.host = Some(merge_host(&f.host.clone().unwrap_or_default(), over));
    }
    // A collective's checks against the set's hosts and fabric belong to the set, whether
    // or not it changes the collective itself.
    for (j, item) in f.workload.iter().enumerate() {
        if let WorkloadSpec::Collective(_) = item {
            renames.push((
                format!("workload[{j}].collective"),
                format!("{set}.collective"),
            ));
        }
        if let WorkloadSpec::Training(_) = item {
            renames.push((format!("workload[{j}].training"), format!("{set}.training")));
        }
    }
    if let Some(o) = &c.training {
        for item in doc.workload.iter_mut() {
            if let WorkloadSpec::Training(s) = item {
                if o.placement.is_some() {
                    s.placement = o.placement.clone();
                }
                if o.microbatches.is_some() {
                    s.microbatches = o.microbatches;
                }
                if o.channels.is_some() {
                    s.channels = o.channels;
                }
                if o.qps_per_connection.is_some() {
                    s.qps_per_connection = o.qps_per_connection;
                }
                if let Some(st) = &o.stragglers {
                    s.stragglers = st.clone();
                }
            }
        }
    }
    if let Some(o) = &c.collective {
        for item in doc.workload.iter_mut() {
            if let WorkloadSpec::Collective(s) = item {
                if o.algorithm.is_some() {
                    s.algorithm = o.algorithm;
                }
                if o.protocol.is_some() {
                    s.protocol = o.protocol;
                }
                if o.placement.is_some() {
                    s.placement = o.placement.clone();
                }
                if o.channels.is_some() {
                    s.channels = o.channels;
                }
                if o.chunk.is_some() {
                    s.chunk = o.chunk;
                }
                if o.pxn.is_some() {
                    s.pxn = o.pxn;
                }
                if o.qps_per_connection.is_some() {
                    s.qps_per_connection = o.qps_per_connection;
                }
                if o.split_data_on_qps.is_some() {
                    s.split_data_on_qps = o.split_data_on_qps;
                }
                if o.start.is_some() {
                    s.start = o.start;
                }
            }
        }
    }
    (doc, renames)
}

/// `over`'s given fields laid over `base`.
fn merge_rc(base: &RcSpec, over: &RcSpec) -> RcSpec {
    macro_rules! pick {
        ($($f:ident),*) => {
            RcSpec { $( $f: over.$f.or(base.$f), )* }
        };
    }
    pick!(
        operation,
        timeout,
        retry_cnt,
        rnr_retry,
        min_rnr_timer,
        max_rd_atomic,
        max_dest_rd_atomic,
        window_packets,
        ack_every,
        recv_queue_depth,
        recv_post_delay,
        e2e_credits,
        initial_psn,
        connections,
        max_send_wr,
        out_of_order,
        reorder_timeout,
        selective_nak
    )
}

/// An error in a set's document, under the set's field path when the set gave the
/// section, else under the scenario's with the set named.
fn rename(
    path: String,
    message: String,
    renames: &[(String, String)],
    i: usize,
    name: &str,
) -> (String, String) {
    for (from, to) in renames {
        if let Some(rest) = path.strip_prefix(from.as_str()) {
            if rest.is_empty() || rest.starts_with('.') || rest.starts_with('[') {
                return (format!("{to}{rest}"), message);
            }
        }
    }
    (
        path,
        format!("{message} (with the overrides of compare[{i}], `{name}`)"),
    )
}

//! `cc:` and `ecn:`: DCQCN's parameters from a preset and overrides, or HPCC's from the
//! paper's settings and the fabric's longest base RTT, and the RED marking thresholds per
//! tier that go with DCQCN.

use super::{check_time, err, VResult};
use crate::cc::dcqcn::Preset;
use crate::cc::hpcc::{HpccParams, INT_BYTES};
use crate::cc::swift::SwiftParams;
use crate::cc::CcParams;
use crate::components::Red;
use crate::packet::Encapsulation;
use crate::scenario::schema;
use crate::scenario::Transport;
use crate::topology::{Tier, Topology};
use crate::units::SimDuration;

/// The preset's switch thresholds (design reference table): paper 5 KB / 200 KB / 1%;
/// NVIDIA Spectrum switches' RoCE default (Cumulus Linux "Quality of Service",
/// `default_ecn_red_conf`: `min_threshold_bytes` 150000, `max_threshold_bytes` 1500000,
/// `probability` 100; Onyx `show roce` gives the same 150 / 1500 KB): 150 KB / 1500 KB /
/// 100%; HPCC 100 KB / 400 KB / 20% at 25 Gb/s, scaled with the link rate.
fn preset_red(preset: schema::CcPreset, rate_bps: f64) -> Red {
    match preset {
        schema::CcPreset::Paper => Red {
            kmin: 5_000,
            kmax: 200_000,
            pmax: 0.01,
        },
        schema::CcPreset::Nvidia => Red {
            kmin: 150_000,
            kmax: 1_500_000,
            pmax: 1.0,
        },
        schema::CcPreset::Hpcc => {
            let scale = rate_bps / 25e9;
            Red {
                kmin: (100_000.0 * scale) as u64,
                kmax: (400_000.0 * scale) as u64,
                pmax: 0.2,
            }
        }
    }
}

pub type EcnTiers = [Option<Red>; 4];

/// What a packet looks like, for the base RTT HPCC works with.
pub struct Wire {
    pub mtu: u64,
    pub encapsulation: Encapsulation,
    pub switch_latency: SimDuration,
}

/// The base RTT of the fabric's longest path (across a spine if there is one), a full
/// data packet out and an ACK back, each `extra` bytes longer (HPCC's INT). HPCC's T
/// (ns-3 GLOBAL_T) and Swift's base target start from it.
fn longest_base_rtt(topo: &Topology, w: &Wire, extra: u64) -> SimDuration {
    let (a, b) = if topo.leaves_per_plane() > 1 {
        (0, topo.first_host_of(1))
    } else {
        (0, 1.min(topo.hosts().saturating_sub(1)))
    };
    let o = w.encapsulation.overhead_bytes();
    crate::analytic::base_rtt(
        &topo.path_links(a, b),
        w.switch_latency,
        w.mtu + o + crate::packet::RETH_BYTES + extra,
        o + crate::packet::AETH_BYTES + extra,
    )
}

/// The fields only DCQCN takes, and whether each was given.
fn dcqcn_fields(spec: &schema::CcSpec) -> [(&'static str, bool); 14] {
    [
        ("preset", spec.preset.is_some()),
        ("g", spec.g.is_some()),
        ("cnp_interval", spec.cnp_interval.is_some()),
        ("alpha_period", spec.alpha_period.is_some()),
        ("rate_increase_period", spec.rate_increase_period.is_some()),
        ("byte_counter", spec.byte_counter.is_some()),
        ("fast_recovery_steps", spec.fast_recovery_steps.is_some()),
        ("rate_hai", spec.rate_hai.is_some()),
        ("initial_alpha", spec.initial_alpha.is_some()),
        ("rate_on_first_cnp", spec.rate_on_first_cnp.is_some()),
        ("rate_reduce_period", spec.rate_reduce_period.is_some()),
        ("clamp_target_rate", spec.clamp_target_rate.is_some()),
        (
            "clamp_target_after_timer",
            spec.clamp_target_after_timer.is_some(),
        ),
        ("min_decrease_factor", spec.min_decrease_factor.is_some()),
    ]
}

/// Swift's fields, and whether each was given.
fn swift_fields(spec: &schema::CcSpec) -> [(&'static str, bool); 5] {
    [
        ("base_target", spec.base_target.is_some()),
        ("hop_scale", spec.hop_scale.is_some()),
        ("fs_range", spec.fs_range.is_some()),
        ("beta", spec.beta.is_some()),
        ("max_mdf", spec.max_mdf.is_some()),
    ]
}

/// HPCC's fields, and whether each was given.
fn hpcc_fields(spec: &schema::CcSpec) -> [(&'static str, bool); 3] {
    [
        ("target_utilization", spec.target_utilization.is_some()),
        ("max_stage", spec.max_stage.is_some()),
        ("base_rtt", spec.base_rtt.is_some()),
    ]
}

/// Refuses the first given field of `fields`, which the algorithm does not take.
fn refuse_given(fields: &[(&'static str, bool)], owner: &str, takes: &str) -> VResult<()> {
    match fields.iter().find(|(_, given)| *given) {
        Some((name, _)) => err(format!("cc.{name}"), format!("{owner} parameter; {takes}")),
        None => Ok(()),
    }
}

const HPCC_TAKES: &str = "HPCC takes target_utilization, max_stage, rate_ai, rate_min and base_rtt";
const SWIFT_TAKES: &str = "Swift takes base_target, hop_scale, fs_range, beta and max_mdf";

/// Swift from its fields, with targets from the fabric's longest base RTT.
fn resolve_swift(spec: &schema::CcSpec, topo: &Topology, w: &Wire) -> VResult<SwiftParams> {
    refuse_given(&dcqcn_fields(spec), "a DCQCN", SWIFT_TAKES)?;
    refuse_given(&hpcc_fields(spec), "an HPCC", SWIFT_TAKES)?;
    for (name, given) in [
        ("rate_ai", spec.rate_ai.is_some()),
        ("rate_min", spec.rate_min.is_some()),
    ] {
        if given {
            return err(
                format!("cc.{name}"),
                format!("not a Swift parameter; {SWIFT_TAKES}"),
            );
        }
    }
    let mtu_wire = w.mtu + w.encapsulation.overhead_bytes();
    let rtt = longest_base_rtt(topo, w, 0);
    let bdp = rtt.as_secs_f64() * topo.host_link.rate.0 as f64 / 8.0 / mtu_wire as f64;
    let mut p = SwiftParams::paper(rtt, bdp, mtu_wire);
    for (name, v, slot) in [
        ("cc.base_target", spec.base_target, &mut p.base_target),
        ("cc.hop_scale", spec.hop_scale, &mut p.hop_scale),
        ("cc.fs_range", spec.fs_range, &mut p.fs_range),
    ] {
        if let Some(d) = v {
            check_time(name, d.0)?;
            *slot = d.0;
        }
    }
    if p.base_target == SimDuration::ZERO {
        return err("cc.base_target", "expected a positive target delay");
    }
    for (name, v, slot) in [
        ("cc.beta", spec.beta, &mut p.beta),
        ("cc.max_mdf", spec.max_mdf, &mut p.max_mdf),
    ] {
        if let Some(x) = v {
            if !(x > 0.0 && x <= 1.0) {
                return err(name, format!("expected a fraction in (0, 1], found {x}"));
            }
            *slot = x;
        }
    }
    Ok(p)
}

/// HPCC from its fields; DCQCN's and Swift's are refused.
fn resolve_hpcc(spec: &schema::CcSpec, topo: &Topology, w: &Wire) -> VResult<HpccParams> {
    refuse_given(&dcqcn_fields(spec), "a DCQCN", HPCC_TAKES)?;
    refuse_given(&swift_fields(spec), "a Swift", HPCC_TAKES)?;
    let host_rate = topo.host_link.rate.0 as f64;
    let mut p = HpccParams::paper(host_rate, longest_base_rtt(topo, w, INT_BYTES));
    if let Some(u) = spec.target_utilization {
        if !(u > 0.0 && u <= 1.0) {
            return err(
                "cc.target_utilization",
                format!("expected a fraction in (0, 1], found {u}"),
            );
        }
        p.target_utilization = u;
    }
    if let Some(m) = spec.max_stage {
        if m > 1000 {
            return err("cc.max_stage", format!("expected 0 to 1000, found {m}"));
        }
        p.max_stage = m;
    }
    if let Some(r) = spec.rate_ai {
        p.rate_ai_bps = r.0 .0 as f64;
    }
    if let Some(r) = spec.rate_min {
        p.rate_min_bps = r.0 .0 as f64;
    }
    if p.rate_min_bps > host_rate || p.rate_min_bps <= 0.0 {
        return err(
            "cc.rate_min",
            "expected a positive minimum rate at most the host link rate",
        );
    }
    if let Some(t) = spec.base_rtt {
        if t.0 == SimDuration::ZERO {
            return err("cc.base_rtt", "expected a positive duration");
        }
        check_time("cc.base_rtt", t.0)?;
        p.base_rtt = t.0;
    }
    Ok(p)
}

pub fn resolve_cc(
    spec: &schema::CcSpec,
    ecn: Option<&schema::EcnSpec>,
    topo: &Topology,
    transport: &Transport,
    wire: &Wire,
) -> VResult<(Option<CcParams>, EcnTiers)> {
    let dcqcn = spec.algorithm == schema::CcAlgorithm::Dcqcn;
    if spec.algorithm != schema::CcAlgorithm::None && *transport == Transport::Raw {
        return err(
            "cc.algorithm",
            "congestion control paces RC queue pairs (and HPCC reads their ACKs): it needs `transport.mode: rc`",
        );
    }
    if spec.algorithm != schema::CcAlgorithm::Hpcc {
        refuse_given(&hpcc_fields(spec), "an HPCC", "set `algorithm: hpcc`")?;
    }
    if spec.algorithm != schema::CcAlgorithm::Swift {
        refuse_given(&swift_fields(spec), "a Swift", "set `algorithm: swift`")?;
    }
    let host_rate = topo.host_link.rate.0 as f64;
    if spec.algorithm == schema::CcAlgorithm::Swift {
        // Swift reads delay: ECN stays off unless asked for.
        let (_, tiers) = resolve_cc(&schema::CcSpec::default(), ecn, topo, transport, wire)?;
        return Ok((
            Some(CcParams::Swift(resolve_swift(spec, topo, wire)?)),
            tiers,
        ));
    }
    if spec.algorithm == schema::CcAlgorithm::Hpcc {
        // HPCC marks nothing: ECN stays off unless asked for.
        let (_, tiers) = resolve_cc(&schema::CcSpec::default(), ecn, topo, transport, wire)?;
        return Ok((Some(CcParams::Hpcc(resolve_hpcc(spec, topo, wire)?)), tiers));
    }
    let cc = if dcqcn {
        let mut p = match spec.preset.unwrap_or_default() {
            schema::CcPreset::Paper => Preset::Paper,
            schema::CcPreset::Nvidia => Preset::Nvidia,
            schema::CcPreset::Hpcc => Preset::Hpcc,
        }
        .params(host_rate);
        if let Some(g) = spec.g {
            if !(g > 0.0 && g <= 1.0) {
                return err("cc.g", format!("expected a gain in (0, 1], found {g}"));
            }
            p.g = g;
        }
        if let Some(d) = spec.cnp_interval {
            p.cnp_interval = d.0;
        }
        for (name, v, slot) in [
            ("cc.alpha_period", spec.alpha_period, &mut p.alpha_period),
            (
                "cc.rate_increase_period",
                spec.rate_increase_period,
                &mut p.rate_increase_period,
            ),
        ] {
            if let Some(d) = v {
                if d.0 == SimDuration::ZERO {
                    return err(name, "expected a positive period");
                }
                check_time(name, d.0)?;
                *slot = d.0;
            }
        }
        if let Some(b) = spec.byte_counter {
            p.byte_counter = (b.0 .0 > 0).then_some(b.0 .0);
        }
        if let Some(f) = spec.fast_recovery_steps {
            if f == 0 || f > 1000 {
                return err(
                    "cc.fast_recovery_steps",
                    format!("expected 1 to 1000, found {f}"),
                );
            }
            p.fast_recovery_steps = f;
        }
        if let Some(r) = spec.rate_ai {
            p.rate_ai_bps = r.0 .0 as f64;
        }
        if let Some(r) = spec.rate_hai {
            p.rate_hai_bps = r.0 .0 as f64;
        }
        if let Some(r) = spec.rate_min {
            p.rate_min_bps = r.0 .0 as f64;
        }
        for (name, v, slot) in [
            ("cc.initial_alpha", spec.initial_alpha, &mut p.initial_alpha),
            (
                "cc.min_decrease_factor",
                spec.min_decrease_factor,
                &mut p.min_decrease_factor,
            ),
        ] {
            if let Some(x) = v {
                if !(0.0..=1.0).contains(&x) {
                    return err(name, format!("expected a fraction from 0 to 1, found {x}"));
                }
                *slot = x;
            }
        }
        if let Some(r) = spec.rate_on_first_cnp {
            let r = r.0 .0 as f64;
            if r > host_rate {
                return err(
                    "cc.rate_on_first_cnp",
                    "the rate on the first CNP is above the host link rate",
                );
            }
            p.rate_on_first_cnp_bps = (r > 0.0).then_some(r);
        }
        if let Some(d) = spec.rate_reduce_period {
            check_time("cc.rate_reduce_period", d.0)?;
            p.rate_reduce_period = d.0;
        }
        if let Some(b) = spec.clamp_target_rate {
            p.clamp_target_rate = b;
        }
        if let Some(b) = spec.clamp_target_after_timer {
            p.clamp_target_after_timer = b;
        }
        if p.rate_min_bps > host_rate {
            return err(
                "cc.rate_min",
                "the minimum rate is above the host link rate",
            );
        }
        Some(CcParams::Dcqcn(p))
    } else {
        None
    };
    let enabled = match ecn {
        Some(e) => e.enabled.unwrap_or(true),
        None => dcqcn,
    };
    let mut tiers: EcnTiers = [None; 4];
    if enabled {
        for (i, tier) in Tier::ALL.iter().enumerate() {
            let rate = match tier {
                Tier::HostToLeaf | Tier::LeafToHost => topo.host_link.rate.0,
                _ => topo.fabric_link.rate.0,
            } as f64;
            let mut red = preset_red(spec.preset.unwrap_or_default(), rate);
            let over = |r: &mut Red,
                        kmin: Option<schema::Size>,
                        kmax: Option<schema::Size>,
                        pmax: Option<f64>| {
                if let Some(k) = kmin {
                    r.kmin = k.0 .0;
                }
                if let Some(k) = kmax {
                    r.kmax = k.0 .0;
                }
                if let Some(p) = pmax {
                    r.pmax = p;
                }
            };
            if let Some(e) = ecn {
                over(&mut red, e.kmin, e.kmax, e.pmax);
                if let Some(t) = e.tiers.get(tier.name()) {
                    over(&mut red, t.kmin, t.kmax, t.pmax);
                }
            }
            let path = format!("ecn.tiers.{}", tier.name());
            if !(red.pmax > 0.0 && red.pmax <= 1.0) {
                return err(path, format!("expected pmax in (0, 1], found {}", red.pmax));
            }
            if red.kmin >= red.kmax {
                return err(
                    path,
                    format!("expected kmin < kmax, found {} >= {}", red.kmin, red.kmax),
                );
            }
            tiers[i] = Some(red);
        }
        if let Some(e) = ecn {
            if let Some(bad) = e
                .tiers
                .keys()
                .find(|k| !Tier::ALL.iter().any(|t| t.name() == k.as_str()))
            {
                return err(
                    format!("ecn.tiers.{bad}"),
                    "unknown tier (expected host_to_leaf, leaf_to_spine, spine_to_leaf or leaf_to_host)",
                );
            }
        }
    }
    Ok((cc, tiers))
}

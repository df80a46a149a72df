//! `routing:`: a policy name, or the policy with its parameters (the map form).

use super::{Duration, LoadSignal, Routing, Size};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// `routing:` a policy name, or the policy with its parameters.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoutingSpec {
    pub policy: Routing,
    /// `flowlet`: idle gap after which a flow may move; default `50us`.
    pub flowlet_gap: Option<Duration>,
    /// `adaptive`: how much lighter another port must be than the flow's ECMP port;
    /// default 0 (always the lightest).
    pub hysteresis: Option<Size>,
    /// `adaptive`: compare port loads in bands of this size (as switch ASICs quantise
    /// load); default 0 (exact bytes).
    pub band: Option<Size>,
    /// `adaptive` and `flowlet`: `queue` (default) or `queue_and_credits` (plus what
    /// the next switch holds from the port under IB credits; a port held by PFC or out of
    /// credits counts as full).
    pub load: Option<LoadSignal>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutingMapSpec {
    policy: Routing,
    #[serde(default)]
    flowlet_gap: Option<Duration>,
    #[serde(default)]
    hysteresis: Option<Size>,
    #[serde(default)]
    band: Option<Size>,
    #[serde(default)]
    load: Option<LoadSignal>,
}

impl<'de> Deserialize<'de> for RoutingSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str = "a policy (`ecmp`, `static`, `spray`, `adaptive` or `flowlet`) or `{ policy, flowlet_gap, hysteresis, band, load }`";
        impl<'de> Visitor<'de> for V {
            type Value = RoutingSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RoutingSpec, E> {
                let policy = Routing::deserialize(de::value::StrDeserializer::<E>::new(s))
                    .map_err(|_| {
                        E::custom(format!("unknown routing `{s}`, expected {EXPECTED}"))
                    })?;
                Ok(RoutingSpec {
                    policy,
                    ..RoutingSpec::default()
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<RoutingSpec, A::Error> {
                let f = RoutingMapSpec::deserialize(de::value::MapAccessDeserializer::new(m))?;
                Ok(RoutingSpec {
                    policy: f.policy,
                    flowlet_gap: f.flowlet_gap,
                    hysteresis: f.hysteresis,
                    band: f.band,
                    load: f.load,
                })
            }
        }
        d.deserialize_any(V)
    }
}

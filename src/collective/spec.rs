//! What a collective is asked to do, as a scenario writes it: the operation, the
//! algorithm and where the ranks go.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// The collective operation (`workload[].collective.op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveOp {
    Allreduce,
    ReduceScatter,
    Allgather,
    Broadcast,
    Alltoall,
}

/// How the collective moves data (`workload[].collective.algorithm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveAlgorithm {
    /// NCCL's tuner chooses ring or tree per size (`collective::tuner`).
    Auto,
    Ring,
    Tree,
    Hierarchical,
    InNetwork,
}

/// NCCL's protocol (`workload[].collective.protocol`, as `NCCL_PROTO`): `auto` lets the
/// tuner choose per size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtocolSpec {
    Auto,
    Simple,
    Ll,
    Ll128,
}

/// Which GPU each rank is (`placement`): `packed`, `striped`, `random`, or a list of
/// global GPU ids (server x gpus_per_host + gpu).
#[derive(Debug, Clone, PartialEq)]
pub enum PlacementSpec {
    Packed,
    Striped,
    Random,
    List(Vec<u32>),
}

impl<'de> Deserialize<'de> for PlacementSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str = "`packed`, `striped`, `random` or a list of GPU ids";
        impl<'de> Visitor<'de> for V {
            type Value = PlacementSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<PlacementSpec, E> {
                match s {
                    "packed" => Ok(PlacementSpec::Packed),
                    "striped" => Ok(PlacementSpec::Striped),
                    "random" => Ok(PlacementSpec::Random),
                    _ => Err(E::custom(format!(
                        "unknown placement `{s}`, expected {EXPECTED}"
                    ))),
                }
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<PlacementSpec, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = a.next_element::<u32>()? {
                    v.push(x);
                }
                Ok(PlacementSpec::List(v))
            }
        }
        d.deserialize_any(V)
    }
}

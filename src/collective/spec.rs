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
    /// NCCL's NVLSTree (`NCCL_ALGO=NVLSTree`): NVLink SHARP inside each server (the
    /// NVSwitch adds the GPUs' shards and multicasts the result), a tree per rail across
    /// the servers (`collective::dag::build_nvls_tree`).
    NvlsTree,
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

/// Which GPU each rank is (`placement`): `packed`, `striped`, `random`,
/// `random_servers` (whole servers drawn at random, as a scheduler that allocates nodes
/// scattered over the leaves; ranks packed on each), a list of global GPU ids (server x
/// gpus_per_host + gpu), or `{ servers: [...] }` (ranks packed on these servers, in this
/// order).
#[derive(Debug, Clone, PartialEq)]
pub enum PlacementSpec {
    Packed,
    Striped,
    Random,
    RandomServers,
    List(Vec<u32>),
    Servers(Vec<u32>),
}

impl<'de> Deserialize<'de> for PlacementSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const EXPECTED: &str = "`packed`, `striped`, `random`, `random_servers`, a list of GPU ids or `{ servers: [...] }`";
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
                    "random_servers" => Ok(PlacementSpec::RandomServers),
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
            fn visit_map<A: de::MapAccess<'de>>(self, mut m: A) -> Result<PlacementSpec, A::Error> {
                let mut servers = None;
                while let Some(k) = m.next_key::<String>()? {
                    if k != "servers" || servers.is_some() {
                        return Err(de::Error::custom(format!(
                            "unknown or repeated placement field `{k}`, expected `servers`"
                        )));
                    }
                    servers = Some(m.next_value::<Vec<u32>>()?);
                }
                servers
                    .map(PlacementSpec::Servers)
                    .ok_or_else(|| de::Error::custom("expected `{ servers: [...] }`"))
            }
        }
        d.deserialize_any(V)
    }
}

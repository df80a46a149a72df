//! Quantities as scenario files write them, shared by the model parameter types and the
//! scenario schema: unit-string newtypes that deserialize from `200Gbps`, `1us`, `4KiB`
//! (and reject a bare number with the unit expected), and the rule that an empty section
//! means its defaults.
//!
//! Model modules (nic, collective, workload) declare their parameter types with these;
//! `scenario` reads whole files with them. Nothing here depends on `scenario`.

use crate::units::{parse_bytes, parse_duration, parse_rate, BitsPerSec, Bytes, SimDuration};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// Longest link or switch latency accepted: a second is already a million times any real
/// cable, and the cap keeps every sum of times far from overflow.
pub const MAX_LATENCY: SimDuration = SimDuration(1_000_000_000_000);

/// Largest scenario file read, bytes (64 MiB: a million explicit flows fit).
pub const MAX_SCENARIO_FILE: u64 = 64 << 20;
/// Largest `cdf_file` read, bytes (16 MiB: about a million points).
pub const MAX_CDF_FILE: u64 = 16 << 20;

/// Reads a text file a scenario names, refusing what could hang or exhaust the reader: a
/// path that is not a regular file (a FIFO or a device such as `/dev/zero`), and a file
/// larger than `limit` bytes. The read itself stops at `limit + 1` bytes, so a file that
/// grows while it is read is refused too.
pub fn read_text_file(path: &std::path::Path, limit: u64) -> Result<String, String> {
    use std::io::Read as _;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(if meta.is_dir() {
            "is a folder, expected a file".into()
        } else {
            "is not a regular file (a FIFO, socket or device): expected a file".into()
        });
    }
    let too_big = |n: u64| format!("is {n} bytes, more than the {limit} bytes a scenario may read");
    if meta.len() > limit {
        return Err(too_big(meta.len()));
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit + 1).read_to_string(&mut text))
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > limit {
        return Err(too_big(text.len() as u64));
    }
    Ok(text)
}

/// Declares a newtype over a unit type that deserializes from a unit string and rejects a
/// bare number with a message that says which unit was expected.
macro_rules! unit_newtype {
    ($name:ident, $inner:ty, $parse:path, $what:literal, $nonzero:expr) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
        pub struct $name(pub $inner);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: de::Error>(self, s: &str) -> Result<$name, E> {
                        let v = $parse(s).map_err(E::custom)?;
                        if $nonzero && v.0 == 0 {
                            return Err(E::custom(format!(
                                "`{s}` is zero; {} must be greater than zero",
                                $what
                            )));
                        }
                        Ok($name(v))
                    }
                    fn visit_u64<E: de::Error>(self, n: u64) -> Result<$name, E> {
                        self.visit_str(&n.to_string())
                    }
                    fn visit_i64<E: de::Error>(self, n: i64) -> Result<$name, E> {
                        self.visit_str(&n.to_string())
                    }
                    fn visit_f64<E: de::Error>(self, n: f64) -> Result<$name, E> {
                        self.visit_str(&n.to_string())
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

unit_newtype!(Rate, BitsPerSec, parse_rate, "a rate", true);
unit_newtype!(Duration, SimDuration, parse_duration, "a duration", false);
unit_newtype!(Size, Bytes, parse_bytes, "a size", false);
unit_newtype!(NonZeroSize, Bytes, parse_bytes, "a size", true);
/// A section written with no content (`transport:`) is the section's defaults, whether
/// the YAML reader sees it as empty or as null (as it does after `--set`).
pub fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

//! Time and units: integer picoseconds, bytes and bits per second.
//!
//! Models: simulated time as an integer count of picoseconds (`SimTime`, `SimDuration`),
//! sizes in bytes (`Bytes`) and link rates in bits per second (`BitsPerSec`), and the one
//! function that turns a size and a rate into a serialization delay
//! ([`serialization_delay`], exact integer arithmetic rounded up, design reference
//! "Units and time"). Scenario strings such as `200Gbps`, `1.2us`, `16MiB` and `4KB` are
//! parsed here; a bare number where a unit is needed is an error.
//!
//! Leaves out: floating-point time anywhere in the engine. A u64 of picoseconds covers
//! 213 days of simulated time; at 800 Gb/s a byte takes 10 ps, so nanoseconds would round.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// Picoseconds per second.
pub const PS_PER_SEC: u64 = 1_000_000_000_000;

/// A point in simulated time, in picoseconds since the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

/// A span of simulated time, in picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(pub u64);

/// The latest simulated time a run may reach: 100 simulated days, far below the clock's
/// end (2^64 ps, 213 days) so nothing near it can wrap. Validation keeps a scenario's
/// work within one simulated day; a run that still gets here stops, and that is reported
/// as a broken invariant.
pub const TIME_HORIZON: SimTime = SimTime(100 * 86_400 * 1_000_000_000_000);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);
    pub fn ps(self) -> u64 {
        self.0
    }
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Time elapsed since `earlier` (saturating at zero).
    pub fn since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl SimDuration {
    pub const ZERO: SimDuration = SimDuration(0);
    pub const MAX: SimDuration = SimDuration(u64::MAX);
    pub const fn from_ps(ps: u64) -> Self {
        SimDuration(ps)
    }
    pub const fn from_ns(ns: u64) -> Self {
        SimDuration(ns * 1_000)
    }
    pub const fn from_us(us: u64) -> Self {
        SimDuration(us * 1_000_000)
    }
    pub fn ps(self) -> u64 {
        self.0
    }
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e12
    }
}

// Time arithmetic is plain addition (checked for overflow in debug builds). It cannot
// wrap in a run: the event loop stops at `TIME_HORIZON` (100 simulated days, less than
// half the clock), and no single delay the model adds comes near the rest (validation
// bounds a message to a simulated day, a timeout to 4.096 us x 2^31 = 2.4 hours). A
// saturating add here cost 1% of a 256-host permutation's instructions for nothing.
impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    #[inline]
    fn add(self, d: SimDuration) -> SimTime {
        SimTime(self.0 + d.0)
    }
}
impl AddAssign<SimDuration> for SimTime {
    #[inline]
    fn add_assign(&mut self, d: SimDuration) {
        self.0 += d.0;
    }
}
impl Add for SimDuration {
    type Output = SimDuration;
    #[inline]
    fn add(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0 + d.0)
    }
}
impl AddAssign for SimDuration {
    #[inline]
    fn add_assign(&mut self, d: SimDuration) {
        self.0 += d.0;
    }
}
impl Sub for SimTime {
    type Output = SimDuration;
    fn sub(self, o: SimTime) -> SimDuration {
        debug_assert!(self.0 >= o.0, "time went backwards: {} - {}", self.0, o.0);
        SimDuration(self.0 - o.0)
    }
}
impl Sub for SimDuration {
    type Output = SimDuration;
    fn sub(self, o: SimDuration) -> SimDuration {
        SimDuration(self.0 - o.0)
    }
}

impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ps(self.0, f)
    }
}
impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ps(self.0, f)
    }
}

fn fmt_ps(ps: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if ps == 0 {
        write!(f, "0ns")
    } else if ps % 1_000_000_000_000 == 0 {
        write!(f, "{}s", ps / 1_000_000_000_000)
    } else if ps % 1_000_000_000 == 0 {
        write!(f, "{}ms", ps / 1_000_000_000)
    } else if ps % 1_000_000 == 0 {
        write!(f, "{}us", ps / 1_000_000)
    } else if ps % 1_000 == 0 {
        write!(f, "{}ns", ps / 1_000)
    } else {
        write!(f, "{}ps", ps)
    }
}

/// A size in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 1 << 30 && b % (1 << 30) == 0 {
            write!(f, "{}GiB", b >> 30)
        } else if b >= 1_000_000_000 && b % 1_000_000_000 == 0 {
            write!(f, "{}GB", b / 1_000_000_000)
        } else if b >= 1 << 20 && b % (1 << 20) == 0 {
            write!(f, "{}MiB", b >> 20)
        } else if b >= 1_000_000 && b % 1_000_000 == 0 {
            write!(f, "{}MB", b / 1_000_000)
        } else if b >= 1 << 10 && b % (1 << 10) == 0 {
            write!(f, "{}KiB", b >> 10)
        } else if b >= 1000 && b % 1000 == 0 {
            write!(f, "{}KB", b / 1000)
        } else {
            write!(f, "{}B", b)
        }
    }
}

/// A link rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BitsPerSec(pub u64);

impl BitsPerSec {
    pub fn gbps_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl fmt::Display for BitsPerSec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        if r % 1_000_000_000 == 0 {
            write!(f, "{}Gbps", r / 1_000_000_000)
        } else if r % 1_000_000 == 0 {
            write!(f, "{}Mbps", r / 1_000_000)
        } else if r % 1_000 == 0 {
            write!(f, "{}Kbps", r / 1_000)
        } else {
            write!(f, "{}bps", r)
        }
    }
}

/// Time to put `bytes` on a wire of `rate`: ceil(bits x 10^12 / rate) picoseconds, in
/// exact integers (u128 when the product overflows 64 bits) so that it never rounds
/// until the one final ceiling
/// (design reference, "Units and time").
#[inline]
pub fn serialization_delay(bytes: u64, rate: BitsPerSec) -> SimDuration {
    debug_assert!(rate.0 > 0, "zero rate");
    // The same ceiling in 64 bits when the product fits (a packet, any message below
    // 2.3 MB): a u128 division is a library call, about 2% of a run's instructions.
    if let Some(num) = bytes.checked_mul(8 * PS_PER_SEC) {
        return SimDuration(num.div_ceil(rate.0));
    }
    let num = bytes as u128 * 8 * PS_PER_SEC as u128;
    let r = rate.0 as u128;
    SimDuration(num.div_ceil(r) as u64)
}

/// Picoseconds a byte takes at `rate` when that is a whole number that fits 32 bits
/// (every rate that divides 8 Tb/s: 25, 50, 100, 200, 400, 800 Gb/s), else 0: kept
/// beside a link's rate so that a packet's serialization time is one multiplication
/// ([`serialization_delay_at`]).
pub fn whole_ps_per_byte(rate: BitsPerSec) -> u32 {
    let bits = 8 * PS_PER_SEC;
    if rate.0 > 0 && bits % rate.0 == 0 {
        u32::try_from(bits / rate.0).unwrap_or(0)
    } else {
        0
    }
}

/// [`serialization_delay`] at `rate`, whose [`whole_ps_per_byte`] is `ps_per_byte`:
/// the same time, by a multiplication when that is not 0.
#[inline(always)]
pub fn serialization_delay_at(bytes: u64, rate: BitsPerSec, ps_per_byte: u32) -> SimDuration {
    if ps_per_byte != 0 {
        SimDuration(bytes * ps_per_byte as u64)
    } else {
        serialization_delay(bytes, rate)
    }
}

/// Why a unit string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("expected a {kind} with a unit (for example {example}), found a bare number `{text}`")]
    MissingUnit {
        kind: &'static str,
        example: &'static str,
        text: String,
    },
    #[error("expected a {kind} such as {example}, found `{text}`")]
    Malformed {
        kind: &'static str,
        example: &'static str,
        text: String,
    },
    #[error("unknown {kind} unit `{unit}` in `{text}` (expected one of {expected})")]
    UnknownUnit {
        kind: &'static str,
        unit: String,
        text: String,
        expected: &'static str,
    },
    #[error("{kind} `{text}` must not be negative")]
    Negative { kind: &'static str, text: String },
    #[error("{kind} `{text}` is too large")]
    TooLarge { kind: &'static str, text: String },
    #[error("{kind} `{text}` is not a whole number of {base}")]
    Fractional {
        kind: &'static str,
        text: String,
        base: &'static str,
    },
}

/// Splits `"1.25us"` into an exact decimal mantissa (`125`, scale `2`) and the unit `"us"`.
fn split_number(
    text: &str,
    kind: &'static str,
    example: &'static str,
) -> Result<(u128, u32, String), UnitError> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(UnitError::Negative {
            kind,
            text: text.to_string(),
        });
    }
    let t = t.strip_prefix('+').unwrap_or(t);
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let unit = unit.trim().to_string();
    let malformed = || UnitError::Malformed {
        kind,
        example,
        text: text.to_string(),
    };
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return Err(malformed());
    }
    let (int_part, frac_part) = match num.split_once('.') {
        Some((a, b)) => (a, b),
        None => (num.as_str(), ""),
    };
    if frac_part.len() > 12 {
        return Err(malformed());
    }
    let digits = format!("{int_part}{frac_part}");
    let mantissa: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| UnitError::TooLarge {
            kind,
            text: text.to_string(),
        })?
    };
    Ok((mantissa, frac_part.len() as u32, unit))
}

/// mantissa / 10^scale x multiplier, exactly, or an error if not whole or too large.
fn scale_exact(
    mantissa: u128,
    scale: u32,
    multiplier: u128,
    kind: &'static str,
    base: &'static str,
    text: &str,
) -> Result<u64, UnitError> {
    let num = mantissa
        .checked_mul(multiplier)
        .ok_or(UnitError::TooLarge {
            kind,
            text: text.to_string(),
        })?;
    let div = 10u128.pow(scale);
    if num % div != 0 {
        return Err(UnitError::Fractional {
            kind,
            text: text.to_string(),
            base,
        });
    }
    u64::try_from(num / div).map_err(|_| UnitError::TooLarge {
        kind,
        text: text.to_string(),
    })
}

/// Parses `text` as a number followed by one of `units` (name, multiplier to the base
/// unit), exactly.
fn parse_with_units(
    text: &str,
    kind: &'static str,
    example: &'static str,
    base: &'static str,
    expected: &'static str,
    units: &[(&str, u128)],
) -> Result<u64, UnitError> {
    let (m, s, unit) = split_number(text, kind, example)?;
    if unit.is_empty() {
        return Err(UnitError::MissingUnit {
            kind,
            example,
            text: text.to_string(),
        });
    }
    let mult = units
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|&(_, mult)| mult)
        .ok_or_else(|| UnitError::UnknownUnit {
            kind,
            unit,
            text: text.to_string(),
            expected,
        })?;
    scale_exact(m, s, mult, kind, base, text)
}

/// Parses a duration: `ps`, `ns`, `us` (or `µs`), `ms`, `s`. `1.2us` = 1,200,000 ps.
pub fn parse_duration(text: &str) -> Result<SimDuration, UnitError> {
    const UNITS: &[(&str, u128)] = &[
        ("ps", 1),
        ("ns", 1_000),
        ("us", 1_000_000),
        ("µs", 1_000_000),
        ("ms", 1_000_000_000),
        ("s", 1_000_000_000_000),
    ];
    parse_with_units(
        text,
        "duration",
        "`600ns` or `1.2us`",
        "picoseconds",
        "ps, ns, us, ms, s",
        UNITS,
    )
    .map(SimDuration)
}

/// Parses a size: `B`, `KB`/`MB`/`GB`/`TB` (powers of 1000), `KiB`/`MiB`/`GiB`/`TiB`
/// (powers of 1024). `4KB` = 4000 B, `4KiB` = 4096 B.
pub fn parse_bytes(text: &str) -> Result<Bytes, UnitError> {
    const UNITS: &[(&str, u128)] = &[
        ("B", 1),
        ("KB", 1_000),
        ("kB", 1_000),
        ("MB", 1_000_000),
        ("GB", 1_000_000_000),
        ("TB", 1_000_000_000_000),
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
        ("TiB", 1 << 40),
    ];
    parse_with_units(
        text,
        "size",
        "`4096B`, `64KB` or `16MiB`",
        "bytes",
        "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB",
        UNITS,
    )
    .map(Bytes)
}

/// Parses a rate: `bps`, `Kbps`, `Mbps`, `Gbps`, `Tbps` (powers of 1000), or bytes per
/// second `GB/s`, `MB/s` (x 8 bits, the nccl-tests convention: 10^9 bytes per second).
pub fn parse_rate(text: &str) -> Result<BitsPerSec, UnitError> {
    const UNITS: &[(&str, u128)] = &[
        ("bps", 1),
        ("Kbps", 1_000),
        ("kbps", 1_000),
        ("Mbps", 1_000_000),
        ("Gbps", 1_000_000_000),
        ("Tbps", 1_000_000_000_000),
        ("B/s", 8),
        ("KB/s", 8_000),
        ("kB/s", 8_000),
        ("MB/s", 8_000_000),
        ("GB/s", 8_000_000_000),
        ("TB/s", 8_000_000_000_000),
        // The same, as vendors and papers also write them: bits as `Gb/s` or `Gbit/s`,
        // bytes as `GBps` (capital B: bytes).
        ("b/s", 1),
        ("Kb/s", 1_000),
        ("kb/s", 1_000),
        ("Mb/s", 1_000_000),
        ("Gb/s", 1_000_000_000),
        ("Tb/s", 1_000_000_000_000),
        ("bit/s", 1),
        ("Kbit/s", 1_000),
        ("kbit/s", 1_000),
        ("Mbit/s", 1_000_000),
        ("Gbit/s", 1_000_000_000),
        ("Tbit/s", 1_000_000_000_000),
        ("Bps", 8),
        ("KBps", 8_000),
        ("kBps", 8_000),
        ("MBps", 8_000_000),
        ("GBps", 8_000_000_000),
        ("TBps", 8_000_000_000_000),
    ];
    parse_with_units(
        text,
        "rate",
        "`200Gbps` or `25GB/s`",
        "bits per second",
        "bps, Kbps, Mbps, Gbps, Tbps (or Gb/s, Gbit/s) for bits, B/s, KB/s, MB/s, GB/s, TB/s (or GBps) for bytes",
        UNITS,
    )
    .map(BitsPerSec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 15, item 9: the spellings users write for the same rate.
    #[test]
    fn rates_parse_in_every_usual_spelling() {
        for t in [
            "100Gbps",
            "100Gb/s",
            "100Gbit/s",
            "100 Gbps",
            "12.5GB/s",
            "12.5GBps",
        ] {
            assert_eq!(parse_rate(t).unwrap(), BitsPerSec(100_000_000_000), "{t}");
        }
        assert_eq!(parse_rate("400Mb/s").unwrap(), BitsPerSec(400_000_000));
        assert!(parse_rate("100Gb").is_err());
        assert!(parse_rate("100").is_err());
    }

    #[test]
    fn durations_parse_exactly() {
        assert_eq!(parse_duration("1.2us").unwrap(), SimDuration(1_200_000));
        assert_eq!(parse_duration("600ns").unwrap(), SimDuration(600_000));
        assert_eq!(parse_duration("5ms").unwrap(), SimDuration(5_000_000_000));
        assert_eq!(parse_duration("7ps").unwrap(), SimDuration(7));
        assert!(matches!(
            parse_duration("0.5ps"),
            Err(UnitError::Fractional { .. })
        ));
        assert!(matches!(
            parse_duration("600"),
            Err(UnitError::MissingUnit { .. })
        ));
        assert!(matches!(
            parse_duration("-1us"),
            Err(UnitError::Negative { .. })
        ));
        assert!(matches!(
            parse_duration("3 fortnights"),
            Err(UnitError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration("us"),
            Err(UnitError::Malformed { .. })
        ));
    }

    #[test]
    fn sizes_distinguish_decimal_and_binary() {
        assert_eq!(parse_bytes("4KB").unwrap(), Bytes(4000));
        assert_eq!(parse_bytes("4KiB").unwrap(), Bytes(4096));
        assert_eq!(parse_bytes("16MiB").unwrap(), Bytes(16 << 20));
        assert_eq!(parse_bytes("1.5MB").unwrap(), Bytes(1_500_000));
        assert_eq!(parse_bytes("4096B").unwrap(), Bytes(4096));
        assert!(parse_bytes("4096").is_err());
        assert!(parse_bytes("99999999999999TiB").is_err());
    }

    #[test]
    fn rates_parse() {
        assert_eq!(parse_rate("200Gbps").unwrap(), BitsPerSec(200_000_000_000));
        assert_eq!(parse_rate("25GB/s").unwrap(), BitsPerSec(200_000_000_000));
        assert_eq!(parse_rate("2.5Gbps").unwrap(), BitsPerSec(2_500_000_000));
        assert!(parse_rate("200").is_err());
        assert!(parse_rate("-5Gbps").is_err());
    }

    #[test]
    fn serialization_is_exact_and_rounds_up() {
        // 4122 B at 200 Gb/s: 32976 bits / 200e9 = 164.88 ns = 164_880 ps exactly.
        assert_eq!(
            serialization_delay(4122, BitsPerSec(200_000_000_000)),
            SimDuration(164_880)
        );
        // 1 B at 400 Gb/s = 20 ps; at 800 Gb/s = 10 ps (design reference).
        assert_eq!(serialization_delay(1, BitsPerSec(400_000_000_000)).0, 20);
        assert_eq!(serialization_delay(1, BitsPerSec(800_000_000_000)).0, 10);
        // 1 B at 3 bps = 8/3 s = 2.666..e12 ps, rounded up.
        assert_eq!(serialization_delay(1, BitsPerSec(3)).0, 2_666_666_666_667);
    }

    #[test]
    fn display_round_trips() {
        for s in ["1us", "600ns", "5ms", "7ps", "3s"] {
            assert_eq!(parse_duration(s).unwrap().to_string(), s);
        }
        assert_eq!(Bytes(16 << 20).to_string(), "16MiB");
        assert_eq!(BitsPerSec(200_000_000_000).to_string(), "200Gbps");
    }
}

//! `distributed.link`: the network the processes of a local cell talk
//! over. `host` is this machine's loopback; a rate (`1gbit`, `100mbit`,
//! `2.5gbit`) puts each process in a network namespace of its own, joined
//! to the others through a bridge by a link shaped to that rate.

use serde::{Deserialize, Serialize};

/// The slowest and fastest rate a link may be shaped to, in bits a second.
const SLOWEST: u64 = 1_000_000;
const FASTEST: u64 = 400_000_000_000;

/// What `distributed.link` accepts, for error messages.
pub const ACCEPTED: &str =
    "\"host\", or a rate from 1mbit to 400gbit such as \"100mbit\", \"1gbit\", \"10gbit\", \"25gbit\"";

/// The network between a cell's processes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum LinkRate {
    /// This machine's loopback, unshaped.
    #[default]
    Host,
    /// Each process's link shaped to this many bits a second, both ways.
    Shaped(u64),
}

impl LinkRate {
    /// `host`, `<N>mbit` or `<N>gbit` (N may have a fraction: `2.5gbit`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let lower = text.trim().to_ascii_lowercase();
        if lower == "host" {
            return Ok(Self::Host);
        }
        let (number, unit) = if let Some(n) = lower.strip_suffix("gbit") {
            (n, 1e9)
        } else if let Some(n) = lower.strip_suffix("mbit") {
            (n, 1e6)
        } else {
            return Err(format!("`{text}` is not a link: expected {ACCEPTED}"));
        };
        let bits = number
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(|n| (n * unit).round())
            .filter(|&b| (SLOWEST as f64..=FASTEST as f64).contains(&b))
            .ok_or_else(|| format!("`{text}` is not a link: expected {ACCEPTED}"))?;
        Ok(Self::Shaped(bits as u64))
    }

    /// Bits a second of a shaped link; `None` for the host's loopback.
    pub fn bits_per_s(self) -> Option<u64> {
        match self {
            Self::Host => None,
            Self::Shaped(bits) => Some(bits),
        }
    }

    pub fn is_host(&self) -> bool {
        *self == Self::Host
    }

    /// How configs and results write it: `host`, `10gbit`, `2500mbit`, `1.5mbit`.
    pub fn name(self) -> String {
        match self {
            Self::Host => "host".into(),
            Self::Shaped(bits) if bits % 1_000_000_000 == 0 => format!("{}gbit", bits / 1_000_000_000),
            Self::Shaped(bits) if bits % 1_000_000 == 0 => format!("{}mbit", bits / 1_000_000),
            Self::Shaped(bits) => format!("{}mbit", bits as f64 / 1e6),
        }
    }
}

impl std::fmt::Display for LinkRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl TryFrom<String> for LinkRate {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        Self::parse(&text)
    }
}

impl From<LinkRate> for String {
    fn from(link: LinkRate) -> String {
        link.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_and_write_back() {
        for (text, bits, name) in [
            ("1gbit", 1_000_000_000, "1gbit"),
            ("10GBIT", 10_000_000_000, "10gbit"),
            ("100mbit", 100_000_000, "100mbit"),
            ("2.5gbit", 2_500_000_000, "2500mbit"),
            ("1.5mbit", 1_500_000, "1.5mbit"),
            ("400gbit", 400_000_000_000, "400gbit"),
        ] {
            let link = LinkRate::parse(text).unwrap();
            assert_eq!(link, LinkRate::Shaped(bits), "{text}");
            assert_eq!(link.name(), name);
            assert_eq!(LinkRate::parse(&link.name()).unwrap(), link, "{name} reads back");
        }
        assert_eq!(LinkRate::parse("host").unwrap(), LinkRate::Host);
        assert_eq!(LinkRate::Host.bits_per_s(), None);
    }

    #[test]
    fn what_is_not_a_rate_is_refused_with_what_is() {
        for text in ["fast", "10", "0mbit", "0.5mbit", "401gbit", "-1gbit", "nangbit", "10 gb", ""] {
            let err = LinkRate::parse(text).unwrap_err();
            assert!(err.contains("\"host\"") && err.contains("400gbit"), "{text}: {err}");
        }
    }
}

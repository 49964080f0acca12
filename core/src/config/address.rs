//! `host:port` addresses, parsed once where the config is read.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A host (name, IPv4, or bracketed IPv6) and a TCP port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    /// The same host, `offset` ports up; `None` past 65535.
    pub fn offset(&self, offset: u16) -> Option<Self> {
        Some(Self { host: self.host.clone(), port: self.port.checked_add(offset)? })
    }
}

impl FromStr for HostPort {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{text:?} is not host:port, e.g. \"10.0.0.1:7400\"");
        let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(bad());
        }
        Ok(Self { host: host.to_string(), port })
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl Serialize for HostPort {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostPort {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_and_ports_and_refuses_the_rest() {
        let a: HostPort = "10.0.0.1:7400".parse().unwrap();
        assert_eq!((a.host.as_str(), a.port), ("10.0.0.1", 7400));
        assert_eq!("[::1]:80".parse::<HostPort>().unwrap().host, "[::1]");
        assert_eq!(a.offset(2).unwrap().to_string(), "10.0.0.1:7402");
        assert!(a.offset(u16::MAX).is_none());
        for bad in ["7400", ":7400", "host:", "host:70000", "a b:1"] {
            let err = bad.parse::<HostPort>().unwrap_err();
            assert!(err.contains("is not host:port"), "{bad}: {err}");
        }
    }
}

//! The contract's version rules. The plugin contract (`wit/benchkit.wit`,
//! `benchkit:plugin@MAJOR.MINOR.PATCH`) and this results schema share one
//! version, [`crate::SCHEMA_VERSION`]:
//!
//! - a minor version only adds: interfaces, worlds, functions the host
//!   offers, event kinds, optional fields of events and results. It never
//!   changes or removes what a plugin of an older minor version exports or
//!   reads, so a host of `x.y` accepts plugins and results of `x.0` to
//!   `x.y`;
//! - a host refuses a newer minor version (the plugin may need what this
//!   host lacks) and any other major version, naming both versions;
//! - the host sends events of its own version; a reporter built for an
//!   older minor version reads the fields and event kinds it knows and
//!   skips the rest;
//! - a patch version changes documentation only.
//!
//! Results of schema 0.4.0, the last before 1.0.0, are the same schema and
//! are read as 1.0.0.

use crate::SCHEMA_VERSION;

/// The last unstable version, identical to 1.0.0.
const LAST_UNSTABLE: &str = "0.4.0";

/// Why a version is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A newer minor version of this major: it may need what this build lacks.
    Newer,
    /// Another major version (or an unstable 0.x one).
    OtherMajor,
    /// Not `MAJOR.MINOR.PATCH`.
    Unreadable,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor) = major_minor(SCHEMA_VERSION).unwrap_or((0, 0));
        match self {
            Refusal::Newer => write!(
                f,
                "it is newer than this build's {SCHEMA_VERSION}, which reads {major}.0 to {major}.{minor}; upgrade benchkit"
            ),
            Refusal::OtherMajor => write!(f, "this build reads {major}.0 to {major}.{minor} only"),
            Refusal::Unreadable => write!(f, "it is not a MAJOR.MINOR.PATCH version"),
        }
    }
}

/// `(major, minor)` of `MAJOR.MINOR.PATCH`.
/// A pre-release or build suffix (`-rc.1`, `+build`) is ignored.
pub fn major_minor(version: &str) -> Option<(u64, u64)> {
    let core = version.split(['-', '+']).next()?;
    let mut parts = core.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let _patch: u64 = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((major, minor))
}

/// Whether a plugin or results of contract `found` may be used by this build.
pub fn accepts(found: &str) -> Result<(), Refusal> {
    accepts_against(found, SCHEMA_VERSION)
}

/// [`accepts`] for a build of contract `ours`.
pub fn accepts_against(found: &str, ours: &str) -> Result<(), Refusal> {
    let (Some((major, minor)), Some((our_major, our_minor))) = (major_minor(found), major_minor(ours)) else {
        return Err(Refusal::Unreadable);
    };
    if major != our_major || major == 0 {
        Err(Refusal::OtherMajor)
    } else if minor > our_minor {
        Err(Refusal::Newer)
    } else {
        Ok(())
    }
}

/// Whether results written at schema `found` may be read by this build:
/// [`accepts`], and the last unstable version, identical to 1.0.0.
pub fn reads_results(found: &str) -> Result<(), Refusal> {
    if found == LAST_UNSTABLE && SCHEMA_VERSION.starts_with("1.") {
        return Ok(());
    }
    accepts(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_minors_of_the_same_major_are_accepted_newer_and_other_majors_refused() {
        assert_eq!(accepts_against("1.0.0", "1.1.0"), Ok(()));
        assert_eq!(accepts_against("1.1.7", "1.1.0"), Ok(()), "patch versions do not matter");
        assert_eq!(accepts_against("1.2.0", "1.1.0"), Err(Refusal::Newer));
        assert_eq!(accepts_against("2.0.0", "1.1.0"), Err(Refusal::OtherMajor));
        assert_eq!(accepts_against("0.4.0", "1.1.0"), Err(Refusal::OtherMajor));
        assert_eq!(accepts_against("0.4.0", "0.4.0"), Err(Refusal::OtherMajor), "0.x promised nothing");
        assert_eq!(accepts_against("1.0", "1.1.0"), Err(Refusal::Unreadable));
        assert_eq!(accepts_against("1.x.0", "1.1.0"), Err(Refusal::Unreadable));
        assert_eq!(accepts_against("1.0.0-rc.1", "1.1.0"), Ok(()));
    }

    #[test]
    fn results_of_the_last_unstable_schema_are_read() {
        assert_eq!(reads_results("0.4.0"), Ok(()));
        assert_eq!(reads_results("0.3.0"), Err(Refusal::OtherMajor));
        assert_eq!(reads_results(SCHEMA_VERSION), Ok(()));
    }
}

//! The version rules. Two versions follow them: the plugin contract's
//! ([`crate::CONTRACT_VERSION`], `wit/benchkit.wit`'s
//! `benchkit:plugin@MAJOR.MINOR.PATCH`) and the results schema's
//! ([`crate::SCHEMA_VERSION`]). They were one version until results schema
//! 2.0.0 renamed fields while the plugin contract went on at 1.5.0:
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
//! - a patch version changes documentation, or how an estimate (not a
//!   measurement) is worked out, every field keeping its name, type and
//!   unit; the results guide lists each such change (2.4.1: the memory
//!   estimate counts replicas where they hold their memory).
//!
//! A reporter receives events in the results schema its contract names:
//! contract 1.0 to 1.4 in results schema 1.x's names (the host translates,
//! [`crate::v1`]), contract 1.5 in results schema 2's. A major version of
//! the results schema keeps reading the one before it: this build reads
//! results of schema 1.x by translating their names, and of 0.4.0, the last
//! before 1.0.0 and the same schema.

use crate::{CONTRACT_VERSION, SCHEMA_VERSION};

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

impl Refusal {
    /// Why, for a build of version `ours` that reads `oldest` and up.
    pub fn explain(&self, ours: &str, oldest: &str) -> String {
        let (major, minor) = major_minor(ours).unwrap_or((0, 0));
        match self {
            Refusal::Newer => {
                format!("it is newer than this build's {ours}, which reads {oldest} to {major}.{minor}; upgrade benchkit")
            }
            Refusal::OtherMajor => format!("this build reads {oldest} to {major}.{minor} only"),
            Refusal::Unreadable => "it is not a MAJOR.MINOR.PATCH version".into(),
        }
    }

    /// Why a plugin's contract version is refused.
    pub fn of_contract(&self) -> String {
        let major = major_minor(CONTRACT_VERSION).map_or(0, |(major, _)| major);
        self.explain(CONTRACT_VERSION, &format!("{major}.0"))
    }

    /// Why a results directory's schema version is refused.
    pub fn of_results(&self) -> String {
        self.explain(SCHEMA_VERSION, READ_BEFORE)
    }
}

/// The results schemas this build reads before its own major version: the
/// closed 1.x line, up to its last minor ([`crate::v1::LAST`]).
const READ_BEFORE: &str = "1.0 to 1.4 and 2.0";

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

/// Whether a plugin of contract `found` may be used by this build.
pub fn accepts(found: &str) -> Result<(), Refusal> {
    accepts_against(found, CONTRACT_VERSION)
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
/// its own major version up to its minor, every 1.x ([`is_v1`]) and the
/// last unstable version, identical to 1.0.0.
pub fn reads_results(found: &str) -> Result<(), Refusal> {
    if is_v1(found) {
        return Ok(());
    }
    accepts_against(found, SCHEMA_VERSION)
}

/// Whether results of schema `found` are read through [`crate::v1`]'s
/// translation: 1.0 to 1.4, and 0.4.0, the same schema as 1.0.0. The 1.x
/// line ended at 1.4: a 1.5 or later was written by no benchkit.
pub fn is_v1(found: &str) -> bool {
    let last = major_minor(crate::v1::LAST).map_or(0, |(_, minor)| minor);
    found == LAST_UNSTABLE || major_minor(found).is_some_and(|(major, minor)| major == 1 && minor <= last)
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
    fn results_of_1x_and_the_last_unstable_schema_are_read_and_translated() {
        assert_eq!(reads_results("0.4.0"), Ok(()));
        assert_eq!(reads_results("1.0.0"), Ok(()));
        assert_eq!(reads_results("1.4.0"), Ok(()));
        assert!(is_v1("1.4.0") && is_v1("0.4.0") && !is_v1(SCHEMA_VERSION));
        assert_eq!(reads_results("0.3.0"), Err(Refusal::OtherMajor));
        assert_eq!(reads_results(SCHEMA_VERSION), Ok(()));
        assert_eq!(reads_results("2.99.0"), Err(Refusal::Newer));
        assert_eq!(reads_results("3.0.0"), Err(Refusal::OtherMajor));
        assert!(!is_v1("1.5.0"), "no benchkit wrote results of 1.5");
        assert_eq!(reads_results("1.5.0"), Err(Refusal::OtherMajor));
    }

    #[test]
    fn plugins_are_judged_by_the_contract_and_results_by_the_schema() {
        assert_eq!(accepts("1.0.0"), Ok(()), "a contract 1.0 plugin still loads");
        assert_eq!(accepts(CONTRACT_VERSION), Ok(()));
        assert_eq!(accepts(SCHEMA_VERSION), Err(Refusal::OtherMajor), "no plugin contract 2 exists");
        assert_eq!(
            Refusal::OtherMajor.of_results(),
            format!(
                "this build reads 1.0 to 1.4 and 2.0 to {} only",
                SCHEMA_VERSION.rsplit_once('.').unwrap().0
            )
        );
    }
}

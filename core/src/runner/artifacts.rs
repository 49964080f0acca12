//! Writing what reporters return into the run directory. A reporter is
//! untrusted: each artifact must have a plain file name of its own, may not
//! touch the run's own files or another reporter's, and the number a
//! reporter may return is bounded. A bad artifact becomes a warning naming
//! the reporter; every other artifact is still written.

use super::write_atomic;
use crate::plugin::text::clean_line;
use crate::report::{Artifacts, ReportError};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Files and folders of the run itself, which no reporter may write.
const RESERVED: [&str; 3] = ["run.json", "events.jsonl", "cells"];

/// The most artifacts one reporter may return.
pub const MAX_ARTIFACTS: usize = 64;

/// The most bytes in an artifact's name.
const NAME_BYTES: usize = 255;

/// Why `name` is not a plain file name an artifact may take, if it is not.
fn refuse(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > NAME_BYTES {
        return Some(format!("a file name is 1 to {NAME_BYTES} bytes"));
    }
    if name.chars().any(|c| c.is_control() || matches!(c, '/' | '\\')) {
        return Some("a file name has no path separators or control characters".into());
    }
    if name.starts_with('.') {
        return Some("a file name may not start with `.`".into());
    }
    if RESERVED.contains(&name) {
        return Some(format!("{} belong to the run", RESERVED.join(", ")));
    }
    None
}

/// Write every acceptable artifact into `dir`, at most [`MAX_ARTIFACTS`]
/// from each reporter; the paths written, and a warning for each artifact
/// refused or not written.
pub fn write_artifacts(dir: &Path, reporters: Vec<Artifacts>) -> (Vec<PathBuf>, Vec<ReportError>) {
    let mut written = Vec::new();
    let mut warnings = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    for Artifacts { reporter, files } in reporters {
        let warn = |message: String| ReportError { reporter: reporter.clone(), message };
        if files.len() > MAX_ARTIFACTS {
            warnings.push(warn(format!(
                "returned {} artifacts; only the first {MAX_ARTIFACTS} are written",
                files.len()
            )));
        }
        for (name, contents) in files.into_iter().take(MAX_ARTIFACTS) {
            let shown = clean_line(&name, 80);
            if let Some(why) = refuse(&name) {
                warnings.push(warn(format!("artifact {shown:?} not written: {why}")));
                continue;
            }
            if !taken.insert(name.clone()) {
                warnings.push(warn(format!(
                    "artifact {shown:?} not written: another reporter already wrote that file"
                )));
                continue;
            }
            let path = dir.join(&name);
            match write_atomic(&path, &contents) {
                Ok(()) => written.push(path),
                Err(e) => warnings.push(warn(format!("artifact {shown:?} not written: {e}"))),
            }
        }
    }
    (written, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reporter<S: AsRef<str>>(name: &str, files: &[S]) -> Artifacts {
        let files = files.iter().map(|f| (f.as_ref().to_string(), b"x".to_vec())).collect();
        Artifacts { reporter: name.into(), files }
    }

    #[test]
    fn only_plain_names_of_its_own_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let long = "a".repeat(256);
        let bad = [
            "../escape.txt",
            "sub/file",
            "nul\0byte",
            "\u{1b}[31mred",
            ".hidden",
            "run.json",
            "cells",
            "",
            &long,
            "report.md",
            "fine.csv",
        ];
        let (written, warnings) =
            write_artifacts(dir.path(), vec![reporter("a", &["report.md"]), reporter("b", &bad)]);
        let names: Vec<_> =
            written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["report.md", "fine.csv"]);
        assert_eq!(warnings.len(), 10, "{warnings:?}");
        assert!(warnings.iter().all(|w| w.reporter == "b"));
        assert!(warnings.last().unwrap().message.contains("another reporter already wrote"));
        assert!(!dir.path().parent().unwrap().join("escape.txt").exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    /// The bound is per reporter: two instances of one plugin each get their share.
    #[test]
    fn each_reporter_returns_a_bounded_number_of_artifacts() {
        let dir = tempfile::tempdir().unwrap();
        let names = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}{i}")).collect::<Vec<_>>();
        let (many, few) = (names("m", MAX_ARTIFACTS + 10), names("f", 5));
        let same = "same.wasm";
        let (written, warnings) =
            write_artifacts(dir.path(), vec![reporter(same, &few), reporter(same, &many)]);
        assert_eq!(written.len(), 5 + MAX_ARTIFACTS);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].message.contains("returned 74 artifacts; only the first 64"), "{warnings:?}");
    }
}

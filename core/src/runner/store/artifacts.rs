//! Writing what reporters return into the run directory. A reporter is
//! untrusted: each artifact must have a plain file name of its own, may not
//! take one of benchkit's own names ([`super::layout`]) or another
//! reporter's, and the number a reporter may return is bounded. Built-in
//! reporters are written first, so their files are where the user expects
//! them whatever order the reporters were listed in. A bad artifact becomes
//! a warning naming the reporter and the name it asked for; every other
//! artifact is still written.

use super::{layout, write_atomic};
use crate::plugin::text::clean_line;
use crate::report::{Artifacts, ReportError};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The most artifacts one reporter may return.
pub const MAX_ARTIFACTS: usize = 64;

/// Why `name` is not a file name an artifact of a built-in (`builtin`) or
/// third-party reporter may take, if it is not.
fn refuse(name: &str, builtin: bool) -> Option<String> {
    // One plain file name, as every name from outside that becomes a path.
    if let Err(e) = crate::bounds::plain_component("an artifact", name) {
        return Some(e.to_string());
    }
    if name.starts_with('.') {
        return Some("a file name may not start with `.`".into());
    }
    if name.ends_with(['.', ' ']) {
        // Some file systems drop them, making `summary.json.` `summary.json`.
        return Some("a file name may not end with `.` or a space".into());
    }
    match builtin {
        true if layout::run_file(name) => layout::reserved(name),
        true => None,
        false => layout::reserved(name),
    }
}

/// Why a third-party reporter may not write a file called `name`, if it may not.
pub fn refused_name(name: &str) -> Option<String> {
    refuse(name, false)
}

/// Write every acceptable artifact into `dir`, at most [`MAX_ARTIFACTS`]
/// from each reporter; the paths written, and a warning for each artifact
/// refused or not written.
pub fn write_artifacts(dir: &Path, mut reporters: Vec<Artifacts>) -> (Vec<PathBuf>, Vec<ReportError>) {
    let mut written = Vec::new();
    let mut warnings = Vec::new();
    // Each name taken (without case, as a case-insensitive file system
    // compares them), and by whom.
    let mut taken: HashMap<String, String> = HashMap::new();
    reporters.sort_by_key(|r| !r.builtin);
    for Artifacts { reporter, builtin, files } in reporters {
        let warn = |message: String| ReportError { reporter: reporter.clone(), message };
        if files.len() > MAX_ARTIFACTS {
            warnings.push(warn(format!(
                "returned {} artifacts; only the first {MAX_ARTIFACTS} are written",
                files.len()
            )));
        }
        for (name, contents) in files.into_iter().take(MAX_ARTIFACTS) {
            let shown = clean_line(&name, 80);
            if let Some(why) = refuse(&name, builtin) {
                warnings.push(warn(format!("artifact {shown:?} not written: {}", clean_line(&why, 400))));
                continue;
            }
            if let Some(owner) = taken.get(&name.to_ascii_lowercase()) {
                let by = if *owner == reporter {
                    "this reporter".to_string()
                } else {
                    format!("reporter {owner}")
                };
                warnings.push(warn(format!("artifact {shown:?} not written: {by} already wrote that file")));
                continue;
            }
            taken.insert(name.to_ascii_lowercase(), reporter.clone());
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
        let files = files.iter().map(|f| (f.as_ref().to_string(), name.as_bytes().to_vec())).collect();
        Artifacts { reporter: name.into(), builtin: name.starts_with("builtin:"), files }
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
            "summary.json.",
            "run.json",
            "cells",
            "",
            &long,
            "notes.md",
            "fine.csv",
        ];
        let (written, warnings) =
            write_artifacts(dir.path(), vec![reporter("a", &["notes.md"]), reporter("b", &bad)]);
        let names: Vec<_> =
            written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["notes.md", "fine.csv"]);
        assert_eq!(warnings.len(), 11, "{warnings:?}");
        assert!(warnings.iter().all(|w| w.reporter == "b"));
        assert!(warnings.last().unwrap().message.contains("reporter a already wrote"));
        assert!(!dir.path().parent().unwrap().join("escape.txt").exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    /// A third party listed first asks for benchkit's names; the built-in
    /// reporters' files are theirs all the same, and each refusal names the
    /// plugin, the name it asked for and who holds it.
    #[test]
    fn builtin_reports_win_whatever_the_order() {
        let dir = tempfile::tempdir().unwrap();
        let forged =
            ["summary.json", "Report.HTML", "study.json", "ranks.json", "mllog-x-r0.txt", "mine.json"];
        let reporters = vec![
            reporter("evil.wasm", &forged),
            reporter("builtin:json", &["summary.json"]),
            reporter("builtin:html", &["report.html", "summary.json"]),
        ];
        let (written, warnings) = write_artifacts(dir.path(), reporters);
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("summary.json"), "builtin:json");
        assert_eq!(read("report.html"), "builtin:html");
        assert_eq!(read("mine.json"), "evil.wasm");
        assert_eq!(written.len(), 3);
        let evil: Vec<_> = warnings.iter().filter(|w| w.reporter == "evil.wasm").collect();
        assert_eq!(evil.len(), 5, "{warnings:?}");
        assert!(evil[0]
            .message
            .starts_with("artifact \"summary.json\" not written: summary.json is a built-in"));
        assert!(evil[2].message.contains("study.json is one of the run's own files"), "{evil:?}");
        let html = warnings.iter().find(|w| w.reporter == "builtin:html").unwrap();
        assert!(html.message.contains("reporter builtin:json already wrote that file"), "{html:?}");
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

//! Every name benchkit itself writes in a results directory, in one place:
//! the store's files, the files the runner adds beside them, and the
//! reports of the built-in reporters. A reporter plugin's artifact may take
//! none of them, whatever order the reporters run in, so that what users
//! and `compare` read is always benchkit's.

/// The resolved config of every cell, the environment and the plugins.
pub const RUN: &str = "run.json";
/// Every event as it happened, one JSON object per line.
pub const EVENTS: &str = "events.jsonl";
/// One record per cell (`cells/<slug>.json`).
pub const CELLS: &str = "cells";
/// The rank map of a run launched across processes or machines.
pub const RANKS: &str = "ranks.json";
/// A study's checks and their verdicts.
pub const STUDY: &str = "study.json";

/// Files written by the runner, not by a reporter.
pub const RUN_FILES: [&str; 5] = [RUN, EVENTS, CELLS, RANKS, STUDY];

/// Files the built-in reporters write (`builtin:json`, `builtin:csv`,
/// `builtin:html`, `builtin:markdown`).
pub const BUILTIN_REPORTS: [&str; 5] =
    ["summary.json", "cells.csv", "repeats.csv", "report.html", "report.md"];

/// Prefixes of files the built-in reporters name per cell
/// (`builtin:mllog`'s `mllog-<cell>-r<repeat>.txt`, `builtin:timeline`'s
/// `timeline-<cell>-r<repeat>.json`).
pub const BUILTIN_PREFIXES: [&str; 2] = ["mllog-", "timeline-"];

/// What `benchkit advise` writes beside a run, and where `--verify`
/// measures its follow-up config.
pub const ADVICE_JSON: &str = "advice.json";
pub const ADVICE_HTML: &str = "advice.html";
pub const ADVICE_TOML: &str = "advice.toml";
pub const ADVICE_RUN: &str = "advice-run";

/// Files the commands that read a run write beside it (`benchkit predict`, `benchkit advise`).
pub const TOOL_FILES: [&str; 6] =
    ["predict.json", "predict.html", ADVICE_JSON, ADVICE_HTML, ADVICE_TOML, ADVICE_RUN];

/// Whether `name` is one of benchkit's own (compared without case, as a
/// case-insensitive file system would): why, if it is.
pub fn reserved(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    if RUN_FILES.contains(&lower.as_str()) {
        return Some(format!("{name} is one of the run's own files ({})", RUN_FILES.join(", ")));
    }
    if BUILTIN_REPORTS.contains(&lower.as_str()) {
        return Some(format!(
            "{name} is a built-in reporter's file ({}), which only it may write",
            BUILTIN_REPORTS.join(", ")
        ));
    }
    if TOOL_FILES.contains(&lower.as_str()) {
        return Some(format!(
            "{name} is written by benchkit predict or advise ({}), which only they may write",
            TOOL_FILES.join(", ")
        ));
    }
    BUILTIN_PREFIXES.iter().find(|p| lower.starts_with(*p)).map(|p| {
        format!("names starting with {p} are a built-in reporter's ({})", BUILTIN_PREFIXES.join(", "))
    })
}

/// Whether `name` is one of the runner's own files, which not even a
/// built-in reporter may write.
pub fn run_file(name: &str) -> bool {
    RUN_FILES.contains(&name.to_ascii_lowercase().as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runs_files_and_the_builtin_reports_are_reserved_in_any_case() {
        for name in ["run.json", "EVENTS.JSONL", "Cells", "ranks.json", "study.json", "Summary.json"] {
            assert!(reserved(name).is_some(), "{name}");
        }
        for name in
            ["report.html", "report.md", "cells.csv", "repeats.csv", "MLLOG-x-r0.txt", "timeline-x-r1.json"]
        {
            assert!(reserved(name).is_some(), "{name}");
            assert!(!run_file(name), "{name}");
        }
        for name in
            ["my-summary.json", "report.pdf", "study.json.bak", "cells2", "mllog.txt", "timeline.json"]
        {
            assert_eq!(reserved(name), None, "{name}");
        }
        assert!(reserved("Study.json").unwrap().contains("the run's own files"));
        assert!(reserved("summary.json").unwrap().contains("built-in reporter's file"));
    }
}

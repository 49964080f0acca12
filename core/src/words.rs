//! One word, one meaning: the senses the glossary retired (its "Retired
//! words"), as the phrases that carried them, kept out of the code, the
//! results' schemas and the docs by a test beside [`crate::layering`]'s.
//!
//! A phrase matches case-insensitively, with backticks ignored and any run
//! of whitespace (a line break too) read as one space, and only at word
//! boundaries (letters, digits, `_` and `-` are word characters, so
//! `--ntasks-per-node` is not "per-node").

/// Each retired sense: the word, what it meant, the word now, and the
/// phrases that carried it.
pub const RETIRED: &[(&str, &str, &str, &[&str])] = &[
    (
        "node",
        "a machine",
        "machine (graph nodes keep \"node\")",
        &[
            "on its node",
            "on a node",
            "on every node",
            "rank 0's node",
            "on the node at",
            "count per node",
            "tasks per node",
            "task per node",
            "number per node",
            "per-node",
            "gpu node",
            "gpu nodes",
            "a100 node",
            "h100 node",
            "cpu node",
            "node(s)",
            "slurm's node list",
            "lost nodes",
            "many nodes",
            "its node's",
            "a node without",
            "across_nodes",
            "other_node",
        ],
    ),
    (
        "shard",
        "a slice of the matrix",
        "matrix slice (a record shard keeps \"shard\")",
        &[
            "unsharded",
            "configs or shards",
            "shards of the matrix",
            "shard of the matrix",
            "shards of the sweep",
        ],
    ),
    (
        "run",
        "a repeat",
        "repeat (a run is one `benchkit run`)",
        &[
            "repeats runs each",
            "one run of one cell",
            "each run of a cell",
            "per run of a cell",
            "a run of a cell",
            "seed the run trained",
            "seed this run trained",
            "odd run",
            "profiled run",
            "median over its runs",
            "pipeline run",
            "pipeline run's",
            "runerror",
            "base_run",
            "run: &cellresult",
            "run: cellresult",
            "for run in record.repeats",
            "let run = &cell.repeats",
        ],
    ),
    (
        "engine",
        "a backend",
        "backend, JIT backend (an engine is the software behind a PyTorch row)",
        &[
            "jit engine",
            "jit engines",
            "jit-engines",
            "engines compared",
            "engine alone",
            "engines_compared",
            "across engines",
            "script for another engine",
            "threads the engine",
            "threads its engine",
            "the engine compiles",
            "the engine trains",
            "the engine was steady",
        ],
    ),
    (
        "world",
        "a plugin's WIT world, unqualified",
        "WIT world (a world is all the ranks of a cell)",
        &[
            "transform world",
            "transform worlds",
            "model world",
            "model worlds",
            "reporter world",
            "reporter worlds",
            "plugin's world",
            "plugin world",
        ],
    ),
    (
        "device",
        "threads on the CPU",
        "replica, its thread pool (a device is one GPU, or the CPU)",
        &[
            "own device (on the cpu",
            "own thread and device",
            "devices of one thread",
            "devices of 1 thread",
            "threads each device",
            "each device here is a core",
            "core per device",
            "devices share one pool",
            "device computing with",
            "one per device, each on its own thread",
            "one per device on thread",
        ],
    ),
    (
        "pipeline",
        "the loader",
        "loader, input pipeline (a pipeline is pipeline parallelism)",
        &[
            "naive pipeline",
            "optimized pipeline",
            "naive pipelines",
            "optimized pipelines",
            "data pipeline",
            "both pipelines",
            "the pipeline alone",
            "either pipeline",
            "pipeline or worker",
            "pipeline or the worker",
            "where the pipeline says",
            "an architecture, a pipeline",
        ],
    ),
];

/// `text` as phrases are matched against it: each line without the comment
/// marks it starts with (`//!`, `///`, `//`, `#`), lower case, backticks
/// gone, each run of whitespace one space.
pub fn normalised(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    let lines = text.lines().map(|line| {
        let line = line.trim_start();
        ["//!", "///", "//", "#"].iter().find_map(|mark| line.strip_prefix(mark)).unwrap_or(line)
    });
    for c in lines.flat_map(|line| line.chars().chain(['\n'])).filter(|c| *c != '`') {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            out.push(' ');
        }
        space = false;
        out.extend(c.to_lowercase());
    }
    out
}

fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

/// The retired phrases `text` holds (already [`normalised`]), each with the
/// word it retired.
pub fn retired_in(text: &str) -> Vec<(&'static str, &'static str)> {
    let mut found = Vec::new();
    for (word, _, _, phrases) in RETIRED {
        for phrase in *phrases {
            let mut from = 0;
            while let Some(at) = text[from..].find(phrase) {
                let start = from + at;
                let end = start + phrase.len();
                let before = text[..start].chars().next_back().is_none_or(|c| !word_char(c));
                let after = text[end..].chars().next().is_none_or(|c| !word_char(c));
                if before && after {
                    found.push((*word, *phrase));
                    break;
                }
                from = start + phrase.len().max(1);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    #[test]
    fn phrases_match_whole_words_across_line_breaks() {
        let hits = |t: &str| retired_in(&normalised(t)).into_iter().map(|(_, p)| p).collect::<Vec<_>>();
        assert_eq!(hits("one task\n   per node, `RunError`"), ["task per node", "runerror"]);
        assert!(hits("srun --ntasks-per-node=4; a JIT backend").is_empty());
        assert_eq!(hits("the Optimized  Pipeline"), ["optimized pipeline"]);
        assert!(hits("the optimized pipelines_x").is_empty(), "a longer word is not the phrase");
        assert!(hits("the reporter WIT world").is_empty());
    }

    /// Files that name retired senses on purpose: the glossary (which lists
    /// them), the refusals of retired names, the reader of 1.x results and
    /// this file.
    const NAMING_THEM: &[&str] = &[
        "docs/src/concepts/glossary.md",
        "core/src/cli/retired.rs",
        "core/src/config/retired.rs",
        "schema/src/v1.rs",
        "core/src/words.rs",
    ];

    /// The glossary's "Retired words" lists every phrase this file refuses.
    #[test]
    fn the_glossary_lists_every_retired_phrase() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace");
        let glossary =
            std::fs::read_to_string(root.join("docs/src/concepts/glossary.md")).expect("the glossary");
        let section = glossary.split("## Retired words").nth(1).expect("a Retired words section");
        let section = normalised(section);
        for (word, _, _, phrases) in RETIRED {
            for phrase in *phrases {
                assert!(
                    section.contains(&format!("\"{phrase}\"")),
                    "the glossary lacks \"{phrase}\" ({word})"
                );
            }
        }
    }

    fn scanned(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | "book" | "node_modules" | "fixtures") {
                    scanned(&path, out);
                }
            } else if ["rs", "md", "json", "py", "toml", "wit", "sh"]
                .iter()
                .any(|e| path.extension().is_some_and(|x| x == *e))
            {
                out.push(path);
            }
        }
    }

    #[test]
    fn no_retired_sense_in_code_results_or_docs() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf();
        let mut files = vec![root.join("README.md")];
        for dir in [
            "core/src",
            "core/tests",
            "schema/src",
            "schema/json",
            "plugins",
            "benches",
            "docs/src",
            "deploy",
            "configs",
        ] {
            scanned(&root.join(dir), &mut files);
        }
        assert!(files.len() > 300, "the scan found only {} files under {}", files.len(), root.display());
        let mut hits = Vec::new();
        for file in files {
            let at = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
            if NAMING_THEM.contains(&at.as_str()) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            for (word, phrase) in retired_in(&normalised(&text)) {
                hits.push(format!("{at}: \"{phrase}\" (retired sense of \"{word}\")"));
            }
        }
        assert!(
            hits.is_empty(),
            "retired words (docs/src/concepts/glossary.md, Retired words):\n{}",
            hits.join("\n")
        );
    }
}

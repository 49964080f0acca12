//! The first hour, executed: every shell command of the front page and the
//! getting-started pages, in the order a newcomer meets them, run in a
//! scratch folder with this build's `benchkit` on `PATH`, or listed with
//! the phase of CI that runs it instead (the builds and test runs, which a
//! test cannot run inside itself). A page's output block (a `text` block
//! whose first line is `$ COMMAND`) is compared with what the command
//! printed, figures aside. A command no entry of [`LEDGER`] knows fails the
//! test: a page cannot show a command that nothing runs.
//!
//! It takes minutes and the machine, so it is ignored in the parallel run
//! and CI runs it alone (`.ci/run`'s "docs commands" phase).

use crate::common::{benchkit, repo};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The pages, in the book's order; the front page first.
const PAGES: [&str; 5] = [
    "README.md",
    "docs/src/getting-started/install.md",
    "docs/src/getting-started/first-benchmark.md",
    "docs/src/getting-started/reading-the-table.md",
    "docs/src/getting-started/own-data.md",
];

/// What the test does with a command.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    /// Run as written (`cargo run --` is this build's binary: run as `benchkit`).
    Run,
    /// Run once with what a test affords: the edit to the config it runs,
    /// and why.
    Scaled(&'static str, &'static [(&'static str, &'static str)], &'static str),
    /// A phase of `.ci/run` runs it (named as `.ci/run` names it), not this
    /// test: the builds (unoptimised, and `tch` with `wgpu` in one) and the
    /// test runs, which a test cannot run inside itself.
    Phase(&'static str),
}

/// Every command the pages show, by how it starts (the first entry that
/// matches wins), and what this test does with it.
const LEDGER: &[(&str, Way)] = &[
    (
        "cargo run -- run configs/batch-sweep.toml",
        Way::Scaled(
            "configs/batch-sweep.toml",
            &[
                ("repeats = 3", "repeats = 1"),
                ("max_steps_per_epoch = 25", "max_steps_per_epoch = 8"),
                ("path = \"data/fashion-mnist\"", "path = \"configs/data/fashion-mnist\""),
            ],
            "one repeat of 8 steps an epoch, not three of 25 (the page's 7 minutes)",
        ),
    ),
    (
        "benchkit run mine.toml",
        Way::Scaled(
            "mine.toml",
            &[
                ("batch_size = 32 ", "batch_size = 4 "),
                ("\"train.batch_size\" = 16 }", "\"train.batch_size\" = 2 }"),
                ("warmup_steps = 2 ", "warmup_steps = 1 "),
                ("max_steps_per_epoch = 6 ", "max_steps_per_epoch = 3 "),
            ],
            "batches of 4 and 2 and 3 steps a cell, not 32 and 16 and 6 (the page's 11 minutes)",
        ),
    ),
    ("cargo run -- ", Way::Run),
    ("BENCHKIT_REQUIRE_PINNING=1 cargo test", Way::Phase("alone")),
    (
        "cargo test -p benchkit --features tch,wgpu --test it -- --test-threads=1 wgpu::",
        Way::Phase("wgpu tests"),
    ),
    ("cargo test -p benchkit --features tch,wgpu", Way::Phase("tch tests")),
    ("cargo test --workspace", Way::Phase("workspace tests")),
    ("cargo build --release --features", Way::Phase("tch build")),
    ("cargo build --release", Way::Phase("workspace build")),
    ("scripts/setup-tch.sh", Way::Phase("tch build")),
    ("scripts/torch-venv.sh", Way::Phase("tch build")),
    ("eval \"$(scripts/tch-env.sh", Way::Phase("tch build")),
    ("benchkit ", Way::Run),
    ("export PATH=", Way::Run),
    ("cp ", Way::Run),
    ("sed ", Way::Run),
    ("cd ", Way::Run),
    ("python3 -m venv ", Way::Run),
    ("pip install ", Way::Run),
];

/// A page's blocks: each `sh` block's commands, and each output block.
#[derive(Debug, PartialEq)]
enum Block {
    Commands(Vec<String>),
    Output { command: String, lines: Vec<String> },
}

/// The shell and output blocks of `page`, in order. A command's trailing
/// comment (after two spaces) is dropped, `\` continues a line.
fn blocks(page: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else { continue };
        let body: Vec<&str> = lines.by_ref().take_while(|l| !l.trim_start().starts_with("```")).collect();
        match info.trim() {
            "sh" => {
                let mut joined: Vec<String> = Vec::new();
                let mut open = false;
                for line in body {
                    match joined.last_mut().filter(|_| open) {
                        Some(last) => last.push_str(line.trim_start()),
                        None => joined.push(line.to_string()),
                    }
                    let last = joined.last_mut().expect("a line");
                    open = last.ends_with('\\');
                    if open {
                        last.pop();
                    }
                }
                let commands = joined
                    .iter()
                    .map(|l| l.split("  #").next().unwrap_or_default().trim().to_string())
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .collect();
                out.push(Block::Commands(commands));
            }
            "text" => {
                if let Some(command) = body.first().and_then(|l| l.strip_prefix("$ ")) {
                    let lines = body[1..].iter().map(|l| l.to_string()).collect();
                    out.push(Block::Output { command: command.to_string(), lines });
                }
            }
            _ => {}
        }
    }
    out
}

/// How [`LEDGER`] treats `command`.
fn way(command: &str) -> Option<Way> {
    LEDGER.iter().find(|(start, _)| command.starts_with(start)).map(|(_, w)| *w)
}

/// A line with its figures aside: every run of digits (with the `.`, `,`
/// and `:` between them) becomes `#`, runs of spaces one space and runs of
/// `─` one `─`, so a wider figure or another date reads the same.
fn shape(line: &str) -> String {
    let chars: Vec<char> = line.trim_end().chars().collect();
    let mut out = String::new();
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        at += 1;
        if c.is_ascii_digit() {
            // A separator belongs to the figure only with a digit after it.
            while at < chars.len()
                && (chars[at].is_ascii_digit()
                    || (matches!(chars[at], '.' | ',' | ':')
                        && chars.get(at + 1).is_some_and(char::is_ascii_digit)))
            {
                at += 1;
            }
            out.push('#');
        } else if c == ' ' || c == '─' {
            while chars.get(at) == Some(&c) {
                at += 1;
            }
            out.push(c);
        } else {
            out.push(c);
        }
    }
    out
}

/// The folder benchkit is in: the pages' `benchkit` is this build's.
fn bin_dir() -> PathBuf {
    let bin = assert_cmd::cargo::cargo_bin("benchkit");
    bin.parent().expect("the binary's folder").to_path_buf()
}

/// Run `script` with bash in `dir`; its exit status and what it printed
/// (stdout and stderr, in order).
fn bash(dir: &Path, script: &str) -> (bool, String) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin_dir()];
    paths.extend(std::env::split_paths(&path));
    let output = Command::new("bash")
        .arg("-c")
        .arg(format!("set -e\nexec 2>&1\n{script}"))
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).expect("PATH"))
        .env("BENCHKIT_CACHE_DIR", crate::common::cache())
        .output()
        .expect("bash runs");
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A user's image folder as the pages lay it out, from Fashion-MNIST:
/// `my-images/train/<class>/` and `my-images/val/<class>/`, 40 of each.
fn my_images(dir: &Path) {
    let images = dir.join("my-images");
    benchkit()
        .args(["data", "export"])
        .arg(repo().join("configs/data/fashion-mnist"))
        .arg(&images)
        .args(["--image-format", "jpeg", "--limit", "40"])
        .assert()
        .success();
    std::fs::rename(images.join("test"), images.join("val")).expect("test/ to val/");
}

#[test]
fn every_command_of_the_pages_is_run_or_named_for_the_phase_that_runs_it() {
    let mut unknown = Vec::new();
    for page in PAGES {
        let text = std::fs::read_to_string(repo().join(page)).expect("a page");
        for block in blocks(&text) {
            if let Block::Commands(commands) = block {
                unknown.extend(
                    commands.into_iter().filter(|c| way(c).is_none()).map(|c| format!("{page}: {c}")),
                );
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "commands no ledger entry knows (add one to docs.rs):\n{}",
        unknown.join("\n")
    );
}

#[test]
fn every_phase_the_ledger_names_is_one_ci_runs() {
    let ci = std::fs::read_to_string(repo().join(".ci/run")).expect(".ci/run");
    for (start, way) in LEDGER {
        if let Way::Phase(phase) = way {
            assert!(
                ci.lines().any(|l| l.trim() == format!("phase {phase}")),
                "`{start}`: .ci/run has no phase {phase}"
            );
        }
    }
}

#[test]
fn a_shape_sets_figures_and_widths_aside() {
    assert_eq!(
        shape("quickstart #1/1: 508.3 img/s, test acc 82.20 %, 43 s"),
        "quickstart ##/#: # img/s, test acc # %, # s"
    );
    assert_eq!(shape("a    1,043 ──────  b  "), "a # ─ b");
    assert_eq!(shape("results in results/quickstart-20261128-115328"), "results in results/quickstart-#-#");
    let page = "```sh\ncp a b    # copy\n# a comment\nbenchkit run \\\n  x.toml\n```\n```text\n$ benchkit run x.toml\nok 1\n```\n";
    assert_eq!(
        blocks(page),
        [
            Block::Commands(vec!["cp a b".into(), "benchkit run x.toml".into()]),
            Block::Output { command: "benchkit run x.toml".into(), lines: vec!["ok 1".into()] },
        ]
    );
}

#[test]
#[ignore = "runs every command of the getting-started pages, minutes of the machine: CI runs it alone"]
fn the_first_hour_runs_as_the_pages_show() {
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let dir = scratch.path();
    for shared in ["configs", "scripts"] {
        std::os::unix::fs::symlink(repo().join(shared), dir.join(shared)).expect("link into the repository");
    }
    my_images(dir);
    let mut printed: Vec<(String, String)> = Vec::new();
    let mut listed = Vec::new();
    for page in PAGES {
        let text = std::fs::read_to_string(repo().join(page)).expect("a page");
        for block in blocks(&text) {
            match block {
                Block::Commands(commands) => run_block(page, dir, &commands, &mut printed, &mut listed),
                Block::Output { command, lines } => compare(page, &command, &lines, &printed),
            }
        }
    }
    eprintln!("commands not run here:\n{}", listed.join("\n"));
    own_images_scored(dir);
}

/// Run one block's commands in order, in one shell up to each scaled
/// command (a `cd` or a `.` holds till then), keeping what each printed;
/// list those a phase of CI runs instead, and a run of a config already run.
fn run_block(
    page: &str,
    dir: &Path,
    commands: &[String],
    printed: &mut Vec<(String, String)>,
    listed: &mut Vec<String>,
) {
    // The plugin toolchain block runs whole or not at all (said to be skipped).
    if commands.iter().any(|c| c.starts_with("python3 -m venv")) && !guest_tools() {
        return;
    }
    let mut part: Vec<(String, String)> = Vec::new();
    for command in commands {
        let done = printed.iter().any(|(c, _)| c == command);
        let shell = match way(command) {
            Some(Way::Run | Way::Scaled(..)) if done && command.contains(" run ") => {
                listed.push(format!("  {page}: `{command}`: ran once already"));
                continue;
            }
            Some(Way::Run) => command.replacen("cargo run -- ", "benchkit ", 1),
            Some(Way::Scaled(file, edits, why)) => {
                run_part(page, dir, &mut part, printed);
                listed.push(format!("  {page}: `{command}`: run scaled down, {why}"));
                let scaled = scaled(dir, file, edits);
                command.replacen("cargo run -- ", "benchkit ", 1).replace(file, &scaled)
            }
            Some(Way::Phase(phase)) => {
                listed.push(format!("  {page}: `{command}`: CI's phase \"{phase}\""));
                continue;
            }
            None => panic!("{page}: `{command}` is in no ledger entry"),
        };
        part.push((command.clone(), shell));
    }
    run_part(page, dir, &mut part, printed);
}

/// Run `part` (each command and its shell form) in one bash in `dir`, and
/// keep what each command printed; a command that fails fails the test.
fn run_part(page: &str, dir: &Path, part: &mut Vec<(String, String)>, printed: &mut Vec<(String, String)>) {
    if part.is_empty() {
        return;
    }
    let out = |at: usize| dir.join(format!(".out-{at}"));
    let script: String = part
        .iter()
        .enumerate()
        .map(|(at, (_, shell))| format!("{{ {shell} ; }} > {:?} 2>&1\n", out(at)))
        .collect();
    let (ok, _) = bash(dir, &script);
    let outputs: Vec<String> =
        (0..part.len()).map(|at| std::fs::read_to_string(out(at)).unwrap_or_default()).collect();
    // Each command's output file is made as it starts: the last one made stopped the part.
    let last = (0..part.len()).rev().find(|&at| out(at).exists()).unwrap_or(0);
    assert!(ok, "{page}: `{}` failed:\n{}", part[last].0, outputs[last]);
    for at in 0..part.len() {
        let _ = std::fs::remove_file(out(at));
    }
    for ((command, _), output) in part.drain(..).zip(outputs) {
        printed.retain(|(c, _)| *c != command);
        printed.push((command, output));
    }
}

/// A page's output block against what its command printed last, figures aside.
fn compare(page: &str, command: &str, lines: &[String], printed: &[(String, String)]) {
    let Some((_, output)) = printed.iter().rev().find(|(c, _)| c == command) else {
        panic!("{page}: an output block of `{command}`, which no block before it runs");
    };
    let shown: Vec<String> = lines.iter().map(|l| shape(l)).collect();
    let got: Vec<String> = output.lines().map(shape).collect();
    assert_eq!(
        got, shown,
        "{page}: `{command}` printed, figures aside, what the page does not show:\n{output}"
    );
}

/// `file` (in the scratch folder, or a shipped config through its link)
/// copied to `scaled-<name>` in the scratch folder with `edits` made, each
/// of which must apply; the copy's name.
fn scaled(dir: &Path, file: &str, edits: &[(&str, &str)]) -> String {
    let mut text = std::fs::read_to_string(dir.join(file)).expect("the config the command runs");
    for (from, to) in edits {
        assert!(text.contains(from), "{file} no longer holds `{from}`: the docs test's scaling needs it");
        text = text.replace(from, to);
    }
    let name = format!("scaled-{}", file.rsplit('/').next().unwrap_or(file));
    std::fs::write(dir.join(&name), text).expect("the scaled config");
    name
}

/// Whether the plugin toolchain the front page installs can be had here:
/// CI has it (`BENCHKIT_REQUIRE_GUEST_TOOLS`); elsewhere the block is
/// skipped, and said to be.
fn guest_tools() -> bool {
    let venv = Command::new("python3").args(["-m", "venv", "--help"]).output();
    if venv.is_ok_and(|o| o.status.success()) && std::env::var_os("BENCHKIT_GUEST_TOOLS").is_some() {
        return true;
    }
    assert!(
        std::env::var_os("BENCHKIT_REQUIRE_GUEST_TOOLS").is_none(),
        "BENCHKIT_REQUIRE_GUEST_TOOLS is set, but python3 -m venv or BENCHKIT_GUEST_TOOLS is missing"
    );
    benchkit::skip::record(
        "the front page's Python plugin block needs python3-venv, PyPI and BENCHKIT_GUEST_TOOLS",
    );
    false
}

/// The own-images recipe's results, run by the pages' commands: both
/// scaling figures for its two-process cell, ResNet-50 at 224 px RGB.
fn own_images_scored(dir: &Path) {
    let results = std::fs::read_dir(dir.join("results")).expect("the runs' results");
    let run = results
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("own-images-")))
        .expect("the own-images run's results");
    let records = crate::common::records(&run);
    let first = records.first().and_then(|r| r.repeats.first()).expect("a finished repeat");
    assert!(
        first.params > 23_000_000 && first.loader.decoded_shape == [3, 224, 224],
        "ResNet-50 at 224 px RGB"
    );
    let processes: Vec<usize> =
        records.iter().map(|r| r.repeats.first().map_or(0, |x| x.parallel.processes)).collect();
    assert_eq!(processes, [1, 1, 2], "the two baselines, then the two-process cell");
    let two = &crate::common::run_summary(&run).summaries[2];
    assert_eq!(
        two.weak_scaling.as_ref().map(|w| w.baseline_batch),
        Some(2),
        "weak: one process at the per-process batch"
    );
    assert_eq!(
        two.strong_scaling.as_ref().map(|s| s.baseline_batch),
        Some(4),
        "strong: one process at the whole batch"
    );
    assert!(run.join("report.html").is_file(), "the HTML report is written");
}

//! Plugins made as a third party makes them: `benchkit plugin new` in a
//! directory outside the repository, built with the command the project's
//! README gives, checked with `benchkit plugin check`, then trained or
//! reported with through `benchkit run`. Rust always; Python and
//! JavaScript with the registries' toolchains (`scripts/guest-tools.sh`).

use crate::common;

use common::benchkit;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The parameters of the scaffolded CNN at width 32, 3 channels in and 1000
/// classes out: conv1 3·32·9 = 864, bn1 2·32, conv2 32·64·9 = 18,432, bn2
/// 2·64, fc 64·1000 + 1000 = 65,000.
const SCAFFOLD_PARAMS: u64 = 864 + 64 + 18_432 + 128 + 65_000;

fn new_plugin(root: &Path, kind: &str, name: &str, lang: &str) -> PathBuf {
    let dir = root.join(name);
    benchkit().args(["plugin", "new", kind, name]).arg(&dir).args(["--lang", lang]).assert().success();
    dir
}

/// Build a Rust scaffold with `cargo build --release` (its README's
/// command), into a target directory the tests share; the component is
/// copied to where the project's config expects it.
fn build_rust(dir: &Path, name: &str) -> PathBuf {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scaffold-target");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        // A compiler wrapper (clippy as CI's) is for the crate under test, not for the guests.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .status()
        .expect("run cargo");
    assert!(status.success(), "cargo build --release in {} failed", dir.display());
    let file = format!("{}.wasm", name.replace('-', "_"));
    let built = target.join("wasm32-wasip2/release").join(&file);
    let expected = dir.join("target/wasm32-wasip2/release").join(&file);
    std::fs::create_dir_all(expected.parent().unwrap()).unwrap();
    std::fs::copy(&built, &expected).unwrap();
    expected
}

/// `benchkit plugin check FILE ARGS --json`, which must pass.
fn check(file: &Path, args: &[&str]) -> serde_json::Value {
    check_built_for(file, args, benchkit::plugin::CONTRACT_VERSION)
}

/// [`check`], for a plugin built for contract `contract`.
fn check_built_for(file: &Path, args: &[&str], contract: &str) -> serde_json::Value {
    let out = benchkit().args(["plugin", "check"]).arg(file).args(args).arg("--json").output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert!(out.status.success() && report["passed"] == true, "{report:#}");
    assert_eq!(report["contract"], contract);
    report
}

/// `benchkit run` on the config beside the plugin, in its directory.
fn run(dir: &Path, config: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join("results");
    benchkit().current_dir(dir).args(["run", config, "-o"]).arg(&out).args(extra).assert().success();
    out
}

fn cell_status(results: &Path) -> String {
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("summary.json")).unwrap()).unwrap();
    summary["summaries"][0]["status"].as_str().unwrap_or("?").to_string()
}

#[test]
fn rust_plugins_of_every_kind_build_check_and_run() {
    let root = tempfile::tempdir().unwrap();
    let model = build_rust(&new_plugin(root.path(), "model", "tiny-cnn", "rust"), "tiny-cnn");
    let report = check(&model, &[]);
    assert_eq!(report["model"]["parameters"], SCAFFOLD_PARAMS);
    assert_eq!(report["model"]["input"], serde_json::json!([3, 224, 224]));
    let narrow = check(&model, &["--config", "width = 8", "--input", "1x28x28", "--classes", "10"]);
    assert_eq!(narrow["model"]["parameters"], 72 + 16 + 1152 + 32 + 170, "{narrow:#}");
    let results = run(&root.path().join("tiny-cnn"), "benchkit.toml", &[]);
    assert_eq!(cell_status(&results), "ok");
    // The model as it names itself, not as its file (tiny_cnn.wasm) is named.
    let record = &common::records(&results)[0];
    assert_eq!(record.repeats[0].model, "tiny-cnn");
    assert_eq!(record.summary.as_ref().and_then(|s| s.model.as_deref()), Some("tiny-cnn"));

    let transform = build_rust(&new_plugin(root.path(), "transform", "flip-norm", "rust"), "flip-norm");
    // ImageNet's size: batch 256 of 224×224 RGB.
    let report = check(&transform, &[]);
    assert_eq!(report["transform"]["returns"], "u8");
    assert_eq!(report["transform"]["batch"], 256);
    assert!(report["transform"]["images_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(cell_status(&run(&root.path().join("flip-norm"), "benchkit.toml", &[])), "ok");

    let reporter = build_rust(&new_plugin(root.path(), "reporter", "cell-table", "rust"), "cell-table");
    let report = check(&reporter, &[]);
    assert_eq!(report["reporter"]["artifacts"][0]["name"], "cell-table.md");
    let results = run(&root.path().join("cell-table"), "benchkit.toml", &[]);
    let table = std::fs::read_to_string(results.join("cell-table.md")).unwrap();
    assert!(table.starts_with("# cell-table\n") && table.contains("| cell-table | ok | "), "{table}");

    // A failing check exits non-zero and says why.
    let out =
        benchkit().args(["plugin", "check"]).arg(&model).args(["--config", "depth = 3"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() && text.contains("FAILED") && text.contains("unknown config key `depth`"),
        "{text}"
    );
}

/// The registries' toolchains for Python and JavaScript guests, from
/// `BENCHKIT_GUEST_TOOLS` (made by `scripts/guest-tools.sh`); CI makes them
/// mandatory with `BENCHKIT_REQUIRE_GUEST_TOOLS=1`.
fn guest_tools() -> Option<PathBuf> {
    let dir = std::env::var_os("BENCHKIT_GUEST_TOOLS").map(PathBuf::from);
    match dir {
        Some(dir) if dir.join("venv/bin/componentize-py").exists() => Some(std::path::absolute(dir).unwrap()),
        _ if std::env::var_os("BENCHKIT_REQUIRE_GUEST_TOOLS").is_some() => {
            panic!("BENCHKIT_REQUIRE_GUEST_TOOLS is set but BENCHKIT_GUEST_TOOLS holds no toolchains")
        }
        _ => {
            benchkit::skip::record(
                "set BENCHKIT_GUEST_TOOLS (scripts/guest-tools.sh) to build Python and JS plugins",
            );
            None
        }
    }
}

/// Build a Python or JavaScript scaffold with its README's command (npm's
/// packages come from the tools directory instead of a fresh install).
fn build_guest(tools: &Path, dir: &Path, name: &str, lang: &str) -> PathBuf {
    let path = format!(
        "{}:{}:{}",
        tools.join("venv/bin").display(),
        tools.join("node/node_modules/.bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = match lang {
        "python" => {
            let mut c = Command::new("sh");
            c.arg("build.sh");
            c
        }
        _ => {
            std::os::unix::fs::symlink(tools.join("node/node_modules"), dir.join("node_modules")).unwrap();
            let mut c = Command::new("npm");
            c.args(["run", "build"]);
            c
        }
    };
    let out = cmd.current_dir(dir).env("PATH", path).output().expect("run the build");
    assert!(out.status.success(), "{lang} build: {}", String::from_utf8_lossy(&out.stderr));
    dir.join(format!("{name}.wasm"))
}

/// A transform check small enough for JavaScript's interpreter.
const SMALL_BATCH: &[&str] = &["--input", "3x64x64", "--batch", "32", "--repeats", "1"];

#[test]
fn python_and_javascript_plugins_build_check_and_run_like_rust_ones() {
    let Some(tools) = guest_tools() else { return };
    let root = tempfile::tempdir().unwrap();
    let mut reporters = Vec::new();
    let mut means = Vec::new();
    for lang in ["python", "js"] {
        let model_name = format!("{lang}-cnn");
        let model =
            build_guest(&tools, &new_plugin(root.path(), "model", &model_name, lang), &model_name, lang);
        assert_eq!(
            check(&model, &[])["model"]["parameters"],
            SCAFFOLD_PARAMS,
            "{lang}: the Rust scaffold's graph"
        );

        let name = format!("{lang}-norm");
        let dir = new_plugin(root.path(), "transform", &name, lang);
        let transform = build_guest(&tools, &dir, &name, lang);
        let report = check(&transform, SMALL_BATCH);
        assert_eq!(report["transform"]["returns"], "u8", "{lang}");
        means.push(report["transform"]["mean"].as_f64().unwrap());
        // The transform's config trains with the model of the same language.
        let config = std::fs::read_to_string(dir.join("benchkit.toml")).unwrap();
        let config = config.replace("\"builtin:lenet\"", &format!("{:?}", model.display().to_string()));
        let config = config.replace("{ activation = \"relu\", pool = \"max\" }", "{ width = 8 }");
        std::fs::write(dir.join("both.toml"), config).unwrap();
        assert_eq!(cell_status(&run(&dir, "both.toml", &[])), "ok", "{lang}");

        let name = format!("{lang}-table");
        let dir = new_plugin(root.path(), "reporter", &name, lang);
        let reporter = build_guest(&tools, &dir, &name, lang);
        let report = check(&reporter, &[]);
        assert_eq!(report["reporter"]["artifacts"][0]["name"], format!("{name}.md"));
        reporters.push((name, reporter));

        // The same reporter built for contract 1.4.0 (results schema 1.x's
        // names): it still loads, and renders the same table below.
        let name = format!("{lang}-old");
        let dir = new_plugin(root.path(), "reporter", &name, lang);
        let wit = dir.join("wit/benchkit.wit");
        let text = std::fs::read_to_string(&wit).unwrap();
        let ours = format!("@{}", benchkit::plugin::CONTRACT_VERSION);
        assert!(text.contains(&ours), "the scaffold carries this contract");
        std::fs::write(&wit, text.replace(&ours, "@1.4.0")).unwrap();
        let reporter = build_guest(&tools, &dir, &name, lang);
        check_built_for(&reporter, &[], "1.4.0");
        reporters.push((name, reporter));
    }

    // The same batch through the Rust, Python and JavaScript transforms
    // gives the same tensor (the mean of its values, to f32 rounding).
    let rust = build_rust(&new_plugin(root.path(), "transform", "rust-norm", "rust"), "rust-norm");
    let mean = check(&rust, SMALL_BATCH)["transform"]["mean"].as_f64().unwrap();
    for (lang, m) in ["python", "js"].iter().zip(&means) {
        assert!((m - mean).abs() <= 1e-6 * mean.abs().max(1.0), "{lang}: mean {m}, Rust's {mean}");
    }

    // The same events through the Rust, Python and JavaScript reporters,
    // of this contract and of 1.4.0, give the same file, byte for byte.
    let rust = build_rust(&new_plugin(root.path(), "reporter", "rust-table", "rust"), "rust-table");
    reporters.push(("rust-table".into(), rust));
    let dir = root.path().join("all");
    std::fs::create_dir(&dir).unwrap();
    let mut config = std::fs::read_to_string(root.path().join("rust-table/benchkit.toml")).unwrap();
    config = config.replace("name = \"rust-table\"", "name = \"three languages\"");
    config.push_str("\n[matrix]\n\"train.batch_size\" = [32, 64]\n");
    let (rust, guests) = reporters.split_last().unwrap();
    for (_, file) in guests {
        config.push_str(&format!("\n[[reporters]]\nplugin = {:?}\n", file.display().to_string()));
    }
    config = config.replace(
        "plugin = \"target/wasm32-wasip2/release/rust_table.wasm\"",
        &format!("plugin = {:?}", rust.1.display().to_string()),
    );
    std::fs::write(dir.join("all.toml"), config).unwrap();
    let results = run(&dir, "all.toml", &["--mock"]);
    let tables: Vec<String> = reporters
        .iter()
        .map(|(name, _)| std::fs::read_to_string(results.join(format!("{name}.md"))).unwrap())
        .collect();
    assert!(tables[0].contains("| batch_size=64 | ok | "), "{}", tables[0]);
    assert!(tables.iter().all(|t| t == &tables[0]), "{tables:#?}");
}

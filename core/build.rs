//! Builds the plugins in `../plugins` for wasm32-wasip2 and embeds them, so
//! the `benchkit` binary runs with no files beside it. Each crate named
//! `<kind>-<name>` becomes `builtin:<name>`.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.parent().expect("core/ sits in the workspace").to_path_buf();
    let plugins = root.join("plugins");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));

    for path in ["Cargo.toml", "Cargo.lock", ".cargo", "pdk", "zoo"] {
        println!("cargo:rerun-if-changed={}", plugins.join(path).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!("cargo:rerun-if-changed={}", root.join("schema").display());
    println!("cargo:rerun-if-changed={}", root.join("Cargo.toml").display());
    let crates = plugin_crates(&plugins);
    for (dir, _) in &crates {
        println!("cargo:rerun-if-changed={}", dir.display());
    }

    provenance(&root);
    sdk_sources(&root, &out);
    if std::env::var_os("CARGO_FEATURE_TCH").is_some() {
        libtorch_rpath();
    }
    ensure_target();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("plugins");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&plugins)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(&target_dir);
    // The outer build's settings are for the host, not for the guests.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        let inherited = key.starts_with("CARGO_")
            && !matches!(key.as_str(), "CARGO_HOME" | "CARGO_MAKEFLAGS" | "CARGO_NET_OFFLINE");
        if inherited || matches!(key.as_str(), "RUSTFLAGS" | "RUSTC_WORKSPACE_WRAPPER" | "RUSTC_WRAPPER") {
            cmd.env_remove(&key);
        }
    }
    let status = cmd.status().expect("run cargo to build the plugins");
    assert!(status.success(), "building the plugins in {} failed", plugins.display());

    let mut table = String::from(
        "/// Built-in plugins: (name, component bytes).\npub static BUILTINS: &[(&str, &[u8])] = &[\n",
    );
    for (_, (crate_name, name)) in &crates {
        let wasm =
            target_dir.join(TARGET).join("release").join(format!("{}.wasm", crate_name.replace('-', "_")));
        let copy = out.join(format!("{name}.wasm"));
        std::fs::copy(&wasm, &copy).unwrap_or_else(|e| panic!("copy {}: {e}", wasm.display()));
        table.push_str(&format!("    ({name:?}, include_bytes!({:?})),\n", copy.display().to_string()));
    }
    table.push_str("];\n");
    std::fs::write(out.join("builtins.rs"), table).expect("write builtins.rs");
}

/// `(dir, (crate name, builtin name))` for every `<kind>-<name>` plugin crate.
fn plugin_crates(plugins: &Path) -> Vec<(PathBuf, (String, String))> {
    let mut crates = Vec::new();
    for entry in std::fs::read_dir(plugins).expect("read plugins/").flatten() {
        let dir = entry.path();
        let Some(crate_name) = dir.file_name().and_then(|n| n.to_str()).map(str::to_string) else { continue };
        let Some((kind, name)) = crate_name.split_once('-') else { continue };
        if matches!(kind, "model" | "transform" | "reporter") && dir.join("Cargo.toml").exists() {
            crates.push((dir, (crate_name.clone(), name.to_string())));
        }
    }
    crates.sort();
    crates
}

/// The SDK's and the schema's sources, embedded so that `benchkit plugin
/// new` can write them beside a new plugin: `(path in the crate, text)`
/// for each, plus the root manifest whose `[workspace.package]` they inherit.
fn sdk_sources(root: &Path, out: &Path) {
    let mut table = String::from("/// (crate, path inside it, contents) of every SDK source file.\n");
    table.push_str("pub static SDK_FILES: &[(&str, &str, &str)] = &[\n");
    for (krate, dir) in [("benchkit-schema", root.join("schema")), ("benchkit-pdk", root.join("plugins/pdk"))]
    {
        let mut files = vec![dir.join("Cargo.toml"), dir.join("README.md")];
        for sub in ["src", "wit"] {
            collect_files(&dir.join(sub), &mut files);
        }
        files.sort();
        for file in files.iter().filter(|f| f.exists()) {
            let inside = file.strip_prefix(&dir).expect("under the crate").display().to_string();
            table.push_str(&format!(
                "    ({krate:?}, {inside:?}, include_str!({:?})),\n",
                file.display().to_string()
            ));
        }
    }
    table.push_str("];\n");
    let manifest = root.join("Cargo.toml").display().to_string();
    table.push_str(&format!(
        "/// The root manifest.\npub static ROOT_MANIFEST: &str = include_str!({manifest:?});\n"
    ));
    std::fs::write(out.join("sdk_files.rs"), table).expect("write sdk_files.rs");
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, files);
        } else {
            files.push(path);
        }
    }
}

/// Install the wasm target when rustup manages the toolchain and lacks it.
fn ensure_target() {
    let Ok(output) = Command::new("rustup").args(["target", "list", "--installed"]).output() else {
        return;
    };
    if String::from_utf8_lossy(&output.stdout).lines().any(|l| l.trim() == TARGET) {
        return;
    }
    let status = Command::new("rustup").args(["target", "add", TARGET]).status();
    assert!(
        matches!(status, Ok(s) if s.success()),
        "the {TARGET} target is missing and `rustup target add {TARGET}` failed"
    );
}

/// Git commit and the exact burn / wasmtime versions from Cargo.lock, for results.
fn provenance(root: &Path) {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BENCHKIT_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-changed={}", root.join(".git/HEAD").display());
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
    for (krate, var) in [("burn", "BENCHKIT_BURN_VERSION"), ("wasmtime", "BENCHKIT_WASMTIME_VERSION")] {
        let needle = format!("name = \"{krate}\"\nversion = \"");
        let version =
            lock.find(&needle).and_then(|i| lock[i + needle.len()..].split('"').next()).unwrap_or("unknown");
        println!("cargo:rustc-env={var}={version}");
    }
}

/// With `--features tch`, record where LibTorch's shared libraries are in
/// the binary's run path, so it starts without `LD_LIBRARY_PATH`: the
/// directory torch-sys links against (`$LIBTORCH/lib`, or the `lib` of the
/// Python `torch` package with `LIBTORCH_USE_PYTORCH`).
fn libtorch_rpath() {
    for var in ["LIBTORCH", "LIBTORCH_LIB", "LIBTORCH_USE_PYTORCH", "VIRTUAL_ENV"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let dir = if let Some(lib) = std::env::var_os("LIBTORCH_LIB") {
        Some(PathBuf::from(lib).join("lib"))
    } else if let Some(root) = std::env::var_os("LIBTORCH") {
        Some(PathBuf::from(root).join("lib"))
    } else if std::env::var_os("LIBTORCH_USE_PYTORCH").is_some() {
        // The interpreter torch-sys asks: `python` in a virtual environment, else `python3`.
        let python = if std::env::var_os("VIRTUAL_ENV").is_some() { "python" } else { "python3" };
        let script = "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))";
        Command::new(python)
            .args(["-c", script])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    } else {
        None
    };
    match dir {
        Some(dir) if dir.is_dir() => println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display()),
        _ => println!(
            "cargo:warning=LibTorch's lib directory was not found (set LIBTORCH, or LIBTORCH_USE_PYTORCH=1 \
             with torch installed): benchkit will need LD_LIBRARY_PATH to start"
        ),
    }
}

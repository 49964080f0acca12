//! PyTorch as a backend (`pytorch`, `pytorch-cuda`, and both with the
//! model `torch.compile`d: `pytorch-compiled`, `pytorch-cuda-compiled`):
//! which Python trains its rows, and whether that Python can. The row
//! itself (the script run and its records read back) is `train`'s.
//!
//! The Python is `$BENCHKIT_PYTHON`, else `python3`; it needs torch (and
//! CUDA for `pytorch-cuda`), which [`check`] asks once per process.

use super::BackendKind;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The variable that names the Python PyTorch cells run with.
pub const PYTHON_VAR: &str = "BENCHKIT_PYTHON";

/// How to get a Python with torch, for error messages.
pub const HOW: &str =
    "make one with `scripts/torch-venv.sh .venv-torch` and set BENCHKIT_PYTHON=.venv-torch/bin/python";

/// The Python PyTorch cells run with.
pub fn python() -> PathBuf {
    std::env::var_os(PYTHON_VAR)
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

/// What a Python said of its torch.
#[derive(Clone, Debug)]
struct Probe {
    version: String,
    cuda: bool,
}

/// Ask `python` for its torch, once per process and Python.
fn probe(python: &Path) -> Result<Probe, String> {
    static SEEN: OnceLock<Mutex<HashMap<PathBuf, Result<Probe, String>>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(known) = seen.lock().ok().and_then(|s| s.get(python).cloned()) {
        return known;
    }
    let asked = ask(python);
    if let Ok(mut s) = seen.lock() {
        s.insert(python.to_path_buf(), asked.clone());
    }
    asked
}

fn ask(python: &Path) -> Result<Probe, String> {
    let shown = python.display();
    let output = Command::new(python)
        .args(["-c", "import torch; print(torch.__version__, torch.cuda.is_available())"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {shown} ({PYTHON_VAR}): {e}; {HOW}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut words = text.split_whitespace();
    match (output.status.success(), words.next(), words.next()) {
        (true, Some(version), Some(cuda)) => Ok(Probe { version: version.to_string(), cuda: cuda == "True" }),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim();
            Err(format!("{shown} ({PYTHON_VAR}) cannot import torch ({last}); {HOW}"))
        }
    }
}

/// Whether this machine's Python can train a `kind` cell, or what is missing.
pub fn check(kind: BackendKind) -> Result<(), String> {
    let python = python();
    let probe = probe(&python)?;
    if kind.is_gpu() && !probe.cuda {
        return Err(format!(
            "torch {} in {} ({PYTHON_VAR}) sees no CUDA GPU (torch.cuda.is_available() is False): a CUDA torch and an NVIDIA driver are needed",
            probe.version,
            python.display()
        ));
    }
    if kind == BackendKind::PytorchCompiled && cxx().is_none() {
        return Err("torch.compile on the CPU builds its kernels with a C++ compiler, and none is on PATH \
             (CXX, g++, clang++, c++); install one (Debian: apt install g++) or set CXX"
            .into());
    }
    Ok(())
}

/// The C++ compiler Inductor would find: `$CXX`, else the first of g++,
/// clang++ and c++ on `PATH`.
fn cxx() -> Option<PathBuf> {
    if let Some(cxx) = std::env::var_os("CXX").filter(|c| !c.is_empty()) {
        return Some(PathBuf::from(cxx));
    }
    let path = std::env::var_os("PATH")?;
    ["g++", "clang++", "c++"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_python_says_what_to_do() {
        let e = ask(Path::new("/nonexistent/python")).unwrap_err();
        assert!(
            e.contains("cannot run /nonexistent/python (BENCHKIT_PYTHON)") && e.contains("torch-venv.sh"),
            "{e}"
        );
    }
}

//! `benchkit plugin new`: a plugin project of any kind, in Rust, Python or
//! JavaScript, that builds with one command and runs at once in the config
//! written beside it. A Rust project carries the SDK (`benchkit-pdk` and
//! `benchkit-schema`, as this benchkit was built with them) under `sdk/`; a
//! Python or JavaScript one carries the contract under `wit/`.

mod sdk;

use crate::plugin::{PluginKind, CONTRACT_VERSION};
use std::path::{Path, PathBuf};

/// The language a plugin is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// What `benchkit plugin new` makes.
#[derive(Clone, Debug)]
pub struct Request {
    pub kind: PluginKind,
    pub name: String,
    pub dir: PathBuf,
    pub lang: Lang,
}

/// A written project: where it is, how to build it and what that makes.
#[derive(Clone, Debug)]
pub struct Project {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
    /// The one command, run in `dir`, that builds the component.
    pub build: &'static str,
    /// The component the build writes, relative to `dir`.
    pub component: String,
    /// The config, in `dir`, that runs the plugin.
    pub config: &'static str,
}

/// Why no project was written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error(
        "`{0}` cannot name a plugin: use lowercase letters, digits and `-`, starting with a letter \
         (at most 64 characters), and not a Rust keyword, `test` or an SDK crate's name"
    )]
    Name(String),
    #[error("{0} exists and is not empty: give a new directory")]
    NotEmpty(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the SDK's manifest {0}")]
    Manifest(String),
}

/// The config file written beside every project.
const CONFIG: &str = "benchkit.toml";

/// Write the project `request` asks for.
pub fn write(request: &Request) -> Result<Project, ScaffoldError> {
    check_name(&request.name)?;
    let dir = &request.dir;
    if std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(false) {
        return Err(ScaffoldError::NotEmpty(dir.display().to_string()));
    }
    let name = request.name.as_str();
    let (build, component, mut files) = match request.lang {
        Lang::Rust => rust(request.kind, name)?,
        Lang::Python => python(request.kind, name),
        Lang::Js => js(request.kind, name),
    };
    files.push((CONFIG.into(), run_config(request.kind, name, &component)));
    files.push(("README.md".into(), readme(request, build, &component)));
    let mut written = Vec::new();
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| write_error(parent, source))?;
        }
        std::fs::write(&path, text).map_err(|source| write_error(&path, source))?;
        written.push(path);
    }
    Ok(Project { dir: dir.clone(), files: written, build, component, config: CONFIG })
}

fn write_error(path: &Path, source: std::io::Error) -> ScaffoldError {
    ScaffoldError::Write { path: path.display().to_string(), source }
}

/// Names a Rust crate cannot take (keywords, `test`) or that the SDK's crates hold.
const TAKEN: &[&str] = &[
    "abstract",
    "as",
    "async",
    "await",
    "become",
    "benchkit-pdk",
    "benchkit-schema",
    "box",
    "break",
    "const",
    "continue",
    "crate",
    "do",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "test",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
];

fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !TAKEN.contains(&name);
    if ok {
        Ok(())
    } else {
        Err(ScaffoldError::Name(name.to_string()))
    }
}

/// A file of the project: its path inside it and its text.
type File = (PathBuf, String);

/// Fill a template's `{{name}}`, `{{description}}`, `{{contract}}`,
/// `{{schema}}` (the results schema its reporter reads) and `{{world}}`.
fn fill(template: &str, kind: PluginKind, name: &str) -> String {
    template
        .replace("{{name}}", name)
        .replace("{{description}}", description(kind))
        .replace("{{contract}}", CONTRACT_VERSION)
        .replace("{{schema}}", benchkit_schema::SCHEMA_VERSION)
        .replace("{{world}}", world(kind))
}

fn description(kind: PluginKind) -> &'static str {
    match kind {
        PluginKind::Model => "A small CNN: two convolutions with batch norm, then a classifier",
        PluginKind::Transform => "Per-channel normalisation and a seeded random horizontal flip",
        PluginKind::Reporter => "A Markdown table of the cells: images/s, step time and data wait",
    }
}

/// The WIT world a kind's scaffold implements (a transform returns bytes
/// for the host to map to f32: the contract's `byte-transform`).
fn world(kind: PluginKind) -> &'static str {
    match kind {
        PluginKind::Model => "model",
        PluginKind::Transform => "byte-transform",
        PluginKind::Reporter => "reporter",
    }
}

fn rust(kind: PluginKind, name: &str) -> Result<(&'static str, String, Vec<File>), ScaffoldError> {
    let t = |text: &str| fill(text, kind, name);
    let mut files: Vec<File> = vec![
        ("Cargo.toml".into(), t(include_str!("templates/rust/Cargo.toml"))),
        (".cargo/config.toml".into(), t(include_str!("templates/rust/cargo-config.toml"))),
        (".gitignore".into(), "/target\n".into()),
    ];
    let lib = match kind {
        PluginKind::Model => include_str!("templates/rust/model.rs"),
        PluginKind::Transform => {
            files.push(("src/kernel.rs".into(), t(include_str!("templates/rust/kernel.rs"))));
            include_str!("templates/rust/transform.rs")
        }
        PluginKind::Reporter => include_str!("templates/rust/reporter.rs"),
    };
    files.push(("src/lib.rs".into(), t(lib)));
    files.extend(sdk::files()?);
    let component = format!("target/wasm32-wasip2/release/{}.wasm", name.replace('-', "_"));
    Ok(("cargo build --release", component, files))
}

fn python(kind: PluginKind, name: &str) -> (&'static str, String, Vec<File>) {
    let t = |text: &str| fill(text, kind, name);
    // componentize-py finds an exported resource in the module named after its interface.
    let (app, resource) = match kind {
        PluginKind::Model => (include_str!("templates/python/model.py"), None),
        PluginKind::Transform => (
            include_str!("templates/python/transform_app.py"),
            Some(("byte_transformer.py", include_str!("templates/python/transform_byte_transformer.py"))),
        ),
        PluginKind::Reporter => (
            include_str!("templates/python/reporter_app.py"),
            Some(("sink.py", include_str!("templates/python/reporter_sink.py"))),
        ),
    };
    let mut files = vec![
        ("app.py".into(), t(app)),
        ("build.sh".into(), t(include_str!("templates/python/build.sh"))),
        ("wit/benchkit.wit".into(), contract()),
        (".gitignore".into(), "*.wasm\n__pycache__/\n".into()),
    ];
    if let Some((path, text)) = resource {
        files.push((path.into(), t(text)));
    }
    if kind == PluginKind::Reporter {
        files.push(("benchkit_events.py".into(), t(include_str!("templates/python/benchkit_events.py"))));
    }
    ("sh build.sh", format!("{name}.wasm"), files)
}

fn js(kind: PluginKind, name: &str) -> (&'static str, String, Vec<File>) {
    let t = |text: &str| fill(text, kind, name);
    // componentize-js builds one file: a reporter's event helpers go into it.
    let app = match kind {
        PluginKind::Model => t(include_str!("templates/js/model.js")),
        PluginKind::Transform => t(include_str!("templates/js/transform.js")),
        PluginKind::Reporter => {
            t(include_str!("templates/js/reporter.js")) + "\n" + &t(include_str!("templates/js/events.js"))
        }
    };
    let files = vec![
        ("app.js".into(), app),
        ("package.json".into(), t(include_str!("templates/js/package.json"))),
        ("wit/benchkit.wit".into(), contract()),
        (".gitignore".into(), "*.wasm\nnode_modules/\n".into()),
    ];
    ("npm install && npm run build", format!("{name}.wasm"), files)
}

/// The contract this benchkit speaks, as the SDK carries it.
fn contract() -> String {
    include_str!("../../../wit/benchkit.wit").to_string()
}

/// A config that runs the plugin at once: synthetic data, one short epoch.
fn run_config(kind: PluginKind, name: &str, component: &str) -> String {
    let (transform, model) = match kind {
        PluginKind::Transform => (format!("\"{component}\""), "\"builtin:lenet\"".to_string()),
        PluginKind::Model => ("\"builtin:normalize\"".into(), format!("\"{component}\"")),
        PluginKind::Reporter => ("\"builtin:normalize\"".into(), "\"builtin:lenet\"".into()),
    };
    let model_config = match kind {
        PluginKind::Model => "{ width = 16 }",
        _ => "{ activation = \"relu\", pool = \"max\" }",
    };
    let reporter = match kind {
        PluginKind::Reporter => format!("\n[[reporters]]\nplugin = \"{component}\"\n"),
        _ => String::new(),
    };
    format!(
        r#"# Runs the plugin `{name}` at once: `benchkit run {CONFIG}` after building it.
# Synthetic data (seeded random 3x32x32 images and labels: the figures are
# the model's and the pipeline's, the accuracy means nothing); point [data]
# at your own (`benchkit validate` checks a config without training).
name = "{name}"
backend = "flex"

[data]
source = "synthetic"
shape = [3, 32, 32]
samples = 2048
test_samples = 256

[transform]
plugin = {transform}
config = {{ mean = [0.5], std = [0.25] }}

[model]
plugin = {model}
config = {model_config}

[train]
epochs = 1
batch_size = 64
lr = 0.05

[[reporters]]
plugin = "builtin:json"
{reporter}"#
    )
}

fn readme(request: &Request, build: &str, component: &str) -> String {
    let name = &request.name;
    let needs = match request.lang {
        Lang::Rust => "Rust with the `wasm32-wasip2` target (`rustup target add wasm32-wasip2`).",
        Lang::Python => "`componentize-py` 0.25 (`pip install componentize-py==0.25.1`).",
        Lang::Js => "Node.js 18 or newer and npm; `npm install` fetches jco and componentize-js.",
    };
    format!(
        "# {name}\n\n{}: a benchkit {} plugin (contract `benchkit:plugin@{CONTRACT_VERSION}`).\n\n\
         Needs {needs}\n\n```sh\n{build}                    # builds {component}\n\
         benchkit plugin check {component}   # loads it in the sandbox and exercises it\n\
         benchkit run {CONFIG}                # trains with it\n```\n",
        description(request.kind),
        request.kind,
    )
}

#[cfg(test)]
mod tests;

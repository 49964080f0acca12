//! The configuration reference, `docs/src/reference/config.md`, written
//! from the raw config types themselves: each key's doc comment (its
//! meaning, range and default), its type, and the values serde accepts,
//! asked of serde by feeding it a value no key takes. Tests fail when the
//! committed page differs from what these types say, when a key's doc
//! comment names no default, and when a default it names is not the one
//! the validator fills in.

use super::raw::RawConfig;
use super::validate::Checks;
use super::{LaunchEnv, Sweep};
use std::path::Path;

/// The source the reference is read from.
const RAW: &str = include_str!("raw.rs");

/// The committed page, relative to the workspace root.
pub const PAGE: &str = "docs/src/reference/config.md";

/// A struct of `raw.rs`: its doc comment and fields.
struct RawStruct {
    name: String,
    doc: String,
    fields: Vec<RawField>,
}

/// A field: its key, Rust type and doc comment.
struct RawField {
    key: String,
    ty: String,
    doc: String,
}

/// Every `pub struct` of `raw.rs`, read line by line (rustfmt's layout:
/// doc lines, attributes, then `pub name: Type,`).
fn structs() -> Vec<RawStruct> {
    let mut out: Vec<RawStruct> = Vec::new();
    let mut doc: Vec<String> = Vec::new();
    let mut open = false;
    for line in RAW.lines() {
        let t = line.trim();
        if let Some(d) = t.strip_prefix("///") {
            doc.push(d.trim().to_string());
        } else if t.starts_with("#[") {
        } else if let Some(name) = t.strip_prefix("pub struct ").and_then(|r| r.strip_suffix(" {")) {
            out.push(RawStruct { name: name.to_string(), doc: doc.join(" "), fields: Vec::new() });
            open = true;
            doc.clear();
        } else if open && t == "}" {
            open = false;
        } else if let (true, Some(rest)) = (open, t.strip_prefix("pub ")) {
            if let Some((key, ty)) = rest.split_once(": ") {
                let ty = ty.trim_end_matches(',').to_string();
                if let Some(last) = out.last_mut() {
                    last.fields.push(RawField { key: key.to_string(), ty, doc: doc.join(" ") });
                }
            }
            doc.clear();
        } else {
            doc.clear();
        }
    }
    out
}

/// One table of the config: its dotted path ("" at the top), whether it
/// is an array of tables, and the struct that holds its keys.
struct Section<'a> {
    path: String,
    array: bool,
    of: &'a RawStruct,
}

/// The tables, top level first, in the order the structs name them.
fn sections(all: &[RawStruct]) -> Vec<Section<'_>> {
    let find = |name: &str| all.iter().find(|s| s.name == name);
    let mut out = Vec::new();
    let Some(top) = find("RawConfig") else { return out };
    let mut queue = vec![Section { path: String::new(), array: false, of: top }];
    while let Some(section) = queue.pop() {
        let mut nested = Vec::new();
        for field in &section.of.fields {
            if let Some(inner) = table_of(&field.ty).and_then(find) {
                let path = dotted(&section.path, &field.key);
                nested.push(Section { path, array: field.ty.starts_with("Vec<"), of: inner });
            }
        }
        out.push(section);
        queue.extend(nested.into_iter().rev());
    }
    out
}

/// The `Raw…` type a field's type names, if any (a table when it is one
/// of the structs; `RawBalance`, an enum, is a value).
fn table_of(ty: &str) -> Option<&str> {
    let name = &ty[ty.find("Raw")?..];
    Some(&name[..name.find(|c: char| !c.is_alphanumeric()).unwrap_or(name.len())])
}

fn dotted(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// What a type takes, for types whose values serde does not list.
fn plain_type(ty: &str) -> Option<&'static str> {
    let inner = ty.trim_start_matches("Option<").trim_start_matches("Spanned<").trim_end_matches('>');
    Some(match inner {
        "usize" | "u16" | "u32" | "u64" | "i64" => "integer",
        "f64" => "number",
        "bool" => "`true` or `false`",
        "String" => "string",
        "HostPort" => "`\"host:port\"`",
        "toml::Table" => "table",
        "Vec<u32" => "list of integers",
        _ if inner.contains("BTreeMap<String, Spanned<f64") => "table of numbers",
        _ if inner.contains("BTreeMap<String, serde_json::Value") => "table of key = value",
        _ => return None,
    })
}

/// A config that sets `key` of `section` to `value` (or only opens the
/// section, without `set`), and nothing else beyond what every config
/// needs: synthetic data and a model.
fn config_with(section: &Section, set: Option<(&str, &str)>) -> String {
    let line = set.map_or(String::new(), |(key, value)| format!("{key} = {value}\n"));
    let source = match (section.path.as_str(), set) {
        ("data", Some(("source", _))) => "",
        _ => "source = \"synthetic\"\n",
    };
    let model = "[model]\nplugin = \"builtin:resnet\"\n";
    match (section.path.as_str(), section.array) {
        ("", _) => format!("{line}[data]\n{source}{model}"),
        ("data", _) => format!("[data]\n{source}{line}{model}"),
        ("model", _) => format!("[data]\n{source}[model]\n{line}"),
        (path, true) => format!("[data]\n{source}{model}[[{path}]]\n{line}"),
        (path, false) => format!("[data]\n{source}{model}[{path}]\n{line}"),
    }
}

/// The values serde accepts for a key, asked by handing it a string no
/// key takes: an enum lists its variants, a custom type says what it
/// expects. `None` where serde takes the string or names only a type.
fn accepted(section: &Section, key: &str) -> Option<String> {
    let text = config_with(section, Some((key, "\"\\u0001\"")));
    let err = toml::from_str::<RawConfig>(&text).err()?;
    let message = err.message().trim().to_string();
    if message.starts_with("unknown variant") {
        let expected = message.split_once("expected ").map_or("", |(_, e)| e);
        let names: Vec<String> =
            expected.split('`').skip(1).step_by(2).map(|n| format!("`\"{n}\"`")).collect();
        return Some(names.join(", "));
    }
    // A type serde reads from a string, or a table whose other keys are
    // missing: the plain type says what the key takes.
    let quotes_the_probe = message.contains("\\u{1}");
    if message.starts_with("invalid type") || message.starts_with("missing field") || quotes_the_probe {
        return None;
    }
    Some(message.strip_prefix("expected ").unwrap_or(&message).to_string())
}

/// The page: one table per config table, a row per key.
pub fn markdown() -> String {
    let all = structs();
    let mut out = String::from(
        "# Configuration\n\n\
         <!-- Written by `BENCHKIT_BLESS=1 cargo test -p benchkit config::reference` from the doc\n\
         comments of core/src/config/raw.rs; edit those, not this page. -->\n\n\
         Every key a config file may hold, read from the types that parse it: a key not\n\
         listed here is refused, naming the file, line and the keys accepted. Defaults are\n\
         what the validator fills in; `run.json` holds every cell's config with each one\n\
         filled. `benchkit validate CONFIG` checks a config against this and against the\n\
         data, plugins and backends it names; `--config-only` checks its keys and values\n\
         alone. Plugins' own keys (under `model.config`, `transform.config` and a\n\
         reporter's `config`) are listed by `benchkit plugin list --details`.\n",
    );
    for section in sections(&all) {
        let title = match (section.path.as_str(), section.array) {
            ("", _) => "Top level".to_string(),
            (path, true) => format!("`[[{path}]]`"),
            (path, false) => format!("`[{path}]`"),
        };
        out.push_str(&format!("\n## {title}\n\n{}\n\n", intro(&section.of.doc)));
        out.push_str("| key | value | meaning |\n|---|---|---|\n");
        for field in &section.of.fields {
            let value = match table_of(&field.ty).filter(|n| all.iter().any(|s| s.name == *n)) {
                Some(_) => {
                    let path = dotted(&section.path, &field.key);
                    let anchor = path.replace('.', "");
                    let array = if field.ty.starts_with("Vec<") { "array of tables" } else { "table" };
                    format!("{array}: [below](#{anchor})")
                }
                None => accepted(&section, &field.key)
                    .or_else(|| plain_type(&field.ty).map(str::to_string))
                    .unwrap_or_else(|| "see meaning".to_string()),
            };
            out.push_str(&format!(
                "| `{}` | {} | {} |\n",
                field.key,
                value.replace('|', "\\|"),
                field.doc.replace('|', "\\|")
            ));
        }
    }
    out
}

/// A table's doc comment without the table's own name before it:
/// "`[data]`: the dataset and the loader." gives "The dataset and the loader."
fn intro(doc: &str) -> String {
    let text = match doc.split_once("`: ") {
        Some((name, rest)) if name.starts_with("`[") => rest,
        _ => doc,
    };
    let mut chars = text.chars();
    chars.next().map_or(String::new(), |c| c.to_uppercase().chain(chars).collect())
}

/// A key's default as a TOML value, where its doc comment gives one
/// (`Default: \`value\`.`, or followed by a remark in brackets).
fn literal_default(doc: &str) -> Option<&str> {
    let rest = doc.split_once("Default: `")?.1;
    let (value, after) = rest.split_once('`')?;
    (after.starts_with('.') || after.starts_with(" (")).then_some(value)
}

/// The resolved plans of a config, as JSON, checked for keys alone.
fn resolved(text: &str) -> Result<serde_json::Value, String> {
    let sweep =
        Sweep::parse_launched(text, Path::new("reference.toml"), &LaunchEnv::default(), Checks::KeysOnly)
            .map_err(|e| format!("{e}"))?;
    let plans: Vec<_> = sweep.cells.iter().map(|c| &c.plan).collect();
    serde_json::to_value(plans).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn the_committed_page_is_what_the_types_say() {
        let page = markdown();
        let path = workspace().join(PAGE);
        if std::env::var_os("BENCHKIT_BLESS").is_some() {
            std::fs::write(&path, &page).expect("write the reference");
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == page,
            "{PAGE} differs from core/src/config/raw.rs; write it anew with \
             BENCHKIT_BLESS=1 cargo test -p benchkit config::reference"
        );
    }

    #[test]
    fn every_key_says_its_default_or_that_it_is_required() {
        for s in structs() {
            for f in &s.fields {
                assert!(
                    f.doc.contains("Default:") || f.doc.contains("Required"),
                    "{}.{}: its doc comment names no default (`Default: …`) and does not say `Required`",
                    s.name,
                    f.key
                );
            }
        }
    }

    #[test]
    fn every_default_named_is_the_one_the_validator_fills_in() {
        let all = structs();
        let mut checked = 0;
        for section in sections(&all) {
            let named = section.of.fields.iter().any(|f| literal_default(&f.doc).is_some());
            if section.array || !named {
                continue;
            }
            let header_only = config_with(&section, None);
            let without = resolved(&header_only).unwrap_or_else(|e| panic!("{header_only}: {e}"));
            for field in &section.of.fields {
                let Some(value) = literal_default(&field.doc) else { continue };
                let text = config_with(&section, Some((&field.key, value)));
                let with = resolved(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!(
                    with,
                    without,
                    "{}: the doc comment says the default is {value}, but writing it changes the plan",
                    dotted(&section.path, &field.key)
                );
                checked += 1;
            }
        }
        assert!(checked >= 40, "only {checked} defaults checked");
    }

    #[test]
    fn an_enum_lists_its_values_and_a_custom_type_says_what_it_takes() {
        let all = structs();
        let sections = sections(&all);
        let data = sections.iter().find(|s| s.path == "data").expect("[data]");
        let pipeline = accepted(data, "pipeline").expect("pipeline's values");
        assert!(pipeline.contains("`\"naive\"`") && pipeline.contains("`\"optimized\"`"), "{pipeline}");
        let resize = accepted(data, "resize").expect("resize's values");
        assert!(resize.contains("[height, width]"), "{resize}");
        assert_eq!(accepted(data, "path"), None);
    }
}

//! The book (`docs/`) and the front page, read as a newcomer reads them:
//! every page `SUMMARY.md` lists exists and every page is listed; every
//! relative link and anchor resolves; every ```toml block is a config (or a
//! part of one) that `benchkit validate --config-only` accepts; every shell
//! block names shipped configs that exist; the front page stays short; and
//! every column of the cells table has its Figures entry, whose formula the
//! code's doc comment states.

use crate::common::benchkit;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn src() -> PathBuf {
    root().join("docs/src")
}

/// The front page and every page under `docs/src`.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("docs/src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&src(), &mut out);
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn shown(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

/// A fenced code block: its info string, its first line's number and text.
struct Block {
    info: String,
    line: usize,
    text: String,
}

/// The page's fenced blocks, and its other lines (number, text).
fn split(page: &str) -> (Vec<Block>, Vec<(usize, String)>) {
    let mut blocks = Vec::new();
    let mut prose = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in page.lines().enumerate() {
        let t = line.trim_start();
        match (&mut open, t.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block { info: info.trim().to_string(), line: i + 2, text: String::new() })
            }
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some(b), None) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            (None, None) => prose.push((i + 1, line.to_string())),
        }
    }
    (blocks, prose)
}

/// A heading's anchor as mdBook makes it: the text without its links'
/// markup, through the rule the HTML report's column anchors follow.
fn anchor(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(at) = rest.find('[') {
        text.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match after.split_once("](") {
            Some((label, tail)) if tail.contains(')') => {
                text.push_str(label);
                rest = tail.split_once(')').map_or("", |(_, r)| r);
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    benchkit_schema::tables::figure_anchor(&text)
}

/// Every anchor of a page, with mdBook's `-1`, `-2` for repeated headings.
fn anchors(page: &str) -> BTreeSet<String> {
    let (_, prose) = split(page);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose {
        let Some(text) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else { continue };
        if !text.starts_with(' ') {
            continue;
        }
        let id = anchor(text.trim());
        let n = seen.entry(id.clone()).or_insert(0);
        out.insert(if *n == 0 { id.clone() } else { format!("{id}-{n}") });
        *n += 1;
    }
    out
}

/// The targets of a line's inline links, outside code spans.
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 1 {
            continue;
        }
        let mut rest = part;
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let end = tail.find(')').unwrap_or(tail.len());
            out.push(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    out
}

/// The pages `SUMMARY.md` links, relative to `docs/src`.
fn summary() -> Vec<String> {
    let text = read(&src().join("SUMMARY.md"));
    text.lines().flat_map(links).collect()
}

#[test]
fn the_summary_lists_every_page_and_every_page_it_lists_exists() {
    let listed: BTreeSet<String> = summary().into_iter().collect();
    for page in &listed {
        assert!(src().join(page).is_file(), "SUMMARY.md lists {page}, which does not exist");
    }
    for page in pages() {
        let Ok(rel) = page.strip_prefix(src()) else { continue };
        let rel = rel.display().to_string();
        assert!(
            rel == "SUMMARY.md" || listed.contains(&rel),
            "docs/src/{rel} is in no chapter of SUMMARY.md"
        );
    }
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = read(&page);
        let (_, prose) = split(&text);
        for (line, content) in prose {
            for target in links(&content) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, id) = target.split_once('#').unwrap_or((&target, ""));
                let path = if file.is_empty() { page.clone() } else { page.with_file_name(file) };
                let at = format!("{}:{line}: {target}", shown(&page));
                if !path.exists() {
                    broken.push(format!("{at}: no such file"));
                } else if !id.is_empty() && !anchors(&read(&path)).contains(id) {
                    broken.push(format!("{at}: no heading with that anchor"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// A block merged onto what every config needs: a model, and synthetic
/// data where the block names no data.
fn completed(block: &str) -> Result<String, String> {
    let mut table: toml::Table = toml::from_str(block).map_err(|e| format!("not TOML: {e}"))?;
    if !table.contains_key("model") {
        let model: toml::Table = toml::from_str("plugin = \"builtin:resnet\"").map_err(|e| e.to_string())?;
        table.insert("model".into(), toml::Value::Table(model));
    }
    let data = table.entry("data").or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(data) = data {
        if !data.contains_key("path") && !data.contains_key("source") {
            data.insert("source".into(), toml::Value::String("synthetic".into()));
        }
    }
    toml::to_string(&table).map_err(|e| e.to_string())
}

#[test]
fn every_toml_block_is_a_config_validate_accepts() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut refused = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let (blocks, _) = split(&read(&page));
        for block in blocks.iter().filter(|b| b.info == "toml") {
            let at = format!("{}:{}", shown(&page), block.line);
            let config = match completed(&block.text) {
                Ok(c) => c,
                Err(why) => {
                    refused.push(format!("{at}: {why}"));
                    continue;
                }
            };
            let file = dir.path().join(format!("block-{checked}.toml"));
            std::fs::write(&file, &config).expect("write the block");
            let out =
                benchkit().args(["validate", "--config-only"]).arg(&file).output().expect("run benchkit");
            if !out.status.success() {
                refused.push(format!("{at}: {}", String::from_utf8_lossy(&out.stderr).trim()));
            }
            checked += 1;
        }
    }
    assert!(refused.is_empty(), "toml blocks benchkit refuses:\n{}", refused.join("\n"));
    assert!(checked >= 10, "only {checked} toml blocks found");
}

#[test]
fn every_shell_block_names_shipped_configs_that_exist() {
    let mut missing = Vec::new();
    for page in pages() {
        let (blocks, _) = split(&read(&page));
        for block in blocks.iter().filter(|b| matches!(b.info.as_str(), "sh" | "bash" | "console" | "shell"))
        {
            for word in block.text.split(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '=') {
                let Some(at) = word.find("configs/") else { continue };
                let name = word[at..].trim_end_matches([';', ')', ',']);
                if name.ends_with(".toml") && !root().join(name).is_file() {
                    missing.push(format!("{}:{}: {name}", shown(&page), block.line));
                }
            }
        }
    }
    assert!(missing.is_empty(), "shell blocks name configs that do not exist:\n{}", missing.join("\n"));
}

#[test]
fn the_front_page_is_at_most_250_lines() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(lines <= 250, "README.md has {lines} lines; the book holds the rest");
}

/// A Figures entry's bullet `- **Label:** text`, by label.
fn bullets(entry: &str) -> BTreeMap<String, String> {
    entry
        .lines()
        .filter_map(|l| l.strip_prefix("- **"))
        .filter_map(|l| l.split_once(":** "))
        .map(|(label, text)| (label.to_string(), text.trim().to_string()))
        .collect()
}

/// The code spans of a text, in order.
fn spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The doc comment directly above `fn name` in `file`, whitespace folded;
/// several functions of that name give their comments joined.
fn doc_of(file: &str, name: &str) -> Option<String> {
    let name = name.rsplit("::").next().unwrap_or(name);
    let source = std::fs::read_to_string(root().join(file)).ok()?;
    let lines: Vec<&str> = source.lines().collect();
    let mut docs = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let is_fn = t.split("fn ").nth(1).is_some_and(|r| {
            r.strip_prefix(name).is_some_and(|after| after.starts_with('(') || after.starts_with('<'))
        }) && !t.starts_with("//");
        if !is_fn {
            continue;
        }
        let mut doc = Vec::new();
        for above in lines[..i].iter().rev() {
            let a = above.trim_start();
            if let Some(d) = a.strip_prefix("///") {
                doc.push(d.trim());
            } else if !a.starts_with("#[") {
                break;
            }
        }
        doc.reverse();
        docs.push(doc.join(" "));
    }
    (!docs.is_empty()).then(|| docs.join(" ").split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Whether `fn name` in `file` is marked `#[test]` (among the attributes
/// and doc comment directly above it).
fn is_test(file: &str, name: &str) -> bool {
    let source = std::fs::read_to_string(root().join(file)).unwrap_or_default();
    let lines: Vec<&str> = source.lines().collect();
    let signature = format!("fn {name}(");
    lines.iter().enumerate().filter(|(_, l)| l.trim_start().starts_with(&signature)).any(|(i, _)| {
        lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim_start())
            .take_while(|l| l.starts_with("///") || l.starts_with("#["))
            .any(|l| l == "#[test]")
    })
}

#[test]
fn every_column_of_the_cells_table_has_its_figure_and_the_code_states_its_formula() {
    let page = read(&src().join("concepts/figures.md"));
    let entries: Vec<(&str, &str)> = page
        .split("\n## ")
        .skip(1)
        .map(|e| e.split_once('\n').unwrap_or((e, "")))
        .map(|(h, body)| (h.trim(), body))
        .collect();
    let headings: BTreeSet<&str> = entries.iter().map(|(h, _)| *h).collect();
    let ids = anchors(&page);
    for header in benchkit_schema::tables::headers() {
        assert!(
            headings.contains(format!("`{header}`").as_str()),
            "the cells table's column `{header}` has no entry in docs/src/concepts/figures.md"
        );
        let id = benchkit_schema::tables::figure_anchor(header);
        assert!(ids.contains(&id), "the HTML report names #{id} for `{header}`, which the page lacks");
    }
    let mut wrong = Vec::new();
    for (heading, body) in &entries {
        let b = bullets(body);
        let (Some(formula), Some(code)) = (b.get("Formula"), b.get("Code")) else {
            wrong.push(format!("{heading}: no **Formula:** or **Code:** line"));
            continue;
        };
        let formula = spans(formula).first().map(|f| f.split_whitespace().collect::<Vec<_>>().join(" "));
        let code = spans(code);
        let (Some(formula), [file, function, ..]) = (formula, code.as_slice()) else {
            wrong.push(format!("{heading}: the formula or the code is not in code spans"));
            continue;
        };
        match doc_of(file, function) {
            None => wrong.push(format!("{heading}: no fn {function} in {file}")),
            Some(doc) if !doc.contains(&formula) => {
                wrong.push(format!("{heading}: {file} {function}'s doc comment does not state `{formula}`"))
            }
            Some(_) => {}
        }
        let test = b.get("Test").map(|t| spans(t)).unwrap_or_default();
        let [file, name, ..] = test.as_slice() else {
            wrong.push(format!("{heading}: no **Test:** line naming a file and a test in code spans"));
            continue;
        };
        if !is_test(file, name) {
            wrong.push(format!("{heading}: no test {name} in {file}"));
        }
    }
    assert!(wrong.is_empty(), "docs/src/concepts/figures.md against the code:\n{}", wrong.join("\n"));
}

#[test]
fn an_anchor_is_made_as_mdbook_makes_it() {
    assert_eq!(
        anchor("The network as an axis: `distributed.link`"),
        "the-network-as-an-axis-distributedlink"
    );
    assert_eq!(anchor("A [linked](x.md) heading"), "a-linked-heading");
    assert_eq!(anchors("# A\n## A\n```\n# not a heading\n```\n"), ["a", "a-1"].map(String::from).into());
    assert_eq!(links("see [x](a.md#b) and `[y](c.md)`"), ["a.md#b"]);
}

#[test]
fn the_own_images_page_shows_the_config_as_shipped() {
    let page = read(&src().join("getting-started/own-data.md"));
    let shipped = read(&root().join("configs/own-images.toml"));
    for line in shipped.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        assert!(page.contains(line), "getting-started/own-data.md lacks the shipped line `{line}`");
    }
}

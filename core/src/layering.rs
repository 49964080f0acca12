//! The house rule that keeps one cell's data flow running down: no two
//! top-level modules of this crate name each other through `crate::`
//! paths (doc links included), and inside the runner's, the data's and the
//! training's folders no two siblings name each other either (through `super::` or
//! `crate::` paths). Checked over the source tree by tests.

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    /// Every `.rs` file under `dir`, recursively.
    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The first path segment of each `crate::` path in `text`: `crate::a::b`
    /// gives `a`; `crate::{a::b, c}` gives `a` and `c`.
    pub(super) fn named(text: &str) -> Vec<String> {
        let ident =
            |s: &str| -> String { s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
        let mut found = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 1;
                let mut start = true;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 1 => start = true,
                        c if start && depth == 1 && !c.is_whitespace() => {
                            found.push(ident(&group[i..]));
                            start = false;
                        }
                        _ => {}
                    }
                    if depth == 0 {
                        break;
                    }
                }
            } else {
                found.push(ident(rest));
            }
        }
        found
    }

    #[test]
    fn a_group_and_a_path_name_their_first_segments() {
        assert_eq!(named("use crate::{a::b, c::{d, e}, f};"), ["a", "c", "f"]);
        assert_eq!(named("x crate::g::h; [`crate::k`]"), ["g", "k"]);
    }

    #[test]
    fn no_two_top_level_modules_name_each_other() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut tops = BTreeSet::new();
        for entry in std::fs::read_dir(&src).expect("core/src").flatten() {
            let name = entry.file_name().to_string_lossy().trim_end_matches(".rs").to_string();
            if name != "lib" && name != "main" {
                tops.insert(name);
            }
        }
        let mut uses: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for top in &tops {
            let mut files = Vec::new();
            sources(&src.join(top), &mut files);
            files.push(src.join(format!("{top}.rs")));
            for file in files {
                let Ok(text) = std::fs::read_to_string(&file) else { continue };
                for other in named(&text) {
                    if tops.contains(&other) && &other != top {
                        let at = file.strip_prefix(&src).unwrap_or(&file).display().to_string();
                        uses.entry(top.clone()).or_default().entry(other).or_insert(at);
                    }
                }
            }
        }
        let mut both = Vec::new();
        for (a, named) in &uses {
            for (b, at) in named {
                if a < b {
                    if let Some(back) = uses.get(b).and_then(|m| m.get(a)) {
                        both.push(format!("{a} <-> {b} ({at} names {b}; {back} names {a})"));
                    }
                }
            }
        }
        assert!(both.is_empty(), "top-level modules that name each other:\n{}", both.join("\n"));
    }

    /// The module path (from the crate root) of `file` under `src`, and of
    /// its parent: `runner/store/read.rs` is `runner::store::read`.
    fn module_of(src: &Path, file: &Path) -> Vec<String> {
        let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        parts
    }

    /// The sibling modules of folder `dir` that `file` names (`file` being
    /// in that folder or below it): paths that resolve to `dir::<sibling>`,
    /// written `super::…` or `crate::…`; test modules left out.
    fn siblings_named(
        src: &Path,
        dir: &[String],
        siblings: &BTreeSet<String>,
        file: &Path,
        text: &str,
    ) -> BTreeSet<String> {
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
        let own = module_of(src, file);
        let mut found = BTreeSet::new();
        let mut rest = text;
        while let Some(at) = rest.find(['s', 'c']) {
            rest = &rest[at..];
            let (mut base, mut tail) = (None, rest);
            if tail.starts_with("super::") {
                // `super` of a file is its folder's module; of a mod.rs, the folder above.
                let mut m = own.clone();
                m.pop();
                while let Some(t) = tail.strip_prefix("super::") {
                    tail = t;
                    if tail.starts_with("super::") {
                        m.pop();
                    }
                }
                base = Some(m);
            } else if let Some(t) = tail.strip_prefix("crate::") {
                tail = t;
                base = Some(Vec::new());
            }
            let Some(mut m) = base else {
                rest = &rest[1..];
                continue;
            };
            let word_start = rest.as_ptr() == text.as_ptr()
                || !text[..text.len() - rest.len()]
                    .ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
            let segments: Vec<String> = tail
                .split("::")
                .map(|s| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>())
                .take_while(|s| !s.is_empty())
                .collect();
            m.extend(segments);
            if word_start && m.len() > dir.len() && m[..dir.len()] == *dir && own.len() > dir.len() {
                let named = &m[dir.len()];
                if *named != own[dir.len()] && siblings.contains(named) {
                    found.insert(named.clone());
                }
            }
            rest = &rest[1..];
        }
        found
    }

    /// Sibling modules of folder `dir` (a module path) that name each other.
    fn circles_in(src: &Path, dir: &[String]) -> Vec<String> {
        let folder = dir.iter().fold(src.to_path_buf(), |p, d| p.join(d));
        let siblings: BTreeSet<String> = std::fs::read_dir(&folder)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().trim_end_matches(".rs").to_string())
            .filter(|name| name != "mod")
            .collect();
        let mut files = Vec::new();
        sources(&folder, &mut files);
        let mut uses: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for file in files {
            let own = module_of(src, &file);
            if own.len() <= dir.len() {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            for named in siblings_named(src, dir, &siblings, &file, &text) {
                let at = file.strip_prefix(src).unwrap_or(&file).display().to_string();
                uses.entry(own[dir.len()].clone()).or_default().entry(named).or_insert(at);
            }
        }
        let mut both = Vec::new();
        for (a, named) in &uses {
            for (b, at) in named {
                if a < b {
                    if let Some(back) = uses.get(b).and_then(|m| m.get(a)) {
                        both.push(format!(
                            "{}: {a} <-> {b} ({at} names {b}; {back} names {a})",
                            dir.join("::")
                        ));
                    }
                }
            }
        }
        both
    }

    #[test]
    fn siblings_are_found_through_super_and_crate_paths() {
        let src = Path::new("/s");
        let dir = vec!["runner".to_string()];
        let file = src.join("runner/schedule/attempt.rs");
        let text = "use super::super::ranks::local::X;\nuse crate::runner::store::Y; use super::open;\n\
                    use crate::runner::RunnerError;\n#[cfg(test)]\nmod tests { use crate::runner::cell::Z; }";
        let jobs: BTreeSet<String> = ["cell", "ranks", "schedule", "store"].map(String::from).into();
        let named = siblings_named(src, &dir, &jobs, &file, text);
        assert_eq!(named.into_iter().collect::<Vec<_>>(), ["ranks", "store"]);
        let inner = vec!["runner".to_string(), "schedule".to_string()];
        let parts: BTreeSet<String> = ["attempt", "open"].map(String::from).into();
        assert_eq!(
            siblings_named(src, &inner, &parts, &file, text).into_iter().collect::<Vec<_>>(),
            ["open"]
        );
    }

    #[test]
    fn no_two_siblings_of_the_runner_the_data_or_the_training_name_each_other() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut both = Vec::new();
        for dir in [
            "runner",
            "runner/schedule",
            "runner/cell",
            "runner/store",
            "runner/ranks",
            "data",
            "data/formats",
            "data/loader",
            "data/commands",
            "train",
            "train/records",
            "train/optim",
            "train/step_loop",
            "train/dispatch",
            "train/collective",
            "train/pipeline",
            "train/replicas",
        ] {
            let dir: Vec<String> = dir.split('/').map(str::to_string).collect();
            both.extend(circles_in(&src, &dir));
        }
        assert!(both.is_empty(), "sibling modules that name each other:\n{}", both.join("\n"));
    }
}

//! The house rule that keeps one cell's data flow running down: no two
//! top-level modules of this crate name each other through `crate::`
//! paths (doc links included). Checked over the source tree by a test.

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
}

//! File patterns of the streamed sources: brace ranges and lists as
//! WebDataset writes them (`shard-{000000..000146}.tar`, `{train,extra}-*`),
//! then glob wildcards (`train-*-of-01024`), relative to the dataset folder.
//! A name a brace range spells out must exist; a wildcard may match nothing.

use crate::data::DataError;
use std::path::{Path, PathBuf};

/// Most names one pattern may spell out, so a typo cannot ask for billions.
const MAX_NAMES: usize = 1_000_000;

/// Every name `pattern` spells out, braces expanded left to right.
pub fn expand(pattern: &str) -> Result<Vec<String>, String> {
    let Some(open) = pattern.find('{') else {
        if pattern.contains('}') {
            return Err(format!("`{pattern}` has a `}}` without a `{{`"));
        }
        return Ok(vec![pattern.to_string()]);
    };
    let close = pattern[open..]
        .find('}')
        .map(|c| open + c)
        .ok_or_else(|| format!("`{pattern}` has a `{{` without a `}}`"))?;
    let (head, body, tail) = (&pattern[..open], &pattern[open + 1..close], &pattern[close + 1..]);
    let choices = match body.split_once("..") {
        Some((a, b)) => range(a, b).ok_or_else(|| {
            format!("`{{{body}}}` in `{pattern}` is not a range: expected {{FIRST..LAST}} of unsigned numbers, e.g. {{000000..000146}}")
        })?,
        None => body.split(',').map(str::to_string).collect(),
    };
    let rest = expand(tail)?;
    if choices.len().saturating_mul(rest.len()) > MAX_NAMES {
        return Err(format!("`{pattern}` spells out more than {MAX_NAMES} names"));
    }
    Ok(choices.iter().flat_map(|c| rest.iter().map(move |r| format!("{head}{c}{r}"))).collect())
}

/// `first..=last`, zero-padded to `first`'s width when it has leading zeros.
fn range(first: &str, last: &str) -> Option<Vec<String>> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(first) || !digits(last) {
        return None;
    }
    let (a, b): (u64, u64) = (first.parse().ok()?, last.parse().ok()?);
    if b < a || b - a >= MAX_NAMES as u64 {
        return None;
    }
    let width = if first.len() > 1 && first.starts_with('0') { first.len() } else { 0 };
    Some((a..=b).map(|n| format!("{n:0width$}")).collect())
}

fn has_wildcard(name: &str) -> bool {
    name.contains(['*', '?', '['])
}

/// The files `pattern` names under `dir`, sorted, each once.
pub fn files(dir: &Path, pattern: &str) -> Result<Vec<PathBuf>, DataError> {
    let bad = |message: String| DataError::Format { path: dir.join(pattern), message };
    let mut out = Vec::new();
    for name in expand(pattern).map_err(bad)? {
        let full = dir.join(&name);
        if !has_wildcard(&name) {
            if !full.is_file() {
                return Err(DataError::Missing {
                    dir: dir.into(),
                    what: format!("file {name}"),
                    tried: format!("{} (spelled out by the pattern `{pattern}`)", full.display()),
                });
            }
            out.push(full);
            continue;
        }
        let base = dir.to_str().ok_or_else(|| bad("the path is not UTF-8".into()))?;
        let text = format!("{}/{name}", glob::Pattern::escape(base.trim_end_matches('/')));
        let matches = glob::glob(&text).map_err(|e| bad(format!("not a glob pattern: {e}")))?;
        for m in matches {
            let path = m.map_err(|e| DataError::Io { path: e.path().into(), source: e.into() })?;
            if path.is_file() {
                out.push(path);
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The files of the first of `patterns` that names any, with that pattern.
pub fn first_match(dir: &Path, patterns: &[&str]) -> Result<Option<(String, Vec<PathBuf>)>, DataError> {
    for pattern in patterns {
        let found = files(dir, pattern)?;
        if !found.is_empty() {
            return Ok(Some((pattern.to_string(), found)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_spell_out_ranges_with_their_padding_and_lists() {
        assert_eq!(expand("s-{000..002}.tar").unwrap(), ["s-000.tar", "s-001.tar", "s-002.tar"]);
        assert_eq!(expand("s-{8..10}").unwrap(), ["s-8", "s-9", "s-10"]);
        assert_eq!(expand("{a,b}-{1..2}").unwrap(), ["a-1", "a-2", "b-1", "b-2"]);
        assert_eq!(expand("train-*-of-01024").unwrap(), ["train-*-of-01024"]);
        assert!(expand("s-{3..1}").unwrap_err().contains("not a range"));
        assert!(expand("s-{0..x}").unwrap_err().contains("not a range"));
        assert!(expand("s-{0..3").unwrap_err().contains("without a `}`"));
        assert!(expand("{0..999999}-{0..9}").unwrap_err().contains("more than"));
    }

    #[test]
    fn a_spelled_out_file_must_exist_and_wildcards_may_match_nothing() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["train-00000-of-00002", "train-00001-of-00002", "validation-00000-of-00001"] {
            std::fs::write(dir.path().join(n), b"").unwrap();
        }
        let names = |p: &str| -> Vec<String> {
            files(dir.path(), p)
                .unwrap()
                .iter()
                .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names("train-*-of-00002"), ["train-00000-of-00002", "train-00001-of-00002"]);
        assert_eq!(names("train-{00000..00001}-of-00002"), names("train-*"));
        assert!(names("test-*").is_empty());
        let err = files(dir.path(), "train-{00000..00002}-of-00002").unwrap_err().to_string();
        assert!(err.contains("train-00002-of-00002"), "{err}");
        let (pattern, found) = first_match(dir.path(), &["test-*", "validation-*"]).unwrap().unwrap();
        assert_eq!((pattern.as_str(), found.len()), ("validation-*", 1));
    }
}

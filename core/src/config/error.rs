//! Config errors: file, line, column, the dotted key, and what is accepted.

use std::path::PathBuf;

/// A problem with the user's config file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: `{key}`: {message}", file.display())]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based; 0 when the problem has no single place (e.g. unreadable file).
    pub line: usize,
    pub column: usize,
    pub key: String,
    pub message: String,
}

/// 1-based line and column of byte `offset` in `source`.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// The dotted key at byte `offset`: the enclosing `[table]` plus the key on
/// that line, e.g. `train.epochs`.
pub fn key_at(source: &str, offset: usize) -> String {
    let (line_no, _) = line_col(source, offset);
    let mut table = String::new();
    let mut key = String::new();
    for (i, line) in source.lines().enumerate().take(line_no) {
        let t = line.trim();
        if t.starts_with('[') {
            table = t.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            key.clear();
        } else if i + 1 == line_no {
            key = t.split('=').next().unwrap_or("").trim().trim_matches('"').to_string();
        }
    }
    match (table.is_empty(), key.is_empty()) {
        (true, _) => key,
        (false, true) => table,
        (false, false) => format!("{table}.{key}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_positions() {
        let src = "name = \"x\"\n[train]\nepochs = 2\n";
        let at = src.find("epochs").unwrap();
        assert_eq!(line_col(src, at), (3, 1));
        assert_eq!(key_at(src, at), "train.epochs");
        assert_eq!(key_at(src, 0), "name");
    }
}

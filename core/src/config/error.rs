//! Config errors: file, line, column, the dotted key, and what is accepted.

use std::path::PathBuf;

/// A problem with the user's config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based; 0 when the problem has no single place (e.g. unreadable file).
    pub line: usize,
    pub column: usize,
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: `{}`: {}",
                self.file.display(),
                self.line,
                self.column,
                self.key,
                self.message
            )
        }
    }
}

impl std::error::Error for ConfigError {}

/// 1-based line and column of byte `offset` in `source`.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// The table enclosing byte `offset` (`""` at the top level).
pub fn table_at(source: &str, offset: usize) -> String {
    let (line_no, _) = line_col(source, offset);
    source
        .lines()
        .take(line_no)
        .filter(|l| l.trim().starts_with('['))
        .last()
        .map(|l| l.trim().trim_matches(|c| c == '[' || c == ']').trim().to_string())
        .unwrap_or_default()
}

/// The dotted key a serde error spanning `span` is about: a missing field is
/// named inside its table (an empty or whole-document span at 0 means the top level),
/// anything else by the key where the span starts.
pub fn key_of_error(source: &str, span: std::ops::Range<usize>, message: &str) -> String {
    let missing = message.strip_prefix("missing field `").and_then(|m| m.split('`').next());
    let whole = span.start == 0 && (span.is_empty() || span.end >= source.trim_end().len());
    match missing {
        Some(field) if whole => field.to_string(),
        Some(field) => match table_at(source, span.start).as_str() {
            "" => field.to_string(),
            table => format!("{table}.{field}"),
        },
        None => key_at(source, span.start),
    }
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
            // Up to the header's first `]`: a comment may follow it.
            let header = t.split(']').next().unwrap_or("");
            table = header.trim_start_matches('[').trim().to_string();
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
        let commented = "[distributed]   # all optional\ncollective = \"x\"\n";
        assert_eq!(key_at(commented, commented.find("collective").unwrap()), "distributed.collective");
        assert_eq!(key_at(src, 0), "name");
        assert_eq!(key_of_error(src, at..at + 6, "missing field `lr`"), "train.lr");
        assert_eq!(key_of_error(src, 0..src.len(), "missing field `model`"), "model");
    }
}

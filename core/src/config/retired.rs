//! Config keys renamed since a release accepted them. A config that still
//! writes one, in a table, as a dotted key or as a matrix axis, is refused
//! at the line that wrote it, with the key's new name.

use super::error::{line_col, ConfigError};
use std::path::Path;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// Each renamed key (dotted, from the config's root) and its new name.
pub const RENAMED: &[(&str, &str)] = &[("train.batch_per_worker", "train.batch_per_replica")];

/// The first renamed key `root` writes, as an error naming its new name.
pub fn check(root: &Spanned<DeTable<'_>>, source: &str, file: &Path) -> Result<(), ConfigError> {
    match find(root.get_ref(), "") {
        None => Ok(()),
        Some((path, old, new, offset)) => {
            let (line, column) = line_col(source, offset);
            Err(ConfigError {
                file: file.into(),
                line,
                column,
                key: path,
                message: format!("`{old}` was renamed; write `{new}`"),
            })
        }
    }
}

/// `(where, old, new, byte offset)` of the first renamed key under `table`,
/// whose dotted path is `prefix`. A key counts where its path is an old
/// name, or, under `[matrix]`, where its path below `matrix` or the key
/// itself (an axis or an `include` entry) is. A plugin's own config
/// (`model.config`, …) may use any names.
fn find(table: &DeTable<'_>, prefix: &str) -> Option<(String, &'static str, &'static str, usize)> {
    for (key, value) in table {
        let name = key.get_ref();
        let path = if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") };
        let in_matrix = path == "matrix" || path.starts_with("matrix.");
        let hit = RENAMED.iter().find(|(old, _)| {
            path == *old || (in_matrix && (path == format!("matrix.{old}") || name.as_ref() == *old))
        });
        if let Some(&(old, new)) = hit {
            return Some((path, old, new, key.span().start));
        }
        let found = match value.get_ref() {
            DeValue::Table(inner) => find(inner, &path),
            DeValue::Array(items) => items.iter().find_map(|item| match item.get_ref() {
                DeValue::Table(inner) => find(inner, &path),
                _ => None,
            }),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(source: &str) -> ConfigError {
        let root = DeTable::parse(source).expect("TOML");
        check(&root, source, Path::new("c.toml")).expect_err("a renamed key")
    }

    #[test]
    fn an_old_key_is_refused_where_it_is_written_naming_the_new_one() {
        let e = refused("name = \"x\"\n[train]\nepochs = 1\nbatch_per_worker = 16\n");
        assert_eq!((e.line, e.key.as_str()), (4, "train.batch_per_worker"));
        assert!(e.message.contains("write `train.batch_per_replica`"), "{}", e.message);
        let e = refused("train.batch_per_worker = 16\n");
        assert_eq!(e.line, 1);
        let e = refused("[matrix]\n\"train.batch_per_worker\" = [16, 32]\n");
        assert_eq!((e.line, e.key.as_str()), (2, "matrix.train.batch_per_worker"));
        let e = refused("[matrix]\ninclude = [{ \"train.batch_per_worker\" = 8 }]\n");
        assert_eq!(e.line, 2);
        let e = refused("[matrix.train]\nbatch_per_worker = [8, 16]\n");
        assert_eq!((e.line, e.key.as_str()), (2, "matrix.train.batch_per_worker"));
    }

    #[test]
    fn the_new_key_and_unrelated_names_pass() {
        for source in [
            "[train]\nbatch_per_replica = 16\n[data]\nworkers = 4\n[matrix]\n\"train.batch_per_replica\" = [8]\n",
            // A plugin's config is its own: the same words mean what the plugin says.
            "[model]\nplugin = \"x.wasm\"\nconfig = { train = { batch_per_worker = 1 }, \"train.batch_per_worker\" = 2 }\n",
            "[matrix]\n\"model.config\" = [{ train = { batch_per_worker = 1 } }]\n",
        ] {
            let root = DeTable::parse(source).expect("TOML");
            assert!(check(&root, source, Path::new("c.toml")).is_ok(), "{source}");
        }
    }
}

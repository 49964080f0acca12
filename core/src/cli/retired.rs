//! Command-line words renamed since a release accepted them. The old word
//! is refused before anything runs, with the new one named, so a script
//! written for the old name stops at once instead of doing something else.

/// A renamed subcommand: `benchkit OLD` is now `benchkit NEW`.
const COMMANDS: &[(&str, &str)] = &[("plugins", "plugin list")];

/// A renamed option of a subcommand: `benchkit COMMAND OLD` is now `NEW`.
const OPTIONS: &[(&str, &str, &str)] = &[
    ("run", "--shard", "--slice"),
    ("predict", "--nodes", "--machines"),
    ("predict", "--gpus-per-node", "--gpus-per-machine"),
];

/// Why `args` (the whole command line, program name first) is refused,
/// when it uses a renamed word.
pub fn refused(args: &[String]) -> Option<String> {
    let command = args.get(1)?;
    if let Some((old, new)) = COMMANDS.iter().find(|(old, _)| command == old) {
        return Some(format!("`benchkit {old}` was renamed: run `benchkit {new}`"));
    }
    let (_, old, new) = OPTIONS.iter().find(|(c, old, _)| {
        command == c && args[2..].iter().any(|a| a == old || a.starts_with(&format!("{old}=")))
    })?;
    Some(format!("`benchkit {command} {old}` was renamed: use `{new}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(words: &str) -> Vec<String> {
        words.split(' ').map(String::from).collect()
    }

    #[test]
    fn old_words_are_refused_naming_the_new_ones() {
        let said = refused(&line("benchkit run c.toml --shard 0/2")).expect("refused");
        assert!(said.contains("--slice"), "{said}");
        assert!(refused(&line("benchkit run c.toml --shard=auto")).is_some());
        assert!(refused(&line("benchkit predict r --nodes 1,2")).expect("refused").contains("--machines"));
        assert!(refused(&line("benchkit plugins --details"))
            .expect("refused")
            .contains("benchkit plugin list"));
    }

    #[test]
    fn new_words_and_other_commands_pass() {
        assert_eq!(refused(&line("benchkit run c.toml --slice 0/2")), None);
        assert_eq!(refused(&line("benchkit shards pack --shard-size 4MiB")), None);
        assert_eq!(refused(&line("benchkit plugin list")), None);
        assert_eq!(refused(&line("benchkit")), None);
    }
}

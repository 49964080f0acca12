//! The command-line reference, `docs/src/reference/cli.md`, written from
//! clap's own description of the commands (the same text `--help`
//! prints). A test fails when the committed page differs.

use super::Cli;
use clap::CommandFactory;

/// The committed page, relative to the workspace root.
pub const PAGE: &str = "docs/src/reference/cli.md";

/// The page: every visible command, its usage and its arguments.
pub fn markdown() -> String {
    let mut cli = Cli::command();
    cli.build();
    let mut out = String::from(
        "# Command line\n\n\
         <!-- Written by `BENCHKIT_BLESS=1 cargo test -p benchkit cli::reference` from the clap\n\
         definitions in core/src/cli; edit those, not this page. -->\n\n\
         Every command `benchkit` has, as `benchkit <command> --help` prints it. Sizes take\n\
         `K`, `M`, `G` (binary multiples, as `KiB`, `MiB`, `GiB`) or `kB`, `MB`, `GB` (decimal).\n\
         Exit status: 0 success, 1 an error or a failed cell (after everything else is\n\
         written), 3 a regression (`compare`).\n",
    );
    for sub in cli.get_subcommands().filter(|s| shown(s)) {
        command(&mut out, "benchkit", sub);
    }
    out
}

/// Whether a command has a section: not hidden, and not clap's `help`.
fn shown(cmd: &clap::Command) -> bool {
    !cmd.is_hide_set() && cmd.get_name() != "help"
}

/// One command's section, then its own subcommands'.
fn command(out: &mut String, parent: &str, cmd: &clap::Command) {
    let path = format!("{parent} {}", cmd.get_name());
    let about = cmd.get_long_about().or(cmd.get_about()).map(|a| a.to_string()).unwrap_or_default();
    out.push_str(&format!("\n## `{path}`\n\n{}\n", prose(about.trim())));
    let subs: Vec<&clap::Command> = cmd.get_subcommands().filter(|s| shown(s)).collect();
    if subs.is_empty() {
        let usage = cmd.clone().bin_name(&path).render_usage().to_string();
        let usage = usage.trim().trim_start_matches("Usage: ");
        out.push_str(&format!("\n```text\n{usage}\n```\n"));
        arguments(out, cmd);
    }
    for sub in subs {
        command(out, &path, sub);
    }
}

/// The table of a command's arguments and options.
fn arguments(out: &mut String, cmd: &clap::Command) {
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if args.is_empty() {
        return;
    }
    out.push_str("\n| argument | meaning |\n|---|---|\n");
    for arg in args {
        let help = arg.get_long_help().or(arg.get_help()).map(|h| h.to_string()).unwrap_or_default();
        let mut meaning = help.trim().replace('\n', " ");
        if !meaning.is_empty() && !meaning.ends_with('.') {
            meaning.push('.');
        }
        let possible: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        if !possible.is_empty() && arg.get_action().takes_values() {
            meaning.push_str(&format!(" One of: {}.", possible.join(", ")));
        }
        let defaults: Vec<String> =
            arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
        if !defaults.is_empty() && arg.get_action().takes_values() {
            meaning.push_str(&format!(" Default: `{}`.", defaults.join(" ")));
        }
        if arg.is_required_set() && !arg.is_positional() {
            meaning.push_str(" Required.");
        }
        out.push_str(&format!("| `{}` | {} |\n", name(arg), prose(meaning.trim()).replace('|', "\\|")));
    }
}

/// Help text as Markdown prose: `<DIR>` is a placeholder, not an HTML tag.
fn prose(text: &str) -> String {
    text.replace('<', "&lt;").replace('>', "&gt;")
}

/// How an argument is written: `<CONFIG>`, or `-o, --output <OUTPUT>`.
fn name(arg: &clap::Arg) -> String {
    let value = arg
        .get_value_names()
        .map(|v| v.iter().map(|n| format!("<{n}>")).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| format!("<{}>", arg.get_id().as_str().to_uppercase()));
    if arg.is_positional() {
        let many = matches!(arg.get_num_args(), Some(n) if n.max_values() > 1);
        return if many { format!("{value}...") } else { value };
    }
    let mut flag = match (arg.get_short(), arg.get_long()) {
        (Some(s), Some(l)) => format!("-{s}, --{l}"),
        (Some(s), None) => format!("-{s}"),
        (None, Some(l)) => format!("--{l}"),
        (None, None) => arg.get_id().to_string(),
    };
    if arg.get_action().takes_values() {
        flag.push(' ');
        flag.push_str(&value);
    }
    flag
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_committed_page_is_what_clap_says() {
        let page = markdown();
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(PAGE);
        if std::env::var_os("BENCHKIT_BLESS").is_some() {
            std::fs::write(&path, &page).expect("write the reference");
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == page,
            "{PAGE} differs from the commands clap defines; write it anew with \
             BENCHKIT_BLESS=1 cargo test -p benchkit cli::reference"
        );
    }

    #[test]
    fn every_visible_command_has_its_section_and_hidden_ones_none() {
        let page = markdown();
        for name in ["run", "merge", "advise", "validate", "plugin new", "shards pack", "schema"] {
            assert!(page.contains(&format!("## `benchkit {name}`")), "no section for {name}");
        }
        assert!(!page.contains("## `benchkit cell`"), "the hidden cell command is listed");
        assert!(page.contains("`--config-only`"), "validate's --config-only is missing");
        assert!(!page.contains("--mock"), "the hidden --mock flag is listed");
    }
}

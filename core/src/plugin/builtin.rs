//! The plugins compiled from `plugins/` by `build.rs` and embedded in the
//! binary, addressed as `builtin:<name>`.

include!(concat!(env!("OUT_DIR"), "/builtins.rs"));

/// The component bytes of built-in `name`.
pub fn bytes(name: &str) -> Option<&'static [u8]> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// Names of all built-ins, sorted.
pub fn names() -> Vec<&'static str> {
    let mut names: Vec<&str> = BUILTINS.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    names
}

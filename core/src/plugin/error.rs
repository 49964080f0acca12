//! What can go wrong with a plugin, always naming the plugin and the call.

use std::path::PathBuf;

/// An error from loading or calling a plugin. The host stays usable after any of them.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("cannot read plugin {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },

    #[error("unknown built-in plugin `builtin:{name}`; built-ins are: {available}")]
    UnknownBuiltin { name: String, available: String },

    #[error("{origin} is not a valid WebAssembly component: {message}")]
    Compile { origin: String, message: String },

    #[error(
        "{origin} is not a benchkit plugin: it exports none of benchkit:plugin/transformer, \
         describer or sink (it exports: {exports})"
    )]
    NotAPlugin { origin: String, exports: String },

    #[error(
        "{origin} was built for contract benchkit:plugin@{found}, but this benchkit speaks \
         benchkit:plugin@{expected}; rebuild it against benchkit-pdk {expected}"
    )]
    Version { origin: String, found: String, expected: String },

    #[error("{origin} is a {found} plugin, but `{key}` needs a {wanted} plugin")]
    WrongKind { origin: String, found: String, wanted: String, key: String },

    #[error("plugin {plugin} cannot be instantiated: {message}")]
    Instantiate { plugin: String, message: String },

    #[error("plugin {plugin} exceeded its time limit of {limit_ms} ms in `{function}`")]
    Timeout { plugin: String, function: String, limit_ms: u64 },

    #[error(
        "plugin {plugin} exceeded its memory limit of {limit_mib} MiB in `{function}` \
         (it asked for {asked_mib} MiB)"
    )]
    Memory { plugin: String, function: String, limit_mib: u64, asked_mib: u64 },

    #[error("plugin {plugin} crashed in `{function}`: {message}")]
    Trap { plugin: String, function: String, message: String },

    #[error("plugin {plugin}: `{function}` failed: {message}")]
    Guest { plugin: String, function: String, message: String },

    #[error("plugin {plugin} is unusable after an earlier crash in `{function}`")]
    Poisoned { plugin: String, function: String },
}

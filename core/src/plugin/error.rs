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
         benchkit:plugin@{expected}: {why}"
    )]
    Version { origin: String, found: String, expected: String, why: String },

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

    #[error(
        "plugin {plugin} called `{import}` in `{function}`, which benchkit does not grant: plugins \
         get no files, sockets, timers or environment"
    )]
    Denied { plugin: String, function: String, import: String },

    #[error(
        "plugin {plugin} tried to hand the host more than {limit_bytes} bytes in `{function}`, \
         more than that call may carry"
    )]
    Oversized { plugin: String, function: String, limit_bytes: usize },

    #[error(
        "plugin {plugin}: `{function}` returned {count} NaN or infinite values of {total} in {batch}; \
         fix the transform, or set plugins.allow_nonfinite = true to train on them"
    )]
    NonFinite { plugin: String, function: String, batch: String, count: usize, total: usize },

    #[error(
        "plugin {plugin} is too large: {path} has {bytes} bytes, more than the {limit} a component may have"
    )]
    TooLarge { plugin: String, path: PathBuf, bytes: u64, limit: u64 },

    #[error("plugin {plugin} crashed in `{function}`: {message}")]
    Trap { plugin: String, function: String, message: String },

    #[error("plugin {plugin}: `{function}` failed: {message}")]
    Guest { plugin: String, function: String, message: String },

    #[error("plugin {plugin} is unusable after an earlier crash in `{function}`")]
    Poisoned { plugin: String, function: String },
}

impl PluginError {
    /// The plugin at fault and, when a call failed, which one.
    pub fn origin(&self) -> (&str, Option<&str>) {
        match self {
            Self::Read { path, .. } => (path.to_str().unwrap_or("(plugin file)"), None),
            Self::UnknownBuiltin { name, .. } => (name, None),
            Self::Compile { origin, .. }
            | Self::NotAPlugin { origin, .. }
            | Self::Version { origin, .. }
            | Self::WrongKind { origin, .. } => (origin, None),
            Self::Instantiate { plugin, .. } | Self::TooLarge { plugin, .. } => (plugin, None),
            Self::Timeout { plugin, function, .. }
            | Self::Memory { plugin, function, .. }
            | Self::Denied { plugin, function, .. }
            | Self::Oversized { plugin, function, .. }
            | Self::NonFinite { plugin, function, .. }
            | Self::Trap { plugin, function, .. }
            | Self::Guest { plugin, function, .. }
            | Self::Poisoned { plugin, function } => (plugin, Some(function)),
        }
    }

    /// Name the batch a non-finite transform output came from, before
    /// what the check found in it.
    pub fn in_batch(self, label: String) -> Self {
        match self {
            Self::NonFinite { plugin, function, batch, count, total } => {
                Self::NonFinite { plugin, function, batch: format!("{label}, {batch}"), count, total }
            }
            other => other,
        }
    }
}

impl From<PluginError> for crate::data::DataError {
    fn from(error: PluginError) -> Self {
        Self::Transform(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_label_keeps_what_the_check_found() {
        let found = PluginError::NonFinite {
            plugin: "t".into(),
            function: "apply".into(),
            batch: "its channel maps (channel 2: byte × inf + 0)".into(),
            count: 1,
            total: 3,
        };
        let message = found.in_batch("training batch 3 of epoch 1".into()).to_string();
        assert!(
            message.contains("in training batch 3 of epoch 1, its channel maps (channel 2: byte × inf + 0);"),
            "{message}"
        );
        let other = PluginError::Poisoned { plugin: "t".into(), function: "apply".into() };
        assert_eq!(
            other.in_batch("x".into()).to_string(),
            PluginError::Poisoned { plugin: "t".into(), function: "apply".into() }.to_string()
        );
    }
}

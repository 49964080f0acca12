//! On-disk cache of compiled components. Entries are keyed by the engine's
//! compatibility hash and the component's bytes, and carry a digest of their
//! own contents; a file is only deserialised if it sits in a private
//! directory owned by this user and its digest matches, so benchkit never
//! loads native code it did not write. Any cache problem falls back to
//! compiling in memory.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::Engine;

const MAGIC: &[u8; 8] = b"BKCWASM1";

/// Feeds `Hash` output into SHA-256.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of a component's bytes, as lowercase hex (also used in results).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Where compiled components are kept.
#[derive(Clone, Debug)]
pub struct ComponentCache {
    dir: PathBuf,
}

impl ComponentCache {
    /// `$BENCHKIT_CACHE_DIR`, else `$XDG_CACHE_HOME/benchkit/components`,
    /// else `~/.cache/benchkit/components`. `None` when none can be found.
    pub fn from_env() -> Option<Self> {
        let dir = if let Some(dir) = std::env::var_os("BENCHKIT_CACHE_DIR") {
            PathBuf::from(dir)
        } else if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME") {
            PathBuf::from(xdg).join("benchkit/components")
        } else {
            PathBuf::from(std::env::var_os("HOME")?).join(".cache/benchkit/components")
        };
        Some(Self { dir })
    }

    /// A cache in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn key(engine: &Engine, bytes: &[u8]) -> String {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        hasher.0.update(bytes);
        hex(&hasher.0.finalize())
    }

    /// Compile `bytes`, or load the artifact this cache wrote for them earlier.
    pub fn load_or_compile(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
        let path = self.dir.join(format!("{}.cwasm", Self::key(engine, bytes)));
        if let Some(component) = self.load(engine, &path) {
            return Ok(component);
        }
        let component = Component::new(engine, bytes)?;
        // Failing to store is not an error: the next run compiles again.
        let _ = component.serialize().map(|artifact| self.store(&path, &artifact));
        Ok(component)
    }

    fn private_dir(&self) -> bool {
        owned_and_private(&self.dir)
    }

    fn load(&self, engine: &Engine, path: &Path) -> Option<Component> {
        if !self.private_dir() || !owned_and_private(path) {
            return None;
        }
        let data = std::fs::read(path).ok()?;
        let (header, artifact) = data.split_at_checked(MAGIC.len() + 32)?;
        if &header[..MAGIC.len()] != MAGIC || header[MAGIC.len()..] != Sha256::digest(artifact)[..] {
            return None;
        }
        // SAFETY: the artifact was produced by `Component::serialize` in this
        // cache (private directory, owner checked, digest verified), and
        // `deserialize` itself rejects artifacts from an incompatible engine.
        unsafe { Component::deserialize(engine, artifact) }.ok()
    }

    fn store(&self, path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        create_private_dir(&self.dir)?;
        if !self.private_dir() {
            return Err(std::io::Error::other("cache directory is not private"));
        }
        let mut data = Vec::with_capacity(MAGIC.len() + 32 + artifact.len());
        data.extend_from_slice(MAGIC);
        data.extend_from_slice(&Sha256::digest(artifact));
        data.extend_from_slice(artifact);
        crate::atomic::write_atomic_with(path, &data, set_private)
    }
}

#[cfg(unix)]
fn owned_and_private(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc_getuid() };
    std::fs::symlink_metadata(path)
        .map(|m| m.uid() == uid && m.mode() & 0o022 == 0 && !m.file_type().is_symlink())
        .unwrap_or(false)
}

#[cfg(unix)]
extern "C" {
    #[link_name = "getuid"]
    fn libc_getuid() -> u32;
}

#[cfg(unix)]
fn set_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = if path.is_dir() { 0o700 } else { 0o600 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        std::fs::create_dir_all(dir)?;
        set_private(dir)?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn owned_and_private(path: &Path) -> bool {
    path.exists()
}

#[cfg(not(unix))]
fn set_private(_: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

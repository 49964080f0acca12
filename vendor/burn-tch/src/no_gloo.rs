//! The Gloo API of a build that found no gloo headers: joining a group is
//! an error that says how to get one.

const MISSING: &str = "this build has no Gloo: gloo's headers were not found when LibTorch's C++ was compiled; install them (Debian: apt-get install libgloo-dev) or set GLOO_INCLUDE, then rebuild";

/// A Gloo process group; none can be made in this build.
pub struct GlooGroup {
    _none: (),
}

/// An all-reduce under way; none can start in this build.
pub struct GlooWork<'a> {
    _buffer: std::marker::PhantomData<&'a mut [f32]>,
}

impl GlooGroup {
    /// Always an error: this build has no Gloo.
    pub fn new(
        _store_host: &str,
        _store_port: u16,
        _host: &str,
        _rank: usize,
        _size: usize,
        _timeout: std::time::Duration,
    ) -> Result<Self, String> {
        Err(MISSING.into())
    }

    /// Never reached: no group can be made.
    pub fn start<'a>(&mut self, _buffer: &'a mut [f32]) -> Result<GlooWork<'a>, String> {
        Err(MISSING.into())
    }

    /// Never reached: no group can be made.
    pub fn all_reduce(&mut self, _buffer: &mut [f32]) -> Result<(), String> {
        Err(MISSING.into())
    }
}

impl GlooWork<'_> {
    /// Never reached: no work can start.
    pub fn wait(self) -> Result<(), String> {
        Err(MISSING.into())
    }
}

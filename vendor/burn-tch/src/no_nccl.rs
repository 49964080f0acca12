//! The NCCL API of a build without it: joining a group is an error that
//! says how to get one.

const MISSING: &str = "this build has no NCCL: it needs a CUDA LibTorch (PyPI's torch wheel for Linux) and CUDA's headers beside it when LibTorch's C++ is compiled (pip install nvidia-cuda-nvcc-cu12 nvidia-cuda-cccl-cu12 into the same environment, or set CUDA_HOME), then a rebuild";

/// An NCCL process group; none can be made in this build.
pub struct NcclGroup {
    _none: (),
}

/// An all-reduce under way; none can start in this build.
pub struct NcclWork<'a> {
    _tensor: std::marker::PhantomData<&'a mut tch::Tensor>,
}

impl NcclGroup {
    /// Always an error: this build has no NCCL.
    pub fn new(
        _store_host: &str,
        _store_port: u16,
        _rank: usize,
        _size: usize,
        _timeout: std::time::Duration,
    ) -> Result<Self, String> {
        Err(MISSING.into())
    }

    /// Never reached: no group can be made.
    pub fn start<'a>(&'a mut self, _tensor: &'a mut tch::Tensor) -> Result<NcclWork<'a>, String> {
        Err(MISSING.into())
    }

    /// Never reached: no group can be made.
    pub fn all_reduce(&mut self, _tensor: &mut tch::Tensor) -> Result<Option<f64>, String> {
        Err(MISSING.into())
    }

    /// Never reached: no group can be made.
    pub fn all_reduce_repeated(&mut self, _tensor: &mut tch::Tensor, _n: usize) -> Result<(), String> {
        Err(MISSING.into())
    }
}

impl NcclWork<'_> {
    /// Never reached: no work can start.
    pub fn wait(self) -> Result<Option<f64>, String> {
        Err(MISSING.into())
    }
}

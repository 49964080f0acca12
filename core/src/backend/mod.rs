//! Which burn backend and device a cell trains on. This is the only place
//! that names concrete burn backends; training code is generic over them.

use crate::train::{CellJob, TrainError, TrainOutcome};
use burn::backend::Autodiff;
use serde::{Deserialize, Serialize};

/// A burn backend benchkit can train on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// burn-flex: portable SIMD CPU backend.
    Flex,
    /// burn-cuda (needs `--features cuda`).
    Cuda,
}

impl BackendKind {
    /// Names accepted in configs.
    pub const NAMES: &'static [&'static str] = &["flex", "cuda"];

    /// Whether this binary was built with the backend.
    pub fn compiled(self) -> bool {
        match self {
            BackendKind::Flex => true,
            BackendKind::Cuda => cfg!(feature = "cuda"),
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BackendKind::Flex => "flex",
            BackendKind::Cuda => "cuda",
        })
    }
}

/// Train one cell on `kind`'s default device.
pub fn train_cell(kind: BackendKind, job: CellJob<'_>) -> Result<TrainOutcome, TrainError> {
    match kind {
        BackendKind::Flex => {
            let devices = vec![burn::backend::flex::FlexDevice; job.plan.parallel.devices];
            crate::train::train::<Autodiff<burn::backend::Flex>>(devices, job)
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            let devices = (0..job.plan.parallel.devices).map(burn::backend::cuda::CudaDevice::new).collect();
            crate::train::train::<Autodiff<burn::backend::Cuda>>(devices, job)
        }
        #[cfg(not(feature = "cuda"))]
        BackendKind::Cuda => {
            Err(TrainError::Backend("this benchkit was built without `--features cuda`".into()))
        }
    }
}

//! Data sources and the loader. Sources produce labelled u8 images; the
//! loader batches them through the transform plugin for the step loop.

pub mod dataset;
mod error;
pub mod idx;
pub mod loader;

pub use dataset::{load_idx, Dataset, ImageSet};
pub use error::DataError;
pub use loader::{Batch, Loader, LoaderConfig};

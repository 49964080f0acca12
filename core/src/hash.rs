//! FNV-1a (64-bit), defined once in the schema crate
//! ([`benchkit_schema::hash`]): seeds, tags and fingerprints the same on
//! every machine and run.

pub use benchkit_schema::hash::{fnv1a, fnv1a_extend, FNV_OFFSET};

//! The formats datasets come in, one reader each: every one lists a
//! split's labelled samples and reads them ([`super::source`]), checking
//! what its files declare before it allocates. The loader ([`super::loader`])
//! knows none of them by name.
//!
//! Files a sample at a time: [`idx`] (MNIST), [`cifar`], [`folder`] (an image
//! folder, [`ilsvrc`]'s flat `val/` among them, its devkit read by
//! [`matfile`]), [`captions`], [`multilabel`] (ChestX-ray14), [`voc`]
//! (detection). Packed: [`shards`] (benchkit's record shards) and
//! [`streamed`] (TFRecord, WebDataset). And [`synthetic`], no files at all.

pub mod captions;
pub(crate) mod cifar;
pub mod folder;
pub mod idx;
pub(crate) mod ilsvrc;
pub(crate) mod matfile;
pub mod multilabel;
pub mod shards;
pub mod streamed;
pub mod synthetic;
pub mod voc;

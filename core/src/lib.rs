//! benchkit: benchmarks deep-learning training for computer vision.
//!
//! A config names a model plugin, a transform plugin, data and training
//! settings; [`runner::run`] trains it with burn and reports throughput,
//! step-time statistics, the data-wait share and accuracy through reporter
//! plugins.
//!
//! Data flows `config` -> `plugin` -> `data` -> `model` -> `train` (on a
//! `backend`, timed by `measure`) -> `report`, with `runner` driving a run and
//! `cli` the thin command layer on top. No two top-level modules name each
//! other (`layering` tests it); `docs/src/architecture.md` draws the house.

pub mod advise;
pub mod analysis;
pub mod atomic;
pub mod backend;
pub mod bounds;
pub mod child;
pub mod cli;
pub mod config;
pub mod conformance;
pub mod data;
pub mod export;
pub mod hash;
pub mod history;
pub mod interconnect;
mod layering;
pub mod measure;
pub mod model;
pub mod netns;
pub mod plugin;
pub mod predict;
pub mod report;
pub mod runner;
pub mod scaffold;
pub mod skip;
pub mod train;
pub mod units;
#[cfg(test)]
mod words;

//! benchkit: benchmarks deep-learning training for computer vision.
//!
//! A config names a model plugin, a transform plugin, data and training
//! settings; [`runner::run`] trains it with burn and reports throughput,
//! step-time statistics, the data-wait share and accuracy through reporter
//! plugins. Data flows top to bottom through the modules below.

pub mod cli;
pub mod config;
pub mod plugin;
pub mod data;
pub mod model;
pub mod train;
pub mod backend;
pub mod measure;
pub mod runner;
pub mod report;

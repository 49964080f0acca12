//! benchkit's integration tests: one binary, a module per topic, so the
//! library, burn and wasmtime are linked once. Each drives the real
//! `benchkit` binary or the library's public API on real (small) data;
//! `common` holds the shared setup. The LibTorch modules (`tch`, `pytorch`)
//! are compiled with `--features tch` alone.

mod common;

mod advise;
mod book;
mod boundary;
mod cli;
mod cluster;
mod compat;
mod data;
mod detection;
mod distributed;
mod docs;
mod formats;
mod history;
mod hostile;
mod launchers;
mod matrix;
mod models;
mod network;
mod ops;
mod pipeline;
mod plugin_sdk;
mod pytorch;
mod ray;
mod report_page;
mod reporters;
mod results;
mod sandbox;
mod stragglers;
mod studies;
mod tch;
mod timeline;
mod transforms;
mod wgpu;

//! `benchkit predict`: its options, and the prediction ([`crate::predict::driver`])
//! printed and written beside the run as `predict.json` and `predict.html`.

use super::CliError;
use crate::predict::driver::{self, Request};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct PredictArgs {
    /// A results directory holding a single-replica cell.
    pub results: PathBuf,
    /// The cell to predict from: its id, or its index in the matrix from 0 [default: the only single-replica cell].
    #[arg(long)]
    pub cell: Option<String>,
    /// The link between machines: a preset (pcie4, pcie5, nvlink4, ib100, ib200, ib400, 25gbe, 100gbe), a rate (10gbit, 100mbit) or a `benchkit collective` result.
    #[arg(long, default_value = "10gbit")]
    pub link: String,
    /// Replicas a machine.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub gpus_per_machine: u64,
    /// Machine counts to predict for, e.g. `1,2,4,64` (replicas = machines × --gpus-per-machine)
    /// [default: 1 to 1,024 replicas in powers of two].
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub machines: Vec<u64>,
    /// The link inside a machine [default: --link].
    #[arg(long)]
    pub intra: Option<String>,
    /// Largest gradient bucket, in MiB (each is its own all-reduce).
    #[arg(long, default_value_t = 25.0)]
    pub bucket_mib: f64,
    /// Buckets go out while the backward pass runs (as DDP, Horovod and
    /// benchkit's Gloo send them) [default: after it].
    #[arg(long)]
    pub overlap: bool,
}

pub fn predict(args: &PredictArgs) -> Result<(), CliError> {
    let fail = CliError::Predict;
    let request = Request {
        results: args.results.clone(),
        cell: args.cell.clone(),
        link: args.link.clone(),
        intra: args.intra.clone(),
        gpus_per_machine: args.gpus_per_machine as usize,
        machines: args.machines.clone(),
        bucket_mib: args.bucket_mib,
        overlap: args.overlap,
    };
    let prediction = driver::from_results(&request).map_err(fail)?;
    print!("{}", prediction.text());
    let json = serde_json::to_string_pretty(&prediction.json()).map_err(|e| fail(e.to_string()))?;
    for (out, text) in [("predict.json", json), ("predict.html", prediction.page())] {
        let out = args.results.join(out);
        crate::atomic::write_atomic(&out, text.as_bytes())
            .map_err(|e| fail(format!("cannot write {}: {e}", out.display())))?;
        println!("wrote {}", out.display());
    }
    Ok(())
}

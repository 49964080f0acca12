//! A `pytorch` row of the matrix: the cell's script, as `benchkit export
//! torch` writes it, trained in PyTorch itself.

use super::{torch_script, CellFacts, ExportError};
use crate::data::SourceKind;
use crate::train::TrainOutcome;
use benchkit_schema::Engine;

/// Train the cell of `facts` in PyTorch: its script written to a folder of
/// this process's own and run by the row's Python. The script makes
/// synthetic batches of the cell's shape; a cell that reads other data says
/// so in the result.
pub fn train_in_pytorch(facts: &CellFacts<'_>) -> Result<(TrainOutcome, Engine), ExportError> {
    let plan = &facts.cell.plan;
    let script = torch_script(facts)?;
    let data = (plan.data.source != SourceKind::Synthetic).then(|| {
        format!(
            "synthetic images of the cell's shape {:?}, not its {} data",
            facts.graph.input_shape(),
            plan.data.source
        )
    });
    let mut args = Vec::new();
    if let Some(threads) = plan.train.parallel.threads_per_device {
        args.extend(["--threads".to_string(), threads.to_string()]);
    }
    // A folder of this process's own, made fresh (mkdtemp: a random name,
    // mode 0700): on a shared machine no other user can have planted it or
    // swap the script inside before Python runs it. Removed when dropped.
    let dir = tempfile::Builder::new().prefix("benchkit-pytorch-").tempdir().map_err(|source| {
        ExportError::Write { path: std::env::temp_dir().join("benchkit-pytorch-*"), source }
    })?;
    let ops = plan.train.ops.then(|| crate::train::pytorch::OpShape {
        graph: facts.graph,
        checks: plan.train.op_checks,
        batch: plan.train.local_batch(),
        value_bytes: plan.train.precision.bytes() as usize,
    });
    Ok(crate::train::pytorch::train(plan.backend, &script, &args, dir.path(), data, ops)?)
}

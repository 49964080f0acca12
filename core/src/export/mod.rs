//! `benchkit export torch`: a cell as a standalone PyTorch script. The script
//! holds the cell's model graph as `torch.nn` code (same layers, parameter
//! order and count), its recipe (SGD, schedule, batch, warm-up rule, float
//! format, timing) and a step loop timed as benchkit times one, on synthetic
//! data of the cell's shape. Nothing here touches burn.

mod row;
mod torch;

pub use row::train_in_pytorch;

use crate::config::Cell;
use crate::model::Graph;
use crate::train::{Task, TrainError};

/// Why a cell cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{config}: no cell `{name}`; its cells: {cells}")]
    NoSuchCell { config: String, name: String, cells: String },
    #[error("{config} has {count} cells; choose one with --cell: {cells}")]
    WhichCell { config: String, count: usize, cells: String },
    #[error("cell {cell}: {message}")]
    Graph { cell: String, message: String },
    #[error("cell {cell}: {source}")]
    Steps { cell: String, source: TrainError },
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error("cannot write {path}: {source}")]
    Write { path: std::path::PathBuf, source: std::io::Error },
}

/// The cell of `cells` named `name` (its id, its file-name slug or its
/// position from 0), or the only cell when no name is given.
pub fn pick<'a>(cells: &'a [Cell], name: Option<&str>, config: &str) -> Result<&'a Cell, ExportError> {
    let list = || cells.iter().map(|c| format!("`{}`", c.id)).collect::<Vec<_>>().join(", ");
    match name {
        Some(name) => {
            cells.iter().find(|c| c.id == name || c.slug == name || c.index.to_string() == name).ok_or_else(
                || ExportError::NoSuchCell { config: config.into(), name: name.into(), cells: list() },
            )
        }
        None if cells.len() == 1 => Ok(&cells[0]),
        None => Err(ExportError::WhichCell { config: config.into(), count: cells.len(), cells: list() }),
    }
}

/// What the script needs to know of the cell besides its graph.
pub struct CellFacts<'a> {
    pub cell: &'a Cell,
    pub graph: &'a Graph,
    pub task: Task,
    /// The model plugin's name and version.
    pub model: String,
    /// Training steps an epoch has in benchkit (full global batches, capped).
    pub steps_per_epoch: usize,
    /// Images benchkit evaluates after each epoch (the test split's).
    pub test_images: usize,
}

impl<'a> CellFacts<'a> {
    /// The facts of `cell` as benchkit trains it, with `graph`, `task` and
    /// `model` from its prepared plugins and `(train, test)` images: the
    /// one place a script's facts are made, for `benchkit export torch` and
    /// for a `pytorch` row alike.
    pub fn of(
        cell: &'a Cell,
        graph: &'a Graph,
        task: Task,
        model: String,
        (train_images, test_images): (usize, usize),
    ) -> Result<Self, ExportError> {
        let steps_per_epoch =
            crate::train::optim::lr_schedule::steps_per_epoch(&cell.plan.train, train_images)
                .map_err(|source| ExportError::Steps { cell: cell.id.clone(), source })?;
        Ok(Self { cell, graph, task, model, steps_per_epoch, test_images })
    }
}

/// The cell's facts the script reads: its recipe, shapes and task.
fn cell_json(facts: &CellFacts<'_>) -> serde_json::Value {
    let plan = &facts.cell.plan;
    let train = &plan.train;
    let replicas = train.replicas().max(1);
    let task = match facts.task {
        Task::Classify => "classify",
        Task::MultiLabel => "multi-label",
        Task::Caption { .. } => "caption",
        Task::Detect(_) => "detect",
    };
    let tokens = match facts.task {
        Task::Caption { max_tokens } => Some(max_tokens),
        _ => None,
    };
    serde_json::json!({
        "config": plan.file.display().to_string(),
        "cell": facts.cell.id,
        "model": facts.model,
        "backend": plan.backend.name(),
        "device": if plan.backend.is_gpu() { "cuda" } else { "cpu" },
        "precision": train.precision.name(),
        "timing": train.timing.name(),
        "threads": train.parallel.threads_per_device.filter(|_| !train.parallel.threads_shared),
        "seed": plan.seed,
        "params": facts.graph.num_params(),
        "nodes": facts.graph.nodes.len(),
        // Each node's inputs and shape (batch left out), for the ops timed alone.
        "node_inputs": facts.graph.nodes.iter().map(|n| n.inputs.clone()).collect::<Vec<_>>(),
        "shapes": facts.graph.nodes.iter().map(|n| n.shape.clone()).collect::<Vec<_>>(),
        "graph_inputs": facts.graph.nodes.iter().enumerate()
            .filter(|(_, n)| matches!(n.op, crate::model::Op::Input | crate::model::Op::Tokens))
            .map(|(i, _)| i).collect::<Vec<_>>(),
        "input": facts.graph.input_shape(),
        "task": task,
        // Classes, labels or the vocabulary: the last axis of the output.
        "outputs": facts.graph.output_shape().last().copied().unwrap_or(0),
        "tokens": tokens,
        "start_token": crate::data::formats::captions::START,
        "batch": train.batch_size / replicas,
        "replicas": replicas,
        "bucket_mib": train.parallel.bucket_mib,
        "epochs": train.epochs,
        "steps_per_epoch": facts.steps_per_epoch,
        "test_images": facts.test_images,
        "eval_batch": train.eval_batch_size,
        "warmup_steps": train.warmup_steps,
        "lr": train.lr,
        "peak_lr": train.peak_lr(),
        "warmup_epochs": train.warmup_epochs,
        "lr_schedule": train.lr_schedule,
        "momentum": train.momentum,
        "nesterov": train.nesterov,
        "weight_decay": train.weight_decay,
    })
}

/// The standalone PyTorch script of a cell.
pub fn torch_script(facts: &CellFacts<'_>) -> Result<String, ExportError> {
    let plan = &facts.cell.plan;
    let train = &plan.train;
    let replicas = train.replicas().max(1);
    if let Task::Detect(_) = facts.task {
        let message = "the PyTorch script trains classifiers and captioners; compare a detector with torchvision's ssd300_vgg16".into();
        return Err(ExportError::Graph { cell: facts.cell.id.clone(), message });
    }
    let cell = cell_json(facts);
    let net = torch::net(facts.graph)
        .map_err(|message| ExportError::Graph { cell: facts.cell.id.clone(), message })?;
    // A JSON string is a valid Python string literal: the cell's facts reach
    // the script as data, whatever a config or plugin put in them.
    let literal = serde_json::to_string(&cell.to_string()).unwrap_or_default();
    let one_replica = if replicas > 1 {
        format!(
            "\nbenchkit trained it on {replicas} replicas at a global batch of {}. Run alone, this\nscript trains one replica at its share of the batch; under torchrun it trains\none replica a process with PyTorch DDP (Gloo on CPUs, NCCL on GPUs, {} MiB\nbuckets) and rank 0 prints the total:\n\n    torchrun --nproc-per-node {replicas} {{this file}}\n",
            train.batch_size, train.parallel.bucket_mib
        )
    } else {
        String::new()
    };
    Ok(format!(
        r#"#!/usr/bin/env python3
"""Cell {id} of {config}, in PyTorch.

Written by `benchkit export torch`: the cell's model ({model}, {params}
parameters) as torch.nn code, trained with its recipe (SGD, learning-rate
schedule, batch, float format) on synthetic data of its shape, each step
timed as benchkit times one: from asking for the batch to the end of the
optimizer step, the device synchronised after every step with timing "step",
the first warm-up steps left out. Prints what it measured, then one JSON line.
{one_replica}
    python {{this file}} [--device cuda] [--threads N] [--compile]
"""

import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

CELL = json.loads({literal})

{ops}
{net}{main}"#,
        id = sanitize(&facts.cell.id),
        config = sanitize(&plan.file.display().to_string()),
        model = sanitize(&facts.model),
        params = facts.graph.num_params(),
        ops = include_str!("torch_ops.py"),
        main = include_str!("torch_main.py"),
    ))
}

/// `text` safe inside a Python docstring or comment: printable, no quotes
/// or backslashes that could end or escape it.
fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_alphanumeric() || " ._-/=,:+()[]{}<>@#%&*".contains(c) { c } else { '?' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape_a_comment_or_docstring() {
        assert_eq!(sanitize("layer1.0.conv1"), "layer1.0.conv1");
        assert_eq!(sanitize("a\"\"\"\nimport os\\x"), "a????import os?x");
        assert_eq!(sanitize("x'; y\r"), "x?? y?");
    }
}

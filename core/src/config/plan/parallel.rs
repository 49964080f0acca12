//! How a cell's model is placed: its processes and how they start and
//! meet, its replicas and their all-reduce, the pipeline stages of a model
//! cut across devices, and the emulated link between processes.

use super::CollectiveKind;
use crate::backend::Precision;
use crate::config::address::HostPort;
use crate::config::link::LinkRate;
use serde::{Deserialize, Serialize};

/// How the processes of a multi-process cell start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Launch {
    /// `benchkit run` starts every process on this machine.
    #[default]
    Local,
    /// Each machine runs `benchkit run` itself, its rank from `BENCHKIT_RANK`,
    /// `distributed.rank` or the launcher's environment.
    External,
}

/// How burn-collective all-reduces the replicas' gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllReduce {
    Ring,
    /// A binary tree.
    Tree,
    /// One replica sums and sends back.
    Centralized,
}

/// Data parallelism within one process: `devices` replicas of the model,
/// each on its own GPU (on the CPU backend, each with its own pool of
/// `threads_per_device` threads) taking `batch_size / devices` images of
/// every global batch; gradients are averaged by an all-reduce every step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Parallel {
    pub devices: usize,
    pub strategy: AllReduce,
    /// What carries the all-reduces between processes.
    #[serde(default = "burn_collective")]
    pub collective: CollectiveKind,
    /// Largest gradient bucket a host collective all-reduces while the
    /// backward pass runs, in MiB (PyTorch DDP's default, 25).
    #[serde(default = "default_bucket_mib")]
    pub bucket_mib: f64,
    /// The link as `benchkit collective` measured it, to set each cell's
    /// achieved bandwidth against (`distributed.interconnect`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interconnect: Option<Interconnect>,
    /// CPU backend: the threads each replica computes with; all cores shared
    /// when absent. Several processes on one machine share its cores by
    /// default (see `validate`'s `share_cores`).
    pub threads_per_device: Option<usize>,
    /// `threads_per_device` is this machine's share of its cores, not the
    /// config's: a script exported to run elsewhere leaves it out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub threads_shared: bool,
    /// The network between the processes of a local launch: loopback, or
    /// links shaped to a rate between network namespaces.
    #[serde(default, skip_serializing_if = "LinkRate::is_host")]
    pub link: LinkRate,
    /// Processes (ranks) training each cell together, each with `devices` replicas.
    pub processes: usize,
    pub launch: Launch,
    /// This process's rank, for an external launch.
    pub rank: usize,
    /// This process's rank among those on its machine: its devices are the
    /// `devices` after the first `local_rank × devices`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub local_rank: usize,
    /// The processes of this cell on this process's machine, which share
    /// its memory: all of them in a local launch; in an external launch,
    /// what the launcher says (`LOCAL_WORLD_SIZE`, …; 1 where it says
    /// nothing), at least `local_rank + 1` and at most `processes`.
    #[serde(skip_serializing_if = "is_one")]
    pub machine_processes: usize,
    /// Where an external launch's rank, world size, local rank and
    /// coordinator came from, e.g. `RANK=1`, `distributed.coordinator`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launched_by: Vec<String>,
    /// What started the processes: `benchkit` (a local launch), or an
    /// external launcher's name (`torchrun`, `slurm`, `openmpi`, `mpich`,
    /// `kubernetes`, `ray`, or what `BENCHKIT_LAUNCHER` says); `None` with
    /// one process, or when the config's keys alone placed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<String>,
    /// The global orchestrator's address; a free local port when absent.
    pub coordinator: Option<HostPort>,
    /// First data-service port; free local ports when absent.
    pub data_port: Option<u16>,
    /// The address other processes reach this one at: for an external
    /// launch, the address this machine reaches the coordinator from when absent.
    pub host: Option<String>,
    /// How long to wait for peers before giving up.
    pub timeout_s: f64,
    /// Pipeline parallelism instead of data-parallel replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<StagedPipeline>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

impl Parallel {
    /// [`Parallel::bucket_mib`] in bytes, at least one.
    pub fn bucket_bytes(&self) -> usize {
        ((self.bucket_mib * 1024.0 * 1024.0) as usize).max(1)
    }

    /// Bytes one gradient value takes in this layout's all-reduce when
    /// trained in `precision`: on the wire of [`Parallel::collective`]
    /// across `processes` processes; within one process, the replicas sum
    /// tensors in their own format.
    pub fn gradient_value_bytes(&self, precision: Precision, processes: usize) -> usize {
        if processes > 1 {
            self.collective.wire_bytes_per_value(precision)
        } else {
            precision.bytes() as usize
        }
    }

    /// The devices a cell trains on: one per replica, or the pipeline's.
    pub fn device_count(&self) -> usize {
        self.pipeline.as_ref().map_or(self.devices, |p| p.devices)
    }
}

/// Pipeline parallelism as GPipe does it: the model cut into `stages` that
/// run concurrently, each global batch cut into `micro_batches` that flow
/// forward through the stages and then back, gradients accumulated over
/// them and one optimizer step per global batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StagedPipeline {
    pub stages: usize,
    pub micro_batches: usize,
    pub balance: Balance,
    pub checkpoint: Checkpoint,
    /// Devices the stages are placed on, in contiguous groups (one per
    /// stage by default; several stages may share one).
    pub devices: usize,
}

/// How a pipeline's stages share the model's nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// By each node's estimated forward cost: multiply-accumulates and values written.
    #[default]
    Estimated,
    /// By each node's forward time, measured on one micro-batch before training.
    Measured,
    /// Nodes per stage, in graph order.
    Nodes(Vec<usize>),
}

impl Balance {
    /// The name results use: `estimated`, `measured` or `given`.
    pub fn name(&self) -> &'static str {
        match self {
            Balance::Estimated => "estimated",
            Balance::Measured => "measured",
            Balance::Nodes(_) => "given",
        }
    }
}

/// GPipe's re-materialisation: which micro-batches keep their stage's
/// activations for the backward pass, and which keep only the stage's
/// inputs and recompute the rest when their backward pass comes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Checkpoint {
    /// Every micro-batch keeps its activations.
    Never,
    /// All but the last micro-batch, whose backward pass comes first (GPipe's default).
    #[default]
    ExceptLast,
    /// Every micro-batch recomputes.
    Always,
}

impl Checkpoint {
    /// The name configs and results use.
    pub fn name(self) -> &'static str {
        match self {
            Checkpoint::Never => "never",
            Checkpoint::ExceptLast => "except-last",
            Checkpoint::Always => "always",
        }
    }

    /// Whether micro-batch `m` of `count` recomputes its activations.
    pub fn recomputes(self, m: usize, count: usize) -> bool {
        match self {
            Checkpoint::Never => false,
            Checkpoint::ExceptLast => m + 1 < count,
            Checkpoint::Always => true,
        }
    }
}

fn burn_collective() -> CollectiveKind {
    CollectiveKind::Burn
}

/// A `benchkit collective` sweep a config names: its file, and its
/// busbw at each size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interconnect {
    pub file: String,
    pub collective: String,
    pub ranks: usize,
    /// `(bytes, busbw GB/s)` per size.
    pub busbw: Vec<(u64, f64)>,
}

fn default_bucket_mib() -> f64 {
    25.0
}

impl Default for Parallel {
    fn default() -> Self {
        Self {
            devices: 1,
            strategy: AllReduce::Ring,
            collective: CollectiveKind::Burn,
            bucket_mib: default_bucket_mib(),
            interconnect: None,
            threads_per_device: None,
            threads_shared: false,
            link: LinkRate::Host,
            processes: 1,
            launch: Launch::Local,
            rank: 0,
            local_rank: 0,
            machine_processes: 1,
            launched_by: Vec::new(),
            launcher: None,
            coordinator: None,
            data_port: None,
            host: None,
            timeout_s: 60.0,
            pipeline: None,
        }
    }
}

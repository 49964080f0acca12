//! `benchkit plugin check`: load a component in the sandbox as a run would,
//! say what it is, and exercise it once as a run would: a model's graph
//! described and checked, a transform's batch applied and timed, a
//! reporter fed a recorded run's events. Whatever fails (a limit, a trap, a
//! refused config) ends the check with the error that names it.

use crate::model::{Graph, GraphError};
use crate::plugin::text::clean_line;
use crate::plugin::{
    ImageShape, InputSpec, Limits, PixelBatch, PluginError, PluginHost, PluginKind, PluginSource,
};
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// What to exercise the plugin with.
#[derive(Clone, Debug)]
pub struct CheckInput {
    /// The plugin's config table, as JSON.
    pub config: String,
    /// Image shape a model is described for and a transform gets and returns.
    pub shape: ImageShape,
    /// A model's classes.
    pub classes: u32,
    /// Images in the transform's batch (and the batch a model's memory is estimated at).
    pub batch: u32,
    /// Timed `apply` calls after a first, untimed one.
    pub repeats: u32,
    /// A run's `events.jsonl` for a reporter; `None`: a recorded sample run.
    pub events: Option<String>,
}

/// Everything the check found; `failure` is set when it did not pass.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CheckReport {
    pub file: String,
    pub passed: bool,
    pub bytes: u64,
    /// Compiling (or reading from the cache), linking, instantiating and `info`.
    pub load_ms: Option<f64>,
    pub name: Option<String>,
    pub version: Option<String>,
    pub kind: Option<String>,
    pub description: Option<String>,
    /// The contract version the plugin was built for, and this benchkit's.
    pub contract: Option<String>,
    pub host_contract: String,
    /// The config keys it declares, with what each does.
    pub config_keys: Vec<ConfigKey>,
    pub limits: Limits,
    pub model: Option<ModelCheck>,
    pub transform: Option<TransformCheck>,
    pub reporter: Option<ReporterCheck>,
    pub failure: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ConfigKey {
    pub key: String,
    pub help: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ModelCheck {
    pub input: [u32; 3],
    pub classes: u32,
    pub describe_ms: f64,
    pub nodes: usize,
    pub parameters: usize,
    /// Forward multiply-adds per sample.
    pub macs: u64,
    /// What training at `batch` images a step needs in f32, by the graph's estimate.
    pub batch: u32,
    pub train_memory_mib: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TransformCheck {
    /// `f32`, or `u8` with a per-channel map the host applies (the byte transform).
    pub returns: &'static str,
    pub input: [u32; 3],
    pub output: [u32; 3],
    pub batch: u32,
    pub create_ms: f64,
    pub first_ms: f64,
    /// Median of the timed calls.
    pub batch_ms: f64,
    pub images_per_s: f64,
    /// The mean of the values it returned for the check's batch (fixed
    /// pixels, seed 7, augmented): equal for transforms that agree.
    pub mean: f64,
    pub memory_mib: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ArtifactSize {
    pub name: String,
    pub bytes: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReporterCheck {
    /// `sample` or the events file given.
    pub events_from: String,
    pub events: usize,
    pub create_ms: f64,
    /// Mean time per event.
    pub event_ms: f64,
    pub finish_ms: f64,
    pub artifacts: Vec<ArtifactSize>,
    pub memory_mib: f64,
}

/// The most bytes of a config key's name or help text shown.
const KEY_BYTES: usize = 512;

/// The most bytes of pixels a check's transform batch may take.
const MAX_BATCH_BYTES: usize = 4 << 30;

/// A recorded run's events (a two-cell mock run of the quickstart model),
/// for reporters when no events are given.
const SAMPLE_EVENTS: &str = include_str!("sample_events.jsonl");

/// Why a check could not finish, beyond the plugin's own errors.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error("{0}")]
    Other(String),
}

/// Check the component at `path`, or a built-in plugin (`builtin:<name>`).
pub fn check(host: &PluginHost, path: &Path, input: &CheckInput) -> CheckReport {
    let source = PluginSource::parse(&path.to_string_lossy(), Path::new(""));
    let bytes = match &source {
        PluginSource::Builtin(name) => crate::plugin::builtin::bytes(name).map(|b| b.len() as u64),
        PluginSource::Path(path) => std::fs::metadata(path).map(|m| m.len()).ok(),
    };
    let mut report = CheckReport {
        file: source.to_string(),
        bytes: bytes.unwrap_or(0),
        host_contract: crate::plugin::CONTRACT_VERSION.to_string(),
        limits: host.limits(),
        ..CheckReport::default()
    };
    if let Err(e) = run(host, &source, input, &mut report) {
        report.failure = Some(e.to_string());
    }
    report.passed = report.failure.is_none();
    report
}

fn run(
    host: &PluginHost,
    source: &PluginSource,
    input: &CheckInput,
    report: &mut CheckReport,
) -> Result<(), Failure> {
    let start = Instant::now();
    let plugin = host.load(source)?;
    report.load_ms = Some(ms(start));
    report.name = Some(plugin.info.name.clone());
    report.version = Some(plugin.info.version.clone());
    report.kind = Some(plugin.info.kind.to_string());
    report.description = Some(plugin.info.description.clone());
    report.contract = Some(plugin.contract.clone());
    let schema: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&plugin.info.config_schema)
        .map_err(|e| Failure::Other(format!("its info().config-schema is not a JSON object: {e}")))?;
    report.config_keys = schema
        .into_iter()
        .map(|(key, v)| {
            let help = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
            // Parsed JSON escapes can hold control sequences the host's cleaning never saw.
            ConfigKey { key: clean_line(&key, KEY_BYTES), help: clean_line(&help, KEY_BYTES) }
        })
        .collect();
    match plugin.info.kind {
        PluginKind::Model => report.model = Some(model(host, &plugin, input)?),
        PluginKind::Transform => report.transform = Some(transform(host, &plugin, input)?),
        PluginKind::Reporter => report.reporter = Some(reporter(host, &plugin, input)?),
    }
    Ok(())
}

fn model(
    host: &PluginHost,
    plugin: &crate::plugin::Plugin,
    input: &CheckInput,
) -> Result<ModelCheck, Failure> {
    let spec = InputSpec {
        shape: input.shape,
        num_classes: input.classes,
        vocab_size: 0,
        max_tokens: 0,
        detection: false,
    };
    let start = Instant::now();
    let described = host.describe(plugin, &input.config, spec)?;
    let describe_ms = ms(start);
    let graph = Graph::from_wit(&described, None)?;
    let memory = graph.memory_estimate(input.batch as usize, 4);
    Ok(ModelCheck {
        input: dims(input.shape),
        classes: input.classes,
        describe_ms,
        nodes: graph.nodes.len(),
        parameters: graph.num_params(),
        macs: graph.forward_macs(),
        batch: input.batch,
        train_memory_mib: crate::units::mib(memory.total_bytes()),
    })
}

fn transform(
    host: &PluginHost,
    plugin: &crate::plugin::Plugin,
    input: &CheckInput,
) -> Result<TransformCheck, Failure> {
    let shape = input.shape;
    let len = crate::plugin::image_len(shape)
        .and_then(|n| n.checked_mul(input.batch as usize))
        .filter(|&n| n <= MAX_BATCH_BYTES)
        .ok_or_else(|| {
            Failure::Other(format!("a batch of {} images of {shape:?} is too large to check", input.batch))
        })?;
    let start = Instant::now();
    let mut instance = host.transform(plugin, &input.config, shape, shape)?;
    let create_ms = ms(start);
    let output = crate::data::Transform::output_shape(&instance);
    if [output.channels, output.height, output.width] != dims(shape) {
        // As a run refuses it: what the model reads is what the transform must return.
        return Err(Failure::Other(format!(
            "asked for {}x{}x{} images, it says it returns {}x{}x{}",
            shape.channels, shape.height, shape.width, output.channels, output.height, output.width
        )));
    }
    let batch = PixelBatch {
        count: input.batch,
        shape,
        pixels: (0..len).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect(),
        seed: 7,
        augment: true,
        boxes: Vec::new(),
    };
    // Each call gets a batch of its own, as in a run, copied before the clock starts.
    let start = Instant::now();
    let out = instance.apply_owned(batch.clone())?;
    let first_ms = ms(start);
    let mean = out.data.iter().map(|&v| f64::from(v)).sum::<f64>() / out.data.len().max(1) as f64;
    drop(out);
    let mut times = Vec::new();
    for _ in 0..input.repeats.max(1) {
        let copy = batch.clone();
        let start = Instant::now();
        instance.apply_owned(copy)?;
        times.push(ms(start));
    }
    times.sort_by(f64::total_cmp);
    let batch_ms = times[times.len() / 2];
    Ok(TransformCheck {
        returns: if plugin.byte_output { "u8" } else { "f32" },
        input: dims(shape),
        output: [output.channels, output.height, output.width],
        batch: input.batch,
        create_ms,
        first_ms,
        batch_ms,
        images_per_s: f64::from(input.batch) / (batch_ms / 1000.0),
        mean,
        memory_mib: crate::units::mib(instance.memory_bytes() as u64),
    })
}

fn reporter(
    host: &PluginHost,
    plugin: &crate::plugin::Plugin,
    input: &CheckInput,
) -> Result<ReporterCheck, Failure> {
    let (from, text) = match &input.events {
        Some(text) => ("given".to_string(), text.as_str()),
        None => ("sample".to_string(), SAMPLE_EVENTS),
    };
    let events = benchkit_schema::read_events(text).map_err(|e| Failure::Other(format!("events: {e}")))?;
    let start = Instant::now();
    let mut instance = host.reporter(plugin, &input.config)?;
    let create_ms = ms(start);
    let start = Instant::now();
    for event in &events {
        let json = instance.event_text(event);
        instance.on_event(&json)?;
    }
    let event_ms = ms(start) / events.len().max(1) as f64;
    let start = Instant::now();
    let artifacts = instance.finish()?;
    let finish_ms = ms(start);
    for (name, _) in &artifacts {
        if let Some(why) = crate::runner::store::artifacts::refused_name(name) {
            return Err(Failure::Other(format!("it returned a file `{}`: {why}", clean_line(name, 255))));
        }
    }
    Ok(ReporterCheck {
        events_from: from,
        events: events.len(),
        create_ms,
        event_ms,
        finish_ms,
        artifacts: artifacts.into_iter().map(|(name, b)| ArtifactSize { name, bytes: b.len() }).collect(),
        memory_mib: crate::units::mib(instance.memory_bytes() as u64),
    })
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

fn dims(shape: ImageShape) -> [u32; 3] {
    [shape.channels, shape.height, shape.width]
}

impl CheckReport {
    /// The report as the terminal shows it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let line = |out: &mut String, text: String| {
            out.push_str(&text);
            out.push('\n');
        };
        let or_dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        line(&mut out, format!("{} ({:.1} MiB)", self.file, crate::units::mib(self.bytes)));
        if let Some(load) = self.load_ms {
            line(
                &mut out,
                format!(
                    "  {} {} {}: {}",
                    or_dash(&self.kind),
                    or_dash(&self.name),
                    or_dash(&self.version),
                    or_dash(&self.description)
                ),
            );
            line(
                &mut out,
                format!(
                    "  contract benchkit:plugin@{} (this benchkit: {}); loaded in {load:.0} ms",
                    or_dash(&self.contract),
                    self.host_contract
                ),
            );
        }
        for c in &self.config_keys {
            line(&mut out, format!("  config {:<14} {}", c.key, c.help));
        }
        if let Some(m) = &self.model {
            line(
                &mut out,
                format!(
                    "  model at {}x{}x{}, {} classes: {} nodes, {} parameters, {:.3} G multiply-adds a sample forward; \
                     described in {:.1} ms; training at batch {} needs about {:.0} MiB",
                    m.input[0],
                    m.input[1],
                    m.input[2],
                    m.classes,
                    m.nodes,
                    m.parameters,
                    m.macs as f64 / 1e9,
                    m.describe_ms,
                    m.batch,
                    m.train_memory_mib
                ),
            );
        }
        if let Some(t) = &self.transform {
            line(
                &mut out,
                format!(
                    "  transform {}x{}x{} -> {}x{}x{} ({}), batch {}: {:.1} ms a batch ({:.0} images/s; first {:.1} ms), \
                     created in {:.1} ms, {:.0} MiB of {} MiB memory",
                    t.input[0],
                    t.input[1],
                    t.input[2],
                    t.output[0],
                    t.output[1],
                    t.output[2],
                    t.returns,
                    t.batch,
                    t.batch_ms,
                    t.images_per_s,
                    t.first_ms,
                    t.create_ms,
                    t.memory_mib,
                    self.limits.memory_mib
                ),
            );
        }
        if let Some(r) = &self.reporter {
            let files: Vec<String> =
                r.artifacts.iter().map(|a| format!("{} ({} bytes)", a.name, a.bytes)).collect();
            line(
                &mut out,
                format!(
                    "  reporter fed {} {} events: {:.2} ms an event, finish {:.1} ms, {:.0} MiB of {} MiB memory; wrote {}",
                    r.events,
                    r.events_from,
                    r.event_ms,
                    r.finish_ms,
                    r.memory_mib,
                    self.limits.memory_mib,
                    if files.is_empty() { "nothing".to_string() } else { files.join(", ") }
                ),
            );
        }
        match &self.failure {
            None => line(&mut out, "passed".into()),
            Some(why) => line(&mut out, format!("FAILED: {why}")),
        }
        out
    }
}

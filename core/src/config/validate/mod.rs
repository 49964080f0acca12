//! From the config as written to a [`Plan`]: every default taken from the
//! plan types (written once there), every value range-checked, paths made
//! absolute, and each error placed at its file, line and key. A config is
//! read from text once; matrix cells are validated from its parsed tables.

mod data;
mod faults;
mod machine;
mod parallel;
pub mod ranges;
mod rows;

use super::error::{key_at, key_of_error, line_col, ConfigError};
use super::launcher::LaunchEnv;
use super::plan::{BatchSearch, Mode, Plan, PluginPlan, TrainPlan, DEFAULT_CELL_TIMEOUT_S};
use super::raw::{BatchSize, RawConfig, RawCost, RawLimits, RawPlugin, RawTrain};
use crate::backend::{BackendKind, Precision};
use crate::plugin::{builtin, Limits, PluginSource};
pub(crate) use machine::unavailable;
use machine::Checked;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::de::{DeTable, Deserializer};
use toml::Spanned;

/// The longest name `[model] name` may give: a label, not a description.
const MAX_MODEL_NAME: usize = 32;

impl Plan {
    /// Read and validate a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::parse(&read_source(path)?, path)
    }

    /// Validate `source`, the text of config file `file`; refused where
    /// this build or machine lacks what it trains with.
    pub fn parse(source: &str, file: &Path) -> Result<Self, ConfigError> {
        let table = parse_table(source, file)?;
        let checked = Self::from_table(table, source, file, &LaunchEnv::default(), Checks::All)?;
        match checked.lacking {
            Some(e) => Err(e),
            None => Ok(checked.plan),
        }
    }

    /// Validate the parsed tables of config file `file`, whose text is
    /// `source`: every span in `table` points into it. `launcher` fills the
    /// `[distributed]` keys the config leaves out.
    pub(super) fn from_table(
        table: Spanned<DeTable<'_>>,
        source: &str,
        file: &Path,
        launcher: &LaunchEnv,
        checks: Checks,
    ) -> Result<Checked, ConfigError> {
        let raw =
            RawConfig::deserialize(Deserializer::from(table)).map_err(|e| toml_error(&e, source, file))?;
        Validator { source, file, launcher, checks }.checked(raw)
    }
}

/// What validating a config may look at besides its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checks {
    /// The files it names (data, plugins, the interconnect sweep) and this
    /// machine (the backends built in, PyTorch, network namespaces).
    All,
    /// Its keys and values alone: a config written for another machine
    /// (`benchkit validate --config-only`).
    KeysOnly,
}

/// The text of config file `path`.
pub(super) fn read_source(path: &Path) -> Result<String, ConfigError> {
    crate::bounds::read_text(path, "a config", crate::bounds::CONFIG_BYTES).map_err(|e| ConfigError {
        file: path.into(),
        line: 0,
        column: 0,
        key: "(file)".into(),
        message: format!("cannot read the config: {e}"),
    })
}

/// `source` parsed into tables that remember where each value was written.
pub(super) fn parse_table<'s>(source: &'s str, file: &Path) -> Result<Spanned<DeTable<'s>>, ConfigError> {
    let table = DeTable::parse(source).map_err(|e| toml_error(&e, source, file))?;
    super::retired::check(&table, source, file)?;
    Ok(table)
}

/// A TOML or serde error, placed at its line and key.
fn toml_error(e: &toml::de::Error, source: &str, file: &Path) -> ConfigError {
    let span = e.span().unwrap_or(0..0);
    let (line, column) = line_col(source, span.start);
    let message = accepted_values(e.message().trim());
    ConfigError { file: file.into(), line, column, key: key_of_error(source, span, &message), message }
}

/// serde's "unknown variant `x`, expected one of `a`, `b`" in the words
/// every other choice error uses: `unknown value "x"; accepted: "a", "b"`.
fn accepted_values(message: &str) -> String {
    let Some((given, expected)) =
        message.strip_prefix("unknown variant `").and_then(|rest| rest.split_once("`, expected "))
    else {
        return message.to_string();
    };
    let names: Vec<String> = expected.split('`').skip(1).step_by(2).map(|n| format!("\"{n}\"")).collect();
    format!("unknown value \"{given}\"; accepted: {}", names.join(", "))
}

pub(super) struct Validator<'a> {
    source: &'a str,
    file: &'a Path,
    launcher: &'a LaunchEnv,
    checks: Checks,
}

impl Validator<'_> {
    pub(super) fn err<T>(&self, span: Range<usize>, message: impl Into<String>) -> Result<T, ConfigError> {
        let (line, column) = line_col(self.source, span.start);
        Err(ConfigError {
            file: self.file.into(),
            line,
            column,
            key: key_at(self.source, span.start),
            message: message.into(),
        })
    }

    pub(super) fn base(&self) -> PathBuf {
        self.file.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// `value` if present and accepted by `ok`, else `default`.
    pub(super) fn check<T: Copy>(
        &self,
        value: &Option<Spanned<T>>,
        default: T,
        ok: impl Fn(T) -> bool,
        accepted: &str,
    ) -> Result<T, ConfigError> {
        Ok(self.optional(value, ok, accepted)?.unwrap_or(default))
    }

    /// `value` if present and accepted by `ok`.
    pub(super) fn optional<T: Copy>(
        &self,
        value: &Option<Spanned<T>>,
        ok: impl Fn(T) -> bool,
        accepted: &str,
    ) -> Result<Option<T>, ConfigError> {
        match value {
            None => Ok(None),
            Some(v) if ok(*v.get_ref()) => Ok(Some(*v.get_ref())),
            Some(v) => self.err(v.span(), format!("expected {accepted}")),
        }
    }

    fn plugin(&self, raw: &RawPlugin, key: &str) -> Result<PluginPlan, ConfigError> {
        if let Some(name) = &raw.name {
            let text = name.get_ref();
            if key != "model.plugin" {
                return self.err(name.span(), "only [model] takes a name (what reports call the model)");
            }
            let length = text.chars().count();
            if !(1..=MAX_MODEL_NAME).contains(&length) || text.chars().any(char::is_control) {
                return self.err(
                    name.span(),
                    format!(
                        "is {length} characters{}; a model's name is 1 to {MAX_MODEL_NAME} characters, none a control character",
                        if text.chars().any(char::is_control) { " with a control character" } else { "" }
                    ),
                );
            }
        }
        let text = raw.plugin.get_ref();
        let source = PluginSource::parse(text, &self.base());
        match &source {
            PluginSource::Builtin(name) if builtin::bytes(name).is_none() => {
                let names: Vec<String> = builtin::names().iter().map(|n| format!("builtin:{n}")).collect();
                return self.err(
                    raw.plugin.span(),
                    format!(
                        "unknown built-in plugin \"{text}\"; built-ins: {}, or a path to a .wasm component",
                        names.join(", ")
                    ),
                );
            }
            PluginSource::Path(path) if self.checks == Checks::All && !path.is_file() => {
                return self.err(
                    raw.plugin.span(),
                    format!(
                        "plugin file {} does not exist; give a .wasm component path or builtin:<name>",
                        path.display()
                    ),
                );
            }
            _ => {}
        }
        let config = serde_json::to_value(&raw.config).map_err(|e| ConfigError {
            file: self.file.into(),
            line: line_col(self.source, raw.plugin.span().start).0,
            column: 1,
            key: format!("{key}.config"),
            message: format!("cannot be passed to the plugin: {e}"),
        })?;
        Ok(PluginPlan { source, config, key: key.to_string() })
    }

    fn train(&self, t: &RawTrain, backend: BackendKind) -> Result<TrainPlan, ConfigError> {
        let d = TrainPlan::default();
        let written = self.optional(&t.batch_size, |_| true, "a batch size")?;
        let batch_size = match written {
            Some(BatchSize::Images(n)) => n,
            Some(BatchSize::Max) => BatchSearch::START_PER_REPLICA,
            None => d.batch_size,
        };
        let batch_search = (written == Some(BatchSize::Max))
            .then_some(BatchSearch { eval_batch_given: t.eval_batch_size.is_some() });
        let unit = |v: f64| v >= 0.0 && v.is_finite();
        Ok(TrainPlan {
            epochs: self.check(&t.epochs, d.epochs, |e| e > 0, "at least 1 epoch")?,
            batch_size,
            eval_batch_size: self.check(
                &t.eval_batch_size,
                TrainPlan::default_eval_batch(batch_size),
                |b| b > 0,
                "at least 1",
            )?,
            drop_last: t.drop_last.as_ref().map_or(d.drop_last, |v| *v.get_ref()),
            lr: self.check(&t.lr, d.lr, |lr| lr > 0.0 && lr.is_finite(), "a positive learning rate")?,
            lr_schedule: t.lr_schedule.unwrap_or(d.lr_schedule),
            momentum: self.check(
                &t.momentum,
                d.momentum,
                |m| (0.0..1.0).contains(&m),
                "a momentum in [0, 1)",
            )?,
            nesterov: t.nesterov.unwrap_or(d.nesterov),
            weight_decay: self.check(&t.weight_decay, d.weight_decay, unit, "a weight decay >= 0")?,
            warmup_steps: t.warmup_steps.unwrap_or(d.warmup_steps),
            steady: self.steady(t, backend)?,
            max_steps_per_epoch: self.optional(&t.max_steps_per_epoch, |s| s > 0, "at least 1 step")?,
            parallel: d.parallel,
            timing: t.timing.unwrap_or(if backend.queues_work() { super::Timing::Step } else { d.timing }),
            precision: self.precision(&t.precision, backend)?,
            profile: t.profile.unwrap_or(d.profile),
            ops: false,
            op_checks: 0,
            faults: Default::default(),
            timeline: None,
            batch_search,
            memory_limit_mib: self.optional(&t.memory_limit_mib, |m| m >= 64, "at least 64 MiB")?,
            lr_scaling: t.lr_scaling.unwrap_or(d.lr_scaling),
            warmup_epochs: self.check(&t.warmup_epochs, d.warmup_epochs, unit, "epochs >= 0")?,
            target_accuracy: self.optional(
                &t.target_accuracy,
                |a| a > 0.0 && a <= 1.0,
                "an accuracy in (0, 1], e.g. 0.85",
            )?,
            hit_iou: self.check(
                &t.hit_iou,
                d.hit_iou,
                |v| v > 0.0 && v <= 1.0,
                "an overlap in (0, 1], e.g. 0.5",
            )?,
            hit_score: self.check(
                &t.hit_score,
                d.hit_score,
                |v| (0.0..=1.0).contains(&v),
                "a score in [0, 1]",
            )?,
        })
    }

    /// `train.warmup` and its steady rule: steady by default on cubecl's
    /// backends timed step by step; never on a PyTorch row, whose script
    /// counts its own warm-up, nor where measured steps are not
    /// synchronised on a device that queues work (the rule compares
    /// synchronised warm-up steps with them).
    fn steady(&self, t: &RawTrain, backend: BackendKind) -> Result<Option<super::Steady>, ConfigError> {
        use super::{Timing, WarmupRule};
        let timing = t.timing.unwrap_or(if backend.queues_work() { Timing::Step } else { Timing::Epoch });
        let unsynchronised = backend.queues_work() && timing == Timing::Epoch;
        let default =
            if backend.is_cubecl() && !unsynchronised { WarmupRule::Steady } else { WarmupRule::Fixed };
        let rule = t.warmup.as_ref().map_or(default, |r| *r.get_ref());
        if let (Some(r), WarmupRule::Steady) = (&t.warmup, rule) {
            if backend.is_pytorch() {
                return self.err(
                    r.span(),
                    format!("backend \"{backend}\" counts its warm-up in its own script: warmup = \"steady\" needs a burn backend (flex, tch, cuda, wgpu); use warmup = \"fixed\""),
                );
            }
            if unsynchronised {
                return self.err(
                    r.span(),
                    format!("warmup = \"steady\" compares each step with the measured ones, and on backend \"{backend}\" with timing = \"epoch\" a measured step is only its enqueue time; use timing = \"step\" or warmup = \"fixed\""),
                );
            }
        }
        if rule == WarmupRule::Fixed {
            return Ok(None);
        }
        let d = super::Steady::default();
        let window =
            self.check(&t.steady_window, d.window, |k| (2..=1000).contains(&k), "2 to 1000 steps")?;
        let tolerance = self.check(
            &t.steady_tolerance,
            d.tolerance,
            |x| x > 0.0 && x < 1.0,
            "a fraction in (0, 1), e.g. 0.1",
        )?;
        let least = t.warmup_steps.unwrap_or(TrainPlan::default().warmup_steps).max(2 * window);
        let max_steps = self.check(
            &t.max_warmup_steps,
            d.max_steps.max(least),
            |m| m >= least && m <= 1_000_000,
            &format!("{least} to 1000000 steps (at least warmup_steps and twice steady_window)"),
        )?;
        Ok(Some(super::Steady { window, tolerance, max_steps }))
    }

    /// Which steps the ranks trace: with a `[timeline]` table, or by
    /// default when the built-in `timeline` reporter is to draw them.
    fn timeline(
        &self,
        raw: Option<&super::raw::RawTimeline>,
        drawn: bool,
    ) -> Result<Option<benchkit_schema::TraceWindow>, ConfigError> {
        let fallback = super::raw::RawTimeline::default();
        let Some(t) = raw.or(drawn.then_some(&fallback)) else { return Ok(None) };
        let d = benchkit_schema::TraceWindow::default();
        let most = benchkit_schema::timeline::MAX_TRACED_STEPS;
        Ok(Some(benchkit_schema::TraceWindow {
            first_steps: self.check(&t.first_steps, d.first_steps, |n| n <= most, "0 to 100000 steps")?,
            every: self.check(&t.every, d.every, |n| n >= 1, "at least 1")?,
            max_steps: self.check(
                &t.max_steps,
                d.max_steps,
                |n| (1..=most).contains(&n),
                "1 to 100000 steps",
            )?,
        }))
    }

    /// `train.precision`, which the backend must support.
    fn precision(
        &self,
        value: &Option<Spanned<Precision>>,
        backend: BackendKind,
    ) -> Result<Precision, ConfigError> {
        let Some(v) = value else { return Ok(Precision::default()) };
        let precision = *v.get_ref();
        if backend.precisions().contains(&precision) {
            return Ok(precision);
        }
        let able: Vec<String> = BackendKind::ALL
            .into_iter()
            .filter(|k| k.precisions().contains(&precision))
            .map(|k| format!("\"{k}\""))
            .collect();
        let own: Vec<&str> = backend.precisions().iter().map(|p| p.name()).collect();
        self.err(
            v.span(),
            format!(
                "backend \"{backend}\" trains in {} only; {precision} needs backend = {}",
                own.join(", "),
                able.join(" or ")
            ),
        )
    }

    fn plan(&self, raw: &RawConfig) -> Result<Plan, ConfigError> {
        let backend = raw.backend.as_ref().map_or(BackendKind::Flex, |b| *b.get_ref());
        let default_transform = RawPlugin {
            plugin: Spanned::new(0..0, "builtin:normalize".to_string()),
            config: toml::Table::new(),
            name: None,
        };
        let reporters = if raw.reporters.is_empty() {
            vec![PluginPlan {
                source: PluginSource::Builtin("json".into()),
                config: serde_json::json!({}),
                key: "reporters.plugin".into(),
            }]
        } else {
            raw.reporters.iter().map(|r| self.plugin(r, "reporters.plugin")).collect::<Result<_, _>>()?
        };
        let mut train = self.train(raw.train.as_ref().unwrap_or(&RawTrain::default()), backend)?;
        let drawn =
            reporters.iter().any(|r| matches!(&r.source, PluginSource::Builtin(n) if n == "timeline"));
        train.timeline = self.timeline(raw.timeline.as_ref(), drawn)?;
        self.parallel(raw, &mut train, backend)?;
        self.drop_last_fits(raw, &train)?;
        self.pytorch(raw, backend, &train)?;
        self.ops(raw, &mut train)?;
        self.faults(raw.faults.as_ref(), &mut train)?;
        let mut data = self.data(&raw.data)?;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let given = machine::Given {
            workers: raw.data.get_ref().workers.is_some(),
            prefetch: raw.data.get_ref().prefetch.is_some(),
        };
        machine::share_cores(&mut train, &mut data, given, cores);
        Ok(Plan {
            file: self.file.into(),
            name: raw.name.clone().unwrap_or_else(|| {
                self.file.file_stem().map_or_else(|| "run".into(), |s| s.to_string_lossy().into_owned())
            }),
            seed: raw.seed.unwrap_or(0),
            backend,
            mode: raw.mode.unwrap_or(Mode::Train),
            data,
            transform: self
                .plugin(raw.transform.as_ref().unwrap_or(&default_transform), "transform.plugin")?,
            model: self.plugin(&raw.model, "model.plugin")?,
            reporters,
            train,
            plugin_limits: self.limits(raw.plugins.as_ref())?,
            repeats: self.check(&raw.repeats, 1, |r| (1..=1000).contains(&r), "1 to 1000 repeats")?,
            seeds: self.check(&raw.seeds, 1, |s| (1..=1000).contains(&s), "1 to 1000 seeds")?,
            retries: self.check(&raw.retries, 2, |r| r <= 10, "0 to 10 retries")?,
            cell_timeout_s: Some(self.check(
                &raw.cell_timeout_s,
                DEFAULT_CELL_TIMEOUT_S,
                |t| t > 0.0 && t.is_finite(),
                "a positive number of seconds",
            )?),
            usd_per_hour: self.price(raw.cost.as_ref(), backend)?,
            machine_prices: self.machine_prices(raw.cost.as_ref())?,
            study: self.study(raw.study.as_ref())?,
            interleave_repeats: raw.interleave_repeats.unwrap_or(false),
        })
    }

    /// `train.drop_last = false` trains a partial batch: one replica alone can.
    fn drop_last_fits(&self, raw: &RawConfig, train: &TrainPlan) -> Result<(), ConfigError> {
        let written = raw.train.as_ref().and_then(|t| t.drop_last.as_ref());
        let Some(v) = written.filter(|_| !train.drop_last) else { return Ok(()) };
        let why = match (&train.parallel.pipeline, train.replicas()) {
            (Some(_), _) => "a pipeline cuts every batch into equal micro-batches".to_string(),
            (None, 1) => return Ok(()),
            (None, n) => format!(
                "every replica must train the same steps, and a partial batch does not split over {n} replicas"
            ),
        };
        self.err(
            v.span(),
            format!("train.drop_last = false needs one replica and no pipeline: {why}; leave train.drop_last = true"),
        )
    }

    /// `[plugins]`: the sandbox's limits.
    fn limits(&self, raw: Option<&RawLimits>) -> Result<Limits, ConfigError> {
        let fallback = Limits::default();
        let Some(l) = raw else { return Ok(fallback) };
        Ok(Limits {
            memory_mib: self.check(
                &l.memory_mib,
                fallback.memory_mib,
                |m| ranges::PLUGIN_MEMORY_MIB.contains(&m),
                "16 to 65536 MiB",
            )?,
            call_timeout_ms: self.check(
                &l.call_timeout_ms,
                fallback.call_timeout_ms,
                |t| t >= 10,
                "at least 10 ms",
            )?,
            artifacts_mib: self.check(
                &l.artifacts_mib,
                fallback.artifacts_mib,
                |m| ranges::ARTIFACTS_MIB.contains(&m),
                "1 to 16384 MiB",
            )?,
            allow_nonfinite: l.allow_nonfinite.unwrap_or(fallback.allow_nonfinite),
            model_memory_mib: self.optional(&l.model_memory_mib, |m| m >= 1, "at least 1 MiB")?,
        })
    }

    /// `[cost.machines]`: prices by machine, each key a non-empty part of a
    /// machine's name.
    fn machine_prices(&self, cost: Option<&RawCost>) -> Result<BTreeMap<String, f64>, ConfigError> {
        let mut prices = BTreeMap::new();
        for (name, price) in cost.map(|c| &c.machines).into_iter().flatten() {
            if name.trim().is_empty() {
                return self.err(
                    price.span(),
                    "a machine's price needs a name: part of its GPU model, CPU model or host name, e.g. \"H100\"",
                );
            }
            let p = self.check(&Some(price.clone()), 0.0, |p| p >= 0.0 && p.is_finite(), "a price >= 0")?;
            prices.insert(name.clone(), p);
        }
        Ok(prices)
    }

    /// `[cost] usd_per_hour`: prices per backend, every name a backend; the
    /// plan's own backend's price.
    fn price(&self, cost: Option<&RawCost>, backend: BackendKind) -> Result<Option<f64>, ConfigError> {
        let mut own = None;
        for (name, price) in cost.map(|c| &c.usd_per_hour).into_iter().flatten() {
            if BackendKind::from_name(name).is_none() {
                return self.err(
                    price.span(),
                    format!(
                        "`{name}` is not a backend; prices are given per backend: {}",
                        BackendKind::NAMES.join(", ")
                    ),
                );
            }
            let p = self.check(&Some(price.clone()), 0.0, |p| p >= 0.0 && p.is_finite(), "a price >= 0")?;
            if name == backend.name() {
                own = Some(p);
            }
        }
        Ok(own)
    }
}

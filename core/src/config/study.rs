//! `[study]`: a config that reproduces a published study says what the
//! study asked and claimed, the sample data it makes when missing, and
//! checks that set each claim against what the run measured (judged in
//! `report::study` once the run ends).

use super::raw::{RawCheck, RawPrepare, RawStudy};
use super::validate::Validator;
use super::ConfigError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Cell-summary figures a check can compare, and what each measures.
pub const METRICS: [(&str, &str); 18] = [
    ("images_per_s", "images/s"),
    ("step_p50_ms", "step p50 (ms)"),
    ("step_p90_ms", "step p90 (ms)"),
    ("data_wait_pct", "data wait (%)"),
    ("compute_p50_ms", "compute p50 (ms)"),
    ("final_test_accuracy", "test accuracy"),
    ("weak_scaling.efficiency", "weak scaling efficiency (fixed per-replica batch)"),
    ("strong_scaling.efficiency", "strong scaling efficiency (fixed global batch)"),
    ("exposed_communication_pct", "all-reduce share (%)"),
    ("gpu_util_pct", "GPU utilisation (%)"),
    ("gpu_util_min_pct", "lowest GPU utilisation (%)"),
    ("peak_rss_mib", "peak memory (MiB)"),
    ("gpu_memory_mib", "GPU memory (MiB)"),
    ("time_to_target_s", "time to target (s)"),
    ("diagnoses.stragglers_right_pct", "injected stragglers named with the right rank and cause (%)"),
    ("diagnoses.false_stragglers", "stragglers named where none was injected"),
    ("diagnoses.bottlenecks_right_pct", "bottleneck column right where a fault sets it (%)"),
    (
        "diagnoses.advice_within_pct",
        "advice to free the straggler right, within 20 % of the cell without faults (%)",
    ),
];

/// What a study config is for, and how its claims are checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Study {
    pub title: String,
    pub question: String,
    pub claim: String,
    /// Where the study was published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prepare: Vec<Prepare>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
}

/// Sample data a study makes when `to` is missing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prepare {
    pub make: Make,
    pub from: PathBuf,
    pub to: PathBuf,
}

/// How a study's data is made: the `benchkit data` and `benchkit shards` commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Make {
    /// `benchkit data export FROM TO`: a folder of PNG files.
    ImageFolder,
    /// `benchkit shards pack FROM TO`.
    Shards,
    /// `benchkit shards pack --format tfrecord FROM TO`.
    Tfrecord,
    /// `benchkit shards pack --format webdataset FROM TO`.
    Webdataset,
    /// `benchkit data detection-sample FROM TO`.
    DetectionSample,
}

/// One claim against the run: `metric` of the cells matching `cells`, or
/// its ratio to the cell that differs from each only in `against`, within
/// `at_least` and `at_most`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub says: String,
    pub metric: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cells: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_least: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most: Option<f64>,
}

impl Check {
    /// Every axis key the check names.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.cells.keys().chain(self.against.iter().flat_map(|a| a.keys()))
    }
}

impl Validator<'_> {
    /// `[study]`, its paths made absolute and its checks' metrics and bounds checked.
    pub(super) fn study(&self, raw: Option<&RawStudy>) -> Result<Option<Study>, ConfigError> {
        let Some(raw) = raw else { return Ok(None) };
        let prepare = raw.prepare.iter().map(|p| self.prepare(p)).collect::<Result<_, _>>()?;
        let checks = raw.checks.iter().map(|c| self.check_of(c)).collect::<Result<_, _>>()?;
        Ok(Some(Study {
            title: raw.title.get_ref().clone(),
            question: raw.question.clone(),
            claim: raw.claim.clone(),
            source: raw.source.clone(),
            prepare,
            checks,
        }))
    }

    fn prepare(&self, raw: &RawPrepare) -> Result<Prepare, ConfigError> {
        if raw.to.get_ref().trim().is_empty() {
            return self.err(raw.to.span(), "expected the folder the data is written to");
        }
        Ok(Prepare {
            make: *raw.make.get_ref(),
            from: self.base().join(raw.from.get_ref()),
            to: self.base().join(raw.to.get_ref()),
        })
    }

    fn check_of(&self, raw: &RawCheck) -> Result<Check, ConfigError> {
        let metric = raw.metric.get_ref();
        if !METRICS.iter().any(|(m, _)| m == metric) {
            let names: Vec<String> = METRICS.iter().map(|(m, _)| format!("\"{m}\"")).collect();
            return self.err(
                raw.metric.span(),
                format!("unknown metric \"{metric}\"; accepted: {}", names.join(", ")),
            );
        }
        let bound = |b: &Option<toml::Spanned<f64>>| -> Result<Option<f64>, ConfigError> {
            match b {
                Some(v) if !v.get_ref().is_finite() => self.err(v.span(), "expected a finite number"),
                Some(v) => Ok(Some(*v.get_ref())),
                None => Ok(None),
            }
        };
        let (at_least, at_most) = (bound(&raw.at_least)?, bound(&raw.at_most)?);
        if at_least.is_none() && at_most.is_none() {
            return self.err(raw.metric.span(), "a check needs at_least, at_most or both");
        }
        if raw.against.as_ref().is_some_and(|a| a.is_empty()) {
            return self.err(raw.metric.span(), "against names the axis values of the cells compared with, e.g. { \"data.pipeline\" = \"naive\" }");
        }
        Ok(Check {
            says: raw.says.clone(),
            metric: metric.clone(),
            cells: raw.cells.clone().unwrap_or_default(),
            against: raw.against.clone(),
            at_least,
            at_most,
        })
    }
}

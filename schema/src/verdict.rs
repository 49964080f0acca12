//! What limits a cell's step, named from its measured figures, with the
//! change most likely to help. The rules are checked in order: the input
//! pipeline (and which stage of it), a straggling rank, exposed
//! communication, a GPU the host cannot keep busy; otherwise compute.

use serde::{Deserialize, Serialize};

/// The stage or resource that limits the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Bottleneck {
    /// Waiting for data, the loader's time mostly spent reading.
    InputRead,
    /// Waiting for data, mostly decoding (and resizing).
    InputDecode,
    /// Waiting for data, mostly in the transform plugin.
    InputTransform,
    /// Waiting for data with no stage timed (a repeated synthetic batch never waits).
    Input,
    /// One rank's work a step slower than the others' beyond the run's
    /// noise, the others waiting for it at the all-reduce ([`crate::Straggler`]).
    Straggler,
    /// Exposed communication: the gradient all-reduce not hidden behind compute.
    Communication,
    /// GPUs idle while no data is awaited: the host launches work too slowly.
    Host,
    /// The model's own computation: the expected limit.
    Compute,
}

impl Bottleneck {
    /// The short name tables show.
    pub fn label(self) -> &'static str {
        match self {
            Bottleneck::InputRead => "input: read",
            Bottleneck::InputDecode => "input: decode",
            Bottleneck::InputTransform => "input: transform",
            Bottleneck::Input => "input",
            Bottleneck::Straggler => "straggler",
            Bottleneck::Communication => "communication",
            Bottleneck::Host => "host",
            Bottleneck::Compute => "compute",
        }
    }
}

/// A named bottleneck, the figures that show it and what would help.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Verdict {
    pub bottleneck: Bottleneck,
    /// The measured figures behind it, in words.
    pub evidence: String,
    /// The change most likely to move it.
    pub advice: String,
}

/// The figures a verdict is drawn from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    /// Share of step time waiting for data, in percent.
    pub data_wait_pct: f64,
    /// The loader's time per training batch in each stage, in ms.
    pub read_ms: f64,
    pub decode_ms: f64,
    pub transform_ms: f64,
    /// Loader worker threads (0: the step loop's own thread).
    pub loader_workers: usize,
    /// The rank the others waited for beyond the run's noise (several processes).
    pub straggler: Option<crate::Straggler>,
    /// Share of step time in exposed communication, in percent.
    pub exposed_communication_pct: f64,
    /// The all-reduce's bus bandwidth, and what a sweep of the link gave
    /// for the same buckets (`distributed.interconnect`).
    pub busbw_gbps: f64,
    pub link: Option<crate::LinkShare>,
    /// Mean GPU utilisation, in percent, on GPU cells.
    pub gpu_util_pct: Option<f64>,
}

/// Exposed communication over this share of the step limits it.
pub const COMMUNICATION_PCT: f64 = 20.0;
/// GPUs busy less than this share of the time, with no data wait, are host-bound.
pub const HOST_UTIL_PCT: f64 = 60.0;

impl Verdict {
    /// The verdict on `f`.
    ///
    /// Formula: straggler (one is named), else input (data wait ≥ 5 %, named after the loader
    /// stage with the most time), else communication (exposed ≥ 20 % of the step), else host (GPU
    /// utilisation below 60 %), else compute.
    ///
    /// A straggler comes first: when one rank waits for its data and the
    /// others wait for it, the cell is held by that rank, not by every
    /// rank's input.
    pub fn of(f: &Figures) -> Self {
        let verdict = |bottleneck, evidence: String, advice: &str| Verdict {
            bottleneck,
            evidence,
            advice: advice.to_string(),
        };
        if let Some(s) = &f.straggler {
            return verdict(
                Bottleneck::Straggler,
                s.evidence(),
                &format!(
                    "for {}: {}; every rank waits for the slowest at each all-reduce",
                    s.who(),
                    s.cause.advice()
                ),
            );
        }
        if f.data_wait_pct >= crate::InputBound::MODERATE_PCT {
            return input(f);
        }
        if f.exposed_communication_pct >= COMMUNICATION_PCT {
            let link = f.link.as_ref().map_or(String::new(), |l| {
                format!("; it ran at {:.2} GB/s busbw, {}", f.busbw_gbps, l.phrase())
            });
            return verdict(
                Bottleneck::Communication,
                format!("exposed communication takes {:.1} % of the step{link}", f.exposed_communication_pct),
                "a larger batch per replica (more compute per exchange), other distributed.bucket_mib or distributed.strategy, or a faster interconnect",
            );
        }
        if let Some(util) = f.gpu_util_pct.filter(|u| *u < HOST_UTIL_PCT) {
            return verdict(
                Bottleneck::Host,
                format!("GPUs busy {util:.0} % of the time with {:.1} % data wait", f.data_wait_pct),
                "the host launches work too slowly: a larger batch, bf16, or the tch-cuda backend",
            );
        }
        verdict(
            Bottleneck::Compute,
            format!("{:.1} % data wait; the step is the model's own work", f.data_wait_pct),
            "a faster backend or precision, or a smaller model, moves it",
        )
    }
}

/// The input pipeline's verdict: the stage with the most loader time.
fn input(f: &Figures) -> Verdict {
    let stages = [
        (Bottleneck::InputRead, f.read_ms, "more loader workers, or pack the data into record shards (benchkit shards pack) to read fewer, larger files"),
        (Bottleneck::InputDecode, f.decode_ms, "more loader workers, a smaller data.resize, or raw-pixel record shards that need no decoding"),
        (Bottleneck::InputTransform, f.transform_ms, "more loader workers, or a cheaper transform plugin"),
    ];
    let total: f64 = stages.iter().map(|s| s.1).filter(|v| v.is_finite()).sum();
    let wait = format!("{:.1} % of the step waits for data", f.data_wait_pct);
    let workers = if f.loader_workers == 0 {
        "the step thread".to_string()
    } else {
        format!("{} worker(s)", f.loader_workers)
    };
    match stages.iter().filter(|s| s.1.is_finite() && s.1 > 0.0).max_by(|a, b| a.1.total_cmp(&b.1)) {
        Some(&(bottleneck, ms, advice)) if total > 0.0 => Verdict {
            bottleneck,
            evidence: format!(
                "{wait}; {} takes {:.0} % of the loader's {total:.1} ms a batch on {workers}",
                bottleneck.label().trim_start_matches("input: "),
                100.0 * ms / total
            ),
            advice: advice.into(),
        },
        _ => Verdict {
            bottleneck: Bottleneck::Input,
            evidence: wait,
            advice: "more loader workers or a deeper data.prefetch".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet() -> Figures {
        Figures { data_wait_pct: 1.0, loader_workers: 2, ..Figures::default() }
    }

    #[test]
    fn waiting_for_data_names_the_slowest_stage() {
        let f = Figures { data_wait_pct: 30.0, read_ms: 1.0, decode_ms: 6.0, transform_ms: 3.0, ..quiet() };
        let v = Verdict::of(&f);
        assert_eq!(v.bottleneck, Bottleneck::InputDecode);
        assert!(
            v.evidence.contains("decode takes 60 % of the loader's 10.0 ms a batch on 2 worker(s)"),
            "{v:?}"
        );
        assert!(v.advice.contains("resize"), "{v:?}");
        let read = Figures { read_ms: 9.0, ..f.clone() };
        assert_eq!(Verdict::of(&read).bottleneck, Bottleneck::InputRead);
        let plugin = Figures { transform_ms: 20.0, ..f.clone() };
        assert_eq!(Verdict::of(&plugin).bottleneck, Bottleneck::InputTransform);
        let untimed = Figures { data_wait_pct: 8.0, ..quiet() };
        assert_eq!(Verdict::of(&untimed).bottleneck, Bottleneck::Input);
    }

    #[test]
    fn a_slow_rank_the_all_reduce_and_an_idle_gpu_are_named_in_that_order() {
        let slow = crate::Straggler {
            rank: 1,
            host: "node-b".into(),
            work_p50_ms: 60.0,
            others_work_p50_ms: 30.0,
            noise_ms: 2.0,
            wait_ms: 29.0,
            arrival_p50_ms: 61.0,
            others_arrival_p50_ms: 31.0,
            data_wait_p50_ms: 1.0,
            others_data_wait_p50_ms: 1.0,
            communication_p50_ms: 5.0,
            others_communication_p50_ms: 34.0,
            cause: crate::StragglerCause::Compute,
            machine_processes: 0,
            machine_cores: 0,
        };
        let straggler = Figures { straggler: Some(slow), exposed_communication_pct: 40.0, ..quiet() };
        let v = Verdict::of(&straggler);
        assert_eq!(v.bottleneck, Bottleneck::Straggler);
        assert!(
            v.evidence.starts_with("rank 1 on node-b reaches the all-reduce 61.0 ms into a step (p50)"),
            "{v:?}"
        );
        assert!(
            v.evidence.ends_with("cause compute: it works 60.0 ms a step against 30.0 ms, 100 % of its gap"),
            "{v:?}"
        );
        assert!(v.advice.starts_with("for rank 1 on node-b: free its CPU or device"), "{v:?}");
        let even = Figures { straggler: None, ..straggler };
        assert_eq!(Verdict::of(&even).bottleneck, Bottleneck::Communication);
        // With the link measured, the evidence sets the achieved bandwidth against it.
        let link = crate::LinkShare::of("c.json", &[(1 << 20, 2.0)], &[1 << 20], 0.5);
        let v = Verdict::of(&Figures { busbw_gbps: 0.5, link, ..even });
        assert!(
            v.evidence.ends_with("; it ran at 0.50 GB/s busbw, 25 % of the 2.00 GB/s this link gave for these buckets in c.json"),
            "{v:?}"
        );
        let idle = Figures { gpu_util_pct: Some(35.0), ..quiet() };
        assert_eq!(Verdict::of(&idle).bottleneck, Bottleneck::Host);
        let busy = Figures { gpu_util_pct: Some(95.0), ..quiet() };
        assert_eq!(Verdict::of(&busy).bottleneck, Bottleneck::Compute);
        assert_eq!(Verdict::of(&quiet()).bottleneck, Bottleneck::Compute);
    }

    #[test]
    fn nan_figures_never_name_a_bottleneck_they_do_not_show() {
        let f = Figures { data_wait_pct: f64::NAN, exposed_communication_pct: f64::NAN, ..quiet() };
        assert_eq!(Verdict::of(&f).bottleneck, Bottleneck::Compute);
    }
}

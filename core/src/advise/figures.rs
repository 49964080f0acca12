//! What advice reads of a measured cell: the medians over its repeats of
//! each figure, its step decomposed, and its noise.

use super::models;
use benchkit_schema::{CellRecord, CellResult, Decomposition, Phase};

/// A finished cell's figures, each the median over its repeats of the
/// repeat's median (p50) where a repeat gives a distribution.
pub struct Figures<'a> {
    pub record: &'a CellRecord,
    /// The first repeat: the cell's settings (batch, loader, collective).
    pub first: &'a CellResult,
    pub images_per_s: f64,
    pub step_ms: f64,
    pub step_p90_ms: f64,
    pub data_wait_ms: f64,
    /// Forward, backward and optimizer with the exposed communication.
    pub compute_ms: f64,
    pub exposed_ms: f64,
    pub noise_pct: f64,
    /// Logical cores a process of the cell had, the machine's shared among
    /// its processes there; `None` where the run did not record its machine.
    pub cores: Option<usize>,
    pub memory_gib: Option<f64>,
}

fn median_of(record: &CellRecord, f: impl Fn(&CellResult) -> f64) -> f64 {
    let values: Vec<f64> = record.repeats.iter().map(f).filter(|v| v.is_finite()).collect();
    if values.is_empty() {
        f64::NAN
    } else {
        benchkit_schema::median(&values)
    }
}

impl<'a> Figures<'a> {
    /// The figures of `record`, whose repeats are not empty; `cores` and
    /// `memory_gib` of the machine rank 0 ran on.
    pub fn of(record: &'a CellRecord, cores: Option<usize>, memory_gib: Option<f64>) -> Option<Self> {
        let first = record.repeats.first()?;
        let step_ms = median_of(record, |r| r.step_ms.p50);
        let images: Vec<f64> = record.repeats.iter().map(|r| r.images_per_s).collect();
        let step_p90_ms = median_of(record, |r| r.step_ms.p90);
        let per_machine = (first.parallel.processes / first.parallel.machines.max(1)).max(1);
        Some(Figures {
            record,
            first,
            images_per_s: median_of(record, |r| r.images_per_s),
            step_ms,
            step_p90_ms,
            data_wait_ms: median_of(record, |r| r.data_wait_ms.p50).max(0.0),
            compute_ms: median_of(record, |r| r.compute_ms.p50),
            exposed_ms: median_of(record, |r| r.parallel.exposed_communication_ms.p50).max(0.0),
            noise_pct: models::noise_pct(step_ms, step_p90_ms, &images),
            cores: cores.map(|c| (c / per_machine).max(1)),
            memory_gib: memory_gib.map(|m| m / per_machine as f64),
        })
    }

    pub fn replicas(&self) -> usize {
        self.first.parallel.replicas.max(1)
    }

    /// The step's compute less its exposed communication, in ms.
    pub fn work_ms(&self) -> f64 {
        (self.compute_ms - self.exposed_ms).max(0.0)
    }

    /// The backward pass a step, in ms, and whether it was profiled (else
    /// [`crate::predict::BACKWARD_SHARE`] of the work).
    pub fn backward_ms(&self) -> (f64, bool) {
        match &self.first.phases {
            Some(p) if p.ms[Phase::Backward.index()] > 0.0 => (p.ms[Phase::Backward.index()], true),
            _ => (self.work_ms() * crate::predict::BACKWARD_SHARE, false),
        }
    }

    pub fn data_wait_pct(&self) -> f64 {
        100.0 * self.data_wait_ms / self.step_ms
    }

    pub fn exposed_pct(&self) -> f64 {
        100.0 * self.exposed_ms / self.step_ms
    }

    /// The cell as measured, in the figures a prediction gives.
    pub fn measured(&self) -> benchkit_schema::Measured {
        benchkit_schema::Measured {
            images_per_s: self.images_per_s,
            step_ms: self.step_ms,
            data_wait_pct: self.data_wait_pct(),
            exposed_communication_pct: self.exposed_pct(),
        }
    }

    /// The step by where it went: the profiled phases' means where the
    /// cell was profiled; else the medians of data wait, compute less
    /// exposed communication, and exposed communication, the rest of the
    /// median step as `other`.
    pub fn decomposition(&self) -> Decomposition {
        let straggler = self.first.parallel.straggler.clone();
        if let Some(p) = &self.first.phases {
            let ms = |phase: Phase| p.ms[phase.index()];
            let (f, b, o) = (ms(Phase::Forward), ms(Phase::Backward), ms(Phase::Optimizer));
            return Decomposition {
                step_ms: p.ms.iter().sum(),
                data_wait_ms: ms(Phase::DataWait),
                forward_ms: Some(f),
                backward_ms: Some(b),
                optimizer_ms: Some(o),
                compute_ms: f + b + o,
                exposed_communication_ms: ms(Phase::ExposedCommunication),
                other_ms: ms(Phase::HostToDevice) + ms(Phase::Other),
                profiled: true,
                straggler,
            };
        }
        let work = self.work_ms();
        Decomposition {
            step_ms: self.step_ms,
            data_wait_ms: self.data_wait_ms,
            forward_ms: None,
            backward_ms: None,
            optimizer_ms: None,
            compute_ms: work,
            exposed_communication_ms: self.exposed_ms,
            other_ms: (self.step_ms - self.data_wait_ms - work - self.exposed_ms).max(0.0),
            profiled: false,
            straggler,
        }
    }
}

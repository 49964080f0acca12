//! Each process's own figures over its measured steps, and every
//! process's gathered to each over the collective: the counts, times,
//! phases, work and host behind a multi-process cell's `parallel.ranks`.

use super::packing::{count_f32, f32_count, pack, unpack};
use super::Gather;
use super::{headline, phase_sums, plain_step_s, RankFigures, StepRecord, HOST_BYTES};
use crate::train::TrainError;

/// This process's figures over its steps after the first `warmup` (the
/// headline ones from the plain steps, the phases from the profiled ones),
/// and what all its steps trained against `local_batch` images each.
///
/// Formula: work = compute − exposed communication of each measured step; work_p50 = their
/// median; work_noise = 1.4826 × their MAD.
/// Formula: arrival = data wait + work of each measured step; arrival_p50 = their median;
/// arrival_noise = 1.4826 × their MAD.
pub(crate) fn own_figures(
    rank: usize,
    steps: &[StepRecord],
    warmup: usize,
    local_batch: usize,
) -> RankFigures {
    let measured = &steps[warmup.min(steps.len())..];
    let (profiled_steps, phase_s) = phase_sums(measured);
    let plain_step_s = plain_step_s(measured);
    let measured = headline(measured);
    let work: Vec<f64> = measured.iter().map(|s| s.compute_s - s.exposed_communication_s).collect();
    let spread = benchkit_schema::Spread::of(&work);
    let (work_p50_s, work_noise_s) = spread.map_or((f64::NAN, f64::NAN), |s| (s.median, s.sigma()));
    let exposed: Vec<f64> = measured.iter().map(|s| s.exposed_communication_s).collect();
    let arrival: Vec<f64> = measured.iter().zip(&work).map(|(s, w)| s.data_wait_s + w).collect();
    let arrival = benchkit_schema::Spread::of(&arrival);
    let (arrival_p50_s, arrival_noise_s) = arrival.map_or((f64::NAN, f64::NAN), |s| (s.median, s.sigma()));
    let data_wait: Vec<f64> = measured.iter().map(|s| s.data_wait_s).collect();
    let communication: Vec<f64> = measured.iter().map(|s| s.communication_s).collect();
    let short: Vec<usize> =
        steps.iter().filter(|s| s.images < local_batch).map(|s| local_batch - s.images).collect();
    RankFigures {
        rank,
        steps: measured.len(),
        images: measured.iter().map(|s| s.images).sum(),
        trained_images: steps.iter().map(|s| s.images).sum(),
        all_steps: steps.len(),
        short_steps: short.len(),
        images_missing: short.iter().sum(),
        skipped_train: 0,
        machine: super::machine_tag(&crate::measure::env::machine_id()),
        step_s: measured.iter().map(|s| s.total_s()).sum(),
        data_wait_s: measured.iter().map(|s| s.data_wait_s).sum(),
        exposed_communication_s: measured.iter().map(|s| s.exposed_communication_s).sum(),
        peak_rss_mib: crate::measure::memory::peak_rss_mib().unwrap_or(f64::NAN),
        profiled_steps,
        phase_s,
        plain_step_s,
        host: super::host_name(),
        work_steps: measured.len(),
        work_p50_s,
        work_noise_s,
        exposed_communication_p50_s: benchkit_schema::median(&exposed),
        data_wait_p50_s: benchkit_schema::median(&data_wait),
        arrival_p50_s,
        arrival_noise_s,
        communication_p50_s: benchkit_schema::median(&communication),
    }
}

/// Every process's measured figures, gathered from all replicas, and
/// whether every replica ends with the same parameters.
pub(crate) fn gather(
    replicas: &mut impl Gather,
    own: RankFigures,
    processes: usize,
) -> Result<(Vec<RankFigures>, bool), TrainError> {
    let mut row = vec![
        own.steps as f32,
        own.step_s as f32,
        own.data_wait_s as f32,
        own.exposed_communication_s as f32,
        own.peak_rss_mib as f32,
        own.profiled_steps as f32,
        own.plain_step_s as f32,
        own.all_steps as f32,
        own.short_steps as f32,
        own.machine as f32,
    ];
    for count in [own.images, own.trained_images, own.images_missing, own.skipped_train] {
        row.extend(count_f32(count));
    }
    row.extend(own.phase_s.map(|s| s as f32));
    row.extend([own.work_steps as f32, own.work_p50_s as f32, own.work_noise_s as f32]);
    row.push(own.exposed_communication_p50_s as f32);
    row.extend(
        [own.data_wait_p50_s, own.arrival_p50_s, own.arrival_noise_s, own.communication_p50_s]
            .map(|s| s as f32),
    );
    let mut host = pack(own.host.as_bytes());
    host.resize(HOST_BYTES / 3, 0.0);
    row.extend(host);
    let width = row.len();
    let table = replicas.gather(row)?;
    if !table.len().is_multiple_of(processes) {
        return Err(TrainError::Backend(format!(
            "gathered {} replicas' figures, not a whole number per process over {processes} processes",
            table.len()
        )));
    }
    let agree = table.windows(2).all(|pair| pair[0][width..] == pair[1][width..]);
    let per_process = table.len() / processes;
    let ranks = (0..processes)
        .map(|r| {
            let t = &table[r * per_process];
            if r == own.rank {
                own.clone()
            } else {
                RankFigures {
                    rank: r,
                    steps: t[0] as usize,
                    step_s: f64::from(t[1]),
                    data_wait_s: f64::from(t[2]),
                    exposed_communication_s: f64::from(t[3]),
                    peak_rss_mib: f64::from(t[4]),
                    profiled_steps: t[5] as usize,
                    plain_step_s: f64::from(t[6]),
                    all_steps: t[7] as usize,
                    short_steps: t[8] as usize,
                    machine: t[9] as u32,
                    images: f32_count(t[10], t[11]),
                    trained_images: f32_count(t[12], t[13]),
                    images_missing: f32_count(t[14], t[15]),
                    skipped_train: f32_count(t[16], t[17]),
                    phase_s: std::array::from_fn(|k| f64::from(t[18 + k])),
                    work_steps: t[25] as usize,
                    work_p50_s: f64::from(t[26]),
                    work_noise_s: f64::from(t[27]),
                    exposed_communication_p50_s: f64::from(t[28]),
                    data_wait_p50_s: f64::from(t[29]),
                    arrival_p50_s: f64::from(t[30]),
                    arrival_noise_s: f64::from(t[31]),
                    communication_p50_s: f64::from(t[32]),
                    host: String::from_utf8_lossy(&unpack(&t[33..width])).into_owned(),
                }
            }
        })
        .collect();
    Ok((ranks, agree))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_compute_less_exposed_communication_with_its_median_and_noise() {
        // One warm-up step, then four whose work is 0.08, 0.10, 0.12 and 0.16 s
        // (compute less 0.01–0.04 s of exposed communication).
        let step = |compute_s: f64, exposed: f64| StepRecord {
            epoch: 1,
            data_wait_s: 0.0,
            compute_s,
            exposed_communication_s: exposed,
            communication_s: exposed,
            images: 8,
            phases: None,
        };
        let steps = [step(1.0, 0.5), step(0.09, 0.01), step(0.12, 0.02), step(0.15, 0.03), step(0.20, 0.04)];
        let f = own_figures(1, &steps, 1, 8);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // Median of 0.08, 0.10, 0.12, 0.16 is 0.11; the deviations 0.03, 0.01,
        // 0.01, 0.05 have the median 0.02, so the noise is 1.4826 × 0.02.
        assert!(near(f.work_p50_s, 0.11), "{}", f.work_p50_s);
        assert!(near(f.work_noise_s, 1.4826 * 0.02), "{}", f.work_noise_s);
        assert!(near(f.exposed_communication_p50_s, 0.025), "{}", f.exposed_communication_p50_s);
        // No data wait: each arrival is its work, and so are their median and noise.
        assert!(near(f.arrival_p50_s, 0.11) && near(f.arrival_noise_s, 1.4826 * 0.02));
        assert!(near(f.data_wait_p50_s, 0.0) && near(f.communication_p50_s, 0.025));
        assert_eq!((f.work_steps, f.images, f.trained_images), (4, 32, 40));
        assert!(near(f.exposed_communication_s, 0.10) && near(f.step_s, 0.56));
    }
}

//! The figures of a finished training, each checked on a case worked by hand.

use super::*;
use crate::train::{RankFigures, StepRecord};
use benchkit_schema::EpochRecord;

/// Ten steps of 16 images (the `short` first ones 4 images short), as
/// process `rank` among `ranks`.
fn outcome(ranks: Vec<RankFigures>, rank: usize, short: usize) -> TrainOutcome {
    let step = |i: usize| StepRecord {
        epoch: 1,
        data_wait_s: 0.0,
        compute_s: 0.1,
        exposed_communication_s: 0.0,
        communication_s: 0.0,
        images: if i < short { 12 } else { 16 },
        phases: None,
    };
    TrainOutcome { rank, ranks, ..TrainOutcome::of_steps((0..10).map(step).collect(), 0, Vec::new()) }
}

fn rank(rank: usize, machine: u32, trained_images: usize) -> RankFigures {
    RankFigures { rank, machine, trained_images, all_steps: 10, ..RankFigures::default() }
}

#[test]
fn a_rapl_meter_is_shared_by_every_process_on_its_machine() {
    // Ranks 0 and 1 on machine 7, rank 2 on machine 9, 160 images each.
    // Rank 0's RAPL counters read 480 J for the whole machine: 480 J over
    // ranks 0 and 1's 320 images is 1.5 J/img (not 480 / 160 = 3).
    let three = outcome(vec![rank(0, 7, 160), rank(1, 7, 160), rank(2, 9, 160)], 0, 0);
    let e = energy(Ok(("rapl".into(), 480.0)), &three);
    assert_eq!((e.joules_per_image, e.images, e.shared_by.clone()), (1.5, 320, vec![0, 1]));
    // NVML reads rank 0's own GPUs: its own images alone.
    let e = energy(Ok(("nvml".into(), 480.0)), &three);
    assert_eq!((e.joules_per_image, e.images, e.shared_by.clone()), (3.0, 160, vec![0]));
    // Rank 2 alone on its machine.
    let e = energy(Ok(("rapl".into(), 480.0)), &outcome(three.ranks.clone(), 2, 0));
    assert_eq!((e.joules_per_image, e.shared_by.clone()), (3.0, vec![2]));
    // One process: its own steps' 10 × 16 images.
    let e = energy(Ok(("rapl".into(), 480.0)), &outcome(Vec::new(), 0, 0));
    assert_eq!((e.joules_per_image, e.images, e.shared_by.is_empty()), (3.0, 160, true));
}

/// 2 processes × 2 devices, 100 MB of gradients in 0.1 s and 0.3 s of
/// communication: algbw 100 MB / 0.2 s = 0.5 GB/s. The link all-reduce
/// runs among the 2 processes (each sums its 2 replicas in memory), so
/// busbw = 0.5 × 2(2 − 1)/2 = 0.5, not 0.5 × 2(4 − 1)/4 = 0.75.
#[test]
fn busbw_counts_the_processes_not_the_replicas() {
    let mut plan = crate::config::TrainPlan::default();
    (plan.parallel.processes, plan.parallel.devices) = (2, 2);
    let step = |communication_s: f64| StepRecord {
        epoch: 1,
        data_wait_s: 0.0,
        compute_s: 0.5,
        exposed_communication_s: 0.05,
        communication_s,
        images: 16,
        phases: None,
    };
    let outcome =
        TrainOutcome { gradient_bytes: 100_000_000, ..TrainOutcome::of_steps(Vec::new(), 0, Vec::new()) };
    let c = communication(&plan, &outcome, &[step(0.1), step(0.3)]);
    assert_eq!(c.bucket_bytes, [100_000_000]);
    assert!((c.algbw_gbps - 0.5).abs() < 1e-12, "{}", c.algbw_gbps);
    assert!((c.busbw_gbps - 0.5).abs() < 1e-12, "{}", c.busbw_gbps);
}

/// Ranks 0 and 1 each met 3 distinct bad training samples of their own
/// share (disjoint shares: 6 in all); both met the same 2 bad test
/// samples (each evaluates the whole split: 2, not 4).
#[test]
fn skipped_samples_are_counted_over_every_rank_once() {
    let mut a = rank(0, 1, 150);
    a.skipped_train = 3;
    let mut b = rank(1, 1, 150);
    b.skipped_train = 3;
    let own = LoaderReport { skipped_train: 3, skipped_test: 2, ..Default::default() };
    let two = every_rank_skips(own.clone(), &outcome(vec![a, b], 0, 0));
    assert_eq!((two.skipped_train, two.skipped_test, two.skipped), (6, 2, 8));
    let one = every_rank_skips(own, &outcome(Vec::new(), 0, 0));
    assert_eq!((one.skipped_train, one.skipped_test, one.skipped), (3, 2, 5));
}

#[test]
fn short_batches_count_every_process_and_say_why() {
    let plan = crate::config::TrainPlan { batch_size: 16, ..Default::default() };
    let clean = LoaderReport::default();
    assert_eq!(short_batches(&plan, &outcome(Vec::new(), 0, 0), &clean), None, "every step whole");
    // One process, its first 3 steps 4 images short each.
    let skipped = LoaderReport { skipped: 14, skipped_train: 12, skipped_test: 2, ..Default::default() };
    let one = short_batches(&plan, &outcome(Vec::new(), 0, 3), &skipped).unwrap();
    assert_eq!((one.steps, one.of_steps, one.images_missing), (3, 10, 12));
    assert!(
        one.why.contains("on_corrupt = \"skip\" left out 12 undecodable training image(s)"),
        "{}",
        one.why
    );
    // A file read up to a fault leaves its fault's place in a batch empty.
    let cut = LoaderReport {
        on_corrupt: "skip".into(),
        cut_files: vec![benchkit_schema::CutFile { at: "f (record 5 at byte 80)".into(), unread_bytes: 9 }],
        ..Default::default()
    };
    let why = short_batches(&plan, &outcome(Vec::new(), 0, 1), &cut).unwrap().why;
    assert_eq!(
        why,
        "on_corrupt = \"skip\" read 1 file(s) only up to a fault, whose place in a batch stays empty"
    );
    // Without skipping, a fault a pass meets fails the cell: a short
    // batch then has another cause.
    let unmet = LoaderReport { on_corrupt: "error".into(), ..cut };
    let why = short_batches(&plan, &outcome(Vec::new(), 0, 1), &unmet).unwrap().why;
    assert_eq!(why, "the loader handed out short batches");
    // Two processes: their own counts, summed.
    let mut a = rank(0, 1, 150);
    (a.short_steps, a.images_missing) = (1, 3);
    let mut b = rank(1, 1, 155);
    (b.short_steps, b.images_missing) = (2, 5);
    let plan = crate::config::TrainPlan { batch_size: 32, drop_last: false, ..plan };
    let two = short_batches(&plan, &outcome(vec![a, b], 0, 0), &clean).unwrap();
    assert_eq!((two.steps, two.of_steps, two.images_missing), (3, 20, 8));
    assert!(two.why.contains("drop_last = false"), "{}", two.why);
}

/// An epoch of `train_s` training and `eval_s` evaluation seconds that
/// ended at test accuracy `accuracy`.
fn epoch(epoch: u32, train_s: f64, eval_s: f64, accuracy: f64) -> EpochRecord {
    EpochRecord {
        epoch,
        steps: 3,
        images: 96,
        eval_images: 64,
        train_loss: 1.0,
        train_accuracy: accuracy,
        test_loss: 1.0,
        test_accuracy: accuracy,
        images_per_s: 96.0 / train_s,
        train_s,
        eval_s,
        lr_end: 0.1,
        end_unix_ms: 0,
        metrics: Default::default(),
        pr_curve: Vec::new(),
    }
}

#[test]
fn the_headline_figures_match_a_case_worked_by_hand() {
    // Two warm-up steps of 0.1 s waiting + 0.4 s computing, then four
    // measured steps of 32 images, 0.02 s waiting + 0.18 s computing.
    let step = |wait: f64, compute: f64| StepRecord {
        epoch: 1,
        data_wait_s: wait,
        compute_s: compute,
        exposed_communication_s: 0.0,
        communication_s: 0.0,
        images: 32,
        phases: None,
    };
    let steps = vec![
        step(0.1, 0.4),
        step(0.1, 0.4),
        step(0.02, 0.18),
        step(0.02, 0.18),
        step(0.02, 0.18),
        step(0.02, 0.18),
    ];
    let epochs = vec![epoch(1, 10.0, 2.0, 0.6), epoch(2, 10.0, 2.0, 0.8)];
    let outcome = TrainOutcome { peak_rss_mib: Some(123.0), ..TrainOutcome::of_steps(steps, 2, epochs) };
    let mut meta = sample_meta("hand", 1, 32);
    meta.usd_per_hour = Some(3.6);
    meta.train.target_accuracy = Some(0.75);
    let r = cell_result(meta, &outcome, 30.0);
    let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // img/s = 4 × 32 images / (4 × 0.2 s) = 160.
    assert!(near(r.images_per_s, 160.0), "{}", r.images_per_s);
    // data wait % = 100 × 4 × 0.02 / (4 × 0.2) = 10 %: moderately input-bound.
    assert!(near(r.data_wait_pct, 10.0), "{}", r.data_wait_pct);
    assert_eq!(r.input_bound, benchkit_schema::InputBound::Moderately);
    // Warm-up: 2 steps of 500 ms against a measured mean of 200 ms: 2.5×.
    assert_eq!(r.warmup.steps, 2);
    assert!(near(r.warmup.mean_step_ms, 500.0) && near(r.warmup.slowdown, 2.5), "{:?}", r.warmup);
    // The target 0.75 is first reached after epoch 2: (10 + 2) × 2 = 24 s.
    assert_eq!((r.epochs_to_target, r.time_to_target_s), (Some(2), Some(24.0)));
    // $3.60 an hour of one machine: an epoch of 12 s is $0.012, 24 s to target $0.024.
    assert!(near(r.usd_per_epoch.unwrap_or(f64::NAN), 0.012), "{:?}", r.usd_per_epoch);
    assert!(near(r.usd_to_target.unwrap_or(f64::NAN), 0.024), "{:?}", r.usd_to_target);
    assert!(near(r.best_test_accuracy, 0.8) && near(r.final_test_accuracy, 0.8));
    assert_eq!(r.peak_rss_mib, Some(123.0));
    assert_eq!(r.steps_measured, 4);
}

#[test]
fn a_two_process_cell_counts_every_rank_over_the_slowest_and_pays_for_each_machine() {
    // Rank 0 (machine 1): 128 images in 0.8 s, 0.08 s of it exposed
    // communication; rank 1 (machine 2): 128 images in 1.0 s, 0.3 s exposed.
    let rank = |rank: usize, machine: u32, step_s: f64, exposed: f64| RankFigures {
        rank,
        machine,
        steps: 4,
        images: 128,
        trained_images: 128,
        all_steps: 4,
        step_s,
        exposed_communication_s: exposed,
        ..RankFigures::default()
    };
    let ranks = vec![rank(0, 1, 0.8, 0.08), rank(1, 2, 1.0, 0.3)];
    let outcome =
        TrainOutcome { ranks, ..TrainOutcome::of_steps(Vec::new(), 0, vec![epoch(1, 10.0, 2.0, 0.5)]) };
    let mut meta = sample_meta("two", 1, 64);
    meta.usd_per_hour = Some(3.6);
    meta.train.parallel.processes = 2;
    let r = cell_result(meta, &outcome, 20.0);
    let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // img/s = (128 + 128) images / the slowest rank's 1.0 s = 256.
    assert!(near(r.images_per_s, 256.0), "{}", r.images_per_s);
    // exposed comm. % = the larger of 100 × 0.08 / 0.8 = 10 and 100 × 0.3 / 1.0 = 30.
    assert!(near(r.parallel.exposed_communication_pct, 30.0), "{}", r.parallel.exposed_communication_pct);
    assert_eq!((r.parallel.replicas, r.parallel.machines), (2, 2));
    // Two machines at $3.60 an hour for a 12 s epoch: 2 × 3.6 × 12 / 3600 = $0.024.
    assert!(near(r.usd_per_epoch.unwrap_or(f64::NAN), 0.024), "{:?}", r.usd_per_epoch);
}

#[test]
fn the_warm_up_excess_is_what_its_steps_took_beyond_the_measured_median() {
    let step = |seconds: f64| StepRecord {
        epoch: 1,
        data_wait_s: 0.25 * seconds,
        compute_s: 0.75 * seconds,
        exposed_communication_s: 0.0,
        communication_s: 0.0,
        images: 16,
        phases: None,
    };
    // Warm-up of 30 s, 4 s and 0.5 s against a measured median of 1 s:
    // (30 − 1) + (4 − 1) + 0 (a step faster than the median adds nothing) = 32 s.
    let warm = [step(30.0), step(4.0), step(0.5)];
    let excess = warmup_excess_s(&warm, 1.0).unwrap();
    assert!((excess - 32.0).abs() < 1e-9, "{excess}");
    assert_eq!(warmup_excess_s(&[], 1.0), None);
    assert_eq!(warmup_excess_s(&warm, f64::NAN), None);
}

#[test]
fn a_jit_cell_s_summary_gives_its_compile_time_its_cache_and_warns_of_a_measured_compilation() {
    let jit = |cache: &str, measured: u64| benchkit_schema::JitReport {
        engine: "cubecl-wgpu".into(),
        cache: cache.into(),
        warmup_compiled: 200,
        measured_compiled: measured,
        ..Default::default()
    };
    let repeat = |n: u32, excess: f64, cache: &str, measured: u64| {
        let mut r = sample("jit", n, 16, 16, 0.5);
        r.warmup.excess_s = Some(excess);
        r.jit = Some(jit(cache, measured));
        r
    };
    // Compile 40 s cold, then 4 s and 5 s warm: the median is 5 s.
    let repeats = [repeat(1, 40.0, "cold", 0), repeat(2, 4.0, "warm", 0), repeat(3, 5.0, "warm", 0)];
    let s = benchkit_schema::CellSummary::of(0, "jit", &Default::default(), &repeats, None);
    assert_eq!(s.compile_s.map(|c| c.median), Some(5.0));
    assert_eq!(s.kernel_cache.as_deref(), Some("cold, warm"));
    assert!(s.warnings.iter().all(|w| !w.contains("measured steps")), "{:?}", s.warnings);
    let table = benchkit_schema::tables::cells(&[&s], None);
    let column = table.rows[0].iter().position(|h| h == "compile s").expect("a compile s column");
    assert_eq!(table.rows[1][column], "5.0 (cold, warm)");

    let late = [repeat(1, 40.0, "cold", 3)];
    let s = benchkit_schema::CellSummary::of(0, "jit", &Default::default(), &late, None);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.starts_with("3 kernel(s) compiled and 0 tuning run(s) during measured steps")),
        "{:?}",
        s.warnings
    );

    // A burn backend that compiles nothing shows no compile time, whatever its warm-up cost.
    let mut flex = sample("flex", 1, 16, 16, 0.5);
    flex.warmup.excess_s = Some(2.0);
    let s = benchkit_schema::CellSummary::of(0, "flex", &Default::default(), &[flex], None);
    assert_eq!((s.compile_s, s.kernel_cache), (None, None));
}

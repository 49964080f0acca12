//! Harness overhead: images/s that a `benchkit run` cell (the code its cell
//! process runs, here in-process) measures for the
//! quickstart model against a bare burn loop training the same network on
//! the same batches (pre-normalised in memory, no loader thread, no plugin,
//! no timers). Rounds alternate between the two so drift hits both; the
//! medians and their ratio are printed.
//!
//! Run: `cargo bench -p benchkit-benches --bench harness`

use benchkit::config::Sweep;
use benchkit::data::load_idx;
use benchkit::measure::stats::median;
use benchkit::model::{Graph, GraphNet};
use benchkit::plugin::{InputSpec, Limits, PluginHost, PluginSource};
use benchkit::runner::run_cell;
use benchkit_benches::normalize_kernel as kernel;
use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::{Int, Tensor, TensorData};
use std::path::PathBuf;
use std::time::Instant;

type B = Autodiff<Flex>;
const BATCH: usize = 64;
const WARMUP: usize = 5;
const STEPS: usize = 60;
const ROUNDS: usize = 3;
const MODEL: &str = r#"{"depth":18,"stem":"imagenet","width":0.25,"in_channels":1}"#;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("benches/ is in the repo").to_path_buf()
}

fn bare_loop(graph: &Graph, images: &[f32], labels: &[i64]) -> f64 {
    let device = FlexDevice;
    let mut model: GraphNet<B> = GraphNet::new(graph, &device);
    let mut optim = SgdConfig::new()
        .with_momentum(Some(MomentumConfig { momentum: 0.9, dampening: 0.0, nesterov: false }))
        .with_weight_decay(Some(WeightDecayConfig::new(5e-4)))
        .init();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let per_image = 28 * 28;
    let mut started = Instant::now();
    for step in 0..WARMUP + STEPS {
        if step == WARMUP {
            started = Instant::now();
        }
        let at = (step * BATCH) % (labels.len() - BATCH);
        let x = Tensor::<B, 4>::from_data(
            TensorData::new(images[at * per_image..(at + BATCH) * per_image].to_vec(), [BATCH, 1, 28, 28]),
            &device,
        );
        let y = Tensor::<B, 1, Int>::from_data(
            TensorData::new(labels[at..at + BATCH].to_vec(), [BATCH]),
            &device,
        );
        let loss = loss_fn.forward(model.forward(x), y);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(0.05, model, grads);
    }
    (STEPS * BATCH) as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let data_dir = repo().join("configs/data/fashion-mnist");
    let data = load_idx(&data_dir, 10).expect("shipped data");
    let host = PluginHost::new(Limits::default()).expect("plugin host");
    let plugin = host.load(&PluginSource::Builtin("resnet".into())).expect("builtin resnet");
    let spec = InputSpec {
        shape: data.train.shape.into(),
        num_classes: 10,
        vocab_size: 0,
        max_tokens: 0,
        detection: false,
    };
    let graph =
        Graph::from_wit(&host.describe(&plugin, MODEL, spec).expect("describe"), None).expect("graph");
    let params = kernel::Params::new(1, 28, 28, 1, &[0.286], &[0.353], 0, false);
    let mut images = Vec::new();
    kernel::apply(&params, &data.train.pixels, data.train.len(), 0, &mut images);
    let labels: Vec<i64> = data.train.labels.iter().map(|&l| i64::from(l)).collect();

    let dir = std::env::temp_dir().join(format!("benchkit-harness-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("harness.toml");
    std::fs::write(
        &config,
        format!(
            "name = \"harness\"\n[data]\npath = {:?}\ntest_limit = 64\n[transform]\nplugin = \"builtin:normalize\"\n\
             config = {{ mean = [0.286], std = [0.353] }}\n[model]\nplugin = \"builtin:resnet\"\n\
             config = {{ depth = 18, stem = \"imagenet\", width = 0.25, in_channels = 1 }}\n[train]\nepochs = 1\n\
             batch_size = {BATCH}\nlr = 0.05\nwarmup_steps = {WARMUP}\nmax_steps_per_epoch = {}\n",
            data_dir.display().to_string(),
            WARMUP + STEPS
        ),
    )
    .expect("write config");
    let sweep = Sweep::load(&config).expect("harness config");
    let cell = &sweep.cells[0];

    let (mut bare, mut harness) = (Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        bare.push(bare_loop(&graph, &images, &labels));
        let result = run_cell(cell, round as u32, None, &mut |_| {}).expect("benchkit cell");
        harness.push(result.images_per_s);
        println!(
            "round {round}: bare {:.1} img/s, benchkit run {:.1} img/s",
            bare[round - 1],
            harness[round - 1]
        );
    }
    let (b, h) = (median(&bare), median(&harness));
    println!(
        "median: bare {b:.1} img/s, benchkit run {h:.1} img/s, ratio {:.3} (overhead {:+.2} %)",
        h / b,
        100.0 * (1.0 - h / b)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

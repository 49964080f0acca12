//! End-to-end on LibTorch (`--features tch`): every model, every task (detection too) and
//! data parallelism (replicas in one process, two processes on loopback)
//! train through the real binary on `backend = "tch"`, and the results say
//! which backend and timing they were measured with.
#![cfg(feature = "tch")]

use crate::common;

use common::hosts::{two_ranks, Hosts};
use common::ranks;
use common::{benchkit, detection_sample, python, repo, small_config};
use serde_json::Value;
use std::path::Path;

/// Run `cfg` to success and return every cell's first repeat, in cell order,
/// each checked `ok`, trained on `tch` with finite, positive figures.
fn run_ok(cfg: &Path) -> Vec<Value> {
    let out = cfg.with_file_name("out");
    let assert = benchkit().arg("run").arg(cfg).arg("-o").arg(&out).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let mut paths: Vec<_> =
        std::fs::read_dir(out.join("cells")).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let cell: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            assert_eq!(cell["summary"]["status"], "ok", "{}: {cell}\n{stdout}", path.display());
            let repeat = cell["repeats"][0].clone();
            assert_eq!(repeat["backend"], "tch", "{repeat}");
            assert_eq!(repeat["timing"], "epoch", "the CPU default: {repeat}");
            let ips = repeat["images_per_s"].as_f64().unwrap_or(f64::NAN);
            assert!(ips > 0.0 && ips.is_finite(), "{}: {ips} img/s", repeat["cell"]);
            assert!(repeat["final_test_accuracy"].as_f64().is_some_and(f64::is_finite), "{repeat}");
            repeat
        })
        .collect()
}

fn fashion(dir: &Path, top: &str, tail: &str) -> std::path::PathBuf {
    let data = format!(
        "path = {:?}\ntrain_limit = 128\ntest_limit = 64",
        repo().join("configs/data/fashion-mnist").display().to_string()
    );
    small_config(dir, "tch", &format!("backend = \"tch\"\n{top}"), &data, "", tail)
}

const ZOO: &str = r#"name = "tch-zoo"
seed = 1
backend = "tch"

[data]
source = "synthetic"
shape = [3, 32, 32]
samples = 16
test_samples = 8
num_classes = 10

[transform]
plugin = "builtin:normalize"

[model]
plugin = "builtin:alexnet"

[train]
epochs = 1
batch_size = 8
max_steps_per_epoch = 2
warmup_steps = 1
lr = 0.01

[matrix]
include = [
  { "model.plugin" = "builtin:resnet", "model.config" = { depth = 50, stem = "cifar", width = 0.125 } },
  { "model.plugin" = "builtin:densenet", "model.config" = { depth = 121, stem = "cifar", growth = 4 } },
  { "model.plugin" = "builtin:vit", "model.config" = { variant = "tiny", patch = 4, depth = 2 } },
  { "model.plugin" = "builtin:swin", "model.config" = { variant = "t", window = 4 } },
  { "model.plugin" = "builtin:alexnet", "model.config" = {}, "data.shape" = [3, 64, 64] },
  { "model.plugin" = "builtin:lenet", "model.config" = {}, "data.shape" = [1, 28, 28] },
]
"#;

#[test]
fn every_model_trains_on_libtorch() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.toml");
    std::fs::write(&cfg, ZOO).unwrap();
    let repeats = run_ok(&cfg);
    let models: Vec<&str> = repeats.iter().map(|r| r["model"].as_str().unwrap_or("")).collect();
    assert_eq!(repeats.len(), 6, "{models:?}");
}

/// A multi-label and a captioning config, with the accuracy metric each reports.
fn tasks() -> [(&'static str, String, &'static str); 2] {
    let multi = format!(
        r#"name = "tch-multi"
seed = 1
backend = "tch"

[data]
source = "multi-label"
path = {:?}

[transform]
plugin = "builtin:normalize"

[model]
plugin = "builtin:densenet"
config = {{ depth = 121, stem = "cifar", growth = 4 }}

[train]
epochs = 1
batch_size = 16
max_steps_per_epoch = 2
warmup_steps = 1
"#,
        repo().join("configs/data/fashion-attributes").display().to_string()
    );
    let caption = format!(
        r#"name = "tch-caption"
seed = 1
backend = "tch"

[data]
source = "captions"
path = {:?}
tokenizer = "char"
test_fraction = 0.1

[transform]
plugin = "builtin:normalize"

[model]
plugin = "builtin:captioner"
config = {{ encoder = "small", channels = 8, embed = 16, hidden = 32, attention = true }}

[train]
epochs = 1
batch_size = 8
max_steps_per_epoch = 2
warmup_steps = 1
"#,
        repo().join("configs/data/molecules").display().to_string()
    );
    [("multi", multi, "mean AUROC"), ("caption", caption, "token accuracy")]
}

#[test]
fn multi_label_and_captioning_train_on_libtorch() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, metric) in tasks() {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        let cfg = sub.join("c.toml");
        std::fs::write(&cfg, text).unwrap();
        let repeats = run_ok(&cfg);
        assert_eq!(repeats[0]["accuracy_metric"], metric, "{}", repeats[0]);
    }
}

#[test]
fn detection_trains_on_libtorch() {
    let dir = tempfile::tempdir().unwrap();
    let voc = detection_sample(dir.path(), 32, 8, 96);
    let text = format!(
        r#"name = "tch-ssd"
seed = 1
backend = "tch"

[data]
source = "voc"
path = {:?}
resize = [96, 96]

[transform]
plugin = "builtin:ssd-augment"

[model]
plugin = "builtin:ssd"
config = {{ backbone = "resnet", depth = 18, width = 0.25, size = 96 }}

[train]
epochs = 1
batch_size = 8
max_steps_per_epoch = 2
warmup_steps = 1
"#,
        voc.display().to_string()
    );
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, text).unwrap();
    let repeats = run_ok(&cfg);
    assert_eq!(repeats[0]["accuracy_metric"], "mAP@0.5", "{}", repeats[0]);
}

/// Two replicas in one process, and two processes joined by Gloo (the
/// default where the build has it: DDP's buckets, and buckets of 1 KiB,
/// smaller than most parameters) and by burn-collective: every replica
/// ends identical, and the collectives train the same model whatever the
/// buckets, with several replicas a process too.
#[test]
fn replicas_and_processes_agree_on_libtorch() {
    let dir = tempfile::tempdir().unwrap();
    let matrix = r#"[matrix]
include = [
  { devices = 2 },
  { "distributed.processes" = 2 },
  { "distributed.processes" = 2, "distributed.bucket_mib" = 0.001 },
  { "distributed.processes" = 2, "distributed.collective" = "burn" },
  { "distributed.processes" = 3, "train.batch_size" = 30, "distributed.bucket_mib" = 0.01 },
  { "distributed.processes" = 3, "train.batch_size" = 30, "distributed.collective" = "burn" },
  { devices = 2, "distributed.processes" = 2 },
  { devices = 2, "distributed.processes" = 2, "distributed.collective" = "burn" },
]
"#;
    let cfg = fashion(dir.path(), "", matrix);
    let repeats = run_ok(&cfg);
    assert_eq!(repeats.len(), 8);
    for (r, collective) in repeats.iter().zip(["-", "gloo", "gloo", "burn", "gloo", "burn", "gloo", "burn"]) {
        let par = &r["parallel"];
        let workers = par["processes"].as_u64().unwrap() * par["devices"].as_u64().unwrap();
        assert_eq!(par["replicas"], workers, "{par}");
        assert_eq!(par["replicas_agree"], true, "every replica ends identical: {par}");
        assert_eq!(par["collective"], collective, "{par}");
    }
    let loss = |repeat: &Value| repeat["epochs"][0]["train_loss"].as_f64().unwrap();
    let burn = loss(&repeats[3]);
    for gloo in [loss(&repeats[1]), loss(&repeats[2])] {
        assert!((gloo - burn).abs() <= 1e-4 * burn.abs().max(1.0), "gloo {gloo} against burn {burn}");
    }
    let (gloo, burn) = (loss(&repeats[4]), loss(&repeats[5]));
    assert!(
        (gloo - burn).abs() <= 1e-4 * burn.abs().max(1.0),
        "3 processes: gloo {gloo} against burn {burn}"
    );
    // Two replicas a process summed first, then Gloo between the processes.
    let (gloo, burn) = (loss(&repeats[6]), loss(&repeats[7]));
    assert!(
        (gloo - burn).abs() <= 1e-4 * burn.abs().max(1.0),
        "2 processes x 2 devices: gloo {gloo} against burn {burn}"
    );
    let comm = |i: usize| repeats[i]["parallel"]["communication"].clone();
    let gradient_bytes = repeats[1]["parallel"]["gradient_bytes_per_step"].as_u64().unwrap();
    let buckets = |c: &Value| {
        c["bucket_bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect::<Vec<_>>()
    };
    let (whole, tiny, burn) = (comm(1), comm(2), comm(3));
    assert_eq!(whole["overlapped"], true, "{whole}");
    let whole_buckets = buckets(&whole);
    assert_eq!(whole_buckets.iter().sum::<u64>(), gradient_bytes, "{whole}");
    assert!(whole_buckets[0] <= 1 << 20, "the first bucket holds at most 1 MiB, as DDP's: {whole}");
    assert!(whole_buckets.iter().all(|&b| b <= 25 << 20), "{whole}");
    let tiny_buckets = buckets(&tiny);
    assert_eq!(tiny_buckets.iter().sum::<u64>(), gradient_bytes, "{tiny}");
    assert!(tiny_buckets.len() > 4, "{tiny}");
    assert!(tiny_buckets.iter().any(|&b| b > 1024), "a parameter larger than a bucket has its own: {tiny}");
    assert!(tiny_buckets.iter().filter(|&&b| b > 1024).all(|&b| b % 4 == 0), "{tiny}");
    assert_eq!(burn["overlapped"], false, "{burn}");
    assert!(burn["bucket_mib"].is_null(), "{burn}");
    for c in [&whole, &tiny, &burn] {
        let busbw = c["busbw_gbps"].as_f64().unwrap();
        assert!(busbw > 0.0 && busbw.is_finite(), "{c}");
        let overlap = c["overlap_pct"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&overlap), "{c}");
    }
}

#[test]
fn step_timing_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = fashion(dir.path(), "", "");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("warmup_steps = 1", "warmup_steps = 1\ntiming = \"step\"");
    std::fs::write(&cfg, text).unwrap();
    let out = cfg.with_file_name("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();
    let cells: Vec<_> = std::fs::read_dir(out.join("cells")).unwrap().map(|e| e.unwrap().path()).collect();
    let cell: Value = serde_json::from_str(&std::fs::read_to_string(&cells[0]).unwrap()).unwrap();
    assert_eq!(cell["repeats"][0]["timing"], "step", "{cell}");
}

#[test]
fn precision_is_an_axis() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = fashion(dir.path(), "", "[matrix]\n\"train.precision\" = [\"f32\", \"bf16\", \"f16\"]\n");
    let repeats = run_ok(&cfg);
    let precisions: Vec<&str> = repeats.iter().map(|r| r["precision"].as_str().unwrap_or("")).collect();
    assert_eq!(precisions, ["f32", "bf16", "f16"]);
    // One seed, one data order: only the float format differs, so the losses must too.
    let loss = |r: &Value| r["epochs"][0]["train_loss"].as_f64().unwrap_or(f64::NAN);
    assert!(repeats.iter().all(|r| loss(r).is_finite()), "{repeats:?}");
    assert_ne!(loss(&repeats[0]), loss(&repeats[1]), "bf16 trained exactly as f32 did");
    assert_ne!(loss(&repeats[0]), loss(&repeats[2]), "f16 trained exactly as f32 did");
    export_and_train(&cfg, 3);
}

/// Export every cell of `cfg` to PyTorch and train it there for three steps:
/// the script's model must have benchkit's parameter count (it checks) and
/// its figures must be finite.
fn export_and_train(cfg: &Path, cells: usize) {
    for cell in 0..cells {
        let script = cfg.with_file_name(format!("cell{cell}.py"));
        benchkit()
            .args(["export", "torch"])
            .arg(cfg)
            .args(["--cell", &cell.to_string(), "-o"])
            .arg(&script)
            .assert()
            .success();
        let out = std::process::Command::new(python())
            .arg(&script)
            .args(["--steps", "3", "--warmup", "1", "--epochs", "1", "--threads", "2", "--test-images", "16"])
            .output()
            .expect("python runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", script.display());
        let last = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().to_string();
        let result: Value = serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last}\n{stderr}"));
        assert_eq!(result["steps_measured"], 2, "{result}");
        let ips = result["images_per_s"].as_f64().unwrap_or(f64::NAN);
        assert!(ips > 0.0 && ips.is_finite(), "{result}");
        assert!(result["final_loss"].as_f64().is_some_and(f64::is_finite), "{result}");
    }
}

/// A two-process cell exported to PyTorch runs under torchrun as DDP with
/// the cell's bucket size: rank 0 alone prints the result, which counts
/// both workers' images.
#[test]
fn a_data_parallel_cell_exports_to_pytorch_ddp() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = fashion(dir.path(), "", "[distributed]\nprocesses = 2\nbucket_mib = 0.5\n");
    let script = dir.path().join("ddp.py");
    benchkit().args(["export", "torch"]).arg(&cfg).arg("-o").arg(&script).assert().success();
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(text.contains("torchrun --nproc-per-node 2"), "the docstring says how to run it");
    let port = ranks::free_ports(0);
    let out = std::process::Command::new(python())
        .args(["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", &port.to_string()])
        .arg(&script)
        .args(["--steps", "3", "--warmup", "1", "--epochs", "1", "--threads", "1", "--test-images", "16"])
        .output()
        .expect("torchrun runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(lines.len(), 1, "rank 0 alone prints the result: {stdout}");
    let result: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(
        (result["replicas"].as_u64(), result["bucket_mib"].as_f64()),
        (Some(2), Some(0.5)),
        "{result}"
    );
    let (total, each) =
        (result["images_per_s"].as_f64().unwrap(), result["images_per_s_per_replica"].as_f64().unwrap());
    assert!(total > 0.0 && (total - 2.0 * each).abs() < 1e-9 * total, "{result}");
}

#[test]
fn every_model_and_task_exports_to_pytorch() {
    let dir = tempfile::tempdir().unwrap();
    let zoo = dir.path().join("zoo");
    std::fs::create_dir(&zoo).unwrap();
    let cfg = zoo.join("c.toml");
    std::fs::write(&cfg, ZOO).unwrap();
    export_and_train(&cfg, 6);
    for (name, text, _) in tasks() {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        let cfg = sub.join("c.toml");
        std::fs::write(&cfg, text).unwrap();
        export_and_train(&cfg, 1);
    }
}

/// Gradients of a convolution (with bias) and a ReLU on LibTorch, through
/// its own backward kernels, against burn-flex's composed backward.
#[test]
fn libtorch_convolution_and_relu_gradients_match_flex() {
    use burn::backend::libtorch::LibTorch;
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::activation::relu;
    use burn::tensor::module::conv2d;
    use burn::tensor::ops::ConvOptions;
    use burn::tensor::{Tensor, TensorData, Tolerance};

    fn grads<B: burn::tensor::backend::AutodiffBackend>(
        x: &TensorData,
        w: &TensorData,
        b: &TensorData,
        options: ConvOptions<2>,
    ) -> [TensorData; 4] {
        let device = B::Device::default();
        let x = Tensor::<B, 4>::from_data(x.clone(), &device).require_grad();
        let w = Tensor::<B, 4>::from_data(w.clone(), &device).require_grad();
        let b = Tensor::<B, 1>::from_data(b.clone(), &device).require_grad();
        let y = relu(conv2d(x.clone(), w.clone(), Some(b.clone()), options));
        let weights = Tensor::<B, 4>::from_data(
            TensorData::new((0..y.shape().num_elements()).map(|i| (i % 7) as f32 - 3.0).collect(), y.dims()),
            &device,
        );
        let out = y.clone().into_data();
        let g = (y * weights).sum().backward();
        let grad = |t: Option<Tensor<B::InnerBackend, 4>>| t.expect("a gradient").into_data();
        [out, grad(x.grad(&g)), grad(w.grad(&g)), b.grad(&g).expect("a gradient").into_data()]
    }

    let random = |shape: Vec<usize>, seed: u64| {
        let n: usize = shape.iter().product();
        let mut s = seed;
        let values: Vec<f32> = (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect();
        TensorData::new(values, shape)
    };
    // (in, out, kernel, stride, padding, dilation, groups, side)
    let cases = [
        (3, 8, 3, 1, 1, 1, 1, 9),
        (4, 6, 3, 2, 1, 1, 2, 10),
        (8, 4, 1, 1, 0, 1, 1, 7),
        (2, 4, 7, 2, 3, 1, 1, 15),
        (4, 4, 3, 1, 2, 2, 4, 8),
    ];
    for (i, &(cin, cout, k, stride, padding, dilation, groups, side)) in cases.iter().enumerate() {
        let x = random(vec![2, cin, side, side], 1 + i as u64);
        let w = random(vec![cout, cin / groups, k, k], 100 + i as u64);
        let b = random(vec![cout], 200 + i as u64);
        let options = ConvOptions::new([stride; 2], [padding; 2], [dilation; 2], groups);
        let torch = grads::<Autodiff<LibTorch>>(&x, &w, &b, options.clone());
        let flex = grads::<Autodiff<Flex>>(&x, &w, &b, options);
        for (what, (t, f)) in
            ["output", "input grad", "weight grad", "bias grad"].iter().zip(torch.iter().zip(&flex))
        {
            assert_eq!(t.shape, f.shape, "case {i}: {what}");
            t.assert_approx_eq::<f32>(f, Tolerance::absolute(1e-3));
        }
    }
}

/// Training-mode batch norm on LibTorch (its own forward and backward
/// kernels, one node of burn's graph) against the composed form on flex:
/// outputs, input and parameter gradients, running statistics; then a
/// second, inference pass by the running statistics.
#[test]
fn libtorch_batch_norm_matches_the_composed_form() {
    use benchkit::model::ops::norm::{batch_norm, NormStats};
    use burn::backend::libtorch::LibTorch;
    use burn::backend::{Autodiff, Flex};
    use burn::module::{AutodiffModule, Param};
    use burn::nn::{BatchNorm, BatchNormConfig};
    use burn::tensor::backend::AutodiffBackend;
    use burn::tensor::{Tensor, TensorData, Tolerance};

    fn run<B: AutodiffBackend>(x: &TensorData, gamma: &TensorData, beta: &TensorData) -> Vec<TensorData> {
        let device = B::Device::default();
        let [b, c, p] = [x.shape[0], x.shape[1], x.shape[2]];
        let bn: BatchNorm<B> = BatchNorm {
            gamma: Param::from_tensor(Tensor::from_data(gamma.clone(), &device)),
            beta: Param::from_tensor(Tensor::from_data(beta.clone(), &device)),
            ..BatchNormConfig::new(c).with_momentum(0.2).init(&device)
        };
        let input = Tensor::<B, 3>::from_data(x.clone(), &device).require_grad();
        let y = batch_norm(&bn, input.clone(), NormStats::ByBackend);
        let weights = Tensor::<B, 3>::from_data(
            TensorData::new((0..b * c * p).map(|i| (i % 5) as f32 - 2.0).collect(), [b, c, p]),
            &device,
        );
        let g = (y.clone() * weights).sum().backward();
        let mut out = vec![y.into_data(), input.grad(&g).expect("an input gradient").into_data()];
        for param in [&bn.gamma, &bn.beta] {
            out.push(param.val().grad(&g).expect("a parameter gradient").into_data());
        }
        out.push(bn.running_mean.value().into_data());
        out.push(bn.running_var.value().into_data());
        let valid = bn.valid();
        out.push(batch_norm(&valid, input.inner(), NormStats::ByBackend).into_data());
        out
    }

    let random = |n: usize, seed: u64, scale: f32, shift: f32| {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale + shift
            })
            .collect::<Vec<f32>>()
    };
    // LibTorch takes the fused form; flex composes it.
    let fused = |data: TensorData, torch: bool| {
        let c = data.shape[1];
        let ones = TensorData::new(vec![1.0f32; c], [c]);
        if torch {
            let x = Tensor::<Autodiff<LibTorch>, 3>::from_data(data, &Default::default());
            let g = Tensor::from_data(ones, &Default::default());
            benchkit::backend::fused_norm::batch_norm_train(&x, &g, &g, 1e-5, None).is_some()
        } else {
            let x = Tensor::<Autodiff<Flex>, 3>::from_data(data, &Default::default());
            let g = Tensor::from_data(ones, &Default::default());
            benchkit::backend::fused_norm::batch_norm_train(&x, &g, &g, 1e-5, None).is_some()
        }
    };
    let map = || TensorData::new(random(24, 3, 1.0, 0.0), [2, 3, 4]);
    assert!(fused(map(), true), "this build has LibTorch's batch-norm kernels");
    assert!(!fused(map(), false), "flex composes batch norm");

    // A map and a feature vector (one position), away from zero mean and unit spread.
    for (i, [b, c, p]) in [[4, 6, 35], [8, 5, 1]].into_iter().enumerate() {
        let x = TensorData::new(random(b * c * p, 1 + i as u64, 4.0, 1.5), [b, c, p]);
        let gamma = TensorData::new(random(c, 10 + i as u64, 1.0, 1.0), [c]);
        let beta = TensorData::new(random(c, 20 + i as u64, 1.0, 0.0), [c]);
        let torch = run::<Autodiff<LibTorch>>(&x, &gamma, &beta);
        let flex = run::<Autodiff<Flex>>(&x, &gamma, &beta);
        let names =
            ["output", "input grad", "gamma grad", "beta grad", "running mean", "running var", "inference"];
        for (what, (t, f)) in names.iter().zip(torch.iter().zip(&flex)) {
            assert_eq!(t.shape, f.shape, "case {i}: {what}");
            t.assert_approx_eq::<f32>(f, Tolerance::absolute(1e-3));
        }
    }
}

/// SGD's update by LibTorch's fused kernel against burn's composed `Sgd`
/// on the same backend: momentum with and without Nesterov's look-ahead,
/// weight decay, plain SGD; three steps each, parameters compared after
/// every one, and the fused update done in place.
#[test]
fn libtorch_fused_sgd_matches_burns_sgd() {
    use benchkit::backend::fused_sgd::{self, Momenta, SgdSettings};
    use burn::backend::libtorch::LibTorch;
    use burn::backend::{Autodiff, Flex};
    use burn::module::{Module, ModuleMapper, Param};
    use burn::nn::conv::{Conv2d, Conv2dConfig};
    use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
    use burn::optim::decay::WeightDecayConfig;
    use burn::optim::momentum::MomentumConfig;
    use burn::optim::{GradientsParams, Optimizer, SgdConfig};
    use burn::tensor::{Tensor, TensorData, Tolerance};

    type B = Autodiff<LibTorch>;
    type Net = (Conv2d<B>, Linear<B>);

    /// The same module with storage of its own.
    struct Fresh;
    impl ModuleMapper<B> for Fresh {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, t, mapper) = param.consume();
            let fresh = Tensor::from_data(t.to_data(), &t.device()).require_grad();
            Param::from_mapped_value(id, fresh, mapper)
        }
    }
    fn grads(net: &Net, step: usize) -> GradientsParams {
        let device = Default::default();
        let n = 2 * 2 * 5 * 5;
        let x = Tensor::<B, 4>::from_data(
            TensorData::new(
                (0..n).map(|i| ((i * 7 + step * 3) % 11) as f32 / 5.0 - 1.0).collect(),
                [2, 2, 5, 5],
            ),
            &device,
        );
        let y = net.1.forward(net.0.forward(x).reshape([2, 75]));
        let loss = (y.clone() * y).sum();
        GradientsParams::from_grads(loss.backward(), net)
    }
    fn params(net: &Net) -> Vec<TensorData> {
        vec![
            net.0.weight.val().into_data(),
            net.0.bias.as_ref().expect("a bias").val().into_data(),
            net.1.weight.val().into_data(),
            net.1.bias.as_ref().expect("a bias").val().into_data(),
        ]
    }
    let weight_ptr =
        |net: &Net| net.0.weight.val().inner().into_primitive().tensor().tensor.data_ptr() as usize;

    assert!(fused_sgd::applies::<B>(), "this build has LibTorch's fused SGD");
    assert!(!fused_sgd::applies::<Autodiff<Flex>>(), "flex composes SGD");
    let device = Default::default();
    let start: Net = (
        Conv2dConfig::new([2, 3], [3, 3]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1)).init(&device),
        LinearConfig::new(75, 4).init(&device),
    );
    // Initialised once, not once a copy: parameters are made lazily.
    let initial = params(&start);
    for (momentum, nesterov, weight_decay) in [(0.9, false, 5e-4), (0.9, true, 1e-2), (0.0, false, 0.0)] {
        let settings = SgdSettings { momentum, nesterov, weight_decay };
        let mut burn_sgd = SgdConfig::new()
            .with_momentum((momentum > 0.0).then_some(MomentumConfig { momentum, dampening: 0.0, nesterov }))
            .with_weight_decay((weight_decay > 0.0).then(|| WeightDecayConfig::new(weight_decay as f32)))
            .init::<B, Net>();
        let mut momenta = Momenta::default();
        let (mut fused, mut composed) = (start.clone().map(&mut Fresh), start.clone().map(&mut Fresh));
        for step in 0..3 {
            let before = weight_ptr(&fused);
            let mut g = grads(&fused, step);
            fused = fused_sgd::step(settings, 0.05, fused, &mut g, &mut momenta);
            assert_eq!(weight_ptr(&fused), before, "updated in place");
            let g = grads(&composed, step);
            composed = burn_sgd.step(0.05, composed, g);
            for (i, (f, c)) in params(&fused).iter().zip(params(&composed)).enumerate() {
                f.assert_approx_eq::<f32>(&c, Tolerance::absolute(1e-5));
                assert_ne!(f, &initial[i], "momentum {momentum}: step {step} moved parameter {i}");
            }
        }
    }

    // A model still held elsewhere (an evaluation copy) shares the
    // parameters' storage: the step moves a copy and leaves it as it was.
    let settings = SgdSettings { momentum: 0.9, nesterov: false, weight_decay: 0.0 };
    let net = start.clone().map(&mut Fresh);
    let kept = burn::module::AutodiffModule::valid(&net);
    let before = kept.0.weight.val().into_data();
    let mut g = grads(&net, 0);
    let net = fused_sgd::step(settings, 0.05, net, &mut g, &mut Momenta::default());
    assert_eq!(kept.0.weight.val().into_data(), before, "the held copy is untouched");
    assert_ne!(net.0.weight.val().into_data(), before, "the trained model moved");
}

#[test]
fn the_memory_budget_counts_two_bytes_a_value_in_bf16() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    // ResNet-50 at 224 px, batch 64: about 8,450 MiB of f32 values, half that in bf16.
    let text = |precision: &str| {
        format!(
            "backend = \"tch\"\n[data]\nsource = \"synthetic\"\nshape = [3, 224, 224]\nsamples = 128\nnum_classes = 1000\n\
             [model]\nplugin = \"builtin:resnet\"\nconfig = {{ depth = 50 }}\n\
             [train]\nbatch_size = 64\neval_batch_size = 64\nprecision = \"{precision}\"\n\
             [plugins]\nmodel_memory_mib = 6000\n"
        )
    };
    std::fs::write(&cfg, text("f32")).unwrap();
    let assert = benchkit().arg("validate").arg(&cfg).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("to train at batch 64 in f32"), "{stderr}");
    std::fs::write(&cfg, text("bf16")).unwrap();
    benchkit().arg("validate").arg(&cfg).assert().success();
}

/// Gloo through LibTorch's c10d, measured by `benchkit collective` over 2
/// and 3 local ranks: the default where the build has it, every size
/// checked, bandwidths as nccl-tests defines them.
#[test]
fn gloo_all_reduces_between_processes() {
    let dir = tempfile::tempdir().unwrap();
    for ranks in [2usize, 3] {
        let out = dir.path().join(format!("r{ranks}"));
        let n = ranks.to_string();
        let assert = benchkit()
            .args([
                "collective",
                "--max-bytes",
                "1M",
                "--warmup",
                "2",
                "--iters",
                "3",
                "--processes",
                &n,
                "-o",
            ])
            .arg(&out)
            .assert()
            .success();
        let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
        assert!(stdout.contains(&format!("{ranks} ranks, collective gloo")), "{stdout}");
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("collective.json")).unwrap()).unwrap();
        assert_eq!(report["collective"], "gloo");
        let sizes = report["sizes"].as_array().unwrap();
        assert_eq!(sizes.len(), 18, "8 B to 1 MiB by doubling");
        let factor = 2.0 * (ranks as f64 - 1.0) / ranks as f64;
        for s in sizes {
            assert_eq!(s["wrong"], 0, "{s}");
            let (algbw, busbw) = (s["algbw_gbps"].as_f64().unwrap(), s["busbw_gbps"].as_f64().unwrap());
            assert!(algbw > 0.0 && (busbw - algbw * factor).abs() <= 1e-9 * busbw.max(1e-9), "{s}");
        }
    }
}

/// Two hosts (network namespaces joined by a veth pair), launched as
/// torchrun launches them, train one cell over Gloo, the default here.
#[test]
fn two_hosts_train_one_cell_over_gloo() {
    if let Some(hosts) = Hosts::make_or_skip() {
        let dir = tempfile::tempdir().unwrap();
        two_ranks(&fashion(dir.path(), "", ""), Some(&hosts), Some("gloo"));
    }
}

/// The `gloo` collective: see [`ranks::a_killed_rank_is_named_and_resume_finishes`].
#[test]
fn a_killed_gloo_rank_is_named_and_resume_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = fashion(dir.path(), "", &ranks::launch_tail("collective = \"gloo\"", 150));
    ranks::a_killed_rank_is_named_and_resume_finishes(&cfg);
}

/// NCCL is compiled in where the build found CUDA's headers beside a CUDA
/// LibTorch (as CI's is); on a machine without a GPU, asking for it fails
/// at once with LibTorch's reason, not a backtrace or a hang.
#[test]
fn nccl_without_a_gpu_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let run = || {
        benchkit()
            .args(["collective", "--collective", "nccl", "--processes", "1", "--max-bytes", "1M", "-o"])
            .arg(&out)
            .timeout(std::time::Duration::from_secs(120))
            .assert()
    };
    if std::path::Path::new("/dev/nvidiactl").exists() {
        // A GPU: the NCCL path itself, one rank, every size summed right
        // and timed (a world of one moves nothing: busbw 0). Up to 1 MiB
        // an all-reduce takes microseconds: a wait that sleeps between
        // looks (c10d's blocking wait, a millisecond or more) would show.
        run().success();
        let report: benchkit_schema::CollectiveReport =
            serde_json::from_str(&std::fs::read_to_string(out.join("collective.json")).unwrap()).unwrap();
        assert_eq!((report.collective.as_str(), report.ranks), ("nccl", 1));
        assert_eq!(report.sizes.last().map(|s| s.bytes), Some(1 << 20), "{report:?}");
        for size in &report.sizes {
            assert_eq!(size.wrong, 0, "{size:?}");
            assert!(size.time_us.is_finite() && size.time_us > 0.0 && size.busbw_gbps == 0.0, "{size:?}");
            assert!(size.time_us < 500.0, "{size:?}: a sleeping poll's floor");
        }
        return;
    }
    let assert = run().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("could not join the NCCL group") && stderr.contains("no GPUs found"), "{stderr}");
    assert!(!stderr.contains("frame #"), "no C++ backtrace: {stderr}");
}

/// A two-process cell over Gloo, drawn by the `timeline` reporter: the
/// communication thread shows each gradient bucket's all-reduce, from when
/// it was taken up to when its sum was back, inside its step, and the
/// trace passes the checker.
#[test]
fn gloo_buckets_are_drawn_inside_their_steps() {
    let dir = tempfile::tempdir().unwrap();
    let tail =
        "[[reporters]]\nplugin = \"builtin:timeline\"\n\n[distributed]\nprocesses = 2\nbucket_mib = 0.05\n";
    let cfg = fashion(dir.path(), "", tail);
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();
    let trace: Value =
        serde_json::from_slice(&std::fs::read(out.join("timeline-tch-r1.json")).unwrap()).unwrap();
    let facts = crate::common::trace_check::check(&trace).unwrap_or_else(|e| panic!("{}", e.join("\n")));
    assert!(facts.threads[&1].contains("all-reduce (communication thread)"), "{facts:?}");
    // 3 steps on each of 2 ranks, each with several buckets of 50 KiB.
    assert!(facts.buckets >= 2 * 3 * 4, "{} buckets", facts.buckets);
    // Each step's buckets carry the cell's gradients, every byte once.
    let record = common::records(&out).remove(0);
    let gradient_bytes = record.repeats[0].parallel.gradient_bytes_per_step as u64;
    let mut per_step = std::collections::BTreeMap::<(u64, u64), u64>::new();
    for e in trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "communication") {
        let key = (e["pid"].as_u64().unwrap(), e["args"]["step"].as_u64().unwrap());
        *per_step.entry(key).or_default() += e["args"]["bytes"].as_u64().unwrap();
    }
    assert_eq!(per_step.len(), 2 * 3, "{per_step:?}");
    assert!(per_step.values().all(|&b| b == gradient_bytes), "{per_step:?} against {gradient_bytes}");
}

/// Two processes training in bf16 and f16 over Gloo: the figures the ranks
/// gather (counts, machine tags, host names, the timeline's packed JSON)
/// come back exact though the backend's floats are narrower than f32.
#[test]
fn ranks_gather_exact_figures_in_bf16_and_f16() {
    let dir = tempfile::tempdir().unwrap();
    let tail =
        "[timeline]\n\n[distributed]\nprocesses = 2\n\n[matrix]\n\"train.precision\" = [\"bf16\", \"f16\"]\n";
    let cfg = fashion(dir.path(), "", tail);
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    let records = common::records(&out);
    assert_eq!(records.len(), 2);
    for record in &records {
        let run = &record.repeats[0];
        assert_eq!(run.parallel.replicas_agree, Some(true), "{}", record.cell);
        let ranks = &run.parallel.ranks;
        assert!(ranks.iter().all(|r| r.host == host && r.work_steps == 2), "{ranks:?}");
        // 128 training images over 2 processes at batch 32: 3 steps each, every image counted.
        assert_eq!(run.short_batches, None, "{}", record.cell);
    }
    let timelines = std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"event\":\"timeline\""))
        .count();
    assert_eq!(timelines, 2, "one timeline a cell, both ranks' read back");
}

/// `benchkit advise` on a Gloo cell over an emulated 100 Mbit/s link with
/// 1 MiB buckets: the bucket size swept under the overlap model (the
/// curve, the cell's own size on it), the best one predicted, and each
/// advised change measured by `--verify`, a miss explained.
/// It times a change against its prediction, so it runs alone (CI's tch
/// phase: `-- --ignored --test-threads=1 tch::advise_`).
#[test]
#[ignore = "times a change against its prediction: run alone"]
fn advise_sweeps_a_gloo_cells_bucket_size_and_measures_the_best() {
    let Some(_one) = common::shaping() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = format!(
        "path = {:?}\ntrain_limit = 2048\ntest_limit = 64",
        repo().join("configs/data/fashion-mnist").display().to_string()
    );
    let top = "[distributed]\nprocesses = 2\nthreads_per_device = 1\nlink = \"100mbit\"\n\
               collective = \"gloo\"\nbucket_mib = 1.0";
    let train = "batch_size = 96\nmax_steps_per_epoch = 10\nprofile = true";
    let cfg = small_config(dir.path(), "buckets", top, &data, train, "");
    let text = std::fs::read_to_string(&cfg).unwrap().replace("width = 0.125", "width = 0.25");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("out");
    benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();

    let assert = benchkit().arg("advise").arg(&out).arg("--verify").assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    eprintln!("{stdout}");
    let text = std::fs::read_to_string(out.join("advice.json")).unwrap();
    let report: benchkit_schema::AdviceReport = serde_json::from_str(&text).unwrap();
    let cell = &report.cells[0];
    let buckets = cell
        .advised
        .iter()
        .chain(&cell.not_advised)
        .find(|c| c.kind == benchkit_schema::ChangeKind::BucketSize)
        .unwrap_or_else(|| panic!("the bucket size is considered: {stdout}"));
    assert!(buckets.curve.len() >= 5, "{stdout}");
    assert!(buckets.curve.iter().any(|p| p[0] == 1.0), "the cell's own size is on the curve");
    assert!(buckets.uses.iter().any(|u| u.contains("100mbit")), "the emulated link priced it: {stdout}");
    // Where the change is advised, it is measured, and a miss beyond the
    // noise band says which assumption broke.
    for change in &cell.advised {
        let verified =
            change.verified.as_ref().unwrap_or_else(|| panic!("{} measured: {stdout}", change.title));
        assert!(verified.error_pct.is_finite(), "{stdout}");
        assert_eq!(verified.within_band, verified.why.is_none(), "{stdout}");
    }
}

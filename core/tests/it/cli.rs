//! End-to-end: the real `benchkit` binary on the shipped Fashion-MNIST subset.

use crate::common;

use common::{benchkit, repo};
use std::path::{Path, PathBuf};

/// A config in `dir` that trains on the shipped data.
fn config(dir: &Path, train: &str) -> PathBuf {
    let data = repo().join("configs/data/fashion-mnist");
    let text = format!(
        r#"name = "e2e"
seed = 7

[data]
path = "{}"
train_limit = 2048
test_limit = 500

[transform]
plugin = "builtin:normalize"
config = {{ mean = [0.286], std = [0.353] }}

[model]
plugin = "builtin:resnet"
config = {{ depth = 18, stem = "imagenet", width = 0.25 }}

[train]
{train}

[[reporters]]
plugin = "builtin:json"
"#,
        data.display()
    );
    let path = dir.join("e2e.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn run_trains_and_reports_json() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "epochs = 2\nbatch_size = 64\nlr = 0.1\nwarmup_steps = 3");
    let out = dir.path().join("out");
    let assert = benchkit().arg("run").arg(&cfg).arg("--output").arg(&out).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("img/s") && stdout.contains("e2e"), "{stdout}");

    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let run = &summary["run"];
    assert_eq!(run["config"]["train"]["batch_size"], 64);
    assert_eq!(run["config"]["train"]["drop_last"], true);
    assert!(run["environment"]["cpu_model"].is_string());
    assert_eq!(run["environment"]["burn_version"], "0.21.0");
    assert_eq!(run["plugins"][0]["name"], "resnet");
    assert_eq!(run["plugins"][0]["sha256"].as_str().unwrap().len(), 64);

    let cell = &summary["repeats"][0];
    assert_eq!((cell["cell"].as_str(), cell["repeat"].as_u64()), (Some("e2e"), Some(1)));
    assert_eq!(cell["model"], "resnet");
    assert_eq!(cell["batch_size"], 64);
    assert_eq!(
        (cell["backend"].as_str(), cell["timing"].as_str()),
        (Some("flex"), Some("epoch")),
        "the CPU default"
    );
    let epochs = cell["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 2);
    assert_eq!(epochs[0]["steps"], 32, "2048 images / 64, nothing dropped or resized");
    assert_eq!(cell["warmup"]["steps"], 3);
    assert_eq!(cell["steps_measured"], 64 - 3);
    assert!(cell["images_per_s"].as_f64().unwrap() > 0.0);
    assert!(cell.get("phases").is_none(), "profile is off by default");
    let peak = cell["peak_rss_mib"].as_f64().expect("peak memory on Linux");
    assert!((10.0..24_000.0).contains(&peak), "peak resident memory {peak} MiB");
    // Package energy where the kernel exposes RAPL; otherwise the reason.
    let energy = &cell["energy"];
    match energy["source"].as_str() {
        Some("rapl") => assert!(energy["joules_per_image"].as_f64().unwrap() > 0.0, "{energy}"),
        _ => assert!(energy["unavailable"].as_str().unwrap().contains("RAPL"), "{energy}"),
    }
    let wait = cell["data_wait_pct"].as_f64().unwrap();
    assert!((0.0..100.0).contains(&wait));
    let p50 = cell["step_ms"]["p50"].as_f64().unwrap();
    let p90 = cell["step_ms"]["p90"].as_f64().unwrap();
    assert!(p50 > 0.0 && p90 >= p50);
    let acc = cell["final_test_accuracy"].as_f64().unwrap();
    assert!(acc > 0.5, "ten classes: chance is 0.1, got {acc}");
    assert!(epochs[1]["train_loss"].as_f64().unwrap() < epochs[0]["train_loss"].as_f64().unwrap());
    assert_eq!(summary["summaries"][0]["images_per_s"]["median"], cell["images_per_s"]);
    assert_eq!(summary["end"]["failed"], 0);

    // The store holds the same run.
    let stored = common::record(&out.join("cells/000-e2e.json"));
    assert_eq!(Some(stored.repeats[0].images_per_s), cell["images_per_s"].as_f64());
    let run_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(run_json["cells"][0]["plan"]["train"]["batch_size"], 64);
}

#[test]
fn validate_reports_model_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "epochs = 1");
    let assert = benchkit().arg("validate").arg(&cfg).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("ok, 1 cell(s)") && stdout.contains("2048 train / 500 test"), "{stdout}");
}

#[test]
fn validate_refuses_a_split_that_fills_no_batch_and_config_only_checks_keys_alone() {
    let dir = tempfile::tempdir().unwrap();
    // 2048 training images over 2 processes: 1024 each, fewer than a batch of 1536.
    let cfg = config(dir.path(), "epochs = 1\nbatch_size = 3072\n[distributed]\nprocesses = 2");
    let assert = benchkit().arg("validate").arg(&cfg).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("the training set has 1024 images, fewer than one batch of 1536")
            && stderr.contains("each of its 2 processes trains a share of the 2048 images"),
        "{stderr}"
    );
    // The keys alone are fine, and a data path that is not here is not looked
    // at (what it holds is then said by `source`, as it cannot be detected).
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("configs/data/fashion-mnist", "no/such/folder")
        .replace("path = ", "source = \"idx\"\npath = ");
    std::fs::write(&cfg, text).unwrap();
    benchkit().arg("validate").arg(&cfg).assert().failure();
    let assert = benchkit().args(["validate", "--config-only"]).arg(&cfg).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("keys ok, 1 cell(s)"), "{stdout}");
}

#[test]
fn config_errors_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "epochs = 1\nbatch_sise = 32");
    let assert = benchkit().arg("run").arg(&cfg).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("e2e.toml:19:1: `train.batch_sise`: unknown field `batch_sise`"), "{stderr}");
    assert!(stderr.contains("batch_size"), "lists what is accepted: {stderr}");
}

#[test]
fn plugin_config_errors_name_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "epochs = 1");
    let text = std::fs::read_to_string(&cfg).unwrap().replace("depth = 18", "depth = 18, dept = 3");
    std::fs::write(&cfg, text).unwrap();
    let assert = benchkit().arg("validate").arg(&cfg).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("builtin:resnet") && stderr.contains("unknown config key `dept`"), "{stderr}");
}

#[test]
fn plugins_lists_the_builtins() {
    let assert = benchkit().args(["plugin", "list"]).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    for line in [
        "builtin:resnet",
        "builtin:normalize",
        "builtin:json",
        "builtin:csv",
        "builtin:markdown",
        "builtin:html",
        "builtin:mllog",
    ] {
        assert!(stdout.contains(line), "{stdout}");
    }
    assert!(stdout.contains("model") && stdout.contains("transform") && stdout.contains("reporter"));
}

#[test]
fn plugin_details_give_parameters_flops_and_config_keys() {
    let assert = benchkit().args(["plugin", "list", "--details"]).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    let section = |name: &str| {
        let start = stdout.find(&format!("builtin:{name} (")).unwrap_or_else(|| panic!("{name}: {stdout}"));
        stdout[start..].split("\n\n").next().unwrap().to_string()
    };
    for (name, params, flops) in [
        ("resnet", "11,689,512 parameters", "1.81 GFLOPs"),
        ("densenet", "7,978,856 parameters", "2.83 GFLOPs"),
        ("vit", "86,567,656 parameters", "17.5"),
        ("swin", "28,288,354 parameters", "4.49 GFLOPs"),
        ("alexnet", "61,100,840 parameters", "0.71 GFLOPs"),
        ("lenet", "61,706 parameters", "MFLOPs"),
        ("captioner", "parameters", "100 tokens"),
    ] {
        let text = section(name);
        assert!(text.contains(params) && text.contains(flops), "{text}");
    }
    assert!(section("resnet").contains("depth") && section("resnet").contains("18 | 34 | 50 | 101 | 152"));
    assert!(section("normalize").contains("mean"), "transforms list their keys too");
}

#[test]
fn export_torch_writes_the_cell_or_names_the_cells_to_choose_from() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "epochs = 2\nbatch_size = 32\nwarmup_steps = 3\nmax_steps_per_epoch = 20");
    let text = std::fs::read_to_string(&cfg).unwrap() + "\n[matrix]\n\"train.batch_size\" = [32, 64]\n";
    std::fs::write(&cfg, text).unwrap();

    let assert = benchkit().args(["export", "torch"]).arg(&cfg).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("has 2 cells; choose one with --cell: `batch_size=32`, `batch_size=64`"),
        "{stderr}"
    );
    let assert =
        benchkit().args(["export", "torch"]).arg(&cfg).args(["--cell", "batch_size=16"]).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("no cell `batch_size=16`; its cells: `batch_size=32`, `batch_size=64`"),
        "{stderr}"
    );

    let script = dir.path().join("cell.py");
    benchkit()
        .args(["export", "torch"])
        .arg(&cfg)
        .args(["--cell", "1", "-o"])
        .arg(&script)
        .assert()
        .success();
    let text = std::fs::read_to_string(&script).unwrap();
    let line = text.lines().find(|l| l.starts_with("CELL = json.loads(")).expect("the cell's facts");
    let literal: String = serde_json::from_str(&line["CELL = json.loads(".len()..line.len() - 1]).unwrap();
    let cell: serde_json::Value = serde_json::from_str(&literal).unwrap();
    assert_eq!(cell["cell"], "batch_size=64");
    assert_eq!(cell["batch"], 64);
    assert_eq!(cell["params"], 701_818, "ResNet-18 at width 0.25 on one channel");
    assert_eq!(cell["steps_per_epoch"], 20);
    assert_eq!((cell["epochs"].as_u64(), cell["warmup_steps"].as_u64()), (Some(2), Some(3)));
    assert_eq!((cell["task"].as_str(), cell["outputs"].as_u64()), (Some("classify"), Some(10)));
    assert_eq!(cell["input"], serde_json::json!([1, 28, 28]));
    // One attribute per parametric node, in graph order; each value dropped after its last use.
    assert!(
        text.contains("self.l0 = nn.Conv2d(1, 16, 7, stride=2, padding=3, groups=1, bias=False)  # conv1")
    );
    assert!(text.contains("self.l1 = nn.BatchNorm2d(16, eps=1e-5, momentum=0.1)  # bn1"));
    assert!(text.contains("x1 = self.l0(x0)  # conv1\n        del x0\n"), "{text}");
}

#[test]
fn export_torch_is_not_bound_by_this_machines_memory() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("big.toml");
    let text = r#"name = "big"
[data]
source = "synthetic"
shape = [3, 224, 224]
samples = 8192
num_classes = 1000

[model]
plugin = "builtin:resnet"
config = { depth = 50 }

[train]
batch_size = 8192
"#;
    std::fs::write(&cfg, text).unwrap();
    let assert = benchkit().arg("validate").arg(&cfg).assert().failure();
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("would need about"), "too big to train here: {stderr}");
    let assert = benchkit().args(["export", "torch"]).arg(&cfg).assert().success();
    let script = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(script.contains(r#"\"batch\":8192"#) && script.contains("class Net(nn.Module):"), "{script}");
}

/// Two processes of a local launch share the machine's memory: each one's
/// model is checked against half of it, and the refusal says so. Four
/// replicas in one process hold four copies of the parameters.
#[test]
fn the_processes_of_a_local_launch_each_get_a_share_of_the_memory() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("shared.toml");
    let text = |processes: usize, devices: usize| {
        format!(
            "devices = {devices}\n[data]\nsource = \"synthetic\"\nshape = [3, 224, 224]\nsamples = 8192\nnum_classes = 1000\n\
             [model]\nplugin = \"builtin:resnet\"\nconfig = {{ depth = 50 }}\n\
             [train]\nbatch_size = 8192\n[distributed]\nprocesses = {processes}\n"
        )
    };
    let refusal = |processes: usize, devices: usize| {
        std::fs::write(&cfg, text(processes, devices)).unwrap();
        let assert = benchkit().arg("validate").arg(&cfg).assert().failure();
        String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
    };
    let mib_after = |text: &str, before: &str| -> u64 {
        let rest = text.split(before).nth(1).unwrap_or_else(|| panic!("no {before:?} in {text}"));
        rest.split(" MiB").next().and_then(|n| n.trim().parse().ok()).unwrap_or_else(|| panic!("{text}"))
    };
    let two = refusal(2, 1);
    assert!(two.contains("to train at batch 4096 in f32"), "each process's share of the batch: {two}");
    assert!(two.contains("shared by the cell's 2 processes on this machine"), "{two}");
    let whole = two
        .split(" MiB, shared by")
        .next()
        .and_then(|t| t.rsplit(", ").next())
        .and_then(|n| n.parse::<u64>().ok());
    let (budget, whole) =
        (mib_after(&two, "budget of "), whole.unwrap_or_else(|| panic!("the whole: {two}")));
    assert!(whole.abs_diff(2 * budget) <= 2, "half of {whole} MiB each: {budget} MiB");
    let one = refusal(1, 1);
    assert!(!one.contains("shared by"), "{one}");
    assert!(mib_after(&one, "budget of ").abs_diff(whole) <= 1, "the whole {whole} MiB: {one}");
    let four = refusal(1, 4);
    assert!(four.contains("to train at batch 8192 over 4 replicas side by side"), "{four}");
    let params = |text: &str| mib_after(text, "in f32 (");
    assert!(params(&four).abs_diff(4 * params(&one)) <= 4, "4 copies: {} vs {}", params(&four), params(&one));
}

/// `batch_size = "max"` tries batches in fresh processes held under the
/// memory limit, and trains the cell at the largest that fit.
#[test]
fn batch_size_max_finds_the_largest_batch_under_the_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("max.toml");
    std::fs::write(
        &cfg,
        r#"name = "max"
seed = 1

[data]
source = "synthetic"
shape = [3, 64, 64]
samples = 8192
test_samples = 64

[model]
plugin = "builtin:resnet"
config = { depth = 18, width = 0.125 }

[train]
epochs = 1
max_steps_per_epoch = 3
warmup_steps = 1
batch_size = "max"
eval_batch_size = 32
memory_limit_mib = 400

[[reporters]]
plugin = "builtin:json"
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let assert = benchkit().arg("run").arg(&cfg).arg("-o").arg(&out).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(stdout.contains("batch_size = \"max\" found"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let repeat = &summary["repeats"][0];
    let search = &repeat["batch_search"];
    let chosen = search["chosen"].as_u64().unwrap();
    assert_eq!(repeat["batch_size"].as_u64(), Some(chosen), "the cell trains at the batch found");
    assert!(chosen >= 8 && chosen.is_multiple_of(8), "{search}");
    let trials = search["trials"].as_array().unwrap();
    let fit = |t: &serde_json::Value| t["fits"].as_bool().unwrap();
    let batch = |t: &serde_json::Value| t["batch"].as_u64().unwrap();
    assert!(trials.iter().any(|t| batch(t) == chosen && fit(t)), "{search}");
    // Every larger batch tried ran out of memory, held at 400 MiB by the limit.
    let larger: Vec<&serde_json::Value> = trials.iter().filter(|t| batch(t) > chosen).collect();
    assert!(!larger.is_empty(), "{search}");
    for t in larger {
        assert!(!fit(t), "{search}");
        assert!(t["reason"].as_str().unwrap().contains("out of memory"), "{t}");
    }
    assert!(trials.iter().filter(|t| fit(t)).all(|t| t["images_per_s"].as_f64().unwrap() > 0.0));
    assert!(repeat["peak_rss_mib"].as_f64().unwrap() <= 400.0 + 32.0, "{repeat}");
}

/// `predict` from a measured cell: two workers on a 1 Gbit/s ring add
/// 2·α and the gradient's bytes at 125 MB/s to the measured compute; a
/// link it does not know is refused with the ones it does.
#[test]
fn predict_prices_a_measured_cell_on_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "epochs = 1\nbatch_size = 32\nmax_steps_per_epoch = 4\nwarmup_steps = 1");
    let out = dir.path().join("out");
    benchkit().args(["run", "-q", "-o"]).arg(&out).arg(&cfg).assert().success();
    let assert = benchkit().arg("predict").arg(&out).args(["--link", "1gbit"]).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
    assert!(
        stdout.contains("weak scaling") && stdout.contains("strong scaling") && stdout.contains("α assumed"),
        "{stdout}"
    );
    let p: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("predict.json")).unwrap()).unwrap();
    let compute = p["measured"]["compute_s"].as_f64().unwrap();
    let bytes: f64 =
        p["measured"]["bucket_bytes"].as_array().unwrap().iter().filter_map(|b| b.as_f64()).sum();
    let cell: serde_json::Value = serde_json::from_slice(
        &std::fs::read(std::fs::read_dir(out.join("cells")).unwrap().next().unwrap().unwrap().path())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(bytes, cell["repeats"][0]["params"].as_f64().unwrap() * 4.0, "one f32 gradient a parameter");
    let two = p["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["scaling"] == "weak" && q["algorithm"] == "ring" && q["replicas"] == 2)
        .expect("a weak ring point at 2 workers");
    let expected = compute + 2.0 * 25e-6 + bytes / 125e6;
    assert!((two["step_s"].as_f64().unwrap() - expected).abs() < 1e-9, "{two} against {expected}");
    assert!(p["points"]
        .as_array()
        .unwrap()
        .iter()
        .all(|q| q["scaling"] == "weak" || q["replicas"].as_u64() <= Some(32)));

    // Nodes of two workers, overlapped: 2 and 6 workers only; the one
    // bucket is produced when the backward pass ends, so none of it hides.
    benchkit()
        .arg("predict")
        .arg(&out)
        .args(["--link", "1gbit", "--machines", "3,1", "--gpus-per-machine", "2", "--overlap"])
        .assert()
        .success();
    let p: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("predict.json")).unwrap()).unwrap();
    assert_eq!(p["overlap"], "backward", "{p}");
    let points = p["points"].as_array().unwrap();
    let workers: Vec<u64> = points.iter().filter_map(|q| q["replicas"].as_u64()).collect();
    assert_eq!(workers, [2, 6, 2, 6, 2, 6, 2, 6], "weak and strong, ring and tree");
    for q in points {
        let (step, exposed, all) = (
            q["step_s"].as_f64().unwrap(),
            q["exposed_communication_s"].as_f64().unwrap(),
            q["communication_s"].as_f64().unwrap(),
        );
        assert!(exposed > 0.0 && (exposed - all).abs() < 1e-12, "{q}");
        let share = if q["scaling"] == "weak" { 1.0 } else { 1.0 / q["replicas"].as_f64().unwrap() };
        assert!((step - (compute * share + exposed)).abs() < 1e-9, "{q}");
    }

    // A --mock run's figures are invented: nothing is predicted from them.
    let mock = dir.path().join("mock");
    benchkit().args(["run", "-q", "--mock", "-o"]).arg(&mock).arg(&cfg).assert().success();
    let refused = benchkit().arg("predict").arg(&mock).assert().failure();
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(stderr.contains("--mock run"), "{stderr}");

    let refused = benchkit().arg("predict").arg(&out).args(["--link", "warp"]).assert().failure();
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(stderr.contains("--link: unknown link `warp`") && stderr.contains("ib200"), "{stderr}");
}

/// The first GPU's check, planned here: both scripts parse, and the dry run
/// lists every step with a budget: burn's `cuda` first, each model cold then
/// warm, then LibTorch's and PyTorch's ResNet-50 cells and the quickstart on
/// LibTorch, the budgets adding up to at most 9.5 minutes (one call to a GPU
/// machine runs at most 10).
#[test]
fn the_gpu_check_plans_every_step_within_a_call() {
    for script in ["scripts/gpu-check.sh", "scripts/gpu-bundle.sh"] {
        let status = std::process::Command::new("bash").arg("-n").arg(repo().join(script)).status().unwrap();
        assert!(status.success(), "{script} does not parse");
    }
    let out = std::process::Command::new("bash")
        .arg(repo().join("scripts/gpu-check.sh"))
        .arg("--dry-run")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan = String::from_utf8_lossy(&out.stdout).into_owned();
    let steps: Vec<(&str, u64)> = plan
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("total"))
        .map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next().unwrap_or_default();
            (name, words.next().and_then(|b| b.parse().ok()).unwrap_or_else(|| panic!("no budget: {l}")))
        })
        .collect();
    let names: Vec<&str> = steps.iter().map(|s| s.0).collect();
    for step in ["nvidia-smi", "quickstart-tch-cuda", "resnet50-tch-cuda", "resnet50-pytorch-cuda"] {
        assert!(names.contains(&step), "{step} is not planned: {plan}");
    }
    // burn's CUDA kernels are the unmeasured engine: they run first, each
    // model cold and then warm from the kernels benchkit kept in its cache
    // (one folder for the four steps).
    let jit = ["quickstart-cuda-cold", "quickstart-cuda-warm", "resnet50-cuda-cold", "resnet50-cuda-warm"];
    assert_eq!(names[1..5], jit, "{plan}");
    for line in plan.lines().filter(|l| jit.iter().any(|j| l.starts_with(j))) {
        assert!(line.contains("BENCHKIT_CACHE_DIR=$O/cache "), "{line}");
    }
    let total: u64 = steps.iter().map(|s| s.1).sum();
    assert!(total <= 570, "{total} s planned: {plan}");
    let printed = plan.lines().find(|l| l.starts_with("total")).and_then(|l| l.split_whitespace().nth(1));
    assert_eq!(printed, Some(total.to_string().as_str()), "{plan}");
    // The ResNet-50 template trains the four cells each engine runs.
    let template = std::fs::read_to_string(repo().join("configs/gpu-check/resnet50.toml")).unwrap();
    assert!(
        template.contains("\"train.batch_size\" = [128, 256]") && template.contains("[\"f32\", \"bf16\"]")
    );
    assert!(template.contains("depth = 50") && template.contains("shape = [3, 224, 224]"));
}

/// `benchkit schema` prints the committed JSON Schema of each results file,
/// lists them without a name, and refuses a name it does not know, listing
/// the accepted ones.
#[test]
fn schema_prints_the_committed_json_schemas() {
    let list = benchkit().arg("schema").assert().success();
    let list = String::from_utf8_lossy(&list.get_output().stdout).into_owned();
    assert!(list.starts_with(&format!("results schema {}", benchkit_schema::SCHEMA_VERSION)), "{list}");
    for name in ["run", "cell", "event", "summary", "collective"] {
        assert!(list.lines().any(|l| l.starts_with(name)), "{name} not listed: {list}");
        let printed = benchkit().args(["schema", name]).assert().success();
        let printed = String::from_utf8_lossy(&printed.get_output().stdout).into_owned();
        let committed = repo().join(format!("schema/json/{name}.schema.json"));
        let committed =
            std::fs::read_to_string(&committed).unwrap_or_else(|e| panic!("{}: {e}", committed.display()));
        assert_eq!(printed, committed, "{name}: the printed schema is the committed one");
        let schema: serde_json::Value = serde_json::from_str(&printed).unwrap();
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema", "{name}");
    }
    let refused = benchkit().args(["schema", "runs"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(stderr.contains("run, cell, event, summary, collective"), "{stderr}");
}

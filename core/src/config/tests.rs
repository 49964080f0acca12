//! Config validation: defaults, ranges, accepted values and where errors point.

use super::plan::DEFAULT_CELL_TIMEOUT_S;
use super::*;
use crate::backend::{BackendKind, Precision};
use crate::data::{Pipeline, Shuffle, SourceKind};
use crate::plugin::PluginSource;

/// Validate `body` as a config file sitting next to a data directory.
fn parse(body: &str) -> Result<Plan, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/train-images-idx3-ubyte"), b"").unwrap();
    let file = dir.path().join("c.toml");
    Plan::parse(body, &file)
}

const GOOD: &str =
    "[data]\npath = \"data\"\n\n[model]\nplugin = \"builtin:resnet\"\nconfig = { depth = 18 }\n";

#[test]
fn a_minimal_config_gets_every_default() {
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.name, "c");
    assert_eq!(plan.backend, BackendKind::Flex);
    assert_eq!(plan.train.batch_size, 64);
    assert_eq!(plan.transform.source, PluginSource::Builtin("normalize".into()));
    assert_eq!(plan.model.config_json(), r#"{"depth":18}"#);
    assert_eq!(plan.reporters.len(), 1, "the json reporter by default");
}

#[test]
fn unknown_key_names_line_and_accepted_keys() {
    let err = parse(&format!("{GOOD}\n[train]\nepochs = 1\nepochz = 2\n")).unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (10, "train.epochz"));
    assert!(err.message.contains("unknown field `epochz`") && err.message.contains("`epochs`"), "{err}");
    assert!(err.to_string().starts_with(&format!("{}:10:1: `train.epochz`", err.file.display())));
}

#[test]
fn wrong_type_names_the_key() {
    let err = parse(&format!("{GOOD}[train]\nepochs = \"two\"\n")).unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (8, "train.epochs"));
    assert!(err.message.contains("invalid type"), "{err}");
}

#[test]
fn missing_plugin_is_reported_at_its_table() {
    let err = parse("[data]\npath = \"data\"\n\n[model]\nconfig = { depth = 18 }\n").unwrap_err();
    assert!(err.message.contains("missing field `plugin`"), "{err}");
    assert_eq!(err.key, "model.plugin", "{err}");
    let err = parse("[data]\npath = \"data\"\n").unwrap_err();
    assert_eq!((err.key.as_str(), err.message.as_str()), ("model", "missing field `model`"));
}

#[test]
fn unknown_builtin_and_missing_file_name_the_line() {
    let err = parse(&GOOD.replace("builtin:resnet", "builtin:resnet50")).unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (5, "model.plugin"));
    assert!(err.message.contains("built-ins: ") && err.message.contains("builtin:resnet,"), "{err}");
    let err = parse(&GOOD.replace("builtin:resnet", "models/mine.wasm")).unwrap_err();
    assert!(err.message.contains("mine.wasm does not exist"), "{err}");
}

#[test]
fn precision_is_f32_by_default_and_refused_where_the_backend_lacks_it() {
    assert_eq!(parse(GOOD).unwrap().train.precision, Precision::F32);
    let err = parse(&format!("{GOOD}[train]\nprecision = \"bf16\"\n")).unwrap_err();
    assert_eq!(err.key, "train.precision");
    assert_eq!(
        err.message,
        "backend \"flex\" trains in f32 only; bf16 needs backend = \"cuda\" or \"tch\" or \"tch-cuda\" or \"pytorch\" or \"pytorch-cuda\" or \"pytorch-compiled\" or \"pytorch-cuda-compiled\""
    );
    let err = parse(&format!("{GOOD}[train]\nprecision = \"fp8\"\n")).unwrap_err();
    assert_eq!(err.message, "unknown value \"fp8\"; accepted: \"f32\", \"bf16\", \"f16\"");
    if BackendKind::Tch.compiled() {
        let plan = parse(&format!("backend = \"tch\"\n{GOOD}[train]\nprecision = \"f16\"\n")).unwrap();
        assert_eq!(plan.train.precision, Precision::F16);
    }
}

#[test]
fn timing_defaults_to_epoch_on_the_cpu_and_can_be_per_step() {
    assert_eq!(parse(GOOD).unwrap().train.timing, Timing::Epoch);
    let plan = parse(&format!("{GOOD}[train]\ntiming = \"step\"\n")).unwrap();
    assert_eq!(plan.train.timing, Timing::Step);
    let err = parse(&format!("{GOOD}[train]\ntiming = \"batch\"\n")).unwrap_err();
    assert_eq!(
        (err.key.as_str(), err.message.as_str()),
        ("train.timing", "unknown value \"batch\"; accepted: \"step\", \"epoch\"")
    );
}

#[test]
fn out_of_range_values_say_what_is_accepted() {
    let err = parse(&format!("{GOOD}[train]\nbatch_size = 0\n")).unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (8, "train.batch_size"));
    assert_eq!(
        err.message,
        "expected a batch size of at least 1, or \"max\" for the largest batch that trains"
    );
    let err = parse(&format!("{GOOD}[train]\nbatch_size = \"biggest\"\n")).unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (8, "train.batch_size"));
    let plan = parse(&format!("{GOOD}[train]\nbatch_size = \"max\"\nmemory_limit_mib = 2048\n")).unwrap();
    assert_eq!(plan.train.batch_search, Some(crate::config::BatchSearch { eval_batch_given: false }));
    assert_eq!((plan.train.batch_size, plan.train.memory_limit_mib), (8, Some(2048)));
    let err = parse(&format!("{GOOD}[train]\nmemory_limit_mib = 10\n")).unwrap_err();
    assert_eq!(
        (err.key.as_str(), err.message.as_str()),
        ("train.memory_limit_mib", "expected at least 64 MiB")
    );
    let err = parse(&format!("backend = \"tpu\"\n{GOOD}")).unwrap_err();
    assert_eq!(
        err.message,
        "unknown value \"tpu\"; accepted: \"flex\", \"cuda\", \"wgpu\", \"tch\", \"tch-cuda\", \"pytorch\", \"pytorch-cuda\", \"pytorch-compiled\", \"pytorch-cuda-compiled\""
    );
    let err = parse(&GOOD.replace("path = \"data\"", "path = \"nowhere\"")).unwrap_err();
    assert_eq!(err.line, 2);
    assert!(err.message.contains("does not exist"), "{err}");
}

#[test]
fn repeats_timeout_target_and_cost() {
    let body = format!(
        "repeats = 3\ncell_timeout_s = 600\n{GOOD}[train]\ntarget_accuracy = 0.85\n[cost]\nusd_per_hour = {{ flex = 1, cuda = 2.5 }}\n"
    );
    let plan = parse(&body).unwrap();
    assert_eq!((plan.repeats, plan.cell_timeout_s), (3, Some(600.0)));
    assert_eq!(parse(GOOD).unwrap().cell_timeout_s, Some(DEFAULT_CELL_TIMEOUT_S), "a limit by default");

    assert_eq!(plan.train.target_accuracy, Some(0.85));
    assert_eq!(plan.usd_per_hour, Some(1.0), "the price of the plan's own backend");
    let err = parse(&body.replace("cuda = 2.5", "tpu = 2.5")).unwrap_err();
    assert_eq!(err.key, "cost.usd_per_hour");
    assert!(err.message.contains("not a backend"), "{err}");
    let err = parse(&body.replace("0.85", "85")).unwrap_err();
    assert!(err.message.contains("(0, 1]"), "{err}");
}

/// `[cost.machines]`: a machine's own price, found in its GPU models, else
/// its CPU model, else its host name (the longest key that matches there),
/// else the backend's.
#[test]
fn prices_by_machine() {
    let body = format!(
        "{GOOD}[cost]\nusd_per_hour = {{ flex = 1 }}\nmachines = {{ \"H100\" = 4, \"H100 80GB\" = 5, \"epyc\" = 0.5, \"node-7\" = 2 }}\n"
    );
    let plan = parse(&body).unwrap();
    let machine = |cpu: &str, gpus: &[&str], host: &str| benchkit_schema::Machine {
        cpu_model: cpu.into(),
        logical_cores: 8,
        memory_gib: 32.0,
        gpus: gpus.iter().map(|g| g.to_string()).collect(),
        gpu_driver: None,
        hostname: host.into(),
    };
    assert_eq!(
        plan.price_on(&machine("Xeon", &["NVIDIA H100 80GB HBM3"], "a")),
        Some(5.0),
        "the longest key"
    );
    assert_eq!(plan.price_on(&machine("Xeon", &["NVIDIA H100 PCIe"], "a")), Some(4.0));
    assert_eq!(plan.price_on(&machine("AMD EPYC 7763", &[], "a")), Some(0.5), "case aside");
    assert_eq!(plan.price_on(&machine("Xeon", &[], "node-7")), Some(2.0), "the host name");
    assert_eq!(plan.price_on(&machine("Xeon", &[], "laptop")), Some(1.0), "the backend's price");
    // An A100 machine with an EPYC CPU is priced by its GPUs, however long the CPU's key.
    assert_eq!(plan.price_on(&machine("AMD EPYC 7763", &["NVIDIA H100 PCIe"], "node-7")), Some(4.0));
    let err = parse(&body.replace("\"epyc\" = 0.5", "\"epyc\" = -1")).unwrap_err();
    assert_eq!(err.key, "cost.machines");
    assert!(err.message.contains(">= 0"), "{err}");
    let err = parse(&body.replace("\"epyc\"", "\" \"")).unwrap_err();
    assert!(err.message.contains("needs a name"), "{err}");
}

#[test]
fn data_knobs_are_resolved_and_checked() {
    let body = GOOD.replace(
        "path = \"data\"\n",
        "path = \"data\"\nresize = 224\nshuffle = 1000\npipeline = \"naive\"\nworkers = 3\n",
    );
    let d = parse(&body).unwrap().data;
    assert_eq!(d.source, SourceKind::Idx, "detected from the directory");
    assert_eq!((d.resize, d.shuffle, d.pipeline), (Some([224, 224]), Shuffle::Buffer(1000), Pipeline::Naive));
    assert_eq!((d.workers, d.prefetch), (3, 3), "prefetch defaults to max(2, workers)");
    let d = parse(&body.replace("resize = 224", "resize = [32, 48]")).unwrap().data;
    assert_eq!(d.resize, Some([32, 48]));
    let err = parse(&body.replace("resize = 224", "resize = [32]")).unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (3, "data.resize"));
    let err = parse(&body.replace("shuffle = 1000", "shuffle = \"some\"")).unwrap_err();
    assert!(err.message.contains("\"full\", \"none\" or a shuffle buffer"), "{err}");
    let err = parse("name = \"x\"\n[data]\nnum_classes = 10\n\n[model]\nplugin = \"builtin:resnet\"\n")
        .unwrap_err();
    assert_eq!((err.line, err.message.as_str()), (2, "[data] needs a path (or source = \"synthetic\")"));
    assert!(err.key.starts_with("data"), "{err}");
    let err = parse(&GOOD.replace("path = \"data\"", "source = \"cifar10\"")).unwrap_err();
    assert!(err.message.contains("needs data.path"), "{err}");
}

#[test]
fn gpu_and_libtorch_backends_need_their_features() {
    for (name, feature) in [("cuda", "cuda"), ("tch", "tch"), ("tch-cuda", "tch")] {
        let result = parse(&format!("backend = \"{name}\"\n{GOOD}"));
        if BackendKind::from_name(name).is_some_and(BackendKind::compiled) {
            assert_eq!(result.expect("a compiled backend parses").backend.name(), name);
        } else {
            let err = result.unwrap_err();
            assert_eq!(err.line, 1);
            assert!(err.message.contains(&format!("--features {feature}")), "{err}");
        }
    }
    let err = parse(&format!("backend = \"torch\"\n{GOOD}")).unwrap_err();
    assert!(err.message.contains("tch-cuda"), "the accepted names are listed: {err}");
}

#[test]
fn every_choice_lists_what_it_accepts_at_its_line() {
    let cases = [
        ("mode = \"infer\"\n", "mode", "\"train\", \"loader-only\""),
        ("[train]\nlr_schedule = \"step\"\n", "train.lr_schedule", "\"constant\", \"cosine\""),
        ("[train]\nlr_scaling = \"sqrt\"\n", "train.lr_scaling", "\"none\", \"linear\""),
        (
            "[distributed]\nstrategy = \"mesh\"\n",
            "distributed.strategy",
            "\"ring\", \"tree\", \"centralized\"",
        ),
        ("[distributed]\nlaunch = \"slurm\"\n", "distributed.launch", "\"local\", \"external\""),
    ];
    for (extra, key, accepted) in cases {
        let body = if extra.starts_with('[') { format!("{GOOD}{extra}") } else { format!("{extra}{GOOD}") };
        let err = parse(&body).unwrap_err();
        assert_eq!(err.key, key, "{err}");
        assert!(err.message.starts_with("unknown value") && err.message.ends_with(accepted), "{err}");
    }
    let body = GOOD.replace("path = \"data\"", "path = \"data\"\npipeline = \"fast\"\non_corrupt = \"skip\"");
    let err = parse(&body).unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (3, "data.pipeline"));
    assert_eq!(err.message, "unknown value \"fast\"; accepted: \"naive\", \"optimized\"");
}

#[test]
fn coordinator_is_host_port_and_an_external_launch_needs_its_addresses() {
    let external = "[distributed]\nprocesses = 2\nlaunch = \"external\"\n";
    let err = parse(&format!("{GOOD}{external}")).unwrap_err();
    assert!(err.message.contains("needs distributed.coordinator"), "{err}");
    let err = parse(&format!("{GOOD}{external}coordinator = \"10.0.0.1\"\n")).unwrap_err();
    assert_eq!(err.key, "distributed.coordinator");
    assert!(err.message.contains("\"10.0.0.1\" is not host:port"), "{err}");
    // The data ports default (from 7500) when not given.
    let plan = parse(&format!("{GOOD}{external}coordinator = \"10.0.0.1:7400\"\n")).unwrap();
    assert_eq!(plan.train.parallel.data_port, None);
    let plan =
        parse(&format!("{GOOD}{external}coordinator = \"10.0.0.1:7400\"\ndata_port = 7600\n")).unwrap();
    let c = plan.train.parallel.coordinator.clone().expect("parsed");
    assert_eq!((c.host.as_str(), c.port), ("10.0.0.1", 7400));
    assert_eq!(plan.train.parallel.data_port, Some(7600));
    assert_eq!(
        plan.train.parallel.launched_by,
        [
            "distributed.processes = 2",
            "distributed.rank = 0 (the default)",
            "distributed.coordinator = 10.0.0.1:7400"
        ]
    );
    assert_eq!(plan.train.local_batch(), 32, "64 images over 2 processes");
}

#[test]
fn labels_are_checked_where_they_are_written() {
    let body = GOOD.replace(
        "path = \"data\"",
        "path = \"data\"\nsource = \"multi-label\"\nlabels = [\"Mass\", \"Mass\"]",
    );
    let err = parse(&body).unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (4, "data.labels"));
    assert!(err.message.contains("distinct label names"), "{err}");
}

#[test]
fn a_pipeline_is_read_from_distributed_with_gpipe_defaults() {
    let plan = parse(&format!("{GOOD}[distributed]\nstages = 2\nmicro_batches = 4\n")).unwrap();
    let p = plan.train.parallel.pipeline.clone().unwrap();
    assert_eq!((p.stages, p.micro_batches, p.devices, p.balance), (2, 4, 2, Balance::Estimated));
    assert_eq!(p.checkpoint, Checkpoint::ExceptLast);
    assert_eq!(plan.train.parallel.device_count(), 2);
    assert!(!p.checkpoint.recomputes(3, 4) && p.checkpoint.recomputes(2, 4));
    let plan = parse(&format!(
        "{GOOD}[distributed]\nstages = 2\nbalance = [10, 20]\ncheckpoint = \"always\"\nstage_devices = 1\n"
    ))
    .unwrap();
    let p = plan.train.parallel.pipeline.unwrap();
    assert_eq!(
        (p.micro_batches, p.balance, p.checkpoint, p.devices),
        (1, Balance::Nodes(vec![10, 20]), Checkpoint::Always, 1)
    );
    let plan = parse(&format!("{GOOD}[distributed]\nstages = 2\nbalance = \"measured\"\n")).unwrap();
    assert_eq!(plan.train.parallel.pipeline.unwrap().balance, Balance::Measured);
    assert!(parse(GOOD).unwrap().train.parallel.pipeline.is_none());
}

#[test]
fn pipeline_errors_name_the_key_and_what_is_accepted() {
    let cases = [
        ("[distributed]\nstages = 0\n", "distributed.stages", "1 to 256 stages"),
        ("[distributed]\nstages = 2\nbalance = [3]\n", "distributed.balance", "expected 2 node counts"),
        ("[distributed]\nstages = 2\nbalance = \"even\"\n", "distributed.balance", "\"measured\""),
        ("[distributed]\nstages = 2\nstage_devices = 3\n", "distributed.stage_devices", "1 to 2 devices"),
        ("[distributed]\ncheckpoint = \"always\"\n", "distributed.checkpoint", "set distributed.stages"),
        (
            "[distributed]\nstages = 2\ncheckpoint = \"sometimes\"\n",
            "distributed.checkpoint",
            "\"except-last\"",
        ),
        ("devices = 2\n[distributed]\nstages = 2\n", "devices", "data-parallel replicas of a pipeline"),
        ("[distributed]\nstages = 2\nprocesses = 2\n", "distributed.processes", "one process"),
        (
            "[train]\nbatch_size = 4\n[distributed]\nmicro_batches = 8\n",
            "distributed.micro_batches",
            "8 micro-batches",
        ),
        (
            "[train]\nprofile = true\n[distributed]\nstages = 2\n",
            "distributed.stages",
            "leave train.profile off",
        ),
    ];
    for (tail, key, message) in cases {
        let body =
            if tail.starts_with("devices") { format!("{tail}{GOOD}") } else { format!("{GOOD}{tail}") };
        let err = parse(&body).unwrap_err();
        assert_eq!(err.key, key, "{tail}: {err}");
        assert!(err.message.contains(message), "{tail}: {err}");
    }
}

#[test]
fn a_launchers_variables_fill_what_distributed_leaves_out() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        LaunchEnv::from_vars(|name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()))
            .unwrap()
    };
    let torchrun = vars(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_RANK", "1"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29400"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/train-images-idx3-ubyte"), b"").unwrap();
    let file = dir.path().join("c.toml");
    let plan = |body: &str, env: &LaunchEnv| {
        let sweep = Sweep::parse_launched(body, &file, env, super::validate::Checks::All)?;
        Ok::<_, ConfigError>(sweep.base.train.parallel)
    };
    let p = plan(GOOD, &torchrun).unwrap();
    assert_eq!((p.launch, p.processes, p.rank, p.local_rank), (Launch::External, 2, 1, 1));
    assert_eq!(p.coordinator.unwrap().to_string(), "10.0.0.1:29400");
    assert_eq!(
        p.launched_by,
        ["WORLD_SIZE=2", "RANK=1", "LOCAL_RANK=1", "MASTER_ADDR=10.0.0.1 MASTER_PORT=29400"]
    );

    // The config's keys win; a launch = "local" config ignores the launcher.
    let given = format!("{GOOD}[distributed]\nrank = 0\ncoordinator = \"head:7400\"\n");
    let p = plan(&given, &torchrun).unwrap();
    assert_eq!((p.rank, p.coordinator.unwrap().to_string()), (0, "head:7400".to_string()));
    let local = format!("{GOOD}[distributed]\nlaunch = \"local\"\n");
    let p = plan(&local, &torchrun).unwrap();
    assert_eq!((p.launch, p.processes, p.rank), (Launch::Local, 1, 0));
    // BENCHKIT_RANK overrides distributed.rank.
    let p = plan(&given, &vars(&[("BENCHKIT_RANK", "1"), ("WORLD_SIZE", "2")])).unwrap();
    assert_eq!((p.rank, p.launched_by[1].as_str()), (1, "BENCHKIT_RANK=1"));
    // A world that the config contradicts is named with its line.
    let four = format!("{GOOD}[distributed]\nprocesses = 4\n");
    let err = plan(&four, &torchrun).unwrap_err();
    assert_eq!(err.key, "distributed.processes");
    assert!(err.message.contains("the launcher started 2 (WORLD_SIZE=2)"), "{err}");
    // A launcher that gives no coordinator needs the config's.
    let err = plan(GOOD, &vars(&[("PMI_RANK", "0"), ("PMI_SIZE", "2")])).unwrap_err();
    assert!(err.message.contains("MASTER_ADDR") && err.message.contains("distributed.coordinator"), "{err}");
}

/// The processes sharing this process's machine: all of a local launch's;
/// the launcher's count per machine, at least the local rank + 1 and at most
/// the world; 1 where nothing says more.
#[test]
fn the_processes_on_a_machine_come_from_the_launch() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        LaunchEnv::from_vars(|name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()))
            .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/train-images-idx3-ubyte"), b"").unwrap();
    let file = dir.path().join("c.toml");
    let here = |body: &str, env: &LaunchEnv| {
        let sweep = Sweep::parse_launched(body, &file, env, super::validate::Checks::All).unwrap();
        sweep.base.train.parallel.machine_processes
    };
    const HEAD: (&str, &str) = ("MASTER_ADDR", "head");
    let torchrun =
        vars(&[("RANK", "5"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "1"), ("LOCAL_WORLD_SIZE", "4"), HEAD]);
    assert_eq!(here(GOOD, &torchrun), 4, "LOCAL_WORLD_SIZE");
    let past_world = vars(&[("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_WORLD_SIZE", "8"), HEAD]);
    assert_eq!(here(GOOD, &past_world), 2, "no more than the world");
    let nested = vars(&[
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("LOCAL_RANK", "3"),
        ("SLURM_NTASKS_PER_NODE", "1"),
        HEAD,
    ]);
    assert_eq!(here(GOOD, &nested), 4, "local rank 3 makes at least 4");
    assert_eq!(here(GOOD, &vars(&[("RANK", "1"), ("WORLD_SIZE", "2"), HEAD])), 1, "nothing says more");
    let alone = vars(&[("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_WORLD_SIZE", "1"), HEAD]);
    assert_eq!(here(GOOD, &alone), 1);
    let local = format!("{GOOD}[distributed]\nprocesses = 2\n");
    assert_eq!(here(&local, &LaunchEnv::default()), 2, "a local launch's processes all run here");
}

#[test]
fn retries_and_drop_last_are_checked_where_written() {
    let plan = parse(GOOD).unwrap();
    assert_eq!((plan.retries, plan.train.drop_last), (2, true));
    let err = parse(&format!("retries = 11\n{GOOD}")).unwrap_err();
    assert_eq!((err.key.as_str(), err.line), ("retries", 1), "{err}");
    assert!(err.message.contains("0 to 10 retries"), "{err}");
    let plan = parse(&format!("{GOOD}[train]\ndrop_last = false\n")).unwrap();
    assert!(!plan.train.drop_last);
    // Replicas must train the same steps: a partial batch does not split over them.
    let err =
        parse(&format!("devices = 2\n{GOOD}[train]\nbatch_size = 32\ndrop_last = false\n")).unwrap_err();
    assert_eq!((err.key.as_str(), err.line), ("train.drop_last", 10), "{err}");
    assert!(err.message.contains("needs one replica"), "{err}");
}

/// The collective between processes: NCCL on `tch-cuda` with one GPU a
/// process and Gloo elsewhere where the build has them, else
/// burn-collective; one the build lacks, NCCL off `tch-cuda` or with
/// several replicas a process, is refused at its line.
#[test]
fn the_collective_defaults_to_what_the_build_has_and_is_checked() {
    let gloo = crate::backend::collective_built(crate::config::CollectiveKind::Gloo).is_ok();
    let plan = parse(&format!("{GOOD}[distributed]\nprocesses = 2\n")).unwrap();
    let expected = if gloo { "gloo" } else { "burn" };
    assert_eq!(plan.train.parallel.collective.name(), expected);
    let plan = parse(&format!("devices = 2\n{GOOD}[distributed]\nprocesses = 2\n")).unwrap();
    assert_eq!(plan.train.parallel.collective.name(), expected, "several replicas a process, summed first");
    let plan = parse(&format!("{GOOD}[distributed]\nprocesses = 2\ncollective = \"burn\"\n")).unwrap();
    assert_eq!(plan.train.parallel.collective.name(), "burn");

    let gloo_2x2 =
        parse(&format!("devices = 2\n{GOOD}[distributed]\nprocesses = 2\ncollective = \"gloo\"\n"));
    match gloo_2x2 {
        Ok(plan) => assert!(gloo && plan.train.parallel.collective.name() == "gloo"),
        Err(err) => {
            assert!(!gloo, "{err}");
            assert_eq!((err.line, err.key.as_str()), (10, "distributed.collective"), "{err}");
            assert!(err.message.contains("needs benchkit built with `--features tch`"), "{err}");
        }
    }
    let err = parse(&format!("{GOOD}[distributed]\ncollective = \"mpi\"\n")).unwrap_err();
    assert!(
        err.message.contains("burn") && err.message.contains("gloo") && err.message.contains("nccl"),
        "{err}"
    );

    // NCCL sums LibTorch's CUDA tensors: the default there where built, refused elsewhere
    // (on any build: what the config asks is checked before what the build has).
    let nccl = crate::backend::collective_built(crate::config::CollectiveKind::Nccl).is_ok();
    let err = parse(&format!("{GOOD}[distributed]\nprocesses = 2\ncollective = \"nccl\"\n")).unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (9, "distributed.collective"), "{err}");
    assert!(err.message.contains("needs backend = \"tch-cuda\", not \"flex\""), "{err}");
    if nccl {
        let cuda = format!("backend = \"tch-cuda\"\n{GOOD}[distributed]\nprocesses = 2\n");
        assert_eq!(parse(&cuda).unwrap().train.parallel.collective.name(), "nccl");
        let two = parse(&format!("devices = 2\n{cuda}")).unwrap();
        assert_eq!(two.train.parallel.collective.name(), "gloo", "NCCL takes one GPU a process");
        let err = parse(&format!("devices = 2\n{cuda}collective = \"nccl\"\n")).unwrap_err();
        assert!(err.message.contains("one replica (one GPU) per process"), "{err}");
    }
}

/// Gradient buckets: 25 MiB unless given; a bucket of nothing, or a
/// negative one, is refused at its line, naming what is accepted.
#[test]
fn the_bucket_size_defaults_to_ddps_and_is_checked() {
    let plan = parse(&format!("{GOOD}[distributed]\nprocesses = 2\n")).unwrap();
    assert_eq!(plan.train.parallel.bucket_mib, 25.0);
    assert_eq!(plan.train.parallel.bucket_bytes(), 25 << 20);
    let plan = parse(&format!("{GOOD}[distributed]\nprocesses = 2\nbucket_mib = 0.5\n")).unwrap();
    assert_eq!(plan.train.parallel.bucket_bytes(), 512 << 10);
    for bad in ["0", "0.0", "-1.0", "5000.0"] {
        let err = parse(&format!("{GOOD}[distributed]\nprocesses = 2\nbucket_mib = {bad}\n")).unwrap_err();
        assert_eq!((err.line, err.key.as_str()), (9, "distributed.bucket_mib"), "{bad}: {err}");
        assert!(err.message.contains("above 0 and up to 4096 MiB"), "{err}");
    }
}

/// `distributed.interconnect` reads a `benchkit collective` sweep from
/// beside the config; a missing file, or one that is not a sweep, is
/// refused at its line, naming the file.
#[test]
fn the_interconnect_is_a_collective_sweep_read_beside_the_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/train-images-idx3-ubyte"), b"").unwrap();
    let report = benchkit_schema::CollectiveReport {
        schema: "1".into(),
        collective: "gloo".into(),
        ranks: 2,
        machines: vec!["a".into(), "b".into()],
        link: None,
        warmup: 1,
        sizes: vec![
            benchkit_schema::SizeResult::of(1024, 3, 2, &[1e-5, 1e-5], 0),
            benchkit_schema::SizeResult::of(1 << 20, 3, 2, &[1e-3, 1e-3], 0),
        ],
        fit: None,
        environment: crate::measure::env::detect(),
        started_unix_ms: 0,
    };
    std::fs::write(dir.path().join("link.json"), serde_json::to_vec(&report).unwrap()).unwrap();
    std::fs::write(dir.path().join("other.json"), b"{\"cells\": []}").unwrap();
    let file = dir.path().join("c.toml");
    let body = |name: &str| format!("{GOOD}[distributed]\nprocesses = 2\ninterconnect = \"{name}\"\n");
    let plan = Plan::parse(&body("link.json"), &file).unwrap();
    let link = plan.train.parallel.interconnect.expect("read");
    assert_eq!((link.collective.as_str(), link.ranks, link.busbw.len()), ("gloo", 2, 2));
    assert_eq!(link.busbw[1].0, 1 << 20);
    for (name, why) in [("missing.json", "cannot read it"), ("other.json", "not a collective sweep")] {
        let err = Plan::parse(&body(name), &file).unwrap_err();
        assert_eq!((err.line, err.key.as_str()), (9, "distributed.interconnect"), "{err}");
        assert!(err.message.contains(name) && err.message.contains(why), "{err}");
        assert!(err.message.contains("collective.json that `benchkit collective` wrote"), "{err}");
    }
}

#[test]
fn a_steady_warm_up_is_asked_for_checked_and_refused_where_it_cannot_hold() {
    let plan = parse(GOOD).unwrap();
    assert_eq!(plan.train.steady, None, "flex keeps the fixed count by default");
    let plan = parse(&format!("{GOOD}[train]\nwarmup = \"steady\"\nsteady_window = 3\n")).unwrap();
    assert_eq!(plan.train.steady, Some(Steady { window: 3, tolerance: 0.1, max_steps: 60 }));
    let err =
        parse(&format!("{GOOD}[train]\nwarmup = \"steady\"\nsteady_window = 3\nmax_warmup_steps = 4\n"))
            .unwrap_err();
    assert_eq!(err.key, "train.max_warmup_steps");
    assert!(
        err.message.contains("6 to 1000000 steps (at least warmup_steps and twice steady_window)"),
        "{err}"
    );
    let err = parse(&format!("{GOOD}[train]\nwarmup = \"steady\"\nsteady_tolerance = 1.5\n")).unwrap_err();
    assert!(err.message.contains("a fraction in (0, 1)"), "{err}");
    // A fixed warm-up ignores the rule's keys.
    let plan = parse(&format!("{GOOD}[train]\nwarmup = \"fixed\"\nsteady_window = 1\n")).unwrap();
    assert_eq!(plan.train.steady, None);
    let err = parse(&format!("backend = \"pytorch\"\n{GOOD}[train]\nwarmup = \"steady\"\n")).unwrap_err();
    assert!(err.message.contains("counts its warm-up in its own script"), "{err}");
}

#[test]
fn op_profiling_is_one_replica_and_turns_phase_profiling_on() {
    let plan = parse(&format!("{GOOD}[profile]\nops = true\n")).unwrap();
    assert!(plan.train.ops && plan.train.profile);
    let off = parse(&format!("{GOOD}[profile]\nops = false\n")).unwrap();
    assert!(!off.train.ops && !off.train.profile);
    let cases = [("devices = 2\n", "2 replicas"), ("mode = \"loader-only\"\n", "loader-only")];
    for (top, message) in cases {
        let err = parse(&format!("{top}{GOOD}[profile]\nops = true\n")).unwrap_err();
        assert_eq!(err.key, "profile.ops", "{top}: {err}");
        assert!(err.message.contains(message), "{top}: {err}");
    }
    let err = parse(&format!("{GOOD}[profile]\nops = true\n[distributed]\nstages = 2\n")).unwrap_err();
    assert!(err.message.contains("pipeline"), "{err}");
    let err = parse(&format!("{GOOD}[profile]\ncheck = 5\n")).unwrap_err();
    assert_eq!(err.key, "profile.check", "{err}");
    assert!(err.message.contains("set profile.ops = true"), "{err}");
    let err = parse(&format!("{GOOD}[profile]\nops = true\ncheck = 21\n")).unwrap_err();
    assert!(err.message.contains("0 to 20 ops"), "{err}");
    assert_eq!(parse(&format!("{GOOD}[profile]\nops = true\ncheck = 0\n")).unwrap().train.op_checks, 0);
}

#[test]
fn a_plan_read_back_is_held_to_the_checks_a_config_may_ask() {
    let mut plan = parse(&format!("{GOOD}[profile]\nops = true\ncheck = 20\n")).unwrap();
    assert!(crate::config::within_ranges(&plan).is_ok());
    plan.train.op_checks = 1_000_000;
    let why = crate::config::within_ranges(&plan).unwrap_err();
    assert!(why.contains("profile.check = 1000000") && why.contains("0..=20"), "{why}");
}

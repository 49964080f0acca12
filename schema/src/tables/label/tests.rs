use super::*;
use serde_json::json;

/// A cell's facts from its `[model]` and `[data]` tables and swept values.
fn facts(model: Value, data: Value, values: Value) -> Facts {
    let values = values.as_object().cloned().unwrap_or_default().into_iter().collect();
    Facts { model: Some(model), data: Some(data), values }
}

/// The labels of `cells`, the first `axes` of `keys` the matrix's axes.
fn labels(keys: &[&str], axes: usize, cells: &[Facts]) -> Vec<String> {
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let ids: Vec<String> = (0..cells.len()).map(|i| format!("id{i}")).collect();
    name(&keys, axes, cells, &ids, "run").into_iter().map(|n| n.label).collect()
}

fn resnet() -> Value {
    json!({"plugin": "builtin:resnet", "config": {"depth": 18, "stem": "imagenet", "width": 0.25, "in_channels": 1}})
}

fn alexnet() -> Value {
    json!({"plugin": "builtin:alexnet", "config": {"in_channels": 1}})
}

fn fashion() -> Value {
    json!({"source": "idx", "path": "data/fashion-mnist"})
}

/// The network check's cells: two models, processes and links; the
/// model's JSON never shows, each facet is short.
#[test]
fn the_network_checks_cells_read_as_model_processes_and_link() {
    let cell = |model: Value, n: u32, link: &str| {
        facts(model, fashion(), json!({"distributed.processes": n, "distributed.link": link}))
    };
    let cells = [cell(resnet(), 1, "host"), cell(resnet(), 2, "10gbit"), cell(alexnet(), 3, "1gbit")];
    assert_eq!(
        labels(&["model", "distributed.processes", "distributed.link"], 3, &cells),
        ["resnet-18 ×0.25 · 1 proc · host", "resnet-18 ×0.25 · 2 proc · 10gbit", "alexnet · 3 proc · 1gbit"]
    );
    // An axis that varies is shown even where the facets before it tell
    // its cells apart; a key only `include` sets is not.
    let cells = [cell(resnet(), 2, "host"), cell(resnet(), 2, "10gbit"), cell(alexnet(), 1, "host")];
    let keys = ["model", "distributed.link", "distributed.processes"];
    assert_eq!(
        labels(&keys, 3, &cells),
        ["resnet-18 ×0.25 · host · 2 proc", "resnet-18 ×0.25 · 10gbit · 2 proc", "alexnet · host · 1 proc"]
    );
    assert_eq!(
        labels(&keys, 2, &cells),
        ["resnet-18 ×0.25 · host", "resnet-18 ×0.25 · 10gbit", "alexnet · host"]
    );
}

/// A key only `include` sets is shown where it tells cells apart the
/// facets before it do not: in the backends matrix (one axis, `backend`),
/// the ResNet-50 rows' batch and shape follow from their model and are not
/// repeated.
#[test]
fn facets_that_add_nothing_are_left_out() {
    let r50 = json!({"plugin": "builtin:resnet", "config": {"depth": 50, "width": 1.0}});
    let synthetic = json!({"source": "synthetic"});
    let small = |backend: &str, data: Value, path: Option<&str>| {
        let mut values = json!({ "backend": backend, "data.source": data["source"].clone() });
        if let Some(path) = path {
            values["data.path"] = json!(path);
        }
        facts(resnet(), data, values)
    };
    let big = |backend: &str| {
        let values = json!({"backend": backend, "data.source": "synthetic", "data.shape": [3, 224, 224],
            "train.batch_size": 16, "model.config": {"depth": 50, "width": 1.0}});
        facts(r50.clone(), json!({"source": "synthetic", "shape": [3, 224, 224]}), values)
    };
    let cells = [
        small("flex", synthetic.clone(), None),
        small("tch", synthetic, None),
        small("flex", fashion(), Some("data/fashion-mnist")),
        big("flex"),
        big("tch"),
    ];
    let keys = ["backend", "data.source", "data.path", "model.config", "data.shape", "train.batch_size"];
    assert_eq!(
        labels(&keys, 1, &cells),
        [
            "resnet-18 ×0.25 · flex · synthetic",
            "resnet-18 ×0.25 · tch · synthetic",
            "resnet-18 ×0.25 · flex · idx",
            "resnet-50 · flex · synthetic",
            "resnet-50 · tch · synthetic",
        ]
    );
}

/// A model's `name` is its label; two models of one plugin that read
/// alike are told apart by the config keys in which they differ.
#[test]
fn a_named_model_is_called_by_its_name_and_alike_models_by_what_differs() {
    let named = json!({"plugin": "builtin:resnet", "name": "r18q", "config": {"depth": 18, "width": 0.25}});
    let cifar = json!({"plugin": "builtin:resnet", "config": {"depth": 18, "width": 0.25, "stem": "cifar"}});
    let cells = [
        facts(named, fashion(), json!({})),
        facts(resnet(), fashion(), json!({})),
        facts(cifar, fashion(), json!({})),
    ];
    assert_eq!(
        labels(&["model"], 1, &cells),
        ["r18q", "resnet-18 ×0.25 in_channels=1 stem=imagenet", "resnet-18 ×0.25 stem=cifar"]
    );
}

/// Labels two cells would share (two folders of one name) fall back to
/// the ids; a lone cell is called by the run's name.
#[test]
fn a_label_two_cells_would_share_is_the_id_and_a_lone_cell_is_the_run() {
    let a = facts(resnet(), fashion(), json!({"data.path": "a/images"}));
    let b = facts(resnet(), fashion(), json!({"data.path": "b/images"}));
    assert_eq!(labels(&["data.path"], 1, &[a, b]), ["id0", "id1"]);
    assert_eq!(labels(&[], 0, &[facts(resnet(), fashion(), json!({}))]), ["run"]);
}

/// Cells that differ only in how the loader feeds them train one
/// workload; another model or dataset is another.
#[test]
fn the_loader_does_not_change_the_workload_the_model_and_data_do() {
    let naive = facts(
        resnet(),
        json!({"source": "idx", "path": "data/fashion-mnist", "pipeline": "naive"}),
        json!({"data.pipeline": "naive"}),
    );
    let fast = facts(
        resnet(),
        json!({"source": "idx", "path": "data/fashion-mnist", "pipeline": "optimized", "workers": 4}),
        json!({"data.pipeline": "optimized"}),
    );
    let other = facts(alexnet(), fashion(), json!({}));
    let synthetic = facts(resnet(), json!({"shape": [3, 224, 224]}), json!({}));
    let keys: Vec<String> = vec!["data.pipeline".into()];
    let ids: Vec<String> = (0..4).map(|i| format!("id{i}")).collect();
    let named = name(&keys, 1, &[naive, fast, other, synthetic], &ids, "run");
    let workloads: Vec<&str> = named.iter().map(|n| n.workload.as_str()).collect();
    assert_eq!(
        workloads,
        [
            "resnet-18 ×0.25 · fashion-mnist",
            "resnet-18 ×0.25 · fashion-mnist",
            "alexnet · fashion-mnist",
            "resnet-18 ×0.25 · synthetic 3×224×224"
        ]
    );
    assert_eq!((named[0].label.as_str(), named[1].label.as_str()), ("naive", "optimized"));
}

/// Each kind of value's short text.
#[test]
fn values_read_short() {
    assert_eq!(short("distributed.processes", &json!(2)), "2 proc");
    assert_eq!(short("train.batch_size", &json!("max")), "batch max");
    assert_eq!(short("data.shape", &json!([3, 224, 224])), "3×224×224");
    assert_eq!(short("data.path", &json!("/srv/imagenet/")), "imagenet");
    assert_eq!(short("train.profile", &json!(false)), "no profile");
    assert_eq!(short("train.lr", &json!(0.1)), "lr=0.1");
    assert_eq!(short("transform.config", &json!({"mean": [0.5], "p": 1})), "mean=[0.5] p=1");
}

/// A label from a results directory written elsewhere is shown only when
/// it is short plain text; else the cell's id is.
#[test]
fn a_forged_label_is_not_shown() {
    let mut s: crate::CellSummary =
        crate::CellSummary::of(0, "batch_size=32", &Default::default(), &[], None);
    s.label = Some("batch 32".into());
    assert_eq!(s.shown(), "batch 32");
    s.label = Some("\u{1b}[2Jbatch 32".into());
    assert_eq!(s.shown(), "batch_size=32", "an escape sequence");
    s.label = Some("x".repeat(MAX_SHOWN + 1));
    assert_eq!(s.shown(), "batch_size=32", "past the bound");
    s.label = Some("x".repeat(MAX_SHOWN));
    assert_eq!(s.shown().len(), MAX_SHOWN);
}

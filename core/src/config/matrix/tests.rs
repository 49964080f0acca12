use super::*;

fn sweep(matrix: &str) -> Result<Sweep, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/train-images-idx3-ubyte"), b"").unwrap();
    let body = format!(
        "[data]\npath = \"data\"\n\n[model]\nplugin = \"builtin:resnet\"\nconfig = {{ depth = 18 }}\n\n[train]\nbatch_size = 16\n\n{matrix}"
    );
    Sweep::parse(&body, &dir.path().join("m.toml"))
}

#[test]
fn no_matrix_is_one_cell_named_after_the_run() {
    let s = sweep("").unwrap();
    assert_eq!(s.cells.len(), 1);
    assert_eq!(s.cells[0].id, "m");
    assert!(s.axes.is_empty());
}

#[test]
fn cartesian_product_in_written_order() {
    let s = sweep("[matrix]\n\"train.batch_size\" = [32, 64]\nmodel.config.depth = [18, 34]\n").unwrap();
    let ids: Vec<&str> = s.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "batch_size=32,depth=18",
            "batch_size=32,depth=34",
            "batch_size=64,depth=18",
            "batch_size=64,depth=34"
        ]
    );
    assert_eq!(s.cells[2].plan.train.batch_size, 64);
    assert_eq!(s.cells[3].plan.model.config["depth"], 34);
    assert_eq!(s.base.train.batch_size, 16, "the base keeps its own value");
    assert_eq!(s.cells[1].slug, "001-batch_size=32,depth=34");
    assert_eq!(s.cells[1].axes["model.config.depth"], 34);
}

#[test]
fn exclude_and_include() {
    let s = sweep(
        "[matrix]\n\"train.batch_size\" = [32, 64]\n\"model.config.depth\" = [18, 34]\n\
         exclude = [{ \"train.batch_size\" = 64, \"model.config.depth\" = 34 }]\n\
         include = [{ \"train.batch_size\" = 128, \"train.lr\" = 0.4 }]\n",
    )
    .unwrap();
    let ids: Vec<&str> = s.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "batch_size=32,depth=18",
            "batch_size=32,depth=34",
            "batch_size=64,depth=18",
            "batch_size=128,depth=18,lr=0.4"
        ]
    );
    let extra = &s.cells[3].plan;
    assert_eq!((extra.train.batch_size, extra.train.lr), (128, 0.4));
}

#[test]
fn a_bad_value_names_the_matrix_entry_and_cell() {
    let err = sweep("[matrix]\n\"train.batch_size\" = [32, 0]\n").unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (12, "matrix.train.batch_size"));
    assert!(err.message.contains("in cell batch_size=0") && err.message.contains("at least 1"), "{err}");
    let err = sweep("[matrix]\n\"train.batch_sise\" = [32]\n").unwrap_err();
    assert_eq!(err.key, "matrix.train.batch_sise");
    assert!(err.message.contains("unknown field `batch_sise`"), "{err}");
}

#[test]
fn malformed_matrices_are_rejected() {
    let err = sweep("[matrix]\n\"train.batch_size\" = 32\n").unwrap_err();
    assert!(err.message.contains("list of values"), "{err}");
    let err = sweep("[matrix]\n\"train.batch_size\" = []\n").unwrap_err();
    assert!(err.message.contains("at least one value"), "{err}");
    let err = sweep("[matrix]\n").unwrap_err();
    assert!(err.message.contains("sweeps nothing"), "{err}");
    let err = sweep("[matrix]\nbackend = [\"flex\", \"tpu\"]\n").unwrap_err();
    assert!(err.message.contains("in cell backend=tpu") && err.message.contains("\"flex\""), "{err}");
}

#[test]
fn a_table_valued_axis_names_its_cells_by_plugin_and_what_differs() {
    let s = sweep(
        "[matrix]\nmodel = [{ plugin = \"builtin:alexnet\", config = { in_channels = 1 } }, \
         { plugin = \"builtin:resnet\", config = { depth = 18, in_channels = 1 } }, \
         { plugin = \"builtin:resnet\", config = { depth = 50, in_channels = 1 } }]\n\"distributed.processes\" = [2]\n",
    )
    .unwrap();
    let ids: Vec<&str> = s.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "model=alexnet,processes=2",
            "model=resnet(depth=18),processes=2",
            "model=resnet(depth=50),processes=2"
        ]
    );
    let full = &s.cells[1].axes["model"];
    assert_eq!(full["config"]["depth"], 18, "the whole value kept in the axes: {full}");
    assert_eq!(s.cells[1].slug, "001-model=resnet_depth=18_,processes=2");
}

/// Each cell is labelled by what tells it apart, from its whole config (a
/// model named in the base config keeps its name), and its workload is
/// its model and data.
#[test]
fn cells_are_labelled_by_what_tells_them_apart() {
    let s = sweep("[matrix]\n\"train.batch_size\" = [32, 64]\nmodel.config.depth = [18, 34]\n").unwrap();
    let labels: Vec<&str> = s.cells.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        ["resnet-18 · batch 32", "resnet-34 · batch 32", "resnet-18 · batch 64", "resnet-34 · batch 64"]
    );
    let workloads: Vec<&str> = s.cells.iter().map(|c| c.workload.as_str()).collect();
    assert_eq!(workloads, ["resnet-18 · data", "resnet-34 · data", "resnet-18 · data", "resnet-34 · data"]);
    assert_eq!(sweep("").unwrap().cells[0].label, "m");

    let named = sweep("[matrix]\n\"train.batch_size\" = [32, 64]\n").map(|s| s.cells[0].workload.clone());
    assert_eq!(named.as_deref(), Ok("resnet-18 · data"));
}

/// `[model] name` must be a short plain name, and only a model takes one.
#[test]
fn a_model_name_is_short_and_only_a_model_has_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = |model: &str, reporter: &str| {
        format!(
            "[model]\nplugin = \"builtin:resnet\"\n{model}\n[[reporters]]\nplugin = \"builtin:json\"\n{reporter}\n\
             [data]\nsource = \"synthetic\"\n"
        )
    };
    let parse = |text: String| Sweep::parse(&text, &dir.path().join("n.toml"));
    let named = parse(config("name = \"r18q\"", "")).unwrap();
    assert_eq!(named.cells[0].workload, "r18q · synthetic");
    let long = parse(config(&format!("name = \"{}\"", "x".repeat(33)), "")).unwrap_err();
    assert!(long.message.contains("is 33 characters; a model's name is 1 to 32"), "{long}");
    assert_eq!((long.line, long.key.as_str()), (3, "model.name"));
    let control = parse(config("name = \"a\\u0007b\"", "")).unwrap_err();
    assert!(control.message.contains("with a control character"), "{control}");
    let reporter = parse(config("", "name = \"mine\"")).unwrap_err();
    assert!(reporter.message.contains("only [model] takes a name"), "{reporter}");
}

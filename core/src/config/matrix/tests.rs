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

//! End-to-end: the loader and the data formats through the real binary. The shipped
//! Fashion-MNIST subset is exported to a PNG folder and packed into shards;
//! the same training cell gives the same result from IDX, PNG files and
//! shards, naive or optimized; loader-only and synthetic modes; and bad data
//! (corrupt images, CRC damage, mixed sizes, empty folders) fails with the
//! file named, or is skipped and counted when asked.

use crate::common;

use benchkit_schema::{CellResult, EpochRecord, Mode};
use common::{benchkit, repo, run_summary, small_config};
use std::path::{Path, PathBuf};

fn fmnist() -> PathBuf {
    repo().join("configs/data/fashion-mnist")
}

/// A small config over `data` (a `[data]` body) with a `[matrix]` body.
fn config(dir: &Path, top: &str, data: &str, matrix: &str) -> PathBuf {
    small_config(dir, "data", top, data, "", matrix)
}

/// The run's first finished repeat, from its `summary.json`.
fn first_repeat(out: &Path) -> CellResult {
    run_summary(out).repeats.into_iter().next().expect("a finished repeat")
}

/// Export the first `limit` images of each split to PNGs and pack them.
fn png_and_shards(dir: &Path, limit: usize) -> (PathBuf, PathBuf) {
    let png = dir.join("png");
    let shards = dir.join("shards");
    let assert = benchkit()
        .args(["data", "export"])
        .arg(fmnist())
        .arg(&png)
        .args(["--limit", &limit.to_string()])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(stdout.contains(&format!("wrote {limit} train + {limit} test images")), "{stdout}");
    benchkit()
        .args(["shards", "pack"])
        .arg(&png)
        .arg(&shards)
        .args(["--shard-size", "20kB"])
        .assert()
        .success();
    (png, shards)
}

#[test]
fn every_source_trains_and_naive_equals_optimized() {
    let dir = tempfile::tempdir().unwrap();
    let (png, shards) = png_and_shards(dir.path(), 200);
    let out =
        benchkit().args(["shards", "verify"]).arg(&shards).assert().success().get_output().stdout.clone();
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("ok, 400 records in") && text.contains("every CRC checked"), "{text}");
    let shard_files = std::fs::read_dir(&shards)
        .unwrap()
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "bkshard")));
    assert!(shard_files.count() > 4, "20 kB shards split 400 PNGs into several");

    // The batches are fixed by the seed before the epoch starts, so the two
    // pipelines train on the same batches in the same order.
    let matrix = format!(
        "[matrix]\n\"data.path\" = [{:?}, {:?}, {:?}]\n\"data.pipeline\" = [\"naive\", \"optimized\"]\n",
        fmnist().display().to_string(),
        png.display().to_string(),
        shards.display().to_string()
    );
    let base =
        format!("path = {:?}\ntrain_limit = 200\ntest_limit = 200\nworkers = 2", png.display().to_string());
    // Two whole epochs (6 steps each, shuffled anew each epoch), so that a
    // pipeline that handed out batches in another order, or other batches,
    // ends with other losses.
    let train = "epochs = 2\nmax_steps_per_epoch = 6";
    let cfg = small_config(dir.path(), "data", "", &base, train, &matrix);
    let results = dir.path().join("out");
    benchkit().args(["run", "-q", "-o"]).arg(&results).arg(&cfg).assert().success();
    let repeats = run_summary(&results).repeats;
    assert_eq!(repeats.len(), 6);
    for pair in repeats.chunks(2) {
        let epochs = |r: &CellResult| -> Vec<(usize, [f64; 4])> {
            r.epochs
                .iter()
                .map(|e| (e.images, [e.train_loss, e.train_accuracy, e.test_loss, e.test_accuracy]))
                .collect()
        };
        let (naive, optimized) = (epochs(&pair[0]), epochs(&pair[1]));
        assert_eq!(naive.len(), 2, "{naive:?}");
        assert_eq!(naive, optimized, "naive and optimized train identically, epoch by epoch");
        assert_eq!(pair[0].steps_measured, 11, "12 steps, one of them warm-up");
    }
    let sources: Vec<&str> = repeats.iter().map(|r| r.loader.source.as_str()).collect();
    assert_eq!(sources, ["idx", "idx", "folder", "folder", "shards", "shards"]);
    let naive = &repeats[2].loader;
    assert_eq!((naive.pipeline.as_str(), naive.workers), ("naive", 0));
    let optimized = &repeats[3].loader;
    assert_eq!((optimized.workers, optimized.prefetch), (2, 2));
    assert!(optimized.decode_ms > 0.0, "{optimized:?}");
    assert_eq!(optimized.decoded_shape, [1, 28, 28]);
}

#[test]
fn jpeg_folders_decode() {
    let dir = tempfile::tempdir().unwrap();
    let jpeg = dir.path().join("jpeg");
    benchkit()
        .args(["data", "export"])
        .arg(fmnist())
        .arg(&jpeg)
        .args(["--image-format", "jpeg", "--limit", "64"])
        .assert()
        .success();
    assert!(jpeg
        .join("train/0")
        .read_dir()
        .unwrap()
        .all(|e| e.unwrap().path().extension().unwrap() == "jpg"));
    let data = format!("path = {:?}\nchannels = 3", jpeg.display().to_string());
    let cfg = config(dir.path(), "mode = \"loader-only\"", &data, "");
    let out = dir.path().join("out");
    benchkit().args(["run", "-q", "-o"]).arg(&out).arg(&cfg).assert().success();
    let loader = first_repeat(&out).loader;
    assert_eq!((loader.source.as_str(), loader.batches), ("folder", 2));
    assert_eq!(loader.decoded_shape, [3, 28, 28], "grey JPEGs decoded to RGB");
}

#[test]
fn loader_only_and_synthetic_modes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "mode = \"loader-only\"",
        &format!("path = {:?}\nresize = 40\nshuffle = 100", fmnist().display().to_string()),
        "",
    );
    let out = dir.path().join("loader");
    let assert = benchkit().args(["run", "-o"]).arg(&out).arg(&cfg).assert().success();
    let table = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(table.contains("loader only") && table.contains("per batch: read"), "{table}");
    let repeat = first_repeat(&out);
    assert!(repeat.images_per_s > 0.0);
    assert_eq!(repeat.mode, Mode::LoaderOnly);
    assert_eq!(repeat.loader.decoded_shape, [1, 40, 40]);
    assert_eq!(repeat.loader.shuffle, "buffer 100");
    assert!(repeat.final_test_accuracy.is_nan(), "nothing is trained: {}", repeat.final_test_accuracy);

    let cfg = config(dir.path(), "", "source = \"synthetic\"\nshape = [1, 28, 28]\nsamples = 128", "");
    let out = dir.path().join("synthetic");
    benchkit().args(["run", "-q", "-o"]).arg(&out).arg(&cfg).assert().success();
    let loader = first_repeat(&out).loader;
    assert_eq!(loader.source, "synthetic");
    assert_eq!(loader.workers, 0, "the fixed batch needs no loader threads");
    assert_eq!(loader.batches, 1, "one fixed training batch, built once for all 3 steps: {loader:?}");
}

/// Replace one training PNG with bytes that are not an image.
fn corrupt_one(png: &Path) -> PathBuf {
    let class = png.join("train/0");
    let victim = std::fs::read_dir(&class).unwrap().next().unwrap().unwrap().path();
    std::fs::write(&victim, b"\x89PNG\r\n\x1a\nthis is not a picture").unwrap();
    victim
}

#[test]
fn corrupt_images_fail_with_their_path_or_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (png, _) = png_and_shards(dir.path(), 100);
    let victim = corrupt_one(&png);
    let data = format!("path = {:?}\nshuffle = \"none\"\nworkers = 2", png.display().to_string());
    let cfg = config(dir.path(), "mode = \"loader-only\"", &data, "");
    let out = dir.path().join("fail");
    let assert = benchkit().args(["run", "-q", "-o"]).arg(&out).arg(&cfg).assert().code(1);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(
        stdout.contains(&victim.display().to_string()) && stdout.contains("corrupt sample"),
        "the table's note names the file: {stdout}"
    );

    // No warm-up: the short step is measured, and counts the 31 images it had.
    let skip = format!("{data}\non_corrupt = \"skip\"");
    let cfg = small_config(dir.path(), "data", "mode = \"loader-only\"", &skip, "warmup_steps = 0", "");
    let out = dir.path().join("skip");
    let assert = benchkit().args(["run", "-o"]).arg(&out).arg(&cfg).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(stdout.contains("skipped 1 corrupt sample(s)"), "{stdout}");
    assert!(stdout.contains("1 of 3 training steps had short batches, 1 image(s) fewer in all"), "{stdout}");
    let repeat = first_repeat(&out);
    let loader = &repeat.loader;
    assert_eq!(loader.skipped, 1);
    assert_eq!(loader.skipped_examples[0], victim.display().to_string());
    let short = repeat.short_batches.as_ref().expect("short batches");
    assert_eq!([short.steps, short.of_steps, short.images_missing], [1, 3, 1], "{short:?}");
    assert!(short.why.starts_with("on_corrupt = \"skip\" left out"), "{short:?}");
    assert_eq!(repeat.batch_size, 32, "the batch asked for, beside the short steps");
    assert_eq!(repeat.epochs[0].images, 95, "3 batches of 32, one image left out");
    // images/s: the 95 images the steps had over the steps' time.
    let seconds = repeat.step_ms.mean * repeat.step_ms.count as f64 / 1e3;
    let images = repeat.images_per_s * seconds;
    assert!((images - 95.0).abs() < 1e-6 * 95.0, "{images} images counted, not 96");

    // Three training epochs and an evaluation after each meet the bad
    // image three times: it is one skipped sample, of the training split.
    let cfg = small_config(dir.path(), "epochs", "", &skip, "epochs = 3\nwarmup_steps = 0", "");
    let out = dir.path().join("epochs");
    benchkit().args(["run", "-q", "-o"]).arg(&out).arg(&cfg).assert().success();
    let repeat = first_repeat(&out);
    let loader = &repeat.loader;
    assert_eq!([loader.skipped, loader.skipped_train, loader.skipped_test], [1, 1, 0], "{loader:?}");
    assert_eq!(repeat.epochs.len(), 3, "{repeat:?}");
}

#[test]
fn damaged_shards_mixed_sizes_and_empty_folders_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (png, shards) = png_and_shards(dir.path(), 60);

    // One flipped byte in the middle of the first train shard.
    let shard = shards.join("train-00000.bkshard");
    let mut bytes = std::fs::read(&shard).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&shard, &bytes).unwrap();
    let assert = benchkit().args(["shards", "verify"]).arg(&shards).assert().code(1);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(err.contains("train-00000.bkshard: at byte ") && err.contains("CRC32C mismatch"), "{err}");
    bytes.truncate(middle);
    std::fs::write(&shard, &bytes).unwrap();
    let assert = benchkit().args(["shards", "verify"]).arg(&shards).assert().code(1);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(err.contains("train-00000.bkshard") && err.contains("byte"), "{err}");

    // A 32×32 image among 28×28 ones: an error naming it, unless resized.
    let odd = png.join("train/0/z-odd.png");
    image::save_buffer(&odd, &[128u8; 32 * 32], 32, 32, image::ExtendedColorType::L8).unwrap();
    let data = format!("path = {:?}\nshuffle = \"none\"", png.display().to_string());
    let cfg = config(dir.path(), "mode = \"loader-only\"", &data, "");
    let assert =
        benchkit().args(["run", "-q", "-o"]).arg(dir.path().join("mixed")).arg(&cfg).assert().code(1);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(stdout.contains("z-odd.png") && stdout.contains("set data.resize"), "{stdout}");
    let cfg = config(dir.path(), "mode = \"loader-only\"", &format!("{data}\nresize = 28"), "");
    benchkit().args(["run", "-q", "-o"]).arg(dir.path().join("resized")).arg(&cfg).assert().success();

    // An empty class folder set and a directory that is not a dataset.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(empty.join("train/a")).unwrap();
    std::fs::create_dir_all(empty.join("train/b")).unwrap();
    std::fs::create_dir_all(empty.join("test/a")).unwrap();
    let cfg = config(dir.path(), "", &format!("path = {:?}", empty.display().to_string()), "");
    let assert = benchkit().arg("validate").arg(&cfg).assert().code(1);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(err.contains("has no images") && err.contains("train"), "{err}");
    let nothing = dir.path().join("nothing");
    std::fs::create_dir_all(&nothing).unwrap();
    let cfg = config(dir.path(), "", &format!("path = {:?}", nothing.display().to_string()), "");
    let assert = benchkit().arg("validate").arg(&cfg).assert().code(1);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(err.contains("data.toml:6:") && err.contains("cannot tell what"), "{err}");
}

/// A captions set from the exported PNGs: `<dir>/<id>.png` and a
/// `captions.csv` naming each image's class, quoted and with commas.
fn caption_set(dir: &Path, png: &Path) -> (PathBuf, Vec<(String, String)>) {
    const NAMES: [&str; 10] = [
        "T-shirt, top",
        "trouser",
        "pullover",
        "dress",
        "coat",
        "sandal",
        "shirt",
        "sneaker",
        "bag",
        "ankle boot",
    ];
    let out = dir.join("captions");
    std::fs::create_dir_all(&out).unwrap();
    // Rows in export order, which mixes the classes, so both splits have them all.
    let mut files: Vec<(String, usize, PathBuf)> = Vec::new();
    for class in 0..10 {
        for f in std::fs::read_dir(png.join("train").join(class.to_string())).unwrap() {
            let f = f.unwrap().path();
            files.push((f.file_stem().unwrap().to_string_lossy().into_owned(), class, f));
        }
    }
    files.sort();
    let mut rows = Vec::new();
    let mut csv = String::from("image_id,caption\n");
    for (stem, class, f) in files {
        let id = format!("c{class}x{stem}");
        std::fs::copy(&f, out.join(format!("{id}.png"))).unwrap();
        csv.push_str(&format!("{id},\"{}\"\n", NAMES[class]));
        rows.push((id, NAMES[class].to_string()));
    }
    std::fs::write(out.join("captions.csv"), csv).unwrap();
    (out, rows)
}

#[test]
fn captions_are_tokenised_batched_and_measured_loader_only() {
    use benchkit::data::formats::captions::Tokenizer;
    use benchkit::data::{
        self, Decode, Loader, LoaderConfig, OnCorrupt, OpenSpec, Pipeline, Shuffle, SourceKind,
    };
    use benchkit::plugin::{ImageShape, Limits, PluginHost, PluginSource};

    let dir = tempfile::tempdir().unwrap();
    let (png, _) = png_and_shards(dir.path(), 100);
    let (captions, rows) = caption_set(dir.path(), &png);
    let spec = OpenSpec {
        kind: SourceKind::detect(&captions).expect("a captions table is detected"),
        path: Some(&captions),
        num_classes: None,
        train_limit: None,
        test_limit: None,
        synthetic: None,
        tokenizer: Tokenizer::Char,
        test_fraction: 0.2,
        labels: None,
        streams: Default::default(),
        seed: 0,
    };
    assert_eq!(spec.kind, SourceKind::Captions);
    let dataset = data::open(&spec).unwrap();
    assert_eq!((dataset.train.len(), dataset.test.len()), (80, 20));
    let (vocabulary, max_tokens) = dataset.vocabulary.clone().unwrap();
    assert_eq!(max_tokens, "T-shirt, top".len() + 2);

    let shape = ImageShape { channels: 1, height: 28, width: 28 };
    let host = PluginHost::with_cache(Limits::default(), None).unwrap();
    let plugin = host.load(&PluginSource::Builtin("normalize".into())).unwrap();
    let transforms = (0..2)
        .map(|_| Box::new(host.transform(&plugin, "{}", shape, shape).unwrap()) as Box<dyn data::Transform>)
        .collect();
    let settings = LoaderConfig {
        batch_size: 16,
        eval_batch_size: 16,
        pipeline: Pipeline::Optimized,
        workers: 2,
        prefetch: 2,
        shuffle: Shuffle::Full,
        interleave: 1,
        seed: 3,
        on_corrupt: OnCorrupt::Error,
        fixed: false,
        drop_last: true,
        spans: false,
        read_delay_us: 0,
    };
    let mut loader = Loader::new(transforms, Decode { shape: shape.into(), resize: false }, settings);
    // Evaluation order is the table's: the test split is its last 20 rows.
    let batch = loader.epoch(dataset.test.clone(), 1, false).unwrap().next().unwrap().unwrap();
    let data::Target::Caption { tokens, len } = &batch.target else {
        panic!("a caption batch: {:?}", batch.target)
    };
    assert_eq!(tokens.len(), batch.count * len);
    let mut round_trips = 0;
    for (k, row) in tokens.chunks(*len).enumerate() {
        let ids: Vec<u32> = row.iter().map(|&t| t as u32).collect();
        let expected = &rows[80 + k].1;
        if expected.chars().all(|c| vocabulary.tokens.contains(&c.to_string())) {
            assert_eq!(&vocabulary.decode(&ids), expected, "caption {k} round-trips");
            round_trips += 1;
        } else {
            assert!(ids.contains(&benchkit::data::formats::captions::UNKNOWN), "{ids:?}");
        }
    }
    assert!(round_trips >= 10, "most test captions use only training characters: {round_trips}");

    let cfg = config(
        dir.path(),
        "mode = \"loader-only\"",
        &format!("path = {:?}\ntest_fraction = 0.2", captions.display().to_string()),
        "",
    );
    let out = dir.path().join("captions-run");
    benchkit().args(["run", "-q", "-o"]).arg(&out).arg(&cfg).assert().success();
    let loader = first_repeat(&out).loader;
    assert_eq!(loader.source, "captions");
    assert_eq!(loader.vocabulary, Some(vocabulary.len()));
    let cfg = config(dir.path(), "", &format!("path = {:?}", captions.display().to_string()), "");
    let assert = benchkit().arg("validate").arg(&cfg).assert().code(1);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(err.contains("not class labels") && err.contains("loader-only"), "{err}");
}

#[test]
fn the_captioner_trains_on_captions_and_scores_greedy_captions() {
    let dir = tempfile::tempdir().unwrap();
    let (png, _) = png_and_shards(dir.path(), 100);
    let (captions, _) = caption_set(dir.path(), &png);
    let cfg = small_config(
        dir.path(),
        "captions",
        "",
        &format!("path = {:?}\ntest_fraction = 0.2", captions.display().to_string()),
        "lr = 0.1",
        "",
    );
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "plugin = \"builtin:resnet\"\nconfig = { depth = 18, stem = \"imagenet\", width = 0.125 }",
        "plugin = \"builtin:captioner\"\nconfig = { channels = 8, embed = 32, hidden = 64 }",
    );
    let text = text.replace("epochs = 1\nbatch_size = 32\n", "epochs = 15\nbatch_size = 16\n");
    let text = text.replace("max_steps_per_epoch = 3\n", "");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("run");
    let assert = benchkit().args(["run", "-q", "-o"]).arg(&out).arg(&cfg).assert();
    let output = assert.get_output();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let epochs = first_repeat(&out).epochs;
    assert_eq!(epochs.len(), 15);
    let (first, last) = (epochs[0].train_loss, epochs[14].train_loss);
    assert!(last < first, "per-token loss falls: {first} -> {last}");
    let metric =
        |e: &EpochRecord, name: &str| *e.metrics.get(name).unwrap_or_else(|| panic!("{name}: {e:?}"));
    for e in &epochs {
        let (exact, distance) = (metric(e, "exact_match"), metric(e, "levenshtein"));
        assert!((0.0..=1.0).contains(&exact) && distance >= 0.0, "{e:?}");
    }
    // Held-out images get their class name back by greedy decoding alone.
    let end = &epochs[14];
    assert!(end.test_accuracy > 0.6, "token accuracy: {end:?}");
    assert!(metric(end, "exact_match") >= 0.15, "exact match: {end:?}");
    let start = metric(&epochs[0], "levenshtein");
    assert!(metric(end, "levenshtein") < start, "edit distance falls: {end:?}");
}

fn attributes() -> PathBuf {
    repo().join("configs/data/fashion-attributes")
}

#[test]
fn a_classifier_trains_multi_label_and_is_scored_by_mean_auroc() {
    let dir = tempfile::tempdir().unwrap();
    let data = format!("path = {:?}", attributes().display().to_string());
    let cfg = small_config(dir.path(), "attributes", "", &data, "lr = 0.05", "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let text = text.replace("epochs = 1\n", "epochs = 4\n").replace("max_steps_per_epoch = 3\n", "");
    std::fs::write(&cfg, text).unwrap();

    let assert = benchkit().arg("validate").arg(&cfg).assert().success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(
        stdout.contains("multi-label 500 train / 100 test images")
            && stdout.contains("7 labels (Footwear, Laced, Lower, Outer, Sleeves, Upper, Warm)"),
        "{stdout}"
    );

    let out = dir.path().join("run");
    let assert = benchkit().args(["run", "-o"]).arg(&out).arg(&cfg).assert();
    let output = assert.get_output();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let table = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(table.contains("attributes: test acc is the mean AUROC"), "{table}");
    let repeat = first_repeat(&out);
    assert_eq!(repeat.accuracy_metric, "mean AUROC");
    let epochs = &repeat.epochs;
    assert_eq!(epochs.len(), 4);
    let (first, last) = (&epochs[0], &epochs[3]);
    assert!(last.train_loss < first.train_loss, "binary cross-entropy falls: {first:?} -> {last:?}");
    // Every label has positives and negatives among the 100 test images.
    let metrics = &last.metrics;
    let aurocs: Vec<f64> = ["Footwear", "Laced", "Lower", "Outer", "Sleeves", "Upper", "Warm"]
        .iter()
        .map(|l| metrics[&format!("auroc.{l}")])
        .collect();
    let mean = aurocs.iter().sum::<f64>() / aurocs.len() as f64;
    let reported = last.test_accuracy;
    assert!((reported - mean).abs() < 1e-9, "test accuracy is the mean AUROC: {reported} vs {mean}");
    // Labels that follow from the garment's shape are learnt from 500 images.
    assert!(mean > 0.85, "mean AUROC after 4 epochs: {aurocs:?}");
    let label_accuracy = metrics["label_accuracy"];
    assert!(label_accuracy > 0.75 && label_accuracy <= 1.0, "{label_accuracy}");
    assert!((0.0..=1.0).contains(&last.train_accuracy), "{last:?}");

    // A fixed label set that misses one of the table's labels names it and the line.
    let fixed = format!("{data}\nlabels = [\"Upper\", \"Lower\"]");
    let cfg = small_config(dir.path(), "fixed", "", &fixed, "", "");
    let assert = benchkit().arg("validate").arg(&cfg).assert().code(1);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(
        err.contains("Data_Entry_2017.csv: line 2: label \"Footwear\" is not in data.labels (Upper, Lower)"),
        "{err}"
    );
    // Labels belong to the multi-label source, and come as a list or "chexnet".
    let cfg = small_config(
        dir.path(),
        "wrong",
        "",
        &format!("path = {:?}\nlabels = \"chexnet\"", fmnist().display().to_string()),
        "",
        "",
    );
    let assert = benchkit().arg("validate").arg(&cfg).assert().code(1);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(
        err.contains("wrong.toml:")
            && err.contains("labels apply to source \"multi-label\" only, not \"idx\""),
        "{err}"
    );
    let cfg = small_config(dir.path(), "typo", "", &format!("{data}\nlabels = \"chexnett\""), "", "");
    let assert = benchkit().arg("validate").arg(&cfg).assert().code(1);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(
        err.contains("typo.toml:") && err.contains("expected \"chexnet\" (its 14 findings) or a list"),
        "{err}"
    );
    // Packing a multi-label set into single-label shards would lose its labels.
    let assert =
        benchkit().args(["shards", "pack"]).arg(attributes()).arg(dir.path().join("s")).assert().code(1);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(err.contains("is a multi-label dataset") && err.contains("label sets would be lost"), "{err}");
}

/// `drop_last = false`: the epoch's last partial batch trains too, counted
/// as the short step it is.
#[test]
fn drop_last_false_trains_the_partial_batch_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = format!("path = {:?}\ntrain_limit = 100\ntest_limit = 50", fmnist().display().to_string());
    let train = "drop_last = false\nmax_steps_per_epoch = 10\nwarmup_steps = 0";
    let cfg = small_config(dir.path(), "data", "", &data, train, "");
    let out = dir.path().join("out");
    benchkit().args(["run", "-q", "-o"]).arg(&out).arg(&cfg).assert().success();
    let repeat = first_repeat(&out);
    // 100 images in batches of 32: three whole steps and one of 4.
    assert_eq!((repeat.epochs[0].steps, repeat.epochs[0].images), (4, 100), "{repeat:?}");
    let short = repeat.short_batches.as_ref().expect("short batches");
    assert_eq!([short.steps, short.of_steps, short.images_missing], [1, 4, 28], "{short:?}");
    assert!(short.why.contains("drop_last = false"), "{short:?}");
}

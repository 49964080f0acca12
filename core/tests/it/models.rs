//! The built-in model plugins, described through the sandbox and built as
//! burn networks: exact parameter counts (torchvision's and timm's), forward
//! FLOPs, and a few training steps on small inputs that lower the loss.

use benchkit::model::{Graph, GraphNet};
use benchkit::plugin::{ImageShape, InputSpec, Limits, PluginHost, PluginSource};
use burn::backend::flex::FlexDevice;
use burn::backend::Flex;
use burn::module::Module;
use burn::tensor::Tensor;

fn model(name: &str, config: &str, shape: ImageShape, classes: u32) -> Graph {
    let host = PluginHost::with_cache(Limits::default(), None).unwrap();
    let plugin = host.load(&PluginSource::Builtin(name.into())).unwrap();
    let spec = InputSpec { shape, num_classes: classes, vocab_size: 0, max_tokens: 0, detection: false };
    let wit = host.describe(&plugin, config, spec).unwrap_or_else(|e| panic!("{name} {config}: {e:#}"));
    Graph::from_wit(&wit, None).unwrap_or_else(|e| panic!("{name} {config}: {e}"))
}

fn resnet(config: &str, shape: ImageShape, classes: u32) -> Graph {
    model("resnet", config, shape, classes)
}

/// burn's seeded generator is one for the process: tests whose outcome
/// depends on the values drawn hold this while they draw and train, so that
/// no other test's draws interleave with theirs.
static RANDOM: std::sync::Mutex<()> = std::sync::Mutex::new(());

const IMAGENET: ImageShape = ImageShape { channels: 3, height: 224, width: 224 };

#[test]
fn resnet18_matches_torchvision_parameter_counts() {
    for (classes, expected) in [(1000, 11_689_512), (10, 11_181_642)] {
        let graph = resnet(r#"{"depth":18,"stem":"imagenet"}"#, IMAGENET, classes);
        assert_eq!(graph.num_params(), expected, "graph count, {classes} classes");
        let net: GraphNet<Flex> = GraphNet::new(&graph, &FlexDevice);
        assert_eq!(net.trainable_params(), expected, "burn module count, {classes} classes");
        // burn's own count adds the batch-norm running mean and variance (2 × 4,800 channels).
        assert_eq!(net.num_params(), expected + 9_600);
        assert_eq!(graph.output_shape(), [classes as usize]);
    }
}

#[test]
fn resnet34_matches_torchvision_and_its_flops() {
    let graph = resnet(r#"{"depth":34}"#, IMAGENET, 1000);
    assert_eq!(graph.num_params(), 21_797_672);
    // torchvision reports 3.66 GFLOPS (multiply-adds) for resnet34 at 224.
    let gmacs = graph.forward_macs() as f64 / 1e9;
    assert!((gmacs - 3.66).abs() < 0.02, "{gmacs}");
    let r18 = resnet(r#"{"depth":18}"#, IMAGENET, 1000).forward_macs() as f64 / 1e9;
    assert!((r18 - 1.81).abs() < 0.02, "{r18}");
}

#[test]
fn names_follow_torchvision() {
    let graph = resnet(r#"{"depth":18}"#, IMAGENET, 1000);
    let names: Vec<&str> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
    for expected in ["conv1", "bn1", "layer1.0.conv1", "layer2.0.downsample.0", "layer4.1.bn2", "fc"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
}

#[test]
fn a_small_resnet_runs_forward_on_grey_images() {
    let shape = ImageShape { channels: 1, height: 28, width: 28 };
    let graph = resnet(r#"{"depth":18,"stem":"cifar","width":0.125}"#, shape, 10);
    assert_eq!(graph.input_shape(), [1, 28, 28]);
    let net: GraphNet<Flex> = GraphNet::new(&graph, &FlexDevice);
    let out = net.forward(Tensor::ones([3, 1, 28, 28], &FlexDevice));
    assert_eq!(out.dims(), [3, 10]);
    let values: Vec<f32> = out.into_data().to_vec().unwrap();
    assert!(values.iter().all(|v| v.is_finite()));
}

#[test]
fn bad_model_config_is_a_clear_plugin_error() {
    let host = PluginHost::with_cache(Limits::default(), None).unwrap();
    let plugin = host.load(&PluginSource::Builtin("resnet".into())).unwrap();
    let spec = InputSpec { shape: IMAGENET, num_classes: 10, vocab_size: 0, max_tokens: 0, detection: false };
    let err = host.describe(&plugin, r#"{"depth":19}"#, spec).unwrap_err().to_string();
    assert!(
        err.contains("builtin:resnet") && err.contains("expected 18, 34, 50, 101 or 152, got 19"),
        "{err}"
    );
}

#[test]
fn every_model_matches_its_reference_parameter_count() {
    let cases = [
        ("resnet", r#"{"depth":50}"#, 25_557_032),
        ("resnet", r#"{"depth":101}"#, 44_549_160),
        ("resnet", r#"{"depth":152}"#, 60_192_808),
        ("densenet", r#"{"depth":121}"#, 7_978_856),
        ("densenet", r#"{"depth":169}"#, 14_149_480),
        ("vit", r#"{"variant":"tiny"}"#, 5_717_416),
        ("vit", r#"{"variant":"small"}"#, 22_050_664),
        ("vit", r#"{"variant":"base"}"#, 86_567_656),
        ("swin", r#"{"variant":"t"}"#, 28_288_354),
        ("alexnet", "{}", 61_100_840),
    ];
    for (name, config, expected) in cases {
        let graph = model(name, config, IMAGENET, 1000);
        assert_eq!(graph.num_params(), expected, "{name} {config}");
        assert_eq!(graph.output_shape(), [1000], "{name} {config}");
    }
    // LeNet-5 on 28x28 digits: the paper's 61,706 parameters (its first conv pads to 32x32).
    let mnist = ImageShape { channels: 1, height: 28, width: 28 };
    assert_eq!(model("lenet", "{}", mnist, 10).num_params(), 61_706);
}

#[test]
fn burn_modules_hold_the_counted_parameters() {
    for (name, config, expected) in [
        ("resnet", r#"{"depth":50}"#, 25_557_032),
        ("densenet", r#"{"depth":121}"#, 7_978_856),
        ("vit", r#"{"variant":"tiny"}"#, 5_717_416),
        ("swin", r#"{"variant":"t"}"#, 28_288_354),
    ] {
        let net: GraphNet<Flex> = GraphNet::new(&model(name, config, IMAGENET, 1000), &FlexDevice);
        assert_eq!(net.trainable_params(), expected, "{name}");
    }
}

#[test]
fn forward_flops_match_torchvision() {
    // torchvision's published GFLOPS (multiply-adds) at 224x224.
    for (name, config, gmacs) in [
        ("resnet", r#"{"depth":50}"#, 4.09),
        ("densenet", r#"{"depth":121}"#, 2.83),
        ("vit", r#"{"variant":"base"}"#, 17.56),
        ("swin", r#"{"variant":"t"}"#, 4.49),
        ("alexnet", "{}", 0.71),
    ] {
        let got = model(name, config, IMAGENET, 1000).forward_macs() as f64 / 1e9;
        assert!((got - gmacs).abs() / gmacs < 0.02, "{name}: {got:.3} GMACs, torchvision {gmacs}");
    }
}

/// Adam on one fixed batch: the loss must fall.
fn loss_falls(name: &str, config: &str, shape: ImageShape, classes: u32, lr: f64, steps: usize) {
    use burn::backend::Autodiff;
    use burn::nn::loss::CrossEntropyLossConfig;
    use burn::optim::{AdamConfig, GradientsParams, Optimizer};
    use burn::tensor::{Distribution, Int, TensorData};
    type B = Autodiff<Flex>;
    use burn::tensor::backend::Backend;
    let graph = model(name, config, shape, classes);
    let device = FlexDevice;
    let _draws = RANDOM.lock().unwrap_or_else(|e| e.into_inner());
    B::seed(&device, 7);
    let mut net: GraphNet<B> = GraphNet::new(&graph, &device);
    let mut optim = AdamConfig::new().init();
    let n = 8;
    let dims = [n, shape.channels as usize, shape.height as usize, shape.width as usize];
    let x: Tensor<B, 4> = Tensor::random(dims, Distribution::Normal(0.0, 1.0), &device);
    let labels: Vec<i64> = (0..n as i64).map(|i| i % i64::from(classes)).collect();
    let y: Tensor<B, 1, Int> = Tensor::from_data(TensorData::new(labels, [n]), &device);
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    let mut losses = Vec::new();
    for _ in 0..steps {
        let loss = loss_fn.forward(net.forward(x.clone()), y.clone());
        losses.push(loss.clone().into_scalar());
        let grads = GradientsParams::from_grads(loss.backward(), &net);
        net = optim.step(lr, net, grads);
    }
    assert!(losses.iter().all(|l| l.is_finite()), "{name}: {losses:?}");
    let late = losses[steps - 3..].iter().copied().fold(f32::INFINITY, f32::min);
    assert!(late < 0.7 * losses[0], "{name} {config}: loss did not fall: {losses:?}");
}

#[test]
fn each_model_trains_a_few_steps_on_small_inputs() {
    let cifar = ImageShape { channels: 3, height: 32, width: 32 };
    loss_falls("resnet", r#"{"depth":50,"stem":"cifar","width":0.125}"#, cifar, 4, 1e-3, 8);
    loss_falls("densenet", r#"{"depth":121,"stem":"cifar","growth":4}"#, cifar, 4, 1e-3, 8);
    loss_falls("vit", r#"{"variant":"tiny","patch":4,"depth":2}"#, cifar, 4, 3e-4, 8);
    // 8x8 patches in 4x4 windows: the shifted blocks use the attention mask;
    // later stages are smaller than a window and use one unshifted window.
    loss_falls("swin", r#"{"variant":"t","window":4}"#, cifar, 4, 3e-4, 8);
    let mnist = ImageShape { channels: 1, height: 28, width: 28 };
    loss_falls("lenet", "{}", mnist, 4, 3e-3, 8);
    loss_falls("lenet", r#"{"activation":"relu","pool":"max"}"#, mnist, 4, 3e-3, 8);
    loss_falls(
        "alexnet",
        r#"{"dropout":0.0}"#,
        ImageShape { channels: 3, height: 64, width: 64 },
        4,
        3e-4,
        12,
    );
}

#[test]
fn small_inputs_and_bad_configs_get_clear_errors() {
    let host = PluginHost::with_cache(Limits::default(), None).unwrap();
    let describe = |name: &str, config: &str, side: u32| {
        let plugin = host.load(&PluginSource::Builtin(name.into())).unwrap();
        let shape = ImageShape { channels: 3, height: side, width: side };
        let spec = InputSpec { shape, num_classes: 10, vocab_size: 0, max_tokens: 0, detection: false };
        host.describe(&plugin, config, spec).unwrap_err().to_string()
    };
    let err = describe("alexnet", "{}", 32);
    assert!(err.contains("AlexNet needs inputs of at least 63x63, got 32x32"), "{err}");
    let err = describe("vit", r#"{"patch":16}"#, 28);
    assert!(err.contains("multiple of the patch 16"), "{err}");
    let err = describe("densenet", r#"{"depth":100}"#, 224);
    assert!(err.contains("expected 121, 161, 169 or 201, got 100"), "{err}");
    let err = describe("captioner", "{}", 64);
    assert!(err.contains("needs caption data"), "{err}");
}

/// Greedy decoding feeds one token at a time and carries the LSTM state; fed
/// back its own captions with teacher forcing, the whole-sequence forward
/// pass must predict every one of those tokens again. The captioner first
/// learns a different random caption for each of four images, so that its
/// captions vary.
#[test]
fn greedy_decoding_one_token_at_a_time_matches_the_whole_sequence() {
    use burn::backend::Autodiff;
    use burn::module::AutodiffModule;
    use burn::nn::loss::CrossEntropyLossConfig;
    use burn::optim::{AdamConfig, GradientsParams, Optimizer};
    use burn::tensor::backend::Backend;
    use burn::tensor::{Distribution, Int, TensorData};
    type B = Autodiff<Flex>;
    let _draws = RANDOM.lock().unwrap_or_else(|e| e.into_inner());
    B::seed(&FlexDevice, 5);
    let host = PluginHost::with_cache(Limits::default(), None).unwrap();
    let plugin = host.load(&PluginSource::Builtin("captioner".into())).unwrap();
    let shape = ImageShape { channels: 1, height: 32, width: 32 };
    let (n, vocab, tokens) = (4usize, 12usize, 8usize);
    for config in [
        r#"{"channels":4,"embed":16,"hidden":32,"attention":true}"#,
        r#"{"channels":4,"embed":16,"hidden":32}"#,
    ] {
        let spec = InputSpec {
            shape,
            num_classes: vocab as u32,
            vocab_size: vocab as u32,
            max_tokens: tokens as u32,
            detection: false,
        };
        let wit = host.describe(&plugin, config, spec).unwrap();
        let graph = Graph::from_wit(&wit, Some(tokens)).unwrap();
        let mut net: GraphNet<B> = GraphNet::new(&graph, &FlexDevice);
        let images: Tensor<B, 4> =
            Tensor::random([n, 1, 32, 32], Distribution::Normal(0.0, 1.0), &FlexDevice);
        let captions: Vec<i64> =
            (0..n * (tokens + 1)).map(|i| [1, 5, 9, 4, 11, 7, 3, 6, 10, 8][(i * 7 + i / 9) % 10]).collect();
        let captions: Tensor<B, 2, Int> =
            Tensor::from_data(TensorData::new(captions, [n, tokens + 1]), &FlexDevice);
        let mut optim = AdamConfig::new().init();
        let loss_fn = CrossEntropyLossConfig::new().init(&FlexDevice);
        for _ in 0..30 {
            let logits = net.forward_sequence(images.clone(), captions.clone().narrow(1, 0, tokens));
            let loss = loss_fn.forward(
                logits.reshape([n * tokens, vocab]),
                captions.clone().narrow(1, 1, tokens).reshape([n * tokens]),
            );
            let grads = GradientsParams::from_grads(loss.backward(), &net);
            net = optim.step(3e-2, net, grads);
        }
        let net = net.valid();
        assert!(net.decodes_token_by_token(), "{config}");
        let images = images.inner();
        let generated = net.greedy_decode(images.clone(), 1, tokens);
        assert_eq!(generated.dims(), [n, tokens]);
        let start: Tensor<Flex, 2, Int> = Tensor::ones([n, 1], &FlexDevice);
        let fed = Tensor::cat(vec![start, generated.clone().narrow(1, 0, tokens - 1)], 1);
        let again = net.forward_sequence(images, fed).argmax(2).reshape([n, tokens]);
        let ids = |t: Tensor<Flex, 2, Int>| t.into_data().convert::<i64>().to_vec::<i64>().unwrap();
        let (a, b) = (ids(generated), ids(again));
        assert_eq!(a, b, "{config}");
        assert!(a.iter().collect::<std::collections::BTreeSet<_>>().len() > 3, "{config}: {a:?}");
    }
}

/// Every model of the zoo cuts into pipeline stages (2 to 4, balanced by
/// estimated cost), and its stages, run one after another on the values
/// each cut carries, compute what the whole network computes.
#[test]
fn every_model_splits_into_stages_that_compute_the_whole() {
    use benchkit::model::{Carried, NormStats, Output};
    use burn::tensor::{Distribution, Int, TensorData};
    let _draws = RANDOM.lock().unwrap_or_else(|e| e.into_inner());
    let cifar = ImageShape { channels: 3, height: 32, width: 32 };
    let mut cases: Vec<(&str, Graph)> = vec![
        ("resnet-50", model("resnet", r#"{"depth":50,"stem":"cifar","width":0.125}"#, cifar, 10)),
        ("densenet-121", model("densenet", r#"{"depth":121,"stem":"cifar","growth":4}"#, cifar, 10)),
        ("vit", model("vit", r#"{"variant":"tiny","patch":4,"depth":2}"#, cifar, 10)),
        ("swin-t", model("swin", r#"{"variant":"t","window":4,"embed":24}"#, cifar, 10)),
        ("lenet", model("lenet", "{}", ImageShape { channels: 1, height: 28, width: 28 }, 10)),
        ("alexnet", model("alexnet", "{}", ImageShape { channels: 3, height: 64, width: 64 }, 10)),
    ];
    let host = PluginHost::with_cache(Limits::default(), None).unwrap();
    let plugin = host.load(&PluginSource::Builtin("captioner".into())).unwrap();
    let spec = InputSpec { shape: cifar, num_classes: 12, vocab_size: 12, max_tokens: 6, detection: false };
    let wit =
        host.describe(&plugin, r#"{"channels":4,"embed":16,"hidden":32,"attention":true}"#, spec).unwrap();
    cases.push(("captioner", Graph::from_wit(&wit, Some(6)).unwrap()));
    for (name, graph) in cases {
        let [c, h, w] = [graph.input_shape()[0], graph.input_shape()[1], graph.input_shape()[2]];
        let images: Tensor<Flex, 4> =
            Tensor::random([2, c, h, w], Distribution::Normal(0.0, 1.0), &FlexDevice);
        let tokens = graph.reads_tokens().then(|| {
            Tensor::<Flex, 2, Int>::from_data(
                TensorData::new(vec![1i64, 5, 3, 7, 2, 9, 1, 4, 4, 8, 6, 2], [2, 6]),
                &FlexDevice,
            )
        });
        let net: GraphNet<Flex> = GraphNet::new(&graph, &FlexDevice);
        let flat = |o: Output<Flex>| -> Vec<f32> {
            match o {
                Output::Logits(t) => t.into_data().to_vec().unwrap(),
                Output::Sequence(t) => t.into_data().to_vec().unwrap(),
            }
        };
        // The first pass draws the lazily initialised parameters, which the clones then share.
        let whole = flat(
            net.forward_stage(Carried::inputs(images.clone(), tokens.clone()), NormStats::ByBackend)
                .into_output(),
        );
        for stages in 2..=4 {
            let cut = graph
                .stage_plan(stages, None, None)
                .unwrap_or_else(|e| panic!("{name}, {stages} stages: {e}"));
            assert_eq!(cut.ranges.len(), stages);
            let mut carried = Carried::inputs(images.clone(), tokens.clone());
            for part in net.clone().split(&cut) {
                carried = part.forward_stage(carried, NormStats::ByBackend);
            }
            let staged = flat(carried.into_output());
            assert_eq!(staged.len(), whole.len());
            let worst = staged.iter().zip(&whole).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst < 1e-5, "{name}, {stages} stages: outputs differ by {worst}");
        }
    }
}

/// An SSD described for detection data of `classes` object classes.
fn ssd(config: &str, classes: u32, side: u32) -> Graph {
    let host = PluginHost::with_cache(Limits::default(), None).unwrap();
    let plugin = host.load(&PluginSource::Builtin("ssd".into())).unwrap();
    let shape = ImageShape { channels: 3, height: side, width: side };
    let spec = InputSpec { shape, num_classes: classes, vocab_size: 0, max_tokens: 0, detection: true };
    let wit = host.describe(&plugin, config, spec).unwrap_or_else(|e| panic!("ssd {config}: {e:#}"));
    Graph::from_wit(&wit, None).unwrap_or_else(|e| panic!("ssd {config}: {e}"))
}

fn default_boxes(graph: &Graph) -> (Vec<[f32; 4]>, usize) {
    let op = &graph.nodes[graph.output].op;
    match op.default_boxes() {
        Some((anchors, classes)) => (anchors.to_vec(), classes),
        None => panic!("an SSD ends in default_boxes, not {op:?}"),
    }
}

#[test]
fn ssd300_vgg16_matches_torchvision_and_lays_its_8732_default_boxes() {
    // torchvision's ssd300_vgg16 at 91 classes (COCO with the background).
    let graph = ssd("{}", 90, 300);
    assert_eq!(graph.num_params(), 35_641_826);
    let net: GraphNet<Flex> = GraphNet::new(&graph, &FlexDevice);
    assert_eq!(net.trainable_params(), 35_641_826);
    let (anchors, classes) = default_boxes(&graph);
    assert_eq!((anchors.len(), classes), (8732, 91));
    assert_eq!(graph.output_shape(), [8732, 95]);
    // As DefaultBoxGenerator: conv4_3's first position, centre 0.5 / (300 / 8),
    // scale 0.07, then sqrt(0.07 × 0.15); the 1×1 map's largest boxes clipped.
    assert!((anchors[0][0] - 0.5 / 37.5).abs() < 1e-6 && anchors[0][2] == 0.07);
    assert!((anchors[1][2] - (0.07f32 * 0.15).sqrt()).abs() < 1e-6);
    assert_eq!((anchors[8728][2], anchors[8730][2]), (0.87, 1.0));
    // SSD512 adds conv12 and a 64×64 conv4_3; the light variant builds on ResNet.
    let (anchors, _) = default_boxes(&ssd(r#"{"size":512}"#, 20, 512));
    assert_eq!(
        anchors.len(),
        64 * 64 * 4 + 32 * 32 * 6 + 16 * 16 * 6 + 8 * 8 * 6 + 6 * 6 * 6 + 4 * 4 * 4 + 4
    );
    let light = ssd(r#"{"backbone":"resnet","depth":18,"size":300}"#, 20, 300);
    // ResNet-18 leaves a 10×10 map at 300 px; the extras halve it to 5, 3, 2 and 1:
    // 4 boxes a position on the first and last two maps, 6 between.
    assert_eq!(light.output_shape(), [10 * 10 * 4 + 5 * 5 * 6 + 3 * 3 * 6 + 2 * 2 * 4 + 4, 4 + 21]);
}

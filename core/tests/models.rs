//! The built-in ResNet plugin, described through the sandbox and built as a
//! burn network: exact parameter counts (torchvision's) and a forward pass.

use benchkit::model::{Graph, GraphNet};
use benchkit::plugin::{ImageShape, InputSpec, Limits, PluginHost, PluginSource};
use burn::backend::flex::FlexDevice;
use burn::backend::Flex;
use burn::module::Module;
use burn::tensor::Tensor;

fn resnet(config: &str, shape: ImageShape, classes: u32) -> Graph {
    let host = PluginHost::with_cache(Limits::default(), None).unwrap();
    let plugin = host.load(&PluginSource::Builtin("resnet".into())).unwrap();
    let wit = host.describe(&plugin, config, InputSpec { shape, num_classes: classes }).unwrap();
    Graph::from_wit(&wit).unwrap()
}

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
    let spec = InputSpec { shape: IMAGENET, num_classes: 10 };
    let err = host.describe(&plugin, r#"{"depth":19}"#, spec).unwrap_err().to_string();
    assert!(err.contains("builtin:resnet") && err.contains("expected 18 or 34, got 19"), "{err}");
}

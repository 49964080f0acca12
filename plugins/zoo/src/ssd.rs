//! SSD (Liu et al., 2016) as torchvision's `ssd300_vgg16`: a VGG-16 trunk
//! (max-pool 3 rounding up, conv4_3 L2-normalised with a learned scale,
//! pool5 3×3/1, atrous fc6 and fc7 as convolutions), the extra layers of the
//! paper, and a 3×3 class head and box head on each feature map. SSD512 adds
//! torchvision's extra conv12 block. The light variant puts the same heads
//! and halving extra layers on any ResNet of the zoo.
//!
//! The graph ends in a `default_boxes` node: a row per default box, four
//! box offsets then the class logits (background first), and the default
//! boxes themselves, generated as torchvision's `DefaultBoxGenerator`.

use crate::{resnet, Features};
use benchkit_pdk::graph::{Conv2d, GraphBuilder, Scope, Value};
use benchkit_pdk::{Config, ImageShape, InputSpec, ModelGraph};

pub const SCHEMA: &str = r#"{
  "backbone": "\"vgg16\" (SSD300/SSD512 as torchvision) | \"resnet\" (the light variant; reads resnet's depth, stem and width); default \"vgg16\"",
  "size": "input height and width: 300 or 512 for vgg16, at least 64 for resnet; default 300",
  "num_classes": "class logits per box with the background, default the data's classes + 1 (torchvision's 91 for COCO)",
  "depth": "resnet backbone only: 18 | 34 | 50 | 101 | 152 (default 18)",
  "stem": "resnet backbone only: \"imagenet\" | \"cifar\" (default \"imagenet\")",
  "width": "resnet backbone only: channel multiplier (default 1.0)"
}"#;

/// A feature map the heads read.
#[derive(Clone, Copy, Debug)]
struct Map {
    out: Value,
    channels: u32,
    side: u32,
}

/// How default boxes are laid on the feature maps.
struct BoxPlan {
    /// Extra aspect ratios per map (each adds two boxes, r and 1/r).
    ratios: Vec<Vec<f32>>,
    /// One scale per map and one more, fractions of the image.
    scales: Vec<f32>,
    /// Pixels between box centres per map; `None` spaces them by the map's size.
    steps: Option<Vec<f32>>,
}

/// Describe an SSD for `spec`.
pub fn describe(cfg: &mut Config, spec: &InputSpec) -> Result<ModelGraph, String> {
    let backbone = cfg.choice("backbone", &["vgg16", "resnet"], "vgg16")?;
    let size = cfg.u32("size", 300)?;
    let classes = cfg.u32("num_classes", spec.num_classes + 1)?;
    if classes < 2 {
        return Err("config key `num_classes` counts the background too: at least 2".into());
    }
    let input = ImageShape { channels: spec.shape.channels, height: size, width: size };
    let mut g = GraphBuilder::new(input);
    let x = g.main().input(0);
    let (maps, plan) = if backbone == "vgg16" {
        let highres = match size {
            300 => false,
            512 => true,
            other => return Err(format!("config key `size`: vgg16 SSD is 300 or 512, got {other}")),
        };
        (vgg(g.main(), x, input.channels, size, highres), vgg_boxes(highres))
    } else {
        if size < 64 {
            return Err(format!("config key `size`: at least 64 for the resnet backbone, got {size}"));
        }
        let maps = light(cfg, &mut g, x, input)?;
        let plan = light_boxes(maps.len());
        (maps, plan)
    };
    let anchors = default_boxes(&maps, &plan, size);
    let per_map: Vec<u32> = plan.ratios.iter().map(|r| 2 + 2 * r.len() as u32).collect();
    let out = heads(g.main(), &maps, &per_map, classes);
    let out = g.main().default_boxes(out, &anchors, classes);
    Ok(g.finish(out))
}

fn conv_relu(s: &mut Scope, name: &str, x: Value, c: Conv2d) -> Value {
    let x = s.conv2d(name, x, c.bias(true));
    s.relu(x)
}

/// VGG-16's convolutions to conv5_3, fc6 and fc7, then the extra layers.
fn vgg(s: &mut Scope, x: Value, channels: u32, size: u32, highres: bool) -> Vec<Map> {
    let mut x = x;
    let mut c_in = channels;
    let mut side = size;
    let mut maps = Vec::new();
    let mut layer = 0;
    for (block, &(width, convs)) in [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)].iter().enumerate() {
        for _ in 0..convs {
            x = conv_relu(s, &format!("features.{layer}"), x, Conv2d::new(c_in, width, 3).padding(1));
            c_in = width;
            layer += 2;
        }
        match block {
            // torchvision rounds max-pool 3 up, as the paper's 38×38 conv4_3 needs.
            2 => {
                x = s.max_pool2d_ceil(x, 2, 2, 0);
                side = side.div_ceil(2);
            }
            3 => {
                let norm = s.l2_norm("scale_weight", x, 512, 20.0);
                maps.push(Map { out: norm, channels: 512, side });
                x = s.max_pool2d(x, 2, 2, 0);
                side /= 2;
            }
            4 => x = s.max_pool2d(x, 3, 1, 1),
            _ => {
                x = s.max_pool2d(x, 2, 2, 0);
                side /= 2;
            }
        }
        layer += 1;
    }
    x = conv_relu(s, "fc6", x, Conv2d::new(512, 1024, 3).padding(6).dilation(6));
    x = conv_relu(s, "fc7", x, Conv2d::new(1024, 1024, 1));
    maps.push(Map { out: x, channels: 1024, side });
    // (reduce, out, kernel, stride, padding) of conv8_2 … conv11_2 (and conv12_2).
    let mut extras = vec![(256, 512, 3, 2, 1), (128, 256, 3, 2, 1), (128, 256, 3, 1, 0), (128, 256, 3, 1, 0)];
    if highres {
        extras.push((128, 256, 4, 1, 0));
    }
    let mut c_in = 1024;
    for (k, (reduce, out, kernel, stride, padding)) in extras.into_iter().enumerate() {
        let name = format!("extra.{}", k + 1);
        x = conv_relu(s, &format!("{name}.0"), x, Conv2d::new(c_in, reduce, 1));
        let c = Conv2d::new(reduce, out, kernel).stride(stride).padding(padding);
        x = conv_relu(s, &format!("{name}.2"), x, c);
        side = crate::window_out(side, kernel, stride, padding);
        c_in = out;
        maps.push(Map { out: x, channels: out, side });
    }
    maps
}

/// The zoo's ResNet, then 1×1-reduce and 3×3/2 extra layers halving the map
/// down to 1×1, each map read by the heads.
fn light(cfg: &mut Config, g: &mut GraphBuilder, x: Value, input: ImageShape) -> Result<Vec<Map>, String> {
    let backbone = (resnet::ARCH.backbone)(cfg, g, x, input)?;
    let Features::Map { channels, height, .. } = backbone.features else {
        return Err("the resnet backbone gives no feature map".into());
    };
    let mut maps = vec![Map { out: backbone.out, channels, side: height }];
    let (mut x, mut c_in, mut side) = (backbone.out, channels, height);
    let mut k = 1;
    while side > 1 {
        let s = g.main();
        x = conv_relu(s, &format!("extra.{k}.0"), x, Conv2d::new(c_in, 128, 1));
        x = conv_relu(s, &format!("extra.{k}.2"), x, Conv2d::new(128, 256, 3).stride(2).padding(1));
        side = crate::window_out(side, 3, 2, 1);
        c_in = 256;
        maps.push(Map { out: x, channels: 256, side });
        k += 1;
    }
    Ok(maps)
}

/// torchvision's SSD300 boxes; SSD512's are the paper's scales, spaced by map size.
fn vgg_boxes(highres: bool) -> BoxPlan {
    if highres {
        BoxPlan {
            ratios: vec![
                vec![2.0],
                vec![2.0, 3.0],
                vec![2.0, 3.0],
                vec![2.0, 3.0],
                vec![2.0, 3.0],
                vec![2.0],
                vec![2.0],
            ],
            scales: vec![0.04, 0.1, 0.26, 0.42, 0.58, 0.74, 0.9, 1.06],
            steps: None,
        }
    } else {
        BoxPlan {
            ratios: vec![vec![2.0], vec![2.0, 3.0], vec![2.0, 3.0], vec![2.0, 3.0], vec![2.0], vec![2.0]],
            scales: vec![0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05],
            steps: Some(vec![8.0, 16.0, 32.0, 64.0, 100.0, 300.0]),
        }
    }
}

/// `DefaultBoxGenerator`'s defaults for `maps` maps: scales from 0.15 to 0.9,
/// ratios 2 and 3 except on the first and last two maps.
fn light_boxes(maps: usize) -> BoxPlan {
    let m = maps.max(2);
    let mut scales: Vec<f32> = (0..m).map(|k| 0.15 + 0.75 * k as f32 / (m - 1) as f32).collect();
    scales.push(1.0);
    let ratios =
        (0..maps).map(|k| if k == 0 || k + 2 >= maps { vec![2.0] } else { vec![2.0, 3.0] }).collect();
    BoxPlan { ratios, scales, steps: None }
}

/// The default boxes `[cx, cy, w, h]` of every map: position by position,
/// row-major, each position's boxes in `DefaultBoxGenerator`'s order, the
/// widths and heights clipped to the image.
fn default_boxes_of(
    sides: &[u32],
    ratios: &[Vec<f32>],
    scales: &[f32],
    steps: Option<&[f32]>,
    size: u32,
) -> Vec<[f32; 4]> {
    let mut out = Vec::new();
    for (k, &side) in sides.iter().enumerate() {
        let (s, next) = (scales[k], scales[k + 1]);
        let mut wh = vec![[s, s], [(s * next).sqrt(), (s * next).sqrt()]];
        for &r in &ratios[k] {
            wh.push([s * r.sqrt(), s / r.sqrt()]);
            wh.push([s / r.sqrt(), s * r.sqrt()]);
        }
        let spacing = steps.map_or(side as f32, |st| size as f32 / st[k]);
        for i in 0..side {
            for j in 0..side {
                let (cx, cy) = ((j as f32 + 0.5) / spacing, (i as f32 + 0.5) / spacing);
                out.extend(wh.iter().map(|p| [cx, cy, p[0].clamp(0.0, 1.0), p[1].clamp(0.0, 1.0)]));
            }
        }
    }
    out
}

fn default_boxes(maps: &[Map], plan: &BoxPlan, size: u32) -> Vec<[f32; 4]> {
    let sides: Vec<u32> = maps.iter().map(|m| m.side).collect();
    default_boxes_of(&sides, &plan.ratios, &plan.scales, plan.steps.as_deref(), size)
}

/// A 3×3 box head and class head on each map, their rows joined:
/// `[boxes, 4 + classes]`.
fn heads(s: &mut Scope, maps: &[Map], per_map: &[u32], classes: u32) -> Value {
    let mut boxes = Vec::new();
    let mut logits = Vec::new();
    for (k, (map, &a)) in maps.iter().zip(per_map).enumerate() {
        let rows = |s: &mut Scope, name: String, width: u32| {
            let y = s.conv2d(&name, map.out, Conv2d::new(map.channels, a * width, 3).padding(1).bias(true));
            let y = s.permute(y, &[1, 2, 0]);
            s.reshape(y, &[map.side * map.side * a, width])
        };
        boxes.push(rows(s, format!("head.regression.{k}"), 4));
        logits.push(rows(s, format!("head.classification.{k}"), classes));
    }
    let boxes = s.concat(&boxes, 0);
    let logits = s.concat(&logits, 0);
    s.concat(&[boxes, logits], 1)
}

use super::sample::{self, SampleSpec, FASHION_CLASSES};
use super::*;
use crate::data::ImageSet;

/// A VOC directory with one train and one test image and the given annotation for both.
fn voc_with(xml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for d in ["JPEGImages", "Annotations", "ImageSets/Main"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let image = image::RgbImage::from_pixel(500, 375, image::Rgb([90, 120, 30]));
    for id in ["a", "b"] {
        image.save(dir.path().join(format!("JPEGImages/{id}.jpg"))).unwrap();
        std::fs::write(dir.path().join(format!("Annotations/{id}.xml")), xml).unwrap();
    }
    std::fs::write(dir.path().join("ImageSets/Main/train.txt"), "a\n").unwrap();
    std::fs::write(dir.path().join("ImageSets/Main/val.txt"), "b\n").unwrap();
    dir
}

fn object(name: &str, difficult: &str, b: [&str; 4]) -> String {
    format!(
        "<object><name>{name}</name><difficult>{difficult}</difficult>\n<bndbox><xmin>{}</xmin><ymin>{}</ymin><xmax>{}</xmax><ymax>{}</ymax></bndbox></object>\n",
        b[0], b[1], b[2], b[3]
    )
}

fn annotation(objects: &str) -> String {
    format!("<annotation>\n<size><width>500</width><height>375</height><depth>3</depth></size>\n{objects}</annotation>\n")
}

fn error(xml: &str) -> String {
    let dir = voc_with(xml);
    open(dir.path(), None).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn boxes_become_fractions_and_voc_classes_are_numbered_in_devkit_order() {
    let objects =
        object("dog", "0", ["1", "1", "250", "375"]) + &object("bird", "1", ["101", "76", "200", "150"]);
    let dir = voc_with(&annotation(&objects));
    let voc = open(dir.path(), None).unwrap();
    assert_eq!(voc.classes.len(), 20, "every name is a VOC class: the 20 of them");
    let boxes = voc.train.boxes(0).unwrap();
    assert_eq!(boxes.len(), 2);
    assert_eq!(boxes[0].label, 11, "dog");
    assert_eq!(boxes[0].corners(), [0.0, 0.0, 0.5, 1.0]);
    assert_eq!((boxes[1].label, boxes[1].difficult), (2, true));
    assert!((boxes[1].x_min - 0.2).abs() < 1e-6 && (boxes[1].y_max - 0.4).abs() < 1e-6);
    assert_eq!(voc.test.len(), 1, "val.txt serves as the test split");
    assert_eq!(voc.train.shape(), ImageShape { channels: 3, height: 375, width: 500 });
}

#[test]
fn other_names_are_their_own_sorted_classes_and_labels_fix_the_order() {
    let objects = object("zebra", "0", ["1", "1", "9", "9"]) + &object("ant", "0", ["1", "1", "9", "9"]);
    let dir = voc_with(&annotation(&objects));
    assert_eq!(open(dir.path(), None).unwrap().classes, ["ant", "zebra"]);
    let labels = vec!["zebra".to_string(), "ant".to_string()];
    let voc = open(dir.path(), Some(&labels)).unwrap();
    assert_eq!(voc.train.boxes(0).unwrap()[1].label, 1);
    let only = vec!["zebra".to_string()];
    let e = open(dir.path(), Some(&only)).unwrap_err().to_string();
    assert!(
        e.contains("a.xml") && e.contains("line 5") && e.contains("\"ant\" is not among data.labels"),
        "{e}"
    );
}

#[test]
fn broken_annotations_name_the_file_line_and_element() {
    let e = error("<annotation><size><width>500</width>");
    assert!(e.contains("a.xml") && e.contains("not well-formed XML"), "{e}");
    let e = error("<annotation>\n<size><width>500</width></size></annotation>");
    assert!(e.contains("line 2: <size> has no <height>"), "{e}");
    let e = error(&annotation(&object("dog", "0", ["1", "1", "x9", "9"])));
    assert!(e.contains("line 4: <bndbox><xmax> \"x9\" is not a number"), "{e}");
    let e = error(&annotation(&object("dog", "0", ["1", "1", "501", "9"])));
    assert!(e.contains("line 4: <bndbox> of \"dog\"") && e.contains("500×375"), "{e}");
    let e = error(&annotation(&object("dog", "0", ["50", "1", "40", "9"])));
    assert!(e.contains("xmin < xmax"), "{e}");
    let e = error(&annotation(&object("dog", "yes", ["1", "1", "9", "9"])));
    assert!(e.contains("line 3: <object><difficult> is \"yes\""), "{e}");
    let e = error(&annotation("<object><name>dog</name></object>\n"));
    assert!(e.contains("line 3: <object> \"dog\" has no <bndbox>"), "{e}");
    let e = error(&annotation("<object><bndbox/></object>\n"));
    assert!(e.contains("<object> has no <name>"), "{e}");
}

#[test]
fn a_missing_image_set_or_layout_says_what_was_looked_for() {
    let dir = voc_with(&annotation(""));
    std::fs::remove_file(dir.path().join("ImageSets/Main/val.txt")).unwrap();
    let e = open(dir.path(), None).unwrap_err().to_string();
    assert!(e.contains("test.txt, val.txt"), "{e}");
    let e = open(&dir.path().join("JPEGImages"), None).unwrap_err().to_string();
    assert!(e.contains("Pascal VOC layout"), "{e}");
}

#[test]
fn the_sample_reopens_with_every_box_around_its_ink() {
    // Two 28×28 items: a bright square in the middle of each.
    let mut pixels = vec![0u8; 2 * 28 * 28];
    for (k, p) in pixels.iter_mut().enumerate() {
        let (y, x) = ((k % 784) / 28, k % 28);
        if (8..20).contains(&y) && (10..18).contains(&x) {
            *p = 255;
        }
    }
    let items = ImageSet {
        origin: "items".into(),
        shape: ImageShape { channels: 1, height: 28, width: 28 },
        pixels,
        labels: vec![3, 8],
    };
    let dir = tempfile::tempdir().unwrap();
    let spec = SampleSpec { train: 6, test: 3, size: 160, max_objects: 3, seed: 4 };
    sample::write([&items, &items], &FASHION_CLASSES, dir.path(), spec).unwrap();
    let voc = open(dir.path(), None).unwrap();
    assert_eq!((voc.train.len(), voc.test.len()), (6, 3));
    assert_eq!(voc.classes, ["bag", "dress"]);
    for i in 0..voc.train.len() {
        let boxes = voc.train.boxes(i).unwrap();
        assert!(!boxes.is_empty());
        let image = image::open(voc.train.locate(i)).unwrap();
        let (width, height) = (image.width() as f32, image.height() as f32);
        assert_eq!(height, 160.0);
        for b in boxes.iter() {
            // The ink is 8 pixels wide and 12 high, enlarged 2 to 5 times.
            let (w, h) = ((b.x_max - b.x_min) * width, (b.y_max - b.y_min) * height);
            assert!((22.0..=66.0).contains(&h), "{b:?}: {h} pixels high");
            assert!((w / h - 8.0 / 12.0).abs() < 0.12, "{b:?}: {w}×{h}");
        }
    }
}

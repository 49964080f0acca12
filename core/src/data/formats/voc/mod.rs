//! Pascal VOC detection data: `JPEGImages/<id>.jpg`, `Annotations/<id>.xml`
//! and the image ids of each split in `ImageSets/Main/`: training from
//! `train.txt` (or `trainval.txt`), testing from `test.txt` (or `val.txt`).
//! Every annotation is read and checked when the dataset opens; images are
//! read and decoded by the loader. Classes are `data.labels` when given,
//! else the 20 VOC classes when every object is one of them, else the
//! object names found, sorted.

use crate::data::boxes::ObjectBox;
use crate::data::image::ImageShape;
use crate::data::source::{Record, Split};
use crate::data::DataError;
use std::path::{Path, PathBuf};

pub mod sample;

/// The 20 Pascal VOC classes, in the order the VOC devkit lists them.
pub const VOC_CLASSES: [&str; 20] = [
    "aeroplane",
    "bicycle",
    "bird",
    "boat",
    "bottle",
    "bus",
    "car",
    "cat",
    "chair",
    "cow",
    "diningtable",
    "dog",
    "horse",
    "motorbike",
    "person",
    "pottedplant",
    "sheep",
    "sofa",
    "train",
    "tvmonitor",
];

/// One split: its image files and their objects.
#[derive(Debug)]
pub struct VocSplit {
    images: Vec<PathBuf>,
    boxes: Vec<Vec<ObjectBox>>,
    shape: ImageShape,
}

impl Split for VocSplit {
    fn len(&self) -> usize {
        self.images.len()
    }

    fn shape(&self) -> ImageShape {
        self.shape
    }

    fn locate(&self, i: usize) -> String {
        self.images.get(i).map_or_else(|| format!("sample {i}"), |p| p.display().to_string())
    }

    fn read(&self, i: usize) -> Result<(Record<'_>, u32), DataError> {
        Ok((Record::file(&self.images[i])?, 0))
    }

    fn boxes(&self, i: usize) -> Option<std::borrow::Cow<'_, [ObjectBox]>> {
        self.boxes.get(i).map(|b| std::borrow::Cow::Borrowed(b.as_slice()))
    }
}

/// Both splits with their class names.
#[derive(Debug)]
pub struct Voc {
    pub train: VocSplit,
    pub test: VocSplit,
    pub classes: Vec<String>,
}

/// Whether `dir` has the VOC layout.
pub fn detect(dir: &Path) -> bool {
    ["Annotations", "JPEGImages", "ImageSets"].iter().all(|d| dir.join(d).is_dir())
}

/// An object as its annotation names it, before classes are numbered.
struct Named {
    name: String,
    line: u32,
    corners: [f32; 4],
    difficult: bool,
}

/// One annotation file, read.
struct Annotation {
    path: PathBuf,
    objects: Vec<Named>,
}

/// Open a VOC directory; `labels` fixes the classes and their order.
pub fn open(root: &Path, labels: Option<&[String]>) -> Result<Voc, DataError> {
    if !detect(root) {
        return Err(DataError::Missing {
            dir: root.into(),
            what: "Pascal VOC layout".into(),
            tried: "JPEGImages/, Annotations/ and ImageSets/Main/{train,test}.txt".into(),
        });
    }
    let train_ids = ids(root, &["train.txt", "trainval.txt"])?;
    let test_ids = ids(root, &["test.txt", "val.txt"])?;
    let read = |ids: &[String]| -> Result<Vec<Annotation>, DataError> {
        ids.iter().map(|id| annotation(&root.join("Annotations").join(format!("{id}.xml")))).collect()
    };
    let (train, test) = (read(&train_ids)?, read(&test_ids)?);
    let classes = classes(labels, train.iter().chain(&test));
    let split = |ids: &[String], annotations: Vec<Annotation>| -> Result<VocSplit, DataError> {
        let images: Vec<PathBuf> =
            ids.iter().map(|id| root.join("JPEGImages").join(format!("{id}.jpg"))).collect();
        let boxes = annotations.into_iter().map(|a| number(a, &classes)).collect::<Result<_, _>>()?;
        let shape = super::folder::probe(&images[0])?;
        Ok(VocSplit { images, boxes, shape })
    };
    Ok(Voc { train: split(&train_ids, train)?, test: split(&test_ids, test)?, classes })
}

/// The image ids listed in the first of `names` under `ImageSets/Main/`.
fn ids(root: &Path, names: &[&str]) -> Result<Vec<String>, DataError> {
    let dir = root.join("ImageSets").join("Main");
    let Some(path) = names.iter().map(|n| dir.join(n)).find(|p| p.is_file()) else {
        return Err(DataError::Missing { dir, what: "image set".into(), tried: names.join(", ") });
    };
    let text = crate::bounds::read_text(&path, "an image set", crate::bounds::TEXT_BYTES)?;
    let mut ids = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let Some(id) = line.split_whitespace().next() else { continue };
        // An id names files under JPEGImages/ and Annotations/: never outside them.
        crate::bounds::plain_component("an image id", id)
            .map_err(|e| DataError::Format { path: path.clone(), message: format!("line {}: {e}", n + 1) })?;
        ids.push(id.to_string());
    }
    if ids.is_empty() {
        return Err(DataError::Format { path, message: "lists no image ids".into() });
    }
    Ok(ids)
}

/// The class list: `labels`, else VOC's when it covers every object, else the names found.
fn classes<'a>(labels: Option<&[String]>, annotations: impl Iterator<Item = &'a Annotation>) -> Vec<String> {
    if let Some(labels) = labels {
        return labels.to_vec();
    }
    let mut names: Vec<String> = annotations.flat_map(|a| a.objects.iter().map(|o| o.name.clone())).collect();
    names.sort();
    names.dedup();
    if names.iter().all(|n| VOC_CLASSES.contains(&n.as_str())) {
        VOC_CLASSES.iter().map(|c| c.to_string()).collect()
    } else {
        names
    }
}

/// An annotation's objects with their class numbers.
fn number(a: Annotation, classes: &[String]) -> Result<Vec<ObjectBox>, DataError> {
    a.objects
        .into_iter()
        .map(|o| {
            let Some(label) = classes.iter().position(|c| *c == o.name) else {
                return Err(DataError::Format {
                    path: a.path.clone(),
                    message: format!(
                        "line {}: <object><name> \"{}\" is not among data.labels ({})",
                        o.line,
                        o.name,
                        classes.join(", ")
                    ),
                });
            };
            let [x_min, y_min, x_max, y_max] = o.corners;
            Ok(ObjectBox { label: label as u32, x_min, y_min, x_max, y_max, difficult: o.difficult })
        })
        .collect()
}

/// The first child element of `n` named `name`.
fn child<'a, 'i>(n: roxmltree::Node<'a, 'i>, name: &str) -> Option<roxmltree::Node<'a, 'i>> {
    n.children().find(|c| c.has_tag_name(name))
}

/// Read and check one annotation file.
fn annotation(path: &Path) -> Result<Annotation, DataError> {
    let text = crate::bounds::read_text(path, "an annotation", crate::bounds::SAMPLE_BYTES)?;
    let bad = |message: String| DataError::Format { path: path.into(), message };
    let doc = roxmltree::Document::parse(&text).map_err(|e| bad(format!("not well-formed XML: {e}")))?;
    let line = |n: roxmltree::Node| doc.text_pos_at(n.range().start).row;
    let root = doc.root_element();
    let number = |n: roxmltree::Node, within: &str, name: &str| -> Result<f64, DataError> {
        let Some(c) = child(n, name) else {
            return Err(bad(format!("line {}: <{within}> has no <{name}>", line(n))));
        };
        let text = c.text().unwrap_or("").trim();
        text.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad(format!("line {}: <{within}><{name}> \"{text}\" is not a number", line(c))))
    };
    let Some(size) = child(root, "size") else {
        return Err(bad(format!("line {}: <{}> has no <size>", line(root), root.tag_name().name())));
    };
    let (width, height) = (number(size, "size", "width")?, number(size, "size", "height")?);
    if width < 1.0 || height < 1.0 {
        return Err(bad(format!("line {}: <size> is {width}×{height}; both must be at least 1", line(size))));
    }
    let mut objects = Vec::new();
    for object in root.children().filter(|c| c.has_tag_name("object")) {
        let at = line(object);
        let name = child(object, "name").and_then(|n| n.text()).map(str::trim).unwrap_or("");
        if name.is_empty() {
            return Err(bad(format!("line {at}: <object> has no <name>")));
        }
        let difficult = match child(object, "difficult").and_then(|d| d.text()).map(str::trim) {
            None | Some("0") | Some("") => false,
            Some("1") => true,
            Some(other) => return Err(bad(format!("line {at}: <object><difficult> is \"{other}\"; 0 or 1"))),
        };
        let Some(bndbox) = child(object, "bndbox") else {
            return Err(bad(format!("line {at}: <object> \"{name}\" has no <bndbox>")));
        };
        let [x0, y0, x1, y1] = ["xmin", "ymin", "xmax", "ymax"].map(|k| number(bndbox, "bndbox", k));
        let (x0, y0, x1, y1) = (x0?, y0?, x1?, y1?);
        // VOC counts pixels from 1 and includes both edges.
        if x0 < 0.0 || y0 < 0.0 || x1 > width || y1 > height || x0 >= x1 || y0 >= y1 {
            return Err(bad(format!(
                "line {}: <bndbox> of \"{name}\" is ({x0}, {y0})–({x1}, {y1}), not inside the {width}×{height} image with xmin < xmax and ymin < ymax",
                line(bndbox)
            )));
        }
        let corners = [
            ((x0 - 1.0).max(0.0) / width) as f32,
            ((y0 - 1.0).max(0.0) / height) as f32,
            (x1 / width) as f32,
            (y1 / height) as f32,
        ];
        objects.push(Named { name: name.to_string(), line: at, corners, difficult });
    }
    Ok(Annotation { path: path.into(), objects })
}

#[cfg(test)]
mod tests;

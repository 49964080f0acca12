//! Instances of the transform and reporter WIT worlds, each in a sandbox of its
//! own: the transform behind the data layer's [`Transform`] trait, with
//! every output checked for shape, length and non-finite values; the
//! reporter handed events and asked for bounded artifacts. They never trust
//! what the guest returns.

use super::bindings::byte_transform::exports::benchkit::plugin::byte_transformer::{
    ByteBatch, PixelBatch as BytePixels,
};
use super::bindings::{self, ImageShape, ObjectBox, PixelBatch, TensorBatch};
use super::finite::count_nonfinite;
use super::host::{image_len, APPLY_PART_BYTES};
use super::sandbox::{Sandbox, TEXT_COPY_BYTES};
use super::PluginError;
use crate::data::{DataError, Decoded, Transform, Transformed};
use std::borrow::Cow;
use wasmtime::component::ResourceAny;

/// A transform plugin ready to process batches.
pub struct TransformInstance {
    pub(super) sandbox: Sandbox,
    pub(super) world: TransformWorld,
    pub(super) resource: ResourceAny,
    pub(super) output: ImageShape,
    /// Values in one output image.
    pub(super) output_len: usize,
}

/// The two transform WIT worlds: f32 out, or u8 out with a per-channel map (1.1.0).
pub(super) enum TransformWorld {
    Floats(bindings::transform::Transform),
    Bytes(bindings::byte_transform::ByteTransform),
}

const CALL: &str = "transform.apply";

impl TransformInstance {
    /// Bytes the instance's memories and tables hold (their peak: they never shrink).
    pub fn memory_bytes(&self) -> usize {
        self.sandbox.memory_bytes()
    }

    /// Transform one batch. A batch whose output would pass
    /// [`APPLY_PART_BYTES`] goes to the plugin in parts, each with a seed of
    /// its own derived from the batch's, so the result depends only on the
    /// batch; every part's output is checked for shape, length and (unless
    /// allowed) NaN or infinite values.
    pub fn apply(&mut self, batch: &PixelBatch) -> Result<TensorBatch, PluginError> {
        self.apply_cow(Cow::Borrowed(batch))
    }

    /// [`TransformInstance::apply`] on a batch it may keep: a byte
    /// transform's batch then moves into the call instead of being copied.
    pub fn apply_owned(&mut self, batch: PixelBatch) -> Result<TensorBatch, PluginError> {
        self.apply_cow(Cow::Owned(batch))
    }

    fn apply_cow(&mut self, batch: Cow<'_, PixelBatch>) -> Result<TensorBatch, PluginError> {
        let count = batch.count as usize;
        let input_len = image_len(batch.shape).unwrap_or(0);
        let memory = self.sandbox.limits().memory_bytes();
        // A byte transform's guests are mostly scripting languages, which
        // hold several copies of a batch: their parts stay small (a batch of
        // 256 at 224 px is 37 MiB of bytes, whole either way).
        let (value_bytes, part_bytes) = match self.world {
            TransformWorld::Floats(_) => (4, APPLY_PART_BYTES.min(memory / 4)),
            TransformWorld::Bytes(_) => (1, (APPLY_PART_BYTES / 4).min(memory / 8)),
        };
        // A part bounds what goes in as well as what comes out.
        let per_part = (part_bytes / input_len.max(value_bytes * self.output_len)).max(1);
        if count <= per_part || input_len == 0 || batch.pixels.len() != count * input_len {
            return self.apply_part(batch);
        }
        let mut data = Vec::new();
        data.try_reserve_exact(count.saturating_mul(self.output_len)).map_err(|_| {
            let message = format!("{count} images of {:?} do not fit in this machine's memory", self.output);
            self.sandbox.guest_error(CALL, &message)
        })?;
        let mut boxes = Vec::with_capacity(batch.boxes.len());
        for (k, start) in (0..count).step_by(per_part).enumerate() {
            let n = per_part.min(count - start);
            let part = PixelBatch {
                count: n as u32,
                shape: batch.shape,
                pixels: batch.pixels[start * input_len..(start + n) * input_len].to_vec(),
                seed: if k == 0 { batch.seed } else { part_seed(batch.seed, k as u64) },
                augment: batch.augment,
                boxes: batch.boxes.get(start..start + n).map(<[_]>::to_vec).unwrap_or_default(),
            };
            let out = self.apply_part(Cow::Owned(part))?;
            data.extend_from_slice(&out.data);
            boxes.extend(out.boxes);
        }
        Ok(TensorBatch { count: batch.count, shape: self.output, data, boxes })
    }

    fn apply_part(&mut self, batch: Cow<'_, PixelBatch>) -> Result<TensorBatch, PluginError> {
        let resource = self.resource;
        let values = batch.count as usize * self.output_len;
        let count = batch.count;
        let boxes_in = batch.boxes.clone();
        // The output, the boxes (at most the input's, 24 bytes each and 8
        // per image's list) and room for an error message (and a byte
        // transform's channel maps, 8 bytes a channel).
        let maps = 8 * self.output.channels as usize;
        let room = boxes_in.iter().map(|b| 8 + 24 * b.len()).sum::<usize>() + TEXT_COPY_BYTES + maps;
        let (out, scan) = match &self.world {
            TransformWorld::Floats(world) => {
                let api = world.benchkit_plugin_transformer().transform();
                let limit = values.saturating_mul(4).saturating_add(room);
                let batch = batch.as_ref();
                (self.sandbox.call_fallible(CALL, limit, |s| api.call_apply(s, resource, batch))?, true)
            }
            TransformWorld::Bytes(world) => {
                let api = world.benchkit_plugin_byte_transformer().transform();
                let batch = byte_batch(batch.into_owned());
                let limit = values.saturating_add(room);
                let out = self.sandbox.call_fallible(CALL, limit, |s| api.call_apply(s, resource, &batch))?;
                // Finite maps of bytes give finite values: nothing to scan.
                (self.to_floats(out, count)?, false)
            }
        };
        self.checked(count, &boxes_in, out, scan)
    }

    /// A byte transform's output as values: each channel's bytes through
    /// its map, natively, once its shape, length and map are checked.
    fn to_floats(&self, out: ByteBatch, count: u32) -> Result<TensorBatch, PluginError> {
        let channels = self.output.channels as usize;
        let expected = count as usize * self.output_len;
        self.expect_whole("bytes", (out.data.len(), out.count, out.shape), count)?;
        if out.scale.len() != channels || out.offset.len() != channels {
            let message = format!(
                "returned {} scales and {} offsets for {channels} channels",
                out.scale.len(),
                out.offset.len()
            );
            return Err(self.sandbox.guest_error(CALL, &message));
        }
        let bounded = |(s, o): (&f32, &f32)| (s.abs() * 255.0 + o.abs()).is_finite();
        let unbounded = out.scale.iter().zip(&out.offset).filter(|&m| !bounded(m)).count();
        if unbounded > 0 && !self.sandbox.limits().allow_nonfinite {
            // One channel's map in the message: there may be thousands.
            let first = out.scale.iter().zip(&out.offset).position(|m| !bounded(m)).unwrap_or(0);
            return Err(PluginError::NonFinite {
                plugin: self.sandbox.plugin().to_string(),
                function: CALL.into(),
                batch: format!(
                    "its channel maps (channel {first}: byte × {} + {})",
                    out.scale[first], out.offset[first]
                ),
                count: unbounded,
                total: channels,
            });
        }
        let plane = self.output_len / channels.max(1);
        let mut data = Vec::with_capacity(expected);
        for image in out.data.chunks_exact(self.output_len) {
            for (c, bytes) in image.chunks_exact(plane).enumerate() {
                let (scale, offset) = (out.scale[c], out.offset[c]);
                data.extend(bytes.iter().map(|&b| f32::from(b) * scale + offset));
            }
        }
        Ok(TensorBatch { count: out.count, shape: out.shape, data, boxes: out.boxes })
    }

    /// An error unless `len` values (`unit`) of `got_count` images of
    /// `got_shape` are `count` whole images of the output shape.
    fn expect_whole(
        &self,
        unit: &str,
        (len, got_count, got_shape): (usize, u32, ImageShape),
        count: u32,
    ) -> Result<(), PluginError> {
        let expected = count as usize * self.output_len;
        if got_shape == self.output && len == expected && got_count == count {
            return Ok(());
        }
        let message = format!(
            "returned {len} {unit} for {got_count} images of {got_shape:?}, expected {expected} for {count} images of {:?}",
            self.output
        );
        Err(self.sandbox.guest_error(CALL, &message))
    }

    /// `out` if it holds `count` images of the output shape, boxes that
    /// `boxes_in` allow and (when `scan` and not allowed otherwise) no NaN
    /// or infinite value.
    fn checked(
        &self,
        count: u32,
        boxes_in: &[Vec<ObjectBox>],
        out: TensorBatch,
        scan: bool,
    ) -> Result<TensorBatch, PluginError> {
        self.expect_whole("values", (out.data.len(), out.count, out.shape), count)?;
        if let Some(message) = box_problem(boxes_in, &out.boxes) {
            return Err(self.sandbox.guest_error(CALL, &message));
        }
        let nonfinite =
            if scan && !self.sandbox.limits().allow_nonfinite { count_nonfinite(&out.data) } else { 0 };
        if nonfinite > 0 {
            return Err(PluginError::NonFinite {
                plugin: self.sandbox.plugin().to_string(),
                function: CALL.into(),
                batch: format!("a batch of {count} images"),
                count: nonfinite,
                total: out.data.len(),
            });
        }
        Ok(out)
    }
}

/// The byte world's copy of a batch (the same record, a type of its own).
fn byte_batch(b: PixelBatch) -> BytePixels {
    BytePixels {
        count: b.count,
        shape: b.shape,
        pixels: b.pixels,
        seed: b.seed,
        augment: b.augment,
        boxes: b.boxes,
    }
}

impl Transform for TransformInstance {
    fn output_shape(&self) -> crate::data::ImageShape {
        self.output.into()
    }

    fn apply(&mut self, batch: Decoded) -> Result<Transformed, DataError> {
        // Formatted only if the transform fails.
        let at = Decoded { pixels: Vec::new(), boxes: None, ..batch };
        let batch = PixelBatch {
            count: u32::try_from(batch.count).unwrap_or(u32::MAX),
            shape: batch.shape.into(),
            pixels: batch.pixels,
            seed: batch.seed,
            augment: batch.augment,
            boxes: batch
                .boxes
                .unwrap_or_default()
                .into_iter()
                .map(|image| image.into_iter().map(Into::into).collect())
                .collect(),
        };
        let had_boxes = !batch.boxes.is_empty();
        let out = self.apply_cow(Cow::Owned(batch)).map_err(|e| e.in_batch(at.label()))?;
        let boxes = had_boxes.then(|| {
            out.boxes.into_iter().map(|image| image.into_iter().map(Into::into).collect()).collect()
        });
        Ok(Transformed { values: out.data, boxes })
    }
}

/// What is wrong with the boxes a transform returned for `input`, if
/// anything: a batch with boxes must get one list per image back, each box
/// inside the image with its edges in order, no more boxes than the image
/// had and no label it did not have. A batch without boxes gets none.
fn box_problem(input: &[Vec<ObjectBox>], output: &[Vec<ObjectBox>]) -> Option<String> {
    if input.is_empty() {
        return (!output.is_empty())
            .then(|| format!("returned boxes for {} images of data without boxes", output.len()));
    }
    if output.len() != input.len() {
        return Some(format!(
            "returned boxes for {} of {} images; a transform of detection data must move each image's boxes with its pixels (builtin:ssd-augment does; builtin:normalize and builtin:grayscale-to-rgb pass them on)",
            output.len(),
            input.len()
        ));
    }
    for (i, (given, got)) in input.iter().zip(output).enumerate() {
        if got.len() > given.len() {
            return Some(format!("returned {} boxes for image {i}, which had {}", got.len(), given.len()));
        }
        for b in got {
            let inside = [b.x_min, b.y_min, b.x_max, b.y_max].iter().all(|v| (0.0..=1.0).contains(v));
            if !inside || b.x_min >= b.x_max || b.y_min >= b.y_max {
                return Some(format!(
                    "returned box ({}, {})–({}, {}) for image {i}; edges must be fractions in [0, 1] with min < max",
                    b.x_min, b.y_min, b.x_max, b.y_max
                ));
            }
            if !given.iter().any(|g| g.label == b.label) {
                return Some(format!("returned label {} for image {i}, which had no object of it", b.label));
            }
        }
    }
    None
}

/// The seed of part `k` (> 0) of a batch handed over in parts.
fn part_seed(seed: u64, k: u64) -> u64 {
    let mut z = seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A reporter plugin receiving a run's events.
pub struct ReporterInstance {
    pub(super) sandbox: Sandbox,
    pub(super) world: bindings::reporter::Reporter,
    pub(super) resource: ResourceAny,
    /// Built for contract 1.0 to 1.4: it reads events in results schema
    /// 1.x's names.
    pub(super) reads_v1: bool,
    /// Built for contract 1.6 or later, which added the `timeline` event.
    pub(super) reads_timelines: bool,
}

impl ReporterInstance {
    /// Whether `event` is of a kind this reporter's contract has: a
    /// `timeline` (large) goes only to reporters of contract 1.6 and later.
    pub fn takes(&self, event: &benchkit_schema::Stamped) -> bool {
        self.reads_timelines || !matches!(event.event, benchkit_schema::Event::Timeline(_))
    }

    /// `event` as the JSON this reporter's contract promises it: results
    /// schema 2's names, or 1.x's for a reporter of contract 1.0 to 1.4.
    pub fn event_text(&self, event: &benchkit_schema::Stamped) -> String {
        if !self.reads_v1 {
            return event.to_line();
        }
        let mut value = serde_json::to_value(event).unwrap_or_default();
        benchkit_schema::v1::downgrade_event(&mut value);
        value.to_string()
    }

    /// The plugin's name as the user gave it.
    pub fn origin(&self) -> &str {
        self.sandbox.plugin()
    }

    /// Bytes the instance's memories and tables hold (their peak: they never shrink).
    pub fn memory_bytes(&self) -> usize {
        self.sandbox.memory_bytes()
    }

    /// Hand one event (a JSON document) to the reporter.
    pub fn on_event(&mut self, event: &str) -> Result<(), PluginError> {
        let api = self.world.benchkit_plugin_sink().reporter();
        let resource = self.resource;
        let event = event.to_string();
        self.sandbox
            .call_fallible("reporter.on-event", TEXT_COPY_BYTES, |s| api.call_on_event(s, resource, &event))
    }

    /// Collect the reporter's artifacts: (file name, contents), at most
    /// `plugins.artifacts_mib` in all (names are checked where they are written).
    pub fn finish(&mut self) -> Result<Vec<(String, Vec<u8>)>, PluginError> {
        let api = self.world.benchkit_plugin_sink().reporter();
        let resource = self.resource;
        let limit = usize::try_from(self.sandbox.limits().artifacts_mib.saturating_mul(1 << 20))
            .unwrap_or(usize::MAX)
            .saturating_add(TEXT_COPY_BYTES);
        let artifacts =
            self.sandbox.call_fallible("reporter.finish", limit, |s| api.call_finish(s, resource))?;
        Ok(artifacts.into_iter().map(|a| (a.name, a.contents)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::{box_problem, ObjectBox};

    fn object(label: u32, x_min: f32, x_max: f32) -> ObjectBox {
        ObjectBox { label, x_min, y_min: 0.1, x_max, y_max: 0.9, difficult: false }
    }

    #[test]
    fn returned_boxes_must_stay_inside_and_invent_nothing() {
        let given = vec![vec![object(2, 0.1, 0.5)], vec![]];
        assert_eq!(box_problem(&given, &[vec![object(2, 0.0, 0.4)], vec![]]), None, "moved: fine");
        assert_eq!(box_problem(&given, &[vec![], vec![]]), None, "cropped away: fine");
        assert!(box_problem(&given, &[]).unwrap().contains("returned boxes for 0 of 2 images"));
        assert!(box_problem(&given, &[vec![object(2, 0.1, 0.5)], vec![object(2, 0.1, 0.5)]])
            .unwrap()
            .contains("returned 1 boxes for image 1, which had 0"));
        assert!(box_problem(&given, &[vec![object(3, 0.1, 0.5)], vec![]]).unwrap().contains("label 3"));
        for bad in [object(2, -0.1, 0.5), object(2, 0.6, 0.5), object(2, 0.1, f32::NAN), object(2, 0.1, 1.5)]
        {
            assert!(
                box_problem(&given, &[vec![bad], vec![]]).unwrap().contains("edges must be fractions"),
                "{bad:?}"
            );
        }
        assert!(box_problem(&[], &[vec![]]).unwrap().contains("data without boxes"));
        assert_eq!(box_problem(&[], &[]), None);
    }
}

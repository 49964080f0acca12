//! What a model is trained to do, and how a batch becomes a loss and a score:
//! single-label classification (cross-entropy, top-1 accuracy) or captioning
//! (per-token cross-entropy with teacher forcing, token accuracy; greedy
//! decoding in evaluation, scored by exact match and Levenshtein distance).

use crate::data::Batch;
use crate::model::GraphNet;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::activation::log_softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// The training objective, from the model's graph and the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    Classify,
    /// A sequence model on caption data; greedy decoding runs up to `max_tokens` steps.
    Caption {
        max_tokens: usize,
    },
}

/// One batch's loss, with the count of correct predictions (images or tokens)
/// out of `total`, still on the device.
pub struct Scored<B: Backend> {
    pub loss: Tensor<B, 1>,
    pub correct: Tensor<B, 1, Int>,
    pub total: usize,
}

fn images<B: Backend>(batch: &mut Batch, device: &B::Device) -> Tensor<B, 4> {
    let s = batch.shape;
    let shape = [batch.count, s.channels as usize, s.height as usize, s.width as usize];
    Tensor::from_data(TensorData::new(std::mem::take(&mut batch.images), shape), device)
}

/// Caption tokens `[batch, len]` split into the decoder input (all but the
/// last) and the targets (all but `<start>`), and the number of real targets.
fn teacher_forcing<B: Backend>(
    batch: &Batch,
    device: &B::Device,
) -> (Tensor<B, 2, Int>, Tensor<B, 2, Int>, usize) {
    let len = batch.token_len;
    let tokens: Tensor<B, 2, Int> =
        Tensor::from_data(TensorData::new(batch.tokens.clone(), [batch.count, len]), device);
    let real = batch.tokens.chunks(len.max(1)).map(|c| c.iter().skip(1).filter(|&&t| t != 0).count()).sum();
    (tokens.clone().narrow(1, 0, len - 1), tokens.narrow(1, 1, len - 1), real)
}

impl Task {
    /// Forward `batch` through `model`: the mean loss and the correct count.
    pub fn score<B: Backend>(self, model: &GraphNet<B>, mut batch: Batch, device: &B::Device) -> Scored<B> {
        let x = images::<B>(&mut batch, device);
        match self {
            Task::Classify => {
                let y: Tensor<B, 1, Int> = Tensor::from_data(
                    TensorData::new(std::mem::take(&mut batch.labels), [batch.count]),
                    device,
                );
                let logits = model.forward(x);
                let loss = CrossEntropyLossConfig::new().init(device).forward(logits.clone(), y.clone());
                let correct = logits.argmax(1).squeeze_dim::<1>(1).equal(y).int().sum();
                Scored { loss, correct, total: batch.count }
            }
            Task::Caption { .. } => {
                let (input, target, real) = teacher_forcing::<B>(&batch, device);
                let logits = model.forward_sequence(x, input);
                let [b, t, v] = logits.dims();
                let logits = logits.reshape([b * t, v]);
                let target = target.reshape([b * t]);
                let real_mask = target.clone().not_equal_elem(0);
                let picked = log_softmax(logits.clone(), 1).gather(1, target.clone().reshape([b * t, 1]));
                let picked = picked.reshape([b * t]).mask_fill(real_mask.clone().bool_not(), 0.0);
                let loss = picked.sum().neg().div_scalar(real.max(1) as f64);
                let hits = logits.argmax(1).reshape([b * t]).equal(target).int() * real_mask.int();
                Scored { loss, correct: hits.sum(), total: real }
            }
        }
    }

    /// Greedy captions for `batch` as token ids (without `<start>`, up to and
    /// excluding `<end>`), with the reference captions in the same form.
    pub fn decode<B: Backend>(
        self,
        model: &GraphNet<B>,
        mut batch: Batch,
        device: &B::Device,
    ) -> Vec<(Vec<i64>, Vec<i64>)> {
        let Task::Caption { max_tokens } = self else { return Vec::new() };
        let x = images::<B>(&mut batch, device);
        let generated = model.greedy_decode(x, i64::from(crate::data::captions::START), max_tokens);
        let ids: Vec<i64> = generated.into_data().convert::<i64>().to_vec().unwrap_or_default();
        let caption = |row: &[i64]| -> Vec<i64> {
            row.iter()
                .copied()
                .skip_while(|&t| t == i64::from(crate::data::captions::START))
                .take_while(|&t| t != i64::from(crate::data::captions::END) && t != 0)
                .collect()
        };
        let len = batch.token_len.max(1);
        ids.chunks(max_tokens.max(1))
            .zip(batch.tokens.chunks(len))
            .map(|(got, want)| (caption(got), caption(want)))
            .collect()
    }
}

/// Edit distance between two token sequences (insertions, deletions and
/// substitutions each cost 1); on character tokens, the Kaggle BMS metric.
pub fn levenshtein(a: &[i64], b: &[i64]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(x != y);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::levenshtein;

    #[test]
    fn levenshtein_counts_edits() {
        assert_eq!(levenshtein(&[], &[]), 0);
        assert_eq!(levenshtein(&[1, 2, 3], &[]), 3);
        assert_eq!(levenshtein(&[], &[4, 5]), 2);
        // kitten -> sitting: two substitutions and one insertion
        let word = |s: &str| s.bytes().map(i64::from).collect::<Vec<_>>();
        assert_eq!(levenshtein(&word("kitten"), &word("sitting")), 3);
        assert_eq!(levenshtein(&word("InChI=1S/C2H6O"), &word("InChI=1S/C2H6O")), 0);
        assert_eq!(levenshtein(&word("abc"), &word("acb")), 2);
    }
}

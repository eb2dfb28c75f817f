//! Loading SmolLM2's GGUF into candle's `quantized_llama`, optionally
//! re-quantised to Q8_0 in memory.
//!
//! The shipped file is Q4_1, for which candle has no SIMD kernel on x86;
//! Q8_0 has one. Re-quantising every Q4_1 matrix at load (dequantise, then
//! `QTensor::quantize` to Q8_0) takes about a second and makes prefill and
//! decoding several times faster (see the crate's benches); Q4_1 → Q8_0 adds
//! no error beyond Q4_1's own, since Q8_0 is finer.

use std::io::{Cursor, Seek};
use std::path::Path;

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;
use candle_transformers::models::quantized_llama::ModelWeights;

use crate::config::LlmWeights;
use crate::error::{ModelsError, Result};

/// Builds the model from a parsed GGUF `ct` whose tensors are read from `reader`.
pub(crate) fn load_weights<R: std::io::Read + Seek>(
    ct: gguf_file::Content,
    reader: &mut R,
    path: &Path,
    weights: LlmWeights,
    model: &str,
) -> Result<ModelWeights> {
    let device = Device::Cpu;
    let c = |e| ModelsError::candle(model, e);
    match weights {
        LlmWeights::AsShipped => ModelWeights::from_gguf(ct, reader, &device).map_err(c),
        LlmWeights::Q8_0 => {
            let mut names: Vec<&String> = ct.tensor_infos.keys().collect();
            names.sort();
            let mut tensors: Vec<(&str, QTensor)> = Vec::with_capacity(names.len());
            for name in names {
                let t = ct.tensor(reader, name, &device).map_err(c)?;
                tensors.push((name.as_str(), requantize(t, model)?));
            }
            // The model reads only hyper-parameters; the tokenizer is built
            // from the original metadata, so its large arrays are not copied.
            let metadata: Vec<(&str, &gguf_file::Value)> = ct
                .metadata
                .iter()
                .filter(|(k, _)| !k.starts_with("tokenizer."))
                .map(|(k, v)| (k.as_str(), v))
                .collect();
            let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
            let mut buf = Cursor::new(Vec::new());
            gguf_file::write(&mut buf, &metadata, &refs).map_err(c)?;
            drop(tensors);
            buf.rewind().map_err(|e| ModelsError::io(path, e))?;
            let ct = gguf_file::Content::read(&mut buf).map_err(c)?;
            ModelWeights::from_gguf(ct, &mut buf, &device).map_err(c)
        }
    }
}

/// Q8_0 copy of a quantised matrix; float tensors and ones whose rows are not
/// a whole number of Q8_0 blocks are kept as they are.
fn requantize(t: QTensor, model: &str) -> Result<QTensor> {
    let keep = matches!(
        t.dtype(),
        GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16 | GgmlDType::Q8_0
    );
    let last = t.shape().dims().last().copied().unwrap_or(0);
    if keep || last % GgmlDType::Q8_0.block_size() != 0 {
        return Ok(t);
    }
    let c = |e| ModelsError::candle(model, e);
    let dense = t.dequantize(&Device::Cpu).map_err(c)?;
    QTensor::quantize(&dense, GgmlDType::Q8_0).map_err(c)
}

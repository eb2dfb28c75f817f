//! Text ↔ token ids for the M9 model: SmolLM2's GGUF tokenizer from
//! `submem-models`, or a byte-level codec for the tiny random models the
//! logic tests train (256 byte ids plus the two ChatML markers), so that tests
//! exercise the same chat template without loading the real model.

use std::fmt::Debug;

use submem_models::GgufTokenizer;

use crate::error::{LoraError, Result};

/// ChatML start-of-message marker.
pub const IM_START: &str = "<|im_start|>";
/// ChatML end-of-message marker (the end-of-turn token).
pub const IM_END: &str = "<|im_end|>";

/// Encodes and decodes text for one model.
pub trait TextCodec: Debug + Send + Sync + 'static {
    /// Token ids of `text`; ChatML markers become their single ids.
    fn encode(&self, text: &str) -> Result<Vec<u32>>;
    /// Text of `ids`, without special tokens.
    fn decode(&self, ids: &[u32]) -> Result<String>;
    /// The end-of-turn id generation stops at.
    fn eos_id(&self) -> u32;
    /// Vocabulary size (rows of the embedding).
    fn vocab_size(&self) -> usize;
}

impl TextCodec for GgufTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(GgufTokenizer::encode(self, text)?)
    }
    fn decode(&self, ids: &[u32]) -> Result<String> {
        Ok(GgufTokenizer::decode(self, ids, true)?)
    }
    fn eos_id(&self) -> u32 {
        self.eos_id
    }
    fn vocab_size(&self) -> usize {
        GgufTokenizer::vocab_size(self)
    }
}

/// Bytes as ids 0..=255, `<|im_start|>` = 256, `<|im_end|>` = 257.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByteCodec;

impl ByteCodec {
    /// Id of `<|im_start|>`.
    pub const IM_START_ID: u32 = 256;
    /// Id of `<|im_end|>`.
    pub const IM_END_ID: u32 = 257;
    /// Vocabulary size.
    pub const VOCAB: usize = 258;
}

impl TextCodec for ByteCodec {
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len());
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix(IM_START) {
                out.push(Self::IM_START_ID);
                rest = r;
            } else if let Some(r) = rest.strip_prefix(IM_END) {
                out.push(Self::IM_END_ID);
                rest = r;
            } else {
                // Up to the next `<` after the first char (`<` is ASCII, so
                // the cut is on a char boundary).
                let first = rest.chars().next().map_or(1, char::len_utf8);
                let next = rest[first..].find('<').map_or(rest.len(), |i| i + first);
                out.extend(rest[..next].bytes().map(u32::from));
                rest = &rest[next..];
            }
        }
        Ok(out)
    }

    fn decode(&self, ids: &[u32]) -> Result<String> {
        let bytes: Vec<u8> = ids.iter().filter_map(|&i| u8::try_from(i).ok()).collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn eos_id(&self) -> u32 {
        Self::IM_END_ID
    }

    fn vocab_size(&self) -> usize {
        Self::VOCAB
    }
}

/// Checks that every id is inside the vocabulary of `vocab` rows.
pub(crate) fn check_ids(ids: &[u32], vocab: usize) -> Result<()> {
    match ids.iter().find(|&&i| i as usize >= vocab) {
        Some(i) => Err(LoraError::Request(format!(
            "token id {i} is outside the {vocab}-token vocabulary"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_codec_round_trips_and_keeps_markers_single() {
        let text = "<|im_start|>user\nNaïve café <b> 42<|im_end|>\n";
        let ids = ByteCodec.encode(text).unwrap();
        assert_eq!(ids[0], ByteCodec::IM_START_ID);
        assert!(ids.contains(&ByteCodec::IM_END_ID));
        assert_eq!(ByteCodec.decode(&ids).unwrap(), "user\nNaïve café <b> 42\n");
        assert!(check_ids(&ids, ByteCodec::VOCAB).is_ok());
        assert!(check_ids(&[300], ByteCodec::VOCAB).is_err());
    }
}

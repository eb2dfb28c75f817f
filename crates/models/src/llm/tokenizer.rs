//! The SmolLM2 tokenizer, rebuilt from GGUF metadata.
//!
//! candle's `Tokenizer::from_gguf` guesses GPT-2 pre-tokenisation and adds a
//! prefix space (`"ĠHello"`), which is wrong for SmolLM2 (`tokenizer.ggml.pre
//! = "smollm"`). This module builds the tokenizer the model was trained with:
//! byte-level BPE from `tokenizer.ggml.tokens` and `tokenizer.ggml.merges`,
//! pre-tokenised by individual digits then byte-level (no prefix space, GPT-2
//! regex), decoded byte-level, with every token whose `tokenizer.ggml.token_type`
//! is 2..=5 (unknown, control, user-defined, unused) registered as a special
//! token, so `<|im_start|>` and `<|im_end|>` encode as single ids.

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, Tokenizer};

use crate::error::{ModelsError, Result};

/// A tokenizer rebuilt from GGUF metadata, with its special ids.
#[derive(Debug, Clone)]
pub struct GgufTokenizer {
    tokenizer: Tokenizer,
    /// Beginning-of-sequence id (`<|im_start|>` for SmolLM2).
    pub bos_id: Option<u32>,
    /// End-of-sequence id (`<|im_end|>` for SmolLM2).
    pub eos_id: u32,
    model: String,
}

fn md<'a>(ct: &'a Content, path: &Path, key: &str) -> Result<&'a Value> {
    ct.metadata
        .get(key)
        .ok_or_else(|| ModelsError::BadModelFile {
            path: path.to_path_buf(),
            reason: format!("missing metadata {key}"),
        })
}

fn bad(path: &Path, key: &str, e: impl std::fmt::Display) -> ModelsError {
    ModelsError::BadModelFile {
        path: path.to_path_buf(),
        reason: format!("metadata {key}: {e}"),
    }
}

impl GgufTokenizer {
    /// Builds the tokenizer from the metadata of `ct` (read from `path`).
    pub fn from_gguf(ct: &Content, path: &Path, model: &str) -> Result<Self> {
        let key = "tokenizer.ggml.tokens";
        let tokens: Vec<String> = md(ct, path, key)?
            .to_vec()
            .map_err(|e| bad(path, key, e))?
            .iter()
            .map(|v| v.to_string().cloned())
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| bad(path, key, e))?;
        let key = "tokenizer.ggml.merges";
        let merges: Vec<(String, String)> = md(ct, path, key)?
            .to_vec()
            .map_err(|e| bad(path, key, e))?
            .iter()
            .map(|v| {
                let s = v.to_string().map_err(|e| bad(path, key, e))?;
                s.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| bad(path, key, format!("merge {s:?} has no space")))
            })
            .collect::<Result<_>>()?;
        let key = "tokenizer.ggml.token_type";
        let types: Vec<i32> = match ct.metadata.get(key) {
            Some(v) => v
                .to_vec()
                .map_err(|e| bad(path, key, e))?
                .iter()
                .map(|v| v.to_i32())
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| bad(path, key, e))?,
            None => vec![1; tokens.len()],
        };
        if types.len() != tokens.len() {
            return Err(bad(path, key, "length differs from tokenizer.ggml.tokens"));
        }
        let key = "tokenizer.ggml.eos_token_id";
        let eos_id = md(ct, path, key)?.to_u32().map_err(|e| bad(path, key, e))?;
        let bos_id = ct
            .metadata
            .get("tokenizer.ggml.bos_token_id")
            .and_then(|v| v.to_u32().ok());
        if eos_id as usize >= tokens.len() {
            return Err(bad(
                path,
                "tokenizer.ggml.eos_token_id",
                "out of the vocabulary",
            ));
        }

        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| ModelsError::tokenizer(model, e))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let pre = Sequence::new(vec![
            PreTokenizerWrapper::Digits(Digits::new(true)),
            PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
        ]);
        tokenizer.with_pre_tokenizer(Some(pre));
        tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
        let specials: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, t)| (2..=5).contains(*t))
            .map(|(tok, _)| AddedToken::from(tok.clone(), true))
            .collect();
        tokenizer
            .add_special_tokens(specials)
            .map_err(|e| ModelsError::tokenizer(model, e))?;
        Ok(GgufTokenizer {
            tokenizer,
            bos_id,
            eos_id,
            model: model.to_string(),
        })
    }

    /// Token ids of `text`; special-token strings become their single ids.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.tokenizer
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| ModelsError::tokenizer(&self.model, e))
    }

    /// Text of `ids`; special tokens are kept unless `skip_special`.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        self.tokenizer
            .decode(ids, skip_special)
            .map_err(|e| ModelsError::tokenizer(&self.model, e))
    }

    /// The id of a token string, if it is in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    /// Vocabulary size including special tokens.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    /// Special token strings and ids (for diagnostics).
    pub fn special_tokens(&self) -> HashMap<String, u32> {
        self.tokenizer
            .get_added_vocabulary()
            .get_vocab()
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

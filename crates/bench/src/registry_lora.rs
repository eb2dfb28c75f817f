//! Building M9 ([`submem_lora::LoraMemory`]) by name: its settings, the
//! shared f32 base model, and the training prompt taken from the harness's
//! own reader prompt, so the adapter trains on exactly the prompt shape it is
//! asked with (memory block = [`submem_lora::ADAPTER_NOTE`]).
//!
//! M9 needs the local SmolLM2 weights whatever the memory LLM is (it trains
//! them); when they cannot be found or loaded the build fails with
//! [`BenchError::NeedsLocalModel`] and the runner skips M9 with that reason.

use std::path::PathBuf;
use std::sync::Arc;

use submem_core::{ChatMessage, Regime, Services, Substrate};
use submem_lora::{LoraConfig, LoraMemory, LoraModel, PromptFormat, ADAPTER_NOTE};

use crate::dataset::{Question, QuestionKind};
use crate::reader::reader_messages;
use crate::registry::SubstrateSpec;
use crate::{BenchError, Result};

/// Settings `m9` accepts.
pub const LORA_SETTINGS: &[&str] = &[
    "rank",
    "alpha",
    "epochs",
    "batch",
    "lr",
    "max_seq_tokens",
    "chunk_tokens",
    "pairs",
    "serve_stale",
    "context",
    "gguf",
];

fn harness_reader_prompt(question: &str) -> Vec<ChatMessage> {
    let q = Question {
        id: String::new(),
        text: question.to_string(),
        answer: None,
        evidence: Vec::new(),
        category: String::new(),
        kind: QuestionKind::Standard,
        regime: Regime::Conversational,
        newest: None,
        date: None,
    };
    reader_messages(&q, ADAPTER_NOTE)
}

/// The M9 settings of `spec`.
pub fn lora_config(spec: &SubstrateSpec) -> Result<LoraConfig> {
    spec.only(LORA_SETTINGS)?;
    let mut c = LoraConfig::default().with_prompt(PromptFormat {
        name: "harness-reader",
        messages: harness_reader_prompt,
    });
    if let Some(v) = spec.parse_setting("rank")? {
        c = c.with_rank(v);
    }
    if let Some(v) = spec.parse_setting("alpha")? {
        c = c.with_alpha(v);
    }
    if let Some(v) = spec.parse_setting("epochs")? {
        c = c.with_epochs(v);
    }
    if let Some(v) = spec.parse_setting("batch")? {
        c = c.with_batch_size(v);
    }
    if let Some(v) = spec.parse_setting("lr")? {
        c = c.with_learning_rate(v);
    }
    if let Some(v) = spec.parse_setting("max_seq_tokens")? {
        c = c.with_max_seq_tokens(v);
    }
    if let Some(v) = spec.parse_setting("chunk_tokens")? {
        c = c.with_chunk_tokens(v);
    }
    if let Some(v) = spec.parse_setting("pairs")? {
        c = c.with_pairs_per_chunk(v);
    }
    if let Some(v) = spec.parse_setting("serve_stale")? {
        c = c.with_serve_stale_adapter(v);
    }
    if let Some(v) = spec.parse_setting("context")? {
        c.max_context = v;
    }
    c.validate().map_err(|e| BenchError::BadSetting {
        substrate: spec.name.clone(),
        setting: spec.to_string(),
        reason: e.to_string(),
    })?;
    Ok(c)
}

/// Builds M9, loading (once per process) the f32 base model.
pub fn build_lora(spec: &SubstrateSpec, services: Services) -> Result<Arc<dyn Substrate>> {
    let config = lora_config(spec)?;
    let needs = |reason: String| BenchError::NeedsLocalModel {
        substrate: spec.to_string(),
        reason,
    };
    let gguf = match spec.get("gguf") {
        Some(p) => PathBuf::from(p),
        None => submem_lora::resolve_local_gguf().map_err(|e| needs(e.to_string()))?,
    };
    let model = LoraModel::shared(&gguf, config.max_context).map_err(|e| needs(e.to_string()))?;
    let mem = LoraMemory::new(services, config, model).map_err(|e| BenchError::Substrate {
        substrate: spec.to_string(),
        conversation: String::new(),
        source: e,
    })?;
    Ok(Arc::new(mem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_missing_weights_are_a_clear_skip() {
        let s =
            SubstrateSpec::parse("m9:rank=4,alpha=8,epochs=2,lr=0.002,serve_stale=true").unwrap();
        let c = lora_config(&s).unwrap();
        assert_eq!(
            (c.rank, c.train.epochs, c.serve_stale_adapter),
            (4, 2, true)
        );
        assert!(lora_config(&SubstrateSpec::parse("m9:depth=3").unwrap()).is_err());
        // The training prompt is the harness reader's prompt with M9's note.
        let msgs = (c.prompt.messages)("Where?");
        assert_eq!(
            msgs,
            reader_messages(&harness_question("Where?"), ADAPTER_NOTE)
        );
        let spec = SubstrateSpec::parse("lora:gguf=/nonexistent/model.gguf").unwrap();
        let err = build_lora(&spec, submem_core::test_utils::test_services(None)).unwrap_err();
        assert!(matches!(err, BenchError::NeedsLocalModel { .. }), "{err}");
        assert!(err.to_string().contains("local SmolLM2 weights"), "{err}");
    }

    fn harness_question(text: &str) -> Question {
        Question {
            id: "x".into(),
            text: text.into(),
            answer: None,
            evidence: Vec::new(),
            category: String::new(),
            kind: QuestionKind::Standard,
            regime: Regime::Conversational,
            newest: None,
            date: None,
        }
    }
}

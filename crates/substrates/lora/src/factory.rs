//! M9's plugin: `m9` (alias `lora`) as a [`SubstrateFactory`] a
//! registry lists and builds by name.
//!
//! The adapter trains on the prompt it will be asked with, and that prompt
//! belongs to whoever reads (a harness), so [`lora_factory`] takes it from
//! the build context's reader prompt ([`PromptFormat::from_reader`]).
//!
//! M9 trains the local SmolLM2 weights whatever the memory LLM is. Building
//! it loads them once per process ([`LoraModel::shared`]) from `gguf=<path>`
//! or where `submem-models` resolves them; when they cannot be found or
//! loaded the build fails with [`Error::Unavailable`], saying what to do, and
//! a harness skips M9 with that reason.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory};
use submem_core::{Error, Family, Result};
use submem_models::ModelsError;

use crate::{resolve_local_gguf, LoraConfig, LoraError, LoraMemory, LoraModel, PromptFormat};

/// Why M9 needs the weights, said in every error about them.
const NEEDS_WEIGHTS: &str = "M9 trains the local SmolLM2 weights even with a remote memory LLM";
/// How to provide them.
const FIX: &str = "run `submem models fetch`, or set gguf=<path to a llama GGUF>";

submem_core::settings_checked_by_validate!(LoraConfig);

/// What M9 cannot do without.
const WEIGHTS: &str = "the local SmolLM2 weights";

/// The weights are not where they were looked for.
fn missing(path: PathBuf, tried: &str) -> Error {
    let tried = if tried.is_empty() {
        String::new()
    } else {
        format!(" ({tried})")
    };
    Error::Unavailable {
        what: WEIGHTS.into(),
        reason: format!(
            "not found at {}; {NEEDS_WEIGHTS}; {FIX}{tried}",
            path.display()
        ),
    }
}

/// `submem-models` could not say where the weights are.
fn unresolved(e: LoraError) -> Error {
    match e {
        LoraError::Models(ModelsError::ModelMissing { path, fix }) => missing(path, &fix),
        other => Error::Unavailable {
            what: WEIGHTS.into(),
            reason: format!("{NEEDS_WEIGHTS}; they could not be located: {other}; {FIX}"),
        },
    }
}

/// The base model of `gguf` (or the resolved local SmolLM2), shared by every
/// M9 instance of the process.
fn load_base(gguf: Option<&Path>, max_context: usize) -> Result<LoraModel> {
    let path = match gguf {
        Some(p) => p.to_path_buf(),
        None => resolve_local_gguf().map_err(unresolved)?,
    };
    if !path.is_file() {
        return Err(missing(path, ""));
    }
    LoraModel::shared(&path, max_context).map_err(|e| Error::Unavailable {
        what: WEIGHTS.into(),
        reason: format!(
            "{} could not be loaded: {e}; {NEEDS_WEIGHTS}; {FIX}",
            path.display()
        ),
    })
}

/// `m9`: a LoRA adapter on SmolLM2's attention, trained on question-answer
/// pairs synthesised from the history, asked with the build context's reader
/// prompt ([`PromptFormat::from_reader`]).
pub fn lora_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m9", crate::M9, Family::PARAMETRIC)
        .aliases(&["lora"])
        .paper("Harness the Memory, M9")
        .summary("LoRA adapter on the local SmolLM2 (needs its weights), trained on synthesised QA pairs; cloze pairs without an LLM")
        .llm(LlmUse::Optional)
        .build(move |ctx, config: LoraConfig| {
            let config = config.with_prompt(PromptFormat::from_reader(&ctx.reader));
            let model = load_base(config.gguf.as_deref(), config.max_context)?;
            Ok(Arc::new(LoraMemory::new(ctx.services.clone(), config, model)?))
        })
}

/// Every factory of M9.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![lora_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TrainConfig;
    use submem_core::plugin::BuildContext;
    use submem_core::ChatMessage;

    fn typed(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> LoraConfig {
        f.typed::<LoraConfig>(&f.settings_from_strs(pairs).unwrap())
            .unwrap()
    }

    fn harness_messages(question: &str) -> Vec<ChatMessage> {
        vec![ChatMessage::user(format!("Q: {question}"))]
    }

    fn harness() -> PromptFormat {
        PromptFormat::new("harness-reader", harness_messages)
    }

    #[test]
    fn settings_parse_and_the_prompt_is_the_one_given() {
        let f = lora_factory();
        f.validate().unwrap();
        assert!(f.answers_to("lora") && f.answers_to("M9") && !f.answers_to("adapter"));
        let c = typed(
            &f,
            &[
                ("rank", "4"),
                ("alpha", "8"),
                ("epochs", "2"),
                ("lr", "0.002"),
                ("serve_stale", "true"),
            ],
        );
        assert_eq!((c.rank, c.epochs, c.serve_stale_adapter), (4, 2, true));
        assert!((c.alpha - 8.0).abs() < 1e-12 && (c.learning_rate - 0.002).abs() < 1e-12);
        // The prompt is no setting: a parsed config has the default one, and
        // the adapter trains on the prompt it was given.
        assert_eq!(c.prompt.name, PromptFormat::default().name);
        let c = c.with_prompt(harness());
        assert_eq!(c.prompt.name, "harness-reader");
        assert_eq!((c.prompt.messages)("Where?"), harness_messages("Where?"));
        let c = typed(
            &f,
            &[
                ("batch", "2"),
                ("max_seq_tokens", "128"),
                ("chunk_tokens", "300"),
                ("pairs", "3"),
                ("context", "1024"),
                ("gguf", "/models/smol.gguf"),
            ],
        );
        assert_eq!(
            (
                c.batch_size,
                c.max_seq_tokens,
                c.chunk_tokens,
                c.pairs_per_chunk,
                c.max_context
            ),
            (2, 128, 300, 3, 1024)
        );
        assert_eq!(c.gguf, Some(PathBuf::from("/models/smol.gguf")));
        let c = typed(
            &f,
            &[
                ("weight_decay", "0.01"),
                ("seed", "3"),
                ("qa_max_tokens", "128"),
            ],
        );
        assert_eq!((c.train().seed, c.qa_max_tokens), (3, 128));
        assert!((c.train().weight_decay - 0.01).abs() < 1e-12);
        let d = typed(&f, &[]);
        let base = LoraConfig::default();
        assert_eq!(
            (
                d.rank,
                d.alpha,
                d.train(),
                d.chunk_tokens,
                d.pairs_per_chunk,
                d.gguf.clone()
            ),
            (
                base.rank,
                base.alpha,
                base.train(),
                base.chunk_tokens,
                base.pairs_per_chunk,
                None
            )
        );
        assert_eq!(base.train(), TrainConfig::default());
        assert_eq!(
            (d.qa_max_tokens, d.max_context, d.serve_stale_adapter),
            (
                base.qa_max_tokens,
                base.max_context,
                base.serve_stale_adapter
            )
        );
        assert!(f
            .settings_from_strs(&[("rank", "4"), ("epochs", "1"), ("serve_stale", "true")])
            .is_ok());
        for key in ["depth", "batch_size", "prompt", "train"] {
            let e = f.settings_from_strs(&[(key, "3")]).unwrap_err().to_string();
            assert!(e.contains(&format!("unknown setting `{key}`")), "{e}");
        }
        assert!(f.settings_from_strs(&[("rank", "0")]).is_err());
        assert!(f.settings_from_strs(&[("context", "32")]).is_err());
        assert!(f.settings_from_strs(&[("lr", "0")]).is_err());
        assert!(f.settings_from_strs(&[("weight_decay", "-1")]).is_err());
        assert!(f.settings_from_strs(&[("qa_max_tokens", "0")]).is_err());
    }

    #[test]
    fn missing_weights_are_a_clear_unavailable_error() {
        let f = lora_factory();
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        let given = f
            .settings_from_strs(&[("gguf", "/nonexistent/model.gguf")])
            .unwrap();
        let err = f.build(&ctx, &given).unwrap_err();
        assert!(matches!(err, Error::Unavailable { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("local SmolLM2 weights"), "{msg}");
        assert!(
            msg.contains("submem models fetch") && msg.contains("gguf="),
            "{msg}"
        );
        assert!(msg.contains("/nonexistent/model.gguf"), "{msg}");
    }
}

//! The activation family's plugins: `m10` (alias `full-context`)
//! and `m11` (alias `epicache`) as [`SubstrateFactory`] values
//! a registry lists and builds by name.
//!
//! M11 prefills its KV caches under the reader's prompt head, which belongs
//! to whoever reads (a harness), not to a setting: it comes from the build
//! context ([`BuildContext::reader`](submem_core::plugin::BuildContext::reader)).

use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory};
use submem_core::Family;

use crate::{EpiCache, EpiCacheConfig, FullContext, FullContextConfig, ReaderHead};

const PAPER: &str = "Harness the Memory";

/// `m10`: the whole history, newest first until the budget is spent. It
/// takes no settings.
pub fn full_context_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m10", crate::M10, Family::ACTIVATION)
        .aliases(&["full-context"])
        .paper(format!("{PAPER}, M10"))
        .summary("full context: the newest history that fits the budget")
        .llm(LlmUse::Never)
        .build_without_settings(|ctx| {
            Ok(Arc::new(FullContext::new(
                ctx.services.clone(),
                FullContextConfig::default(),
            )?))
        })
}

submem_core::settings_checked_by_validate!(EpiCacheConfig);

/// `m11`: EpiCache's k-means episodes (25 % of each kept); with a local
/// memory LLM their KV caches are prefilled under the head of the build
/// context's reader prompt and served as the recall's reader.
pub fn epicache_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m11", crate::M11, Family::ACTIVATION)
        .aliases(&["epicache"])
        .paper(format!("{PAPER}, M11"))
        .summary("episode re-prefill (EpiCache): k-means episodes, the query's nearest shown; KV caches prefilled when the memory LLM is local")
        .llm(LlmUse::Optional)
        .build(|ctx, config: EpiCacheConfig| {
            Ok(Arc::new(EpiCache::new(
                ctx.services.clone(),
                config.with_reader_head(ReaderHead::from(&ctx.reader)),
            )?))
        })
}

/// Every factory of the activation family.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![full_context_factory(), epicache_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::plugin::{BuildContext, Settings};

    fn head() -> ReaderHead {
        ReaderHead {
            system: Some("You answer from memory.".into()),
            memory_intro: "Memory:\n".into(),
        }
    }

    #[test]
    fn m10_takes_no_settings_and_answers_to_full_context() {
        let f = full_context_factory();
        f.validate().unwrap();
        assert!(f.answers_to("full-context") && f.answers_to("M10") && !f.answers_to("full"));
        assert!(f.settings_from_strs(&[]).is_ok());
        let e = f.settings_from_strs(&[("x", "1")]).unwrap_err().to_string();
        assert!(e.contains("takes no settings"), "{e}");
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        let s = f.build(&ctx, &Settings::new()).unwrap();
        assert_eq!(s.info().name, "full-context");
    }

    #[test]
    fn m11_parses_its_settings_and_keeps_the_reader_head() {
        let f = epicache_factory();
        f.validate().unwrap();
        assert!(f.answers_to("epicache") && !f.answers_to("episodes"));
        let parsed = |pairs: &[(&str, &str)]| -> EpiCacheConfig {
            f.typed(&f.settings_from_strs(pairs).unwrap()).unwrap()
        };
        assert_eq!(parsed(&[]), EpiCacheConfig::default());
        let c = parsed(&[("k", "6"), ("keep", "0.5")]);
        assert_eq!((c.episodes, c.keep_ratio), (6, 0.5));
        assert_eq!(c.reader_head, ReaderHead::default());
        let c = parsed(&[("segment", "2"), ("kv_cache", "false"), ("runs", "3")]);
        assert_eq!((c.segment_turns, c.kv_cache, c.kmeans_runs), (2, false, 3));
        let c = parsed(&[("kmeans_max_iterations", "7"), ("embed_batch", "8")]);
        assert_eq!((c.kmeans_max_iterations, c.embed_batch), (7, 8));
        assert!(f.settings_from_strs(&[("keep", "2")]).is_err());
        assert!(f.settings_from_strs(&[("k", "0")]).is_err());
        assert!(f.settings_from_strs(&[("embed_batch", "0")]).is_err());
        for key in ["episodes", "reader_head"] {
            let e = f.settings_from_strs(&[(key, "3")]).unwrap_err().to_string();
            assert!(e.contains(&format!("unknown setting `{key}`")), "{e}");
        }
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        for f in factories() {
            let s = f.build(&ctx, &Settings::new()).unwrap();
            assert_eq!(&s.info().method, f.method());
        }
        let reader = submem_core::plugin::ReaderPrompt {
            system: head().system,
            memory_intro: head().memory_intro,
            ..Default::default()
        };
        let ctx =
            BuildContext::new(submem_core::test_utils::test_services(None)).with_reader(reader);
        let s = f
            .build(&ctx, &f.settings_from_strs(&[("k", "6")]).unwrap())
            .unwrap();
        let shown = format!("{s:?}");
        assert!(
            shown.contains(&format!("reader_head: {:?}", head())),
            "{shown}"
        );
    }

    #[test]
    fn m11_takes_its_head_from_the_callers_reader_prompt() {
        let reader = submem_core::plugin::ReaderPrompt::default();
        let head = ReaderHead::from(&reader);
        assert_eq!(head.messages("episode"), reader.head("episode"));
    }
}

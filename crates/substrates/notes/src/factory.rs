//! The notes family's plugin: `m4` (alias `a-mem`) as a
//! [`SubstrateFactory`] a registry lists and builds by name.

use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory};
use submem_core::Family;

use crate::{EvolvingNotes, NotesConfig};

submem_core::settings_checked_by_validate!(NotesConfig);

/// `m4`: A-Mem's evolving notes, linked by embedding similarity; rule notes
/// without a memory LLM.
pub fn notes_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m4", crate::M4, Family::STRUCTURAL)
        .aliases(&["a-mem"])
        .paper("Harness the Memory, M4")
        .summary("evolving notes (A-Mem): linked notes whose neighbours evolve; rule notes without an LLM")
        .llm(LlmUse::Optional)
        .build(|ctx, config: NotesConfig| {
            Ok(Arc::new(EvolvingNotes::new(ctx.services.clone(), config)?))
        })
}

/// Every factory of the notes family.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![notes_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RenderMode;
    use submem_core::plugin::{BuildContext, Settings};

    fn parsed(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> NotesConfig {
        f.typed::<NotesConfig>(&f.settings_from_strs(pairs).unwrap())
            .unwrap()
    }

    #[test]
    fn m4_parses_its_settings_and_builds_without_an_llm() {
        let f = notes_factory();
        f.validate().unwrap();
        assert_eq!(parsed(&f, &[]), NotesConfig::default());
        assert_eq!(parsed(&f, &[("embed_batch", "8")]).embed_batch, 8);
        let c = parsed(
            &f,
            &[
                ("k", "5"),
                ("links", "4"),
                ("evolve", "0.7"),
                ("render", "fit"),
            ],
        );
        assert_eq!((c.top_k, c.links, c.render), (Some(5), 4, RenderMode::Fit));
        assert!((c.evolve_threshold - 0.7).abs() < 1e-6);
        let c = parsed(
            &f,
            &[
                ("expand", "2"),
                ("evolve_neighbours", "1"),
                ("fit_pool", "20"),
                ("e", "100"),
                ("render", "top-k"),
            ],
        );
        assert_eq!(
            (
                c.expand_per_seed,
                c.evolve_neighbours,
                c.fit_pool,
                c.excerpt_tokens,
                c.render
            ),
            (2, 1, 20, 100, RenderMode::TopK)
        );
        assert_eq!(parsed(&f, &[("render", "TopK")]).render, RenderMode::TopK);
        for bad in [("render", "tree"), ("evolve", "2"), ("k", "0"), ("x", "1")] {
            assert!(f.settings_from_strs(&[bad]).is_err(), "{bad:?}");
        }
        let ctx = BuildContext::new(submem_core::test_utils::test_services(None));
        for name in ["m4", "M4", "a-mem", "A-Mem"] {
            assert!(f.answers_to(name), "{name}");
        }
        let sub = f.build(&ctx, &Settings::new()).unwrap();
        assert!(!sub.info().needs_llm);
    }
}

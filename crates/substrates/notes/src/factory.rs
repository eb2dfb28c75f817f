//! The notes family's plugin: `m4` (alias `a-mem`) as a
//! [`SubstrateFactory`] a registry lists and builds by name.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
use submem_core::{Error, Family, MethodId, Result};

use crate::{EvolvingNotes, NotesConfig, RenderMode};

/// How a read renders the notes it retrieved ([`RenderMode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RenderSetting {
    /// A-Mem's read: the top-k notes and their links, each shown whole.
    #[serde(alias = "top-k")]
    Topk,
    /// FlexA-Mem's fit-or-degrade renderer over a wider pool.
    Fit,
}

impl From<RenderSetting> for RenderMode {
    fn from(r: RenderSetting) -> Self {
        match r {
            RenderSetting::Topk => RenderMode::TopK,
            RenderSetting::Fit => RenderMode::Fit,
        }
    }
}

impl From<RenderMode> for RenderSetting {
    fn from(r: RenderMode) -> Self {
        match r {
            RenderMode::TopK => RenderSetting::Topk,
            RenderMode::Fit => RenderSetting::Fit,
        }
    }
}

/// Settings of `m4` (see [`NotesConfig`] for each default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotesSettings {
    /// Seeds per read (unset: the query's top-k hint).
    pub k: Option<usize>,
    /// Links each new note makes to its most similar earlier notes.
    pub links: usize,
    /// Linked notes a read adds per seed.
    pub expand: usize,
    /// Cosine at or above which a new note triggers evolution of a neighbour, in [-1, 1].
    pub evolve: f32,
    /// Most neighbours one evolution call may rewrite.
    pub evolve_neighbours: usize,
    /// How reads render the notes they retrieved.
    pub render: RenderSetting,
    /// Candidates the fit renderer considers.
    pub fit_pool: usize,
    /// E: most tokens of pieces in one excerpt (fit renderer).
    pub e: usize,
}

impl Default for NotesSettings {
    fn default() -> Self {
        let c = NotesConfig::default();
        NotesSettings {
            k: c.top_k,
            links: c.links,
            expand: c.expand_per_seed,
            evolve: c.evolve_threshold,
            evolve_neighbours: c.evolve_neighbours,
            render: c.render.into(),
            fit_pool: c.fit_pool,
            e: c.excerpt_tokens,
        }
    }
}

impl NotesSettings {
    /// The substrate's config (not yet validated).
    pub fn config(&self) -> NotesConfig {
        let mut c = NotesConfig::default()
            .with_links(self.links)
            .with_expand_per_seed(self.expand)
            .with_evolve_threshold(self.evolve)
            .with_evolve_neighbours(self.evolve_neighbours)
            .with_render(self.render.into())
            .with_fit_pool(self.fit_pool)
            .with_excerpt_tokens(self.e);
        if let Some(k) = self.k {
            c = c.with_top_k(k);
        }
        c
    }
}

impl SubstrateSettings for NotesSettings {
    fn validate(&self) -> Result<()> {
        self.config()
            .validate()
            .map_err(|e| Error::InvalidInput(e.to_string()))
    }
}

/// `m4`: A-Mem's evolving notes, linked by embedding similarity; rule notes
/// without a memory LLM.
pub fn notes_factory() -> SubstrateFactory {
    SubstrateFactory::builder("m4", MethodId::M4, Family::STRUCTURAL)
        .aliases(&["a-mem"])
        .paper("Harness the Memory, M4")
        .summary("evolving notes (A-Mem): linked notes whose neighbours evolve; rule notes without an LLM")
        .llm(LlmUse::Optional)
        .settings(NotesSettings::default())
        .build(|ctx, s: NotesSettings| {
            Ok(Arc::new(EvolvingNotes::new(ctx.services.clone(), s.config())?))
        })
}

/// Every factory of the notes family.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![notes_factory()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::plugin::{BuildContext, Settings};

    fn parsed(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> NotesConfig {
        f.typed::<NotesSettings>(&f.settings_from_strs(pairs).unwrap())
            .unwrap()
            .config()
    }

    #[test]
    fn m4_parses_its_settings_and_builds_without_an_llm() {
        let f = notes_factory();
        f.validate().unwrap();
        assert_eq!(NotesSettings::default().config(), NotesConfig::default());
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

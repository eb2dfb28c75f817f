//! Registry entry of M4 evolving notes (`submem-notes`): settings parsed from
//! a spec such as `m4:k=10,links=3,evolve=0.6,render=fit`. Kept apart from
//! `registry.rs` so that substrate families merge without conflicts.

use submem_notes::{NotesConfig, RenderMode};

use crate::registry::SubstrateSpec;
use crate::{BenchError, Result};

/// The settings M4 takes.
pub const NOTES_SETTINGS: &[&str] = &[
    "k",
    "links",
    "expand",
    "evolve",
    "evolve_neighbours",
    "render",
    "fit_pool",
    "e",
];

/// Parses an M4 spec into its config.
pub fn notes_config(spec: &SubstrateSpec) -> Result<NotesConfig> {
    spec.only(NOTES_SETTINGS)?;
    let mut c = NotesConfig::default();
    if let Some(v) = spec.parse_setting("k")? {
        c = c.with_top_k(v);
    }
    if let Some(v) = spec.parse_setting("links")? {
        c = c.with_links(v);
    }
    if let Some(v) = spec.parse_setting("expand")? {
        c = c.with_expand_per_seed(v);
    }
    if let Some(v) = spec.parse_setting("evolve")? {
        c = c.with_evolve_threshold(v);
    }
    if let Some(v) = spec.parse_setting("evolve_neighbours")? {
        c = c.with_evolve_neighbours(v);
    }
    if let Some(v) = spec.parse_setting("fit_pool")? {
        c = c.with_fit_pool(v);
    }
    if let Some(v) = spec.parse_setting("e")? {
        c = c.with_excerpt_tokens(v);
    }
    if let Some(v) = spec.get("render") {
        c = c.with_render(match v.to_ascii_lowercase().as_str() {
            "topk" | "top-k" => RenderMode::TopK,
            "fit" => RenderMode::Fit,
            _ => {
                return Err(BenchError::BadSetting {
                    substrate: spec.name.clone(),
                    setting: format!("render={v}"),
                    reason: "expected one of topk, fit".into(),
                })
            }
        });
    }
    c.validate().map_err(|e| BenchError::BadSetting {
        substrate: spec.name.clone(),
        setting: spec.to_string(),
        reason: e.to_string(),
    })?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Registry, SubstrateFactory};

    #[test]
    fn m4_parses_its_settings_and_builds_without_an_llm() {
        let s = SubstrateSpec::parse("amem:k=5,links=4,evolve=0.7,render=fit").unwrap();
        let c = notes_config(&s).unwrap();
        assert_eq!((c.top_k, c.links, c.render), (Some(5), 4, RenderMode::Fit));
        assert!((c.evolve_threshold - 0.7).abs() < 1e-6);
        for bad in ["m4:render=tree", "m4:evolve=2", "m4:k=0", "notes:x=1"] {
            assert!(
                Registry.check(&SubstrateSpec::parse(bad).unwrap()).is_err(),
                "{bad}"
            );
        }
        let services = submem_core::test_utils::test_services(None);
        for name in ["m4", "notes", "a-mem"] {
            let sub = Registry
                .build(&SubstrateSpec::parse(name).unwrap(), services.clone())
                .unwrap();
            assert!(!sub.info().needs_llm);
        }
    }
}

//! The registry: names and aliases resolve to one factory each, every
//! LLM-free substrate builds with test services, bad names and settings name
//! the valid ones, and code extends and overrides the built-ins.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use submem::plugin::{LlmUse, ReaderPrompt, SubstrateFactory};
use submem::registry::{Registry, SubstrateSpec};
use submem::{Family, MethodId, RegistryError};

fn spec(s: &str) -> SubstrateSpec {
    SubstrateSpec::parse(s).unwrap()
}

#[test]
fn parses_lists_with_settings() {
    let v = SubstrateSpec::parse_list("m1, M2,flexa:ranking=hybrid,kappa=64,m10").unwrap();
    let names: Vec<String> = v.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        vec!["m1", "m2", "flexa:ranking=hybrid,kappa=64", "m10"]
    );
    assert_eq!(v[2].get("kappa"), Some("64"));
    assert!(SubstrateSpec::parse_list(" , ").is_err());
    assert!(SubstrateSpec::parse("flexa:kappa").is_err());
}

#[test]
fn every_name_and_alias_resolves_to_one_factory() {
    let r = Registry::default();
    let mut seen = std::collections::HashMap::new();
    for f in r.factories() {
        f.validate().unwrap_or_else(|e| panic!("{}: {e}", f.name()));
        assert!(f.aliases().len() <= 1, "{}: one alias at most", f.name());
        for n in std::iter::once(f.name()).chain(f.aliases().iter().map(String::as_str)) {
            assert!(seen.insert(n.to_string(), f.name()).is_none(), "{n} twice");
            assert_eq!(r.resolve(n).unwrap().name(), f.name());
        }
    }
    // Names are case-insensitive: the paper's M1 … M11 are the canonical m1 … m11.
    for (paper, name) in [("M1", "m1"), ("M5", "m5"), ("M11", "m11")] {
        assert_eq!(r.resolve(paper).map(|f| f.name()), Some(name));
    }
    for n in ["full-context", "flexamem", "no-memory", "BM25"] {
        assert!(r.resolve(n).is_some(), "{n}");
        assert!(r.known().join(" ").contains(&n.to_ascii_lowercase()), "{n}");
    }
}

#[test]
fn builds_every_llm_free_substrate_with_test_services() {
    let services = submem_core::test_utils::test_services(None);
    let r = Registry::default();
    for f in r.factories() {
        if f.llm() == LlmUse::Required || f.name() == "m9" {
            continue;
        }
        let s = r.build(&spec(f.name()), services.clone()).unwrap();
        assert!(!s.info().name.is_empty(), "{}", f.name());
    }
}

#[test]
fn bad_names_and_settings_name_the_valid_ones() {
    let r = Registry::default();
    let e = r.check(&spec("m99")).unwrap_err().to_string();
    assert!(e.contains("m99") && e.contains("nomem"), "{e}");
    let e = r.check(&spec("nomem:k=3")).unwrap_err().to_string();
    assert!(e.contains("takes no settings"), "{e}");
    let e = r.check(&spec("m1:colour=red")).unwrap_err().to_string();
    assert!(e.contains("`colour`") && e.contains("`ef_search`"), "{e}");
    let e = r.check(&spec("m1:m=abc")).unwrap_err().to_string();
    assert_eq!(
        e,
        "substrate m1: bad setting \"m1:m=abc\": m: invalid type: string \"abc\", \
         expected a whole number, 0 or more",
        "said once, in words"
    );
    let e = r
        .check(&spec("flexa:ranking=fuzzy"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("ranking") && e.contains("hybrid"), "{e}");
    assert!(r.check(&spec("m1:ef_search=32")).is_ok());
    assert!(r.check(&spec("bm25:stopwords=lucene")).is_ok());
    let e = r
        .check(&spec("bm25:stopwords=false"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("stopwords") && e.contains("english"), "{e}");
    assert!(r.check(&spec("m10:x=1")).is_err());
}

#[cfg(feature = "lora")]
#[test]
fn m9_trains_on_the_registry_reader_prompt_and_missing_weights_are_a_clear_skip() {
    let r = Registry::default();
    let spec = spec("lora:gguf=/nonexistent/model.gguf");
    let err = r
        .build(&spec, submem_core::test_utils::test_services(None))
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::NeedsLocalModel { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("local SmolLM2 weights"), "{err}");
    let format = submem_lora::PromptFormat::from_reader(r.reader_prompt());
    assert_eq!(
        (format.messages)("Where?"),
        ReaderPrompt::default().messages(submem_lora::ADAPTER_NOTE, "Where?")
    );
}

#[test]
fn a_registry_is_extended_and_overridden_by_code() {
    use submem_core::plugin::NoSettings;
    let services = submem_core::test_utils::test_services(None);
    let mine = SubstrateFactory::builder("mine", MethodId::from_static("mine"), Family::BASELINE)
        .aliases(&["m2"])
        .settings(NoSettings {})
        .build(|_, _| Ok(Arc::new(submem::baselines::NoMemory)));
    let r = Registry::default().with(mine);
    assert_eq!(r.resolve("mine").unwrap().name(), "mine");
    // A canonical name wins over a later alias.
    assert_eq!(r.resolve("m2").unwrap().name(), "m2");
    assert!(r.build(&spec("mine"), services).is_ok());
    let bad = SubstrateFactory::builder("Bad Name", MethodId::from_static("M1"), Family::FLAT)
        .build_without_settings(|_| Ok(Arc::new(submem::baselines::NoMemory)));
    assert!(Registry::empty().try_with(bad).is_err());
}

#[cfg(feature = "router")]
#[test]
fn router_specs_are_checked_and_built_from_registry_members() {
    let services = submem_core::test_utils::test_services(None);
    let r = Registry::default();
    let routed = r
        .build(
            &spec("router:members=m2+m10,compose=m2+m10,share=0.4"),
            services.clone(),
        )
        .unwrap();
    assert_eq!(routed.info().name, "routed(M2,M10)");
    assert!(r.build(&spec("routed"), services).is_ok());
    let err = |s: &str| r.check(&spec(s)).unwrap_err().to_string();
    assert!(err("router:members=m2+m99").contains("\"m99\" is not a routable"));
    assert!(err("router:compose=m2").contains("exactly two"));
    assert!(err("router:colour=red").contains("valid settings are `policy`"));
    assert!(err("router:policy=/nonexistent/p.json").contains("/nonexistent/p.json"));
    assert!(err("router:signals=maybe").contains("signals"));
    assert!(err("router:members=nomem+m2").contains("\"nomem\" is not a routable"));
}

//! Substrates built by name, so that a run is described by strings such as
//! `m1,m2,m10,flexa:ranking=hybrid,kappa=64`.
//!
//! The [`Registry`] is a list of [`SubstrateFactory`] values: each family
//! crate exports its own (`submem_flat::factories()`, ...), the harness adds
//! the baselines and the router, and any code adds more with
//! [`Registry::with`]. Names, aliases, error messages, the router's member
//! names and `submem substrates` all come from that one list. Each family is
//! a cargo feature of this crate (all on by default).
//!
//! Settings follow a colon as comma-separated `key=value` pairs, read as the
//! types of the substrate's settings struct; an unknown key is refused with
//! the valid ones. In a list, a piece with `=` but no `:` continues the
//! previous substrate's settings, so `flexa:ranking=hybrid,kappa=64,m1` is two
//! substrates.
//!
//! ```
//! use submem_bench::registry::{Registry, SubstrateSpec};
//! let registry = Registry::default();
//! registry.check(&SubstrateSpec::parse("bm25:fill=true")?)?;
//! let err = registry.check(&SubstrateSpec::parse("m2:colour=red")?).unwrap_err();
//! assert!(err.to_string().contains("valid settings are"), "{err}");
//! # Ok::<(), submem_bench::BenchError>(())
//! ```

use std::fmt;
use std::sync::Arc;

use submem_core::plugin::{
    BuildContext, LlmUse, MemberBuilder, Settings, SubstrateDescription, SubstrateFactory,
};
use submem_core::{Family, MethodId, Services, Substrate};

use crate::{BenchError, Result};

/// A substrate name with its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubstrateSpec {
    /// The name as written (lower-cased), e.g. `flexa`.
    pub name: String,
    /// `key=value` settings in order.
    pub settings: Vec<(String, String)>,
}

impl fmt::Display for SubstrateSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        for (i, (k, v)) in self.settings.iter().enumerate() {
            write!(f, "{}{k}={v}", if i == 0 { ':' } else { ',' })?;
        }
        Ok(())
    }
}

impl SubstrateSpec {
    /// Parses one spec, `name` or `name:key=value,key=value`.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        let (name, rest) = match s.split_once(':') {
            Some((n, r)) => (n, Some(r)),
            None => (s, None),
        };
        if name.is_empty() {
            return Err(BenchError::InvalidOption(format!(
                "empty substrate name in {s:?}"
            )));
        }
        let mut spec = SubstrateSpec {
            name: name.to_ascii_lowercase(),
            settings: Vec::new(),
        };
        for kv in rest
            .unwrap_or("")
            .split(',')
            .filter(|x| !x.trim().is_empty())
        {
            spec.push_setting(kv)?;
        }
        Ok(spec)
    }

    /// Appends one `key=value` setting (the key lower-cased, both trimmed);
    /// text without `=` is [`BenchError::BadSetting`].
    pub fn push_setting(&mut self, kv: &str) -> Result<()> {
        let (k, v) = kv.split_once('=').ok_or_else(|| BenchError::BadSetting {
            substrate: self.name.clone(),
            setting: kv.into(),
            reason: "expected key=value".into(),
        })?;
        self.settings
            .push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        Ok(())
    }

    /// Parses a comma-separated list (see the module docs for how settings
    /// continue across commas).
    pub fn parse_list(s: &str) -> Result<Vec<Self>> {
        let mut out: Vec<SubstrateSpec> = Vec::new();
        for piece in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match out.last_mut() {
                Some(last) if piece.contains('=') && !piece.contains(':') => {
                    last.push_setting(piece)?
                }
                _ => out.push(SubstrateSpec::parse(piece)?),
            }
        }
        if out.is_empty() {
            return Err(BenchError::InvalidOption("no substrates given".into()));
        }
        Ok(out)
    }

    /// The value of setting `key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The substrates a run can build, by name.
#[derive(Debug, Clone)]
pub struct Registry {
    factories: Vec<SubstrateFactory>,
}

impl Default for Registry {
    /// Every built-in substrate of the families compiled in, the baselines
    /// and the router.
    fn default() -> Self {
        let mut r = Registry::empty();
        for f in builtin_factories() {
            r = r.with(f);
        }
        r
    }
}

/// The built-in factories of the families compiled in (cargo features),
/// with the harness's reader prompt given to the substrates that serve their
/// own reader (M9, M11).
fn builtin_factories() -> Vec<SubstrateFactory> {
    let mut out = Vec::new();
    #[cfg(feature = "flat")]
    out.extend(submem_flat::factories());
    #[cfg(feature = "kv")]
    out.extend([
        submem_kv::factory::full_context_factory(),
        submem_kv::factory::epicache_factory(crate::reader::reader_head()),
    ]);
    #[cfg(feature = "flexamem")]
    out.extend(submem_flexamem::factories());
    #[cfg(feature = "gist")]
    out.extend(submem_gist::factories());
    #[cfg(feature = "notes")]
    out.extend(submem_notes::factories());
    #[cfg(feature = "graph")]
    out.extend(submem_graph::factories());
    #[cfg(feature = "raptor")]
    out.extend(submem_raptor::factories());
    #[cfg(feature = "refine")]
    out.extend(submem_refine::factories());
    #[cfg(feature = "lora")]
    out.push(submem_lora::factory::lora_factory(
        crate::reader::lora_prompt_format(),
    ));
    out.extend(crate::baselines::factories());
    #[cfg(feature = "recent")]
    out.extend(submem_recent::factories());
    #[cfg(feature = "router")]
    out.push(crate::registry_router::router_factory());
    out
}

impl Registry {
    /// A registry with no substrates.
    pub fn empty() -> Self {
        Registry {
            factories: Vec::new(),
        }
    }

    /// Adds `factory`; one with the same canonical name is replaced, and its
    /// aliases take precedence over earlier factories' aliases (a canonical
    /// name always wins over an alias). It is not checked: use
    /// [`Registry::try_with`] for a factory from untrusted code.
    pub fn with(mut self, factory: SubstrateFactory) -> Self {
        self.factories.retain(|f| f.name() != factory.name());
        self.factories.push(factory);
        self
    }

    /// Adds `factory` after checking it (see [`Registry::with`]).
    pub fn try_with(self, factory: SubstrateFactory) -> Result<Self> {
        factory
            .validate()
            .map_err(|e| BenchError::InvalidOption(format!("substrate {}: {e}", factory.name())))?;
        Ok(self.with(factory))
    }

    /// Every factory, in the order added.
    pub fn factories(&self) -> &[SubstrateFactory] {
        &self.factories
    }

    /// The factory `name` (a canonical name or an alias, any case) stands
    /// for; later factories win.
    pub fn resolve(&self, name: &str) -> Option<&SubstrateFactory> {
        self.factories
            .iter()
            .rev()
            .find(|f| f.name().eq_ignore_ascii_case(name.trim()))
            .or_else(|| self.factories.iter().rev().find(|f| f.answers_to(name)))
    }

    /// Canonical names with their aliases, `m2 (bm25, sparse)`, for messages.
    pub fn known(&self) -> Vec<String> {
        self.factories
            .iter()
            .map(|f| match f.aliases() {
                [] => f.name().to_string(),
                a => format!("{} ({})", f.name(), a.join(", ")),
            })
            .collect()
    }

    /// What `submem substrates` lists.
    pub fn describe(&self) -> Vec<SubstrateDescription> {
        self.factories
            .iter()
            .map(SubstrateFactory::describe)
            .collect()
    }

    /// The routable names (every substrate but composites and baselines)
    /// with their canonical names and methods, for a router.
    pub fn route_names(&self) -> Vec<(String, String, MethodId)> {
        let mut out = Vec::new();
        for f in &self.factories {
            if *f.family() == Family::COMPOSITE || *f.family() == Family::BASELINE {
                continue;
            }
            for n in std::iter::once(f.name()).chain(f.aliases().iter().map(String::as_str)) {
                out.push((n.to_string(), f.name().to_string(), f.method().clone()));
            }
        }
        out
    }

    fn factory(&self, spec: &SubstrateSpec) -> Result<&SubstrateFactory> {
        self.resolve(&spec.name)
            .ok_or_else(|| BenchError::UnknownSubstrate {
                name: spec.name.clone(),
                known: self.known().join(", "),
            })
    }

    fn settings(&self, factory: &SubstrateFactory, spec: &SubstrateSpec) -> Result<Settings> {
        factory
            .settings_from_pairs(&spec.settings)
            .map_err(|e| bad_setting(spec, e))
    }

    /// Checks a spec without building it (unknown names, bad settings).
    pub fn check(&self, spec: &SubstrateSpec) -> Result<()> {
        let factory = self.factory(spec)?;
        let settings = self.settings(factory, spec)?;
        factory
            .check_with(&settings, self)
            .map_err(|e| bad_setting(spec, e))
    }

    /// Builds one instance with `services` (already metered by the caller).
    /// A substrate that needs a memory LLM the services lack is
    /// [`BenchError::NeedsLlm`]; one whose local model is missing is
    /// [`BenchError::NeedsLocalModel`].
    pub fn build(&self, spec: &SubstrateSpec, services: Services) -> Result<Arc<dyn Substrate>> {
        let factory = self.factory(spec)?;
        let settings = self.settings(factory, spec)?;
        // The factory's build parses and checks the settings itself (an
        // `InvalidInput` below): checking here first would do it twice.
        if factory.llm() == LlmUse::Required && services.llm.is_none() {
            return Err(BenchError::NeedsLlm {
                substrate: spec.to_string(),
            });
        }
        let ctx = BuildContext::new(services).with_members(self);
        factory.build(&ctx, &settings).map_err(|e| match e {
            submem_core::Error::Unavailable { reason, .. } => BenchError::NeedsLocalModel {
                substrate: spec.to_string(),
                reason,
            },
            submem_core::Error::InvalidInput(reason) => BenchError::BadSetting {
                substrate: spec.name.clone(),
                setting: spec.to_string(),
                reason,
            },
            source => BenchError::Substrate {
                substrate: spec.to_string(),
                conversation: String::new(),
                source,
            },
        })
    }
}

fn bad_setting(spec: &SubstrateSpec, e: submem_core::Error) -> BenchError {
    BenchError::BadSetting {
        substrate: spec.name.clone(),
        setting: spec.to_string(),
        reason: match e {
            submem_core::Error::InvalidInput(m) => m,
            other => other.to_string(),
        },
    }
}

impl MemberBuilder for Registry {
    fn build_member(
        &self,
        spec: &str,
        services: Services,
    ) -> submem_core::Result<Arc<dyn Substrate>> {
        let to_core = |e: BenchError| submem_core::Error::InvalidInput(e.to_string());
        let spec = SubstrateSpec::parse(spec).map_err(to_core)?;
        self.build(&spec, services).map_err(to_core)
    }

    fn member_method(&self, name: &str) -> Option<(String, MethodId)> {
        self.resolve(name)
            .map(|f| (f.name().to_string(), f.method().clone()))
    }

    fn member_names(&self) -> Vec<(String, String, MethodId)> {
        self.route_names()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            for n in std::iter::once(f.name()).chain(f.aliases().iter().map(String::as_str)) {
                assert!(seen.insert(n.to_string(), f.name()).is_none(), "{n} twice");
                assert_eq!(r.resolve(n).unwrap().name(), f.name());
            }
        }
        for n in ["full-context", "flexa-mem", "no-memory", "BM25"] {
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
    fn m9_trains_on_the_harness_prompt_and_missing_weights_are_a_clear_skip() {
        let r = Registry::default();
        let spec = spec("lora:gguf=/nonexistent/model.gguf");
        let err = r
            .build(&spec, submem_core::test_utils::test_services(None))
            .unwrap_err();
        assert!(matches!(err, BenchError::NeedsLocalModel { .. }), "{err}");
        assert!(err.to_string().contains("local SmolLM2 weights"), "{err}");
        let format = crate::reader::lora_prompt_format();
        let q = crate::Question {
            id: String::new(),
            text: "Where?".into(),
            answer: None,
            evidence: Vec::new(),
            category: String::new(),
            kind: crate::QuestionKind::Standard,
            regime: submem_core::Regime::Conversational,
            newest: None,
            date: None,
        };
        assert_eq!(
            (format.messages)("Where?"),
            crate::reader::reader_messages(&q, submem_lora::ADAPTER_NOTE)
        );
    }

    #[test]
    fn a_registry_is_extended_and_overridden_by_code() {
        use submem_core::plugin::NoSettings;
        let services = submem_core::test_utils::test_services(None);
        let mine =
            SubstrateFactory::builder("mine", MethodId::from_static("mine"), Family::BASELINE)
                .aliases(&["m2"])
                .settings(NoSettings {})
                .build(|_, _| Ok(Arc::new(crate::baselines::NoMemory)));
        let r = Registry::default().with(mine);
        assert_eq!(r.resolve("mine").unwrap().name(), "mine");
        // A canonical name wins over a later alias.
        assert_eq!(r.resolve("m2").unwrap().name(), "m2");
        assert!(r.build(&spec("mine"), services).is_ok());
        let bad = SubstrateFactory::builder("Bad Name", MethodId::M1, Family::FLAT)
            .build_without_settings(|_| Ok(Arc::new(crate::baselines::NoMemory)));
        assert!(Registry::empty().try_with(bad).is_err());
    }
}

//! Substrates built by name, so that a run is described by strings such as
//! `m1,m2,m10,flexa:ranking=hybrid,kappa=64`.
//!
//! The [`Registry`] is a list of [`SubstrateFactory`] values: each family
//! crate exports its own (`submem_flat::factories()`, ...), this crate adds
//! the `nomem` baseline, and any code adds more with [`Registry::with`].
//! Names, aliases, error messages, the router's member names and
//! `submem substrates` all come from that one list. Each family is a cargo
//! feature of this crate (all on by default).
//!
//! What a factory needs from its caller comes through the build context:
//! the services, this registry (for composites that build members by name)
//! and the reader's prompt ([`Registry::with_reader_prompt`], for the
//! substrates that serve their own reader).
//!
//! Settings follow a colon as comma-separated `key=value` pairs, read as the
//! types of the substrate's settings struct; an unknown key is refused with
//! the valid ones. In a list, a piece with `=` but no `:` continues the
//! previous substrate's settings, so `flexa:ranking=hybrid,kappa=64,m1` is two
//! substrates.
//!
//! ```
//! use submem::registry::{Registry, SubstrateSpec};
//! let registry = Registry::default();
//! registry.check(&SubstrateSpec::parse("bm25:fill=true")?)?;
//! let err = registry.check(&SubstrateSpec::parse("m2:colour=red")?).unwrap_err();
//! assert!(err.to_string().contains("valid settings are"), "{err}");
//! # Ok::<(), submem::RegistryError>(())
//! ```

use std::fmt;
use std::sync::Arc;

use submem_core::plugin::{
    BuildContext, LlmUse, MemberBuilder, ReaderPrompt, Settings, SubstrateDescription,
    SubstrateFactory,
};
use submem_core::{Family, MethodId, Services, Substrate};

use crate::error::{RegistryError, Result};

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
            return Err(RegistryError::InvalidSpec(format!(
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
    /// text without `=` is [`RegistryError::BadSetting`].
    pub fn push_setting(&mut self, kv: &str) -> Result<()> {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| RegistryError::BadSetting {
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
            return Err(RegistryError::InvalidSpec("no substrates given".into()));
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
    reader: ReaderPrompt,
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

/// The built-in factories of the families compiled in (cargo features) and
/// the `nomem` baseline, in the order `submem substrates` lists them.
pub fn builtin_factories() -> Vec<SubstrateFactory> {
    /// Adds each family's factories when its feature is compiled in.
    macro_rules! families {
        ($out:ident: $($feature:literal => $krate:ident,)*) => {
            $(
                #[cfg(feature = $feature)]
                $out.extend($krate::factories());
            )*
        };
    }
    let mut out = Vec::new();
    families!(out:
        "flat" => submem_flat,
        "kv" => submem_kv,
        "flexamem" => submem_flexamem,
        "gist" => submem_gist,
        "notes" => submem_notes,
        "graph" => submem_graph,
        "raptor" => submem_raptor,
        "refine" => submem_refine,
        "lora" => submem_lora,
    );
    out.extend(crate::nomem::factories());
    families!(out:
        "recent" => submem_recent,
        "router" => submem_router,
    );
    out
}

impl Registry {
    /// A registry with no substrates.
    pub fn empty() -> Self {
        Registry {
            factories: Vec::new(),
            reader: ReaderPrompt::default(),
        }
    }

    /// The same registry building for a reader that frames memory with
    /// `reader` (M9 trains on it, M11 prefills under its head); the default
    /// is [`ReaderPrompt::default`], the prompt `submem bench` reads with.
    pub fn with_reader_prompt(mut self, reader: ReaderPrompt) -> Self {
        self.reader = reader;
        self
    }

    /// The reader prompt substrates are built for.
    pub fn reader_prompt(&self) -> &ReaderPrompt {
        &self.reader
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
        factory.validate().map_err(|e| RegistryError::BadFactory {
            name: factory.name().to_string(),
            reason: e.to_string(),
        })?;
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
            .ok_or_else(|| RegistryError::UnknownSubstrate {
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
    /// [`RegistryError::NeedsLlm`]; one whose local model is missing is
    /// [`RegistryError::NeedsLocalModel`].
    pub fn build(&self, spec: &SubstrateSpec, services: Services) -> Result<Arc<dyn Substrate>> {
        let factory = self.factory(spec)?;
        let settings = self.settings(factory, spec)?;
        // The factory's build parses and checks the settings itself (an
        // `InvalidInput` below): checking here first would do it twice.
        if factory.llm() == LlmUse::Required && services.llm.is_none() {
            return Err(RegistryError::NeedsLlm {
                substrate: spec.to_string(),
            });
        }
        let ctx = BuildContext::new(services)
            .with_members(self)
            .with_reader(self.reader.clone());
        factory.build(&ctx, &settings).map_err(|e| match e {
            submem_core::Error::Unavailable { reason, .. } => RegistryError::NeedsLocalModel {
                substrate: spec.to_string(),
                reason,
            },
            submem_core::Error::InvalidInput(reason) => RegistryError::BadSetting {
                substrate: spec.name.clone(),
                setting: spec.to_string(),
                reason: without_settings_prefix(&spec.name, reason),
            },
            source => RegistryError::Build {
                substrate: spec.to_string(),
                source,
            },
        })
    }
}

/// A factory's message says `settings of NAME: …`; the registry's error
/// already names the substrate and the setting, so the prefix would repeat.
fn without_settings_prefix(name: &str, reason: String) -> String {
    match reason.strip_prefix(&format!("settings of {name}: ")) {
        Some(rest) => rest.to_string(),
        None => reason,
    }
}

fn bad_setting(spec: &SubstrateSpec, e: submem_core::Error) -> RegistryError {
    RegistryError::BadSetting {
        substrate: spec.name.clone(),
        setting: spec.to_string(),
        reason: match e {
            submem_core::Error::InvalidInput(m) => without_settings_prefix(&spec.name, m),
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
        let to_core = |e: RegistryError| submem_core::Error::InvalidInput(e.to_string());
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

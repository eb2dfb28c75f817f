//! Plugins: how a substrate names itself, documents its settings and is built
//! from them, so that any crate (in this workspace or not) can add a
//! substrate to a registry without editing one.
//!
//! A family crate exports one [`SubstrateFactory`] per name it answers to.
//! The factory carries the descriptive facts (name, aliases, [`MethodId`],
//! [`Family`], paper, a one-line summary, whether it calls an LLM), a typed
//! settings value with its defaults, and the function that builds the
//! substrate. Settings are one serde type per substrate implementing
//! [`SubstrateSettings`] (`#[serde(deny_unknown_fields)]`, documented fields):
//! the same type is read from `key=value` strings (the CLI), from JSON (a
//! server, Python) and listed with each field's default and doc line.
//!
//! ```
//! use std::sync::Arc;
//! use serde::{Deserialize, Serialize};
//! use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
//! use submem_core::{Family, MethodId};
//!
//! /// Settings of a toy substrate.
//! #[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Window {
//!     /// Newest events kept.
//!     keep: usize,
//! }
//! impl SubstrateSettings for Window {
//!     fn validate(&self) -> submem_core::Result<()> {
//!         if self.keep == 0 {
//!             return Err(submem_core::Error::InvalidInput("keep must be at least 1".into()));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let factory = SubstrateFactory::builder("window", MethodId::from_static("window"), Family::BASELINE)
//!     .summary("the newest events")
//!     .llm(LlmUse::Never)
//!     .settings(Window { keep: 8 })
//!     .build(|_ctx, _settings: Window| {
//!         Err(submem_core::Error::InvalidInput("a doc example builds nothing".into()))
//!     });
//! let parsed = factory.settings_from_pairs(&[("keep".into(), "3".into())])?;
//! factory.check(&parsed)?;
//! // Reading refuses unknown keys and ill-typed values; `check` adds the rules.
//! assert!(factory.check(&factory.settings_from_pairs(&[("keep".into(), "0".into())])?).is_err());
//! let err = factory.settings_from_pairs(&[("kept".into(), "1".into())]).unwrap_err();
//! assert!(err.to_string().contains("unknown setting `kept`"), "{err}");
//! assert_eq!(factory.describe().settings[0].default, serde_json::json!(8));
//! # Ok::<(), submem_core::Error>(())
//! ```

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Error, Family, MethodId, Result, Services, Substrate};

mod reader;
pub use reader::{head_messages, ReaderPrompt, MEMORY_INTRO, READER_SYSTEM};

mod schema;
#[cfg(test)]
mod tests;

use schema::{coerce, parse_settings, setting_docs};

/// Settings as a JSON object (`key → value`).
pub type Settings = Map<String, Value>;

/// Whether a substrate calls an LLM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmUse {
    /// Never: it works without a memory LLM.
    Never,
    /// When one is configured; rule writers stand in without one.
    Optional,
    /// Always: building it without a memory LLM fails.
    Required,
}

impl fmt::Display for LlmUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LlmUse::Never => "no",
            LlmUse::Optional => "optional",
            LlmUse::Required => "yes",
        })
    }
}

/// A substrate's settings type.
///
/// Implement it on a serde struct with `#[serde(deny_unknown_fields)]`, a
/// doc comment on every field (it becomes the setting's documentation) and
/// `#[derive(schemars::JsonSchema)]`. [`validate`](Self::validate) checks
/// values serde cannot (ranges, combinations).
pub trait SubstrateSettings:
    Serialize + DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static
{
    /// Fails on values the substrate cannot work with.
    fn validate(&self) -> Result<()> {
        Ok(())
    }
}

/// Implements [`SubstrateSettings`] for configuration types whose own
/// `fn validate(&self) -> Result<(), E>` (any `E: Display`) checks them, its
/// error becoming [`Error::InvalidInput`](crate::Error::InvalidInput):
/// `submem_core::settings_checked_by_validate!(GistConfig, NotesConfig);`.
#[macro_export]
macro_rules! settings_checked_by_validate {
    ($($ty:ty),+ $(,)?) => {$(
        impl $crate::plugin::SubstrateSettings for $ty {
            fn validate(&self) -> $crate::Result<()> {
                <$ty>::validate(self).map_err(|e| $crate::Error::InvalidInput(e.to_string()))
            }
        }
    )+};
}

/// One setting, for listings (`submem substrates`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingDoc {
    /// The key, as written after `name:` or in a JSON object.
    pub key: String,
    /// Its type: `integer`, `number`, `boolean`, `string`, or the values an
    /// enumerated setting takes joined by `|`; `?` marks an optional one.
    pub kind: String,
    /// The factory's default (`null` for an optional setting left unset).
    pub default: Value,
    /// The first sentence of the field's doc comment.
    pub doc: String,
}

/// What a registry lists about a substrate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubstrateDescription {
    /// The canonical name (`m1-fill`).
    pub name: String,
    /// Other names it answers to.
    pub aliases: Vec<String>,
    /// Its method id.
    pub method: MethodId,
    /// Its family.
    pub family: Family,
    /// The paper and method it implements (empty for none).
    pub paper: String,
    /// One line on what it is.
    pub summary: String,
    /// Whether it calls an LLM.
    pub llm: LlmUse,
    /// Its settings with their defaults.
    pub settings: Vec<SettingDoc>,
}

/// Builds the members of a composite substrate (a router) by name; a
/// registry implements it and hands itself to the factories it builds.
pub trait MemberBuilder: Send + Sync {
    /// Builds the substrate `spec` names (`m2`, `flexa:rho=0.2`).
    fn build_member(&self, spec: &str, services: Services) -> Result<Arc<dyn Substrate>>;
    /// The canonical name and method of a member name, if registered.
    fn member_method(&self, name: &str) -> Option<(String, MethodId)>;
    /// Every registered name (canonical names and aliases) with its canonical
    /// name and method, for name tables such as the router's.
    fn member_names(&self) -> Vec<(String, String, MethodId)>;
}

/// What a factory's build function receives besides its settings.
#[derive(Clone)]
pub struct BuildContext<'a> {
    /// The model services, already metered by the caller when it meters.
    pub services: Services,
    /// The registry building this substrate, for composites that build
    /// members by name (`None` outside a registry).
    pub members: Option<&'a dyn MemberBuilder>,
    /// How the caller's reader frames memory, for substrates that serve
    /// their own reader (M9, M11); [`ReaderPrompt::default`] unless set.
    pub reader: ReaderPrompt,
}

impl<'a> BuildContext<'a> {
    /// A context with services only.
    pub fn new(services: Services) -> Self {
        BuildContext {
            services,
            members: None,
            reader: ReaderPrompt::default(),
        }
    }

    /// The same with the caller's reader prompt.
    pub fn with_reader(mut self, reader: ReaderPrompt) -> Self {
        self.reader = reader;
        self
    }

    /// The same with a member builder.
    pub fn with_members(mut self, members: &'a dyn MemberBuilder) -> Self {
        self.members = Some(members);
        self
    }
}

type ReadFn = dyn Fn(&Settings) -> Result<()> + Send + Sync;
type CheckFn = dyn Fn(&Settings, Option<&dyn MemberBuilder>) -> Result<()> + Send + Sync;
type BuildFn = dyn Fn(&BuildContext<'_>, &Settings) -> Result<Arc<dyn Substrate>> + Send + Sync;

/// A named way to build a substrate from settings (see the module docs).
/// Cheap to clone.
#[derive(Clone)]
pub struct SubstrateFactory {
    info: Arc<Descriptor>,
    read: Arc<ReadFn>,
    check: Arc<CheckFn>,
    build: Arc<BuildFn>,
}

/// The builder's facts, with what the settings type told.
struct Descriptor {
    head: FactoryBuilder,
    defaults: Settings,
    settings: Vec<SettingDoc>,
    schema: Value,
}

impl fmt::Debug for SubstrateFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubstrateFactory")
            .field("name", &self.info.head.name)
            .field("method", &self.info.head.method)
            .finish_non_exhaustive()
    }
}

/// Starts a [`SubstrateFactory`]; see [`SubstrateFactory::builder`].
#[derive(Debug, Clone)]
pub struct FactoryBuilder {
    name: String,
    aliases: Vec<String>,
    method: MethodId,
    family: Family,
    paper: String,
    summary: String,
    llm: LlmUse,
}

/// A [`FactoryBuilder`] that knows its settings type.
#[derive(Debug, Clone)]
pub struct TypedFactoryBuilder<S> {
    head: FactoryBuilder,
    defaults: S,
}

impl SubstrateFactory {
    /// Starts a factory for the canonical `name` (lower case, as users type
    /// it) of a substrate implementing `method` in `family`.
    pub fn builder(name: impl Into<String>, method: MethodId, family: Family) -> FactoryBuilder {
        FactoryBuilder {
            name: name.into().to_ascii_lowercase(),
            aliases: Vec::new(),
            method,
            family,
            paper: String::new(),
            summary: String::new(),
            llm: LlmUse::Never,
        }
    }

    /// The canonical name.
    pub fn name(&self) -> &str {
        &self.info.head.name
    }

    /// The other names.
    pub fn aliases(&self) -> &[String] {
        &self.info.head.aliases
    }

    /// The method id.
    pub fn method(&self) -> &MethodId {
        &self.info.head.method
    }

    /// The family.
    pub fn family(&self) -> &Family {
        &self.info.head.family
    }

    /// Whether it calls an LLM.
    pub fn llm(&self) -> LlmUse {
        self.info.head.llm
    }

    /// Whether `name` (any case) is its name or one of its aliases.
    pub fn answers_to(&self, name: &str) -> bool {
        let name = name.trim();
        self.info.head.name.eq_ignore_ascii_case(name)
            || self
                .info
                .head
                .aliases
                .iter()
                .any(|a| a.eq_ignore_ascii_case(name))
    }

    /// Checks the factory's own facts: its name, aliases and ids are valid
    /// and its defaults pass its settings' validation. Registries call it
    /// when a factory is added.
    pub fn validate(&self) -> Result<()> {
        self.info.head.method.validate()?;
        self.info.head.family.validate()?;
        for n in std::iter::once(&self.info.head.name).chain(&self.info.head.aliases) {
            let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
            if n.is_empty() || !n.chars().all(ok) {
                return Err(Error::InvalidInput(format!(
                    "substrate name {n:?} must be lower-case ASCII letters, digits and '-'"
                )));
            }
        }
        self.check(&Settings::new())
    }

    /// Everything a listing shows.
    pub fn describe(&self) -> SubstrateDescription {
        let d = &self.info;
        SubstrateDescription {
            name: d.head.name.clone(),
            aliases: d.head.aliases.clone(),
            method: d.head.method.clone(),
            family: d.head.family.clone(),
            paper: d.head.paper.clone(),
            summary: d.head.summary.clone(),
            llm: d.head.llm,
            settings: d.settings.clone(),
        }
    }

    /// The defaults as a JSON object.
    pub fn defaults(&self) -> &Settings {
        &self.info.defaults
    }

    /// Turns `key=value` strings into [`Settings`], reading each value as the
    /// type its setting has (`3` as an integer, `true` as a boolean, an
    /// enumerated value in any case). An unknown key (refused with the list
    /// of valid ones) or a value of the wrong type is an
    /// error here; [`check`](Self::check) adds the substrate's own rules
    /// (ranges, combinations, member names).
    pub fn settings_from_pairs(&self, pairs: &[(String, String)]) -> Result<Settings> {
        let mut out = Settings::new();
        for (key, raw) in pairs {
            let key = key.trim().to_ascii_lowercase();
            let value = coerce(&self.info.schema, &key, raw.trim());
            out.insert(key, value);
        }
        (self.read)(&out)?;
        Ok(out)
    }

    /// [`settings_from_pairs`](Self::settings_from_pairs) for string slices,
    /// then [`check`](Self::check): the one-call form for code and tests.
    pub fn settings_from_strs(&self, pairs: &[(&str, &str)]) -> Result<Settings> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let settings = self.settings_from_pairs(&owned)?;
        self.check(&settings)?;
        Ok(settings)
    }

    /// The typed settings `settings` stand for, the factory's defaults filled
    /// in, validated. `S` must be the factory's settings type.
    pub fn typed<S: SubstrateSettings>(&self, settings: &Settings) -> Result<S> {
        let s: S = parse_settings(&self.info.head.name, &self.info.defaults, settings)?;
        s.validate()?;
        Ok(s)
    }

    /// Checks `settings` without building anything: unknown keys, wrong
    /// types and values the settings' validation refuses.
    pub fn check(&self, settings: &Settings) -> Result<()> {
        (self.check)(settings, None)
    }

    /// Checks `settings` as [`check`](Self::check) does, with a member
    /// builder for composites whose settings name other substrates.
    pub fn check_with(&self, settings: &Settings, members: &dyn MemberBuilder) -> Result<()> {
        (self.check)(settings, Some(members))
    }

    /// Builds one instance.
    pub fn build(&self, ctx: &BuildContext<'_>, settings: &Settings) -> Result<Arc<dyn Substrate>> {
        (self.build)(ctx, settings)
    }
}

impl FactoryBuilder {
    /// Other names it answers to.
    pub fn aliases(mut self, aliases: &[&str]) -> Self {
        self.aliases = aliases.iter().map(|a| a.to_ascii_lowercase()).collect();
        self
    }

    /// The paper and method it implements, e.g. `Harness the Memory, M1`.
    pub fn paper(mut self, paper: impl Into<String>) -> Self {
        self.paper = paper.into();
        self
    }

    /// One line on what it is.
    pub fn summary(mut self, summary: impl Into<String>) -> Self {
        self.summary = summary.into();
        self
    }

    /// Whether it calls an LLM (default [`LlmUse::Never`]).
    pub fn llm(mut self, llm: LlmUse) -> Self {
        self.llm = llm;
        self
    }

    /// Its settings type, with this factory's defaults.
    pub fn settings<S: SubstrateSettings>(self, defaults: S) -> TypedFactoryBuilder<S> {
        TypedFactoryBuilder {
            head: self,
            defaults,
        }
    }

    /// Finishes a factory whose settings type is the build function's and
    /// whose defaults are that type's [`Default`]; the same as
    /// `.settings(S::default()).build(build)`.
    pub fn build<S, F>(self, build: F) -> SubstrateFactory
    where
        S: SubstrateSettings + Default,
        F: Fn(&BuildContext<'_>, S) -> Result<Arc<dyn Substrate>> + Send + Sync + 'static,
    {
        self.settings(S::default()).build(build)
    }

    /// Finishes a factory whose substrate takes no settings.
    pub fn build_without_settings<F>(self, build: F) -> SubstrateFactory
    where
        F: Fn(&BuildContext<'_>) -> Result<Arc<dyn Substrate>> + Send + Sync + 'static,
    {
        self.build(move |ctx, _: NoSettings| build(ctx))
    }
}

/// The settings of a substrate that takes none.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoSettings {}

impl SubstrateSettings for NoSettings {}

impl<S: SubstrateSettings> TypedFactoryBuilder<S> {
    /// Finishes the factory with the function that builds the substrate from
    /// checked settings.
    pub fn build<F>(self, build: F) -> SubstrateFactory
    where
        F: Fn(&BuildContext<'_>, S) -> Result<Arc<dyn Substrate>> + Send + Sync + 'static,
    {
        self.build_checked(|_, _| Ok(()), build)
    }

    /// As [`build`](Self::build), with an extra check that may use the
    /// registry (a composite's member names).
    pub fn build_checked<C, F>(self, extra_check: C, build: F) -> SubstrateFactory
    where
        C: Fn(&S, Option<&dyn MemberBuilder>) -> Result<()> + Send + Sync + 'static,
        F: Fn(&BuildContext<'_>, S) -> Result<Arc<dyn Substrate>> + Send + Sync + 'static,
    {
        let head = self.head;
        let defaults = match serde_json::to_value(&self.defaults) {
            Ok(Value::Object(map)) => map,
            _ => Settings::new(),
        };
        let schema = serde_json::to_value(schemars::schema_for!(S)).unwrap_or(Value::Null);
        let settings = setting_docs(&schema, &defaults);
        let name = head.name.clone();
        let read_name = head.name.clone();
        let read_defaults = defaults.clone();
        let read = move |given: &Settings| -> Result<()> {
            parse_settings::<S>(&read_name, &read_defaults, given).map(|_| ())
        };
        let parse_defaults = defaults.clone();
        let parse = move |given: &Settings| -> Result<S> {
            let s: S = parse_settings(&name, &parse_defaults, given)?;
            s.validate()
                .map_err(|e| Error::InvalidInput(format!("settings of {name}: {}", bare(&e))))?;
            Ok(s)
        };
        let parse = Arc::new(parse);
        let check_parse = Arc::clone(&parse);
        let check_name = head.name.clone();
        let extra_check = Arc::new(extra_check);
        let build_check = Arc::clone(&extra_check);
        SubstrateFactory {
            info: Arc::new(Descriptor {
                head,
                defaults,
                settings,
                schema,
            }),
            read: Arc::new(read),
            check: Arc::new(move |given, members| {
                let s = check_parse(given)?;
                extra_check(&s, members).map_err(|e| {
                    Error::InvalidInput(format!("settings of {check_name}: {}", bare(&e)))
                })
            }),
            build: Arc::new(move |ctx, given| {
                let s = parse(given)?;
                build_check(&s, ctx.members)?;
                build(ctx, s)
            }),
        }
    }
}

/// An error's message without the `invalid input: ` prefix.
fn bare(e: &Error) -> String {
    match e {
        Error::InvalidInput(m) => m.clone(),
        other => other.to_string(),
    }
}

//! Substrates built by name, so that a run is described by strings such as
//! `m1,m2,m10,flexa:ranking=hybrid,kappa=64`.
//!
//! | name | aliases | substrate | settings |
//! |---|---|---|---|
//! | `m1` | `dense` | [`submem_flat::DenseMemory`] (MiniLM + HNSW) | `exact_threshold`, `m`, `ef_construction`, `ef_search`, `embed_batch` |
//! | `m2` | `bm25`, `sparse` | [`submem_flat::SparseMemory`] (tantivy BM25) | `stopwords=true\|false` |
//! | `m10` | `full` | [`submem_kv::FullContext`] | — |
//! | `flexa` | `flexamem`, `flexa-mem` | [`submem_flexamem::FlexaMem`] | `kappa`, `e` (excerpt tokens), `seeds` (alias `k`), `lambda`, `rho`, `mode=auto\|unit\|piece`, `ranking=bm25\|dense\|hybrid`, `unit_tokens`, `agent_unit_tokens`, `links`, `merge_group`, `record_words` |
//! | `nomem` | `none` | [`NoMemory`], the paper's no-memory row | — |
//! | `recent` | `window` | [`RecentWindow`], newest events that fit | — |
//! | `router` | `routed` | [`submem_router::RoutedSubstrate`] over registry-built members | `policy`, `members`, `signals`, `agreement`, `margin`, `compose`, `share` ([`crate::registry_router`]) |
//!
//! Settings follow a colon as comma-separated `key=value` pairs. In a list,
//! a piece with `=` but no `:` continues the previous substrate's settings, so
//! `flexa:ranking=hybrid,kappa=64,m1` is two substrates.

use std::fmt;
use std::sync::Arc;

use submem_core::{Services, Substrate};
use submem_flat::{DenseConfig, DenseMemory, SparseConfig, SparseMemory};
use submem_flexamem::{FlexaConfig, FlexaMem, Ranking, RecoveryMode};
use submem_kv::{FullContext, FullContextConfig};

use crate::baselines::{NoMemory, RecentWindow};
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

    fn push_setting(&mut self, kv: &str) -> Result<()> {
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

    /// Parses setting `key` as `T`, with a clear error.
    pub fn parse_setting<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>>
    where
        T::Err: fmt::Display,
    {
        self.get(key)
            .map(|v| {
                v.parse::<T>().map_err(|e| BenchError::BadSetting {
                    substrate: self.name.clone(),
                    setting: format!("{key}={v}"),
                    reason: e.to_string(),
                })
            })
            .transpose()
    }

    /// Fails on any setting not in `allowed`.
    pub fn only(&self, allowed: &[&str]) -> Result<()> {
        match self
            .settings
            .iter()
            .find(|(k, _)| !allowed.contains(&k.as_str()))
        {
            Some((k, v)) => Err(BenchError::BadSetting {
                substrate: self.name.clone(),
                setting: format!("{k}={v}"),
                reason: if allowed.is_empty() {
                    "this substrate takes no settings".into()
                } else {
                    format!("known settings: {}", allowed.join(", "))
                },
            }),
            None => Ok(()),
        }
    }
}

/// Builds substrates from specs. The harness calls it once per substrate ×
/// conversation with services already wrapped by that instance's meter.
pub trait SubstrateFactory: Send + Sync {
    /// Canonical names (with aliases in parentheses) for error messages.
    fn known(&self) -> Vec<String>;
    /// Builds one instance. Returns [`BenchError::NeedsLlm`] when the
    /// substrate cannot work without `services.llm`.
    fn build(&self, spec: &SubstrateSpec, services: Services) -> Result<Arc<dyn Substrate>>;
    /// Checks a spec without building it (unknown names, bad settings).
    fn check(&self, spec: &SubstrateSpec) -> Result<()>;
}

/// The built-in registry.
#[derive(Debug, Default, Clone)]
pub struct Registry;

impl Registry {
    fn canonical(name: &str) -> Option<&'static str> {
        Some(match name {
            "m1" | "dense" => "m1",
            "m2" | "bm25" | "sparse" => "m2",
            "m10" | "full" | "full-context" => "m10",
            "flexa" | "flexamem" | "flexa-mem" => "flexa",
            "nomem" | "none" | "no-memory" => "nomem",
            "recent" | "window" => "recent",
            "router" | "routed" => "router",
            _ => return None,
        })
    }

    fn unknown(&self, spec: &SubstrateSpec) -> BenchError {
        BenchError::UnknownSubstrate {
            name: spec.name.clone(),
            known: self.known().join(", "),
        }
    }
}

impl SubstrateFactory for Registry {
    fn known(&self) -> Vec<String> {
        [
            "m1 (dense)",
            "m2 (bm25, sparse)",
            "m10 (full)",
            "flexa (flexamem)",
            "nomem (none)",
            "recent (window)",
            "router (routed)",
        ]
        .map(String::from)
        .to_vec()
    }

    fn check(&self, spec: &SubstrateSpec) -> Result<()> {
        match Self::canonical(&spec.name) {
            Some("m1") => dense_config(spec).map(|_| ()),
            Some("m2") => sparse_config(spec).map(|_| ()),
            Some("flexa") => flexa_config(spec).map(|_| ()),
            Some("router") => crate::registry_router::check(spec),
            Some(_) => spec.only(&[]),
            None => Err(self.unknown(spec)),
        }
    }

    fn build(&self, spec: &SubstrateSpec, services: Services) -> Result<Arc<dyn Substrate>> {
        self.check(spec)?;
        Ok(match Self::canonical(&spec.name) {
            Some("m1") => Arc::new(DenseMemory::new(services, dense_config(spec)?)?),
            Some("m2") => Arc::new(SparseMemory::new(services, sparse_config(spec)?)?),
            Some("m10") => Arc::new(FullContext::new(services, FullContextConfig::default())?),
            Some("flexa") => Arc::new(FlexaMem::new(services, flexa_config(spec)?)?),
            Some("nomem") => Arc::new(NoMemory),
            Some("recent") => Arc::new(RecentWindow::new(services.tokens.clone())),
            Some("router") => crate::registry_router::build(self, spec, services)?,
            _ => return Err(self.unknown(spec)),
        })
    }
}

fn dense_config(spec: &SubstrateSpec) -> Result<DenseConfig> {
    spec.only(&[
        "exact_threshold",
        "m",
        "ef_construction",
        "ef_search",
        "embed_batch",
    ])?;
    let mut c = DenseConfig::default();
    if let Some(v) = spec.parse_setting("exact_threshold")? {
        c = c.with_exact_threshold(v);
    }
    if let Some(v) = spec.parse_setting("m")? {
        c = c.with_max_connections(v);
    }
    if let Some(v) = spec.parse_setting("ef_construction")? {
        c = c.with_ef_construction(v);
    }
    if let Some(v) = spec.parse_setting("ef_search")? {
        c = c.with_ef_search(v);
    }
    if let Some(v) = spec.parse_setting("embed_batch")? {
        c = c.with_embed_batch(v);
    }
    Ok(c)
}

fn sparse_config(spec: &SubstrateSpec) -> Result<SparseConfig> {
    spec.only(&["stopwords"])?;
    let mut c = SparseConfig::default();
    if let Some(v) = spec.parse_setting::<bool>("stopwords")? {
        c = c.with_remove_stop_words(v);
    }
    Ok(c)
}

fn enum_setting<T>(spec: &SubstrateSpec, key: &str, options: &[(&str, T)]) -> Result<Option<T>>
where
    T: Copy,
{
    let Some(v) = spec.get(key) else {
        return Ok(None);
    };
    options
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(v))
        .map(|(_, t)| Some(*t))
        .ok_or_else(|| BenchError::BadSetting {
            substrate: spec.name.clone(),
            setting: format!("{key}={v}"),
            reason: format!(
                "expected one of {}",
                options
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

fn flexa_config(spec: &SubstrateSpec) -> Result<FlexaConfig> {
    spec.only(&[
        "kappa",
        "e",
        "seeds",
        "k",
        "lambda",
        "rho",
        "mode",
        "ranking",
        "unit_tokens",
        "agent_unit_tokens",
        "links",
        "merge_group",
        "record_words",
    ])?;
    let mut c = FlexaConfig::default();
    if let Some(v) = spec.parse_setting("kappa")? {
        c = c.with_piece_tokens(v);
    }
    if let Some(v) = spec.parse_setting("e")? {
        c = c.with_excerpt_tokens(v);
    }
    if let Some(v) = spec.parse_setting("seeds")?.or(spec.parse_setting("k")?) {
        c = c.with_seeds(v);
    }
    if let Some(v) = spec.parse_setting("lambda")? {
        c = c.with_lambda(v);
    }
    if let Some(v) = spec.parse_setting("rho")? {
        c = c.with_rho(v);
    }
    if let Some(v) = spec.parse_setting("unit_tokens")? {
        c = c.with_conversation_unit_tokens(v);
    }
    if let Some(v) = spec.parse_setting("agent_unit_tokens")? {
        c = c.with_agent_unit_tokens(v);
    }
    if let Some(v) = spec.parse_setting("links")? {
        c = c.with_links(v);
    }
    if let Some(v) = spec.parse_setting("merge_group")? {
        c = c.with_merge_group(v);
    }
    if let Some(v) = spec.parse_setting("record_words")? {
        c = c.with_record_words(v);
    }
    let modes = [
        ("auto", RecoveryMode::Auto),
        ("unit", RecoveryMode::Unit),
        ("piece", RecoveryMode::Piece),
    ];
    if let Some(m) = enum_setting(spec, "mode", &modes)? {
        c = c.with_mode(m);
    }
    let rankings = [
        ("bm25", Ranking::Bm25),
        ("dense", Ranking::Dense),
        ("hybrid", Ranking::Hybrid),
    ];
    if let Some(r) = enum_setting(spec, "ranking", &rankings)? {
        c = c.with_ranking(r);
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

    #[test]
    fn parses_lists_with_settings() {
        let v = SubstrateSpec::parse_list("m1, M2,flexa:ranking=hybrid,kappa=64,m10").unwrap();
        let names: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            vec!["m1", "m2", "flexa:ranking=hybrid,kappa=64", "m10"]
        );
        assert_eq!(v[2].parse_setting::<usize>("kappa").unwrap(), Some(64));
        assert!(v[2].parse_setting::<usize>("ranking").is_err());
        assert!(SubstrateSpec::parse_list(" , ").is_err());
        assert!(SubstrateSpec::parse("flexa:kappa").is_err());
    }

    #[test]
    fn real_substrates_parse_their_settings() {
        let s = SubstrateSpec::parse("flexa:ranking=hybrid,kappa=32,mode=piece,rho=0.4").unwrap();
        let c = flexa_config(&s).unwrap();
        assert_eq!(
            (c.piece_tokens, c.ranking, c.mode),
            (32, Ranking::Hybrid, RecoveryMode::Piece)
        );
        assert!((c.rho - 0.4).abs() < 1e-6);
        let e = Registry
            .check(&SubstrateSpec::parse("flexa:ranking=fuzzy").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("bm25, dense, hybrid"), "{e}");
        let e = Registry
            .check(&SubstrateSpec::parse("flexa:lambda=1.5").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("lambda"), "{e}");
        assert!(Registry
            .check(&SubstrateSpec::parse("m1:ef_search=32").unwrap())
            .is_ok());
        assert!(Registry
            .check(&SubstrateSpec::parse("bm25:stopwords=false").unwrap())
            .is_ok());
        assert!(Registry
            .check(&SubstrateSpec::parse("full").unwrap())
            .is_ok());
        assert!(Registry
            .check(&SubstrateSpec::parse("m10:x=1").unwrap())
            .is_err());
    }

    #[test]
    fn builds_every_known_substrate_with_test_services() {
        let services = submem_core::test_utils::test_services(None);
        for name in ["m1", "m2", "m10", "flexa", "nomem", "recent"] {
            let s = Registry
                .build(&SubstrateSpec::parse(name).unwrap(), services.clone())
                .unwrap();
            assert!(!s.info().name.is_empty(), "{name}");
        }
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let e = Registry
            .check(&SubstrateSpec::parse("m99").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("m99") && e.contains("nomem"), "{e}");
        let e = Registry
            .check(&SubstrateSpec::parse("recent:k=3").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes no settings"), "{e}");
    }
}

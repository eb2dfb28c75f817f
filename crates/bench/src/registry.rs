//! Substrates built by name, so that a run is described by strings such as
//! `m1,m2,m10,flexa:ranking=hybrid,kappa=64`.
//!
//! | name | aliases | substrate |
//! |---|---|---|
//! | `nomem` | `none` | [`NoMemory`], the paper's no-memory row |
//! | `recent` | `window` | [`RecentWindow`], newest events that fit |
//!
//! Settings follow a colon as comma-separated `key=value` pairs. In a list,
//! a piece with `=` but no `:` continues the previous substrate's settings, so
//! `flexa:ranking=hybrid,kappa=64,m1` is two substrates.

use std::fmt;
use std::sync::Arc;

use submem_core::{Services, Substrate};

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
            "nomem" | "none" | "no-memory" => "nomem",
            "recent" | "window" => "recent",
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
        vec!["nomem (none)".into(), "recent (window)".into()]
    }

    fn check(&self, spec: &SubstrateSpec) -> Result<()> {
        match Self::canonical(&spec.name) {
            Some("nomem") | Some("recent") => spec.only(&[]),
            _ => Err(self.unknown(spec)),
        }
    }

    fn build(&self, spec: &SubstrateSpec, services: Services) -> Result<Arc<dyn Substrate>> {
        self.check(spec)?;
        Ok(match Self::canonical(&spec.name) {
            Some("nomem") => Arc::new(NoMemory),
            Some("recent") => Arc::new(RecentWindow::new(services.tokens.clone())),
            _ => return Err(self.unknown(spec)),
        })
    }
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

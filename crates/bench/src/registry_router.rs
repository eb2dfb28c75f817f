//! The `router` entry of the registry: a [`submem_router::RoutedSubstrate`]
//! whose members are built by the registry itself (each with the run's
//! metered services, so the router's write and read costs include every
//! member's).
//!
//! Settings (after `router:`):
//!
//! | key | meaning | default |
//! |---|---|---|
//! | `policy` | a fitted policy file (`submem route fit`) | none: the paper-derived rules |
//! | `members` | member names joined by `+` | `m1+m2+m10+flexa` |
//! | `signals` | let runtime signals override the choice | `false` |
//! | `agreement`, `margin` | the signal thresholds | see [`submem_router::SignalSettings`] |
//! | `compose` | always compose two members, `first+second` | none |
//! | `share` | the first member's share of the allowance when composing | `0.5` |

use std::path::Path;
use std::sync::Arc;

use submem_core::{Services, Substrate};
use submem_router::{parse_method, PolicyFile, RoutedSubstrate, RoutingPolicy, SignalSettings};

use crate::registry::{SubstrateFactory, SubstrateSpec};
use crate::{BenchError, Result};

/// Members when `members` is not given.
pub const DEFAULT_MEMBERS: &str = "m1+m2+m10+flexa";
/// The first member's share when composing and `share` is not given.
pub const DEFAULT_SHARE: f64 = 0.5;

const SETTINGS: &[&str] = &[
    "policy",
    "members",
    "signals",
    "agreement",
    "margin",
    "compose",
    "share",
];

fn bad(spec: &SubstrateSpec, setting: &str, reason: impl Into<String>) -> BenchError {
    BenchError::BadSetting {
        substrate: spec.name.clone(),
        setting: setting.into(),
        reason: reason.into(),
    }
}

fn names<'a>(spec: &SubstrateSpec, key: &str, value: &'a str) -> Result<Vec<&'a str>> {
    let v: Vec<&str> = value
        .split('+')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    match v
        .iter()
        .find(|n| parse_method(n).is_none() || n.contains(':'))
    {
        Some(n) => Err(bad(
            spec,
            &format!("{key}={value}"),
            format!("{n:?} is not a routable substrate (m1, m2, m10, flexa...)"),
        )),
        None if v.is_empty() => Err(bad(spec, &format!("{key}={value}"), "no members")),
        None => Ok(v),
    }
}

/// Checks a `router` spec (loads and validates its policy file).
pub fn check(spec: &SubstrateSpec) -> Result<()> {
    spec.only(SETTINGS)?;
    names(
        spec,
        "members",
        spec.get("members").unwrap_or(DEFAULT_MEMBERS),
    )?;
    if let Some(p) = spec.get("policy") {
        PolicyFile::load(Path::new(p))
            .map_err(|e| bad(spec, &format!("policy={p}"), e.to_string()))?;
    }
    spec.parse_setting::<bool>("signals")?;
    spec.parse_setting::<f64>("agreement")?;
    spec.parse_setting::<f64>("margin")?;
    if let Some(c) = spec.get("compose") {
        if names(spec, "compose", c)?.len() != 2 {
            return Err(bad(
                spec,
                &format!("compose={c}"),
                "name exactly two members, first+second",
            ));
        }
    }
    spec.parse_setting::<f64>("share")?;
    Ok(())
}

/// Builds a router whose members come from `registry`, as a shared substrate.
pub fn build(
    registry: &dyn SubstrateFactory,
    spec: &SubstrateSpec,
    services: Services,
) -> Result<Arc<dyn Substrate>> {
    Ok(Arc::new(build_router(registry, spec, services)?))
}

/// Builds a router whose members come from `registry` (for `submem route
/// explain`, which needs [`RoutedSubstrate::explain`]).
pub fn build_router(
    registry: &dyn SubstrateFactory,
    spec: &SubstrateSpec,
    services: Services,
) -> Result<RoutedSubstrate> {
    check(spec)?;
    let members_value = spec.get("members").unwrap_or(DEFAULT_MEMBERS);
    let mut members = Vec::new();
    for name in names(spec, "members", members_value)? {
        let member = registry.build(&SubstrateSpec::parse(name)?, services.clone())?;
        members.push((name.to_string(), member));
    }
    let to_core = |e: submem_core::Error| bad(spec, &spec.to_string(), e.to_string());
    let mut router =
        RoutedSubstrate::new_named(members, RoutingPolicy::default(), services.tokens.clone())
            .map_err(to_core)?;
    if let Some(p) = spec.get("policy") {
        let file = PolicyFile::load(Path::new(p))
            .map_err(|e| bad(spec, &format!("policy={p}"), e.to_string()))?;
        if let Some(fitted_for) = &file.settings.members {
            let mut ours = router.member_names();
            ours.sort();
            let mut theirs = fitted_for.clone();
            theirs.sort();
            if ours != theirs {
                return Err(bad(
                    spec,
                    &format!("policy={p}"),
                    format!(
                        "the policy was fitted for members {} but this router has {}; \
set members={}",
                        theirs.join("+"),
                        ours.join("+"),
                        theirs.join("+")
                    ),
                ));
            }
        }
        router = router.with_fitted(file);
    }
    if spec.parse_setting::<bool>("signals")?.unwrap_or(false) {
        let mut s = SignalSettings::default();
        if let Some(a) = spec.parse_setting("agreement")? {
            s = s.with_min_agreement(a);
        }
        if let Some(m) = spec.parse_setting("margin")? {
            s = s.with_min_margin(m);
        }
        router = router.with_signals(s);
    }
    if let Some(c) = spec.get("compose") {
        let pair = names(spec, "compose", c)?;
        let (Some(a), Some(b)) = (
            pair.first().and_then(|n| parse_method(n)),
            pair.get(1).and_then(|n| parse_method(n)),
        ) else {
            return Err(bad(spec, &format!("compose={c}"), "name two members"));
        };
        let share = spec.parse_setting("share")?.unwrap_or(DEFAULT_SHARE);
        router = router.with_composition(a, b, share).map_err(to_core)?;
    }
    Ok(router)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn spec(s: &str) -> SubstrateSpec {
        SubstrateSpec::parse(s).unwrap()
    }

    #[test]
    fn router_specs_are_checked_and_built_from_registry_members() {
        let services = submem_core::test_utils::test_services(None);
        let r = Registry
            .build(
                &spec("router:members=m2+m10,compose=m2+m10,share=0.4"),
                services.clone(),
            )
            .unwrap();
        assert_eq!(r.info().name, "routed(M2,M10)");
        assert!(Registry.build(&spec("routed"), services).is_ok());
        let err = |s: &str| Registry.check(&spec(s)).unwrap_err().to_string();
        assert!(err("router:members=m2+m99").contains("\"m99\" is not a routable"));
        assert!(err("router:compose=m2").contains("exactly two"));
        assert!(err("router:colour=red").contains("known settings: policy"));
        assert!(err("router:policy=/nonexistent/p.json").contains("/nonexistent/p.json"));
        assert!(err("router:signals=maybe").contains("signals=maybe"));
    }
}

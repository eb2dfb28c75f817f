//! The router's plugin, `router` (alias `routed`): a [`RoutedSubstrate`]
//! whose members are built by the registry that builds it (each with the
//! run's metered services, so the router's write and read costs include
//! every member's), named with that registry's routable names.

use std::path::Path;
use std::sync::Arc;

use crate::{PolicyFile, RouteNames, RoutedSubstrate, RoutingPolicy, SignalSettings};
use serde::{Deserialize, Serialize};
use submem_core::plugin::{
    BuildContext, LlmUse, MemberBuilder, SubstrateFactory, SubstrateSettings,
};
use submem_core::{Error, Family, Result};

/// Members when `members` is not given.
pub const DEFAULT_MEMBERS: &str = "m1+m2+m10+flexa";
/// The first member's share when composing and `share` is not given.
pub const DEFAULT_SHARE: f64 = 0.5;

/// Settings of `router`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterSettings {
    /// A fitted policy file (`submem route fit`); unset: the paper-derived rules.
    pub policy: Option<String>,
    /// Member substrates joined by `+`, one per method, without settings.
    pub members: String,
    /// Let runtime signals (BM25 margin, dense/sparse agreement) override the choice.
    pub signals: bool,
    /// Signal threshold: least dense/sparse agreement to trust the choice (unset: default).
    pub agreement: Option<f64>,
    /// Signal threshold: least BM25 top-score margin (unset: default).
    pub margin: Option<f64>,
    /// Always compose two members, `first+second`, whatever the policy says.
    pub compose: Option<String>,
    /// The first member's share of the allowance when composing.
    pub share: f64,
}

impl Default for RouterSettings {
    fn default() -> Self {
        RouterSettings {
            policy: None,
            members: DEFAULT_MEMBERS.into(),
            signals: false,
            agreement: None,
            margin: None,
            compose: None,
            share: DEFAULT_SHARE,
        }
    }
}

impl SubstrateSettings for RouterSettings {
    fn validate(&self) -> Result<()> {
        split(&self.members, "members")?;
        if let Some(c) = &self.compose {
            if split(c, "compose")?.len() != 2 {
                return Err(bad(format!(
                    "compose={c}: name exactly two members, first+second"
                )));
            }
        }
        if !(self.share > 0.0 && self.share < 1.0) {
            return Err(bad(format!("share={} must be in (0, 1)", self.share)));
        }
        if let Some(p) = &self.policy {
            PolicyFile::load(Path::new(p)).map_err(|e| bad(format!("policy={p}: {e}")))?;
        }
        Ok(())
    }
}

fn bad(msg: String) -> Error {
    Error::InvalidInput(msg)
}

fn split<'a>(value: &'a str, key: &str) -> Result<Vec<&'a str>> {
    let v: Vec<&str> = value
        .split('+')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if v.is_empty() {
        return Err(bad(format!("{key}={value}: no members")));
    }
    if let Some(n) = v.iter().find(|n| n.contains(':')) {
        return Err(bad(format!(
            "{key}={value}: {n:?} has settings; router members use their defaults"
        )));
    }
    Ok(v)
}

/// The routable names of `members` (the registry), or the papers' alone.
fn route_names(members: Option<&dyn MemberBuilder>) -> RouteNames {
    members.map_or_else(RouteNames::papers, |m| RouteNames::new(m.member_names()))
}

/// Checks the member names against the registry and the policy file's names.
fn check_names(s: &RouterSettings, members: Option<&dyn MemberBuilder>) -> Result<()> {
    let names = route_names(members);
    let listed = split(&s.members, "members")?;
    let compose = s
        .compose
        .as_deref()
        .map(|c| split(c, "compose"))
        .transpose()?;
    for (key, n) in listed
        .iter()
        .map(|n| ("members", n))
        .chain(compose.iter().flatten().map(|n| ("compose", n)))
    {
        if names.parse_method(n).is_none() {
            return Err(bad(format!(
                "{key}: {n:?} is not a routable substrate ({})",
                names.known()
            )));
        }
    }
    if let Some(p) = &s.policy {
        PolicyFile::load(Path::new(p))
            .and_then(|f| f.check_names(&names))
            .map_err(|e| bad(format!("policy={p}: {e}")))?;
    }
    Ok(())
}

/// The `router` factory.
pub fn router_factory() -> SubstrateFactory {
    SubstrateFactory::builder("router", crate::ROUTED, Family::COMPOSITE)
        .aliases(&["routed"])
        .paper("Harness the Memory, routing findings (section 5)")
        .summary("one substrate per query, chosen by regime, history depth and budget")
        .llm(LlmUse::Optional)
        .settings(RouterSettings::default())
        .build_checked(check_names, |ctx, s| Ok(Arc::new(build_router(ctx, &s)?)))
}

/// Builds a router whose members come from the context's registry (for
/// `submem route explain`, which needs [`RoutedSubstrate::explain`]).
pub fn build_router(ctx: &BuildContext<'_>, s: &RouterSettings) -> Result<RoutedSubstrate> {
    let registry = ctx
        .members
        .ok_or_else(|| bad("a router is built by a registry that builds its members".into()))?;
    check_names(s, Some(registry))?;
    let names = route_names(Some(registry));
    let mut members = Vec::new();
    for name in split(&s.members, "members")? {
        let member = registry.build_member(name, ctx.services.clone())?;
        members.push((name.to_string(), member));
    }
    let mut router = RoutedSubstrate::new_named_in(
        members,
        names.clone(),
        RoutingPolicy::default(),
        ctx.services.tokens.clone(),
    )?;
    if let Some(p) = &s.policy {
        let file = PolicyFile::load(Path::new(p)).map_err(|e| bad(format!("policy={p}: {e}")))?;
        if let Some(fitted_for) = &file.settings.members {
            let mut ours = router.member_names();
            ours.sort();
            let mut theirs = fitted_for.clone();
            theirs.sort();
            if ours != theirs {
                return Err(bad(format!(
                    "policy={p}: the policy was fitted for members {} but this router has {}; \
set members={}",
                    theirs.join("+"),
                    ours.join("+"),
                    theirs.join("+")
                )));
            }
        }
        router = router.with_fitted(file);
    }
    if s.signals {
        let mut settings = SignalSettings::default();
        if let Some(a) = s.agreement {
            settings = settings.with_min_agreement(a);
        }
        if let Some(m) = s.margin {
            settings = settings.with_min_margin(m);
        }
        router = router.with_signals(settings);
    }
    if let Some(c) = &s.compose {
        let pair = split(c, "compose")?;
        let (Some(a), Some(b)) = (
            pair.first().and_then(|n| names.parse_method(n)),
            pair.get(1).and_then(|n| names.parse_method(n)),
        ) else {
            return Err(bad(format!("compose={c}: name two members")));
        };
        router = router.with_composition(a, b, s.share)?;
    }
    Ok(router)
}

/// Every factory of the router: `router`.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![router_factory()]
}

//! [`RoutedSubstrate`]: several substrates behind one [`Substrate`]. Writes,
//! management, persistence and forgetting fan out to every member; each read
//! goes to the member a fitted [`PolicyFile`] cell picks for that query, or,
//! for cells without data, the paper-derived [`RoutingPolicy`]. Optional
//! runtime [`Signals`] may override the choice, and a choice may split the
//! budget with a second member ([`crate::compose`]).

use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, RwLock};

use crate::paper;
use submem_core::{
    Diagnostics, Error, Event, Family, Footprint, Forget, ManageReport, MethodId, Namespace, Query,
    Recall, Result, Substrate, SubstrateInfo, TokenCounter, WriteReport,
};
use submem_kit::persist::{begin_persist, check_manifest, read_json, write_json, write_manifest};

use crate::compose::{first_share, join_recalls, second_share};
use crate::explain::{CellExplanation, Explanation};
use crate::fitted::{compose_of, PolicyFile};
use crate::names::RouteNames;
use crate::policy::{Decision, Origin, RoutingPolicy, RoutingSignal};
use crate::signals::{SignalSettings, Signals};
use crate::RouterError;

const MANIFEST_NAME: &str = "Routed";
const FORMAT_VERSION: u32 = 1;
const STATE_FILE: &str = "router-state.json";

/// Several substrates behind a router.
#[derive(Debug)]
pub struct RoutedSubstrate {
    members: BTreeMap<MethodId, Arc<dyn Substrate>>,
    /// Each member's canonical routable name (`m1`, `m1-fill`), which a
    /// fitted choice must match.
    names: BTreeMap<MethodId, String>,
    /// The routable names the members and a fitted policy are read with.
    route_names: RouteNames,
    policy: RoutingPolicy,
    fitted: Option<PolicyFile>,
    signals: Option<SignalSettings>,
    forced: Option<(MethodId, MethodId, f64)>,
    tokens: Arc<dyn TokenCounter>,
    history_tokens: RwLock<HashMap<Namespace, u64>>,
}

impl RoutedSubstrate {
    /// Composes `members` (at most one per method) under `policy`; `tokens`
    /// measures history depth.
    pub fn new(
        members: Vec<Arc<dyn Substrate>>,
        policy: RoutingPolicy,
        tokens: Arc<dyn TokenCounter>,
    ) -> Result<Self> {
        // Paper methods keep their built-in names; any other member is named
        // by its method id, lower-cased.
        let papers = RouteNames::papers();
        let mut table = Vec::new();
        let mut named = Vec::new();
        for m in members {
            let method = m.info().method;
            let name = papers
                .method_name(&method)
                .map_or_else(|| method.as_str().to_ascii_lowercase(), str::to_string);
            table.push((name.clone(), name.clone(), method));
            named.push((name, m));
        }
        Self::new_named_in(named, RouteNames::new(table), policy, tokens)
    }

    /// Like [`RoutedSubstrate::new`], with each member's routable name
    /// (`m1-fill` for the fill-read M1), so a fitted policy that chose
    /// `m1-fill` is followed only when that variant is the M1 member.
    pub fn new_named(
        members: Vec<(String, Arc<dyn Substrate>)>,
        policy: RoutingPolicy,
        tokens: Arc<dyn TokenCounter>,
    ) -> Result<Self> {
        Self::new_named_in(members, RouteNames::papers(), policy, tokens)
    }

    /// Like [`RoutedSubstrate::new_named`], reading member names (and a
    /// fitted policy's choices) with `route_names`, the routable names of a
    /// registry, so plugins from any crate can be members.
    pub fn new_named_in(
        members: Vec<(String, Arc<dyn Substrate>)>,
        route_names: RouteNames,
        policy: RoutingPolicy,
        tokens: Arc<dyn TokenCounter>,
    ) -> Result<Self> {
        if members.is_empty() {
            return Err(RouterError::NoMembers.into());
        }
        let mut map = BTreeMap::new();
        let mut names = BTreeMap::new();
        for (name, m) in members {
            let method = m.info().method;
            if method == crate::ROUTED {
                return Err(RouterError::NestedRouter.into());
            }
            let canonical = match route_names.canonical_name(&name) {
                Some(c) if route_names.parse_method(c).as_ref() == Some(&method) => c.to_string(),
                _ => {
                    return Err(RouterError::BadPolicy(format!(
                        "member name {name:?} does not name a routable {method} substrate"
                    ))
                    .into())
                }
            };
            if map.insert(method.clone(), m).is_some() {
                return Err(RouterError::DuplicateMember(method).into());
            }
            names.insert(method, canonical);
        }
        Ok(RoutedSubstrate {
            members: map,
            names,
            route_names,
            policy,
            fitted: None,
            signals: None,
            forced: None,
            tokens,
            history_tokens: RwLock::new(HashMap::new()),
        })
    }

    /// Routes by a fitted policy first; the rules decide cells it has no
    /// (available) choice for.
    pub fn with_fitted(mut self, policy: PolicyFile) -> Self {
        self.fitted = Some(policy);
        self
    }

    /// Lets runtime signals override the choice (see [`crate::signals`]).
    pub fn with_signals(mut self, settings: SignalSettings) -> Self {
        self.signals = Some(settings);
        self
    }

    /// Always composes `first` (under `share` of the allowance) and `second`,
    /// whatever the policy says; for measuring composition.
    pub fn with_composition(
        mut self,
        first: MethodId,
        second: MethodId,
        share: f64,
    ) -> Result<Self> {
        for m in [&first, &second] {
            if !self.members.contains_key(m) {
                return Err(
                    RouterError::BadPolicy(format!("composition names {m}, not a member")).into(),
                );
            }
        }
        if first == second || !(share > 0.0 && share < 1.0) {
            return Err(RouterError::BadPolicy(
                "composition needs two different members and a share in (0, 1)".into(),
            )
            .into());
        }
        self.forced = Some((first, second, share));
        Ok(self)
    }

    /// The fitted policy, if any.
    pub fn fitted(&self) -> Option<&PolicyFile> {
        self.fitted.as_ref()
    }

    /// The methods composed.
    pub fn methods(&self) -> Vec<MethodId> {
        self.members.keys().cloned().collect()
    }

    /// The members' canonical names (`m1-fill`, `m2`), in method order.
    pub fn member_names(&self) -> Vec<String> {
        self.names.values().cloned().collect()
    }

    /// The member name of `method` (its default name if it is no member).
    fn name_of<'a>(&'a self, method: &'a MethodId) -> &'a str {
        self.names
            .get(method)
            .map(String::as_str)
            .or_else(|| self.route_names.method_name(method))
            .unwrap_or_else(|| method.as_str())
    }

    /// Tokens written so far to `namespace`.
    pub fn history_tokens(&self, namespace: &Namespace) -> u64 {
        self.history_tokens
            .read()
            .map(|h| h.get(namespace).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// What the router would do with `query`, before runtime signals.
    pub fn decide(&self, query: &Query) -> Result<Decision> {
        let history_tokens = self.history_tokens(&query.namespace);
        let signal = RoutingSignal {
            regime: query.regime,
            history_tokens,
            allowance: query.allowance(),
            budget: query.budget,
        };
        let depth = self.policy.depth(&signal);
        if let Some((first, second, share)) = &self.forced {
            return Ok(Decision {
                method: first.clone(),
                top_k: query.top_k,
                reason: format!(
                    "always composed with {} at share {share}",
                    self.name_of(second)
                ),
                depth,
                secondary: Some((second.clone(), *share)),
                origin: Origin::Forced,
            });
        }
        if let Some(d) = self.fitted_decision(query, history_tokens, depth) {
            return Ok(d);
        }
        self.policy
            .decide(&signal, &self.methods())
            .ok_or_else(|| RouterError::NoRoute(query.regime.to_string()).into())
    }

    fn fitted_decision(
        &self,
        query: &Query,
        history_tokens: u64,
        depth: crate::Depth,
    ) -> Option<Decision> {
        let file = self.fitted.as_ref()?;
        let key = file.key_for(query.regime, history_tokens, query.budget);
        let cell = file.cell(&key)?;
        let choice = cell.choice.as_ref()?;
        // The choice must be this very member: a policy that chose `m1-fill`
        // says nothing about a top-k `m1` member, so the rules decide then.
        let chosen = self.route_names.canonical_name(&choice.substrate)?;
        let method = self
            .route_names
            .parse_method(chosen)
            .filter(|m| self.names.get(m).is_some_and(|n| n == chosen))?;
        let secondary = compose_of(choice, &self.route_names)
            .filter(|(m, _)| self.members.contains_key(m) && *m != method);
        let best = cell.evidence.iter().find(|e| e.excluded.is_none());
        Some(Decision {
            method,
            top_k: choice.top_k,
            reason: match best {
                Some(e) => format!(
                    "fitted cell: best {} {:.3} over {} items, p50 {:.2} ms ({} k={})",
                    file.quality_metric.name(),
                    e.quality,
                    e.n,
                    e.p50_ms,
                    e.spec,
                    e.k
                ),
                None => "fitted cell".into(),
            },
            depth,
            secondary,
            origin: Origin::Fitted,
        })
    }

    /// Probe reads for the signals (BM25 and dense members, if present).
    async fn measure_signals(&self, query: &Query, k: usize) -> Result<Signals> {
        let probe = query.clone().with_top_k(k);
        let mut recalls = Vec::new();
        for method in [paper::M2, paper::M1] {
            recalls.push(match self.members.get(&method) {
                Some(m) => Some(m.read(&probe).await?),
                None => None,
            });
        }
        Ok(Signals::measure(
            recalls[0].as_ref(),
            recalls[1].as_ref(),
            k,
        ))
    }

    /// The decision for `query` after runtime signals, with the signals.
    async fn decide_with_signals(&self, query: &Query) -> Result<(Decision, Option<Signals>)> {
        let mut decision = self.decide(query)?;
        let Some(settings) = &self.signals else {
            return Ok((decision, None));
        };
        if decision.origin == Origin::Forced {
            return Ok((decision, None));
        }
        let signals = self.measure_signals(query, settings.k).await?;
        if signals.confident(settings)
            && self.members.contains_key(&settings.confident)
            && decision.method != settings.confident
        {
            decision = Decision {
                method: settings.confident.clone(),
                reason: format!(
                    "signals: dense/sparse agreement ≥ {} and BM25 margin ≥ {} (was {})",
                    settings.min_agreement,
                    settings.min_margin,
                    self.name_of(&decision.method)
                ),
                secondary: None,
                origin: Origin::Signal,
                ..decision
            };
        }
        Ok((decision, Some(signals)))
    }

    /// Why `query` goes where it goes: the buckets, the fitted cell and its
    /// evidence, the signals (measured whenever a BM25 member exists, even
    /// when they are not configured to act) and the decision.
    pub async fn explain(&self, query: &Query) -> Result<Explanation> {
        query.validate()?;
        let (decision, applied) = self.decide_with_signals(query).await?;
        let signals = match applied {
            Some(s) => Some(s),
            None if self.members.contains_key(&paper::M2) => Some(
                self.measure_signals(
                    query,
                    self.signals
                        .as_ref()
                        .map_or(SignalSettings::default().k, |s| s.k),
                )
                .await?,
            ),
            None => None,
        };
        let history_tokens = self.history_tokens(&query.namespace);
        let cell = self.fitted.as_ref().map(|f| {
            let key = f.key_for(query.regime, history_tokens, query.budget);
            CellExplanation {
                key,
                budget_range: f.budget_label(key.budget_bucket),
                depth_ratio: history_tokens as f64 / query.budget.max(1) as f64,
                quality_metric: f.quality_metric,
                cell: f.cell(&key).cloned(),
            }
        });
        Ok(Explanation {
            regime: query.regime,
            history_tokens,
            budget: query.budget,
            allowance: query.allowance(),
            members: self.member_names(),
            route: self.name_of(&decision.method).to_string(),
            composed_with: decision
                .secondary
                .as_ref()
                .map(|(m, _)| self.name_of(m).to_string()),
            signals,
            signals_act: self.signals.is_some(),
            cell,
            decision,
        })
    }

    async fn read_member(&self, method: &MethodId, query: &Query) -> Result<Recall> {
        let member = self
            .members
            .get(method)
            .ok_or(RouterError::NoRoute(query.regime.to_string()))?;
        member.read(query).await
    }

    /// Reads `decision.method` under its share of the allowance and the
    /// second member under the rest, then joins them.
    async fn read_composed(
        &self,
        query: &Query,
        decision: &Decision,
        second: MethodId,
        share: f64,
    ) -> Result<Recall> {
        let allowance = query.allowance();
        let filled = query.filled_budget();
        let under = |a: usize| {
            query
                .clone()
                .with_top_k(decision.top_k)
                .with_fixed_prompt_tokens(filled - a.min(filled))
        };
        let first = self
            .read_member(&decision.method, &under(first_share(allowance, share)))
            .await?;
        let rest = second_share(allowance, first.tokens, self.tokens.as_ref());
        let second = if rest == 0 {
            Recall::empty()
        } else {
            self.read_member(&second, &under(rest)).await?
        };
        Ok(join_recalls(first, second, allowance, self.tokens.as_ref()))
    }

    fn member_dir(dir: &Path, method: &MethodId) -> std::path::PathBuf {
        dir.join(method.to_string())
    }
}

#[async_trait]
impl Substrate for RoutedSubstrate {
    fn info(&self) -> SubstrateInfo {
        let name = format!(
            "routed({})",
            self.methods()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
        let mut info = SubstrateInfo::new(crate::ROUTED, Family::COMPOSITE, name)
            .with_llm(self.members.values().any(|m| m.info().needs_llm));
        info.training_free = self.members.values().all(|m| m.info().training_free);
        info
    }

    /// Writes to every member. A member's failure is returned naming it; the
    /// members before it have stored the events (each member validates the
    /// batch itself before storing, so a duplicate is refused by all).
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        let mut report = WriteReport::default();
        for (method, member) in &self.members {
            let r = member
                .write(namespace, events)
                .await
                .map_err(|e| Error::substrate(method.to_string(), "write", e))?;
            report.events = r.events;
            report.units += r.units;
        }
        let added: u64 = events
            .iter()
            .map(|e| self.tokens.count(&e.render()) as u64)
            .sum();
        if let Ok(mut h) = self.history_tokens.write() {
            *h.entry(namespace.clone()).or_insert(0) += added;
        }
        Ok(report)
    }

    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let (decision, _) = self.decide_with_signals(query).await?;
        tracing::debug!(method = %decision.method, top_k = decision.top_k, reason = %decision.reason, "routed read");
        match decision.secondary.clone() {
            Some((second, share)) => self.read_composed(query, &decision, second, share).await,
            None => {
                self.read_member(&decision.method, &query.clone().with_top_k(decision.top_k))
                    .await
            }
        }
    }

    async fn manage(&self) -> Result<ManageReport> {
        let mut total = ManageReport::default();
        for (method, member) in &self.members {
            let r = member
                .manage()
                .await
                .map_err(|e| Error::substrate(method.to_string(), "manage", e))?;
            total.changed += r.changed;
        }
        Ok(total)
    }

    fn footprint(&self) -> Footprint {
        let mut f = Footprint::default();
        for m in self.members.values() {
            let g = m.footprint();
            f.memory_bytes += g.memory_bytes;
            f.disk_bytes += g.disk_bytes;
            f.stored_tokens += g.stored_tokens;
            f.input_tokens = f.input_tokens.max(g.input_tokens);
        }
        f
    }

    /// Every member's counters, each name prefixed with its method
    /// (`m4.rule_notes`).
    fn diagnostics(&self) -> Diagnostics {
        self.members
            .iter()
            .flat_map(|(method, m)| {
                m.diagnostics()
                    .into_iter()
                    .map(move |(k, v)| (format!("{method}.{k}"), v))
            })
            .collect()
    }

    async fn persist(&self, dir: &Path) -> Result<()> {
        begin_persist(dir)?;
        for (method, member) in &self.members {
            member.persist(&Self::member_dir(dir, method)).await?;
        }
        let state: BTreeMap<String, u64> = self
            .history_tokens
            .read()
            .map(|h| {
                h.iter()
                    .map(|(k, v)| (k.as_str().to_string(), *v))
                    .collect()
            })
            .unwrap_or_default();
        write_json(&dir.join(STATE_FILE), &state)?;
        write_manifest(dir, MANIFEST_NAME, FORMAT_VERSION)
    }

    /// Restores every member. Members are restored one by one; if one fails
    /// the error names it and earlier members hold the restored state.
    async fn restore(&self, dir: &Path) -> Result<()> {
        check_manifest(dir, MANIFEST_NAME, FORMAT_VERSION)?;
        for method in self.members.keys() {
            let d = Self::member_dir(dir, method);
            if !d.is_dir() {
                return Err(Error::store(dir, format!("no state for member {method}")));
            }
        }
        let state: BTreeMap<String, u64> = read_json(&dir.join(STATE_FILE))?;
        let mut restored = HashMap::new();
        for (k, v) in state {
            restored.insert(Namespace::new(k)?, v);
        }
        for (method, member) in &self.members {
            member.restore(&Self::member_dir(dir, method)).await?;
        }
        if let Ok(mut h) = self.history_tokens.write() {
            *h = restored;
        }
        Ok(())
    }

    async fn forget(&self, target: &Forget) -> Result<usize> {
        let mut removed = 0;
        for (method, member) in &self.members {
            removed = removed.max(
                member
                    .forget(target)
                    .await
                    .map_err(|e| Error::substrate(method.to_string(), "forget", e))?,
            );
        }
        if let Ok(mut h) = self.history_tokens.write() {
            if let Forget::Namespace(ns) = target {
                h.remove(ns);
            }
        }
        Ok(removed)
    }
}

//! [`RoutedSubstrate`]: several substrates behind one [`Substrate`]. Writes,
//! management, persistence and forgetting fan out to every member; each read
//! goes to the member the [`RoutingPolicy`] picks for that query.

use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, RwLock};

use submem_core::persist::{begin_persist, check_manifest, read_json, write_json, write_manifest};
use submem_core::{
    Error, Event, Family, Footprint, Forget, ManageReport, MethodId, Namespace, Query, Recall,
    Result, Substrate, SubstrateInfo, TokenCounter, WriteReport,
};

use crate::policy::{Decision, RoutingPolicy, RoutingSignal};
use crate::RouterError;

const MANIFEST_NAME: &str = "Routed";
const FORMAT_VERSION: u32 = 1;
const STATE_FILE: &str = "router-state.json";

/// Several substrates behind a router.
#[derive(Debug)]
pub struct RoutedSubstrate {
    members: BTreeMap<MethodId, Arc<dyn Substrate>>,
    policy: RoutingPolicy,
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
        if members.is_empty() {
            return Err(RouterError::NoMembers.into());
        }
        let mut map = BTreeMap::new();
        for m in members {
            let method = m.info().method;
            if method == MethodId::Routed {
                return Err(RouterError::NestedRouter.into());
            }
            if map.insert(method, m).is_some() {
                return Err(RouterError::DuplicateMember(method).into());
            }
        }
        Ok(RoutedSubstrate {
            members: map,
            policy,
            tokens,
            history_tokens: RwLock::new(HashMap::new()),
        })
    }

    /// The methods composed.
    pub fn methods(&self) -> Vec<MethodId> {
        self.members.keys().copied().collect()
    }

    /// Tokens written so far to `namespace`.
    pub fn history_tokens(&self, namespace: &Namespace) -> u64 {
        self.history_tokens
            .read()
            .map(|h| h.get(namespace).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// What the router would do with `query`.
    pub fn decide(&self, query: &Query) -> Result<Decision> {
        let signal = RoutingSignal {
            regime: query.regime,
            history_tokens: self.history_tokens(&query.namespace),
            allowance: query.allowance(),
            budget: query.budget,
        };
        self.policy
            .decide(&signal, &self.methods())
            .ok_or_else(|| RouterError::NoRoute(query.regime.to_string()).into())
    }

    fn member_dir(dir: &Path, method: MethodId) -> std::path::PathBuf {
        dir.join(method.to_string())
    }
}

#[async_trait]
impl Substrate for RoutedSubstrate {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo {
            method: MethodId::Routed,
            family: Family::Composite,
            name: format!(
                "routed({})",
                self.methods()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            needs_llm: self.members.values().any(|m| m.info().needs_llm),
            training_free: self.members.values().all(|m| m.info().training_free),
        }
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
        let decision = self.decide(query)?;
        tracing::debug!(method = %decision.method, top_k = decision.top_k, reason = %decision.reason, "routed read");
        let member = self
            .members
            .get(&decision.method)
            .ok_or(RouterError::NoRoute(query.regime.to_string()))?;
        member.read(&query.clone().with_top_k(decision.top_k)).await
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

    async fn persist(&self, dir: &Path) -> Result<()> {
        begin_persist(dir)?;
        for (method, member) in &self.members {
            member.persist(&Self::member_dir(dir, *method)).await?;
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
            let d = Self::member_dir(dir, *method);
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
            member.restore(&Self::member_dir(dir, *method)).await?;
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

//! Activation substrates (*Harness the Memory*, family "Activation"):
//! M10 full context ([`FullContext`], below) and M11 episode-clustered
//! re-prefill ([`EpiCache`], EpiCache: k-means episodes, 25 % of each kept,
//! one episode per query, served from a prefilled KV cache when the local
//! model can; see [`epicache`]).
//!
//! # M10
//!
//! **Write**: each event's rendered text ([`Event::render`]) is appended to
//! its namespace's buffer. **Read**: the whole buffer, shown in time order;
//! when it does not fit [`Query::allowance`], the **oldest** units are dropped
//! first ([`PackPolicy::StopAtFirstUnfit`] over the units ranked newest
//! first), so what is shown is always a contiguous, most recent run of the
//! history. [`Recall::sources`] list every shown unit, newest first. The
//! query text is not used: full context does not retrieve.
//!
//! **Deviation from the paper**: the paper's M10 keeps the history as model
//! activations (a KV cache) of the reader; here it is kept as text and the
//! shared reader prefills it, which gives the same context at the same
//! budget. Nothing is ever summarised; `manage` does nothing.
//!
//! **Speed and size** (criterion medians, `cargo bench -p submem-kv`, 2-core
//! machine, turns of 20–30 words, whitespace token counter): read of 600
//! turns 83 µs at a 4k budget and 417 µs at 32k (the whole history); of
//! 100,000 units 89 µs at 4k and 826 µs at 32k (only the newest run that
//! fits is copied and counted); writes ≈ 550k units/s; ≈ 250 bytes per unit
//! of memory (text, source id, token count, id map).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> submem_core::Result<()> {
//! use submem_core::{test_utils::test_services, Event, Namespace, Query, Substrate, Turn};
//! use submem_kv::{FullContext, FullContextConfig};
//! let m10 = FullContext::new(test_services(None), FullContextConfig::default())?;
//! let ns = Namespace::new("alice")?;
//! let turn = |id: &str, text: &str| Event::Turn(Turn {
//!     session_id: "s1".into(), session_date: None, speaker: "A".into(),
//!     text: text.into(), source_id: id.into(),
//! });
//! m10.write(&ns, &[turn("1", "an old remark"), turn("2", "the newest one")]).await?;
//! let recall = m10.read(&Query::question(ns, "anything", 4096)).await?;
//! assert_eq!(recall.text, "A: an old remark\nA: the newest one");
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod buffer;
mod config;
pub mod epicache;
mod error;
pub mod factory;

/// The method id of full context (*Harness the Memory*, M10).
pub const M10: submem_core::MethodId = submem_core::MethodId::from_static("M10");
/// The method id of episode-clustered re-prefill (EpiCache; *Harness the Memory*, M11).
pub const M11: submem_core::MethodId = submem_core::MethodId::from_static(epicache::METHOD);

pub use config::FullContextConfig;
pub use epicache::{EpiCache, EpiCacheConfig, EpiCacheStats, ReaderHead};
pub use error::KvError;
pub use factory::factories;

use async_trait::async_trait;
use std::collections::HashMap;
use std::path::Path;
use submem_core::{
    Error, Event, Family, Footprint, Forget, Namespace, Query, Recall, Result, Services, Substrate,
    SubstrateInfo, WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::persist::{begin_persist, check_manifest, read_json, write_json, write_manifest};
use submem_kit::render::UNIT_SEPARATOR;
use submem_kit::spaces::Spaces;
use submem_kit::{render_in_time_order, PackPolicy, RankedUnit};

use buffer::Buffer;

const MANIFEST_NAME: &str = "M10 full-context";
const FORMAT_VERSION: u32 = 1;
const STATE_FILE: &str = "full-context.json";

#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    namespaces: Vec<(Namespace, Buffer)>,
}

/// M10: the whole history, truncated oldest-first to the budget.
pub struct FullContext {
    services: Services,
    config: FullContextConfig,
    buffers: Spaces<Buffer>,
}

submem_kit::debug_fields!(FullContext { config });

impl FullContext {
    /// A new, empty full-context memory; uses `services.tokens` only.
    pub fn new(services: Services, config: FullContextConfig) -> Result<Self> {
        if !config.source_score.is_finite() {
            return Err(Error::InvalidInput(
                KvError::Config("source_score must be finite".into()).to_string(),
            ));
        }
        Ok(FullContext {
            services,
            config,
            buffers: Spaces::new(),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &FullContextConfig {
        &self.config
    }
}

/// Whether a source id is already in `existing` (for [`check_new_sources`]).
fn stored_in(existing: Option<&Buffer>) -> impl Fn(&str) -> bool + '_ {
    move |id| existing.is_some_and(|b| b.ids.contains_key(id))
}

#[async_trait]
impl Substrate for FullContext {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(crate::M10, Family::ACTIVATION, "full-context")
    }

    #[tracing::instrument(name = "m10.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        check_new_sources(events, stored_in(self.buffers.read().get(namespace)))?;
        let items: Vec<(String, String, u32)> = events
            .iter()
            .map(|e| {
                let text = e.render();
                let tokens = u32::try_from(self.services.tokens.count(&text)).unwrap_or(u32::MAX);
                (e.source_id().to_string(), text, tokens)
            })
            .collect();
        let mut buffers = self.buffers.write();
        // Another task may have written the same ids since validation.
        check_new_sources(events, stored_in(buffers.get(namespace)))?;
        let n = buffers.entry(namespace.clone()).or_default().append(items);
        Ok(WriteReport {
            events: n,
            units: n,
        })
    }

    #[tracing::instrument(name = "m10.read", skip_all, fields(ns = %query.namespace))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let allowance = query.allowance();
        let separator = self.services.tokens.count(UNIT_SEPARATOR);
        // Stored counts tell which newest run can fit; only those texts (and
        // the first that cannot) are copied out and packed.
        let ranked: Vec<RankedUnit> = {
            let buffers = self.buffers.read();
            let Some(buffer) = buffers.get(&query.namespace) else {
                return Ok(Recall::empty());
            };
            let mut used = 0usize;
            let mut out = Vec::new();
            for u in buffer.units.iter().rev() {
                out.push(RankedUnit {
                    position: u.position,
                    source_id: u.source_id.clone(),
                    text: u.text.clone(),
                    score: self.config.source_score,
                });
                used += u.tokens as usize + if out.len() > 1 { separator } else { 0 };
                if used > allowance {
                    break;
                }
            }
            out
        };
        Ok(render_in_time_order(
            &ranked,
            &*self.services.tokens,
            allowance,
            PackPolicy::StopAtFirstUnfit,
        ))
    }

    fn footprint(&self) -> Footprint {
        self.buffers
            .footprint(|_, b| Footprint::verbatim(b.tokens(), b.memory_bytes()))
    }

    #[tracing::instrument(name = "m10.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        let saved = {
            let buffers = self.buffers.read();
            let mut namespaces: Vec<(Namespace, Buffer)> = buffers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            namespaces.sort_by(|a, b| a.0.cmp(&b.0));
            Saved { namespaces }
        };
        begin_persist(dir)?;
        let path = dir.join(STATE_FILE);
        write_json(&path, &saved)?;
        write_manifest(dir, MANIFEST_NAME, FORMAT_VERSION)?;
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        self.buffers.set_disk_bytes(bytes);
        Ok(())
    }

    #[tracing::instrument(name = "m10.restore", skip_all, fields(dir = %dir.display()))]
    async fn restore(&self, dir: &Path) -> Result<()> {
        check_manifest(dir, MANIFEST_NAME, FORMAT_VERSION)?;
        let path = dir.join(STATE_FILE);
        let saved: Saved = read_json(&path)?;
        let mut restored = HashMap::with_capacity(saved.namespaces.len());
        for (ns, mut buffer) in saved.namespaces {
            buffer
                .reindex()
                .map_err(|reason| Error::store(&path, format!("namespace {ns}: {reason}")))?;
            if restored.insert(ns.clone(), buffer).is_some() {
                return Err(Error::store(&path, format!("namespace {ns} appears twice")));
            }
        }
        *self.buffers.write() = restored;
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        self.buffers.set_disk_bytes(bytes);
        Ok(())
    }

    #[tracing::instrument(name = "m10.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        let mut buffers = self.buffers.write();
        Ok(match target {
            Forget::Namespace(ns) => buffers.remove(ns).map_or(0, |b| b.units.len()),
            Forget::Sources {
                namespace,
                source_ids,
            } => buffers
                .get_mut(namespace)
                .map_or(0, |b| b.forget(source_ids)),
        })
    }
}

//! # Keyword echo: a substrate written outside the submem workspace
//!
//! [`KeywordEcho`] keeps every event as text and, for a query, shows the
//! events that share the most content words with it (stop words left out,
//! see [`submem_kit::text`]), newest first among equals, at most `top_k` of
//! them, packed under the query's allowance and shown in time order. It is a
//! toy lexical retriever: BM25 (`m2`) weighs rare words higher, this counts
//! them all alike.
//!
//! Everything a registry needs comes from [`factory`]: the name users type
//! (`keyword-echo`, alias `echo`), a method id and family of its own, and a
//! settings type ([`EchoSettings`]) checked before anything is built.
//! `src/main.rs` runs the conformance suite on it and then a bench.

#![warn(missing_docs)]

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use submem_core::persist::{load_states, save_states, NamespaceStates};
use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
use submem_core::{
    render_in_time_order, Error, Event, Family, Footprint, Forget, MethodId, Namespace, PackPolicy,
    Query, RankedUnit, Recall, Result, Substrate, SubstrateInfo, TokenCounter, WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::text::{content_words, query_terms};

/// The method id: open, so any crate can name its own.
pub const METHOD: MethodId = MethodId::from_static("KeywordEcho");
/// A family of its own (`Family::new("example")?` at run time).
pub const FAMILY: Family = Family::from_static("example");
const MANIFEST_NAME: &str = "KeywordEcho keyword-echo";
const FORMAT_VERSION: u32 = 1;
const STATE_FILE: &str = "keyword-echo.json";

/// Settings of `keyword-echo` (`keyword-echo:min_shared=2`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EchoSettings {
    /// Content words an event must share with the query to be shown (at least 1).
    pub min_shared: usize,
}

impl Default for EchoSettings {
    fn default() -> Self {
        EchoSettings { min_shared: 1 }
    }
}

impl SubstrateSettings for EchoSettings {
    fn validate(&self) -> Result<()> {
        if self.min_shared == 0 {
            return Err(Error::InvalidInput(
                "min_shared must be at least 1 (0 would show unrelated events)".into(),
            ));
        }
        Ok(())
    }
}

/// The factory a registry builds `keyword-echo` with.
pub fn factory() -> SubstrateFactory {
    SubstrateFactory::builder("keyword-echo", METHOD, FAMILY)
        .aliases(&["echo"])
        .paper("an out-of-tree example (no paper)")
        .summary("events sharing the most words with the query, newest first on ties")
        .llm(LlmUse::Never)
        .settings(EchoSettings::default())
        .build(|ctx, settings: EchoSettings| {
            Ok(Arc::new(KeywordEcho::new(
                ctx.services.tokens.clone(),
                settings,
            )?))
        })
}

/// One stored event.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    source_id: String,
    /// [`Event::render`], what a recall shows.
    text: String,
    /// Distinct content words of [`Event::content`].
    words: Vec<String>,
    tokens: u64,
}

/// One namespace's events, oldest first, with its source ids.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Log {
    events: Vec<Stored>,
    #[serde(skip)]
    ids: HashSet<String>,
}

impl Log {
    fn reindex(&mut self) -> std::result::Result<(), String> {
        self.ids.clear();
        for e in &self.events {
            if !self.ids.insert(e.source_id.clone()) {
                return Err(format!("source id {:?} is stored twice", e.source_id));
            }
        }
        Ok(())
    }
}

/// The keyword-echo substrate (see the crate docs).
#[derive(Debug)]
pub struct KeywordEcho {
    counter: Arc<dyn TokenCounter>,
    settings: EchoSettings,
    logs: RwLock<HashMap<Namespace, Log>>,
    disk_bytes: AtomicU64,
}

impl KeywordEcho {
    /// An empty memory counting tokens with `counter`.
    pub fn new(counter: Arc<dyn TokenCounter>, settings: EchoSettings) -> Result<Self> {
        settings.validate()?;
        Ok(KeywordEcho {
            counter,
            settings,
            logs: RwLock::new(HashMap::new()),
            disk_bytes: AtomicU64::new(0),
        })
    }

    // State changes are made whole after their checks, so a poisoned lock
    // still guards a consistent state.
    fn read_lock(&self) -> RwLockReadGuard<'_, HashMap<Namespace, Log>> {
        self.logs.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_lock(&self) -> RwLockWriteGuard<'_, HashMap<Namespace, Log>> {
        self.logs.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Substrate for KeywordEcho {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo {
            method: METHOD,
            family: FAMILY,
            name: "keyword-echo".into(),
            needs_llm: false,
            training_free: true,
        }
    }

    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        let stored: Vec<Stored> = events
            .iter()
            .map(|e| {
                let text = e.render();
                Stored {
                    source_id: e.source_id().to_string(),
                    tokens: self.counter.count(&text) as u64,
                    words: query_terms(&e.content()),
                    text,
                }
            })
            .collect();
        let mut logs = self.write_lock();
        let existing = logs.get(namespace);
        check_new_sources(events, |id| existing.is_some_and(|l| l.ids.contains(id)))?;
        if !stored.is_empty() {
            let log = logs.entry(namespace.clone()).or_default();
            log.ids.extend(stored.iter().map(|s| s.source_id.clone()));
            log.events.extend(stored);
        }
        Ok(WriteReport {
            events: events.len(),
            units: events.len(),
        })
    }

    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let terms: HashSet<String> = content_words(&query.retrieval_text()).into_iter().collect();
        let logs = self.read_lock();
        let Some(log) = logs.get(&query.namespace) else {
            return Ok(Recall::empty());
        };
        // (shared words, position), best first: more words, then newer.
        let mut hits: Vec<(usize, usize)> = log
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| (e.words.iter().filter(|w| terms.contains(*w)).count(), i))
            .filter(|(shared, _)| *shared >= self.settings.min_shared)
            .collect();
        hits.sort_by(|a, b| b.cmp(a));
        hits.truncate(query.top_k);
        let ranked: Vec<RankedUnit> = hits
            .into_iter()
            .map(|(shared, i)| RankedUnit {
                position: i as u64,
                source_id: log.events[i].source_id.clone(),
                text: log.events[i].text.clone(),
                score: shared as f32,
            })
            .collect();
        Ok(render_in_time_order(
            &ranked,
            self.counter.as_ref(),
            query.allowance(),
            PackPolicy::SkipUnfit,
        ))
    }

    fn footprint(&self) -> Footprint {
        let logs = self.read_lock();
        let mut fp = Footprint {
            disk_bytes: self.disk_bytes.load(Ordering::Relaxed),
            ..Footprint::default()
        };
        for e in logs.values().flat_map(|l| &l.events) {
            fp.memory_bytes += (e.text.len() + e.source_id.len() * 2) as u64
                + e.words.iter().map(|w| w.len() as u64).sum::<u64>();
            fp.stored_tokens += e.tokens;
        }
        fp.input_tokens = fp.stored_tokens;
        fp
    }

    async fn persist(&self, dir: &Path) -> Result<()> {
        let states = {
            let logs = self.read_lock();
            NamespaceStates::new(None, logs.iter().map(|(n, l)| (n.clone(), l.clone())))
        };
        let bytes = save_states(dir, MANIFEST_NAME, FORMAT_VERSION, STATE_FILE, &states)?;
        self.disk_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    async fn restore(&self, dir: &Path) -> Result<()> {
        let loaded = load_states::<Log>(dir, MANIFEST_NAME, FORMAT_VERSION, STATE_FILE)?;
        let bytes = loaded.bytes;
        let logs = loaded.validated(None, |_, log| log.reindex())?;
        *self.write_lock() = logs.into_iter().collect();
        self.disk_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    async fn forget(&self, target: &Forget) -> Result<usize> {
        let mut logs = self.write_lock();
        Ok(match target {
            Forget::Namespace(ns) => logs.remove(ns).map_or(0, |l| l.events.len()),
            Forget::Sources {
                namespace,
                source_ids,
            } => match logs.get_mut(namespace) {
                Some(log) => {
                    let drop: HashSet<&str> = source_ids.iter().map(String::as_str).collect();
                    let before = log.events.len();
                    log.events.retain(|e| !drop.contains(e.source_id.as_str()));
                    log.ids.retain(|id| !drop.contains(id.as_str()));
                    before - log.events.len()
                }
                None => 0,
            },
        })
    }
}

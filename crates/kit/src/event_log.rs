//! A whole substrate from a ranking rule: each namespace's events kept as
//! text in a log, with the writes' checks, forget, footprint and
//! persistence written once; the author writes only how to rank.
//!
//! Most new memory ideas are a way to choose which stored events a query
//! should see (lexical overlap, recency, a decay, a mix). [`EventLog`] is
//! every other part of such a substrate: it renders and counts each event
//! once at write time (plus whatever per-event data the rule wants, its
//! [`LogRanker::Extra`]), refuses a batch that repeats or reuses a source id
//! ([`check_new_sources`]), forgets by namespace or source id, reports its
//! footprint, persists and restores through a [`StateFile`], and reads by
//! packing the ranked events into the query's allowance by their cached
//! counts ([`crate::pack`]), shown in time order.
//!
//! ```
//! use std::sync::Arc;
//! use submem_core::{Event, Family, MethodId, Namespace, Query, Substrate, SubstrateInfo, Turn};
//! use submem_core::test_utils::WhitespaceCounter;
//! use submem_kit::event_log::{EventLog, LogRanker, Logged};
//! use submem_kit::state::StateFile;
//!
//! /// Shows the longest events first.
//! #[derive(Debug)]
//! struct Longest;
//!
//! impl LogRanker for Longest {
//!     type Extra = ();
//!     fn info(&self) -> SubstrateInfo {
//!         let method = MethodId::from_static("Longest");
//!         SubstrateInfo::new(method, Family::from_static("example"), "longest")
//!     }
//!     fn state_file(&self) -> StateFile {
//!         StateFile::new("Longest longest", 1, "longest.json")
//!     }
//!     fn extra(&self, _event: &Event) {}
//!     fn rank(&self, events: &[Logged<()>], _query: &Query) -> Vec<(usize, f32)> {
//!         let mut ranked: Vec<(usize, f32)> =
//!             events.iter().enumerate().map(|(i, e)| (i, e.tokens as f32)).collect();
//!         ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
//!         ranked
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> submem_core::Result<()> {
//! let memory = EventLog::new(Longest, Arc::new(WhitespaceCounter));
//! let ns = Namespace::new("ana")?;
//! let turn = |id: &str, text: &str| Event::Turn(Turn {
//!     session_id: "s1".into(), session_date: None, speaker: "Ana".into(),
//!     text: text.into(), source_id: id.into(),
//! });
//! memory.write(&ns, &[turn("t1", "hi"), turn("t2", "I moved to Oslo last May")]).await?;
//! // "Ana: hi" is 2 whitespace tokens, the other 7: an allowance of 7 holds only the longer one.
//! let recall = memory.read(&Query::question(ns, "where?", 100).with_fixed_prompt_tokens(88)).await?;
//! assert_eq!(recall.source_ids().collect::<Vec<_>>(), ["t2"]);
//! # Ok(())
//! # }
//! ```

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::render::UNIT_SEPARATOR;
use crate::{render_in_time_order, PackPolicy, RankedUnit};
use submem_core::{
    Event, Footprint, Forget, Query, Recall, Result, Substrate, SubstrateInfo, TokenCounter,
    WriteReport,
};

use crate::batch::{check_new_sources, stored_ids};
use crate::render::Fill;
use crate::spaces::Spaces;
use crate::state::StateFile;

/// The part of an [`EventLog`] substrate its author writes: what it is,
/// where it persists, what it keeps beside each event, and how it ranks.
pub trait LogRanker: fmt::Debug + Send + Sync + 'static {
    /// Data kept beside each event, computed once when the event is written
    /// (its content words, a feature, a vector): `()` when ranking needs
    /// only the text. Persisted with the log; a missing field reads as
    /// `Default`, so a log saved before a field was added still restores.
    type Extra: Clone + fmt::Debug + Default + Serialize + DeserializeOwned + Send + Sync + 'static;

    /// The substrate's identity, as [`Substrate::info`] reports it.
    fn info(&self) -> SubstrateInfo;

    /// Where and how the log persists (manifest name, format version,
    /// file name): bump the version when [`Self::Extra`] changes shape.
    fn state_file(&self) -> StateFile;

    /// The data kept beside `event`.
    fn extra(&self, event: &Event) -> Self::Extra;

    /// The events `query` should see, best first, as (index into `events`,
    /// score). `events` are the namespace's, oldest first. Leave out what
    /// should never be shown; the log shows as many of the rest as the
    /// query's allowance holds.
    ///
    /// The log does not apply `query.top_k`: a ranker whose method has a
    /// retrieval breadth returns at most `top_k` entries (the `k` the
    /// harness sweeps), one that fills the budget may return them all.
    fn rank(&self, events: &[Logged<Self::Extra>], query: &Query) -> Vec<(usize, f32)>;

    /// What to do with a ranked event that does not fit: skip it and try
    /// the next (the default, right for relevance), or stop there (keeps a
    /// contiguous run, as a recency window does).
    fn packing(&self) -> PackPolicy {
        PackPolicy::SkipUnfit
    }
}

/// One logged event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Logged<X> {
    /// The event's source id.
    pub source_id: String,
    /// [`Event::render`]: what a recall shows.
    pub text: String,
    /// Tokens of `text` by the log's counter.
    pub tokens: u32,
    /// The ranker's data for this event.
    #[serde(default)]
    pub extra: X,
}

impl<X> Logged<X> {
    fn memory_bytes(&self) -> u64 {
        (std::mem::size_of::<Self>() + 2 * self.source_id.len() + self.text.len()) as u64
    }
}

/// One namespace's events, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(deserialize = "X: Default + DeserializeOwned"))]
struct Log<X> {
    events: Vec<Logged<X>>,
    /// Source ids of `events` (rebuilt on restore).
    #[serde(skip)]
    ids: HashSet<String>,
    /// Sum of `events`' tokens (rebuilt on restore).
    #[serde(skip)]
    tokens: u64,
    /// Approximate bytes held (rebuilt on restore).
    #[serde(skip)]
    bytes: u64,
}

impl<X> Default for Log<X> {
    fn default() -> Self {
        Log {
            events: Vec::new(),
            ids: HashSet::new(),
            tokens: 0,
            bytes: 0,
        }
    }
}

impl<X> Log<X> {
    /// Rebuilds the derived fields, refusing what a log never holds.
    fn reindex(&mut self) -> std::result::Result<(), String> {
        self.ids.clear();
        self.tokens = 0;
        self.bytes = 0;
        for e in &self.events {
            if e.source_id.is_empty() || e.text.is_empty() {
                return Err(format!("event {:?} is empty", e.source_id));
            }
            if !self.ids.insert(e.source_id.clone()) {
                return Err(format!("source id {:?} is stored twice", e.source_id));
            }
            self.tokens += u64::from(e.tokens);
            self.bytes += e.memory_bytes();
        }
        Ok(())
    }

    fn append(&mut self, events: Vec<Logged<X>>) {
        for e in events {
            self.ids.insert(e.source_id.clone());
            self.tokens += u64::from(e.tokens);
            self.bytes += e.memory_bytes();
            self.events.push(e);
        }
    }

    /// Removes the listed source ids; returns how many were stored.
    fn forget(&mut self, source_ids: &[String]) -> usize {
        let drop = stored_ids(source_ids, |id| self.ids.contains(id));
        if drop.is_empty() {
            return 0;
        }
        self.events.retain(|e| !drop.contains(e.source_id.as_str()));
        // Cannot fail: what is left was valid before.
        let _ = self.reindex();
        drop.len()
    }

    /// The ranked events that fit `allowance` by their cached counts (plus
    /// a separator before each but the first), as units; only these are
    /// copied out of the log.
    fn pack(
        &self,
        ranked: Vec<(usize, f32)>,
        allowance: usize,
        separator: usize,
        policy: PackPolicy,
    ) -> Vec<RankedUnit> {
        let mut fill = Fill::new(allowance, separator);
        let mut chosen = Vec::new();
        for (i, score) in ranked {
            let Some(e) = self.events.get(i) else {
                continue;
            };
            if fill.admit(e.tokens as usize) {
                chosen.push(RankedUnit {
                    position: i as u64,
                    source_id: e.source_id.clone(),
                    text: e.text.clone(),
                    score,
                });
            } else if policy == PackPolicy::StopAtFirstUnfit {
                break;
            }
        }
        chosen
    }
}

/// A substrate made of a [`LogRanker`] and an event log per namespace (see
/// the module docs).
pub struct EventLog<R: LogRanker> {
    ranker: R,
    counter: Arc<dyn TokenCounter>,
    logs: Spaces<Log<R::Extra>>,
}

impl<R: LogRanker> fmt::Debug for EventLog<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventLog")
            .field("ranker", &self.ranker)
            .field("logs", &self.logs)
            .finish()
    }
}

impl<R: LogRanker> EventLog<R> {
    /// An empty log ranked by `ranker`, counting tokens with `counter` (the
    /// services' [`TokenCounter`], so recalls are counted as the reader
    /// counts them).
    pub fn new(ranker: R, counter: Arc<dyn TokenCounter>) -> Self {
        EventLog {
            ranker,
            counter,
            logs: Spaces::new(),
        }
    }

    /// The ranking rule.
    pub fn ranker(&self) -> &R {
        &self.ranker
    }
}

#[async_trait]
impl<R: LogRanker> Substrate for EventLog<R> {
    fn info(&self) -> SubstrateInfo {
        self.ranker.info()
    }

    async fn write(
        &self,
        namespace: &submem_core::Namespace,
        events: &[Event],
    ) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        // Render, count and derive outside the lock: they are the expensive part.
        let logged: Vec<Logged<R::Extra>> = events
            .iter()
            .map(|e| {
                let text = e.render();
                Logged {
                    source_id: e.source_id().to_string(),
                    tokens: u32::try_from(self.counter.count(&text)).unwrap_or(u32::MAX),
                    extra: self.ranker.extra(e),
                    text,
                }
            })
            .collect();
        let mut logs = self.logs.write();
        let existing = logs.get(namespace);
        check_new_sources(events, |id| existing.is_some_and(|l| l.ids.contains(id)))?;
        logs.entry(namespace.clone()).or_default().append(logged);
        Ok(WriteReport {
            events: events.len(),
            units: events.len(),
        })
    }

    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let allowance = query.allowance();
        let separator = self.counter.count(UNIT_SEPARATOR);
        let policy = self.ranker.packing();
        let chosen = {
            let logs = self.logs.read();
            let Some(log) = logs.get(&query.namespace) else {
                return Ok(Recall::empty());
            };
            let ranked = self.ranker.rank(&log.events, query);
            log.pack(ranked, allowance, separator, policy)
        };
        Ok(render_in_time_order(
            &chosen,
            self.counter.as_ref(),
            allowance,
            policy,
        ))
    }

    fn footprint(&self) -> Footprint {
        self.logs
            .footprint(|_, log| Footprint::verbatim(log.tokens, log.bytes))
    }

    async fn persist(&self, dir: &Path) -> Result<()> {
        self.logs.save(&self.ranker.state_file(), dir, None)
    }

    async fn restore(&self, dir: &Path) -> Result<()> {
        self.logs
            .restore(&self.ranker.state_file(), dir, None, |_, log| log.reindex())
    }

    async fn forget(&self, target: &Forget) -> Result<usize> {
        Ok(match target {
            Forget::Namespace(ns) => self.logs.remove(ns).map_or(0, |l| l.events.len()),
            Forget::Sources {
                namespace,
                source_ids,
            } => self
                .logs
                .write()
                .get_mut(namespace)
                .map_or(0, |l| l.forget(source_ids)),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use submem_core::test_utils::{test_services, WhitespaceCounter};
    use submem_core::testing::{run_conformance, ConformanceOptions};
    use submem_core::{Family, MethodId, Namespace, Turn};

    /// Ranks events by how many of the query's words they hold, stores the
    /// lower-cased words as its extra.
    #[derive(Debug)]
    struct Overlap;

    impl LogRanker for Overlap {
        type Extra = Vec<String>;
        fn info(&self) -> SubstrateInfo {
            SubstrateInfo::new(
                MethodId::from_static("Overlap"),
                Family::from_static("test"),
                "overlap",
            )
        }
        fn state_file(&self) -> StateFile {
            StateFile::new("Overlap overlap", 1, "overlap.json")
        }
        fn extra(&self, event: &Event) -> Vec<String> {
            event
                .content()
                .split_whitespace()
                .map(str::to_lowercase)
                .collect()
        }
        fn rank(&self, events: &[Logged<Vec<String>>], query: &Query) -> Vec<(usize, f32)> {
            let words: HashSet<String> = query
                .retrieval_text()
                .split_whitespace()
                .map(str::to_lowercase)
                .collect();
            let mut ranked: Vec<(usize, f32)> = events
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    (
                        i,
                        e.extra.iter().filter(|w| words.contains(*w)).count() as f32,
                    )
                })
                .filter(|(_, s)| *s > 0.0)
                .collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
            ranked
        }
    }

    fn turn(id: &str, text: &str) -> Event {
        Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "A".into(),
            text: text.into(),
            source_id: id.into(),
        })
    }

    #[tokio::test]
    async fn passes_the_conformance_suite() {
        let services = test_services(None);
        let tokens = services.tokens.clone();
        run_conformance(
            move || -> Box<dyn Substrate> {
                Box::new(EventLog::new(Overlap, services.tokens.clone()))
            },
            tokens,
            ConformanceOptions::default(),
        )
        .await;
    }

    #[tokio::test]
    async fn reads_what_the_rule_ranks_in_time_order_under_the_budget() {
        let log = EventLog::new(Overlap, Arc::new(WhitespaceCounter));
        let ns = Namespace::new("n").unwrap();
        log.write(
            &ns,
            &[
                turn("t1", "oslo is cold"),
                turn("t2", "nothing here"),
                turn("t3", "ana lives in oslo"),
            ],
        )
        .await
        .unwrap();
        let r = log
            .read(&Query::question(ns.clone(), "does ana like oslo", 4096))
            .await
            .unwrap();
        assert_eq!(
            r.source_ids().collect::<Vec<_>>(),
            ["t3", "t1"],
            "best first"
        );
        assert_eq!(
            r.text, "A: oslo is cold\nA: ana lives in oslo",
            "time order"
        );
        // Allowance 5: only t3 (5 tokens) fits; t1 (4) would need 4 + 1 more.
        let q = Query::question(ns.clone(), "does ana like oslo", 100).with_fixed_prompt_tokens(90);
        assert_eq!(q.allowance(), 5);
        let r = log.read(&q).await.unwrap();
        assert_eq!(r.source_ids().collect::<Vec<_>>(), ["t3"]);
        assert_eq!(r.tokens, 5);
    }

    #[tokio::test]
    async fn persists_forgets_and_refuses_a_corrupt_log() {
        let log = EventLog::new(Overlap, Arc::new(WhitespaceCounter));
        let ns = Namespace::new("n").unwrap();
        log.write(&ns, &[turn("t1", "oslo"), turn("t2", "bergen")])
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        log.persist(dir.path()).await.unwrap();
        let copy = EventLog::new(Overlap, Arc::new(WhitespaceCounter));
        copy.restore(dir.path()).await.unwrap();
        assert_eq!(copy.footprint().stored_tokens, 4);
        assert!(copy.footprint().disk_bytes > 0);
        assert!(
            copy.write(&ns, &[turn("t1", "x")]).await.is_err(),
            "ids restored"
        );
        let q = Query::question(ns.clone(), "bergen", 4096);
        assert_eq!(
            copy.read(&q)
                .await
                .unwrap()
                .source_ids()
                .collect::<Vec<_>>(),
            ["t2"]
        );

        let forgot = copy
            .forget(&Forget::Sources {
                namespace: ns.clone(),
                source_ids: vec!["t2".into(), "nope".into()],
            })
            .await
            .unwrap();
        assert_eq!(forgot, 1);
        assert!(copy.read(&q).await.unwrap().sources.is_empty());
        assert_eq!(
            copy.forget(&Forget::Namespace(ns.clone())).await.unwrap(),
            1
        );
        assert_eq!(copy.footprint().stored_tokens, 0);

        let path = dir.path().join("overlap.json");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"t2\"", "\"t1\"")).unwrap();
        let err = copy.restore(dir.path()).await.unwrap_err().to_string();
        assert!(err.contains("stored twice"), "{err}");
    }
}

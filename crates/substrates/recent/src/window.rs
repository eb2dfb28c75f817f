//! The recency window: every event kept as text, a read shows the newest
//! ones that fit, in time order.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use submem_core::plugin::SubstrateSettings as _;
use submem_core::render::UNIT_SEPARATOR;
use submem_core::{
    render_in_time_order, Event, Family, Footprint, Forget, MethodId, Namespace, PackPolicy, Query,
    RankedUnit, Recall, Result, Substrate, SubstrateInfo, TokenCounter, WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::spaces::Spaces;
use submem_kit::state::StateFile;

use crate::{RecentError, RecentSettings};

/// The method id of the recency window.
pub const METHOD: MethodId = MethodId::from_static("RecentWindow");
/// The short name [`Substrate::info`] reports.
const NAME: &str = "recent-window";
/// What the manifest of a persisted window says it holds.
const MANIFEST_NAME: &str = "RecentWindow recent-window";
/// The shape of [`STATE_FILE`]; bump it when [`Window`] changes.
const FORMAT_VERSION: u32 = 1;
/// The one state file of a persisted window.
const STATE_FILE: &str = "recent-window.json";
/// The store as persisted: manifest name, format version, state file.
const STATE: StateFile = StateFile::new(MANIFEST_NAME, FORMAT_VERSION, STATE_FILE);

/// One stored event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Stored {
    source_id: String,
    /// [`Event::render`].
    text: String,
    /// Tokens of `text` by the window's counter.
    tokens: u32,
}

impl Stored {
    fn memory_bytes(&self) -> u64 {
        (std::mem::size_of::<Self>() + 2 * self.source_id.len() + self.text.len()) as u64
    }
}

/// One namespace's events, oldest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Window {
    events: Vec<Stored>,
    /// The source ids in `events` (rebuilt on restore).
    #[serde(skip)]
    ids: HashSet<String>,
    /// Sum of `events`' tokens (rebuilt on restore).
    #[serde(skip)]
    tokens: u64,
    /// Approximate bytes held (rebuilt on restore).
    #[serde(skip)]
    bytes: u64,
}

impl Window {
    /// Rebuilds the derived fields after deserialisation, refusing what a
    /// window never holds.
    fn reindex(&mut self) -> std::result::Result<(), RecentError> {
        self.ids.clear();
        self.tokens = 0;
        self.bytes = 0;
        for e in &self.events {
            if e.source_id.is_empty() || e.text.is_empty() {
                return Err(RecentError::EmptyEvent(e.source_id.clone()));
            }
            if !self.ids.insert(e.source_id.clone()) {
                return Err(RecentError::DuplicateSource(e.source_id.clone()));
            }
            self.tokens += u64::from(e.tokens);
            self.bytes += e.memory_bytes();
        }
        Ok(())
    }

    fn append(&mut self, events: Vec<Stored>) {
        for e in events {
            self.ids.insert(e.source_id.clone());
            self.tokens += u64::from(e.tokens);
            self.bytes += e.memory_bytes();
            self.events.push(e);
        }
    }

    /// Removes the listed source ids; returns how many were stored.
    fn forget(&mut self, source_ids: &[String]) -> usize {
        let drop: HashSet<&str> = source_ids
            .iter()
            .map(String::as_str)
            .filter(|id| self.ids.contains(*id))
            .collect();
        if drop.is_empty() {
            return 0;
        }
        self.events.retain(|e| !drop.contains(e.source_id.as_str()));
        // Cannot fail: what is left was valid before.
        let _ = self.reindex();
        drop.len()
    }

    /// The newest events, newest first, up to `max_events`, until their
    /// stored counts pass `allowance` (the first that passes it is included:
    /// the packer stops there). Only these are copied out of the window.
    fn newest(&self, allowance: usize, separator: usize, max_events: usize) -> Vec<RankedUnit> {
        let mut used = 0usize;
        let mut out = Vec::new();
        let newest = self.events.len();
        for (i, e) in self.events.iter().enumerate().rev().take(max_events) {
            used += e.tokens as usize + if out.is_empty() { 0 } else { separator };
            out.push(RankedUnit {
                position: i as u64,
                source_id: e.source_id.clone(),
                text: e.text.clone(),
                // Recency as relevance: 1 for the newest, 1/2 for the next...
                score: 1.0 / (newest - i) as f32,
            });
            if used > allowance {
                break;
            }
        }
        out
    }
}

/// The recency-window baseline (see the crate docs).
#[derive(Debug)]
pub struct RecentWindow {
    counter: Arc<dyn TokenCounter>,
    settings: RecentSettings,
    /// Each namespace's window; its locks survive poisoning (every change
    /// is made whole after its checks, see [`submem_kit::spaces`]).
    windows: Spaces<Window>,
}

impl RecentWindow {
    /// An empty window counting tokens with `counter` (the services'
    /// [`TokenCounter`], so recalls are counted as the reader counts them).
    /// Fails on settings [`RecentSettings::validate`] refuses.
    pub fn new(counter: Arc<dyn TokenCounter>, settings: RecentSettings) -> Result<Self> {
        settings.validate()?;
        Ok(RecentWindow {
            counter,
            settings,
            windows: Spaces::new(),
        })
    }

    /// The settings in use.
    pub fn settings(&self) -> &RecentSettings {
        &self.settings
    }
}

#[async_trait]
impl Substrate for RecentWindow {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo {
            method: METHOD,
            family: Family::BASELINE,
            name: NAME.into(),
            needs_llm: false,
            training_free: true,
        }
    }

    #[tracing::instrument(name = "recent.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        // Count outside the lock: it is the expensive part.
        let stored: Vec<Stored> = events
            .iter()
            .map(|e| {
                let text = e.render();
                let tokens = u32::try_from(self.counter.count(&text)).unwrap_or(u32::MAX);
                Stored {
                    source_id: e.source_id().to_string(),
                    text,
                    tokens,
                }
            })
            .collect();
        let mut windows = self.windows.write();
        let existing = windows.get(namespace);
        check_new_sources(events, |id| existing.is_some_and(|w| w.ids.contains(id)))?;
        windows.entry(namespace.clone()).or_default().append(stored);
        Ok(WriteReport {
            events: events.len(),
            units: events.len(),
        })
    }

    #[tracing::instrument(name = "recent.read", skip_all, fields(ns = %query.namespace, budget = query.budget))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let allowance = query.allowance();
        let separator = self.counter.count(UNIT_SEPARATOR);
        let max_events = self.settings.max_events.unwrap_or(usize::MAX);
        let ranked = match self.windows.read().get(&query.namespace) {
            Some(w) => w.newest(allowance, separator, max_events),
            None => return Ok(Recall::empty()),
        };
        Ok(render_in_time_order(
            &ranked,
            self.counter.as_ref(),
            allowance,
            PackPolicy::StopAtFirstUnfit,
        ))
    }

    fn footprint(&self) -> Footprint {
        self.windows.footprint(|_, w| Footprint {
            memory_bytes: w.bytes,
            disk_bytes: 0,
            stored_tokens: w.tokens,
            input_tokens: w.tokens,
        })
    }

    #[tracing::instrument(name = "recent.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        self.windows.save(&STATE, dir, None)
    }

    #[tracing::instrument(name = "recent.restore", skip_all, fields(dir = %dir.display()))]
    async fn restore(&self, dir: &Path) -> Result<()> {
        // Everything is read and checked before the live state is replaced,
        // so a refused directory leaves the memory as it was.
        self.windows
            .restore(&STATE, dir, None, |_, w: &mut Window| w.reindex())
    }

    #[tracing::instrument(name = "recent.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        let mut windows = self.windows.write();
        Ok(match target {
            Forget::Namespace(ns) => windows.remove(ns).map_or(0, |w| w.events.len()),
            Forget::Sources {
                namespace,
                source_ids,
            } => windows
                .get_mut(namespace)
                .map_or(0, |w| w.forget(source_ids)),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use submem_core::persist::MANIFEST_FILE;
    use submem_core::test_utils::WhitespaceCounter;
    use submem_core::{Error, Turn};

    fn turn(i: usize) -> Event {
        Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "A".into(),
            text: format!("word{i} w w"),
            source_id: format!("t{i}"),
        })
    }

    /// A window of `n` turns `t0..t{n-1}` of 4 words each ("A: wordI w w").
    async fn window(n: usize, max_events: Option<usize>) -> (RecentWindow, Namespace) {
        let w =
            RecentWindow::new(Arc::new(WhitespaceCounter), RecentSettings { max_events }).unwrap();
        let ns = Namespace::new("n").unwrap();
        w.write(&ns, &(0..n).map(turn).collect::<Vec<_>>())
            .await
            .unwrap();
        (w, ns)
    }

    fn shown(r: &Recall) -> Vec<&str> {
        r.source_ids().collect()
    }

    #[tokio::test]
    async fn shows_the_newest_that_fit_in_time_order() {
        let (w, ns) = window(100, None).await;
        // Allowance floor(0.95 * 100) - 55 = 40 tokens: ten 4-token turns.
        let q = Query::question(ns.clone(), "q", 100).with_fixed_prompt_tokens(55);
        let r = w.read(&q).await.unwrap();
        assert_eq!(q.allowance(), 40);
        assert_eq!(r.tokens, 40);
        assert_eq!(r.sources.len(), 10);
        assert_eq!(shown(&r).first(), Some(&"t99"), "newest first in sources");
        assert!(r.text.starts_with("A: word90 w w\n"), "{}", r.text);
        assert!(r.text.ends_with("A: word99 w w"), "{}", r.text);
        // The question does not matter.
        let other = w
            .read(&Query::question(ns, "word3", 100).with_fixed_prompt_tokens(55))
            .await
            .unwrap();
        assert_eq!(other.text, r.text);
    }

    #[tokio::test]
    async fn max_events_caps_what_a_generous_budget_shows() {
        let (all, ns) = window(30, None).await;
        let (capped, _) = window(30, Some(5)).await;
        let q = Query::question(ns, "q", 4096);
        assert_eq!(all.read(&q).await.unwrap().sources.len(), 30);
        let r = capped.read(&q).await.unwrap();
        assert_eq!(shown(&r), vec!["t29", "t28", "t27", "t26", "t25"]);
        assert_eq!(r.tokens, 20);
        assert!(RecentWindow::new(
            Arc::new(WhitespaceCounter),
            RecentSettings {
                max_events: Some(0)
            }
        )
        .is_err());
    }

    #[tokio::test]
    async fn a_unit_too_long_for_the_allowance_ends_the_window() {
        let (w, ns) = window(3, None).await;
        let long = Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "A".into(),
            text: vec!["x"; 200].join(" "),
            source_id: "long".into(),
        });
        w.write(&ns, &[long]).await.unwrap();
        let r = w.read(&Query::question(ns, "q", 100)).await.unwrap();
        assert!(
            r.sources.is_empty(),
            "the newest does not fit: nothing older is shown"
        );
        assert_eq!(r.tokens, 0);
    }

    #[tokio::test]
    async fn refused_writes_change_nothing() {
        let (w, ns) = window(5, None).await;
        let before = w.footprint();
        assert!(
            w.write(&ns, &[turn(5), turn(3)]).await.is_err(),
            "t3 is stored"
        );
        assert!(w.write(&ns, &[turn(6), turn(6)]).await.is_err(), "t6 twice");
        assert_eq!(w.footprint(), before);
        assert_eq!(w.write(&ns, &[]).await.unwrap(), WriteReport::default());
        // Another namespace may reuse the ids.
        let other = Namespace::new("other").unwrap();
        assert!(w.write(&other, &[turn(3)]).await.is_ok());
    }

    #[tokio::test]
    async fn forget_and_footprint() {
        let (w, ns) = window(10, None).await;
        let fp = w.footprint();
        assert_eq!(fp.stored_tokens, 40);
        assert_eq!(fp.input_tokens, 40);
        assert!(fp.memory_bytes > 10 * "A: word0 w w".len() as u64);
        let n = w
            .forget(&Forget::Sources {
                namespace: ns.clone(),
                source_ids: vec!["t9".into(), "t2".into(), "nope".into()],
            })
            .await
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(w.footprint().stored_tokens, 32);
        let r = w
            .read(&Query::question(ns.clone(), "q", 4096))
            .await
            .unwrap();
        assert_eq!(shown(&r).first(), Some(&"t8"));
        assert!(!shown(&r).contains(&"t2"));
        // A forgotten id may be written again.
        w.write(&ns, &[turn(9)]).await.unwrap();
        assert_eq!(w.forget(&Forget::Namespace(ns.clone())).await.unwrap(), 9);
        assert_eq!(w.footprint(), Footprint::default());
        assert!(w
            .read(&Query::question(ns, "q", 4096))
            .await
            .unwrap()
            .sources
            .is_empty());
    }

    #[tokio::test]
    async fn persists_and_refuses_torn_foreign_and_corrupt_stores() {
        let (w, ns) = window(12, Some(4)).await;
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        w.persist(&store).await.unwrap();
        assert!(w.footprint().disk_bytes > 0);

        let q = Query::question(ns.clone(), "q", 4096);
        let fresh =
            RecentWindow::new(Arc::new(WhitespaceCounter), RecentSettings::default()).unwrap();
        fresh.restore(&store).await.unwrap();
        assert_eq!(fresh.footprint().stored_tokens, 48);
        assert_eq!(fresh.read(&q).await.unwrap().sources.len(), 12);
        assert!(
            fresh.write(&ns, &[turn(0)]).await.is_err(),
            "ids are restored"
        );
        let held = fresh.read(&q).await.unwrap().text;

        // A torn store (no manifest): refused, nothing changed.
        let torn = dir.path().join("torn");
        w.persist(&torn).await.unwrap();
        std::fs::remove_file(torn.join(MANIFEST_FILE)).unwrap();
        let err = fresh.restore(&torn).await.unwrap_err();
        assert!(matches!(err, Error::Store { .. }), "{err}");
        // A store of another substrate: refused.
        let foreign = dir.path().join("foreign");
        submem_core::persist::write_manifest(&foreign, "M10 full-context", 1).unwrap();
        let err = fresh.restore(&foreign).await.unwrap_err().to_string();
        assert!(err.contains("full-context"), "{err}");
        // A state file that repeats an id: refused with the reason.
        let corrupt = dir.path().join("corrupt");
        w.persist(&corrupt).await.unwrap();
        let path = corrupt.join(STATE_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"t1\"", "\"t0\"")).unwrap();
        let err = fresh.restore(&corrupt).await.unwrap_err().to_string();
        assert!(err.contains("\"t0\" is stored twice"), "{err}");
        // A truncated state file: refused.
        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
        assert!(fresh.restore(&corrupt).await.is_err());

        assert_eq!(fresh.read(&q).await.unwrap().text, held);
    }
}

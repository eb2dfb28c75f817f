//! The recency window: every event kept as text, a read shows the newest
//! ones that fit, in time order.
//!
//! The substrate is the kit's [`EventLog`] (write checks, forget, footprint,
//! persistence and packing, written once for every event-log substrate)
//! with [`Recency`] as its ranking rule: this file is the whole idea.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use submem_core::plugin::SubstrateSettings;
use submem_core::{Event, Family, MethodId, Query, Result, SubstrateInfo, TokenCounter};
use submem_kit::event_log::{EventLog, LogRanker, Logged};
use submem_kit::state::StateFile;
use submem_kit::PackPolicy;

use crate::RecentError;

/// The method id of the recency window.
pub const METHOD: MethodId = MethodId::from_static("RecentWindow");
/// The short name [`Substrate::info`](submem_core::Substrate::info) reports.
const NAME: &str = "recent-window";
/// What the manifest of a persisted window says it holds.
const MANIFEST_NAME: &str = "RecentWindow recent-window";
/// The shape of [`STATE_FILE`]; bump it when what is kept per event changes.
const FORMAT_VERSION: u32 = 1;
/// The one state file of a persisted window.
const STATE_FILE: &str = "recent-window.json";

/// The recency window: an event log per namespace ranked by [`Recency`]
/// (build one with [`recent_window`]).
pub type RecentWindow = EventLog<Recency>;

/// A recency window counting tokens with `counter` (the services'
/// [`TokenCounter`], so recalls are counted as the reader counts them).
/// Fails on settings [`RecentSettings::validate`](submem_core::plugin::SubstrateSettings::validate) refuses.
pub fn recent_window(
    counter: Arc<dyn TokenCounter>,
    settings: RecentSettings,
) -> Result<RecentWindow> {
    Ok(EventLog::new(Recency::new(settings)?, counter))
}

/// Recency as relevance: the newest event first (score 1, then 1/2, 1/3...),
/// at most `max_events` of them; the question is not used.
#[derive(Debug, Clone)]
pub struct Recency {
    settings: RecentSettings,
}

impl Recency {
    /// The rule with `settings`, once they are valid.
    pub fn new(settings: RecentSettings) -> Result<Self> {
        settings.validate()?;
        Ok(Recency { settings })
    }

    /// The settings in use.
    pub fn settings(&self) -> &RecentSettings {
        &self.settings
    }
}

impl LogRanker for Recency {
    type Extra = ();

    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(METHOD, Family::BASELINE, NAME)
    }

    fn state_file(&self) -> StateFile {
        StateFile::new(MANIFEST_NAME, FORMAT_VERSION, STATE_FILE)
    }

    fn extra(&self, _event: &Event) {}

    /// The newest events until their counts pass the allowance (the one
    /// that passes it included: the log stops packing there), so a read of
    /// a long history looks at no more events than it can show.
    fn rank(&self, events: &[Logged<()>], query: &Query) -> Vec<(usize, f32)> {
        let allowance = query.allowance();
        let newest = events.len();
        let mut used = 0usize;
        let mut ranked = Vec::new();
        for (i, e) in events
            .iter()
            .enumerate()
            .rev()
            .take(self.settings.max_events.unwrap_or(usize::MAX))
        {
            ranked.push((i, 1.0 / (newest - i) as f32));
            used += e.tokens as usize;
            if used > allowance {
                break;
            }
        }
        ranked
    }

    /// A window is a contiguous, most recent run: it ends at the first
    /// event that does not fit.
    fn packing(&self) -> PackPolicy {
        PackPolicy::StopAtFirstUnfit
    }
}

/// Settings of `recent`, and the window's whole configuration: a substrate
/// has one such type, the schema derived on what it is built from.
///
/// Every field has a doc comment: its first sentence is what `submem
/// substrates` lists for the setting. Unknown keys are refused (`deny_unknown_fields`),
/// and [`validate`](SubstrateSettings::validate) refuses values serde accepts
/// but the window cannot use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecentSettings {
    /// Most events a read shows, the newest (unset: as many as fit the allowance).
    ///
    /// A fixed-length short-term window, as agent loops keep: with it, a
    /// large budget is left partly unused rather than filled with older
    /// events. At least 1.
    pub max_events: Option<usize>,
}

impl SubstrateSettings for RecentSettings {
    fn validate(&self) -> Result<()> {
        if self.max_events == Some(0) {
            return Err(RecentError::ZeroMaxEvents.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;
    use submem_core::{Error, Footprint, Forget, Namespace, Recall, Substrate, Turn, WriteReport};
    use submem_kit::persist::MANIFEST_FILE;

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
        let w = recent_window(Arc::new(WhitespaceCounter), RecentSettings { max_events }).unwrap();
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
        assert!(recent_window(
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
        let fresh = recent_window(Arc::new(WhitespaceCounter), RecentSettings::default()).unwrap();
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
        submem_kit::persist::write_manifest(&foreign, "M10 full-context", 1).unwrap();
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

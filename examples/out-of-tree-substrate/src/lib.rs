//! # Keyword echo: a substrate written outside the submem workspace
//!
//! [`KeywordEcho`] is a ranking rule: for a query it picks the events that
//! share the most content words with it (stop words left out, see
//! [`submem_kit::text`]), newest first among equals, at most `top_k` of
//! them. It is a toy lexical retriever: BM25 (`m2`) weighs rare words
//! higher, this counts them all alike.
//!
//! Everything else a substrate does comes from
//! [`EventLog`](submem_kit::event_log::EventLog): checked writes, packing
//! under the query's allowance shown in time order, footprint,
//! persist/restore, forget. [`factory`] gives a registry the name users
//! type (`keyword-echo`, alias `echo`), a method id and family of its own,
//! and a settings type ([`EchoSettings`]) checked before anything is built.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory, SubstrateSettings};
use submem_core::{Error, Event, Family, MethodId, Query, Result, SubstrateInfo};
use submem_kit::event_log::{EventLog, LogRanker, Logged};
use submem_kit::state::StateFile;
use submem_kit::text::{content_words, query_terms};

/// The method id: open, so any crate can name its own.
pub const METHOD: MethodId = MethodId::from_static("KeywordEcho");
/// A family of its own (`Family::new("example")?` at run time).
pub const FAMILY: Family = Family::from_static("example");

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
        .build(|ctx, settings: EchoSettings| {
            let ranker = KeywordEcho { settings };
            Ok(Arc::new(EventLog::new(ranker, ctx.services.tokens.clone())))
        })
}

/// The keyword-echo ranking rule (see the crate docs).
#[derive(Debug)]
pub struct KeywordEcho {
    settings: EchoSettings,
}

impl LogRanker for KeywordEcho {
    /// The event's distinct content words, found once when it is written.
    type Extra = Vec<String>;

    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(METHOD, FAMILY, "keyword-echo")
    }

    fn state_file(&self) -> StateFile {
        StateFile::new("KeywordEcho keyword-echo", 1, "keyword-echo.json")
    }

    fn extra(&self, event: &Event) -> Vec<String> {
        query_terms(&event.content())
    }

    fn rank(&self, events: &[Logged<Vec<String>>], query: &Query) -> Vec<(usize, f32)> {
        let terms: HashSet<String> = content_words(&query.retrieval_text()).into_iter().collect();
        // (shared words, position), best first: more words, then newer.
        let mut hits: Vec<(usize, usize)> = events
            .iter()
            .enumerate()
            .map(|(i, e)| (e.extra.iter().filter(|w| terms.contains(*w)).count(), i))
            .filter(|(shared, _)| *shared >= self.settings.min_shared)
            .collect();
        hits.sort_by(|a, b| b.cmp(a));
        hits.truncate(query.top_k);
        hits.into_iter()
            .map(|(shared, i)| (i, shared as f32))
            .collect()
    }
}

//! **M7, distilled strategies** (ReasoningBank, *Harness the Memory*'s M7,
//! specified in `docs/METHODS.md`):
//! every finished episode is judged and distilled into 1–3 strategies
//! ([`crate::distill`]); strategies are embedded and a read shows the dense
//! top-1 (settable) for the query. `manage` merges near-duplicate strategies
//! (cosine ≥ [`StrategyConfig::merge_threshold`]): the older one stays as the
//! representative and the merged entry keeps every contributing episode, so
//! it shows all their source ids.
//!
//! Deviations: ReasoningBank only adds items (consolidation is future work
//! there); the merge is the manage step of `docs/METHODS.md`. Each episode's own strategies
//! are archived apart from the merged bank, so forgetting an event drops the
//! strategies of its episode (at once; the episode is re-distilled from its
//! remaining events by the next `manage`) and splits merged entries it fed
//! back into their other members. The raw events stay in the journal for
//! that reason and count in the footprint.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use submem_core::{
    cosine, Event, Family, Footprint, Forget, ManageReport, Namespace, Query, Recall, Result,
    Services, Substrate, SubstrateInfo, WriteReport,
};
use submem_kit::spaces::Spaces;
use submem_kit::state::StateFile;

use crate::distill::{distill_episode, Distilled};
use crate::journal::{Entry, Journal};
use crate::pack::{embed, pack, rank_by_cosine, Item};
use crate::space::{self, Derived};
use crate::{EpisodeConfig, StrategyConfig};

/// [`crate::M7`] as a string, for errors.
pub(crate) const METHOD: &str = "M7";
/// Name written in the persisted manifest.
pub const STORE_NAME: &str = "M7 distilled-strategies";
/// Version of the persisted format.
pub const FORMAT_VERSION: u32 = 1;
const STATE_FILE: &str = "strategies.json";
/// The store as persisted: manifest name, format version, state file.
const STATE: StateFile = StateFile::new(STORE_NAME, FORMAT_VERSION, STATE_FILE);

/// One episode's distillation with its embeddings.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Archived {
    distilled: Distilled,
    vectors: Vec<Vec<f32>>,
    tokens: Vec<u32>,
    sources: Vec<String>,
}

/// A bank entry: strategies `(episode, index)`; the first is shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct BankEntry {
    members: Vec<(u64, usize)>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Space {
    journal: Journal,
    archive: BTreeMap<u64, Archived>,
    bank: Vec<BankEntry>,
    pending: BTreeSet<u64>,
}

impl Space {
    fn vector(&self, (ep, i): (u64, usize)) -> Option<&[f32]> {
        self.archive.get(&ep)?.vectors.get(i).map(Vec::as_slice)
    }

    /// Merges entries whose representatives are near-duplicates; returns merges.
    fn merge(&mut self, threshold: f32) -> usize {
        let mut merges = 0;
        let mut i = 0;
        while i < self.bank.len() {
            let Some(vi) = self.vector(self.bank[i].members[0]).map(<[f32]>::to_vec) else {
                i += 1;
                continue;
            };
            let mut j = i + 1;
            while j < self.bank.len() {
                let close = self
                    .vector(self.bank[j].members[0])
                    .is_some_and(|vj| cosine(&vi, vj) >= threshold);
                if close {
                    let e = self.bank.remove(j);
                    self.bank[i].members.extend(e.members);
                    merges += 1;
                } else {
                    j += 1;
                }
            }
            i += 1;
        }
        merges
    }
}

impl Derived for Space {
    fn journal(&self) -> &Journal {
        &self.journal
    }

    fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }

    fn check(&self) -> std::result::Result<(), String> {
        for e in &self.bank {
            if e.members.is_empty() {
                return Err("empty bank entry".into());
            }
            if let Some(m) = e.members.iter().find(|m| self.vector(**m).is_none()) {
                return Err(format!("bank entry names missing strategy {m:?}"));
            }
        }
        Ok(())
    }
}

/// M7: a bank of strategies distilled from finished trajectories.
pub struct StrategyBank {
    services: Services,
    config: StrategyConfig,
    /// The episode rule `config` makes, built once rather than per write.
    episodes: EpisodeConfig,
    spaces: Spaces<Space>,
}

submem_kit::debug_fields!(StrategyBank { config });

type Snapshot = (u64, Vec<Entry>, Option<crate::journal::Signal>);

impl StrategyBank {
    /// A bank using `services` (the LLM is optional: without it the rule
    /// strategy is written).
    pub fn new(services: Services, config: StrategyConfig) -> Result<Self> {
        config
            .validate()
            .map_err(|e| e.into_core(METHOD, "build"))?;
        Ok(StrategyBank {
            services,
            episodes: config.episodes(),
            config,
            spaces: Spaces::new(),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &StrategyConfig {
        &self.config
    }

    /// Strategies shown by reads of `namespace` (merged entries once), with
    /// the outcome of their episode: for inspection and tests.
    pub fn strategies(&self, namespace: &Namespace) -> Vec<(crate::Strategy, crate::Outcome)> {
        let spaces = self.spaces.read();
        let Some(space) = spaces.get(namespace) else {
            return Vec::new();
        };
        space
            .bank
            .iter()
            .filter_map(|e| {
                let (ep, i) = e.members[0];
                let a = space.archive.get(&ep)?;
                Some((a.distilled.strategies.get(i)?.clone(), a.distilled.outcome))
            })
            .collect()
    }

    /// Distills the pending episodes `ids` of `ns`; returns strategies added.
    async fn distill(&self, ns: &Namespace, ids: &[u64]) -> Result<usize> {
        let snapshots: Vec<Snapshot> = {
            let spaces = self.spaces.read();
            let Some(space) = spaces.get(ns) else {
                return Ok(0);
            };
            ids.iter()
                .filter(|id| space.pending.contains(*id))
                .filter_map(|&id| {
                    let ep = space.journal.episode(id)?;
                    let entries: Vec<Entry> = space
                        .journal
                        .episode_entries(id)
                        .into_iter()
                        .cloned()
                        .collect();
                    (!ep.open && !entries.is_empty()).then_some((id, entries, ep.signal))
                })
                .collect()
        };
        let mut added = 0;
        for (id, entries, signal) in snapshots {
            let refs: Vec<&Entry> = entries.iter().collect();
            let distilled = distill_episode(
                self.services.llm.as_ref(),
                &refs,
                signal,
                &*self.services.tokens,
                &self.config,
            )
            .await;
            let texts: Vec<String> = distilled.strategies.iter().map(|s| s.render()).collect();
            let vectors = embed(&*self.services.embedder, &texts).await?;
            let tokens = texts
                .iter()
                .map(|t| u32::try_from(self.services.tokens.count(t)).unwrap_or(u32::MAX))
                .collect();
            let sources: Vec<String> = entries
                .iter()
                .map(|e| e.event.source_id().to_string())
                .collect();
            let mut spaces = self.spaces.write();
            let Some(space) = spaces.get_mut(ns) else {
                continue;
            };
            // A forget may have changed the episode meanwhile: keep it pending.
            let live: Vec<String> = space
                .journal
                .episode_entries(id)
                .iter()
                .map(|e| e.event.source_id().to_string())
                .collect();
            if live != sources || !space.pending.contains(&id) {
                continue;
            }
            let n = distilled.strategies.len();
            space.bank.extend((0..n).map(|i| BankEntry {
                members: vec![(id, i)],
            }));
            space.archive.insert(
                id,
                Archived {
                    distilled,
                    vectors,
                    tokens,
                    sources,
                },
            );
            space.pending.remove(&id);
            added += n;
        }
        Ok(added)
    }
}

#[async_trait]
impl Substrate for StrategyBank {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(crate::M7, Family::REFINEMENT, "distilled-strategies")
            .with_llm(self.services.llm.is_some())
    }

    #[tracing::instrument(name = "m7.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        let finished = {
            let mut spaces = self.spaces.write();
            let space = spaces.entry(namespace.clone()).or_default();
            space.journal.validate(events)?;
            let finished = space
                .journal
                .append(events, &*self.services.tokens, &self.episodes);
            space.pending.extend(finished.iter().copied());
            finished
        };
        let units = self.distill(namespace, &finished).await?;
        Ok(WriteReport {
            events: events.len(),
            units,
        })
    }

    #[tracing::instrument(name = "m7.read", skip_all, fields(ns = %query.namespace))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let empty = self
            .spaces
            .read()
            .get(&query.namespace)
            .is_none_or(|s| s.bank.is_empty());
        if empty {
            return Ok(Recall::empty());
        }
        let q = embed(&*self.services.embedder, &[query.retrieval_text()]).await?;
        let Some(qv) = q.first() else {
            return Ok(Recall::empty());
        };
        let items: Vec<Item> = {
            let spaces = self.spaces.read();
            let Some(space) = spaces.get(&query.namespace) else {
                return Ok(Recall::empty());
            };
            let reps: Vec<&[f32]> = space
                .bank
                .iter()
                .map(|e| space.vector(e.members[0]).unwrap_or(&[]))
                .collect();
            rank_by_cosine(qv, &reps)
                .into_iter()
                .take(self.config.top_k.min(query.top_k))
                .filter_map(|(i, score)| {
                    let entry = &space.bank[i];
                    let (ep, k) = entry.members[0];
                    let text = space
                        .archive
                        .get(&ep)?
                        .distilled
                        .strategies
                        .get(k)?
                        .render();
                    let mut seen = HashSet::new();
                    let sources = entry
                        .members
                        .iter()
                        .filter_map(|(ep, _)| space.archive.get(ep))
                        .flat_map(|a| a.sources.iter())
                        .filter(|s| seen.insert(s.as_str()))
                        .cloned()
                        .collect();
                    Some(Item {
                        text,
                        score,
                        sources,
                    })
                })
                .collect()
        };
        Ok(pack(&items, &*self.services.tokens, query.allowance()).0)
    }

    #[tracing::instrument(name = "m7.manage", skip_all)]
    async fn manage(&self) -> Result<ManageReport> {
        let pending: Vec<(Namespace, Vec<u64>)> = {
            let mut spaces = self.spaces.write();
            let mut out: Vec<(Namespace, Vec<u64>)> = spaces
                .iter_mut()
                .map(|(ns, space)| {
                    if let Some(id) = space.journal.close_open() {
                        space.pending.insert(id);
                    }
                    (ns.clone(), space.pending.iter().copied().collect())
                })
                .collect();
            out.sort_by(|a, b| a.0.cmp(&b.0));
            out
        };
        let mut changed = 0;
        for (ns, ids) in pending {
            changed += self.distill(&ns, &ids).await?;
        }
        let mut spaces = self.spaces.write();
        for space in spaces.values_mut() {
            changed += space.merge(self.config.merge_threshold);
        }
        Ok(ManageReport { changed })
    }

    fn footprint(&self) -> Footprint {
        self.spaces.footprint(|_, s| {
            let mut fp = space::journal_footprint(&s.journal);
            for a in s.archive.values() {
                fp.stored_tokens += a.tokens.iter().map(|t| u64::from(*t)).sum::<u64>();
                fp.memory_bytes += a
                    .distilled
                    .strategies
                    .iter()
                    .map(|st| (st.title.len() + st.description.len() + st.content.len()) as u64)
                    .sum::<u64>()
                    + a.vectors.iter().map(|v| (v.len() * 4) as u64).sum::<u64>()
                    + a.sources.iter().map(|x| x.len() as u64 + 24).sum::<u64>();
            }
            fp.memory_bytes += (s.bank.len() * 40) as u64;
            fp
        })
    }

    #[tracing::instrument(name = "m7.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        self.spaces
            .save(&STATE, dir, Some(&*self.services.embedder))
    }

    #[tracing::instrument(name = "m7.restore", skip_all, fields(dir = %dir.display()))]
    async fn restore(&self, dir: &Path) -> Result<()> {
        space::restore(&self.spaces, &STATE, dir, &*self.services.embedder)
    }

    #[tracing::instrument(name = "m7.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        Ok(space::forget(&self.spaces, target, |space, source_ids| {
            let (n, touched) = space.journal.forget(source_ids);
            for ep in &touched {
                space.archive.remove(ep);
                match space.journal.episode(*ep) {
                    Some(e) if !e.open => {
                        space.pending.insert(*ep);
                    }
                    _ => {
                        space.pending.remove(ep);
                    }
                }
            }
            let old = std::mem::take(&mut space.bank);
            for entry in old {
                if entry.members.iter().any(|(ep, _)| touched.contains(ep)) {
                    space.bank.extend(
                        entry
                            .members
                            .into_iter()
                            .filter(|(ep, _)| !touched.contains(ep))
                            .map(|m| BankEntry { members: vec![m] }),
                    );
                } else {
                    space.bank.push(entry);
                }
            }
            n
        }))
    }
}

//! [`GistIndex`]: the M3 substrate — pages and gists per namespace, the
//! LLM (or rule) page selection at read time, forgetting and persistence.

use async_trait::async_trait;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use submem_core::{
    Event, Family, Footprint, Forget, ManageReport, Namespace, Query, Recall, Result, Services,
    Substrate, SubstrateInfo, WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::spaces::Spaces;
use submem_kit::state::StateFile;
use submem_kit::stats::bump;

use crate::gist::{clean_gist, gist_request, rule_gist};
use crate::page::{paginate, Entry, GistWriter, Page};
use crate::render::{fit, gist_line};
use crate::select::{parse_pages, rule_select, select_request};
use crate::shelf::Shelf;
use crate::text::bm25_scores;
use crate::GistConfig;

const MANIFEST_NAME: &str = "M3 gist-index";
const FORMAT_VERSION: u32 = 1;
const STATE_FILE: &str = "gist-index.json";
/// The store as persisted: manifest name, format version, state file.
const STATE: StateFile = StateFile::new(MANIFEST_NAME, FORMAT_VERSION, STATE_FILE);

/// How a read chose the pages it expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// The LLM named them.
    Llm,
    /// No LLM is configured (or `llm_select` is off): BM25 over the pages.
    Rule,
    /// The LLM failed or named no valid page: BM25 over the pages.
    RuleFallback,
}

/// A read with what it chose, for tests and analysis.
#[derive(Debug, Clone)]
pub struct GistRead {
    /// The recall.
    pub recall: Recall,
    /// How the pages were chosen.
    pub selection: Selection,
    /// Positions (0-based, time order) of the expanded pages, in selection order.
    pub expanded: Vec<usize>,
    /// Positions of the pages shown as gists.
    pub gists: Vec<usize>,
}

submem_kit::counters! {
    /// Counters of what the index did, since it was built.
    pub struct GistStats;
    struct Counters;
    {
        /// Gists written by the LLM.
        llm_gists,
        /// Gists written by the rule writer (no LLM, or after a failed or empty reply).
        rule_gists,
        /// Of those, gists where an LLM was configured but failed or replied nothing usable.
        gist_fallbacks,
        /// Reads whose pages the LLM chose.
        llm_selections,
        /// Reads that fell back to BM25 after an LLM failure or an unusable reply.
        selection_fallbacks,
        /// Reads in rule mode (no LLM).
        rule_selections,
    }
}

/// M3, the gist index (ReadAgent); see the crate docs.
pub struct GistIndex {
    services: Services,
    config: GistConfig,
    shelves: Spaces<Shelf>,
    /// Serialises the operations that change pages (write, forget, manage,
    /// restore), which await LLM calls between reading and updating state.
    gate: tokio::sync::Mutex<()>,
    counters: Counters,
}

impl std::fmt::Debug for GistIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GistIndex")
            .field("config", &self.config)
            .field("rule_mode", &self.services.llm.is_none())
            .finish_non_exhaustive()
    }
}

impl GistIndex {
    /// A new, empty index. Without `services.llm` it runs in rule mode
    /// (rule gists, BM25 selection); `info().needs_llm` says which.
    pub fn new(services: Services, config: GistConfig) -> Result<Self> {
        config.validate().map_err(|e| e.during("build"))?;
        Ok(GistIndex {
            services,
            config,
            shelves: Spaces::new(),
            gate: tokio::sync::Mutex::new(()),
            counters: Counters::default(),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &GistConfig {
        &self.config
    }

    /// Whether it runs without an LLM.
    pub fn rule_mode(&self) -> bool {
        self.services.llm.is_none()
    }

    /// What the index did so far.
    pub fn stats(&self) -> GistStats {
        self.counters.snapshot()
    }

    /// The gists of `namespace`, in page order (for inspection and tests).
    pub fn gists(&self, namespace: &Namespace) -> Vec<String> {
        self.shelves
            .read()
            .get(namespace)
            .map(|sh| sh.pages.iter().map(|p| p.gist.clone()).collect())
            .unwrap_or_default()
    }

    /// The source ids of each page of `namespace`, in page order.
    pub fn pages(&self, namespace: &Namespace) -> Vec<Vec<String>> {
        self.shelves
            .read()
            .get(namespace)
            .map(|sh| {
                sh.pages
                    .iter()
                    .map(|p| p.entries.iter().map(|e| e.source_id.clone()).collect())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// One gist: the LLM's when it answers something usable, else the rule's.
    async fn write_gist(&self, entries: &[Entry]) -> (String, GistWriter) {
        if let Some(llm) = &self.services.llm {
            let raw = entries
                .iter()
                .map(|e| e.text.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            let is_agent = entries.iter().all(|e| e.step.is_some());
            let request = gist_request(&raw, is_agent, self.config.gist_max_new_tokens);
            match llm.complete(&request).await {
                Ok(c) => match clean_gist(&c.text, self.config.gist_words) {
                    Some(g) => {
                        bump(&self.counters.llm_gists, 1);
                        return (g, GistWriter::Llm);
                    }
                    None => tracing::warn!(reply = %c.text, "unusable gist reply; rule gist used"),
                },
                Err(e) => tracing::warn!(error = %e, "gist call failed; rule gist used"),
            }
            bump(&self.counters.gist_fallbacks, 1);
        }
        bump(&self.counters.rule_gists, 1);
        (rule_gist(entries, self.config.gist_words), GistWriter::Rule)
    }

    fn new_page(&self, id: u64, entries: Vec<Entry>, gist: (String, GistWriter)) -> Page {
        let mut page = Page {
            id,
            entries,
            tokens: 0,
            gist: gist.0,
            writer: gist.1,
            stale: false,
            dup_of: None,
            terms: HashMap::new(),
            length: 0,
        };
        page.tokens =
            u32::try_from(self.services.tokens.count(&page.raw_text())).unwrap_or(u32::MAX);
        page.reindex();
        page
    }

    /// The pages to expand: the LLM's choice, or BM25's when it fails.
    async fn select(&self, query: &Query) -> Result<(Vec<u64>, Selection)> {
        let (lines, ids, scores) = {
            let shelves = self.shelves.read();
            let Some(shelf) = shelves.get(&query.namespace) else {
                return Ok((Vec::new(), Selection::Rule));
            };
            let pages: Vec<&Page> = shelf.pages.iter().collect();
            let scores = bm25_scores(&pages, &query.retrieval_text());
            let ids: Vec<u64> = pages.iter().map(|p| p.id).collect();
            let lines = match &self.services.llm {
                Some(_) if self.config.llm_select => Some(self.prompt_lines(&pages, &scores)),
                _ => None,
            };
            (lines, ids, scores)
        };
        let max = self.config.max_expand;
        let by_rule = |scores: &[f32]| -> Vec<u64> {
            rule_select(scores, max)
                .into_iter()
                .map(|i| ids[i])
                .collect()
        };
        let (Some(lines), Some(llm)) = (lines, &self.services.llm) else {
            bump(&self.counters.rule_selections, 1);
            return Ok((by_rule(&scores), Selection::Rule));
        };
        let request = select_request(
            &lines,
            &query.retrieval_text(),
            max,
            self.config.select_max_new_tokens,
        );
        match llm.complete(&request).await {
            Ok(c) => {
                let named = parse_pages(&c.text, ids.len(), max);
                if !named.is_empty() {
                    bump(&self.counters.llm_selections, 1);
                    return Ok((named.into_iter().map(|i| ids[i]).collect(), Selection::Llm));
                }
                tracing::debug!(reply = %c.text, "selection reply names no page; BM25 used");
            }
            Err(e) => tracing::warn!(error = %e, "selection call failed; BM25 used"),
        }
        bump(&self.counters.selection_fallbacks, 1);
        Ok((by_rule(&scores), Selection::RuleFallback))
    }

    /// Numbered gist lines for the selection prompt: all of them, or, past
    /// `select_prompt_tokens`, those of the best pages by BM25 in time order.
    fn prompt_lines(&self, pages: &[&Page], scores: &[f32]) -> String {
        let lines: Vec<String> = (0..pages.len())
            .map(|i| {
                gist_line(pages, i)
                    .replacen("[p", "<Page ", 1)
                    .replacen(']', ">", 1)
            })
            .collect();
        let counter = &*self.services.tokens;
        let costs: Vec<usize> = lines.iter().map(|l| counter.count(l) + 1).collect();
        let keep: Vec<bool> = if costs.iter().sum::<usize>() <= self.config.select_prompt_tokens {
            vec![true; lines.len()]
        } else {
            let mut order: Vec<usize> = (0..lines.len()).collect();
            order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(b.cmp(&a)));
            let mut keep = vec![false; lines.len()];
            let mut used = 0;
            for i in order {
                if used + costs[i] <= self.config.select_prompt_tokens {
                    used += costs[i];
                    keep[i] = true;
                }
            }
            keep
        };
        lines
            .into_iter()
            .zip(keep)
            .filter_map(|(l, k)| k.then_some(l))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Reads like [`Substrate::read`] and also says what was chosen and how.
    pub async fn read_detailed(&self, query: &Query) -> Result<GistRead> {
        query.validate()?;
        let (chosen, selection) = self.select(query).await?;
        let shelves = self.shelves.read();
        let Some(shelf) = shelves.get(&query.namespace) else {
            return Ok(GistRead {
                recall: Recall::empty(),
                selection,
                expanded: Vec::new(),
                gists: Vec::new(),
            });
        };
        let pages: Vec<&Page> = shelf.pages.iter().collect();
        // Pages may have gone between the selection call and now (forget).
        let expand: Vec<usize> = chosen
            .iter()
            .filter_map(|id| pages.iter().position(|p| p.id == *id))
            .collect();
        let scores = bm25_scores(&pages, &query.retrieval_text());
        let mut rank: Vec<usize> = (0..pages.len()).collect();
        rank.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(b.cmp(&a)));
        let fitted = fit(
            &pages,
            &expand,
            &rank,
            &*self.services.tokens,
            query.allowance(),
        );
        Ok(GistRead {
            recall: fitted.recall,
            selection,
            expanded: fitted.expanded,
            gists: fitted.gists,
        })
    }
}

#[async_trait]
impl Substrate for GistIndex {
    fn info(&self) -> SubstrateInfo {
        let rule = self.rule_mode();
        SubstrateInfo::new(
            crate::M3,
            Family::TEXT_RECORD,
            if rule {
                "gist-index-rule"
            } else {
                "gist-index"
            },
        )
        .with_llm(!rule)
    }

    #[tracing::instrument(name = "m3.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        let _gate = self.gate.lock().await;
        let (newest, mut episodes, mut last_step) = {
            let shelves = self.shelves.read();
            let shelf = shelves.get(namespace);
            check_new_sources(events, |id| shelf.is_some_and(|s| s.ids.contains(id)))?;
            let newest = shelf
                .and_then(|s| s.pages.last())
                .map(|p| (p.id, p.entries.clone()));
            let last_step = newest
                .as_ref()
                .and_then(|(_, e)| e.last())
                .and_then(|e| e.step);
            (newest, shelf.map_or(0, |s| s.episodes), last_step)
        };
        let entries: Vec<Entry> = events
            .iter()
            .map(|e| {
                let session = match e {
                    Event::Turn(t) => t.session_id.clone(),
                    Event::Step(s) => {
                        if last_step.is_none_or(|l| s.step <= l) {
                            episodes += 1;
                        }
                        last_step = Some(s.step);
                        format!("episode-{episodes}")
                    }
                };
                let tokens = self.services.tokens.count(&e.render());
                Entry::new(e, session, u32::try_from(tokens).unwrap_or(u32::MAX))
            })
            .collect();
        let pagination = paginate(
            newest.as_ref().map(|(_, e)| e.as_slice()),
            entries,
            &self.config,
        );
        let mut gists = Vec::with_capacity(pagination.pages.len());
        for group in &pagination.pages {
            gists.push(self.write_gist(group).await);
        }
        let mut shelves = self.shelves.write();
        let shelf = shelves.entry(namespace.clone()).or_default();
        if pagination.reopened {
            let reopened = newest.as_ref().map(|(id, _)| *id);
            if shelf.pages.last().map(|p| p.id) == reopened {
                shelf.pages.pop();
            }
        }
        let units = pagination.pages.len();
        for (group, gist) in pagination.pages.into_iter().zip(gists) {
            for e in &group {
                shelf.ids.insert(e.source_id.clone());
            }
            let page = self.new_page(shelf.next_page_id, group, gist);
            shelf.next_page_id += 1;
            shelf.pages.push(page);
        }
        shelf.episodes = episodes;
        Ok(WriteReport {
            events: events.len(),
            units,
        })
    }

    #[tracing::instrument(name = "m3.read", skip_all, fields(ns = %query.namespace))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        Ok(self.read_detailed(query).await?.recall)
    }

    /// Rewrites stale gists (pages that lost events) with the LLM, then
    /// marks duplicate gists.
    #[tracing::instrument(name = "m3.manage", skip_all)]
    async fn manage(&self) -> Result<ManageReport> {
        let _gate = self.gate.lock().await;
        let stale: Vec<(Namespace, u64, Vec<Entry>)> = {
            let shelves = self.shelves.read();
            shelves
                .iter()
                .flat_map(|(ns, s)| {
                    s.pages
                        .iter()
                        .filter(|p| p.stale)
                        .map(|p| (ns.clone(), p.id, p.entries.clone()))
                })
                .collect()
        };
        let mut rewritten = Vec::with_capacity(stale.len());
        for (ns, id, entries) in stale {
            let gist = self.write_gist(&entries).await;
            rewritten.push((ns, id, gist));
        }
        let mut changed = 0;
        let mut shelves = self.shelves.write();
        for (ns, id, (gist, writer)) in rewritten {
            if let Some(p) = shelves
                .get_mut(&ns)
                .and_then(|s| s.pages.iter_mut().find(|p| p.id == id))
            {
                p.gist = gist;
                p.writer = writer;
                p.stale = false;
                p.reindex();
                changed += 1;
            }
        }
        for shelf in shelves.values_mut() {
            changed += shelf.dedup(self.config.dedup_jaccard);
        }
        Ok(ManageReport { changed })
    }

    fn diagnostics(&self) -> submem_core::Diagnostics {
        submem_kit::stats::diagnostics_of(&self.stats())
    }

    fn footprint(&self) -> Footprint {
        self.shelves.footprint(|_, s| {
            let gists: u64 = s
                .pages
                .iter()
                .map(|p| self.services.tokens.count(&p.gist) as u64)
                .sum();
            Footprint {
                memory_bytes: s.memory_bytes(),
                input_tokens: s.input_tokens(),
                stored_tokens: s.input_tokens() + gists,
                ..Footprint::default()
            }
        })
    }

    #[tracing::instrument(name = "m3.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        self.shelves.save(&STATE, dir, None)
    }

    #[tracing::instrument(name = "m3.restore", skip_all, fields(dir = %dir.display()))]
    async fn restore(&self, dir: &Path) -> Result<()> {
        let _gate = self.gate.lock().await;
        self.shelves
            .restore(&STATE, dir, None, |_, shelf: &mut Shelf| shelf.rebuild())
    }

    #[tracing::instrument(name = "m3.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        let _gate = self.gate.lock().await;
        let mut shelves = self.shelves.write();
        Ok(match target {
            Forget::Namespace(ns) => shelves.remove(ns).map_or(0, |s| s.events()),
            Forget::Sources {
                namespace,
                source_ids,
            } => {
                let drop: HashSet<&str> = source_ids.iter().map(String::as_str).collect();
                let llm = self.services.llm.is_some();
                let words = self.config.gist_words;
                let counter = &*self.services.tokens;
                let Some(shelf) = shelves.get_mut(namespace) else {
                    return Ok(0);
                };
                let n = shelf.forget(&drop, counter, words, llm);
                if shelf.pages.is_empty() {
                    shelves.remove(namespace);
                }
                n
            }
        })
    }
}

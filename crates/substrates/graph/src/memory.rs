//! [`GraphMemory`]: the state of every namespace behind one async lock, and
//! the steps the [`submem_core::Substrate`] methods share — extraction,
//! lazy batch indexing, keyword extraction and the read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex as StdMutex;
use submem_core::{Event, Footprint, Namespace, Query, Recall, Result, Services};
use submem_kit::embed::embed_checked;
use submem_kit::stats::bump;
use tokio::sync::Mutex;

use crate::config::{Extractor, GraphConfig};
use crate::extract::{extraction_request, ground, parse_extraction, rule_extraction, Extraction};
use crate::keywords::{keyword_request, parse_keywords, rule_keywords, Keywords};
use crate::retrieve::{render, retrieve, Breadth, QueryVectors, RenderParams};
use crate::store::NamespaceState;
use crate::GraphError;

submem_kit::counters! {
    /// Counts of how extraction and keyword steps were done, for reports.
    pub struct GraphStats;
    pub(crate) struct Counters;
    {
        /// Chunks extracted by the LLM.
        llm_extractions,
        /// Chunks extracted by the rules (no LLM configured, or the fallback).
        rule_extractions,
        /// LLM answers that failed or yielded nothing usable (rules used instead).
        extraction_fallbacks,
        /// Queries whose keywords the LLM gave.
        llm_keywords,
        /// Queries whose keywords came from the rules.
        rule_keywords,
    }
}

/// M5: the dual-level graph (LightRAG). See the crate docs.
pub struct GraphMemory {
    pub(crate) services: Services,
    pub(crate) config: GraphConfig,
    pub(crate) state: Mutex<BTreeMap<Namespace, NamespaceState>>,
    pub(crate) counters: Counters,
    pub(crate) disk_bytes: AtomicU64,
    pub(crate) last_footprint: StdMutex<Footprint>,
}

submem_kit::debug_fields!(GraphMemory { config });

impl GraphMemory {
    /// A new, empty graph memory. Uses `services.llm` for extraction and
    /// keywords when present and the settings ask for it, the rules
    /// otherwise.
    pub fn new(services: Services, config: GraphConfig) -> Result<Self> {
        config.validate().map_err(|e| e.during("new"))?;
        Ok(GraphMemory {
            services,
            config,
            state: Mutex::new(BTreeMap::new()),
            counters: Counters::default(),
            disk_bytes: AtomicU64::new(0),
            last_footprint: StdMutex::new(Footprint::default()),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &GraphConfig {
        &self.config
    }

    /// How extraction and keyword steps were done so far.
    pub fn stats(&self) -> GraphStats {
        self.counters.snapshot()
    }

    pub(crate) fn uses_llm(&self) -> bool {
        self.services.llm.is_some()
            && (self.config.extraction == Extractor::Llm || self.config.keywords == Extractor::Llm)
    }

    /// Extracts one chunk: the LLM when configured (grounded, rules when it
    /// fails or yields nothing), else the rules.
    pub(crate) async fn extract(&self, events: &[&Event], text: &str) -> Extraction {
        if let (Some(llm), Extractor::Llm) = (&self.services.llm, self.config.extraction) {
            let req = extraction_request(text, self.config.extract_max_tokens);
            match llm.complete(&req).await {
                Ok(c) => {
                    let mut x = parse_extraction(&c.text);
                    if self.config.require_grounded_names {
                        x = ground(x, text);
                    }
                    if !x.entities.is_empty() {
                        bump(&self.counters.llm_extractions, 1);
                        return x;
                    }
                    tracing::debug!(answer = %c.text, "extraction yielded no grounded entity; rules used");
                }
                Err(e) => tracing::warn!(error = %e, "extraction call failed; rules used"),
            }
            bump(&self.counters.extraction_fallbacks, 1);
        }
        bump(&self.counters.rule_extractions, 1);
        rule_extraction(events, self.config.rule_relations_per_turn)
    }

    /// Extracts (again) every chunk of `st` that needs it.
    pub(crate) async fn extract_pending_chunks(&self, st: &mut NamespaceState) -> usize {
        let ids = st.chunks_needing_extraction();
        for &id in &ids {
            let text = st
                .chunks
                .get(&id)
                .map(|c| c.text.clone())
                .unwrap_or_default();
            let x = {
                let events = st.chunk_events(id);
                self.extract(&events, &text).await
            };
            let touched = st.graph.add_extraction(id, &x);
            st.apply_touched(touched);
            if let Some(c) = st.chunks.get_mut(&id) {
                c.needs_extraction = false;
            }
        }
        ids.len()
    }

    async fn embed(&self, texts: Vec<String>) -> std::result::Result<Vec<Vec<f32>>, GraphError> {
        embed_checked(&*self.services.embedder, &texts, self.config.embed_batch)
            .await
            .map_err(|e| GraphError::Embedding(e.to_string()))
    }

    /// Computes the vectors of every pending chunk, entity and relation, in
    /// batches; returns how many were computed.
    pub(crate) async fn index_pending(
        &self,
        st: &mut NamespaceState,
    ) -> std::result::Result<usize, GraphError> {
        let chunks: Vec<(u64, String)> = st
            .chunk_index
            .pending
            .iter()
            .filter_map(|&k| st.chunks.get(&k).map(|c| (k, c.text.clone())))
            .collect();
        let entities: Vec<(String, String)> = st
            .entity_index
            .pending
            .iter()
            .filter_map(|k| st.graph.entity(k).map(|e| (k.clone(), e.index_text())))
            .collect();
        let relations: Vec<((String, String), String)> = st
            .relation_index
            .pending
            .iter()
            .filter_map(|k| {
                st.graph
                    .relation(&k.0, &k.1)
                    .map(|r| (k.clone(), relation_text(r)))
            })
            .collect();
        let texts: Vec<String> = chunks
            .iter()
            .map(|x| x.1.clone())
            .chain(entities.iter().map(|x| x.1.clone()))
            .chain(relations.iter().map(|x| x.1.clone()))
            .collect();
        let n = texts.len();
        // Pending keys whose item is gone are dropped with the rest.
        st.chunk_index.pending.clear();
        st.entity_index.pending.clear();
        st.relation_index.pending.clear();
        if n == 0 {
            return Ok(0);
        }
        let vectors = self.embed(texts).await;
        let vectors = match vectors {
            Ok(v) => v,
            Err(e) => {
                // Keep them queued for the next attempt.
                st.chunk_index
                    .pending
                    .extend(chunks.into_iter().map(|x| x.0));
                st.entity_index
                    .pending
                    .extend(entities.into_iter().map(|x| x.0));
                st.relation_index
                    .pending
                    .extend(relations.into_iter().map(|x| x.0));
                return Err(e);
            }
        };
        let dim = self.services.embedder.dimension();
        if let Some(bad) = vectors.iter().find(|v| v.len() != dim) {
            return Err(GraphError::Embedding(format!(
                "vector of {} dimensions, expected {dim}",
                bad.len()
            )));
        }
        let mut it = vectors.into_iter();
        for ((k, t), v) in chunks.into_iter().zip(it.by_ref()) {
            st.chunk_index.insert(k, &t, v);
        }
        for ((k, t), v) in entities.into_iter().zip(it.by_ref()) {
            st.entity_index.insert(k, &t, v);
        }
        for ((k, t), v) in relations.into_iter().zip(it) {
            st.relation_index.insert(k, &t, v);
        }
        Ok(n)
    }

    async fn keywords(&self, question: &str) -> Keywords {
        if question.trim().is_empty() {
            return Keywords::default();
        }
        if let (Some(llm), Extractor::Llm) = (&self.services.llm, self.config.keywords) {
            let req = keyword_request(question, self.config.keyword_max_tokens);
            match llm.complete(&req).await {
                Ok(c) => {
                    let kw = parse_keywords(&c.text, question);
                    if !kw.is_empty() {
                        bump(&self.counters.llm_keywords, 1);
                        return kw;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "keyword call failed; rules used"),
            }
        }
        bump(&self.counters.rule_keywords, 1);
        rule_keywords(question)
    }

    /// The read: keywords, lazy indexing, the three searches, fusion, render.
    pub(crate) async fn read_impl(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let allowance = query.allowance();
        {
            let state = self.state.lock().await;
            if allowance == 0
                || state
                    .get(&query.namespace)
                    .is_none_or(|s| s.chunks.is_empty())
            {
                return Ok(Recall::empty());
            }
        }
        let question = query.retrieval_text();
        let kw = self.keywords(&question).await;
        let mut state = self.state.lock().await;
        let Some(st) = state.get_mut(&query.namespace) else {
            return Ok(Recall::empty());
        };
        self.index_pending(st).await.map_err(|e| e.during("read"))?;
        let mut texts = Vec::new();
        let mut slots = [None; 3];
        for (slot, text) in [
            question.trim().to_string(),
            kw.low.join(", "),
            kw.high.join(", "),
        ]
        .into_iter()
        .enumerate()
        {
            if !text.is_empty() {
                slots[slot] = Some(texts.len());
                texts.push(text);
            }
        }
        let vectors = self.embed(texts).await.map_err(|e| e.during("read"))?;
        let pick = |i: usize| slots[i].and_then(|j| vectors.get(j).cloned());
        let qv = QueryVectors {
            question: pick(0),
            low: pick(1),
            high: pick(2),
        };
        let breadth = Breadth {
            top_k: self.config.top_k.unwrap_or(query.top_k),
            chunk_top_k: self.config.chunk_top_k.unwrap_or(query.top_k),
            lexical: self.config.lexical_chunks,
            chunks_per_item: self.config.chunks_per_item,
            rrf_k: self.config.rrf_k,
        };
        let found = retrieve(st, &query.retrieval_text(), &qv, breadth);
        Ok(render(
            st,
            &found,
            &*self.services.tokens,
            RenderParams {
                allowance,
                graph_share: self.config.graph_share,
                description_tokens: self.config.description_tokens,
            },
        ))
    }

    /// Size of every namespace (computed under the lock; the last value when
    /// another operation holds it).
    pub(crate) fn compute_footprint(
        &self,
        state: &BTreeMap<Namespace, NamespaceState>,
    ) -> Footprint {
        let counter = &*self.services.tokens;
        let mut f = Footprint {
            disk_bytes: self.disk_bytes.load(Ordering::Relaxed),
            ..Footprint::default()
        };
        for st in state.values() {
            f.memory_bytes += st.memory_bytes();
            f.input_tokens += st.input_tokens;
            f.stored_tokens += st.chunks.values().map(|c| c.tokens as u64).sum::<u64>();
            f.stored_tokens += st
                .graph
                .entities()
                .map(|e| counter.count(&e.index_text()) as u64)
                .sum::<u64>();
            f.stored_tokens += st
                .graph
                .relations()
                .iter()
                .map(|r| counter.count(&relation_text(r)) as u64)
                .sum::<u64>();
        }
        if let Ok(mut last) = self.last_footprint.lock() {
            *last = f;
        }
        f
    }
}

/// The text a relation's vector is computed from: keywords, ends (their
/// normalised names, which never change while the relation exists) and
/// description.
pub(crate) fn relation_text(r: &crate::graph::Relation) -> String {
    format!(
        "{}\n{} — {}\n{}",
        r.keywords(),
        r.ends.0,
        r.ends.1,
        r.description()
    )
}

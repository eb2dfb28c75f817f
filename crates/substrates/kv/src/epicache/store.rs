//! One namespace of M11: the stored turns with their embeddings, and the
//! episodes derived from them (segments, centroid, kept turns, rendered text,
//! and the KV cache when one is held).
//!
//! Everything here is synchronous and model-free: embeddings are computed at
//! write, so clustering and re-deriving an episode need only arithmetic and
//! the token counter.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use submem_core::{cosine, l2_normalize, PrefilledLlm, TokenCounter};
use submem_kit::batch::write_order_index;
use submem_kit::render::UNIT_SEPARATOR;

use super::cluster::{kmeans, mean};
use super::config::EpiCacheConfig;
use crate::buffer::source_index;
use crate::KvError;

/// One stored turn or step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredTurn {
    pub source_id: String,
    /// `Event::render()`: what a recall shows.
    pub text: String,
    /// Session id of a turn; empty for agent steps. Segments never cross it.
    pub group: String,
    /// Write order within the namespace.
    pub position: u64,
    /// Budget tokens of `text`.
    pub tokens: u32,
    /// L2-normalised embedding of `Event::content()`.
    pub vector: Vec<f32>,
}

/// Consecutive turns clustered as one point (EpiCache's conversation window).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Segment {
    /// Positions of its turns, in time order.
    pub positions: Vec<u64>,
    /// Normalised mean of its turns' vectors.
    pub vector: Vec<f32>,
}

/// A cluster of segments and what M11 keeps of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Episode {
    pub segments: Vec<Segment>,
    /// Mean of the segment vectors, normalised (matching uses cosine).
    pub centroid: Vec<f32>,
    /// Positions of the kept turns, in time order.
    pub kept: Vec<u64>,
    /// The kept turns' texts joined by [`UNIT_SEPARATOR`].
    pub text: String,
    /// Budget tokens of `text`.
    pub tokens: usize,
    /// The episode prefilled under the reader head (never persisted).
    #[serde(skip)]
    pub cache: Option<Arc<dyn PrefilledLlm>>,
}

/// A namespace's turns and episodes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Space {
    /// In write order (positions increase).
    pub turns: Vec<StoredTurn>,
    pub next_position: u64,
    pub episodes: Vec<Episode>,
    /// False after a write: the next read or manage re-clusters.
    pub clustered: bool,
    #[serde(skip)]
    pub ids: HashMap<String, usize>,
}

impl Space {
    /// Index of the turn at `position`.
    pub fn index_of(&self, position: u64) -> Option<usize> {
        self.turns
            .binary_search_by_key(&position, |t| t.position)
            .ok()
    }

    /// Appends turns (their positions are assigned here).
    pub fn append(&mut self, turns: Vec<StoredTurn>) {
        for mut t in turns {
            t.position = self.next_position;
            self.next_position += 1;
            self.ids.insert(t.source_id.clone(), self.turns.len());
            self.turns.push(t);
        }
        self.clustered = false;
    }

    /// Rebuilds the id index and checks the saved state; `Err` says why it is
    /// inconsistent.
    pub fn reindex(&mut self, dimension: usize) -> Result<(), String> {
        let turns = self
            .turns
            .iter()
            .map(|t| (t.source_id.as_str(), t.position));
        self.ids = write_order_index(turns, self.next_position)?;
        if let Some(t) = self.turns.iter().find(|t| t.vector.len() != dimension) {
            return Err(format!(
                "turn {:?} has a {}-dim vector, the embedder gives {dimension}",
                t.source_id,
                t.vector.len()
            ));
        }
        for e in &self.episodes {
            let members = e.segments.iter().flat_map(|s| s.positions.iter());
            if let Some(p) = members
                .chain(&e.kept)
                .find(|p| self.index_of(**p).is_none())
            {
                return Err(format!("an episode refers to missing position {p}"));
            }
            if e.centroid.len() != dimension {
                return Err("an episode centroid has the wrong dimension".into());
            }
        }
        Ok(())
    }

    /// Re-derives every episode from scratch: segments, k-means, kept turns.
    /// Caches of episodes whose text is unchanged are carried over.
    pub fn recluster(
        &mut self,
        config: &EpiCacheConfig,
        counter: &dyn TokenCounter,
    ) -> Result<(), KvError> {
        let mut old: HashMap<String, Arc<dyn PrefilledLlm>> = self
            .episodes
            .drain(..)
            .filter_map(|e| e.cache.map(|c| (e.text, c)))
            .collect();
        let segments = self.segments(config.segment_turns);
        let points: Vec<Vec<f32>> = segments.iter().map(|s| s.vector.clone()).collect();
        let clusters = kmeans(
            &points,
            config.episodes,
            config.kmeans_runs,
            config.kmeans_max_iterations,
        )?;
        let mut grouped: Vec<Vec<Segment>> = vec![Vec::new(); clusters.centroids.len()];
        for (segment, label) in segments.into_iter().zip(clusters.labels) {
            grouped[label].push(segment);
        }
        self.episodes = grouped
            .into_iter()
            .filter(|g| !g.is_empty())
            .map(|segments| self.derive(segments, config, counter))
            .collect();
        for e in &mut self.episodes {
            e.cache = old.remove(&e.text);
        }
        self.clustered = true;
        Ok(())
    }

    /// Cuts the turns into segments of at most `size` consecutive turns of one
    /// group (session).
    fn segments(&self, size: usize) -> Vec<Segment> {
        let mut out: Vec<Segment> = Vec::new();
        let mut group: Option<&str> = None;
        for t in &self.turns {
            let fits = out
                .last()
                .is_some_and(|s| s.positions.len() < size && group == Some(t.group.as_str()));
            if !fits {
                out.push(Segment {
                    positions: Vec::with_capacity(size),
                    vector: Vec::new(),
                });
            }
            group = Some(t.group.as_str());
            if let Some(s) = out.last_mut() {
                s.positions.push(t.position);
            }
        }
        for s in &mut out {
            s.vector = self.segment_vector(&s.positions);
        }
        out
    }

    fn segment_vector(&self, positions: &[u64]) -> Vec<f32> {
        let dim = self.turns.first().map_or(0, |t| t.vector.len());
        let mut v = mean(
            positions
                .iter()
                .filter_map(|p| self.index_of(*p))
                .map(|i| self.turns[i].vector.as_slice()),
            dim,
        );
        l2_normalize(&mut v);
        v
    }

    /// An episode from its segments: centroid, the most central turns up to
    /// `keep_ratio` of its tokens (at least one), rendered in time order.
    fn derive(
        &self,
        segments: Vec<Segment>,
        config: &EpiCacheConfig,
        counter: &dyn TokenCounter,
    ) -> Episode {
        let dim = self.turns.first().map_or(0, |t| t.vector.len());
        let mut centroid = mean(segments.iter().map(|s| s.vector.as_slice()), dim);
        l2_normalize(&mut centroid);
        let mut members: Vec<(f32, usize)> = segments
            .iter()
            .flat_map(|s| s.positions.iter())
            .filter_map(|p| self.index_of(*p))
            .map(|i| (cosine(&self.turns[i].vector, &centroid), i))
            .collect();
        // Most central first; ties keep the earlier turn.
        members.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let total: u64 = members
            .iter()
            .map(|(_, i)| u64::from(self.turns[*i].tokens))
            .sum();
        let target = (total as f64 * f64::from(config.keep_ratio)).ceil() as u64;
        let mut used = 0u64;
        let mut kept: Vec<usize> = Vec::new();
        for (_, i) in &members {
            let t = u64::from(self.turns[*i].tokens);
            if kept.is_empty() || used + t <= target {
                used += t;
                kept.push(*i);
            }
        }
        kept.sort_unstable();
        let text = kept
            .iter()
            .map(|i| self.turns[*i].text.as_str())
            .collect::<Vec<_>>()
            .join(UNIT_SEPARATOR);
        Episode {
            segments,
            centroid,
            kept: kept.iter().map(|i| self.turns[*i].position).collect(),
            tokens: counter.count(&text),
            text,
            cache: None,
        }
    }

    /// Removes the listed source ids; every episode that held one is
    /// re-derived from its remaining segments (and loses its cache), other
    /// episodes are untouched. Returns how many turns were removed.
    pub fn forget(
        &mut self,
        source_ids: &[String],
        config: &EpiCacheConfig,
        counter: &dyn TokenCounter,
    ) -> usize {
        let gone: HashSet<u64> = source_ids
            .iter()
            .filter_map(|id| self.ids.get(id))
            .map(|&i| self.turns[i].position)
            .collect();
        if gone.is_empty() {
            return 0;
        }
        self.turns.retain(|t| !gone.contains(&t.position));
        self.ids = source_index(self.turns.iter().map(|t| t.source_id.as_str()));
        let episodes = std::mem::take(&mut self.episodes);
        for mut e in episodes {
            let touched = e
                .segments
                .iter()
                .any(|s| s.positions.iter().any(|p| gone.contains(p)));
            if !touched {
                self.episodes.push(e);
                continue;
            }
            for s in &mut e.segments {
                s.positions.retain(|p| !gone.contains(p));
            }
            e.segments.retain(|s| !s.positions.is_empty());
            if e.segments.is_empty() {
                continue;
            }
            for s in &mut e.segments {
                s.vector = self.segment_vector(&s.positions);
            }
            self.episodes.push(self.derive(e.segments, config, counter));
        }
        gone.len()
    }

    /// The episode whose centroid is closest (cosine) to `query`; ties and a
    /// zero query pick the earliest.
    pub fn nearest(&self, query: &[f32]) -> Option<usize> {
        let mut best: Option<(usize, f32)> = None;
        for (i, e) in self.episodes.iter().enumerate() {
            let c = cosine(query, &e.centroid);
            if best.is_none_or(|(_, b)| c > b) {
                best = Some((i, c));
            }
        }
        best.map(|(i, _)| i)
    }

    /// Tokens of every stored turn.
    pub fn tokens(&self) -> u64 {
        self.turns.iter().map(|t| u64::from(t.tokens)).sum()
    }

    /// Approximate heap bytes of turns, vectors and episodes, plus the bytes
    /// of the KV caches held.
    pub fn memory_bytes(&self) -> u64 {
        let f = std::mem::size_of::<f32>();
        let turns: usize = self
            .turns
            .iter()
            .map(|t| {
                t.source_id.capacity()
                    + t.text.capacity()
                    + t.group.capacity()
                    + t.vector.capacity() * f
                    + std::mem::size_of::<StoredTurn>()
                    + t.source_id.len()
                    + 40
            })
            .sum();
        let episodes: usize = self
            .episodes
            .iter()
            .map(|e| {
                e.centroid.capacity() * f
                    + e.text.capacity()
                    + e.kept.capacity() * 8
                    + e.segments
                        .iter()
                        .map(|s| s.positions.capacity() * 8 + s.vector.capacity() * f)
                        .sum::<usize>()
            })
            .sum();
        (turns + episodes) as u64 + self.cache_bytes()
    }

    /// Bytes of the KV caches held.
    pub fn cache_bytes(&self) -> u64 {
        self.episodes
            .iter()
            .filter_map(|e| e.cache.as_ref())
            .map(|c| c.cache_bytes())
            .sum()
    }
}

//! The [`Substrate`] implementation of [`Raptor`]: validation, phases,
//! persistence (one JSON file of every namespace's tree, embeddings
//! included, tagged with the embedder) and forgetting.
//!
//! Every operation that changes a tree works on a copy and swaps it in only
//! on success, so a failed embedding or model call leaves the memory as it
//! was.

use async_trait::async_trait;
use std::path::Path;
use std::sync::atomic::Ordering;
use submem_core::{
    Event, Family, Footprint, Forget, ManageReport, Namespace, Query, Recall, Result, Substrate,
    SubstrateInfo, WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::state::StateFile;

use crate::read::collapsed_tree;
use crate::tree::{leaf_text, pack_leaves, Node, NsTree};
use crate::{Raptor, FORMAT_VERSION, STATE_FILE, STORE_NAME};

/// The store as persisted: manifest name, format version, state file.
const STATE: StateFile = StateFile::new(STORE_NAME, FORMAT_VERSION, STATE_FILE);

#[async_trait]
impl Substrate for Raptor {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(crate::M6, Family::HIERARCHICAL, "raptor-tree").with_llm(self.use_llm)
    }

    #[tracing::instrument(level = "debug", name = "m6.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        let mut trees = self.trees.lock().await;
        let existing = trees.get(namespace);
        check_new_sources(events, |id| {
            existing.is_some_and(|t| t.by_source.contains_key(id))
        })?;
        let leaves = pack_leaves(events, &*self.services.tokens, self.config.leaf_tokens);
        let texts: Vec<String> = leaves.iter().map(|l| leaf_text(l)).collect();
        let vecs = self
            .builder()
            .embed(&texts)
            .await
            .map_err(|e| e.during("write"))?;
        let tree = trees.entry(namespace.clone()).or_default();
        let units = leaves.len();
        for ((leaf_events, text), embedding) in leaves.into_iter().zip(texts).zip(vecs) {
            let position = tree.next_position;
            tree.next_position += leaf_events.len() as u64;
            let tokens = u32::try_from(self.services.tokens.count(&text)).unwrap_or(u32::MAX);
            let id = tree.add(Node {
                level: 0,
                text,
                tokens,
                embedding,
                children: Vec::new(),
                events: leaf_events,
                position,
                centroid: Vec::new(),
                stale: false,
            });
            tree.pending.push(id);
        }
        Ok(WriteReport {
            events: events.len(),
            units,
        })
    }

    #[tracing::instrument(level = "debug", name = "m6.read", skip_all, fields(ns = %query.namespace, budget = query.budget))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let mut trees = self.trees.lock().await;
        let Some(tree) = trees.get_mut(&query.namespace) else {
            return Ok(Recall::empty());
        };
        if !tree.pending.is_empty() || tree.has_stale() {
            let mut work = tree.clone();
            self.builder()
                .refresh(&mut work)
                .await
                .map_err(|e| e.during("read"))?;
            *tree = work;
        }
        if tree.nodes.is_empty() {
            return Ok(Recall::empty());
        }
        let q = self
            .builder()
            .embed(&[query.retrieval_text()])
            .await
            .map_err(|e| e.during("read"))?;
        let q = q.into_iter().next().unwrap_or_default();
        Ok(collapsed_tree(
            tree,
            &q,
            query.top_k,
            self.config.fill_budget,
            query.allowance(),
            &*self.services.tokens,
        ))
    }

    /// Brings every tree up to date (incremental insert or full rebuild),
    /// merges near-duplicate top-level summaries and rewrites stale ones.
    #[tracing::instrument(level = "debug", name = "m6.manage", skip_all)]
    async fn manage(&self) -> Result<ManageReport> {
        let mut trees = self.trees.lock().await;
        let mut names: Vec<Namespace> = trees.keys().cloned().collect();
        names.sort();
        let mut changed = 0;
        for ns in names {
            let Some(tree) = trees.get_mut(&ns) else {
                continue;
            };
            let mut work = tree.clone();
            let b = self.builder();
            changed += b.refresh(&mut work).await.map_err(|e| e.during("manage"))?;
            changed += b
                .dedup_top(&mut work)
                .await
                .map_err(|e| e.during("manage"))?;
            *tree = work;
        }
        Ok(ManageReport { changed })
    }

    fn diagnostics(&self) -> submem_core::Diagnostics {
        submem_kit::stats::diagnostics_of(&self.stats())
    }

    fn footprint(&self) -> Footprint {
        let mut f = Footprint {
            disk_bytes: self.disk_bytes.load(Ordering::Relaxed),
            ..Footprint::default()
        };
        if let Ok(trees) = self.trees.try_lock() {
            for t in trees.values() {
                f.memory_bytes += t.memory_bytes();
                f.stored_tokens += t.stored_tokens();
                f.input_tokens += t.input_tokens();
            }
        }
        f
    }

    async fn persist(&self, dir: &Path) -> Result<()> {
        let embedder = Some(&*self.services.embedder);
        STATE.save(dir, embedder, self.trees.lock().await, &self.disk_bytes)
    }

    async fn restore(&self, dir: &Path) -> Result<()> {
        let dim = self.services.embedder.dimension();
        let embedder = Some(&*self.services.embedder);
        let (restored, bytes) = STATE.load(dir, embedder, |_, tree: &mut NsTree| {
            tree.reindex()?;
            match tree
                .nodes
                .values()
                .find(|n| !n.embedding.is_empty() && n.embedding.len() != dim)
            {
                Some(bad) => Err(format!("a vector has {} dims", bad.embedding.len())),
                None => Ok(()),
            }
        })?;
        *self.trees.lock().await = restored;
        self.disk_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "m6.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        let mut trees = self.trees.lock().await;
        Ok(match target {
            Forget::Namespace(ns) => trees.remove(ns).map_or(0, |t| t.by_source.len()),
            Forget::Sources {
                namespace,
                source_ids,
            } => trees
                .get_mut(namespace)
                .map_or(0, |t| t.forget_sources(source_ids, &*self.services.tokens)),
        })
    }
}

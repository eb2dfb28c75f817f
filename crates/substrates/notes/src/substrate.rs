//! The [`Substrate`] impl of [`EvolvingNotes`], with persistence: one JSON
//! file of every namespace's notes (raw text, own fields, edits with their
//! provenance, links, embeddings) and queued evolutions, written atomically
//! before the manifest, which is written last.

use async_trait::async_trait;
use std::path::Path;
use submem_core::{
    Event, Family, Footprint, Forget, ManageReport, Namespace, Query, Recall, Result, Substrate,
    SubstrateInfo, WriteReport,
};
use submem_kit::state::StateFile;

use crate::store::Space;
use crate::{EvolvingNotes, RenderMode};

/// Name written in the manifest.
pub const STORE_NAME: &str = "M4 evolving-notes";
/// Format version of the state file.
pub const FORMAT_VERSION: u32 = 1;
/// The state file inside a persisted directory.
pub const STATE_FILE: &str = "notes.json";
/// The store as persisted: manifest name, format version, state file.
const STATE: StateFile = StateFile::new(STORE_NAME, FORMAT_VERSION, STATE_FILE);

fn check_space(s: &Space, dim: usize) -> std::result::Result<(), String> {
    if s.by_source.len() != s.notes.len() {
        return Err("source index does not match the notes".into());
    }
    for (id, n) in &s.notes {
        if *id != n.id || s.by_source.get(&n.source_id) != Some(id) || *id >= s.next_id {
            return Err(format!("note {id} is inconsistent"));
        }
        if n.embedding.len() != dim {
            return Err(format!(
                "note {id} has a {}-d embedding, the embedder gives {dim}",
                n.embedding.len()
            ));
        }
    }
    Ok(())
}

#[async_trait]
impl Substrate for EvolvingNotes {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(
            crate::M4,
            Family::STRUCTURAL,
            match self.config.render {
                RenderMode::TopK => "evolving-notes",
                RenderMode::Fit => "evolving-notes-fit",
            },
        )
        .with_llm(self.services.llm.is_some())
    }

    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        self.write_events(namespace, events).await
    }

    async fn read(&self, query: &Query) -> Result<Recall> {
        self.read_query(query).await
    }

    async fn manage(&self) -> Result<ManageReport> {
        self.run_evolutions().await
    }

    fn diagnostics(&self) -> submem_core::Diagnostics {
        submem_kit::stats::diagnostics_of(&self.stats())
    }

    fn footprint(&self) -> Footprint {
        self.spaces.footprint(|ns, s| {
            let (input_tokens, stored_tokens) = s.tokens(&*self.services.tokens);
            Footprint {
                memory_bytes: ns.as_str().len() as u64
                    + s.notes.values().map(|n| n.bytes()).sum::<u64>()
                    + s.by_source.keys().map(|k| k.len() as u64 + 32).sum::<u64>()
                    + s.pending
                        .iter()
                        .map(|p| 32 + 8 * p.neighbours.len() as u64)
                        .sum::<u64>(),
                input_tokens,
                stored_tokens,
                ..Footprint::default()
            }
        })
    }

    async fn persist(&self, dir: &Path) -> Result<()> {
        let _gate = self.gate.lock().await;
        let embedder = Some(&*self.services.embedder);
        self.spaces.save(&STATE, dir, embedder)
    }

    async fn restore(&self, dir: &Path) -> Result<()> {
        let _gate = self.gate.lock().await;
        let dim = self.services.embedder.dimension();
        self.spaces.restore(
            &STATE,
            dir,
            Some(&*self.services.embedder),
            |_, s: &mut Space| check_space(s, dim),
        )
    }

    async fn forget(&self, target: &Forget) -> Result<usize> {
        match target {
            Forget::Namespace(ns) => self.forget_namespace(ns).await,
            Forget::Sources {
                namespace,
                source_ids,
            } => self.forget_sources(namespace, source_ids).await,
        }
    }
}

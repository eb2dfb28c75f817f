//! Settings of M4. Every numeric default is a starting point documented here;
//! the harness sets them by name (`m4:k=10,links=3,evolve=0.6,render=fit`).

use serde::{Deserialize, Serialize};

use crate::NotesError;

/// How a read renders the notes it retrieved (`render=topk` or `render=fit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RenderMode {
    /// A-Mem's read: the top-k notes and their linked notes, each shown whole
    /// (raw text and note line), packed most relevant first and shown in time
    /// order; what does not fit is left out.
    #[serde(alias = "top-k", alias = "top_k")]
    TopK,
    /// FlexA-Mem's fit-or-degrade renderer
    /// ([`submem_kit::fit::FitOrDegrade`]) over a wider pool of candidates:
    /// each gets raw text, an excerpt or only its note line, the highest that
    /// fits the room left.
    Fit,
}

/// Settings of [`crate::EvolvingNotes`], and of the `m4` plugin: every field
/// is a setting under its serde name (`m4:k=10,links=3,evolve=0.6,render=fit`),
/// listed by `submem substrates` with the first sentence of its doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct NotesConfig {
    /// Seeds per read (unset: the query's top-k hint, the harness's
    /// `--top-k`, 10 by default).
    #[serde(rename = "k")]
    pub top_k: Option<usize>,
    /// Links each new note makes to its most similar earlier notes (cosine
    /// of the note embeddings). Default 3, as `docs/METHODS.md` specifies;
    /// A-Mem's reference looks at 5 neighbours.
    pub links: usize,
    /// Linked notes a read adds per seed (most similar to the query first).
    #[serde(rename = "expand")]
    pub expand_per_seed: usize,
    /// Cosine at or above which a new note triggers evolution of that
    /// neighbour, in [-1, 1]. Default 0.6: MiniLM cosines of unrelated
    /// conversation turns lie around 0.1–0.4, of turns on one topic around
    /// 0.5–0.8.
    #[serde(rename = "evolve")]
    pub evolve_threshold: f32,
    /// Most neighbours one evolution call may rewrite.
    pub evolve_neighbours: usize,
    /// How reads render the notes they retrieved.
    pub render: RenderMode,
    /// Candidates the fit renderer considers: seeds and links first, then the
    /// other notes by cosine, up to this many.
    pub fit_pool: usize,
    /// E: most tokens of pieces in one excerpt (fit renderer).
    #[serde(rename = "e")]
    pub excerpt_tokens: usize,
    /// Most words of a unit's raw text shown in a prompt.
    pub prompt_words: usize,
    /// Most words of a note's context description (longer ones are cut).
    pub context_words: usize,
    /// Most keywords and most tags kept per note.
    pub max_keywords: usize,
    /// Most new tokens of the note-writing call.
    pub note_max_tokens: usize,
    /// Most new tokens of the evolution call.
    pub evolve_max_tokens: usize,
    /// Texts per embedder call.
    pub embed_batch: usize,
}

impl Default for NotesConfig {
    fn default() -> Self {
        NotesConfig {
            top_k: None,
            links: 3,
            expand_per_seed: 3,
            evolve_threshold: 0.6,
            evolve_neighbours: 3,
            render: RenderMode::TopK,
            fit_pool: 48,
            excerpt_tokens: 160,
            prompt_words: 300,
            context_words: 40,
            max_keywords: 8,
            note_max_tokens: 160,
            evolve_max_tokens: 256,
            embed_batch: 32,
        }
    }
}

submem_kit::setters!(NotesConfig {
    with_links => links: usize,
    with_expand_per_seed => expand_per_seed: usize,
    with_evolve_threshold => evolve_threshold: f32,
    with_evolve_neighbours => evolve_neighbours: usize,
    with_render => render: RenderMode,
    with_fit_pool => fit_pool: usize,
    with_excerpt_tokens => excerpt_tokens: usize,
    with_embed_batch => embed_batch: usize,
});

impl NotesConfig {
    /// Sets the seeds per read (overrides the query's hint).
    pub fn with_top_k(mut self, k: usize) -> Self {
        self.top_k = Some(k);
        self
    }

    /// Rejects settings no read or write can honour.
    pub fn validate(&self) -> Result<(), NotesError> {
        if self.top_k == Some(0) {
            return Err(NotesError::Config("k must be at least 1".into()));
        }
        if !(self.evolve_threshold.is_finite() && (-1.0..=1.0).contains(&self.evolve_threshold)) {
            return Err(NotesError::Config(format!(
                "evolve threshold must be a cosine in [-1, 1], got {}",
                self.evolve_threshold
            )));
        }
        for (name, v) in [
            ("prompt_words", self.prompt_words),
            ("context_words", self.context_words),
            ("note_max_tokens", self.note_max_tokens),
            ("evolve_max_tokens", self.evolve_max_tokens),
            ("embed_batch", self.embed_batch),
        ] {
            if v == 0 {
                return Err(NotesError::Config(format!("{name} must be at least 1")));
            }
        }
        Ok(())
    }
}

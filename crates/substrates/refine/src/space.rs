//! What M7 and M8 keep alike per namespace: a [`Journal`] of the live events
//! and state derived from it, held in the kit's [`Spaces`], persisted tagged
//! with the embedder, restored only after the journal is reindexed and the
//! derived state checked, and forgotten the same way (a whole namespace, or
//! some sources of one, which each substrate re-derives in its own way).

use std::path::Path;

use serde::de::DeserializeOwned;
use submem_core::{Embedder, Footprint, Forget, Result};
use submem_kit::spaces::Spaces;
use submem_kit::state::StateFile;

use crate::journal::Journal;

/// One namespace's state of M7 or M8: a journal and what is derived from it.
pub(crate) trait Derived {
    /// The live events.
    fn journal(&self) -> &Journal;
    /// The live events, to rebuild their index after a restore.
    fn journal_mut(&mut self) -> &mut Journal;
    /// Whether the derived state agrees with the journal (after a restore).
    fn check(&self) -> std::result::Result<(), String>;
}

/// Replaces every namespace's state with the one persisted in `dir` as
/// `file` describes, made with `embedder`; a directory whose journal or
/// derived state does not hold together is refused and nothing live changes.
pub(crate) fn restore<S: Derived + DeserializeOwned>(
    spaces: &Spaces<S>,
    file: &StateFile,
    dir: &Path,
    embedder: &dyn Embedder,
) -> Result<()> {
    spaces.restore(file, dir, Some(embedder), |_, space: &mut S| {
        space.journal_mut().reindex().and_then(|()| space.check())
    })
}

/// Forgets `target`: a whole namespace, or the sources of one, which
/// `sources` removes from the namespace's state; returns the events dropped.
pub(crate) fn forget<S: Derived>(
    spaces: &Spaces<S>,
    target: &Forget,
    sources: impl FnOnce(&mut S, &[String]) -> usize,
) -> usize {
    let mut spaces = spaces.write();
    match target {
        Forget::Namespace(ns) => spaces.remove(ns).map_or(0, |s| s.journal().len()),
        Forget::Sources {
            namespace,
            source_ids,
        } => spaces
            .get_mut(namespace)
            .map_or(0, |space| sources(space, source_ids)),
    }
}

/// The journal's share of a footprint: its events are the input, stay
/// stored, and take their heap bytes.
pub(crate) fn journal_footprint(journal: &Journal) -> Footprint {
    Footprint::verbatim(journal.tokens(), journal.memory_bytes())
}

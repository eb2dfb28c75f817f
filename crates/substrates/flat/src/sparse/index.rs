//! The tantivy index behind M2: one index for every namespace, with fields
//! `namespace` (raw string, for the filter and namespace deletes), `key`
//! (namespace + NUL + source id, for deletes of one unit), `position` (u64
//! fast field: the unit's place in its namespace's history) and `text`
//! (analysed with [`super::analyzer`], term frequencies indexed, not stored:
//! the text lives in the side map of [`super::SparseMemory`]).
//!
//! An index is either in RAM (writable) or opened read-only from a persisted
//! directory through tantivy's mmap directory; the owner moves a read-only
//! index back to RAM before its first mutation, so a persisted directory is
//! never changed in place.
//!
//! **No writer between changes.** A tantivy `IndexWriter` owns an indexing
//! thread, a segment-updater thread and a pool of merge threads; an index
//! that kept one open cost about 3.9 MiB resident and six threads while
//! still empty, and 3.9–5.1 MiB with 20 turns, and `submem serve` builds one
//! instance per namespace (see the crate docs and
//! `examples/instance_footprint.rs`). A change therefore opens a writer,
//! commits once and hands the writer to a short-lived thread that runs the
//! merges the commit calls for (chosen in history order, so the same writes
//! leave the same segments: [`merge_settled`]), reloads the reader and drops
//! it ([`finish_merges`]): between changes an index holds its segments and an
//! `IndexReader` (no thread: reloads are manual), nothing else. A write
//! pays about 0.4 ms more for the spawns (its commit, which re-spawned the
//! indexing thread and allocated the writer's 4 MiB term table before too,
//! takes 5–6 ms for 20 units), and a change that comes while the last one's
//! merges still run waits for them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::index::{SegmentId, SegmentMeta};
use tantivy::indexer::{IndexWriterOptions, LogMergePolicy, MergePolicy, NoMergePolicy};
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, STRING,
};
use tantivy::{
    Index, IndexReader, IndexWriter, ReloadPolicy, SegmentReader, TantivyDocument, Term,
};

use super::analyzer::{build_analyzer, NsStats, NsStatsProvider, ANALYZER_NAME};
use super::config::SparseConfig;
use crate::error::{FlatError, FlatResult};
use crate::unit::StoredUnit;

/// Separator between namespace and source id in the `key` field; namespaces
/// cannot contain control characters.
const KEY_SEPARATOR: char = '\u{0}';

/// Merge threads of a writer. A writer lives for one commit and the merges
/// it runs (usually none, at most a few); more threads would only overlap
/// those few, at the price of more spawns on every write.
const MERGE_THREADS: usize = 1;

#[derive(Debug, Clone, Copy)]
struct Fields {
    namespace: Field,
    key: Field,
    position: Field,
    text: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let namespace = b.add_text_field("namespace", STRING);
    let key = b.add_text_field("key", STRING);
    let position = b.add_u64_field("position", FAST);
    let text = b.add_text_field(
        "text",
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER_NAME)
                .set_index_option(IndexRecordOption::WithFreqs),
        ),
    );
    (
        b.build(),
        Fields {
            namespace,
            key,
            position,
            text,
        },
    )
}

fn key(ns: &str, source_id: &str) -> String {
    format!("{ns}{KEY_SEPARATOR}{source_id}")
}

/// Where the index lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Backing {
    /// In memory, writable.
    Ram,
    /// Read-only, mmapped from this directory.
    Mmap(PathBuf),
}

/// A tantivy index with its reader; a writer exists only inside a change
/// and while the merges its commit started run.
pub(crate) struct TantivyIndex {
    index: Index,
    reader: IndexReader,
    writer_heap_bytes: usize,
    fields: Fields,
    backing: Backing,
    /// The last change's merges, when they may still be running.
    merges: Option<Arc<Merges>>,
}

/// Raised once the merges a commit started have finished, the reader shows
/// their result and the writer that ran them is dropped.
#[derive(Debug, Default)]
struct Merges {
    done: Mutex<bool>,
    finished: Condvar,
}

impl Merges {
    fn finish(&self) {
        *self.done.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.finished.notify_all();
    }

    fn wait(&self) {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        while !*done {
            done = self
                .finished
                .wait(done)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Lets `writer` run the merges the commit calls for on a thread of its
/// own, reload `reader` so searches see the merged segments, and drop the
/// writer (its threads end with it). A write thus returns after its commit,
/// as it did while a writer stayed open, and a merge (hundreds of
/// milliseconds in a namespace of 100k units) delays only the next change
/// of the same index, and only if it comes before the merge ends. The
/// thread is detached: nothing is left of it once it has run.
///
/// When no thread can be started the writer is dropped at once: the commit
/// stands, the segments stay unmerged until a later commit merges them.
fn finish_merges(writer: IndexWriter<TantivyDocument>, reader: IndexReader) -> Option<Arc<Merges>> {
    let merges = Arc::new(Merges::default());
    let signal = Arc::clone(&merges);
    let spawned = std::thread::Builder::new()
        .name("submem-m2-merge".into())
        .spawn(move || {
            // The commit is durable (in RAM) already: a failed merge only
            // leaves more segments behind, so it is logged, not returned.
            if let Err(e) = merge_settled(writer) {
                tracing::warn!(error = %e, "a tantivy merge failed after a commit");
            }
            if let Err(e) = reader.reload() {
                tracing::warn!(error = %e, "reloading the reader after a merge failed");
            }
            signal.finish();
        });
    match spawned {
        Ok(_detached) => Some(merges),
        Err(e) => {
            tracing::warn!(error = %e, "no thread for the merges of a commit: they are skipped");
            None
        }
    }
}

/// Merges the committed segments as tantivy's log merge policy chooses
/// (eight segments of a size class at a time), one merge after the other
/// and again over the result, until the policy asks for no more; then drops
/// the writer.
///
/// The same writes must leave the same segments (M2's E1 is their size),
/// and tantivy alone does not: its merges run from its segment updater's
/// threads, so a merge that a finished merge cascades into may or may not
/// start before the writer is dropped, and segments of one size are taken
/// in the order of their random ids, which orders the merged documents.
/// So the writer's own policy is off ([`writer_of`]), and here segments are
/// offered to the policy, and merged, in history order ([`history_order`]).
fn merge_settled(mut writer: IndexWriter<TantivyDocument>) -> tantivy::Result<()> {
    let policy = LogMergePolicy::default();
    // A bound, not a limit one expects to meet: each round merges at least
    // two segments into one (or purges deletes), so rounds are few.
    for _ in 0..MAX_MERGE_ROUNDS {
        let segments = history_order(writer.index())?;
        let rank = |id: &SegmentId| segments.iter().position(|m| m.id() == *id);
        let candidates = policy.compute_merge_candidates(&segments);
        if candidates.is_empty() {
            break;
        }
        for mut candidate in candidates {
            candidate.0.sort_by_key(|id| rank(id));
            writer.merge(&candidate.0).wait()?;
        }
    }
    writer.wait_merging_threads()
}

/// The committed segments ordered by the first and last history position
/// they hold, then by size: an order that follows the writes, not
/// tantivy's random segment ids. Positions count per namespace, so in an
/// index shared by namespaces two segments can tie on all three; such ties
/// keep tantivy's order. An instance per namespace (each bench
/// conversation, each server namespace) has none.
fn history_order(index: &Index) -> tantivy::Result<Vec<SegmentMeta>> {
    let mut keyed = Vec::new();
    for meta in index.searchable_segment_metas()? {
        let reader = SegmentReader::open(&index.segment(meta.clone()))?;
        let positions = reader.fast_fields().u64("position")?;
        let key = (positions.min_value(), positions.max_value(), meta.max_doc());
        keyed.push((key, meta));
    }
    keyed.sort_by_key(|(key, _)| *key);
    Ok(keyed.into_iter().map(|(_, meta)| meta).collect())
}

/// At most this many rounds of merges after one commit.
const MAX_MERGE_ROUNDS: usize = 16;

impl std::fmt::Debug for TantivyIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TantivyIndex")
            .field("backing", &self.backing)
            .field("docs", &self.num_docs())
            .finish()
    }
}

/// Registers M2's analyzer under the name the schema's text field asks for.
fn register_analyzer(index: &Index, cfg: &SparseConfig) {
    index
        .tokenizers()
        .register(ANALYZER_NAME, build_analyzer(cfg));
}

fn reader_of(index: &Index) -> FlatResult<IndexReader> {
    Ok(index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?)
}

/// A writer with one indexing thread and [`MERGE_THREADS`] merge threads.
fn writer_of(index: &Index, heap_bytes: usize) -> FlatResult<IndexWriter<TantivyDocument>> {
    let options = IndexWriterOptions::builder()
        .num_worker_threads(1)
        .memory_budget_per_thread(heap_bytes)
        .num_merge_threads(MERGE_THREADS)
        .build();
    let writer = index.writer_with_options(options)?;
    // Merges are chosen after each commit by `merge_settled`, not scheduled
    // by tantivy's threads (see there).
    writer.set_merge_policy(Box::new(NoMergePolicy));
    Ok(writer)
}

impl TantivyIndex {
    /// An empty in-memory index.
    pub fn new_ram(cfg: &SparseConfig) -> FlatResult<Self> {
        let (schema, fields) = schema();
        Self::serving(Index::create_in_ram(schema), fields, cfg, Backing::Ram)
    }

    /// `index` with the analyzer registered and a reader on it: what every
    /// served index (in memory or mmapped) starts from.
    fn serving(
        index: Index,
        fields: Fields,
        cfg: &SparseConfig,
        backing: Backing,
    ) -> FlatResult<Self> {
        register_analyzer(&index, cfg);
        let reader = reader_of(&index)?;
        Ok(TantivyIndex {
            index,
            reader,
            writer_heap_bytes: cfg.writer_heap_bytes,
            fields,
            backing,
            merges: None,
        })
    }

    /// Writes a fresh on-disk index of `docs` under `path` (which must not
    /// exist yet) and closes it.
    pub fn create_on_disk<'a>(
        path: &Path,
        cfg: &SparseConfig,
        docs: impl Iterator<Item = (&'a str, &'a StoredUnit)>,
    ) -> FlatResult<()> {
        let (schema, fields) = schema();
        std::fs::create_dir_all(path)
            .map_err(|e| FlatError::Corrupt(format!("cannot create {}: {e}", path.display())))?;
        let index = Index::create_in_dir(path, schema)?;
        register_analyzer(&index, cfg);
        let mut writer = writer_of(&index, cfg.writer_heap_bytes)?;
        for (ns, unit) in docs {
            writer.add_document(Self::doc(&fields, ns, unit))?;
        }
        writer.commit()?;
        writer.wait_merging_threads()?;
        Ok(())
    }

    /// Opens a persisted index read-only (mmapped).
    pub fn open_mmap(path: &Path, cfg: &SparseConfig) -> FlatResult<Self> {
        let dir = MmapDirectory::open(path)?;
        let index = Index::open(dir)?;
        let (expected, fields) = schema();
        if index.schema() != expected {
            return Err(FlatError::Corrupt(format!(
                "index at {} has a different schema",
                path.display()
            )));
        }
        Self::serving(index, fields, cfg, Backing::Mmap(path.to_path_buf()))
    }

    /// Where the index lives.
    pub fn backing(&self) -> &Backing {
        &self.backing
    }

    fn doc(fields: &Fields, ns: &str, unit: &StoredUnit) -> TantivyDocument {
        let mut doc = TantivyDocument::default();
        doc.add_text(fields.namespace, ns);
        doc.add_text(fields.key, key(ns, &unit.source_id));
        doc.add_u64(fields.position, unit.position);
        doc.add_text(fields.text, &unit.text);
        doc
    }

    /// Runs `change` on a fresh writer, commits once and makes the result
    /// visible to searches; the writer then finishes the merges its commit
    /// started on a thread of its own ([`finish_merges`]) and is dropped.
    /// When `change` or the commit fails nothing is committed: the writer is
    /// dropped with its pending operations.
    fn change(
        &mut self,
        change: impl FnOnce(&mut IndexWriter<TantivyDocument>, &Fields) -> FlatResult<()>,
    ) -> FlatResult<()> {
        if self.backing != Backing::Ram {
            return Err(FlatError::Corrupt(
                "a read-only index was asked to change".into(),
            ));
        }
        // An index has one writer at a time: the last change's must be gone.
        self.wait_for_merges();
        let mut writer = writer_of(&self.index, self.writer_heap_bytes)?;
        change(&mut writer, &self.fields)?;
        writer.commit()?;
        self.reader.reload()?;
        self.merges = finish_merges(writer, self.reader.clone());
        Ok(())
    }

    /// Blocks until the merges the last change started have finished, the
    /// reader shows their result and the writer that ran them is gone.
    pub fn wait_for_merges(&mut self) {
        if let Some(merges) = self.merges.take() {
            merges.wait();
        }
    }

    /// Adds `(namespace, unit)` documents and commits once.
    pub fn add<'a>(
        &mut self,
        docs: impl IntoIterator<Item = (&'a str, &'a StoredUnit)>,
    ) -> FlatResult<()> {
        self.change(|writer, fields| {
            for (ns, unit) in docs {
                writer.add_document(Self::doc(fields, ns, unit))?;
            }
            Ok(())
        })
    }

    /// Deletes the listed units of `ns` and commits.
    pub fn delete_sources(&mut self, ns: &str, source_ids: &[&str]) -> FlatResult<()> {
        self.change(|writer, fields| {
            for id in source_ids {
                writer.delete_term(Term::from_field_text(fields.key, &key(ns, id)));
            }
            Ok(())
        })
    }

    /// Deletes every unit of `ns` and commits.
    pub fn delete_namespace(&mut self, ns: &str) -> FlatResult<()> {
        self.change(|writer, fields| {
            writer.delete_term(Term::from_field_text(fields.namespace, ns));
            Ok(())
        })
    }

    /// Live documents over all namespaces.
    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Bytes of the index's segments (RAM or disk).
    pub fn index_bytes(&self) -> u64 {
        self.reader
            .searcher()
            .space_usage()
            .map(|u| u.total().get_bytes())
            .unwrap_or(0)
    }

    /// BM25 top-`k` of namespace `ns` for the analysed query `terms`
    /// (distinct), scored with `stats`; returns `(score, position)` best
    /// first, ties broken by the newer position.
    pub fn search(
        &self,
        ns: &str,
        terms: &[String],
        k: usize,
        stats: &NsStats,
    ) -> FlatResult<Vec<(f32, u64)>> {
        // Clamped: tantivy allocates room for 2·k hits up front.
        let k = k.min(usize::try_from(stats.docs).unwrap_or(usize::MAX));
        if terms.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let filter: Box<dyn Query> = Box::new(ConstScoreQuery::new(
            Box::new(TermQuery::new(
                Term::from_field_text(self.fields.namespace, ns),
                IndexRecordOption::Basic,
            )),
            0.0,
        ));
        let should: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(self.fields.text, t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect();
        let query = BooleanQuery::new(vec![
            (Occur::Must, filter),
            (Occur::Must, Box::new(BooleanQuery::new(should))),
        ]);
        let collector = TopDocs::with_limit(k).tweak_score(|segment: &SegmentReader| {
            let column = segment
                .fast_fields()
                .u64("position")
                .ok()
                .map(|c| c.first_or_default_col(u64::MAX));
            move |doc: tantivy::DocId, score: tantivy::Score| {
                (score, column.as_ref().map_or(u64::MAX, |c| c.get_val(doc)))
            }
        });
        let provider = NsStatsProvider {
            stats,
            text: self.fields.text,
        };
        let hits = self
            .reader
            .searcher()
            .search_with_statistics_provider(&query, &collector, &provider)?;
        Ok(hits.into_iter().map(|(key, _)| key).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(i: u64) -> StoredUnit {
        StoredUnit {
            source_id: format!("u{i}"),
            text: format!("x: unit {i} about cats"),
            position: i,
            tokens: 5,
        }
    }

    /// tantivy allows one writer per index at a time; taking one succeeds
    /// only while the index holds none.
    fn holds_no_writer(index: &TantivyIndex) -> bool {
        writer_of(&index.index, MIN_HEAP).is_ok()
    }

    const MIN_HEAP: usize = super::super::config::MIN_WRITER_HEAP_BYTES;

    #[test]
    fn no_writer_outlives_a_change() {
        let cfg = SparseConfig::default();
        let mut index = TantivyIndex::new_ram(&cfg).unwrap();
        assert!(holds_no_writer(&index), "a new index holds a writer");
        let units: Vec<StoredUnit> = (0..20).map(unit).collect();
        index.add(units.iter().map(|u| ("a", u))).unwrap();
        index.wait_for_merges();
        assert!(holds_no_writer(&index), "a writer outlived a write");
        index.delete_sources("a", &["u3"]).unwrap();
        index.wait_for_merges();
        assert!(holds_no_writer(&index), "a writer outlived a forget");
        assert_eq!(index.num_docs(), 19);
        index.delete_namespace("a").unwrap();
        index.wait_for_merges();
        assert!(holds_no_writer(&index));
        assert_eq!(index.num_docs(), 0);
    }

    /// The same writes leave the same segments: the merged index's size is
    /// a reported figure (E1), so it must not depend on thread timing or on
    /// tantivy's random segment ids. Batches of uneven size and texts of
    /// uneven length, as a conversation's sessions are.
    #[test]
    fn the_same_writes_leave_the_same_index() {
        let cfg = SparseConfig::default();
        let mut seed = 7u64;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut units = Vec::new();
        let mut batches = Vec::new();
        for _ in 0..24 {
            let start = units.len();
            for _ in 0..(3 + next(20)) {
                let i = units.len();
                let text: Vec<String> = (0..(4 + next(30)))
                    .map(|_| format!("w{}", next(400)))
                    .collect();
                units.push(StoredUnit {
                    source_id: format!("u{i}"),
                    text: text.join(" "),
                    position: i as u64,
                    tokens: 5,
                });
            }
            batches.push(start..units.len());
        }
        let layout = || {
            let mut index = TantivyIndex::new_ram(&cfg).unwrap();
            for batch in &batches {
                index
                    .add(units[batch.clone()].iter().map(|u| ("a", u)))
                    .unwrap();
            }
            index.wait_for_merges();
            let segments = index.reader.searcher().segment_readers().len();
            (index.index_bytes(), segments)
        };
        let first = layout();
        assert!(first.1 < 8, "{} segments after 24 writes", first.1);
        for _ in 0..5 {
            assert_eq!(layout(), first);
        }
    }

    #[test]
    fn many_small_writes_are_merged_and_searched_merged() {
        let cfg = SparseConfig::default();
        let mut index = TantivyIndex::new_ram(&cfg).unwrap();
        let units: Vec<StoredUnit> = (0..40).map(unit).collect();
        for chunk in units.chunks(2) {
            index.add(chunk.iter().map(|u| ("a", u))).unwrap();
        }
        // Twenty commits of one segment each; tantivy's log merge policy
        // merges eight at a time, each change waits for the last one's
        // merges, and the reader is reloaded once they are done.
        index.wait_for_merges();
        let segments = index.reader.searcher().segment_readers().len();
        assert!(segments < 8, "{segments} segments after 20 small writes");
        assert_eq!(index.num_docs(), 40);
    }
}

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

use std::path::{Path, PathBuf};
use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
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

/// A tantivy index with its reader and (when writable) its writer.
pub(crate) struct TantivyIndex {
    reader: IndexReader,
    writer: Option<IndexWriter<TantivyDocument>>,
    fields: Fields,
    backing: Backing,
}

impl std::fmt::Debug for TantivyIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TantivyIndex")
            .field("backing", &self.backing)
            .field("docs", &self.num_docs())
            .finish()
    }
}

fn reader_of(index: &Index) -> FlatResult<IndexReader> {
    Ok(index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?)
}

impl TantivyIndex {
    /// An empty in-memory index.
    pub fn new_ram(cfg: &SparseConfig) -> FlatResult<Self> {
        let (schema, fields) = schema();
        let index = Index::create_in_ram(schema);
        index
            .tokenizers()
            .register(ANALYZER_NAME, build_analyzer(cfg));
        let writer = index.writer_with_num_threads(1, cfg.writer_heap_bytes)?;
        let reader = reader_of(&index)?;
        Ok(TantivyIndex {
            reader,
            writer: Some(writer),
            fields,
            backing: Backing::Ram,
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
        index
            .tokenizers()
            .register(ANALYZER_NAME, build_analyzer(cfg));
        let mut writer: IndexWriter<TantivyDocument> =
            index.writer_with_num_threads(1, cfg.writer_heap_bytes)?;
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
        index
            .tokenizers()
            .register(ANALYZER_NAME, build_analyzer(cfg));
        let reader = reader_of(&index)?;
        Ok(TantivyIndex {
            reader,
            writer: None,
            fields,
            backing: Backing::Mmap(path.to_path_buf()),
        })
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

    fn writer(&mut self) -> FlatResult<&mut IndexWriter<TantivyDocument>> {
        self.writer
            .as_mut()
            .ok_or_else(|| FlatError::Corrupt("a read-only index was asked to change".into()))
    }

    /// Commits pending changes and makes them visible to searches; on failure
    /// the pending changes are rolled back, so none of them lands later.
    fn commit(&mut self) -> FlatResult<()> {
        let writer = self.writer()?;
        if let Err(e) = writer.commit() {
            if let Err(r) = writer.rollback() {
                tracing::error!(error = %r, "tantivy rollback failed after a failed commit");
            }
            return Err(e.into());
        }
        self.reader.reload()?;
        Ok(())
    }

    /// Adds `(namespace, unit)` documents and commits once.
    pub fn add<'a>(
        &mut self,
        docs: impl IntoIterator<Item = (&'a str, &'a StoredUnit)>,
    ) -> FlatResult<()> {
        let fields = self.fields;
        let writer = self.writer()?;
        for (ns, unit) in docs {
            if let Err(e) = writer.add_document(Self::doc(&fields, ns, unit)) {
                if let Err(r) = writer.rollback() {
                    tracing::error!(error = %r, "tantivy rollback failed after a failed add");
                }
                return Err(e.into());
            }
        }
        self.commit()
    }

    /// Deletes the listed units of `ns` and commits.
    pub fn delete_sources(&mut self, ns: &str, source_ids: &[&str]) -> FlatResult<()> {
        let field = self.fields.key;
        let writer = self.writer()?;
        for id in source_ids {
            writer.delete_term(Term::from_field_text(field, &key(ns, id)));
        }
        self.commit()
    }

    /// Deletes every unit of `ns` and commits.
    pub fn delete_namespace(&mut self, ns: &str) -> FlatResult<()> {
        let field = self.fields.namespace;
        self.writer()?.delete_term(Term::from_field_text(field, ns));
        self.commit()
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

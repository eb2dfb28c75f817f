//! The store's state and the log records that build it. Every change is a
//! [`LogRecord`] appended to the log (when durable) and then applied with
//! [`State::apply`], so replaying the log on open rebuilds the same state.
//!
//! A unit's raw text is the rendered text of its events joined by line breaks;
//! each event's text is stored once and never changed. Forgetting an event
//! removes it from its unit; the unit's note (record, fields, embedding) is
//! then dropped and the unit, with a new version, is written again from its
//! remaining events (re-cut), so no record or merged record still describes
//! the forgotten text.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use submem_core::{Event, Namespace, TokenCounter};

use submem_kit::bm25::Bm25Index;
use submem_kit::record::{Fields, RuleLine, Writer};
use submem_kit::text::StopWords;

pub use crate::pieces::PieceKey;
use crate::pieces::{cut_event, Piece};
use crate::record::UnitKind;
use crate::vectors::PieceVectors;
use crate::PieceSizes;

/// A merged record's key: the (unit id, version) pairs it covers.
pub type MergeKey = Vec<(u64, u32)>;

/// One record of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum LogRecord {
    /// An event joined unit `unit`.
    Event {
        /// Namespace.
        ns: Namespace,
        /// Unit id.
        unit: u64,
        /// Event sequence number.
        seq: u64,
        /// The event.
        event: Event,
    },
    /// Unit `unit` takes no more events.
    Close {
        /// Namespace.
        ns: Namespace,
        /// Unit id.
        unit: u64,
    },
    /// The note of a unit.
    Note {
        /// Namespace.
        ns: Namespace,
        /// Unit id.
        unit: u64,
        /// Unit version it describes.
        version: u32,
        /// Record `s`.
        record: String,
        /// Fields `f`.
        fields: Fields,
        /// Who wrote it.
        writer: Writer,
        /// `φ(s‖f)`.
        embedding: Vec<f32>,
        /// Links to earlier units.
        links: Vec<u64>,
    },
    /// A merged record.
    Merge {
        /// Namespace.
        ns: Namespace,
        /// Units covered.
        key: MergeKey,
        /// Text.
        text: String,
        /// Who wrote it.
        writer: Writer,
    },
    /// A merged record adopted for good (agentic episodes).
    Adopt {
        /// Namespace.
        ns: Namespace,
        /// Its key.
        key: MergeKey,
    },
    /// Tombstone for events.
    Forget {
        /// Namespace.
        ns: Namespace,
        /// Source ids.
        source_ids: Vec<String>,
    },
    /// Tombstone for a namespace.
    ForgetNamespace {
        /// Namespace.
        ns: Namespace,
    },
    /// Piece embeddings already computed: each write embeds its new pieces
    /// (when a ranking in use needs them) and logs them here, and a snapshot
    /// (persist, compaction) keeps them, so no read embeds a piece.
    PieceVectors {
        /// Namespace.
        ns: Namespace,
        /// Name of the embedder that made them; a store opened with another
        /// embedder ignores them.
        embedder: String,
        /// `(event sequence number, piece index, vector)`.
        pieces: Vec<(u64, u32, Vec<f32>)>,
    },
}

/// Piece vectors per [`LogRecord::PieceVectors`] (about 1 MB of JSON at
/// 384 dimensions), so no record grows with the store.
pub(crate) const PIECE_VECTORS_PER_RECORD: usize = 256;

/// An event as stored.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    /// Sequence number in the namespace.
    pub seq: u64,
    /// The event.
    pub event: Event,
    /// Its raw text (`Event::render`), never changed.
    pub text: String,
    /// Tokens of `text`.
    pub tokens: usize,
    /// Its pieces.
    pub pieces: Vec<Piece>,
    /// Tokens of each piece as shown.
    pub piece_tokens: Vec<usize>,
}

/// A note (Section 3.1) without the raw text, which lives in the unit.
#[derive(Debug, Clone)]
pub struct Note {
    /// Record `s`.
    pub record: String,
    /// Fields `f`.
    pub fields: Fields,
    /// Who wrote it.
    pub writer: Writer,
    /// `φ(s‖f)`.
    pub embedding: Vec<f32>,
    /// Links written with the note (to earlier units).
    pub links_out: Vec<u64>,
}

/// A unit of history.
#[derive(Debug, Clone)]
pub struct Unit {
    /// Id (increasing in time).
    pub id: u64,
    /// Turns or steps.
    pub kind: UnitKind,
    /// Session of its turns.
    pub session: Option<String>,
    /// Opening speaker of that session.
    pub opener: Option<String>,
    /// Events in time order.
    pub events: Vec<StoredEvent>,
    /// No more events join.
    pub closed: bool,
    /// Version (bumped when forgetting re-cuts it).
    pub version: u32,
    /// Its note, once written.
    pub note: Option<Note>,
    /// Tokens of the raw text.
    pub raw_tokens: usize,
    /// Tokens of the record line.
    pub record_tokens: usize,
}

impl Unit {
    /// The raw text.
    pub fn raw(&self) -> String {
        self.events
            .iter()
            .map(|e| e.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Sum of event tokens (the packing measure).
    pub fn packed_tokens(&self) -> usize {
        self.events.iter().map(|e| e.tokens).sum()
    }

    /// Lines for the rule writer.
    pub fn rule_lines(&self) -> Vec<RuleLine<'_>> {
        self.events
            .iter()
            .map(|e| RuleLine::from(&e.event))
            .collect()
    }

    /// Pieces in unit order, with keys and shown token counts.
    pub fn pieces(&self) -> impl Iterator<Item = (PieceKey, &Piece, usize)> {
        self.events.iter().flat_map(|e| {
            e.pieces
                .iter()
                .zip(&e.piece_tokens)
                .enumerate()
                .map(move |(i, (p, t))| ((e.seq, i as u32), p, *t))
        })
    }
}

/// A merged record.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Its line as shown.
    pub text: String,
    /// Tokens of the line.
    pub tokens: usize,
    /// Who wrote it.
    pub writer: Writer,
}

/// One namespace.
#[derive(Debug, Default)]
pub struct NsState {
    /// Units by id.
    pub units: BTreeMap<u64, Unit>,
    /// Next unit id.
    pub next_unit: u64,
    /// Next event sequence number.
    pub next_seq: u64,
    /// The open unit.
    pub open: Option<u64>,
    /// Source id → (unit, seq).
    pub by_source: HashMap<String, (u64, u64)>,
    /// Event seq → unit.
    pub seq_unit: HashMap<u64, u64>,
    /// Links, both directions.
    pub links: BTreeMap<u64, BTreeSet<u64>>,
    /// BM25 over pieces.
    pub bm25: Bm25Index<PieceKey>,
    /// Merged records.
    pub merges: HashMap<MergeKey, Merged>,
    /// Adopted merges.
    pub adopted: BTreeSet<MergeKey>,
    /// Opening speaker of the current session (session id, speaker).
    pub session_opener: Option<(String, String)>,
    /// Cache: piece vectors, computed when first needed; snapshots keep them
    /// ([`LogRecord::PieceVectors`]).
    pub piece_vecs: PieceVectors,
    /// Cache: provisional note vectors of unsealed units, by (unit, version, events).
    pub provisional: HashMap<(u64, u32, usize), Vec<f32>>,
    /// Tombstones since the last compaction.
    pub dirty: bool,
}

impl NsState {
    /// Units closed but without a note, in time order.
    pub fn pending(&self) -> Vec<u64> {
        self.units
            .values()
            .filter(|u| u.closed && u.note.is_none())
            .map(|u| u.id)
            .collect()
    }

    fn remove_unit(&mut self, id: u64) {
        if let Some(u) = self.units.remove(&id) {
            for e in &u.events {
                self.seq_unit.remove(&e.seq);
                for i in 0..e.pieces.len() {
                    self.bm25.remove((e.seq, i as u32));
                    self.piece_vecs.remove(&(e.seq, i as u32));
                }
            }
        }
        if let Some(peers) = self.links.remove(&id) {
            for p in peers {
                if let Some(s) = self.links.get_mut(&p) {
                    s.remove(&id);
                }
            }
        }
        if self.open == Some(id) {
            self.open = None;
        }
        self.drop_merges_of(id);
    }

    fn drop_merges_of(&mut self, id: u64) {
        self.merges.retain(|k, _| k.iter().all(|(u, _)| *u != id));
        self.adopted.retain(|k| k.iter().all(|(u, _)| *u != id));
    }
}

/// Everything FlexA-Mem holds.
#[derive(Debug)]
pub struct State {
    /// Namespaces.
    pub ns: BTreeMap<Namespace, NsState>,
    counter: Arc<dyn TokenCounter>,
    kappa: PieceSizes,
    /// Name of the embedder piece vectors come from.
    embedder: String,
    /// Stop words of every namespace's BM25 index.
    stop_words: StopWords,
}

/// The line a record is shown as in the timeline.
pub fn record_line(record: &str) -> String {
    format!("- {record}")
}

impl State {
    /// An empty state; `embedder` names the embedder of its piece vectors.
    pub fn new(
        counter: Arc<dyn TokenCounter>,
        kappa: PieceSizes,
        embedder: String,
        stop_words: StopWords,
    ) -> Self {
        State {
            ns: BTreeMap::new(),
            counter,
            kappa,
            embedder,
            stop_words,
        }
    }

    /// The token counter.
    pub fn counter(&self) -> &dyn TokenCounter {
        &*self.counter
    }

    /// Applies one record; returns how many events it removed.
    pub fn apply(&mut self, rec: &LogRecord) -> usize {
        match rec {
            LogRecord::Event {
                ns,
                unit,
                seq,
                event,
            } => {
                let text = event.render();
                let tokens = self.counter.count(&text);
                let pieces = cut_event(event, self.kappa.of(event), &*self.counter);
                let piece_tokens: Vec<usize> = pieces
                    .iter()
                    .map(|p| self.counter.count(&p.shown()))
                    .collect();
                let stop_words = self.stop_words;
                let st = self.ns.entry(ns.clone()).or_insert_with(|| NsState {
                    bm25: Bm25Index::with_stop_words(stop_words),
                    ..NsState::default()
                });
                for (i, p) in pieces.iter().enumerate() {
                    st.bm25.insert((*seq, i as u32), &p.body);
                }
                st.next_seq = st.next_seq.max(seq + 1);
                st.next_unit = st.next_unit.max(unit + 1);
                st.by_source
                    .insert(event.source_id().to_string(), (*unit, *seq));
                st.seq_unit.insert(*seq, *unit);
                let (kind, session, speaker) = UnitKind::of(event);
                if let (Some(s), Some(sp)) = (session, speaker) {
                    let same = st.session_opener.as_ref().is_some_and(|(id, _)| id == s);
                    if !same {
                        st.session_opener = Some((s.to_string(), sp.to_string()));
                    }
                }
                let session = session.map(str::to_string);
                let opener = st.session_opener.as_ref().map(|(_, sp)| sp.clone());
                let u = st.units.entry(*unit).or_insert_with(|| Unit {
                    id: *unit,
                    kind,
                    session,
                    opener: if kind == UnitKind::Conversation {
                        opener
                    } else {
                        None
                    },
                    events: Vec::new(),
                    closed: false,
                    version: 0,
                    note: None,
                    raw_tokens: 0,
                    record_tokens: 0,
                });
                u.events.push(StoredEvent {
                    seq: *seq,
                    event: event.clone(),
                    text,
                    tokens,
                    pieces,
                    piece_tokens,
                });
                u.raw_tokens = self.counter.count(&u.raw());
                if !u.closed {
                    st.open = Some(*unit);
                }
                0
            }
            LogRecord::Close { ns, unit } => {
                if let Some(st) = self.ns.get_mut(ns) {
                    if let Some(u) = st.units.get_mut(unit) {
                        u.closed = true;
                    }
                    if st.open == Some(*unit) {
                        st.open = None;
                    }
                }
                0
            }
            LogRecord::Note {
                ns,
                unit,
                version,
                record,
                fields,
                writer,
                embedding,
                links,
            } => {
                let counter = self.counter.clone();
                let Some(st) = self.ns.get_mut(ns) else {
                    return 0;
                };
                let Some(u) = st.units.get_mut(unit) else {
                    return 0;
                };
                if *version < u.version {
                    return 0;
                }
                u.version = *version;
                u.record_tokens = counter.count(&record_line(record));
                u.note = Some(Note {
                    record: record.clone(),
                    fields: fields.clone(),
                    writer: *writer,
                    embedding: embedding.clone(),
                    links_out: links.clone(),
                });
                for l in links {
                    if st.units.contains_key(l) && l != unit {
                        st.links.entry(*unit).or_default().insert(*l);
                        st.links.entry(*l).or_default().insert(*unit);
                    }
                }
                0
            }
            LogRecord::Merge {
                ns,
                key,
                text,
                writer,
            } => {
                let line = record_line(text);
                let tokens = self.counter.count(&line);
                if let Some(st) = self.ns.get_mut(ns) {
                    let live = key
                        .iter()
                        .all(|(u, v)| st.units.get(u).is_some_and(|unit| unit.version == *v));
                    if live {
                        st.merges.insert(
                            key.clone(),
                            Merged {
                                text: line,
                                tokens,
                                writer: *writer,
                            },
                        );
                    }
                }
                0
            }
            LogRecord::Adopt { ns, key } => {
                if let Some(st) = self.ns.get_mut(ns) {
                    if st.merges.contains_key(key) {
                        st.adopted.insert(key.clone());
                    }
                }
                0
            }
            LogRecord::Forget { ns, source_ids } => self.forget_sources(ns, source_ids),
            LogRecord::ForgetNamespace { ns } => self
                .ns
                .remove(ns)
                .map_or(0, |st| st.units.values().map(|u| u.events.len()).sum()),
            LogRecord::PieceVectors {
                ns,
                embedder,
                pieces,
            } => {
                if *embedder != self.embedder {
                    return 0;
                }
                if let Some(st) = self.ns.get_mut(ns) {
                    for (seq, piece, vector) in pieces {
                        // Only pieces that still exist: a later forget may
                        // have removed their event.
                        let exists = st
                            .seq_unit
                            .get(seq)
                            .and_then(|u| st.units.get(u))
                            .and_then(|u| u.events.iter().find(|e| e.seq == *seq))
                            .is_some_and(|e| (*piece as usize) < e.pieces.len());
                        if exists {
                            st.piece_vecs.insert((*seq, *piece), vector);
                        }
                    }
                }
                0
            }
        }
    }

    fn forget_sources(&mut self, ns: &Namespace, ids: &[String]) -> usize {
        let counter = self.counter.clone();
        let Some(st) = self.ns.get_mut(ns) else {
            return 0;
        };
        let mut removed = 0;
        let mut touched: BTreeSet<u64> = BTreeSet::new();
        for id in ids {
            let Some((unit, seq)) = st.by_source.remove(id) else {
                continue;
            };
            st.seq_unit.remove(&seq);
            if let Some(u) = st.units.get_mut(&unit) {
                if let Some(pos) = u.events.iter().position(|e| e.seq == seq) {
                    let e = u.events.remove(pos);
                    for i in 0..e.pieces.len() {
                        st.bm25.remove((seq, i as u32));
                        st.piece_vecs.remove(&(seq, i as u32));
                    }
                    removed += 1;
                    touched.insert(unit);
                }
            }
        }
        for unit in touched {
            let empty = st.units.get(&unit).is_none_or(|u| u.events.is_empty());
            if empty {
                st.remove_unit(unit);
                continue;
            }
            st.drop_merges_of(unit);
            if let Some(u) = st.units.get_mut(&unit) {
                u.version += 1;
                u.note = None;
                u.record_tokens = 0;
                u.raw_tokens = counter.count(&u.raw());
            }
        }
        if removed > 0 {
            st.dirty = true;
        }
        removed
    }

    /// The records that rebuild this state (compaction and `persist`).
    pub fn snapshot(&self) -> Vec<LogRecord> {
        let mut out = Vec::new();
        for (ns, st) in &self.ns {
            for u in st.units.values() {
                for e in &u.events {
                    out.push(LogRecord::Event {
                        ns: ns.clone(),
                        unit: u.id,
                        seq: e.seq,
                        event: e.event.clone(),
                    });
                }
                if u.closed {
                    out.push(LogRecord::Close {
                        ns: ns.clone(),
                        unit: u.id,
                    });
                }
                if let Some(n) = &u.note {
                    out.push(LogRecord::Note {
                        ns: ns.clone(),
                        unit: u.id,
                        version: u.version,
                        record: n.record.clone(),
                        fields: n.fields.clone(),
                        writer: n.writer,
                        embedding: n.embedding.clone(),
                        links: n.links_out.clone(),
                    });
                }
            }
            let mut keys: Vec<&MergeKey> = st.merges.keys().collect();
            keys.sort();
            for k in keys {
                if let Some(m) = st.merges.get(k) {
                    out.push(LogRecord::Merge {
                        ns: ns.clone(),
                        key: k.clone(),
                        text: m.text.strip_prefix("- ").unwrap_or(&m.text).to_string(),
                        writer: m.writer,
                    });
                }
            }
            for k in &st.adopted {
                out.push(LogRecord::Adopt {
                    ns: ns.clone(),
                    key: k.clone(),
                });
            }
            let mut vectors: Vec<(&PieceKey, &[f32])> = st.piece_vecs.iter().collect();
            vectors.sort_by_key(|(k, _)| **k);
            for chunk in vectors.chunks(PIECE_VECTORS_PER_RECORD) {
                let pieces = chunk.iter().map(|(k, v)| (k.0, k.1, v.to_vec())).collect();
                out.push(LogRecord::PieceVectors {
                    ns: ns.clone(),
                    embedder: self.embedder.clone(),
                    pieces,
                });
            }
        }
        out
    }

    /// Events held in total.
    pub fn event_count(&self) -> usize {
        self.ns
            .values()
            .flat_map(|s| s.units.values())
            .map(|u| u.events.len())
            .sum()
    }
}

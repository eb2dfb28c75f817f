//! # submem-flat
//!
//! The two flat substrates of *Harness the Memory* (specified in `docs/METHODS.md`),
//! the floor every other substrate is measured against: they store each turn
//! or step as one unit, make no LLM call, and have no management beyond
//! compacting what was forgotten.
//!
//! - [`DenseMemory`] (**M1**, dense vectors): every unit's rendered text is
//!   embedded (all-MiniLM-L6-v2 in production, through
//!   [`submem_core::Embedder`]); a read embeds the query and shows the top-k
//!   by cosine. Small namespaces are scanned exactly; from
//!   [`DenseConfig::exact_threshold`] live units on, an HNSW graph
//!   (hnsw_rs 0.3.5) serves them. See [`dense`].
//! - [`SparseMemory`] (**M2**, sparse BM25): a tantivy 0.27 index with
//!   `k1 = 1.2`, `b = 0.75`, lower-casing and a broad English stop list, with
//!   per-namespace BM25 statistics. See [`sparse`].
//! - [`HybridMemory`] (`hybrid`, not in the paper): both of the above over
//!   the same turns, their rankings fused by reciprocal rank. See [`hybrid`].
//! - [`PieceMemory`] (`m2-pieces`, `m1-pieces`, `hybrid-pieces`): *FlexA-Mem*'s
//!   piece retrieval baseline: pieces of κ tokens ranked by BM25 (or dense
//!   cosine, or both fused), packed into the budget and shown by event in
//!   time order. See [`pieces`].
//!
//! Both render their top-k in time order (or, with [`ReadDepth::fill`], as
//! many ranked units as the budget holds: see [`fill`]) under the query's allowance with
//! [`submem_kit::render_in_time_order`], persist to a directory with a
//! manifest written last, refuse torn or foreign stores with
//! [`submem_core::Error::Store`] (leaving their state unchanged), reject
//! duplicate source ids before storing anything, and keep namespaces apart.
//! Errors inside the crate are [`FlatError`], converted into
//! [`submem_core::Error::Substrate`] at the trait boundary.
//!
//! ## Deviations from the paper
//! - M1's read uses an exact scan below the threshold (exact and no slower
//!   there); the paper always uses HNSW. The graph navigates on `i8` codes
//!   and its candidates are rescored with the exact vectors.
//! - Forgetting tombstones M1 units; `manage()` compacts a namespace once
//!   tombstones exceed [`DenseConfig::compact_share`] (the paper's M1 has no
//!   management and no forgetting).
//! - M2's BM25 statistics are per namespace (tantivy's are per index), so one
//!   tenant's ranking never depends on another's writes.
//!
//! ## Measured speed and size
//! Criterion medians on the 2-core development machine (`cargo bench -p
//! submem-flat`, built with the workspace's `target-cpu=native` and, for M1,
//! the mimalloc allocator the `submem` binary uses), synthetic turns of
//! 20–30 words from a Zipf-like 5,000-word vocabulary, whitespace token
//! counter, top-k 10, budget 4,096:
//!
//! | what | median |
//! |---|---|
//! | M2 read, 600 turns | 23.7 µs |
//! | M2 read, 100,000 units | 0.34 ms |
//! | M2 write, one batch of 2,000 units | 21.0 ms (95k units/s) |
//! | M2 memory (side map + RAM index), 100k units | 327 bytes/unit |
//! | M2 write, 20 units into a namespace of 600 (one instance, fresh ids each time) | 7.0–8.5 ms (was 4.7–6.8 ms with a writer kept open; see below) |
//! | M1 read without query embedding, exact scan / HNSW, 1,024 units | 72 µs / 73 µs |
//! | M1 read, 2,048 units | 137 µs / 96 µs |
//! | M1 read, 4,096 units | 0.27 ms / 0.16 ms |
//! | M1 read, 16,384 units | 1.11 ms / 0.43 ms |
//! | M1 read, **100,000 units** | 6.95 ms / **0.77 ms** (0.92 ms in an earlier run) |
//! | M1 graph build, 16k / 100k units (parallel inserts, 2 cores) | 5.1 s / 68 s |
//! | M1 persist / restore, 100k units with graph | 1.5 s / 2.0 s |
//! | M1 memory, exact path / with graph (384-d) | ≈ 1.8–2.7 kB / 3.0–4.0 kB per unit |
//! | M1 disk, 100k units with graph | 3.0 kB per unit |
//!
//! **Per-instance fixed cost.** `submem serve` builds one instance per
//! namespace, so what an instance holds before it holds anything is paid per
//! tenant. `cargo run --release -p submem-flat --example instance_footprint`
//! builds N instances from the registry's factories with metered services,
//! writes each one batch of 20 turns of about 15 words and reads it once
//! (mimalloc with `MIMALLOC_PURGE_DELAY=0`, the hashing test embedder at
//! 384-d; resident set and thread count from `/proc/self/status`, per
//! instance, N = 200 and 1,000):
//!
//! | per instance | empty | 20 turns | threads |
//! |---|---|---|---|
//! | `m2`, tantivy writer kept open (before) | 3.9–4.0 MiB | 3.9–4.0 MiB (5.1–5.2 MiB with mimalloc's default purge delay) | 6 |
//! | `m2`, writer only while a change runs | ≤ 5 KiB | 26–35 KiB (`footprint()` counts 9.2 KiB) | 0 |
//! | `hybrid-fill` before / after | 3.9–4.0 MiB / ≤ 6 KiB | 3.9–4.0 MiB / 65–75 KiB | 6 / 0 |
//! | `m1-fill` (unchanged: no graph below 2,048 units) | 0 | 30–39 KiB (its 20 vectors are 30 KiB) | 0 |
//!
//! Where the 4 MiB went: a tantivy `IndexWriter` preallocates its document
//! channel (10,000 slots of about 240 bytes: 2.3 MiB), starts an indexing
//! thread, a segment-updater thread and four merge threads (about 140 KiB
//! each under mimalloc, its per-thread heap included), and after a write the
//! 4 MiB term table and arena pages of its segment writer, freed, stayed
//! resident until mimalloc purged them. Each M2 instance also built its own
//! stop-word set twice (about 8 KiB each); the sets are shared now. A write
//! now opens a writer and leaves its merges to a short-lived thread (see
//! [`sparse`]): about 0.4 ms of spawns beside a 5–6 ms commit when writes
//! are spaced out; in the bench's back-to-back loop a write also waits for
//! the merges the previous one started, which used to overlap it, hence the
//! 20-unit row above. Reads and the 2,000-unit batch write were unchanged
//! (medians of three alternating runs of the old and new code: 31.0 / 31.9
//! µs, 466 / 412 µs, 37.0 / 32.9 ms).
//!
//! The query embedding an M1 read adds is measured separately
//! (`cargo bench -p submem-models`, `embedder/minilm_one_query`), and M1
//! write throughput is bound by the embedder (`embedder/minilm_batch32_sentences`):
//! the graph takes 1.5k–16k units/s, the embedder about 130 sentences/s.
//!
//! M1 vectors are 384-d and clustered (`n/50` centres, cosine ≈ 0.8 to the
//! centre); read queries are stored vectors, each of which must come back
//! first, and at 100k units 200 fresh queries from the same clusters give
//! recall@10 1.000 against the exact scan. Two choices made the 1 ms target
//! at 100k reachable: the graph holds `i8` codes of the vectors (a search is
//! bound by fetching candidate vectors; codes are a quarter of the `f32`
//! rows) and rescores its candidates exactly, and `ef_search` is 64 (see
//! [`DenseConfig::ef_search`] for the recall it gives on harder data). With
//! `f32` vectors in the graph, `ef_search` 64 took 1.37 ms at 100k.
//!
//! Bench caveat: the machine is shared; figures vary by ±15 % between runs.
#![warn(missing_docs)]

pub mod dense;
mod error;
pub mod factory;
pub mod fill;
pub mod hybrid;
pub mod pieces;
pub mod sparse;
mod unit;

/// The method id of dense vector memory (*Harness the Memory*, M1).
pub const M1: submem_core::MethodId = submem_core::MethodId::from_static(dense::METHOD);
/// The method id of sparse BM25 memory (*Harness the Memory*, M2).
pub const M2: submem_core::MethodId = submem_core::MethodId::from_static(sparse::METHOD);

pub use dense::{DenseConfig, DenseMemory};
pub use error::FlatError;
pub use factory::factories;
pub use fill::ReadDepth;
pub use hybrid::{HybridConfig, HybridMemory};
pub use pieces::{PieceConfig, PieceMemory, PieceRanking};
pub use sparse::{SparseConfig, SparseMemory};

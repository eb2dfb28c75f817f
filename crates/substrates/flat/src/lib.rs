//! Flat substrates: M1 dense vectors (hnsw_rs) and M2 sparse BM25 (tantivy).
#![warn(missing_docs)]

//! Flat substrates: M1 dense vectors (hnsw_rs) and M2 sparse BM25 (tantivy).
#![warn(missing_docs)]

pub mod dense;
mod error;
mod lock;
pub mod sparse;
mod unit;

pub use dense::{DenseConfig, DenseMemory};
pub use error::FlatError;
pub use sparse::{SparseConfig, SparseMemory};

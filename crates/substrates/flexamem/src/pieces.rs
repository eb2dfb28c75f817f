//! Pieces of κ tokens: the cutting rules live in [`submem_kit::pieces`]
//! (the flat family's piece-retrieval baselines cut the same way); they are
//! re-exported here so FlexA-Mem's paths stay as they were.

pub use submem_kit::pieces::{cut_block, cut_event, run_text, Piece};

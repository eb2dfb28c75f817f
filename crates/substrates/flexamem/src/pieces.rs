//! Pieces of κ tokens: the cutting rules live in [`submem_kit::pieces`]
//! (the flat family's piece-retrieval baselines cut the same way); they are
//! re-exported here so FlexA-Mem's paths stay as they were. [`PieceKey`] is
//! how the store names a piece (the state's indexes and the piece vectors).

pub use submem_kit::pieces::{cut_block, cut_event, run_text, Piece};

/// A piece's key: the event's sequence number and the piece's index in it.
pub type PieceKey = (u64, u32);

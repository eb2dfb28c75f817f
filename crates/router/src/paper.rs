//! The papers' method ids, as the routing rules and the built-in route names
//! refer to them. The family crates that implement the methods declare the
//! same ids (`submem_flat::M1` …); the router names them here so that it
//! depends on no family: an id is its name, so the two are equal.

use submem_core::MethodId;

/// Dense vector memory.
pub const M1: MethodId = MethodId::from_static("M1");
/// Sparse BM25 memory.
pub const M2: MethodId = MethodId::from_static("M2");
/// The gist index (ReadAgent).
pub const M3: MethodId = MethodId::from_static("M3");
/// Evolving notes (A-Mem).
pub const M4: MethodId = MethodId::from_static("M4");
/// The dual-level graph (LightRAG).
pub const M5: MethodId = MethodId::from_static("M5");
/// The RAPTOR tree.
pub const M6: MethodId = MethodId::from_static("M6");
/// Distilled strategies (ReasoningBank).
pub const M7: MethodId = MethodId::from_static("M7");
/// Skill bundles (MemSkill).
pub const M8: MethodId = MethodId::from_static("M8");
/// The LoRA adapter.
pub const M9: MethodId = MethodId::from_static("M9");
/// Full context.
pub const M10: MethodId = MethodId::from_static("M10");
/// Episode-clustered re-prefill (EpiCache).
pub const M11: MethodId = MethodId::from_static("M11");
/// FlexA-Mem.
pub const FLEXA_MEM: MethodId = MethodId::from_static("FlexAMem");

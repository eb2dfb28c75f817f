//! # submem-lora
//!
//! M9 of *Harness the Memory* (Appendix B.2, "Adapter Tuning"): memory kept
//! in weights. At write time an auxiliary LLM synthesises question–answer
//! pairs from the history ([`qa`]); management trains a LoRA adapter (rank 8,
//! on the attention query and value projections) on those pairs with
//! answer-only loss ([`train`]); at read time there is no retrieval — the
//! question goes to the base model with the adapter applied. Storage (E1) is
//! the adapter's bytes.
//!
//! - [`llama`]: SmolLM2-135M's llama architecture written on candle ops that
//!   all have gradients, over the GGUF dequantised to f32 and frozen
//!   (quantised matmuls have no backward pass and candle's `quantized_llama`
//!   keeps its layers private);
//! - [`lora`]: the LoRA layer, **written here on candle-nn because
//!   `candle-lora` is not on the registry**: frozen `Linear` + trainable A
//!   (random) and B (zero) in a `VarMap`, scaled by α/r, optimised with
//!   `candle_nn::AdamW`, saved as safetensors;
//! - [`model`]: the shared base model and [`AdapterReader`], the adapted
//!   model as an [`submem_core::Llm`];
//! - [`LoraMemory`]: the substrate (per-namespace pairs and adapters,
//!   retraining on manage, honest forgetting, persistence).
//!
//! **How M9 fits the harness.** A [`submem_core::Recall`] normally carries
//! text for a shared reader. M9's recall carries only a short note
//! ([`ADAPTER_NOTE`], plus a line when the adapter is stale or behind), no
//! sources, and sets `Recall::reader` to the adapted model, which the harness
//! then asks instead of its shared reader. Retrieval metrics (Recall@k,
//! evidence coverage) are therefore undefined for M9, and the read latency
//! is the note's assembly while generation is counted as the reader's.
//!
//! **Deviations.** The paper cites LoRA-FA (A frozen); A trains here too.
//! The paper's backbone is the reader (Qwen3); here the adapted model is
//! SmolLM2-135M whatever reader the run configures, because training needs
//! the local weights. Without a memory LLM, pairs come from a cloze rule
//! ([`qa::cloze_pair`]). Every manage retrains from scratch on all current
//! pairs, which keeps forgetting exact at a cost that grows with the
//! history. Decoding is greedy only.
//!
//! ```no_run
//! # async fn demo(services: submem_core::Services) -> Result<(), Box<dyn std::error::Error>> {
//! use submem_core::{Event, Namespace, Query, Substrate, Turn};
//! use submem_lora::{LoraConfig, LoraMemory, LoraModel};
//!
//! let gguf = submem_models::resolve_llm_gguf(&Default::default())?;
//! let model = LoraModel::shared(&gguf, 2048)?;
//! let mem = LoraMemory::new(services, LoraConfig::default(), model)?;
//! let ns = Namespace::new("alice")?;
//! mem.write(&ns, &[Event::Turn(Turn {
//!     session_id: "s1".into(),
//!     session_date: Some("8 May 2023".into()),
//!     speaker: "Alice".into(),
//!     text: "My violin teacher is Ms Berg.".into(),
//!     source_id: "D1:1".into(),
//! })]).await?;
//! mem.manage().await?; // trains the adapter
//! let recall = mem.read(&Query::question(ns, "Who teaches me violin?", 1024)).await?;
//! let reader = recall.reader.expect("M9 always sets its reader");
//! # let _ = reader; Ok(()) }
//! ```
#![warn(missing_docs)]

mod arch;
pub mod codec;
mod config;
mod error;
pub mod factory;
pub mod llama;
pub mod lora;
mod mem;
pub mod model;
pub mod qa;
mod space;
mod store;
pub mod train;

/// The method id of the LoRA adapter (*Harness the Memory*, M9).
pub const M9: submem_core::MethodId = submem_core::MethodId::from_static("M9");

pub use codec::{ByteCodec, TextCodec};
pub use config::{LoraConfig, PromptFormat, TrainConfig, ADAPTER_NOTE};
pub use error::{LoraError, Result};
pub use factory::factories;
pub use lora::Adapter;
pub use mem::{LoraMemory, LoraStats};
pub use model::{resolve_local_gguf, AdapterReader, LoraModel};
pub use store::{FORMAT_VERSION, STORE_NAME};
pub use train::{Example, TrainReport};

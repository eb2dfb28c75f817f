//! The LoRA layer, written on candle-nn because `candle-lora` is not on the
//! registry: a frozen base [`Linear`] plus a trainable low-rank update,
//! `y = W·x + (α/r)·B·(A·x)`, with A (`r × in`) drawn uniformly from
//! `±1/√in` (the Kaiming-uniform bound PEFT uses) and B (`out × r`) set to
//! zero, so a fresh adapter changes nothing until it is trained (LoRA, Hu et
//! al. 2021). A and B live in a [`VarMap`], which is what `candle_nn::AdamW`
//! optimises and what is saved as safetensors; the base weights are plain
//! tensors and never receive gradients.
//!
//! M9 puts one such update on the query and one on the value projection of
//! every attention layer (the original LoRA placement). The paper's M9 cites
//! LoRA-FA, which also freezes A; here A trains too (plain LoRA), because
//! freezing it saves optimiser state that is negligible at rank 8.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{Linear, Module, VarMap};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use submem_kit::spaces;

use crate::arch::LlamaConfig;
use crate::error::{LoraError, Result};

/// One low-rank update: `A` (`r × in`) and `B` (`out × r`).
#[derive(Debug, Clone)]
pub struct LowRank {
    a: Linear,
    b: Linear,
}

impl LowRank {
    /// `(α/r)·B·(A·x)` for `x` of shape `(…, in)`.
    pub fn delta(&self, x: &Tensor, scale: f64) -> Result<Tensor> {
        Ok((self.b.forward(&self.a.forward(x)?)? * scale)?)
    }
}

/// The update of one attention layer.
#[derive(Debug, Clone)]
pub struct LayerAdapter {
    /// On the query projection.
    pub q: LowRank,
    /// On the value projection.
    pub v: LowRank,
}

/// A LoRA adapter for every layer of one [`LlamaConfig`].
pub struct Adapter {
    vars: VarMap,
    layers: Vec<LayerAdapter>,
    rank: usize,
    alpha: f64,
}

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("layers", &self.layers.len())
            .field("rank", &self.rank)
            .field("alpha", &self.alpha)
            .finish()
    }
}

impl Adapter {
    /// A fresh adapter: A random (seeded), B zero.
    pub fn new(cfg: &LlamaConfig, rank: usize, alpha: f64, seed: u64) -> Result<Self> {
        if rank == 0 {
            return Err(LoraError::Config("LoRA rank must be at least 1".into()));
        }
        let mut rng = StdRng::seed_from_u64(seed);
        let mut tensors = HashMap::new();
        let hidden = cfg.hidden_size;
        for i in 0..cfg.num_layers {
            for (name, out) in [("q", cfg.q_out()), ("v", cfg.kv_out())] {
                let bound = 1.0 / (hidden as f32).sqrt();
                let a: Vec<f32> = (0..rank * hidden)
                    .map(|_| rng.random_range(-bound..bound))
                    .collect();
                tensors.insert(
                    format!("layers.{i}.{name}.a"),
                    Tensor::from_vec(a, (rank, hidden), &Device::Cpu)?,
                );
                tensors.insert(
                    format!("layers.{i}.{name}.b"),
                    Tensor::zeros((out, rank), DType::F32, &Device::Cpu)?,
                );
            }
        }
        Self::from_tensors(cfg, tensors, rank, alpha)
    }

    /// An adapter from saved tensors (checked against `cfg` and `rank`).
    pub fn from_tensors(
        cfg: &LlamaConfig,
        mut tensors: HashMap<String, Tensor>,
        rank: usize,
        alpha: f64,
    ) -> Result<Self> {
        let vars = VarMap::new();
        let mut layers = Vec::with_capacity(cfg.num_layers);
        {
            let mut data = spaces::lock(vars.data());
            let mut take = |name: String, shape: (usize, usize)| -> Result<Linear> {
                let t = tensors
                    .remove(&name)
                    .ok_or_else(|| LoraError::Config(format!("adapter lacks tensor {name}")))?;
                if t.dims2()? != shape {
                    return Err(LoraError::Config(format!(
                        "adapter tensor {name} has shape {:?}, expected {shape:?}",
                        t.dims()
                    )));
                }
                let var = Var::from_tensor(&t.to_dtype(DType::F32)?)?;
                let linear = Linear::new(var.as_tensor().clone(), None);
                data.insert(name, var);
                Ok(linear)
            };
            for i in 0..cfg.num_layers {
                let h = cfg.hidden_size;
                let (q, v) = (cfg.q_out(), cfg.kv_out());
                layers.push(LayerAdapter {
                    q: LowRank {
                        a: take(format!("layers.{i}.q.a"), (rank, h))?,
                        b: take(format!("layers.{i}.q.b"), (q, rank))?,
                    },
                    v: LowRank {
                        a: take(format!("layers.{i}.v.a"), (rank, h))?,
                        b: take(format!("layers.{i}.v.b"), (v, rank))?,
                    },
                });
            }
        }
        if let Some(extra) = tensors.keys().next() {
            return Err(LoraError::Config(format!(
                "adapter has an unexpected tensor {extra}"
            )));
        }
        Ok(Adapter {
            vars,
            layers,
            rank,
            alpha,
        })
    }

    /// Loads an adapter saved by [`Adapter::save`].
    pub fn load(path: &Path, cfg: &LlamaConfig, rank: usize, alpha: f64) -> Result<Self> {
        let tensors = candle_core::safetensors::load(path, &Device::Cpu)?;
        Self::from_tensors(cfg, tensors, rank, alpha)
    }

    /// Saves A and B as safetensors at `path`.
    pub fn save(&self, path: &Path) -> Result<()> {
        let data = spaces::lock(self.vars.data());
        let tensors: HashMap<String, Tensor> = data
            .iter()
            .map(|(k, v)| (k.clone(), v.as_tensor().clone()))
            .collect();
        candle_core::safetensors::save(&tensors, path)?;
        Ok(())
    }

    /// The trainable variables (for the optimiser).
    pub fn vars(&self) -> Vec<Var> {
        self.vars.all_vars()
    }

    /// The update of layer `i`.
    pub fn layer(&self, i: usize) -> Option<&LayerAdapter> {
        self.layers.get(i)
    }

    /// `α / r`.
    pub fn scale(&self) -> f64 {
        self.alpha / self.rank as f64
    }

    /// Rank r.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Trainable parameters.
    pub fn parameter_count(&self) -> usize {
        self.vars().iter().map(|v| v.elem_count()).sum()
    }

    /// Bytes of the parameters (f32): the adapter's storage, E1 for M9.
    pub fn parameter_bytes(&self) -> u64 {
        self.parameter_count() as u64 * 4
    }

    /// Largest absolute entry of every B (0 for a fresh adapter).
    pub fn max_abs_b(&self) -> Result<f32> {
        let mut m = 0f32;
        for l in &self.layers {
            for lr in [&l.q, &l.v] {
                m = m.max(lr.b.weight().abs()?.max_all()?.to_scalar::<f32>()?);
            }
        }
        Ok(m)
    }
}

//! [`LoraMemory`], the M9 substrate: per-namespace QA pairs and one LoRA
//! adapter per namespace (namespaces never share weights).
//!
//! - **write**: QA synthesis per chunk ([`crate::qa`]); pairs wait for the
//!   next manage.
//! - **manage**: every namespace whose pairs changed is retrained from a
//!   fresh adapter on all its current pairs (on tokio's blocking pool).
//!   Retraining from scratch is what makes forgetting honest: the new weights
//!   never saw a forgotten pair. Its cost grows with the history.
//! - **read**: no retrieval. The recall holds only [`ADAPTER_NOTE`] (plus a
//!   line when the adapter is stale or behind), no sources, and sets
//!   [`Recall::reader`] to an [`AdapterReader`]: the harness asks the adapted
//!   model instead of its shared reader, as the paper passes the query
//!   "directly to the base model with the adapter applied".
//! - **forget**: drops the events and every pair made from them and marks the
//!   adapter stale; until the next manage the stale adapter is withheld (the
//!   base model answers) unless [`LoraConfig::serve_stale_adapter`] is set,
//!   and the recall and the reader's name say so.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use submem_kit::stats::bump;

use async_trait::async_trait;
use submem_core::{
    Event, Family, Footprint, Forget, ManageReport, Namespace, Query, Recall, Result, Services,
    Substrate, SubstrateInfo, WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::chunk;
use submem_kit::spaces::Spaces;

use crate::config::{LoraConfig, ADAPTER_NOTE};
use crate::error::LoraError;
use crate::lora::Adapter;
use crate::model::{AdapterReader, LoraModel};
use crate::qa::{chunk_pairs, QaPair};
use crate::space::{EventMeta, Space};
use crate::store;
use crate::train::{train, Example, TrainReport};

submem_kit::counters! {
    /// Counters for reports and tests.
    pub struct LoraStats;
    struct Counters;
    {
        /// Chunks whose pairs came from the cloze rule.
        rule_chunks,
        /// Chunks whose pairs came from the LLM.
        llm_chunks,
        /// Adapters trained.
        trainings,
    }
}

/// The M9 substrate. See the module docs.
pub struct LoraMemory {
    services: Services,
    config: LoraConfig,
    model: LoraModel,
    spaces: Spaces<Space>,
    counters: Counters,
}

submem_kit::debug_fields!(LoraMemory { model, config });

impl LoraMemory {
    /// An empty M9 memory over `model` (load it with [`LoraModel::shared`]).
    pub fn new(services: Services, config: LoraConfig, model: LoraModel) -> Result<Self> {
        config.validate().map_err(|e| e.into_core("build"))?;
        Ok(LoraMemory {
            services,
            config,
            model,
            spaces: Spaces::new(),
            counters: Counters::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &LoraConfig {
        &self.config
    }

    /// The model.
    pub fn model(&self) -> &LoraModel {
        &self.model
    }

    /// Counters.
    pub fn stats(&self) -> LoraStats {
        self.counters.snapshot()
    }

    /// The QA pairs of `namespace` (the current training set).
    pub fn pairs(&self, namespace: &Namespace) -> Vec<QaPair> {
        self.spaces
            .read()
            .get(namespace)
            .map(|sp| sp.pairs.clone())
            .unwrap_or_default()
    }

    /// The adapter of `namespace`, if one is trained.
    pub fn adapter(&self, namespace: &Namespace) -> Option<Arc<Adapter>> {
        self.spaces
            .read()
            .get(namespace)
            .and_then(|sp| sp.adapter.clone())
    }

    /// The report of the last training of `namespace`.
    pub fn last_training(&self, namespace: &Namespace) -> Option<TrainReport> {
        self.spaces
            .read()
            .get(namespace)
            .and_then(|sp| sp.last_training.clone())
    }

    /// Whether `namespace`'s adapter is stale (a forget since it was trained).
    pub fn is_stale(&self, namespace: &Namespace) -> bool {
        self.spaces
            .read()
            .get(namespace)
            .is_some_and(|sp| sp.forgotten_since_training)
    }

    pub(crate) fn fingerprint(&self) -> String {
        format!(
            "{} r={} alpha={}",
            self.model.name(),
            self.config.rank,
            self.config.alpha
        )
    }

    /// Consecutive events of about `chunk_tokens`, across sessions (the
    /// kit's chunker with every event in one session).
    fn chunks<'a>(&self, events: &'a [Event]) -> Vec<&'a [Event]> {
        chunk::runs(
            events,
            Some(self.config.chunk_tokens),
            |_, _| true,
            |_, e| self.services.tokens.count(&e.render()),
        )
        .into_iter()
        .map(|r| &events[r])
        .collect()
    }

    fn recall_text(&self, space: &Space) -> String {
        let mut text = String::from(ADAPTER_NOTE);
        if space.forgotten_since_training {
            text.push_str(if self.config.serve_stale_adapter {
                "\n(The adapter is stale: it was trained before a forget and still holds forgotten sources until the next manage retrains it.)"
            } else {
                "\n(The adapter is stale after a forget and is withheld until the next manage retrains it; the base model answers.)"
            });
        } else if space.pending() {
            let n = space.pairs.len();
            text.push_str(&format!(
                "\n(The adapter is behind: {n} QA pairs wait for the next manage to train them.)"
            ));
        }
        text
    }
}

#[async_trait]
impl Substrate for LoraMemory {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(crate::M9, Family::PARAMETRIC, "lora-adapter")
            .with_llm(self.services.llm.is_some())
            .trained()
    }

    #[tracing::instrument(name = "m9.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        // Checked before the model calls and again under the lock that stores
        // the result: another task may have written the same ids meanwhile.
        let check = |spaces: &HashMap<Namespace, Space>| -> Result<()> {
            let stored: HashSet<&str> = spaces
                .get(namespace)
                .map(|sp| sp.events.iter().map(|m| m.source_id.as_str()).collect())
                .unwrap_or_default();
            check_new_sources(events, |id| stored.contains(id))
        };
        check(&self.spaces.read())?;
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        let chunks = self.chunks(events);
        let mut pairs = Vec::new();
        for chunk in &chunks {
            let (p, fallback) = chunk_pairs(
                self.services.llm.as_deref(),
                chunk,
                self.config.pairs_per_chunk,
                self.config.qa_max_tokens,
            )
            .await;
            if fallback {
                bump(&self.counters.rule_chunks, 1);
            } else {
                bump(&self.counters.llm_chunks, 1);
            }
            pairs.extend(p);
        }
        let metas: Vec<EventMeta> = events
            .iter()
            .map(|e| EventMeta {
                source_id: e.source_id().to_string(),
                tokens: self.services.tokens.count(&e.render()) as u64,
            })
            .collect();
        let mut spaces = self.spaces.write();
        check(&spaces)?;
        let space = spaces.entry(namespace.clone()).or_default();
        space.events.extend(metas);
        if !pairs.is_empty() {
            space.pairs.extend(pairs);
            space.version += 1;
        }
        Ok(WriteReport {
            events: events.len(),
            units: chunks.len(),
        })
    }

    #[tracing::instrument(name = "m9.read", skip_all, fields(ns = %query.namespace))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let (text, adapter, label) = {
            let spaces = self.spaces.read();
            match spaces.get(&query.namespace) {
                None => (String::new(), None, "none".to_string()),
                Some(sp) => {
                    let withheld = sp.forgotten_since_training && !self.config.serve_stale_adapter;
                    let adapter = if withheld { None } else { sp.adapter.clone() };
                    let state = if sp.forgotten_since_training {
                        if withheld {
                            ", stale: withheld"
                        } else {
                            ", stale"
                        }
                    } else if sp.pending() {
                        ", behind"
                    } else {
                        ""
                    };
                    let label = format!("{}: {} pairs{state}", query.namespace, sp.pairs.len());
                    (self.recall_text(sp), adapter, label)
                }
            }
        };
        let counter = &self.services.tokens;
        let allowance = query.allowance();
        let mut text = if counter.count(&text) <= allowance {
            text
        } else {
            counter.truncate(&text, allowance)
        };
        if counter.count(&text) > allowance {
            text.clear();
        }
        Ok(Recall {
            tokens: counter.count(&text),
            text,
            sources: Vec::new(),
            reader: Some(Arc::new(AdapterReader::new(
                self.model.clone(),
                adapter,
                &label,
            ))),
        })
    }

    #[tracing::instrument(name = "m9.manage", skip_all)]
    async fn manage(&self) -> Result<ManageReport> {
        let todo: Vec<(Namespace, u64, Vec<QaPair>)> = self
            .spaces
            .read()
            .iter()
            .filter(|(_, sp)| sp.pending() || sp.forgotten_since_training)
            .map(|(ns, sp)| (ns.clone(), sp.version, sp.pairs.clone()))
            .collect();
        let mut changed = 0;
        for (ns, version, pairs) in todo {
            let (model, config) = (self.model.clone(), self.config.clone());
            let trained = tokio::task::spawn_blocking(move || train_pairs(&model, &config, &pairs))
                .await
                .map_err(|e| LoraError::Task(e.to_string()).into_core("manage"))?
                .map_err(|e| e.into_core("manage"))?;
            let mut spaces = self.spaces.write();
            let Some(sp) = spaces.get_mut(&ns) else {
                continue;
            };
            if sp.version != version {
                continue; // written or forgotten meanwhile: the next manage retrains
            }
            match trained {
                Some((adapter, report)) => {
                    tracing::info!(ns = %ns, pairs = report.examples, steps = report.steps,
                        first_loss = report.first_epoch_loss, last_loss = report.last_epoch_loss,
                        secs = report.seconds, "M9 adapter trained");
                    sp.adapter = Some(Arc::new(adapter));
                    sp.last_training = Some(report);
                    bump(&self.counters.trainings, 1);
                }
                None => {
                    sp.adapter = None;
                    sp.last_training = None;
                }
            }
            sp.trained_version = version;
            sp.forgotten_since_training = false;
            changed += 1;
        }
        Ok(ManageReport { changed })
    }

    fn diagnostics(&self) -> submem_core::Diagnostics {
        submem_kit::stats::diagnostics_of(&self.stats())
    }

    fn footprint(&self) -> Footprint {
        self.spaces.footprint(|_, sp| Footprint {
            memory_bytes: sp.adapter.as_ref().map_or(0, |a| a.parameter_bytes()),
            input_tokens: sp.events.iter().map(|e| e.tokens).sum::<u64>(),
            stored_tokens: sp
                .pairs
                .iter()
                .map(|p| {
                    (self.services.tokens.count(&p.question)
                        + self.services.tokens.count(&p.answer)) as u64
                })
                .sum::<u64>(),
            ..Footprint::default()
        })
    }

    async fn persist(&self, dir: &Path) -> Result<()> {
        store::persist(&self.spaces, &self.fingerprint(), dir)
    }

    async fn restore(&self, dir: &Path) -> Result<()> {
        store::restore(
            &self.spaces,
            &self.fingerprint(),
            self.model.base().config(),
            self.config.rank,
            self.config.alpha,
            dir,
        )
    }

    #[tracing::instrument(name = "m9.forget", skip_all)]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        let mut spaces = self.spaces.write();
        match target {
            Forget::Namespace(ns) => Ok(spaces.remove(ns).map_or(0, |sp| sp.events.len())),
            Forget::Sources {
                namespace,
                source_ids,
            } => {
                let Some(sp) = spaces.get_mut(namespace) else {
                    return Ok(0);
                };
                let gone: HashSet<&str> = source_ids.iter().map(String::as_str).collect();
                let before = sp.events.len();
                sp.events.retain(|e| !gone.contains(e.source_id.as_str()));
                let removed = before - sp.events.len();
                let pairs_before = sp.pairs.len();
                sp.pairs
                    .retain(|p| !p.sources.iter().any(|s| gone.contains(s.as_str())));
                if sp.pairs.len() != pairs_before {
                    sp.version += 1;
                    if sp.adapter.is_some() {
                        sp.forgotten_since_training = true;
                    }
                }
                Ok(removed)
            }
        }
    }
}

/// Trains a fresh adapter on `pairs`; `None` when no pair makes an example.
pub(crate) fn train_pairs(
    model: &LoraModel,
    config: &LoraConfig,
    pairs: &[QaPair],
) -> std::result::Result<Option<(Adapter, TrainReport)>, LoraError> {
    let codec = model.codec();
    let mut examples = Vec::with_capacity(pairs.len());
    for p in pairs {
        if let Some(e) = Example::new(
            codec,
            &config.prompt,
            &p.question,
            &p.answer,
            config.max_seq_tokens,
        )? {
            examples.push(e);
        }
    }
    if examples.is_empty() {
        return Ok(None);
    }
    let base = model.base();
    let adapter = Adapter::new(base.config(), config.rank, config.alpha, config.seed)?;
    let report = train(base, &adapter, &examples, &config.train())?;
    Ok(Some((adapter, report)))
}

//! The [`Substrate`] implementation of [`FlexaMem`]: validation, phases,
//! forgetting with tombstones and compaction, persistence as a compacted log.

use async_trait::async_trait;
use std::path::Path;
use submem_core::{
    Error, Event, Family, Footprint, Forget, ManageReport, Namespace, Query, ReadTrace, Recall,
    Result, Substrate, SubstrateInfo, WriteReport,
};
use submem_kit::batch::check_new_sources;
use submem_kit::persist::{begin_persist, check_manifest, write_manifest};

use crate::log::{read_log_strict, write_log};
use crate::mem::{FlexaMem, FORMAT_VERSION, LOG_FILE, STORE_NAME};
use crate::state::LogRecord;
use crate::FlexaError;

#[async_trait]
impl Substrate for FlexaMem {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(crate::FLEXA_MEM, Family::WRITE_ONCE_RENDER, "flexamem")
            .with_llm(self.services.llm.is_some())
    }

    #[tracing::instrument(level = "debug", name = "flexamem.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        // Refuse a bad batch before waiting for the gate; check what is
        // stored once it is held.
        check_new_sources(events, |_| false)?;
        let _gate = self.gate.lock().await;
        {
            let s = self.read_state().map_err(|e| e.during("write"))?;
            let existing = s.ns.get(namespace);
            check_new_sources(events, |id| {
                existing.is_some_and(|st| st.by_source.contains_key(id))
            })?;
        }
        let units = self
            .store_events(namespace, events)
            .map_err(|e| e.during("write"))?;
        self.seal_pending(namespace)
            .await
            .map_err(|e| e.during("write"))?;
        self.embed_new_pieces(namespace, false)
            .await
            .map_err(|e| e.during("write"))?;
        Ok(WriteReport {
            events: events.len(),
            units,
        })
    }

    #[tracing::instrument(level = "debug", name = "flexamem.read", skip_all, fields(ns = %query.namespace, budget = query.budget))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        Ok(self.render_detailed(query).await?.recall)
    }

    async fn trace(&self, query: &Query, source_ids: &[String]) -> Result<Option<ReadTrace>> {
        self.trace_read(query, source_ids).await
    }

    /// Closes every open unit and writes the notes still missing (call it
    /// when a history is complete), then compacts the log if events were
    /// forgotten since the last compaction.
    #[tracing::instrument(level = "debug", name = "flexamem.manage", skip_all)]
    async fn manage(&self) -> Result<ManageReport> {
        let _gate = self.gate.lock().await;
        let namespaces: Vec<Namespace> = {
            let mut s = self.write_state().map_err(|e| e.during("manage"))?;
            let closes: Vec<LogRecord> =
                s.ns.iter()
                    .filter_map(|(ns, st)| {
                        st.open.map(|unit| LogRecord::Close {
                            ns: ns.clone(),
                            unit,
                        })
                    })
                    .collect();
            self.commit(&mut s, &closes)
                .map_err(|e| e.during("manage"))?;
            s.ns.keys().cloned().collect()
        };
        let mut changed = 0;
        for ns in &namespaces {
            changed += self
                .seal_pending(ns)
                .await
                .map_err(|e| e.during("manage"))?;
            self.embed_new_pieces(ns, true)
                .await
                .map_err(|e| e.during("manage"))?;
        }
        if self.compact().map_err(|e| e.during("manage"))? {
            changed += 1;
        }
        Ok(ManageReport { changed })
    }

    fn diagnostics(&self) -> submem_core::Diagnostics {
        submem_kit::stats::diagnostics_of(&self.stats())
    }

    fn footprint(&self) -> Footprint {
        let Ok(s) = self.read_state() else {
            return Footprint::default();
        };
        let mut f = Footprint::default();
        for st in s.ns.values() {
            for u in st.units.values() {
                for e in &u.events {
                    f.input_tokens += e.tokens as u64;
                    f.memory_bytes += (e.text.len() * 2) as u64
                        + e.pieces
                            .iter()
                            .map(|p| p.body.len() as u64 + 16)
                            .sum::<u64>();
                }
                f.stored_tokens += u.raw_tokens as u64 + u.record_tokens as u64;
                if let Some(n) = &u.note {
                    f.memory_bytes += n.record.len() as u64 + 4 * n.embedding.len() as u64;
                }
            }
            for m in st.merges.values() {
                f.stored_tokens += m.tokens as u64;
                f.memory_bytes += m.text.len() as u64;
            }
            f.memory_bytes += st.piece_vecs.bytes();
        }
        f.disk_bytes = self
            .log
            .lock()
            .ok()
            .and_then(|l| l.as_ref().map(|l| l.len()))
            .unwrap_or(0);
        f
    }

    async fn persist(&self, dir: &Path) -> Result<()> {
        let payloads = {
            let s = self.read_state().map_err(|e| e.during("persist"))?;
            s.snapshot()
                .iter()
                .map(serde_json::to_vec)
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| FlexaError::from(e).during("persist"))?
        };
        begin_persist(dir)?;
        write_log(&dir.join(LOG_FILE), &payloads).map_err(|e| e.during("persist"))?;
        write_manifest(dir, STORE_NAME, FORMAT_VERSION)
    }

    async fn restore(&self, dir: &Path) -> Result<()> {
        check_manifest(dir, STORE_NAME, FORMAT_VERSION)?;
        let path = dir.join(LOG_FILE);
        if !path.exists() {
            return Err(Error::store(&path, "log file is missing"));
        }
        let payloads = read_log_strict(&path).map_err(|e| e.during("restore"))?;
        let mut fresh = self.empty_state();
        for p in &payloads {
            let rec: LogRecord = serde_json::from_slice(p)
                .map_err(|e| Error::store(&path, format!("unreadable record: {e}")))?;
            fresh.apply(&rec);
        }
        let _gate = self.gate.lock().await;
        let mut s = self.write_state().map_err(|e| e.during("restore"))?;
        {
            let mut log = self.lock_log().map_err(|e| e.during("restore"))?;
            if let Some(log) = log.as_mut() {
                log.rewrite(&payloads).map_err(|e| e.during("restore"))?;
            }
        }
        *s = fresh;
        Ok(())
    }

    #[tracing::instrument(level = "debug", name = "flexamem.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        let _gate = self.gate.lock().await;
        let removed = {
            let mut s = self.write_state().map_err(|e| e.during("forget"))?;
            let rec = match target {
                Forget::Namespace(ns) => LogRecord::ForgetNamespace { ns: ns.clone() },
                Forget::Sources {
                    namespace,
                    source_ids,
                } => LogRecord::Forget {
                    ns: namespace.clone(),
                    source_ids: source_ids.clone(),
                },
            };
            self.commit(&mut s, &[rec])
                .map_err(|e| e.during("forget"))?
        };
        if removed > 0 {
            self.mark_compaction();
        }
        if let Forget::Sources { namespace, .. } = target {
            // Units that lost an event get a new note from what remains.
            self.seal_pending(namespace)
                .await
                .map_err(|e| e.during("forget"))?;
        }
        Ok(removed)
    }
}

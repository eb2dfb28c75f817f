//! The paper's *NoMem* row, `nomem` ([`NoMemory`]): it shows nothing, so a
//! reader gets the same template with an empty memory block and gains are
//! attributed to retrieval rather than scaffolding. It also measures a
//! harness's own overhead per item (it costs next to nothing).

use async_trait::async_trait;
use std::path::Path;
use std::sync::Arc;

use submem_core::plugin::SubstrateFactory;
use submem_core::{
    Event, Family, Footprint, Forget, MethodId, Namespace, Query, Recall, Result, Substrate,
    SubstrateInfo, WriteReport,
};

/// The method id of the no-memory baseline.
pub const NO_MEMORY: MethodId = MethodId::from_static("NoMemory");

/// This crate's own baselines' factories: `nomem`.
pub fn factories() -> Vec<SubstrateFactory> {
    vec![
        SubstrateFactory::builder("nomem", NO_MEMORY, Family::BASELINE)
            .aliases(&["no-memory"])
            .paper("Harness the Memory, the NoMem row")
            .summary("shows nothing: the reader template with an empty memory block")
            .build_without_settings(|_| Ok(Arc::new(NoMemory))),
    ]
}

/// The no-memory baseline.
#[derive(Debug, Default)]
pub struct NoMemory;

#[async_trait]
impl Substrate for NoMemory {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(NO_MEMORY, Family::BASELINE, "no-memory")
    }
    async fn write(&self, _namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        Ok(WriteReport {
            events: events.len(),
            units: 0,
        })
    }
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        Ok(Recall::empty())
    }
    fn footprint(&self) -> Footprint {
        Footprint::default()
    }
    async fn persist(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    async fn restore(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
    async fn forget(&self, _target: &Forget) -> Result<usize> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use submem_core::Turn;

    #[tokio::test]
    async fn no_memory_shows_nothing_and_refuses_bad_queries() {
        let ns = Namespace::new("n").unwrap();
        let turn = Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "A".into(),
            text: "hello".into(),
            source_id: "t0".into(),
        });
        assert_eq!(NoMemory.write(&ns, &[turn]).await.unwrap().events, 1);
        let q = Query::question(ns.clone(), "q", 100);
        assert_eq!(NoMemory.read(&q).await.unwrap().tokens, 0);
        assert!(NoMemory.read(&Query::question(ns, "q", 0)).await.is_err());
        assert_eq!(factories().len(), 1);
    }
}

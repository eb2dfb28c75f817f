//! Two reference substrates that need no model and live in the harness itself:
//!
//! - [`NoMemory`] (`nomem`): shows nothing. The paper's *NoMem* row: the same
//!   reader template with an empty memory block, so that gains are attributed
//!   to retrieval rather than scaffolding.
//! - [`RecentWindow`] (`recent`): shows the newest events that fit the
//!   allowance (a recency window), the simplest memory a reader can have.
//!
//! Both also measure the harness's own overhead per item (they cost next to
//! nothing).

use async_trait::async_trait;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use submem_core::{
    render_in_time_order, Event, Family, Footprint, Forget, MethodId, Namespace, PackPolicy, Query,
    RankedUnit, Recall, Result, Substrate, SubstrateInfo, TokenCounter, WriteReport,
};

/// The no-memory baseline.
#[derive(Debug, Default)]
pub struct NoMemory;

#[async_trait]
impl Substrate for NoMemory {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo {
            method: MethodId::M10,
            family: Family::Activation,
            name: "no-memory".into(),
            needs_llm: false,
            training_free: true,
        }
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

#[derive(Debug, Default)]
struct WindowState {
    events: HashMap<Namespace, Vec<(String, String, usize)>>,
    tokens: u64,
    bytes: u64,
}

/// The recency-window baseline.
#[derive(Debug)]
pub struct RecentWindow {
    counter: Arc<dyn TokenCounter>,
    state: Mutex<WindowState>,
}

impl RecentWindow {
    /// A window counting tokens with `counter`.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        RecentWindow {
            counter,
            state: Mutex::new(WindowState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WindowState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Substrate for RecentWindow {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo {
            method: MethodId::M10,
            family: Family::Activation,
            name: "recent-window".into(),
            needs_llm: false,
            training_free: true,
        }
    }
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        for e in events {
            e.validate()?;
        }
        let rendered: Vec<(String, String, usize)> = events
            .iter()
            .map(|e| {
                let text = e.render();
                let n = self.counter.count(&text);
                (e.source_id().to_string(), text, n)
            })
            .collect();
        let mut st = self.lock();
        let list = st.events.entry(namespace.clone()).or_default();
        let have: std::collections::HashSet<&str> =
            list.iter().map(|(s, _, _)| s.as_str()).collect();
        if let Some(dup) = rendered.iter().find(|(s, _, _)| have.contains(s.as_str())) {
            return Err(submem_core::Error::InvalidInput(format!(
                "event {} already written",
                dup.0
            )));
        }
        let (tokens, bytes) = rendered.iter().fold((0u64, 0u64), |(t, b), (_, x, n)| {
            (t + *n as u64, b + x.len() as u64)
        });
        list.extend(rendered);
        st.tokens += tokens;
        st.bytes += bytes;
        Ok(WriteReport {
            events: events.len(),
            units: events.len(),
        })
    }
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let st = self.lock();
        let Some(list) = st.events.get(&query.namespace) else {
            return Ok(Recall::empty());
        };
        let ranked: Vec<RankedUnit> = list
            .iter()
            .enumerate()
            .rev()
            .map(|(i, (sid, text, _))| RankedUnit {
                position: i as u64,
                source_id: sid.clone(),
                text: text.clone(),
                score: i as f32,
            })
            .collect();
        Ok(render_in_time_order(
            &ranked,
            self.counter.as_ref(),
            query.allowance(),
            PackPolicy::StopAtFirstUnfit,
        ))
    }
    fn footprint(&self) -> Footprint {
        let st = self.lock();
        Footprint {
            memory_bytes: st.bytes,
            disk_bytes: 0,
            stored_tokens: st.tokens,
            input_tokens: st.tokens,
        }
    }
    async fn persist(&self, _dir: &Path) -> Result<()> {
        Err(submem_core::Error::Unsupported {
            substrate: "recent-window".into(),
            what: "persistence".into(),
        })
    }
    async fn restore(&self, _dir: &Path) -> Result<()> {
        Err(submem_core::Error::Unsupported {
            substrate: "recent-window".into(),
            what: "persistence".into(),
        })
    }
    async fn forget(&self, target: &Forget) -> Result<usize> {
        let mut st = self.lock();
        let removed = match target {
            Forget::Namespace(ns) => st.events.remove(ns).map_or(0, |v| v.len()),
            Forget::Sources {
                namespace,
                source_ids,
            } => match st.events.get_mut(namespace) {
                Some(list) => {
                    let before = list.len();
                    list.retain(|(s, _, _)| !source_ids.contains(s));
                    before - list.len()
                }
                None => 0,
            },
        };
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;
    use submem_core::Turn;

    fn turn(i: usize) -> Event {
        Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "A".into(),
            text: format!("word{i} w w"),
            source_id: format!("t{i}"),
        })
    }

    #[tokio::test]
    async fn recent_window_keeps_the_newest_that_fit() {
        let w = RecentWindow::new(Arc::new(WhitespaceCounter));
        let ns = Namespace::new("n").unwrap();
        w.write(&ns, &(0..100).map(turn).collect::<Vec<_>>())
            .await
            .unwrap();
        let q = Query::question(ns.clone(), "q", 100).with_fixed_prompt_tokens(55);
        let r = w.read(&q).await.unwrap();
        assert!(r.tokens <= q.allowance());
        assert_eq!(r.sources.first().map(|s| s.source_id.as_str()), Some("t99"));
        assert!(r.text.ends_with("word99 w w"));
        assert!(w.write(&ns, &[turn(3)]).await.is_err());
        assert_eq!(NoMemory.read(&q).await.unwrap().tokens, 0);
    }
}

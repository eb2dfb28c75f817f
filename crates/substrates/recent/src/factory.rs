//! The factory a registry builds the recency window with (`recent`, alias
//! `window`; `submem bench --substrates recent:max_events=20`).

use std::sync::Arc;

use submem_core::plugin::{LlmUse, SubstrateFactory};
use submem_core::Family;

use crate::{recent_window, RecentSettings, METHOD};

/// `recent` (alias `window`): the newest events that fit the allowance.
pub fn recent_factory() -> SubstrateFactory {
    SubstrateFactory::builder("recent", METHOD, Family::BASELINE)
        .aliases(&["window"])
        .paper("a recency-window baseline (no paper)")
        .summary("the newest events that fit the allowance, in time order")
        .llm(LlmUse::Never)
        .build(|ctx, settings: RecentSettings| {
            Ok(Arc::new(recent_window(
                ctx.services.tokens.clone(),
                settings,
            )?))
        })
}

/// Every factory of this crate, for a registry
/// (`Registry::default().with(..)` or the harness's built-in list).
pub fn factories() -> Vec<SubstrateFactory> {
    vec![recent_factory()]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use submem_core::plugin::{BuildContext, Settings};
    use submem_core::test_utils::test_services;
    use submem_core::{Event, Namespace, Query, Result, Turn};

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings> {
        let f = recent_factory();
        let pairs: Vec<_> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let s = f.settings_from_pairs(&pairs)?;
        f.check(&s)?;
        Ok(s)
    }

    #[test]
    fn the_factory_describes_itself_and_checks_settings() {
        let f = recent_factory();
        f.validate().unwrap();
        assert!(f.answers_to("recent") && f.answers_to("WINDOW"));
        assert_eq!(f.method().as_str(), "RecentWindow");
        let d = f.describe();
        assert_eq!(d.settings.len(), 1);
        assert_eq!(d.settings[0].key, "max_events");
        assert!(d.settings[0].doc.starts_with("Most events a read shows"));
        assert!(settings(&[]).is_ok());
        assert!(settings(&[("max_events", "3")]).is_ok());
        let err = settings(&[("max_events", "0")]).unwrap_err().to_string();
        assert!(err.contains("at least 1"), "{err}");
        assert!(settings(&[("max_events", "many")]).is_err());
        let err = settings(&[("max_event", "3")]).unwrap_err().to_string();
        assert!(err.contains("unknown setting `max_event`"), "{err}");
        assert_eq!(factories().len(), 1);
    }

    #[tokio::test]
    async fn a_setting_changes_what_is_shown() {
        let f = recent_factory();
        let ctx = BuildContext::new(test_services(None));
        let ns = Namespace::new("n").unwrap();
        let events: Vec<Event> = (0..8)
            .map(|i| {
                Event::Turn(Turn {
                    session_id: "s".into(),
                    session_date: None,
                    speaker: "A".into(),
                    text: format!("turn {i}"),
                    source_id: format!("t{i}"),
                })
            })
            .collect();
        let q = Query::question(ns.clone(), "q", 4096);
        let mut shown = Vec::new();
        for s in [
            settings(&[]).unwrap(),
            settings(&[("max_events", "3")]).unwrap(),
        ] {
            let w = f.build(&ctx, &s).unwrap();
            assert_eq!(w.info().name, "recent-window");
            w.write(&ns, &events).await.unwrap();
            shown.push(w.read(&q).await.unwrap().sources.len());
        }
        assert_eq!(shown, vec![8, 3]);
    }
}

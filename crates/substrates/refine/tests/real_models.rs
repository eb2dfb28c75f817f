#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! M7 and M8 with the real models on one tiny trajectory: SmolLM2-135M judges,
//! distills and writes a skill (its JSON repaired or replaced by the rule
//! writer), MiniLM embeds, tiktoken o200k counts. Skipped (with a message)
//! when the models cannot be resolved.

use std::sync::Arc;
use std::time::Instant;
use submem_core::testing::{fixture_trajectory, MARKER_A};
use submem_core::{Meter, MeteredSubstrate, Namespace, Query, Services, Substrate};
use submem_refine::{SkillBundles, SkillConfig, StrategyBank, StrategyConfig};

fn services() -> Option<Services> {
    let cfg = submem_models::Config::load(None).ok()?;
    let llm = cfg.local_llm().map_err(|e| eprintln!("skipping: {e}")).ok()?;
    let embedder = cfg
        .local_embedder()
        .map_err(|e| eprintln!("skipping: {e}"))
        .ok()?;
    Some(Services {
        llm: Some(Arc::new(llm)),
        embedder: Arc::new(embedder),
        tokens: cfg.token_counter().ok()?,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_models_distill_and_write_skills_within_budget() {
    let Some(services) = services() else {
        eprintln!("real models unavailable; test skipped");
        return;
    };
    let ns = Namespace::new("real-agent").unwrap();
    let q = |budget| {
        Query::agentic(
            ns.clone(),
            "Find the key and put it in the fridge.",
            "The fridge 1 is closed.",
            budget,
        )
    };
    for (name, sub) in [
        (
            "M7",
            Box::new(StrategyBank::new(services.clone(), StrategyConfig::default()).unwrap())
                as Box<dyn Substrate>,
        ),
        (
            "M8",
            Box::new(SkillBundles::new(services.clone(), SkillConfig::default()).unwrap()),
        ),
    ] {
        let meter = Meter::new();
        let sub = MeteredSubstrate::new(sub, meter.clone());
        let t = Instant::now();
        sub.write(&ns, &fixture_trajectory("t", MARKER_A)).await.unwrap();
        sub.manage().await.unwrap();
        let snap = meter.snapshot();
        eprintln!(
            "{name}: write+manage {:.1}s, LLM calls write {} manage {}",
            t.elapsed().as_secs_f64(),
            snap.write.llm_calls,
            snap.manage.llm_calls
        );
        assert!(snap.write.llm_calls + snap.manage.llm_calls >= 1);
        for budget in [128, 512, 2048] {
            let query = q(budget).with_fixed_prompt_tokens(60);
            let r = sub.read(&query).await.unwrap();
            assert!(r.tokens <= query.allowance());
            assert_eq!(services.tokens.count(&r.text), r.tokens);
        }
        let r = sub.read(&q(2048)).await.unwrap();
        eprintln!("{name} recall:\n{}", r.text);
        assert!(!r.sources.is_empty(), "{name} shows nothing");
    }
}

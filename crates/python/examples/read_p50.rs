//! The Rust side of `crates/python/bench/read_p50.py`: the same substrate,
//! built the same way (registry, lazy services, meter), fed the same events
//! and asked the same questions as the Python side, so the ratio of the two
//! p50s is what the binding costs.
//!
//! `cargo run -p submem-python --example read_p50 -- DATA.json SPEC [BUDGET] [ROUNDS]`
//! where DATA.json is `{"events": [Event...], "questions": [string...]}`.
//! Prints one JSON line: `{"spec", "reads", "p50_us", "p90_us"}`.

use std::sync::Arc;
use std::time::Instant;

use submem::registry::{Registry, SubstrateSpec};
use submem::MeteredSubstrate;
use submem_core::{Event, Namespace, Query, Substrate};
use submem_models::{Config, LlmKind};

#[derive(serde::Deserialize)]
struct Data {
    events: Vec<Event>,
    questions: Vec<String>,
}

type AnyError = Box<dyn std::error::Error + Send + Sync>;

// The same allocator as the extension (and the `submem` binary).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> Result<(), AnyError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, spec, rest @ ..] = args.as_slice() else {
        return Err("usage: read_p50 DATA.json SPEC [BUDGET] [ROUNDS]".into());
    };
    let budget: usize = rest.first().map(|b| b.parse()).transpose()?.unwrap_or(1024);
    let rounds: usize = rest.get(1).map(|r| r.parse()).transpose()?.unwrap_or(3);
    let data: Data = serde_json::from_str(&std::fs::read_to_string(path)?)?;

    let mut config = Config::load(None)?;
    config.services.memory_llm = LlmKind::None;
    let services = config.lazy_services()?;
    let registry = Registry::default();
    let spec = SubstrateSpec::parse(spec)?;
    registry.check(&spec)?;
    let memory = MeteredSubstrate::build(&services, |s| registry.build(&spec, s))?;
    let memory: Arc<dyn Substrate> = Arc::new(memory);

    let ns = Namespace::new("default")?;
    memory.write(&ns, &data.events).await?;
    let first = data.questions.first().ok_or("no questions")?;
    memory
        .read(&Query::question(ns.clone(), first.clone(), budget))
        .await?;

    let mut micros = Vec::with_capacity(rounds * data.questions.len());
    for _ in 0..rounds {
        for q in &data.questions {
            let query = Query::question(ns.clone(), q.clone(), budget);
            let t = Instant::now();
            let recall = memory.read(&query).await?;
            micros.push(t.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(recall);
        }
    }
    micros.sort_by(f64::total_cmp);
    println!(
        "{}",
        serde_json::json!({
            "spec": spec.to_string(),
            "reads": micros.len(),
            "p50_us": percentile(&micros, 0.5),
            "p90_us": percentile(&micros, 0.9),
        })
    );
    Ok(())
}

//! Checks the keyword-echo substrate with the conformance suite, then
//! measures it next to BM25 (`m2`) on the bundled synthetic dataset and
//! prints the report table. Exits non-zero on any failure.
//!
//! ```text
//! cargo run --release -- [OUT_DIR]
//! ```
//!
//! See README.md for every step.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use submem_bench::dataset::synthetic::SyntheticSpec;
use submem::registry::{Registry, SubstrateSpec};
use submem_bench::runner::{run, Models, RunOptions};
use submem_bench::{report, summary};
use submem_core::plugin::{BuildContext, Settings};
use submem_core::test_utils::test_services;
use submem_core::testing::{run_conformance, ConformanceOptions};
use submem_core::Substrate;
use submem_example_plugin::factory;
use submem_models::{Config, LlmKind};

type AnyError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> ExitCode {
    match run_example().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run_example() -> Result<(), AnyError> {
    // Step 1: the conformance suite, on instances built by the factory with
    // test doubles (whitespace token counter, hashing embedder). It panics
    // naming the broken rule; running it in a task turns that into an error.
    let started = Instant::now();
    let services = test_services(None);
    let tokens = services.tokens.clone();
    let echo = factory();
    tokio::spawn(async move {
        run_conformance(
            move || -> Box<dyn Substrate> {
                match echo.build(&BuildContext::new(services.clone()), &Settings::new()) {
                    Ok(s) => Box::new(s),
                    Err(e) => panic!("keyword-echo does not build: {e}"),
                }
            },
            tokens,
            ConformanceOptions::default(),
        )
        .await
    })
    .await
    .map_err(|e| format!("keyword-echo fails the conformance suite: {e}"))?;
    println!(
        "[1/4] conformance suite: passed ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    // Step 2: a registry with every built-in substrate plus ours. `try_with`
    // checks the factory (names, ids, defaults) before adding it.
    let registry = Registry::default().try_with(factory())?;
    let specs = SubstrateSpec::parse_list("keyword-echo,m2")?;
    for s in &specs {
        registry.check(s)?;
    }
    println!(
        "[2/4] registered: {}",
        registry
            .resolve("echo")
            .map(|f| format!("{} ({}, family {})", f.name(), f.method(), f.family()))
            .unwrap_or_default()
    );

    // Step 3: the embedded models with no memory LLM and no reader, as
    // `submem bench --memory-llm none --reader none` runs: retrieval only.
    // The MiniLM embedder is fetched into ~/.cache/submem on first use.
    let started = Instant::now();
    let mut config = Config::load(None)?;
    config.services.memory_llm = LlmKind::None;
    config.services.reader = LlmKind::None;
    let models = Arc::new(Models {
        services: config.services()?,
        reader: None,
        judge: None,
    });
    println!(
        "[3/4] models: embedder and o200k token counter loaded, no LLM ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    // Step 4: a small bench on the synthetic dataset, into OUT_DIR (or a
    // fresh temporary directory), and the report table.
    let started = Instant::now();
    let out = match std::env::args_os().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("submem-example-plugin-{}", std::process::id())),
    };
    std::fs::create_dir_all(&out)?;
    let dataset = Arc::new(
        SyntheticSpec {
            conversations: 1,
            units: 200,
            questions: 8,
            session_size: 20,
            ..SyntheticSpec::default()
        }
        .dataset()?,
    );
    let opts = RunOptions {
        budgets: vec![1024],
        ks: vec![5],
        out: out.clone(),
        progress: false,
        ..RunOptions::default()
    };
    opts.validate()?;
    let outcome = run(dataset, specs, Arc::new(registry), models, opts).await?;
    let notes: Vec<String> = outcome
        .skipped
        .iter()
        .map(|s| format!("skipped {s}"))
        .chain(outcome.failures.iter().map(|f| format!("FAILED {f}")))
        .collect();
    let summary = summary::summarize(&outcome.items, &outcome.writes);
    let table = report::write_all(&out, &summary, &notes)?;
    println!(
        "[4/4] bench: {} items in {} ({:.1} s)\n",
        outcome.items.len(),
        out.display(),
        started.elapsed().as_secs_f64()
    );
    println!("{table}");

    if !notes.is_empty() {
        return Err(format!("the bench did not run cleanly: {}", notes.join("; ")).into());
    }
    if !summary.runs.iter().any(|r| r.substrate == "keyword-echo") {
        return Err("the report has no keyword-echo row".into());
    }
    Ok(())
}

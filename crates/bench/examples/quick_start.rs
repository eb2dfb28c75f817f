//! The README's quick start, compiled by `cargo test` so it stays right:
//! one substrate built directly and one by name from the registry, on the
//! embedded models (fetched on first use).
//!
//! `cargo run --release -p submem-bench --example quick_start`

use submem::flat::{SparseConfig, SparseMemory};
use submem::registry::{Registry, SubstrateSpec};
use submem::MeteredSubstrate;
use submem_core::{Event, Namespace, Query, Substrate, Turn};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let config = submem_models::Config::load(None)?; // embedded default: local models
                                                     // One meter counts the services' calls and times every phase.
    let memory = MeteredSubstrate::build(&config.services()?, |services| {
        SparseMemory::new(services, SparseConfig::default())
    })?;
    let alice = Namespace::new("alice")?;
    memory
        .write(
            &alice,
            &[Event::Turn(Turn {
                session_id: "s1".into(),
                session_date: Some("8 May 2023".into()),
                speaker: "Alice".into(),
                text: "My violin teacher is called Ingrid.".into(),
                source_id: "D1:1".into(),
            })],
        )
        .await?;
    let recall = memory
        .read(&Query::question(
            alice.clone(),
            "Who teaches me the violin?",
            4096,
        ))
        .await?;
    println!(
        "{} ({} tokens)\n{:#?}",
        recall.text,
        recall.tokens,
        memory.meter().snapshot()
    );

    // Any substrate by name, settings checked against its documented type.
    let registry = Registry::default(); // .with(my_factory) adds one from any crate
    let flexa = registry.build(
        &SubstrateSpec::parse("flexa:rho=0.2,seeds=8")?,
        config.services()?,
    )?;
    println!("built {} ({})", flexa.info().name, flexa.info().method);
    Ok(())
}

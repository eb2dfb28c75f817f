//! The harness's run-loop tests, one binary (linking the harness once
//! instead of once per file). Run one module with
//! `cargo test -p submem-bench --test suite <module>`, e.g. `shard`.

mod agentic;
mod answer_key;
mod judges;
mod prompts;
mod runner;
mod shard;

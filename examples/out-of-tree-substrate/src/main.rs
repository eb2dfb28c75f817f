//! The whole `submem` command line with keyword-echo registered: `bench`
//! (with the packing baselines), `substrates`, `serve`, `mcp`, `route`...
//! know it as they know `m2`.
//!
//! ```text
//! cargo run --release --features cli -- substrates echo
//! cargo run --release --features cli -- bench --substrates keyword-echo,m2 --memory-llm none --reader none
//! ```

use std::process::ExitCode;
use submem::registry::Registry;

fn main() -> ExitCode {
    // `try_with` checks the factory (names, ids, defaults) before adding it.
    match Registry::default().try_with(submem_example_plugin::factory()) {
        Ok(registry) => submem_cli::main_with(registry),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

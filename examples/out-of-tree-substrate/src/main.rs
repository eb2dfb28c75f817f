//! The whole `submem` command line with keyword-echo registered: `bench`
//! (with the packing baselines), `substrates`, `serve`, `mcp`, `route`...
//! know it as they know `m2`.
//!
//! ```text
//! cargo run --release --features cli -- substrates echo
//! cargo run --release --features cli -- bench --substrates keyword-echo,m2 --memory-llm none --reader none
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    // The built-in substrates plus ours, after checking its names, ids and
    // defaults.
    submem_cli::main_with_plugins([submem_example_plugin::factory()])
}

//! The `submem` command line as a library: bench (with the packing
//! baselines), `substrates`, `models`, `compare`, `route`, `serve` and `mcp`
//! over a [`Registry`] the caller gives. The `submem` binary is
//! `main_with(Registry::default())`; a plugin's binary adds its factories
//! and gets every command for them:
//!
//! ```no_run
//! # fn my_factory() -> submem_core::plugin::SubstrateFactory { unimplemented!() }
//! fn main() -> std::process::ExitCode {
//!     // Every built-in substrate plus ours, each factory checked first.
//!     submem_cli::main_with_plugins([my_factory()])
//! }
//! ```
//!
//! ([`main_with`] takes a whole [`Registry`] for a binary that builds its
//! own.)
//!
//! ```text
//! submem bench                                   # synthetic set, embedded models, prints the table
//! submem bench --dataset locomo --data locomo10.json --substrates m1,m2,m10,flexa \
//!              --budget 2048,4096 --k 5,10 --reader none --out runs/locomo
//! submem bench --shard 2/8 --out runs/sweep/shard-2 …   # one of 8 shards of a sweep
//! submem bench merge runs/sweep/shard-* --out runs/sweep/merged
//! submem substrates [--json] [NAME]             # every substrate with its settings
//! submem models fetch | check
//! submem compare --out runs/locomo m2 flexa
//! submem route fit --from runs/locomo --holdout-seed 7 --out policy.json
//! submem route explain --policy policy.json --data locomo10.json --budget 2048
//! submem route eval --out runs/locomo-router --policy policy.json
//! submem serve --addr 127.0.0.1:8080 --data-dir data [--config submem.toml]
//! submem mcp --data-dir data                   # MCP over stdio
//! ```
//!
//! Errors print as a readable chain on stderr with a non-zero exit code.
//!
//! Feature `mimalloc` (default) makes mimalloc the global allocator of the
//! binary that links this crate: hnsw_rs allocates a node per candidate
//! while searching, and M1 graph reads are about 25% faster with it (dense
//! bench). Turn it off when your binary sets its own allocator.

mod agentic_args;
mod agentic_cmd;
mod bench_answer_key;
mod bench_cmd;
mod bench_judges;
mod bench_merge;
mod bench_prompts;
mod route_cmd;
mod route_eval;
mod run_info;
mod serve_cmd;
mod substrates_cmd;

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use submem::registry::Registry;
use tracing_subscriber::EnvFilter;

pub use substrates_cmd::{render as render_substrates, substrates_listing};

// See the crate docs (feature `mimalloc`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Pluggable memory substrates for LLM agents: benchmark, models, comparisons.
#[derive(Debug, Parser)]
#[command(name = "submem", version, about, long_about = None)]
struct Cli {
    /// TOML configuration (models, OpenAI server, services); SUBMEM_* variables override it.
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    /// More logs on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Only errors on stderr, and no progress bar.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run substrates on a dataset and report performance and efficiency metrics.
    ///
    /// Results go to --out: items.jsonl (appended as each item finishes, so a killed run
    /// resumes), writes.jsonl, summary.json, report.md, coverage.svg, scatter.svg, fates.svg and run.json.
    ///
    /// Sharded sweeps: `--shard I/N` runs every Nth substrate × conversation task (round-robin,
    /// shard I from 1 to N) into its own --out, with everything decided over the whole run (the
    /// reader's question sample, seeds, order) as in one run. Run the N shards as N jobs with
    /// the same other arguments, then `submem bench merge DIR… --out DIR` writes the items,
    /// summary and report the unsharded run writes. deploy/ holds a Slurm job array and a
    /// Kubernetes Indexed Job that do this.
    Bench(Box<bench_cmd::BenchArgs>),
    /// List every substrate `--substrates` accepts, with aliases, family, paper and settings.
    Substrates {
        /// Print JSON (an array of descriptions) instead of text.
        #[arg(long)]
        json: bool,
        /// Show only this substrate (a name or an alias).
        name: Option<String>,
    },
    /// Fetch or check the embedded models.
    Models {
        #[command(subcommand)]
        action: ModelsAction,
    },
    /// Compare two substrates of a finished run (exact McNemar + paired bootstrap).
    Compare {
        /// The run directory (holding items.jsonl).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// First substrate, as written in the run (e.g. `flexa:kappa=64`).
        a: String,
        /// Second substrate.
        b: String,
    },
    /// Routing: fit a policy from bench outputs, explain a decision, evaluate on held-out questions.
    Route {
        #[command(subcommand)]
        action: route_cmd::RouteCommand,
    },
    /// Serve memory over HTTP (`/v1`, `/healthz`, `/metrics`) and MCP (`/mcp`), durably.
    Serve(serve_cmd::ServeArgs),
    /// Serve memory as MCP tools over stdin/stdout (for MCP clients that start a process).
    Mcp(serve_cmd::McpArgs),
}

#[derive(Debug, Subcommand)]
enum ModelsAction {
    /// Fetch both local models into the cache and print their paths.
    Fetch,
    /// Load both models; print dimensions, a sample generation and speeds.
    Check,
}

/// The error of a command: any error, printed with its chain.
pub type AnyError = Box<dyn std::error::Error + Send + Sync>;

fn init_tracing(verbose: u8, quiet: bool) {
    let default = if quiet {
        "error"
    } else {
        match verbose {
            0 => "warn",
            1 => "info",
            2 => "debug",
            _ => "trace",
        }
    };
    let filter = EnvFilter::try_from_env("SUBMEM_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    submem_bench::runner::error_chain(e)
}

/// Runs the command line of the process (`std::env::args`) with the
/// substrates of `registry`: parses the arguments (printing help or the
/// usage error), sets up logging, runs the command on a multi-threaded
/// tokio runtime and prints any error with its chain. A binary's `main`
/// returns what this returns.
pub fn main_with(registry: Registry) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(run_with(Arc::new(registry), std::env::args_os()))
}

/// [`main_with`] on the built-in substrates plus `factories`, each checked
/// first ([`Registry::try_with`]: names, ids, defaults); a factory that
/// fails the check is printed as an error and the process exits 1. This is
/// a plugin binary's whole `main`.
pub fn main_with_plugins(
    factories: impl IntoIterator<Item = submem_core::plugin::SubstrateFactory>,
) -> ExitCode {
    let mut registry = Registry::default();
    for factory in factories {
        registry = match registry.try_with(factory) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
    }
    main_with(registry)
}

/// [`main_with`] inside a runtime the caller owns, on the given arguments
/// (the first is the program's name, as in `std::env::args_os`). Help,
/// usage errors and command errors are printed; the exit code says which.
pub async fn run_with<I, T>(registry: Arc<Registry>, args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // `--help` and `--version` print to stdout and succeed.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    init_tracing(cli.verbose, cli.quiet);
    match dispatch(cli, registry).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", chain(e.as_ref()));
            ExitCode::from(2)
        }
    }
}

async fn dispatch(cli: Cli, registry: Arc<Registry>) -> Result<ExitCode, AnyError> {
    if let Command::Substrates { json, name } = &cli.command {
        return substrates_cmd::run(&registry, *json, name.as_deref());
    }
    // A merge reads finished runs: no configuration, no model.
    let cli = match cli.command {
        Command::Bench(args) => match *args {
            bench_cmd::BenchArgs {
                action: Some(bench_cmd::BenchAction::Merge(merge)),
                ..
            } => return bench_merge::run(merge),
            args => Cli {
                command: Command::Bench(Box::new(args)),
                ..cli
            },
        },
        command => Cli { command, ..cli },
    };
    // The server's configuration file also holds a `[server]` table.
    let cli = match cli.command {
        Command::Serve(args) => {
            return serve_cmd::serve(args, cli.config.as_deref(), registry).await
        }
        Command::Mcp(args) => return serve_cmd::mcp(args, cli.config.as_deref(), registry).await,
        command => Cli { command, ..cli },
    };
    let config = submem_models::Config::load(cli.config.as_deref())?;
    match cli.command {
        Command::Substrates { json, name } => substrates_cmd::run(&registry, json, name.as_deref()),
        // A live environment (`--dataset textworld|alfworld|scienceworld`)
        // plays episodes instead of asking questions.
        Command::Bench(args) if agentic_cmd::is_live(&args) => {
            agentic_cmd::run(*args, config, cli.quiet, registry).await
        }
        Command::Bench(args) => bench_cmd::run(*args, config, cli.quiet, registry).await,
        Command::Models {
            action: ModelsAction::Fetch,
        } => {
            let paths =
                tokio::task::spawn_blocking(move || submem_models::fetch_models(&config)).await??;
            for p in paths {
                println!("{}", p.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Models {
            action: ModelsAction::Check,
        } => {
            let check = submem_models::check_models(&config).await?;
            print!("{check}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Route { action } => route_cmd::run(action, config, &registry).await,
        Command::Serve(args) => serve_cmd::serve(args, cli.config.as_deref(), registry).await,
        Command::Mcp(args) => serve_cmd::mcp(args, cli.config.as_deref(), registry).await,
        Command::Compare { out, a, b } => {
            let path = out.join("items.jsonl");
            if !path.exists() {
                return Err(format!(
                    "{} not found: is {} a `submem bench` output directory?",
                    path.display(),
                    out.display()
                )
                .into());
            }
            let items: Vec<submem_bench::items::ItemRecord> =
                submem_bench::items::read_jsonl(&path)?;
            let c = submem_bench::compare::compare(&items, &a, &b)?;
            println!("{c}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use submem_core::plugin::{LlmUse, Settings, SubstrateFactory};
    use submem_core::{Family, MethodId};

    /// A plugin's factory: a name and family of its own (what it builds is
    /// the built-in recency window; only the listing matters here).
    fn extra_factory() -> SubstrateFactory {
        SubstrateFactory::builder(
            "plugin-echo",
            MethodId::from_static("PluginEcho"),
            Family::from_static("plugin"),
        )
        .aliases(&["pecho"])
        .summary("a factory registered by a plugin's main")
        .llm(LlmUse::Never)
        .build_without_settings(|ctx| {
            let builtin = Registry::default();
            let recent = builtin.resolve("recent").expect("built in");
            recent.build(ctx, &Settings::new())
        })
    }

    #[test]
    fn an_extra_factory_is_listed_by_substrates() {
        let registry = Registry::default().try_with(extra_factory()).unwrap();
        let text = substrates_listing(&registry, false, None).unwrap();
        assert!(
            text.contains("plugin-echo (pecho): a factory registered by a plugin's main"),
            "{text}"
        );
        assert!(text.contains("family plugin"), "{text}");
        assert!(text.contains("m2"), "the built-in substrates stay: {text}");
        // By alias, alone, and as JSON.
        let one = substrates_listing(&registry, false, Some("pecho")).unwrap();
        assert!(one.starts_with("plugin-echo (pecho):"), "{one}");
        assert!(!one.contains("\nm2"), "{one}");
        let json: serde_json::Value =
            serde_json::from_str(&substrates_listing(&registry, true, None).unwrap()).unwrap();
        assert!(
            json.as_array()
                .unwrap()
                .iter()
                .any(|d| d["name"] == "plugin-echo"),
            "{json}"
        );
        // The built-in registry alone does not know it.
        let err = substrates_listing(&Registry::default(), false, Some("plugin-echo")).unwrap_err();
        assert!(err.to_string().contains("unknown substrate"), "{err}");
    }

    #[tokio::test]
    async fn run_with_routes_substrates_and_bench_checks_through_the_given_registry() {
        let registry = Arc::new(Registry::default().try_with(extra_factory()).unwrap());
        let code = run_with(registry.clone(), ["submem", "substrates", "plugin-echo"]).await;
        assert_eq!(code, ExitCode::SUCCESS);
        // `bench --check` resolves the names against the same registry.
        let args = [
            "submem",
            "bench",
            "--check",
            "--substrates",
            "plugin-echo,m2",
        ];
        assert_eq!(run_with(registry, args).await, ExitCode::SUCCESS);
        let code = run_with(Arc::new(Registry::default()), args).await;
        assert_ne!(code, ExitCode::SUCCESS, "unknown without the plugin");
    }
}

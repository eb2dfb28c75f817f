//! `submem`: benchmark memory substrates for LLM agents, fetch and check the
//! embedded models, and compare two substrates of a finished run.
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

mod bench_cmd;
mod bench_merge;
mod route_cmd;
mod route_eval;
mod run_info;
mod serve_cmd;
mod substrates_cmd;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

// hnsw_rs allocates a node per candidate while searching; mimalloc makes M1
// graph reads about 25% faster than the system allocator (dense bench).
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
    /// resumes), writes.jsonl, summary.json, report.md, scatter.svg and run.json.
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

/// The error type of the binary: any error, printed with its chain.
type AnyError = Box<dyn std::error::Error + Send + Sync>;

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

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose, cli.quiet);
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
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", chain(e.as_ref()));
            ExitCode::from(2)
        }
    }
}

async fn dispatch(cli: Cli) -> Result<ExitCode, AnyError> {
    if let Command::Substrates { json, name } = &cli.command {
        return substrates_cmd::run(*json, name.as_deref());
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
        Command::Serve(args) => return serve_cmd::serve(args, cli.config.as_deref()).await,
        Command::Mcp(args) => return serve_cmd::mcp(args, cli.config.as_deref()).await,
        command => Cli { command, ..cli },
    };
    let config = submem_models::Config::load(cli.config.as_deref())?;
    match cli.command {
        Command::Substrates { json, name } => substrates_cmd::run(json, name.as_deref()),
        Command::Bench(args) => bench_cmd::run(*args, config, cli.quiet).await,
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
        Command::Route { action } => route_cmd::run(action, config).await,
        Command::Serve(args) => serve_cmd::serve(args, cli.config.as_deref()).await,
        Command::Mcp(args) => serve_cmd::mcp(args, cli.config.as_deref()).await,
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

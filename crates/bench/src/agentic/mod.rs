//! The agentic regime, live: substrates steer an agent through text
//! environments (TextWorld, ALFWorld-format games, ScienceWorld), and the
//! harness reports task success beside every efficiency metric.
//!
//! - [`bridge`]: the Python process that plays the games, one JSON line a
//!   request, with timeouts;
//! - [`games`]: which games a run plays (specs or a directory);
//! - [`policy`]: who picks commands (walkthrough, seeded random, an LLM);
//! - [`episode`]: the loop of one episode (read, decide, write, step);
//! - [`report`]: P8 task success, P9 goal-condition success, P10 steps to
//!   goal, P_avg, invalid-command rate, history length, E1–E15, and the
//!   task-success-against-`k` chart.
//!
//! [`run_episodes`] runs every substrate × game × regime × budget × `k`,
//! `jobs` at a time (each worker with its own bridge), appending each
//! finished episode to `episodes.jsonl` at once: a killed run resumes with
//! the episodes it had not finished. In the cross-episode regime each
//! substrate first writes the walkthroughs of the training games into a
//! training bank (kept under `<out>/banks/`, its cost in `banks.jsonl`),
//! which every episode restores before it starts.

pub mod bridge;
pub mod episode;
pub mod games;
pub mod policy;
pub mod report;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use submem::registry::{Registry, SubstrateSpec};
use submem::PhaseStats;
use submem_core::{Namespace, Services, Substrate};

use crate::context::lock;
use crate::instance::{build_instance, file_safe, keep_memory, write_and_manage, AGENT_NAMESPACE};
use crate::items::JsonlLog;
use crate::{BenchError, Result};
use bridge::{Bridge, BridgeConfig};
use episode::{play, walkthrough_units, AgenticRegime, EpisodeRecord, EpisodeSetup};
use games::Game;
use policy::Policy;

/// File of the episode records.
pub const EPISODES_FILE: &str = "episodes.jsonl";
/// File of the training banks' write records.
pub const BANKS_FILE: &str = "banks.jsonl";

/// How an agentic run runs.
#[derive(Debug, Clone)]
pub struct AgenticOptions {
    /// Token budgets of the policy's prompt.
    pub budgets: Vec<usize>,
    /// Retrieval breadths.
    pub ks: Vec<usize>,
    /// Regimes to run.
    pub regimes: Vec<AgenticRegime>,
    /// Games whose walkthroughs make the training bank (cross-episode).
    pub train_games: Vec<Game>,
    /// Most steps an episode may take (50, as ALFWorld's evaluation).
    pub step_cap: u32,
    /// Manage memory every this many steps (0: only at the end).
    pub manage_every: u32,
    /// Seeds the random policy's streams (with each game's id).
    pub seed: u64,
    /// Episodes run at once (each with its own bridge).
    pub jobs: usize,
    /// Output directory.
    pub out: PathBuf,
    /// Keep each step's memory block in the records.
    pub trace: bool,
    /// Show a progress bar (only on a terminal).
    pub progress: bool,
    /// Stop with [`BenchError::Aborted`] after this many new episodes (test hook).
    pub abort_after: Option<usize>,
    /// The bridge.
    pub bridge: BridgeConfig,
    /// Run only this shard's episodes (`--shard I/N`: episode `t` of the
    /// whole run, numbered regime-, substrate-, game-, budget-, then
    /// k-major, goes to shard `t mod N + 1`); merge the directories with
    /// [`merge_episodes`].
    pub shard: Option<crate::shard::Shard>,
}

impl AgenticOptions {
    /// Defaults under `cache` (the submem cache directory), writing to `out`.
    pub fn new(cache: &Path, out: PathBuf) -> Self {
        AgenticOptions {
            budgets: vec![1024],
            ks: vec![1, 5],
            regimes: vec![AgenticRegime::Within],
            train_games: Vec::new(),
            step_cap: 50,
            manage_every: 10,
            seed: 0,
            jobs: 1,
            out,
            trace: false,
            progress: true,
            abort_after: None,
            bridge: BridgeConfig::new(cache),
            shard: None,
        }
    }

    /// Rejects options no run can honour.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(BenchError::InvalidOption(m));
        crate::options::check_sweep(&self.budgets, &self.ks)?;
        if self.regimes.is_empty() {
            return bad("give at least one regime".into());
        }
        if self.step_cap == 0 || self.step_cap > 10_000 {
            return bad(format!(
                "the step cap must be in 1..=10000, got {}",
                self.step_cap
            ));
        }
        if self.jobs == 0 {
            return bad("jobs must be at least 1".into());
        }
        if self.regimes.contains(&AgenticRegime::Cross) && self.train_games.is_empty() {
            return bad("the cross-episode regime needs training games (--train-games)".into());
        }
        Ok(())
    }
}

/// What a training bank cost, once per substrate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BankRecord {
    /// The substrate spec.
    pub substrate: String,
    /// The training games.
    pub games: Vec<String>,
    /// Units written.
    pub events: usize,
    /// Seconds writing.
    pub write_seconds: f64,
    /// Seconds managing.
    pub manage_seconds: f64,
    /// The write phase.
    pub write: PhaseStats,
    /// The manage phase.
    pub manage: PhaseStats,
    /// Bytes the bank holds.
    pub memory_bytes: u64,
}

/// What an agentic run produced.
#[derive(Debug, Default)]
pub struct AgenticOutcome {
    /// Every episode of the run directory (earlier runs' included).
    pub episodes: Vec<EpisodeRecord>,
    /// The training banks' records.
    pub banks: Vec<BankRecord>,
    /// Episodes found done at the start.
    pub resumed: usize,
    /// Episodes added by this run.
    pub new_episodes: usize,
    /// Substrates skipped, with the reason.
    pub skipped: Vec<String>,
    /// Episodes that failed, with the error.
    pub failures: Vec<String>,
    /// Wall seconds of this run.
    pub wall_seconds: f64,
}

type EpisodeKey = (String, String, AgenticRegime, usize, usize);

fn key_of(r: &EpisodeRecord) -> EpisodeKey {
    (r.substrate.clone(), r.game.clone(), r.regime, r.budget, r.k)
}

#[derive(Debug, Clone)]
struct Task {
    spec: SubstrateSpec,
    game: Game,
    regime: AgenticRegime,
    budget: usize,
    k: usize,
}

struct Shared {
    registry: Arc<Registry>,
    services: Services,
    policy: Arc<dyn Policy>,
    opts: AgenticOptions,
    banks: HashMap<String, std::result::Result<PathBuf, String>>,
    queue: Mutex<VecDeque<Task>>,
    log: Mutex<JsonlLog>,
    new_records: Mutex<Vec<EpisodeRecord>>,
    failures: Mutex<Vec<String>>,
    skipped: Mutex<HashSet<String>>,
    appended: AtomicUsize,
    progress: ProgressBar,
}

/// Runs `specs` on `games` under `policy` (see the module docs).
pub async fn run_episodes(
    games: Vec<Game>,
    specs: Vec<SubstrateSpec>,
    registry: Arc<Registry>,
    services: Services,
    policy: Arc<dyn Policy>,
    opts: AgenticOptions,
) -> Result<AgenticOutcome> {
    let started = Instant::now();
    opts.validate()?;
    if specs.is_empty() {
        return Err(BenchError::InvalidOption("no substrates given".into()));
    }
    if games.is_empty() {
        return Err(BenchError::InvalidOption("no games given".into()));
    }
    for s in &specs {
        registry.check(s)?;
    }
    std::fs::create_dir_all(&opts.out).map_err(|e| BenchError::io(&opts.out, e))?;
    let (log, old) = JsonlLog::open::<EpisodeRecord>(&opts.out.join(EPISODES_FILE))?;
    let policy_name = policy.name();
    if let Some(r) = old
        .iter()
        .find(|r| r.policy != policy_name || r.env != games[0].env.name())
    {
        return Err(BenchError::InvalidOption(format!(
            "{} holds episodes of {} with policy {}; this run plays {} with {policy_name}: use another --out",
            opts.out.display(),
            r.env,
            r.policy,
            games[0].env
        )));
    }
    let done: HashSet<EpisodeKey> = old.iter().map(key_of).collect();

    // Check the environment before anything is built.
    let mut probe = Bridge::start(&opts.bridge).await?;
    probe.check(games[0].env)?;
    // Games are generated (or found in the cache) once, before any episode,
    // so that no episode's wall time holds a generation.
    let games = generated(&mut probe, games).await?;
    let mut opts = opts;
    opts.train_games = generated(&mut probe, std::mem::take(&mut opts.train_games)).await?;

    // Each shard builds the banks it needs itself (the same bank, from the
    // same walkthroughs, in every shard).
    let (banks, bank_records) = if opts.regimes.contains(&AgenticRegime::Cross) {
        build_banks(&mut probe, &specs, &registry, &services, &opts).await?
    } else {
        (HashMap::new(), Vec::new())
    };
    probe.close().await;

    let mut tasks = VecDeque::new();
    let mut numbered = 0usize;
    for regime in &opts.regimes {
        for spec in &specs {
            for game in &games {
                for &budget in &opts.budgets {
                    for &k in &opts.ks {
                        let key = (spec.to_string(), game.id.clone(), *regime, budget, k);
                        let number = numbered;
                        numbered += 1;
                        if opts.shard.is_some_and(|s| !s.runs(number)) {
                            continue;
                        }
                        if !done.contains(&key) {
                            tasks.push_back(Task {
                                spec: spec.clone(),
                                game: game.clone(),
                                regime: *regime,
                                budget,
                                k,
                            });
                        }
                    }
                }
            }
        }
    }
    let progress = if opts.progress && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        ProgressBar::new(tasks.len() as u64)
    } else {
        ProgressBar::with_draw_target(Some(tasks.len() as u64), ProgressDrawTarget::hidden())
    };
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} episodes · {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    tracing::info!(episodes = tasks.len(), resumed = done.len(), policy = %policy_name, "agentic run");
    let workers = opts.jobs.min(tasks.len()).max(1);
    let shared = Arc::new(Shared {
        registry,
        services,
        policy,
        opts,
        banks,
        queue: Mutex::new(tasks),
        log: Mutex::new(log),
        new_records: Mutex::new(Vec::new()),
        failures: Mutex::new(Vec::new()),
        skipped: Mutex::new(HashSet::new()),
        appended: AtomicUsize::new(0),
        progress,
    });
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let shared = shared.clone();
        set.spawn(async move { worker(shared).await });
    }
    let mut aborted = None;
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(Ok(())) => {}
            Ok(Err(e)) => aborted = Some(e),
            Err(e) => aborted = Some(BenchError::InvalidOption(format!("a worker panicked: {e}"))),
        }
    }
    shared.progress.finish_and_clear();
    if let Some(e) = aborted {
        return Err(e);
    }
    let new_records = std::mem::take(&mut *lock(&shared.new_records));
    let new_episodes = new_records.len();
    let mut episodes = old;
    episodes.extend(new_records);
    let mut skipped: Vec<String> = lock(&shared.skipped).iter().cloned().collect();
    skipped.sort();
    let failures = std::mem::take(&mut *lock(&shared.failures));
    Ok(AgenticOutcome {
        resumed: done.len(),
        new_episodes,
        episodes,
        banks: bank_records,
        skipped,
        failures,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

/// The episodes and banks of the directories of every `--shard I/N` run of
/// one agentic sweep, merged: each episode once (an episode found in two
/// shards with different outcomes is an error: the directories are not one
/// sweep), each substrate's bank once.
pub fn merge_episodes(dirs: &[PathBuf]) -> Result<(Vec<EpisodeRecord>, Vec<BankRecord>)> {
    let mut episodes: Vec<EpisodeRecord> = Vec::new();
    let mut seen: HashMap<EpisodeKey, usize> = HashMap::new();
    let mut banks: Vec<BankRecord> = Vec::new();
    for dir in dirs {
        let path = dir.join(EPISODES_FILE);
        if !path.is_file() {
            return Err(BenchError::InvalidOption(format!(
                "{} has no {EPISODES_FILE}: not the directory of an agentic run",
                dir.display()
            )));
        }
        for e in crate::items::read_jsonl::<EpisodeRecord>(&path)? {
            match seen.get(&key_of(&e)) {
                Some(&i) if episodes[i].won != e.won || episodes[i].steps != e.steps => {
                    return Err(BenchError::InvalidOption(format!(
                        "{}: episode {} on {} (B={} k={}) differs from another shard's",
                        dir.display(),
                        e.substrate,
                        e.game,
                        e.budget,
                        e.k
                    )))
                }
                Some(_) => {}
                None => {
                    seen.insert(key_of(&e), episodes.len());
                    episodes.push(e);
                }
            }
        }
        let bank_path = dir.join(BANKS_FILE);
        if bank_path.is_file() {
            for b in crate::items::read_jsonl::<BankRecord>(&bank_path)? {
                if !banks.iter().any(|x| x.substrate == b.substrate) {
                    banks.push(b);
                }
            }
        }
    }
    Ok((episodes, banks))
}

/// `games` with every generated game made and named by its file.
async fn generated(bridge: &mut Bridge, games: Vec<Game>) -> Result<Vec<Game>> {
    let mut out = Vec::with_capacity(games.len());
    for mut game in games {
        if let games::GameSource::Make(_) = &game.source {
            let path = episode::game_path(bridge, &game).await?;
            tracing::info!(game = %game.id, path, "game ready");
            game.source = games::GameSource::File(PathBuf::from(path));
        }
        out.push(game);
    }
    Ok(out)
}

async fn worker(shared: Arc<Shared>) -> Result<()> {
    let mut bridge: Option<Bridge> = None;
    loop {
        let Some(task) = lock(&shared.queue).pop_front() else {
            break;
        };
        let label = task.spec.to_string();
        shared.progress.set_message(format!(
            "{label} · {} · B={} k={}",
            task.game.id, task.budget, task.k
        ));
        if lock(&shared.skipped)
            .iter()
            .any(|s| s.starts_with(&format!("{label}:")))
        {
            shared.progress.inc(1);
            continue;
        }
        if bridge.is_none() {
            bridge = Some(Bridge::start(&shared.opts.bridge).await?);
        }
        let Some(b) = bridge.as_mut() else { continue };
        match run_task(&shared, b, &task).await {
            Ok(Ok(record)) => {
                lock(&shared.log).append(&record)?;
                tracing::info!(substrate = %label, game = %record.game, won = record.won, steps = record.steps,
                    seconds = record.wall_seconds, "episode done");
                lock(&shared.new_records).push(record);
                let n = shared.appended.fetch_add(1, Ordering::SeqCst) + 1;
                if shared.opts.abort_after.is_some_and(|a| n >= a) {
                    return Err(BenchError::Aborted(n));
                }
            }
            Ok(Err(skip)) => {
                lock(&shared.skipped).insert(format!("{label}: {skip}"));
            }
            Err(e) => {
                let msg = format!(
                    "{label} on {} ({} B={} k={}): {}",
                    task.game.id,
                    task.regime.name(),
                    task.budget,
                    task.k,
                    crate::runner::error_chain(&e)
                );
                tracing::error!("{msg}");
                lock(&shared.failures).push(msg);
                if matches!(e, BenchError::Environment { .. }) {
                    // The bridge may be dead or stuck: the next episode gets a fresh one.
                    if let Some(old) = bridge.take() {
                        old.close().await;
                    }
                }
            }
        }
        shared.progress.inc(1);
    }
    if let Some(b) = bridge {
        b.close().await;
    }
    Ok(())
}

async fn run_task(
    shared: &Shared,
    bridge: &mut Bridge,
    task: &Task,
) -> Result<std::result::Result<EpisodeRecord, String>> {
    let label = task.spec.to_string();
    let instance = match build_instance(&shared.services, &shared.registry, &task.spec)? {
        Ok(i) => i,
        Err(skip) => return Ok(Err(skip)),
    };
    let namespace = Namespace::new(AGENT_NAMESPACE)?;
    let mut restore_seconds = 0.0;
    if task.regime == AgenticRegime::Cross {
        let dir = match shared.banks.get(&label) {
            Some(Ok(dir)) => dir,
            Some(Err(skip)) => return Ok(Err(skip.clone())),
            None => return Ok(Err("no training bank".into())),
        };
        let t = Instant::now();
        instance
            .sub
            .restore(dir)
            .await
            .map_err(|e| BenchError::Substrate {
                substrate: label.clone(),
                conversation: format!("training bank {}", dir.display()),
                source: e,
            })?;
        restore_seconds = t.elapsed().as_secs_f64();
        instance.meter.reset();
    }
    let setup = EpisodeSetup {
        instance: &instance,
        namespace,
        label: &label,
        game: &task.game,
        regime: task.regime,
        budget: task.budget,
        k: task.k,
        policy: shared.policy.as_ref(),
        counter: shared.services.tokens.as_ref(),
        seed: shared.opts.seed,
        step_cap: shared.opts.step_cap,
        manage_every: shared.opts.manage_every,
        trace: shared.opts.trace,
        restore_seconds,
    };
    play(bridge, setup).await.map(Ok)
}

/// Plays the training games' walkthroughs and writes them into one bank per
/// substrate (reused when `banks.jsonl` has its record and its directory is there).
async fn build_banks(
    bridge: &mut Bridge,
    specs: &[SubstrateSpec],
    registry: &Registry,
    services: &Services,
    opts: &AgenticOptions,
) -> Result<(
    HashMap<String, std::result::Result<PathBuf, String>>,
    Vec<BankRecord>,
)> {
    let (mut log, old) = JsonlLog::open::<BankRecord>(&opts.out.join(BANKS_FILE))?;
    let mut episodes = Vec::new();
    for game in &opts.train_games {
        let (units, won) = walkthrough_units(bridge, game, opts.step_cap).await?;
        if !won {
            tracing::warn!(game = %game.id, "the training game's walkthrough does not win; its trajectory is kept as it is");
        }
        episodes.push(units);
    }
    let events: usize = episodes.iter().map(Vec::len).sum();
    let names: Vec<String> = opts.train_games.iter().map(|g| g.id.clone()).collect();
    let mut banks = HashMap::new();
    let mut records = old.clone();
    for spec in specs {
        let label = spec.to_string();
        let dir = opts.out.join("banks").join(file_safe(&label));
        if old.iter().any(|r| r.substrate == label && r.games == names) && dir.is_dir() {
            banks.insert(label, Ok(dir));
            continue;
        }
        let instance = match build_instance(services, registry, spec)? {
            Ok(i) => i,
            Err(skip) => {
                banks.insert(label, Err(skip));
                continue;
            }
        };
        let ns = Namespace::new(AGENT_NAMESPACE)?;
        let written = write_and_manage(
            &instance.sub,
            &ns,
            episodes.iter().cloned(),
            &ProgressBar::hidden(),
            &format!("{label} · training bank"),
        )
        .await
        .map_err(|e| BenchError::Substrate {
            substrate: label.clone(),
            conversation: crate::runner::TRAINING_BANK.into(),
            source: e,
        })?;
        keep_memory(&instance.sub, &dir).await?;
        let w = written.record(
            &instance.sub,
            &instance.meter,
            &label,
            instance.family.clone(),
            "agentic",
            "bank",
        );
        let record = BankRecord {
            substrate: label.clone(),
            games: names.clone(),
            events,
            write_seconds: w.write_seconds,
            manage_seconds: w.manage_seconds,
            write: w.write,
            manage: w.manage,
            memory_bytes: w.memory_bytes,
        };
        log.append(&record)?;
        records.push(record);
        banks.insert(label, Ok(dir));
    }
    Ok((banks, records))
}

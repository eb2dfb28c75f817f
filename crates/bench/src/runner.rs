//! The run loop. For every substrate × conversation (up to `jobs` at a time):
//! build a fresh instance whose services report to a fresh
//! [`Meter`](submem::Meter), write the history in session-sized
//! batches, call `manage` once, then read every
//! pending (question, budget, k) — the write is shared by the whole budget/k
//! sweep. Each recall goes into the shared reader prompt ([`crate::reader`]);
//! answers are judged when a judge is set. Every finished item is appended to
//! `items.jsonl` at once, so a killed run resumes where it stopped. Once
//! the tasks are done, a run with a judge checks it on known answers
//! ([`crate::judges::checks`], logged in `judge_checks.jsonl`).
//!
//! `train_episodes` (cross-episode regime, for refined-experience memories
//! such as M7/M8): the first N conversations of the run are *training*
//! episodes. They are asked nothing. Each substrate writes them once, in
//! dataset order, into one agent namespace ([`AGENT_NAMESPACE`]), manages,
//! and persists the result as its *training bank* under `<out>/banks/`.
//! Every test episode then restores that bank into a fresh instance, writes
//! its own history into the same namespace, manages, and is read: the bank
//! is built from the training trajectories and recovered for each new
//! episode. The bank's cost is logged once (the write record of
//! [`TRAINING_BANK`]) and counted once in the run's totals; each episode's
//! record holds only its own writes (and the restore time), while its
//! footprint includes the bank.
//!
//! Unless `keep_memories` is off, each task's memory is persisted once
//! written and managed (`<out>/memories/`); a resumed task whose write was
//! logged restores it and only reads. A copy that does not restore is
//! written again.
//!
//! With an answer key (`answer_key`), an item whose question the key
//! changes is also scored, and judged, against the corrected gold answer;
//! the run keeps the key in `answer_key.json` and refuses to resume a
//! directory scored under another ([`crate::answer_key`]).
//!
//! `limit` caps questions **per conversation** (the first N in dataset order);
//! `reader_sample` caps how many questions the reader answers **in total**
//! (the first N answerable questions in dataset order, the same ones for every
//! substrate, so answer metrics stay paired).
//!
//! `shard` (`--shard I/N`): the run does only its share of the substrate ×
//! conversation tasks ([`crate::shard`]); everything above (the sample, the
//! training banks, the order) is decided over the whole run first, so
//! `submem bench merge` turns the shards' directories into what one run
//! writes. A sharded run keeps its [`ShardRecord`] in `shard.json`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use submem_core::{Namespace, Substrate};
use tokio::task::JoinSet;

use crate::context::{lock, Ctx};
use crate::dataset::{Conversation, Dataset, QuestionKind};
use crate::instance::{
    instance, keep_memory, kept_memory_dir, training_bank, write_and_manage, Prepared,
};
pub use crate::instance::{AGENT_NAMESPACE, TRAINING_BANK};
use crate::items::{done_keys, ItemKey, ItemRecord, JsonlLog, WriteRecord};
use crate::judges::checks::{self, CheckPlan};
use crate::judges::CheckRecord;
use crate::measure;
pub use crate::options::{Judge, Models, RunOptions};
use crate::shard::{ShardRecord, TaskNote};
use crate::{BenchError, Result};
use submem::registry::{Registry, SubstrateSpec};

/// What a run produced.
#[derive(Debug, Default)]
pub struct RunOutcome {
    /// Every item of the run directory (earlier runs' included).
    pub items: Vec<ItemRecord>,
    /// Every write record.
    pub writes: Vec<WriteRecord>,
    /// Items found done when the run started.
    pub resumed: usize,
    /// Items added by this run.
    pub new_items: usize,
    /// Substrates skipped, with the reason.
    pub skipped: Vec<String>,
    /// Substrate × conversation tasks that failed, with the error chain
    /// (and the judge checks, when they failed).
    pub failures: Vec<String>,
    /// The judge checks' log (earlier runs' checks included; empty when the
    /// run has no judge, checks are off or another shard runs them).
    pub judge_checks: Vec<CheckRecord>,
}

impl RunOutcome {
    /// The report's notes on what happened to the run's tasks: substrates
    /// skipped, tasks failed ([`crate::results::task_notes`]).
    pub fn task_notes(&self) -> Vec<String> {
        crate::results::task_notes(&self.skipped, &self.failures)
    }
}

/// Namespace for a conversation id (path separators and controls replaced).
fn namespace_for(id: &str) -> Result<Namespace> {
    let clean: String = id
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    Ok(Namespace::new(if clean.is_empty() {
        "conversation".to_string()
    } else {
        clean
    })?)
}

/// Questions of `conv` the run asks.
fn asked<'a>(conv: &'a Conversation, opts: &RunOptions) -> &'a [crate::Question] {
    let n = opts.limit.unwrap_or(usize::MAX).min(conv.questions.len());
    &conv.questions[..n]
}

/// Runs `specs` over `dataset`; results go to `opts.out`.
pub async fn run(
    dataset: Arc<Dataset>,
    specs: Vec<SubstrateSpec>,
    factory: Arc<Registry>,
    models: Arc<Models>,
    opts: RunOptions,
) -> Result<RunOutcome> {
    opts.validate()?;
    models.validate()?;
    if specs.is_empty() {
        return Err(BenchError::InvalidOption("no substrates given".into()));
    }
    let specs = if opts.packing_baselines {
        submem::baselines::with_packing_baselines(&specs, &factory)
    } else {
        specs
    };
    for s in &specs {
        factory.check(s)?;
    }
    std::fs::create_dir_all(&opts.out).map_err(|e| BenchError::io(&opts.out, e))?;
    ShardRecord::check_dir(&opts.out, opts.shard)?;
    let (items_log, old_items) = JsonlLog::open::<ItemRecord>(&opts.out.join("items.jsonl"))?;
    let (writes_log, old_writes) = JsonlLog::open::<WriteRecord>(&opts.out.join("writes.jsonl"))?;
    crate::answer_key::prepare_dir(
        &opts.out,
        opts.answer_key.as_deref(),
        &dataset.name,
        !old_items.is_empty(),
    )?;
    let done = done_keys(&old_items);
    let writes_done = old_writes
        .iter()
        .map(|w| {
            (
                w.substrate.clone(),
                w.dataset.clone(),
                w.conversation.clone(),
            )
        })
        .collect();

    let mut conversations: Vec<Conversation> = dataset
        .conversations
        .iter()
        .take(opts.conversations.unwrap_or(usize::MAX))
        .cloned()
        .collect();
    let train: Vec<Conversation> = match opts.train_episodes {
        Some(n) if n >= conversations.len() => {
            return Err(BenchError::InvalidOption(format!(
                "train_episodes {n} leaves no test conversation (the run has {})",
                conversations.len()
            )))
        }
        Some(n) => conversations.drain(..n).collect(),
        None => Vec::new(),
    };
    let sample = match (&models.reader, opts.reader_sample) {
        (Some(_), Some(n)) => Some(
            conversations
                .iter()
                .flat_map(|c| asked(c, &opts).iter().map(move |q| (c, q)))
                .filter(|(_, q)| q.answer.is_some() && q.kind != QuestionKind::Adversarial)
                .take(n)
                .map(|(c, q)| (c.id.clone(), q.id.clone()))
                .collect(),
        ),
        _ => None,
    };
    // Task t is substrate t / C on conversation t % C (C conversations):
    // the numbering `crate::shard` splits by and a merge puts items back in.
    let tasks: Vec<(usize, SubstrateSpec, Conversation)> = specs
        .iter()
        .flat_map(|s| conversations.iter().map(move |c| (s.clone(), c.clone())))
        .enumerate()
        .filter(|(t, _)| opts.shard.is_none_or(|shard| shard.runs(*t)))
        .map(|(t, (s, c))| (t, s, c))
        .collect();
    let total: usize = tasks
        .iter()
        .map(|(_, _, c)| asked(c, &opts).len())
        .sum::<usize>()
        * opts.budgets.len()
        * opts.ks.len();
    let mut shard_record = opts.shard.map(|shard| ShardRecord {
        shard,
        dataset: dataset.name.clone(),
        substrates: specs.iter().map(ToString::to_string).collect(),
        conversations: conversations.iter().map(|c| c.id.clone()).collect(),
        finished: false,
        skipped: Vec::new(),
        failures: Vec::new(),
    });
    if let Some(record) = &shard_record {
        record.write(&opts.out)?;
    }
    let resumed = done.len();
    let progress = if opts.progress && std::io::stderr().is_terminal() {
        ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} items  ETA {eta}  {msg}",
    ) {
        progress.set_style(style);
    }
    let ctx = Arc::new(Ctx {
        dataset: dataset.clone(),
        train,
        factory,
        models,
        opts: opts.clone(),
        done,
        writes_done,
        sample,
        items_log: Mutex::new(items_log),
        writes_log: Mutex::new(writes_log),
        new_items: Mutex::new(Vec::new()),
        new_writes: Mutex::new(Vec::new()),
        appended: AtomicUsize::new(0),
        progress,
        banks: Mutex::new(std::collections::HashMap::new()),
    });

    let mut tasks = tasks.into_iter();
    let mut set: JoinSet<(usize, String, Result<Option<String>>)> = JoinSet::new();
    // Which task a tokio task id is, to name a task that panicked.
    let mut running = HashMap::new();
    let spawn = |set: &mut JoinSet<_>,
                 running: &mut HashMap<tokio::task::Id, (usize, String)>,
                 (t, spec, conv): (usize, SubstrateSpec, Conversation)| {
        let ctx = ctx.clone();
        let label = format!("{spec} on {}", conv.id);
        let handle = set.spawn({
            let label = label.clone();
            async move {
                let done = run_one(&ctx, &spec, &conv).await;
                (t, label, done)
            }
        });
        running.insert(handle.id(), (t, label));
    };
    for t in tasks.by_ref().take(opts.jobs) {
        spawn(&mut set, &mut running, t);
    }
    let mut outcome = RunOutcome {
        resumed,
        ..RunOutcome::default()
    };
    let mut skipped_specs = HashSet::new();
    let (mut task_skips, mut task_failures) = (Vec::new(), Vec::new());
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((_, _, Ok(None))) => {}
            Ok((task, _, Ok(Some(skip)))) => {
                if skipped_specs.insert(skip.clone()) {
                    outcome.skipped.push(skip.clone());
                }
                task_skips.push(TaskNote { task, note: skip });
            }
            Ok((_, _, Err(BenchError::Aborted(n)))) => {
                set.abort_all();
                ctx.progress.abandon();
                return Err(BenchError::Aborted(n));
            }
            Ok((task, label, Err(e))) => {
                let chain = error_chain(&e);
                tracing::error!(task = %label, error = %chain, "task failed");
                let note = format!("{label}: {chain}");
                outcome.failures.push(note.clone());
                task_failures.push(TaskNote { task, note });
            }
            Err(join) => {
                let note = match running.get(&join.id()) {
                    Some((task, label)) => {
                        let note = format!("{label}: the task panicked or was cancelled: {join}");
                        task_failures.push(TaskNote {
                            task: *task,
                            note: note.clone(),
                        });
                        note
                    }
                    None => format!("a task panicked or was cancelled: {join}"),
                };
                outcome.failures.push(note);
            }
        }
        if let Some(t) = tasks.next() {
            spawn(&mut set, &mut running, t);
        }
    }
    ctx.progress.finish_and_clear();
    // The judge checks: once per run (shard 1 of a sharded one), after the
    // items, since they do not depend on any substrate.
    if !ctx.models.judges.is_empty()
        && opts.judge_checks > 0
        && opts.shard.is_none_or(|s| s.index() == 1)
    {
        let plan = CheckPlan {
            dataset: &dataset.name,
            kind: dataset.kind,
            asked: conversations
                .iter()
                .flat_map(|c| asked(c, &opts).iter().map(move |q| (c.id.as_str(), q)))
                .collect(),
            sample: opts.judge_checks,
            seed: opts.seed,
            jobs: opts.jobs,
        };
        match checks::run(&opts.out, &plan, &ctx.models.judges, &opts.judge_prompt).await {
            Ok(records) => outcome.judge_checks = records,
            Err(e) => {
                let chain = error_chain(&e);
                tracing::error!(error = %chain, "judge checks failed");
                outcome.failures.push(format!("judge checks: {chain}"));
            }
        }
    }

    let new_items = std::mem::take(&mut *lock(&ctx.new_items));
    outcome.new_items = new_items.len();
    let mut items = old_items;
    items.extend(new_items);
    let mut writes = old_writes;
    writes.extend(std::mem::take(&mut *lock(&ctx.new_writes)));
    outcome.items = items;
    outcome.writes = writes;
    if let Some(record) = &mut shard_record {
        record.finished = true;
        record.skipped = task_skips;
        record.failures = task_failures;
        record.write(&opts.out)?;
    }
    Ok(outcome)
}

/// An error with its sources, joined by `: `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(src) = cur {
        let msg = src.to_string();
        if !s.contains(&msg) {
            s.push_str(": ");
            s.push_str(&msg);
        }
        cur = src.source();
    }
    s
}

/// One substrate on one conversation, in its three phases: prepare the
/// memory (build, restore or write, manage), read every pending item, and
/// answer and judge it. `Ok(Some(reason))` when skipped.
async fn run_one(ctx: &Ctx, spec: &SubstrateSpec, conv: &Conversation) -> Result<Option<String>> {
    let label = spec.to_string();
    let pending = pending_items(ctx, &label, conv);
    if pending.is_empty() {
        return Ok(None);
    }
    let memory = match prepare_memory(ctx, spec, conv).await? {
        Ok(m) => m,
        Err(skip) => {
            ctx.progress.inc(pending.len() as u64);
            return Ok(Some(skip));
        }
    };
    ctx.progress
        .set_message(format!("{label} · {} · reading", conv.id));
    for (q, key) in pending {
        let (recall, item) = measure::read_item(ctx, &memory, conv, q, key).await?;
        let item = measure::answer_item(ctx, conv, q, &recall, item).await?;
        log_item(ctx, item)?;
    }
    Ok(None)
}

/// The (question, budget, k) items of `conv` this run has not logged yet;
/// the logged ones advance the progress bar.
fn pending_items<'a>(
    ctx: &Ctx,
    label: &str,
    conv: &'a Conversation,
) -> Vec<(&'a crate::Question, ItemKey)> {
    let mut pending = Vec::new();
    for q in asked(conv, &ctx.opts) {
        for &budget in &ctx.opts.budgets {
            for &k in &ctx.opts.ks {
                let key = ItemKey {
                    substrate: label.to_string(),
                    dataset: ctx.dataset.name.clone(),
                    conversation: conv.id.clone(),
                    question_id: q.id.clone(),
                    budget,
                    k,
                };
                if ctx.done.contains(&key) {
                    ctx.progress.inc(1);
                } else {
                    pending.push((q, key));
                }
            }
        }
    }
    pending
}

/// Builds a fresh metered instance and gives it `conv`'s memory: restored
/// from a kept copy when an earlier run wrote it, else written (over the
/// training bank in the cross-episode regime) and managed, logged and kept.
/// `Ok(Err(reason))` when the run cannot build the substrate.
async fn prepare_memory(
    ctx: &Ctx,
    spec: &SubstrateSpec,
    conv: &Conversation,
) -> Result<std::result::Result<Prepared, String>> {
    let label = spec.to_string();
    let dataset = ctx.dataset.name.clone();
    let sub_err = |e: submem_core::Error| BenchError::Substrate {
        substrate: label.clone(),
        conversation: conv.id.clone(),
        source: e,
    };
    // Cross-episode regime: every episode restores the training bank into one
    // agent namespace; otherwise each conversation is its own namespace.
    let bank = if ctx.train.is_empty() {
        None
    } else {
        match training_bank(ctx, spec).await? {
            Ok(dir) => Some(dir),
            Err(skip) => return Ok(Err(skip)),
        }
    };
    let ns = match bank {
        Some(_) => Namespace::new(AGENT_NAMESPACE)?,
        None => namespace_for(&conv.id)?,
    };
    let inst = match instance(ctx, spec)? {
        Ok(i) => i,
        Err(skip) => return Ok(Err(skip)),
    };
    let sub = &inst.sub;
    // Write phase, unless a previous run kept this task's memory.
    let write_key = (label.clone(), dataset.clone(), conv.id.clone());
    let kept = ctx
        .opts
        .keep_memories
        .then(|| kept_memory_dir(&ctx.opts.out, &label, &conv.id));
    let restored = match &kept {
        Some(dir) if ctx.writes_done.contains(&write_key) && dir.is_dir() => {
            match sub.restore(dir).await {
                Ok(()) => {
                    tracing::info!(task = %label, conversation = %conv.id, "kept memory restored");
                    true
                }
                Err(e) => {
                    tracing::warn!(task = %label, conversation = %conv.id, error = %e,
                        "kept memory did not restore; writing it again");
                    false
                }
            }
        }
        _ => false,
    };
    if !restored {
        let mut restore_seconds = 0.0;
        if let Some(dir) = &bank {
            let t = Instant::now();
            sub.restore(dir).await.map_err(sub_err)?;
            restore_seconds = t.elapsed().as_secs_f64();
        }
        let task = format!("{label} · {}", conv.id);
        let written = write_and_manage(sub, &ns, conv.history.batches(), &ctx.progress, &task)
            .await
            .map_err(sub_err)?;
        if !ctx.writes_done.contains(&write_key) {
            let rec = written.record(
                sub,
                &inst.meter,
                &label,
                inst.family.clone(),
                &dataset,
                &conv.id,
            );
            let rec = WriteRecord {
                restore_seconds,
                ..rec
            };
            lock(&ctx.writes_log).append(&rec)?;
            lock(&ctx.new_writes).push(rec);
        }
        if let Some(dir) = &kept {
            if let Err(e) = keep_memory(sub, dir).await {
                tracing::warn!(task = %label, conversation = %conv.id, error = %error_chain(&e),
                    "could not keep the written memory; a resume will write it again");
            }
        }
    }
    Ok(Ok(Prepared {
        instance: inst,
        namespace: ns,
        label,
    }))
}

/// Logs a finished item (so a killed run resumes after it) and stops the run
/// when `--abort-after` is reached.
fn log_item(ctx: &Ctx, item: ItemRecord) -> Result<()> {
    lock(&ctx.items_log).append(&item)?;
    lock(&ctx.new_items).push(item);
    ctx.progress.inc(1);
    let n = ctx.appended.fetch_add(1, Ordering::SeqCst) + 1;
    if ctx.opts.abort_after.is_some_and(|limit| n >= limit) {
        return Err(BenchError::Aborted(n));
    }
    Ok(())
}

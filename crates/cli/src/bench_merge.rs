//! `submem bench merge DIR… --out DIR`: the output directories of every
//! `submem bench --shard I/N` run of one sweep, merged into what the unsharded
//! run writes. The shards' records are checked and ordered by
//! [`submem_bench::shard::merge`]; here their `run.json` files are checked to
//! describe one run (the same settings, the shard aside), and the summary and
//! report are written by [`submem_bench::results`], as `submem bench` writes
//! them. The judge checks' logs (shard 1 runs the checks) are merged too,
//! and the answer key every shard applied is kept.
//! Kept memories and training banks stay in the shards' directories.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use submem_bench::results;
use submem_bench::shard::{self, ShardDir};

use crate::bench_cmd::{finish, MergeArgs};
use crate::run_info;
use crate::AnyError;

/// The key of a merged run's `run.json` that says how many shards it merged
/// (and that a later merge may replace it).
const MERGED_SHARDS: &str = "merged_shards";

/// Runs `submem bench merge`.
pub fn run(args: MergeArgs) -> Result<ExitCode, AnyError> {
    // Shards of an agentic run hold episodes, not items.
    if args.dirs.first().is_some_and(|d| {
        d.join(submem_bench::agentic::EPISODES_FILE).is_file() && !d.join("items.jsonl").is_file()
    }) {
        return crate::agentic_cmd::merge(&args.dirs, &args.out);
    }
    let mut shards = Vec::with_capacity(args.dirs.len());
    let mut infos = Vec::with_capacity(args.dirs.len());
    for dir in &args.dirs {
        let shard = ShardDir::read(dir)?;
        let info = run_info::read(dir)?;
        let said = info[run_info::SHARD].as_str().unwrap_or("none");
        if said != shard.record.shard.to_string() {
            return Err(format!(
                "{}: run.json says shard {said} but shard.json says {}: the directory was \
written by two runs; run the shard again into a new --out",
                dir.display(),
                shard.record.shard
            )
            .into());
        }
        shards.push(shard);
        infos.push(info);
    }
    check_out(&args.out, &args.dirs)?;
    let merged = shard::merge(shards)?;
    let Some(first) = infos.first() else {
        return Err("no shard directory given".into());
    };
    for (dir, info) in args.dirs.iter().zip(&infos).skip(1) {
        if let Some((key, a, b)) = run_info::difference_apart_from_shard(first, info) {
            return Err(format!(
                "{} and {} are not shards of one run: run with {key} = {a} and {key} = {b}{}",
                args.dirs[0].display(),
                dir.display(),
                run_info::why_apart(&key)
            )
            .into());
        }
    }

    let out = &args.out;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    merged.write_logs(out)?;
    let dirs: Vec<&Path> = args.dirs.iter().map(PathBuf::as_path).collect();
    submem_bench::judges::checks::merge_logs(&dirs, out)?;
    submem_bench::answer_key::merge_applied(&dirs, out)?;
    let mut info = run_info::with_prompts(first.clone());
    info[run_info::SHARD] = serde_json::Value::Null;
    info[MERGED_SHARDS] = merged.shards.into();
    run_info::write(out, &info)?;
    let mut notes = run_info::notes(&info);
    notes.extend(merged.task_notes());
    let items = merged.item_records();
    let md = results::write_results(
        out,
        &items,
        &merged.write_records(),
        &notes,
        run_info::leniency_limit(&info),
    )?;
    println!(
        "merged {} shards: {} items, {} write records",
        merged.shards,
        items.len(),
        merged.writes.len()
    );
    Ok(finish(out, &md, &merged.failures, items.is_empty()))
}

/// Refuses an output directory that is one of the shards, or that holds a
/// run other than an earlier merge (whose results would be overwritten).
fn check_out(out: &Path, dirs: &[PathBuf]) -> Result<(), AnyError> {
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if let Some(d) = dirs.iter().find(|d| same(d, out)) {
        return Err(format!(
            "--out {} is one of the shards ({}): merge into a new directory",
            out.display(),
            d.display()
        )
        .into());
    }
    let has_items = std::fs::metadata(out.join("items.jsonl")).is_ok_and(|m| m.len() > 0);
    if has_items {
        let merged_before = run_info::read(out).is_ok_and(|i| !i[MERGED_SHARDS].is_null());
        if !merged_before {
            return Err(format!(
                "--out {} holds a run that is not a merge: merge into a new directory",
                out.display()
            )
            .into());
        }
    }
    Ok(())
}

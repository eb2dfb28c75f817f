//! Sharded sweeps: the substrate × conversation tasks of one run split over
//! several processes (a Slurm job array, a Kubernetes Indexed Job), each
//! writing its own directory, then merged back into what one process writes.
//!
//! The runner numbers a run's tasks in the order it runs them, substrate-major
//! (task `t` is substrate `t / C` on conversation `t % C`), and shard `I/N`
//! takes task `t` when `t mod N = I − 1`. Round-robin rather than contiguous
//! blocks: a run's substrates differ in cost by orders of magnitude (a memory an
//! LLM writes against BM25), and blocks would hand one shard every task of the
//! slowest. Everything decided over the whole run (the reader's question
//! sample, the training bank a substrate's episodes restore, the order) is
//! decided before the split, so an item does not depend on the shard that ran
//! it.
//!
//! A sharded run keeps its [`ShardRecord`] in `shard.json`: the whole run's
//! task list, whether the shard finished, and which of its tasks were skipped
//! or failed. [`merge`] checks that the directories are every shard of one run
//! and puts items and write records back in the order one process logs them
//! (task by task; within a task, as the shard logged them), each line copied
//! as the shard wrote it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::instance::TRAINING_BANK;
use crate::items::{ItemRecord, WriteRecord};
use crate::{BenchError, Result};

/// The file a sharded run keeps its [`ShardRecord`] in.
pub const SHARD_FILE: &str = "shard.json";

/// Shard `index` of `count` (1 ≤ index ≤ count), written `I/N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Shard {
    index: usize,
    count: usize,
}

impl Shard {
    /// Shard `index` of `count`; refused unless 1 ≤ index ≤ count.
    pub fn new(index: usize, count: usize) -> Result<Shard> {
        Shard::checked(index, count).map_err(|reason| BenchError::BadShard {
            shard: format!("{index}/{count}"),
            reason,
        })
    }

    fn checked(index: usize, count: usize) -> std::result::Result<Shard, String> {
        if count == 0 {
            return Err("the shard count N must be at least 1".into());
        }
        if !(1..=count).contains(&index) {
            return Err(format!(
                "the shard number I must be in 1..={count} (shards are numbered from 1)"
            ));
        }
        Ok(Shard { index, count })
    }

    /// The shard's number, from 1.
    pub fn index(self) -> usize {
        self.index
    }

    /// How many shards the run is split into.
    pub fn count(self) -> usize {
        self.count
    }

    /// Whether this shard runs task `task` (numbered from 0 in run order).
    pub fn runs(self, task: usize) -> bool {
        task % self.count == self.index - 1
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = BenchError;

    fn from_str(s: &str) -> Result<Shard> {
        const FORM: &str = "expected I/N, shard I of N with 1 ≤ I ≤ N (e.g. 2/8)";
        let bad = |reason: String| BenchError::BadShard {
            shard: s.to_string(),
            reason,
        };
        let (i, n) = s.trim().split_once('/').ok_or_else(|| bad(FORM.into()))?;
        let number = |x: &str| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| bad(format!("{x:?} is not a whole number; {FORM}")))
        };
        Shard::checked(number(i)?, number(n)?).map_err(bad)
    }
}

impl TryFrom<String> for Shard {
    type Error = BenchError;
    fn try_from(s: String) -> Result<Shard> {
        s.parse()
    }
}

impl From<Shard> for String {
    fn from(s: Shard) -> String {
        s.to_string()
    }
}

/// A task of a shard, with what happened to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskNote {
    /// The task's number in the whole run (from 0, in run order).
    pub task: usize,
    /// Why it was skipped, or how it failed.
    pub note: String,
}

/// What a sharded run keeps in its directory ([`SHARD_FILE`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    /// Which shard the directory holds.
    pub shard: Shard,
    /// The dataset's name.
    pub dataset: String,
    /// The whole run's substrates, in run order.
    pub substrates: Vec<String>,
    /// The whole run's conversations (training episodes left out), in run order.
    pub conversations: Vec<String>,
    /// Whether the run returned: `false` while it runs, and after it was
    /// killed or aborted.
    pub finished: bool,
    /// This shard's tasks that were skipped, with the reason.
    #[serde(default)]
    pub skipped: Vec<TaskNote>,
    /// This shard's tasks that failed, with the error.
    #[serde(default)]
    pub failures: Vec<TaskNote>,
}

impl ShardRecord {
    /// The record in `dir`, if it holds one.
    pub fn read(dir: &Path) -> Result<Option<ShardRecord>> {
        crate::items::read_json_file(&dir.join(SHARD_FILE))
    }

    /// Writes the record into `dir`, replacing the old one whole (a reader
    /// never sees half a record).
    pub fn write(&self, dir: &Path) -> Result<()> {
        crate::items::write_json_file(&dir.join(SHARD_FILE), self)
    }

    /// Refuses to run `shard` (or, with `None`, the whole run) in `dir` when
    /// it holds another shard: the items of the two would be mixed.
    pub fn check_dir(dir: &Path, shard: Option<Shard>) -> Result<()> {
        let Some(old) = ShardRecord::read(dir)? else {
            return Ok(());
        };
        if Some(old.shard) == shard {
            return Ok(());
        }
        let this = shard.map_or("the whole run".to_string(), |s| format!("shard {s}"));
        Err(BenchError::InvalidOption(format!(
            "{} holds shard {} of a sharded run; running {this} there would mix their items: \
use another output directory",
            dir.display(),
            old.shard
        )))
    }

    /// The first part of the run plan in which `other` differs, as
    /// (what, this one's, the other's).
    fn plan_difference(&self, other: &ShardRecord) -> Option<(&'static str, String, String)> {
        if self.dataset != other.dataset {
            return Some(("dataset", self.dataset.clone(), other.dataset.clone()));
        }
        if self.substrates != other.substrates {
            let show = |v: &[String]| v.join(",");
            return Some((
                "substrates",
                show(&self.substrates),
                show(&other.substrates),
            ));
        }
        if self.conversations != other.conversations {
            let show = |v: &[String]| format!("{} conversations [{}]", v.len(), v.join(", "));
            return Some((
                "conversations",
                show(&self.conversations),
                show(&other.conversations),
            ));
        }
        None
    }
}

/// The run order of a plan's tasks and write records.
struct TaskOrder<'a> {
    substrates: HashMap<&'a str, usize>,
    conversations: HashMap<&'a str, usize>,
}

impl<'a> TaskOrder<'a> {
    fn new(plan: &'a ShardRecord) -> Self {
        let positions = |v: &'a [String]| {
            let mut m = HashMap::new();
            for (i, x) in v.iter().enumerate() {
                m.entry(x.as_str()).or_insert(i);
            }
            m
        };
        TaskOrder {
            substrates: positions(&plan.substrates),
            conversations: positions(&plan.conversations),
        }
    }

    /// The task that runs `substrate` on `conversation`, as the runner numbers it.
    fn task(&self, substrate: &str, conversation: &str) -> Option<usize> {
        let s = *self.substrates.get(substrate)?;
        let c = *self.conversations.get(conversation)?;
        Some(s * self.conversations.len() + c)
    }

    /// Where a write record goes: a substrate's training bank is written
    /// before its first episode.
    fn write_slot(&self, substrate: &str, conversation: &str) -> Option<usize> {
        let s = *self.substrates.get(substrate)?;
        let c = match conversation {
            TRAINING_BANK => 0,
            c => *self.conversations.get(c)? + 1,
        };
        Some(s * (self.conversations.len() + 1) + c)
    }
}

/// One line of a shard's log: the record and the line as the shard wrote it.
#[derive(Debug, Clone)]
pub struct Line<T> {
    /// The record.
    pub record: T,
    /// The line, without its newline.
    pub text: String,
}

/// A shard's directory, read back.
#[derive(Debug)]
pub struct ShardDir {
    /// The directory.
    pub dir: PathBuf,
    /// Its [`SHARD_FILE`].
    pub record: ShardRecord,
    /// Its `items.jsonl`.
    pub items: Vec<Line<ItemRecord>>,
    /// Its `writes.jsonl`.
    pub writes: Vec<Line<WriteRecord>>,
}

impl ShardDir {
    /// Reads the shard record and both logs of `dir`.
    pub fn read(dir: &Path) -> Result<ShardDir> {
        let record = ShardRecord::read(dir)?.ok_or_else(|| {
            BenchError::Merge(format!(
                "{} holds no {SHARD_FILE}: it is not the output directory of a `submem bench --shard` run",
                dir.display()
            ))
        })?;
        Ok(ShardDir {
            dir: dir.to_path_buf(),
            record,
            items: read_lines(&dir.join("items.jsonl"))?,
            writes: read_lines(&dir.join("writes.jsonl"))?,
        })
    }

    fn name(&self) -> String {
        format!("{} (shard {})", self.dir.display(), self.record.shard)
    }
}

/// Every complete line of a JSONL log; a torn last line (a writer killed
/// mid-line) is left out, as a resume would cut it.
fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Vec<Line<T>>> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
    let complete = text.rfind('\n').map_or(0, |i| i + 1);
    let mut out = Vec::new();
    for (i, line) in text[..complete].lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(line).map_err(|e| BenchError::Json {
            what: format!("{} line {}", path.display(), i + 1),
            source: e,
        })?;
        out.push(Line {
            record,
            text: line.to_string(),
        });
    }
    Ok(out)
}

/// Writes `lines` as a JSONL file, each as it was read.
pub fn write_lines<T>(path: &Path, lines: &[Line<T>]) -> Result<()> {
    let mut text = String::with_capacity(lines.iter().map(|l| l.text.len() + 1).sum());
    for l in lines {
        text.push_str(&l.text);
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| BenchError::io(path, e))
}

/// Every shard of a run merged: what the unsharded run would have logged, in
/// its order.
#[derive(Debug)]
pub struct Merged {
    /// How many shards were merged.
    pub shards: usize,
    /// The items, in run order.
    pub items: Vec<Line<ItemRecord>>,
    /// The write records, in run order (a training bank once per substrate).
    pub writes: Vec<Line<WriteRecord>>,
    /// Substrates skipped, with the reason, in run order.
    pub skipped: Vec<String>,
    /// Tasks that failed, with the error, in run order.
    pub failures: Vec<String>,
}

impl Merged {
    /// The item records.
    pub fn item_records(&self) -> Vec<ItemRecord> {
        self.items.iter().map(|l| l.record.clone()).collect()
    }

    /// The write records.
    pub fn write_records(&self) -> Vec<WriteRecord> {
        self.writes.iter().map(|l| l.record.clone()).collect()
    }

    /// The report's notes on the run's tasks ([`crate::results::task_notes`]).
    pub fn task_notes(&self) -> Vec<String> {
        crate::results::task_notes(&self.skipped, &self.failures)
    }

    /// Writes `items.jsonl` and `writes.jsonl` into `dir`.
    pub fn write_logs(&self, dir: &Path) -> Result<()> {
        write_lines(&dir.join("items.jsonl"), &self.items)?;
        write_lines(&dir.join("writes.jsonl"), &self.writes)
    }
}

/// Merges the directories of every shard of one run (in any order): refused
/// when a shard is missing or given twice, did not finish, belongs to another
/// split or another run plan, or holds a record of a task it does not run.
pub fn merge(shards: Vec<ShardDir>) -> Result<Merged> {
    let refuse = |m: String| Err(BenchError::Merge(m));
    let Some(first) = shards.first() else {
        return refuse("no shard directory given".into());
    };
    let count = first.record.shard.count();
    let mut by_index: Vec<Option<&ShardDir>> = vec![None; count];
    for s in &shards {
        if s.record.shard.count() != count {
            return refuse(format!(
                "{} and {} come from splits into {count} and {} shards",
                first.name(),
                s.name(),
                s.record.shard.count()
            ));
        }
        let slot = &mut by_index[s.record.shard.index() - 1];
        if let Some(before) = slot {
            return refuse(format!(
                "shard {} is given twice: {} and {}",
                s.record.shard,
                before.dir.display(),
                s.dir.display()
            ));
        }
        *slot = Some(s);
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| by_index[i - 1].is_none())
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        let given: Vec<String> = shards.iter().map(ShardDir::name).collect();
        return refuse(format!(
            "shard {} missing (given: {}): merge every shard 1..={count} of the run",
            missing.join(", "),
            given.join(", ")
        ));
    }
    for s in &shards {
        if let Some((what, a, b)) = first.record.plan_difference(&s.record) {
            return refuse(format!(
                "{} and {} are not shards of one run: {what} {a} against {b}",
                first.name(),
                s.name()
            ));
        }
        if !s.record.finished {
            return refuse(format!(
                "{} did not finish (it was stopped, or is still running): run its command \
again (it resumes where it stopped), then merge",
                s.name()
            ));
        }
    }

    let order = TaskOrder::new(&first.record);
    let dataset = &first.record.dataset;
    let mut items = Vec::new();
    let mut writes = Vec::new();
    let mut banks = std::collections::HashSet::new();
    let (mut skipped, mut failures) = (Vec::new(), Vec::new());
    for s in by_index.into_iter().flatten() {
        let shard = s.record.shard;
        let owner = |what: &str, substrate: &str, conversation: &str, task: Option<usize>| {
            let task = task.ok_or_else(|| {
                BenchError::Merge(format!(
                    "{} holds {what} of {substrate} on {conversation}, which the run does not have",
                    s.name()
                ))
            })?;
            if shard.runs(task) {
                Ok(task)
            } else {
                Err(BenchError::Merge(format!(
                    "{} holds {what} of {substrate} on {conversation}, which shard {}/{count} runs",
                    s.name(),
                    task % count + 1
                )))
            }
        };
        for line in &s.items {
            let key = &line.record.key;
            if &key.dataset != dataset {
                return refuse(format!(
                    "{} holds an item of dataset {}, its run is on {dataset}",
                    s.name(),
                    key.dataset
                ));
            }
            let task = order.task(&key.substrate, &key.conversation);
            let task = owner("an item", &key.substrate, &key.conversation, task)?;
            items.push((task, line.clone()));
        }
        for line in &s.writes {
            let w = &line.record;
            let slot = order.write_slot(&w.substrate, &w.conversation);
            if w.conversation == TRAINING_BANK {
                // Every shard builds the same bank; one run logs it once.
                let Some(slot) = slot else {
                    return refuse(format!(
                        "{} holds a training bank of {}, which the run does not have",
                        s.name(),
                        w.substrate
                    ));
                };
                if banks.insert(w.substrate.clone()) {
                    writes.push((slot, line.clone()));
                }
                continue;
            }
            let task = order.task(&w.substrate, &w.conversation);
            owner("a write record", &w.substrate, &w.conversation, task)?;
            if let Some(slot) = slot {
                writes.push((slot, line.clone()));
            }
        }
        skipped.extend(s.record.skipped.iter().cloned());
        failures.extend(s.record.failures.iter().cloned());
    }
    // Stable sorts: within a task, lines keep the order the shard logged them.
    items.sort_by_key(|(t, _)| *t);
    writes.sort_by_key(|(t, _)| *t);
    skipped.sort_by_key(|n| n.task);
    failures.sort_by_key(|n| n.task);
    let mut skip_notes: Vec<String> = Vec::new();
    for n in skipped {
        if !skip_notes.contains(&n.note) {
            skip_notes.push(n.note);
        }
    }
    Ok(Merged {
        shards: count,
        items: items.into_iter().map(|(_, l)| l).collect(),
        writes: writes.into_iter().map(|(_, l)| l).collect(),
        skipped: skip_notes,
        failures: failures.into_iter().map(|n| n.note).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_refuse_what_names_no_shard() {
        let s: Shard = "2/3".parse().unwrap();
        assert_eq!((s.index(), s.count(), s.to_string()), (2, 3, "2/3".into()));
        assert_eq!(
            " 1 / 1 ".parse::<Shard>().unwrap(),
            Shard::new(1, 1).unwrap()
        );
        for (bad, why) in [
            ("0/3", "numbered from 1"),
            ("4/3", "1..=3"),
            ("1/0", "at least 1"),
            ("x/y", "\"x\" is not a whole number"),
            ("3", "expected I/N"),
            ("-1/3", "not a whole number"),
        ] {
            let e = bad.parse::<Shard>().unwrap_err().to_string();
            assert!(
                e.contains(&format!("{bad:?}")) && e.contains(why),
                "{bad}: {e}"
            );
        }
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "\"2/3\"");
        assert_eq!(serde_json::from_str::<Shard>(&json).unwrap(), s);
        assert!(serde_json::from_str::<Shard>("\"5/3\"").is_err());
    }

    #[test]
    fn round_robin_gives_every_task_to_exactly_one_shard_evenly() {
        let shards: Vec<Shard> = (1..=3).map(|i| Shard::new(i, 3).unwrap()).collect();
        let mut sizes = [0; 3];
        for task in 0..14 {
            let owners: Vec<usize> = (0..3).filter(|&i| shards[i].runs(task)).collect();
            assert_eq!(owners.len(), 1, "task {task}");
            sizes[owners[0]] += 1;
        }
        assert_eq!(sizes, [5, 5, 4]);
    }

    #[test]
    fn a_directory_holding_another_shard_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let one = Shard::new(1, 3).unwrap();
        ShardRecord::check_dir(dir.path(), Some(one)).unwrap();
        ShardRecord {
            shard: one,
            dataset: "d".into(),
            substrates: vec!["m2".into()],
            conversations: vec!["c".into()],
            finished: false,
            skipped: Vec::new(),
            failures: Vec::new(),
        }
        .write(dir.path())
        .unwrap();
        ShardRecord::check_dir(dir.path(), Some(one)).unwrap();
        let e = ShardRecord::check_dir(dir.path(), Some(Shard::new(2, 3).unwrap()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("holds shard 1/3") && e.contains("shard 2/3"),
            "{e}"
        );
        let e = ShardRecord::check_dir(dir.path(), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the whole run"), "{e}");
    }
}

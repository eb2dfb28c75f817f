//! `run.json`: the settings a `submem bench` output directory was run with,
//! and the notes that head its report. A resume compares them with its own (a
//! directory holds results for one value of each setting that changes what an
//! item means); `submem bench merge` checks that every shard was run with the
//! same ones and writes them, less the shard, for the merged run.
//!
//! The reader and judge prompt templates (`reader_prompt`, `judge_prompt`:
//! `{"name": "builtin" or the file, "sha256": …}`) are compared by hash, so
//! the same template under another path is the same run; a directory written
//! before they were recorded has neither key and is read as having used the
//! built-in templates, which such runs did.
//!
//! The answer key (`answer_key`: `{"name": the file, "sha256": …}`, or null
//! for none) is compared by hash too; a directory written before it was
//! recorded had none.
//!
//! `judge` is the judge's LLM name, or the list of several judges' names
//! (`--judge a,b`); it is compared as a list, so one judge's name and a
//! one-name list are the same run and a directory written with one judge
//! resumes with it; a resume with other judges, more or fewer, is refused
//! (the items hold the verdicts of the judges they were run with).

use serde_json::Value;
use std::path::Path;

use submem_bench::prompt::{JudgeTemplate, ReaderTemplate};

use crate::AnyError;

/// The file, in an output directory.
pub const RUN_INFO: &str = "run.json";

/// Settings that change what an item's result means: a run directory holds
/// results for one value of each, so a resume with another is refused. The
/// shard is one: a shard's directory holds only its share of the tasks.
const RUN_IDENTITY: [&str; 11] = [
    "dataset",
    "data",
    "reader",
    JUDGE,
    "memory_llm",
    "seed",
    "train_episodes",
    READER_PROMPT,
    JUDGE_PROMPT,
    ANSWER_KEY,
    "shard",
];

/// The key of the answer key: `{"name": the file, "sha256": …}`, or null.
pub const ANSWER_KEY: &str = "answer_key";

/// The key of the reader's prompt template.
pub const READER_PROMPT: &str = "reader_prompt";

/// The key of the judge's prompt template.
pub const JUDGE_PROMPT: &str = "judge_prompt";

/// The key of the judges: one LLM name, or a list of them.
pub const JUDGE: &str = "judge";

/// The key of the leniency above which a judge is flagged.
pub const LENIENCY_LIMIT: &str = "judge_leniency_limit";

/// The leniency limit `info` records (the default when it records none).
pub fn leniency_limit(info: &Value) -> f64 {
    info[LENIENCY_LIMIT]
        .as_f64()
        .unwrap_or(submem_bench::judges::checks::DEFAULT_LENIENCY_LIMIT)
}

/// Lists that a resume may extend (more substrates, budgets or k values).
const RUN_EXTENSIBLE: [&str; 3] = ["substrates", "budgets", "k"];

/// The key that says which shard a directory holds (`"I/N"`, or null).
pub const SHARD: &str = "shard";

/// The key that heads a report: the notes fixed before the run starts.
pub const NOTES: &str = "notes";

/// Reads the run description of `dir`.
pub fn read(dir: &Path) -> Result<Value, AnyError> {
    let path = dir.join(RUN_INFO);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "cannot read {}: {e} (is {} a `submem bench` output directory?)",
            path.display(),
            dir.display()
        )
    })?;
    Ok(serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a run description: {e}", path.display()))?)
}

/// Writes `info` as the run description of `dir`.
pub fn write(dir: &Path, info: &Value) -> Result<(), AnyError> {
    let path = dir.join(RUN_INFO);
    std::fs::write(&path, serde_json::to_string_pretty(info)?)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

/// The notes of `info` (none when it has no `notes` list).
pub fn notes(info: &Value) -> Vec<String> {
    info[NOTES]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `info[key]`; a missing prompt template reads as the built-in one's
/// record (see the module docs).
pub fn setting(info: &Value, key: &str) -> Value {
    match &info[key] {
        Value::Null if key == READER_PROMPT => {
            serde_json::to_value(ReaderTemplate::builtin().id()).unwrap_or_default()
        }
        Value::Null if key == JUDGE_PROMPT => {
            serde_json::to_value(JudgeTemplate::builtin().id()).unwrap_or_default()
        }
        v => v.clone(),
    }
}

/// What of `info[key]` two runs must share: a template's hash, the judges
/// as a list (see the module docs), any other setting's whole value.
fn identity(info: &Value, key: &str) -> Value {
    let v = setting(info, key);
    if key == READER_PROMPT || key == JUDGE_PROMPT || key == ANSWER_KEY {
        v["sha256"].clone()
    } else if key == JUDGE {
        match v {
            Value::Null => Value::Array(Vec::new()),
            Value::String(one) => Value::Array(vec![Value::String(one)]),
            list => list,
        }
    } else {
        v
    }
}

/// `info` with the prompt templates a directory written before they were
/// recorded leaves out set to the built-in ones.
pub fn with_prompts(mut info: Value) -> Value {
    for key in [READER_PROMPT, JUDGE_PROMPT] {
        if info.is_object() && info[key].is_null() {
            info[key] = setting(&info, key);
        }
    }
    info
}

/// Why two runs that differ in `key` cannot be one, where the key's name
/// does not say it (the prompt templates).
pub fn why_apart(key: &str) -> &'static str {
    match key {
        READER_PROMPT => {
            " (another reader prompt template: the questions were asked, and the memory budgeted, \
with another prompt)"
        }
        JUDGE_PROMPT => {
            " (another judge prompt template: the answers were judged with another prompt)"
        }
        ANSWER_KEY => " (another answer key: the answers were scored against other gold answers)",
        _ => "",
    }
}

/// The first setting in which `a` and `b` differ, the shard aside, with both
/// values: first those that change what an item means (in
/// [`RUN_IDENTITY`]'s order), then any other in key order. Prompt templates
/// are compared by hash, a missing one read as the built-in one.
pub fn difference_apart_from_shard(a: &Value, b: &Value) -> Option<(String, Value, Value)> {
    let others: std::collections::BTreeSet<&String> = a
        .as_object()
        .into_iter()
        .chain(b.as_object())
        .flat_map(|o| o.keys())
        .collect();
    let mut keys: Vec<&str> = RUN_IDENTITY.to_vec();
    keys.extend(others.into_iter().map(String::as_str));
    keys.into_iter()
        .filter(|k| *k != SHARD)
        .find(|k| identity(a, k) != identity(b, k))
        .map(|k| (k.to_string(), setting(a, k), setting(b, k)))
}

/// Checks `info` against the run already in `out` (if it holds items) and
/// returns what `run.json` should say: refuses a resume whose results would
/// mean something else (another memory LLM, reader, dataset, shard...), since
/// the old items would be kept and mixed with the new ones under the same
/// keys; extends the substrate, budget and k lists otherwise.
pub fn resumable_run_info(out: &Path, mut info: Value) -> Result<Value, AnyError> {
    let has_items = std::fs::metadata(out.join("items.jsonl")).is_ok_and(|m| m.len() > 0);
    let path = out.join(RUN_INFO);
    let old: Value = match std::fs::read_to_string(&path) {
        Ok(text) if has_items => serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is not a run description ({e}); use a new --out",
                path.display()
            )
        })?,
        _ => return Ok(info),
    };
    for key in RUN_IDENTITY {
        if identity(&old, key) != identity(&info, key) {
            let (was, now) = (setting(&old, key), setting(&info, key));
            return Err(format!(
                "{} holds a run with {key} = {was}, this one has {now}: its results would be mixed with \
the old ones; use a new --out (or the same {key})",
                out.display()
            )
            .into());
        }
    }
    for key in RUN_EXTENSIBLE {
        let mut merged: Vec<Value> = old[key].as_array().cloned().unwrap_or_default();
        for v in info[key].as_array().cloned().unwrap_or_default() {
            if !merged.contains(&v) {
                merged.push(v);
            }
        }
        info[key] = Value::Array(merged);
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(memory_llm: Option<&str>, substrates: &[&str]) -> Value {
        serde_json::json!({
            "dataset": "locomo", "data": "conv.json", "reader": null, "judge": null,
            "memory_llm": memory_llm, "seed": 42, "train_episodes": null,
            "substrates": substrates, "budgets": [4096], "k": [10], "limit": 20,
        })
    }

    #[test]
    fn a_resume_may_extend_a_run_but_not_change_what_its_items_mean() {
        let dir = tempfile::tempdir().unwrap();
        let first = info(Some("local SmolLM2 (memory)"), &["m3"]);
        // No items yet: anything goes, and nothing is merged.
        let written = resumable_run_info(dir.path(), first.clone()).unwrap();
        assert_eq!(written, first);
        std::fs::write(dir.path().join("run.json"), written.to_string()).unwrap();
        std::fs::write(dir.path().join("items.jsonl"), "{}\n").unwrap();

        let more = resumable_run_info(
            dir.path(),
            info(Some("local SmolLM2 (memory)"), &["m4", "m3"]),
        );
        assert_eq!(more.unwrap()["substrates"], serde_json::json!(["m3", "m4"]));

        let err = resumable_run_info(dir.path(), info(None, &["m3"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("memory_llm") && err.contains("new --out"),
            "{err}"
        );
    }

    #[test]
    fn a_shard_resumes_only_as_itself() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = info(None, &["m2"]);
        first[SHARD] = "1/3".into();
        write(dir.path(), &first).unwrap();
        std::fs::write(dir.path().join("items.jsonl"), "{}\n").unwrap();
        assert!(resumable_run_info(dir.path(), first.clone()).is_ok());
        let mut other = first.clone();
        other[SHARD] = "2/3".into();
        let err = resumable_run_info(dir.path(), other)
            .unwrap_err()
            .to_string();
        assert!(err.contains("shard = \"1/3\""), "{err}");
        // An unsharded run (no shard key at all) into a shard's directory too.
        let err = resumable_run_info(dir.path(), info(None, &["m2"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("shard"), "{err}");
    }

    #[test]
    fn shards_of_one_run_differ_only_in_the_shard() {
        let mut a = info(None, &["m2"]);
        a[SHARD] = "1/2".into();
        let mut b = a.clone();
        b[SHARD] = "2/2".into();
        assert_eq!(difference_apart_from_shard(&a, &b), None);
        b["seed"] = 7.into();
        let (key, was, now) = difference_apart_from_shard(&a, &b).unwrap();
        assert_eq!((key.as_str(), was, now), ("seed", 42.into(), 7.into()));
        b["seed"] = 42.into();
        b["extra"] = true.into();
        assert_eq!(difference_apart_from_shard(&a, &b).unwrap().0, "extra");
        a[NOTES] = serde_json::json!(["dataset x", 3]);
        assert_eq!(notes(&a), vec!["dataset x".to_string()]);
    }

    #[test]
    fn judges_resume_as_a_list_and_an_old_single_judge_still_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let mut old = info(None, &["m2"]);
        old[JUDGE] = "openai m (judge)".into();
        write(dir.path(), &old).unwrap();
        std::fs::write(dir.path().join("items.jsonl"), "{}\n").unwrap();
        // The same judge, as a string or a one-name list, resumes.
        assert!(resumable_run_info(dir.path(), old.clone()).is_ok());
        let mut listed = old.clone();
        listed[JUDGE] = serde_json::json!(["openai m (judge)"]);
        assert!(resumable_run_info(dir.path(), listed.clone()).is_ok());
        assert_eq!(difference_apart_from_shard(&old, &listed), None);
        // Another judge added, or none, does not.
        let mut two = old.clone();
        two[JUDGE] = serde_json::json!(["openai m (judge)", "qwen: openai Q (judge)"]);
        let err = resumable_run_info(dir.path(), two.clone())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("judge = \"openai m (judge)\"") && err.contains("qwen"),
            "{err}"
        );
        assert_eq!(difference_apart_from_shard(&old, &two).unwrap().0, JUDGE);
        let mut none = old.clone();
        none[JUDGE] = Value::Null;
        assert!(resumable_run_info(dir.path(), none).is_err());
        // Two lists in another order are other runs (P4 is the first's).
        let mut swapped = two.clone();
        swapped[JUDGE] = serde_json::json!(["qwen: openai Q (judge)", "openai m (judge)"]);
        assert!(difference_apart_from_shard(&two, &swapped).is_some());
        assert_eq!(leniency_limit(&old), 0.2);
        old[LENIENCY_LIMIT] = 0.5.into();
        assert_eq!(leniency_limit(&old), 0.5);
    }

    /// `info` recording a reader template as `name` with `sha256`.
    fn with_reader_prompt(mut info: Value, name: &str, sha256: &str) -> Value {
        info[READER_PROMPT] = serde_json::json!({"name": name, "sha256": sha256});
        info
    }

    #[test]
    fn a_missing_template_is_the_builtin_one() {
        let old = info(None, &["m2"]);
        let builtin = serde_json::to_value(ReaderTemplate::builtin().id()).unwrap();
        assert_eq!(setting(&old, READER_PROMPT), builtin);
        assert_eq!(setting(&old, JUDGE_PROMPT)["name"], "builtin");
        let mut now = with_prompts(old.clone());
        assert_eq!(now[READER_PROMPT], builtin);
        assert_eq!(difference_apart_from_shard(&old, &now), None);
        // A resume of an older directory with the built-in templates goes on.
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &old).unwrap();
        std::fs::write(dir.path().join("items.jsonl"), "{}\n").unwrap();
        assert!(resumable_run_info(dir.path(), now.clone()).is_ok());
        // One with its own template does not.
        now = with_reader_prompt(now, "mine.txt", "ab12");
        let err = resumable_run_info(dir.path(), now.clone())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("reader_prompt = {\"name\":\"builtin\",\"sha256\":")
                && err.contains("this one has {\"name\":\"mine.txt\",\"sha256\":\"ab12\"}")
                && err.contains("use a new --out (or the same reader_prompt)"),
            "{err}"
        );
    }

    #[test]
    fn answer_keys_are_compared_by_hash_and_none_is_a_key_too() {
        let dir = tempfile::tempdir().unwrap();
        let key = |name: &str, sha256: &str| {
            let mut i = info(None, &["m2"]);
            i[ANSWER_KEY] = serde_json::json!({"name": name, "sha256": sha256});
            i
        };
        write(dir.path(), &key("a/errors.json", "ab12")).unwrap();
        std::fs::write(dir.path().join("items.jsonl"), "{}\n").unwrap();
        assert!(resumable_run_info(dir.path(), key("b/errors.json", "ab12")).is_ok());
        let err = resumable_run_info(dir.path(), key("a/errors.json", "cd34"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("answer_key = {\"name\":\"a/errors.json\",\"sha256\":\"ab12\"}")
                && err.contains("\"cd34\"")
                && err.contains("(or the same answer_key)"),
            "{err}"
        );
        // A run without a key (an older run.json has no such key) is another run.
        let err = resumable_run_info(dir.path(), info(None, &["m2"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("this one has null"), "{err}");
        let (k, _, _) =
            difference_apart_from_shard(&key("x", "ab12"), &info(None, &["m2"])).unwrap();
        assert_eq!(k, ANSWER_KEY);
        assert!(why_apart(&k).contains("other gold answers"));
        assert_eq!(
            difference_apart_from_shard(&key("x", "ab12"), &key("y", "ab12")),
            None
        );
    }

    #[test]
    fn templates_are_compared_by_hash() {
        let dir = tempfile::tempdir().unwrap();
        let first = with_reader_prompt(info(None, &["m2"]), "a/mine.txt", "ab12");
        write(dir.path(), &first).unwrap();
        std::fs::write(dir.path().join("items.jsonl"), "{}\n").unwrap();
        // The same file elsewhere is the same run...
        let moved = with_reader_prompt(info(None, &["m2"]), "b/mine.txt", "ab12");
        assert!(resumable_run_info(dir.path(), moved.clone()).is_ok());
        assert_eq!(difference_apart_from_shard(&first, &moved), None);
        // ...another template is not, and the difference names both hashes
        // and says why before any other key (the notes differ too).
        let mut other = with_reader_prompt(info(None, &["m2"]), "a/mine.txt", "cd34");
        other[NOTES] = serde_json::json!(["reader prompt: cd34"]);
        let (key, a, b) = difference_apart_from_shard(&first, &other).unwrap();
        assert_eq!(key, READER_PROMPT);
        assert_eq!(
            (&a["sha256"], &b["sha256"]),
            (&"ab12".into(), &"cd34".into())
        );
        assert!(why_apart(&key).contains("another reader prompt template"));
        let err = resumable_run_info(dir.path(), other)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"ab12\"") && err.contains("\"cd34\""),
            "{err}"
        );
        let mut judged = info(None, &["m2"]);
        judged[JUDGE_PROMPT] = serde_json::json!({"name": "j.txt", "sha256": "ef56"});
        let (key, _, b) = difference_apart_from_shard(&info(None, &["m2"]), &judged).unwrap();
        assert_eq!((key.as_str(), &b["sha256"]), (JUDGE_PROMPT, &"ef56".into()));
        assert!(why_apart(&key).contains("judged"));
    }
}

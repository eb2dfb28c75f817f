#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The cluster recipes under deploy/ hold together: the Slurm scripts are
//! valid bash, the job array's range is the shard count its command passes to
//! `--shard`, and the Kubernetes Indexed Job's completions are; every shard
//! writes where the merge reads; and each command line is accepted by the real
//! `submem` (a stub on the PATH records the arguments, then runs the binary
//! with `--check`, which parses and checks them without loading data).

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn deploy(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(rel)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A directory with stand-ins for `submem` (records each call's arguments in
/// `calls`, then runs the real binary, adding `--check` to a bench run) and
/// `sbatch` (records its arguments, answers a job id).
struct Stubs {
    dir: tempfile::TempDir,
}

impl Stubs {
    fn new() -> Stubs {
        let dir = tempfile::tempdir().unwrap();
        let submem = format!(
            r#"#!/bin/sh
for a in "$@"; do printf '%s\n' "$a"; done >> "{calls}"
echo @@ >> "{calls}"
case " $* " in
  *" merge "*|*" --check "*) exec "{real}" "$@" ;;
  *) exec "{real}" "$@" --check ;;
esac
"#,
            calls = dir.path().join("calls").display(),
            real = env!("CARGO_BIN_EXE_submem"),
        );
        let sbatch = format!(
            r#"#!/bin/sh
for a in "$@"; do printf '%s\n' "$a"; done >> "{calls}"
echo @@ >> "{calls}"
echo "4242;cluster"
"#,
            calls = dir.path().join("sbatch-calls").display(),
        );
        for (name, body) in [("submem", submem), ("sbatch", sbatch)] {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            let status = Command::new("chmod").arg("+x").arg(&p).status().unwrap();
            assert!(status.success());
        }
        Stubs { dir }
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        let path = std::env::var("PATH").unwrap_or_default();
        c.env("PATH", format!("{}:{path}", self.dir.path().display()))
            .env("SUBMEM_FETCH", "false")
            .env_remove("SUBMEM_CHECK")
            .env_remove("SLURM_ARRAY_TASK_COUNT");
        c
    }

    /// Each recorded call's arguments, in order (and forgets them).
    fn calls(&self, file: &str) -> Vec<Vec<String>> {
        let p = self.dir.path().join(file);
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let _ = std::fs::remove_file(&p);
        text.split("@@\n")
            .filter(|c| !c.is_empty())
            .map(|c| c.lines().map(str::to_string).collect())
            .collect()
    }
}

/// The value that follows `flag` in `args`.
fn flag<'a>(args: &'a [String], name: &str) -> &'a str {
    let i = args
        .iter()
        .position(|a| a == name)
        .unwrap_or_else(|| panic!("{name} missing from {args:?}"));
    &args[i + 1]
}

/// The number a `NAME=N` line of `script` sets.
fn assignment(script: &str, name: &str) -> usize {
    script
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= line"))
        .trim_matches('"')
        .parse()
        .unwrap()
}

fn bash_syntax_ok(path: &Path) {
    let o = Command::new("bash").arg("-n").arg(path).output().unwrap();
    assert!(o.status.success(), "{}: {}", path.display(), text(&o));
}

#[test]
fn slurm_array_runs_every_shard_and_the_merge_reads_them_all() {
    let array = deploy("slurm/bench-array.sbatch");
    let merge = deploy("slurm/bench-merge.sbatch");
    let submit = deploy("slurm/submit.sh");
    for p in [&array, &merge, &submit] {
        bash_syntax_ok(p);
    }
    let script = std::fs::read_to_string(&array).unwrap();
    let range = script
        .lines()
        .find_map(|l| l.strip_prefix("#SBATCH --array="))
        .expect("an #SBATCH --array line");
    let range = range.split('%').next().unwrap();
    let (first, last) = range.split_once('-').expect("a range I-J");
    let (first, last): (usize, usize) = (first.parse().unwrap(), last.parse().unwrap());
    let shards = assignment(&script, "SHARDS");
    assert_eq!(
        (first, last),
        (1, shards),
        "the array must run tasks 1..=SHARDS"
    );
    let merge_script = std::fs::read_to_string(&merge).unwrap();
    assert_eq!(assignment(&merge_script, "SHARDS"), shards);

    let stubs = Stubs::new();
    let run_dir = stubs.dir.path().join("run");
    let mut outs = Vec::new();
    for task in 1..=shards {
        let o = stubs
            .command("bash")
            .arg(&array)
            .env("SLURM_ARRAY_TASK_ID", task.to_string())
            .env("SLURM_ARRAY_TASK_COUNT", shards.to_string())
            .env("SLURM_CPUS_PER_TASK", "4")
            .env("RUN_DIR", &run_dir)
            .env("DATA", "/cluster/data/locomo10.json")
            .output()
            .unwrap();
        assert!(o.status.success(), "task {task}: {}", text(&o));
        assert!(text(&o).contains("arguments ok"), "{}", text(&o));
        let calls = stubs.calls("calls");
        assert_eq!(calls.len(), 1);
        let args = &calls[0];
        assert_eq!(args[0], "bench");
        assert_eq!(flag(args, "--shard"), format!("{task}/{shards}"));
        outs.push(PathBuf::from(flag(args, "--out")));
    }
    // An array of another size is refused before anything runs.
    let o = stubs
        .command("bash")
        .arg(&array)
        .env("SLURM_ARRAY_TASK_ID", "1")
        .env("SLURM_ARRAY_TASK_COUNT", (shards + 1).to_string())
        .env("RUN_DIR", &run_dir)
        .env("DATA", "x")
        .output()
        .unwrap();
    assert!(!o.status.success() && text(&o).contains("change both together"));
    assert!(stubs.calls("calls").is_empty());

    // The merge reads every shard's directory; its arguments parse (the
    // directories do not exist here, which is the error it stops at).
    let o = stubs
        .command("bash")
        .arg(&merge)
        .env("RUN_DIR", &run_dir)
        .output()
        .unwrap();
    assert!(text(&o).contains("holds no shard.json"), "{}", text(&o));
    let calls = stubs.calls("calls");
    let args = &calls[0];
    assert_eq!(&args[..2], ["bench", "merge"]);
    let dirs: Vec<PathBuf> = args[2..args.len() - 2].iter().map(PathBuf::from).collect();
    assert_eq!(dirs, outs);
    assert_eq!(args[args.len() - 2], "--out");

    // submit.sh checks the shard command, then queues the merge after the array.
    let o = stubs
        .command("bash")
        .arg(&submit)
        .arg("--account=lab")
        .env("RUN_DIR", &run_dir)
        .env("DATA", "/cluster/data/locomo10.json")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let checked = stubs.calls("calls");
    assert_eq!(checked.len(), 1);
    assert!(checked[0].contains(&"--check".to_string()));
    let queued = stubs.calls("sbatch-calls");
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert!(queued[0].contains(&"--account=lab".to_string()));
    assert!(queued[0].last().unwrap().ends_with("bench-array.sbatch"));
    assert!(queued[1].contains(&"--dependency=afterok:4242".to_string()));
    assert!(queued[1].last().unwrap().ends_with("bench-merge.sbatch"));
}

/// Every document of a YAML file, as JSON values.
fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

fn job(docs: &[Value], name: &str) -> Value {
    docs.iter()
        .find(|d| d["kind"] == "Job" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no Job {name}"))
        .clone()
}

/// Runs a container's `sh -c` script with its environment and `extra`.
fn run_container(stubs: &Stubs, container: &Value, extra: &[(&str, String)]) -> Output {
    let command: Vec<&str> = container["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(command, ["/bin/sh", "-c"]);
    let script = container["args"][0].as_str().unwrap();
    let mut c = stubs.command("sh");
    c.arg("-c").arg(script);
    for e in container["env"].as_array().into_iter().flatten() {
        c.env(e["name"].as_str().unwrap(), e["value"].as_str().unwrap());
    }
    for (k, v) in extra {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn kubernetes_indexed_job_runs_every_shard_and_the_merge_reads_them_all() {
    let docs = yaml_documents(&deploy("k8s/bench-shards.yaml"));
    let shards_job = job(&docs, "submem-bench-shards");
    let spec = &shards_job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let completions = spec["completions"].as_u64().unwrap() as usize;
    let parallelism = spec["parallelism"].as_u64().unwrap() as usize;
    assert!((1..=completions).contains(&parallelism));
    let pod = &spec["template"]["spec"];
    let container = &pod["containers"][0];
    let claim = |pod: &Value| {
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())
            .unwrap()
            .to_string()
    };
    let results_claim = claim(pod);
    assert!(
        docs.iter().any(|d| d["kind"] == "PersistentVolumeClaim"
            && d["metadata"]["name"] == results_claim.as_str()
            && d["spec"]["accessModes"][0] == "ReadWriteMany"),
        "the shards' volume is declared, writable from every node"
    );

    let stubs = Stubs::new();
    let mut outs = Vec::new();
    for index in 0..completions {
        let o = run_container(
            &stubs,
            container,
            &[("JOB_COMPLETION_INDEX", index.to_string())],
        );
        assert!(o.status.success(), "index {index}: {}", text(&o));
        assert!(text(&o).contains("arguments ok"), "{}", text(&o));
        let calls = stubs.calls("calls");
        let args = &calls[0];
        assert_eq!(args[0], "bench");
        assert_eq!(
            flag(args, "--shard"),
            format!("{}/{completions}", index + 1),
            "completions and the shard count go together"
        );
        outs.push(flag(args, "--out").to_string());
    }

    let docs = yaml_documents(&deploy("k8s/bench-merge.yaml"));
    let merge_job = job(&docs, "submem-bench-merge");
    let pod = &merge_job["spec"]["template"]["spec"];
    assert_eq!(
        claim(pod),
        results_claim,
        "the merge reads the shards' volume"
    );
    let o = run_container(&stubs, &pod["containers"][0], &[]);
    assert!(text(&o).contains("holds no shard.json"), "{}", text(&o));
    let calls = stubs.calls("calls");
    let args = &calls[0];
    assert_eq!(&args[..2], ["bench", "merge"]);
    assert_eq!(args[2..args.len() - 2], outs[..]);
    assert_eq!(args[args.len() - 2], "--out");
}

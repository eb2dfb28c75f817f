//! `submem bench --judge A,B --judge-checks N --judge-leniency-limit SHARE`:
//! the run's judges (the embedded model, the `[openai]` server, servers
//! named in `[servers.NAME]` sections of the configuration), checked on known
//! answers ([`submem_bench::judges`]), named in the report's notes and
//! recorded in `run.json`: `"judge"` is one judge's LLM name, as it always
//! was, or the list of several judges' names (a resume must name the same
//! judges, see [`crate::run_info`]).

use clap::Args;
use serde_json::{json, Value};

use submem_bench::judges::checks::DEFAULT_LENIENCY_LIMIT;
use submem_bench::options::{Judge, DEFAULT_JUDGE_CHECKS};
use submem_models::{Config, LlmKind};

use crate::AnyError;

/// The judge flags of `submem bench`.
#[derive(Debug, Args)]
pub struct JudgeArgs {
    /// The judges (P4), comma-separated or repeated: `local` (the embedded model), `openai` (the
    /// [openai] server), the name of a [servers.NAME] section of --config (another
    /// OpenAI-compatible server), or `none`. Every answer goes to each judge with the same
    /// prompt; the first judge's verdict is P4 in the tables, and with several the report gives
    /// P4 per judge, their agreement (Cohen's kappa) and the items they disagree on. Default:
    /// none on the synthetic set (SubEM is exact there), else the reader's kind.
    #[arg(long, value_delimiter = ',', value_name = "JUDGE[,JUDGE…]")]
    pub judge: Vec<String>,
    /// Questions sampled (seeded by --seed) for the judge checks: each judge also grades, with
    /// the run's judge prompt, each sampled question's gold answer, another question's gold
    /// answer of the same category and kind, and a vague but topical non-answer built from the
    /// question. The report gives each judge's strictness (gold rejected) and leniency (wrong
    /// accepted) with 95 % intervals; judge_checks.jsonl keeps every probe. 0 turns them off.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_JUDGE_CHECKS)]
    pub judge_checks: usize,
    /// A judge that accepts more than this share (0 to 1) of either kind of wrong answer in its
    /// checks is named in a warning at the top of the report.
    #[arg(long, value_name = "SHARE", default_value_t = DEFAULT_LENIENCY_LIMIT)]
    pub judge_leniency_limit: f64,
}

/// One `--judge` value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Choice {
    Local,
    Openai,
    Server(String),
}

impl Choice {
    /// The name its verdicts go by.
    fn name(&self) -> &str {
        match self {
            Choice::Local => "local",
            Choice::Openai => "openai",
            Choice::Server(n) => n,
        }
    }
}

impl JudgeArgs {
    /// The judges named, `None` when `--judge` is not given (the default
    /// applies); `none` alone names no judge.
    fn choices(&self) -> Result<Option<Vec<Choice>>, AnyError> {
        if self.judge.is_empty() {
            return Ok(None);
        }
        let given: Vec<&str> = self.judge.iter().map(|s| s.trim()).collect();
        if given.contains(&"none") {
            if given.len() > 1 {
                return Err("--judge none names no judge: give it alone".into());
            }
            return Ok(Some(Vec::new()));
        }
        let mut out: Vec<Choice> = Vec::new();
        for g in given {
            let c = match g {
                "" => return Err("--judge has an empty name".into()),
                "local" => Choice::Local,
                "openai" => Choice::Openai,
                other => Choice::Server(other.to_string()),
            };
            if out.contains(&c) {
                return Err(format!("--judge names {} twice", c.name()).into());
            }
            out.push(c);
        }
        Ok(Some(out))
    }

    /// Checks the flags against `config` (every server named is configured)
    /// without building anything.
    pub fn check(&self, config: &Config) -> Result<(), AnyError> {
        if !(0.0..=1.0).contains(&self.judge_leniency_limit) {
            return Err(format!(
                "--judge-leniency-limit {} is not a share between 0 and 1",
                self.judge_leniency_limit
            )
            .into());
        }
        for c in self.choices()?.unwrap_or_default() {
            if let Choice::Server(name) = c {
                config.server(&name)?;
            }
        }
        Ok(())
    }

    /// The run's judges, each loaded on its first call: those named, or
    /// one of `default` when none is named. Without a reader there is no
    /// answer to judge: the default judge is dropped, but judges named with
    /// `--judge` stay for their checks, which grade fixed probes, not answers.
    pub fn judges(
        &self,
        config: &Config,
        default: LlmKind,
        has_reader: bool,
    ) -> Result<Vec<Judge>, AnyError> {
        self.check(config)?;
        let choices = match self.choices()? {
            Some(c) => c,
            None if !has_reader => Vec::new(),
            None => match default {
                LlmKind::Local => vec![Choice::Local],
                LlmKind::Openai => vec![Choice::Openai],
                LlmKind::None => Vec::new(),
            },
        };
        choices
            .into_iter()
            .map(|c| {
                let llm = match &c {
                    Choice::Local => config.lazy_llm(LlmKind::Local, "judge"),
                    Choice::Openai => config.lazy_llm(LlmKind::Openai, "judge"),
                    Choice::Server(name) => Some(config.lazy_server_llm(name, "judge")?),
                };
                let llm = llm.ok_or("no judge LLM")?;
                Ok(Judge::new(c.name(), llm))
            })
            .collect()
    }
}

/// The report's notes on `judges` and their checks.
pub fn notes(judges: &[Judge], args: &JudgeArgs, seed: u64) -> Vec<String> {
    let mut notes = vec![match judges {
        [] => "judge: none (P4 n/a)".to_string(),
        [one] => format!("judge: {}", one.llm.name()),
        several => format!(
            "judges: {} (P4 is the first's; every answer judged by each)",
            several
                .iter()
                .map(|j| format!("{} ({})", j.name, j.llm.name()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }];
    if !judges.is_empty() {
        notes.push(if args.judge_checks == 0 {
            "judge checks: off (--judge-checks 0)".into()
        } else {
            format!(
                "judge checks: gold, specific wrong and vague wrong answers to up to {} sampled \
questions (seed {seed}) per judge; lenient above {:.0} %",
                args.judge_checks,
                args.judge_leniency_limit * 100.0
            )
        });
    }
    notes
}

/// What `run.json` records of `judges`: null, one LLM name, or the list.
pub fn record(judges: &[Judge]) -> Value {
    match judges {
        [] => Value::Null,
        [one] => json!(one.llm.name()),
        several => json!(several.iter().map(|j| j.llm.name()).collect::<Vec<_>>()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(judge: &[&str]) -> JudgeArgs {
        JudgeArgs {
            judge: judge.iter().map(|s| s.to_string()).collect(),
            judge_checks: 20,
            judge_leniency_limit: 0.2,
        }
    }

    fn config() -> Config {
        Config::from_toml_str(
            "[openai]\nbase_url = \"http://o/v1\"\nchat_model = \"m\"\n\
             [servers.qwen]\nbase_url = \"http://q/v1\"\nchat_model = \"Qwen3\"\n",
        )
        .unwrap()
    }

    #[test]
    fn judges_are_named_built_and_recorded() {
        let c = config();
        let j = args(&["openai", "qwen"])
            .judges(&c, LlmKind::None, true)
            .unwrap();
        let names: Vec<&str> = j.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["openai", "qwen"]);
        assert_eq!(j[1].llm.name(), "qwen: openai Qwen3 (judge)");
        assert_eq!(
            record(&j),
            json!(["openai m (judge)", "qwen: openai Qwen3 (judge)"])
        );
        assert_eq!(record(&j[..1]), json!("openai m (judge)"));
        assert_eq!(record(&[]), Value::Null);
        assert!(notes(&j, &args(&[]), 7)[0].starts_with("judges: openai (openai m (judge)), qwen"));
        assert!(notes(&j, &args(&[]), 7)[1].contains("up to 20 sampled questions (seed 7)"));
        // The default follows the reader's kind; no reader, no default
        // judge, but a named one stays for its checks.
        let d = args(&[]).judges(&c, LlmKind::Openai, true).unwrap();
        assert_eq!(d[0].name, "openai");
        assert!(args(&[])
            .judges(&c, LlmKind::Openai, false)
            .unwrap()
            .is_empty());
        let named = args(&["qwen"]).judges(&c, LlmKind::Openai, false).unwrap();
        assert_eq!(named[0].name, "qwen");
        assert!(args(&["none"])
            .judges(&c, LlmKind::Local, true)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn bad_judges_are_clear_errors() {
        let c = config();
        let err = |a: JudgeArgs| a.judges(&c, LlmKind::None, true).unwrap_err().to_string();
        assert!(err(args(&["llama"])).contains("no server \"llama\""));
        assert!(err(args(&["openai", "openai"])).contains("names openai twice"));
        assert!(err(args(&["none", "local"])).contains("give it alone"));
        let mut a = args(&["openai"]);
        a.judge_leniency_limit = 1.5;
        assert!(err(a).contains("--judge-leniency-limit 1.5"));
    }
}

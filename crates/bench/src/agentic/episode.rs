//! The episode loop: a substrate steering an agent through one game.
//!
//! At every step the substrate is read with an agentic query (the objective,
//! and the current observation as the newest unit) under the run's budget
//! and `k`, with the policy's fixed prompt `|P|` subtracted as for the QA
//! reader; the policy sees the shared template ([`super::policy`]) and picks
//! a command; the previous unit (command and the observation it produced) is
//! written to memory, so memory never repeats the observation the query
//! already carries; the command is played. Every `manage_every` steps, and
//! at the end, memory is managed. Units are [`Event::Step`]s whose source id
//! is `<game>:<n>`, unit 1 being the opening text (`[start]`), the layout the
//! refinement substrates cut episodes by. When the game ends, the last
//! observation gets the environment's verdict (`You won!` / `You lost!`) if
//! its text does not already say it: the same signal for every substrate.

use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use submem::PhaseStats;
use submem_core::{Event, Namespace, Query, Step, Substrate, TokenCounter};

use super::bridge::{Bridge, EnvState};
use super::games::{Game, GameSource};
use super::policy::{EpisodeState, Policy, StepView};
use crate::instance::Instance;
use crate::{BenchError, Result};

/// Within-episode accumulation or cross-episode recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgenticRegime {
    /// Memory starts empty and holds the episode's own steps.
    Within,
    /// Memory starts from the training bank (walkthroughs of training
    /// games), restored for every episode, and adds the episode's steps.
    Cross,
}

impl AgenticRegime {
    /// The name in results.
    pub fn name(self) -> &'static str {
        match self {
            AgenticRegime::Within => "within",
            AgenticRegime::Cross => "cross",
        }
    }
}

/// One step of an episode, as played.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// 1-based.
    pub step: u32,
    /// The command played.
    pub command: String,
    /// A chat policy's raw reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Whether a chat reply mapped onto an admissible command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapped: Option<bool>,
    /// Whether the command was not admissible.
    pub invalid: bool,
    /// What the environment answered.
    pub observation: String,
    /// Score after the step.
    pub score: f64,
    /// Admissible commands the policy chose among.
    pub admissible: usize,
    /// Tokens of the memory block the policy saw (E7 at this step).
    pub memory_tokens: usize,
    /// Source ids the memory block showed.
    pub shown: Vec<String>,
    /// Tokens of the whole history so far (every unit written or pending).
    pub history_tokens: usize,
    /// The memory block itself (kept with `--trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Seconds of the read.
    pub read_seconds: f64,
    /// Seconds of the policy's decision.
    pub policy_seconds: f64,
    /// Seconds of writing the previous unit (and managing, on manage steps).
    pub write_seconds: f64,
    /// Seconds of the environment's step, bridge included.
    pub env_seconds: f64,
    /// Of those, the environment's own (measured inside the bridge): the
    /// rest is the bridge's overhead.
    #[serde(default)]
    pub env_own_seconds: f64,
}

/// One episode: a substrate, a game, a regime, a budget and a `k`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    /// The substrate spec.
    pub substrate: String,
    /// Its family.
    pub family: String,
    /// The environment.
    pub env: String,
    /// The game id.
    pub game: String,
    /// The game's objective, as the policy read it at every step.
    #[serde(default)]
    pub objective: String,
    /// The game's opening text: what the policy saw at step 1.
    #[serde(default)]
    pub opening: String,
    /// Within or cross episode.
    pub regime: AgenticRegime,
    /// Token budget B of the policy's prompt.
    pub budget: usize,
    /// Retrieval breadth.
    pub k: usize,
    /// The policy's name.
    pub policy: String,
    /// The run's seed.
    pub seed: u64,
    /// Goal reached (P8).
    pub won: bool,
    /// Game lost.
    pub lost: bool,
    /// Final score.
    pub score: f64,
    /// Score of a win.
    pub max_score: f64,
    /// Highest score / max score reached at any step (P_avg's term).
    pub best_fraction: f64,
    /// Steps played.
    pub steps: u32,
    /// The step cap.
    pub step_cap: u32,
    /// Steps whose command was not admissible.
    pub invalid_steps: u32,
    /// Chat replies that mapped onto no admissible command.
    pub unmapped_replies: u32,
    /// Length of the game's walkthrough (0 when it has none).
    pub walkthrough_steps: usize,
    /// Tokens of the whole history at the end.
    pub history_tokens: usize,
    /// The policy's LLM tokens.
    pub policy_tokens: u64,
    /// The policy's LLM calls.
    pub policy_calls: u64,
    /// Seconds restoring the training bank (cross-episode).
    pub restore_seconds: f64,
    /// Wall seconds of the episode (E14's term).
    pub wall_seconds: f64,
    /// The substrate's write phase (E3, E5, E6).
    pub write: PhaseStats,
    /// The substrate's read phase (E4, E8, E9).
    pub read: PhaseStats,
    /// The substrate's manage phase (E10, E11).
    pub manage: PhaseStats,
    /// Bytes the memory holds at the end (E1).
    pub memory_bytes: u64,
    /// Every step.
    pub step_records: Vec<StepRecord>,
}

impl EpisodeRecord {
    /// The episode as one item of a QA-shaped run, for the router's fit
    /// and evaluation: dataset `<env>-agentic`, conversation the game,
    /// question the regime; task success its quality; the median step's
    /// read time its read time, the mean memory block its retrieved tokens.
    pub fn as_item(&self) -> crate::items::ItemRecord {
        let reads: Vec<f64> = self.step_records.iter().map(|s| s.read_seconds).collect();
        let shown = self
            .step_records
            .iter()
            .map(|s| s.memory_tokens)
            .sum::<usize>()
            / self.step_records.len().max(1);
        let key = crate::items::ItemKey {
            substrate: self.substrate.clone(),
            dataset: format!("{}-agentic", self.env),
            conversation: self.game.clone(),
            question_id: self.regime.name().to_string(),
            budget: self.budget,
            k: self.k,
        };
        crate::items::ItemRecord {
            question: self.objective.clone(),
            retrieved_tokens: shown,
            read_seconds: submem::LatencyStats::from_samples(&reads).p50,
            read_llm_tokens: self.read.total_tokens(),
            read_llm_calls: self.read.llm_calls,
            task_success: Some(if self.won { 1.0 } else { 0.0 }),
            ..crate::items::ItemRecord::unmeasured(
                key,
                self.regime.name().to_string(),
                crate::QuestionKind::Standard,
            )
        }
    }

    /// Goal-condition success: final score / max score (P9's term).
    pub fn goal_fraction(&self) -> f64 {
        if self.max_score > 0.0 {
            (self.score / self.max_score).clamp(0.0, 1.0)
        } else if self.won {
            1.0
        } else {
            0.0
        }
    }
}

/// What an episode needs besides the bridge.
pub(crate) struct EpisodeSetup<'a> {
    pub(crate) instance: &'a Instance,
    pub(crate) namespace: Namespace,
    pub(crate) label: &'a str,
    pub(crate) game: &'a Game,
    pub(crate) regime: AgenticRegime,
    pub(crate) budget: usize,
    pub(crate) k: usize,
    pub(crate) policy: &'a dyn Policy,
    pub(crate) counter: &'a dyn TokenCounter,
    pub(crate) seed: u64,
    pub(crate) step_cap: u32,
    pub(crate) manage_every: u32,
    pub(crate) trace: bool,
    pub(crate) restore_seconds: f64,
}

/// A stable 64-bit hash (FNV-1a): the random stream of a game must not
/// change with the Rust version.
pub fn stable_hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The game file or task the bridge plays (generating it first if needed).
pub(crate) async fn game_path(bridge: &mut Bridge, game: &Game) -> Result<String> {
    match &game.source {
        GameSource::Make(spec) => bridge
            .make(game.env, spec)
            .await
            .map_err(|e| in_game(game, None, e)),
        GameSource::File(p) => Ok(p.to_string_lossy().into_owned()),
        GameSource::Task(t) => Ok(t.clone()),
    }
}

/// `e` with the game (and step) it happened in.
pub(crate) fn in_game(game: &Game, step: Option<u32>, e: BenchError) -> BenchError {
    let at = step.map_or(String::new(), |s| format!(" at step {s}"));
    let reason = match e {
        BenchError::Environment { reason, .. } => reason,
        other => other.to_string(),
    };
    BenchError::Environment {
        context: format!("{} game {}{at}", game.env, game.id),
        reason,
    }
}

/// The environment's verdict appended to the last observation.
fn with_verdict(state: &EnvState) -> String {
    let mut obs = state.observation.clone();
    let verdict = if state.won {
        Some("You won!")
    } else if state.lost {
        Some("You lost!")
    } else {
        None
    };
    if let Some(v) = verdict {
        if !obs.contains(v) {
            if !obs.is_empty() {
                obs.push('\n');
            }
            obs.push_str(v);
        }
    }
    obs
}

/// The text of a unit, as the history counts it.
pub(crate) fn unit_tokens(counter: &dyn TokenCounter, action: &str, observation: &str) -> usize {
    counter.count(&format!("> {action}\n{observation}"))
}

fn step_event(game: &Game, n: u32, action: &str, observation: String) -> Event {
    Event::Step(Step {
        step: n,
        action: action.to_string(),
        observation,
        source_id: format!("{}:{n}", game.id),
    })
}

/// Plays the walkthrough of `game` and returns its units (for a training
/// bank), with whether it won.
pub(crate) async fn walkthrough_units(
    bridge: &mut Bridge,
    game: &Game,
    step_cap: u32,
) -> Result<(Vec<Event>, bool)> {
    let path = game_path(bridge, game).await?;
    let start = bridge
        .reset(game.env, &path, step_cap)
        .await
        .map_err(|e| in_game(game, None, e))?;
    let walkthrough = start.walkthrough.clone().unwrap_or_default();
    let mut units = vec![step_event(game, 1, "[start]", start.observation.clone())];
    let mut won = start.won;
    for (i, command) in walkthrough.iter().enumerate() {
        let n = i as u32 + 1;
        let s = bridge
            .step(command)
            .await
            .map_err(|e| in_game(game, Some(n), e))?;
        units.push(step_event(game, n + 1, command, with_verdict(&s)));
        won = s.won;
        if s.done || s.won || s.lost {
            break;
        }
    }
    Ok((units, won))
}

/// Plays one episode (see the module docs).
pub(crate) async fn play(bridge: &mut Bridge, setup: EpisodeSetup<'_>) -> Result<EpisodeRecord> {
    let started = Instant::now();
    let EpisodeSetup {
        instance,
        namespace: ns,
        label,
        game,
        ..
    } = setup;
    let sub = &instance.sub;
    let sub_err = |e: submem_core::Error| BenchError::Substrate {
        substrate: label.to_string(),
        conversation: game.id.clone(),
        source: e,
    };
    let path = game_path(bridge, game).await?;
    let mut state = bridge
        .reset(game.env, &path, setup.step_cap)
        .await
        .map_err(|e| in_game(game, None, e))?;
    let objective = state.objective.clone();
    let opening = state.observation.clone();
    let walkthrough = state.walkthrough.clone().unwrap_or_default();
    let mut episode = EpisodeState {
        walkthrough: walkthrough.clone(),
        rng: ChaCha8Rng::seed_from_u64(stable_hash(&[&setup.seed.to_string(), &game.id])),
    };
    let counter = setup.counter;
    let mut pending = step_event(game, 1, "[start]", state.observation.clone());
    let mut history_tokens = unit_tokens(counter, "[start]", &state.observation);
    let mut best_fraction: f64 = 0.0;
    let mut steps = Vec::new();
    let (mut invalid_steps, mut unmapped, mut policy_tokens, mut policy_calls) = (0, 0, 0, 0);
    for t in 1..=setup.step_cap {
        let view = StepView {
            step: t,
            objective: &objective,
            memory: "",
            observation: &state.observation,
            admissible: &state.admissible,
        };
        let fixed = setup.policy.fixed_prompt_tokens(&view);
        let query = Query::agentic(
            ns.clone(),
            objective.clone(),
            state.observation.clone(),
            setup.budget,
        )
        .with_top_k(setup.k)
        .with_fixed_prompt_tokens(fixed);
        let t0 = Instant::now();
        let recall = sub.read(&query).await.map_err(sub_err)?;
        let read_seconds = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let decision = setup
            .policy
            .choose(
                &StepView {
                    memory: &recall.text,
                    ..view
                },
                &mut episode,
            )
            .await?;
        let policy_seconds = t0.elapsed().as_secs_f64();
        policy_tokens += decision.tokens;
        policy_calls += decision.calls;
        if decision.mapped == Some(false) {
            unmapped += 1;
        }
        let t0 = Instant::now();
        sub.write(&ns, std::slice::from_ref(&pending))
            .await
            .map_err(sub_err)?;
        if setup.manage_every > 0 && t % setup.manage_every == 0 {
            sub.manage().await.map_err(sub_err)?;
        }
        let write_seconds = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let admissible = state.admissible.len();
        state = bridge
            .step(&decision.command)
            .await
            .map_err(|e| in_game(game, Some(t), e))?;
        let env_seconds = t0.elapsed().as_secs_f64();
        if state.invalid {
            invalid_steps += 1;
        }
        let observation = with_verdict(&state);
        if state.max_score > 0.0 {
            best_fraction = best_fraction.max((state.score / state.max_score).clamp(0.0, 1.0));
        }
        steps.push(StepRecord {
            step: t,
            command: decision.command.clone(),
            reply: decision.reply,
            mapped: decision.mapped,
            invalid: state.invalid,
            observation: observation.clone(),
            score: state.score,
            admissible,
            memory_tokens: recall.tokens,
            shown: recall.source_ids().map(str::to_string).collect(),
            history_tokens,
            memory: setup.trace.then(|| recall.text.clone()),
            read_seconds,
            policy_seconds,
            write_seconds,
            env_seconds,
            env_own_seconds: state.env_seconds,
        });
        history_tokens += unit_tokens(counter, &decision.command, &observation);
        pending = step_event(game, t + 1, &decision.command, observation);
        if state.done || state.won || state.lost {
            break;
        }
    }
    // The last unit, so that the memory holds the whole episode, and the
    // manage pass that ends it.
    sub.write(&ns, std::slice::from_ref(&pending))
        .await
        .map_err(sub_err)?;
    sub.manage().await.map_err(sub_err)?;
    if state.won {
        best_fraction = 1.0;
    }
    let snap = instance.meter.snapshot();
    Ok(EpisodeRecord {
        substrate: label.to_string(),
        family: instance.family.clone(),
        env: game.env.name().to_string(),
        game: game.id.clone(),
        objective,
        opening,
        regime: setup.regime,
        budget: setup.budget,
        k: setup.k,
        policy: setup.policy.name(),
        seed: setup.seed,
        won: state.won,
        lost: state.lost,
        score: state.score,
        max_score: state.max_score,
        best_fraction,
        steps: steps.len() as u32,
        step_cap: setup.step_cap,
        invalid_steps,
        unmapped_replies: unmapped,
        walkthrough_steps: walkthrough.len(),
        history_tokens,
        policy_tokens,
        policy_calls,
        restore_seconds: setup.restore_seconds,
        wall_seconds: started.elapsed().as_secs_f64(),
        write: snap.write,
        read: snap.read,
        manage: snap.manage,
        memory_bytes: sub.footprint().memory_bytes,
        step_records: steps,
    })
}

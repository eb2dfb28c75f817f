#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The live agentic regime against the real environments (TextWorld,
//! ALFWorld-format games, ScienceWorld) through the bridge: the walkthrough
//! wins every fixture game, seeded random play repeats itself, a killed run
//! resumes, a dead bridge is an error naming the game and the step, and the
//! local model steers an episode by scoring the admissible commands.
//!
//! The environments come from `scripts/agent-envs.sh install` (the README's
//! test command runs it); without them these tests fail saying so.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use submem::registry::{Registry, SubstrateSpec};
use submem_bench::agentic::bridge::{BridgeConfig, EnvKind};
use submem_bench::agentic::episode::{AgenticRegime, EpisodeRecord};
use submem_bench::agentic::games::{games_from_specs, Game};
use submem_bench::agentic::policy::{
    Decision, EpisodeState, LlmPolicy, Policy, RandomPolicy, StepView, WalkthroughPolicy,
};
use submem_bench::agentic::{report, run_episodes, AgenticOptions, AgenticOutcome};
use submem_bench::items::read_jsonl;
use submem_bench::BenchError;
use submem_core::test_utils::test_services;

/// The submem cache, where `scripts/agent-envs.sh` installs the environments.
fn cache() -> PathBuf {
    submem_models::ModelLocator::new(&submem_models::Config::load(None).unwrap().models)
        .cache_dir()
        .unwrap()
}

/// Options writing to `out`; games are cached beside the run (a fresh
/// generation per test keeps tests independent) unless `shared_games`.
fn options(out: &Path, shared_games: bool) -> AgenticOptions {
    let mut o = AgenticOptions::new(&cache(), out.to_path_buf());
    let python = o.bridge.python.clone();
    assert!(
        python.is_file(),
        "no Python with the text environments at {}: run scripts/agent-envs.sh install",
        python.display()
    );
    if !shared_games {
        o.bridge = BridgeConfig {
            cache: out.join("env-cache"),
            ..o.bridge
        };
    }
    o.progress = false;
    o.ks = vec![1];
    o
}

fn specs(list: &str) -> Vec<SubstrateSpec> {
    SubstrateSpec::parse_list(list).unwrap()
}

async fn play(
    games: Vec<Game>,
    substrates: &str,
    policy: Arc<dyn Policy>,
    opts: AgenticOptions,
) -> Result<AgenticOutcome, BenchError> {
    run_episodes(
        games,
        specs(substrates),
        Arc::new(Registry::default()),
        test_services(None),
        policy,
        opts,
    )
    .await
}

fn transcript(r: &EpisodeRecord) -> Vec<(String, String)> {
    r.step_records
        .iter()
        .map(|s| (s.command.clone(), s.observation.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_walkthrough_wins_every_fixture_game_of_every_environment() {
    let dir = tempfile::tempdir().unwrap();
    for (env, list, cap) in [
        (
            EnvKind::TextWorld,
            "custom:seeds=1,rooms=2,objects=2,quest=1; custom:seeds=2,rooms=4,objects=6,quest=3; \
             cooking:seeds=1,recipe=1,take=1,go=1; cooking:seeds=1,recipe=2,take=2,go=6,open=1",
            50,
        ),
        (
            EnvKind::Alfworld,
            "pick:seeds=1; heat:seeds=1; cool:seeds=1; clean:seeds=1; two:seeds=1",
            50,
        ),
        (EnvKind::ScienceWorld, "find-living-thing:variations=0", 100),
    ] {
        let games = games_from_specs(env, list).unwrap();
        let n = games.len();
        let mut o = options(&dir.path().join(env.name()), true);
        o.step_cap = cap;
        let out = play(games, "nomem,m2", Arc::new(WalkthroughPolicy), o)
            .await
            .unwrap_or_else(|e| panic!("{env}: {e}"));
        assert!(out.failures.is_empty(), "{env}: {:?}", out.failures);
        assert_eq!(out.episodes.len(), 2 * n, "{env}");
        for e in &out.episodes {
            assert!(
                e.won,
                "{env} {}: the walkthrough did not win: {:?}",
                e.game,
                transcript(e)
            );
            assert_eq!(e.goal_fraction(), 1.0);
            assert!(e.walkthrough_steps > 0);
            assert!(e
                .step_records
                .last()
                .unwrap()
                .observation
                .contains("You won!"));
        }
        // m2 showed earlier steps to the policy once there were some.
        let m2 = out
            .episodes
            .iter()
            .find(|e| e.substrate == "m2" && e.steps > 2)
            .unwrap();
        assert!(m2
            .step_records
            .iter()
            .skip(1)
            .any(|s| s.memory_tokens > 0 && !s.shown.is_empty()));
        let s = report::summarize(&out.episodes, &out.banks);
        assert!(s
            .rows
            .iter()
            .all(|r| r.task_success == 1.0 && r.steps_to_goal.is_some()));
        let md = report::write_all(&dir.path().join(env.name()), &s, &[]).unwrap();
        assert!(md.contains("| m2 | within | 1024 | 1 |"), "{md}");
        assert!(dir.path().join(env.name()).join("k.svg").is_file());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_random_play_gives_the_same_transcript_twice() {
    let dir = tempfile::tempdir().unwrap();
    let games =
        games_from_specs(EnvKind::TextWorld, "cooking:seeds=3,recipe=1,take=1,go=6").unwrap();
    let mut runs = Vec::new();
    for (name, seed) in [("a", 11), ("b", 11), ("c", 12)] {
        let mut o = options(&dir.path().join(name), true);
        o.step_cap = 15;
        o.seed = seed;
        let out = play(games.clone(), "nomem", Arc::new(RandomPolicy), o)
            .await
            .unwrap();
        assert_eq!(out.episodes.len(), 1);
        runs.push(transcript(&out.episodes[0]));
    }
    assert_eq!(runs[0], runs[1]);
    assert_ne!(runs[0], runs[2], "another seed plays another game");
    assert!(runs[0].len() > 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_resumes_to_the_same_episodes() {
    let dir = tempfile::tempdir().unwrap();
    let games = games_from_specs(EnvKind::Alfworld, "pick:seeds=2-3").unwrap();
    let (full, cut) = (dir.path().join("full"), dir.path().join("cut"));
    let mut o = options(&full, true);
    o.ks = vec![1, 3];
    // Resuming does not depend on how long an episode is; ten random steps
    // keep sixteen episodes short.
    o.step_cap = 10;
    let all = play(games.clone(), "nomem,m2", Arc::new(RandomPolicy), o.clone())
        .await
        .unwrap();
    assert_eq!(all.episodes.len(), 8);

    let mut killed = AgenticOptions {
        out: cut.clone(),
        abort_after: Some(3),
        ..o.clone()
    };
    let e = play(
        games.clone(),
        "nomem,m2",
        Arc::new(RandomPolicy),
        killed.clone(),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, BenchError::Aborted(3)), "{e}");
    assert_eq!(
        read_jsonl::<EpisodeRecord>(&cut.join("episodes.jsonl"))
            .unwrap()
            .len(),
        3
    );
    killed.abort_after = None;
    let resumed = play(games, "nomem,m2", Arc::new(RandomPolicy), killed)
        .await
        .unwrap();
    assert_eq!((resumed.resumed, resumed.new_episodes), (3, 5));
    let key = |r: &EpisodeRecord| (r.substrate.clone(), r.game.clone(), r.k);
    let mut a: Vec<_> = all
        .episodes
        .iter()
        .map(|r| (key(r), transcript(r), r.won))
        .collect();
    let mut b: Vec<_> = resumed
        .episodes
        .iter()
        .map(|r| (key(r), transcript(r), r.won))
        .collect();
    a.sort_by(|x, y| x.0.cmp(&y.0));
    b.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(a, b);

    // A directory of another policy's episodes is refused, not mixed.
    let e = play(
        games_from_specs(EnvKind::Alfworld, "pick:seeds=2").unwrap(),
        "nomem",
        Arc::new(WalkthroughPolicy),
        AgenticOptions { out: cut, ..o },
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("policy random"), "{e}");
}

/// Follows the walkthrough, but kills the bridge (every process whose
/// command line names this test's own cache) at step 2.
#[derive(Debug)]
struct KillAtStepTwo(PathBuf);

#[async_trait]
impl Policy for KillAtStepTwo {
    fn name(&self) -> String {
        "walkthrough".into()
    }
    fn fixed_prompt_tokens(&self, _: &StepView<'_>) -> usize {
        0
    }
    async fn choose(
        &self,
        view: &StepView<'_>,
        ep: &mut EpisodeState,
    ) -> submem_bench::Result<Decision> {
        if view.step == 2 {
            let status = std::process::Command::new("pkill")
                .args(["-9", "-f", &self.0.to_string_lossy()])
                .status()
                .unwrap();
            assert!(status.success(), "pkill found no bridge");
        }
        WalkthroughPolicy.choose(view, ep).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_killed_mid_episode_is_an_error_naming_the_game_and_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(dir.path(), false);
    let games = games_from_specs(EnvKind::Alfworld, "heat:seeds=4").unwrap();
    let policy = Arc::new(KillAtStepTwo(o.bridge.cache.clone()));
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        play(games, "nomem", policy, o),
    )
    .await
    .expect("a dead bridge must not hang the run")
    .unwrap();
    assert!(out.episodes.is_empty());
    assert_eq!(out.failures.len(), 1, "{:?}", out.failures);
    let f = &out.failures[0];
    assert!(f.contains("alfworld game heat-s4 at step 2"), "{f}");
    assert!(f.contains("bridge process exited"), "{f}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_environments_and_bad_games_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), false);
    o.bridge.python = dir.path().join("no-python");
    let games = games_from_specs(EnvKind::TextWorld, "custom:seeds=1").unwrap();
    let e = play(games.clone(), "nomem", Arc::new(RandomPolicy), o.clone())
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("scripts/agent-envs.sh install"),
        "{e}"
    );

    // A game file that does not parse fails its episode with its path; a
    // spec with an unknown setting is refused by the generator.
    let bad = dir.path().join("broken.z8");
    std::fs::write(&bad, b"not a game").unwrap();
    let o = options(dir.path(), false);
    let game = Game {
        env: EnvKind::TextWorld,
        id: "broken".into(),
        source: submem_bench::agentic::games::GameSource::File(bad.clone()),
    };
    let out = play(vec![game], "nomem", Arc::new(RandomPolicy), o.clone())
        .await
        .unwrap();
    assert_eq!(out.failures.len(), 1);
    assert!(
        out.failures[0].contains("textworld game broken") && out.failures[0].contains("broken.z8"),
        "{:?}",
        out.failures
    );
    let games = games_from_specs(EnvKind::TextWorld, "custom:seeds=1,colour=red").unwrap();
    let e = play(games, "nomem", Arc::new(RandomPolicy), o)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no setting 'colour'"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_model_steers_an_episode_by_scoring_the_admissible_commands() {
    let dir = tempfile::tempdir().unwrap();
    let config = submem_models::Config::load(None).unwrap();
    let llm: Arc<dyn submem_core::Llm> = Arc::new(config.local_llm().unwrap());
    let services = test_services(None);
    let policy = Arc::new(LlmPolicy::new(llm, services.tokens.clone()));
    assert!(policy.scores_choices());
    let mut o = options(dir.path(), true);
    o.step_cap = 3;
    o.regimes = vec![AgenticRegime::Within];
    let games = games_from_specs(EnvKind::Alfworld, "pick:seeds=1").unwrap();
    let out = run_episodes(
        games,
        specs("nomem,m2"),
        Arc::new(Registry::default()),
        services,
        policy,
        o,
    )
    .await
    .unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    for e in &out.episodes {
        assert!(e.policy.starts_with("llm-scored:"), "{}", e.policy);
        assert_eq!(e.policy_calls, u64::from(e.steps));
        assert!(e.policy_tokens > 0);
        // Every choice is admissible: the scorer only ranks the list.
        assert_eq!(e.invalid_steps, 0);
        assert_eq!(e.unmapped_replies, 0);
    }
    let m2 = out.episodes.iter().find(|e| e.substrate == "m2").unwrap();
    if m2.steps > 1 {
        assert!(
            m2.step_records[1].memory_tokens > 0,
            "m2 showed nothing at step 2"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cross_episode_regime_restores_a_bank_of_training_walkthroughs() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), true);
    o.step_cap = 10;
    o.regimes = vec![AgenticRegime::Within, AgenticRegime::Cross];
    o.train_games = games_from_specs(EnvKind::Alfworld, "pick:seeds=21-22; heat:seeds=21").unwrap();
    let games = games_from_specs(EnvKind::Alfworld, "pick:seeds=23").unwrap();
    let out = play(games.clone(), "nomem,m2", Arc::new(RandomPolicy), o.clone())
        .await
        .unwrap();
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    assert_eq!(out.episodes.len(), 4);
    // One bank per substrate, from the three walkthroughs, kept on disk.
    assert_eq!(out.banks.len(), 2);
    let m2_bank = out.banks.iter().find(|b| b.substrate == "m2").unwrap();
    assert_eq!(m2_bank.games.len(), 3);
    assert!(m2_bank.events > 3);
    assert!(dir.path().join("banks").join("m2").is_dir());
    // Within: m2 has nothing to show at step 1; cross: it shows the bank's
    // training steps from the first step on.
    let first = |regime| {
        let e = out
            .episodes
            .iter()
            .find(|e| e.substrate == "m2" && e.regime == regime)
            .unwrap();
        e.step_records[0].clone()
    };
    assert!(first(AgenticRegime::Within).shown.is_empty());
    let cross = first(AgenticRegime::Cross);
    assert!(
        !cross.shown.is_empty()
            && cross.shown.iter().all(|s| s.starts_with("pick-s21:")
                || s.starts_with("pick-s22:")
                || s.starts_with("heat-s21:")),
        "{:?}",
        cross.shown
    );
    // The same random play under both regimes (memory does not steer it).
    let commands = |regime| {
        out.episodes
            .iter()
            .find(|e| e.substrate == "m2" && e.regime == regime)
            .unwrap()
            .step_records
            .iter()
            .map(|s| s.command.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        commands(AgenticRegime::Within),
        commands(AgenticRegime::Cross)
    );
    // A resumed run reuses the banks instead of writing them again.
    let again = play(games, "nomem,m2", Arc::new(RandomPolicy), o)
        .await
        .unwrap();
    assert_eq!((again.resumed, again.new_episodes), (4, 0));
    assert_eq!(again.banks.len(), 2);
}

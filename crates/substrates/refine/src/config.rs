//! Settings of M7 ([`StrategyConfig`]) and M8 ([`SkillConfig`]), and of the
//! episode rule both share ([`EpisodeConfig`]). Every numeric default is
//! documented on its field; the `with_*` setters and `validate` are what the
//! bench registry uses.

use serde::{Deserialize, Serialize};

use crate::RefineError;

/// How a history is cut into episodes (trajectories).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeConfig {
    /// An observation containing one of these strings is the environment's
    /// success signal: the episode ends there and is labelled a success
    /// without a judge call. Default `["You won!"]` (the TextWorld/ALFWorld
    /// ending); the shared ALFWorld ReAct file carries no such signal.
    pub success_markers: Vec<String>,
    /// Same for failure. Default `["You lost!"]`.
    pub failure_markers: Vec<String>,
    /// Most tokens of a trajectory shown to the LLM (head and tail kept, the
    /// middle cut): 1,200, so a prompt stays well inside SmolLM2's 8k context
    /// and costs about 8 s of prefill on 2 cores.
    pub prompt_trajectory_tokens: usize,
}

impl Default for EpisodeConfig {
    fn default() -> Self {
        EpisodeConfig {
            success_markers: vec!["You won!".into()],
            failure_markers: vec!["You lost!".into()],
            prompt_trajectory_tokens: 1200,
        }
    }
}

/// Settings of M7, distilled strategies, and of the `m7` plugin: every field
/// is a setting under its serde name (`m7:top_k=2,merge_threshold=0.9`; a list
/// is written with `|` between its items: `success_markers=You won!|Done`),
/// listed by `submem substrates` with the first sentence of its doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StrategyConfig {
    /// Strategies shown per read (dense top-k): 1, as in ReasoningBank. A
    /// query's own `top_k` can lower it, never raise it.
    pub top_k: usize,
    /// Most strategies kept from one distillation call: 3 (the paper's 1–3).
    pub max_strategies: usize,
    /// Longest strategy content kept from the LLM, in words: 80.
    pub content_words: usize,
    /// Most new tokens of the distillation call: 320.
    pub distill_max_tokens: usize,
    /// Most new tokens of the judge call: 8 (one word is asked for).
    pub judge_max_tokens: usize,
    /// Strategies whose embeddings have at least this cosine are merged by
    /// `manage`: 0.92 (near-paraphrases under MiniLM).
    pub merge_threshold: f32,
    /// Longest rule strategy (the no-LLM fallback), in tokens, at least 8:
    /// 256.
    #[serde(rename = "rule_tokens")]
    pub rule_content_tokens: usize,
    /// Observations that end an episode as a success (the environment's
    /// signal, no judge call): `You won!`.
    pub success_markers: Vec<String>,
    /// Observations that end an episode as a failure: `You lost!`.
    pub failure_markers: Vec<String>,
    /// Most tokens of a trajectory shown to the LLM, at least 32 (head and
    /// tail kept, the middle cut): 1,200.
    #[serde(rename = "trajectory_tokens")]
    pub prompt_trajectory_tokens: usize,
}

impl Default for StrategyConfig {
    fn default() -> Self {
        StrategyConfig {
            top_k: 1,
            max_strategies: 3,
            content_words: 80,
            distill_max_tokens: 320,
            judge_max_tokens: 8,
            merge_threshold: 0.92,
            rule_content_tokens: 256,
            success_markers: EpisodeConfig::default().success_markers,
            failure_markers: EpisodeConfig::default().failure_markers,
            prompt_trajectory_tokens: EpisodeConfig::default().prompt_trajectory_tokens,
        }
    }
}

submem_kit::setters!(StrategyConfig {
    with_top_k => top_k: usize,
    with_max_strategies => max_strategies: usize,
    with_merge_threshold => merge_threshold: f32,
    with_rule_content_tokens => rule_content_tokens: usize,
    with_prompt_trajectory_tokens => prompt_trajectory_tokens: usize,
});

impl StrategyConfig {
    /// The episode rule these settings make.
    pub fn episodes(&self) -> EpisodeConfig {
        EpisodeConfig {
            success_markers: self.success_markers.clone(),
            failure_markers: self.failure_markers.clone(),
            prompt_trajectory_tokens: self.prompt_trajectory_tokens,
        }
    }

    /// Rejects settings no run can honour.
    pub fn validate(&self) -> Result<(), RefineError> {
        if self.top_k == 0 || self.max_strategies == 0 {
            return Err(RefineError::Config(
                "top_k and max_strategies must be at least 1".into(),
            ));
        }
        if !(self.merge_threshold > 0.0 && self.merge_threshold <= 1.0) {
            return Err(RefineError::Config(format!(
                "merge_threshold must be in (0, 1], got {}",
                self.merge_threshold
            )));
        }
        if self.rule_content_tokens < 8 || self.prompt_trajectory_tokens < 32 {
            return Err(RefineError::Config(
                "rule_content_tokens must be >= 8 and prompt_trajectory_tokens >= 32".into(),
            ));
        }
        Ok(())
    }
}

/// Settings of M8, skill bundles, and of the `m8` plugin: every field is a
/// setting under its serde name (`m8:bundle_size=4`), listed by `submem
/// substrates` with the first sentence of its doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SkillConfig {
    /// Experiences per new bundle: new experiences no bundle takes are
    /// clustered with k-means into `ceil(n / bundle_size)` bundles. 8.
    pub bundle_size: usize,
    /// A new experience joins the nearest bundle when its cosine to the
    /// bundle's centroid is at least this, in [-1, 1]: 0.6.
    pub join_threshold: f32,
    /// Most bundles kept; `manage` merges or prunes above it. 16.
    pub max_bundles: usize,
    /// Over the cap, the closest pair is merged when their centroids have at
    /// least this cosine, in [-1, 1]; otherwise the least-used bundle is
    /// pruned. 0.5.
    pub merge_threshold: f32,
    /// A bundle's skill is rewritten at write time once it has grown by this
    /// share since it was written (0.5 = half as many experiences again).
    pub rewrite_growth: f32,
    /// Experiences (nearest the centroid) shown to the LLM per skill: 12.
    pub prompt_experiences: usize,
    /// Most characters of one experience in the skill prompt: 300.
    pub experience_chars: usize,
    /// Most new tokens of the skill-writing call: 256.
    pub skill_max_tokens: usize,
    /// Most steps and pitfalls kept per skill: 6.
    pub max_items: usize,
    /// Longest rule skill (the no-LLM fallback), in tokens, at least 8: 256.
    #[serde(rename = "rule_tokens")]
    pub rule_skill_tokens: usize,
}

impl Default for SkillConfig {
    fn default() -> Self {
        SkillConfig {
            bundle_size: 8,
            join_threshold: 0.6,
            max_bundles: 16,
            merge_threshold: 0.5,
            rewrite_growth: 0.5,
            prompt_experiences: 12,
            experience_chars: 300,
            skill_max_tokens: 256,
            max_items: 6,
            rule_skill_tokens: 256,
        }
    }
}

submem_kit::setters!(SkillConfig {
    with_bundle_size => bundle_size: usize,
    with_join_threshold => join_threshold: f32,
    with_max_bundles => max_bundles: usize,
    with_merge_threshold => merge_threshold: f32,
    with_rule_skill_tokens => rule_skill_tokens: usize,
});

impl SkillConfig {
    /// Rejects settings no run can honour.
    pub fn validate(&self) -> Result<(), RefineError> {
        if self.bundle_size == 0 || self.max_bundles == 0 || self.prompt_experiences == 0 {
            return Err(RefineError::Config(
                "bundle_size, max_bundles and prompt_experiences must be at least 1".into(),
            ));
        }
        for (name, v) in [
            ("join_threshold", self.join_threshold),
            ("merge_threshold", self.merge_threshold),
        ] {
            if !(-1.0..=1.0).contains(&v) {
                return Err(RefineError::Config(format!(
                    "{name} must be in [-1, 1], got {v}"
                )));
            }
        }
        if !(self.rewrite_growth >= 0.0 && self.rewrite_growth.is_finite()) {
            return Err(RefineError::Config(
                "rewrite_growth must be finite and >= 0".into(),
            ));
        }
        if self.rule_skill_tokens < 8 {
            return Err(RefineError::Config("rule_skill_tokens must be >= 8".into()));
        }
        Ok(())
    }
}

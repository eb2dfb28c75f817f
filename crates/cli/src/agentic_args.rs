//! The options of `submem bench --dataset textworld|alfworld|scienceworld`
//! (the live agentic regime), apart from the run itself
//! ([`crate::agentic_cmd`]) so that `bench`'s arguments can hold them
//! without the two commands naming each other.

use clap::{Args, ValueEnum};

/// Who picks the agent's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyChoice {
    /// The reader LLM (`--reader`): the local model chooses by likelihood among the admissible
    /// commands; an OpenAI-compatible server is asked for one and its reply mapped onto them.
    Llm,
    /// The game's own walkthrough: wins every game (the upper bound; checks the environment).
    Walkthrough,
    /// A seeded uniform choice among the admissible commands (the lower bound).
    Random,
}

/// Which regimes an agentic run plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RegimeChoice {
    /// Memory starts empty and accumulates the episode's own steps.
    Within,
    /// Memory starts from a bank of the training games' walkthroughs (--train-games).
    Cross,
    /// Both.
    Both,
}

/// The options of a live agentic run (`--dataset textworld|alfworld|scienceworld`).
#[derive(Debug, Args)]
pub struct AgenticArgs {
    /// Games to play: `kind:setting=value,…` specs separated by `;`, e.g.
    /// `cooking:seeds=1-5,recipe=1,take=1,go=1` (see docs/AGENTIC.md). Default: a ladder from
    /// easy to long quests. Ignored with --data DIR.
    #[arg(long, value_name = "SPECS", help_heading = "Live environments")]
    pub games: Option<String>,
    /// Training games for the cross-episode regime (their walkthroughs make the bank).
    #[arg(long, value_name = "SPECS", help_heading = "Live environments")]
    pub train_games: Option<String>,
    /// Within-episode accumulation, cross-episode recovery, or both.
    #[arg(
        long,
        value_enum,
        default_value = "within",
        help_heading = "Live environments"
    )]
    pub regime: RegimeChoice,
    /// Who picks commands.
    #[arg(
        long,
        value_enum,
        default_value = "llm",
        help_heading = "Live environments"
    )]
    pub policy: PolicyChoice,
    /// Most steps an episode takes (ALFWorld's evaluation uses 50).
    #[arg(long, default_value_t = 50, help_heading = "Live environments")]
    pub steps: u32,
    /// Manage memory every N steps (0: only at the end of an episode).
    #[arg(long, default_value_t = 10, help_heading = "Live environments")]
    pub manage_every: u32,
    /// Seconds to wait for one step of the environment before stopping its bridge.
    #[arg(long, default_value_t = 30.0, help_heading = "Live environments")]
    pub step_timeout: f64,
    /// Seconds to wait for the bridge to start, generate a game or reset one.
    #[arg(long, default_value_t = 180.0, help_heading = "Live environments")]
    pub make_timeout: f64,
}

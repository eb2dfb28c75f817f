//! The judge checks' probes: answers whose verdict is known in advance,
//! built by rules from the dataset alone, so the same run builds the same
//! probes every time.
//!
//! **Which questions.** A question can be probed when it has a gold answer
//! and is neither an abstention question (its "gold" explains why there is
//! no answer, and its rubric asks whether the model declined) nor LoCoMo's
//! adversarial category 5 (no gold answer). Of those the run asks, the
//! sample is the `n` with the smallest seeded hash of (seed, conversation,
//! question id): the first 8 bytes of the SHA-256 of
//! `"{seed}\0{conversation}\0{question id}"`, read big-endian; ties (none in
//! practice) keep dataset order. A larger `n` extends a smaller one's sample.
//!
//! **Three probes per question** ([`ProbeKind`]):
//! - *gold*: the gold answer itself, which a sound judge accepts;
//! - *specific wrong*: the gold answer of another question the run asks of
//!   the same category and kind: the first after it in dataset order,
//!   wrapping around, whose normalised gold answer neither equals this one's
//!   nor contains it nor is contained in it (SubEM both ways). None when no
//!   question qualifies;
//! - *vague topical*: a sentence that names the question's topic and commits
//!   to no answer. The topic is the question's content words in order (a
//!   possessive `'s` dropped; question words, auxiliaries, pronouns,
//!   articles, prepositions and a few light verbs left out; words of the
//!   gold answer left out too, so the probe cannot contain it), adjacent
//!   words kept together (punctuation or a possessive ends a run) and runs
//!   joined by `, `, at most
//!   [`MAX_TOPIC_WORDS`] words. The frame follows the question word:
//!   `when`/`what time`/`what year`/`how long` → "At some point, in
//!   connection with {topic}."; `where` → "Somewhere connected with
//!   {topic}."; `who`/`whom`/`whose` → "Someone connected with {topic}.";
//!   `how many`/`how much` → "A certain amount, in connection with
//!   {topic}."; `why` → "For reasons connected with {topic}."; any other →
//!   "Something to do with {topic}.". None when no content word is left,
//!   or the sentence still contains the gold answer.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::dataset::{Question, QuestionKind};
use crate::metrics::{normalize_answer, sub_em};

/// Most content words a vague probe names.
pub const MAX_TOPIC_WORDS: usize = 6;

/// Which answer a probe offers the judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// The gold answer: should be accepted.
    Gold,
    /// Another question's gold answer of the same category and kind: should
    /// be rejected.
    SpecificWrong,
    /// A topical sentence that answers nothing: should be rejected.
    VagueTopical,
}

impl ProbeKind {
    /// Every kind, in report order.
    pub const ALL: [ProbeKind; 3] = [
        ProbeKind::Gold,
        ProbeKind::SpecificWrong,
        ProbeKind::VagueTopical,
    ];

    /// The verdict a sound judge gives.
    pub fn expected(self) -> bool {
        self == ProbeKind::Gold
    }
}

/// One answer offered to the judge for one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// The question's conversation.
    pub conversation: String,
    /// The question's id.
    pub question_id: String,
    /// Which probe.
    pub kind: ProbeKind,
    /// The answer offered.
    pub answer: String,
    /// For a specific wrong answer, the question it is the gold answer of
    /// (`conversation/question id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// Whether the checks may probe `q` (see the module docs).
pub fn probeable(q: &Question) -> bool {
    q.answer
        .as_deref()
        .is_some_and(|a| !normalize_answer(a).is_empty())
        && !matches!(q.kind, QuestionKind::Abstention | QuestionKind::Adversarial)
}

/// The seeded sort key of a question.
fn sample_key(seed: u64, conversation: &str, question: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(format!("{seed}\0{conversation}\0{question}").as_bytes());
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b)
}

/// The probes of the `n` sampled questions among `asked` (conversation id
/// and question, in dataset order), sample by sample: each question's gold,
/// specific wrong and vague topical probes, those that can be built.
pub fn build(asked: &[(&str, &Question)], n: usize, seed: u64) -> Vec<Probe> {
    let pool: Vec<(&str, &Question)> = asked
        .iter()
        .copied()
        .filter(|(_, q)| probeable(q))
        .collect();
    let mut order: Vec<(u64, usize)> = pool
        .iter()
        .enumerate()
        .map(|(i, (c, q))| (sample_key(seed, c, &q.id), i))
        .collect();
    order.sort_unstable();
    let mut probes = Vec::new();
    for &(_, i) in order.iter().take(n) {
        let (conv, q) = pool[i];
        let Some(gold) = q.answer.as_deref() else {
            continue;
        };
        let probe = |kind, answer: String, from| Probe {
            conversation: conv.to_string(),
            question_id: q.id.clone(),
            kind,
            answer,
            from,
        };
        probes.push(probe(ProbeKind::Gold, gold.to_string(), None));
        if let Some((c, other)) = specific_wrong(&pool, i) {
            if let Some(a) = &other.answer {
                probes.push(probe(
                    ProbeKind::SpecificWrong,
                    a.clone(),
                    Some(format!("{c}/{}", other.id)),
                ));
            }
        }
        if let Some(v) = vague_topical(&q.text, gold) {
            probes.push(probe(ProbeKind::VagueTopical, v, None));
        }
    }
    probes
}

/// The question whose gold answer is `pool[i]`'s specific wrong answer.
fn specific_wrong<'a>(
    pool: &[(&'a str, &'a Question)],
    i: usize,
) -> Option<(&'a str, &'a Question)> {
    let (_, q) = pool[i];
    let gold = q.answer.as_deref()?;
    let g = normalize_answer(gold);
    (1..pool.len())
        .map(|step| pool[(i + step) % pool.len()])
        .find(|(_, o)| {
            o.category == q.category
                && o.kind == q.kind
                && o.answer.as_deref().is_some_and(|a| {
                    let n = normalize_answer(a);
                    !n.is_empty() && n != g && sub_em(a, gold) == 0.0 && sub_em(gold, a) == 0.0
                })
        })
}

/// Words a topic leaves out: question words, auxiliaries, pronouns,
/// articles, prepositions, conjunctions and light verbs.
const NOT_TOPIC: &[&str] = &[
    "what",
    "when",
    "where",
    "who",
    "whom",
    "whose",
    "which",
    "why",
    "how",
    "do",
    "does",
    "did",
    "done",
    "doing",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "am",
    "has",
    "have",
    "had",
    "having",
    "will",
    "would",
    "can",
    "could",
    "should",
    "shall",
    "may",
    "might",
    "must",
    "a",
    "an",
    "the",
    "of",
    "to",
    "in",
    "on",
    "at",
    "for",
    "with",
    "about",
    "from",
    "by",
    "as",
    "into",
    "onto",
    "after",
    "before",
    "during",
    "since",
    "than",
    "then",
    "and",
    "or",
    "but",
    "if",
    "so",
    "that",
    "this",
    "these",
    "those",
    "there",
    "here",
    "it",
    "its",
    "he",
    "she",
    "they",
    "them",
    "his",
    "her",
    "hers",
    "their",
    "theirs",
    "him",
    "i",
    "me",
    "my",
    "mine",
    "you",
    "your",
    "we",
    "our",
    "us",
    "not",
    "no",
    "yes",
    "some",
    "any",
    "many",
    "much",
    "long",
    "often",
    "kind",
    "type",
    "sort",
    "time",
    "year",
    "date",
    "day",
    "get",
    "got",
    "go",
    "went",
    "gone",
    "make",
    "made",
    "take",
    "took",
    "say",
    "said",
    "tell",
    "told",
    "talk",
    "talked",
    "think",
    "thought",
    "mention",
    "mentioned",
    "like",
    "likes",
    "liked",
    "also",
    "ever",
    "still",
    "just",
    "now",
    "both",
    "each",
    "all",
    "own",
    "other",
    "recently",
    "currently",
    "first",
    "last",
    "most",
];

/// The vague topical answer to `question` (see the module docs), `None`
/// when the question leaves no topic word or the sentence would contain
/// `gold`.
pub fn vague_topical(question: &str, gold: &str) -> Option<String> {
    let gold_words: Vec<String> = normalize_answer(gold)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let mut runs: Vec<Vec<String>> = Vec::new();
    let mut kept = 0usize;
    let mut open = false;
    for raw in question.split_whitespace() {
        let bare = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let word = bare.trim_end_matches("'s").trim_end_matches("’s");
        let lower = word.to_lowercase();
        let topical = !word.is_empty()
            && !NOT_TOPIC.contains(&lower.as_str())
            && !gold_words.contains(&normalize_answer(word));
        if topical && kept < MAX_TOPIC_WORDS {
            if !open {
                runs.push(Vec::new());
            }
            if let Some(run) = runs.last_mut() {
                run.push(word.to_string());
            }
            kept += 1;
        }
        // A word ending in punctuation or a possessive closes its run, as a
        // left-out word does.
        open = topical && bare.len() == raw.len() && word.len() == bare.len();
    }
    if runs.is_empty() {
        return None;
    }
    let topic = runs
        .iter()
        .map(|r| r.join(" "))
        .collect::<Vec<_>>()
        .join(", ");
    let q = normalize_answer(question);
    let starts = |p: &str| q == p || q.starts_with(&format!("{p} "));
    let sentence =
        if starts("when") || starts("what time") || starts("what year") || starts("how long") {
            format!("At some point, in connection with {topic}.")
        } else if starts("where") {
            format!("Somewhere connected with {topic}.")
        } else if starts("who") || starts("whom") || starts("whose") {
            format!("Someone connected with {topic}.")
        } else if starts("how many") || starts("how much") {
            format!("A certain amount, in connection with {topic}.")
        } else if starts("why") {
            format!("For reasons connected with {topic}.")
        } else {
            format!("Something to do with {topic}.")
        };
    (sub_em(&sentence, gold) == 0.0).then_some(sentence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::Regime;

    fn q(
        id: &str,
        text: &str,
        answer: Option<&str>,
        category: &str,
        kind: QuestionKind,
    ) -> Question {
        Question {
            id: id.into(),
            text: text.into(),
            answer: answer.map(str::to_string),
            evidence: vec![],
            category: category.into(),
            kind,
            regime: Regime::Conversational,
            newest: None,
            date: None,
        }
    }

    #[test]
    fn vague_answers_name_the_topic_and_commit_to_nothing() {
        assert_eq!(
            vague_topical(
                "When did Caroline go to the LGBTQ support group?",
                "7 May 2023"
            )
            .as_deref(),
            Some("At some point, in connection with Caroline, LGBTQ support group.")
        );
        assert_eq!(
            vague_topical("What is Melanie's favourite painting subject?", "sunsets").as_deref(),
            Some("Something to do with Melanie, favourite painting subject.")
        );
        assert_eq!(
            vague_topical("Where did Ana buy her red Fiat?", "Turin").as_deref(),
            Some("Somewhere connected with Ana buy, red Fiat.")
        );
        assert_eq!(
            vague_topical("How many children does Ben have?", "3").as_deref(),
            Some("A certain amount, in connection with children, Ben.")
        );
        // Words of the gold answer are left out, so the probe cannot hold it.
        assert_eq!(
            vague_topical("Which city did Ana move to, Turin or Rome?", "Rome").as_deref(),
            Some("Something to do with city, Ana move, Turin.")
        );
        assert_eq!(vague_topical("What did they do?", "x"), None);
    }

    #[test]
    fn specific_wrong_answers_come_from_the_same_category_and_kind() {
        let qs = [
            q(
                "q1",
                "When did A run?",
                Some("7 May 2023"),
                "2:temporal",
                QuestionKind::Temporal,
            ),
            q(
                "q2",
                "Who is B?",
                Some("a friend"),
                "1:single",
                QuestionKind::Standard,
            ),
            q(
                "q3",
                "When did C swim?",
                Some("7 May, 2023"),
                "2:temporal",
                QuestionKind::Temporal,
            ),
            q(
                "q4",
                "When did D sing?",
                Some("2022"),
                "2:temporal",
                QuestionKind::Temporal,
            ),
            q(
                "q5",
                "What did E decline?",
                Some("x"),
                "5:adversarial",
                QuestionKind::Abstention,
            ),
        ];
        let asked: Vec<(&str, &Question)> = qs.iter().map(|x| ("c1", x)).collect();
        let pool: Vec<(&str, &Question)> = asked
            .iter()
            .copied()
            .filter(|(_, x)| probeable(x))
            .collect();
        assert_eq!(pool.len(), 4, "the abstention question is not probed");
        // q1's next temporal question, q3, has the same normalised answer: q4.
        assert_eq!(specific_wrong(&pool, 0).unwrap().1.id, "q4");
        assert_eq!(specific_wrong(&pool, 3).unwrap().1.id, "q1", "wraps around");
        assert!(
            specific_wrong(&pool, 1).is_none(),
            "no other question of q2's category"
        );
    }

    #[test]
    fn the_sample_is_seeded_and_grows_by_extension() {
        let qs: Vec<Question> = (0..30)
            .map(|i| {
                q(
                    &format!("q{i}"),
                    &format!("What colour is box {i}?"),
                    Some(&format!("colour {i}")),
                    "c",
                    QuestionKind::Standard,
                )
            })
            .collect();
        let asked: Vec<(&str, &Question)> = qs.iter().map(|x| ("c1", x)).collect();
        let ids = |n, seed| -> Vec<String> {
            build(&asked, n, seed)
                .into_iter()
                .filter(|p| p.kind == ProbeKind::Gold)
                .map(|p| p.question_id)
                .collect()
        };
        assert_eq!(ids(5, 7), ids(5, 7));
        assert_ne!(ids(5, 7), ids(5, 8));
        assert_eq!(ids(10, 7)[..5], ids(5, 7)[..]);
        assert_eq!(ids(100, 7).len(), 30);
        assert!(build(&asked, 0, 7).is_empty());
        let all = build(&asked, 1, 7);
        assert_eq!(
            all.iter().map(|p| p.kind).collect::<Vec<_>>(),
            ProbeKind::ALL.to_vec()
        );
        assert!(ProbeKind::Gold.expected() && !ProbeKind::VagueTopical.expected());
    }
}

//! An item's answer metrics under the corrected key: measured beside the
//! original ones for every item whose question the key changes, and kept
//! in the item's `corrected` field.

use crate::answer_key::Change;
use crate::dataset::{DatasetKind, Question, QuestionKind};
use crate::items::{Corrected, ItemRecord};
use crate::metrics::{answer_recall, bleu1, exact_match, sub_em, token_f1};
use crate::options::Judge;
use crate::prompt::JudgeTemplate;
use crate::Result;

/// Tokens every judge call on `item` used: against the dataset's gold
/// answer and, for a question an answer key changes, the corrected one.
pub fn judge_tokens(item: &ItemRecord) -> u64 {
    let again = item.corrected.as_ref().and_then(|c| c.judge_tokens);
    item.judge_tokens.unwrap_or(0) + again.unwrap_or(0)
}

/// What a read measures under `change`: the corrected gold answer and, when
/// the memory `shown` is measured for answer recall (a substrate that shows
/// history, a question of a kind with a findable answer), its answer recall.
pub(crate) fn on_read(change: &Change, kind: QuestionKind, shown: Option<&str>) -> Corrected {
    let answer_recall = match (&change.corrected, shown, kind) {
        (
            Some(gold),
            Some(text),
            QuestionKind::Standard | QuestionKind::Temporal | QuestionKind::KnowledgeUpdate,
        ) => answer_recall(text, gold),
        _ => None,
    };
    Corrected {
        gold: change.corrected.clone(),
        answer_recall,
        ..Corrected::default()
    }
}

/// Scores `answer` against the corrected gold answer and has every judge
/// grade it again against it (nothing when the key excludes the question).
pub(crate) async fn on_answer(
    c: &mut Corrected,
    judges: &[Judge],
    template: &JudgeTemplate,
    dataset: DatasetKind,
    q: &Question,
    answer: &str,
) -> Result<()> {
    let Some(gold) = c.gold.clone() else {
        return Ok(());
    };
    if q.kind != QuestionKind::Abstention {
        c.em = Some(exact_match(answer, &gold));
        c.f1 = Some(token_f1(answer, &gold));
        c.bleu1 = Some(bleu1(answer, &gold));
        c.sub_em = Some(sub_em(answer, &gold));
    }
    let verdicts = crate::judges::judge_all(judges, template, dataset, q, &gold, answer).await?;
    if let Some((_, first)) = verdicts.first() {
        c.judge = first.correct;
        c.judge_reply = Some(first.reply.clone());
        c.judge_tokens = Some(verdicts.iter().map(|(_, v)| v.tokens).sum());
    }
    if verdicts.len() > 1 {
        c.judges = verdicts
            .into_iter()
            .map(|(name, v)| (name, v.into()))
            .collect();
    }
    Ok(())
}

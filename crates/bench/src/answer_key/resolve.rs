//! Checking a key's entries against the dataset: each must name one
//! question, once, that has a gold answer, and agree with what the dataset
//! says of it (see the module docs of [`super`]).

use std::collections::{BTreeMap, HashMap};

use super::{
    problems_error, squeeze, Action, AnswerKey, Change, Entry, KeyFormat, KeyId, Parsed, Target,
};
use crate::dataset::{Conversation, Dataset, DatasetKind, Question, QuestionKind};
use crate::Result;

impl AnswerKey {
    /// `parsed`, read as `id`, checked against `dataset`: every entry must
    /// name one question, once, and match what the dataset says of it.
    pub fn resolve(id: KeyId, parsed: Parsed, dataset: &Dataset) -> Result<Self> {
        let mut problems = Vec::new();
        if parsed.format == KeyFormat::LocomoAudit && dataset.kind != DatasetKind::Locomo {
            problems.push(format!(
                "the LoCoMo audit's format names LoCoMo questions; the dataset is {}",
                dataset.name
            ));
        }
        if let Some(d) = parsed.dataset.as_deref().filter(|d| *d != dataset.name) {
            problems.push(format!(
                "the key is for the dataset {d:?}; the run's is {:?}",
                dataset.name
            ));
        }
        let mut seen: HashMap<(String, String), usize> = HashMap::new();
        let mut set_aside = BTreeMap::new();
        let mut changes = Vec::new();
        if problems.is_empty() {
            for e in &parsed.list {
                let label = format!("entry {} ({})", e.number, e.id);
                let (conv, q) = match find(dataset, &e.target) {
                    Ok(found) => found,
                    Err(why) => {
                        problems.push(format!("{label}: {why}"));
                        continue;
                    }
                };
                if let Some(first) = seen.insert((conv.id.clone(), q.id.clone()), e.number) {
                    problems.push(format!(
                        "{label}: {}/{} is corrected twice (entry {first} names it too)",
                        conv.id, q.id
                    ));
                    continue;
                }
                match check(e, q) {
                    Ok(Some(change)) => changes.push(Change {
                        conversation: conv.id.clone(),
                        ..change
                    }),
                    Ok(None) => {
                        if let Action::SetAside(why) = &e.action {
                            *set_aside.entry(why.clone()).or_insert(0) += 1;
                        }
                    }
                    Err(why) => problems.push(format!("{label}: {why}")),
                }
            }
        }
        if !problems.is_empty() {
            let unasked = problems
                .iter()
                .any(|p| p.contains("no conversation of the dataset"));
            let hint = (parsed.format == KeyFormat::LocomoAudit && unasked).then_some(
                "the audit numbers the samples and questions of locomo10.json: a file of some of \
its samples takes the audit's entries for those samples, its audit/errors_conv_N.json for sample N",
            );
            return Err(problems_error(&id.name, &problems, hint));
        }
        Ok(AnswerKey {
            id,
            format: parsed.format,
            dataset: dataset.name.clone(),
            description: parsed.description,
            entries: parsed.entries,
            set_aside,
            changes,
        })
    }
}

/// The conversation and question `target` names in `dataset`, or why none.
fn find<'a>(
    dataset: &'a Dataset,
    target: &Target,
) -> std::result::Result<(&'a Conversation, &'a Question), String> {
    match target {
        Target::Indexed {
            sample,
            qa,
            question,
        } => {
            let qid = format!("q{qa}");
            let asks = |c: &'a Conversation| {
                c.questions
                    .iter()
                    .find(|q| q.id == qid && squeeze(&q.text) == squeeze(question))
                    .map(|q| (c, q))
            };
            // Sample N of locomo10.json, where the file holds it; else the
            // one conversation asking that question (a file of some samples).
            if let Some(found) = dataset.conversations.get(*sample).and_then(asks) {
                return Ok(found);
            }
            let found: Vec<_> = dataset.conversations.iter().filter_map(asks).collect();
            match found.as_slice() {
                [one] => Ok(*one),
                [] => Err(format!(
                    "no conversation of the dataset ({} of them) asks question {qid} {question:?}",
                    dataset.conversations.len()
                )),
                many => Err(format!(
                    "{} conversations ask question {qid} {question:?}",
                    many.len()
                )),
            }
        }
        Target::Named {
            conversation,
            question_id,
            question,
        } => {
            let Some(conv) = dataset.conversations.iter().find(|c| &c.id == conversation) else {
                let known: Vec<&str> = dataset
                    .conversations
                    .iter()
                    .take(5)
                    .map(|c| c.id.as_str())
                    .collect();
                return Err(format!(
                    "unknown conversation {conversation:?} (the dataset's: {}{})",
                    known.join(", "),
                    if dataset.conversations.len() > known.len() {
                        ", …"
                    } else {
                        ""
                    }
                ));
            };
            let by_text: Vec<&Question> = question
                .iter()
                .flat_map(|t| {
                    conv.questions
                        .iter()
                        .filter(move |q| squeeze(&q.text) == squeeze(t))
                })
                .collect();
            let q = match (question_id, question) {
                (Some(id), _) => conv.questions.iter().find(|q| &q.id == id).ok_or_else(|| {
                    format!(
                        "unknown question id {id:?} in {conversation} (its ids run q0 to q{})",
                        conv.questions.len().saturating_sub(1)
                    )
                })?,
                (None, Some(text)) => match by_text.as_slice() {
                    [one] => *one,
                    [] => return Err(format!("{conversation} asks no question {text:?}")),
                    _ => {
                        return Err(format!(
                            "{conversation} asks {text:?} {} times: name it by question_id",
                            by_text.len()
                        ))
                    }
                },
                (None, None) => return Err("names no question".into()),
            };
            if let Some(text) = question
                .as_deref()
                .filter(|t| squeeze(t) != squeeze(&q.text))
            {
                return Err(format!(
                    "{conversation}/{} asks {:?}, not {text:?}",
                    q.id, q.text
                ));
            }
            Ok((conv, q))
        }
    }
}

/// What entry `e` changes of question `q` (`None`: nothing, set aside), or
/// why it cannot apply. The conversation is left for the caller to fill.
fn check(e: &Entry, q: &Question) -> std::result::Result<Option<Change>, String> {
    let Some(gold) = q
        .answer
        .as_deref()
        .filter(|_| q.kind != QuestionKind::Adversarial)
    else {
        return Err(format!(
            "question {} ({}) has no gold answer to correct (it is never answered)",
            q.id, q.category
        ));
    };
    if let Some(said) = e.gold.as_deref().filter(|g| squeeze(g) != squeeze(gold)) {
        return Err(format!(
            "the key's original answer {said:?} is not the dataset's {gold:?} (a key for another \
version of the data?)"
        ));
    }
    if let Some(n) = e.category {
        let ours = q
            .category
            .split(':')
            .next()
            .and_then(|c| c.parse::<i64>().ok());
        if ours != Some(n) {
            return Err(format!(
                "the key says category {n}, the dataset says {}",
                q.category
            ));
        }
    }
    let corrected = match &e.action {
        Action::SetAside(_) => return Ok(None),
        Action::Exclude => None,
        Action::Replace(new) if squeeze(new) == squeeze(gold) => {
            return Err(format!(
                "the corrected answer {new:?} is the gold answer already"
            ))
        }
        Action::Replace(new) => Some(new.clone()),
    };
    Ok(Some(Change {
        entry: e.number,
        id: e.id.clone(),
        conversation: String::new(),
        question_id: q.id.clone(),
        question: q.text.clone(),
        category: q.category.clone(),
        kind: q.kind,
        gold: gold.to_string(),
        corrected,
        reason: e.reason.clone(),
    }))
}

//! What one item measures: the read (Recall@k, evidence coverage and
//! fates, answer recall, resolutions, the read's own time and LLM calls) and
//! the answer (the shared reader's or the recall's own, scored and judged),
//! each also under the run's answer key for a question the key changes.
//! The runner calls [`read_item`] then [`answer_item`] for each pending
//! (question, budget, k) of a task whose memory is ready.

use std::sync::atomic::Ordering;
use std::time::Instant;

use submem_core::{Diagnostics, Query, Regime, Resolution, Substrate};

use crate::context::Ctx;
use crate::dataset::{Conversation, QuestionKind};
use crate::instance::Instance;
use crate::instance::Prepared;
use crate::items::{ItemKey, ItemRecord, ResolutionCounts, ShownMemory};
use crate::metrics::retrieval::CoverageCounts;
use crate::metrics::EvidenceFates;
use crate::metrics::{
    answer_recall, bleu1, evidence_coverage, evidence_fates, exact_match, recall_at_k, sub_em,
    token_f1,
};
use crate::reader;
use crate::rescore as score;
use crate::{BenchError, Result};

/// Reads one item and measures what the read showed: Recall@k, evidence
/// coverage and fates, resolutions, read time and the read's own LLM calls.
pub(crate) async fn read_item(
    ctx: &Ctx,
    memory: &Prepared,
    conv: &Conversation,
    q: &crate::Question,
    key: ItemKey,
) -> Result<(submem_core::Recall, ItemRecord)> {
    let Instance {
        sub,
        counting,
        tokens: counter,
        ..
    } = &memory.instance;
    let ns = &memory.namespace;
    let sub_err = |e| memory.error(&conv.id, e);
    let p = reader::fixed_prompt_tokens(q, counter.as_ref(), &ctx.opts.reader);
    let query = match q.regime {
        Regime::Conversational => Query::question(ns.clone(), q.text.clone(), key.budget),
        Regime::Agentic => Query::agentic(
            ns.clone(),
            q.text.clone(),
            q.newest.clone().unwrap_or_default(),
            key.budget,
        ),
    }
    .with_top_k(key.k)
    .with_fixed_prompt_tokens(p);
    let (calls0, tokens0) = counting.as_ref().map_or((0, 0), |c| {
        (
            c.calls.load(Ordering::Relaxed),
            c.tokens.load(Ordering::Relaxed),
        )
    });
    let diagnostics0 = sub.diagnostics();
    let t = Instant::now();
    let recall = sub.read(&query).await.map_err(sub_err)?;
    let read_seconds = t.elapsed().as_secs_f64();
    let read_diagnostics = moved(&diagnostics0, sub.diagnostics());
    let (calls1, tokens1) = counting.as_ref().map_or((0, 0), |c| {
        (
            c.calls.load(Ordering::Relaxed),
            c.tokens.load(Ordering::Relaxed),
        )
    });

    let mut resolutions = ResolutionCounts::default();
    for s in &recall.sources {
        match s.resolution {
            Resolution::Record => resolutions.record += 1,
            Resolution::Excerpt => resolutions.excerpt += 1,
            Resolution::Raw => resolutions.raw += 1,
        }
    }
    // A substrate that answers through its own reader and shows no
    // history (M9's adapted model) retrieves nothing: Recall@k and
    // coverage are n/a, not 0. M11 also brings a reader (its prefilled
    // episode) but shows the episode's turns, so it is measured.
    let retrieves = recall.reader.is_none() || !recall.sources.is_empty();
    let coverage = if retrieves {
        evidence_coverage(
            q.evidence
                .iter()
                .filter_map(|e| conv.evidence_text.get(e).map(String::as_str)),
            &recall.text,
        )
    } else {
        CoverageCounts::default()
    };
    let trace = if ctx.opts.trace && retrieves && !q.evidence.is_empty() {
        sub.trace(&query, &q.evidence).await.map_err(sub_err)?
    } else {
        None
    };
    let fates = if retrieves {
        evidence_fates(
            q.evidence
                .iter()
                .filter_map(|e| conv.evidence_text.get(e).map(|t| (e.as_str(), t.as_str()))),
            &recall,
            trace.as_ref(),
        )
    } else {
        EvidenceFates::default()
    };
    let verbatim = recall_at_k(
        &q.evidence,
        recall
            .sources
            .iter()
            .filter(|s| s.resolution != Resolution::Record)
            .map(|s| s.source_id.as_str()),
    )
    .filter(|_| retrieves);
    // A recall that names more events through LLM-written records alone than
    // the k it was asked for (FlexA-Mem's timeline) lists its
    // memory rather than ranking it: crediting every event a record covers
    // would make Recall@k 1 by construction, so it counts the events shown
    // verbatim instead.
    let listed_by_records = recall
        .sources
        .iter()
        .filter(|s| s.resolution == Resolution::Record)
        .count()
        > key.k;
    let answer_recall = match (&q.answer, q.kind) {
        (
            Some(gold),
            QuestionKind::Standard | QuestionKind::Temporal | QuestionKind::KnowledgeUpdate,
        ) if retrieves => answer_recall(&recall.text, gold),
        _ => None,
    };
    let corrected = ctx
        .opts
        .answer_key
        .as_deref()
        .and_then(|k| k.change(&conv.id, &q.id))
        .map(|c| score::on_read(c, q.kind, retrieves.then_some(recall.text.as_str())));
    let item = ItemRecord {
        recall_at_k: if listed_by_records {
            verbatim
        } else {
            recall_at_k(&q.evidence, recall.source_ids()).filter(|_| retrieves)
        },
        recall_verbatim: verbatim,
        answer_recall,
        gold_evidence: q.evidence.len(),
        coverage,
        resolutions,
        fates,
        retrieved_tokens: recall.tokens,
        read_seconds,
        read_llm_tokens: tokens1 - tokens0,
        read_llm_calls: calls1 - calls0,
        read_diagnostics,
        corrected,
        gold: q.answer.clone(),
        question: q.text.clone(),
        shown: ctx.opts.trace.then(|| ShownMemory {
            question: q.text.clone(),
            evidence: q.evidence.clone(),
            evidence_text: q
                .evidence
                .iter()
                .filter_map(|e| conv.evidence_text.get(e).cloned())
                .collect(),
            text: recall.text.clone(),
            sources: recall
                .sources
                .iter()
                .map(|s| (s.source_id.clone(), s.resolution))
                .collect(),
        }),
        ..ItemRecord::unmeasured(key, q.category.clone(), q.kind)
    };
    Ok((recall, item))
}

/// Has the shared reader (or the recall's own) answer the item when it is
/// in the reader's sample, then scores and judges the answer. A request the
/// reader refuses (a prompt over its context) is recorded on the item.
pub(crate) async fn answer_item(
    ctx: &Ctx,
    conv: &Conversation,
    q: &crate::Question,
    recall: &submem_core::Recall,
    mut item: ItemRecord,
) -> Result<ItemRecord> {
    let in_sample = ctx
        .sample
        .as_ref()
        .is_none_or(|s| s.contains(&(conv.id.clone(), q.id.clone())));
    let shared = ctx.models.reader.clone();
    if let (Some(shared), true, Some(gold)) = (shared, in_sample, q.answer.as_deref()) {
        if q.kind != QuestionKind::Adversarial {
            let llm = recall.reader.clone().unwrap_or(shared);
            let t = Instant::now();
            let (answer, used) = match reader::answer(&llm, q, &recall.text, &ctx.opts.reader).await
            {
                Ok(done) => done,
                // A refused request (a prompt over the reader's
                // context) fails the same way on every retry: record
                // it on the item and go on with the run.
                Err(BenchError::Service { what, source }) if source.is_request_rejected() => {
                    tracing::warn!("{what}: {source}; item recorded as not answered");
                    item.reader_error = Some(source.to_string());
                    return Ok(item);
                }
                Err(e) => return Err(e),
            };
            item.generate_seconds = Some(t.elapsed().as_secs_f64());
            item.reader_tokens = Some(used);
            item.answered = true;
            if q.kind != QuestionKind::Abstention {
                item.em = Some(exact_match(&answer, gold));
                item.f1 = Some(token_f1(&answer, gold));
                item.bleu1 = Some(bleu1(&answer, gold));
                item.sub_em = Some(sub_em(&answer, gold));
            }
            let verdicts = crate::judges::judge_all(
                &ctx.models.judges,
                &ctx.opts.judge_prompt,
                ctx.dataset.kind,
                q,
                gold,
                &answer,
            )
            .await?;
            if let Some((_, first)) = verdicts.first() {
                item.judge = first.correct;
                item.judge_reply = Some(first.reply.clone());
                item.judge_tokens = Some(verdicts.iter().map(|(_, v)| v.tokens).sum());
            }
            if verdicts.len() > 1 {
                item.judges = verdicts
                    .into_iter()
                    .map(|(name, v)| (name, v.into()))
                    .collect();
            }
            if let Some(c) = item.corrected.as_mut() {
                let (judges, template) = (&ctx.models.judges, &ctx.opts.judge_prompt);
                score::on_answer(c, judges, template, ctx.dataset.kind, q, &answer).await?;
            }
            item.answer = Some(answer);
        }
    }
    Ok(item)
}

/// The counters of `after` that grew since `before`, by how much.
fn moved(before: &Diagnostics, after: Diagnostics) -> Diagnostics {
    after
        .into_iter()
        .filter_map(|(name, n)| {
            let grown = n.saturating_sub(before.get(&name).copied().unwrap_or(0));
            (grown > 0).then_some((name, grown))
        })
        .collect()
}

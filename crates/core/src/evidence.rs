//! Where one history event went in one read, in words a person can act on:
//! shown whole, in part, only through a record, or not at all, and, when the
//! substrate keeps a [`ReadTrace`], why (never ranked, ranked too low for the
//! whole allowance, crowded out, fitting yet not shown whole).
//!
//! The harness's loss breakdown (`submem bench --trace`) and the server's
//! live traces (a read or a comparison given source ids) both classify with
//! [`coverage_of`] and [`EvidenceTrace::fate`], so a fate means the same in a
//! report and on the inspector's page.

use serde::{Deserialize, Serialize};

use crate::{EvidenceFate, EvidenceTrace, ReadTrace, Recall, Resolution};

/// Length of the verbatim run (in white-space words) that counts a turn as
/// "shown in part". Words rather than o200k tokens, so the measure does not
/// depend on a tokenizer; 8 words are ≈ 10 o200k tokens of English.
pub const PARTIAL_RUN_WORDS: usize = 8;

/// Collapses every run of white space to one space and trims.
pub fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// How one turn appears in a rendered memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Its whole text (white space normalised) appears verbatim.
    Whole,
    /// Some run of [`PARTIAL_RUN_WORDS`] consecutive words appears verbatim.
    Part,
    /// Neither.
    Absent,
}

/// Classifies how `turn_text` appears in `memory_normalized` (which must
/// already be [`normalize_ws`]-normalised). A turn shorter than the run length
/// counts as `Part` only if it is whole.
pub fn coverage_of(turn_text: &str, memory_normalized: &str) -> Coverage {
    let turn = normalize_ws(turn_text);
    if turn.is_empty() {
        return Coverage::Absent;
    }
    if memory_normalized.contains(&turn) {
        return Coverage::Whole;
    }
    let words: Vec<&str> = turn.split(' ').collect();
    if words.len() >= PARTIAL_RUN_WORDS
        && words
            .windows(PARTIAL_RUN_WORDS)
            .any(|w| memory_normalized.contains(&w.join(" ")))
    {
        return Coverage::Part;
    }
    Coverage::Absent
}

/// How an event appears in a read's memory block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shown {
    /// Its whole text, verbatim.
    Whole,
    /// A verbatim run of [`PARTIAL_RUN_WORDS`] words, not the whole text.
    Part,
    /// Not verbatim, but named among the sources at record resolution (a
    /// summary or record written from it).
    Record,
    /// None of these.
    Absent,
}

/// The event's place in the recall's source list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listed {
    /// 0-based position among the recall's sources (most relevant first).
    pub position: usize,
    /// The substrate's score for it.
    pub score: f32,
    /// How the substrate says it is shown.
    pub resolution: Resolution,
}

/// One event's fate in one read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceReport {
    /// The event's source id.
    pub source_id: String,
    /// Whether the history holds the event (an unknown or forgotten id is
    /// never shown, and no trace can explain it).
    pub stored: bool,
    /// How it appears in the memory block.
    pub shown: Shown,
    /// Where the recall's sources list it, when they do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed: Option<Listed>,
    /// The substrate's ranking of it, when the substrate keeps a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranked: Option<EvidenceTrace>,
    /// Why it was or was not shown whole, when a trace explains it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fate: Option<EvidenceFate>,
    /// Room the read's ranked items had, and the most they could have had
    /// (the trace's `room` and `allowance`), when traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<(usize, usize)>,
    /// All of the above in one sentence.
    pub why: String,
}

/// Explains what the read behind `recall` (and its `trace`, if the substrate
/// keeps one) did with the event `source_id`, whose text is `text` (`None`
/// when the history does not hold it).
pub fn explain_evidence(
    source_id: &str,
    text: Option<&str>,
    recall: &Recall,
    trace: Option<&ReadTrace>,
) -> EvidenceReport {
    explain_in(&normalize_ws(&recall.text), source_id, text, recall, trace)
}

/// [`explain_evidence`] for each `(source id, text)` of `events`, the
/// memory normalised once for all of them.
pub fn explain_evidences<'a>(
    events: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    recall: &Recall,
    trace: Option<&ReadTrace>,
) -> Vec<EvidenceReport> {
    let memory = normalize_ws(&recall.text);
    events
        .into_iter()
        .map(|(id, text)| explain_in(&memory, id, text, recall, trace))
        .collect()
}

fn explain_in(
    memory: &str,
    source_id: &str,
    text: Option<&str>,
    recall: &Recall,
    trace: Option<&ReadTrace>,
) -> EvidenceReport {
    let coverage = text.map_or(Coverage::Absent, |t| coverage_of(t, memory));
    let listed = recall
        .sources
        .iter()
        .enumerate()
        .find(|(_, s)| s.source_id == source_id)
        .map(|(position, s)| Listed {
            position,
            score: s.score,
            resolution: s.resolution,
        });
    let shown = match coverage {
        Coverage::Whole => Shown::Whole,
        Coverage::Part => Shown::Part,
        // Any record naming it counts, not only its first listing.
        Coverage::Absent
            if recall
                .sources
                .iter()
                .any(|s| s.source_id == source_id && s.resolution == Resolution::Record) =>
        {
            Shown::Record
        }
        Coverage::Absent => Shown::Absent,
    };
    let ranked = trace.and_then(|t| t.events.iter().find(|e| e.source_id == source_id).cloned());
    let fate = match (trace, &ranked) {
        (Some(t), Some(e)) if text.is_some() => Some(t.fate_of(e, coverage == Coverage::Whole)),
        _ => None,
    };
    let room = trace
        .filter(|_| ranked.is_some())
        .map(|t| (t.room, t.allowance));
    let why = sentence(
        text.is_some(),
        shown,
        listed.as_ref(),
        ranked.as_ref(),
        fate,
        room,
        trace.is_some(),
    );
    EvidenceReport {
        source_id: source_id.to_string(),
        stored: text.is_some(),
        shown,
        listed,
        ranked,
        fate,
        room,
        why,
    }
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn sentence(
    stored: bool,
    shown: Shown,
    listed: Option<&Listed>,
    ranked: Option<&EvidenceTrace>,
    fate: Option<EvidenceFate>,
    room: Option<(usize, usize)>,
    traced: bool,
) -> String {
    if !stored {
        return "not in the history (unknown or forgotten id): nothing could show it".into();
    }
    let head = match shown {
        Shown::Whole => "shown whole".to_string(),
        Shown::Part => "shown only in part".to_string(),
        Shown::Record => "shown only through a record written from it".to_string(),
        Shown::Absent => "not shown".to_string(),
    };
    let place = listed.map(|l| {
        format!(
            "{} of the sources (score {:.3}, {})",
            ordinal(l.position + 1),
            l.score,
            match l.resolution {
                Resolution::Raw => "raw",
                Resolution::Excerpt => "excerpt",
                Resolution::Record => "record",
            }
        )
    });
    let top_k = fate
        .filter(|f| *f == EvidenceFate::BeyondTopK)
        .and(ranked.and_then(|e| e.rank));
    let rank = ranked.map(|e| match (e.rank, e.room_needed, room) {
        (Some(r), _, _) if top_k.is_some() => format!("ranked {}", ordinal(r + 1)),
        (None, _, _) => "the ranking never reached it".to_string(),
        (Some(r), Some(need), Some((room, allowance))) if room == allowance => format!(
            "ranked {}; showing it whole needed {need} tokens of ranked text, the read had {room}",
            ordinal(r + 1)
        ),
        (Some(r), Some(need), Some((room, allowance))) => format!(
            "ranked {}; showing it whole needed {need} tokens of ranked text, the read had {room} \
             (at most {allowance} had nothing else been shown)",
            ordinal(r + 1)
        ),
        (Some(r), _, _) => format!(
            "ranked {}, with some of its pieces never ranked",
            ordinal(r + 1)
        ),
    });
    let cause = fate.and_then(|f| match f {
        EvidenceFate::Shown => None,
        EvidenceFate::NotRanked => Some("not ranked: no match for the query"),
        EvidenceFate::RankedTooLow => Some("ranked too low: it would not fit even the whole allowance"),
        EvidenceFate::CrowdedOut => Some(
            "crowded out: it would have fit, but the room went to what the substrate shows besides \
             ranked text (records, a timeline)",
        ),
        EvidenceFate::FitNotWhole => Some(
            "fit the room, yet not shown whole (cut into pieces of which only some were taken, or \
             rendered differently)",
        ),
        EvidenceFate::BeyondTopK => Some("beyond the top k: the read shows a fixed number of ranked items"),
    });
    let mut parts = vec![head];
    parts.extend(place);
    parts.extend(rank);
    parts.extend(cause.map(str::to_string));
    if !traced && shown != Shown::Whole {
        parts.push("this substrate keeps no ranking trace to say why".into());
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SourceHit;

    fn recall() -> Recall {
        Recall {
            text: "Ana: the violin teacher is Ingrid\n[record] Ben talked about boats".into(),
            tokens: 12,
            sources: vec![
                SourceHit {
                    source_id: "a".into(),
                    score: 0.9,
                    resolution: Resolution::Raw,
                },
                SourceHit {
                    source_id: "c".into(),
                    score: 0.5,
                    resolution: Resolution::Record,
                },
            ],
            reader: None,
        }
    }

    #[test]
    fn coverage_whole_part_absent() {
        let memory = normalize_ws("x  one two three four five six seven eight y");
        assert_eq!(coverage_of("one two\tthree", &memory), Coverage::Whole);
        assert_eq!(
            coverage_of("one two three four five six seven eight nine", &memory),
            Coverage::Part
        );
        assert_eq!(coverage_of("nine ten", &memory), Coverage::Absent);
        assert_eq!(coverage_of("   ", &memory), Coverage::Absent);
    }

    #[test]
    fn explains_each_case_without_a_trace() {
        let r = recall();
        let a = explain_evidence("a", Some("the violin teacher is Ingrid"), &r, None);
        assert_eq!((a.shown, a.stored), (Shown::Whole, true));
        assert_eq!(a.listed.as_ref().map(|l| l.position), Some(0));
        assert!(
            a.why.starts_with("shown whole; 1st of the sources"),
            "{}",
            a.why
        );
        let c = explain_evidence("c", Some("we sailed a small boat last summer"), &r, None);
        assert_eq!(c.shown, Shown::Record);
        assert!(c.why.contains("no ranking trace"), "{}", c.why);
        let gone = explain_evidence("zz", None, &r, None);
        assert_eq!((gone.shown, gone.stored), (Shown::Absent, false));
        assert!(gone.why.starts_with("not in the history"));
    }

    #[test]
    fn a_trace_says_why() {
        let r = recall();
        let mut trace = ReadTrace {
            top_k: None,
            room: 100,
            allowance: 400,
            events: vec![
                EvidenceTrace {
                    source_id: "b".into(),
                    rank: Some(13),
                    room_needed: Some(812),
                },
                EvidenceTrace {
                    source_id: "d".into(),
                    rank: Some(2),
                    room_needed: Some(250),
                },
                EvidenceTrace {
                    source_id: "e".into(),
                    rank: None,
                    room_needed: None,
                },
            ],
        };
        let b = explain_evidence("b", Some("far away turn"), &r, Some(&trace));
        assert_eq!(b.fate, Some(EvidenceFate::RankedTooLow));
        assert_eq!(b.room, Some((100, 400)));
        assert_eq!(
            b.why,
            "not shown; ranked 14th; showing it whole needed 812 tokens of ranked text, the read \
             had 100 (at most 400 had nothing else been shown); ranked too low: it would not fit \
             even the whole allowance"
        );
        let d = explain_evidence("d", Some("a crowded turn"), &r, Some(&trace));
        assert_eq!(d.fate, Some(EvidenceFate::CrowdedOut));
        let e = explain_evidence("e", Some("never matched"), &r, Some(&trace));
        assert_eq!(e.fate, Some(EvidenceFate::NotRanked));
        assert!(e.why.contains("the ranking never reached it"), "{}", e.why);
        // A traced substrate that was not asked about an id says nothing of
        // its ranking, and does not claim to keep no trace.
        let f = explain_evidence("f", Some("not asked"), &r, Some(&trace));
        assert_eq!((f.fate, f.ranked.is_none()), (None, true));
        assert_eq!(f.why, "not shown");
        // A top-k read: rank 14 is past k = 10.
        trace.top_k = Some(10);
        let b = explain_evidence("b", Some("far away turn"), &r, Some(&trace));
        assert_eq!(b.fate, Some(EvidenceFate::BeyondTopK));
        assert_eq!(
            b.why,
            "not shown; ranked 14th; beyond the top k: the read shows a fixed number of ranked items"
        );
    }

    #[test]
    fn ordinals() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }
}

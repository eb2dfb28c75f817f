//! Entity and relation extraction from one chunk, LightRAG's write step.
//!
//! **LLM extraction.** One call per chunk asks for one item per line,
//! `entity | name | type | description` and
//! `relation | source | target | keywords | description` — LightRAG's tuple
//! records with a plain `|` delimiter, which SmolLM2-135M reproduces far more
//! reliably than JSON or LightRAG's `<|>` markers. The parser is lenient
//! (bullets, numbering, brackets, quotes, `<|>` or tab delimiters, missing
//! trailing fields) and drops lines it cannot read. LightRAG's "gleaning"
//! (asking again for missed entities) is left out: one call per chunk, as the
//! Harness paper counts it.
//!
//! **Rule extraction** (no LLM, or when the model's answer yields nothing
//! usable): the speaker, capitalised spans and numbers/dates of each turn are
//! entities described by the sentence that mentions them; entities of one
//! turn are linked by co-occurrence relations described by the turn's text.

use std::collections::BTreeMap;

use submem_core::{ChatRequest, Event};
use submem_kit::text::MONTH_NAMES;

/// One extracted entity.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractedEntity {
    /// Name as written.
    pub name: String,
    /// Entity type (`person`, `place`...), lower-cased.
    pub kind: String,
    /// What the chunk says about it.
    pub description: String,
}

/// One extracted relation (undirected, as in LightRAG).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractedRelation {
    /// One end.
    pub source: String,
    /// The other end.
    pub target: String,
    /// High-level keywords (themes) of the relation.
    pub keywords: String,
    /// What the chunk says about it.
    pub description: String,
}

/// What one chunk yields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extraction {
    /// Entities, in the order found.
    pub entities: Vec<ExtractedEntity>,
    /// Relations, in the order found.
    pub relations: Vec<ExtractedRelation>,
}

impl Extraction {
    /// True when nothing was found.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty() && self.relations.is_empty()
    }
}

/// The key entities and relations are merged by: lower-cased alphanumeric
/// words joined by single spaces (`"Dr. Smith"` and `"dr smith"` meet).
pub fn normalize_name(name: &str) -> String {
    submem_kit::text::normalised(name)
}

const EXTRACT_SYSTEM: &str = "You build a knowledge graph from conversations.";

const EXTRACT_INSTRUCTIONS: &str =
    "List the entities and relations in the text, one per line, exactly like the example.
Entity lines: entity | name | type | description
Relation lines: relation | source name | target name | keywords | description
Types: person, place, organization, event, object, date, activity, concept.

Example text:
Mia: I adopted a puppy named Rex last week in Denver.
Example answer:
entity | Mia | person | Mia adopted a puppy.
entity | Rex | object | Puppy Mia adopted last week.
entity | Denver | place | City where Mia adopted Rex.
relation | Mia | Rex | pet, adoption | Mia adopted Rex last week.
relation | Mia | Denver | place | Mia adopted her puppy in Denver.

Text:
";

/// The extraction request for one chunk's text.
pub fn extraction_request(chunk_text: &str, max_tokens: usize) -> ChatRequest {
    ChatRequest::instructed(
        EXTRACT_SYSTEM,
        format!("{EXTRACT_INSTRUCTIONS}{chunk_text}\n\nAnswer:"),
    )
    .with_max_tokens(max_tokens)
}

fn clean_field(s: &str) -> String {
    s.trim()
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '(' | ')' | '<' | '>' | '[' | ']' | '*'))
        .trim()
        .to_string()
}

fn plausible_name(name: &str) -> bool {
    let norm = normalize_name(name);
    !norm.is_empty()
        && name.chars().count() <= 60
        && !matches!(
            norm.as_str(),
            "name" | "source" | "target" | "source name" | "target name" | "entity" | "relation"
        )
}

/// Parses the model's answer. Lines that do not read as an entity or a
/// relation are skipped; fields are trimmed of quotes and brackets.
pub fn parse_extraction(text: &str) -> Extraction {
    let mut out = Extraction::default();
    for raw in text.lines() {
        let line = raw
            .trim()
            .trim_start_matches(|c: char| c.is_ascii_digit() || matches!(c, '-' | '*' | '.' | ')'))
            .trim();
        let line = line.replace("<|>", "|").replace('\t', "|");
        let fields: Vec<String> = line.split('|').map(clean_field).collect();
        let Some(tag) = fields.first().map(|t| t.to_lowercase()) else {
            continue;
        };
        let field = |i: usize| fields.get(i).cloned().unwrap_or_default();
        if tag.starts_with("entit") {
            let name = field(1);
            if !plausible_name(&name) {
                continue;
            }
            out.entities.push(ExtractedEntity {
                name,
                kind: field(2).to_lowercase(),
                description: field(3),
            });
        } else if tag.starts_with("relation") {
            let (source, target) = (field(1), field(2));
            if !plausible_name(&source)
                || !plausible_name(&target)
                || normalize_name(&source) == normalize_name(&target)
            {
                continue;
            }
            out.relations.push(ExtractedRelation {
                source,
                target,
                keywords: field(3),
                description: field(4),
            });
        }
    }
    out
}

/// Keeps what the chunk supports: entities whose every word occurs in the
/// chunk, relations whose two ends do (ends missing from the entity list
/// become entities, as in LightRAG).
pub fn ground(extraction: Extraction, chunk_text: &str) -> Extraction {
    let haystack = normalize_name(chunk_text);
    let words: std::collections::HashSet<&str> = haystack.split(' ').collect();
    let grounded = |name: &str| {
        let n = normalize_name(name);
        !n.is_empty() && n.split(' ').all(|w| words.contains(w))
    };
    Extraction {
        entities: extraction
            .entities
            .into_iter()
            .filter(|e| grounded(&e.name))
            .collect(),
        relations: extraction
            .relations
            .into_iter()
            .filter(|r| grounded(&r.source) && grounded(&r.target))
            .collect(),
    }
}

/// Words that start sentences or fill conversation and are never entities
/// on their own, even when capitalised.
const NOT_NAMES: &[&str] = &[
    "i", "i'm", "im", "i've", "i'll", "i'd", "my", "me", "we", "our", "you", "your", "he", "she",
    "it", "they", "them", "his", "her", "its", "their", "the", "a", "an", "and", "but", "or", "so",
    "if", "this", "that", "these", "those", "there", "here", "what", "when", "where", "who", "why",
    "how", "which", "yes", "yeah", "no", "oh", "wow", "hey", "hi", "hello", "thanks", "thank",
    "sure", "well", "ok", "okay", "great", "nice", "awesome", "cool", "sounds", "do", "did",
    "does", "is", "are", "was", "were", "have", "has", "had", "can", "could", "would", "will",
    "should", "just", "also", "really", "that's", "it's", "let", "let's", "glad", "good", "in",
    "on", "at", "for", "to", "of", "with", "by", "from", "as", "not", "all", "some", "any",
];

/// Capitalised spans (runs of capitalised words, `of`/`the` allowed inside)
/// and numbers or dates (digit-bearing tokens joined with adjacent month
/// names) of `text`, in order, without duplicates.
pub fn rule_mentions(text: &str) -> Vec<(String, &'static str)> {
    let tokens: Vec<&str> = text
        .split_whitespace()
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric() && c != '\''))
        .collect();
    let is_cap = |t: &str| {
        t.chars().next().is_some_and(char::is_uppercase)
            && !NOT_NAMES.contains(&t.to_lowercase().as_str())
    };
    let is_month = |t: &str| MONTH_NAMES.contains(&t.to_lowercase().as_str());
    let has_digit = |t: &str| t.chars().any(|c| c.is_ascii_digit());
    let mut out: Vec<(String, &'static str)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        if has_digit(t) || (is_month(t) && tokens.get(i + 1).is_some_and(|n| has_digit(n))) {
            let mut j = i;
            let mut span = vec![t];
            while j + 1 < tokens.len() && (has_digit(tokens[j + 1]) || is_month(tokens[j + 1])) {
                j += 1;
                span.push(tokens[j]);
            }
            out.push((span.join(" "), "date or number"));
            i = j + 1;
        } else if is_cap(t) {
            let mut j = i;
            while j + 1 < tokens.len() {
                let next = tokens[j + 1];
                let joiner = matches!(next, "of" | "the" | "de")
                    && tokens.get(j + 2).is_some_and(|n| is_cap(n));
                if is_cap(next) || joiner {
                    j += 1;
                } else {
                    break;
                }
            }
            out.push((tokens[i..=j].join(" "), "named thing"));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|(n, _)| !normalize_name(n).is_empty() && seen.insert(normalize_name(n)));
    out
}

/// The sentence of `text` that mentions `name` (case-insensitive), else the
/// first sentence.
fn sentence_with<'t>(text: &'t str, name: &str) -> &'t str {
    let lower_name = name.to_lowercase();
    let sentences: Vec<&str> = text
        .split_inclusive(['.', '!', '?'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    sentences
        .iter()
        .find(|s| s.to_lowercase().contains(&lower_name))
        .or(sentences.first())
        .copied()
        .unwrap_or(text)
}

/// Rule extraction over the events of one chunk.
pub fn rule_extraction(events: &[&Event], relations_per_turn: usize) -> Extraction {
    let mut out = Extraction::default();
    for event in events {
        let (speaker, text) = match event {
            Event::Turn(t) => (Some(t.speaker.as_str()), t.text.as_str()),
            Event::Step(s) => (None, s.observation.as_str()),
        };
        let mut mentions: Vec<(String, &'static str)> = Vec::new();
        if let Some(sp) = speaker.filter(|s| !normalize_name(s).is_empty()) {
            mentions.push((sp.to_string(), "person"));
        }
        let mut found = rule_mentions(text);
        if let Event::Step(s) = event {
            found.extend(rule_mentions(&s.action));
        }
        for m in found {
            if !mentions
                .iter()
                .any(|(n, _)| normalize_name(n) == normalize_name(&m.0))
            {
                mentions.push(m);
            }
        }
        for (name, kind) in &mentions {
            let description = if Some(name.as_str()) == speaker {
                format!("{name} said: {}", sentence_with(text, ""))
            } else {
                sentence_with(text, name).to_string()
            };
            out.entities.push(ExtractedEntity {
                name: name.clone(),
                kind: (*kind).to_string(),
                description,
            });
        }
        // Co-occurrence: the first mention (the speaker, for turns) with each
        // other one, then neighbours in order, up to the cap.
        let mut pairs: Vec<(usize, usize)> = (1..mentions.len()).map(|j| (0, j)).collect();
        pairs.extend((1..mentions.len().saturating_sub(1)).map(|j| (j, j + 1)));
        let keywords = content_keywords(text, 4);
        for (a, b) in pairs.into_iter().take(relations_per_turn) {
            out.relations.push(ExtractedRelation {
                source: mentions[a].0.clone(),
                target: mentions[b].0.clone(),
                keywords: keywords.clone(),
                description: text.to_string(),
            });
        }
    }
    out
}

/// Up to `n` distinct content words of `text` (longest first), comma
/// separated: the rule writer's relation keywords.
fn content_keywords(text: &str, n: usize) -> String {
    let mut words: BTreeMap<String, usize> = BTreeMap::new();
    for w in submem_kit::text::content_words(text) {
        if w.len() > 3 && !NOT_NAMES.contains(&w.as_str()) {
            let len = w.len();
            words.entry(w).or_insert(len);
        }
    }
    let mut v: Vec<(String, usize)> = words.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter()
        .take(n)
        .map(|(w, _)| w)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::Turn;

    #[test]
    fn parses_tuple_lines_leniently() {
        let answer = "Here you go:\n1. entity | Caroline | Person | Goes to a support group.\n\
            - (\"entity\"<|>\"Oslo\"<|>\"place\"<|>\"City.\")\n\
            relation | Caroline | support group | help, community | She attends it.\n\
            relation | Caroline | Caroline | self | dropped\n\
            entity | name | type | placeholder\n\
            garbage line\nrelationship | Oslo | Caroline";
        let x = parse_extraction(answer);
        let names: Vec<&str> = x.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, vec!["Caroline", "Oslo"]);
        assert_eq!(x.entities[0].kind, "person");
        assert_eq!(x.relations.len(), 2);
        assert_eq!(x.relations[0].keywords, "help, community");
        assert_eq!(x.relations[1].description, "");
    }

    #[test]
    fn grounding_drops_copied_example_names() {
        let x = parse_extraction(
            "entity | Mia | person | copied\nentity | Oslo | place | real\nrelation | Mia | Oslo | x | y",
        );
        let g = ground(x, "Ana: I moved to Oslo.");
        assert_eq!(g.entities.len(), 1);
        assert!(g.relations.is_empty());
    }

    #[test]
    fn rules_find_speakers_names_and_dates() {
        let e = Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "Ana".into(),
            text: "I met Ben Stone in New York on 7 May 2023. It was fun.".into(),
            source_id: "1".into(),
        });
        let x = rule_extraction(&[&e], 6);
        let names: Vec<&str> = x.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, vec!["Ana", "Ben Stone", "New York", "7 May 2023"]);
        assert!(x.entities[1].description.starts_with("I met Ben Stone"));
        assert_eq!(x.relations.len(), 5);
        assert_eq!(normalize_name("  Dr. SMITH "), "dr smith");
    }
}

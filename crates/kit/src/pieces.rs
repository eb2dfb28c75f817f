//! Cutting an event's raw text into pieces of at most κ tokens (*FlexA-Mem*
//! Section 3.1), shared by FlexA-Mem's excerpts and piece recovery and by
//! the flat family's piece-retrieval baselines: cuts fall at line breaks,
//! never across a conversation turn or a block of an agent step (the command
//! block and the output block), and a line longer than κ is cut at token
//! boundaries. A piece that does not begin its turn or step carries a label:
//! the speaker for a turn, or the step number and the first line of the
//! command for a step (Appendix A). [`run_text`] shows consecutive pieces
//! as the verbatim span of the event's text they cover.

use serde::{Deserialize, Serialize};
use submem_core::{Event, TokenCounter};

/// One piece of an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// The verbatim text of the piece (a slice of the event's raw text).
    pub body: String,
    /// The label shown before a piece that does not begin its turn or step.
    pub label: Option<String>,
}

impl Piece {
    /// What a render shows: the label (if any) and the body.
    pub fn shown(&self) -> String {
        match &self.label {
            Some(l) => format!("{l} {}", self.body),
            None => self.body.clone(),
        }
    }
}

/// Splits `text` into chunks of at most `kappa` tokens, cutting at line
/// breaks and, inside an over-long line, at token boundaries.
pub fn cut_block(text: &str, kappa: usize, counter: &dyn TokenCounter) -> Vec<String> {
    let kappa = kappa.max(1);
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in text.split('\n') {
        let candidate = if current.is_empty() {
            line.to_string()
        } else {
            format!("{current}\n{line}")
        };
        if counter.count(&candidate) <= kappa {
            current = candidate;
            continue;
        }
        if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        if counter.count(line) <= kappa {
            current = line.to_string();
            continue;
        }
        // An over-long line: cut at token boundaries.
        let mut rest = line;
        while !rest.trim().is_empty() {
            let head = counter.truncate(rest, kappa);
            if head.is_empty() {
                // The counter cannot cut further (e.g. one huge token); keep it whole.
                out.push(rest.to_string());
                rest = "";
                break;
            }
            let mut cut = if rest.starts_with(head.as_str()) {
                head.len()
            } else {
                head.len().min(rest.len())
            };
            while cut > 0 && !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            if cut == 0 {
                out.push(rest.to_string());
                rest = "";
                break;
            }
            out.push(rest[..cut].to_string());
            rest = rest[cut..].trim_start();
        }
        if !rest.is_empty() {
            current = rest.to_string();
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out.retain(|p| !p.trim().is_empty());
    out
}

/// Cuts one event into labelled pieces, in order.
pub fn cut_event(event: &Event, kappa: usize, counter: &dyn TokenCounter) -> Vec<Piece> {
    match event {
        Event::Turn(t) => {
            let label = format!("{}:", t.speaker);
            cut_block(&event.render(), kappa, counter)
                .into_iter()
                .enumerate()
                .map(|(i, body)| Piece {
                    body,
                    label: (i > 0).then(|| label.clone()),
                })
                .collect()
        }
        Event::Step(s) => {
            let first_line = s.action.lines().next().unwrap_or("").trim();
            let label = format!("[step {}] > {first_line}:", s.step);
            let command = format!("[step {}] > {}", s.step, s.action);
            let mut pieces: Vec<Piece> = cut_block(&command, kappa, counter)
                .into_iter()
                .enumerate()
                .map(|(i, body)| Piece {
                    body,
                    label: (i > 0).then(|| label.clone()),
                })
                .collect();
            // The output block never begins its step, so each of its pieces
            // names the step it belongs to.
            pieces.extend(
                cut_block(&s.observation, kappa, counter)
                    .into_iter()
                    .map(|body| Piece {
                        body,
                        label: Some(label.clone()),
                    }),
            );
            pieces
        }
    }
}

/// What the consecutive pieces `first..=last` of one event show together:
/// the event's raw text from the start of the first body to the end of the
/// last, verbatim (a cut inside a line loses no character and adds no
/// label), preceded by the first piece's label when it has one. Showing each
/// piece on its own line with its label would break the turn's text apart,
/// so a turn longer than κ could never be shown whole. Falls back to the
/// pieces' own lines if a body is not found in `text` (not expected: bodies
/// are slices of it, in order).
pub fn run_text(text: &str, pieces: &[Piece], first: usize, last: usize) -> String {
    let shown_lines = || {
        pieces
            .get(first..=last.min(pieces.len().saturating_sub(1)))
            .unwrap_or_default()
            .iter()
            .map(Piece::shown)
            .collect::<Vec<_>>()
            .join("\n")
    };
    if first >= last {
        return pieces.get(first).map(Piece::shown).unwrap_or_default();
    }
    let mut at = 0usize;
    let mut span: Option<(usize, usize)> = None;
    for (i, piece) in pieces.iter().enumerate().take(last + 1) {
        let Some(found) = text
            .get(at..)
            .and_then(|rest| rest.find(piece.body.as_str()))
        else {
            return shown_lines();
        };
        let start = at + found;
        at = start + piece.body.len();
        if i == first {
            span = Some((start, at));
        } else if let Some((s, _)) = span {
            span = Some((s, at));
        }
    }
    let Some((start, end)) = span else {
        return shown_lines();
    };
    let body = &text[start..end];
    match &pieces[first].label {
        Some(l) => format!("{l} {body}"),
        None => body.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::WhitespaceCounter;
    use submem_core::{Step, Turn};

    #[test]
    fn lines_are_packed_and_long_lines_cut() {
        let c = WhitespaceCounter;
        let text = "a b c\nd e\nf g h i j k l";
        let p = cut_block(text, 5, &c);
        assert_eq!(p, vec!["a b c\nd e", "f g h i j", "k l"]);
        for piece in &p {
            assert!(c.count(piece) <= 5);
        }
    }

    #[test]
    fn turn_pieces_carry_the_speaker_after_the_first() {
        let e = Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "Ana".into(),
            text: "one two three four five six".into(),
            source_id: "x".into(),
        });
        let p = cut_event(&e, 3, &WhitespaceCounter);
        assert_eq!(p[0].shown(), "Ana: one two");
        assert_eq!(p[1].shown(), "Ana: three four five");
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn runs_of_pieces_show_the_raw_text_verbatim() {
        let e = Event::Turn(Turn {
            session_id: "s".into(),
            session_date: None,
            speaker: "Ana".into(),
            text: "one two three four five six".into(),
            source_id: "x".into(),
        });
        let raw = e.render();
        let p = cut_event(&e, 3, &WhitespaceCounter);
        // The whole turn: exactly its raw text, no label in the middle.
        assert_eq!(run_text(&raw, &p, 0, p.len() - 1), raw);
        // A run that does not begin the turn carries the speaker once.
        assert_eq!(run_text(&raw, &p, 1, 2), "Ana: three four five six");
        assert_eq!(run_text(&raw, &p, 2, 2), p[2].shown());
        // A body that is not in the text falls back to the pieces' lines.
        assert_eq!(
            run_text("unrelated", &p, 0, 1),
            format!("{}\n{}", p[0].shown(), p[1].shown())
        );
        let step = Event::Step(Step {
            step: 2,
            action: "ls".into(),
            observation: "a\nb".into(),
            source_id: "r:2".into(),
        });
        let sp = cut_event(&step, 64, &WhitespaceCounter);
        assert_eq!(run_text(&step.render(), &sp, 0, 1), step.render());
    }

    #[test]
    fn step_output_pieces_name_the_step_and_command() {
        let e = Event::Step(Step {
            step: 7,
            action: "cat file.py\n# second line".into(),
            observation: "line1\nline2".into(),
            source_id: "r:7".into(),
        });
        let p = cut_event(&e, 64, &WhitespaceCounter);
        assert_eq!(p[0].shown(), "[step 7] > cat file.py\n# second line");
        assert_eq!(p[1].shown(), "[step 7] > cat file.py: line1\nline2");
    }
}

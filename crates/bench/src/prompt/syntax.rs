//! The template syntax of [`super`]: text with `{name}` placeholders and
//! `{if name}` … `{end}` blocks, parsed into [`Piece`]s and rendered.
//!
//! A placeholder is `{` + a name of ASCII letters, digits and underscores
//! (not starting with a digit) + `}`; any other brace is text. A block's
//! `{if name}` or `{end}` alone on its line removes that line.

/// A value a template takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Memory,
    Question,
    Date,
    Observation,
    Gold,
    Answer,
}

impl Slot {
    fn named(name: &str) -> Option<Slot> {
        Some(match name {
            "memory" => Slot::Memory,
            "question" => Slot::Question,
            "date" => Slot::Date,
            "observation" => Slot::Observation,
            "gold" => Slot::Gold,
            "answer" => Slot::Answer,
            _ => return None,
        })
    }

    /// The placeholder, as written.
    pub(crate) fn placeholder(self) -> &'static str {
        match self {
            Slot::Memory => "{memory}",
            Slot::Question => "{question}",
            Slot::Date => "{date}",
            Slot::Observation => "{observation}",
            Slot::Gold => "{gold}",
            Slot::Answer => "{answer}",
        }
    }
}

/// A parsed template: text, values, and blocks kept only when their value
/// is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Text(String),
    Slot(Slot),
    Optional(Slot, Vec<Piece>),
}

/// The values a template is rendered with (`None`: not given).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Fill<'a> {
    pub memory: &'a str,
    pub question: &'a str,
    pub date: Option<&'a str>,
    pub observation: Option<&'a str>,
    pub gold: &'a str,
    pub answer: &'a str,
}

impl<'a> Fill<'a> {
    fn value(&self, slot: Slot) -> Option<&'a str> {
        match slot {
            Slot::Memory => Some(self.memory),
            Slot::Question => Some(self.question),
            Slot::Date => self.date,
            Slot::Observation => self.observation,
            Slot::Gold => Some(self.gold),
            Slot::Answer => Some(self.answer),
        }
    }
}

/// Appends `pieces` rendered with `fill` to `out`.
pub(crate) fn render(pieces: &[Piece], fill: &Fill<'_>, out: &mut String) {
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Slot(s) => out.push_str(fill.value(*s).unwrap_or("")),
            Piece::Optional(s, inner) => {
                if fill.value(*s).is_some() {
                    render(inner, fill, out);
                }
            }
        }
    }
}

/// What a template of one kind accepts.
pub(crate) struct Grammar {
    /// The values it takes.
    pub slots: &'static [Slot],
    /// The values that may be missing: each only inside its own
    /// `{if name}` … `{end}` block (none: no blocks at all).
    pub optional: &'static [Slot],
    /// How to list what it takes, in an error.
    pub takes: &'static str,
}

/// A token of the template text.
enum Token {
    Text(String),
    Slot(String, usize),
    If(String, usize),
    End(usize),
}

/// The tag at the start of `rest` (just after a `{`) and its length after
/// the `{`, if `rest` starts one.
fn tag_at(rest: &str) -> Option<(&str, bool, usize)> {
    let ident = |s: &str| {
        let n = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        let starts_well = s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        (n > 0 && starts_well && s[n..].starts_with('}')).then_some(n)
    };
    if let Some(r) = rest.strip_prefix("if ") {
        if let Some(n) = ident(r) {
            return Some((&r[..n], true, 3 + n + 1));
        }
    }
    ident(rest).map(|n| (&rest[..n], false, n + 1))
}

/// `text` as tokens; `first_line` is the line number of its first line.
/// A block tag alone on its line takes the line with it.
fn tokens(text: &str, first_line: usize) -> Vec<Token> {
    let mut out = Vec::new();
    let mut plain = String::new();
    let mut line = first_line;
    let mut i = 0;
    while let Some(off) = text[i..].find('{') {
        let open = i + off;
        plain.push_str(&text[i..open]);
        line += text[i..open].matches('\n').count();
        let Some((name, is_if, len)) = tag_at(&text[open + 1..]) else {
            plain.push('{');
            i = open + 1;
            continue;
        };
        let after = open + 1 + len;
        i = after;
        let at_line = line;
        let block = is_if || name == "end";
        if block {
            let alone_before = open == 0 || text[..open].ends_with('\n');
            if alone_before && text[after..].starts_with('\n') {
                i += 1;
                line += 1;
            } else if alone_before && after == text.len() && open > 0 {
                // The last line: the line break before it goes (unless an
                // earlier tag's line took it).
                if plain.ends_with('\n') {
                    plain.pop();
                }
            }
        }
        if !plain.is_empty() {
            out.push(Token::Text(std::mem::take(&mut plain)));
        }
        out.push(match (is_if, name) {
            (true, n) => Token::If(n.to_string(), at_line),
            (false, "end") => Token::End(at_line),
            (false, n) => Token::Slot(n.to_string(), at_line),
        });
    }
    plain.push_str(&text[i..]);
    if !plain.is_empty() {
        out.push(Token::Text(plain));
    }
    out
}

/// Appends text, joining it to the text before.
fn push_text(pieces: &mut Vec<Piece>, t: String) {
    if t.is_empty() {
        return;
    }
    match pieces.last_mut() {
        Some(Piece::Text(prev)) => prev.push_str(&t),
        _ => pieces.push(Piece::Text(t)),
    }
}

/// `text` parsed under `grammar`; an error is a sentence naming the line.
pub(crate) fn parse(
    text: &str,
    first_line: usize,
    grammar: &Grammar,
) -> std::result::Result<Vec<Piece>, String> {
    let mut top: Vec<Piece> = Vec::new();
    let mut block: Option<(Slot, usize, Vec<Piece>)> = None;
    let known = |name: &str, line: usize| {
        Slot::named(name)
            .filter(|s| grammar.slots.contains(s))
            .ok_or_else(|| {
                format!(
                    "line {line}: unknown placeholder {{{name}}}; {}",
                    grammar.takes
                )
            })
    };
    for token in tokens(text, first_line) {
        match token {
            Token::Text(t) => match &mut block {
                Some((_, _, inner)) => push_text(inner, t),
                None => push_text(&mut top, t),
            },
            Token::Slot(name, line) => {
                let slot = known(&name, line)?;
                let optional = grammar.optional.contains(&slot);
                match &mut block {
                    Some((b, _, inner)) if *b == slot => inner.push(Piece::Slot(slot)),
                    Some((b, _, _)) => {
                        return Err(format!(
                            "line {line}: {} cannot be inside {{if {}}} … {{end}}{}",
                            slot.placeholder(),
                            &b.placeholder()[1..b.placeholder().len() - 1],
                            if optional {
                                format!(" (put it in its own {{if {name}}} block)")
                            } else {
                                String::new()
                            }
                        ))
                    }
                    None if optional => {
                        return Err(format!(
                            "line {line}: {} must be inside {{if {name}}} … {{end}}: \
some questions have none, and the block is left out for them",
                            slot.placeholder()
                        ))
                    }
                    None => top.push(Piece::Slot(slot)),
                }
            }
            Token::If(name, line) => {
                if grammar.optional.is_empty() {
                    return Err(format!(
                        "line {line}: {{if {name}}}: this template has no blocks; {}",
                        grammar.takes
                    ));
                }
                let slot = known(&name, line)?;
                if !grammar.optional.contains(&slot) {
                    return Err(format!(
                        "line {line}: {{if {name}}}: {} is always given; blocks are for {}",
                        slot.placeholder(),
                        grammar
                            .optional
                            .iter()
                            .map(|s| s.placeholder())
                            .collect::<Vec<_>>()
                            .join(" and ")
                    ));
                }
                if let Some((_, open, _)) = &block {
                    return Err(format!(
                        "line {line}: {{if {name}}} inside the block opened on line {open}: \
close it with {{end}} first"
                    ));
                }
                block = Some((slot, line, Vec::new()));
            }
            Token::End(line) => {
                if grammar.optional.is_empty() {
                    return Err(format!(
                        "line {line}: {{end}}: this template has no blocks; {}",
                        grammar.takes
                    ));
                }
                match block.take() {
                    Some((slot, _, inner)) => top.push(Piece::Optional(slot, inner)),
                    None => return Err(format!("line {line}: {{end}} without {{if …}}")),
                }
            }
        }
    }
    if let Some((slot, line, _)) = block {
        let p = slot.placeholder();
        return Err(format!(
            "line {line}: {{if {}}} has no {{end}}",
            &p[1..p.len() - 1]
        ));
    }
    Ok(top)
}

/// How many times `slot` appears outside blocks, and the index of its first
/// piece.
pub(crate) fn occurrences(pieces: &[Piece], slot: Slot) -> (usize, Option<usize>) {
    let at: Vec<usize> = pieces
        .iter()
        .enumerate()
        .filter(|(_, p)| **p == Piece::Slot(slot))
        .map(|(i, _)| i)
        .collect();
    (at.len(), at.first().copied())
}

/// The first placeholder or block tag in `text`, as written.
pub(crate) fn first_tag(text: &str) -> Option<String> {
    let mut i = 0;
    while let Some(off) = text[i..].find('{') {
        let open = i + off;
        if let Some((name, is_if, _)) = tag_at(&text[open + 1..]) {
            return Some(if is_if {
                format!("{{if {name}}}")
            } else {
                format!("{{{name}}}")
            });
        }
        i = open + 1;
    }
    None
}

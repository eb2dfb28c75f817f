use super::builtin::{fixed_prompt_tokens, reader_messages, ReaderSettings, CHAT_FRAMING_TOKENS};
use super::*;
use crate::QuestionKind;
use submem_core::test_utils::WhitespaceCounter;
use submem_core::{Regime, TokenCounter};

fn q(date: Option<&str>, newest: Option<&str>) -> Question {
    Question {
        id: "q1".into(),
        text: "What is Ana's car?".into(),
        answer: Some("red Fiat".into()),
        evidence: vec![],
        category: "x".into(),
        kind: QuestionKind::Standard,
        regime: Regime::Conversational,
        newest: newest.map(str::to_string),
        date: date.map(str::to_string),
    }
}

fn every_question() -> Vec<Question> {
    let mut out = Vec::new();
    for date in [None, Some("1 May 2023")] {
        for newest in [None, Some("You see a key.\nExits: north")] {
            out.push(q(date, newest));
        }
    }
    out
}

/// `text` written to a file in `dir`, loaded as a reader template.
fn reader_file(dir: &Path, text: &str) -> Result<ReaderTemplate> {
    let path = dir.join("reader.txt");
    std::fs::write(&path, text).unwrap();
    ReaderTemplate::from_file(&path)
}

fn reader_error(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let e = reader_file(dir.path(), text).unwrap_err().to_string();
    assert!(e.contains("reader.txt"), "{e}");
    assert!(e.contains("reader prompt template"), "{e}");
    e
}

#[test]
fn the_builtin_template_renders_exactly_the_builtin_reader_prompt() {
    let builtin = ReaderTemplate::builtin();
    for question in every_question() {
        for memory in ["", "Ana: my car is a red Fiat.\nBo: {memory} nice"] {
            assert_eq!(
                builtin.messages(&question, memory),
                reader_messages(&question, memory)
            );
        }
    }
    assert_eq!(
        builtin.reader_prompt(),
        submem_core::plugin::ReaderPrompt::default()
    );
    assert_eq!(ReaderSettings::default().prompt, builtin);
}

#[test]
fn the_builtin_text_is_the_builtin_template() {
    let text = ReaderTemplate::builtin_text();
    let parsed = ReaderTemplate::parse(&text, PromptId::of(BUILTIN, text.as_bytes())).unwrap();
    assert_eq!(parsed, ReaderTemplate::builtin());
    // Written to a file, it renders the same prompts under the file's name.
    let dir = tempfile::tempdir().unwrap();
    let file = reader_file(dir.path(), &text).unwrap();
    assert_eq!(file.id().sha256, ReaderTemplate::builtin().id().sha256);
    assert!(!file.id().is_builtin() && ReaderTemplate::builtin().id().is_builtin());
    for question in every_question() {
        assert_eq!(
            file.messages(&question, "m"),
            reader_messages(&question, "m")
        );
    }
}

#[test]
fn builtin_ids_are_stable_hashes() {
    let (r, j) = (ReaderTemplate::builtin(), JudgeTemplate::builtin());
    for id in [r.id(), j.id()] {
        assert_eq!(id.name, "builtin");
        assert_eq!(id.sha256.len(), 64);
        assert!(id.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    assert_ne!(r.id().sha256, j.id().sha256);
    assert_eq!(ReaderTemplate::builtin(), r);
    assert_eq!(JudgeTemplate::default(), j);
    // A template given as text cannot pass for a built-in one.
    let e = ReaderTemplate::from_text("builtin", "{memory} {question}").unwrap_err();
    assert!(e.to_string().contains("give another name"), "{e}");
    assert!(JudgeTemplate::from_text("builtin", "{question}{gold}{answer}").is_err());
    let t = ReaderTemplate::from_text("mine", "{memory}\r\n{question}\r\n").unwrap();
    assert_eq!(
        t.messages(&q(None, None), "M")[1].content,
        "M\nWhat is Ana's car?"
    );
    assert_eq!(t.id().name, "mine");
}

#[test]
fn a_file_is_hashed_as_its_bytes_and_named_by_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let t = reader_file(dir.path(), "Notes:\n{memory}\n\nQ: {question}\nA:\n").unwrap();
    // `printf 'Notes:\n{memory}\n\nQ: {question}\nA:\n' | sha256sum`
    assert_eq!(
        t.id().sha256,
        "19e9311ed52ec5269e1c08cc21eec9f6d59e8c7b833b2f940bfa2fd2be1a87b2"
    );
    assert_eq!(
        t.id().name,
        dir.path().join("reader.txt").display().to_string()
    );
    // No `---` line: the built-in system message; the final line break dropped.
    let m = t.messages(&q(Some("1 May"), None), "Ana has a Fiat.");
    assert_eq!(m[0], ChatMessage::system(READER_SYSTEM));
    assert_eq!(
        m[1].content,
        "Notes:\nAna has a Fiat.\n\nQ: What is Ana's car?\nA:"
    );
}

#[test]
fn a_custom_template_has_its_own_system_message_and_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let text = "Be brief.\r\nVery brief.\r\n---\r\n<memory>\r\n{memory}\r\n</memory>\r\n\
{if date}\r\nDate: {date}\r\n{end}\r\n{if observation}Now: {observation}\r\n{end}\r\n\
Q: {question} {\"as\": \"json\"} {0}\r\n";
    let t = reader_file(dir.path(), text).unwrap();
    let both = t.messages(&q(Some("1 May"), Some("a key")), "M");
    assert_eq!(both[0], ChatMessage::system("Be brief.\nVery brief."));
    assert_eq!(
        both[1].content,
        "<memory>\nM\n</memory>\nDate: 1 May\nNow: a key\nQ: What is Ana's car? {\"as\": \"json\"} {0}"
    );
    let neither = t.messages(&q(None, None), "M");
    assert_eq!(
        neither[1].content,
        "<memory>\nM\n</memory>\nQ: What is Ana's car? {\"as\": \"json\"} {0}"
    );
    // What M9 and M11 are built for: the prompt of a plain question.
    let p = t.reader_prompt();
    assert_eq!(p.system.as_deref(), Some("Be brief.\nVery brief."));
    assert_eq!(p.messages("M", "What is Ana's car?"), neither);
    assert_eq!(p.head("M")[1].content, "<memory>\nM");

    // A blank system section sends none; a block tag on the last line goes
    // with its line.
    let t = reader_file(
        dir.path(),
        "\n---\n{memory}\n{question}\n{if date}\n{date}\n{end}\n",
    )
    .unwrap();
    let m = t.messages(&q(Some("May"), None), "M");
    assert_eq!(m, vec![ChatMessage::user("M\nWhat is Ana's car?\nMay")]);
    assert_eq!(t.reader_prompt().system, None);
}

#[test]
fn bad_reader_templates_are_clear_errors() {
    for (text, why) in [
        ("Q: {question}", "{memory} is missing"),
        ("{memory}\n{memory}\n{question}", "{memory} appears 2 times"),
        ("{memory}", "{question} is missing"),
        (
            "{memory} {question} {question}",
            "{question} appears 2 times",
        ),
        ("{question}\n{memory}", "{question} comes before {memory}"),
        (
            "{if date}{date}{end}\n{memory}\n{question}",
            "block comes before {memory}",
        ),
        (
            "{memory}\n\n{question}\n{answer}",
            "line 4: unknown placeholder {answer}",
        ),
        (
            "sys\n---\n{memory}\n{Question}",
            "line 4: unknown placeholder {Question}",
        ),
        (
            "{memory}\nToday is {date}.\n{question}",
            "line 2: {date} must be inside {if date}",
        ),
        (
            "{memory}\n{if date}\n{observation}\n{end}\n{question}",
            "line 3: {observation} cannot be inside {if date}",
        ),
        (
            "{memory}\n{if date}\n{question}\n{end}",
            "{question} cannot be inside {if date}",
        ),
        (
            "{memory}\n{if date}\n{if observation}\n{end}\n{end}\n{question}",
            "line 3: {if observation} inside the block opened on line 2",
        ),
        (
            "{memory}\n{question}\n{if date}\n{date}",
            "line 3: {if date} has no {end}",
        ),
        (
            "{memory}\n{end}\n{question}",
            "line 2: {end} without {if …}",
        ),
        (
            "{memory}\n{if question}{end}\n{question}",
            "{question} is always given",
        ),
        (
            "{memory}\n{if weather}{end}\n{question}",
            "unknown placeholder {weather}",
        ),
        (
            "Use {memory}.\n---\n{memory}\n{question}",
            "{memory} in the system message",
        ),
        ("", "the file is empty"),
        (" \n\n", "the file is empty"),
    ] {
        let e = reader_error(text);
        assert!(e.contains(why), "{text:?}: expected {why:?} in: {e}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.txt");
    std::fs::write(&path, b"{memory}\n{question} caf\xe9\n").unwrap();
    let e = ReaderTemplate::from_file(&path).unwrap_err().to_string();
    assert!(e.contains("latin1.txt") && e.contains("not UTF-8"), "{e}");
    let e = ReaderTemplate::from_file(&dir.path().join("absent.txt"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot read") && e.contains("absent.txt"), "{e}");
}

#[test]
fn the_fixed_part_is_counted_with_the_template_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let builtin = ReaderSettings::default();
    // The built-in system message (no `---` line) and the built-in prompt's
    // lines, with a longer memory head.
    let longer = ReaderSettings {
        prompt: reader_file(
            dir.path(),
            "These are your notes, oldest first:\n{memory}\n\n\
{if date}\nToday is {date}.\n{end}\nQuestion: {question}\nAnswer:\n",
        )
        .unwrap(),
        ..ReaderSettings::default()
    };
    let counter = WhitespaceCounter;
    let budget = submem_core::Query::question(submem_core::Namespace::new("t").unwrap(), "q", 4096);
    for question in every_question() {
        let p = fixed_prompt_tokens(&question, &counter, &longer);
        // |P| is the template's own count with an empty memory block...
        let own: usize = longer
            .prompt
            .messages(&question, "")
            .iter()
            .map(|m| counter.count(&m.content))
            .sum();
        assert_eq!(p, own + CHAT_FRAMING_TOKENS + longer.max_answer_tokens);
        // ...and a memory block adds exactly its own tokens.
        let with_memory: usize = longer
            .prompt
            .messages(&question, "one two three")
            .iter()
            .map(|m| counter.count(&m.content))
            .sum();
        assert_eq!(with_memory, own + 3);
        let b = fixed_prompt_tokens(&question, &counter, &builtin);
        let a_longer = budget.clone().with_fixed_prompt_tokens(p).allowance();
        let a_builtin = budget.clone().with_fixed_prompt_tokens(b).allowance();
        assert_eq!(a_builtin + b, a_longer + p);
        if question.newest.is_none() {
            // "These are your notes, oldest first:" (6 words) for "Memory:":
            // the memory may take 5 tokens fewer.
            assert_eq!(p, b + 5);
            assert_eq!(a_longer + 5, a_builtin);
        }
    }
}

fn judge_file(text: &str) -> Result<JudgeTemplate> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("judge.txt");
    std::fs::write(&path, text).unwrap();
    JudgeTemplate::from_file(&path)
}

#[test]
fn the_builtin_judge_keeps_the_rubrics() {
    let j = JudgeTemplate::builtin();
    for r in RUBRICS {
        assert_eq!(j.prompt(r, "Q?", "G", "A"), judge_prompt(r, "Q?", "G", "A"));
        assert_eq!(
            j.verdict(r, "Same. CORRECT"),
            parse_verdict(r, "Same. CORRECT")
        );
        assert_eq!(j.verdict(r, "no"), parse_verdict(r, "no"));
    }
    assert!(JudgeTemplate::builtin_text().contains("Gold answer: {gold}"));
}

#[test]
fn a_judge_template_is_one_prompt_for_every_question() {
    let j = judge_file(
        "Question: {question}\nGold: {gold}\nAnswer: {answer}\nSame as gold ({gold})? yes or no.\n",
    )
    .unwrap();
    assert_eq!(j.id().sha256.len(), 64);
    assert!(j.id().name.ends_with("judge.txt"));
    for r in RUBRICS {
        assert_eq!(
            j.prompt(r, "Q?", "G", "A"),
            "Question: Q?\nGold: G\nAnswer: A\nSame as gold (G)? yes or no."
        );
    }
    for (reply, verdict) in [
        ("Yes.", Some(true)),
        ("No, it is not correct.", Some(false)),
        ("It matches. CORRECT", Some(true)),
        ("INCORRECT", Some(false)),
        ("The label is WRONG", Some(false)),
        ("The answer is yes", Some(true)),
        ("hmm", None),
    ] {
        assert_eq!(j.verdict(Rubric::LmeStandard, reply), verdict, "{reply}");
        assert_eq!(j.verdict(Rubric::Mem0, reply), verdict, "{reply}");
        assert_eq!(parse_custom_verdict(reply), verdict, "{reply}");
    }
    for (text, why) in [
        ("{question} {answer}", "{gold} is missing"),
        ("{gold} {answer}", "{question} is missing"),
        ("{question} {gold}", "{answer} is missing"),
        (
            "{question} {gold} {answer} {memory}",
            "line 1: unknown placeholder {memory}",
        ),
        (
            "{question}\n{gold}\n{if answer}{answer}{end}",
            "line 3: {if answer}: this template has no blocks",
        ),
        ("", "the file is empty"),
    ] {
        let e = judge_file(text).unwrap_err().to_string();
        assert!(e.contains(why) && e.contains("judge.txt"), "{text:?}: {e}");
        assert!(e.contains("judge prompt template"), "{e}");
    }
}

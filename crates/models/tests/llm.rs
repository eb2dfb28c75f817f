#![allow(clippy::unwrap_used, clippy::expect_used)]
//! SmolLM2-135M-Instruct: tokenizer round trips, generation controls,
//! context limits, prefix reuse and malformed files.

mod common;

use std::time::Instant;

use submem_core::{ChatMessage, ChatRequest, Llm, ServiceError};
use submem_models::{
    GenerateOptions, IncrementalText, LlmWeights, LocalLlm, LocalLlmOptions, ModelsError,
};

#[test]
fn tokenizer_round_trips_exactly() {
    let llm = common::llm();
    let tok = llm.tokenizer();
    for text in [
        "Hello world",
        " leading space and  double  spaces\n\ttabs",
        "Ünïcödé: naïve café, 東京, emoji 🤖🦀, RTL שלום",
        "digits 1234567890 and 3.14159, year 2024",
        "fn main() { let x: Vec<u8> = vec![1, 2]; println!(\"{x:?}\"); }",
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    ] {
        let ids = tok.encode(text).unwrap();
        assert_eq!(tok.decode(&ids, false).unwrap(), text, "ids {ids:?}");
    }
}

#[test]
fn incremental_text_reads_every_prefix_as_a_whole_decode() {
    let llm = common::llm();
    let tok = llm.tokenizer();
    let ids = tok
        .encode("<|im_start|>Ünïcödé: 東京, emoji 🤖🦀 שלום<|im_end|> x 12")
        .unwrap();
    let mut text = IncrementalText::default();
    let mut cut_characters = 0;
    for n in 0..=ids.len() {
        let whole = tok.decode(&ids[..n], true).unwrap();
        cut_characters += usize::from(whole.ends_with(char::REPLACEMENT_CHARACTER));
        let so_far = text.push(&ids[..n], |t| tok.decode(t, true)).unwrap();
        assert_eq!(so_far, whole, "after {n} ids {:?}", &ids[..n]);
    }
    // The emoji and the CJK are several byte tokens each: some prefixes end
    // half-way through a character, the case the incremental text waits on.
    assert!(cut_characters > 0);
}

#[test]
fn chat_markers_are_single_tokens() {
    let llm = common::llm();
    let tok = llm.tokenizer();
    assert_eq!(tok.encode("<|im_start|>").unwrap(), vec![1]);
    assert_eq!(tok.encode("<|im_end|>").unwrap(), vec![2]);
    assert_eq!(tok.eos_id, 2);
    let ids = tok.encode("<|im_start|>user\nHi<|im_end|>").unwrap();
    assert_eq!(ids.first(), Some(&1));
    assert_eq!(ids.last(), Some(&2));
    // No GPT-2 style prefix space: "Hello" is not "ĠHello".
    let hello = tok.encode("Hello").unwrap();
    assert_eq!(tok.decode(&hello, false).unwrap(), "Hello");
    assert_eq!(hello, vec![tok.token_to_id("Hello").unwrap()]);
    // Digits are split one by one.
    assert_eq!(tok.encode("2024").unwrap().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greedy_generation_with_usage_and_limits() {
    let llm = common::llm();
    let req = ChatRequest::new(vec![ChatMessage::user("What is the capital of Germany?")])
        .with_max_tokens(24);
    let a = llm.complete(&req).await.unwrap();
    eprintln!("answer: {:?} usage {:?}", a.text, a.usage);
    assert!(!a.text.trim().is_empty());
    assert!(a.text.contains("Berlin"), "{}", a.text);
    assert!(!a.text.contains("<|im_end|>"));
    let prompt_ids = llm
        .tokenizer()
        .encode(&LocalLlm::chat_prompt(&req.messages))
        .unwrap();
    assert_eq!(a.usage.input_tokens, prompt_ids.len() as u64);
    assert!(a.usage.output_tokens >= 1 && a.usage.output_tokens <= 24);
    // Greedy is deterministic.
    assert_eq!(llm.complete(&req).await.unwrap(), a);

    let short = llm.complete(&req.clone().with_max_tokens(3)).await.unwrap();
    assert_eq!(short.usage.output_tokens, 3);

    let stopped = llm
        .complete(&req.clone().with_stop("Berlin"))
        .await
        .unwrap();
    assert!(!stopped.text.contains("Berlin"));
    assert!(a.text.starts_with(&stopped.text));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_sampling_is_reproducible() {
    let llm = common::llm();
    let req = ChatRequest::new(vec![ChatMessage::user("Write a word about the sea.")])
        .with_max_tokens(12)
        .with_temperature(0.9)
        .with_top_p(0.9);
    let a = llm.complete(&req.clone().with_seed(7)).await.unwrap();
    let b = llm.complete(&req.clone().with_seed(7)).await.unwrap();
    assert_eq!(a, b);
    assert!(a.usage.output_tokens >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_prompts_are_refused() {
    let llm = common::llm();
    let ctx = llm.context_length();
    assert!(ctx >= 2048);
    let long = "memory ".repeat(ctx);
    let req = ChatRequest::new(vec![ChatMessage::user(long)]).with_max_tokens(8);
    let err = llm.complete(&req).await.unwrap_err();
    assert!(matches!(err, ServiceError::InvalidRequest(_)), "{err}");
    let req = ChatRequest::new(vec![ChatMessage::user("hi")]).with_max_tokens(ctx);
    assert!(matches!(
        llm.complete(&req).await.unwrap_err(),
        ServiceError::InvalidRequest(_)
    ));
}

#[test]
fn prefix_cache_matches_plain_generation_and_is_faster() {
    let llm = common::llm();
    let memory: String = (0..20)
        .map(|i| {
            format!(
                "Fact {i}: the user's item number {i} is kept in box {}.\n",
                i * 3
            )
        })
        .collect();
    let prefix =
        format!("<|im_start|>system\nYou answer from the memory below.\n{memory}<|im_end|>\n");
    let suffix =
        "<|im_start|>user\nWhere is item number 5 kept?<|im_end|>\n<|im_start|>assistant\n";
    let opts = GenerateOptions {
        max_tokens: 12,
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        stop: vec![],
    };
    let cache = llm.prefill_blocking(&prefix).unwrap();
    assert!(cache.len() > 200, "prefix of {} tokens", cache.len());

    // The plain run uses the same token sequence: prefix ids then suffix ids.
    let tok = llm.tokenizer();
    let mut ids = tok.encode(&prefix).unwrap();
    ids.extend(tok.encode(suffix).unwrap());
    let joined = tok.decode(&ids, false).unwrap();
    assert_eq!(tok.encode(&joined).unwrap(), ids, "boundary must not merge");

    let t0 = Instant::now();
    let plain = llm.generate_blocking(&joined, &opts).unwrap();
    let plain_secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let reused = llm
        .generate_with_prefix_blocking(&cache, suffix, &opts)
        .unwrap();
    let reused_secs = t1.elapsed().as_secs_f64();
    eprintln!(
        "plain {plain_secs:.3}s vs prefix reuse {reused_secs:.3}s ({} prefix tokens): {:?}",
        cache.len(),
        plain.text
    );
    assert_eq!(plain, reused);
    assert!(reused_secs < plain_secs, "{reused_secs} >= {plain_secs}");
    // The cache is reusable: a second continuation gives the same answer.
    assert_eq!(
        llm.generate_with_prefix_blocking(&cache, suffix, &opts)
            .unwrap(),
        reused
    );
}

#[test]
fn left_truncation_when_configured() {
    let path = submem_models::resolve_llm_gguf(&common::config().models).unwrap();
    let llm = submem_models::shared_local_llm(
        &path,
        LocalLlmOptions {
            weights: LlmWeights::Q8_0,
            truncate_prompt_left: true,
            context_limit: Some(64),
        },
    )
    .unwrap();
    assert_eq!(llm.context_length(), 64);
    let prompt = "memory ".repeat(100);
    let opts = GenerateOptions {
        max_tokens: 2,
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
        stop: vec![],
    };
    let out = llm.generate_blocking(&prompt, &opts).unwrap();
    assert_eq!(
        out.usage.input_tokens as usize,
        llm.context_length() - 2,
        "the prompt fills the context minus max_tokens"
    );
}

#[test]
fn corrupt_gguf_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.gguf");
    std::fs::write(&garbage, b"GGUF\x03\x00\x00\x00 this is not a model").unwrap();
    let err = LocalLlm::load(&garbage, LocalLlmOptions::default()).unwrap_err();
    assert!(matches!(err, ModelsError::BadModelFile { .. }), "{err}");

    // A real header cut short: metadata parses, tensor data is missing.
    let real = submem_models::resolve_llm_gguf(&common::config().models).unwrap();
    let bytes = std::fs::read(&real).unwrap();
    for cut in [64usize, 4096, 4 << 20] {
        let truncated = dir.path().join(format!("cut{cut}.gguf"));
        std::fs::write(&truncated, &bytes[..cut]).unwrap();
        let err = LocalLlm::load(&truncated, LocalLlmOptions::default()).unwrap_err();
        eprintln!("cut at {cut}: {err}");
        assert!(matches!(err, ModelsError::BadModelFile { .. }), "{err}");
    }
    let missing = dir.path().join("missing.gguf");
    let err = LocalLlm::load(&missing, LocalLlmOptions::default()).unwrap_err();
    assert!(matches!(err, ModelsError::ModelMissing { .. }));
    assert!(err.to_string().contains("submem models fetch"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q4_1_as_shipped_gives_the_same_greedy_answer() {
    let path = submem_models::resolve_llm_gguf(&common::config().models).unwrap();
    let shipped = submem_models::shared_local_llm(
        &path,
        LocalLlmOptions {
            weights: LlmWeights::AsShipped,
            truncate_prompt_left: false,
            context_limit: None,
        },
    )
    .unwrap();
    let q8 = common::llm();
    let req = ChatRequest::new(vec![ChatMessage::user("Name a colour.")]).with_max_tokens(6);
    let a = shipped.complete(&req).await.unwrap();
    let b = q8.complete(&req).await.unwrap();
    eprintln!("Q4_1 {:?} / Q8_0 {:?}", a.text, b.text);
    assert!(!a.text.is_empty() && !b.text.is_empty());
    assert_ne!(shipped.name(), q8.name());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn choice_scores_rank_the_right_answer_and_sharing_changes_nothing() {
    let llm = common::llm();
    let scoring = llm
        .choice_scoring()
        .expect("the local model scores choices");
    let messages = vec![ChatMessage::user(
        "What is the capital of Germany? Reply with the city only.",
    )];
    let choices: Vec<String> = ["Berlin", "Banana", "go to desk 1", "go to desk 2", "Bern"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let together = scoring.score_choices(&messages, &choices).await.unwrap();
    assert_eq!(together.log_likelihood.len(), choices.len());
    assert_eq!(choices[together.best().unwrap()], "Berlin", "{together:?}");
    // Each candidate scored alone gets the same log-likelihood: the shared
    // prefixes (`go to desk`, `Ber`) only save work.
    for (i, c) in choices.iter().enumerate() {
        let alone = scoring
            .score_choices(&messages, std::slice::from_ref(c))
            .await
            .unwrap();
        let (a, b) = (alone.log_likelihood[0], together.log_likelihood[i]);
        assert!((a - b).abs() < 1e-3, "{c}: alone {a}, together {b}");
        assert_eq!(alone.tokens[0], together.tokens[i]);
        assert!(a < 0.0);
    }
    // Sharing ran fewer tokens than scoring each alone would.
    let prompt = llm
        .tokenizer()
        .encode(&LocalLlm::chat_prompt(&messages))
        .unwrap()
        .len() as u64;
    let unshared: u64 = together.tokens.iter().map(|n| *n as u64 - 1).sum();
    assert!(together.usage.input_tokens < prompt + unshared);
    // An empty prompt is refused, not a panic.
    assert!(scoring.score_choices(&[], &choices).await.is_err());
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Ad-hoc probe of the local models: `probe check` prints the
//! `check_models` report; `probe speed` compares Q4_1 and Q8_0; any other
//! arguments are questions answered greedily.
use submem_core::ChatMessage;
use submem_models::{Config, GenerateOptions, LlmWeights, LocalLlm, LocalLlmOptions};

#[tokio::main]
async fn main() {
    let cfg = Config::load(None).unwrap();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("check") => println!("{}", submem_models::check_models(&cfg).await.unwrap()),
        Some("speed") => {
            let path = submem_models::resolve_llm_gguf(&cfg.models).unwrap();
            let prompt = LocalLlm::chat_prompt(&[ChatMessage::user(
                submem_models::check::sample_sentences(40).join(" "),
            )]);
            for weights in [LlmWeights::Q8_0, LlmWeights::AsShipped] {
                let llm = LocalLlm::load(
                    &path,
                    LocalLlmOptions {
                        weights,
                        truncate_prompt_left: false,
                        context_limit: None,
                    },
                )
                .unwrap();
                for _ in 0..2 {
                    let s = llm.speed_blocking(&prompt, 32).unwrap();
                    println!(
                        "{}: load {:.2}s prefill {} tok in {:.2}s = {:.0} tok/s, decode {:.1} tok/s",
                        llm_name(&llm), llm.load_secs(), s.prompt_tokens, s.prefill_secs, s.prefill_tok_s(), s.decode_tok_s()
                    );
                }
            }
        }
        _ => {
            let llm = cfg.local_llm().unwrap();
            let opts = GenerateOptions {
                max_tokens: 40,
                temperature: 0.0,
                top_p: 1.0,
                seed: 0,
                stop: vec![],
            };
            for q in args {
                let p = LocalLlm::chat_prompt(&[ChatMessage::user(q.clone())]);
                let out = llm.generate_blocking(&p, &opts).unwrap();
                println!("Q: {q}\nA: {:?}\n", out.text);
            }
        }
    }
}

fn llm_name(l: &LocalLlm) -> String {
    use submem_core::Llm;
    l.name().to_string()
}

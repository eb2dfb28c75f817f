//! [`O200kCounter`]: the token counter every budget is enforced with
//! (tiktoken `o200k_base`, the encoding of GPT-4o-class models; the BPE ranks
//! ship inside `tiktoken-rs`, so it works offline). The BPE tables are built
//! once per process and shared by every counter.

use std::sync::{Arc, OnceLock};

use submem_core::TokenCounter;
use tiktoken_rs::CoreBPE;

use crate::error::{ModelsError, Result};

static O200K: OnceLock<std::result::Result<Arc<CoreBPE>, String>> = OnceLock::new();

/// Counts and truncates text in tiktoken `o200k_base` tokens.
///
/// Text is encoded as ordinary text: strings that look like special tokens
/// (`<|endoftext|>`) are counted as the characters they are, never as
/// control tokens, so user input cannot change the count's meaning.
///
/// ```
/// use submem_core::TokenCounter;
/// let tc = submem_models::O200kCounter::new()?;
/// assert_eq!(tc.count("hello world"), 2);
/// assert_eq!(tc.truncate("hello world", 1), "hello");
/// # Ok::<(), submem_models::ModelsError>(())
/// ```
#[derive(Clone)]
pub struct O200kCounter {
    bpe: Arc<CoreBPE>,
}

impl std::fmt::Debug for O200kCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("O200kCounter")
    }
}

impl O200kCounter {
    /// The shared counter (the BPE is built on first use, ~0.5 s).
    pub fn new() -> Result<Self> {
        let bpe = O200K.get_or_init(|| {
            tiktoken_rs::o200k_base()
                .map(Arc::new)
                .map_err(|e| e.to_string())
        });
        match bpe {
            Ok(bpe) => Ok(O200kCounter { bpe: bpe.clone() }),
            Err(e) => Err(ModelsError::tokenizer("o200k_base", e.clone())),
        }
    }

    /// The token ids of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.bpe.encode_ordinary(text)
    }
}

impl TokenCounter for O200kCounter {
    fn count(&self, text: &str) -> usize {
        self.bpe.encode_ordinary(text).len()
    }

    /// Exact after a newline followed by a character that is neither
    /// whitespace nor `/`.
    ///
    /// o200k's pre-tokenizer (tiktoken's `O200K_BASE_PAT_STR`) has no
    /// look-behind and no anchors, and BPE never merges across pre-tokens, so
    /// a cut is exact wherever a pre-token ends both in the whole text and in
    /// the prefix. At such a newline one does: no alternative reads a newline
    /// except the trailing `[\r\n/]*` of the punctuation one and the
    /// whitespace ones, and each of those stops before a character that is
    /// neither whitespace nor `/`. The tests check every such cut of texts
    /// built to break the rule.
    fn is_exact_cut(&self, text: &str, at: usize) -> bool {
        at > 0
            && text.as_bytes().get(at - 1) == Some(&b'\n')
            && text
                .get(at..)
                .and_then(|rest| rest.chars().next())
                .is_some_and(|c| !c.is_whitespace() && c != '/')
    }

    fn truncate(&self, text: &str, max_tokens: usize) -> String {
        let tokens = self.bpe.encode_ordinary(text);
        if tokens.len() <= max_tokens {
            return text.to_string();
        }
        // The bytes of each token, so that a prefix of k tokens is a prefix of
        // `text` of `ends[k]` bytes. A token may end inside a multi-byte
        // character; back off whole tokens until the prefix is valid UTF-8.
        let mut end = 0usize;
        let mut ends = Vec::with_capacity(max_tokens + 1);
        ends.push(0);
        for t in &tokens[..max_tokens] {
            match self.bpe.decode_bytes(&[*t]) {
                Ok(bytes) => end += bytes.len(),
                Err(_) => break,
            }
            ends.push(end);
        }
        for &cut in ends.iter().rev() {
            if let Some(prefix) = text.get(..cut) {
                return prefix.to_string();
            }
        }
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tc() -> O200kCounter {
        O200kCounter::new().unwrap()
    }

    /// Lines that end in punctuation, spaces, carriage returns and blank
    /// lines, followed by letters, digits, `/`, spaces, tabs and non-ASCII
    /// text: the cases where a newline joins the next pre-token or not.
    fn tricky_text(seed: u64, lines: usize) -> String {
        const ENDS: &[&str] = &[
            ".", "!?", " ", "  ", "\r", ":", "word", "42", "é", ")", "", "[…]",
        ];
        const STARTS: &[&str] = &[
            "Ana",
            "/path",
            " lead",
            "\tTab",
            "12 apples",
            "—dash",
            "\n",
            "",
            "'s",
            "é",
            "[x]",
            "[…]",
            "🤖 bot",
            "\u{3000}wide",
            ".",
            "'ll go",
        ];
        let mut x = seed;
        let mut next = move |n: usize| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as usize % n
        };
        let mut text = String::new();
        for _ in 0..lines {
            text.push_str(STARTS[next(STARTS.len())]);
            for _ in 0..next(12) {
                text.push_str(" memory");
            }
            text.push_str(ENDS[next(ENDS.len())]);
            text.push('\n');
        }
        text
    }

    #[test]
    fn exact_cuts_split_the_count() {
        let tc = tc();
        let mut cuts = 0;
        for seed in 0..40 {
            let text = tricky_text(seed, 60);
            let whole = tc.count(&text);
            for at in (0..=text.len() + 1).filter(|&at| tc.is_exact_cut(&text, at)) {
                let parts = tc.count(&text[..at]) + tc.count(&text[at..]);
                assert_eq!(parts, whole, "seed {seed}, cut at {at}");
                cuts += 1;
            }
        }
        assert!(cuts > 1000, "the texts hold many exact cuts ({cuts})");
    }

    #[test]
    fn newlines_that_can_join_the_next_pre_token_are_not_cuts() {
        let tc = tc();
        let text = "a.\n/b\nc\n d\n\ne\nf";
        let cuts: Vec<usize> = (0..=text.len() + 1)
            .filter(|&at| tc.is_exact_cut(text, at))
            .collect();
        assert_eq!(cuts, vec![6, 12, 14]);
        // A cut inside a character is no cut.
        assert!(!tc.is_exact_cut("\né", 2));
    }

    #[test]
    fn counts_known_strings() {
        let tc = tc();
        assert_eq!(tc.count(""), 0);
        assert_eq!(tc.count("hello world"), 2);
        assert!(tc.count("The quick brown fox jumps over the lazy dog.") >= 9);
    }

    #[test]
    fn special_looking_text_is_ordinary() {
        let tc = tc();
        assert!(tc.count("<|endoftext|>") > 1);
    }

    #[test]
    fn truncate_is_a_prefix_within_budget() {
        let tc = tc();
        let text = "Budgets are enforced in o200k tokens; the renderer packs units.";
        for k in 0..tc.count(text) + 2 {
            let t = tc.truncate(text, k);
            assert!(text.starts_with(&t));
            assert!(tc.count(&t) <= k, "k={k} t={t:?}");
        }
        assert_eq!(tc.truncate(text, 1000), text);
    }

    #[test]
    fn truncate_never_splits_a_character() {
        let tc = tc();
        // Rare CJK characters and emoji are split across byte-level tokens.
        let text = "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🤖🦀 龘龘 naïve café 𠜎𠜱𠝹";
        for k in 0..tc.count(text) + 1 {
            let t = tc.truncate(text, k);
            assert!(text.starts_with(&t));
            assert!(tc.count(&t) <= k);
        }
    }
}

//! Real model services for submem: all-MiniLM-L6-v2 and SmolLM2-135M-Instruct with candle, tiktoken o200k_base, and an OpenAI-compatible client.
#![warn(missing_docs)]

//! FlexA-Mem: a write-once store rendered per call under a token budget.
#![warn(missing_docs)]

//! Activation substrates: M10 full context.
#![warn(missing_docs)]

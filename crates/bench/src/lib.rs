//! The submem harness: runs substrates on identical histories and reports performance and efficiency metrics.
#![warn(missing_docs)]

//! The server's integration tests, one binary (each module was a binary of
//! its own; linking the server nine times cost about 1 GB of disk and a
//! link step each). Run one module with
//! `cargo test -p submem-server --test suite <module>`, e.g. `resident`.

mod api;
mod bad_input;
mod browser;
mod common;
mod forget;
mod isolation;
mod nodes;
mod panic;
mod resident;
mod ui;

//! `submem`: the command line over the built-in registry. Everything is in
//! the library ([`submem_cli::main_with`]); a plugin's binary is the same
//! few lines with its factories added to the registry.

fn main() -> std::process::ExitCode {
    submem_cli::main_with(submem::registry::Registry::default())
}

//! `submem substrates`: every substrate the registry can build, with its
//! aliases, family, paper, whether it calls an LLM, and each setting with
//! its default and a line of doc; `--json` for scripts.

use std::fmt::Write as _;
use std::process::ExitCode;

use submem::registry::Registry;
use submem_core::plugin::SubstrateDescription;

use crate::AnyError;

/// Prints the registry's substrates.
pub fn run(registry: &Registry, json: bool, name: Option<&str>) -> Result<ExitCode, AnyError> {
    print!("{}", substrates_listing(registry, json, name)?);
    Ok(ExitCode::SUCCESS)
}

/// What `submem substrates [--json] [NAME]` prints for `registry`: every
/// substrate it can build (or the one `name` resolves to), as text or as a
/// JSON array of [`SubstrateDescription`]s.
pub fn substrates_listing(
    registry: &Registry,
    json: bool,
    name: Option<&str>,
) -> Result<String, AnyError> {
    let listed: Vec<SubstrateDescription> = match name {
        Some(n) => {
            let f = registry.resolve(n).ok_or_else(|| {
                format!(
                    "unknown substrate {n:?}; known substrates: {}",
                    registry.known().join(", ")
                )
            })?;
            vec![f.describe()]
        }
        None => registry.describe(),
    };
    Ok(if json {
        serde_json::to_string_pretty(&listed)? + "\n"
    } else {
        render(&listed)
    })
}

/// The human listing: one block per substrate.
pub fn render(listed: &[SubstrateDescription]) -> String {
    let mut out = String::new();
    for d in listed {
        let aliases = if d.aliases.is_empty() {
            String::new()
        } else {
            format!(" ({})", d.aliases.join(", "))
        };
        let _ = writeln!(out, "{}{aliases}: {}", d.name, d.summary);
        let paper = if d.paper.is_empty() { "-" } else { &d.paper };
        let _ = writeln!(
            out,
            "  method {}, family {}, paper: {paper}, LLM: {}",
            d.method, d.family, d.llm
        );
        if d.settings.is_empty() {
            let _ = writeln!(out, "  no settings");
        }
        // Columns as wide as this substrate's longest key and kind.
        let key_width = d.settings.iter().map(|s| s.key.len()).max().unwrap_or(0);
        let kind_width = d.settings.iter().map(|s| s.kind.len()).max().unwrap_or(0);
        for s in &d.settings {
            let default = match &s.default {
                serde_json::Value::Null => "unset".to_string(),
                serde_json::Value::String(v) => v.clone(),
                other => other.to_string(),
            };
            let _ = writeln!(
                out,
                "  {:<key_width$}  {:<kind_width$}  default {:<10} {}",
                s.key, s.kind, default, s.doc
            );
        }
        out.push('\n');
    }
    out.push_str(
        "Settings follow the name after a colon: `submem bench --substrates m2-fill,flexa:rho=0.2,seeds=8`.\n",
    );
    out
}

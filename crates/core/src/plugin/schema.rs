//! Settings as data: reading `key=value` strings as the types a settings
//! struct's JSON schema names, overlaying them on a factory's defaults with
//! clear errors, and listing each setting with its kind, default and doc.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{SettingDoc, Settings};
use crate::{Error, Result};

/// Overlays `given` on `defaults` and deserialises. A key given under a serde
/// alias would collide with its canonical key among the defaults; the
/// default is dropped then.
pub(super) fn parse_settings<S: DeserializeOwned>(
    name: &str,
    defaults: &Settings,
    given: &Settings,
) -> Result<S> {
    let mut merged = defaults.clone();
    merged.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
    for _ in 0..=given.len() {
        match serde_path_to_error::deserialize::<_, S>(Value::Object(merged.clone())) {
            Ok(s) => return Ok(s),
            Err(e) => {
                let path = e.path().to_string();
                let msg = e.into_inner().to_string();
                let dup = msg
                    .strip_prefix("duplicate field `")
                    .and_then(|r| r.split('`').next())
                    .map(str::to_string);
                match dup {
                    Some(field) if !given.contains_key(&field) && merged.contains_key(&field) => {
                        merged.remove(&field);
                    }
                    _ if path == "." || msg.starts_with("unknown field") => {
                        return Err(settings_error(name, &msg))
                    }
                    _ => return Err(settings_error(name, &format!("{path}: {msg}"))),
                }
            }
        }
    }
    Err(settings_error(name, "conflicting settings"))
}

fn settings_error(name: &str, serde_msg: &str) -> Error {
    let msg = if serde_msg.starts_with("unknown field") {
        serde_msg
            .replace("unknown field", "unknown setting")
            .replace("expected one of", "valid settings are")
            .replace("there are no fields", "this substrate takes no settings")
    } else {
        plain_types(&serde_msg.replace("duplicate field", "setting given twice:"))
    };
    Error::InvalidInput(format!("settings of {name}: {msg}"))
}

/// serde names Rust types (`expected usize`); a user typed a setting, so say
/// what kind of value it takes.
fn plain_types(msg: &str) -> String {
    let Some((head, expected)) = msg.rsplit_once(", expected ") else {
        return msg.to_string();
    };
    let plain = match expected.trim() {
        "usize" | "u64" | "u32" | "u16" | "u8" => "a whole number, 0 or more",
        "isize" | "i64" | "i32" | "i16" | "i8" => "a whole number",
        "f32" | "f64" => "a number",
        "a boolean" => "true or false",
        other => other,
    };
    format!("{head}, expected {plain}")
}

/// What a property schema allows: JSON type names and enumerated strings.
fn types_of(root: &Value, prop: &Value, types: &mut Vec<String>, values: &mut Vec<String>) {
    if let Some(r) = prop.get("$ref").and_then(Value::as_str) {
        let def = r
            .strip_prefix("#/$defs/")
            .and_then(|n| root.get("$defs").and_then(|d| d.get(n)));
        if let Some(def) = def {
            types_of(root, def, types, values);
        }
    }
    match prop.get("type") {
        Some(Value::String(t)) => types.push(t.clone()),
        Some(Value::Array(ts)) => {
            types.extend(ts.iter().filter_map(Value::as_str).map(String::from))
        }
        _ => {}
    }
    if let Some(Value::Array(vs)) = prop.get("enum") {
        values.extend(vs.iter().filter_map(Value::as_str).map(String::from));
    }
    if let Some(c) = prop.get("const").and_then(Value::as_str) {
        values.push(c.to_string());
        types.push("string".into());
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(subs)) = prop.get(key) {
            for sub in subs {
                types_of(root, sub, types, values);
            }
        }
    }
}

fn allowed(root: &Value, prop: Option<&Value>) -> (Vec<String>, Vec<String>) {
    let (mut types, mut values) = (Vec::new(), Vec::new());
    if let Some(p) = prop {
        types_of(root, p, &mut types, &mut values);
    }
    (types, values)
}

/// Reads `raw` as the type setting `key` allows in `schema`.
pub(super) fn coerce(schema: &Value, key: &str, raw: &str) -> Value {
    match schema.get("properties").and_then(|p| p.get(key)) {
        Some(prop) => {
            let (types, values) = allowed(schema, Some(prop));
            coerce_to(&types, &values, raw)
        }
        // An alias (serde knows it, the schema does not) or an unknown key,
        // which serde refuses anyway: read it as the scalar it looks like.
        None => coerce_to(
            &["boolean".into(), "integer".into(), "number".into()],
            &[],
            raw,
        ),
    }
}

fn coerce_to(types: &[String], values: &[String], raw: &str) -> Value {
    let has = |t: &str| types.iter().any(|x| x == t);
    if let Some(v) = values.iter().find(|v| v.eq_ignore_ascii_case(raw)) {
        return Value::String(v.clone());
    }
    if has("null") && matches!(raw.to_ascii_lowercase().as_str(), "none" | "null") {
        return Value::Null;
    }
    if has("array") {
        // A list: JSON as written, or items between `|` (a spec's commas
        // separate its settings).
        if let Ok(list @ Value::Array(_)) = serde_json::from_str::<Value>(raw) {
            return list;
        }
        return Value::Array(
            raw.split('|')
                .map(|item| Value::String(item.trim().to_string()))
                .collect(),
        );
    }
    if has("boolean") {
        if let Ok(b) = raw.to_ascii_lowercase().parse::<bool>() {
            return Value::Bool(b);
        }
    }
    if has("integer") {
        if let Ok(n) = raw.parse::<i64>() {
            return Value::from(n);
        }
        if let Ok(n) = raw.parse::<u64>() {
            return Value::from(n);
        }
    }
    if has("number") {
        if let Some(n) = raw
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
        {
            return Value::Number(n);
        }
    }
    Value::String(raw.to_string())
}

/// A default as a listing shows it: an `f32` setting's `0.800000011920929`
/// as `0.8` (six significant digits are more than any setting needs).
/// A doc comment's first sentence on one line: a listing shows what a setting
/// is, while the reasons behind its default stay in the rustdoc.
fn first_sentence(doc: &str) -> String {
    let one_line = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let end = one_line
        .match_indices(". ")
        .map(|(i, _)| i + 1)
        .find(|&i| !one_line[..i].ends_with("e.g.") && !one_line[..i].ends_with("i.e."))
        .unwrap_or(one_line.len());
    one_line[..end].to_string()
}

fn shown(v: &Value) -> Value {
    match v.as_f64() {
        Some(x) if v.is_f64() && x.is_finite() && x != 0.0 => {
            let digits = 6 - x.abs().log10().ceil() as i32;
            let scale = 10f64.powi(digits.clamp(0, 15));
            serde_json::Number::from_f64((x * scale).round() / scale)
                .map_or_else(|| v.clone(), Value::Number)
        }
        _ => v.clone(),
    }
}

pub(super) fn setting_docs(schema: &Value, defaults: &Settings) -> Vec<SettingDoc> {
    let Some(Value::Object(props)) = schema.get("properties") else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(key, prop)| {
            let (types, values) = allowed(schema, Some(prop));
            let optional = types.iter().any(|t| t == "null");
            let mut kind = if values.is_empty() {
                types
                    .iter()
                    .find(|t| *t != "null")
                    .cloned()
                    .unwrap_or_else(|| "value".into())
            } else {
                values.join("|")
            };
            if optional {
                kind.push('?');
            }
            let doc = prop
                .get("description")
                .and_then(Value::as_str)
                .map(first_sentence)
                .unwrap_or_default();
            SettingDoc {
                key: key.clone(),
                kind,
                default: defaults.get(key).map_or(Value::Null, shown),
                doc,
            }
        })
        .collect()
}

//! A lenient JSON reader for the sloppy objects small local models write:
//! code fences, prose around the object, single quotes, bare keys, trailing
//! commas, unescaped inner quotes, missing closing braces or brackets. It
//! parses the first object it finds into a [`serde_json::Value`]; anything it
//! cannot read at all gives `None`, and the caller falls back to the rule
//! writer.

use serde_json::{Map, Value};

/// Parses the first JSON-like object in `text`.
pub fn parse_lenient_object(text: &str) -> Option<Map<String, Value>> {
    let start = text.find('{')?;
    let chars: Vec<char> = text[start..].chars().collect();
    let mut p = Parser { s: &chars, i: 0 };
    match p.value(0)? {
        Value::Object(m) if !m.is_empty() => Some(m),
        _ => None,
    }
}

/// Reads a value that should be a list of strings: a JSON array, or a string
/// holding an array (`"['a', 'b']"`) or a comma/semicolon separated list.
pub fn string_list(v: Option<&Value>) -> Vec<String> {
    let items: Vec<String> = match v {
        Some(Value::Array(a)) => a.iter().map(value_text).collect(),
        Some(Value::String(s)) => {
            let t = s.trim();
            if t.starts_with('[') {
                let chars: Vec<char> = t.chars().collect();
                let mut p = Parser { s: &chars, i: 0 };
                match p.value(0) {
                    Some(Value::Array(a)) => a.iter().map(value_text).collect(),
                    _ => split_list(t.trim_matches(|c| c == '[' || c == ']')),
                }
            } else {
                split_list(t)
            }
        }
        Some(other) if !other.is_null() => vec![value_text(other)],
        _ => Vec::new(),
    };
    items
        .into_iter()
        .map(|s| {
            s.trim()
                .trim_matches(|c| c == '"' || c == '\'')
                .trim()
                .to_string()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

fn split_list(s: &str) -> Vec<String> {
    s.split([',', ';', '\n']).map(str::to_string).collect()
}

/// The value of the first of `names` that `map` has as a key, compared
/// without case: a small model names the same field in more than one way.
pub fn field<'a>(map: &'a Map<String, Value>, names: &[&str]) -> Option<&'a Value> {
    names
        .iter()
        .find_map(|n| map.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)))
        .map(|(_, v)| v)
}

/// A value as plain text (strings without quotes).
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(value_text).collect::<Vec<_>>().join(", "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
}

const MAX_DEPTH: usize = 32;

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.i += 1;
            } else if c == '`' {
                // Stray code-fence backticks inside or after the object.
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.skip_ws();
        match self.peek()? {
            '{' => self.object(depth),
            '[' => self.array(depth),
            '"' | '\'' => self.string().map(Value::String),
            _ => self.bare(),
        }
    }

    fn object(&mut self, depth: usize) -> Option<Value> {
        self.i += 1; // '{'
        let mut map = Map::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Some(Value::Object(map)), // missing '}'
                Some('}') => {
                    self.i += 1;
                    return Some(Value::Object(map));
                }
                Some(',') => {
                    self.i += 1;
                    continue;
                }
                Some(']') => {
                    // A stray bracket: treat as the end of the object.
                    self.i += 1;
                    return Some(Value::Object(map));
                }
                _ => {}
            }
            let key = match self.peek()? {
                '"' | '\'' => self.string()?,
                _ => self.bare_key()?,
            };
            self.skip_ws();
            if self.peek() == Some(':') || self.peek() == Some('=') {
                self.i += 1;
            } else {
                // `{"a" "b"}` or a truncated object: keep what we have.
                if self.peek().is_none() {
                    return Some(Value::Object(map));
                }
            }
            self.skip_ws();
            if self.peek().is_none() {
                return Some(Value::Object(map));
            }
            let v = self.value(depth + 1)?;
            map.insert(key.trim().to_string(), v);
        }
    }

    fn array(&mut self, depth: usize) -> Option<Value> {
        self.i += 1; // '['
        let mut out = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Some(Value::Array(out)),
                Some(']') => {
                    self.i += 1;
                    return Some(Value::Array(out));
                }
                Some(',') => {
                    self.i += 1;
                    continue;
                }
                Some('}') => return Some(Value::Array(out)), // missing ']'
                _ => {}
            }
            let before = self.i;
            let v = self.value(depth + 1)?;
            if self.i == before {
                self.i += 1;
                continue;
            }
            out.push(v);
        }
    }

    /// A quoted string. The closing quote is the first matching quote that
    /// is followed (after spaces) by a delimiter or the end, so apostrophes
    /// and unescaped inner quotes stay inside the string.
    fn string(&mut self) -> Option<String> {
        let quote = self.peek()?;
        self.i += 1;
        let mut out = String::new();
        while let Some(c) = self.peek() {
            self.i += 1;
            if c == '\\' {
                let e = self.peek()?;
                self.i += 1;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'u' => {
                        let hex: String = self.s.iter().skip(self.i).take(4).collect();
                        if let Some(ch) =
                            u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                        {
                            out.push(ch);
                            self.i += 4;
                        }
                    }
                    other => out.push(other),
                }
                continue;
            }
            if c == quote && self.closes_here() {
                return Some(out);
            }
            out.push(c);
        }
        Some(out) // unterminated string at end of input
    }

    fn closes_here(&self) -> bool {
        let mut j = self.i;
        while let Some(c) = self.s.get(j) {
            if c.is_whitespace() {
                j += 1;
            } else {
                return matches!(c, ',' | '}' | ']' | ':' | '`');
            }
        }
        true
    }

    fn bare_key(&mut self) -> Option<String> {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if c == ':' || c == '=' || c == '}' || c == ',' || c == '\n' {
                break;
            }
            out.push(c);
            self.i += 1;
        }
        let k = out.trim().to_string();
        (!k.is_empty()).then_some(k)
    }

    /// A bare word: a number, `true`/`false`/`null`, or unquoted text up to
    /// the next delimiter.
    fn bare(&mut self) -> Option<Value> {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if c == ',' || c == '}' || c == ']' || c == '\n' {
                break;
            }
            out.push(c);
            self.i += 1;
        }
        let t = out.trim();
        Some(match t {
            "true" | "True" => Value::Bool(true),
            "false" | "False" => Value::Bool(false),
            "null" | "None" => Value::Null,
            _ if t.parse::<i64>().is_ok() => t
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or_else(|_| Value::String(t.to_string())),
            _ => match t.parse::<f64>() {
                Ok(n) => serde_json::Number::from_f64(n)
                    .map(Value::Number)
                    .unwrap_or_else(|| Value::String(t.to_string())),
                Err(_) => Value::String(t.to_string()),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(s: &str) -> Option<String> {
        parse_lenient_object(s).and_then(|m| m.get("record").map(value_text))
    }

    #[test]
    fn repairs_the_usual_damage() {
        let cases: &[(&str, &str)] = &[
            (r#"{"record": "plain"}"#, "plain"),
            ("```json\n{\"record\": \"fenced\"}\n```", "fenced"),
            (r#"{"record": "trailing",}"#, "trailing"),
            (r#"{'record': 'single quotes'}"#, "single quotes"),
            (r#"{'record': 'don't stop'}"#, "don't stop"),
            (r#"{"record": "missing brace""#, "missing brace"),
            (
                r#"Sure! Here it is: {"record": "prose"} Hope it helps."#,
                "prose",
            ),
            (
                r#"{record: bare words here, "tags": []}"#,
                "bare words here",
            ),
            (
                r#"{"record": "He said "hi" twice"}"#,
                "He said \"hi\" twice",
            ),
            (r#"{"record": "cut off mid"#, "cut off mid"),
        ];
        for (input, want) in cases {
            assert_eq!(rec(input).as_deref(), Some(*want), "input: {input}");
        }
    }

    #[test]
    fn lists_in_any_shape() {
        let m = parse_lenient_object(
            r#"{"a": ["x", "y",], "b": "['p', 'q']", "c": "u, v; w", "d": 3}"#,
        )
        .unwrap();
        assert_eq!(string_list(m.get("a")), vec!["x", "y"]);
        assert_eq!(string_list(m.get("b")), vec!["p", "q"]);
        assert_eq!(string_list(m.get("c")), vec!["u", "v", "w"]);
        assert_eq!(string_list(m.get("d")), vec!["3"]);
        assert!(string_list(None).is_empty());
    }

    #[test]
    fn hopeless_inputs_give_none() {
        assert!(parse_lenient_object("no object here").is_none());
        assert!(parse_lenient_object("{}").is_none());
        assert!(parse_lenient_object("").is_none());
    }
}

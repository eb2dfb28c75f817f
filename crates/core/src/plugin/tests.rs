//! Tests of settings parsing, errors and listings.

use super::schema::parse_settings;
use super::*;
use serde::{Deserialize, Serialize};

/// How a read ranks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Ranking {
    /// Lexical.
    Bm25,
    /// Dense.
    Dense,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Toy {
    /// How many seeds.
    #[serde(alias = "k")]
    seeds: usize,
    /// Share of the budget.
    rho: f32,
    /// A discount. It is the reason
    /// this doc, e.g. a long one, goes on.
    lambda: f32,
    /// Fill the budget.
    fill: bool,
    /// Ranking.
    ranking: Ranking,
    /// An optional cap.
    cap: Option<u32>,
    /// A path.
    path: String,
    /// Words to watch for.
    markers: Vec<String>,
}

impl SubstrateSettings for Toy {
    fn validate(&self) -> Result<()> {
        if self.rho > 1.0 {
            return Err(Error::InvalidInput("rho must be at most 1".into()));
        }
        Ok(())
    }
}

fn toy() -> Toy {
    Toy {
        seeds: 4,
        rho: 0.5,
        lambda: 0.8,
        fill: false,
        ranking: Ranking::Bm25,
        cap: None,
        path: "p".into(),
        markers: vec!["won".into()],
    }
}

fn factory() -> SubstrateFactory {
    SubstrateFactory::builder("toy", MethodId::from_static("toy"), Family::BASELINE)
        .aliases(&["Plaything"])
        .settings(toy())
        .build(|_, _| Err(Error::InvalidInput("not built".into())))
}

fn parse(f: &SubstrateFactory, pairs: &[(&str, &str)]) -> Result<Toy> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let s = f.settings_from_pairs(&pairs)?;
    f.check(&s)?;
    parse_settings("toy", f.defaults(), &s)
}

#[test]
fn strings_are_read_as_each_setting_type() {
    let f = factory();
    let t = parse(
        &f,
        &[
            ("seeds", "7"),
            ("rho", "0.25"),
            ("FILL", "TRUE"),
            ("ranking", "Dense"),
            ("cap", "9"),
            ("path", "123"),
        ],
    )
    .unwrap();
    assert_eq!(
        t,
        Toy {
            seeds: 7,
            rho: 0.25,
            lambda: 0.8,
            fill: true,
            ranking: Ranking::Dense,
            cap: Some(9),
            path: "123".into(),
            markers: vec!["won".into()],
        }
    );
    assert_eq!(parse(&f, &[]).unwrap(), toy());
    assert_eq!(parse(&f, &[("k", "2")]).unwrap().seeds, 2);
    assert_eq!(parse(&f, &[("cap", "none")]).unwrap().cap, None);
}

#[test]
fn bad_settings_say_what_is_valid() {
    let f = factory();
    let e = parse(&f, &[("colour", "red")]).unwrap_err().to_string();
    assert!(
        e.contains("unknown setting `colour`") && e.contains("`seeds`"),
        "{e}"
    );
    let e = parse(&f, &[("ranking", "fuzzy")]).unwrap_err().to_string();
    assert!(
        e.contains("ranking: unknown variant `fuzzy`") && e.contains("bm25"),
        "{e}"
    );
    let e = parse(&f, &[("fill", "maybe")]).unwrap_err().to_string();
    assert!(e.contains("fill: invalid type"), "{e}");
    let e = parse(&f, &[("seeds", "-1")]).unwrap_err().to_string();
    assert!(e.contains("settings of toy"), "{e}");
    assert!(
        e.ends_with("expected a whole number, 0 or more") && !e.contains("usize"),
        "a setting's kind in words, not a Rust type: {e}"
    );
    let e = parse(&f, &[("fill", "maybe")]).unwrap_err().to_string();
    assert!(e.ends_with("expected true or false"), "{e}");
    let e = parse(&f, &[("rho", "2")]).unwrap_err().to_string();
    assert!(e.contains("rho must be at most 1"), "{e}");
}

#[test]
fn a_list_setting_takes_items_between_bars_or_json() {
    let f = factory();
    let s = parse(&f, &[("markers", "You won!| done ")]).unwrap();
    assert_eq!(s.markers, ["You won!", "done"]);
    let s = parse(&f, &[("markers", r#"["a|b", "c"]"#)]).unwrap();
    assert_eq!(s.markers, ["a|b", "c"]);
    assert_eq!(parse(&f, &[]).unwrap().markers, ["won"]);
}

#[test]
fn descriptions_list_defaults_kinds_and_docs() {
    let f = factory();
    assert!(f.answers_to("PLAYTHING") && f.answers_to("toy") && !f.answers_to("to"));
    f.validate().unwrap();
    let d = f.describe();
    let by_key = |k: &str| d.settings.iter().find(|s| s.key == k).unwrap().clone();
    assert_eq!(by_key("seeds").kind, "integer");
    assert_eq!(by_key("seeds").default, serde_json::json!(4));
    assert_eq!(by_key("seeds").doc, "How many seeds.");
    assert_eq!(by_key("ranking").kind, "bm25|dense");
    assert_eq!(by_key("cap").kind, "integer?");
    assert_eq!(by_key("fill").kind, "boolean");
    assert_eq!(by_key("lambda").default, serde_json::json!(0.8));
    assert_eq!(by_key("lambda").doc, "A discount.");
    let bad = SubstrateFactory::builder("Bad Name", MethodId::from_static("M1"), Family::FLAT)
        .build_without_settings(|_| Err(Error::InvalidInput("x".into())));
    assert!(bad.validate().is_err());
    let none =
        SubstrateFactory::builder("none", MethodId::from_static("NoMemory"), Family::BASELINE)
            .build_without_settings(|_| Err(Error::InvalidInput("x".into())));
    // Reading the pairs refuses an unknown key at once, and so does a check
    // of settings made some other way (JSON from a server).
    let e = none
        .settings_from_pairs(&[("k".into(), "1".into())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown setting `k`"), "{e}");
    let mut given = Settings::new();
    given.insert("k".into(), serde_json::json!(1));
    let e = none.check(&given).unwrap_err().to_string();
    assert!(e.contains("unknown setting `k`"), "{e}");
}

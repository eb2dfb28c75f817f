//! The names a router knows its members by: every routable name (canonical
//! names and aliases) with the canonical name it stands for and the method it
//! implements. A registry of substrate plugins supplies the table
//! ([`RouteNames::new`]); [`RouteNames::papers`] is the papers' methods alone,
//! for code without a registry.

use crate::paper;
use submem_core::MethodId;

/// One routable name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteName {
    /// The name as a user may write it (`bm25`).
    pub name: String,
    /// The canonical name it stands for (`m2`).
    pub canonical: String,
    /// The method it implements.
    pub method: MethodId,
}

/// A table of routable names.
///
/// Aliases stand for their canonical name; variants built another way
/// (`m1-fill` beside `m1`) are canonical names of their own, so a policy
/// keeps them apart from the default of the same method.
///
/// ```
/// use submem_router::{paper, RouteNames};
/// let names = RouteNames::papers();
/// assert_eq!(names.parse_method("BM25"), Some(paper::M2));
/// assert_eq!(names.canonical_name("bm25"), Some("m2"));
/// assert_eq!(names.method_name(&paper::FLEXA_MEM), Some("flexa"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteNames {
    entries: Vec<RouteName>,
}

impl Default for RouteNames {
    fn default() -> Self {
        RouteNames::papers()
    }
}

impl RouteNames {
    /// A table from `(name, canonical, method)` entries; the first entry of a
    /// method whose name is its own canonical name is that method's default.
    pub fn new(entries: impl IntoIterator<Item = (String, String, MethodId)>) -> Self {
        RouteNames {
            entries: entries
                .into_iter()
                .map(|(name, canonical, method)| RouteName {
                    name: name.to_ascii_lowercase(),
                    canonical: canonical.to_ascii_lowercase(),
                    method,
                })
                .collect(),
        }
    }

    /// The papers' routable substrates under their built-in names.
    pub fn papers() -> Self {
        let table: &[(&str, &str, MethodId)] = &[
            ("m1", "m1", paper::M1),
            ("dense", "m1", paper::M1),
            ("m1-fill", "m1-fill", paper::M1),
            ("dense-fill", "m1-fill", paper::M1),
            ("m2", "m2", paper::M2),
            ("bm25", "m2", paper::M2),
            ("m2-fill", "m2-fill", paper::M2),
            ("bm25-fill", "m2-fill", paper::M2),
            ("m3", "m3", paper::M3),
            ("m4", "m4", paper::M4),
            ("m5", "m5", paper::M5),
            ("m6", "m6", paper::M6),
            ("m7", "m7", paper::M7),
            ("m8", "m8", paper::M8),
            ("m9", "m9", paper::M9),
            ("m10", "m10", paper::M10),
            ("full-context", "m10", paper::M10),
            ("m11", "m11", paper::M11),
            ("flexa", "flexa", paper::FLEXA_MEM),
            ("flexamem", "flexa", paper::FLEXA_MEM),
        ];
        RouteNames::new(
            table
                .iter()
                .map(|(n, c, m)| (n.to_string(), c.to_string(), m.clone())),
        )
    }

    fn lookup(&self, name: &str) -> Option<&RouteName> {
        let name = name.trim();
        self.entries
            .iter()
            .find(|e| e.name.eq_ignore_ascii_case(name))
    }

    /// The method a routable name stands for (case-insensitive).
    pub fn parse_method(&self, name: &str) -> Option<MethodId> {
        self.lookup(name).map(|e| e.method.clone())
    }

    /// The canonical name a routable name stands for (`bm25` → `m2`,
    /// `m1-fill` → `m1-fill`).
    pub fn canonical_name(&self, name: &str) -> Option<&str> {
        self.lookup(name).map(|e| e.canonical.as_str())
    }

    /// The canonical name of a method's default substrate (`m2`, `flexa`).
    pub fn method_name(&self, method: &MethodId) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.method == *method && e.name == e.canonical)
            .map(|e| e.canonical.as_str())
    }

    /// Every routable name, joined for error messages.
    pub fn known(&self) -> String {
        self.entries
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

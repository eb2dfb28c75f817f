//! The web inspector at `/ui`: a page of plain HTML, CSS and vanilla
//! JavaScript, embedded in the binary (no Node build), that calls the `/v1`
//! JSON API from the browser.
//!
//! The page lists the caller's namespaces (substrate, events, footprint),
//! writes turns, forgets, manages, and renders a namespace under a budget
//! (the recall's text exactly as returned, its sources with resolution and
//! score, the budget's use, latency and model calls). A bearer key typed
//! into the page is kept only in the browser's `sessionStorage` and sent as
//! `Authorization: Bearer`; the assets themselves need no key, and the page
//! shows only what the API answers for that key. Agentic runs served with
//! `--reports` are replayed step by step (`episodes.js`): the memory shown,
//! the observation seen and the command chosen at each step, and the same
//! game's commands under every other substrate of the run.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// The page.
pub const INDEX_HTML: &str = include_str!("../assets/ui/index.html");
/// The page's script (an ES module).
pub const APP_JS: &str = include_str!("../assets/ui/app.js");
/// The agentic episode viewer (an ES module of its own).
pub const EPISODES_JS: &str = include_str!("../assets/ui/episodes.js");
/// Evidence fates, block ordering and side-by-side diffs (an ES module the
/// page's script imports; it imports nothing).
pub const EVIDENCE_JS: &str = include_str!("../assets/ui/evidence.js");
/// The view in the URL and the downloads (an ES module the page's script
/// imports; it imports nothing).
pub const VIEW_JS: &str = include_str!("../assets/ui/view.js");
/// The bench report's SVG charts (an ES module the page's script imports;
/// it imports nothing).
pub const CHARTS_JS: &str = include_str!("../assets/ui/charts.js");
/// Side by side: the comparison, its diff and the builds it follows (an ES
/// module the page's script imports).
pub const COMPARE_JS: &str = include_str!("../assets/ui/compare.js");
/// The bench report viewer (an ES module the page's script imports).
pub const REPORTS_JS: &str = include_str!("../assets/ui/reports.js");
/// The page's style sheet.
pub const STYLE_CSS: &str = include_str!("../assets/ui/style.css");

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// What this module serves, all `GET`, outside `/v1` and its keys: path,
/// content type, body.
pub const ASSETS: &[(&str, &str, &str)] = &[
    ("/ui", HTML, INDEX_HTML),
    ("/ui/", HTML, INDEX_HTML),
    ("/ui/app.js", JS, APP_JS),
    ("/ui/episodes.js", JS, EPISODES_JS),
    ("/ui/evidence.js", JS, EVIDENCE_JS),
    ("/ui/view.js", JS, VIEW_JS),
    ("/ui/charts.js", JS, CHARTS_JS),
    ("/ui/compare.js", JS, COMPARE_JS),
    ("/ui/reports.js", JS, REPORTS_JS),
    ("/ui/style.css", CSS, STYLE_CSS),
];

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'",
            ),
        ],
        body,
    )
        .into_response()
}

/// The `/ui` routes, to merge into the application's router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    ASSETS
        .iter()
        .fold(Router::new(), |router, &(path, content_type, body)| {
            router.route(path, get(move || async move { asset(content_type, body) }))
        })
}

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

/// The paths this module serves, all `GET`, outside `/v1` and its keys.
pub const PATHS: &[&str] = &[
    "/ui",
    "/ui/",
    "/ui/app.js",
    "/ui/episodes.js",
    "/ui/evidence.js",
    "/ui/view.js",
    "/ui/charts.js",
    "/ui/compare.js",
    "/ui/reports.js",
    "/ui/style.css",
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

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn episodes_js() -> Response {
    asset("text/javascript; charset=utf-8", EPISODES_JS)
}

async fn evidence_js() -> Response {
    asset("text/javascript; charset=utf-8", EVIDENCE_JS)
}

async fn view_js() -> Response {
    asset("text/javascript; charset=utf-8", VIEW_JS)
}

async fn charts_js() -> Response {
    asset("text/javascript; charset=utf-8", CHARTS_JS)
}

async fn compare_js() -> Response {
    asset("text/javascript; charset=utf-8", COMPARE_JS)
}

async fn reports_js() -> Response {
    asset("text/javascript; charset=utf-8", REPORTS_JS)
}

async fn style_css() -> Response {
    asset("text/css; charset=utf-8", STYLE_CSS)
}

/// The `/ui` routes, to merge into the application's router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(index))
        .route("/ui/", get(index))
        .route("/ui/app.js", get(app_js))
        .route("/ui/episodes.js", get(episodes_js))
        .route("/ui/evidence.js", get(evidence_js))
        .route("/ui/view.js", get(view_js))
        .route("/ui/charts.js", get(charts_js))
        .route("/ui/compare.js", get(compare_js))
        .route("/ui/reports.js", get(reports_js))
        .route("/ui/style.css", get(style_css))
}

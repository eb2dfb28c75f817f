#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The web inspector in a real browser: headless Chromium driven over
//! WebDriver (Debian's `chromium` and `chromium-driver`; install them with
//! `scripts/chromium.sh install`) against an in-process server on the test
//! doubles. It loads `/ui`, creates a namespace, writes turns, renders at two
//! budgets, compares two substrates, opens the bench report fixture and
//! replays an agentic episode fixture, asserting on the DOM; screenshots
//! land in `target/ui-screenshots/`.
//!
//! Without chromedriver the test fails saying what to install, unless
//! `SUBMEM_SKIP_BROWSER=1` is set. The WebDriver calls are plain JSON over
//! HTTP (reqwest), so no client crate is needed.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::port::loopback_port;
use crate::common::{call, start_with_llm, turn, SlowLlm};
use submem_server::config::ServerConfig;

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

struct Driver {
    child: Child,
    http: reqwest::Client,
    session: String,
    base: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    async fn start() -> Driver {
        let port = loopback_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start chromedriver ({e}): run scripts/chromium.sh install \
                     (Debian's chromium and chromium-driver), or set SUBMEM_SKIP_BROWSER=1"
                )
            });
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(r) = http.get(format!("{base}/status")).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not answer on {base}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut d = Driver {
            child,
            http,
            session: String::new(),
            base,
        };
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium_binary(), "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1800"]}}}});
        let v = d.call("POST", "/session", Some(caps)).await;
        d.session = v["sessionId"].as_str().expect("a session id").to_string();
        d
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = if path == "/session" {
            format!("{}/session", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let mut req = self.http.request(method.parse().unwrap(), url);
        if let Some(b) = body {
            req = req.json(&b);
        } else if method == "POST" {
            req = req.json(&json!({}));
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        assert!(
            status.is_success(),
            "WebDriver {method} {path}: {status} {v}"
        );
        v["value"].clone()
    }

    async fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url}))).await;
    }

    async fn find(&self, css: &str) -> String {
        let v = self
            .call(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    /// Opens the view (nav button) whose section holds `css`, when it is
    /// not the one shown, as a user would before using it.
    async fn reveal(&self, css: &str) {
        let script = format!(
            "const e = document.querySelector({}); const s = e && e.closest('section[data-view]'); \
             if (s && s.hidden) document.querySelector('#views button[data-view=\"' + s.dataset.view + '\"]').click(); \
             return true",
            serde_json::to_string(css).unwrap()
        );
        self.js(&script).await;
    }

    async fn click(&self, css: &str) {
        self.reveal(css).await;
        let id = self.find(css).await;
        self.call("POST", &format!("/element/{id}/click"), None)
            .await;
    }

    async fn type_into(&self, css: &str, text: &str) {
        self.reveal(css).await;
        let id = self.find(css).await;
        self.call("POST", &format!("/element/{id}/clear"), None)
            .await;
        self.call(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    async fn js(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Polls `script` until it returns something truthy (10 s at most).
    async fn wait(&self, what: &str, script: &str) -> Value {
        self.wait_up_to(what, script, Duration::from_secs(10)).await
    }

    async fn wait_up_to(&self, what: &str, script: &str, most: Duration) -> Value {
        let deadline = Instant::now() + most;
        loop {
            let v = self.js(script).await;
            let truthy =
                !matches!(&v, Value::Null | Value::Bool(false)) && v != json!(0) && v != json!("");
            if truthy {
                return v;
            }
            if Instant::now() > deadline {
                let status = self
                    .js("return document.getElementById('status').textContent")
                    .await;
                panic!("timed out waiting for {what}; page status: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn screenshot(&self, path: &Path) {
        let v = self.call("GET", "/screenshot", None).await;
        let png = base64_decode(v.as_str().expect("base64 png"));
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, png).unwrap();
    }

    async fn quit(self) {
        let _ = self
            .http
            .delete(format!("{}/session/{}", self.base, self.session))
            .send()
            .await;
    }
}

fn chromium_binary() -> String {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    "chromium".into()
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter_map(val) {
        acc = (acc << 6) | c;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

fn shots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let d = target.join("ui-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_in_headless_chromium() {
    if std::env::var("SUBMEM_SKIP_BROWSER").as_deref() == Ok("1") {
        eprintln!("SUBMEM_SKIP_BROWSER=1: the browser test is skipped");
        return;
    }
    let t0 = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    // A served bench run (`submem serve --reports DIR`): the fixture report.
    let reports = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report");
    std::fs::create_dir_all(reports.path().join("sweep")).unwrap();
    for f in ["summary.json", "items.jsonl"] {
        std::fs::copy(fixtures.join(f), reports.path().join("sweep").join(f)).unwrap();
    }
    // And an agentic run (the local scorer on two TextWorld games, nomem
    // and m2, within and cross episode, `--trace`).
    let agentic = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentic");
    std::fs::create_dir_all(reports.path().join("games")).unwrap();
    for f in ["agentic.json", "episodes.jsonl"] {
        std::fs::copy(agentic.join(f), reports.path().join("games").join(f)).unwrap();
    }
    let mut config = ServerConfig::new();
    config.reports_dir = Some(reports.path().to_path_buf());
    // A comparison waits 1.5 s for its builds (half the request timeout); a
    // slow memory LLM makes A-Mem's build outlast that, so the page has to
    // follow it as a job.
    config.request_timeout_s = 3;
    let llm = std::sync::Arc::new(SlowLlm(Duration::from_millis(150)));
    let s = start_with_llm(dir.path(), config, Some(llm)).await;
    let d = Driver::start().await;
    let shots = shots_dir();

    d.goto(&s.url("/ui")).await;
    d.wait(
        "the page",
        "return document.querySelector('#ns-table tbody') !== null",
    )
    .await;

    // One view at a time; the nav's buttons choose it, arrow keys move
    // along them.
    let shown =
        "return [...document.querySelectorAll('section[data-view]')].filter(s => !s.hidden) \
                 .map(s => s.dataset.view)";
    assert_eq!(
        d.js(shown).await,
        json!(["namespaces", "namespaces", "namespaces"])
    );
    let first = d.find("#views button[data-view='namespaces']").await;
    d.call(
        "POST",
        &format!("/element/{first}/value"),
        Some(json!({"text": "\u{E014}"})),
    )
    .await;
    assert_eq!(d.js(shown).await, json!(["playground"]));
    assert_eq!(
        d.js("return document.activeElement.dataset.view").await,
        json!("playground"),
        "the focus moves with the view"
    );
    assert!(d
        .js("return location.hash")
        .await
        .as_str()
        .unwrap()
        .contains("v=playground"));
    d.click("#views button[data-view='namespaces']").await;

    // Create a namespace.
    d.type_into("#create-name", "demo").await;
    d.type_into("#create-substrate", "m1-fill").await;
    d.click("#create-form button[type=submit]").await;
    d.wait(
        "the namespace",
        "return document.getElementById('current').textContent === 'demo'",
    )
    .await;

    // Write turns: one fact among forty longer filler turns.
    let mut turns = vec!["D1:0|user|my violin teacher is Ingrid and she lives in Lyon".to_string()];
    for i in 1..=40 {
        turns.push(format!(
            "D1:{i}|user|filler turn {i} talks at length about the weather the trains the \
             groceries and the garden on an ordinary day number {i}"
        ));
    }
    let script = format!(
        "document.getElementById('turns').value = {}; return true",
        serde_json::to_string(&turns.join("\n")).unwrap()
    );
    d.js(&script).await;
    d.click("#write-form button[type=submit]").await;
    d.wait(
        "the timeline",
        "return document.getElementById('tl-count').dataset.total === '41'",
    )
    .await;

    // Render at two budgets.
    d.type_into("#question", "who is my violin teacher").await;
    let mut seen = Vec::new();
    for budget in [256, 4096] {
        d.js(&format!(
            "const b = document.getElementById('budget'); b.value = '{budget}'; \
             b.dispatchEvent(new Event('input')); \
             delete document.getElementById('read-facts').dataset.tokens; return true"
        ))
        .await;
        d.click("#read-form button[type=submit]").await;
        let tokens = d
            .wait(
                "the render",
                "return document.getElementById('read-facts').dataset.tokens",
            )
            .await;
        let tokens: usize = tokens.as_str().unwrap().parse().unwrap();
        let blocks = d
            .js("return document.querySelectorAll('#blocks li').length")
            .await;
        let blocks = blocks.as_u64().unwrap() as usize;
        let first = d
            .js("return document.querySelector('#blocks li').dataset.source || ''")
            .await;
        assert!(
            tokens <= budget && tokens > 0,
            "budget {budget}: {tokens} tokens"
        );
        assert!(blocks >= 1, "budget {budget}: no blocks");
        let text = d
            .js("return document.getElementById('raw-text').textContent")
            .await;
        assert!(
            text.as_str().unwrap().contains("Ingrid"),
            "budget {budget}: {text}"
        );
        eprintln!("budget {budget}: {tokens} tokens, {blocks} blocks, first {first}");
        assert_ne!(
            first,
            json!(""),
            "budget {budget}: the first block names its source"
        );
        seen.push((tokens, blocks));
        if budget == 4096 {
            d.screenshot(&shots.join("playground.png")).await;
        }
    }
    assert!(
        seen[1].0 > seen[0].0 && seen[1].1 > seen[0].1,
        "a larger budget shows more: {seen:?}"
    );

    // Ask why: the fact, a filler turn and an id the history lacks.
    d.js(
        "const b = document.getElementById('budget'); b.value = '256'; \
         b.dispatchEvent(new Event('input')); return true",
    )
    .await;
    d.type_into("#trace-ids", "D1:0, D1:5, D9:9").await;
    d.click("#read-form button[type=submit]").await;
    d.wait(
        "the evidence",
        "return document.querySelectorAll('#evidence li').length === 3",
    )
    .await;
    let fates = d
        .js(
            "return [...document.querySelectorAll('#evidence li')].map(l => \
             [l.dataset.source, l.dataset.shown, l.dataset.fate || '', l.textContent])",
        )
        .await;
    eprintln!("evidence: {fates}");
    assert_eq!(fates[0][1], "whole", "{fates}");
    // Filler turns share long runs of words, so another filler shown can
    // count as this one "in part"; never whole at this budget.
    assert_ne!(fates[1][1], "whole", "{fates}");
    assert_ne!(fates[1][2], "", "a ranking substrate says why: {fates}");
    assert!(
        fates[2][3].as_str().unwrap().contains("not in the history"),
        "{fates}"
    );
    // The fact's id jumps to its block.
    d.click("#evidence li[data-source='D1:0'] button").await;
    let target = d
        .js("return document.querySelector('#blocks li.target')?.dataset.source || ''")
        .await;
    assert_eq!(target, json!("D1:0"));
    // Blocks by score: the best first; a search keeps the matching ones.
    d.js(
        "const o = document.getElementById('blocks-order'); o.value = 'score'; \
          o.dispatchEvent(new Event('change')); return true",
    )
    .await;
    let scores = d
        .js(
            "return [...document.querySelectorAll('#blocks li')].filter(l => l.dataset.score) \
             .map(l => Number(l.dataset.score))",
        )
        .await;
    let scores: Vec<f64> = serde_json::from_value(scores).unwrap();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]) && !scores.is_empty(),
        "score order: {scores:?}"
    );
    d.type_into("#blocks-q", "Ingrid").await;
    let visible = d
        .js(
            "return [...document.querySelectorAll('#blocks li')].filter(l => !l.hidden) \
             .map(l => l.dataset.source || '')",
        )
        .await;
    assert_eq!(
        visible,
        json!(["D1:0"]),
        "the search keeps the fact's block"
    );
    d.js(
        "const q = document.getElementById('blocks-q'); q.value = ''; \
          q.dispatchEvent(new Event('input')); return true",
    )
    .await;

    // At 800 px each form's labels stay beside their inputs.
    d.call(
        "POST",
        "/window/rect",
        Some(json!({"width": 800, "height": 1000})),
    )
    .await;
    d.click("#views button[data-view='compare']").await;
    let apart = d
        .js("return [...document.querySelectorAll('section:not([hidden]) .field')].filter(f => \
               !f.querySelector('input.wide')).map(f => { \
               const [l, c] = [f.querySelector('label'), f.querySelector('input, select')]; \
               const a = l.getBoundingClientRect(), b = c.getBoundingClientRect(); \
               return [l.htmlFor, Math.abs((a.top + a.bottom) / 2 - (b.top + b.bottom) / 2), b.right]; }) \
             .filter(([, dy, right]) => dy > 12 || right > 800)")
        .await;
    assert_eq!(apart, json!([]), "labels apart from their inputs at 800 px");
    d.screenshot(&shots.join("compare-800px.png")).await;
    d.call(
        "POST",
        "/window/rect",
        Some(json!({"width": 1280, "height": 1800})),
    )
    .await;

    // A comparison that fails clears the last one's columns and says why
    // beside the form.
    d.type_into("#cmp-substrates", "nosuch").await;
    d.type_into("#cmp-question", "who is my violin teacher")
        .await;
    d.click("#cmp-form button[type=submit]").await;
    let error = d
        .wait(
            "the comparison's error",
            "return document.getElementById('cmp-error').textContent",
        )
        .await;
    assert!(error.as_str().unwrap().contains("nosuch"), "{error}");

    // Compare two substrates, with a gold id.
    d.js("for (const id of ['cmp-substrates', 'cmp-question']) document.getElementById(id).value = ''; \
          document.getElementById('cmp-align').checked = true; return true")
        .await;
    d.type_into("#cmp-substrates", "m2, m1-fill").await;
    d.type_into("#cmp-question", "who is my violin teacher")
        .await;
    d.type_into("#cmp-gold", "D1:0").await;
    d.click("#cmp-form button[type=submit]").await;
    d.wait(
        "the comparison",
        "return document.querySelectorAll('.cmp-col').length === 2",
    )
    .await;
    let names = d
        .js("return [...document.querySelectorAll('.cmp-col')].map(c => c.dataset.substrate)")
        .await;
    assert_eq!(names, json!(["m2", "m1-fill"]));
    let shown = d
        .js("return [...document.querySelectorAll('.cmp-col .gold-list li')].map(l => l.dataset.shown)")
        .await;
    assert_eq!(
        shown,
        json!(["true", "true"]),
        "the gold turn is shown by both"
    );
    assert_eq!(
        d.js("return document.getElementById('cmp-error').textContent")
            .await,
        json!(""),
        "a later success clears the error"
    );
    // The diff: the fact's lines are shown by all; each column sums what
    // only it showed; aligned by source id, the fact is one row.
    let shares = d
        .js(
            "return [...document.querySelectorAll('.cmp-col')].map(c => \
             [...c.querySelectorAll('.line[data-source=\"D1:0\"]')].map(l => l.dataset.share))",
        )
        .await;
    assert_eq!(shares, json!([["all"], ["all"]]), "{shares}");
    let only = d
        .js("return [...document.querySelectorAll('.cmp-col .only-here')].map(p => p.textContent)")
        .await;
    assert!(
        only.as_array()
            .unwrap()
            .iter()
            .all(|t| t.as_str().unwrap().starts_with("only here: ")),
        "{only}"
    );
    let row = d
        .js(
            "const r = document.querySelector('#cmp-aligned tr[data-source=\"D1:0\"]'); \
             return r ? [r.dataset.share, r.querySelectorAll('td.missing').length] : null",
        )
        .await;
    assert_eq!(row, json!(["all", 0]), "aligned: {row}");

    // A substrate whose build outlasts the request: its progress in place,
    // a cancel, then a rerun that completes and is drawn.
    d.type_into("#cmp-substrates", "m4").await;
    d.click("#cmp-form button[type=submit]").await;
    let progress = d
        .wait(
            "the build's progress",
            "const li = document.querySelector('#cmp-progress li[data-state=\"running\"]'); \
             return li && /events/.test(li.textContent) ? li.textContent : null",
        )
        .await;
    eprintln!("progress: {progress}");
    assert!(
        progress.as_str().unwrap().starts_with("m4: running"),
        "{progress}"
    );
    d.js("document.getElementById('cmp-h').scrollIntoView(); return true")
        .await;
    d.screenshot(&shots.join("compare-building.png")).await;
    d.click("#cmp-progress li button").await;
    let cancelled = d
        .wait(
            "the cancel",
            "const t = document.getElementById('cmp-error').textContent; \
             return /cancelled/.test(t) ? t : null",
        )
        .await;
    assert!(
        cancelled
            .as_str()
            .unwrap()
            .contains("the build of m4 was cancelled"),
        "{cancelled}"
    );
    assert_eq!(
        d.js("return document.querySelectorAll('.cmp-col').length")
            .await,
        json!(0)
    );
    d.click("#cmp-form button[type=submit]").await;
    d.wait_up_to(
        "the rebuilt comparison",
        "return document.querySelector('.cmp-col[data-substrate=\"m4\"]') !== null",
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(
        d.js("return document.getElementById('cmp-error').textContent")
            .await,
        json!("")
    );
    d.js("document.getElementById('cmp-h').scrollIntoView(); return true")
        .await;
    d.screenshot(&shots.join("side-by-side.png")).await;

    // The served run opens without choosing files.
    d.wait(
        "the served runs",
        "return document.getElementById('rep-served').dataset.runs === '1'",
    )
    .await;
    d.click("#rep-served button[type=submit]").await;
    d.wait(
        "the served report",
        "return document.querySelectorAll('#rep-scatter circle').length === 12",
    )
    .await;
    let items = d
        .js("return document.getElementById('status').textContent")
        .await;
    assert_eq!(items, json!("report: 12 run(s), 48 item(s)"));
    d.js("document.getElementById('rep-scatter').replaceChildren(); return true")
        .await;

    // Open the bench report fixture from files; a point leads to its items.
    for (css, file) in [
        ("#rep-summary", "summary.json"),
        ("#rep-items", "items.jsonl"),
    ] {
        let id = d.find(css).await;
        let path = fixtures.join(file).canonicalize().unwrap();
        d.call(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({"text": path.to_string_lossy()})),
        )
        .await;
    }
    d.click("#rep-form button[type=submit]").await;
    d.wait(
        "the scatter",
        "return document.querySelectorAll('#rep-scatter circle').length === 12",
    )
    .await;
    let legend = d
        .js("return document.querySelectorAll('#rep-legend span').length")
        .await;
    assert_eq!(legend, json!(4));
    let lines = d
        .js("return document.querySelectorAll('#rep-coverage polyline').length")
        .await;
    assert_eq!(lines, json!(8), "whole and part lines for four substrates");
    // One colour per substrate, none a fate's; each substrate named on the
    // scatter; larger points drawn first, so smaller ones stay clickable.
    let colours = d
        .js("return [...document.querySelectorAll('#rep-legend span')].map(s => s.style.getPropertyValue('--c'))")
        .await;
    let colours: Vec<String> = serde_json::from_value(colours).unwrap();
    let distinct: std::collections::HashSet<&String> = colours.iter().collect();
    assert_eq!(distinct.len(), colours.len(), "{colours:?}");
    for fate in ["#2ca02c", "#98df8a", "#ff7f0e", "#d3d3d3"] {
        assert!(!colours.iter().any(|c| c == fate), "{colours:?}");
    }
    let labels = d
        .js("return [...document.querySelectorAll('#rep-scatter text.point-label')].map(t => t.textContent).sort()")
        .await;
    assert_eq!(labels, json!(["flexa", "hybrid-fill", "m1-fill", "m2"]));
    let radii = d
        .js("return [...document.querySelectorAll('#rep-scatter circle')].map(c => Number(c.getAttribute('r')))")
        .await;
    let radii: Vec<f64> = serde_json::from_value(radii).unwrap();
    assert!(radii.windows(2).all(|w| w[0] >= w[1]), "{radii:?}");
    d.click("#rep-scatter circle[data-substrate='flexa'][data-budget='2048']")
        .await;
    d.wait(
        "the items",
        "return document.querySelector('#rep-items-table tbody').dataset.count === '4'",
    )
    .await;
    // Each row names its conversation (question ids repeat across them).
    let first_row = d
        .js("return [...document.querySelectorAll('#rep-items-table tbody tr:first-child td')].slice(0, 2) \
             .map(td => td.textContent)")
        .await;
    assert_eq!(first_row[1], json!("c1"), "{first_row}");
    // Any budget the server takes is one the inputs take.
    let valid = d
        .js("return ['budget', 'cmp-budget'].map(id => { const i = document.getElementById(id); \
               const was = i.value; i.value = '1000'; const ok = i.value === '1000' && i.checkValidity(); \
               i.value = was; return ok; })")
        .await;
    assert_eq!(valid, json!([true, true]));
    let cats = d
        .js("return document.querySelectorAll('#rep-cats tbody tr').length")
        .await;
    assert_eq!(cats, json!(2));
    let fate_rows = d
        .js("return document.querySelectorAll('#rep-fates g[data-run]').length")
        .await;
    assert_eq!(fate_rows, json!(12), "one stacked bar per run");
    d.js("document.getElementById('rep-h').scrollIntoView(); return true")
        .await;
    d.screenshot(&shots.join("report.png")).await;

    // An item's question: what every substrate showed for it, then the same
    // question and gold ids handed to the side-by-side form.
    d.click("#rep-items-table button[aria-label='what each substrate showed for q0']")
        .await;
    d.wait(
        "the item's columns",
        "return document.querySelectorAll('#rep-item .cmp-col').length === 4",
    )
    .await;
    let gold = d
        .js("return [...document.querySelectorAll('#rep-item .cmp-col')].map(c => \
             [c.dataset.substrate, [...c.querySelectorAll('.gold-list li')].map(l => l.textContent).join()])")
        .await;
    assert_eq!(
        gold,
        json!([
            ["m2", "D1:0: shown as raw"],
            ["m1-fill", "D1:0: shown as raw"],
            ["hybrid-fill", "D1:0: shown as raw"],
            ["flexa", "D1:0: shown as excerpt"]
        ]),
        "each substrate's fate of the gold id, from the traced items"
    );
    d.click("#rep-item-compare").await;
    let form = d
        .js("return ['cmp-question', 'cmp-gold', 'cmp-budget', 'cmp-substrates'].map(id => document.getElementById(id).value)")
        .await;
    assert_eq!(
        form,
        json!([
            "who is my violin teacher",
            "D1:0",
            "2048",
            "m2, m1-fill, hybrid-fill, flexa"
        ])
    );
    d.js("document.getElementById('rep-item-h').scrollIntoView(); return true")
        .await;
    d.screenshot(&shots.join("report-item.png")).await;

    // The view lives in the URL (no key in it) and each view downloads.
    let url = d.js("return location.href").await;
    let url = url.as_str().unwrap().to_string();
    for part in [
        "ns=demo",
        "q=who+is+my+violin+teacher",
        "cs=m4",
        "run=sweep",
        "pt=flexa%402048",
    ] {
        assert!(url.contains(part), "{part} not in {url}");
    }
    let exported = d
        .js(
            "return ['read-export', 'cmp-export-json', 'cmp-export-md', 'rep-export'].map(id => { \
               const a = document.getElementById(id); \
               return [a.download, decodeURIComponent(a.href.slice(a.href.indexOf(',') + 1))]; })",
        )
        .await;
    let read_json: Value = serde_json::from_str(exported[0][1].as_str().unwrap()).unwrap();
    assert_eq!(read_json["namespace"], "demo", "{read_json}");
    assert!(read_json["response"]["tokens"].as_u64().unwrap() > 0);
    let cmp_json: Value = serde_json::from_str(exported[1][1].as_str().unwrap()).unwrap();
    assert_eq!(cmp_json["response"]["results"][0]["substrate"], "m4");
    let md = exported[2][1].as_str().unwrap();
    assert!(
        md.starts_with("# demo: “who is my violin teacher” at 1024 tokens")
            && md.contains("\n## m4\n"),
        "{md}"
    );
    assert!(exported[2][0].as_str().unwrap().ends_with(".md"));
    let run_json: Value = serde_json::from_str(exported[3][1].as_str().unwrap()).unwrap();
    assert_eq!(run_json["run"]["substrate"], "flexa");
    // A pasted link opens the same view.
    d.goto(&url).await;
    d.wait(
        "the restored view",
        "return document.getElementById('status').dataset.restored === '1'",
    )
    .await;
    let restored = d
        .js("return [document.getElementById('current').textContent, \
                     document.querySelectorAll('#blocks li').length > 0, \
                     [...document.querySelectorAll('#cmp-grid .cmp-col')].map(c => c.dataset.substrate), \
                     document.querySelector('#rep-items-table tbody').dataset.count, \
                     document.getElementById('trace-ids').value]")
        .await;
    assert_eq!(
        restored,
        json!(["demo", true, ["m4"], "4", "D1:0, D1:5, D9:9"]),
        "{url}"
    );

    // The agentic run replays step by step: what memory showed, what the
    // policy saw and chose, and where it chose differently from nomem.
    d.wait(
        "the served agentic runs",
        "return document.getElementById('epi-served').dataset.runs === '1'",
    )
    .await;
    d.click("#epi-served button[type=submit]").await;
    d.wait(
        "the episodes",
        "return document.getElementById('status').textContent === 'episodes: 8 from run games'",
    )
    .await;
    d.js(
        "for (const [id, v] of [['epi-game', 'cooking-go1-recipe1-take1-s1'], ['epi-regime', 'within']]) { \
           const s = document.getElementById(id); s.value = v; s.dispatchEvent(new Event('change')); } \
         return true",
    )
    .await;
    let rows = d
        .js("return document.querySelectorAll('#epi-table tbody tr').length")
        .await;
    assert_eq!(
        rows,
        json!(2),
        "nomem and m2 played the cooking game within-episode"
    );
    d.click(
        "#epi-table button[aria-label='replay m2 · cooking-go1-recipe1-take1-s1 · within · 512 tokens · k 1']",
    )
    .await;
    let first = d
        .js("return ['epi-step-out', 'epi-seen', 'epi-memory-h'].map(id => document.getElementById(id).textContent)")
        .await;
    assert_eq!(first[0], json!("step 1 of 4"));
    assert!(
        first[1].as_str().unwrap().starts_with("You are hungry!"),
        "step 1 sees the opening: {first}"
    );
    assert_eq!(first[2], json!("Memory shown: 0 tokens, 0 source(s)"));
    d.click("#epi-next").await;
    let second = d
        .js(
            "return ['epi-step-out', 'epi-seen', 'epi-memory', 'epi-shown', 'epi-decision'] \
             .map(id => document.getElementById(id).textContent)",
        )
        .await;
    assert_eq!(second[0], json!("step 2 of 4"));
    assert!(
        second[1]
            .as_str()
            .unwrap()
            .starts_with("You take the chicken leg from the fridge."),
        "step 2 sees step 1's answer: {second}"
    );
    assert!(
        second[2]
            .as_str()
            .unwrap()
            .starts_with("[step 1] > [start]\nYou are hungry!"),
        "the traced memory block: {second}"
    );
    assert_eq!(
        second[3],
        json!("cooking-go1-recipe1-take1-s1:1 (the opening)")
    );
    assert!(
        second[4]
            .as_str()
            .unwrap()
            .starts_with("> cook chicken leg with oven"),
        "{second}"
    );
    let differs = d
        .js("return [...document.querySelectorAll('#epi-others td.differs')].map(c => c.textContent)")
        .await;
    assert_eq!(
        differs,
        json!(["cook chicken leg with oven", "cook chicken leg with oven"]),
        "m2 chose differently from nomem at steps 2 and 3"
    );
    d.js("document.getElementById('epi-h').scrollIntoView(); return true")
        .await;
    d.screenshot(&shots.join("episode.png")).await;

    // The playground at a 32k budget: how long the page takes from the
    // read's answer to the drawn blocks (measured, reported, not asserted:
    // timings belong in reports, and this machine is shared).
    d.type_into("#create-name", "long").await;
    d.type_into("#create-substrate", "m1-fill").await;
    d.click("#create-form button[type=submit]").await;
    d.wait(
        "the long namespace",
        "return document.getElementById('current').textContent === 'long'",
    )
    .await;
    for batch in 0..8 {
        let events: Vec<Value> = (0..200)
            .map(|i| {
                let n = batch * 200 + i;
                turn(
                    &format!("L{n}"),
                    &format!(
                        "turn {n} recalls the harbour, the lighthouse keeper and the \
                         ferry timetable for day {n} of the long voyage north"
                    ),
                )
            })
            .collect();
        let (st, body) = call(
            &s,
            "POST",
            "/v1/namespaces/long/events",
            None,
            Some(json!({ "events": events })),
        )
        .await;
        assert_eq!(st, 200, "{body}");
    }
    d.js(
        "const b = document.getElementById('budget'); b.value = '32768'; \
         b.dispatchEvent(new Event('input')); return true",
    )
    .await;
    let mut render_ms = Vec::new();
    let mut tokens_32k = 0;
    for _ in 0..5 {
        d.js("delete document.getElementById('read-facts').dataset.renderMs; return true")
            .await;
        d.click("#read-form button[type=submit]").await;
        let ms = d
            .wait(
                "the 32k render",
                "return document.getElementById('read-facts').dataset.renderMs",
            )
            .await;
        render_ms.push(ms.as_str().unwrap().parse::<f64>().unwrap());
        tokens_32k = d
            .js("return Number(document.getElementById('read-facts').dataset.tokens)")
            .await
            .as_u64()
            .unwrap();
    }
    let blocks_32k = d
        .js("return document.querySelectorAll('#blocks li').length")
        .await
        .as_u64()
        .unwrap();
    assert!(
        tokens_32k > 16_384 && tokens_32k <= 32_768,
        "a 32k render fills most of its budget: {tokens_32k} tokens"
    );
    render_ms.sort_by(f64::total_cmp);
    let median = render_ms[render_ms.len() / 2];
    eprintln!(
        "32k playground: {tokens_32k} tokens in {blocks_32k} blocks; answer to drawn blocks \
         median {median:.1} ms of {render_ms:?}"
    );
    std::fs::write(
        shots.join("render-32k.json"),
        json!({"tokens": tokens_32k, "blocks": blocks_32k, "render_ms": render_ms, "median_ms": median})
            .to_string(),
    )
    .unwrap();

    d.quit().await;
    s.stop().await;
    eprintln!("browser test took {:.1} s", t0.elapsed().as_secs_f64());
}

//! Side by side: the layout at 800 px, a failed comparison, two substrates
//! with their diff, and a slow build followed, cancelled and rerun.

use serde_json::json;
use std::path::Path;
use std::time::Duration;

use crate::common::webdriver::Driver;

pub async fn failed_diffed_and_built(d: &Driver, shots: &Path) {
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
}

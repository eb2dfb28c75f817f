//! Reports: a served run and one opened from files, its colours, labels and
//! items, an item handed to the side-by-side form; then the whole view
//! kept in the URL, the downloads, and a pasted link reopening it.

use serde_json::{json, Value};
use std::path::Path;

use crate::common::webdriver::Driver;

pub async fn served_opened_and_linked(d: &Driver, fixtures: &Path, shots: &Path) {
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
}

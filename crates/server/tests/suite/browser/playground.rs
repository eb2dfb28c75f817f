//! The playground: views and their keys, a namespace written and rendered
//! at two budgets, the evidence it explains, blocks sorted and searched;
//! then the page's own render time at a 32k budget.

use serde_json::{json, Value};
use std::path::Path;

use crate::common::webdriver::Driver;
use crate::common::{call, turn, Running};

pub async fn views_write_render_explain(d: &Driver, shots: &Path) {
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

    create_namespace(d, "demo", "m1-fill").await;

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
        set_budget(d, budget).await;
        d.js("delete document.getElementById('read-facts').dataset.tokens; return true")
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
    set_budget(d, 256).await;
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
}

pub async fn render_at_32k(d: &Driver, s: &Running, shots: &Path) {
    // The playground at a 32k budget: how long the page takes from the
    // read's answer to the drawn blocks (measured, reported, not asserted:
    // timings belong in reports, and this machine is shared).
    create_namespace(d, "long", "m1-fill").await;
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
            s,
            "POST",
            "/v1/namespaces/long/events",
            None,
            Some(json!({ "events": events })),
        )
        .await;
        assert_eq!(st, 200, "{body}");
    }
    set_budget(d, 32768).await;
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
}

/// Creates namespace `name` from the namespaces view's form and waits until
/// the page has opened it.
async fn create_namespace(d: &Driver, name: &str, substrate: &str) {
    d.type_into("#create-name", name).await;
    d.type_into("#create-substrate", substrate).await;
    d.click("#create-form button[type=submit]").await;
    d.wait(
        &format!("the namespace {name}"),
        &format!("return document.getElementById('current').textContent === '{name}'"),
    )
    .await;
}

/// Moves the playground's budget slider to `tokens`, as a user's drag would
/// (its input event updates the label and the view).
async fn set_budget(d: &Driver, tokens: usize) {
    d.js(&format!(
        "const b = document.getElementById('budget'); b.value = '{tokens}'; \
         b.dispatchEvent(new Event('input')); return true"
    ))
    .await;
}

//! Episodes: an agentic run replayed step by step against nomem.

use serde_json::json;
use std::path::Path;

use crate::common::webdriver::Driver;

pub async fn replayed(d: &Driver, shots: &Path) {
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
}

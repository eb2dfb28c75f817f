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
//! `SUBMEM_SKIP_BROWSER=1` is set. The WebDriver client is
//! `common::webdriver`.

mod compare;
mod episodes;
mod playground;
mod reports;

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::webdriver::{shots_dir, Driver};
use crate::common::{start_with_llm, SlowLlm};
use submem_server::config::ServerConfig;

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

    playground::views_write_render_explain(&d, &shots).await;
    compare::failed_diffed_and_built(&d, &shots).await;
    reports::served_opened_and_linked(&d, &fixtures, &shots).await;
    episodes::replayed(&d, &shots).await;
    playground::render_at_32k(&d, &s, &shots).await;

    d.quit().await;
    s.stop().await;
    eprintln!("browser test took {:.1} s", t0.elapsed().as_secs_f64());
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The web inspector's assets at `/ui`: served without a key (the page asks
//! for one and sends it to `/v1` itself) with their content types, while
//! `/v1` still refuses the page's calls without a key; and every element the
//! script looks up by id is on the page.

use crate::common::{call, start, start_with_llm, turn, SlowLlm};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use submem_server::config::ServerConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_route_lists_the_live_history_with_a_search() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig::new()
        .with_key("alice", "a-key", &["alice"])
        .with_key("bob", "b-key", &["bob"]);
    let s = start(dir.path(), config).await;
    let a = Some("a-key");
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces",
        a,
        Some(json!({"name": "alice", "substrate": "m2"})),
    )
    .await;
    assert_eq!(st, 201, "{body}");
    let events = json!({"events": [
        turn("D1:0", "my violin teacher is Ingrid"),
        turn("D1:1", "the cat is called Miso"),
        turn("D1:2", "Ingrid moved to Lyon"),
    ]});
    let (st, body) = call(&s, "POST", "/v1/namespaces/alice/events", a, Some(events)).await;
    assert_eq!(st, 200, "{body}");
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces/alice/forget",
        a,
        Some(json!({"source_ids": ["D1:2"]})),
    )
    .await;
    assert_eq!(st, 200, "{body}");

    let (st, body) = call(&s, "GET", "/v1/namespaces/alice/events", a, None).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["total"], 2, "{body}");
    assert_eq!(body["events"][0]["source_id"], "D1:0", "{body}");
    assert_eq!(
        body["events"][1]["text"], "the cat is called Miso",
        "{body}"
    );

    let (_, body) = call(&s, "GET", "/v1/namespaces/alice/events?q=INGRID", a, None).await;
    assert_eq!(
        body["total"], 1,
        "the forgotten event is not listed: {body}"
    );
    assert_eq!(body["events"][0]["source_id"], "D1:0", "{body}");
    let (_, body) = call(
        &s,
        "GET",
        "/v1/namespaces/alice/events?offset=1&limit=1",
        a,
        None,
    )
    .await;
    assert_eq!(
        (&body["total"], &body["offset"]),
        (&json!(2), &json!(1)),
        "{body}"
    );
    assert_eq!(body["events"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["events"][0]["source_id"], "D1:1", "{body}");

    for bad in [
        "?limit=0",
        "?limit=5000",
        "?offset=-1",
        "?limit=x",
        "?nope=1",
    ] {
        let (st, body) = call(
            &s,
            "GET",
            &format!("/v1/namespaces/alice/events{bad}"),
            a,
            None,
        )
        .await;
        assert_eq!(st, 400, "{bad}: {body}");
        assert!(body["error"]["code"].is_string(), "{bad}: {body}");
    }
    let (st, _) = call(
        &s,
        "GET",
        "/v1/namespaces/alice/events",
        Some("b-key"),
        None,
    )
    .await;
    assert_eq!(st, 404, "another tenant's namespace is not found");
    let (st, _) = call(&s, "GET", "/v1/namespaces/alice/events", None, None).await;
    assert_eq!(st, 401);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_assets_are_served_without_a_key_and_v1_still_needs_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig::new().with_key("alice", "alice-secret", &["alice"]);
    let s = start(dir.path(), config).await;
    for (path, kind, needle) in [
        ("/ui", "text/html", "submem inspector"),
        ("/ui/", "text/html", "/ui/app.js"),
        ("/ui/app.js", "text/javascript", "sessionStorage"),
        ("/ui/", "text/html", "/ui/episodes.js"),
        ("/ui/episodes.js", "text/javascript", "step_records"),
        ("/ui/app.js", "text/javascript", "/ui/evidence.js"),
        ("/ui/evidence.js", "text/javascript", "alignedTable"),
        ("/ui/view.js", "text/javascript", "compareMarkdown"),
        ("/ui/charts.js", "text/javascript", "drawScatter"),
        ("/ui/compare.js", "text/javascript", "followBuilds"),
        ("/ui/reports.js", "text/javascript", "openServedReport"),
        ("/ui/style.css", "text/css", ".render-box"),
    ] {
        let resp = s.client.get(s.url(path)).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with(kind), "{path}: {ct}");
        assert!(
            resp.headers().contains_key("content-security-policy"),
            "{path}"
        );
        let body = resp.text().await.unwrap();
        assert!(body.contains(needle), "{path} lacks {needle}");
    }
    let (st, _) = call(&s, "GET", "/v1/namespaces", None, None).await;
    assert_eq!(st, 401);
    let (st, body) = call(&s, "GET", "/v1/namespaces", Some("alice-secret"), None).await;
    assert_eq!(st, 200, "{body}");
    let (st, _) = call(&s, "GET", "/ui/nope.js", None, None).await;
    assert_eq!(st, 404);
    s.stop().await;
}

#[test]
fn every_id_the_script_uses_is_on_the_page() {
    let html = submem_server::ui::INDEX_HTML;
    for (name, js, at_least) in [
        ("app.js", submem_server::ui::APP_JS, 20),
        ("episodes.js", submem_server::ui::EPISODES_JS, 20),
        ("compare.js", submem_server::ui::COMPARE_JS, 10),
        ("reports.js", submem_server::ui::REPORTS_JS, 10),
    ] {
        let mut seen = 0;
        for part in js.split("$(\"").skip(1) {
            let id = part.split('"').next().unwrap();
            assert!(
                html.contains(&format!("id=\"{id}\"")),
                "{name} looks up #{id}, which index.html lacks"
            );
            seen += 1;
        }
        assert!(seen > at_least, "{name}: only {seen} lookups found");
    }
    // Every form control has a label.
    for part in html
        .split("<input id=\"")
        .skip(1)
        .chain(html.split("<textarea id=\"").skip(1))
    {
        let id = part.split('"').next().unwrap();
        assert!(
            html.contains(&format!("for=\"{id}\"")),
            "#{id} has no <label for>"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_renders_one_history_with_several_substrates() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), ServerConfig::new()).await;
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces",
        None,
        Some(json!({"name": "n", "substrate": "m2"})),
    )
    .await;
    assert_eq!(st, 201, "{body}");
    let mut events = Vec::new();
    for i in 0..30 {
        events.push(turn(
            &format!("D1:{i}"),
            &format!("filler turn number {i} about the weather"),
        ));
    }
    events.push(turn("D1:30", "my violin teacher is Ingrid"));
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces/n/events",
        None,
        Some(json!({"events": events})),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let req = json!({"substrates": ["m2", "m1-fill"], "question": "who is my violin teacher",
        "budget": 256, "gold": ["D1:30", "nope"]});
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces/n/compare",
        None,
        Some(req.clone()),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{body}");
    assert_eq!(results[0]["substrate"], "m2");
    assert_eq!(results[1]["substrate"], "m1-fill");
    for r in results {
        assert!(r["tokens"].as_u64().unwrap() <= 256, "{r}");
        assert!(r["text"].as_str().unwrap().contains("Ingrid"), "{r}");
        assert_eq!(r["gold"][0]["shown"], true, "{r}");
        assert_eq!(r["gold"][1]["shown"], false, "{r}");
        // Each gold id's fate, in the trace's words.
        assert_eq!(r["evidence"][0]["source_id"], "D1:30", "{r}");
        assert_eq!(r["evidence"][0]["shown"], "whole", "{r}");
        assert_eq!(r["evidence"][0]["fate"], "shown", "{r}");
        assert_eq!(r["evidence"][1]["stored"], false, "{r}");
        assert!(
            r["evidence"][1]["why"]
                .as_str()
                .unwrap()
                .starts_with("not in the history"),
            "{r}"
        );
        // The diff: every source is counted by the columns showing it.
        let by = r["shown_by"].as_array().unwrap();
        assert_eq!(by.len(), r["sources"].as_array().unwrap().len(), "{r}");
        assert!(
            by.iter().all(|n| (1..=2).contains(&n.as_u64().unwrap())),
            "{r}"
        );
        let only = by.iter().filter(|n| n.as_u64() == Some(1)).count();
        assert_eq!(r["only_here"]["sources"], only, "{r}");
    }
    let ingrid = |r: &serde_json::Value| {
        let i = r["sources"]
            .as_array()
            .unwrap()
            .iter()
            .position(|h| h["source_id"] == "D1:30")
            .unwrap();
        r["shown_by"][i].clone()
    };
    assert_eq!(ingrid(&results[0]), 2, "both show the fact: {body}");
    assert_eq!(body["question"], "who is my violin teacher");

    // A read asked to explain ids: a filler turn not shown at 64 tokens is
    // ranked, and the trace says where and why.
    let (st, traced) = call(
        &s,
        "POST",
        "/v1/namespaces/n/read",
        None,
        Some(json!({"question": "who is my violin teacher", "budget": 64,
            "trace": ["D1:30", "D1:7", "nope"]})),
    )
    .await;
    assert_eq!(st, 200, "{traced}");
    let ev = traced["evidence"].as_array().unwrap();
    assert_eq!(ev.len(), 3, "{traced}");
    assert_eq!(ev[0]["shown"], "whole", "{traced}");
    assert_eq!(ev[1]["shown"], "absent", "{traced}");
    assert!(ev[1]["fate"].is_string(), "{traced}");
    assert!(
        ev[1]["why"].as_str().unwrap().starts_with("not shown"),
        "{traced}"
    );
    assert_eq!(ev[2]["stored"], false, "{traced}");
    let (_, plain) = call(
        &s,
        "POST",
        "/v1/namespaces/n/read",
        None,
        Some(json!({"question": "who is my violin teacher", "budget": 64})),
    )
    .await;
    assert!(plain.get("evidence").is_none(), "{plain}");
    assert_eq!(
        plain["text"], traced["text"],
        "tracing does not change the read"
    );
    // The same history again: served from the cache, as the namespace's read.
    let (_, again) = call(&s, "POST", "/v1/namespaces/n/compare", None, Some(req)).await;
    assert_eq!(again["results"][0]["build_ms"], 0.0, "{again}");
    assert_eq!(again["results"][0]["text"], body["results"][0]["text"]);
    let (_, own) = call(
        &s,
        "POST",
        "/v1/namespaces/n/read",
        None,
        Some(json!({"question": "who is my violin teacher", "budget": 256})),
    )
    .await;
    assert_eq!(
        own["text"], body["results"][0]["text"],
        "m2 rebuilt reads as the namespace does"
    );

    for (bad, code) in [
        (
            json!({"substrates": ["nosuch"], "question": "q", "budget": 512}),
            400,
        ),
        (
            json!({"substrates": [], "question": "q", "budget": 512}),
            400,
        ),
        (
            json!({"substrates": ["m2", "m2", "m2", "m2", "m2"], "question": "q", "budget": 512}),
            400,
        ),
        (
            json!({"substrates": ["m2"], "question": "q", "budget": 1}),
            400,
        ),
        (
            json!({"substrates": ["m2"], "question": "q", "budget": 512, "extra": 1}),
            400,
        ),
    ] {
        let (st, body) = call(
            &s,
            "POST",
            "/v1/namespaces/n/compare",
            None,
            Some(bad.clone()),
        )
        .await;
        assert_eq!(st, code, "{bad}: {body}");
        assert!(body["error"]["code"].is_string(), "{bad}: {body}");
    }
    let (st, _) = call(
        &s,
        "POST",
        "/v1/namespaces/absent/compare",
        None,
        Some(json!({"substrates": ["m2"], "question": "q", "budget": 512})),
    )
    .await;
    assert_eq!(st, 404);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_reports_are_served_by_run_name_to_any_key() {
    let dir = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report");
    let run = reports.path().join("sweep");
    std::fs::create_dir_all(&run).unwrap();
    for f in ["summary.json", "items.jsonl"] {
        std::fs::copy(fixture.join(f), run.join(f)).unwrap();
    }
    let agentic = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agentic");
    std::fs::create_dir_all(reports.path().join("games")).unwrap();
    for f in ["agentic.json", "episodes.jsonl"] {
        std::fs::copy(agentic.join(f), reports.path().join("games").join(f)).unwrap();
    }
    std::fs::write(reports.path().join("secret.txt"), "not a report").unwrap();
    let mut config = ServerConfig::new().with_key("alice", "a-key", &["alice"]);
    config.reports_dir = Some(reports.path().to_path_buf());
    let s = start(dir.path(), config).await;

    let (st, _) = call(&s, "GET", "/v1/reports", None, None).await;
    assert_eq!(st, 401, "reports need a key");
    let (st, body) = call(&s, "GET", "/v1/reports", Some("a-key"), None).await;
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["configured"], true);
    let mut runs: Vec<(String, String, bool)> = body["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["kind"].as_str().unwrap().to_string(),
                r["items"].as_bool().unwrap(),
            )
        })
        .collect();
    runs.sort();
    assert_eq!(
        runs,
        vec![
            ("games".into(), "agentic".into(), true),
            ("sweep".into(), "qa".into(), true)
        ],
        "{body}"
    );
    let (st, cells) = call(&s, "GET", "/v1/reports/games/agentic", Some("a-key"), None).await;
    assert_eq!(st, 200, "{cells}");
    assert!(cells.is_object(), "{cells}");
    let episodes = s
        .client
        .get(s.url("/v1/reports/games/episodes"))
        .bearer_auth("a-key")
        .send()
        .await
        .unwrap();
    assert_eq!(episodes.status().as_u16(), 200);
    assert_eq!(episodes.text().await.unwrap().lines().count(), 8);
    // A QA run has no episodes, an agentic run no summary.
    for path in ["/v1/reports/sweep/episodes", "/v1/reports/games/summary"] {
        let (st, body) = call(&s, "GET", path, Some("a-key"), None).await;
        assert_eq!(st, 404, "{path}: {body}");
    }

    let (st, summary) = call(&s, "GET", "/v1/reports/sweep/summary", Some("a-key"), None).await;
    assert_eq!(st, 200);
    assert_eq!(summary["runs"].as_array().unwrap().len(), 12);
    let items = s
        .client
        .get(s.url("/v1/reports/sweep/items"))
        .bearer_auth("a-key")
        .send()
        .await
        .unwrap();
    assert_eq!(items.status().as_u16(), 200);
    assert_eq!(
        items.text().await.unwrap(),
        std::fs::read_to_string(fixture.join("items.jsonl")).unwrap()
    );
    // Nothing but a run's two files, and nothing outside the directory.
    for path in [
        "/v1/reports/nope/summary",
        "/v1/reports/..%2Fsweep/summary",
        "/v1/reports/.hidden/items",
    ] {
        let (st, body) = call(&s, "GET", path, Some("a-key"), None).await;
        assert_eq!(st, 404, "{path}: {body}");
        assert_eq!(body["error"]["code"], "report_not_found", "{path}");
    }
    s.stop().await;

    // Without a reports directory the list is empty and says so.
    let s = start(dir.path(), ServerConfig::new()).await;
    let (st, body) = call(&s, "GET", "/v1/reports", None, None).await;
    assert_eq!((st, body["configured"].clone()), (200, json!(false)));
    let (st, body) = call(&s, "GET", "/v1/reports/sweep/summary", None, None).await;
    assert_eq!(st, 404, "{body}");
    s.stop().await;

    // A reports directory that does not exist is refused at start.
    let mut config = ServerConfig::new();
    config.reports_dir = Some(reports.path().join("missing"));
    let err = submem_server::config::ServerConfig::validate(&config).unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
}

/// Polls job `id` until `done(job)` holds (at most 60 s).
async fn job_until(
    s: &crate::common::Running,
    id: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (st, job) = call(s, "GET", &format!("/v1/jobs/{id}"), None, None).await;
        assert_eq!(st, 200, "{job}");
        if done(&job) {
            return job;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "job {id} stuck: {job}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_build_runs_as_a_job_that_reports_progress_cancels_and_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new();
    // A comparison waits half the request timeout for its builds.
    config.request_timeout_s = 1;
    let s = start_with_llm(
        dir.path(),
        config,
        Some(Arc::new(SlowLlm(Duration::from_millis(40)))),
    )
    .await;
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces",
        None,
        Some(json!({"name": "n", "substrate": "m2"})),
    )
    .await;
    assert_eq!(st, 201, "{body}");
    let events: Vec<_> = (0..40)
        .map(|i| {
            turn(
                &format!("D1:{i}"),
                &format!("turn {i} about the weather and trains"),
            )
        })
        .collect();
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces/n/events",
        None,
        Some(json!({"events": events})),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    // A-Mem writes a note per turn with its memory LLM.
    let req = json!({"substrates": ["m2", "m4"], "question": "what about the trains",
        "budget": 512, "gold": ["D1:3"]});

    // The LLM-written build outlasts the wait: 202 with its job.
    let (st, pending) = call(
        &s,
        "POST",
        "/v1/namespaces/n/compare",
        None,
        Some(req.clone()),
    )
    .await;
    assert_eq!(st, 202, "{pending}");
    let jobs = pending["pending"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "m2 builds within the wait: {pending}");
    let job = jobs[0]["id"].as_str().unwrap().to_string();
    assert_eq!(jobs[0]["kind"], "build");
    assert_eq!(jobs[0]["substrate"], "m4");
    assert_eq!(jobs[0]["events"], 40);
    let moving = job_until(&s, &job, |j| j["events_done"].as_u64() > Some(0)).await;
    assert_eq!(moving["state"], "running", "{moving}");
    assert!(moving["elapsed_ms"].as_u64().is_some(), "{moving}");

    // Asked again meanwhile: the same job, not a second build.
    let (st, again) = call(
        &s,
        "POST",
        "/v1/namespaces/n/compare",
        None,
        Some(req.clone()),
    )
    .await;
    assert_eq!(st, 202, "{again}");
    assert_eq!(again["pending"][0]["id"], job.as_str());

    // Cancelled: the job says so, the comparison waiting on it says why.
    let (st, body) = call(&s, "DELETE", &format!("/v1/jobs/{job}"), None, None).await;
    assert_eq!(st, 200, "{body}");
    let cancelled = job_until(&s, &job, |j| j["state"] != "running").await;
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    assert!(cancelled["events_done"].as_u64() < Some(40), "{cancelled}");
    let (st, body) = call(&s, "DELETE", &format!("/v1/jobs/{job}"), None, None).await;
    assert_eq!(st, 400, "a finished job cannot be cancelled: {body}");
    let (st, body) = call(&s, "DELETE", "/v1/jobs/job-999", None, None).await;
    assert_eq!(st, 404, "{body}");

    // A rerun builds again, to the end; the next comparison is served from
    // the kept build.
    let (st, rerun) = call(
        &s,
        "POST",
        "/v1/namespaces/n/compare",
        None,
        Some(req.clone()),
    )
    .await;
    assert_eq!(st, 202, "{rerun}");
    let second = rerun["pending"][0]["id"].as_str().unwrap().to_string();
    assert_ne!(second, job, "a cancelled build is not reused");
    let done = job_until(&s, &second, |j| j["state"] != "running").await;
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["events_done"], 40, "{done}");
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces/n/compare",
        None,
        Some(req.clone()),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let notes = &body["results"][1];
    assert_eq!(notes["substrate"], "m4");
    assert!(notes["tokens"].as_u64().unwrap() <= 512, "{notes}");
    assert_eq!(
        notes["build_ms"], 0.0,
        "served from the kept build: {notes}"
    );
    assert!(done["elapsed_ms"].as_u64() > Some(0), "{done}");
    let (st, cached) = call(&s, "POST", "/v1/namespaces/n/compare", None, Some(req)).await;
    assert_eq!(st, 200, "{cached}");
    assert_eq!(cached["results"][1]["text"], notes["text"]);
    s.stop().await;
}

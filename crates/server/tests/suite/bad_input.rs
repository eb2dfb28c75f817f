#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Bad input: each case gets a 4xx with a stable code and a message that
//! names the problem, and the server keeps serving (a health check and a
//! good read after all of them). `cargo test -p submem-server --test
//! suite bad_input -- --nocapture` prints what a client sees for each case.

use crate::common::{call, start, turn};
use serde_json::{json, Value};
use submem_server::config::ServerConfig;

struct Case {
    name: &'static str,
    method: &'static str,
    path: String,
    key: Option<&'static str>,
    body: Body,
    status: u16,
    code: &'static str,
    needle: &'static str,
}

enum Body {
    None,
    Json(Value),
    Raw(Vec<u8>),
}

fn case(
    name: &'static str,
    method: &'static str,
    path: &str,
    body: Body,
    status: u16,
    code: &'static str,
    needle: &'static str,
) -> Case {
    Case {
        name,
        method,
        path: path.into(),
        key: Some("good"),
        body,
        status,
        code,
        needle,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_clear_4xx_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new().with_key("k", "good", &[""]);
    config.limits.max_batch = 10;
    config.limits.max_body_bytes = 64 << 10;
    config.limits.max_text_bytes = 4 << 10;
    let s = start(dir.path(), config).await;
    let (st, body) = call(
        &s,
        "POST",
        "/v1/namespaces",
        Some("good"),
        Some(json!({"name": "n", "substrate": "m2"})),
    )
    .await;
    assert_eq!(st, 201, "{body}");
    let ev = "/v1/namespaces/n/events";
    let rd = "/v1/namespaces/n/read";
    let many: Vec<Value> = (0..11).map(|i| turn(&format!("m{i}"), "x")).collect();
    let huge_body = format!(
        "{{\"events\": [{}]}}",
        json!(turn("h", &"a".repeat(100 << 10)))
    );
    let cases = vec![
        case(
            "malformed JSON",
            "POST",
            ev,
            Body::Raw(b"{\"events\": [".to_vec()),
            400,
            "invalid_json",
            "EOF",
        ),
        case(
            "empty body",
            "POST",
            ev,
            Body::Raw(Vec::new()),
            400,
            "invalid_json",
            "empty",
        ),
        case(
            "trailing garbage",
            "POST",
            rd,
            Body::Raw(b"{\"question\":\"q\",\"budget\":100} x".to_vec()),
            400,
            "invalid_json",
            "trailing",
        ),
        case(
            "wrong type: events is a string",
            "POST",
            ev,
            Body::Json(json!({"events": "hello"})),
            400,
            "invalid_json",
            "events",
        ),
        case(
            "unknown event kind",
            "POST",
            ev,
            Body::Json(json!({"events": [{"kind": "memo", "text": "x"}]})),
            400,
            "invalid_json",
            "unknown variant",
        ),
        case(
            "missing source_id",
            "POST",
            ev,
            Body::Json(
                json!({"events": [{"kind": "turn", "session_id": "s", "speaker": "a", "text": "x"}]}),
            ),
            400,
            "invalid_json",
            "source_id",
        ),
        case(
            "empty source_id",
            "POST",
            ev,
            Body::Json(json!({"events": [turn("", "x")]})),
            400,
            "bad_request",
            "source_id",
        ),
        case(
            "unknown field",
            "POST",
            rd,
            Body::Json(json!({"question": "q", "budget": 100, "colour": 1})),
            400,
            "invalid_json",
            "colour",
        ),
        case(
            "empty batch",
            "POST",
            ev,
            Body::Json(json!({"events": []})),
            400,
            "bad_request",
            "empty",
        ),
        case(
            "oversized batch",
            "POST",
            ev,
            Body::Json(json!({"events": many})),
            413,
            "too_large",
            "at most 10",
        ),
        case(
            "oversized body",
            "POST",
            ev,
            Body::Raw(huge_body.into_bytes()),
            413,
            "too_large",
            "too large",
        ),
        case(
            "oversized event text",
            "POST",
            ev,
            Body::Json(json!({"events": [turn("t", &"b".repeat(5000))]})),
            413,
            "too_large",
            "at most 4096",
        ),
        case(
            "repeated source id in a batch",
            "POST",
            ev,
            Body::Json(json!({"events": [turn("r", "x"), turn("r", "y")]})),
            409,
            "duplicate_source",
            "twice",
        ),
        case(
            "budget 0",
            "POST",
            rd,
            Body::Json(json!({"question": "q", "budget": 0})),
            400,
            "bad_request",
            "budget must be in",
        ),
        case(
            "budget huge",
            "POST",
            rd,
            Body::Json(json!({"question": "q", "budget": 1_000_000_000_000u64})),
            400,
            "bad_request",
            "budget must be in",
        ),
        case(
            "budget negative",
            "POST",
            rd,
            Body::Json(json!({"question": "q", "budget": -5})),
            400,
            "invalid_json",
            "budget",
        ),
        case(
            "budget as a string",
            "POST",
            rd,
            Body::Json(json!({"question": "q", "budget": "lots"})),
            400,
            "invalid_json",
            "budget",
        ),
        case(
            "k 0",
            "POST",
            rd,
            Body::Json(json!({"question": "q", "budget": 100, "k": 0})),
            400,
            "bad_request",
            "k must be",
        ),
        case(
            "no question",
            "POST",
            rd,
            Body::Json(json!({"budget": 100})),
            400,
            "bad_request",
            "question",
        ),
        case(
            "question and task",
            "POST",
            rd,
            Body::Json(json!({"question": "q", "task": "t", "budget": 100})),
            400,
            "bad_request",
            "cannot be combined",
        ),
        case(
            "lone surrogate",
            "POST",
            rd,
            Body::Raw(br#"{"question": "\ud800", "budget": 100}"#.to_vec()),
            400,
            "invalid_json",
            "escape",
        ),
        case(
            "invalid UTF-8",
            "POST",
            rd,
            Body::Raw(b"{\"question\": \"\xff\xfe\", \"budget\": 100}".to_vec()),
            400,
            "invalid_json",
            "invalid unicode",
        ),
        case(
            "unknown substrate",
            "POST",
            "/v1/namespaces",
            Body::Json(json!({"name": "x", "substrate": "m99"})),
            400,
            "bad_substrate",
            "known substrates",
        ),
        case(
            "policy file outside the policies directory",
            "POST",
            "/v1/namespaces",
            Body::Json(json!({"name": "x", "substrate": "router:policy=/etc/passwd"})),
            400,
            "bad_request",
            "policies directory",
        ),
        case(
            "policy file escaping with ..",
            "POST",
            "/v1/namespaces",
            Body::Json(json!({"name": "x", "substrate": "router:policy=../secret.json"})),
            400,
            "bad_request",
            "policies directory",
        ),
        case(
            "bad substrate setting",
            "POST",
            "/v1/namespaces",
            Body::Json(json!({"name": "x", "substrate": "m2:colour=red"})),
            400,
            "bad_substrate",
            "valid settings are",
        ),
        case(
            "substrate settings of the wrong type",
            "POST",
            "/v1/namespaces",
            Body::Json(
                json!({"name": "x", "substrate": {"name": "m2", "settings": {"fill": [1]}}}),
            ),
            400,
            "bad_substrate",
            "fill",
        ),
        case(
            "namespace with a control character",
            "POST",
            "/v1/namespaces",
            Body::Json(json!({"name": "a\u{1}b", "substrate": "m2"})),
            400,
            "bad_request",
            "control character",
        ),
        case(
            "namespace with a slash",
            "POST",
            "/v1/namespaces",
            Body::Json(json!({"name": "a/b", "substrate": "m2"})),
            400,
            "bad_request",
            "path separator",
        ),
        case(
            "empty namespace name",
            "POST",
            "/v1/namespaces",
            Body::Json(json!({"name": "", "substrate": "m2"})),
            400,
            "bad_request",
            "1..=256",
        ),
        case(
            "namespace name over 256 bytes",
            "POST",
            "/v1/namespaces",
            Body::Json(json!({"name": "é".repeat(129), "substrate": "m2"})),
            400,
            "bad_request",
            "1..=256",
        ),
        case(
            "namespace that exists",
            "POST",
            "/v1/namespaces",
            Body::Json(json!({"name": "n", "substrate": "m2"})),
            409,
            "namespace_exists",
            "already exists",
        ),
        case(
            "unknown namespace",
            "POST",
            "/v1/namespaces/ghost/read",
            Body::Json(json!({"question": "q", "budget": 100})),
            404,
            "namespace_not_found",
            "ghost",
        ),
        case(
            "unknown job",
            "GET",
            "/v1/jobs/job-999",
            Body::None,
            404,
            "job_not_found",
            "job-999",
        ),
        case(
            "unknown route",
            "GET",
            "/v2/everything",
            Body::None,
            404,
            "not_found",
            "no route",
        ),
        case(
            "wrong method",
            "PUT",
            "/v1/namespaces/n/read",
            Body::None,
            405,
            "method_not_allowed",
            "PUT",
        ),
        Case {
            key: None,
            ..case(
                "missing key",
                "GET",
                "/v1/namespaces",
                Body::None,
                401,
                "unauthorized",
                "Bearer",
            )
        },
        Case {
            key: Some("bad"),
            ..case(
                "wrong key",
                "GET",
                "/v1/namespaces",
                Body::None,
                401,
                "unauthorized",
                "unknown API key",
            )
        },
    ];
    let mut table = String::new();
    for c in &cases {
        let mut req = s.client.request(c.method.parse().unwrap(), s.url(&c.path));
        if let Some(k) = c.key {
            req = req.bearer_auth(k);
        }
        req = match &c.body {
            Body::None => req,
            Body::Json(v) => req.json(v),
            Body::Raw(b) => req
                .header("content-type", "application/json")
                .body(b.clone()),
        };
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap_or(Value::Null);
        let msg = body["error"]["message"].as_str().unwrap_or("");
        assert_eq!(status, c.status, "{}: {body}", c.name);
        assert_eq!(body["error"]["code"], c.code, "{}: {body}", c.name);
        assert!(
            msg.contains(c.needle),
            "{}: expected {:?} in {msg:?}",
            c.name,
            c.needle
        );
        let short: String = msg.chars().take(110).collect();
        table.push_str(&format!(
            "| {} | {status} `{}` | {} |\n",
            c.name,
            c.code,
            short.replace('|', "/")
        ));
    }
    println!("{table}");

    // A refused policy never shows the tenant where the server keeps its data.
    let root = dir.path().to_string_lossy().to_string();
    for spec in ["router:policy=/etc/passwd", "router:policy=missing.json"] {
        let (st, body) = call(
            &s,
            "POST",
            "/v1/namespaces",
            Some("good"),
            Some(json!({"name": "p", "substrate": spec})),
        )
        .await;
        assert_eq!(st, 400, "{spec}: {body}");
        assert!(
            !body.to_string().contains(&root),
            "{spec}: {body} names {root}"
        );
    }

    // Unicode edge cases that are valid are stored and recalled intact.
    let odd = "ﬁancée ‏שלום‎ e\u{301} zero\u{200b}width 🦀🏳️‍🌈 𝔘𝔫𝔦𝔠𝔬𝔡𝔢";
    let (st, body) = call(
        &s,
        "POST",
        ev,
        Some("good"),
        Some(json!({"events": [turn("u:1", odd)]})),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    let (st, body) = call(
        &s,
        "POST",
        rd,
        Some("good"),
        Some(json!({"question": "ﬁancée 🦀", "budget": 256})),
    )
    .await;
    assert_eq!(st, 200, "{body}");
    assert!(body["text"].as_str().unwrap().contains(odd), "{body}");
    // Still serving.
    let (st, _) = call(&s, "GET", "/healthz", None, None).await;
    assert_eq!(st, 200);
    s.stop().await;
}

#[test]
fn refuses_a_public_address_without_keys() {
    let e = submem_server::check_bind("0.0.0.0:8080".parse().unwrap(), false).unwrap_err();
    assert!(e.to_string().contains("without API keys"), "{e}");
    submem_server::check_bind("0.0.0.0:8080".parse().unwrap(), true).unwrap();
    submem_server::check_bind("[::1]:8080".parse().unwrap(), false).unwrap();
}

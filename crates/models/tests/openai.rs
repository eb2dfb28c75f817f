#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The OpenAI client against a real HTTP server (axum on 127.0.0.1:0).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use submem_core::{cosine, ChatMessage, ChatRequest, Embedder, Llm, ServiceError};
use submem_models::{OpenAiClient, OpenAiConfig};

#[derive(Clone, Copy)]
enum Mode {
    Ok,
    TooManyThenOk,
    AlwaysFail,
    Malformed,
    Slow,
}

#[derive(Clone)]
struct AppState {
    mode: Mode,
    hits: Arc<AtomicUsize>,
    last_body: Arc<std::sync::Mutex<Value>>,
    last_auth: Arc<std::sync::Mutex<Option<String>>>,
}

async fn chat(State(s): State<AppState>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let n = s.hits.fetch_add(1, Ordering::SeqCst);
    *s.last_body.lock().unwrap() = body.clone();
    *s.last_auth.lock().unwrap() = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match s.mode {
        Mode::TooManyThenOk if n == 0 => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "0")],
            "slow down",
        )
            .into_response(),
        Mode::AlwaysFail => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        Mode::Malformed => (StatusCode::OK, "{\"choices\": [ this is not json").into_response(),
        Mode::Slow => {
            // Far past the client's timeout, so that a loaded machine's
            // slowness cannot pass for the timeout working.
            tokio::time::sleep(Duration::from_secs(60)).await;
            Json(json!({})).into_response()
        }
        _ => Json(json!({
            "id": "x",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris."}}],
            "usage": {"prompt_tokens": 17, "completion_tokens": 2, "total_tokens": 19}
        }))
        .into_response(),
    }
}

async fn embeddings(State(s): State<AppState>, Json(body): Json<Value>) -> Response {
    s.hits.fetch_add(1, Ordering::SeqCst);
    let inputs = body["input"].as_array().cloned().unwrap_or_default();
    // Unnormalised vectors, returned in reverse order with their indices.
    let mut data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let len = t.as_str().unwrap_or("").len() as f32;
            json!({"object": "embedding", "index": i, "embedding": [3.0 * (i as f32 + 1.0), 4.0, len]})
        })
        .collect();
    data.reverse();
    Json(json!({"data": data, "model": body["model"]})).into_response()
}

async fn serve(mode: Mode) -> (String, AppState) {
    let state = AppState {
        mode,
        hits: Arc::new(AtomicUsize::new(0)),
        last_body: Arc::new(std::sync::Mutex::new(Value::Null)),
        last_auth: Arc::new(std::sync::Mutex::new(None)),
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/embeddings", post(embeddings))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), state)
}

fn client(base: &str, retries: u32) -> OpenAiClient {
    OpenAiClient::new(&OpenAiConfig {
        base_url: Some(base.to_string()),
        api_key: Some("sk-test".into()),
        chat_model: Some("test-chat".into()),
        embedding_model: Some("test-embed".into()),
        max_retries: retries,
        timeout_secs: 5,
        ..Default::default()
    })
    .unwrap()
    .with_backoff(Duration::from_millis(10))
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system("Be brief."),
        ChatMessage::user("Capital of France?"),
    ])
    .with_max_tokens(8)
}

#[tokio::test]
async fn normal_answer_with_usage_and_request_shape() {
    let (base, state) = serve(Mode::Ok).await;
    let c = client(&base, 2);
    let out = c
        .complete(&request().with_json(true).with_stop("\n").with_seed(3))
        .await
        .unwrap();
    assert_eq!(out.text, "Paris.");
    assert_eq!(out.usage.input_tokens, 17);
    assert_eq!(out.usage.output_tokens, 2);
    assert_eq!(state.hits.load(Ordering::SeqCst), 1);
    let body = state.last_body.lock().unwrap().clone();
    assert_eq!(body["model"], "test-chat");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["content"], "Capital of France?");
    assert_eq!(body["max_tokens"], 8);
    assert_eq!(body["response_format"]["type"], "json_object");
    assert_eq!(body["stop"][0], "\n");
    assert_eq!(body["seed"], 3);
    assert_eq!(
        state.last_auth.lock().unwrap().as_deref(),
        Some("Bearer sk-test")
    );
    // Without `json` there is no response_format.
    c.complete(&request()).await.unwrap();
    assert!(state
        .last_body
        .lock()
        .unwrap()
        .get("response_format")
        .is_none());
}

#[tokio::test]
async fn too_many_requests_then_success_is_retried() {
    let (base, state) = serve(Mode::TooManyThenOk).await;
    let out = client(&base, 3).complete(&request()).await.unwrap();
    assert_eq!(out.text, "Paris.");
    assert_eq!(state.hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn server_errors_are_retried_up_to_the_limit() {
    let (base, state) = serve(Mode::AlwaysFail).await;
    let err = client(&base, 2).complete(&request()).await.unwrap_err();
    match err {
        ServiceError::Http { status, body, .. } => {
            assert_eq!(status, 500);
            assert_eq!(body, "boom");
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(state.hits.load(Ordering::SeqCst), 3, "1 try + 2 retries");
}

#[tokio::test]
async fn malformed_json_is_malformed() {
    let (base, state) = serve(Mode::Malformed).await;
    let err = client(&base, 3).complete(&request()).await.unwrap_err();
    assert!(matches!(err, ServiceError::Malformed { .. }), "{err}");
    assert_eq!(state.hits.load(Ordering::SeqCst), 1, "not retried");
}

#[tokio::test]
async fn timeouts_are_transport_errors() {
    let (base, state) = serve(Mode::Slow).await;
    let c = client(&base, 1)
        .with_timeout(Duration::from_millis(200))
        .unwrap();
    let t = Instant::now();
    let err = c.complete(&request()).await.unwrap_err();
    assert!(matches!(err, ServiceError::Transport { .. }), "{err}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert_eq!(
        state.hits.load(Ordering::SeqCst),
        2,
        "a timeout is retried once"
    );
}

#[tokio::test]
async fn unreachable_server_is_transport() {
    // Bind then drop a listener to get a port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let err = client(&format!("http://127.0.0.1:{port}"), 1)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Transport { .. }), "{err}");
}

#[tokio::test]
async fn embeddings_are_ordered_normalised_and_sized() {
    let (base, _state) = serve(Mode::Ok).await;
    let c = client(&format!("{base}/v1"), 0);
    assert_eq!(c.dimension(), 0, "not known before the first answer");
    let texts = vec!["a".to_string(), "bbbb".to_string()];
    let v = c.embed(&texts).await.unwrap();
    assert_eq!(c.dimension(), 3);
    assert_eq!(v.len(), 2);
    for x in &v {
        assert!((cosine(x, x) - 1.0).abs() < 1e-6);
    }
    // Item 0 was [3, 4, 1]; the server sent it last.
    let n = (9.0f32 + 16.0 + 1.0).sqrt();
    assert!((v[0][0] - 3.0 / n).abs() < 1e-6);
    assert!(c.embed(&[]).await.unwrap().is_empty());
    assert_eq!(c.probe_dimension().await.unwrap(), 3);
}

#[tokio::test]
async fn missing_models_are_config_errors() {
    let (base, state) = serve(Mode::Ok).await;
    let c = OpenAiClient::new(&OpenAiConfig {
        base_url: Some(base),
        ..Default::default()
    })
    .unwrap();
    assert!(matches!(
        c.complete(&request()).await.unwrap_err(),
        ServiceError::Config(_)
    ));
    assert!(matches!(
        c.embed(&["x".to_string()]).await.unwrap_err(),
        ServiceError::Config(_)
    ));
    assert_eq!(state.hits.load(Ordering::SeqCst), 0);
}

//! A WebDriver client for the browser test: chromedriver started on a free
//! loopback port, a headless Chromium session, and the few commands the test
//! needs as plain JSON over HTTP (reqwest), so no client crate is needed.

use base64::Engine as _;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::port::loopback_port;

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub struct Driver {
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
    pub async fn start() -> Driver {
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

    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
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

    pub async fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url}))).await;
    }

    pub async fn find(&self, css: &str) -> String {
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
    pub async fn reveal(&self, css: &str) {
        let script = format!(
            "const e = document.querySelector({}); const s = e && e.closest('section[data-view]'); \
             if (s && s.hidden) document.querySelector('#views button[data-view=\"' + s.dataset.view + '\"]').click(); \
             return true",
            serde_json::to_string(css).unwrap()
        );
        self.js(&script).await;
    }

    pub async fn click(&self, css: &str) {
        self.reveal(css).await;
        let id = self.find(css).await;
        self.call("POST", &format!("/element/{id}/click"), None)
            .await;
    }

    pub async fn type_into(&self, css: &str, text: &str) {
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

    pub async fn js(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Polls `script` until it returns something truthy (10 s at most).
    pub async fn wait(&self, what: &str, script: &str) -> Value {
        self.wait_up_to(what, script, Duration::from_secs(10)).await
    }

    pub async fn wait_up_to(&self, what: &str, script: &str, most: Duration) -> Value {
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

    pub async fn screenshot(&self, path: &Path) {
        let v = self.call("GET", "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("base64 png"))
            .expect("a base64 screenshot");
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::write(path, png).unwrap();
    }

    pub async fn quit(self) {
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

pub fn shots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let d = target.join("ui-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

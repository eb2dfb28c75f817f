//! Prometheus text metrics (`GET /metrics`): requests by route and status,
//! request latency histograms by route, namespaces, pending jobs, and the
//! meters' per-phase calls, tokens and operation time summed over all
//! namespaces.
//!
//! No metric carries a namespace label: `/metrics` needs no key, and a
//! namespace name is a tenant's business. Per-namespace costs are at
//! `GET /v1/namespaces/{ns}/meter`, behind the caller's scope.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use submem::meter::Phase;

use crate::store::Store;

/// Upper bounds of the latency histogram buckets, seconds.
const BUCKETS: [f64; 10] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0,
];

#[derive(Debug, Default, Clone)]
struct RouteStats {
    by_status: BTreeMap<u16, u64>,
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Request counters.
#[derive(Debug, Default)]
pub struct Metrics {
    routes: Mutex<BTreeMap<(String, String), RouteStats>>,
}

fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// Counts one request.
    pub fn record(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let r = routes
            .entry((method.to_string(), route.to_string()))
            .or_default();
        *r.by_status.entry(status).or_default() += 1;
        r.count += 1;
        r.sum += secs;
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                r.buckets[i] += 1;
            }
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self, store: &Store) -> String {
        let mut out = String::new();
        let routes = self
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let _ = writeln!(
            out,
            "# HELP submem_http_requests_total HTTP requests by route and status."
        );
        let _ = writeln!(out, "# TYPE submem_http_requests_total counter");
        for ((m, r), s) in &routes {
            for (status, n) in &s.by_status {
                let _ = writeln!(
                    out,
                    "submem_http_requests_total{{method=\"{m}\",route=\"{}\",status=\"{status}\"}} {n}",
                    label(r)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP submem_http_request_duration_seconds HTTP request latency by route."
        );
        let _ = writeln!(out, "# TYPE submem_http_request_duration_seconds histogram");
        for ((m, r), s) in &routes {
            let l = format!("method=\"{m}\",route=\"{}\"", label(r));
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "submem_http_request_duration_seconds_bucket{{{l},le=\"{b}\"}} {}",
                    s.buckets[i]
                );
            }
            let _ = writeln!(
                out,
                "submem_http_request_duration_seconds_bucket{{{l},le=\"+Inf\"}} {}",
                s.count
            );
            let _ = writeln!(
                out,
                "submem_http_request_duration_seconds_sum{{{l}}} {}",
                s.sum
            );
            let _ = writeln!(
                out,
                "submem_http_request_duration_seconds_count{{{l}}} {}",
                s.count
            );
        }
        let spaces = store.all_resident();
        let _ = writeln!(
            out,
            "# HELP submem_namespaces_open Namespaces open on this node."
        );
        let _ = writeln!(out, "# TYPE submem_namespaces_open gauge");
        let _ = writeln!(out, "submem_namespaces_open {}", spaces.len());
        let resident: u64 = spaces.iter().map(|h| store.counted_bytes(h)).sum();
        let _ = writeln!(
            out,
            "# HELP submem_resident_bytes Memory counted against max_resident_mb (substrates' own count plus the per-namespace overhead)."
        );
        let _ = writeln!(out, "# TYPE submem_resident_bytes gauge");
        let _ = writeln!(out, "submem_resident_bytes {resident}");
        let stats = &store.stats;
        for (metric, help, value) in [
            (
                "submem_namespace_opens_total",
                "Cold opens (snapshot restored, log tail replayed).",
                stats.opens.load(std::sync::atomic::Ordering::Relaxed) as f64,
            ),
            (
                "submem_namespace_open_seconds_total",
                "Time spent in cold opens.",
                stats.open_ms.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e3,
            ),
            (
                "submem_namespace_closes_total",
                "Namespaces closed (idle, memory cap, lost lease, shutdown).",
                stats.closes.load(std::sync::atomic::Ordering::Relaxed) as f64,
            ),
        ] {
            let _ = writeln!(out, "# HELP {metric} {help}");
            let _ = writeln!(out, "# TYPE {metric} counter");
            let _ = writeln!(out, "{metric} {value}");
        }
        let (queued, running) = store.jobs.pending();
        let _ = writeln!(
            out,
            "# HELP submem_jobs Background jobs not finished, by state."
        );
        let _ = writeln!(out, "# TYPE submem_jobs gauge");
        let _ = writeln!(out, "submem_jobs{{state=\"queued\"}} {queued}");
        let _ = writeln!(out, "submem_jobs{{state=\"running\"}} {running}");

        let mut sums: BTreeMap<&str, [f64; 8]> = BTreeMap::new();
        for h in &spaces {
            let m = h.meter();
            for (name, phase) in [
                ("write", Phase::Write),
                ("read", Phase::Read),
                ("manage", Phase::Manage),
            ] {
                let p = m.phase(phase);
                let e = sums.entry(name).or_default();
                e[0] += p.operation_latency.count as f64;
                e[1] += p.operation_latency.total;
                e[2] += p.llm_calls as f64;
                e[3] += p.input_tokens as f64;
                e[4] += p.output_tokens as f64;
                e[5] += p.embed_calls as f64;
                e[6] += p.embed_items as f64;
                e[7] += p.embed_cached as f64;
            }
        }
        for (metric, i, help) in [
            (
                "submem_substrate_operations_total",
                0,
                "Substrate operations by phase.",
            ),
            (
                "submem_substrate_operation_seconds_total",
                1,
                "Time in substrate operations by phase.",
            ),
            ("submem_llm_calls_total", 2, "LLM calls by phase."),
            (
                "submem_llm_input_tokens_total",
                3,
                "LLM prompt tokens by phase.",
            ),
            (
                "submem_llm_output_tokens_total",
                4,
                "LLM generated tokens by phase.",
            ),
            ("submem_embed_calls_total", 5, "Embedding batches by phase."),
            (
                "submem_embed_texts_total",
                6,
                "Texts substrates asked to embed, by phase.",
            ),
            (
                "submem_embed_cached_total",
                7,
                "Of those, texts the embedding cache answered, by phase.",
            ),
        ] {
            let _ = writeln!(out, "# HELP {metric} {help}");
            let _ = writeln!(out, "# TYPE {metric} counter");
            for (phase, v) in &sums {
                let _ = writeln!(out, "{metric}{{phase=\"{phase}\"}} {}", v[i]);
            }
        }
        out
    }
}

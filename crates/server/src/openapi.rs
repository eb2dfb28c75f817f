//! The OpenAPI 3.1 document served at `/v1/openapi.json`, written by hand
//! in this one module. A test checks that its paths and methods are exactly
//! [`crate::app::ROUTES`], the routes the router serves.

use serde_json::{json, Value};

fn error_ref() -> Value {
    json!({"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

fn ok(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

fn body(schema: Value) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": schema}}})
}

fn op(
    summary: &str,
    params: &[&str],
    request: Option<Value>,
    responses: Value,
    auth: bool,
) -> Value {
    let mut o = json!({
        "summary": summary,
        "parameters": params.iter().map(|p| json!({
            "name": p, "in": "path", "required": true, "schema": {"type": "string"}
        })).collect::<Vec<_>>(),
        "responses": responses,
    });
    if let Some(r) = request {
        o["requestBody"] = r;
    }
    if !auth {
        o["security"] = json!([]);
    }
    o
}

fn schema(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn components() -> Value {
    json!({
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
            "description": "An API key from the server's configuration (absent when none is configured)."}},
        "schemas": {
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {
                "type": "object", "required": ["code", "message"], "properties": {
                    "code": {"type": "string", "description": "stable: bad_request, invalid_json, bad_substrate, unauthorized, forbidden, namespace_not_found, job_not_found, namespace_exists, duplicate_source, too_large, invalid_input, substrate_failed, storage_failed, namespace_closed, not_found, method_not_allowed"},
                    "message": {"type": "string"}}}}},
            "CreateNamespace": {"type": "object", "required": ["name", "substrate"], "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 256},
                "substrate": {"oneOf": [
                    {"type": "string", "examples": ["m2", "m1-fill:k=10"]},
                    {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string"},
                        "settings": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}}}]}}},
            "Namespace": {"type": "object", "required": ["name", "substrate", "background", "created_unix", "resident"], "properties": {
                "name": {"type": "string"}, "substrate": {"type": "string"}, "background": {"type": "boolean"},
                "created_unix": {"type": "integer"},
                "last_write_unix": {"type": "integer", "description": "when the log last changed (a write, a forget); absent before any"},
                "resident": {"type": "boolean", "description": "open on the node that answered; the counters below are present only then"},
                "events": {"type": "integer"}, "log_bytes": {"type": "integer"},
                "applied_offset": {"type": "integer"}, "snapshot_offset": {"type": "integer"}}},
            "Event": {"oneOf": [
                {"type": "object", "required": ["kind", "session_id", "speaker", "text", "source_id"], "properties": {
                    "kind": {"const": "turn"}, "session_id": {"type": "string"}, "session_date": {"type": "string"},
                    "speaker": {"type": "string"}, "text": {"type": "string"}, "source_id": {"type": "string"}}},
                {"type": "object", "required": ["kind", "step", "action", "observation", "source_id"], "properties": {
                    "kind": {"const": "step"}, "step": {"type": "integer", "minimum": 0}, "action": {"type": "string"},
                    "observation": {"type": "string"}, "source_id": {"type": "string"}}}]},
            "WriteRequest": {"type": "object", "required": ["events"], "properties": {
                "events": {"type": "array", "items": schema("Event")}}},
            "WriteReport": {"type": "object", "properties": {"events": {"type": "integer"}, "units": {"type": "integer"}}},
            "JobAccepted": {"type": "object", "properties": {"job": {"type": "string"}, "status_url": {"type": "string"}}},
            "ReadRequest": {"type": "object", "required": ["budget"], "properties": {
                "question": {"type": "string"}, "task": {"type": "string"}, "observation": {"type": "string"},
                "budget": {"type": "integer", "minimum": submem_core::query::MIN_BUDGET, "maximum": submem_core::query::MAX_BUDGET},
                "k": {"type": "integer", "minimum": 1, "maximum": crate::service::MAX_K},
                "fixed_prompt_tokens": {"type": "integer", "minimum": 0},
                "trace": {"type": "array", "items": {"type": "string"}, "description": "source ids to trace"}}},
            "ReadResponse": {"type": "object", "properties": {
                "text": {"type": "string"}, "tokens": {"type": "integer"},
                "sources": {"type": "array", "items": {"type": "object", "properties": {
                    "source_id": {"type": "string"}, "score": {"type": "number"},
                    "resolution": {"enum": ["record", "excerpt", "raw"]}}}},
                "trace": {"type": "object", "description": "the substrate's ranking trace (room, allowance, rank and room needed per id)"},
                "evidence": {"type": "array", "items": evidence_report(),
                    "description": "per traced id, in the order asked: how it was shown and why"},
                "latency_ms": {"type": "number"}}},
            "ForgetRequest": {"type": "object", "required": ["source_ids"], "properties": {
                "source_ids": {"type": "array", "items": {"type": "string"}}}},
            "Job": {"type": "object", "properties": {
                "id": {"type": "string"}, "namespace": {"type": "string"}, "kind": {"enum": ["write", "manage", "build"]},
                "substrate": {"type": "string", "description": "the substrate a comparison's build builds"},
                "state": {"enum": ["queued", "running", "done", "failed", "cancelled"]}, "events": {"type": "integer"},
                "events_done": {"type": "integer"}, "error": {"type": "string"},
                "created_unix": {"type": "integer"}, "finished_unix": {"type": "integer"},
                "elapsed_ms": {"type": "integer", "description": "how long a build has run"}}}
        }
    })
}

/// One traced id's fate ([`submem_core::EvidenceReport`]).
fn evidence_report() -> Value {
    json!({"type": "object", "required": ["source_id", "stored", "shown", "why"], "properties": {
        "source_id": {"type": "string"},
        "stored": {"type": "boolean", "description": "whether the history holds the event"},
        "shown": {"enum": ["whole", "part", "record", "absent"]},
        "listed": {"type": "object", "properties": {"position": {"type": "integer"},
            "score": {"type": "number"}, "resolution": {"enum": ["record", "excerpt", "raw"]}}},
        "ranked": {"type": "object", "properties": {"source_id": {"type": "string"},
            "rank": {"type": ["integer", "null"]}, "room_needed": {"type": ["integer", "null"]}}},
        "fate": {"enum": ["shown", "not_ranked", "ranked_too_low", "crowded_out", "fit_not_whole"]},
        "room": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
            "description": "[room the ranked items had, the most they could have had]"},
        "why": {"type": "string"}}})
}

/// The body of `POST /v1/namespaces/{ns}/compare`.
fn compare_request() -> Value {
    json!({"type": "object", "required": ["substrates", "question", "budget"], "properties": {
        "substrates": {"type": "array", "minItems": 1, "maxItems": 4,
            "items": {"oneOf": [{"type": "string"}, {"type": "object"}]}},
        "question": {"type": "string"}, "budget": {"type": "integer",
            "minimum": submem_core::query::MIN_BUDGET, "maximum": submem_core::query::MAX_BUDGET},
        "gold": {"type": "array", "items": {"type": "string"}}, "k": {"type": "integer", "minimum": 1}}})
}

/// Its answer.
fn compare_response() -> Value {
    let gold = json!({"type": "array", "items": {"type": "object", "properties": {
        "source_id": {"type": "string"}, "shown": {"type": "boolean"}, "whole": {"type": "boolean"}}}});
    let result = json!({"type": "object", "properties": {
        "substrate": {"type": "string"}, "text": {"type": "string"}, "tokens": {"type": "integer"},
        "sources": {"type": "array"}, "latency_ms": {"type": "number"}, "build_ms": {"type": "number"},
        "shown_by": {"type": "array", "items": {"type": "integer"},
            "description": "per source, how many of the compared substrates show it"},
        "only_here": {"type": "object", "properties": {"sources": {"type": "integer"},
            "raw_tokens": {"type": "integer", "description": "tokens of the whole turns no other substrate showed"}}},
        "gold": gold, "evidence": {"type": "array", "items": evidence_report()}}});
    json!({"type": "object", "properties": {"namespace": {"type": "string"},
        "question": {"type": "string"}, "budget": {"type": "integer"},
        "substrates": {"type": "integer"}, "results": {"type": "array", "items": result}}})
}

/// The document.
pub fn document() -> Value {
    let ns = &["ns"];
    let e = error_ref();
    let report_run = json!({"type": "object", "properties": {
        "name": {"type": "string"}, "kind": {"type": "string", "enum": ["qa", "agentic"]},
        "items": {"type": "boolean"}, "bytes": {"type": "integer"},
        "modified_unix": {"type": ["integer", "null"]}}});
    let obj = json!({"type": "object"});
    json!({
        "openapi": "3.1.0",
        "info": {"title": "submem", "version": env!("CARGO_PKG_VERSION"),
            "description": "Memory substrates for LLM agents as a service. A key sees only namespaces under its prefixes; others answer 404."},
        "security": [{"bearer": []}],
        "components": components(),
        "paths": {
            "/healthz": {"get": op("Liveness (answers at once; opens nothing)", &[], None, json!({"200": ok("alive", obj.clone())}), false)},
            "/readyz": {"get": op("Readiness: the store (data directory or database) answers", &[], None,
                json!({"200": ok("ready", obj.clone()), "503": ok("not ready", obj.clone())}), false)},
            "/metrics": {"get": op("Prometheus metrics (no namespace labels)", &[], None,
                json!({"200": {"description": "text exposition", "content": {"text/plain": {"schema": {"type": "string"}}}}}), false)},
            "/v1/openapi.json": {"get": op("This document", &[], None, json!({"200": ok("OpenAPI document", obj.clone())}), false)},
            "/v1/namespaces": {
                "get": op("The caller's namespaces", &[], None, json!({"200": ok("namespaces",
                    json!({"type": "object", "properties": {"namespaces": {"type": "array", "items": schema("Namespace")}}})), "401": e}), true),
                "post": op("Create a namespace bound to a substrate", &[], Some(body(schema("CreateNamespace"))),
                    json!({"201": ok("created", schema("Namespace")), "400": e, "401": e, "403": e, "409": e, "413": e}), true)
            },
            "/v1/namespaces/{ns}": {
                "get": op("A namespace", ns, None, json!({"200": ok("namespace", schema("Namespace")), "401": e, "404": e}), true),
                "delete": op("Delete a namespace, its log and snapshots", ns, None,
                    json!({"200": ok("deleted", obj.clone()), "401": e, "404": e}), true)
            },
            "/v1/namespaces/{ns}/events": {"get": {
                "summary": "The namespace's live logged events (written, not forgotten), oldest first, filtered by a case-insensitive text search",
                "parameters": [
                    {"name": "ns", "in": "path", "required": true, "schema": {"type": "string"}},
                    {"name": "q", "in": "query", "required": false, "schema": {"type": "string"},
                        "description": "keep events whose source id is it or lies under it at a `:` (D1 finds D1:2; D1:2 does not find D1:20) or whose content contains it (case-insensitive)"},
                    {"name": "offset", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 0, "default": 0}},
                    {"name": "limit", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}}],
                "responses": {"200": ok("events", json!({"type": "object", "properties": {
                    "total": {"type": "integer", "description": "events matching q"},
                    "offset": {"type": "integer"},
                    "events": {"type": "array", "items": {"type": "object", "description": "an event in the core shapes, as written"}}}})),
                    "400": e, "401": e, "404": e}},
                "post": op(
                "Write a batch of events; durable (fsynced) before the answer. 202 with a job for substrates that call an LLM",
                ns, Some(body(schema("WriteRequest"))),
                json!({"200": ok("applied", schema("WriteReport")), "202": ok("queued as a job", schema("JobAccepted")),
                    "400": e, "401": e, "404": e, "409": e, "413": e}), true)},
            "/v1/namespaces/{ns}/read": {"post": op("Recall memory under a token budget", ns, Some(body(schema("ReadRequest"))),
                json!({"200": ok("recall", schema("ReadResponse")), "400": e, "401": e, "404": e, "413": e}), true)},
            "/v1/namespaces/{ns}/compare": {"post": op(
                "Render the namespace's live history with 1 to 4 substrates (built from the registry by background jobs, kept per namespace, spec and log length) for one question and budget; each gold id's fate, and what each substrate shows that others do not",
                ns, Some(body(compare_request())),
                json!({"200": ok("one recall per substrate", compare_response()),
                    "202": ok("some substrates are still being built: follow their jobs, then ask again",
                        json!({"type": "object", "properties": {"namespace": {"type": "string"},
                            "question": {"type": "string"}, "budget": {"type": "integer"},
                            "pending": {"type": "array", "items": schema("Job")}}})),
                    "400": e, "401": e, "404": e, "413": e}), true)},
            "/v1/namespaces/{ns}/forget": {"post": op("Forget events by source id (durable)", ns, Some(body(schema("ForgetRequest"))),
                json!({"200": ok("forgotten", json!({"type": "object", "properties": {"forgotten": {"type": "integer"}}})),
                    "400": e, "401": e, "404": e, "413": e}), true)},
            "/v1/namespaces/{ns}/manage": {"post": op("Run a maintenance pass, then snapshot", ns, None,
                json!({"200": ok("done", json!({"type": "object", "properties": {"changed": {"type": "integer"}}})),
                    "202": ok("queued as a job", schema("JobAccepted")), "401": e, "404": e}), true)},
            "/v1/namespaces/{ns}/footprint": {"get": op("Size of the namespace's memory", ns, None,
                json!({"200": ok("footprint", obj.clone()), "401": e, "404": e}), true)},
            "/v1/namespaces/{ns}/meter": {"get": op("Per-phase calls, tokens and latency (the meter)", ns, None,
                json!({"200": ok("meter", obj.clone()), "401": e, "404": e}), true)},
            "/v1/jobs/{id}": {"get": op("A background job's state and progress", &["id"], None,
                json!({"200": ok("job", schema("Job")), "401": e, "404": e}), true),
                "delete": op("Cancel a comparison's build (kind build; writes cannot be cancelled)", &["id"], None,
                json!({"200": ok("the job, asked to stop", schema("Job")), "400": e, "401": e, "404": e}), true)},
            "/v1/reports": {"get": op("Bench report runs under the server's reports directory (any valid key)", &[], None,
                json!({"200": ok("runs", json!({"type": "object", "properties": {
                    "configured": {"type": "boolean"},
                    "runs": {"type": "array", "items": report_run}}})), "401": e}), true)},
            "/v1/reports/{run}/summary": {"get": op("A run's summary.json", &["run"], None,
                json!({"200": ok("summary.json", obj.clone()), "401": e, "404": e}), true)},
            "/v1/reports/{run}/items": {"get": {
                "summary": "A run's items.jsonl (one JSON object per line)",
                "parameters": [{"name": "run", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "items", "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}, "401": e, "404": e}}},
            "/v1/reports/{run}/agentic": {"get": op("An agentic run's agentic.json", &["run"], None,
                json!({"200": ok("agentic.json", obj.clone()), "401": e, "404": e}), true)},
            "/v1/reports/{run}/episodes": {"get": {
                "summary": "An agentic run's episodes.jsonl (one episode per line, every step)",
                "parameters": [{"name": "run", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "episodes", "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}, "401": e, "404": e}}}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::ROUTES;

    #[test]
    fn document_lists_exactly_the_served_routes() {
        let doc = document();
        let paths = doc["paths"].as_object().cloned().unwrap_or_default();
        let mut documented = Vec::new();
        for (p, item) in &paths {
            for m in item.as_object().cloned().unwrap_or_default().keys() {
                documented.push((m.clone(), p.clone()));
            }
        }
        let mut served: Vec<(String, String)> = ROUTES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        documented.sort();
        served.sort();
        assert_eq!(documented, served);
        // Every schema reference resolves.
        let text = doc.to_string();
        for piece in text.split("#/components/schemas/").skip(1) {
            let name: String = piece.chars().take_while(|c| c.is_alphanumeric()).collect();
            assert!(
                doc["components"]["schemas"][&name].is_object(),
                "missing schema {name}"
            );
        }
    }
}

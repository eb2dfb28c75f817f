#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Tenant isolation: 50 namespaces owned by three keys, randomised writes,
//! reads, forgets, deletes and listings from owners and strangers. Every
//! namespace's texts share the same vocabulary, so a leak would rank. Zero
//! leaks: a recall only ever shows its own namespace's live source ids, a
//! stranger gets `404 namespace_not_found` for everything (exactly as for a
//! name nobody uses), and a listing shows only the key's own namespaces.

use crate::common::{call, enc, start, turn};
use rand::{Rng, SeedableRng};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use submem_server::config::ServerConfig;

const KEYS: [&str; 3] = ["key-zero", "key-one", "key-two"];
const WORDS: [&str; 8] = [
    "violin", "teacher", "garden", "Lyon", "cat", "password", "birthday", "train",
];

fn owner_prefix(t: usize) -> String {
    format!("t{t}.")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tenant_sees_another_tenants_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::new();
    for (t, k) in KEYS.iter().enumerate() {
        config = config.with_key(&format!("tenant{t}"), k, &[&owner_prefix(t)]);
    }
    let s = start(dir.path(), config).await;
    let mut rng = rand_chacha_like(7);

    // 50 namespaces; names include unicode and characters that need
    // percent-encoding.
    let substrates = ["m2", "recent", "m1-fill", "m2:fill=true"];
    let mut owner: BTreeMap<String, usize> = BTreeMap::new();
    let mut live: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in 0..50 {
        let t = i % 3;
        let name = format!(
            "{}ns{i}{}",
            owner_prefix(t),
            if i % 7 == 0 { " é🦀?#" } else { "" }
        );
        let (st, body) = call(
            &s,
            "POST",
            "/v1/namespaces",
            Some(KEYS[t]),
            Some(json!({"name": name, "substrate": substrates[i % substrates.len()]})),
        )
        .await;
        assert_eq!(st, 201, "{body}");
        // A stranger may not create in another tenant's prefix.
        let other = (t + 1) % 3;
        let (st, body) = call(
            &s,
            "POST",
            "/v1/namespaces",
            Some(KEYS[other]),
            Some(json!({"name": format!("{name}-x"), "substrate": "m2"})),
        )
        .await;
        assert_eq!(
            (st, body["error"]["code"].as_str()),
            (403, Some("forbidden")),
            "{body}"
        );
        owner.insert(name.clone(), t);
        live.insert(name, BTreeSet::new());
    }
    let names: Vec<String> = owner.keys().cloned().collect();
    let mut counter = 0usize;
    let (mut leaks_checked, mut denied) = (0usize, 0usize);
    for _ in 0..400 {
        let name = &names[rng.random_range(0..names.len())];
        let own = owner[name];
        let k = if rng.random_bool(0.6) {
            own
        } else {
            rng.random_range(0..3)
        };
        let path = format!("/v1/namespaces/{}", enc(name));
        let stranger = k != own;
        match rng.random_range(0..10) {
            0..=4 => {
                let n = rng.random_range(1..4);
                let events: Vec<_> = (0..n)
                    .map(|_| {
                        counter += 1;
                        let text = format!(
                            "{} {} {} note{counter}",
                            WORDS[rng.random_range(0..8)],
                            WORDS[rng.random_range(0..8)],
                            WORDS[rng.random_range(0..8)]
                        );
                        turn(&format!("{name}:{counter}"), &text)
                    })
                    .collect();
                let ids: Vec<String> = events
                    .iter()
                    .map(|e| e["source_id"].as_str().unwrap().to_string())
                    .collect();
                let (st, body) = call(
                    &s,
                    "POST",
                    &format!("{path}/events"),
                    Some(KEYS[k]),
                    Some(json!({"events": events})),
                )
                .await;
                if stranger {
                    assert_eq!(
                        (st, body["error"]["code"].as_str()),
                        (404, Some("namespace_not_found")),
                        "{body}"
                    );
                    denied += 1;
                } else {
                    assert_eq!(st, 200, "{body}");
                    live.get_mut(name).unwrap().extend(ids);
                }
            }
            5..=7 => {
                let q = format!(
                    "{} {}",
                    WORDS[rng.random_range(0..8)],
                    WORDS[rng.random_range(0..8)]
                );
                let (st, body) = call(
                    &s,
                    "POST",
                    &format!("{path}/read"),
                    Some(KEYS[k]),
                    Some(json!({"question": q, "budget": 512, "k": 20})),
                )
                .await;
                if stranger {
                    assert_eq!(st, 404, "{body}");
                    denied += 1;
                } else {
                    assert_eq!(st, 200, "{body}");
                    for hit in body["sources"].as_array().unwrap() {
                        let id = hit["source_id"].as_str().unwrap();
                        assert!(
                            live[name].contains(id),
                            "leak or stale id {id} in {name}: {body}"
                        );
                        leaks_checked += 1;
                    }
                }
            }
            8 => {
                let victim = live[name].iter().next().cloned();
                let (st, body) = call(
                    &s,
                    "POST",
                    &format!("{path}/forget"),
                    Some(KEYS[k]),
                    Some(json!({"source_ids": victim.iter().collect::<Vec<_>>()})),
                )
                .await;
                if stranger {
                    assert_eq!(st, 404, "{body}");
                    denied += 1;
                } else {
                    assert_eq!(st, 200, "{body}");
                    if let Some(v) = victim {
                        assert_eq!(body["forgotten"], 1, "{body}");
                        live.get_mut(name).unwrap().remove(&v);
                    }
                }
            }
            _ => {
                if stranger {
                    for (m, p) in [
                        ("DELETE", path.clone()),
                        ("GET", path.clone()),
                        ("GET", format!("{path}/meter")),
                        ("GET", format!("{path}/footprint")),
                    ] {
                        let (st, body) = call(&s, m, &p, Some(KEYS[k]), None).await;
                        assert_eq!(
                            (st, body["error"]["code"].as_str()),
                            (404, Some("namespace_not_found")),
                            "{m} {p}: {body}"
                        );
                    }
                    denied += 1;
                } else {
                    let foot = format!("{path}/footprint");
                    let (st, body) = call(&s, "GET", &foot, Some(KEYS[k]), None).await;
                    assert_eq!(st, 200, "{body}");
                    assert_eq!(
                        body["events"].as_u64().unwrap() as usize,
                        live[name].len(),
                        "{body}"
                    );
                }
            }
        }
    }
    // Every namespace survived the strangers' deletes, and a listing shows
    // exactly the key's own.
    for (t, k) in KEYS.iter().enumerate() {
        let (st, body) = call(&s, "GET", "/v1/namespaces", Some(k), None).await;
        assert_eq!(st, 200);
        let listed: BTreeSet<String> = body["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap().to_string())
            .collect();
        let mine: BTreeSet<String> = owner
            .iter()
            .filter(|(_, o)| **o == t)
            .map(|(n, _)| n.clone())
            .collect();
        assert_eq!(listed, mine);
    }
    // A stranger's 404 is indistinguishable from a name nobody uses.
    let (_, unknown) = call(&s, "GET", "/v1/namespaces/t0.nobody", Some(KEYS[0]), None).await;
    let theirs = owner.iter().find(|(_, o)| **o == 1).unwrap().0;
    let (_, foreign) = call(
        &s,
        "GET",
        &format!("/v1/namespaces/{}", enc(theirs)),
        Some(KEYS[0]),
        None,
    )
    .await;
    assert_eq!(unknown["error"]["code"], "namespace_not_found");
    assert_eq!(unknown["error"]["code"], foreign["error"]["code"]);
    assert!(
        leaks_checked > 50 && denied > 50,
        "exercised: {leaks_checked} hits, {denied} denials"
    );
    s.stop().await;
}

fn rand_chacha_like(seed: u64) -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(seed)
}

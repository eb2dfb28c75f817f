//! Substrates built by name, so that a run is described by strings such as
//! `m1,m2,m10,flexa:ranking=hybrid,kappa=64`.
//!
//! | name | aliases | substrate | settings |
//! |---|---|---|---|
//! | `m1` | `dense` | [`submem_flat::DenseMemory`] (MiniLM + HNSW) | `exact_threshold`, `m`, `ef_construction`, `ef_search`, `embed_batch`, `fill=true\|false`, `candidates` |
//! | `m1-fill` | `dense-fill` | M1 showing ranked turns until the budget is spent ([`submem_flat::ReadDepth::Fill`]) | as `m1` |
//! | `m2` | `bm25`, `sparse` | [`submem_flat::SparseMemory`] (tantivy BM25) | `stopwords=true\|false`, `fill=true\|false`, `candidates` |
//! | `m2-fill` | `bm25-fill`, `sparse-fill` | M2 showing ranked turns until the budget is spent | as `m2` |
//! | `m3` | `gist`, `readagent` | [`submem_gist::GistIndex`] (rule gists and BM25 selection without a memory LLM) | `page_tokens`, `tiny_session_tokens`, `gist_words`, `max_expand`, `select_prompt_tokens`, `llm_select=true\|false`, `dedup_jaccard` |
//! | `m4` | `notes`, `amem`, `a-mem` | [`submem_notes::EvolvingNotes`] (A-Mem) | `k`, `links`, `expand`, `evolve` (cosine threshold), `evolve_neighbours`, `render=topk\|fit`, `fit_pool`, `e` |
//! | `m7` | `strategies`, `reasoningbank` | [`submem_refine::StrategyBank`] (distilled strategies) | `top_k`, `max_strategies`, `merge_threshold`, `rule_tokens`, `trajectory_tokens` |
//! | `m8` | `skills`, `memskill` | [`submem_refine::SkillBundles`] (skill bundles) | `bundle_size`, `join_threshold`, `max_bundles`, `merge_threshold`, `rule_tokens` |
//! | `m10` | `full` | [`submem_kv::FullContext`] | — |
//! | `flexa-paper` | — | FlexA-Mem as the paper writes it ([`submem_flexamem::FlexaConfig::paper`]) | as `flexa` |
//! | `flexa` | `flexamem`, `flexa-mem` | [`submem_flexamem::FlexaMem`] | `kappa`, `e` (excerpt tokens), `seeds` (alias `k`), `lambda`, `rho` (both modes), `piece_rho`, `mode=auto\|unit\|piece`, `ranking=bm25\|dense\|hybrid` (both modes), `piece_ranking`, `unit_tokens`, `agent_unit_tokens`, `links`, `merge_group`, `record_words`, `join=true\|false` |
//! | `m5` | `graph`, `lightrag` | [`submem_graph::GraphMemory`] (entity–relation graph + dense chunks, RRF) | see [`crate::registry_graph`] |
//! | `m6` | `raptor`, `tree` | [`submem_raptor::Raptor`] (leaves + GMM-clustered summaries, collapsed-tree read) | `leaf_tokens`, `dims`, `threshold`, `max_clusters`, `bic_sample`, `cluster_tokens`, `depth`, `min_nodes`, `summarizer=llm\|extractive`, `summary_tokens`, `summary_words`, `rebuild_fraction`, `drift_growth`, `dedup`, `fill=true\|false` |
//! | `m11` | `epicache`, `episodes` | [`submem_kv::EpiCache`] (k-means episodes, 25 % kept; KV caches prefilled with the memory LLM when it is local, and served as the recall's reader) | `k` (episodes), `segment`, `keep`, `kv_cache=true\|false`, `runs` |
//! | `m9` | `lora`, `adapter` | [`submem_lora::LoraMemory`] (LoRA on SmolLM2, needs the local weights) | `rank`, `alpha`, `epochs`, `batch`, `lr`, `max_seq_tokens`, `chunk_tokens`, `pairs`, `serve_stale`, `context`, `gguf` |
//! | `nomem` | `none` | [`NoMemory`], the paper's no-memory row | — |
//! | `recent` | `window` | [`RecentWindow`], newest events that fit | — |
//! | `router` | `routed` | [`submem_router::RoutedSubstrate`] over registry-built members | `policy`, `members`, `signals`, `agreement`, `margin`, `compose`, `share` ([`crate::registry_router`]) |
//!
//! Settings follow a colon as comma-separated `key=value` pairs. In a list,
//! a piece with `=` but no `:` continues the previous substrate's settings, so
//! `flexa:ranking=hybrid,kappa=64,m1` is two substrates.

use std::fmt;
use std::sync::Arc;

use submem_core::{Services, Substrate};
use submem_flat::{DenseConfig, DenseMemory, ReadDepth, SparseConfig, SparseMemory};
use submem_flexamem::{FlexaConfig, FlexaMem, Ranking, RecoveryMode};
use submem_gist::{GistConfig, GistIndex};
use submem_kv::{EpiCache, FullContext, FullContextConfig};

use crate::registry_kv::epicache_config;

use crate::baselines::{NoMemory, RecentWindow};
use crate::registry_notes::notes_config;
use submem_graph::GraphMemory;

use crate::registry_graph::graph_config;
use crate::registry_refine;
use crate::{BenchError, Result};
use submem_notes::EvolvingNotes;

/// A substrate name with its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubstrateSpec {
    /// The name as written (lower-cased), e.g. `flexa`.
    pub name: String,
    /// `key=value` settings in order.
    pub settings: Vec<(String, String)>,
}

impl fmt::Display for SubstrateSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        for (i, (k, v)) in self.settings.iter().enumerate() {
            write!(f, "{}{k}={v}", if i == 0 { ':' } else { ',' })?;
        }
        Ok(())
    }
}

impl SubstrateSpec {
    /// Parses one spec, `name` or `name:key=value,key=value`.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        let (name, rest) = match s.split_once(':') {
            Some((n, r)) => (n, Some(r)),
            None => (s, None),
        };
        if name.is_empty() {
            return Err(BenchError::InvalidOption(format!(
                "empty substrate name in {s:?}"
            )));
        }
        let mut spec = SubstrateSpec {
            name: name.to_ascii_lowercase(),
            settings: Vec::new(),
        };
        for kv in rest
            .unwrap_or("")
            .split(',')
            .filter(|x| !x.trim().is_empty())
        {
            spec.push_setting(kv)?;
        }
        Ok(spec)
    }

    fn push_setting(&mut self, kv: &str) -> Result<()> {
        let (k, v) = kv.split_once('=').ok_or_else(|| BenchError::BadSetting {
            substrate: self.name.clone(),
            setting: kv.into(),
            reason: "expected key=value".into(),
        })?;
        self.settings
            .push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        Ok(())
    }

    /// Parses a comma-separated list (see the module docs for how settings
    /// continue across commas).
    pub fn parse_list(s: &str) -> Result<Vec<Self>> {
        let mut out: Vec<SubstrateSpec> = Vec::new();
        for piece in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match out.last_mut() {
                Some(last) if piece.contains('=') && !piece.contains(':') => {
                    last.push_setting(piece)?
                }
                _ => out.push(SubstrateSpec::parse(piece)?),
            }
        }
        if out.is_empty() {
            return Err(BenchError::InvalidOption("no substrates given".into()));
        }
        Ok(out)
    }

    /// The value of setting `key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Parses setting `key` as `T`, with a clear error.
    pub fn parse_setting<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>>
    where
        T::Err: fmt::Display,
    {
        self.get(key)
            .map(|v| {
                v.parse::<T>().map_err(|e| BenchError::BadSetting {
                    substrate: self.name.clone(),
                    setting: format!("{key}={v}"),
                    reason: e.to_string(),
                })
            })
            .transpose()
    }

    /// Fails on any setting not in `allowed`.
    pub fn only(&self, allowed: &[&str]) -> Result<()> {
        match self
            .settings
            .iter()
            .find(|(k, _)| !allowed.contains(&k.as_str()))
        {
            Some((k, v)) => Err(BenchError::BadSetting {
                substrate: self.name.clone(),
                setting: format!("{k}={v}"),
                reason: if allowed.is_empty() {
                    "this substrate takes no settings".into()
                } else {
                    format!("known settings: {}", allowed.join(", "))
                },
            }),
            None => Ok(()),
        }
    }
}

/// Builds substrates from specs. The harness calls it once per substrate ×
/// conversation with services already wrapped by that instance's meter.
pub trait SubstrateFactory: Send + Sync {
    /// Canonical names (with aliases in parentheses) for error messages.
    fn known(&self) -> Vec<String>;
    /// Builds one instance. Returns [`BenchError::NeedsLlm`] when the
    /// substrate cannot work without `services.llm`.
    fn build(&self, spec: &SubstrateSpec, services: Services) -> Result<Arc<dyn Substrate>>;
    /// Checks a spec without building it (unknown names, bad settings).
    fn check(&self, spec: &SubstrateSpec) -> Result<()>;
}

/// The built-in registry.
#[derive(Debug, Default, Clone)]
pub struct Registry;

impl Registry {
    fn canonical(name: &str) -> Option<&'static str> {
        Some(match name {
            "m1" | "dense" => "m1",
            "m1-fill" | "dense-fill" => "m1-fill",
            "m2" | "bm25" | "sparse" => "m2",
            "m2-fill" | "bm25-fill" | "sparse-fill" => "m2-fill",
            "m3" | "gist" | "readagent" => "m3",
            "m4" | "notes" | "amem" | "a-mem" => "m4",
            "m7" | "strategies" | "reasoningbank" => "m7",
            "m8" | "skills" | "memskill" => "m8",
            "m10" | "full" | "full-context" => "m10",
            "m11" | "epicache" | "episodes" => "m11",
            "flexa" | "flexamem" | "flexa-mem" => "flexa",
            "flexa-paper" => "flexa-paper",
            "m5" | "graph" | "lightrag" => "m5",
            "m6" | "raptor" | "tree" => "m6",
            "m9" | "lora" | "adapter" => "m9",
            "nomem" | "none" | "no-memory" => "nomem",
            "recent" | "window" => "recent",
            "router" | "routed" => "router",
            _ => return None,
        })
    }

    fn unknown(&self, spec: &SubstrateSpec) -> BenchError {
        BenchError::UnknownSubstrate {
            name: spec.name.clone(),
            known: self.known().join(", "),
        }
    }
}

impl SubstrateFactory for Registry {
    fn known(&self) -> Vec<String> {
        [
            "m1 (dense)",
            "m1-fill (dense-fill)",
            "m2 (bm25, sparse)",
            "m2-fill (bm25-fill, sparse-fill)",
            "m3 (gist, readagent)",
            "m4 (notes, amem, a-mem)",
            "m7 (strategies, reasoningbank)",
            "m8 (skills, memskill)",
            "m10 (full)",
            "m11 (epicache, episodes)",
            "flexa (flexamem)",
            "flexa-paper",
            "m5 (graph, lightrag)",
            "m6 (raptor, tree)",
            "m9 (lora, adapter)",
            "nomem (none)",
            "recent (window)",
            "router (routed)",
        ]
        .map(String::from)
        .to_vec()
    }

    fn check(&self, spec: &SubstrateSpec) -> Result<()> {
        match Self::canonical(&spec.name) {
            Some("m1") => dense_config(spec, false).map(|_| ()),
            Some("m1-fill") => dense_config(spec, true).map(|_| ()),
            Some("m2") => sparse_config(spec, false).map(|_| ()),
            Some("m2-fill") => sparse_config(spec, true).map(|_| ()),
            Some("flexa") => flexa_config(spec, FlexaConfig::default()).map(|_| ()),
            Some("flexa-paper") => flexa_config(spec, FlexaConfig::paper()).map(|_| ()),
            Some("m3") => gist_config(spec).map(|_| ()),
            Some("m4") => notes_config(spec).map(|_| ()),
            Some("m5") => graph_config(spec).map(|_| ()),
            Some("m6") => crate::registry_raptor::raptor_config(spec).map(|_| ()),
            Some("m7") => registry_refine::strategy_config(spec).map(|_| ()),
            Some("m8") => registry_refine::skill_config(spec).map(|_| ()),
            Some("m11") => epicache_config(spec).map(|_| ()),
            Some("m9") => crate::registry_lora::lora_config(spec).map(|_| ()),
            Some("router") => crate::registry_router::check(spec),
            Some(_) => spec.only(&[]),
            None => Err(self.unknown(spec)),
        }
    }

    fn build(&self, spec: &SubstrateSpec, services: Services) -> Result<Arc<dyn Substrate>> {
        self.check(spec)?;
        Ok(match Self::canonical(&spec.name) {
            Some("m1") => Arc::new(DenseMemory::new(services, dense_config(spec, false)?)?),
            Some("m1-fill") => Arc::new(DenseMemory::new(services, dense_config(spec, true)?)?),
            Some("m2") => Arc::new(SparseMemory::new(services, sparse_config(spec, false)?)?),
            Some("m2-fill") => Arc::new(SparseMemory::new(services, sparse_config(spec, true)?)?),
            Some("m4") => Arc::new(EvolvingNotes::new(services, notes_config(spec)?)?),
            Some("m10") => Arc::new(FullContext::new(services, FullContextConfig::default())?),
            Some("flexa") => Arc::new(FlexaMem::new(
                services,
                flexa_config(spec, FlexaConfig::default())?,
            )?),
            Some("flexa-paper") => Arc::new(FlexaMem::new(
                services,
                flexa_config(spec, FlexaConfig::paper())?,
            )?),
            Some("m3") => Arc::new(GistIndex::new(services, gist_config(spec)?)?),
            Some("m5") => Arc::new(GraphMemory::new(services, graph_config(spec)?)?),
            Some("m6") => crate::registry_raptor::build_raptor(spec, services)?,
            Some(c @ ("m7" | "m8")) => registry_refine::build_refine(c, spec, services)?,
            Some("m11") => Arc::new(EpiCache::new(services, epicache_config(spec)?)?),
            Some("m9") => crate::registry_lora::build_lora(spec, services)?,
            Some("nomem") => Arc::new(NoMemory),
            Some("recent") => Arc::new(RecentWindow::new(services.tokens.clone())),
            Some("router") => crate::registry_router::build(self, spec, services)?,
            _ => return Err(self.unknown(spec)),
        })
    }
}

/// The read depth of a flat substrate: top-k unless the name (`*-fill`) or
/// `fill=true` asks for fill; `candidates=N` bounds a fill read.
fn read_depth(spec: &SubstrateSpec, fill_by_name: bool) -> Result<ReadDepth> {
    let fill = spec.parse_setting::<bool>("fill")?.unwrap_or(fill_by_name);
    let candidates = spec.parse_setting::<usize>("candidates")?;
    Ok(match (fill, candidates) {
        (false, None) => ReadDepth::TopK,
        (false, Some(_)) => {
            return Err(BenchError::BadSetting {
                substrate: spec.name.clone(),
                setting: spec.to_string(),
                reason: "candidates applies to fill reads only (fill=true or a *-fill name)".into(),
            })
        }
        (true, None) => ReadDepth::fill(),
        (true, Some(0)) => {
            return Err(BenchError::BadSetting {
                substrate: spec.name.clone(),
                setting: "candidates=0".into(),
                reason: "a fill read needs at least one candidate".into(),
            })
        }
        (true, Some(n)) => ReadDepth::Fill { max_candidates: n },
    })
}

fn dense_config(spec: &SubstrateSpec, fill: bool) -> Result<DenseConfig> {
    spec.only(&[
        "exact_threshold",
        "m",
        "ef_construction",
        "ef_search",
        "embed_batch",
        "fill",
        "candidates",
    ])?;
    let mut c = DenseConfig::default().with_depth(read_depth(spec, fill)?);
    if let Some(v) = spec.parse_setting("exact_threshold")? {
        c = c.with_exact_threshold(v);
    }
    if let Some(v) = spec.parse_setting("m")? {
        c = c.with_max_connections(v);
    }
    if let Some(v) = spec.parse_setting("ef_construction")? {
        c = c.with_ef_construction(v);
    }
    if let Some(v) = spec.parse_setting("ef_search")? {
        c = c.with_ef_search(v);
    }
    if let Some(v) = spec.parse_setting("embed_batch")? {
        c = c.with_embed_batch(v);
    }
    Ok(c)
}

fn sparse_config(spec: &SubstrateSpec, fill: bool) -> Result<SparseConfig> {
    spec.only(&["stopwords", "fill", "candidates"])?;
    let mut c = SparseConfig::default().with_depth(read_depth(spec, fill)?);
    if let Some(v) = spec.parse_setting::<bool>("stopwords")? {
        c = c.with_remove_stop_words(v);
    }
    Ok(c)
}

fn enum_setting<T>(spec: &SubstrateSpec, key: &str, options: &[(&str, T)]) -> Result<Option<T>>
where
    T: Copy,
{
    let Some(v) = spec.get(key) else {
        return Ok(None);
    };
    options
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(v))
        .map(|(_, t)| Some(*t))
        .ok_or_else(|| BenchError::BadSetting {
            substrate: spec.name.clone(),
            setting: format!("{key}={v}"),
            reason: format!(
                "expected one of {}",
                options
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

/// FlexA-Mem settings over `base` (the default or [`FlexaConfig::paper`]).
/// `rho` and `ranking` set both recovery modes; `piece_rho` and
/// `piece_ranking` set piece recovery alone.
fn flexa_config(spec: &SubstrateSpec, base: FlexaConfig) -> Result<FlexaConfig> {
    spec.only(&[
        "kappa",
        "e",
        "seeds",
        "k",
        "lambda",
        "rho",
        "piece_rho",
        "piece_ranking",
        "mode",
        "ranking",
        "unit_tokens",
        "agent_unit_tokens",
        "links",
        "merge_group",
        "record_words",
        "join",
    ])?;
    let mut c = base;
    if let Some(v) = spec.parse_setting("kappa")? {
        c = c.with_piece_tokens(v);
    }
    if let Some(v) = spec.parse_setting("e")? {
        c = c.with_excerpt_tokens(v);
    }
    if let Some(v) = spec.parse_setting("seeds")?.or(spec.parse_setting("k")?) {
        c = c.with_seeds(v);
    }
    if let Some(v) = spec.parse_setting("lambda")? {
        c = c.with_lambda(v);
    }
    if let Some(v) = spec.parse_setting("rho")? {
        c = c.with_rho(v).with_piece_rho(v);
    }
    if let Some(v) = spec.parse_setting("unit_tokens")? {
        c = c.with_conversation_unit_tokens(v);
    }
    if let Some(v) = spec.parse_setting("agent_unit_tokens")? {
        c = c.with_agent_unit_tokens(v);
    }
    if let Some(v) = spec.parse_setting("links")? {
        c = c.with_links(v);
    }
    if let Some(v) = spec.parse_setting("merge_group")? {
        c = c.with_merge_group(v);
    }
    if let Some(v) = spec.parse_setting("record_words")? {
        c = c.with_record_words(v);
    }
    if let Some(v) = spec.parse_setting("join")? {
        c = c.with_join_pieces(v);
    }
    let modes = [
        ("auto", RecoveryMode::Auto),
        ("unit", RecoveryMode::Unit),
        ("piece", RecoveryMode::Piece),
    ];
    if let Some(m) = enum_setting(spec, "mode", &modes)? {
        c = c.with_mode(m);
    }
    let rankings = [
        ("bm25", Ranking::Bm25),
        ("dense", Ranking::Dense),
        ("hybrid", Ranking::Hybrid),
    ];
    if let Some(r) = enum_setting(spec, "ranking", &rankings)? {
        c = c.with_ranking(r).with_piece_ranking(r);
    }
    if let Some(v) = spec.parse_setting("piece_rho")? {
        c = c.with_piece_rho(v);
    }
    if let Some(r) = enum_setting(spec, "piece_ranking", &rankings)? {
        c = c.with_piece_ranking(r);
    }
    c.validate().map_err(|e| BenchError::BadSetting {
        substrate: spec.name.clone(),
        setting: spec.to_string(),
        reason: e.to_string(),
    })?;
    Ok(c)
}

/// Settings of `m3` (see [`GistConfig`]).
fn gist_config(spec: &SubstrateSpec) -> Result<GistConfig> {
    spec.only(&[
        "page_tokens",
        "tiny_session_tokens",
        "gist_words",
        "max_expand",
        "select_prompt_tokens",
        "llm_select",
        "dedup_jaccard",
    ])?;
    let mut c = GistConfig::default();
    if let Some(v) = spec.parse_setting("page_tokens")? {
        c = c.with_page_tokens(v);
    }
    if let Some(v) = spec.parse_setting("tiny_session_tokens")? {
        c = c.with_tiny_session_tokens(v);
    }
    if let Some(v) = spec.parse_setting("gist_words")? {
        c = c.with_gist_words(v);
    }
    if let Some(v) = spec.parse_setting("max_expand")? {
        c = c.with_max_expand(v);
    }
    if let Some(v) = spec.parse_setting("select_prompt_tokens")? {
        c = c.with_select_prompt_tokens(v);
    }
    if let Some(v) = spec.parse_setting("llm_select")? {
        c = c.with_llm_select(v);
    }
    if let Some(v) = spec.parse_setting("dedup_jaccard")? {
        c = c.with_dedup_jaccard(v);
    }
    c.validate().map_err(|e| BenchError::BadSetting {
        substrate: spec.name.clone(),
        setting: spec.to_string(),
        reason: e.to_string(),
    })?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_with_settings() {
        let v = SubstrateSpec::parse_list("m1, M2,flexa:ranking=hybrid,kappa=64,m10").unwrap();
        let names: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            vec!["m1", "m2", "flexa:ranking=hybrid,kappa=64", "m10"]
        );
        assert_eq!(v[2].parse_setting::<usize>("kappa").unwrap(), Some(64));
        assert!(v[2].parse_setting::<usize>("ranking").is_err());
        assert!(SubstrateSpec::parse_list(" , ").is_err());
        assert!(SubstrateSpec::parse("flexa:kappa").is_err());
    }

    #[test]
    fn real_substrates_parse_their_settings() {
        let s = SubstrateSpec::parse("flexa:ranking=hybrid,kappa=32,mode=piece,rho=0.4").unwrap();
        let c = flexa_config(&s, FlexaConfig::default()).unwrap();
        assert!((c.piece_rho - 0.4).abs() < 1e-6 && c.piece_ranking == Ranking::Hybrid);
        let p = flexa_config(
            &SubstrateSpec::parse("flexa-paper:piece_rho=0.3").unwrap(),
            FlexaConfig::paper(),
        )
        .unwrap();
        assert!(
            (p.piece_rho - 0.3).abs() < 1e-6 && p.piece_ranking == Ranking::Bm25 && !p.join_pieces
        );
        assert_eq!(
            (c.piece_tokens, c.ranking, c.mode),
            (32, Ranking::Hybrid, RecoveryMode::Piece)
        );
        assert!((c.rho - 0.4).abs() < 1e-6);
        let e = Registry
            .check(&SubstrateSpec::parse("flexa:ranking=fuzzy").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("bm25, dense, hybrid"), "{e}");
        let e = Registry
            .check(&SubstrateSpec::parse("flexa:lambda=1.5").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("lambda"), "{e}");
        assert!(Registry
            .check(&SubstrateSpec::parse("m1:ef_search=32").unwrap())
            .is_ok());
        assert!(Registry
            .check(&SubstrateSpec::parse("bm25:stopwords=false").unwrap())
            .is_ok());
        assert!(Registry
            .check(&SubstrateSpec::parse("full").unwrap())
            .is_ok());
        assert!(Registry
            .check(&SubstrateSpec::parse("m10:x=1").unwrap())
            .is_err());
        let c =
            gist_config(&SubstrateSpec::parse("readagent:page_tokens=300,max_expand=3").unwrap())
                .unwrap();
        assert_eq!((c.page_tokens, c.max_expand), (300, 3));
        assert!(Registry
            .check(&SubstrateSpec::parse("gist:page_tokens=0").unwrap())
            .is_err());
        let c = epicache_config(&SubstrateSpec::parse("epicache:k=6,keep=0.5").unwrap()).unwrap();
        assert_eq!((c.episodes, c.keep_ratio), (6, 0.5));
        assert_eq!(c.reader_head.memory_intro, crate::reader::MEMORY_INTRO);
        assert!(Registry
            .check(&SubstrateSpec::parse("episodes:keep=2").unwrap())
            .is_err());
        assert!(Registry
            .check(&SubstrateSpec::parse("lora:rank=4,epochs=1,serve_stale=true").unwrap())
            .is_ok());
        assert!(Registry
            .check(&SubstrateSpec::parse("adapter:rank=0").unwrap())
            .is_err());
    }

    #[test]
    fn builds_every_known_substrate_with_test_services() {
        let services = submem_core::test_utils::test_services(None);
        for name in [
            "m1", "m1-fill", "m2", "m2-fill", "m3", "m5", "m6", "m7", "m8", "m10", "m11", "flexa",
            "nomem", "recent",
        ] {
            let s = Registry
                .build(&SubstrateSpec::parse(name).unwrap(), services.clone())
                .unwrap();
            assert!(!s.info().name.is_empty(), "{name}");
        }
    }

    #[test]
    fn fill_names_and_settings() {
        let depth = |s: &str| {
            let spec = SubstrateSpec::parse(s).unwrap();
            match Registry::canonical(&spec.name) {
                Some("m2") => sparse_config(&spec, false).map(|c| c.depth),
                Some("m2-fill") => sparse_config(&spec, true).map(|c| c.depth),
                Some("m1-fill") => dense_config(&spec, true).map(|c| c.depth),
                _ => dense_config(&spec, false).map(|c| c.depth),
            }
        };
        assert_eq!(depth("m2").unwrap(), ReadDepth::TopK);
        assert_eq!(depth("bm25-fill").unwrap(), ReadDepth::fill());
        assert_eq!(depth("m2:fill=true").unwrap(), ReadDepth::fill());
        assert_eq!(depth("m2-fill:fill=false").unwrap(), ReadDepth::TopK);
        assert_eq!(
            depth("m1-fill:candidates=300").unwrap(),
            ReadDepth::Fill {
                max_candidates: 300
            }
        );
        assert!(depth("m1:candidates=300").is_err());
        assert!(depth("m2-fill:candidates=0").is_err());
        assert!(depth("m2:fill=maybe").is_err());
        let services = submem_core::test_utils::test_services(None);
        let s = Registry
            .build(&SubstrateSpec::parse("m2-fill").unwrap(), services)
            .unwrap();
        assert_eq!(s.info().name, "sparse-bm25-fill");
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let e = Registry
            .check(&SubstrateSpec::parse("m99").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("m99") && e.contains("nomem"), "{e}");
        let e = Registry
            .check(&SubstrateSpec::parse("recent:k=3").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes no settings"), "{e}");
    }
}

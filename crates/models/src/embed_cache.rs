//! [`CachedEmbedder`]: each text embedded once. A content-addressed cache in
//! front of any [`Embedder`]: the key is the SHA-256 of the embedder's
//! identity (model, its files' fingerprint, dimension) and the text, the
//! value the vector's exact bits. Two tiers: a bounded in-process LRU shared
//! by every substrate of the process (so m1, hybrid, m5's chunks… of one run
//! embed a turn once), and an on-disk store under the cache directory
//! (`embeddings/<identity>/<ab>/<key>.f32`) that later runs, shards and
//! server cold opens reuse.
//!
//! The disk store is safe for concurrent processes: an entry is written to a
//! temporary file in its directory and renamed into place, so a reader sees
//! a whole entry or none, and a process killed mid-write leaves only a
//! temporary file nobody reads. Every entry carries its dimension and a
//! CRC-32 of its bytes: a corrupt or truncated entry (a bad disk, a copy cut
//! short) is detected, counted, logged, recomputed and overwritten, never
//! used. A store that cannot be written (read-only, full) degrades to the
//! in-process tier with a warning; embedding never fails because of the
//! cache.

use std::collections::HashMap;
use std::io::Write;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use lru::LruCache;
use sha2::{Digest, Sha256};
use submem_core::{EmbedCounts, Embedder, ServiceError};

/// Bytes that open every entry file (format version 1).
const MAGIC: &[u8; 4] = b"SME1";

/// A cache key: SHA-256 of the identity and the text.
type Key = [u8; 32];

/// Counts of a [`CachedEmbedder`] since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EmbedCacheStats {
    /// Texts answered from the in-process tier.
    pub memory_hits: u64,
    /// Texts answered from the disk store.
    pub disk_hits: u64,
    /// Texts the model computed.
    pub misses: u64,
    /// Disk entries found corrupt or truncated (recomputed, overwritten).
    pub corrupt: u64,
    /// Entries written to disk.
    pub written: u64,
}

/// An embedder whose vectors are cached by content (see the module docs).
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    identity: String,
    salt: Key,
    dimension: usize,
    memory: Option<Mutex<LruCache<Key, Arc<[f32]>>>>,
    dir: Option<PathBuf>,
    disk_ok: AtomicBool,
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    misses: AtomicU64,
    corrupt: AtomicU64,
    written: AtomicU64,
}

impl std::fmt::Debug for CachedEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedEmbedder")
            .field("identity", &self.identity)
            .field("dir", &self.dir)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl CachedEmbedder {
    /// Caches `inner`'s vectors under `identity` (what makes two embedders'
    /// vectors the same: model, weights, options). `root` is the on-disk
    /// store's directory (`None`: in-process only); `entries` bounds the
    /// in-process tier (0: no in-process tier).
    pub fn new(
        inner: Arc<dyn Embedder>,
        identity: impl Into<String>,
        root: Option<&Path>,
        entries: usize,
    ) -> Self {
        let dimension = inner.dimension();
        let identity = format!("{}|dim={dimension}", identity.into());
        let salt: Key = Sha256::digest(identity.as_bytes()).into();
        let dir = root.map(|r| r.join(hex(&salt[..8])));
        CachedEmbedder {
            inner,
            identity,
            salt,
            dimension,
            memory: NonZeroUsize::new(entries).map(|n| Mutex::new(LruCache::new(n))),
            dir,
            disk_ok: AtomicBool::new(true),
            memory_hits: AtomicU64::new(0),
            disk_hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
            written: AtomicU64::new(0),
        }
    }

    /// What the cache keys vectors by, besides the text.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The on-disk store's directory for this identity, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Counts since this cache was built.
    pub fn stats(&self) -> EmbedCacheStats {
        EmbedCacheStats {
            memory_hits: self.memory_hits.load(Ordering::Relaxed),
            disk_hits: self.disk_hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            corrupt: self.corrupt.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
        }
    }

    fn key(&self, text: &str) -> Key {
        let mut h = Sha256::new();
        h.update(self.salt);
        h.update(text.as_bytes());
        h.finalize().into()
    }

    /// The entry file of `key`.
    pub fn entry_path(&self, text: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| entry_path(d, &self.key(text)))
    }

    fn recall_memory(&self, key: &Key) -> Option<Arc<[f32]>> {
        let mut m = self
            .memory
            .as_ref()?
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        m.get(key).cloned()
    }

    fn remember(&self, key: Key, v: &[f32]) {
        if let Some(m) = &self.memory {
            m.lock()
                .unwrap_or_else(|e| e.into_inner())
                .put(key, Arc::from(v));
        }
    }

    fn read_disk(&self, key: &Key) -> Option<Vec<f32>> {
        let path = entry_path(self.dir.as_ref()?, key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "embedding cache entry unreadable; recomputing");
                return None;
            }
        };
        match decode(&bytes, self.dimension) {
            Ok(v) => Some(v),
            Err(why) => {
                self.corrupt.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(path = %path.display(), why, "corrupt embedding cache entry; recomputing it");
                None
            }
        }
    }

    fn store(&self, key: &Key, v: &[f32]) {
        let Some(dir) = &self.dir else { return };
        if !self.disk_ok.load(Ordering::Relaxed) {
            return;
        }
        let path = entry_path(dir, key);
        match write_entry(&path, v) {
            Ok(()) => {
                self.written.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                // One warning, then the in-process tier alone.
                if self.disk_ok.swap(false, Ordering::Relaxed) {
                    tracing::warn!(dir = %dir.display(), error = %e,
                        "the embedding cache cannot be written; caching in this process only");
                }
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn entry_path(dir: &Path, key: &Key) -> PathBuf {
    let name = hex(key);
    dir.join(&name[..2]).join(format!("{name}.f32"))
}

/// The bytes of an entry: magic, dimension (u32 LE), the floats' bits (LE),
/// CRC-32 of everything before it (u32 LE).
fn encode(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + 4 * v.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    for x in v {
        out.extend_from_slice(&x.to_bits().to_le_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8], dimension: usize) -> std::result::Result<Vec<f32>, &'static str> {
    if bytes.len() < 12 || &bytes[..4] != MAGIC {
        return Err("not an entry (bad header)");
    }
    let dim = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    if dim != dimension {
        return Err("wrong dimension");
    }
    if bytes.len() != 12 + 4 * dim {
        return Err("truncated");
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    let crc = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    if crc32fast::hash(body) != crc {
        return Err("checksum mismatch");
    }
    Ok(body[8..]
        .chunks_exact(4)
        .map(|c| f32::from_bits(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect())
}

fn write_entry(path: &Path, v: &[f32]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(&encode(v))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[async_trait]
impl Embedder for CachedEmbedder {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ServiceError> {
        self.embed_counted(texts).await.map(|(v, _)| v)
    }

    /// Answers what the tiers hold and embeds the rest in one batch (each
    /// distinct text once), then stores what was computed.
    async fn embed_counted(
        &self,
        texts: &[String],
    ) -> Result<(Vec<Vec<f32>>, EmbedCounts), ServiceError> {
        let keys: Vec<Key> = texts.iter().map(|t| self.key(t)).collect();
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        let mut todo: Vec<usize> = Vec::new();
        let mut first_of: HashMap<Key, usize> = HashMap::new();
        let mut cached = 0u64;
        for (i, key) in keys.iter().enumerate() {
            if let Some(v) = self.recall_memory(key) {
                self.memory_hits.fetch_add(1, Ordering::Relaxed);
                out[i] = Some(v.to_vec());
                cached += 1;
            } else if let Some(v) = self.read_disk(key) {
                self.disk_hits.fetch_add(1, Ordering::Relaxed);
                self.remember(*key, &v);
                out[i] = Some(v);
                cached += 1;
            } else if first_of.contains_key(key) {
                // The same text twice in one batch: computed once.
                cached += 1;
            } else {
                first_of.insert(*key, i);
                todo.push(i);
            }
        }
        if !todo.is_empty() {
            let batch: Vec<String> = todo.iter().map(|&i| texts[i].clone()).collect();
            let vectors = self.inner.embed(&batch).await?;
            if vectors.len() != batch.len() {
                return Err(ServiceError::Malformed {
                    service: self.inner.name().to_string(),
                    reason: format!("{} vectors for {} texts", vectors.len(), batch.len()),
                });
            }
            self.misses.fetch_add(todo.len() as u64, Ordering::Relaxed);
            for (&i, v) in todo.iter().zip(vectors) {
                self.store(&keys[i], &v);
                self.remember(keys[i], &v);
                out[i] = Some(v);
            }
        }
        // Repeats within the batch take their first occurrence's vector.
        for i in 0..texts.len() {
            if out[i].is_none() {
                let j = first_of[&keys[i]];
                out[i] = out[j].clone();
            }
        }
        let vectors: Vec<Vec<f32>> = out.into_iter().map(|v| v.unwrap_or_default()).collect();
        let counts = EmbedCounts {
            computed: texts.len() as u64 - cached,
            cached,
        };
        Ok((vectors, counts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use submem_core::test_utils::HashingEmbedder;

    fn cache(root: Option<&Path>, entries: usize) -> CachedEmbedder {
        CachedEmbedder::new(
            Arc::new(HashingEmbedder::new(64)),
            "hashing-64",
            root,
            entries,
        )
    }

    fn texts(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[tokio::test]
    async fn hits_are_bit_identical_and_counted() {
        let d = tempfile::tempdir().unwrap();
        let c = cache(Some(d.path()), 100);
        let t = texts(&[
            "the ferry leaves at noon",
            "Caroline paints",
            "the ferry leaves at noon",
        ]);
        let (first, counts) = c.embed_counted(&t).await.unwrap();
        assert_eq!(
            counts,
            EmbedCounts {
                computed: 2,
                cached: 1
            },
            "a repeat in a batch is computed once"
        );
        assert_eq!(first[0], first[2]);
        let (again, counts) = c.embed_counted(&t).await.unwrap();
        assert_eq!(
            counts,
            EmbedCounts {
                computed: 0,
                cached: 3
            }
        );
        let bits = |v: &Vec<Vec<f32>>| v.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&first), bits(&again));
        // A new process (a new cache on the same store) reads the disk.
        let c2 = cache(Some(d.path()), 100);
        let (third, counts) = c2.embed_counted(&t).await.unwrap();
        assert_eq!(counts.cached, 3);
        assert_eq!(bits(&first), bits(&third));
        assert_eq!(c2.stats().disk_hits, 2);
        let direct = HashingEmbedder::new(64).embed(&t).await.unwrap();
        assert_eq!(
            bits(&first),
            bits(&direct),
            "the cache returns what the model returns"
        );
    }

    #[tokio::test]
    async fn corrupt_and_truncated_entries_are_recomputed_and_reported() {
        let d = tempfile::tempdir().unwrap();
        let t = texts(&["Melanie ran a charity race", "a second text"]);
        let c = cache(Some(d.path()), 0);
        let (good, _) = c.embed_counted(&t).await.unwrap();
        let flip = c.entry_path(&t[0]).unwrap();
        let mut bytes = std::fs::read(&flip).unwrap();
        bytes[20] ^= 0x40;
        std::fs::write(&flip, &bytes).unwrap();
        let cut = c.entry_path(&t[1]).unwrap();
        let bytes = std::fs::read(&cut).unwrap();
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();

        let c2 = cache(Some(d.path()), 0);
        let (again, counts) = c2.embed_counted(&t).await.unwrap();
        assert_eq!(
            counts,
            EmbedCounts {
                computed: 2,
                cached: 0
            }
        );
        assert_eq!(again, good, "recomputed, not read from the bad entries");
        assert_eq!(c2.stats().corrupt, 2);
        // Overwritten: the next cache reads them whole.
        let c3 = cache(Some(d.path()), 0);
        let (_, counts) = c3.embed_counted(&t).await.unwrap();
        assert_eq!(counts.cached, 2);
        assert_eq!(c3.stats().corrupt, 0);
    }

    #[tokio::test]
    async fn identities_do_not_share_entries() {
        let d = tempfile::tempdir().unwrap();
        let a = cache(Some(d.path()), 10);
        let b = CachedEmbedder::new(
            Arc::new(HashingEmbedder::new(64)),
            "another model",
            Some(d.path()),
            10,
        );
        let t = texts(&["same text"]);
        a.embed_counted(&t).await.unwrap();
        let (_, counts) = b.embed_counted(&t).await.unwrap();
        assert_eq!(counts.cached, 0);
        assert_ne!(a.dir(), b.dir());
    }

    #[tokio::test]
    async fn an_unwritable_store_degrades_to_memory() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("a-file");
        std::fs::write(&file, "not a directory").unwrap();
        let c = cache(Some(&file), 10);
        let t = texts(&["one", "two"]);
        let (v, _) = c.embed_counted(&t).await.unwrap();
        let (w, counts) = c.embed_counted(&t).await.unwrap();
        assert_eq!(v, w);
        assert_eq!(counts.cached, 2, "the in-process tier still answers");
        assert_eq!(c.stats().written, 0);
    }

    #[test]
    fn entries_round_trip_every_bit() {
        let v = vec![0.0f32, -0.0, 1.5e-38, f32::MIN_POSITIVE, 0.123_456_79, -1.0];
        assert_eq!(
            decode(&encode(&v), v.len())
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>(),
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(decode(&encode(&v), 5), Err("wrong dimension"));
        assert_eq!(decode(b"junk", 6), Err("not an entry (bad header)"));
    }
}

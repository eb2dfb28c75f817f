//! **M8, skill bundles** (MemSkill with a zero-shot controller,
//! *Harness the Memory*'s M8, specified in `docs/METHODS.md`): experiences (every step, or turn, embedded) are
//! grouped into bundles and one LLM call per bundle writes its skill. A read
//! prefills every skill that fits the budget, most relevant first (cosine of
//! the query to the bundle's centroid), and leaves the choice to the reader:
//! there is no trained controller.
//!
//! - **Write.** Each new experience joins the nearest bundle when its cosine
//!   to the centroid is at least [`SkillConfig::join_threshold`]; the rest of
//!   the batch is clustered with k-means (linfa) into `ceil(n / bundle_size)`
//!   new bundles. New bundles get a skill at once; a joined bundle's skill is
//!   rewritten once it has grown by [`SkillConfig::rewrite_growth`].
//! - **Manage.** While there are more than [`SkillConfig::max_bundles`]
//!   bundles, the closest pair is merged when their centroids are close
//!   enough ([`SkillConfig::merge_threshold`]), else the least-used bundle
//!   (fewest reads showing it, then fewest experiences, then oldest) is pruned
//!   (its experiences stay, unbundled). Touched skills are rewritten.
//! - **Forget.** Forgotten experiences leave their bundles; a touched bundle
//!   gets the rule skill of its remaining experiences at once (so no
//!   forgotten text survives in an LLM-written skill) and its LLM skill is
//!   rewritten by the next `manage`.
//!
//! Deviations: the paper's bundles come from a global clustering; ours are
//! incremental (nearest-bundle join, k-means over the rest) so that earlier
//! skills are not rewritten by every write. Experiences do not wait for their
//! episode to end (a skill needs no outcome).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use submem_core::{
    cosine, l2_normalize, Event, Family, Footprint, Forget, ManageReport, Namespace, Query, Recall,
    Result, Services, Substrate, SubstrateInfo, WriteReport,
};
use submem_kit::spaces::Spaces;
use submem_kit::state::StateFile;

use crate::cluster::kmeans;
use crate::journal::{Entry, Journal};
use crate::pack::{embed, pack, rank_by_cosine, Item};
use crate::skill_writer::{rule_skill, write_skill, Skill};
use crate::space::{self, Derived};
use crate::{EpisodeConfig, SkillConfig};

/// [`crate::M8`] as a string, for errors.
pub(crate) const METHOD: &str = "M8";
/// Name written in the persisted manifest.
pub const STORE_NAME: &str = "M8 skill-bundles";
/// Version of the persisted format.
pub const FORMAT_VERSION: u32 = 1;
const STATE_FILE: &str = "skills.json";
/// The store as persisted: manifest name, format version, state file.
const STATE: StateFile = StateFile::new(STORE_NAME, FORMAT_VERSION, STATE_FILE);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Experience {
    vector: Vec<f32>,
    bundle: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Bundle {
    members: Vec<String>,
    centroid: Vec<f32>,
    skill: Option<Skill>,
    written_size: usize,
    uses: u64,
    stale: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Space {
    journal: Journal,
    experiences: BTreeMap<String, Experience>,
    bundles: BTreeMap<u64, Bundle>,
    next_bundle: u64,
}

impl Space {
    /// Files experience `id` (embedded as `vector`) under bundle `b`.
    fn join(&mut self, id: String, vector: Vec<f32>, b: u64) {
        if let Some(bundle) = self.bundles.get_mut(&b) {
            bundle.members.push(id.clone());
        }
        let experience = Experience {
            vector,
            bundle: Some(b),
        };
        self.experiences.insert(id, experience);
    }

    fn recentre(&mut self, id: u64) {
        let Some(b) = self.bundles.get(&id) else {
            return;
        };
        let dim = self
            .experiences
            .values()
            .next()
            .map_or(0, |e| e.vector.len());
        let mut c = vec![0.0f32; dim];
        for m in &b.members {
            if let Some(e) = self.experiences.get(m) {
                c.iter_mut().zip(&e.vector).for_each(|(a, x)| *a += x);
            }
        }
        l2_normalize(&mut c);
        if let Some(b) = self.bundles.get_mut(&id) {
            b.centroid = c;
        }
    }

    /// Members in write order, and nearest the centroid first.
    fn members(&self, id: u64) -> (Vec<Entry>, Vec<Entry>) {
        let Some(b) = self.bundles.get(&id) else {
            return (Vec::new(), Vec::new());
        };
        let in_time: Vec<Entry> = b
            .members
            .iter()
            .filter_map(|m| self.journal.entry(m).cloned())
            .collect();
        let mut nearest = in_time.clone();
        let score = |e: &Entry| {
            self.experiences
                .get(e.event.source_id())
                .map_or(-1.0, |x| cosine(&x.vector, &b.centroid))
        };
        nearest.sort_by(|a, b| {
            score(b)
                .total_cmp(&score(a))
                .then(a.position.cmp(&b.position))
        });
        (in_time, nearest)
    }
}

impl Derived for Space {
    fn journal(&self) -> &Journal {
        &self.journal
    }

    fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }

    fn check(&self) -> std::result::Result<(), String> {
        for (id, b) in &self.bundles {
            for m in &b.members {
                match self.experiences.get(m) {
                    Some(e) if e.bundle == Some(*id) => {}
                    _ => return Err(format!("bundle {id} names experience {m} it does not hold")),
                }
                if self.journal.entry(m).is_none() {
                    return Err(format!("experience {m} has no event"));
                }
            }
        }
        Ok(())
    }
}

/// Work for the skill writer: bundle, its member ids, members in write order
/// and nearest-first.
type Job = (u64, Vec<String>, Vec<Entry>, Vec<Entry>);

/// M8: skill bundles over clustered experiences.
pub struct SkillBundles {
    services: Services,
    config: SkillConfig,
    episodes: EpisodeConfig,
    spaces: Spaces<Space>,
}

submem_kit::debug_fields!(SkillBundles { config });

impl SkillBundles {
    /// Skill bundles using `services` (the LLM is optional: without it the
    /// rule skill is written).
    pub fn new(services: Services, config: SkillConfig) -> Result<Self> {
        config
            .validate()
            .map_err(|e| e.into_core(METHOD, "build"))?;
        Ok(SkillBundles {
            services,
            config,
            episodes: EpisodeConfig::default(),
            spaces: Spaces::new(),
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &SkillConfig {
        &self.config
    }

    /// Skills of `namespace` with their bundle sizes, oldest bundle first:
    /// for inspection and tests.
    pub fn skills(&self, namespace: &Namespace) -> Vec<(Skill, usize)> {
        self.spaces
            .read()
            .get(namespace)
            .map_or_else(Vec::new, |s| {
                s.bundles
                    .values()
                    .filter_map(|b| Some((b.skill.clone()?, b.members.len())))
                    .collect()
            })
    }

    fn job(space: &Space, id: u64) -> Option<Job> {
        let b = space.bundles.get(&id)?;
        let (in_time, nearest) = space.members(id);
        Some((id, b.members.clone(), in_time, nearest))
    }

    /// Writes skills for `jobs` of `ns`; returns how many were stored.
    async fn write_skills(&self, ns: &Namespace, jobs: Vec<Job>) -> Result<usize> {
        let mut written = 0;
        for (id, members, in_time, nearest) in jobs {
            let in_time: Vec<&Entry> = in_time.iter().collect();
            let nearest: Vec<&Entry> = nearest.iter().collect();
            let skill = write_skill(
                self.services.llm.as_ref(),
                &nearest,
                &in_time,
                &*self.services.tokens,
                &self.config,
            )
            .await;
            let mut spaces = self.spaces.write();
            if let Some(b) = spaces.get_mut(ns).and_then(|s| s.bundles.get_mut(&id)) {
                // A bundle changed meanwhile keeps its old skill and stays stale.
                if b.members == members {
                    b.skill = Some(skill);
                    b.written_size = members.len();
                    b.stale = false;
                    written += 1;
                }
            }
        }
        Ok(written)
    }
}

#[async_trait]
impl Substrate for SkillBundles {
    fn info(&self) -> SubstrateInfo {
        SubstrateInfo::new(crate::M8, Family::REFINEMENT, "skill-bundles")
            .with_llm(self.services.llm.is_some())
    }

    #[tracing::instrument(name = "m8.write", skip_all, fields(ns = %namespace, events = events.len()))]
    async fn write(&self, namespace: &Namespace, events: &[Event]) -> Result<WriteReport> {
        if events.is_empty() {
            return Ok(WriteReport::default());
        }
        self.spaces
            .read()
            .get(namespace)
            .map_or(Ok(()), |s| s.journal.validate(events))?;
        let texts: Vec<String> = events.iter().map(Event::content).collect();
        let vectors = embed(&*self.services.embedder, &texts).await?;
        let jobs = {
            let mut spaces = self.spaces.write();
            let space = spaces.entry(namespace.clone()).or_default();
            // Another task may have written the same ids since validation.
            space.journal.validate(events)?;
            space
                .journal
                .append(events, &*self.services.tokens, &self.episodes);
            let mut touched = BTreeSet::new();
            let mut loose: Vec<(String, Vec<f32>)> = Vec::new();
            for (e, v) in events.iter().zip(vectors) {
                let id = e.source_id().to_string();
                let best = space
                    .bundles
                    .iter()
                    .map(|(b, x)| (*b, cosine(&v, &x.centroid)))
                    .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
                match best {
                    Some((b, c)) if c >= self.config.join_threshold => {
                        space.join(id, v, b);
                        touched.insert(b);
                    }
                    _ => loose.push((id, v)),
                }
            }
            for b in &touched {
                space.recentre(*b);
            }
            let k = loose.len().div_ceil(self.config.bundle_size);
            let vecs: Vec<Vec<f32>> = loose.iter().map(|(_, v)| v.clone()).collect();
            let labels = kmeans(&vecs, k).map_err(|e| e.into_core(METHOD, "write"))?;
            let first_new = space.next_bundle;
            let clusters = labels.iter().copied().max().map_or(0, |m| m + 1);
            for _ in 0..clusters {
                space.bundles.insert(
                    space.next_bundle,
                    Bundle {
                        members: Vec::new(),
                        centroid: Vec::new(),
                        skill: None,
                        written_size: 0,
                        uses: 0,
                        stale: true,
                    },
                );
                space.next_bundle += 1;
            }
            for ((id, v), label) in loose.into_iter().zip(labels) {
                space.join(id, v, first_new + label as u64);
            }
            let growth = 1.0 + self.config.rewrite_growth;
            let mut ids: Vec<u64> = (first_new..space.next_bundle).collect();
            for b in &touched {
                space.recentre(*b);
            }
            for b in (first_new..space.next_bundle).collect::<Vec<_>>() {
                space.recentre(b);
            }
            ids.extend(touched.into_iter().filter(|b| {
                space.bundles.get(b).is_some_and(|x| {
                    x.skill.is_none() || x.members.len() as f32 >= x.written_size as f32 * growth
                })
            }));
            ids.into_iter()
                .filter_map(|b| Self::job(space, b))
                .collect::<Vec<_>>()
        };
        let units = self.write_skills(namespace, jobs).await?;
        Ok(WriteReport {
            events: events.len(),
            units,
        })
    }

    #[tracing::instrument(name = "m8.read", skip_all, fields(ns = %query.namespace))]
    async fn read(&self, query: &Query) -> Result<Recall> {
        query.validate()?;
        let empty = self
            .spaces
            .read()
            .get(&query.namespace)
            .is_none_or(|s| s.bundles.values().all(|b| b.skill.is_none()));
        if empty {
            return Ok(Recall::empty());
        }
        let q = embed(&*self.services.embedder, &[query.retrieval_text()]).await?;
        let Some(qv) = q.first() else {
            return Ok(Recall::empty());
        };
        let (items, ids): (Vec<Item>, Vec<u64>) = {
            let spaces = self.spaces.read();
            let Some(space) = spaces.get(&query.namespace) else {
                return Ok(Recall::empty());
            };
            let with_skill: Vec<(u64, &Bundle)> = space
                .bundles
                .iter()
                .filter(|(_, b)| b.skill.is_some())
                .map(|(id, b)| (*id, b))
                .collect();
            let centroids: Vec<&[f32]> = with_skill
                .iter()
                .map(|(_, b)| b.centroid.as_slice())
                .collect();
            rank_by_cosine(qv, &centroids)
                .into_iter()
                .filter_map(|(i, score)| {
                    let (id, b) = with_skill[i];
                    Some((
                        Item {
                            text: b.skill.as_ref()?.text.clone(),
                            score,
                            sources: b.members.clone(),
                        },
                        id,
                    ))
                })
                .unzip()
        };
        let (recall, shown) = pack(&items, &*self.services.tokens, query.allowance());
        if !shown.is_empty() {
            let mut spaces = self.spaces.write();
            if let Some(space) = spaces.get_mut(&query.namespace) {
                for i in shown {
                    if let Some(b) = space.bundles.get_mut(&ids[i]) {
                        b.uses += 1;
                    }
                }
            }
        }
        Ok(recall)
    }

    #[tracing::instrument(name = "m8.manage", skip_all)]
    async fn manage(&self) -> Result<ManageReport> {
        let mut changed = 0;
        let work: Vec<(Namespace, Vec<Job>)> = {
            let mut spaces = self.spaces.write();
            let mut work = Vec::new();
            for (ns, space) in spaces.iter_mut() {
                changed += shrink(space, &self.config);
                let stale: Vec<u64> = space
                    .bundles
                    .iter()
                    .filter(|(_, b)| b.stale || b.skill.is_none())
                    .map(|(id, _)| *id)
                    .collect();
                let jobs: Vec<Job> = stale
                    .into_iter()
                    .filter_map(|b| Self::job(space, b))
                    .collect();
                if !jobs.is_empty() {
                    work.push((ns.clone(), jobs));
                }
            }
            work.sort_by(|a, b| a.0.cmp(&b.0));
            work
        };
        for (ns, jobs) in work {
            changed += self.write_skills(&ns, jobs).await?;
        }
        Ok(ManageReport { changed })
    }

    fn footprint(&self) -> Footprint {
        self.spaces.footprint(|_, s| {
            let mut fp = space::journal_footprint(&s.journal);
            fp.memory_bytes += s
                .experiences
                .iter()
                .map(|(k, e)| (k.len() + e.vector.len() * 4 + 48) as u64)
                .sum::<u64>();
            for b in s.bundles.values() {
                let text = b.skill.as_ref().map_or("", |k| k.text.as_str());
                fp.stored_tokens += self.services.tokens.count(text) as u64;
                fp.memory_bytes += (text.len()
                    + b.centroid.len() * 4
                    + b.members.iter().map(|m| m.len() + 24).sum::<usize>()
                    + 64) as u64;
            }
            fp
        })
    }

    #[tracing::instrument(name = "m8.persist", skip_all, fields(dir = %dir.display()))]
    async fn persist(&self, dir: &Path) -> Result<()> {
        self.spaces
            .save(&STATE, dir, Some(&*self.services.embedder))
    }

    #[tracing::instrument(name = "m8.restore", skip_all, fields(dir = %dir.display()))]
    async fn restore(&self, dir: &Path) -> Result<()> {
        space::restore(&self.spaces, &STATE, dir, &*self.services.embedder)
    }

    #[tracing::instrument(name = "m8.forget", skip_all, fields(ns = %target.namespace()))]
    async fn forget(&self, target: &Forget) -> Result<usize> {
        Ok(space::forget(&self.spaces, target, |space, source_ids| {
            let (n, _) = space.journal.forget(source_ids);
            let mut touched = BTreeSet::new();
            for id in source_ids {
                if let Some(b) = space.experiences.remove(id).and_then(|e| e.bundle) {
                    if let Some(bundle) = space.bundles.get_mut(&b) {
                        bundle.members.retain(|m| m != id);
                    }
                    touched.insert(b);
                }
            }
            for b in touched {
                if space.bundles.get(&b).is_some_and(|x| x.members.is_empty()) {
                    space.bundles.remove(&b);
                    continue;
                }
                space.recentre(b);
                let (in_time, _) = space.members(b);
                let refs: Vec<&Entry> = in_time.iter().collect();
                let skill = rule_skill(&refs, &*self.services.tokens, &self.config);
                if let Some(bundle) = space.bundles.get_mut(&b) {
                    bundle.skill = Some(skill);
                    bundle.stale = true;
                }
            }
            n
        }))
    }
}

/// Brings `space` down to the bundle cap: merge the closest pair when close
/// enough, else prune the least used. Returns merges + prunes.
fn shrink(space: &mut Space, config: &SkillConfig) -> usize {
    let mut changed = 0;
    while space.bundles.len() > config.max_bundles {
        let ids: Vec<u64> = space.bundles.keys().copied().collect();
        let mut best: Option<(u64, u64, f32)> = None;
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                let c = cosine(&space.bundles[a].centroid, &space.bundles[b].centroid);
                if best.is_none_or(|(_, _, x)| c > x) {
                    best = Some((*a, *b, c));
                }
            }
        }
        match best {
            Some((a, b, c)) if c >= config.merge_threshold => {
                if let Some(gone) = space.bundles.remove(&b) {
                    for m in &gone.members {
                        if let Some(e) = space.experiences.get_mut(m) {
                            e.bundle = Some(a);
                        }
                    }
                    if let Some(keep) = space.bundles.get_mut(&a) {
                        keep.members.extend(gone.members);
                        keep.uses += gone.uses;
                        keep.stale = true;
                    }
                    let order: HashMap<String, u64> = space
                        .journal
                        .entries()
                        .iter()
                        .map(|e| (e.event.source_id().to_string(), e.position))
                        .collect();
                    if let Some(keep) = space.bundles.get_mut(&a) {
                        keep.members
                            .sort_by_key(|m| order.get(m).copied().unwrap_or(u64::MAX));
                    }
                    space.recentre(a);
                }
            }
            _ => {
                let victim = space
                    .bundles
                    .iter()
                    .min_by_key(|(id, b)| (b.uses, b.members.len(), **id))
                    .map(|(id, _)| *id);
                if let Some(v) = victim.and_then(|v| space.bundles.remove(&v)) {
                    for m in &v.members {
                        if let Some(e) = space.experiences.get_mut(m) {
                            e.bundle = None;
                        }
                    }
                }
            }
        }
        changed += 1;
    }
    changed
}

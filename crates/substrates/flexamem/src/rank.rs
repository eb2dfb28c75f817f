//! Ranking pieces against a query: BM25 with the paper's tie-breaks (cosine,
//! then the earlier piece), dense cosine, or their reciprocal rank fusion
//! (k = 60). Vectors of pieces are looked up in a cache; a ranking that needs
//! a missing vector reports it instead of guessing, and the caller embeds it
//! and ranks again.

use std::collections::HashMap;
use submem_core::cosine;

use crate::state::PieceKey;
use crate::Ranking;

/// Reciprocal rank fusion constant.
pub const RRF_K: f32 = 60.0;

/// A ranked piece with the score that ranked it.
pub type Ranked = (PieceKey, f32);

/// Ranks `items` (piece key and BM25 score, in time order) best first.
/// BM25 drops pieces that match nothing; dense and hybrid keep every piece.
/// `Err` lists the pieces whose vectors are needed.
pub fn rank_pieces<'v>(
    items: &[(PieceKey, f32)],
    ranking: Ranking,
    vec_of: &dyn Fn(PieceKey) -> Option<&'v [f32]>,
    qvec: &[f32],
) -> Result<Vec<Ranked>, Vec<PieceKey>> {
    match ranking {
        Ranking::Bm25 => bm25_ranking(items, vec_of, qvec),
        Ranking::Dense => dense_ranking(items, vec_of, qvec),
        Ranking::Hybrid => {
            let sparse = bm25_ranking(items, vec_of, qvec);
            let dense = dense_ranking(items, vec_of, qvec);
            let (sparse, dense) = match (sparse, dense) {
                (Ok(s), Ok(d)) => (s, d),
                (Err(mut a), Err(b)) => {
                    a.extend(b);
                    a.sort_unstable();
                    a.dedup();
                    return Err(a);
                }
                (Err(a), _) | (_, Err(a)) => return Err(a),
            };
            let mut fused: HashMap<PieceKey, f32> = HashMap::new();
            for list in [&sparse, &dense] {
                for (rank, (k, _)) in list.iter().enumerate() {
                    *fused.entry(*k).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
                }
            }
            let mut out: Vec<Ranked> = fused.into_iter().collect();
            out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            Ok(out)
        }
    }
}

fn bm25_ranking<'v>(
    items: &[(PieceKey, f32)],
    vec_of: &dyn Fn(PieceKey) -> Option<&'v [f32]>,
    qvec: &[f32],
) -> Result<Vec<Ranked>, Vec<PieceKey>> {
    let mut pos: Vec<Ranked> = items.iter().copied().filter(|(_, s)| *s > 0.0).collect();
    pos.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Ties need the cosine of the tied pieces.
    let mut missing = Vec::new();
    let mut cos: HashMap<PieceKey, f32> = HashMap::new();
    let mut i = 0;
    while i < pos.len() {
        let mut j = i + 1;
        while j < pos.len() && pos[j].1 == pos[i].1 {
            j += 1;
        }
        if j - i > 1 {
            for (k, _) in &pos[i..j] {
                match vec_of(*k) {
                    Some(v) => {
                        cos.insert(*k, cosine(v, qvec));
                    }
                    None => missing.push(*k),
                }
            }
        }
        i = j;
    }
    if !missing.is_empty() {
        return Err(missing);
    }
    pos.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| {
                let ca = cos.get(&a.0).copied().unwrap_or(0.0);
                let cb = cos.get(&b.0).copied().unwrap_or(0.0);
                cb.total_cmp(&ca)
            })
            .then(a.0.cmp(&b.0))
    });
    Ok(pos)
}

/// The `n` best of `scored` (pieces with their cosine, in any order), best
/// first in the order [`rank_pieces`] gives with [`Ranking::Dense`]: higher
/// cosine first, then the earlier piece. A render takes only the pieces that
/// fill its room, so ordering the best few of thousands is enough.
pub fn best_first(scored: &[Ranked], n: usize) -> Vec<Ranked> {
    let by = |a: &Ranked, b: &Ranked| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let mut out = scored.to_vec();
    if n < out.len() {
        if n == 0 {
            return Vec::new();
        }
        out.select_nth_unstable_by(n - 1, by);
        out.truncate(n);
    }
    // Keys are unique, so the order is total and an unstable sort is exact.
    out.sort_unstable_by(by);
    out
}

fn dense_ranking<'v>(
    items: &[(PieceKey, f32)],
    vec_of: &dyn Fn(PieceKey) -> Option<&'v [f32]>,
    qvec: &[f32],
) -> Result<Vec<Ranked>, Vec<PieceKey>> {
    let mut missing = Vec::new();
    let mut out = Vec::with_capacity(items.len());
    for (k, _) in items {
        match vec_of(*k) {
            Some(v) => out.push((*k, cosine(v, qvec))),
            None => missing.push(*k),
        }
    }
    if !missing.is_empty() {
        return Err(missing);
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::PieceVectors;

    #[test]
    fn bm25_ties_go_to_cosine_then_position() {
        let vecs: HashMap<PieceKey, Vec<f32>> = [
            ((1, 0), vec![1.0, 0.0]),
            ((2, 0), vec![0.0, 1.0]),
            ((3, 0), vec![0.0, 1.0]),
        ]
        .into_iter()
        .collect();
        let items = [
            ((1, 0), 2.0),
            ((2, 0), 2.0),
            ((3, 0), 2.0),
            ((4, 0), 0.0),
            ((5, 0), 3.0),
        ];
        let look = |k: PieceKey| vecs.get(&k).map(Vec::as_slice);
        let r = rank_pieces(&items, Ranking::Bm25, &look, &[0.0, 1.0]).unwrap();
        let keys: Vec<PieceKey> = r.iter().map(|x| x.0).collect();
        assert_eq!(keys, vec![(5, 0), (2, 0), (3, 0), (1, 0)]);
    }

    #[test]
    fn missing_vectors_are_reported() {
        let items = [((1, 0), 1.0), ((2, 0), 1.0)];
        let none = |_: PieceKey| None;
        assert_eq!(
            rank_pieces(&items, Ranking::Bm25, &none, &[1.0]).unwrap_err(),
            vec![(1, 0), (2, 0)]
        );
        // No tie, no vector needed.
        let items = [((1, 0), 1.0), ((2, 0), 2.0)];
        assert!(rank_pieces(&items, Ranking::Bm25, &none, &[1.0]).is_ok());
        assert!(rank_pieces(&items, Ranking::Dense, &none, &[1.0]).is_err());
    }

    #[test]
    fn best_first_is_a_prefix_of_the_dense_ranking() {
        let mut pv = PieceVectors::default();
        // Ties on purpose: (2, 1) and (4, 0), (3, 0) and (5, 0).
        let vecs = [
            ((1, 0), [0.6f32, 0.8]),
            ((2, 0), [1.0, 0.0]),
            ((2, 1), [0.8, 0.6]),
            ((3, 0), [0.0, 1.0]),
            ((4, 0), [0.8, 0.6]),
            ((5, 0), [0.0, 1.0]),
        ];
        for (k, v) in &vecs {
            pv.insert(*k, v);
        }
        let q = [0.8f32, 0.6];
        let items: Vec<(PieceKey, f32)> = vecs.iter().map(|(k, _)| (*k, 0.0)).collect();
        let look = |k: PieceKey| pv.get(&k);
        let full = rank_pieces(&items, Ranking::Dense, &look, &q).unwrap();
        let scored = pv.cosines(&q, |_| true);
        for n in 0..=vecs.len() + 1 {
            assert_eq!(best_first(&scored, n), full[..n.min(full.len())], "n = {n}");
        }
        let some = best_first(&pv.cosines(&q, |k| k.0 != 2), usize::MAX);
        assert_eq!(
            some.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![(4, 0), (1, 0), (3, 0), (5, 0)]
        );
    }

    #[test]
    fn hybrid_fuses_ranks() {
        let vecs: HashMap<PieceKey, Vec<f32>> =
            [((1, 0), vec![1.0, 0.0]), ((2, 0), vec![0.0, 1.0])]
                .into_iter()
                .collect();
        let look = |k: PieceKey| vecs.get(&k).map(Vec::as_slice);
        let items = [((1, 0), 5.0), ((2, 0), 0.0)];
        let r = rank_pieces(&items, Ranking::Hybrid, &look, &[0.0, 1.0]).unwrap();
        // (1,0): 1/61 + 1/62; (2,0): 1/61 only.
        assert_eq!(r[0].0, (1, 0));
        assert_eq!(r.len(), 2);
    }
}

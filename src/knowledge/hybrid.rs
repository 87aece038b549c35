//! Hybrid search: the BM25 ranking and the dense ranking ([`super::vectors`]) fused by reciprocal rank
//! fusion (Cormack, Clarke and Büttcher, SIGIR 2009): a passage scores `Σ 1 / (60 + rank)` over the
//! rankings it appears in.

use super::index::Hit;

/// RRF's constant, as its authors set it.
const RRF_K: f32 = 60.0;

/// The `top_k` passages of the fused rankings, best first, each scored by RRF. A passage is known by
/// its document and position.
pub fn fuse(rankings: &[Vec<Hit>], top_k: usize) -> Vec<Hit> {
    let mut fused: Vec<Hit> = Vec::new();
    for ranking in rankings {
        for (rank, hit) in ranking.iter().enumerate() {
            let score = 1.0 / (RRF_K + rank as f32 + 1.0);
            match fused.iter_mut().find(|h| h.document == hit.document && h.position == hit.position) {
                Some(found) => found.score += score,
                None => fused.push(Hit { score, ..hit.clone() }),
            }
        }
    }
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused.truncate(top_k);
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(document: &str, position: u64) -> Hit {
        Hit { document: document.into(), location: String::new(), position, text: String::new(), score: 0.0 }
    }

    #[test]
    fn a_passage_high_in_both_rankings_comes_first() {
        // b is second by words and first by meaning; a first by words only; d second by meaning only.
        let words = vec![hit("a", 0), hit("b", 0), hit("c", 0)];
        let meaning = vec![hit("b", 0), hit("d", 0), hit("e", 0)];
        let fused = fuse(&[words, meaning], 3);
        let order: Vec<&str> = fused.iter().map(|h| h.document.as_str()).collect();
        assert_eq!(order, ["b", "a", "d"]);
        assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-6);
        // The same passage of one document is one passage; another position is another.
        assert_eq!(fuse(&[vec![hit("a", 0), hit("a", 1)], vec![hit("a", 1)]], 5).len(), 2);
    }
}

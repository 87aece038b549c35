//! Passages' embedding vectors, as the index stores and compares them.
//!
//! A vector is stored with its passage (little-endian `f32`s in a bytes field of the same index
//! document), so a document's passages and vectors change in one commit. Dense search is exact: the
//! cosine similarity of the query's vector with every passage's (10,000 passages of 1,536 dimensions
//! are 60 MB and a few milliseconds).

/// A vector as stored: little-endian `f32`s.
pub fn encode(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// A stored vector; `None` for bytes that are not whole `f32`s.
pub fn decode(bytes: &[u8]) -> Option<Vec<f32>> {
    bytes
        .len()
        .is_multiple_of(4)
        .then(|| bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

/// The cosine similarity of `a` and `b`; 0 when their lengths differ or one is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na.sqrt() * nb.sqrt()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_cosine_compares_directions() {
        let v = vec![0.5, -1.0, 3.25];
        assert_eq!(decode(&encode(&v)), Some(v.clone()));
        assert_eq!(decode(&[1, 2, 3]), None);
        assert!((cosine(&v, &v) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 2.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), 0.0);
    }
}

//! Embedding texts in batches with the checks every substrate runs on what
//! comes back: one vector per text, each of the embedder's dimension, every
//! value finite. A remote embedder can break any of the three, and a
//! substrate that stored such a vector would rank on garbage from then on.
//!
//! ```
//! use submem_core::test_utils::HashingEmbedder;
//! use submem_kit::embed::embed_checked;
//!
//! # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # runtime.block_on(async {
//! let embedder = HashingEmbedder::new(16);
//! let texts = vec!["a red bike".to_string(), "the violin".to_string()];
//! let vectors = embed_checked(&embedder, &texts, 1).await?;
//! assert_eq!(vectors.len(), 2);
//! assert!(vectors.iter().all(|v| v.len() == 16));
//! # Ok::<(), submem_kit::embed::EmbedError>(())
//! # }).unwrap();
//! ```

use submem_core::{Embedder, Error, ServiceError};

/// What [`embed_checked`] refuses.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The embedder itself failed.
    #[error(transparent)]
    Service(#[from] ServiceError),

    /// The embedder returned a different number of vectors than texts.
    #[error("embedder returned {got} vectors for {expected} texts")]
    VectorCount {
        /// Texts sent.
        expected: usize,
        /// Vectors received.
        got: usize,
    },

    /// The embedder returned a vector of the wrong length.
    #[error("embedder returned a {got}-dimensional vector, expected {expected}")]
    Dimension {
        /// The embedder's declared dimension.
        expected: usize,
        /// What it returned.
        got: usize,
    },

    /// An embedding contains NaN or infinity.
    #[error("embedder returned a non-finite value")]
    NonFinite,
}

impl EmbedError {
    /// The core error: a service failure stays [`Error::Service`] (so
    /// callers still tell an unreachable embedder from a bad substrate), a
    /// wrong shape becomes what `shape` makes of it.
    pub fn into_core(self, shape: impl FnOnce(EmbedError) -> Error) -> Error {
        match self {
            EmbedError::Service(e) => Error::Service(e),
            other => shape(other),
        }
    }
}

/// Checks `vectors` returned for `texts` texts by an embedder of dimension
/// `dim`.
pub fn check_vectors(vectors: &[Vec<f32>], texts: usize, dim: usize) -> Result<(), EmbedError> {
    if vectors.len() != texts {
        return Err(EmbedError::VectorCount {
            expected: texts,
            got: vectors.len(),
        });
    }
    for v in vectors {
        if v.len() != dim {
            return Err(EmbedError::Dimension {
                expected: dim,
                got: v.len(),
            });
        }
        if v.iter().any(|x| !x.is_finite()) {
            return Err(EmbedError::NonFinite);
        }
    }
    Ok(())
}

/// Embeds `texts` in calls of at most `batch` texts (at least one), checking
/// each call's vectors with [`check_vectors`]. No texts, no call.
pub async fn embed_checked(
    embedder: &dyn Embedder,
    texts: &[String],
    batch: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let dim = embedder.dimension();
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(batch.max(1)) {
        let vectors = embedder.embed(chunk).await?;
        check_vectors(&vectors, chunk.len(), dim)?;
        out.extend(vectors);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_wrong_count_a_wrong_length_and_non_finite_values() {
        let ok = vec![vec![0.5, 0.5], vec![1.0, 0.0]];
        assert!(check_vectors(&ok, 2, 2).is_ok());
        assert!(matches!(
            check_vectors(&ok, 3, 2),
            Err(EmbedError::VectorCount {
                expected: 3,
                got: 2
            })
        ));
        assert!(matches!(
            check_vectors(&ok, 2, 3),
            Err(EmbedError::Dimension {
                expected: 3,
                got: 2
            })
        ));
        let nan = vec![vec![f32::NAN, 0.0]];
        assert!(matches!(
            check_vectors(&nan, 1, 2),
            Err(EmbedError::NonFinite)
        ));
    }

    #[test]
    fn a_service_failure_stays_a_service_error() {
        let e = EmbedError::Service(ServiceError::InvalidRequest("x".into()));
        assert!(matches!(
            e.into_core(|_| Error::InvalidInput("shape".into())),
            Error::Service(_)
        ));
        let e = EmbedError::NonFinite;
        assert!(matches!(
            e.into_core(|e| Error::InvalidInput(e.to_string())),
            Error::InvalidInput(_)
        ));
    }
}

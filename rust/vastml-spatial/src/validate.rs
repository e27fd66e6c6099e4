//! Shared input validation for row-major point sets.

use crate::{Result, SpatialError};

/// Checks a row-major `n x dim` point set and returns `n`.
///
/// # Errors
/// [`SpatialError::InvalidParameter`] if `dim == 0`, [`SpatialError::ShapeMismatch`] if
/// `points.len()` is not a multiple of `dim`, [`SpatialError::Empty`] if there are no points and
/// [`SpatialError::NonFinite`] if any coordinate is NaN or infinite.
pub(crate) fn validate_points(points: &[f64], dim: usize) -> Result<usize> {
    if dim == 0 {
        return Err(SpatialError::InvalidParameter {
            name: "dim",
            reason: "must be at least 1".to_string(),
        });
    }
    if points.len() % dim != 0 {
        return Err(SpatialError::ShapeMismatch {
            name: "points",
            expected: format!("a multiple of dim = {dim}"),
            actual: points.len(),
        });
    }
    if points.is_empty() {
        return Err(SpatialError::Empty { name: "points" });
    }
    if !points.iter().all(|v| v.is_finite()) {
        return Err(SpatialError::NonFinite { name: "points" });
    }
    Ok(points.len() / dim)
}

/// Checks that a query point has length `dim` and finite coordinates.
///
/// # Errors
/// [`SpatialError::ShapeMismatch`] on a length mismatch, [`SpatialError::NonFinite`] if any
/// coordinate is NaN or infinite.
pub(crate) fn validate_query(query: &[f64], dim: usize) -> Result<()> {
    if query.len() != dim {
        return Err(SpatialError::ShapeMismatch {
            name: "query",
            expected: dim.to_string(),
            actual: query.len(),
        });
    }
    if !query.iter().all(|v| v.is_finite()) {
        return Err(SpatialError::NonFinite { name: "query" });
    }
    Ok(())
}

/// Checks that a search radius is not NaN and not negative (`+inf` is allowed).
///
/// # Errors
/// [`SpatialError::InvalidParameter`] for a NaN or negative radius.
pub(crate) fn validate_radius(radius: f64) -> Result<()> {
    if radius.is_nan() || radius < 0.0 {
        return Err(SpatialError::InvalidParameter {
            name: "radius",
            reason: format!("must be a non-negative number, got {radius}"),
        });
    }
    Ok(())
}

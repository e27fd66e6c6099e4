//! Shared input validation for row-major point sets.

use vastml_core::{Points, check_finite};

use crate::{Result, SpatialError};

/// Checks a row-major `n x dim` point set named `points` through the one point-set check of
/// the crates ([`vastml_core::Points`]) and returns `n`.
///
/// # Errors
/// [`SpatialError::InvalidParameter`] if `dim == 0`, [`SpatialError::ShapeMismatch`] if
/// `points.len()` is not a multiple of `dim`, [`SpatialError::Empty`] if there are no points and
/// [`SpatialError::NonFinite`] if any coordinate is NaN or infinite.
pub(crate) fn validate_points(points: &[f64], dim: usize) -> Result<usize> {
    Ok(Points::new("points", points, dim)?.len())
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
    check_finite("query", query, dim)?;
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

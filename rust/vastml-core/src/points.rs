//! [`Points`]: a checked, borrowed, row-major point set.

use crate::error::{Error, Result};

/// A borrowed row-major `n x dim` point set whose shape and values have been checked once.
///
/// Holding a `Points` means: `dim >= 1`, the slice holds a whole number of rows, every value
/// is finite and (unless built with [`Points::new_or_empty`]) there is at least one row. Code
/// that takes a `Points` needs no check of its own.
///
/// ```
/// use vastml_core::{Error, Points};
///
/// let x = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
/// let points = Points::new("X", &x, 2)?;
/// assert_eq!((points.len(), points.dim()), (3, 2));
/// assert_eq!(points.row(1), &[2.0, 3.0]);
///
/// let bad = [0.0, f64::NAN, 2.0, 3.0];
/// assert_eq!(
///     Points::new("X", &bad, 2).unwrap_err(),
///     Error::NonFinite { name: "X", row: 0, column: 1 }
/// );
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Points<'a> {
    data: &'a [f64],
    dim: usize,
}

impl<'a> Points<'a> {
    /// Checks `data` as a non-empty row-major point set of `dim` columns named `name`.
    ///
    /// # Errors
    /// In this order: [`Error::InvalidParameter`] (name `"dim"`) if `dim == 0`,
    /// [`Error::ShapeMismatch`] if `data.len()` is not a multiple of `dim`, [`Error::Empty`]
    /// without rows, [`Error::NonFinite`] (with the row and column of the first one) if a
    /// value is NaN or infinite.
    pub fn new(name: &'static str, data: &'a [f64], dim: usize) -> Result<Self> {
        Self::check(name, data, dim, false)
    }

    /// As [`Points::new`], but an empty point set (zero rows) is accepted.
    ///
    /// # Errors
    /// As [`Points::new`] except [`Error::Empty`].
    pub fn new_or_empty(name: &'static str, data: &'a [f64], dim: usize) -> Result<Self> {
        Self::check(name, data, dim, true)
    }

    /// The one validation of a point set.
    fn check(name: &'static str, data: &'a [f64], dim: usize, allow_empty: bool) -> Result<Self> {
        if dim == 0 {
            return Err(Error::InvalidParameter {
                name: "dim",
                reason: "must be at least 1".to_string(),
            });
        }
        if data.len() % dim != 0 {
            return Err(Error::ShapeMismatch {
                name,
                expected: format!("a multiple of dim = {dim}"),
                actual: data.len(),
            });
        }
        if data.is_empty() && !allow_empty {
            return Err(Error::Empty { name });
        }
        check_finite(name, data, dim)?;
        Ok(Points { data, dim })
    }

    /// Number of points (rows).
    #[inline]
    pub fn len(&self) -> usize {
        self.data.len() / self.dim
    }

    /// Whether there are no points (only possible through [`Points::new_or_empty`]).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Number of coordinates per point.
    #[inline]
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The row-major values, `len() * dim()` of them.
    #[inline]
    pub fn as_slice(&self) -> &'a [f64] {
        self.data
    }

    /// The coordinates of point `i`.
    ///
    /// # Panics
    /// If `i >= len()` (an index error of the caller, not bad input).
    #[inline]
    pub fn row(&self, i: usize) -> &'a [f64] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// The points in order, each as a slice of `dim` coordinates.
    pub fn rows(&self) -> std::slice::ChunksExact<'a, f64> {
        self.data.chunks_exact(self.dim)
    }
}

/// The smallest and the largest coordinate of the points of `sets` (each row-major with `dim`
/// columns), per coordinate: `(lo, hi)`, infinite for no points. NaNs are passed over (check
/// the points first). Four rows at a time go into separate running bounds: one running bound
/// per coordinate is a chain of dependent comparisons, which on a line or in the plane was
/// most of the pass.
///
/// ```
/// let rows: [&[f64]; 2] = [&[0.0, 5.0, 2.0, -1.0], &[9.0, 1.0]];
/// let (lo, hi) = vastml_core::coordinate_bounds(&rows, 2);
/// assert_eq!((lo, hi), (vec![0.0, -1.0], vec![9.0, 5.0]));
/// ```
pub fn coordinate_bounds(sets: &[&[f64]], dim: usize) -> (Vec<f64>, Vec<f64>) {
    let mut lo = vec![f64::INFINITY; 4 * dim];
    let mut hi = vec![f64::NEG_INFINITY; 4 * dim];
    let mut take = |rows: &[f64]| {
        for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(rows) {
            *l = if v < *l { v } else { *l };
            *h = if v > *h { v } else { *h };
        }
    };
    for set in sets {
        let mut quads = set.chunks_exact(4 * dim.max(1));
        for quad in &mut quads {
            take(quad);
        }
        take(quads.remainder());
    }
    // entry r * dim + k holds coordinate k of rows r, r + 4, ...
    let lane = |v: &[f64], k: usize, pick: fn(f64, f64) -> f64| {
        (1..4).fold(v[k], |a, r| pick(a, v[r * dim + k]))
    };
    (
        (0..dim).map(|k| lane(&lo, k, f64::min)).collect(),
        (0..dim).map(|k| lane(&hi, k, f64::max)).collect(),
    )
}

/// Values checked per block by [`check_finite`]: the block test has no early exit, so it
/// vectorises; the scan stops at the first bad block.
const FINITE_BLOCK: usize = 512;

/// Checks that every value of the row-major `values` (`dim` columns, `dim >= 1`) is finite.
///
/// # Errors
/// [`Error::NonFinite`] with the row and column of the first NaN or infinity.
pub fn check_finite(name: &'static str, values: &[f64], dim: usize) -> Result<()> {
    let dim = dim.max(1);
    for (b, block) in values.chunks(FINITE_BLOCK).enumerate() {
        if !block.iter().fold(true, |ok, v| ok & v.is_finite()) {
            let i = b * FINITE_BLOCK + block.iter().position(|v| !v.is_finite()).unwrap_or(0);
            return Err(Error::NonFinite {
                name,
                row: i / dim,
                column: i % dim,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bounds taken four rows at a time are those of a plain pass, for sets of any length
    /// (remainders of 0-3 rows) in 1-5 dimensions.
    #[test]
    fn coordinate_bounds_match_a_plain_pass() {
        let mut state = 17u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for dim in 1..=5 {
            for (na, nb) in [(1, 0), (3, 5), (17, 2), (40, 13)] {
                let a: Vec<f64> = (0..na * dim).map(|_| 10.0 * next() - 5.0).collect();
                let b: Vec<f64> = (0..nb * dim).map(|_| 30.0 * next() - 12.0).collect();
                let (lo, hi) = coordinate_bounds(&[&a, &b], dim);
                for k in 0..dim {
                    let col = a.iter().chain(&b).skip(k).step_by(dim).copied();
                    let want_lo = col.clone().fold(f64::INFINITY, f64::min);
                    let want_hi = col.fold(f64::NEG_INFINITY, f64::max);
                    assert_eq!(
                        (lo[k], hi[k]),
                        (want_lo, want_hi),
                        "{dim}-D, {na} + {nb} rows"
                    );
                }
            }
        }
    }

    #[test]
    fn accepts_a_point_set_and_gives_its_rows() {
        let x: Vec<f64> = (0..12).map(f64::from).collect();
        let p = Points::new("X", &x, 3).unwrap();
        assert_eq!((p.len(), p.dim(), p.is_empty()), (4, 3, false));
        assert_eq!(p.row(2), &[6.0, 7.0, 8.0]);
        assert_eq!(p.rows().nth(3).unwrap(), &[9.0, 10.0, 11.0]);
        assert_eq!(p.as_slice(), &x[..]);
        let q = Points::new_or_empty("X", &[], 3).unwrap();
        assert!(q.is_empty() && q.rows().next().is_none());
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn each_check_gives_its_own_error() {
        let x = [1.0; 6];
        assert!(matches!(
            Points::new("X", &x, 0),
            Err(Error::InvalidParameter { name: "dim", .. })
        ));
        // dim is checked first even when empty
        assert!(matches!(
            Points::new_or_empty("X", &[], 0),
            Err(Error::InvalidParameter { name: "dim", .. })
        ));
        let e = Points::new("sources", &x, 4).unwrap_err();
        assert!(matches!(
            e,
            Error::ShapeMismatch {
                name: "sources",
                actual: 6,
                ..
            }
        ));
        assert!(e.to_string().contains("dim = 4"), "{e}");
        assert_eq!(
            Points::new("Y", &[], 2).unwrap_err(),
            Error::Empty { name: "Y" }
        );
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            // far past the first block, to exercise the block scan
            let mut y = vec![0.5; 3 * 1000];
            y[3 * 700 + 2] = bad;
            y[3 * 900] = bad;
            assert_eq!(
                Points::new("Y", &y, 3).unwrap_err(),
                Error::NonFinite {
                    name: "Y",
                    row: 700,
                    column: 2
                }
            );
        }
        assert_eq!(
            check_finite("w", &[1.0, f64::NAN], 1),
            Err(Error::NonFinite {
                name: "w",
                row: 1,
                column: 0
            })
        );
        assert_eq!(check_finite("w", &[1.0, 2.0], 1), Ok(()));
    }
}

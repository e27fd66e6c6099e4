//! [`Csr`]: a checked, borrowed sparse matrix in compressed-sparse-row form.

use rayon::prelude::*;

use crate::error::{Error, Result};

/// Index type of CSR arrays: int64 (SciPy's default), int32 (the compact layout of large
/// problems) or `usize` (Rust callers).
pub trait CsrIndex: Copy + PartialOrd + Send + Sync + std::fmt::Debug + 'static {
    /// The value as an index (callers check the range first, e.g. through [`Csr::new`]).
    fn ix(self) -> usize;
    /// True for `0 <= self < n`.
    fn below(self, n: usize) -> bool;
    /// The index of `i` (callers check that it fits, i.e. `i <= Self::MAX`).
    fn of(i: usize) -> Self;
    /// The largest representable index.
    const MAX: usize;
}

impl CsrIndex for i64 {
    #[inline(always)]
    fn ix(self) -> usize {
        self as usize
    }
    #[inline(always)]
    fn below(self, n: usize) -> bool {
        self >= 0 && (self as u64) < n as u64
    }
    #[inline(always)]
    fn of(i: usize) -> Self {
        i as i64
    }
    const MAX: usize = i64::MAX as usize;
}

impl CsrIndex for i32 {
    #[inline(always)]
    fn ix(self) -> usize {
        self as usize
    }
    #[inline(always)]
    fn below(self, n: usize) -> bool {
        self >= 0 && (self as usize) < n
    }
    #[inline(always)]
    fn of(i: usize) -> Self {
        i as i32
    }
    const MAX: usize = i32::MAX as usize;
}

impl CsrIndex for usize {
    #[inline(always)]
    fn ix(self) -> usize {
        self
    }
    #[inline(always)]
    fn below(self, n: usize) -> bool {
        self < n
    }
    #[inline(always)]
    fn of(i: usize) -> Self {
        i
    }
    const MAX: usize = usize::MAX;
}

/// Value type of CSR arrays: float64, or float32 for the compact layout (sums are always
/// accumulated in f64).
pub trait CsrValue: Copy + PartialOrd + Send + Sync + std::fmt::Debug + 'static {
    /// The value in f64.
    fn get(self) -> f64;
    /// The value of `v` (rounded for f32).
    fn of(v: f64) -> Self;
}

impl CsrValue for f64 {
    #[inline(always)]
    fn get(self) -> f64 {
        self
    }
    #[inline(always)]
    fn of(v: f64) -> Self {
        v
    }
}

impl CsrValue for f32 {
    #[inline(always)]
    fn get(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn of(v: f64) -> Self {
        v as f32
    }
}

/// A borrowed `n_rows x n_cols` sparse matrix in CSR form (SciPy's layout), checked once.
///
/// Holding a `Csr` means: `indptr` has `n_rows + 1` entries, starts at 0 and never
/// decreases; `indices` and `data` both have `indptr[n_rows]` entries; every column index
/// lies in `0..n_cols`; every value is finite; and (unless built with
/// [`Csr::new_or_empty`]) there is at least one row. Columns need not be sorted within a
/// row, and repeats are allowed (they add up wherever the matrix is used as a sum).
///
/// ```
/// use vastml_core::{Csr, Error};
///
/// // [[1, 0, 2],
/// //  [0, 0, 3]]
/// let (indptr, indices, data) = ([0i64, 2, 3], [0i64, 2, 2], [1.0, 2.0, 3.0]);
/// let m = Csr::new("X", &indptr, &indices, &data, 3)?;
/// assert_eq!((m.n_rows(), m.n_cols(), m.nnz()), (2, 3, 3));
/// assert_eq!(m.row(1), (&[2i64][..], &[3.0][..]));
///
/// let bad_column = [0i64, 3, 2];
/// assert!(matches!(
///     Csr::new("X", &indptr, &bad_column, &data, 3),
///     Err(Error::InvalidParameter { name: "X", .. })
/// ));
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug, PartialEq)]
pub struct Csr<'a, I: CsrIndex = i64, V: CsrValue = f64> {
    indptr: &'a [I],
    indices: &'a [I],
    data: &'a [V],
    n_cols: usize,
}

impl<I: CsrIndex, V: CsrValue> Clone for Csr<'_, I, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<I: CsrIndex, V: CsrValue> Copy for Csr<'_, I, V> {}

/// Below this many stored entries the checks run on one thread.
const PARALLEL_NNZ: usize = 1 << 16;

impl<'a, I: CsrIndex, V: CsrValue> Csr<'a, I, V> {
    /// Checks the three CSR arrays of a matrix with `n_cols` columns, named `name` in errors;
    /// the matrix must have at least one row.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for an empty `indptr` or `indices` / `data` lengths other than
    /// `indptr[n_rows]`; [`Error::InvalidParameter`] for row pointers that do not start at 0
    /// or decrease, or a column index outside `0..n_cols`; [`Error::Empty`] without rows;
    /// [`Error::NonFinite`] (with the row and column of the first one) for a NaN or infinite
    /// value.
    pub fn new(
        name: &'static str,
        indptr: &'a [I],
        indices: &'a [I],
        data: &'a [V],
        n_cols: usize,
    ) -> Result<Self> {
        Self::check(name, indptr, indices, data, n_cols, false)
    }

    /// As [`Csr::new`], but a matrix without rows (`indptr == [0]`) is accepted.
    ///
    /// # Errors
    /// As [`Csr::new`] except [`Error::Empty`].
    pub fn new_or_empty(
        name: &'static str,
        indptr: &'a [I],
        indices: &'a [I],
        data: &'a [V],
        n_cols: usize,
    ) -> Result<Self> {
        Self::check(name, indptr, indices, data, n_cols, true)
    }

    /// The one validation of a CSR matrix.
    fn check(
        name: &'static str,
        indptr: &'a [I],
        indices: &'a [I],
        data: &'a [V],
        n_cols: usize,
        allow_empty: bool,
    ) -> Result<Self> {
        let Some(&last) = indptr.last() else {
            return Err(Error::ShapeMismatch {
                name,
                expected: "n_rows + 1 >= 1 row pointers".into(),
                actual: 0,
            });
        };
        if !indptr[0].below(1) || indptr.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::InvalidParameter {
                name,
                reason: "row pointers must start at 0 and never decrease".into(),
            });
        }
        let nnz = last.ix();
        for (what, len) in [("column indices", indices.len()), ("values", data.len())] {
            if len != nnz {
                return Err(Error::ShapeMismatch {
                    name,
                    expected: format!("indptr[-1] = {nnz} {what}"),
                    actual: len,
                });
            }
        }
        if indptr.len() == 1 && !allow_empty {
            return Err(Error::Empty { name });
        }
        let bad_index = |&j: &I| !j.below(n_cols);
        let bad_value = |v: &V| !v.get().is_finite();
        let (index_ok, values_ok) = if nnz >= PARALLEL_NNZ {
            (
                !indices.par_iter().any(bad_index),
                !data.par_iter().any(bad_value),
            )
        } else {
            (!indices.iter().any(bad_index), !data.iter().any(bad_value))
        };
        if !index_ok {
            let t = indices.iter().position(bad_index).unwrap_or(0);
            return Err(Error::InvalidParameter {
                name,
                reason: format!(
                    "column index {:?} of entry {t} is outside 0..{n_cols}",
                    indices[t]
                ),
            });
        }
        let m = Csr {
            indptr,
            indices,
            data,
            n_cols,
        };
        if !values_ok {
            let t = data.iter().position(bad_value).unwrap_or(0);
            return Err(Error::NonFinite {
                name,
                row: m.row_of(t),
                column: indices[t].ix(),
            });
        }
        Ok(m)
    }

    /// The row holding stored entry `t` (`t < nnz`).
    fn row_of(&self, t: usize) -> usize {
        self.indptr.partition_point(|p| p.ix() <= t) - 1
    }

    /// Number of rows.
    #[inline]
    pub fn n_rows(&self) -> usize {
        self.indptr.len() - 1
    }

    /// Number of columns.
    #[inline]
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }

    /// Number of stored entries.
    #[inline]
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// Row pointers, `n_rows() + 1` of them.
    #[inline]
    pub fn indptr(&self) -> &'a [I] {
        self.indptr
    }

    /// Column index of every stored entry.
    #[inline]
    pub fn indices(&self) -> &'a [I] {
        self.indices
    }

    /// Value of every stored entry.
    #[inline]
    pub fn data(&self) -> &'a [V] {
        self.data
    }

    /// Column indices and values of row `i`.
    ///
    /// # Panics
    /// If `i >= n_rows()` (an index error of the caller, not bad input).
    #[inline]
    pub fn row(&self, i: usize) -> (&'a [I], &'a [V]) {
        let (a, b) = (self.indptr[i].ix(), self.indptr[i + 1].ix());
        (&self.indices[a..b], &self.data[a..b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err<I: CsrIndex, V: CsrValue>(
        indptr: &[I],
        indices: &[I],
        data: &[V],
        n_cols: usize,
    ) -> Error {
        Csr::new("W", indptr, indices, data, n_cols).unwrap_err()
    }

    #[test]
    fn accepts_both_index_widths_and_both_value_widths() {
        let m = Csr::new("W", &[0i32, 1, 1, 3], &[2i32, 0, 1], &[1.0f32, 2.0, 3.0], 3).unwrap();
        assert_eq!((m.n_rows(), m.n_cols(), m.nnz()), (3, 3, 3));
        assert_eq!(m.row(1), (&[][..], &[][..]));
        assert_eq!(m.row(2), (&[0i32, 1][..], &[2.0f32, 3.0][..]));
        let m = Csr::new("W", &[0i64, 2], &[1i64, 1], &[1.0f64, 2.0], 2).unwrap();
        assert_eq!(m.row(0).0, &[1, 1]);
        assert_eq!(
            (m.indptr(), m.indices(), m.data()),
            (&[0i64, 2][..], &[1i64, 1][..], &[1.0, 2.0][..])
        );
        let m = Csr::new_or_empty("W", &[0usize], &[], &[0.0f64; 0], 5).unwrap();
        assert_eq!((m.n_rows(), m.nnz()), (0, 0));
    }

    #[test]
    fn each_structural_error_names_the_matrix() {
        let one = [1.0];
        let shape = |e: Error, len: usize| {
            assert!(
                matches!(e, Error::ShapeMismatch { name: "W", actual, .. } if actual == len),
                "{e}"
            )
        };
        shape(err::<i64, f64>(&[], &[], &[], 2), 0);
        shape(err(&[0i64, 2], &[0], &one, 2), 1);
        shape(err(&[0i64, 1], &[0, 1], &one, 2), 2);
        shape(err(&[0i64, 1], &[0], &[1.0, 2.0], 2), 2);
        for e in [
            err(&[1i64, 1], &[0], &one, 2),
            err(&[0i64, 1, 0], &[0], &one, 2),
            err(&[0i64, 1], &[2], &one, 2),
            err(&[0i64, 1], &[-1], &one, 2),
        ] {
            assert!(
                matches!(e, Error::InvalidParameter { name: "W", .. }),
                "{e}"
            );
        }
        assert!(
            err(&[0i64, 1], &[2], &one, 2)
                .to_string()
                .contains("column index 2")
        );
        assert_eq!(
            err::<i32, f64>(&[0], &[], &[], 2),
            Error::Empty { name: "W" }
        );
    }

    #[test]
    fn a_non_finite_value_is_located() {
        let data = [1.0, 2.0, f64::NAN, 4.0];
        assert_eq!(
            err(&[0i64, 2, 2, 4], &[0, 3, 2, 1], &data, 4),
            Error::NonFinite {
                name: "W",
                row: 2,
                column: 2
            }
        );
        // the parallel path finds the same entry
        let n = 1 << 17;
        let indptr: Vec<i64> = (0..=n as i64).collect();
        let indices = vec![0i64; n];
        let mut data = vec![1.0f32; n];
        data[n - 5] = f32::INFINITY;
        assert_eq!(
            err(&indptr, &indices, &data, 1),
            Error::NonFinite {
                name: "W",
                row: n - 5,
                column: 0
            }
        );
        let mut indices = indices;
        indices[77] = 1;
        assert!(matches!(
            err(&indptr, &indices, &data, 1),
            Error::InvalidParameter { .. }
        ));
    }
}

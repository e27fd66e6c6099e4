//! Example storage: dense row-major matrices and CSR sparse matrices, read in place.
//!
//! Sparse input is never densified: every learner touches a row only through [`Row`], whose
//! operations cost O(nnz) for sparse rows.

use vastml_core::{Csr, Points};

use crate::error::{SvmError, invalid, shape};

/// A borrowed, checked set of examples (rows): dense ([`Points`]) or CSR ([`Csr`]).
///
/// Both views are validated once by `vastml_core` (shape, column range, finite values, at
/// least one row); the learners read them in place.
#[derive(Debug, Clone, Copy)]
pub enum Examples<'a> {
    /// Row-major dense rows.
    Dense(Points<'a>),
    /// Compressed sparse rows (scipy's CSR layout, 64-bit indices).
    Csr(Csr<'a, i64, f64>),
}

/// One example.
#[derive(Debug, Clone, Copy)]
pub enum Row<'a> {
    /// All `dim` values.
    Dense(&'a [f64]),
    /// Column indices and values of the non-zeros.
    Sparse(&'a [i64], &'a [f64]),
}

impl<'a> From<Points<'a>> for Examples<'a> {
    fn from(points: Points<'a>) -> Self {
        Examples::Dense(points)
    }
}

impl<'a> From<Csr<'a, i64, f64>> for Examples<'a> {
    fn from(matrix: Csr<'a, i64, f64>) -> Self {
        Examples::Csr(matrix)
    }
}

impl<'a> Examples<'a> {
    /// Dense examples: `values` row-major with `dim` columns (checked by [`Points::new`]).
    ///
    /// # Errors
    /// [`SvmError::InvalidParameter`] if `dim == 0`, [`SvmError::ShapeMismatch`] if the length is
    /// not a multiple of `dim`, [`SvmError::Empty`] without rows, [`SvmError::NonFinite`] on NaN/inf.
    pub fn dense(values: &'a [f64], dim: usize) -> Result<Self, SvmError> {
        Ok(Points::new("X", values, dim)?.into())
    }

    /// CSR examples with `dim` columns (checked by [`Csr::new`]).
    ///
    /// # Errors
    /// [`SvmError::ShapeMismatch`] unless `indices.len() == data.len() == indptr[n]`;
    /// [`SvmError::InvalidParameter`] unless `indptr` starts at 0 and is non-decreasing and
    /// every index lies in `0..dim`; [`SvmError::Empty`] without rows; [`SvmError::NonFinite`]
    /// on NaN/inf values.
    pub fn csr(
        indptr: &'a [i64],
        indices: &'a [i64],
        data: &'a [f64],
        dim: usize,
    ) -> Result<Self, SvmError> {
        Ok(Csr::new("X", indptr, indices, data, dim)?.into())
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        match self {
            Examples::Dense(p) => p.len(),
            Examples::Csr(m) => m.n_rows(),
        }
    }

    /// Whether there are no examples (never true for a validated set).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of columns.
    pub fn dim(&self) -> usize {
        match self {
            Examples::Dense(p) => p.dim(),
            Examples::Csr(m) => m.n_cols(),
        }
    }

    /// Example `i` (panics if `i >= len()`; callers index within range).
    #[inline]
    pub fn row(&self, i: usize) -> Row<'a> {
        match self {
            Examples::Dense(p) => Row::Dense(p.row(i)),
            Examples::Csr(m) => {
                let (indices, values) = m.row(i);
                Row::Sparse(indices, values)
            }
        }
    }

    /// Hints the CPU to load the first two cache lines of row `i` (no effect on results; a
    /// no-op off x86-64).
    #[inline]
    pub fn prefetch_row(&self, i: usize) {
        self.row(i).prefetch(128);
    }
}

/// Rows read by index: the examples themselves, or a [`Gathered`] copy of them.
pub(crate) trait Rows: Sync {
    /// Row `i`.
    fn row(&self, i: usize) -> Row<'_>;
}

impl Rows for Examples<'_> {
    #[inline]
    fn row(&self, i: usize) -> Row<'_> {
        Examples::row(self, i)
    }
}

impl Row<'_> {
    /// Asks the CPU to start loading the row into cache, at most `max_bytes` of each of its
    /// slices plus their last line (a hint: no effect on results; a no-op off x86-64).
    /// Random-order passes call it a few examples ahead, so that the row's cache misses
    /// overlap the work on the current example.
    #[inline]
    pub fn prefetch(&self, max_bytes: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            fn lines<T>(s: &[T], max_bytes: usize) {
                let (p, bytes) = (s.as_ptr().cast::<u8>(), std::mem::size_of_val(s));
                for o in (0..bytes.min(max_bytes))
                    .step_by(64)
                    .chain([bytes.saturating_sub(1)])
                {
                    // SAFETY: a prefetch is a hint that never faults; the address stays in
                    // (or one before the end of) the slice.
                    unsafe {
                        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                            p.wrapping_add(o).cast::<i8>(),
                        )
                    };
                }
            }
            match *self {
                Row::Dense(x) => lines(x, max_bytes),
                Row::Sparse(ix, v) => {
                    lines(ix, max_bytes);
                    lines(v, max_bytes);
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = max_bytes;
    }

    /// `x . w[..dim]`.
    #[inline]
    pub fn dot(&self, w: &[f64]) -> f64 {
        match *self {
            Row::Dense(x) => dot(x, &w[..x.len()]),
            Row::Sparse(idx, val) => idx.iter().zip(val).map(|(&j, v)| v * w[j as usize]).sum(),
        }
    }

    /// `out[c] += a * (x . t[.., c])` for a column-major `t` of `out.len()` columns per
    /// feature (`t[j * k + c]`): every non-zero adds one contiguous k-vector. Runs with
    /// 256-bit vectors where the CPU has AVX2 (same arithmetic, so the same result).
    #[inline]
    pub fn dots_transposed(&self, t: &[f64], out: &mut [f64]) {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: the CPU supports AVX2 (checked at run time just above).
            unsafe { self.dots_transposed_avx2(t, out) };
            return;
        }
        self.dots_transposed_generic(t, out);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn dots_transposed_avx2(&self, t: &[f64], out: &mut [f64]) {
        self.dots_transposed_generic(t, out);
    }

    #[inline(always)]
    fn dots_transposed_generic(&self, t: &[f64], out: &mut [f64]) {
        let k = out.len();
        match *self {
            Row::Dense(x) => {
                for (&v, col) in x.iter().zip(t.chunks_exact(k)) {
                    if v != 0.0 {
                        out.iter_mut().zip(col).for_each(|(o, c)| *o += v * c);
                    }
                }
            }
            Row::Sparse(idx, val) => {
                for (&j, &v) in idx.iter().zip(val) {
                    let j = j as usize;
                    out.iter_mut()
                        .zip(&t[j * k..(j + 1) * k])
                        .for_each(|(o, c)| *o += v * c);
                }
            }
        }
    }

    /// `w[..dim] += a x`.
    #[inline]
    pub fn axpy(&self, a: f64, w: &mut [f64]) {
        match *self {
            Row::Dense(x) => w.iter_mut().zip(x).for_each(|(wi, xi)| *wi += a * xi),
            Row::Sparse(idx, val) => idx
                .iter()
                .zip(val)
                .for_each(|(&j, v)| w[j as usize] += a * v),
        }
    }

    /// `||x||^2`.
    #[inline]
    pub fn sq_norm(&self) -> f64 {
        match *self {
            Row::Dense(x) => x.iter().map(|v| v * v).sum(),
            Row::Sparse(_, val) => val.iter().map(|v| v * v).sum(),
        }
    }

    /// Writes the row into a dense buffer of length `dim` (zeros elsewhere).
    pub fn to_dense(&self, out: &mut [f64]) {
        out.iter_mut().for_each(|v| *v = 0.0);
        self.axpy(1.0, out);
    }
}

/// Examples gathered into a new order, so an epoch reads them sequentially.
///
/// Random row access costs a cache miss per row; gathering once per epoch and then streaming
/// is about twice as fast for the cheap linear steps. Used only up to [`GATHER_LIMIT`] bytes,
/// since it holds a second copy of the data during the epoch.
pub(crate) struct Gathered {
    /// The dense rows one after the other, or the values of the non-zeros.
    values: Vec<f64>,
    /// Column of every non-zero (sparse rows only).
    indices: Vec<i64>,
    /// Where each sparse row starts in `values`, `n + 1` offsets (sparse rows only).
    starts: Vec<usize>,
    dim: usize,
    sparse: bool,
}

/// Largest data set (bytes) an epoch gathers into its shuffled order.
pub(crate) const GATHER_LIMIT: usize = 512 << 20;

impl Gathered {
    /// `Some(copy in order)` when the data are small enough, else `None`.
    pub(crate) fn new(ex: &Examples<'_>, order: &[usize]) -> Option<Self> {
        let (bytes, sparse) = match ex {
            Examples::Dense(p) => (p.as_slice().len() * 8, false),
            Examples::Csr(m) => (m.nnz() * 16, true),
        };
        if bytes > GATHER_LIMIT {
            return None;
        }
        let mut g = Gathered {
            values: Vec::with_capacity(bytes / 8),
            indices: Vec::with_capacity(if sparse { bytes / 16 } else { 0 }),
            starts: Vec::with_capacity(if sparse { order.len() + 1 } else { 0 }),
            dim: ex.dim(),
            sparse,
        };
        if sparse {
            g.starts.push(0);
        }
        for &i in order {
            match ex.row(i) {
                Row::Dense(x) => g.values.extend_from_slice(x),
                Row::Sparse(ix, v) => {
                    g.indices.extend_from_slice(ix);
                    g.values.extend_from_slice(v);
                    g.starts.push(g.values.len());
                }
            }
        }
        Some(g)
    }
}

impl Rows for Gathered {
    /// Row k of the copy, example `order[k]`.
    #[inline]
    fn row(&self, k: usize) -> Row<'_> {
        if self.sparse {
            let (a, b) = (self.starts[k], self.starts[k + 1]);
            Row::Sparse(&self.indices[a..b], &self.values[a..b])
        } else {
            Row::Dense(&self.values[k * self.dim..(k + 1) * self.dim])
        }
    }
}

/// Whether the CPU has AVX2 (cached by the standard library after the first call).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_avx2() -> bool {
    vastml_spatial::simd_allowed() && std::arch::is_x86_feature_detected!("avx2")
}

/// Dot product of two dense slices (the one of `vastml-spatial`, shared with its k-means).
pub(crate) use vastml_spatial::dot;

/// Checks class labels: one per example, each below `n_classes` (which must be >= 2).
pub(crate) fn check_labels(labels: &[usize], n: usize, n_classes: usize) -> Result<(), SvmError> {
    if n_classes < 2 {
        return Err(invalid("n_classes", "needs at least 2 classes"));
    }
    if labels.len() != n {
        return Err(shape(
            "y",
            format!("{} labels for {n} examples", labels.len()),
        ));
    }
    if let Some(&l) = labels.iter().find(|&&l| l >= n_classes) {
        return Err(shape(
            "y",
            format!("label {l} is not below n_classes = {n_classes}"),
        ));
    }
    Ok(())
}

/// Reserves room for `rows` more vectors of `width` values in `v`, with checked sizes: an
/// absurd or unavailable size is an error naming `name` (never an allocation abort).
pub(crate) fn try_reserve_rows(
    v: &mut Vec<f64>,
    rows: usize,
    width: usize,
    name: &'static str,
) -> Result<(), SvmError> {
    let n = rows
        .checked_mul(width)
        .filter(|n| n.checked_mul(8).is_some_and(|b| b <= isize::MAX as usize))
        .ok_or_else(|| {
            invalid(
                name,
                format!("{rows} vectors of {width} values overflow memory"),
            )
        })?;
    v.try_reserve_exact(n).map_err(|_| {
        invalid(
            name,
            format!(
                "cannot allocate {rows} dense vectors of {width} values ({:.3} GiB)",
                (n as f64) * 8.0 / (1u64 << 30) as f64
            ),
        )
    })
}

/// Checks a positive finite float parameter.
pub(crate) fn check_positive(v: f64, name: &'static str) -> Result<(), SvmError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(invalid(
            name,
            format!("must be a positive finite number, got {v}"),
        ))
    }
}

/// Class codes from their int64 form (as NumPy holds them).
///
/// # Errors
/// [`SvmError::InvalidParameter`] (`y`) for a negative code.
pub fn class_codes(codes: &[i64]) -> Result<Vec<usize>, SvmError> {
    codes
        .iter()
        .map(|&v| usize::try_from(v).map_err(|_| invalid("y", "class codes must be >= 0")))
        .collect()
}

//! Example storage: dense row-major matrices and CSR sparse matrices, read in place.
//!
//! Sparse input is never densified: every learner touches a row only through [`Row`], whose
//! operations cost O(nnz) for sparse rows.

use crate::error::{SvmError, invalid, shape};

/// A borrowed set of examples (rows), dense or CSR.
#[derive(Debug, Clone, Copy)]
pub enum Examples<'a> {
    /// Row-major `n x dim` values.
    Dense {
        /// The values, `n * dim` of them.
        values: &'a [f64],
        /// Number of columns.
        dim: usize,
    },
    /// Compressed sparse rows (scipy's CSR layout, 64-bit indices).
    Csr {
        /// Row pointers, `n + 1` of them, starting at 0 and non-decreasing.
        indptr: &'a [i64],
        /// Column of each stored value, in `0..dim`.
        indices: &'a [i64],
        /// The stored values.
        data: &'a [f64],
        /// Number of columns.
        dim: usize,
    },
}

/// One example.
#[derive(Debug, Clone, Copy)]
pub enum Row<'a> {
    /// All `dim` values.
    Dense(&'a [f64]),
    /// Column indices and values of the non-zeros.
    Sparse(&'a [i64], &'a [f64]),
}

impl<'a> Examples<'a> {
    /// Dense examples: `values` row-major with `dim` columns.
    ///
    /// # Errors
    /// [`SvmError::InvalidParameter`] if `dim == 0`, [`SvmError::ShapeMismatch`] if the length is
    /// not a multiple of `dim`, [`SvmError::Empty`] without rows, [`SvmError::NonFinite`] on NaN/inf.
    pub fn dense(values: &'a [f64], dim: usize) -> Result<Self, SvmError> {
        if dim == 0 {
            return Err(invalid("dim", "must be at least 1"));
        }
        if values.len() % dim != 0 {
            return Err(shape(
                "X",
                format!("{} values are not a multiple of dim = {dim}", values.len()),
            ));
        }
        if values.is_empty() {
            return Err(SvmError::Empty { name: "X" });
        }
        if !values.iter().all(|v| v.is_finite()) {
            return Err(SvmError::NonFinite { name: "X" });
        }
        Ok(Examples::Dense { values, dim })
    }

    /// CSR examples with `dim` columns.
    ///
    /// # Errors
    /// [`SvmError::ShapeMismatch`] unless `indptr` starts at 0, is non-decreasing and ends at
    /// `indices.len() == data.len()`, and every index lies in `0..dim`; [`SvmError::Empty`]
    /// without rows; [`SvmError::NonFinite`] on NaN/inf values.
    pub fn csr(
        indptr: &'a [i64],
        indices: &'a [i64],
        data: &'a [f64],
        dim: usize,
    ) -> Result<Self, SvmError> {
        if dim == 0 {
            return Err(invalid("dim", "must be at least 1"));
        }
        if indptr.len() < 2 {
            return Err(SvmError::Empty { name: "X" });
        }
        if indptr[0] != 0 || indptr.windows(2).any(|w| w[1] < w[0]) {
            return Err(shape("indptr", "must start at 0 and be non-decreasing"));
        }
        let nnz = indptr[indptr.len() - 1];
        if nnz < 0 || nnz as usize != indices.len() || indices.len() != data.len() {
            return Err(shape(
                "indices",
                format!(
                    "indptr ends at {nnz} but there are {} indices and {} values",
                    indices.len(),
                    data.len()
                ),
            ));
        }
        if indices.iter().any(|&j| j < 0 || j as usize >= dim) {
            return Err(shape(
                "indices",
                format!("column indices must lie in 0..{dim}"),
            ));
        }
        if !data.iter().all(|v| v.is_finite()) {
            return Err(SvmError::NonFinite { name: "X" });
        }
        Ok(Examples::Csr {
            indptr,
            indices,
            data,
            dim,
        })
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        match self {
            Examples::Dense { values, dim } => values.len() / dim,
            Examples::Csr { indptr, .. } => indptr.len() - 1,
        }
    }

    /// Whether there are no examples (never true for a validated set).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of columns.
    pub fn dim(&self) -> usize {
        match self {
            Examples::Dense { dim, .. } | Examples::Csr { dim, .. } => *dim,
        }
    }

    /// Asks the CPU to start loading example `i` into cache (a hint: no effect on results;
    /// a no-op off x86_64). Random-order epochs call it a few examples ahead, so that the
    /// row's cache misses overlap the work on the current example.
    #[inline]
    pub(crate) fn prefetch(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            fn lines<T>(s: &[T]) {
                let (p, bytes) = (s.as_ptr().cast::<u8>(), std::mem::size_of_val(s));
                // At most 32 lines (2 KiB) per array: longer rows stream on their own.
                for o in (0..bytes.min(2048))
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
                Examples::Dense { values, dim } => lines(&values[i * dim..(i + 1) * dim]),
                Examples::Csr {
                    indptr,
                    indices,
                    data,
                    ..
                } => {
                    let (a, b) = (indptr[i] as usize, indptr[i + 1] as usize);
                    lines(&indices[a..b]);
                    lines(&data[a..b]);
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    /// Example `i` (panics if `i >= len()`; callers index within range).
    pub fn row(&self, i: usize) -> Row<'a> {
        match *self {
            Examples::Dense { values, dim } => Row::Dense(&values[i * dim..(i + 1) * dim]),
            Examples::Csr {
                indptr,
                indices,
                data,
                ..
            } => {
                let (a, b) = (indptr[i] as usize, indptr[i + 1] as usize);
                Row::Sparse(&indices[a..b], &data[a..b])
            }
        }
    }
}

impl Examples<'_> {
    /// Hints the CPU to load row `i` into cache (no effect on results; a no-op off x86-64).
    #[inline]
    pub fn prefetch_row(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            // the first two cache lines of the row's values (and of its indices)
            let (a, b): (&[i64], &[f64]) = match *self {
                Examples::Dense { values, dim } => (&[], &values[i * dim..(i + 1) * dim]),
                Examples::Csr {
                    indptr,
                    indices,
                    data,
                    ..
                } => {
                    let (s, e) = (indptr[i] as usize, indptr[i + 1] as usize);
                    (&indices[s..e], &data[s..e])
                }
            };
            // SAFETY: prefetch is a hint; every pointer points into a live slice.
            unsafe {
                for k in [0, 8] {
                    if let Some(p) = a.get(k) {
                        _mm_prefetch((p as *const i64).cast::<i8>(), _MM_HINT_T0);
                    }
                    if let Some(p) = b.get(k) {
                        _mm_prefetch((p as *const f64).cast::<i8>(), _MM_HINT_T0);
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }
}

impl Row<'_> {
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
    dense: Vec<f64>,
    indptr: Vec<i64>,
    indices: Vec<i64>,
    data: Vec<f64>,
    dim: usize,
    sparse: bool,
}

/// Largest data set (bytes) an epoch gathers into its shuffled order.
pub(crate) const GATHER_LIMIT: usize = 512 << 20;

impl Gathered {
    /// `Some(copy in order)` when the data are small enough, else `None`.
    pub(crate) fn new(ex: &Examples<'_>, order: &[usize]) -> Option<Self> {
        let dim = ex.dim();
        match *ex {
            Examples::Dense { values, .. } => {
                if values.len() * 8 > GATHER_LIMIT {
                    return None;
                }
                let mut dense = Vec::with_capacity(values.len());
                for &i in order {
                    dense.extend_from_slice(&values[i * dim..(i + 1) * dim]);
                }
                Some(Gathered {
                    dense,
                    indptr: Vec::new(),
                    indices: Vec::new(),
                    data: Vec::new(),
                    dim,
                    sparse: false,
                })
            }
            Examples::Csr {
                indptr,
                indices,
                data,
                ..
            } => {
                if data.len() * 16 > GATHER_LIMIT {
                    return None;
                }
                let mut ip = Vec::with_capacity(indptr.len());
                let mut ix = Vec::with_capacity(indices.len());
                let mut dv = Vec::with_capacity(data.len());
                ip.push(0i64);
                for &i in order {
                    let (a, b) = (indptr[i] as usize, indptr[i + 1] as usize);
                    ix.extend_from_slice(&indices[a..b]);
                    dv.extend_from_slice(&data[a..b]);
                    ip.push(ix.len() as i64);
                }
                Some(Gathered {
                    dense: Vec::new(),
                    indptr: ip,
                    indices: ix,
                    data: dv,
                    dim,
                    sparse: true,
                })
            }
        }
    }

    /// The gathered examples (row k is example `order[k]`).
    pub(crate) fn view(&self) -> Examples<'_> {
        if self.sparse {
            Examples::Csr {
                indptr: &self.indptr,
                indices: &self.indices,
                data: &self.data,
                dim: self.dim,
            }
        } else {
            Examples::Dense {
                values: &self.dense,
                dim: self.dim,
            }
        }
    }
}

/// Whether the CPU has AVX2 (cached by the standard library after the first call).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_avx2() -> bool {
    vastml_spatial::simd_allowed() && std::arch::is_x86_feature_detected!("avx2")
}

/// Dot product of two dense slices with four accumulators (vectorises; the single-chain
/// `iter().sum()` is bound by the latency of floating-point addition).
#[inline]
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    let tail: f64 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

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

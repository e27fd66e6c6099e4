//! Locally Linear Landmarks (Vladymyrov & Carreira-Perpiñán 2013; thesis chapter 4): the
//! O(N) kernels of the method.
//!
//! * [`reconstruction_weights`] (`weights`): for every point its K_Z nearest landmarks (brute
//!   force in blocks through a matrix product, then exact distances of the candidates) and
//!   the regularised LLE weights (thesis 4.6-4.8), parallel over blocks of points.
//! * [`z_m_zt`], [`z_m_zt_keep`] (`sandwich`): the reduced matrix `Z (diag(v) + M) Zᵀ` (L×L,
//!   dense) for a sparse N×N `M`, parallel and deterministic (every output row sums its
//!   terms in point order, whatever the number of threads); [`z_m_zt_sym`] (`symmetric`)
//!   the same for a symmetric `M`, reading its upper triangle only.
//! * [`csr_dense_product`], [`sym_quadratic_form`] (`block`): the products with an N×k block
//!   behind the Rayleigh-Ritz refinement of an LLL embedding.
//!
//! `Z` (L×N, K_Z entries per column) is held by columns: [`Weights`]. The long loops take a
//! [`Control`]: they poll its cancel flag and report to its hook between chunks of points
//! (objective NaN, no state); a hook returning `true` stops them with
//! [`EmbedError::Stopped`].
//!
//! # Example
//!
//! ```
//! use vastml_core::Control;
//! use vastml_embed::lll::{reconstruction_weights, z_m_zt};
//!
//! // 4 points on a line, landmarks at 0 and 3: every point is an affine combination.
//! let x = [0.0, 1.0, 2.0, 3.0];
//! let lm = [0.0, 3.0];
//! let z = reconstruction_weights(&x, &lm, 1, 2, 0.0, Control::none()).unwrap();
//! assert_eq!(z.indices[2..4], [0, 1]);          // point 1: nearest landmark 0, then 1
//! assert!((z.values[2] - 2.0 / 3.0).abs() < 1e-9 && (z.values[3] - 1.0 / 3.0).abs() < 1e-9);
//! // Z Zᵀ: 2×2, entries sum to N (columns of Z sum to one).
//! let b = z_m_zt::<i64>(&z, 2, Some(&[1.0; 4]), None, Control::none()).unwrap();
//! assert!((b.iter().sum::<f64>() - 4.0).abs() < 1e-9);
//! ```

use vastml_core::Control;

use crate::error::{EmbedError, Result, check_finite, invalid};
use crate::objective::CsrIndex;

mod block;
mod sandwich;
mod symmetric;
mod weights;

pub use block::{csr_dense_product, sym_quadratic_form};
pub use sandwich::{SparseRows, z_m_zt, z_m_zt_keep};
pub use symmetric::z_m_zt_sym;
pub use weights::reconstruction_weights;

/// Entries of M ahead whose column of Z (or row of a block) the products ask the memory for.
const PREFETCH: usize = 8;

/// The reconstruction weights Z (L×N) by columns: point `n` is reconstructed by the landmarks
/// `indices[n*k..(n+1)*k]` (nearest first) with weights `values[n*k..(n+1)*k]` (sum one).
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    /// K_Z, the landmarks per point.
    pub k: usize,
    /// Landmark indices, N×K_Z row-major.
    pub indices: Vec<u32>,
    /// Weights, N×K_Z row-major.
    pub values: Vec<f64>,
}

impl Weights {
    /// Number of points (columns of Z).
    pub fn n_points(&self) -> usize {
        self.indices.len().checked_div(self.k).unwrap_or(0)
    }

    fn column(&self, n: usize) -> (&[u32], &[f64]) {
        let r = n * self.k..(n + 1) * self.k;
        (&self.indices[r.clone()], &self.values[r])
    }

    /// Checks that the weights describe an L×N matrix with finite values.
    fn check(&self, l: usize) -> Result<()> {
        if self.values.len() != self.indices.len() || (self.k == 0 && !self.indices.is_empty()) {
            return Err(EmbedError::ShapeMismatch(
                "weights: indices and values differ in length".into(),
            ));
        }
        if self.indices.iter().any(|&i| i as usize >= l) {
            return Err(invalid("indices", format!("landmark index >= {l}")));
        }
        check_finite(&self.values, "values")
    }
}

/// A sparse N×N matrix in CSR form (int64 indices, or SciPy's int32 so that a large graph
/// is not copied on the way in); float64 values of any sign. The checked CSR view
/// [`vastml_core::Csr`] with f64 values.
pub type Csr<'a, I = i64> = crate::objective::Csr<'a, I, f64>;

/// Checks that `m` is N×N (`n` = N); its structure, column range and finiteness were checked
/// when it was built.
fn check_square<I: CsrIndex>(m: &Csr<'_, I>, n: usize) -> Result<()> {
    if m.n_rows() != n || m.n_cols() != n {
        return Err(EmbedError::ShapeMismatch(format!(
            "M must be a {n}×{n} CSR matrix (got {}×{})",
            m.n_rows(),
            m.n_cols()
        )));
    }
    Ok(())
}

/// Reports of a loop over `total` chunks: at most [`MAX_REPORTS`], numbered 1, 2, … in order.
struct Reports {
    every: usize,
    made: usize,
}

/// Upper bound of the reports one kernel call makes to a progress hook.
const MAX_REPORTS: usize = 256;

impl Reports {
    fn new(total: usize) -> Self {
        Self {
            every: total.div_ceil(MAX_REPORTS).max(1),
            made: 0,
        }
    }

    /// After chunk `done` (counted from 1) of `total`: polls the cancel flag, and reports
    /// every `every` chunks and after the last one.
    fn after(&mut self, control: &Control<'_>, done: usize, total: usize) -> Result<()> {
        if done % self.every == 0 || done == total {
            self.made += 1;
            control.report(self.made, || f64::NAN, &())?;
        } else {
            control.check()?;
        }
        Ok(())
    }
}

/// Z's columns packed one record per point (in the order of `z`), 64-byte aligned: K_Z
/// weights then the K_Z landmark indices two to a word, so a random fetch of a column is one
/// or two cache lines instead of a lookup into separate index and value arrays.
struct Packed {
    words: Vec<u64>,
    off: usize,
    stride: usize,
    k: usize,
}

impl Packed {
    fn new(z: &Weights) -> Packed {
        let (n, k) = (z.n_points(), z.k);
        let stride = k + k.div_ceil(2);
        let mut words = vec![0u64; n * stride + 8];
        let off = (64 - words.as_ptr() as usize % 64) % 64 / 8;
        for (rec, (ix, vs)) in words[off..off + n * stride]
            .chunks_exact_mut(stride)
            .zip(z.indices.chunks_exact(k).zip(z.values.chunks_exact(k)))
        {
            for (t, (&i, &v)) in ix.iter().zip(vs).enumerate() {
                rec[t] = v.to_bits();
                rec[k + t / 2] |= u64::from(i) << (32 * (t % 2));
            }
        }
        Packed {
            words,
            off,
            stride,
            k,
        }
    }

    #[inline(always)]
    fn head(&self, p: usize) -> &u64 {
        &self.words[self.off + p * self.stride]
    }

    /// Calls `f(landmark, weight)` for the K_Z entries of column `p`, nearest first.
    #[inline(always)]
    fn for_each(&self, p: usize, mut f: impl FnMut(usize, f64)) {
        let a = self.off + p * self.stride;
        let rec = &self.words[a..a + self.stride];
        let k = self.k;
        for t in 0..k {
            let w = f64::from_bits(rec[t]);
            let i = (rec[k + t / 2] >> (32 * (t % 2))) as u32 as usize;
            f(i, w);
        }
    }
}

/// The upper-triangle entries `(j, w)` of row `p` (j > p, and the diagonal with weight ½)
/// passed to `f`; false on a column index out of range.
#[inline(always)]
fn upper_row<I: CsrIndex>(
    m: Csr<'_, I>,
    p: usize,
    mut f: impl FnMut(usize, f64, &[I], usize),
) -> bool {
    let n = m.n_rows();
    let (ix, vs) = m.row(p);
    let pi = I::of(p);
    if ix.windows(2).all(|w| w[0] < w[1]) {
        let mut from = ix.partition_point(|&j| j < pi);
        if ix.get(from) == Some(&pi) {
            f(p, 0.5 * vs[from], &[], 0);
            from += 1;
        }
        let (ix, vs) = (&ix[from..], &vs[from..]);
        if ix.last().is_some_and(|j| !j.below(n)) {
            return false;
        }
        for (t, (&j, &w)) in ix.iter().zip(vs).enumerate() {
            f(j.ix(), w, ix, t);
        }
    } else {
        for (&j, &w) in ix.iter().zip(vs) {
            if !j.below(n) {
                return false;
            }
            if j > pi {
                f(j.ix(), w, &[], 0);
            } else if j == pi {
                f(p, 0.5 * w, &[], 0);
            }
        }
    }
    true
}

/// Hint the processor to bring the cache line of `v` in (no effect on results; a no-op off
/// x86-64).
#[inline(always)]
fn prefetch<T>(v: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of a valid reference's address; it reads nothing into the program.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((v as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

#[cfg(test)]
mod tests;

//! Products of a sparse N×N matrix with a dense N×k block: `M X` and, for a symmetric M,
//! `Vᵀ M V` from its upper triangle. The refinement of an LLL embedding needs both.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use super::{Csr, PREFETCH, check_square, prefetch, upper_row};
use crate::error::{EmbedError, Result, check_finite, invalid};
use crate::objective::CsrIndex;

/// Checks a sparse N×N CSR `m` and a dense N×k row-major block `x` (named `name` in errors)
/// for [`csr_dense_product`] and [`sym_quadratic_form`]; returns N.
fn check_csr_block<I: CsrIndex>(
    m: Csr<'_, I>,
    x: &[f64],
    k: usize,
    name: &'static str,
) -> Result<usize> {
    let n = m.n_rows();
    check_square(&m, n)?;
    if x.len() != n * k {
        return Err(EmbedError::ShapeMismatch(format!(
            "{} has {} entries for {n}×{k}",
            name.to_uppercase(),
            x.len()
        )));
    }
    check_finite(x, name)?;
    Ok(n)
}

/// Rows of the output per parallel task of [`csr_dense_product`].
const SPMM_ROWS: usize = 256;

/// `Y = M X` for a sparse N×N CSR `M` and a dense N×k row-major `X` (N×k row-major result).
///
/// The block product behind the refinement of an LLL embedding (smoothing steps and the
/// Rayleigh-Ritz matrices need `W X` for a few columns): one pass over the stored entries of
/// M with the k columns updated together, parallel over runs of rows; every row sums its
/// entries in stored order, so the result does not depend on the number of threads.
///
/// # Errors
/// Shapes that disagree (M not N×N), non-finite values, or cancellation.
pub fn csr_dense_product<I: CsrIndex>(
    m: Csr<'_, I>,
    x: &[f64],
    k: usize,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let n = check_csr_block(m, x, k, "x")?;
    let mut out = vec![0.0f64; n * k];
    if n == 0 || k == 0 {
        return Ok(out);
    }
    // one pass over M: column indices are checked as they are used (a bad one stops the row),
    // and the data's finiteness is checked on the (much smaller) result instead of on M
    let bad = AtomicBool::new(false);
    macro_rules! run {
        ($($c:literal)*) => {
            match k {
                $($c => spmm_fixed::<I, $c>(m, x, &mut out, &bad, cancel),)*
                _ => spmm_any(m, x, k, &mut out, &bad, cancel),
            }
        };
    }
    run!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    if cancel.load(Ordering::Relaxed) {
        return Err(EmbedError::Cancelled);
    }
    if bad.load(Ordering::Relaxed) {
        return Err(invalid("indices", format!("column index >= {n}")));
    }
    if out.iter().any(|v| !v.is_finite()) {
        return Err(EmbedError::NonFinite { name: "data" });
    }
    Ok(out)
}

/// Rows of [`csr_dense_product`] with k known at compile time: the k sums stay in registers.
fn spmm_fixed<I: CsrIndex, const K: usize>(
    m: Csr<'_, I>,
    x: &[f64],
    out: &mut [f64],
    bad: &AtomicBool,
    cancel: &AtomicBool,
) {
    let n = m.n_rows();
    out.par_chunks_mut(SPMM_ROWS * K)
        .enumerate()
        .for_each(|(b, block)| {
            if cancel.load(Ordering::Relaxed) || bad.load(Ordering::Relaxed) {
                return;
            }
            for (r, dst) in block.chunks_exact_mut(K).enumerate() {
                let row = b * SPMM_ROWS + r;
                let (ix, vs) = m.row(row);
                let mut acc = [0.0f64; K];
                for (t, (&j, &w)) in ix.iter().zip(vs).enumerate() {
                    if let Some(&ahead) = ix.get(t + PREFETCH) {
                        if ahead.below(n) {
                            prefetch(&x[ahead.ix() * K]);
                        }
                    }
                    if !j.below(n) {
                        bad.store(true, Ordering::Relaxed);
                        return;
                    }
                    let xr: &[f64; K] = x[j.ix() * K..j.ix() * K + K].try_into().unwrap();
                    for c in 0..K {
                        acc[c] += w * xr[c];
                    }
                }
                dst.copy_from_slice(&acc);
            }
        });
}

/// [`spmm_fixed`] for any k.
fn spmm_any<I: CsrIndex>(
    m: Csr<'_, I>,
    x: &[f64],
    k: usize,
    out: &mut [f64],
    bad: &AtomicBool,
    cancel: &AtomicBool,
) {
    let n = m.n_rows();
    out.par_chunks_mut(SPMM_ROWS * k)
        .enumerate()
        .for_each(|(b, block)| {
            if cancel.load(Ordering::Relaxed) || bad.load(Ordering::Relaxed) {
                return;
            }
            for (r, acc) in block.chunks_exact_mut(k).enumerate() {
                let row = b * SPMM_ROWS + r;
                let (ix, vs) = m.row(row);
                for (&j, &w) in ix.iter().zip(vs) {
                    if !j.below(n) {
                        bad.store(true, Ordering::Relaxed);
                        return;
                    }
                    let xr = &x[j.ix() * k..j.ix() * k + k];
                    for (a, &v) in acc.iter_mut().zip(xr) {
                        *a += w * v;
                    }
                }
            }
        });
}

/// Points per chunk of [`sym_quadratic_form`] (fixed: the sums do not depend on the threads).
const QF_CHUNK: usize = 2048;

/// `Vᵀ M V` (k×k, row-major) for a **symmetric** sparse N×N `M` and a dense N×k row-major `V`,
/// reading only the upper triangle of M: every edge once.
///
/// With `M = U + diag(M) + Uᵀ`, `Vᵀ M V = S + Sᵀ` where
/// `S = Σ_p v_p (Σ_{m > p} M_pm v_m + ½ M_pp v_p)ᵀ`: half the random row fetches of the full
/// product `M V`, for when only the small matrix is wanted (the last block of a Rayleigh-Ritz
/// refinement). Rows with sorted column indices start above the diagonal by a binary search;
/// others are filtered. `M` is not checked for symmetry (its lower triangle is never read).
/// Deterministic for any number of threads (fixed chunks of points, summed in order).
///
/// # Errors
/// Shapes that disagree (M not N×N), non-finite values, or cancellation.
pub fn sym_quadratic_form<I: CsrIndex>(
    m: Csr<'_, I>,
    v: &[f64],
    k: usize,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let n = check_csr_block(m, v, k, "v")?;
    let mut out = vec![0.0f64; k * k];
    if n == 0 || k == 0 {
        return Ok(out);
    }
    let bad = AtomicBool::new(false);
    macro_rules! run {
        ($($c:literal)*) => {
            match k {
                $($c => qf_fixed::<I, $c>(m, v, &bad, cancel),)*
                _ => qf_any(m, v, k, &bad, cancel),
            }
        };
    }
    let parts = run!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    if cancel.load(Ordering::Relaxed) {
        return Err(EmbedError::Cancelled);
    }
    if bad.load(Ordering::Relaxed) {
        return Err(invalid("indices", format!("column index >= {n}")));
    }
    for part in &parts {
        out.iter_mut().zip(part).for_each(|(o, v)| *o += v);
    }
    for i in 0..k {
        for j in 0..i {
            let s = out[i * k + j] + out[j * k + i];
            out[i * k + j] = s;
            out[j * k + i] = s;
        }
        out[i * k + i] *= 2.0;
    }
    if out.iter().any(|v| !v.is_finite()) {
        return Err(EmbedError::NonFinite { name: "data" });
    }
    Ok(out)
}

fn qf_fixed<I: CsrIndex, const K: usize>(
    m: Csr<'_, I>,
    v: &[f64],
    bad: &AtomicBool,
    cancel: &AtomicBool,
) -> Vec<Vec<f64>> {
    let n = m.n_rows();
    (0..n.div_ceil(QF_CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut s = vec![0.0f64; K * K];
            if cancel.load(Ordering::Relaxed) || bad.load(Ordering::Relaxed) {
                return s;
            }
            for p in c * QF_CHUNK..((c + 1) * QF_CHUNK).min(n) {
                let mut acc = [0.0f64; K];
                let ok = upper_row(m, p, |j, w, ix, t| {
                    if let Some(&ahead) = ix.get(t + PREFETCH) {
                        prefetch(&v[ahead.ix() * K]);
                    }
                    let xr: &[f64; K] = v[j * K..j * K + K].try_into().unwrap();
                    for c in 0..K {
                        acc[c] += w * xr[c];
                    }
                });
                if !ok {
                    bad.store(true, Ordering::Relaxed);
                    return s;
                }
                let vp: &[f64; K] = v[p * K..p * K + K].try_into().unwrap();
                for a in 0..K {
                    for b in 0..K {
                        s[a * K + b] += vp[a] * acc[b];
                    }
                }
            }
            s
        })
        .collect()
}

fn qf_any<I: CsrIndex>(
    m: Csr<'_, I>,
    v: &[f64],
    k: usize,
    bad: &AtomicBool,
    cancel: &AtomicBool,
) -> Vec<Vec<f64>> {
    let n = m.n_rows();
    (0..n.div_ceil(QF_CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut s = vec![0.0f64; k * k];
            let mut acc = vec![0.0f64; k];
            if cancel.load(Ordering::Relaxed) || bad.load(Ordering::Relaxed) {
                return s;
            }
            for p in c * QF_CHUNK..((c + 1) * QF_CHUNK).min(n) {
                acc.iter_mut().for_each(|a| *a = 0.0);
                let ok = upper_row(m, p, |j, w, _, _| {
                    for (a, &x) in acc.iter_mut().zip(&v[j * k..j * k + k]) {
                        *a += w * x;
                    }
                });
                if !ok {
                    bad.store(true, Ordering::Relaxed);
                    return s;
                }
                for a in 0..k {
                    for b in 0..k {
                        s[a * k + b] += v[p * k + a] * acc[b];
                    }
                }
            }
            s
        })
        .collect()
}

//! Locally Linear Landmarks (Vladymyrov & Carreira-Perpiñán 2013; thesis chapter 4): the two
//! O(N) kernels of the method.
//!
//! * [`reconstruction_weights`]: for every point its K_Z nearest landmarks (brute force in
//!   blocks through a matrix product, then exact distances of the candidates) and the
//!   regularised LLE weights (thesis 4.6-4.8), parallel over blocks of points.
//! * [`z_m_zt`]: the reduced matrix `Z (diag(v) + M) Zᵀ` (L×L, dense) for a sparse N×N `M`,
//!   parallel and deterministic (every output row sums its terms in point order, whatever
//!   the number of threads).
//!
//! `Z` (L×N, K_Z entries per column) is held by columns: [`Weights`].
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use vastml_embed::lll::{reconstruction_weights, z_m_zt};
//!
//! // 4 points on a line, landmarks at 0 and 3: every point is an affine combination.
//! let x = [0.0, 1.0, 2.0, 3.0];
//! let lm = [0.0, 3.0];
//! let z = reconstruction_weights(&x, &lm, 1, 2, 0.0, &AtomicBool::new(false)).unwrap();
//! assert_eq!(z.indices[2..4], [0, 1]);          // point 1: nearest landmark 0, then 1
//! assert!((z.values[2] - 2.0 / 3.0).abs() < 1e-9 && (z.values[3] - 1.0 / 3.0).abs() < 1e-9);
//! // Z Zᵀ: 2×2, entries sum to N (columns of Z sum to one).
//! let b = z_m_zt::<i64>(&z, 2, Some(&[1.0; 4]), None, &AtomicBool::new(false)).unwrap();
//! assert!((b.iter().sum::<f64>() - 4.0).abs() < 1e-9);
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::error::{EmbedError, Result, check_finite, invalid};
use crate::objective::CsrIndex;

/// Points per block of the landmark search (the block's distances to all landmarks are held).
const BLOCK: usize = 256;
/// Extra candidates whose exact distance is computed after the matrix-product screening, so a
/// rounding error of the screening cannot drop a true K_Z-th nearest landmark.
const MARGIN: usize = 4;
/// Points per block of [`z_m_zt`].
const SANDWICH_BLOCK: usize = 1024;
/// Entries of M ahead whose column of Z [`z_m_zt`] asks the memory for.
const PREFETCH: usize = 8;
/// Ridge relative to trace(G) added when the regularised Gram matrix is still singular.
const FALLBACK_RIDGE: f64 = 1e-12;

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
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    // four accumulators so the loop vectorises
    let mut s = [0.0f64; 4];
    let (ca, ra) = a.split_at(a.len() / 4 * 4);
    let (cb, rb) = b.split_at(ca.len());
    for (x, y) in ca.chunks_exact(4).zip(cb.chunks_exact(4)) {
        s[0] += x[0] * y[0];
        s[1] += x[1] * y[1];
        s[2] += x[2] * y[2];
        s[3] += x[3] * y[3];
    }
    let mut t = (s[0] + s[1]) + (s[2] + s[3]);
    for (x, y) in ra.iter().zip(rb) {
        t += x * y;
    }
    t
}

fn sqdist(a: &[f64], b: &[f64]) -> f64 {
    let mut s = [0.0f64; 4];
    let (ca, ra) = a.split_at(a.len() / 4 * 4);
    let (cb, rb) = b.split_at(ca.len());
    for (x, y) in ca.chunks_exact(4).zip(cb.chunks_exact(4)) {
        for l in 0..4 {
            let d = x[l] - y[l];
            s[l] += d * d;
        }
    }
    let mut t = (s[0] + s[1]) + (s[2] + s[3]);
    for (x, y) in ra.iter().zip(rb) {
        t += (x - y) * (x - y);
    }
    t
}

/// Solves `g w = 1` (g: k×k row-major, overwritten) by LU with partial pivoting.
/// Returns false when a pivot is zero or the result is not finite.
fn solve_ones(g: &mut [f64], k: usize, w: &mut [f64]) -> bool {
    w.iter_mut().for_each(|v| *v = 1.0);
    for c in 0..k {
        let (mut p, mut best) = (c, g[c * k + c].abs());
        for r in c + 1..k {
            let v = g[r * k + c].abs();
            if v > best {
                p = r;
                best = v;
            }
        }
        if best == 0.0 || !best.is_finite() {
            return false;
        }
        if p != c {
            for j in 0..k {
                g.swap(c * k + j, p * k + j);
            }
            w.swap(c, p);
        }
        let piv = g[c * k + c];
        for r in c + 1..k {
            let f = g[r * k + c] / piv;
            if f != 0.0 {
                for j in c + 1..k {
                    g[r * k + j] -= f * g[c * k + j];
                }
                w[r] -= f * w[c];
            }
        }
    }
    for c in (0..k).rev() {
        let mut s = w[c];
        for j in c + 1..k {
            s -= g[c * k + j] * w[j];
        }
        w[c] = s / g[c * k + c];
    }
    w.iter().all(|v| v.is_finite())
}

/// Per-thread buffers of the weight computation.
struct Scratch {
    dots: Vec<f32>,
    screen: Vec<f64>,
    cand: Vec<(f64, u32)>,
    diff: Vec<f64>,
    g: Vec<f64>,
    g0: Vec<f64>,
    w: Vec<f64>,
    xc: Vec<f32>,
}

/// LLE reconstruction weights of every point from its `k` nearest landmarks.
///
/// `x` (N×D) and `landmarks` (L×D) are row-major. Column n of Z solves
/// `min ||x_n − Σ_i z_i l_i||² s.t. Σ_i z_i = 1` over its K_Z nearest landmarks: `G z = 1`
/// with `G_ij = (x_n − l_i)ᵀ(x_n − l_j) + reg·tr(G)·δ_ij`, then rescaled to sum to one
/// (thesis 4.7-4.8; the LLE convention). With `reg = 0` and a singular G (K_Z > D) a ridge
/// of `1e-12·tr(G)` is added. A point that coincides with its nearest landmark gets exactly
/// that landmark's unit vector. Landmarks within a point's list are ordered by distance
/// (ties by index).
///
/// # Errors
/// `k` = 0 or above L, `dim` = 0, shapes that disagree, non-finite input, negative `reg`,
/// or cancellation.
pub fn reconstruction_weights(
    x: &[f64],
    landmarks: &[f64],
    dim: usize,
    k: usize,
    reg: f64,
    cancel: &AtomicBool,
) -> Result<Weights> {
    if dim == 0 {
        return Err(invalid("dim", "must be positive"));
    }
    if x.len() % dim != 0 || landmarks.len() % dim != 0 {
        return Err(EmbedError::ShapeMismatch(format!(
            "x ({}) and landmarks ({}) must both hold rows of {dim} values",
            x.len(),
            landmarks.len()
        )));
    }
    let n = x.len() / dim;
    let l = landmarks.len() / dim;
    if k == 0 || k > l {
        return Err(invalid(
            "n_neighbors",
            format!("must lie in [1, {l}] (the number of landmarks), got {k}"),
        ));
    }
    if l > u32::MAX as usize {
        return Err(invalid("landmarks", "more than 2^32 landmarks"));
    }
    if !(reg.is_finite() && reg >= 0.0) {
        return Err(invalid(
            "reg",
            format!("must be finite and >= 0, got {reg}"),
        ));
    }
    check_finite(x, "x")?;
    check_finite(landmarks, "landmarks")?;
    // Centre at the landmarks' mean so the screening |x|² + |l|² − 2 x·l cancels less.
    let mut mean = vec![0.0; dim];
    for row in landmarks.chunks_exact(dim) {
        mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
    }
    mean.iter_mut().for_each(|m| *m /= l as f64);
    let lc: Vec<f64> = landmarks
        .chunks_exact(dim)
        .flat_map(|row| row.iter().zip(&mean).map(|(v, m)| v - m))
        .collect();
    let lnorm: Vec<f64> = lc.chunks_exact(dim).map(|r| dot(r, r)).collect();
    let lc32: Vec<f32> = lc.iter().map(|&v| v as f32).collect();
    // The screening runs in f32 (half the GEMM time of f64). Its error on a squared distance
    // |x|² + |l|² − 2 x·l is at most GAMMA·(|x|² + |l|²) (rounding of the inputs and of a
    // D-term dot product, with room to spare); after the exact distances of the candidates the
    // K_Z-th is checked against the smallest screened value left out, and a point whose
    // ranking the screening could have got wrong is searched exhaustively in f64 (on the
    // bench data: never).
    let gamma = 4.0 * (dim as f64 + 4.0) * f64::from(f32::EPSILON);
    let lmax = lnorm.iter().fold(0.0f64, |a, &v| a.max(v));
    let kc = (k + MARGIN).min(l);

    let mut indices = vec![0u32; n * k];
    let mut values = vec![0.0f64; n * k];
    indices
        .par_chunks_mut(BLOCK * k)
        .zip(values.par_chunks_mut(BLOCK * k))
        .enumerate()
        .try_for_each_init(
            || Scratch {
                dots: vec![0.0; BLOCK * l],
                screen: vec![0.0; l],
                cand: Vec::with_capacity(l),
                diff: vec![0.0; k * dim],
                g: vec![0.0; k * k],
                g0: vec![0.0; k * k],
                w: vec![0.0; k],
                xc: vec![0.0; BLOCK * dim],
            },
            |s, (b, (idx_out, val_out))| {
                if cancel.load(Ordering::Relaxed) {
                    return Err(EmbedError::Cancelled);
                }
                let start = b * BLOCK;
                let m = idx_out.len() / k;
                let xb = &x[start * dim..(start + m) * dim];
                for (dst, src) in s.xc.chunks_exact_mut(dim).zip(xb.chunks_exact(dim)) {
                    dst.iter_mut()
                        .zip(src.iter().zip(&mean))
                        .for_each(|(d, (v, mu))| *d = (v - mu) as f32);
                }
                // dots = Xc_b · Lcᵀ  (m × L), f32
                // SAFETY: the strides describe row-major m×dim, (L×dim)ᵀ and m×L arrays that
                // the slices hold entirely.
                unsafe {
                    matrixmultiply::sgemm(
                        m,
                        dim,
                        l,
                        1.0,
                        s.xc.as_ptr(),
                        dim as isize,
                        1,
                        lc32.as_ptr(),
                        1,
                        dim as isize,
                        0.0,
                        s.dots.as_mut_ptr(),
                        l as isize,
                        1,
                    );
                }
                for p in 0..m {
                    let xp = &xb[p * dim..(p + 1) * dim];
                    let xn: f64 = xp
                        .iter()
                        .zip(&mean)
                        .map(|(v, mu)| (v - mu) * (v - mu))
                        .sum();
                    // the screened values (a vectorisable pass), then the kc smallest kept
                    // sorted by insertion: most of the L values fail the first comparison,
                    // and an insertion shifts at most kc entries in place
                    let dp = &s.dots[p * l..(p + 1) * l];
                    for ((v, &d), &ln) in s.screen.iter_mut().zip(dp).zip(&lnorm) {
                        *v = xn + ln - 2.0 * f64::from(d);
                    }
                    s.cand.clear();
                    for (j, &v) in s.screen.iter().enumerate() {
                        let mut at = s.cand.len();
                        if at == kc {
                            if v >= s.cand[kc - 1].0 {
                                continue;
                            }
                            at = kc - 1;
                        } else {
                            s.cand.push((v, j as u32));
                        }
                        while at > 0 && s.cand[at - 1].0 > v {
                            s.cand[at] = s.cand[at - 1];
                            at -= 1;
                        }
                        s.cand[at] = (v, j as u32);
                    }
                    let screened_max = s.cand.last().map_or(f64::INFINITY, |c| c.0);
                    for c in s.cand.iter_mut() {
                        let j = c.1 as usize;
                        c.0 = sqdist(xp, &landmarks[j * dim..(j + 1) * dim]);
                    }
                    s.cand
                        .sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    // a landmark left out has a screened value >= screened_max, so its true
                    // squared distance is >= screened_max - err: if that could still beat the
                    // K_Z-th candidate, rank all landmarks exactly
                    if kc < l && screened_max - gamma * (xn + lmax) <= s.cand[k - 1].0 {
                        s.cand.clear();
                        s.cand.extend(
                            (0..l).map(|j| {
                                (sqdist(xp, &landmarks[j * dim..(j + 1) * dim]), j as u32)
                            }),
                        );
                        s.cand
                            .sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    }
                    let io = &mut idx_out[p * k..(p + 1) * k];
                    let vo = &mut val_out[p * k..(p + 1) * k];
                    for (o, c) in io.iter_mut().zip(&s.cand) {
                        *o = c.1;
                    }
                    if s.cand[0].0 == 0.0 {
                        vo.iter_mut().for_each(|v| *v = 0.0);
                        vo[0] = 1.0;
                        continue;
                    }
                    for (i, &j) in io.iter().enumerate() {
                        let lj = &landmarks[j as usize * dim..(j as usize + 1) * dim];
                        s.diff[i * dim..(i + 1) * dim]
                            .iter_mut()
                            .zip(xp.iter().zip(lj))
                            .for_each(|(d, (a, b))| *d = a - b);
                    }
                    let mut trace = 0.0;
                    for i in 0..k {
                        let di = &s.diff[i * dim..(i + 1) * dim];
                        for j in 0..=i {
                            let v = dot(di, &s.diff[j * dim..(j + 1) * dim]);
                            s.g0[i * k + j] = v;
                            s.g0[j * k + i] = v;
                        }
                        trace += s.g0[i * k + i];
                    }
                    let scale = if trace > 0.0 { trace } else { 1.0 };
                    let mut ok = false;
                    for r in [reg.max(FALLBACK_RIDGE), 1e-9, 1e-6] {
                        s.g.copy_from_slice(&s.g0);
                        for i in 0..k {
                            s.g[i * k + i] += r * scale;
                        }
                        if solve_ones(&mut s.g, k, &mut s.w) {
                            let sum: f64 = s.w.iter().sum();
                            if sum != 0.0 && sum.is_finite() {
                                vo.iter_mut().zip(&s.w).for_each(|(o, w)| *o = w / sum);
                                ok = true;
                                break;
                            }
                        }
                    }
                    if !ok {
                        vo.iter_mut().for_each(|v| *v = 1.0 / k as f64);
                    }
                }
                Ok(())
            },
        )?;
    Ok(Weights { k, indices, values })
}

/// Hint the processor to bring the cache line of `v` in (no effect on results; a no-op off
/// x86-64).
#[inline(always)]
fn prefetch(v: &u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of a valid reference's address; it reads nothing into the program.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((v as *const u64).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

/// For every landmark, the (point, weight) pairs of its row of Z, points in increasing order.
struct Rows {
    start: Vec<usize>,
    point: Vec<u32>,
    weight: Vec<f64>,
}

fn rows_of(z: &Weights, l: usize, points: std::ops::Range<usize>) -> Rows {
    let mut start = vec![0usize; l + 1];
    for n in points.clone() {
        for &i in z.column(n).0 {
            start[i as usize + 1] += 1;
        }
    }
    for i in 0..l {
        start[i + 1] += start[i];
    }
    let total = start[l];
    let mut fill = start.clone();
    let mut point = vec![0u32; total];
    let mut weight = vec![0.0; total];
    for n in points.clone() {
        let (ix, vs) = z.column(n);
        for (&i, &v) in ix.iter().zip(vs) {
            let f = &mut fill[i as usize];
            point[*f] = (n - points.start) as u32;
            weight[*f] = v;
            *f += 1;
        }
    }
    Rows {
        start,
        point,
        weight,
    }
}

/// A sparse N×N matrix in CSR form (int64 indices, or SciPy's int32 so that a large graph
/// is not copied on the way in); any signs.
#[derive(Debug, Clone, Copy)]
pub struct Csr<'a, I: CsrIndex = i64> {
    /// Row pointers (N + 1 entries).
    pub indptr: &'a [I],
    /// Column indices.
    pub indices: &'a [I],
    /// Values.
    pub data: &'a [f64],
}

/// `t_n = Σ_m M_nm z_m + v_n z_n` of a run of points as sparse vectors (offsets, index, value).
struct Sparse {
    start: Vec<usize>,
    index: Vec<u32>,
    value: Vec<f64>,
}

/// `Z (diag(v) + M) Zᵀ`, a dense L×L row-major matrix.
///
/// `z` holds Z (L×N); `diag` is v (length N) and `m` an N×N CSR matrix, each optional.
/// `M` need not be symmetric (the result is then not symmetric either). Cost
/// O(nnz(M)·K_Z + N·K_Z·s) with s ≤ L the support of a column of `Z (M + diag v)ᵀ`;
/// every output row adds its terms in point order, so the result does not depend on the
/// number of threads (points are visited sorted by their nearest landmark, for locality).
///
/// # Errors
/// Shapes that disagree, landmark indices ≥ `l`, non-finite values, or cancellation.
pub fn z_m_zt<I: CsrIndex>(
    z: &Weights,
    l: usize,
    diag: Option<&[f64]>,
    m: Option<Csr<'_, I>>,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    z_m_zt_impl(z, l, diag, m, cancel, None)
}

/// The sparse N×L matrix `(diag(v) + M) Zᵀ` by rows, in point order: row `p` has the
/// landmark indices `index[start[p]..start[p + 1]]` (no order) and values `value[..]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SparseRows {
    /// Row offsets (N + 1).
    pub start: Vec<usize>,
    /// Landmark indices.
    pub index: Vec<u32>,
    /// Values.
    pub value: Vec<f64>,
}

/// [`z_m_zt`] that also returns the intermediate `(diag(v) + M) Zᵀ` (N×L, sparse), which it
/// computes anyway: with it, `M X` for any `X = Zᵀ X̃` costs O(nnz · d) instead of a pass over
/// M (the first product of the refinement of an LLL embedding).
///
/// # Errors
/// As [`z_m_zt`].
pub fn z_m_zt_keep<I: CsrIndex>(
    z: &Weights,
    l: usize,
    diag: Option<&[f64]>,
    m: Option<Csr<'_, I>>,
    cancel: &AtomicBool,
) -> Result<(Vec<f64>, SparseRows)> {
    let mut kept = Kept::default();
    let out = z_m_zt_impl(z, l, diag, m, cancel, Some(&mut kept))?;
    // reassemble the per-block rows (in visiting order) by point
    let n = z.n_points();
    let mut len = vec![0usize; n];
    let mut loc = Vec::with_capacity(n);
    for (b, subs) in kept.blocks.iter().enumerate() {
        for (si, sp) in subs.iter().enumerate() {
            for r in 0..sp.start.len() - 1 {
                let c = b * SANDWICH_BLOCK + si * SANDWICH_SUB + r;
                let p = kept.order[c] as usize;
                len[p] = sp.start[r + 1] - sp.start[r];
                loc.push((p, b, si, r));
            }
        }
    }
    let mut start = vec![0usize; n + 1];
    for p in 0..n {
        start[p + 1] = start[p] + len[p];
    }
    let mut index = vec![0u32; start[n]];
    let mut value = vec![0.0; start[n]];
    for &(p, b, si, r) in &loc {
        let sp = &kept.blocks[b][si];
        let (a, e) = (sp.start[r], sp.start[r + 1]);
        index[start[p]..start[p + 1]].copy_from_slice(&sp.index[a..e]);
        value[start[p]..start[p + 1]].copy_from_slice(&sp.value[a..e]);
    }
    Ok((
        out,
        SparseRows {
            start,
            index,
            value,
        },
    ))
}

/// What [`z_m_zt_keep`] collects from [`z_m_zt_impl`]: the visiting order and every block's
/// sparse rows.
#[derive(Default)]
struct Kept {
    order: Vec<u32>,
    blocks: Vec<Vec<Sparse>>,
}

/// Points per sub-run of phase 1 of [`z_m_zt`].
const SANDWICH_SUB: usize = 64;

fn z_m_zt_impl<I: CsrIndex>(
    z: &Weights,
    l: usize,
    diag: Option<&[f64]>,
    m: Option<Csr<'_, I>>,
    cancel: &AtomicBool,
    mut keep: Option<&mut Kept>,
) -> Result<Vec<f64>> {
    let n = z.n_points();
    if z.values.len() != z.indices.len() || (z.k == 0 && !z.indices.is_empty()) {
        return Err(EmbedError::ShapeMismatch(
            "weights: indices and values differ in length".into(),
        ));
    }
    if z.indices.iter().any(|&i| i as usize >= l) {
        return Err(invalid("indices", format!("landmark index >= {l}")));
    }
    check_finite(&z.values, "values")?;
    if let Some(v) = diag {
        if v.len() != n {
            return Err(EmbedError::ShapeMismatch(format!(
                "diag has {} entries for {n} points",
                v.len()
            )));
        }
        check_finite(v, "diag")?;
    }
    if let Some(mm) = &m {
        if mm.indptr.len() != n + 1 || mm.indices.len() != mm.data.len() {
            return Err(EmbedError::ShapeMismatch(format!(
                "M must be a {n}×{n} CSR matrix (indptr of length {})",
                n + 1
            )));
        }
        if !mm.indptr.iter().all(|p| p.below(mm.indices.len() + 1))
            || mm.indptr[0].ix() != 0
            || mm.indptr[n].ix() != mm.indices.len()
            || mm.indptr.windows(2).any(|w| w[0] > w[1])
        {
            return Err(invalid("indptr", "not a valid CSR row pointer"));
        }
        if !mm.indices.iter().all(|j| j.below(n)) {
            return Err(invalid("indices", format!("column index >= {n}")));
        }
        check_finite(mm.data, "data")?;
    }
    let mut out = vec![0.0f64; l * l];
    if l == 0 || n == 0 {
        return Ok(out);
    }
    // Work in "positions": points sorted by their nearest landmark, Z stored in that order.
    // The columns of Z fetched for the neighbours of a point are then close in memory (a
    // graph neighbour mostly shares the nearest landmark), instead of one cache miss each.
    let mut order: Vec<u32> = Vec::with_capacity(n);
    {
        let mut start = vec![0usize; l + 1];
        for p in 0..n {
            start[z.indices[p * z.k] as usize + 1] += 1;
        }
        for i in 0..l {
            start[i + 1] += start[i];
        }
        order.resize(n, 0);
        for p in 0..n {
            let f = &mut start[z.indices[p * z.k] as usize];
            order[*f] = p as u32;
            *f += 1;
        }
    }
    let mut pos = vec![0u32; n];
    for (i, &p) in order.iter().enumerate() {
        pos[p as usize] = i as u32;
    }
    let zp = Weights {
        k: z.k,
        indices: order
            .iter()
            .flat_map(|&p| z.column(p as usize).0.iter().copied())
            .collect(),
        values: order
            .iter()
            .flat_map(|&p| z.column(p as usize).1.iter().copied())
            .collect(),
    };
    let z = &zp;
    // Phase 1 fetches one column of Z per stored entry of M, at random: pack each column's
    // K_Z weights and indices (two u32 to a word) into one record, aligned to 64 bytes, so a
    // fetch is one cache line at K_Z ≤ 5 instead of two or three (a lookup into separate
    // index and value arrays).
    let k = z.k;
    let stride = k + k.div_ceil(2);
    let mut packed = vec![0u64; n * stride + 8];
    let off = (64 - packed.as_ptr() as usize % 64) % 64 / 8;
    for (rec, (ix, vs)) in packed[off..off + n * stride]
        .chunks_exact_mut(stride)
        .zip(z.indices.chunks_exact(k).zip(z.values.chunks_exact(k)))
    {
        for (t, (&i, &v)) in ix.iter().zip(vs).enumerate() {
            rec[t] = v.to_bits();
            rec[k + t / 2] |= u64::from(i) << (32 * (t % 2));
        }
    }
    let packed = &packed[off..off + n * stride];
    const SUB: usize = SANDWICH_SUB;
    let mut s0 = 0;
    while s0 < n {
        if cancel.load(Ordering::Relaxed) {
            return Err(EmbedError::Cancelled);
        }
        let s1 = (s0 + SANDWICH_BLOCK).min(n);
        // phase 1: t_p for the block's points, in sub-runs of SUB points
        let subs: Vec<Sparse> = (s0..s1)
            .step_by(SUB)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map_init(
                || (vec![0.0f64; l], vec![false; l]),
                |(acc, seen), a| {
                    let b = (a + SUB).min(s1);
                    let mut sp = Sparse {
                        start: Vec::with_capacity(b - a + 1),
                        index: Vec::new(),
                        value: Vec::new(),
                    };
                    sp.start.push(0);
                    let mut touched: Vec<u32> = Vec::new();
                    let mut cols: Vec<u32> = Vec::new();
                    for (c, &p) in order.iter().enumerate().take(b).skip(a) {
                        let p = p as usize;
                        let mut add = |col: usize, f: f64| {
                            let rec = &packed[col * stride..(col + 1) * stride];
                            for t in 0..k {
                                let w = f64::from_bits(rec[t]);
                                let i = (rec[k + t / 2] >> (32 * (t % 2))) as u32 as usize;
                                if !seen[i] {
                                    seen[i] = true;
                                    touched.push(i as u32);
                                }
                                acc[i] += f * w;
                            }
                        };
                        if let Some(mm) = &m {
                            // The two random loads per entry (its position, then its record)
                            // are the cost of this loop: gather the positions first (loads
                            // independent of each other), then fetch the records a few
                            // entries ahead of their use.
                            let (q0, q1) = (mm.indptr[p].ix(), mm.indptr[p + 1].ix());
                            cols.clear();
                            cols.extend(mm.indices[q0..q1].iter().map(|j| pos[j.ix()]));
                            for (t, (&col, &f)) in cols.iter().zip(&mm.data[q0..q1]).enumerate() {
                                if let Some(&ahead) = cols.get(t + PREFETCH) {
                                    prefetch(&packed[ahead as usize * stride]);
                                }
                                add(col as usize, f);
                            }
                        }
                        if let Some(v) = diag {
                            add(c, v[p]);
                        }
                        for &i in &touched {
                            let i = i as usize;
                            sp.index.push(i as u32);
                            sp.value.push(acc[i]);
                            acc[i] = 0.0;
                            seen[i] = false;
                        }
                        touched.clear();
                        sp.start.push(sp.index.len());
                    }
                    sp
                },
            )
            .collect();
        // phase 2: row i of the output gets Σ_p z_ip t_p, points in order
        let rows = rows_of(z, l, s0..s1);
        out.par_chunks_mut(l).enumerate().for_each(|(i, row)| {
            for e in rows.start[i]..rows.start[i + 1] {
                let p = rows.point[e] as usize;
                let w = rows.weight[e];
                let sp = &subs[p / SUB];
                let r = p % SUB;
                let (a, b) = (sp.start[r], sp.start[r + 1]);
                for (&j, &v) in sp.index[a..b].iter().zip(&sp.value[a..b]) {
                    row[j as usize] += w * v;
                }
            }
        });
        if let Some(k) = keep.as_deref_mut() {
            k.blocks.push(subs);
        }
        s0 = s1;
    }
    if let Some(k) = keep {
        k.order = order;
    }
    Ok(out)
}

/// Upper bound of the per-chunk L×L accumulators of [`z_m_zt_sym`] (bytes, all chunks).
const SYM_MEMORY: usize = 1 << 28;
/// At most this many chunks of points (each with its own accumulator) in [`z_m_zt_sym`].
const SYM_MAX_CHUNKS: usize = 8;
/// At least this many points per chunk of [`z_m_zt_sym`].
const SYM_MIN_CHUNK: usize = 2048;

/// Chunks of points of [`z_m_zt_sym`]: fixed by N and L alone (never by the thread count),
/// so the sums do not depend on the number of threads.
fn sym_chunks(n: usize, l: usize) -> usize {
    let by_memory = (SYM_MEMORY / (8 * l * l).max(1)).max(1);
    (n / SYM_MIN_CHUNK).clamp(1, SYM_MAX_CHUNKS).min(by_memory)
}

/// Z's columns packed one record per point (in point order), 64-byte aligned: K_Z weights
/// then the K_Z landmark indices two to a word, so a random fetch of a column is one or two
/// cache lines instead of a lookup into separate index and value arrays.
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

    /// `acc += f · z_p`, marking the landmarks touched in the bit set `mask`.
    #[inline(always)]
    fn add(&self, p: usize, f: f64, acc: &mut [f64], mask: &mut [u64]) {
        let a = self.off + p * self.stride;
        let rec = &self.words[a..a + self.stride];
        let k = self.k;
        for t in 0..k {
            let w = f64::from_bits(rec[t]);
            let i = (rec[k + t / 2] >> (32 * (t % 2))) as u32 as usize;
            acc[i] += f * w;
            mask[i / 64] |= 1u64 << (i % 64);
        }
    }
}

/// `Z M Zᵀ` (L×L, dense, row-major) for a **symmetric** sparse N×N `M`, reading only its
/// upper triangle: every edge once.
///
/// With `M = U + diag(M) + Uᵀ` (U strictly upper), `Z M Zᵀ = S + Sᵀ` where
/// `S = Σ_p z_p (Σ_{m > p} M_pm z_m + ½ M_pp z_p)ᵀ`: per point one dense accumulator of its
/// upper neighbours' columns of Z, then K_Z dense row updates of S. That halves the random
/// fetches of [`z_m_zt`] (which reads both triangles) and drops its sparse bookkeeping. Rows of
/// M with sorted column indices (SciPy's canonical form) start at their first entry above the
/// diagonal by a binary search; other rows are filtered entry by entry. `M` is **not** checked
/// for symmetry (its lower triangle is never read): for a non-symmetric M the result is
/// `Z (triu(M) + triu(M)ᵀ − diag(M)) Zᵀ`.
///
/// Points are split into a fixed number of chunks (set by N and L, never by the thread count),
/// each with its own L×L accumulator, summed in chunk order: the result does not depend on the
/// number of threads. The accumulators hold at most 256 MB in all (fewer chunks at large L).
///
/// # Errors
/// Shapes that disagree, landmark indices ≥ `l`, an invalid CSR structure or a column index
/// out of range, non-finite values, or cancellation.
pub fn z_m_zt_sym<I: CsrIndex>(
    z: &Weights,
    l: usize,
    m: Csr<'_, I>,
    cancel: &AtomicBool,
) -> Result<Vec<f64>> {
    let n = z.n_points();
    if z.values.len() != z.indices.len() || (z.k == 0 && !z.indices.is_empty()) {
        return Err(EmbedError::ShapeMismatch(
            "weights: indices and values differ in length".into(),
        ));
    }
    if z.indices.iter().any(|&i| i as usize >= l) {
        return Err(invalid("indices", format!("landmark index >= {l}")));
    }
    check_finite(&z.values, "values")?;
    if m.indptr.len() != n + 1 || m.indices.len() != m.data.len() {
        return Err(EmbedError::ShapeMismatch(format!(
            "M must be a {n}×{n} CSR matrix (indptr of length {})",
            n + 1
        )));
    }
    if !m.indptr.iter().all(|p| p.below(m.indices.len() + 1))
        || m.indptr[0].ix() != 0
        || m.indptr[n].ix() != m.indices.len()
        || m.indptr.windows(2).any(|w| w[0] > w[1])
    {
        return Err(invalid("indptr", "not a valid CSR row pointer"));
    }
    let mut out = vec![0.0f64; l * l];
    if l == 0 || n == 0 {
        return Ok(out);
    }
    let pk = Packed::new(z);
    let chunks = sym_chunks(n, l);
    let bad = AtomicBool::new(false);
    // Points in their own order: the rows of M are then read as one stream (visiting them in
    // any other order, e.g. grouped by nearest landmark, doubled the time: every row start
    // became a cache miss), and only the records of Z are fetched at random.
    let parts: Vec<Vec<f64>> = (0..chunks)
        .into_par_iter()
        .map(|c| {
            let (a, b) = (c * n / chunks, (c + 1) * n / chunks);
            let mut s = vec![0.0f64; l * l];
            let mut acc = vec![0.0f64; l];
            let mut mask = vec![0u64; l.div_ceil(64)];
            let mut touched: Vec<u32> = Vec::with_capacity(l);
            for p in a..b {
                if (p - a) % 4096 == 0
                    && (cancel.load(Ordering::Relaxed) || bad.load(Ordering::Relaxed))
                {
                    return s;
                }
                let (q0, q1) = (m.indptr[p].ix(), m.indptr[p + 1].ix());
                let (ix, vs) = (&m.indices[q0..q1], &m.data[q0..q1]);
                let pi = I::of(p);
                if ix.windows(2).all(|w| w[0] < w[1]) {
                    let mut from = ix.partition_point(|&j| j < pi);
                    if ix.get(from) == Some(&pi) {
                        pk.add(p, 0.5 * vs[from], &mut acc, &mut mask);
                        from += 1;
                    }
                    let (ix, vs) = (&ix[from..], &vs[from..]);
                    if ix.last().is_some_and(|j| !j.below(n)) {
                        bad.store(true, Ordering::Relaxed);
                        return s;
                    }
                    for (t, (&j, &w)) in ix.iter().zip(vs).enumerate() {
                        if let Some(&ahead) = ix.get(t + PREFETCH) {
                            prefetch(pk.head(ahead.ix()));
                        }
                        pk.add(j.ix(), w, &mut acc, &mut mask);
                    }
                } else {
                    for (&j, &w) in ix.iter().zip(vs) {
                        if !j.below(n) {
                            bad.store(true, Ordering::Relaxed);
                            return s;
                        }
                        if j > pi {
                            pk.add(j.ix(), w, &mut acc, &mut mask);
                        } else if j == pi {
                            pk.add(p, 0.5 * w, &mut acc, &mut mask);
                        }
                    }
                }
                // the touched landmarks from the bit set (sparse: a point's upper neighbours
                // see a few dozen of the L landmarks), then K_Z sparse row updates of S
                touched.clear();
                for (wi, word) in mask.iter_mut().enumerate() {
                    let mut bits = *word;
                    while bits != 0 {
                        touched.push((wi * 64 + bits.trailing_zeros() as usize) as u32);
                        bits &= bits - 1;
                    }
                    *word = 0;
                }
                let (zi, zv) = z.column(p);
                for (&i, &v) in zi.iter().zip(zv) {
                    let row = &mut s[i as usize * l..(i as usize + 1) * l];
                    for &j in &touched {
                        row[j as usize] += v * acc[j as usize];
                    }
                }
                for &j in &touched {
                    acc[j as usize] = 0.0;
                }
            }
            s
        })
        .collect();
    if cancel.load(Ordering::Relaxed) {
        return Err(EmbedError::Cancelled);
    }
    if bad.load(Ordering::Relaxed) {
        return Err(invalid("indices", format!("column index >= {n}")));
    }
    // sum the chunks in order, then S + Sᵀ
    out.par_chunks_mut(l).enumerate().for_each(|(i, row)| {
        for part in &parts {
            row.iter_mut()
                .zip(&part[i * l..(i + 1) * l])
                .for_each(|(o, v)| *o += v);
        }
    });
    for i in 0..l {
        for j in 0..i {
            let v = out[i * l + j] + out[j * l + i];
            out[i * l + j] = v;
            out[j * l + i] = v;
        }
        out[i * l + i] *= 2.0;
    }
    check_finite(&out, "data")?;
    Ok(out)
}

/// Checks a sparse N×N CSR `m` and a dense N×k row-major block `x` (named `name` in errors)
/// for [`csr_dense_product`] and [`sym_quadratic_form`]; returns N.
fn check_csr_block<I: CsrIndex>(
    m: Csr<'_, I>,
    x: &[f64],
    k: usize,
    name: &'static str,
) -> Result<usize> {
    let n = m.indptr.len().saturating_sub(1);
    if m.indptr.is_empty() || m.indices.len() != m.data.len() {
        return Err(EmbedError::ShapeMismatch(
            "M: indptr empty or indices and data differ in length".into(),
        ));
    }
    if x.len() != n * k {
        return Err(EmbedError::ShapeMismatch(format!(
            "{} has {} entries for {n}×{k}",
            name.to_uppercase(),
            x.len()
        )));
    }
    if !m.indptr.iter().all(|p| p.below(m.indices.len() + 1))
        || m.indptr[0].ix() != 0
        || m.indptr[n].ix() != m.indices.len()
        || m.indptr.windows(2).any(|w| w[0] > w[1])
    {
        return Err(invalid("indptr", "not a valid CSR row pointer"));
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
/// Shapes that disagree, an invalid CSR structure, non-finite values, or cancellation.
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
    let n = m.indptr.len() - 1;
    out.par_chunks_mut(SPMM_ROWS * K)
        .enumerate()
        .for_each(|(b, block)| {
            if cancel.load(Ordering::Relaxed) || bad.load(Ordering::Relaxed) {
                return;
            }
            for (r, dst) in block.chunks_exact_mut(K).enumerate() {
                let row = b * SPMM_ROWS + r;
                let (q0, q1) = (m.indptr[row].ix(), m.indptr[row + 1].ix());
                let (ix, vs) = (&m.indices[q0..q1], &m.data[q0..q1]);
                let mut acc = [0.0f64; K];
                for (t, (&j, &w)) in ix.iter().zip(vs).enumerate() {
                    if let Some(&ahead) = ix.get(t + PREFETCH) {
                        if ahead.below(n) {
                            prefetch_f64(&x[ahead.ix() * K]);
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
    let n = m.indptr.len() - 1;
    out.par_chunks_mut(SPMM_ROWS * k)
        .enumerate()
        .for_each(|(b, block)| {
            if cancel.load(Ordering::Relaxed) || bad.load(Ordering::Relaxed) {
                return;
            }
            for (r, acc) in block.chunks_exact_mut(k).enumerate() {
                let row = b * SPMM_ROWS + r;
                let (q0, q1) = (m.indptr[row].ix(), m.indptr[row + 1].ix());
                for (&j, &w) in m.indices[q0..q1].iter().zip(&m.data[q0..q1]) {
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
/// Shapes that disagree, an invalid CSR structure or column index, non-finite values, or
/// cancellation.
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

/// The upper-triangle entries `(j, w)` of row `p` (j > p, and the diagonal with weight ½)
/// passed to `f`; false on a column index out of range.
#[inline(always)]
fn upper_row<I: CsrIndex>(
    m: Csr<'_, I>,
    p: usize,
    mut f: impl FnMut(usize, f64, &[I], usize),
) -> bool {
    let n = m.indptr.len() - 1;
    let (q0, q1) = (m.indptr[p].ix(), m.indptr[p + 1].ix());
    let (ix, vs) = (&m.indices[q0..q1], &m.data[q0..q1]);
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

fn qf_fixed<I: CsrIndex, const K: usize>(
    m: Csr<'_, I>,
    v: &[f64],
    bad: &AtomicBool,
    cancel: &AtomicBool,
) -> Vec<Vec<f64>> {
    let n = m.indptr.len() - 1;
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
                        prefetch_f64(&v[ahead.ix() * K]);
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
    let n = m.indptr.len() - 1;
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

/// [`prefetch`] for the cache line of an f64.
#[inline(always)]
fn prefetch_f64(v: &f64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of a valid reference's address; it reads nothing into the program.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((v as *const f64).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    fn uniform(rng: &mut Pcg64, len: usize) -> Vec<f64> {
        (0..len).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect()
    }

    /// Dense Z (L×N) from the weights.
    fn dense(z: &Weights, l: usize) -> Vec<f64> {
        let n = z.n_points();
        let mut d = vec![0.0; l * n];
        for p in 0..n {
            let (ix, vs) = z.column(p);
            for (&i, &v) in ix.iter().zip(vs) {
                d[i as usize * n + p] += v;
            }
        }
        d
    }

    #[test]
    fn weights_sum_to_one_use_nearest_landmarks_and_reconstruct() {
        let mut rng = Pcg64::seed_from_u64(1);
        let (n, l, dim, k) = (700, 40, 3, 4);
        let x = uniform(&mut rng, n * dim);
        let lm = uniform(&mut rng, l * dim);
        let z = reconstruction_weights(&x, &lm, dim, k, 0.0, &AtomicBool::new(false)).unwrap();
        for p in 0..n {
            let (ix, vs) = z.column(p);
            assert!((vs.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            // nearest k by brute force
            let xp = &x[p * dim..(p + 1) * dim];
            let mut d: Vec<(f64, usize)> = (0..l)
                .map(|j| (sqdist(xp, &lm[j * dim..(j + 1) * dim]), j))
                .collect();
            d.sort_by(|a, b| a.0.total_cmp(&b.0));
            let want: Vec<u32> = d[..k].iter().map(|v| v.1 as u32).collect();
            assert_eq!(ix, &want[..]);
            // K_Z = D + 1 and reg = 0: exact affine reconstruction
            for c in 0..dim {
                let r: f64 = ix
                    .iter()
                    .zip(vs)
                    .map(|(&i, &w)| w * lm[i as usize * dim + c])
                    .sum();
                // the 1e-12 tr(G) ridge on the singular G leaves ~1e-7
                assert!(
                    (r - xp[c]).abs() < 1e-5,
                    "point {p} coord {c}: {r} vs {}",
                    xp[c]
                );
            }
        }
    }

    #[test]
    fn coincident_point_gets_its_landmark() {
        let mut rng = Pcg64::seed_from_u64(2);
        let x = uniform(&mut rng, 30 * 2);
        let lm = x[10..30].to_vec(); // points 5..15 are landmarks 0..10
        let z = reconstruction_weights(&x, &lm, 2, 3, 1e-3, &AtomicBool::new(false)).unwrap();
        for p in 5..15 {
            let (ix, vs) = z.column(p);
            assert_eq!(ix[0] as usize, p - 5);
            assert_eq!(vs, &[1.0, 0.0, 0.0]);
        }
    }

    #[test]
    fn sandwich_matches_dense_products_for_any_thread_count() {
        let mut rng = Pcg64::seed_from_u64(3);
        let (n, l, dim, k) = (2500, 60, 4, 6);
        let x = uniform(&mut rng, n * dim);
        let lm = uniform(&mut rng, l * dim);
        let z = reconstruction_weights(&x, &lm, dim, k, 1e-3, &AtomicBool::new(false)).unwrap();
        // random sparse M with ~8 entries per row, and a diagonal
        let mut indptr = vec![0i64];
        let mut indices = Vec::new();
        let mut data = Vec::new();
        for _ in 0..n {
            for _ in 0..8 {
                indices.push(rng.random_range(0..n as i64));
                data.push(rng.random::<f64>());
            }
            indptr.push(indices.len() as i64);
        }
        let v = uniform(&mut rng, n);
        let zd = dense(&z, l);
        let mut want = vec![0.0; l * l];
        for i in 0..l {
            for p in 0..n {
                let zi = zd[i * n + p];
                if zi == 0.0 {
                    continue;
                }
                // (M Zᵀ)_{p j} + v_p Z_{j p}
                for j in 0..l {
                    let mut t = v[p] * zd[j * n + p];
                    for q in indptr[p] as usize..indptr[p + 1] as usize {
                        t += data[q] * zd[j * n + indices[q] as usize];
                    }
                    want[i * l + j] += zi * t;
                }
            }
        }
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    z_m_zt(
                        &z,
                        l,
                        Some(&v),
                        Some(Csr {
                            indptr: &indptr,
                            indices: &indices,
                            data: &data,
                        }),
                        &AtomicBool::new(false),
                    )
                    .unwrap()
                })
        };
        let got1 = run(1);
        let got3 = run(3);
        assert_eq!(got1, got3);
        // SciPy's int32 layout gives the same numbers as int64
        let indptr32: Vec<i32> = indptr.iter().map(|&p| p as i32).collect();
        let indices32: Vec<i32> = indices.iter().map(|&j| j as i32).collect();
        let got32 = z_m_zt(
            &z,
            l,
            Some(&v),
            Some(Csr {
                indptr: &indptr32,
                indices: &indices32,
                data: &data,
            }),
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(got1, got32);
        // the kept rows are (diag(v) + M) Zᵀ, and the product is unchanged
        let (got_k, t) = z_m_zt_keep(
            &z,
            l,
            Some(&v),
            Some(Csr {
                indptr: &indptr,
                indices: &indices,
                data: &data,
            }),
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(got_k, got1);
        assert_eq!(t.start.len(), n + 1);
        for p in 0..n {
            let mut row = vec![0.0; l];
            for e in t.start[p]..t.start[p + 1] {
                row[t.index[e] as usize] += t.value[e];
            }
            for (j, &got) in row.iter().enumerate() {
                let mut want_pj = v[p] * zd[j * n + p];
                for q in indptr[p] as usize..indptr[p + 1] as usize {
                    want_pj += data[q] * zd[j * n + indices[q] as usize];
                }
                assert!((got - want_pj).abs() < 1e-12, "{got} vs {want_pj}");
            }
        }
        let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        for (g, w) in got1.iter().zip(&want) {
            assert!((g - w).abs() < 1e-12 * scale, "{g} vs {w}");
        }
    }

    #[test]
    fn block_product_matches_a_dense_loop_for_any_thread_count() {
        let mut rng = Pcg64::seed_from_u64(5);
        let (n, k) = (1000, 7);
        let mut indptr = vec![0i64];
        let mut indices = Vec::new();
        let mut data = Vec::new();
        for p in 0..n {
            for _ in 0..(p % 13) {
                indices.push(rng.random_range(0..n as i64));
                data.push(rng.random::<f64>() - 0.3);
            }
            indptr.push(indices.len() as i64);
        }
        let x = uniform(&mut rng, n * k);
        let mut want = vec![0.0; n * k];
        for p in 0..n {
            for q in indptr[p] as usize..indptr[p + 1] as usize {
                for t in 0..k {
                    want[p * k + t] += data[q] * x[indices[q] as usize * k + t];
                }
            }
        }
        let m = Csr {
            indptr: &indptr,
            indices: &indices,
            data: &data,
        };
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| csr_dense_product(m, &x, k, &AtomicBool::new(false)).unwrap())
        };
        let got1 = run(1);
        assert_eq!(got1, run(3));
        assert_eq!(got1, want);
        let indptr32: Vec<i32> = indptr.iter().map(|&p| p as i32).collect();
        let indices32: Vec<i32> = indices.iter().map(|&j| j as i32).collect();
        let m32 = Csr {
            indptr: &indptr32,
            indices: &indices32,
            data: &data,
        };
        assert_eq!(
            csr_dense_product(m32, &x, k, &AtomicBool::new(false)).unwrap(),
            want
        );
        let c = AtomicBool::new(false);
        assert!(csr_dense_product(m, &x[1..], k, &c).is_err());
        let bad = [0i64, 1];
        let m_bad = Csr {
            indptr: &bad,
            indices: &[5i64],
            data: &[1.0],
        };
        assert!(csr_dense_product(m_bad, &[1.0], 1, &c).is_err());
    }

    #[test]
    fn f32_screening_falls_back_to_exact_ranking_on_near_ties() {
        // landmarks on a sphere about each point, radii differing by 1e-9 relative: the f32
        // screening cannot order them, the exhaustive f64 ranking must
        let mut rng = Pcg64::seed_from_u64(7);
        let (dim, l, k) = (8, 40, 3);
        let centre = uniform(&mut rng, dim);
        let mut lm = Vec::new();
        for j in 0..l {
            let dir = uniform(&mut rng, dim);
            let nrm = dir.iter().map(|v| v * v).sum::<f64>().sqrt();
            let r = 1.0 + 1e-9 * j as f64;
            lm.extend(dir.iter().zip(&centre).map(|(d, c)| c + r * d / nrm));
        }
        let z =
            reconstruction_weights(&centre, &lm, dim, k, 1e-3, &AtomicBool::new(false)).unwrap();
        let mut d: Vec<(f64, u32)> = (0..l)
            .map(|j| (sqdist(&centre, &lm[j * dim..(j + 1) * dim]), j as u32))
            .collect();
        d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let want: Vec<u32> = d[..k].iter().map(|v| v.1).collect();
        assert_eq!(z.indices, want);
    }

    /// Dense `Z M Zᵀ` (the oracle of the sparse kernels).
    fn dense_z_m_zt(
        z: &Weights,
        l: usize,
        indptr: &[i64],
        indices: &[i64],
        data: &[f64],
    ) -> Vec<f64> {
        let n = z.n_points();
        let zd = dense(z, l);
        let mut zm = vec![0.0; l * n]; // Z M
        for p in 0..n {
            for q in indptr[p] as usize..indptr[p + 1] as usize {
                let j = indices[q] as usize;
                for i in 0..l {
                    zm[i * n + j] += zd[i * n + p] * data[q];
                }
            }
        }
        let mut out = vec![0.0; l * l];
        for i in 0..l {
            for j in 0..l {
                out[i * l + j] = (0..n).map(|p| zm[i * n + p] * zd[j * n + p]).sum();
            }
        }
        out
    }

    #[test]
    fn symmetric_kernel_equals_the_dense_product_for_any_thread_count() {
        let mut rng = Pcg64::seed_from_u64(11);
        let (n, l, dim, k) = (5000, 30, 3, 2);
        let x = uniform(&mut rng, n * dim);
        let lm = uniform(&mut rng, l * dim);
        let z = reconstruction_weights(&x, &lm, dim, k, 1e-3, &AtomicBool::new(false)).unwrap();
        // a random symmetric M with a diagonal, rows sorted (SciPy's layout) ...
        let mut rows: Vec<Vec<(i64, f64)>> = vec![Vec::new(); n];
        for p in 0..n {
            for _ in 0..6 {
                let j = rng.random_range(0..n);
                let v = rng.random::<f64>();
                rows[p].push((j as i64, v));
                if j != p {
                    rows[j].push((p as i64, v));
                }
            }
        }
        let csr = |rows: &[Vec<(i64, f64)>], sort: bool| {
            let (mut indptr, mut indices, mut data) = (vec![0i64], Vec::new(), Vec::new());
            for r in rows {
                let mut r = r.clone();
                if sort {
                    r.sort_by_key(|e| e.0);
                    r.dedup_by(|a, b| {
                        if a.0 == b.0 {
                            b.1 += a.1;
                            true
                        } else {
                            false
                        }
                    });
                }
                indices.extend(r.iter().map(|e| e.0));
                data.extend(r.iter().map(|e| e.1));
                indptr.push(indices.len() as i64);
            }
            (indptr, indices, data)
        };
        let (ip, ix, dv) = csr(&rows, true);
        let want = dense_z_m_zt(&z, l, &ip, &ix, &dv);
        let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let m = Csr {
            indptr: &ip,
            indices: &ix,
            data: &dv,
        };
        let run = |threads: usize, m: Csr<'_, i64>| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| z_m_zt_sym(&z, l, m, &AtomicBool::new(false)).unwrap())
        };
        let got = run(1, m);
        assert_eq!(got, run(3, m));
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-12 * scale, "{g} vs {w}");
        }
        // ... and the same matrix with unsorted rows (filtered entry by entry)
        let mut shuffled = rows.clone();
        for r in shuffled.iter_mut() {
            r.reverse();
        }
        let (ip2, ix2, dv2) = csr(&shuffled, false);
        let got2 = run(
            2,
            Csr {
                indptr: &ip2,
                indices: &ix2,
                data: &dv2,
            },
        );
        for (g, w) in got2.iter().zip(&want) {
            assert!((g - w).abs() < 1e-12 * scale, "{g} vs {w}");
        }
        // bad input
        let c = AtomicBool::new(false);
        let bad = [0i64, 1];
        let m_bad = Csr {
            indptr: &bad,
            indices: &[5i64],
            data: &[1.0],
        };
        let z1 = Weights {
            k: 1,
            indices: vec![0],
            values: vec![1.0],
        };
        assert!(z_m_zt_sym(&z1, 1, m_bad, &c).is_err());
        assert!(
            z_m_zt_sym(
                &z,
                l,
                Csr {
                    indptr: &ip[1..],
                    indices: &ix,
                    data: &dv
                },
                &c
            )
            .is_err()
        );
    }

    #[test]
    fn symmetric_quadratic_form_equals_the_dense_one() {
        let mut rng = Pcg64::seed_from_u64(13);
        let n = 3000;
        let mut rows: Vec<Vec<(i64, f64)>> = vec![Vec::new(); n];
        for p in 0..n {
            for _ in 0..5 {
                let j = rng.random_range(0..n);
                let v = rng.random::<f64>();
                rows[p].push((j as i64, v));
                if j != p {
                    rows[j].push((p as i64, v));
                }
            }
        }
        for (sorted, k) in [(true, 9usize), (false, 3), (true, 20)] {
            let (mut indptr, mut indices, mut data) = (vec![0i64], Vec::new(), Vec::new());
            for r in &rows {
                let mut r = r.clone();
                if sorted {
                    r.sort_by_key(|e| e.0);
                } else {
                    r.reverse();
                }
                indices.extend(r.iter().map(|e| e.0));
                data.extend(r.iter().map(|e| e.1));
                indptr.push(indices.len() as i64);
            }
            let v = uniform(&mut rng, n * k);
            let mut want = vec![0.0; k * k];
            for p in 0..n {
                for q in indptr[p] as usize..indptr[p + 1] as usize {
                    let j = indices[q] as usize;
                    for a in 0..k {
                        for b in 0..k {
                            want[a * k + b] += v[p * k + a] * data[q] * v[j * k + b];
                        }
                    }
                }
            }
            let m = Csr {
                indptr: &indptr,
                indices: &indices,
                data: &data,
            };
            let run = |threads: usize| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| sym_quadratic_form(m, &v, k, &AtomicBool::new(false)).unwrap())
            };
            let got = run(1);
            assert_eq!(got, run(3));
            let scale = want.iter().fold(0.0f64, |a, x| a.max(x.abs()));
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-11 * scale, "{g} vs {w}");
            }
        }
        let c = AtomicBool::new(false);
        let bad = [0i64, 1];
        let m_bad = Csr {
            indptr: &bad,
            indices: &[5i64],
            data: &[1.0],
        };
        assert!(sym_quadratic_form(m_bad, &[1.0], 1, &c).is_err());
    }

    #[test]
    fn rejects_bad_input() {
        let c = AtomicBool::new(false);
        assert!(reconstruction_weights(&[0.0; 4], &[0.0; 2], 2, 2, 0.0, &c).is_err());
        assert!(reconstruction_weights(&[0.0; 4], &[0.0; 4], 2, 1, -1.0, &c).is_err());
        assert!(reconstruction_weights(&[f64::NAN; 4], &[0.0; 4], 2, 1, 0.0, &c).is_err());
        let z = Weights {
            k: 1,
            indices: vec![3],
            values: vec![1.0],
        };
        assert!(z_m_zt::<i64>(&z, 2, None, None, &c).is_err());
    }
}

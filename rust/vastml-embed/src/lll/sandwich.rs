//! `Z (diag(v) + M) Zᵀ` for a general sparse M: one pass over its stored entries.

use rayon::prelude::*;
use vastml_core::Control;

use super::{Csr, PREFETCH, Packed, Reports, Weights, check_square, prefetch};
use crate::error::{EmbedError, Result, check_finite};
use crate::objective::CsrIndex;

/// Points per block of [`z_m_zt`] (the unit between two polls / progress reports).
const SANDWICH_BLOCK: usize = 1024;
/// Points per sub-run of phase 1 of [`z_m_zt`].
const SANDWICH_SUB: usize = 64;

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
/// Points are processed in blocks of 1,024; between blocks `control` is polled and its hook
/// gets reports numbered 1, 2, … (at most 256, objective NaN).
///
/// # Errors
/// Shapes that disagree, landmark indices ≥ `l`, non-finite values,
/// [`EmbedError::Cancelled`] or [`EmbedError::Stopped`].
pub fn z_m_zt<I: CsrIndex>(
    z: &Weights,
    l: usize,
    diag: Option<&[f64]>,
    m: Option<Csr<'_, I>>,
    control: Control<'_>,
) -> Result<Vec<f64>> {
    z_m_zt_impl(z, l, diag, m, control, None)
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
    control: Control<'_>,
) -> Result<(Vec<f64>, SparseRows)> {
    let mut kept = Kept::default();
    let out = z_m_zt_impl(z, l, diag, m, control, Some(&mut kept))?;
    Ok((out, kept.by_point(z.n_points())))
}

/// What [`z_m_zt_keep`] collects from [`z_m_zt_impl`]: the visiting order and every block's
/// sparse rows.
#[derive(Default)]
struct Kept {
    order: Vec<u32>,
    blocks: Vec<Vec<Sparse>>,
}

impl Kept {
    /// The per-block rows (in visiting order) reassembled by point.
    fn by_point(&self, n: usize) -> SparseRows {
        let mut len = vec![0usize; n];
        let mut loc = Vec::with_capacity(n);
        for (b, subs) in self.blocks.iter().enumerate() {
            for (si, sp) in subs.iter().enumerate() {
                for r in 0..sp.start.len() - 1 {
                    let c = b * SANDWICH_BLOCK + si * SANDWICH_SUB + r;
                    let p = self.order[c] as usize;
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
            let sp = &self.blocks[b][si];
            let (a, e) = (sp.start[r], sp.start[r + 1]);
            index[start[p]..start[p + 1]].copy_from_slice(&sp.index[a..e]);
            value[start[p]..start[p + 1]].copy_from_slice(&sp.value[a..e]);
        }
        SparseRows {
            start,
            index,
            value,
        }
    }
}

/// Checks the arguments of [`z_m_zt`].
fn check<I: CsrIndex>(
    z: &Weights,
    l: usize,
    diag: Option<&[f64]>,
    m: Option<&Csr<'_, I>>,
) -> Result<()> {
    let n = z.n_points();
    z.check(l)?;
    if let Some(v) = diag {
        if v.len() != n {
            return Err(EmbedError::ShapeMismatch(format!(
                "diag has {} entries for {n} points",
                v.len()
            )));
        }
        check_finite(v, "diag")?;
    }
    if let Some(mm) = m {
        check_square(mm, n)?;
    }
    Ok(())
}

/// Points sorted by their nearest landmark (a counting sort: stable, so ties keep point order).
fn nearest_landmark_order(z: &Weights, l: usize) -> Vec<u32> {
    let n = z.n_points();
    let mut start = vec![0usize; l + 1];
    for p in 0..n {
        start[z.indices[p * z.k] as usize + 1] += 1;
    }
    for i in 0..l {
        start[i + 1] += start[i];
    }
    let mut order = vec![0u32; n];
    for p in 0..n {
        let f = &mut start[z.indices[p * z.k] as usize];
        order[*f] = p as u32;
        *f += 1;
    }
    order
}

/// The columns of `z` in the order `order`.
fn permuted(z: &Weights, order: &[u32]) -> Weights {
    Weights {
        k: z.k,
        indices: order
            .iter()
            .flat_map(|&p| z.column(p as usize).0.iter().copied())
            .collect(),
        values: order
            .iter()
            .flat_map(|&p| z.column(p as usize).1.iter().copied())
            .collect(),
    }
}

/// What phase 1 reads: M, v, the visiting order, every point's position in it and the
/// packed columns of Z in that order.
struct Phase1<'a, I: CsrIndex> {
    m: Option<Csr<'a, I>>,
    diag: Option<&'a [f64]>,
    order: &'a [u32],
    pos: &'a [u32],
    packed: &'a Packed,
}

impl<I: CsrIndex> Phase1<'_, I> {
    /// `t_p` for the points at positions `a..b`; `acc` (L) and `seen` (L) are zero / false on
    /// entry and on return.
    fn run(&self, a: usize, b: usize, acc: &mut [f64], seen: &mut [bool]) -> Sparse {
        let mut sp = Sparse {
            start: Vec::with_capacity(b - a + 1),
            index: Vec::new(),
            value: Vec::new(),
        };
        sp.start.push(0);
        let mut touched: Vec<u32> = Vec::new();
        let mut cols: Vec<u32> = Vec::new();
        for (c, &p) in self.order.iter().enumerate().take(b).skip(a) {
            let p = p as usize;
            let mut add = |col: usize, f: f64| {
                self.packed.for_each(col, |i, w| {
                    if !seen[i] {
                        seen[i] = true;
                        touched.push(i as u32);
                    }
                    acc[i] += f * w;
                });
            };
            if let Some(mm) = &self.m {
                // The two random loads per entry (its position, then its record) are the cost
                // of this loop: gather the positions first (loads independent of each other),
                // then fetch the records a few entries ahead of their use.
                let (ix, vs) = mm.row(p);
                cols.clear();
                cols.extend(ix.iter().map(|j| self.pos[j.ix()]));
                for (t, (&col, &f)) in cols.iter().zip(vs).enumerate() {
                    if let Some(&ahead) = cols.get(t + PREFETCH) {
                        prefetch(self.packed.head(ahead as usize));
                    }
                    add(col as usize, f);
                }
            }
            if let Some(v) = self.diag {
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
    }
}

/// Phase 2: row i of `out` gets Σ_p z_ip t_p over the positions `s0..s1`, in order.
fn phase2(out: &mut [f64], z: &Weights, l: usize, s0: usize, s1: usize, subs: &[Sparse]) {
    let rows = rows_of(z, l, s0..s1);
    out.par_chunks_mut(l).enumerate().for_each(|(i, row)| {
        for e in rows.start[i]..rows.start[i + 1] {
            let p = rows.point[e] as usize;
            let w = rows.weight[e];
            let sp = &subs[p / SANDWICH_SUB];
            let r = p % SANDWICH_SUB;
            let (a, b) = (sp.start[r], sp.start[r + 1]);
            for (&j, &v) in sp.index[a..b].iter().zip(&sp.value[a..b]) {
                row[j as usize] += w * v;
            }
        }
    });
}

fn z_m_zt_impl<I: CsrIndex>(
    z: &Weights,
    l: usize,
    diag: Option<&[f64]>,
    m: Option<Csr<'_, I>>,
    control: Control<'_>,
    mut keep: Option<&mut Kept>,
) -> Result<Vec<f64>> {
    check(z, l, diag, m.as_ref())?;
    let n = z.n_points();
    let mut out = vec![0.0f64; l * l];
    if l == 0 || n == 0 {
        return Ok(out);
    }
    // Work in "positions": points sorted by their nearest landmark, Z stored in that order.
    // The columns of Z fetched for the neighbours of a point are then close in memory (a
    // graph neighbour mostly shares the nearest landmark), instead of one cache miss each.
    let order = nearest_landmark_order(z, l);
    let mut pos = vec![0u32; n];
    for (i, &p) in order.iter().enumerate() {
        pos[p as usize] = i as u32;
    }
    let zp = permuted(z, &order);
    // Phase 1 fetches one column of Z per stored entry of M, at random: a packed record is
    // one cache line at K_Z ≤ 5.
    let packed = Packed::new(&zp);
    let phase1 = Phase1 {
        m,
        diag,
        order: &order,
        pos: &pos,
        packed: &packed,
    };
    let total = n.div_ceil(SANDWICH_BLOCK);
    let mut reports = Reports::new(total);
    for blk in 0..total {
        let (s0, s1) = (blk * SANDWICH_BLOCK, ((blk + 1) * SANDWICH_BLOCK).min(n));
        // phase 1: t_p for the block's points, in sub-runs of SANDWICH_SUB points
        let subs: Vec<Sparse> = (s0..s1)
            .step_by(SANDWICH_SUB)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map_init(
                || (vec![0.0f64; l], vec![false; l]),
                |(acc, seen), a| phase1.run(a, (a + SANDWICH_SUB).min(s1), acc, seen),
            )
            .collect();
        phase2(&mut out, &zp, l, s0, s1, &subs);
        if let Some(k) = keep.as_deref_mut() {
            k.blocks.push(subs);
        }
        reports.after(&control, blk + 1, total)?;
    }
    if let Some(k) = keep {
        k.order = order;
    }
    Ok(out)
}

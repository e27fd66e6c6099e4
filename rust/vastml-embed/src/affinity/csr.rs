//! Sparse affinity matrices: kNN rows to canonical CSR, and the symmetrisation
//! `scale · (P + Pᵀ)` in a few parallel linear passes.

use rayon::prelude::*;

use crate::error::{EmbedError, Result};
use crate::objective::{CsrIndex, CsrValue};

/// A sparse matrix in CSR form with sorted column indices and no duplicates: int64 / f64
/// arrays, or the compact int32 / f32 layout of large problems (8 bytes per entry).
#[derive(Debug, Clone, PartialEq)]
pub struct CsrMatrix<I = i64, V = f64> {
    /// Row pointers (n + 1).
    pub indptr: Vec<I>,
    /// Column indices, increasing within each row.
    pub indices: Vec<I>,
    /// Values.
    pub data: Vec<V>,
}

/// Rows per parallel task of the row-wise passes.
const ROW_BLOCK: usize = 512;

/// Sorts the entries (columns `cols`, values `vals`) of one row by column into `out_c`,
/// `out_v` (same length); `keys` is scratch.
fn sort_row<I: CsrIndex, U: CsrValue, V: CsrValue>(
    cols: &[I],
    vals: &[U],
    keys: &mut Vec<u64>,
    out_c: &mut [I],
    out_v: &mut [V],
) {
    if cols.windows(2).all(|w| w[0] <= w[1]) {
        out_c.copy_from_slice(cols);
        for (o, v) in out_v.iter_mut().zip(vals) {
            *o = V::of(v.get());
        }
        return;
    }
    // Column in the high 32 bits, position in the low 32: one integer sort.
    keys.clear();
    keys.extend(
        cols.iter()
            .enumerate()
            .map(|(t, &c)| ((c.ix() as u64) << 32) | t as u64),
    );
    keys.sort_unstable();
    for ((key, c), v) in keys.iter().zip(out_c.iter_mut()).zip(out_v.iter_mut()) {
        *c = I::of((key >> 32) as usize);
        *v = V::of(vals[(key & 0xffff_ffff) as usize].get());
    }
}

/// The CSR matrix of n rows of k entries: row i has columns `indices[i*k..]` and values
/// `values[pos[i]*k..]` (the solver's row order). Columns are sorted, repeats summed.
/// Indices must lie in 0..n and n k must fit in `I` (checked by the caller); n < 2³².
/// Values are rounded to `V` (f32 in the compact layout).
pub(crate) fn rows_to_csr<I: CsrIndex, V: CsrValue>(
    n: usize,
    k: usize,
    indices: &[I],
    values: &[f64],
    pos: &[usize],
) -> CsrMatrix<I, V> {
    let mut cols = vec![I::of(0); n * k];
    let mut data = vec![V::of(0.0); n * k];
    let repeats: usize = cols
        .par_chunks_mut(k * ROW_BLOCK)
        .zip(data.par_chunks_mut(k * ROW_BLOCK))
        .enumerate()
        .map(|(b, (cb, db))| {
            let mut keys = Vec::with_capacity(k);
            let mut repeats = 0;
            for (r, (c, d)) in cb.chunks_mut(k).zip(db.chunks_mut(k)).enumerate() {
                let i = b * ROW_BLOCK + r;
                let t = pos[i];
                sort_row(
                    &indices[i * k..(i + 1) * k],
                    &values[t * k..(t + 1) * k],
                    &mut keys,
                    c,
                    d,
                );
                repeats += c.windows(2).filter(|w| w[0] == w[1]).count();
            }
            repeats
        })
        .sum();
    let indptr: Vec<I> = (0..=n).map(|i| I::of(i * k)).collect();
    if repeats == 0 {
        return CsrMatrix {
            indptr,
            indices: cols,
            data,
        };
    }
    // A user's graph may list a neighbour twice: sum the repeats (rare, sequential).
    let mut out = CsrMatrix {
        indptr: Vec::with_capacity(n + 1),
        indices: Vec::with_capacity(n * k - repeats),
        data: Vec::with_capacity(n * k - repeats),
    };
    out.indptr.push(I::of(0));
    for i in 0..n {
        let start = out.indices.len();
        for e in i * k..(i + 1) * k {
            if out.indices.len() > start && out.indices.last() == Some(&cols[e]) {
                let last: &mut V = out.data.last_mut().expect("pushed together");
                *last = V::of(last.get() + data[e].get());
            } else {
                out.indices.push(cols[e]);
                out.data.push(data[e]);
            }
        }
        out.indptr.push(I::of(out.indices.len()));
    }
    out
}

/// Walks the union of the sorted column lists `a` and `b` without the diagonal `i`,
/// calling `emit(column, value)` once per distinct column with the summed values
/// (repeats within a list are summed too).
#[inline(always)]
fn merge_rows<I: CsrIndex, V: CsrValue>(
    i: i64,
    a: (&[I], &[V]),
    b: (&[u32], &[V]),
    mut emit: impl FnMut(i64, f64),
) {
    let (ac, av) = a;
    let (bc, bv) = b;
    let (mut x, mut y) = (0, 0);
    let mut current = (-1i64, 0.0f64);
    loop {
        let (c, v) = if x < ac.len() && (y == bc.len() || ac[x].ix() as i64 <= bc[y] as i64) {
            x += 1;
            (ac[x - 1].ix() as i64, av[x - 1].get())
        } else if y < bc.len() {
            y += 1;
            (bc[y - 1] as i64, bv[y - 1].get())
        } else {
            break;
        };
        if c == i {
            continue;
        }
        if c == current.0 {
            current.1 += v;
        } else {
            if current.0 >= 0 {
                emit(current.0, current.1);
            }
            current = (c, v);
        }
    }
    if current.0 >= 0 {
        emit(current.0, current.1);
    }
}

/// `scale · (P + Pᵀ)` with a zero (dropped) diagonal for an n x n CSR matrix `P` whose rows
/// may be in any column order (kNN rows are sorted by distance); duplicate entries are
/// summed. Rows already sorted (e.g. from [`super::entropic_affinities_csr`]) are used as
/// they are, others are sorted in parallel; the transpose is a counting sort (its rows come
/// out sorted); the union of each row of `P` and `Pᵀ` is counted, then written, in
/// parallel. The result is canonical.
///
/// # Errors
/// [`EmbedError::ShapeMismatch`] for inconsistent arrays or out-of-range indices;
/// [`EmbedError::NonFinite`].
pub fn symmetrize_csr<I: CsrIndex, V: CsrValue>(
    n: usize,
    indptr: &[I],
    indices: &[I],
    data: &[V],
    scale: f64,
) -> Result<CsrMatrix<I, V>> {
    let bad = |why: &str| Err(EmbedError::ShapeMismatch(format!("affinity matrix: {why}")));
    if indptr.len() != n + 1 || !indptr[0].below(1) || indptr.windows(2).any(|w| w[0] > w[1]) {
        return bad("row pointers must have n + 1 non-decreasing entries from 0");
    }
    if n > u32::MAX as usize {
        return bad("more than 2^32 - 1 rows (row indices are kept as u32)");
    }
    let nnz = indptr[n].ix();
    if indices.len() != nnz || data.len() != nnz {
        return bad("indices and data must have indptr[-1] entries");
    }
    let row = |i: usize| indptr[i].ix()..indptr[i + 1].ix();
    // One parallel pass: (all columns in range, all values finite, all rows sorted).
    let (in_range, finite, sorted) = (0..n)
        .into_par_iter()
        .with_min_len(ROW_BLOCK)
        .map(|i| {
            let (c, v) = (&indices[row(i)], &data[row(i)]);
            (
                c.iter().all(|&j| j.below(n)),
                v.iter().all(|x| x.get().is_finite()),
                c.windows(2).all(|w| w[0] <= w[1]),
            )
        })
        .reduce(
            || (true, true, true),
            |a, b| (a.0 && b.0, a.1 && b.1, a.2 && b.2),
        );
    if !in_range {
        return bad("column index out of range");
    }
    if !finite {
        return Err(EmbedError::NonFinite { name: "affinities" });
    }
    let (own_c, own_v);
    let (pc, pv): (&[I], &[V]) = if sorted {
        (indices, data)
    } else {
        let mut c = vec![I::of(0); nnz];
        let mut v = vec![V::of(0.0); nnz];
        split_rows(indptr, &mut c, &mut v, |rows, cb, vb| {
            let mut keys = Vec::new();
            let base = indptr[rows.start].ix();
            for i in rows {
                let r = row(i);
                let o = r.start - base..r.end - base;
                sort_row(
                    &indices[r.clone()],
                    &data[r],
                    &mut keys,
                    &mut cb[o.clone()],
                    &mut vb[o],
                );
            }
        });
        own_c = c;
        own_v = v;
        (&own_c, &own_v)
    };
    let (tptr, tind, tdat) = transpose(n, indptr, pc, pv);
    let trow = |i: usize| tptr[i] as usize..tptr[i + 1] as usize;
    let parts = |i: usize| {
        let (r, t) = (row(i), trow(i));
        ((&pc[r.clone()], &pv[r]), (&tind[t.clone()], &tdat[t]))
    };
    // Pass 1: the size of each row of the union; pass 2: the union itself.
    let mut counts = vec![0i64; n + 1];
    counts[1..]
        .par_iter_mut()
        .enumerate()
        .with_min_len(ROW_BLOCK)
        .for_each(|(i, c)| {
            let (a, b) = parts(i);
            merge_rows(i as i64, a, b, |_, _| *c += 1);
        });
    for i in 0..n {
        counts[i + 1] += counts[i];
    }
    let out_ptr = counts;
    let total = out_ptr[n] as usize;
    if total > I::MAX {
        return bad("the symmetrised matrix has too many entries for its index type");
    }
    let mut out_ind = vec![I::of(0); total];
    let mut out_dat = vec![V::of(0.0); total];
    split_rows(&out_ptr, &mut out_ind, &mut out_dat, |rows, cb, vb| {
        let mut t = 0;
        for i in rows {
            let (a, b) = parts(i);
            merge_rows(i as i64, a, b, |c, v| {
                cb[t] = I::of(c as usize);
                vb[t] = V::of(scale * v);
                t += 1;
            });
        }
    });
    Ok(CsrMatrix {
        indptr: out_ptr.iter().map(|&p| I::of(p as usize)).collect(),
        indices: out_ind,
        data: out_dat,
    })
}

/// Pᵀ of the n x n CSR matrix (indptr, cols, vals) as (indptr, rows, values) by a
/// counting sort: each row of Pᵀ lists its entries by increasing row of P. Rows are kept
/// as u32 (half the memory to fault in and to scatter into). In parallel over ranges of
/// columns holding about equal numbers of entries: every task reads all entries and
/// scatters those of its columns into its own part of the output.
fn transpose<I: CsrIndex, V: CsrValue>(
    n: usize,
    indptr: &[I],
    cols: &[I],
    vals: &[V],
) -> (Vec<i64>, Vec<u32>, Vec<V>) {
    let nnz = cols.len();
    let mut tptr = vec![0i64; n + 1];
    for &j in cols {
        tptr[j.ix() + 1] += 1;
    }
    for j in 0..n {
        tptr[j + 1] += tptr[j];
    }
    let tasks = rayon::current_num_threads().clamp(1, 8);
    // Column boundaries: the first column whose entries start past t/tasks of the total.
    let mut bounds = vec![0usize];
    for t in 1..tasks {
        let target = (nnz * t / tasks) as i64;
        let c = tptr.partition_point(|&v| v < target).min(n);
        bounds.push(c.max(*bounds.last().expect("starts with 0")));
    }
    bounds.push(n);
    let mut tind = vec![0u32; nnz];
    let mut tdat = vec![V::of(0.0); nnz];
    let mut parts = Vec::with_capacity(tasks);
    let (mut rest_c, mut rest_v) = (&mut tind[..], &mut tdat[..]);
    for w in bounds.windows(2) {
        let len = (tptr[w[1]] - tptr[w[0]]) as usize;
        let (c, rc) = std::mem::take(&mut rest_c).split_at_mut(len);
        let (v, rv) = std::mem::take(&mut rest_v).split_at_mut(len);
        rest_c = rc;
        rest_v = rv;
        parts.push((w[0]..w[1], c, v));
    }
    parts.into_par_iter().for_each(|(range, c, v)| {
        let base = tptr[range.start] as usize;
        let mut cursor: Vec<usize> = tptr[range.clone()]
            .iter()
            .map(|&t| t as usize - base)
            .collect();
        for i in 0..n {
            for e in indptr[i].ix()..indptr[i + 1].ix() {
                let j = cols[e].ix();
                if range.contains(&j) {
                    let t = &mut cursor[j - range.start];
                    c[*t] = i as u32;
                    v[*t] = vals[e];
                    *t += 1;
                }
            }
        }
    });
    (tptr, tind, tdat)
}

/// Runs `work(rows, columns, values)` in parallel over blocks of [`ROW_BLOCK`] rows, each
/// with the slices of `cols` and `vals` that `indptr` gives those rows.
fn split_rows<P: CsrIndex, C: Send, W: Send, F>(
    indptr: &[P],
    cols: &mut [C],
    vals: &mut [W],
    work: F,
) where
    F: Fn(std::ops::Range<usize>, &mut [C], &mut [W]) + Sync,
{
    let n = indptr.len() - 1;
    let mut blocks = Vec::with_capacity(n.div_ceil(ROW_BLOCK));
    let (mut rest_c, mut rest_v) = (cols, vals);
    for start in (0..n).step_by(ROW_BLOCK) {
        let end = (start + ROW_BLOCK).min(n);
        let len = indptr[end].ix() - indptr[start].ix();
        let (c, rc) = std::mem::take(&mut rest_c).split_at_mut(len);
        let (v, rv) = std::mem::take(&mut rest_v).split_at_mut(len);
        rest_c = rc;
        rest_v = rv;
        blocks.push((start..end, c, v));
    }
    blocks
        .into_par_iter()
        .for_each(|(rows, c, v)| work(rows, c, v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetrize_matches_dense() {
        // 4 x 4 with a diagonal entry, unsorted rows, a repeat and a one-sided pair.
        let indptr = [0i64, 2, 4, 5, 7];
        let indices = [2i64, 1, 0, 1, 0, 1, 1];
        let data = [0.5, 0.25, 0.75, 9.0, 1.0, 2.0, 0.5];
        let s = symmetrize_csr(4, &indptr, &indices, &data, 0.5).unwrap();
        let mut dense = [[0.0; 4]; 4];
        let mut want = [[0.0; 4]; 4];
        for i in 0..4 {
            for e in indptr[i] as usize..indptr[i + 1] as usize {
                let j = indices[e] as usize;
                if i != j {
                    want[i][j] += 0.5 * data[e];
                    want[j][i] += 0.5 * data[e];
                }
            }
            let r = s.indptr[i] as usize..s.indptr[i + 1] as usize;
            assert!(s.indices[r.clone()].windows(2).all(|w| w[0] < w[1]));
            for e in r {
                dense[i][s.indices[e] as usize] = s.data[e];
            }
        }
        assert_eq!(dense, want);
        assert!(symmetrize_csr(4, &indptr, &[2, 1, 0, 1, 0, 7, 1], &data, 1.0).is_err());
    }

    #[test]
    fn compact_layout_matches_the_wide_one() {
        // A random 300 x 300 matrix with unsorted rows, repeats and diagonal entries:
        // int32 / f32 symmetrisation equals the int64 / f64 one up to f32 rounding, with
        // the same pattern.
        let n = 300;
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        let mut indptr = vec![0i64];
        let (mut indices, mut data) = (vec![], vec![]);
        for _ in 0..n {
            for _ in 0..(next() % 12) {
                indices.push((next() % n) as i64);
                data.push((next() % 1000) as f64 / 997.0);
            }
            indptr.push(indices.len() as i64);
        }
        let wide = symmetrize_csr(n, &indptr, &indices, &data, 0.25).unwrap();
        let ip32: Vec<i32> = indptr.iter().map(|&v| v as i32).collect();
        let ix32: Vec<i32> = indices.iter().map(|&v| v as i32).collect();
        let d32: Vec<f32> = data.iter().map(|&v| v as f32).collect();
        let compact = symmetrize_csr(n, &ip32, &ix32, &d32, 0.25).unwrap();
        let as64 = |v: &[i32]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
        assert_eq!(as64(&compact.indptr), wide.indptr);
        assert_eq!(as64(&compact.indices), wide.indices);
        for (a, b) in compact.data.iter().zip(&wide.data) {
            assert!((*a as f64 - b).abs() <= 4.0 * f32::EPSILON as f64 * b.abs());
        }
        let rows = rows_to_csr::<i32, f32>(
            n,
            2,
            &ix32[..2 * n],
            &data[..2 * n],
            &(0..n).collect::<Vec<_>>(),
        );
        let rows64 = rows_to_csr::<i64, f64>(
            n,
            2,
            &indices[..2 * n],
            &data[..2 * n],
            &(0..n).collect::<Vec<_>>(),
        );
        assert_eq!(as64(&rows.indices), rows64.indices);
        assert!(
            rows.data
                .iter()
                .zip(&rows64.data)
                .all(|(a, b)| (*a as f64 - b).abs() <= 2.0 * f32::EPSILON as f64 * b.abs())
        );
    }

    #[test]
    fn rows_to_csr_sorts_and_sums_repeats() {
        // Row 0 unsorted, row 1 with a repeated column; values stored in swapped order.
        let indices = [2i64, 0, 1, 1, 1, 0];
        let values = [0.4, 0.6, 0.0, 0.1, 0.2, 0.3]; // solver rows: point 1, then point 0
        let csr = rows_to_csr::<i64, f64>(2, 3, &indices, &values, &[1, 0]);
        assert_eq!(csr.indptr, vec![0, 3, 5]);
        assert_eq!(csr.indices, vec![0, 1, 2, 0, 1]);
        assert_eq!(csr.data, vec![0.2, 0.3, 0.1, 0.0, 0.4 + 0.6]);
    }
}

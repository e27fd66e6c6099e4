//! Colours of categorical matrices whose columns are different attributes
//! ("notCommonAttributes", spec §4.4): the recolouring-invariant column distance of the
//! categorical TSP (eq. 5.10) and the colour preprocessing of Algorithm 5 (spec §10.3).

use rayon::prelude::*;

use crate::arrangement::Arrangement;
use crate::error::OrderError;
use crate::matrix::Matrix;
use crate::search::Axes;
use crate::tsp::{hamming_distances, reverse_if_better};

/// Colour (layer) of every cell of original column `col`, by original row.
fn column_colours(matrix: &Matrix, col: usize) -> Vec<u8> {
    (0..matrix.n_rows())
        .map(|r| matrix.layer_of(r, col).unwrap_or(0) as u8)
        .collect()
}

/// Eq. 5.10: `m² − Σ_(i,j) count(i, j)²` over the colour pairs of two columns, 0 when one
/// pair makes up the whole of both columns; invariant to recolouring either column. Scaled
/// down (by a power of two) when `m² ≥ 2^24`, so that it fits the TSP solver.
pub fn column_pair_distances(matrix: &Matrix) -> Vec<u32> {
    let (m, n, k) = (matrix.n_rows(), matrix.n_cols(), matrix.n_layers());
    let cols: Vec<Vec<u8>> = (0..n).map(|c| column_colours(matrix, c)).collect();
    let total = (m as u64) * (m as u64);
    let mut shift = 0;
    while total >> shift >= 1 << 24 {
        shift += 1;
    }
    let mut out = vec![0u32; n * n];
    out.par_chunks_mut(n).enumerate().for_each(|(i, row)| {
        let mut counts = vec![0u64; k * k];
        for (j, d) in row.iter_mut().enumerate() {
            if i == j {
                continue;
            }
            counts.iter_mut().for_each(|c| *c = 0);
            for (&x, &y) in cols[i].iter().zip(&cols[j]) {
                counts[x as usize * k + y as usize] += 1;
            }
            let sq: u64 = counts.iter().map(|c| c * c).sum();
            *d = ((total - sq) >> shift) as u32;
        }
    });
    out
}

/// Number of horizontally adjacent cells of equal colour (displayed column pairs), the
/// measure Algorithm 5 increases.
pub fn equal_adjacent_pairs(arr: &Arrangement) -> u64 {
    let (m, n) = (arr.len(0), arr.len(1));
    let k = arr.matrix().n_layers();
    let colour = |r: usize, c: usize| (0..k).find(|&l| arr.cell(0, l, r, c));
    let mut total = 0;
    for c in 0..n.saturating_sub(1) {
        for r in 0..m {
            if colour(r, c) == colour(r, c + 1) {
                total += 1;
            }
        }
    }
    total
}

/// Recolours original column `col` of `arr` by the colour permutation `sigma` (cells of
/// current colour `y` get colour `sigma[y]`) through transpositions; returns the raw error
/// change.
fn apply_permutation(arr: &mut Arrangement, col: usize, sigma: &[usize]) -> i128 {
    let mut s = sigma.to_vec();
    let mut delta = 0;
    for y in 0..s.len() {
        while s[y] != y {
            let z = s[y];
            // cells of colour y become z and cells of colour z become y
            delta += arr.recolour(col, y, z);
            s[y] = s[z];
            s[z] = z;
        }
    }
    delta
}

/// Algorithm 5 (spec §10.3): for each pair of displayed columns, left to right, count the
/// colour pairs (x in the left column, y in the right one) and repeatedly take the most
/// frequent pair whose colours are not yet aligned, swapping x and y in the right column so
/// that it reads x. Colours, once aligned, are forbidden on both sides.
///
/// Greedy matching can align fewer cells than the pair had before; the right column then
/// instead takes the relabelling the left column received in this pass (which keeps the
/// pair's original agreement), so the count of equal adjacent cells never decreases.
/// Returns the raw error change. A binary matrix is left as it is.
pub fn align_colours(arr: &mut Arrangement) -> i128 {
    let k = arr.matrix().n_layers();
    let (m, n) = (arr.len(0), arr.len(1));
    if k < 2 || n < 2 {
        return 0;
    }
    let order = arr.order(1);
    let rows = arr.order(0);
    // relabelling applied to each column in this pass (start colour -> current colour)
    let mut applied: Vec<Vec<usize>> = vec![(0..k).collect(); n];
    let mut delta = 0;
    for i in 0..n - 1 {
        let (left, right) = (order[i], order[i + 1]);
        let lc = column_colours(arr.matrix(), left);
        let rc = column_colours(arr.matrix(), right);
        let mut p = vec![0u64; k * k];
        for &r in &rows[..m] {
            p[lc[r] as usize * k + rc[r] as usize] += 1;
        }
        let agreement = |sigma: &[usize]| -> u64 {
            (0..k)
                .flat_map(|x| (0..k).map(move |y| (x, y)))
                .filter(|&(x, y)| sigma[y] == x)
                .map(|(x, y)| p[x * k + y])
                .sum()
        };
        // greedy alignment with forbidden colours
        let mut sigma: Vec<usize> = (0..k).collect(); // current colour -> new colour
        let mut cur = p.clone(); // counts by (left colour, new right colour)
        let mut forbidden = vec![false; k];
        loop {
            let mut best: Option<(u64, usize, usize)> = None;
            for x in (0..k).filter(|&x| !forbidden[x]) {
                for y in (0..k).filter(|&y| !forbidden[y]) {
                    let c = cur[x * k + y];
                    if c > 0 && best.is_none_or(|b| c > b.0) {
                        best = Some((c, x, y));
                    }
                }
            }
            let Some((_, x, y)) = best else { break };
            if x != y {
                for row in 0..k {
                    cur.swap(row * k + x, row * k + y);
                }
                for s in &mut sigma {
                    if *s == x {
                        *s = y;
                    } else if *s == y {
                        *s = x;
                    }
                }
            }
            forbidden[x] = true;
        }
        // the left column's relabelling of this pass keeps the pair's original agreement
        let carried = applied[left].clone();
        let identity: Vec<usize> = (0..k).collect();
        let mut choice = sigma;
        for cand in [carried, identity.clone()] {
            if agreement(&cand) > agreement(&choice) {
                choice = cand;
            }
        }
        if choice != identity {
            delta += apply_permutation(arr, right, &choice);
        }
        applied[right] = choice;
    }
    delta
}

/// TSP initial order for a categorical matrix whose colours may change per column: rows by
/// the number of differing values, columns by the recolouring-invariant distance of
/// eq. 5.10, then Algorithm 5 on the columns and, as for binary data, each axis reversed if
/// that lowers the error.
///
/// # Errors
/// As [`crate::tsp::tsp_path_with`].
pub fn tsp_arrange_recolour(
    arr: &mut Arrangement,
    axes: Axes,
    control: vastml_core::Control<'_>,
) -> Result<(), OrderError> {
    let which: &[usize] = match axes {
        Axes::Rows => &[0],
        Axes::Cols => &[1],
        Axes::Both => &[0, 1],
    };
    for &axis in which {
        let n = arr.len(axis);
        let dist = if axis == 0 {
            hamming_distances(arr.matrix(), 0)
        } else {
            column_pair_distances(arr.matrix())
        };
        let path = crate::tsp::tsp_path_with(&dist, n, control)?;
        arr.set_order(axis, &path)?;
    }
    align_colours(arr);
    reverse_if_better(arr, which);
    Ok(())
}

/// Recolours original column `col` so that value `v` (its layer in the input matrix) gets
/// colour `target[v]`; returns the raw error change.
///
/// # Panics
/// `target` is not a permutation of the colours.
pub fn set_colour_map(arr: &mut Arrangement, col: usize, target: &[u8]) -> i128 {
    let k = arr.matrix().n_layers();
    assert_eq!(target.len(), k, "one colour per value");
    let mut sigma = vec![usize::MAX; k];
    for (v, &t) in target.iter().enumerate() {
        let cur = arr.colour_of(col, v);
        assert!(
            sigma[cur] == usize::MAX && (t as usize) < k,
            "not a permutation"
        );
        sigma[cur] = t as usize;
    }
    apply_permutation(arr, col, &sigma)
}

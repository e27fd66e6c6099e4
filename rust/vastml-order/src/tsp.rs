//! TSP orderings (spec §10): Hamming distances with popcount, greedy edge matching into an
//! open path, and 2-opt. Kept apart so other orderings (TSP-means) can reuse it.

use rayon::prelude::*;

use crate::error::{OrderError, invalid};
use crate::matrix::Matrix;

/// Pairwise distances between the rows (`axis` 0) or columns (`axis` 1) of `matrix`: the
/// number of differing cells (Hamming for binary data), row-major n x n.
pub fn hamming_distances(matrix: &Matrix, axis: usize) -> Vec<u32> {
    let owned;
    let mx = if axis == 0 {
        matrix
    } else {
        owned = matrix.transposed();
        &owned
    };
    let n = mx.n_rows();
    let layers = mx.n_layers();
    let halve = layers > 1;
    let mut out = vec![0u32; n * n];
    out.par_chunks_mut(n).enumerate().for_each(|(i, row)| {
        for (j, d) in row.iter_mut().enumerate() {
            if i == j {
                continue;
            }
            let mut s = 0u32;
            for l in 0..layers {
                let (a, b) = (mx.row_bits(l, i), mx.row_bits(l, j));
                s += a
                    .iter()
                    .zip(b)
                    .map(|(x, y)| (x ^ y).count_ones())
                    .sum::<u32>();
            }
            *d = if halve { s / 2 } else { s };
        }
    });
    out
}

/// Length of an open path.
pub fn path_length(path: &[usize], dist: &[u32], n: usize) -> u64 {
    path.windows(2)
        .map(|w| u64::from(dist[w[0] * n + w[1]]))
        .sum()
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// Greedy matching: edges by increasing length (ties by index), degree at most 2, no cycle;
/// the resulting fragments form one open path.
///
/// # Errors
/// More than 2^20 cities, distances above 2^24, or a matrix of the wrong size.
pub fn greedy_path(dist: &[u32], n: usize) -> Result<Vec<usize>, OrderError> {
    if dist.len() != n * n {
        return Err(OrderError::ShapeMismatch(format!(
            "{} distances for {n} cities",
            dist.len()
        )));
    }
    if n > 1 << 20 {
        return Err(invalid("n", "at most 2^20 cities"));
    }
    if n <= 2 {
        return Ok((0..n).collect());
    }
    if dist.iter().any(|&d| d >= 1 << 24) {
        return Err(invalid("distances", "must be below 2^24"));
    }
    let mut pairs: Vec<u64> = (0..n)
        .into_par_iter()
        .flat_map_iter(|i| {
            (i + 1..n)
                .map(move |j| (u64::from(dist[i * n + j]) << 40) | ((i as u64) << 20) | j as u64)
        })
        .collect();
    pairs.par_sort_unstable();
    let mut degree = vec![0u8; n];
    let mut parent: Vec<usize> = (0..n).collect();
    let mut adj = vec![[usize::MAX; 2]; n];
    let mut edges = 0;
    for key in pairs {
        let i = ((key >> 20) & 0xF_FFFF) as usize;
        let j = (key & 0xF_FFFF) as usize;
        if degree[i] >= 2 || degree[j] >= 2 {
            continue;
        }
        let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
        if ri == rj {
            continue;
        }
        parent[ri] = rj;
        adj[i][degree[i] as usize] = j;
        adj[j][degree[j] as usize] = i;
        degree[i] += 1;
        degree[j] += 1;
        edges += 1;
        if edges == n - 1 {
            break;
        }
    }
    let start = (0..n).find(|&i| degree[i] <= 1).unwrap_or(0);
    let mut path = Vec::with_capacity(n);
    let (mut prev, mut cur) = (usize::MAX, start);
    loop {
        path.push(cur);
        let next = adj[cur]
            .iter()
            .copied()
            .find(|&x| x != usize::MAX && x != prev);
        match next {
            Some(x) if path.len() < n => {
                prev = cur;
                cur = x;
            }
            _ => break,
        }
    }
    Ok(path)
}

/// 2-opt on an open path: reverse `path[i+1..=j]` when it shortens the path (the ends may
/// move too); at most `passes` passes, stopping after a pass without change. Returns the
/// number of improving reversals.
pub fn two_opt(path: &mut [usize], dist: &[u32], n: usize, passes: usize) -> usize {
    let len = path.len();
    let d = |a: usize, b: usize| i64::from(dist[a * n + b]);
    let mut total = 0;
    for _ in 0..passes {
        let mut changed = 0;
        // i = None reverses a prefix; j = len-1 reverses a suffix.
        for i in 0..len {
            for j in i + 1..len {
                // reverse path[i..=j]
                let before_left = if i > 0 { d(path[i - 1], path[i]) } else { 0 };
                let after_left = if i > 0 { d(path[i - 1], path[j]) } else { 0 };
                let before_right = if j + 1 < len {
                    d(path[j], path[j + 1])
                } else {
                    0
                };
                let after_right = if j + 1 < len {
                    d(path[i], path[j + 1])
                } else {
                    0
                };
                if after_left + after_right < before_left + before_right {
                    path[i..=j].reverse();
                    changed += 1;
                }
            }
        }
        total += changed;
        if changed == 0 {
            break;
        }
    }
    total
}

/// Greedy + 2-opt (3 passes) open path over the distance matrix.
///
/// # Errors
/// As [`greedy_path`].
pub fn tsp_path(dist: &[u32], n: usize) -> Result<Vec<usize>, OrderError> {
    let mut p = greedy_path(dist, n)?;
    two_opt(&mut p, dist, n, 3);
    Ok(p)
}

/// TSP initial order of an arrangement (spec §9.9, §10.1): each axis in `axes` ordered by
/// greedy + 2-opt over the Hamming distances, then reversed if that lowers the error
/// (ZerosAndOnes padding is orientation dependent).
///
/// # Errors
/// As [`greedy_path`].
pub fn tsp_arrange(arr: &mut crate::Arrangement, axes: crate::Axes) -> Result<(), OrderError> {
    let which: &[usize] = match axes {
        crate::Axes::Rows => &[0],
        crate::Axes::Cols => &[1],
        crate::Axes::Both => &[0, 1],
    };
    for &axis in which {
        let n = arr.len(axis);
        let dist = hamming_distances(arr.matrix(), axis);
        let path = tsp_path(&dist, n)?;
        arr.set_order(axis, &path)?;
    }
    reverse_if_better(arr, which);
    Ok(())
}

/// Reverses each listed axis of `arr` whose reversal lowers the error (a TSP path has no
/// preferred direction, but the padding and the kernel's asymmetry may).
pub(crate) fn reverse_if_better(arr: &mut crate::Arrangement, axes: &[usize]) {
    for &axis in axes {
        let n = arr.len(axis);
        if n < 2 {
            continue;
        }
        let rev = crate::Move::Reverse(0, n - 1).segments();
        let d = arr.delta(axis, &rev);
        if d < 0 {
            arr.commit(axis, &rev, d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_is_permutation_and_two_opt_helps() {
        let n = 40;
        let mut s = 12345u64;
        let pts: Vec<(i64, i64)> = (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (((s >> 33) % 100) as i64, ((s >> 13) % 100) as i64)
            })
            .collect();
        let dist: Vec<u32> = (0..n * n)
            .map(|k| {
                let (a, b) = (pts[k / n], pts[k % n]);
                ((a.0 - b.0).abs() + (a.1 - b.1).abs()) as u32
            })
            .collect();
        let g = greedy_path(&dist, n).unwrap();
        let mut sorted = g.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>());
        let mut t = g.clone();
        two_opt(&mut t, &dist, n, 3);
        assert!(path_length(&t, &dist, n) <= path_length(&g, &dist, n));
    }
}

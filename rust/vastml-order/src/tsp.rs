//! TSP orderings (spec §10): Hamming distances with popcount, greedy edge matching into an
//! open path, and 2-opt. Kept apart so other orderings (TSP-means) can reuse it.

use rayon::prelude::*;
use vastml_core::Control;

use crate::error::{OrderError, invalid};
use crate::matrix::{Matrix, set_bits};

/// Pairwise distances between the rows (`axis` 0) or columns (`axis` 1) of `matrix`: the
/// number of differing cells (Hamming for binary data; for categorical data half the
/// differing layer bits, i.e. the differing cells), row-major n x n.
///
/// Sparse data (few ones per feature) takes the intersection route
/// `|a| + |b| - 2 |a ∩ b|`, which visits only the pairs that share a one; otherwise the
/// rows' words are compared with popcount. Both give the same integers.
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
    let features = mx.n_cols();
    // holders[l][f]: the items with a one at feature f of layer l
    let mut holders: Vec<Vec<Vec<u32>>> = vec![vec![Vec::new(); features]; layers];
    let mut ones = vec![0u32; n];
    for (l, layer) in holders.iter_mut().enumerate() {
        for (i, count) in ones.iter_mut().enumerate() {
            for f in set_bits(mx.row_bits(l, i)) {
                layer[f].push(i as u32);
                *count += 1;
            }
        }
    }
    let shared: u64 = holders
        .iter()
        .flatten()
        .map(|h| (h.len() as u64).pow(2))
        .sum();
    let popcount_cost = (n as u64).pow(2) * (layers * mx.row_bits(0, 0).len()) as u64;
    if shared + (n as u64).pow(2) < popcount_cost / 2 {
        hamming_by_intersections(mx, &holders, &ones)
    } else {
        hamming_by_popcount(mx)
    }
}

/// [`hamming_distances`] over the bit words (the route for dense data).
fn hamming_by_popcount(mx: &Matrix) -> Vec<u32> {
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

/// [`hamming_distances`] as `|a| + |b| - 2 |a ∩ b|` with the intersections counted through
/// the features' holder lists (the route for sparse data).
fn hamming_by_intersections(mx: &Matrix, holders: &[Vec<Vec<u32>>], ones: &[u32]) -> Vec<u32> {
    let n = mx.n_rows();
    let halve = mx.n_layers() > 1;
    let mut out = vec![0u32; n * n];
    out.par_chunks_mut(n).enumerate().for_each(|(i, row)| {
        for (d, &o) in row.iter_mut().zip(ones) {
            *d = ones[i] + o;
        }
        for (l, layer) in holders.iter().enumerate() {
            for f in set_bits(mx.row_bits(l, i)) {
                for &j in &layer[f] {
                    row[j as usize] -= 2;
                }
            }
        }
        row[i] = 0;
        if halve {
            for d in row.iter_mut() {
                *d /= 2;
            }
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

/// Pairs (i < j) taken by the first band of the greedy matching, in multiples of the city
/// count; each further band is four times larger.
const GREEDY_BAND: usize = 8;

/// Greedy matching over a symmetric distance matrix: edges by increasing length (ties by
/// index), degree at most 2, no cycle; the resulting fragments form one open path.
///
/// The edges are visited in bands of increasing length: only the pairs of the current band
/// are collected and sorted, and matching usually ends within the first bands, so the
/// n²/2 pairs are never all sorted (the order of the visit is that of a full sort).
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
    let max = dist.par_iter().copied().max().unwrap_or(0);
    if max >= 1 << 24 {
        return Err(invalid("distances", "must be below 2^24"));
    }
    // histogram of the pairs' lengths, in at most 2^16 buckets of 2^shift lengths each
    let shift = (32 - max.leading_zeros()).saturating_sub(16);
    let buckets = (max >> shift) as usize + 1;
    let hist: Vec<u64> = (0..n)
        .into_par_iter()
        .fold(
            || vec![0u64; buckets],
            |mut h, i| {
                for &d in &dist[i * n + i + 1..(i + 1) * n] {
                    h[(d >> shift) as usize] += 1;
                }
                h
            },
        )
        .reduce(
            || vec![0u64; buckets],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
                a
            },
        );
    let mut degree = vec![0u8; n];
    let mut parent: Vec<usize> = (0..n).collect();
    let mut adj = vec![[usize::MAX; 2]; n];
    let mut edges = 0;
    let (mut lo, mut want) = (0usize, (GREEDY_BAND * n) as u64);
    while edges < n - 1 && lo < buckets {
        // the band: buckets lo..hi holding at least `want` pairs (or the rest)
        let mut hi = lo;
        let mut count = 0;
        while hi < buckets && (count < want || count == 0) {
            count += hist[hi];
            hi += 1;
        }
        want = want.saturating_mul(4);
        let (blo, bhi) = (lo as u32, hi as u32);
        // only cities that can still take an edge: a pair with a full end is skipped anyway
        let open: Vec<usize> = (0..n).filter(|&i| degree[i] < 2).collect();
        let open = &open;
        let mut pairs: Vec<u64> = open
            .par_iter()
            .enumerate()
            .flat_map_iter(|(a, &i)| {
                open[a + 1..].iter().filter_map(move |&j| {
                    let d = dist[i * n + j];
                    (blo..bhi)
                        .contains(&(d >> shift))
                        .then(|| (u64::from(d) << 40) | ((i as u64) << 20) | j as u64)
                })
            })
            .collect();
        if shift == 0 {
            // one length per bucket, pairs met in (i, j) order: a stable counting sort by
            // length gives the (length, i, j) order without comparisons
            let mut next = vec![0usize; hi - lo + 1];
            for &key in &pairs {
                next[(key >> 40) as usize - lo + 1] += 1;
            }
            for b in 1..next.len() {
                next[b] += next[b - 1];
            }
            let mut sorted = vec![0u64; pairs.len()];
            for &key in &pairs {
                let b = (key >> 40) as usize - lo;
                sorted[next[b]] = key;
                next[b] += 1;
            }
            pairs = sorted;
        } else {
            pairs.par_sort_unstable();
        }
        lo = hi;
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

/// 2-opt on an open path over a symmetric distance matrix: reverse `path[i..=j]` when it
/// shortens the path (the ends may move too), scanning i, then j, in order; at most `passes`
/// passes, stopping after a pass without change. Returns the number of improving reversals.
///
/// The lengths of the path's edges are kept in an array (a reversal reverses the edges
/// inside it), so a scan reads two rows of `dist` and that array instead of a random
/// entry of `dist` per step.
pub fn two_opt(path: &mut [usize], dist: &[u32], n: usize, passes: usize) -> usize {
    let len = path.len();
    if len < 2 {
        return 0;
    }
    let row = |a: u32| &dist[a as usize * n..(a as usize + 1) * n];
    // the path as u32 (half the cache lines of usize) and edge[k], the length of the edge
    // path[k] - path[k + 1]; lengths below 2^24 (greedy's limit) cannot overflow the sums,
    // longer ones are compared in u64
    let mut p: Vec<u32> = path.iter().map(|&x| x as u32).collect();
    let mut edge: Vec<u64> = p
        .windows(2)
        .map(|w| u64::from(row(w[0])[w[1] as usize]))
        .collect();
    // the two rows read at random positions during a scan, copied first: a sequential
    // copy streams from memory, while random reads of an uncached row miss on every line
    // (i = 0 reverses a prefix: no left edge, as if the left neighbour were at distance 0)
    let (mut left_row, mut first_row) = (vec![0u32; n], vec![0u32; n]);
    let mut total = 0;
    for _ in 0..passes {
        let mut changed = 0;
        for i in 0..len - 1 {
            if i > 0 {
                left_row.copy_from_slice(row(p[i - 1]));
            } else {
                left_row.fill(0);
            }
            first_row.copy_from_slice(row(p[i]));
            let mut before_left = if i > 0 { edge[i - 1] } else { 0 };
            // j < len - 1: a reversal with a right edge; found by a tight scan, then applied,
            // and the scan goes on after it (the order of the plain loop over j)
            let mut j = i + 1;
            while let Some(k) = first_improving(&left_row, &first_row, &p, &edge, before_left, j) {
                let after_left = u64::from(left_row[p[k] as usize]);
                let after_right = u64::from(first_row[p[k + 1] as usize]);
                p[i..=k].reverse();
                edge[i..k].reverse();
                if i > 0 {
                    edge[i - 1] = after_left;
                    before_left = after_left;
                }
                edge[k] = after_right;
                first_row.copy_from_slice(row(p[i]));
                changed += 1;
                j = k + 1;
            }
            // j = len - 1 reverses a suffix: no right edge
            let after_left = u64::from(left_row[p[len - 1] as usize]);
            if after_left < before_left {
                p[i..].reverse();
                edge[i..].reverse();
                if i > 0 {
                    edge[i - 1] = after_left;
                }
                changed += 1;
            }
        }
        total += changed;
        if changed == 0 {
            break;
        }
    }
    for (x, &y) in path.iter_mut().zip(&p) {
        *x = y as usize;
    }
    total
}

/// The first j in `start..len - 1` whose reversal `p[i..=j]` shortens the path: the new
/// edges (left neighbour of i to `p[j]`, `p[i]` to `p[j + 1]`, read from the copied rows)
/// are shorter than the old (`before_left` and `edge[j]`). A loop without index checks on
/// the path and edges: most scans find nothing.
#[inline]
fn first_improving(
    left_row: &[u32],
    first_row: &[u32],
    p: &[u32],
    edge: &[u64],
    before_left: u64,
    start: usize,
) -> Option<usize> {
    let end = p.len() - 1;
    if start >= end {
        return None;
    }
    p[start..=end]
        .windows(2)
        .zip(&edge[start..end])
        .position(|(w, &e)| {
            u64::from(left_row[w[0] as usize]) + u64::from(first_row[w[1] as usize])
                < before_left + e
        })
        .map(|k| start + k)
}

/// Greedy + 2-opt (3 passes) open path over the distance matrix.
///
/// # Errors
/// As [`greedy_path`].
pub fn tsp_path(dist: &[u32], n: usize) -> Result<Vec<usize>, OrderError> {
    tsp_path_with(dist, n, Control::none())
}

/// [`tsp_path`] that polls `control`'s cancel flag after the greedy path and after every
/// 2-opt pass (each pass is O(n^2)).
///
/// # Errors
/// As [`greedy_path`]; [`OrderError::Cancelled`] when the flag is raised.
pub fn tsp_path_with(
    dist: &[u32],
    n: usize,
    control: Control<'_>,
) -> Result<Vec<usize>, OrderError> {
    let mut p = greedy_path(dist, n)?;
    for _ in 0..3 {
        control.check().map_err(|_| OrderError::Cancelled)?;
        if two_opt(&mut p, dist, n, 1) == 0 {
            break;
        }
    }
    control.check().map_err(|_| OrderError::Cancelled)?;
    Ok(p)
}

/// TSP initial order of an arrangement (spec §9.9, §10.1): each axis in `axes` ordered by
/// greedy + 2-opt over the Hamming distances, then reversed if that lowers the error
/// (ZerosAndOnes padding is orientation dependent).
///
/// # Errors
/// As [`tsp_path_with`].
pub fn tsp_arrange(
    arr: &mut crate::Arrangement,
    axes: crate::Axes,
    control: Control<'_>,
) -> Result<(), OrderError> {
    let which: &[usize] = match axes {
        crate::Axes::Rows => &[0],
        crate::Axes::Cols => &[1],
        crate::Axes::Both => &[0, 1],
    };
    for &axis in which {
        let n = arr.len(axis);
        let dist = hamming_distances(arr.matrix(), axis);
        let path = tsp_path_with(&dist, n, control)?;
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

    /// The greedy matching as first written: every pair sorted at once.
    fn greedy_full_sort(dist: &[u32], n: usize) -> Vec<usize> {
        let mut pairs: Vec<(u32, usize, usize)> = (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (dist[i * n + j], i, j)))
            .collect();
        pairs.sort_unstable();
        let mut degree = vec![0u8; n];
        let mut parent: Vec<usize> = (0..n).collect();
        let mut adj = vec![Vec::new(); n];
        for (_, i, j) in pairs {
            if degree[i] >= 2 || degree[j] >= 2 {
                continue;
            }
            let (ri, rj) = (find(&mut parent, i), find(&mut parent, j));
            if ri != rj {
                parent[ri] = rj;
                adj[i].push(j);
                adj[j].push(i);
                degree[i] += 1;
                degree[j] += 1;
            }
        }
        let mut path = vec![(0..n).find(|&i| degree[i] <= 1).unwrap_or(0)];
        while path.len() < n {
            let cur = path[path.len() - 1];
            let prev = (path.len() > 1).then(|| path[path.len() - 2]);
            match adj[cur].iter().find(|&&x| Some(x) != prev) {
                Some(&x) => path.push(x),
                None => break,
            }
        }
        path
    }

    /// 2-opt as first written: every length read from the matrix.
    fn two_opt_plain(path: &mut [usize], dist: &[u32], n: usize, passes: usize) -> usize {
        let len = path.len();
        let d = |a: usize, b: usize| i64::from(dist[a * n + b]);
        let mut total = 0;
        for _ in 0..passes {
            let mut changed = 0;
            for i in 0..len {
                for j in i + 1..len {
                    let (bl, al) = if i > 0 {
                        (d(path[i - 1], path[i]), d(path[i - 1], path[j]))
                    } else {
                        (0, 0)
                    };
                    let (br, ar) = if j + 1 < len {
                        (d(path[j], path[j + 1]), d(path[i], path[j + 1]))
                    } else {
                        (0, 0)
                    };
                    if al + ar < bl + br {
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

    fn lcg(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed;
        move || {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            s >> 33
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// The banded greedy and the edge-array 2-opt give exactly the paths of the
        /// full-sort greedy and the plain 2-opt, ties included (few distinct lengths).
        #[test]
        fn fast_tsp_equals_the_plain_one(n in 3usize..90, levels in 1u64..40, seed in 0u64..1000) {
            let mut r = lcg(seed);
            let mut dist = vec![0u32; n * n];
            for i in 0..n {
                for j in i + 1..n {
                    let v = (r() % levels) as u32 * if levels > 30 { 70_001 } else { 1 };
                    dist[i * n + j] = v;
                    dist[j * n + i] = v;
                }
            }
            let g = greedy_path(&dist, n).unwrap();
            proptest::prop_assert_eq!(&g, &greedy_full_sort(&dist, n));
            let (mut a, mut b) = (g.clone(), g);
            let ma = two_opt(&mut a, &dist, n, 3);
            let mb = two_opt_plain(&mut b, &dist, n, 3);
            proptest::prop_assert_eq!(a, b);
            proptest::prop_assert_eq!(ma, mb);
            // from a shuffled path: many more reversals, prefixes and suffixes included
            let mut c: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                c.swap(i, (r() % (i as u64 + 1)) as usize);
            }
            let mut d = c.clone();
            let mc = two_opt(&mut c, &dist, n, 3);
            let md = two_opt_plain(&mut d, &dist, n, 3);
            proptest::prop_assert_eq!(c, d);
            proptest::prop_assert_eq!(mc, md);
        }

        /// Both routes of the distances give the same integers (binary and categorical).
        #[test]
        fn sparse_and_popcount_distances_agree(
            rows in 1usize..40, cols in 1usize..150, density in 1u64..100,
            layers in 1usize..4, axis in 0usize..2, seed in 0u64..1000,
        ) {
            let mut r = lcg(seed);
            let m = if layers == 1 {
                let v: Vec<u8> = (0..rows * cols).map(|_| u8::from(r() % 100 < density)).collect();
                Matrix::binary(rows, cols, &v).unwrap()
            } else {
                let v: Vec<u32> = (0..rows * cols)
                    .map(|_| if r() % 100 < density { 1 + (r() % (layers as u64 - 1)) as u32 } else { 0 })
                    .collect();
                Matrix::categorical(rows, cols, &v, layers).unwrap()
            };
            let mx = if axis == 0 { m.clone() } else { m.transposed() };
            let mut holders = vec![vec![Vec::new(); mx.n_cols()]; mx.n_layers()];
            let mut ones = vec![0u32; mx.n_rows()];
            for (l, layer) in holders.iter_mut().enumerate() {
                for (i, o) in ones.iter_mut().enumerate() {
                    for f in set_bits(mx.row_bits(l, i)) {
                        layer[f].push(i as u32);
                        *o += 1;
                    }
                }
            }
            let sparse = hamming_by_intersections(&mx, &holders, &ones);
            proptest::prop_assert_eq!(&sparse, &hamming_by_popcount(&mx));
            proptest::prop_assert_eq!(&sparse, &hamming_distances(&m, axis));
        }
    }
}

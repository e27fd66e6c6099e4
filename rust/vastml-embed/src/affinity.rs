//! Entropic affinities: per-point Gaussian precisions with a given perplexity.
//!
//! For each point n with squared distances d²_nm to its k neighbours, find the precision
//! β_n (σ_n = 1/sqrt(2β_n)) such that the distribution p_m ∝ exp(−β_n d²_nm) has entropy
//! log K (K = perplexity). The root is found in α = log β (thesis §2.3.1) inside the bounds
//! of Theorem 2.2.2, by Newton, Halley or Euler steps with a bisection fallback
//! (Algorithm 1), or by the derivative-free bisection, Brent and Ridders for comparison.
//! Points are visited in a user-given order and warm-started from an earlier point (the
//! previous one, or a parent such as the MST parent); the order is cut into fixed-size
//! chunks that run in parallel, so the result does not depend on the thread count.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::error::{EmbedError, Result, check_finite, invalid};
use crate::objective::{CsrIndex, CsrValue};

mod calibrate;
mod csr;

use calibrate::{Calibration, RowSolution, extremes, solve_row};
pub use calibrate::{log_beta_bounds, p1_bound, row_entropy};
pub use csr::{CsrMatrix, symmetrize_csr};

/// The root finder of each point's log-precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootMethod {
    /// Newton's method (quadratic; one derivative).
    Newton,
    /// Halley's method (cubic; two derivatives; the most conservative step).
    Halley,
    /// Euler's (Chebyshev's parabola) method (cubic; two derivatives).
    Euler,
    /// Plain bisection of the bracket.
    Bisection,
    /// Brent's method on the bracket (derivative-free).
    Brent,
    /// Ridders' method on the bracket (derivative-free).
    Ridders,
}

impl RootMethod {
    /// The lower-case name used by the Python API.
    pub fn name(self) -> &'static str {
        match self {
            RootMethod::Newton => "newton",
            RootMethod::Halley => "halley",
            RootMethod::Euler => "euler",
            RootMethod::Bisection => "bisection",
            RootMethod::Brent => "brent",
            RootMethod::Ridders => "ridders",
        }
    }

    fn derivatives(self) -> u8 {
        match self {
            RootMethod::Newton => 1,
            RootMethod::Halley | RootMethod::Euler => 2,
            _ => 0,
        }
    }
}

impl FromStr for RootMethod {
    type Err = EmbedError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "newton" => RootMethod::Newton,
            "halley" => RootMethod::Halley,
            "euler" => RootMethod::Euler,
            "bisection" => RootMethod::Bisection,
            "brent" => RootMethod::Brent,
            "ridders" => RootMethod::Ridders,
            _ => {
                return Err(invalid(
                    "method",
                    format!(
                        "unknown root finder {s:?}; use newton, halley, euler, bisection, brent or ridders"
                    ),
                ));
            }
        })
    }
}

/// Where each point's root finder starts.
#[derive(Debug, Clone, Copy)]
pub enum WarmStart<'a> {
    /// From the previous point of the order (sequential orders such as density or random).
    Previous,
    /// From `parents[n]` (a point index, or −1 for the bounds midpoint), e.g. the MST parent
    /// in breadth-first order. A parent that comes later in the order, or in another chunk,
    /// is ignored (midpoint start).
    Parents(&'a [i64]),
    /// Always from the midpoint of the bounds.
    Bounds,
}

/// The name of a [`WarmStart`] as the Python API spells it (`"previous"`, `"parents"`,
/// `"bounds"`); [`WarmStartKind::with`] adds the parents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmStartKind {
    /// [`WarmStart::Previous`].
    Previous,
    /// [`WarmStart::Parents`].
    Parents,
    /// [`WarmStart::Bounds`].
    Bounds,
}

impl WarmStartKind {
    /// The warm start, with `parents` for [`WarmStartKind::Parents`] (ignored otherwise).
    ///
    /// # Errors
    /// [`EmbedError::InvalidParameter`] for `Parents` without `parents`.
    pub fn with(self, parents: Option<&[i64]>) -> Result<WarmStart<'_>> {
        Ok(match (self, parents) {
            (WarmStartKind::Previous, _) => WarmStart::Previous,
            (WarmStartKind::Bounds, _) => WarmStart::Bounds,
            (WarmStartKind::Parents, Some(p)) => WarmStart::Parents(p),
            (WarmStartKind::Parents, None) => {
                return Err(invalid("parents", "warm start 'parents' needs `parents`"));
            }
        })
    }
}

impl FromStr for WarmStartKind {
    type Err = EmbedError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "previous" => Ok(WarmStartKind::Previous),
            "parents" => Ok(WarmStartKind::Parents),
            "bounds" => Ok(WarmStartKind::Bounds),
            _ => Err(invalid(
                "warm",
                format!("unknown warm start {s:?}; use previous, parents or bounds"),
            )),
        }
    }
}

/// Options of the root finder (default: Euler steps, tol 1e-10 on |H − log K|, 20 steps
/// before a forced bisection).
#[derive(Debug, Clone, Copy)]
pub struct RootOptions {
    /// The root finder.
    pub method: RootMethod,
    /// Tolerance on |H − log K| (nats).
    pub tol: f64,
    /// Derivative steps before a forced bisection.
    pub maxit: u32,
}

impl Default for RootOptions {
    fn default() -> Self {
        RootOptions {
            method: RootMethod::Euler,
            tol: 1e-10,
            maxit: 20,
        }
    }
}

/// The affinities of all points and what it took to find them.
#[derive(Debug, Clone)]
pub struct Affinities {
    /// n x k row-major: p_{m|n} over the n-th row's neighbours (rows sum to 1).
    pub probabilities: Vec<f64>,
    /// log β_n.
    pub log_beta: Vec<f64>,
    /// Entropy evaluations per point (each is one O(k) pass).
    pub evaluations: Vec<u32>,
    /// Bisection steps per point (fallbacks of the derivative methods, or all of them).
    pub bisections: Vec<u32>,
    /// log β_L of Theorem 2.2.2 (before any widening).
    pub log_beta_lower: Vec<f64>,
    /// log β_U of Theorem 2.2.2 (before any widening).
    pub log_beta_upper: Vec<f64>,
    /// False where no precision reaches the perplexity (e.g. more than K tied nearest
    /// neighbours, or all distances equal); that row is then the best limit found.
    pub converged: Vec<bool>,
}

impl Affinities {
    /// The probabilities and the per-point results apart.
    pub fn into_parts(self) -> (Vec<f64>, AffinityInfo) {
        let info = AffinityInfo {
            log_beta: self.log_beta,
            evaluations: self.evaluations,
            bisections: self.bisections,
            log_beta_lower: self.log_beta_lower,
            log_beta_upper: self.log_beta_upper,
            converged: self.converged,
        };
        (self.probabilities, info)
    }
}

/// One affinity problem: n rows of k squared distances, the perplexity, the root finder, the
/// order the rows are solved in and how they are warm-started.
struct Problem<'a> {
    sqdist: &'a [f64],
    n: usize,
    k: usize,
    perplexity: f64,
    opts: &'a RootOptions,
    order: &'a [usize],
    warm: WarmStart<'a>,
}

/// Checks the arguments shared by the affinity entry points; returns each point's position
/// in `order`.
fn check_problem(problem: &Problem) -> Result<Vec<usize>> {
    let Problem {
        sqdist,
        n,
        k,
        perplexity,
        opts,
        order,
        warm,
    } = *problem;
    if sqdist.len() != n * k {
        return Err(EmbedError::ShapeMismatch(format!(
            "sqdist has {} values, expected n_points * n_neighbors = {}",
            sqdist.len(),
            n * k
        )));
    }
    if k < 2 {
        return Err(invalid(
            "n_neighbors",
            "need at least 2 neighbours per point",
        ));
    }
    if !(perplexity > 1.0 && perplexity < k as f64) {
        return Err(invalid(
            "perplexity",
            format!("must lie in (1, n_neighbors = {k}), got {perplexity}"),
        ));
    }
    if opts.tol.is_nan() || opts.tol <= 0.0 {
        return Err(invalid("tol", "must be positive"));
    }
    check_finite(sqdist, "sqdist")?;
    if sqdist.iter().any(|&v| v < 0.0) {
        return Err(invalid("sqdist", "squared distances must be >= 0"));
    }
    if order.len() != n {
        return Err(invalid(
            "order",
            format!("has {} entries for {n} points", order.len()),
        ));
    }
    let mut pos = vec![usize::MAX; n];
    for (i, &o) in order.iter().enumerate() {
        if o >= n || pos[o] != usize::MAX {
            return Err(invalid("order", "must be a permutation of 0..n"));
        }
        pos[o] = i;
    }
    if let WarmStart::Parents(p) = warm {
        if p.len() != n || p.iter().any(|&j| j < -1 || j >= n as i64) {
            return Err(invalid("parents", "needs one entry per point in -1..n"));
        }
    }
    Ok(pos)
}

/// Rows solved in the order's positions: probabilities (n x k, row t = point order[t])
/// and each row's solution.
struct Solved {
    probabilities: Vec<f64>,
    rows: Vec<RowSolution>,
}

/// Solves every row, in chunks of `chunk` consecutive points of the order that run in
/// parallel (so the result does not depend on the thread count).
fn solve_all(
    problem: &Problem,
    pos: &[usize],
    chunk_size: usize,
    cancel: &AtomicBool,
) -> Result<Solved> {
    let Problem {
        sqdist,
        n,
        k,
        perplexity,
        opts,
        order,
        warm,
    } = *problem;
    let chunk = chunk_size.max(1);
    let cal = Calibration::new(k, perplexity, opts);
    let mut probabilities = vec![0.0; n * k];
    let mut rows = vec![RowSolution::default(); n];
    probabilities
        .par_chunks_mut(chunk * k)
        .zip(rows.par_chunks_mut(chunk))
        .zip(order.par_chunks(chunk))
        .enumerate()
        .try_for_each(|(c, ((probs, sols), idx))| {
            let start = c * chunk;
            let mut scratch = vec![0.0; k];
            let mut log_scales: Vec<f64> = Vec::with_capacity(idx.len());
            for (j, &pt) in idx.iter().enumerate() {
                if cancel.load(Ordering::Relaxed) {
                    return Err(EmbedError::Cancelled);
                }
                let from = match warm {
                    WarmStart::Previous => j.checked_sub(1),
                    WarmStart::Bounds => None,
                    WarmStart::Parents(p) => usize::try_from(p[pt])
                        .ok()
                        .map(|q| pos[q])
                        .filter(|&q| q >= start && q < start + j)
                        .map(|q| q - start),
                };
                let row = &sqdist[pt * k..(pt + 1) * k];
                let (d1, d2nd, dn, sum) = extremes(row);
                // Warm start in scale-free terms: scaling a row's distances by c scales its
                // β by 1/c (thesis §2.1), so carry log β + log(mean shifted distance) over.
                let log_scale = ((sum - k as f64 * d1) / k as f64).ln();
                let a0 = from
                    .map(|q| {
                        let shifted = sols[q].log_beta + log_scales[q] - log_scale;
                        if shifted.is_finite() {
                            shifted
                        } else {
                            sols[q].log_beta
                        }
                    })
                    .filter(|a| a.is_finite());
                log_scales.push(log_scale);
                sols[j] = solve_row(
                    row,
                    (d1, d2nd, dn),
                    a0,
                    &cal,
                    &mut scratch,
                    &mut probs[j * k..(j + 1) * k],
                );
            }
            Ok(())
        })?;
    Ok(Solved {
        probabilities,
        rows,
    })
}

/// What [`entropic_affinities`] computes and how: the perplexity, the root finder, the
/// visiting order (a permutation of 0..n), the warm start and the chunk size (consecutive
/// points of the order solved sequentially; chunks run in parallel).
#[derive(Debug, Clone, Copy)]
pub struct AffinityParams<'a> {
    /// The perplexity K, in (1, k).
    pub perplexity: f64,
    /// The root finder and its tolerance.
    pub root: RootOptions,
    /// The order in which points are solved.
    pub order: &'a [usize],
    /// Where each point's root finder starts.
    pub warm: WarmStart<'a>,
    /// Points of the order per parallel chunk (the result does not depend on threads).
    pub chunk_size: usize,
}

impl<'a> AffinityParams<'a> {
    fn problem(&'a self, sqdist: &'a [f64], n: usize, k: usize) -> Problem<'a> {
        Problem {
            sqdist,
            n,
            k,
            perplexity: self.perplexity,
            opts: &self.root,
            order: self.order,
            warm: self.warm,
        }
    }
}

/// Entropic affinities of n points from their k-nearest-neighbour squared distances.
///
/// `sqdist` is n x k row-major (self excluded; any order within a row). `order` is a
/// permutation of 0..n: the points are solved in that order, warm-started as `warm`
/// says, in chunks of `chunk_size` consecutive points of the order that run in parallel.
///
/// # Errors
/// [`EmbedError::InvalidParameter`] for k < 2, perplexity outside (1, k), tol <= 0, a bad
/// order or parents; [`EmbedError::ShapeMismatch`]; [`EmbedError::NonFinite`] or a
/// negative distance; [`EmbedError::Cancelled`].
pub fn entropic_affinities(
    sqdist: &[f64],
    n_points: usize,
    n_neighbors: usize,
    params: &AffinityParams<'_>,
    cancel: &AtomicBool,
) -> Result<Affinities> {
    let (n, k) = (n_points, n_neighbors);
    let problem = params.problem(sqdist, n, k);
    let pos = check_problem(&problem)?;
    let solved = solve_all(&problem, &pos, params.chunk_size, cancel)?;
    let mut probabilities = vec![0.0; n * k];
    probabilities
        .par_chunks_mut(k)
        .zip(pos.par_iter())
        .with_min_len(256)
        .for_each(|(row, &t)| row.copy_from_slice(&solved.probabilities[t * k..(t + 1) * k]));
    let info = AffinityInfo::from_rows(&solved.rows, &pos);
    Ok(Affinities {
        probabilities,
        log_beta: info.log_beta,
        evaluations: info.evaluations,
        bisections: info.bisections,
        log_beta_lower: info.log_beta_lower,
        log_beta_upper: info.log_beta_upper,
        converged: info.converged,
    })
}

/// Per-point results of [`entropic_affinities_csr`] (the matrix itself is separate).
#[derive(Debug, Clone)]
pub struct AffinityInfo {
    /// log β_n.
    pub log_beta: Vec<f64>,
    /// Entropy evaluations per point.
    pub evaluations: Vec<u32>,
    /// Bisection steps per point.
    pub bisections: Vec<u32>,
    /// log β_L of Theorem 2.2.2.
    pub log_beta_lower: Vec<f64>,
    /// log β_U of Theorem 2.2.2.
    pub log_beta_upper: Vec<f64>,
    /// False where no precision reaches the perplexity.
    pub converged: Vec<bool>,
}

impl AffinityInfo {
    fn from_rows(rows: &[RowSolution], pos: &[usize]) -> AffinityInfo {
        let at = |f: fn(&RowSolution) -> f64| pos.iter().map(|&t| f(&rows[t])).collect();
        AffinityInfo {
            log_beta: at(|r| r.log_beta),
            evaluations: pos.iter().map(|&t| rows[t].evaluations).collect(),
            bisections: pos.iter().map(|&t| rows[t].bisections).collect(),
            log_beta_lower: at(|r| r.lower),
            log_beta_upper: at(|r| r.upper),
            converged: pos.iter().map(|&t| rows[t].converged).collect(),
        }
    }
}

/// [`entropic_affinities`] returning the conditional affinities as an n x n CSR matrix
/// ready for SciPy: `indices` (n x k, the neighbours of each row of `sqdist`) give the
/// columns; each row's columns come out increasing, repeated columns summed, so the
/// matrix is in canonical form. The root finding, the warm starts and the per-point
/// results are those of [`entropic_affinities`].
///
/// # Errors
/// As [`entropic_affinities`], and [`EmbedError::ShapeMismatch`] for `indices` of the wrong
/// length or out of 0..n.
pub fn entropic_affinities_csr<I: CsrIndex, V: CsrValue>(
    sqdist: &[f64],
    indices: &[I],
    n_points: usize,
    n_neighbors: usize,
    params: &AffinityParams<'_>,
    cancel: &AtomicBool,
) -> Result<(CsrMatrix<I, V>, AffinityInfo)> {
    let (n, k) = (n_points, n_neighbors);
    let problem = params.problem(sqdist, n, k);
    let pos = check_problem(&problem)?;
    if indices.len() != n * k {
        return Err(EmbedError::ShapeMismatch(format!(
            "indices has {} values, expected n_points * n_neighbors = {}",
            indices.len(),
            n * k
        )));
    }
    if n > u32::MAX as usize || k > u32::MAX as usize || n.saturating_mul(k) > I::MAX {
        return Err(invalid(
            "n_points",
            "at most 2^32 - 1 points and neighbours",
        ));
    }
    if indices.par_iter().any(|&j| !j.below(n)) {
        return Err(EmbedError::ShapeMismatch(
            "neighbour index out of 0..n_points".into(),
        ));
    }
    let solved = solve_all(&problem, &pos, params.chunk_size, cancel)?;
    let csr = csr::rows_to_csr(n, k, indices, &solved.probabilities, &pos);
    Ok((csr, AffinityInfo::from_rows(&solved.rows, &pos)))
}

/// A visiting order given as signed indices (NumPy's int64) as the `usize` indices that
/// [`entropic_affinities`] takes.
///
/// # Errors
/// [`EmbedError::InvalidParameter`] naming `order` when an index is negative.
///
/// # Example
/// ```
/// use vastml_embed::affinity::order_indices;
/// assert_eq!(order_indices(&[2, 0, 1]).unwrap(), vec![2, 0, 1]);
/// assert!(order_indices(&[0, -1]).is_err());
/// ```
pub fn order_indices(order: &[i64]) -> Result<Vec<usize>> {
    order
        .iter()
        .map(|&i| usize::try_from(i).map_err(|_| invalid("order", "holds a negative index")))
        .collect()
}

//! Embedding objectives E = E⁺ + λ E⁻ and their gradients (thesis ch. 3, §5.1).
//!
//! Attraction is given as a sparse symmetric weight matrix W⁺ in CSR form (ordered pairs:
//! both (n, m) and (m, n) stored); sums run over ordered pairs, hence the factor 4 in the
//! gradients. With t_nm = ||x_n − x_m||²:
//!
//! | model | E⁺ | E⁻ |
//! |---|---|---|
//! | EE | Σ w t | Σ_{n≠m} exp(−t) |
//! | SNE | Σ w t (w = (P + Pᵀ)/2 of the conditional P) | Σ_n log Σ_{m≠n} exp(−t) |
//! | s-SNE | Σ p t | log Σ_{n≠m} exp(−t) |
//! | t-SNE | Σ p log(1 + t) | log Σ_{n≠m} 1/(1 + t) |
//!
//! For s-SNE and t-SNE with Σ p = 1 and λ = 1, E = KL(P‖Q) − Σ p log p. The repulsive
//! sums come from [`crate::nbody`] (exact, Barnes-Hut or fast Gauss transform); with an
//! approximate method the returned objective is approximate too.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_core::{Control, Halt};

use crate::error::{EmbedError, Result, check_finite, invalid};
use crate::nbody::{Kernel, Repulsion, check_points, kernel_sums};

/// The embedding model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// Elastic embedding (Carreira-Perpiñán 2010), W⁻ = 1 off the diagonal.
    ElasticEmbedding,
    /// Stochastic neighbour embedding (Hinton & Roweis 2003), per-point normalisation.
    Sne,
    /// Symmetric SNE (Gaussian kernel, one normalisation over all pairs).
    SymmetricSne,
    /// t-SNE (Student-t kernel, one normalisation over all pairs).
    TSne,
}

impl Model {
    /// The kernel of the model's similarities in the embedding.
    pub fn kernel(self) -> Kernel {
        match self {
            Model::TSne => Kernel::StudentT,
            _ => Kernel::Gaussian,
        }
    }
}

impl FromStr for Model {
    type Err = EmbedError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "ee" => Model::ElasticEmbedding,
            "sne" => Model::Sne,
            "ssne" => Model::SymmetricSne,
            "tsne" => Model::TSne,
            _ => {
                return Err(invalid(
                    "model",
                    format!("unknown model {s:?}; use ee, sne, ssne or tsne"),
                ));
            }
        })
    }
}

/// A borrowed sparse n x n matrix in CSR form ([`vastml_core::Csr`], checked when built):
/// int64 / f64 arrays as SciPy and NumPy hold them by default, or the compact int32 / f32
/// layout of large problems. The embedding objectives take it as an attraction (square,
/// weights >= 0); [`crate::lll`] takes any signs.
pub use vastml_core::{Csr, CsrIndex, CsrValue};

/// Checks that `w` is an attraction of `n` points: n x n with weights >= 0 (its structure and
/// finiteness were checked when it was built).
fn check_attraction<I: CsrIndex, V: CsrValue>(w: &Csr<I, V>, n: usize) -> Result<()> {
    if w.n_rows() != n || w.n_cols() != n {
        return Err(EmbedError::ShapeMismatch(format!(
            "attraction matrix: {} x {} for {n} points",
            w.n_rows(),
            w.n_cols()
        )));
    }
    if w.data().par_iter().any(|v| v.get() < 0.0) {
        return Err(invalid("attraction", "weights must be >= 0"));
    }
    Ok(())
}

/// Objective value, its two parts and the gradient.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// E = E⁺ + λ E⁻.
    pub objective: f64,
    /// E⁺.
    pub attractive: f64,
    /// E⁻ (without λ).
    pub repulsive: f64,
    /// ∂E/∂X, n x d row-major.
    pub gradient: Vec<f64>,
}

/// E⁺ and its gradient (parallel over rows, O(nnz d)).
fn attraction<I: CsrIndex, V: CsrValue>(
    need_objective: bool,
    model: Model,
    x: &[f64],
    dim: usize,
    w: &Csr<I, V>,
    grad: &mut [f64],
    cancel: &AtomicBool,
) -> Result<f64> {
    let parts: Vec<f64> = grad
        .par_chunks_mut(dim * 256)
        .enumerate()
        .map(|(b, g)| {
            if cancel.load(Ordering::Relaxed) {
                return Err(EmbedError::Cancelled);
            }
            let mut e = 0.0;
            for (j, gn) in g.chunks_exact_mut(dim).enumerate() {
                let n = b * 256 + j;
                let xn = &x[n * dim..(n + 1) * dim];
                for idx in w.indptr()[n].ix()..w.indptr()[n + 1].ix() {
                    let m = w.indices()[idx].ix();
                    let wt = w.data()[idx].get();
                    let xm = &x[m * dim..(m + 1) * dim];
                    let t: f64 = xn.iter().zip(xm).map(|(a, b)| (a - b) * (a - b)).sum();
                    let coef = match model {
                        Model::TSne => {
                            if need_objective {
                                e += wt * t.ln_1p();
                            }
                            4.0 * wt / (1.0 + t)
                        }
                        _ => {
                            e += wt * t;
                            4.0 * wt
                        }
                    };
                    for ((gc, a), b) in gn.iter_mut().zip(xn).zip(xm) {
                        *gc += coef * (a - b);
                    }
                }
            }
            Ok(e)
        })
        .collect::<Result<Vec<f64>>>()?;
    Ok(parts.iter().sum())
}

/// E(X) and ∇E(X) for the model.
///
/// `x` is n x `dim` row-major, `attraction` the CSR W⁺ (or P), `lambda` the weight of the
/// repulsion (1 for the normalised models' KL form).
///
/// # Errors
/// Shape and finiteness errors, [`EmbedError::InvalidParameter`] for λ < 0 or the FGT
/// with t-SNE, errors of the N-body method, [`EmbedError::Cancelled`].
pub fn evaluate<I: CsrIndex, V: CsrValue>(
    model: Model,
    x: &[f64],
    dim: usize,
    attraction_w: &Csr<I, V>,
    lambda: f64,
    repulsion: Repulsion,
    cancel: &AtomicBool,
) -> Result<Evaluation> {
    let params = ObjectiveParams {
        model,
        lambda,
        repulsion,
        need_objective: true,
    };
    evaluate_with(x, dim, attraction_w, &params, cancel)
}

/// The model of [`evaluate_with`] and how its terms are weighted and computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectiveParams {
    /// EE, SNE, symmetric SNE or t-SNE.
    pub model: Model,
    /// λ, the weight of the repulsive term (>= 0).
    pub lambda: f64,
    /// How the repulsive kernel sums are computed.
    pub repulsion: Repulsion,
    /// False: the t-SNE attraction skips its logarithms and the objective (and E⁺) is NaN.
    pub need_objective: bool,
}

/// As [`evaluate`]; with `need_objective = false` the t-SNE attraction skips its
/// logarithms and the returned objective (and E⁺) is NaN — only the gradient is computed
/// (what momentum gradient descent needs at most iterations).
///
/// # Errors
/// As [`evaluate`].
pub fn evaluate_with<I: CsrIndex, V: CsrValue>(
    x: &[f64],
    dim: usize,
    attraction_w: &Csr<I, V>,
    params: &ObjectiveParams,
    cancel: &AtomicBool,
) -> Result<Evaluation> {
    let ObjectiveParams {
        model,
        lambda,
        repulsion,
        need_objective,
    } = *params;
    let n = check_points(x, dim)?;
    check_attraction(attraction_w, n)?;
    if !(lambda >= 0.0 && lambda.is_finite()) {
        return Err(invalid("lambda", "must be finite and >= 0"));
    }
    let mut grad = vec![0.0; n * dim];
    let mut attractive = attraction(
        need_objective,
        model,
        x,
        dim,
        attraction_w,
        &mut grad,
        cancel,
    )?;
    if !need_objective && model == Model::TSne {
        attractive = f64::NAN;
    }
    if n < 2 {
        return Ok(Evaluation {
            objective: attractive,
            attractive,
            repulsive: 0.0,
            gradient: grad,
        });
    }
    let sums = kernel_sums(x, dim, model.kernel(), None, repulsion, cancel)?;
    // G⁻_n = coef_n (x_n s1_n − sx_n) (+ the SNE second pass below).
    let repulsive;
    match model {
        Model::ElasticEmbedding => {
            repulsive = sums.s0.iter().sum::<f64>();
            add_repulsion(&mut grad, x, dim, &sums.s1, &sums.sx, |_| -4.0 * lambda);
        }
        Model::SymmetricSne | Model::TSne => {
            let z: f64 = sums.s0.iter().sum();
            repulsive = z.ln();
            add_repulsion(&mut grad, x, dim, &sums.s1, &sums.sx, |_| -4.0 * lambda / z);
        }
        Model::Sne => {
            repulsive = sums.s0.iter().map(|s| s.ln()).sum();
            if sums.s0.iter().any(|&s| s.is_nan() || s <= 0.0) {
                return Err(invalid(
                    "X",
                    "a point is so far from all others that its SNE normaliser underflows; rescale the embedding",
                ));
            }
            let s = &sums.s0;
            add_repulsion(&mut grad, x, dim, &sums.s1, &sums.sx, |i| {
                -2.0 * lambda / s[i]
            });
            let inv: Vec<f64> = s.iter().map(|v| 1.0 / v).collect();
            let second = kernel_sums(x, dim, Kernel::Gaussian, Some(&inv), repulsion, cancel)?;
            add_repulsion(&mut grad, x, dim, &second.s1, &second.sx, |_| -2.0 * lambda);
        }
    }
    Ok(Evaluation {
        objective: attractive + lambda * repulsive,
        attractive,
        repulsive,
        gradient: grad,
    })
}

fn add_repulsion(
    grad: &mut [f64],
    x: &[f64],
    dim: usize,
    s1: &[f64],
    sx: &[f64],
    coef: impl Fn(usize) -> f64 + Sync,
) {
    grad.par_chunks_mut(dim).enumerate().for_each(|(i, g)| {
        let c = coef(i);
        for k in 0..dim {
            g[k] += c * (x[i * dim + k] * s1[i] - sx[i * dim + k]);
        }
    });
}

/// Parameters of one phase of t-SNE's momentum gradient descent with gains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GdOptions {
    /// Step η.
    pub learning_rate: f64,
    /// Momentum μ of the update.
    pub momentum: f64,
    /// Factor on the attraction (early exaggeration; 1 = plain KL).
    pub exaggeration: f64,
    /// Lower bound of the per-coordinate gains.
    pub min_gain: f64,
}

/// The upper triangle (m > n) of a symmetric CSR weight matrix: each unordered pair once,
/// u32 columns, cut into a fixed number of row blocks of about equal entry counts.
struct UpperPairs<V> {
    indptr: Vec<usize>,
    cols: Vec<u32>,
    data: Vec<V>,
    /// Row boundaries of the blocks (fixed count: the sums do not depend on the threads).
    blocks: Vec<usize>,
}

/// Blocks of the attraction; each owns a private gradient buffer, summed in order.
const ATTRACTION_BLOCKS: usize = 4;

impl<V: CsrValue> UpperPairs<V> {
    fn new<I: CsrIndex>(w: &Csr<I, V>, n: usize) -> UpperPairs<V> {
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0);
        let mut cols = Vec::new();
        let mut data = Vec::new();
        for r in 0..n {
            for idx in w.indptr()[r].ix()..w.indptr()[r + 1].ix() {
                let m = w.indices()[idx].ix();
                if m > r {
                    cols.push(m as u32);
                    data.push(w.data()[idx]);
                }
            }
            indptr.push(cols.len());
        }
        UpperPairs::with_blocks(indptr, cols, data, n)
    }

    /// The upper triangle of P relabelled by `perm` (new label r' of input row perm[r'];
    /// `inv` its inverse): each unordered pair once, from its smaller new label.
    fn permuted<I: CsrIndex>(w: &Csr<I, V>, perm: &[u32], inv: &[u32]) -> UpperPairs<V> {
        let n = perm.len();
        // Parallel: count each new row's entries, then fill blocks of rows in parallel.
        let kept = |rp: usize| {
            let r = perm[rp] as usize;
            (w.indptr()[r].ix()..w.indptr()[r + 1].ix())
                .filter(move |&idx| inv[w.indices()[idx].ix()] as usize > rp)
        };
        let counts: Vec<usize> = (0..n)
            .into_par_iter()
            .with_min_len(4096)
            .map(|rp| kept(rp).count())
            .collect();
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0);
        for c in counts {
            indptr.push(indptr[indptr.len() - 1] + c);
        }
        let nnz = indptr[n];
        let mut cols = vec![0u32; nnz];
        let mut data = vec![V::of(0.0); nnz];
        const ROWS: usize = 4096;
        let mut parts = Vec::with_capacity(n / ROWS + 1);
        let (mut rc, mut rd) = (&mut cols[..], &mut data[..]);
        for lo in (0..n).step_by(ROWS) {
            let hi = (lo + ROWS).min(n);
            let len = indptr[hi] - indptr[lo];
            let (a, b) = rc.split_at_mut(len);
            let (c, d) = rd.split_at_mut(len);
            parts.push((lo, hi, a, c));
            (rc, rd) = (b, d);
        }
        parts.into_par_iter().for_each(|(lo, hi, pc, pd)| {
            let mut k = 0;
            for rp in lo..hi {
                for idx in kept(rp) {
                    pc[k] = inv[w.indices()[idx].ix()];
                    pd[k] = w.data()[idx];
                    k += 1;
                }
            }
        });
        UpperPairs::with_blocks(indptr, cols, data, n)
    }

    fn with_blocks(indptr: Vec<usize>, cols: Vec<u32>, data: Vec<V>, n: usize) -> UpperPairs<V> {
        let nnz = cols.len();
        let mut blocks = vec![0];
        for b in 1..ATTRACTION_BLOCKS {
            let target = nnz * b / ATTRACTION_BLOCKS;
            let r = indptr.partition_point(|&p| p < target).min(n);
            blocks.push(r.max(*blocks.last().unwrap_or(&0)));
        }
        blocks.push(n);
        UpperPairs {
            indptr,
            cols,
            data,
            blocks,
        }
    }
}

/// The t-SNE attraction gradient 4 s Σ_m p_nm (x_n − x_m) / (1 + t_nm) (added to `grad`)
/// and, with `need_objective`, s Σ_nm p log(1 + t) over ordered pairs, from each unordered
/// pair once (P symmetric), specialised for d = 2.
fn tsne_attraction<V: CsrValue>(
    need_objective: bool,
    x: &[f64],
    dim: usize,
    pairs: &UpperPairs<V>,
    scale: f64,
    bufs: &mut [Vec<f64>],
    grad: &mut [f64],
) -> f64 {
    let e: f64 = bufs
        .par_iter_mut()
        .enumerate()
        .map(|(b, buf)| {
            buf.fill(0.0);
            let mut e = 0.0;
            for n in pairs.blocks[b]..pairs.blocks[b + 1] {
                let (lo, hi) = (pairs.indptr[n], pairs.indptr[n + 1]);
                let (cs, ws) = (&pairs.cols[lo..hi], &pairs.data[lo..hi]);
                if dim == 2 {
                    let (x0, x1) = (x[2 * n], x[2 * n + 1]);
                    let (mut g0, mut g1, mut en) = (0.0, 0.0, 0.0);
                    for (&m, &w) in cs.iter().zip(ws) {
                        let (m, w) = (m as usize, w.get());
                        let d0 = x0 - x[2 * m];
                        let d1 = x1 - x[2 * m + 1];
                        let t = d0 * d0 + d1 * d1;
                        if need_objective {
                            en += w * (1.0 + t).ln();
                        }
                        let c = w / (1.0 + t);
                        g0 += c * d0;
                        g1 += c * d1;
                        buf[2 * m] -= c * d0;
                        buf[2 * m + 1] -= c * d1;
                    }
                    buf[2 * n] += g0;
                    buf[2 * n + 1] += g1;
                    e += en;
                } else {
                    for (&m, &w) in cs.iter().zip(ws) {
                        let (m, w) = (m as usize, w.get());
                        let mut t = 0.0;
                        for k in 0..dim {
                            let d = x[n * dim + k] - x[m * dim + k];
                            t += d * d;
                        }
                        if need_objective {
                            e += w * (1.0 + t).ln();
                        }
                        let c = w / (1.0 + t);
                        for k in 0..dim {
                            let d = c * (x[n * dim + k] - x[m * dim + k]);
                            buf[n * dim + k] += d;
                            buf[m * dim + k] -= d;
                        }
                    }
                }
            }
            e
        })
        .collect::<Vec<f64>>()
        .iter()
        .sum();
    let f = 4.0 * scale;
    let bufs: &[Vec<f64>] = bufs;
    grad.par_chunks_mut(4096).enumerate().for_each(|(c, g)| {
        let off = c * 4096;
        for (i, gi) in g.iter_mut().enumerate() {
            let mut acc = 0.0;
            for buf in bufs {
                acc += buf[off + i];
            }
            *gi = f * acc;
        }
    });
    2.0 * scale * e
}

/// From this many points on, [`tsne_gradient_descent`] computes a Barnes-Hut repulsion by
/// the dual tree of [`crate::dualtree`] (cell-cell interactions with a first-order target
/// expansion: more accurate per θ than the per-point walk, so it runs at
/// [`crate::dualtree::THETA_SCALE`] θ, and several times cheaper at large N); below it, the
/// per-point walk of [`kernel_sums`] (small results unchanged).
pub const DUAL_TREE_MIN: usize = 50_000;

/// P's unordered pairs prepared for [`tsne_gradient_descent_prepared`], so that several
/// calls (chunks of iterations between which Python checks the objective and runs
/// callbacks) share one preparation: from [`DUAL_TREE_MIN`] points on (d <= 3) the points
/// are relabelled in the Morton order of the embedding at preparation time, so that the
/// attraction (random access into x for every entry of P) and the tree read nearby memory
/// (P's neighbours are near in the embedding). Relabelling P costs about as much as 5-10
/// iterations at 1M points; the order stays good for hundreds of iterations, so callers
/// prepare anew only now and then (the Python driver: each phase, every 250 iterations).
pub struct TsnePairs<V> {
    n: usize,
    /// New label -> input index (None: input order).
    perm: Option<Vec<u32>>,
    pairs: UpperPairs<V>,
}

impl<V: CsrValue> TsnePairs<V> {
    /// Prepares the pairs of the symmetric `w` for the points `x` (n x `dim`).
    ///
    /// # Errors
    /// Shape and finiteness errors of `x` and `w`.
    pub fn new<I: CsrIndex>(w: &Csr<I, V>, x: &[f64], dim: usize) -> Result<TsnePairs<V>> {
        let n = check_points(x, dim)?;
        check_attraction(w, n)?;
        if n >= DUAL_TREE_MIN && dim <= 3 {
            let perm = crate::dualtree::morton_order(x, dim);
            let mut inv = vec![0u32; n];
            for (rp, &r) in perm.iter().enumerate() {
                inv[r as usize] = rp as u32;
            }
            let pairs = UpperPairs::permuted(w, &perm, &inv);
            return Ok(TsnePairs {
                n,
                perm: Some(perm),
                pairs,
            });
        }
        Ok(TsnePairs {
            n,
            perm: None,
            pairs: UpperPairs::new(w, n),
        })
    }

    /// Number of points.
    pub fn n_points(&self) -> usize {
        self.n
    }

    /// True when the points are relabelled (Morton order of the embedding at preparation).
    pub fn relabelled(&self) -> bool {
        self.perm.is_some()
    }
}

/// The arrays t-SNE's gradient descent updates in place: the embedding `x`, the momentum
/// `update` and the per-coordinate `gains`, each n x `dim` row-major.
#[derive(Debug)]
pub struct GdState<'a> {
    /// The embedding.
    pub x: &'a mut [f64],
    /// Columns of `x`.
    pub dim: usize,
    /// The momentum term (zeros at the start).
    pub update: &'a mut [f64],
    /// The per-coordinate gains (ones at the start).
    pub gains: &'a mut [f64],
}

/// One call's share of a run: how many iterations, how they are numbered for the progress
/// hook, and when the objective is computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GdRun {
    /// Iterations to run.
    pub n_iter: usize,
    /// Iterations run before this call: the hook sees `iterations_before + 1, ...`.
    pub iterations_before: usize,
    /// Compute the objective (E⁺ scaled by the exaggeration + log Z) at the last iterate.
    pub objective_at_last: bool,
    /// The objective the hook sees until this call computes one (NaN: none yet).
    pub objective_before: f64,
}

impl GdRun {
    /// `n_iter` iterations numbered from 1, the objective at the last.
    pub fn new(n_iter: usize) -> Self {
        Self {
            n_iter,
            iterations_before: 0,
            objective_at_last: true,
            objective_before: f64::NAN,
        }
    }
}

/// What a call of [`tsne_gradient_descent`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GdOutcome {
    /// The objective at the last iterate when computed (else [`GdRun::objective_before`]).
    pub objective: f64,
    /// Iterations run (fewer than asked when the hook stopped the run).
    pub n_done: usize,
    /// Whether the progress hook asked to stop.
    pub stopped: bool,
}

/// Runs `run.n_iter` iterations of t-SNE's gradient descent (van der Maaten's momentum and
/// per-coordinate gains, as scikit-learn and openTSNE use it) in one call: per iteration
/// the gradient G (attraction scaled by `opts.exaggeration`, repulsion by `repulsion`),
/// then `gains += 0.2` where `update · G < 0` else `gains *= 0.8`, clipped at
/// `min_gain`; `update = μ update − η gains G`; `x += update`; `x −= mean(x)`.
///
/// After every iteration `control` is polled and reported to (iteration
/// `run.iterations_before + i`, the latest objective, the embedding): a hook that returns
/// true ends the run there ([`GdOutcome::stopped`]), with the state of that iteration. The
/// objective is computed at the last iterate before its update when
/// `run.objective_at_last`. The same iteration as calling [`evaluate_with`] with the scaled
/// attraction and updating in the caller, up to rounding: the attraction (P must be
/// symmetric, as the gradient 4 L X assumes) visits each unordered pair once, from its
/// upper-triangle entry. Prepares P's pairs ([`TsnePairs`]) for this call only; see
/// [`tsne_gradient_descent_prepared`] to share them.
///
/// # Errors
/// Shape and finiteness errors, errors of the repulsion method, [`EmbedError::Cancelled`].
///
/// # Example
/// ```
/// use vastml_core::Control;
/// use vastml_embed::objective::{Csr, GdOptions, GdRun, GdState, tsne_gradient_descent};
/// use vastml_embed::Repulsion;
///
/// // Two pairs of points attracted to each other.
/// let w = Csr::new("P", &[0i64, 1, 2, 3, 4], &[1i64, 0, 3, 2], &[0.25; 4], 4)?;
/// let mut x = vec![0.0, 0.0, 1.0, 0.0, 5.0, 5.0, 6.0, 5.0];
/// let (mut update, mut gains) = (vec![0.0; 8], vec![1.0; 8]);
/// let opts = GdOptions { learning_rate: 1.0, momentum: 0.5, exaggeration: 1.0, min_gain: 0.01 };
/// let seen = std::sync::Mutex::new(Vec::new());
/// let hook = |it: usize, _e: f64, _x: &[f64]| { seen.lock().unwrap().push(it); it == 3 };
/// let state = GdState { x: &mut x, dim: 2, update: &mut update, gains: &mut gains };
/// let out = tsne_gradient_descent(state, &w, Repulsion::Exact, opts, GdRun::new(10),
///                                 Control::none().with_hook(&hook, 1))?;
/// assert!(out.stopped && out.n_done == 3);
/// assert_eq!(*seen.lock().unwrap(), vec![1, 2, 3]);
/// # Ok::<(), vastml_embed::EmbedError>(())
/// ```
pub fn tsne_gradient_descent<I: CsrIndex, V: CsrValue>(
    state: GdState<'_>,
    attraction_w: &Csr<I, V>,
    repulsion: Repulsion,
    opts: GdOptions,
    run: GdRun,
    control: Control<'_, [f64]>,
) -> Result<GdOutcome> {
    let pairs = TsnePairs::new(attraction_w, state.x, state.dim)?;
    tsne_gradient_descent_prepared(state, &pairs, repulsion, opts, run, control)
}

/// [`tsne_gradient_descent`] with P's pairs prepared by [`TsnePairs::new`] (for any earlier
/// embedding of the same points: the labelling only affects memory locality).
///
/// # Errors
/// As [`tsne_gradient_descent`]; pairs prepared for another number of points.
pub fn tsne_gradient_descent_prepared<V: CsrValue>(
    state: GdState<'_>,
    pairs: &TsnePairs<V>,
    repulsion: Repulsion,
    opts: GdOptions,
    run: GdRun,
    control: Control<'_, [f64]>,
) -> Result<GdOutcome> {
    check_gd(&state, pairs.n, opts)?;
    let Some(perm) = pairs.perm.as_ref().filter(|_| run.n_iter > 0) else {
        return gd_iterations(state, &pairs.pairs, repulsion, opts, run, control, None);
    };
    // Relabelled: gather in the prepared order, iterate, scatter back.
    let dim = state.dim;
    let (mut xp, mut up, mut gp) = (
        gather(state.x, perm, dim),
        gather(state.update, perm, dim),
        gather(state.gains, perm, dim),
    );
    let inner = GdState {
        x: &mut xp,
        dim,
        update: &mut up,
        gains: &mut gp,
    };
    let out = gd_iterations(
        inner,
        &pairs.pairs,
        repulsion,
        opts,
        run,
        control,
        Some(perm),
    );
    scatter_into(state.x, &xp, perm, dim);
    scatter_into(state.update, &up, perm, dim);
    scatter_into(state.gains, &gp, perm, dim);
    out
}

/// Shapes and parameters of a gradient-descent call.
fn check_gd(state: &GdState<'_>, n_pairs: usize, opts: GdOptions) -> Result<()> {
    let n = check_points(state.x, state.dim)?;
    if n_pairs != n {
        return Err(EmbedError::ShapeMismatch(format!(
            "pairs prepared for {n_pairs} points, x has {n}"
        )));
    }
    if state.update.len() != state.x.len() || state.gains.len() != state.x.len() {
        return Err(EmbedError::ShapeMismatch(
            "update and gains must have the shape of x".into(),
        ));
    }
    for (v, name) in [
        (opts.learning_rate, "learning_rate"),
        (opts.exaggeration, "exaggeration"),
    ] {
        if !(v > 0.0 && v.is_finite()) {
            return Err(invalid(name, "must be finite and > 0"));
        }
    }
    if !(opts.momentum >= 0.0 && opts.momentum.is_finite() && opts.min_gain >= 0.0) {
        return Err(invalid("momentum", "momentum and min_gain must be >= 0"));
    }
    Ok(())
}

/// Rows of `a` (n x `dim`) in the order `perm` (new label -> input index).
fn gather(a: &[f64], perm: &[u32], dim: usize) -> Vec<f64> {
    perm.par_iter()
        .flat_map_iter(|&r| a[r as usize * dim..(r as usize + 1) * dim].iter().copied())
        .collect()
}

/// The inverse of [`gather`]: row `rp` of `src` goes to row `perm[rp]` of `dst`.
fn scatter_into(dst: &mut [f64], src: &[f64], perm: &[u32], dim: usize) {
    for (rp, &r) in perm.iter().enumerate() {
        let a = r as usize * dim;
        dst[a..a + dim].copy_from_slice(&src[rp * dim..(rp + 1) * dim]);
    }
}

/// The iterations of [`tsne_gradient_descent`] over the prepared pairs of P; `perm` (when
/// the points are relabelled) puts the embedding back in input order for the hook.
fn gd_iterations<V: CsrValue>(
    state: GdState<'_>,
    pairs: &UpperPairs<V>,
    repulsion: Repulsion,
    opts: GdOptions,
    run: GdRun,
    control: Control<'_, [f64]>,
    perm: Option<&[u32]>,
) -> Result<GdOutcome> {
    let GdState {
        x,
        dim,
        update,
        gains,
    } = state;
    let n = x.len() / dim;
    let mut bufs = vec![vec![0.0; n * dim]; ATTRACTION_BLOCKS];
    let mut grad = vec![0.0; n * dim];
    let mut e = run.objective_before;
    for it in 0..run.n_iter {
        control.check().map_err(|_| EmbedError::Cancelled)?;
        let need = run.objective_at_last && it + 1 == run.n_iter;
        let ea = tsne_attraction(need, x, dim, pairs, opts.exaggeration, &mut bufs, &mut grad);
        let log_z = tsne_repulsion_into(&mut grad, x, dim, repulsion, control)?;
        if need {
            e = ea + log_z;
        }
        gd_step(x, dim, update, gains, &grad, opts);
        check_finite(x, "embedding (diverged)")?;
        let iteration = run.iterations_before + it + 1;
        let unpermuted;
        let shown: &[f64] = match perm {
            Some(p) if control.wants(iteration) => {
                unpermuted = unpermute(x, p, dim);
                &unpermuted
            }
            _ => x,
        };
        match control.report(iteration, || e, shown) {
            Ok(()) => {}
            Err(Halt::Stopped) => {
                return Ok(GdOutcome {
                    objective: e,
                    n_done: it + 1,
                    stopped: true,
                });
            }
            Err(Halt::Cancelled) => return Err(EmbedError::Cancelled),
        }
    }
    Ok(GdOutcome {
        objective: e,
        n_done: run.n_iter,
        stopped: false,
    })
}

/// `x` (rows in the prepared order) back in input order.
fn unpermute(x: &[f64], perm: &[u32], dim: usize) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    scatter_into(&mut out, x, perm, dim);
    out
}

/// Adds t-SNE's repulsive gradient at `x` to `grad`; returns log Z.
fn tsne_repulsion_into(
    grad: &mut [f64],
    x: &[f64],
    dim: usize,
    repulsion: Repulsion,
    control: Control<'_, [f64]>,
) -> Result<f64> {
    let n = x.len() / dim;
    let cancel = control.cancel_flag();
    match repulsion {
        Repulsion::BarnesHut { theta } if n >= DUAL_TREE_MIN && dim <= 3 => {
            // Large N: the cell-cell (dual-tree) Barnes-Hut, see [`crate::dualtree`], at
            // the θ of equal accuracy.
            let theta = crate::dualtree::THETA_SCALE * theta;
            let r = crate::dualtree::tsne_repulsion(x, dim, theta, cancel)?;
            let c = -4.0 / r.z;
            grad.par_iter_mut()
                .zip(r.force.par_iter())
                .with_min_len(4096)
                .for_each(|(g, f)| *g += c * f);
            Ok(r.z.ln())
        }
        _ if n >= 2 => {
            let sums = kernel_sums(x, dim, Kernel::StudentT, None, repulsion, cancel)?;
            let z: f64 = sums.s0.iter().sum();
            add_repulsion(grad, x, dim, &sums.s1, &sums.sx, |_| -4.0 / z);
            Ok(z.ln())
        }
        _ => Ok(0.0),
    }
}

/// The momentum-and-gains update of `x` by the gradient, then `x -= mean(x)`.
fn gd_step(
    x: &mut [f64],
    dim: usize,
    update: &mut [f64],
    gains: &mut [f64],
    grad: &[f64],
    opts: GdOptions,
) {
    let GdOptions {
        learning_rate: lr,
        momentum: mu,
        min_gain,
        ..
    } = opts;
    x.par_iter_mut()
        .zip(update.par_iter_mut())
        .zip(gains.par_iter_mut())
        .zip(grad.par_iter())
        .with_min_len(4096)
        .for_each(|(((xi, u), gn), &g)| {
            *gn = if *u * g < 0.0 { *gn + 0.2 } else { *gn * 0.8 };
            if *gn < min_gain {
                *gn = min_gain;
            }
            *u = mu * *u - lr * *gn * g;
            *xi += *u;
        });
    let n = x.len() / dim;
    let mut mean = vec![0.0; dim];
    for p in x.chunks_exact(dim) {
        for (a, v) in mean.iter_mut().zip(p) {
            *a += v;
        }
    }
    for a in mean.iter_mut() {
        *a /= n as f64;
    }
    x.par_chunks_mut(dim)
        .with_min_len(2048)
        .for_each(|p| p.iter_mut().zip(&mean).for_each(|(v, a)| *v -= a));
}

#[cfg(test)]
mod gd_tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicBool;

    fn problem(n: usize) -> (Vec<i64>, Vec<i64>, Vec<f64>, Vec<f64>) {
        // a ring: each point attracted to its two neighbours
        let mut indptr = vec![0i64];
        let (mut indices, mut data) = (Vec::new(), Vec::new());
        for i in 0..n {
            for j in [(i + n - 1) % n, (i + 1) % n] {
                indices.push(j as i64);
                data.push(0.5 / n as f64);
            }
            indptr.push(indices.len() as i64);
        }
        let x = (0..2 * n)
            .map(|i| ((i * 7919) % 97) as f64 / 97.0)
            .collect();
        (indptr, indices, data, x)
    }

    fn run(
        x: &mut [f64],
        hook: Option<&dyn vastml_core::Hook<[f64]>>,
        cancel: &AtomicBool,
        n_iter: usize,
    ) -> Result<GdOutcome> {
        let (indptr, indices, data, _) = problem(x.len() / 2);
        let w = Csr::new("P", &indptr, &indices, &data, indptr.len() - 1).unwrap();
        let (mut u, mut g) = (vec![0.0; x.len()], vec![1.0; x.len()]);
        let opts = GdOptions {
            learning_rate: 5.0,
            momentum: 0.5,
            exaggeration: 1.0,
            min_gain: 0.01,
        };
        let mut control = Control::new(cancel);
        if let Some(h) = hook {
            control = control.with_hook(h, 1);
        }
        let state = GdState {
            x,
            dim: 2,
            update: &mut u,
            gains: &mut g,
        };
        tsne_gradient_descent(
            state,
            &w,
            Repulsion::Exact,
            opts,
            GdRun::new(n_iter),
            control,
        )
    }

    #[test]
    fn the_hook_sees_every_iteration_and_the_iterate_it_stops_at() {
        let (_, _, _, x0) = problem(40);
        let mut full = x0.clone();
        let never = AtomicBool::new(false);
        let seen = Mutex::new(Vec::new());
        let hook = |it: usize, _e: f64, x: &[f64]| {
            seen.lock().unwrap().push((it, x.to_vec()));
            false
        };
        let out = run(&mut full, Some(&hook), &never, 12).unwrap();
        assert!(!out.stopped && out.n_done == 12 && out.objective.is_finite());
        let seen = seen.into_inner().unwrap();
        assert_eq!(
            seen.iter().map(|s| s.0).collect::<Vec<_>>(),
            (1..=12).collect::<Vec<_>>()
        );
        assert_eq!(seen[11].1, full);
        // stopping at 5 leaves exactly the fifth iterate, and the same as 5 iterations run
        let stop = |it: usize, _e: f64, _x: &[f64]| it == 5;
        let mut stopped = x0.clone();
        let out = run(&mut stopped, Some(&stop), &never, 12).unwrap();
        assert!(out.stopped && out.n_done == 5);
        assert_eq!(stopped, seen[4].1);
        let mut five = x0.clone();
        run(&mut five, None, &never, 5).unwrap();
        assert_eq!(stopped, five);
    }

    #[test]
    fn a_raised_cancel_flag_stops_before_any_iteration() {
        let (_, _, _, x0) = problem(10);
        let mut x = x0.clone();
        let raised = AtomicBool::new(true);
        assert!(matches!(
            run(&mut x, None, &raised, 3),
            Err(EmbedError::Cancelled)
        ));
        assert_eq!(x, x0);
    }
}

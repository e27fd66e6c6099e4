//! Interpolation-based kernel sums (FIt-SNE; Linderman, Rachh, Hoskins, Steinerberger &
//! Kluger 2019) for 1-D and 2-D embeddings.
//!
//! The bounding square of the points is cut into `B` boxes per dimension (`B = max(50,
//! ceil(range))`, so a box is about one unit wide, the scale of the kernels); each box holds
//! `p` equispaced interpolation nodes, so the nodes of all boxes form one equispaced grid of
//! `M = B p` nodes per dimension. A point's charge is spread to the `p^d` nodes of its box
//! with Lagrange-polynomial weights, the kernel sums between grid nodes are a discrete
//! convolution (a Toeplitz / block-Toeplitz product) done by FFT on a zero-padded `2M`
//! grid, and the node potentials are interpolated back to the points with the same
//! weights. Cost O(N p^d + (2M)^d log M) per evaluation; the error falls quickly with `p`
//! (the kernels are smooth at the box scale). Self terms (K(0) = 1) are subtracted exactly.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};
use rustfft::num_complex::Complex64;
use rustfft::{Fft, FftPlanner};

use crate::error::{EmbedError, Result, invalid};
use crate::kernel::{Kernel, KernelSums, check_points};

/// Parameters of the interpolation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InterpOptions {
    /// Interpolation nodes per box and dimension (p >= 1; 3 is FIt-SNE's default).
    pub n_interp: usize,
    /// Fewest boxes per dimension.
    pub min_boxes: usize,
    /// Largest number of boxes per dimension (bounds the FFT size; boxes widen beyond).
    pub max_boxes: usize,
    /// Target box width in embedding units (1 in FIt-SNE: boxes about the kernel's
    /// scale); the box count is max(`min_boxes`, ceil(range / `box_width`)).
    pub box_width: f64,
}

impl Default for InterpOptions {
    fn default() -> Self {
        InterpOptions {
            n_interp: 3,
            min_boxes: 50,
            max_boxes: 400,
            box_width: 1.0,
        }
    }
}

/// Smallest even integer >= n whose only prime factors are 2, 3, 5 and 7 (fast FFT sizes
/// with an even real-FFT length; 7 fills gaps such as 659 -> 672 instead of 675/720).
fn smooth_size(n: usize) -> usize {
    let mut m = n.max(2);
    loop {
        let mut r = m;
        for f in [2, 3, 5, 7] {
            while r % f == 0 {
                r /= f;
            }
        }
        if r == 1 && m % 2 == 0 {
            return m;
        }
        m += 1;
    }
}

/// Lagrange weights of the `p` nodes at (k + 1/2) / p, k = 0..p, evaluated at u in [0, 1].
#[inline]
fn lagrange(u: f64, nodes: &[f64], denom: &[f64], out: &mut [f64]) {
    let p = nodes.len();
    for k in 0..p {
        let mut num = 1.0;
        for (l, node) in nodes.iter().enumerate() {
            if l != k {
                num *= u - node;
            }
        }
        out[k] = num / denom[k];
    }
}

type Plans = (Arc<dyn Fft<f64>>, Arc<dyn Fft<f64>>);

/// FFT plans by length (planning is not free and the sizes repeat across iterations).
static PLANS: Mutex<Option<HashMap<usize, Plans>>> = Mutex::new(None);

/// The last kernel spectrum: (dim, L, spacing bits, Student-t?) and the spectrum. With the
/// box width fixed (range >= min_boxes box widths) the spacing repeats across iterations.
type SpectrumKey = (usize, usize, u64, bool);
static SPECTRUM: Mutex<Option<(SpectrumKey, Arc<Vec<Complex64>>)>> = Mutex::new(None);

/// A zero-padded FFT convolution on a `L^d` grid (L = 2M) with a symmetric kernel.
struct Convolver {
    dim: usize,
    l: usize,
    fwd: Arc<dyn Fft<f64>>,
    inv: Arc<dyn Fft<f64>>,
}

impl Convolver {
    fn new(dim: usize, l: usize) -> Convolver {
        let (fwd, inv) = {
            let mut guard = PLANS.lock().unwrap_or_else(|e| e.into_inner());
            let map = guard.get_or_insert_with(HashMap::new);
            map.entry(l)
                .or_insert_with(|| {
                    let mut planner = FftPlanner::new();
                    (planner.plan_fft_forward(l), planner.plan_fft_inverse(l))
                })
                .clone()
        };
        Convolver { dim, l, fwd, inv }
    }

    /// FFTs of the first `n_rows` rows (of length L) of `buf`.
    fn rows(&self, buf: &mut [Complex64], inverse: bool, n_rows: usize) {
        let f = if inverse { &self.inv } else { &self.fwd };
        let scratch_len = f.get_inplace_scratch_len();
        let n = (n_rows * self.l).min(buf.len());
        buf[..n]
            .par_chunks_mut(self.l * 16.min(self.l))
            .for_each_init(
                || vec![Complex64::new(0.0, 0.0); scratch_len],
                |scratch, chunk| f.process_with_scratch(chunk, scratch),
            );
    }

    fn transpose(&self, buf: &mut [Complex64], tmp: &mut [Complex64]) {
        let l = self.l;
        const T: usize = 32;
        tmp.par_chunks_mut(l * T).enumerate().for_each(|(bi, out)| {
            let r0 = bi * T;
            let rows = out.len() / l;
            for c0 in (0..l).step_by(T) {
                for r in 0..rows {
                    for c in c0..(c0 + T).min(l) {
                        // tmp[r0 + r][c] = buf[c][r0 + r]
                        out[r * l + c] = buf[c * l + r0 + r];
                    }
                }
            }
        });
        buf.copy_from_slice(tmp);
    }

    /// The d-dimensional FFT (or inverse, unnormalised). In 2-D the result is transposed
    /// (forward) / expects a transposed input (inverse); with a symmetric kernel the
    /// pointwise product is unaffected. `live` rows: forward, only the first `live` input
    /// rows may be nonzero (the rest are skipped: their transforms are zero); inverse,
    /// only the first `live` output rows are computed.
    fn transform(&self, buf: &mut [Complex64], tmp: &mut [Complex64], inverse: bool, live: usize) {
        if self.dim == 1 {
            self.rows(buf, inverse, 1);
        } else if inverse {
            self.rows(buf, true, self.l);
            self.transpose(buf, tmp);
            self.rows(buf, true, live);
        } else {
            self.rows(buf, false, live);
            self.transpose(buf, tmp);
            self.rows(buf, false, self.l);
        }
    }
}

/// The sums of [`crate::nbody`] (s0 = Σ v K, s1 = Σ v K^q, sx = Σ v K^q x_m, self
/// excluded) by polynomial interpolation on a grid and FFT convolution, for `dim` 1 or 2.
///
/// # Errors
/// [`EmbedError::InvalidParameter`] for dim > 2 or `n_interp` = 0; shape, finiteness and
/// weight errors; [`EmbedError::Cancelled`].
pub fn interpolation_sums(
    x: &[f64],
    dim: usize,
    kernel: Kernel,
    weights: Option<&[f64]>,
    opts: InterpOptions,
    cancel: &AtomicBool,
) -> Result<KernelSums> {
    interpolation_sums_with(x, dim, kernel, weights, opts, true, cancel)
}

/// [`interpolation_sums`] with the convolution by real-to-complex FFTs (`real_fft`, the
/// production path) or by packed complex FFTs (the reference the tests compare it with).
fn interpolation_sums_with(
    x: &[f64],
    dim: usize,
    kernel: Kernel,
    weights: Option<&[f64]>,
    opts: InterpOptions,
    real_fft: bool,
    cancel: &AtomicBool,
) -> Result<KernelSums> {
    let n = check_points(x, dim)?;
    if dim > 2 {
        return Err(invalid(
            "gradient",
            format!(
                "the FFT-interpolation repulsion handles 1 or 2 output dimensions, got {dim}; use barnes_hut"
            ),
        ));
    }
    if opts.n_interp == 0 || opts.min_boxes == 0 || opts.max_boxes < opts.min_boxes {
        return Err(invalid(
            "n_interp",
            "needs n_interp >= 1 and 1 <= min_boxes <= max_boxes",
        ));
    }
    if !(opts.box_width > 0.0 && opts.box_width.is_finite()) {
        return Err(invalid("box_width", "must be finite and > 0"));
    }
    if let Some(v) = weights {
        if v.len() != n {
            return Err(EmbedError::ShapeMismatch(format!(
                "{} weights for {n} points",
                v.len()
            )));
        }
        crate::error::check_finite(v, "weights")?;
        if v.iter().any(|&w| w <= 0.0) {
            return Err(invalid("weights", "must be positive"));
        }
    }
    if n == 0 {
        return Ok(KernelSums {
            s0: vec![],
            s1: vec![],
            sx: vec![],
        });
    }
    let p = opts.n_interp;
    let lo = x.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let range = (hi - lo).max(1e-300);
    // Boxes of exactly `box_width` when the range holds at least `min_boxes` of them (the
    // grid spacing, hence the kernel spectrum, then repeats across iterations), else
    // `min_boxes` boxes over the range; at most `max_boxes` (boxes widen beyond).
    let wanted = (range / opts.box_width).ceil() as usize + 1;
    // The box count itself need not be FFT-friendly: only the padded length L is rounded
    // (to an even 7-smooth size), so the grid is FIt-SNE's / openTSNE's.
    let (n_boxes, h) = if wanted >= opts.min_boxes && wanted <= opts.max_boxes {
        (wanted, opts.box_width)
    } else {
        let nb = wanted.clamp(opts.min_boxes, opts.max_boxes);
        // A hair of margin so the largest coordinate falls inside the last box.
        (nb, range * (1.0 + 1e-12) / nb as f64)
    };
    let m = n_boxes * p; // nodes per dimension
    let spacing = h / p as f64;
    let nodes: Vec<f64> = (0..p).map(|k| (k as f64 + 0.5) / p as f64).collect();
    let denom: Vec<f64> = (0..p)
        .map(|k| {
            (0..p)
                .filter(|&l| l != k)
                .map(|l| nodes[k] - nodes[l])
                .product()
        })
        .collect();

    // Per point: base grid index per dimension and the p weights per dimension.
    let mut base = vec![0u32; n * dim];
    let mut lw = vec![0.0; n * dim * p];
    base.par_chunks_mut(dim)
        .zip(lw.par_chunks_mut(dim * p))
        .enumerate()
        .for_each(|(i, (b, w))| {
            for c in 0..dim {
                let s = (x[i * dim + c] - lo) / h;
                let bx = (s.floor() as usize).min(n_boxes - 1);
                b[c] = (bx * p) as u32;
                lagrange(s - bx as f64, &nodes, &denom, &mut w[c * p..(c + 1) * p]);
            }
        });
    if cancel.load(Ordering::Relaxed) {
        return Err(EmbedError::Cancelled);
    }

    // Charges: kernel A = K with [v] (Student-t) or [v, v x...] (Gaussian);
    // kernel B = K^2 with [v, v x...] (Student-t only).
    let n_ch = 1 + dim; // v, v x_1..x_d
    let grid_len = m.pow(dim as u32);
    // Spread all n_ch charges to the grid (per-thread grids, then summed).
    let spread = |range: std::ops::Range<usize>| -> Vec<f64> {
        let mut g = vec![0.0; grid_len * n_ch];
        let mut ch = [0.0; 3];
        for i in range {
            let v = weights.map_or(1.0, |w| w[i]);
            ch[0] = v;
            for c in 0..dim {
                ch[1 + c] = v * x[i * dim + c];
            }
            let w = &lw[i * dim * p..(i + 1) * dim * p];
            if dim == 1 {
                let b0 = base[i] as usize;
                for (a, &wa) in w[..p].iter().enumerate() {
                    let node = (b0 + a) * n_ch;
                    for q in 0..n_ch {
                        g[node + q] += wa * ch[q];
                    }
                }
            } else {
                let (b0, b1) = (base[2 * i] as usize, base[2 * i + 1] as usize);
                for a in 0..p {
                    for b in 0..p {
                        let wt = w[a] * w[p + b];
                        let node = ((b0 + a) * m + b1 + b) * n_ch;
                        for q in 0..n_ch {
                            g[node + q] += wt * ch[q];
                        }
                    }
                }
            }
        }
        g
    };
    // A fixed number of partial grids, summed in a fixed order: the result does not depend
    // on the number of threads.
    let n_chunks = n.div_ceil(8192).clamp(1, 4);
    let chunk = n.div_ceil(n_chunks);
    let parts: Vec<Vec<f64>> = (0..n_chunks)
        .into_par_iter()
        .map(|c| spread(c * chunk..((c + 1) * chunk).min(n)))
        .collect();
    let mut parts = parts.into_iter();
    let mut grid = parts.next().unwrap_or_default();
    for g in parts {
        grid.par_iter_mut().zip(&g).for_each(|(a, b)| *a += b);
    }

    let pot = if real_fft {
        real_potentials(&grid, dim, m, n_ch, kernel, spacing, cancel)?
    } else {
        complex_potentials(&grid, dim, m, n_ch, kernel, spacing, cancel)?
    };
    drop(grid);
    let Potentials { phi0, phi1, phix } = pot;
    if cancel.load(Ordering::Relaxed) {
        return Err(EmbedError::Cancelled);
    }

    // Gather back to the points; subtract the self terms exactly (K(0) = 1).
    let mut s0 = vec![0.0; n];
    let mut s1 = vec![0.0; n];
    let mut sx = vec![0.0; n * dim];
    s0.par_iter_mut()
        .zip(s1.par_iter_mut())
        .zip(sx.par_chunks_mut(dim))
        .enumerate()
        .for_each(|(i, ((o0, o1), ox))| {
            let w = &lw[i * dim * p..(i + 1) * dim * p];
            let (mut a0, mut a1, mut ax) = (0.0, 0.0, [0.0; 2]);
            let mut add = |node: usize, wt: f64| {
                a0 += wt * phi0[node];
                a1 += wt * phi1[node];
                for c in 0..dim {
                    ax[c] += wt * phix[c][node];
                }
            };
            if dim == 1 {
                let b0 = base[i] as usize;
                for (a, &wa) in w[..p].iter().enumerate() {
                    add(b0 + a, wa);
                }
            } else {
                let (b0, b1) = (base[2 * i] as usize, base[2 * i + 1] as usize);
                for a in 0..p {
                    for b in 0..p {
                        add((b0 + a) * m + b1 + b, w[a] * w[p + b]);
                    }
                }
            }
            let v = weights.map_or(1.0, |w| w[i]);
            *o0 = a0 - v;
            *o1 = a1 - v;
            for c in 0..dim {
                ox[c] = ax[c] - v * x[i * dim + c];
            }
        });
    Ok(KernelSums { s0, s1, sx })
}

/// The node potentials: K * v, K^q * v and K^q * (v x_c) on the m^dim grid (row-major).
struct Potentials {
    phi0: Vec<f64>,
    phi1: Vec<f64>,
    phix: Vec<Vec<f64>>,
}

/// The reference convolution: packed complex FFTs on the full L^dim grid.
fn complex_potentials(
    grid: &[f64],
    dim: usize,
    m: usize,
    n_ch: usize,
    kernel: Kernel,
    spacing: f64,
    cancel: &AtomicBool,
) -> Result<Potentials> {
    let grid_len = m.pow(dim as u32);
    // Convolutions on the zero-padded grid of L >= 2M - 1 nodes per dimension. Five
    // complex FFTs: the two real, even kernels packed as K + i K^2 (their spectra are
    // real, so they come out as the real and imaginary parts), the charge v, and the
    // charges v x_1 + i v x_2; the products are packed so that each inverse FFT returns
    // two real potentials.
    let l = smooth_size(2 * m - 1);
    let full = l.pow(dim as u32);
    let conv = Convolver::new(dim, l);
    let mut tmp = vec![Complex64::new(0.0, 0.0); full];
    // The kernel at every signed offset of the circulant (|a| <= L/2), not only those
    // within M: the spectrum then depends on L and the spacing alone (the cache key), and
    // serves any M with 2M - 1 <= L (offsets beyond M never reach a result node).
    let signed = |a: usize| -> Option<f64> {
        if 2 * a <= l {
            Some(a as f64)
        } else {
            Some(a as f64 - l as f64)
        }
    };
    let two_kernels = kernel == Kernel::StudentT;
    let key: SpectrumKey = (dim, l, spacing.to_bits(), two_kernels);
    let cached = {
        let guard = SPECTRUM.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .filter(|(k, _)| *k == key)
            .map(|(_, s)| s.clone())
    };
    let spec: Arc<Vec<Complex64>> = match cached {
        Some(s) => s,
        None => {
            let mut spec = vec![Complex64::new(0.0, 0.0); full];
            spec.par_chunks_mut(if dim == 1 { full } else { l })
                .enumerate()
                .for_each(|(r, row)| {
                    let d0 = if dim == 1 { Some(0.0) } else { signed(r) };
                    let Some(d0) = d0 else { return };
                    let d0 = d0 * spacing;
                    for (c, o) in row.iter_mut().enumerate() {
                        if let Some(d1) = signed(c) {
                            let d1 = d1 * spacing;
                            let k = kernel.value(d0 * d0 + d1 * d1);
                            *o = Complex64::new(k, if two_kernels { k * k } else { 0.0 });
                        }
                    }
                });
            conv.transform(&mut spec, &mut tmp, false, l);
            let spec = Arc::new(spec);
            *SPECTRUM.lock().unwrap_or_else(|e| e.into_inner()) = Some((key, spec.clone()));
            spec
        }
    };
    if cancel.load(Ordering::Relaxed) {
        return Err(EmbedError::Cancelled);
    }
    let load = |buf: &mut [Complex64], qa: usize, qb: Option<usize>| {
        buf.par_chunks_mut(if dim == 1 { full } else { l })
            .take(if dim == 1 { 1 } else { m })
            .enumerate()
            .for_each(|(r, row)| {
                for (c, o) in row.iter_mut().take(m).enumerate() {
                    let node = (r * m + c) * n_ch;
                    *o = Complex64::new(grid[node + qa], qb.map_or(0.0, |q| grid[node + q]));
                }
            });
    };
    let scale = 1.0 / full as f64;
    // Potentials of the charge v: K * v (+ i K^2 * v for Student-t).
    let mut a = vec![Complex64::new(0.0, 0.0); full];
    load(&mut a, 0, None);
    conv.transform(&mut a, &mut tmp, false, m);
    a.par_iter_mut().zip(spec.par_iter()).for_each(|(z, k)| {
        *z *= if two_kernels {
            *k
        } else {
            Complex64::new(k.re, 0.0)
        } * scale;
    });
    conv.transform(&mut a, &mut tmp, true, m);
    // Potentials of v x: K^q * (v x_1 + i v x_2).
    let mut b = vec![Complex64::new(0.0, 0.0); full];
    load(&mut b, 1, if dim == 2 { Some(2) } else { None });
    conv.transform(&mut b, &mut tmp, false, m);
    b.par_iter_mut().zip(spec.par_iter()).for_each(|(z, k)| {
        *z *= if two_kernels { k.im } else { k.re } * scale;
    });
    conv.transform(&mut b, &mut tmp, true, m);
    drop(tmp);
    let node_index = |f: usize| -> usize { if dim == 1 { f } else { (f / m) * l + f % m } };
    let phi0: Vec<f64> = (0..grid_len).map(|f| a[node_index(f)].re).collect();
    let phi1: Vec<f64> = if two_kernels {
        (0..grid_len).map(|f| a[node_index(f)].im).collect()
    } else {
        phi0.clone()
    };
    let mut phix: Vec<Vec<f64>> = vec![(0..grid_len).map(|f| b[node_index(f)].re).collect()];
    if dim == 2 {
        phix.push((0..grid_len).map(|f| b[node_index(f)].im).collect());
    }
    drop((a, b, spec));
    Ok(Potentials { phi0, phi1, phix })
}

/// Plans of the real-FFT convolution by length L: real-to-complex and complex-to-real
/// transforms of the rows, complex transforms (both directions) of the half-spectrum lines.
type RealPlans = (
    Arc<dyn RealToComplex<f64>>,
    Arc<dyn ComplexToReal<f64>>,
    Arc<dyn Fft<f64>>,
    Arc<dyn Fft<f64>>,
);
static REAL_PLANS: Mutex<Option<HashMap<usize, RealPlans>>> = Mutex::new(None);

/// The last pair of real kernel spectra (K^ and, for Student-t, (K^2)^), half-spectrum
/// layout; same key as [`SPECTRUM`].
type RealSpectra = (Vec<f64>, Vec<f64>);
static REAL_SPECTRUM: Mutex<Option<(SpectrumKey, Arc<RealSpectra>)>> = Mutex::new(None);

/// Spectrum-sized buffers kept between calls (the grid size repeats across iterations):
/// no allocation and page-faulting of a few MB per gradient evaluation.
static WORKSPACE: Mutex<Vec<Vec<Complex64>>> = Mutex::new(Vec::new());

fn take_buffer(len: usize) -> Vec<Complex64> {
    let mut v = WORKSPACE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .pop()
        .unwrap_or_default();
    v.clear();
    v.resize(len, Complex64::new(0.0, 0.0));
    v
}

fn give_back(v: Vec<Complex64>) {
    let mut pool = WORKSPACE.lock().unwrap_or_else(|e| e.into_inner());
    if pool.len() < 8 {
        pool.push(v);
    }
}

/// Lines handled together in the strided gathers (cache lines of 4 complex numbers).
const GROUP: usize = 8;

/// Zero-padded convolution of real grids on `L^dim` (L even) by real-to-complex FFTs.
/// Spectra are "half spectra": in 1-D the `H = L/2 + 1` outputs of the real FFT; in 2-D,
/// `H` lines of length L, `spec[k2 * L + k1]` (the real FFT along the rows, then complex
/// FFTs along the columns of the H kept frequencies).
struct RealConv {
    dim: usize,
    l: usize,
    h: usize,
    r2c: Arc<dyn RealToComplex<f64>>,
    c2r: Arc<dyn ComplexToReal<f64>>,
    fwd: Arc<dyn Fft<f64>>,
    inv: Arc<dyn Fft<f64>>,
}

impl RealConv {
    fn new(dim: usize, l: usize) -> RealConv {
        debug_assert!(l % 2 == 0);
        let (r2c, c2r, fwd, inv) = {
            let mut guard = REAL_PLANS.lock().unwrap_or_else(|e| e.into_inner());
            let map = guard.get_or_insert_with(HashMap::new);
            map.entry(l)
                .or_insert_with(|| {
                    let mut rp = RealFftPlanner::<f64>::new();
                    let mut cp = FftPlanner::new();
                    (
                        rp.plan_fft_forward(l),
                        rp.plan_fft_inverse(l),
                        cp.plan_fft_forward(l),
                        cp.plan_fft_inverse(l),
                    )
                })
                .clone()
        };
        RealConv {
            dim,
            l,
            h: l / 2 + 1,
            r2c,
            c2r,
            fwd,
            inv,
        }
    }

    fn spectrum_len(&self) -> usize {
        if self.dim == 1 {
            self.h
        } else {
            self.h * self.l
        }
    }

    /// The half spectrum of the real grid whose rows `r < live` are written by
    /// `fill(r, row)` into a zeroed row of length L (rows >= `live` are zero).
    fn forward(
        &self,
        live: usize,
        fill: impl Fn(usize, &mut [f64]) + Sync,
        out: &mut Vec<Complex64>,
    ) {
        let (l, h) = (self.l, self.h);
        let r2c_scratch = self.r2c.get_scratch_len();
        let real_row =
            |r: usize, buf: &mut Vec<f64>, scr: &mut Vec<Complex64>, o: &mut [Complex64]| {
                buf.fill(0.0);
                fill(r, buf);
                // Real input, correct lengths: cannot fail.
                let _ = self.r2c.process_with_scratch(buf, o, scr);
            };
        if self.dim == 1 {
            out.clear();
            out.resize(h, Complex64::new(0.0, 0.0));
            let mut buf = vec![0.0; l];
            let mut scr = vec![Complex64::new(0.0, 0.0); r2c_scratch];
            real_row(0, &mut buf, &mut scr, out);
            return;
        }
        let mut rows = take_buffer(live * h);
        rows.par_chunks_mut(h).enumerate().for_each_init(
            || (vec![0.0; l], vec![Complex64::new(0.0, 0.0); r2c_scratch]),
            |(buf, scr), (r, o)| real_row(r, buf, scr, o),
        );
        out.clear();
        out.resize(h * l, Complex64::new(0.0, 0.0));
        let fwd_scratch = self.fwd.get_inplace_scratch_len();
        let rows_ref = &rows;
        out.par_chunks_mut(l * GROUP).enumerate().for_each_init(
            || vec![Complex64::new(0.0, 0.0); fwd_scratch],
            |scr, (g, lines)| {
                let k0 = g * GROUP;
                let count = lines.len() / l;
                // Column k2 of the row spectra, zero below row `live` (already zero).
                for r in 0..live {
                    let src = &rows_ref[r * h + k0..r * h + k0 + count];
                    for (j, v) in src.iter().enumerate() {
                        lines[j * l + r] = *v;
                    }
                }
                self.fwd.process_with_scratch(lines, scr);
            },
        );
        give_back(rows);
    }

    /// The real grid (rows and columns < `m`, scaled by `scale`) whose half spectrum is
    /// `spec` (overwritten), into `out` (m^dim).
    fn inverse(&self, spec: &mut [Complex64], m: usize, scale: f64, out: &mut [f64]) {
        let (l, h) = (self.l, self.h);
        let c2r_scratch = self.c2r.get_scratch_len();
        let real_row =
            |cb: &mut [Complex64], rb: &mut [f64], scr: &mut [Complex64], o: &mut [f64]| {
                // The result is real: the DC and Nyquist terms carry no imaginary part (up to
                // rounding, which realfft would otherwise reject).
                cb[0].im = 0.0;
                cb[h - 1].im = 0.0;
                let _ = self.c2r.process_with_scratch(cb, rb, scr);
                for (o, v) in o.iter_mut().zip(rb.iter()) {
                    *o = v * scale;
                }
            };
        if self.dim == 1 {
            let mut rb = vec![0.0; l];
            let mut scr = vec![Complex64::new(0.0, 0.0); c2r_scratch];
            real_row(&mut spec[..h], &mut rb, &mut scr, &mut out[..m]);
            return;
        }
        let inv_scratch = self.inv.get_inplace_scratch_len();
        spec.par_chunks_mut(l * GROUP).for_each_init(
            || vec![Complex64::new(0.0, 0.0); inv_scratch],
            |scr, lines| self.inv.process_with_scratch(lines, scr),
        );
        let spec: &[Complex64] = spec;
        out.par_chunks_mut(m * GROUP).enumerate().for_each_init(
            || {
                (
                    vec![Complex64::new(0.0, 0.0); h * GROUP],
                    vec![0.0; l],
                    vec![Complex64::new(0.0, 0.0); c2r_scratch],
                )
            },
            |(cb, rb, scr), (g, o)| {
                let r0 = g * GROUP;
                let count = o.len() / m;
                for k2 in 0..h {
                    let src = &spec[k2 * l + r0..k2 * l + r0 + count];
                    for (j, v) in src.iter().enumerate() {
                        cb[j * h + k2] = *v;
                    }
                }
                for (j, orow) in o.chunks_mut(m).enumerate() {
                    real_row(&mut cb[j * h..(j + 1) * h], rb, scr, orow);
                }
            },
        );
    }
}

/// The node potentials by real-to-complex FFTs: three forward transforms (v, v x_1,
/// v x_2), the real, even kernels' spectra (real: one multiply per frequency) cached
/// across calls, and one inverse per potential; only the `m` live rows of the padded grid
/// are transformed along the rows, and only `L/2 + 1` columns along the columns.
fn real_potentials(
    grid: &[f64],
    dim: usize,
    m: usize,
    n_ch: usize,
    kernel: Kernel,
    spacing: f64,
    cancel: &AtomicBool,
) -> Result<Potentials> {
    let grid_len = m.pow(dim as u32);
    let l = smooth_size(2 * m - 1);
    let conv = RealConv::new(dim, l);
    let two_kernels = kernel == Kernel::StudentT;
    let key: SpectrumKey = (dim, l, spacing.to_bits(), two_kernels);
    let cached = {
        let guard = REAL_SPECTRUM.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .filter(|(k, _)| *k == key)
            .map(|(_, s)| s.clone())
    };
    // The kernel at every signed offset of the circulant (|a| <= L/2): the spectrum
    // depends on L and the spacing alone (the cache key).
    let offset = |a: usize| -> f64 {
        let a = if 2 * a <= l {
            a as f64
        } else {
            a as f64 - l as f64
        };
        a * spacing
    };
    let spec: Arc<RealSpectra> = match cached {
        Some(s) => s,
        None => {
            let rows = if dim == 1 { 1 } else { l };
            let mut buf = take_buffer(0);
            let half = |square: bool, buf: &mut Vec<Complex64>| -> Vec<f64> {
                conv.forward(
                    rows,
                    |r, row| {
                        let d0 = if dim == 1 { 0.0 } else { offset(r) };
                        for (c, o) in row.iter_mut().enumerate() {
                            let d1 = offset(c);
                            let k = kernel.value(d0 * d0 + d1 * d1);
                            *o = if square { k * k } else { k };
                        }
                    },
                    buf,
                );
                buf.iter().map(|z| z.re).collect()
            };
            let k1 = half(false, &mut buf);
            let k2 = if two_kernels {
                half(true, &mut buf)
            } else {
                vec![]
            };
            give_back(buf);
            let s = Arc::new((k1, k2));
            *REAL_SPECTRUM.lock().unwrap_or_else(|e| e.into_inner()) = Some((key, s.clone()));
            s
        }
    };
    if cancel.load(Ordering::Relaxed) {
        return Err(EmbedError::Cancelled);
    }
    let (k_a, k_b) = (&spec.0, if two_kernels { &spec.1 } else { &spec.0 });
    let scale = 1.0 / (l.pow(dim as u32)) as f64;
    let live = if dim == 1 { 1 } else { m };
    let charge = |q: usize, buf: &mut Vec<Complex64>| {
        conv.forward(
            live,
            |r, row| {
                for (c, o) in row.iter_mut().take(m).enumerate() {
                    *o = grid[(r * m + c) * n_ch + q];
                }
            },
            buf,
        );
    };
    let len = conv.spectrum_len();
    let mut v_hat = take_buffer(len);
    let mut work = take_buffer(len);
    charge(0, &mut v_hat);
    let potential = |src: &[Complex64], k: &[f64], work: &mut Vec<Complex64>| -> Vec<f64> {
        work.par_iter_mut()
            .zip(src.par_iter())
            .zip(k.par_iter())
            .with_min_len(4096)
            .for_each(|((w, s), k)| *w = s * *k);
        let mut out = vec![0.0; grid_len];
        conv.inverse(work, m, scale, &mut out);
        out
    };
    let phi0 = potential(&v_hat, k_a, &mut work);
    let phi1 = if two_kernels {
        potential(&v_hat, k_b, &mut work)
    } else {
        phi0.clone()
    };
    let mut phix = Vec::with_capacity(dim);
    for c in 0..dim {
        charge(1 + c, &mut v_hat);
        phix.push(potential(&v_hat, k_b, &mut work));
    }
    give_back(v_hat);
    give_back(work);
    Ok(Potentials { phi0, phi1, phix })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nbody::exact_sums;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    fn points(n: usize, dim: usize, spread: f64, seed: u64) -> Vec<f64> {
        let mut rng = Pcg64::seed_from_u64(seed);
        (0..n * dim)
            .map(|i| {
                // a few clusters, as t-SNE embeddings look
                let c = ((i / dim) % 5) as f64;
                spread * (c * 0.7 + rng.random::<f64>() - 0.5)
            })
            .collect()
    }

    fn rel_err(a: &[f64], b: &[f64]) -> f64 {
        let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
        let den: f64 = b.iter().map(|y| y * y).sum();
        (num / den).sqrt()
    }

    #[test]
    fn matches_exact_and_error_falls_with_nodes() {
        let cancel = AtomicBool::new(false);
        for dim in [1, 2] {
            for kernel in [Kernel::StudentT, Kernel::Gaussian] {
                let x = points(2000, dim, 10.0, 3);
                let ex = exact_sums(&x, dim, kernel, None, &cancel).unwrap();
                let mut errs = vec![];
                for p in [2, 3, 5] {
                    let opts = InterpOptions {
                        n_interp: p,
                        ..InterpOptions::default()
                    };
                    let s = interpolation_sums(&x, dim, kernel, None, opts, &cancel).unwrap();
                    let e = rel_err(&s.s0, &ex.s0)
                        .max(rel_err(&s.s1, &ex.s1))
                        .max(rel_err(&s.sx, &ex.sx));
                    errs.push(e);
                }
                assert!(errs[1] < 1e-2, "{dim} {kernel:?} {errs:?}");
                assert!(errs[2] < 0.2 * errs[0], "{dim} {kernel:?} {errs:?}");
                assert!(errs[2] < 1e-3, "{dim} {kernel:?} {errs:?}");
            }
        }
    }

    #[test]
    fn weights_and_tiny_embeddings() {
        let cancel = AtomicBool::new(false);
        let x = points(300, 2, 1e-4, 5);
        let mut rng = Pcg64::seed_from_u64(1);
        let v: Vec<f64> = (0..300).map(|_| 0.5 + rng.random::<f64>()).collect();
        let ex = exact_sums(&x, 2, Kernel::StudentT, Some(&v), &cancel).unwrap();
        let s = interpolation_sums(
            &x,
            2,
            Kernel::StudentT,
            Some(&v),
            InterpOptions::default(),
            &cancel,
        )
        .unwrap();
        assert!(rel_err(&s.s0, &ex.s0) < 1e-8);
        assert!(rel_err(&s.s1, &ex.s1) < 1e-8);
        assert!(rel_err(&s.sx, &ex.sx) < 1e-6);
    }

    #[test]
    fn fixed_width_boxes_reuse_the_kernel_spectrum_correctly() {
        // Ranges above min_boxes box widths: the spacing is the box width / p for every
        // call, so the cached spectrum is reused; each result must still match the exact
        // sums, including after a change of kernel or grid size (cache key).
        let cancel = AtomicBool::new(false);
        let opts = InterpOptions {
            min_boxes: 10,
            ..InterpOptions::default()
        };
        for (spread, seed, kernel) in [
            (8.0, 1, Kernel::StudentT),
            (9.0, 2, Kernel::StudentT),
            (9.0, 2, Kernel::Gaussian),
            (14.0, 3, Kernel::StudentT),
            (8.0, 1, Kernel::StudentT),
        ] {
            let x = points(1500, 2, spread, seed);
            let ex = exact_sums(&x, 2, kernel, None, &cancel).unwrap();
            let s = interpolation_sums(&x, 2, kernel, None, opts, &cancel).unwrap();
            // The cached spectrum gives the sums of a freshly computed one.
            *SPECTRUM.lock().unwrap() = None;
            *REAL_SPECTRUM.lock().unwrap() = None;
            let fresh = interpolation_sums(&x, 2, kernel, None, opts, &cancel).unwrap();
            assert!(rel_err(&s.s1, &fresh.s1) < 1e-12 && rel_err(&s.sx, &fresh.sx) < 1e-12);
            let e = rel_err(&s.s0, &ex.s0)
                .max(rel_err(&s.s1, &ex.s1))
                .max(rel_err(&s.sx, &ex.sx));
            // p = 3 nodes per unit-width box: FIt-SNE's accuracy (2-4 % on the moments).
            assert!(e < 5e-2, "{spread} {kernel:?} {e}");
        }
    }

    #[test]
    fn real_fft_path_equals_complex_path() {
        // The production convolution (real-to-complex FFTs, half spectra, cached real
        // kernel spectra, pooled buffers) against the packed complex-FFT reference, in 1-D
        // and 2-D, both kernels, with weights, for grids of fixed-width boxes and of
        // min_boxes stretched boxes; twice each so the cached spectra and reused buffers
        // are exercised. Sizes chosen so that L takes odd-factor lengths (7 | 672 etc.).
        let cancel = AtomicBool::new(false);
        let mut rng = Pcg64::seed_from_u64(9);
        for dim in [1, 2] {
            for kernel in [Kernel::StudentT, Kernel::Gaussian] {
                for (spread, min_boxes) in [(3.0, 50), (40.0, 10), (75.0, 50)] {
                    let x = points(1200, dim, spread, 11);
                    let v: Vec<f64> = (0..1200).map(|_| 0.5 + rng.random::<f64>()).collect();
                    let opts = InterpOptions {
                        min_boxes,
                        ..InterpOptions::default()
                    };
                    for _ in 0..2 {
                        let r =
                            interpolation_sums_with(&x, dim, kernel, Some(&v), opts, true, &cancel)
                                .unwrap();
                        let c = interpolation_sums_with(
                            &x,
                            dim,
                            kernel,
                            Some(&v),
                            opts,
                            false,
                            &cancel,
                        )
                        .unwrap();
                        for (a, b) in [(&r.s0, &c.s0), (&r.s1, &c.s1), (&r.sx, &c.sx)] {
                            let e = rel_err(a, b);
                            assert!(e < 1e-10, "{dim} {kernel:?} {spread} {e}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn rejects_three_dimensions() {
        let cancel = AtomicBool::new(false);
        let x = vec![0.0; 30];
        assert!(
            interpolation_sums(
                &x,
                3,
                Kernel::StudentT,
                None,
                InterpOptions::default(),
                &cancel
            )
            .is_err()
        );
    }

    #[test]
    fn smooth_sizes() {
        assert_eq!(smooth_size(7), 8);
        assert_eq!(smooth_size(300), 300);
        assert_eq!(smooth_size(301), 320);
        assert_eq!(smooth_size(659), 672);
        assert_eq!(smooth_size(299), 300);
    }
}

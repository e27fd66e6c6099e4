//! `Z M Zᵀ` for a symmetric sparse M, reading its upper triangle only.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use vastml_core::{Control, Halt};

use super::{Csr, PREFETCH, Packed, Weights, check_square, prefetch, upper_row};
use crate::error::{EmbedError, Result, check_finite, invalid};
use crate::objective::CsrIndex;

/// Upper bound of the per-chunk L×L accumulators of [`z_m_zt_sym`] (bytes, all chunks).
const SYM_MEMORY: usize = 1 << 28;
/// At most this many chunks of points (each with its own accumulator) in [`z_m_zt_sym`].
const SYM_MAX_CHUNKS: usize = 8;
/// At least this many points per chunk of [`z_m_zt_sym`].
const SYM_MIN_CHUNK: usize = 2048;
/// Points between two polls of the cancel flag.
const POLL_POINTS: usize = 4096;

/// Chunks of points of [`z_m_zt_sym`]: fixed by N and L alone (never by the thread count),
/// so the sums do not depend on the number of threads.
fn sym_chunks(n: usize, l: usize) -> usize {
    let by_memory = (SYM_MEMORY / (8 * l * l).max(1)).max(1);
    (n / SYM_MIN_CHUNK).clamp(1, SYM_MAX_CHUNKS).min(by_memory)
}

/// The polls and reports of the parallel chunks: reports are numbered 1, 2, … in the order
/// they are made (a lock serialises them), and the first halt stops every chunk.
struct Watch<'a> {
    control: Control<'a>,
    every: usize,
    made: Mutex<usize>,
    halt: Mutex<Option<Halt>>,
    stop: AtomicBool,
}

impl<'a> Watch<'a> {
    fn new(control: Control<'a>, n: usize) -> Self {
        Watch {
            control,
            every: n.div_ceil(256).max(POLL_POINTS),
            made: Mutex::new(0),
            halt: Mutex::new(None),
            stop: AtomicBool::new(false),
        }
    }

    /// At the `done`-th point of a chunk: false when the chunk must stop.
    fn go_on(&self, done: usize) -> bool {
        if done % POLL_POINTS != 0 || done == 0 {
            return true;
        }
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        let r = if self.control.has_hook() && done % self.every == 0 {
            let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
            *made += 1;
            self.control.report(*made, || f64::NAN, &())
        } else {
            self.control.check()
        };
        match r {
            Ok(()) => true,
            Err(h) => {
                self.halt
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(h);
                self.stop.store(true, Ordering::Relaxed);
                false
            }
        }
    }

    /// The halt that stopped the chunks, if any (a cancel raised after them too).
    fn outcome(&self) -> Result<()> {
        if let Some(h) = *self.halt.lock().unwrap_or_else(|e| e.into_inner()) {
            return Err(h.into());
        }
        self.control.check().map_err(EmbedError::from)
    }
}

/// `S_c = Σ_{p ∈ a..b} z_p (Σ_{m > p} M_pm z_m + ½ M_pp z_p)ᵀ` (L×L) of one chunk of points;
/// raises `bad` on a column index out of range.
fn chunk_sum<I: CsrIndex>(
    z: &Weights,
    l: usize,
    m: Csr<'_, I>,
    pk: &Packed,
    (a, b): (usize, usize),
    bad: &AtomicBool,
    watch: &Watch<'_>,
) -> Vec<f64> {
    let mut s = vec![0.0f64; l * l];
    let mut acc = vec![0.0f64; l];
    let mut mask = vec![0u64; l.div_ceil(64)];
    let mut touched: Vec<u32> = Vec::with_capacity(l);
    for p in a..b {
        if !watch.go_on(p - a) || bad.load(Ordering::Relaxed) {
            return s;
        }
        let mut add = |j: usize, w: f64| {
            pk.for_each(j, |i, v| {
                acc[i] += w * v;
                mask[i / 64] |= 1u64 << (i % 64);
            });
        };
        let ok = upper_row(m, p, |j, w, ix, t| {
            if let Some(&ahead) = ix.get(t + PREFETCH) {
                prefetch(pk.head(ahead.ix()));
            }
            add(j, w);
        });
        if !ok {
            bad.store(true, Ordering::Relaxed);
            return s;
        }
        // the touched landmarks from the bit set (sparse: a point's upper neighbours see a
        // few dozen of the L landmarks), then K_Z sparse row updates of S
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
}

/// `out` := Σ_c S_c (in chunk order), then `out + outᵀ`.
fn sum_and_symmetrise(out: &mut [f64], l: usize, parts: &[Vec<f64>]) {
    out.par_chunks_mut(l).enumerate().for_each(|(i, row)| {
        for part in parts {
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
}

/// `Z M Zᵀ` (L×L, dense, row-major) for a **symmetric** sparse N×N `M`, reading only its
/// upper triangle: every edge once.
///
/// With `M = U + diag(M) + Uᵀ` (U strictly upper), `Z M Zᵀ = S + Sᵀ` where
/// `S = Σ_p z_p (Σ_{m > p} M_pm z_m + ½ M_pp z_p)ᵀ`: per point one dense accumulator of its
/// upper neighbours' columns of Z, then K_Z dense row updates of S. That halves the random
/// fetches of [`z_m_zt`](super::z_m_zt) (which reads both triangles) and drops its sparse
/// bookkeeping. Rows of M with sorted column indices (SciPy's canonical form) start at their
/// first entry above the diagonal by a binary search; other rows are filtered entry by entry.
/// `M` is **not** checked for symmetry (its lower triangle is never read): for a
/// non-symmetric M the result is `Z (triu(M) + triu(M)ᵀ − diag(M)) Zᵀ`.
///
/// Points are split into a fixed number of chunks (set by N and L, never by the thread count),
/// each with its own L×L accumulator, summed in chunk order: the result does not depend on the
/// number of threads. The accumulators hold at most 256 MB in all (fewer chunks at large L).
/// `control` is polled every 4,096 points of a chunk; its hook gets reports numbered 1, 2, …
/// (about 256 in all, none below 4,096 points per chunk; objective NaN).
///
/// # Errors
/// Shapes that disagree (M not N×N), landmark indices ≥ `l`, non-finite values,
/// [`EmbedError::Cancelled`] or [`EmbedError::Stopped`].
pub fn z_m_zt_sym<I: CsrIndex>(
    z: &Weights,
    l: usize,
    m: Csr<'_, I>,
    control: Control<'_>,
) -> Result<Vec<f64>> {
    let n = z.n_points();
    z.check(l)?;
    check_square(&m, n)?;
    let mut out = vec![0.0f64; l * l];
    if l == 0 || n == 0 {
        return Ok(out);
    }
    let pk = Packed::new(z);
    let chunks = sym_chunks(n, l);
    let bad = AtomicBool::new(false);
    let watch = Watch::new(control, n);
    // Points in their own order: the rows of M are then read as one stream (visiting them in
    // any other order, e.g. grouped by nearest landmark, doubled the time: every row start
    // became a cache miss), and only the records of Z are fetched at random.
    let parts: Vec<Vec<f64>> = (0..chunks)
        .into_par_iter()
        .map(|c| {
            let range = (c * n / chunks, (c + 1) * n / chunks);
            chunk_sum(z, l, m, &pk, range, &bad, &watch)
        })
        .collect();
    watch.outcome()?;
    if bad.load(Ordering::Relaxed) {
        return Err(invalid("indices", format!("column index >= {n}")));
    }
    sum_and_symmetrise(&mut out, l, &parts);
    check_finite(&out, "data")?;
    Ok(out)
}

//! Bit rows of one axis in the display order of the other axis, with horizontal padding.
//!
//! For the row axis an entity is an original row and its bits are indexed by displayed
//! column; for the column axis an entity is an original column indexed by displayed row.
//! Bit `pad + j` holds displayed position `j`; the `pad` bits on each side hold the padding.

use crate::matrix::{Matrix, Padding, words};

/// Where the neighbour row at some displayed offset comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Src {
    /// A real row (original index).
    Real(u32),
    /// The virtual row above the matrix.
    Top,
    /// The virtual row below the matrix.
    Bottom,
}

/// Bit rows of one axis.
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub n_ent: usize,
    pub n_pos: usize,
    pub pad: usize,
    pub w: usize,
    pub n_layers: usize,
    pub real: Vec<u64>,
    pub padded: Vec<u64>,
    pub top: Vec<u64>,
    pub bottom: Vec<u64>,
    pub ones: Vec<u32>,
    padding: Padding,
}

#[inline]
fn get(bits: &[u64], i: usize) -> bool {
    (bits[i / 64] >> (i % 64)) & 1 == 1
}

#[inline]
fn put(bits: &mut [u64], i: usize, on: bool) {
    if on {
        bits[i / 64] |= 1u64 << (i % 64);
    } else {
        bits[i / 64] &= !(1u64 << (i % 64));
    }
}

impl View {
    /// Builds the view of `axis` (0 rows, 1 columns) with `pad` padding bits on each side.
    pub fn build(
        matrix: &Matrix,
        axis: usize,
        other_map: &[u32],
        pad: usize,
        padding: Padding,
    ) -> Self {
        let (n_ent, n_pos) = if axis == 0 {
            (matrix.n_rows(), matrix.n_cols())
        } else {
            (matrix.n_cols(), matrix.n_rows())
        };
        let w = words(n_pos + 2 * pad);
        let n_layers = matrix.n_layers();
        let mut v = Self {
            n_ent,
            n_pos,
            pad,
            w,
            n_layers,
            real: vec![0; n_layers * n_ent * w],
            padded: vec![0; n_layers * n_ent * w],
            top: vec![0; n_layers * w],
            bottom: vec![0; n_layers * w],
            ones: vec![0; n_layers * n_ent],
            padding,
        };
        for l in 0..n_layers {
            for e in 0..n_ent {
                let base = (l * n_ent + e) * w;
                let mut count = 0;
                for (j, &o) in other_map.iter().enumerate() {
                    let on = if axis == 0 {
                        matrix.get(l, e, o as usize)
                    } else {
                        matrix.get(l, o as usize, e)
                    };
                    if on {
                        put(&mut v.real[base..base + w], pad + j, true);
                        count += 1;
                    }
                }
                v.ones[l * n_ent + e] = count;
                v.refresh_padding(l, e);
            }
            if padding == Padding::ZerosAndOnes {
                let t = &mut v.top[l * w..(l + 1) * w];
                for i in 0..n_pos + 2 * pad {
                    put(t, i, true);
                }
                let b = &mut v.bottom[l * w..(l + 1) * w];
                for i in 0..pad {
                    put(b, i, true);
                }
            }
        }
        v
    }

    /// Recomputes the padded bits of entity `e` in layer `l` from its real bits.
    pub fn refresh_padding(&mut self, l: usize, e: usize) {
        let (w, pad, n) = (self.w, self.pad, self.n_pos);
        let base = (l * self.n_ent + e) * w;
        let (real, padded) = (&self.real[base..base + w], &mut self.padded[base..base + w]);
        padded.copy_from_slice(real);
        for t in 0..pad {
            let (left, right) = match self.padding {
                Padding::ZerosAndOnes => (true, false),
                Padding::Zero => (false, false),
                Padding::Extension => (get(real, pad), get(real, pad + n - 1)),
                Padding::Cyclic => {
                    let lp = (t as isize - pad as isize).rem_euclid(n as isize) as usize;
                    let rp = (n + t) % n;
                    (get(real, pad + lp), get(real, pad + rp))
                }
            };
            put(padded, t, left);
            put(padded, pad + n + t, right);
        }
    }

    /// Real bits (no padding) of entity `e` in layer `l`.
    #[inline]
    pub fn real_of(&self, l: usize, e: usize) -> &[u64] {
        let base = (l * self.n_ent + e) * self.w;
        &self.real[base..base + self.w]
    }

    /// Padded bits of a neighbour source in layer `l`.
    #[inline]
    pub fn src_bits(&self, l: usize, s: Src) -> &[u64] {
        match s {
            Src::Real(e) => {
                let base = (l * self.n_ent + e as usize) * self.w;
                &self.padded[base..base + self.w]
            }
            Src::Top => &self.top[l * self.w..(l + 1) * self.w],
            Src::Bottom => &self.bottom[l * self.w..(l + 1) * self.w],
        }
    }

    /// Whether entity `e` is set at displayed position `j` in layer `l`.
    #[inline]
    pub fn cell(&self, l: usize, e: usize, j: usize) -> bool {
        get(self.real_of(l, e), self.pad + j)
    }

    /// Swaps layers `a` and `b` of entity `e` (all its bits move between the two layers).
    pub fn swap_entity_layers(&mut self, e: usize, a: usize, b: usize) {
        let w = self.w;
        let (ia, ib) = ((a * self.n_ent + e) * w, (b * self.n_ent + e) * w);
        for k in 0..w {
            self.real.swap(ia + k, ib + k);
            self.padded.swap(ia + k, ib + k);
        }
        self.ones.swap(a * self.n_ent + e, b * self.n_ent + e);
    }

    /// Swaps layers `a` and `b` at displayed position `j` of every entity.
    pub fn swap_position_layers(&mut self, j: usize, a: usize, b: usize) {
        let (w, pad, n) = (self.w, self.pad, self.n_pos);
        let i = pad + j;
        let edge = j < pad || j + pad >= n;
        let refresh = edge && matches!(self.padding, Padding::Extension | Padding::Cyclic);
        for e in 0..self.n_ent {
            let (ia, ib) = ((a * self.n_ent + e) * w, (b * self.n_ent + e) * w);
            let ga = get(&self.real[ia..ia + w], i);
            let gb = get(&self.real[ib..ib + w], i);
            if ga == gb {
                continue;
            }
            put(&mut self.real[ia..ia + w], i, gb);
            put(&mut self.real[ib..ib + w], i, ga);
            put(&mut self.padded[ia..ia + w], i, gb);
            put(&mut self.padded[ib..ib + w], i, ga);
            let (oa, ob) = (a * self.n_ent + e, b * self.n_ent + e);
            if ga {
                self.ones[oa] -= 1;
                self.ones[ob] += 1;
            } else {
                self.ones[oa] += 1;
                self.ones[ob] -= 1;
            }
            if refresh {
                self.refresh_padding(a, e);
                self.refresh_padding(b, e);
            }
        }
    }

    /// Permutes the displayed positions of every entity: new position `dst` takes the bit of
    /// old position `src` for each pair in `moves` (a permutation of the listed positions).
    pub fn permute_positions(&mut self, moves: &[(usize, usize)], scratch: &mut Vec<bool>) {
        let (w, pad) = (self.w, self.pad);
        for l in 0..self.n_layers {
            for e in 0..self.n_ent {
                let base = (l * self.n_ent + e) * w;
                let real = &mut self.real[base..base + w];
                scratch.clear();
                scratch.extend(moves.iter().map(|&(_, s)| get(real, pad + s)));
                for (&(d, _), &on) in moves.iter().zip(scratch.iter()) {
                    put(real, pad + d, on);
                }
                if matches!(self.padding, Padding::Extension | Padding::Cyclic) {
                    self.refresh_padding(l, e);
                } else {
                    let padded = &mut self.padded[base..base + w];
                    for (&(d, _), &on) in moves.iter().zip(scratch.iter()) {
                        put(padded, pad + d, on);
                    }
                }
            }
        }
    }
}

/// Σ_i x_i & y_{i+s} over bit positions (y read as 0 outside its words).
#[inline]
pub(crate) fn dot_shift(x: &[u64], y: &[u64], s: isize) -> u64 {
    let nw = x.len() as isize;
    let q = s.div_euclid(64);
    let r = s.rem_euclid(64) as u32;
    let word = |i: isize| if i >= 0 && i < nw { y[i as usize] } else { 0 };
    let mut acc = 0u64;
    for (wi, &xw) in x.iter().enumerate() {
        if xw == 0 {
            continue;
        }
        let i = wi as isize + q;
        let yw = if r == 0 {
            word(i)
        } else {
            (word(i) >> r) | (word(i + 1) << (64 - r))
        };
        acc += u64::from((xw & yw).count_ones());
    }
    acc
}

/// Σ_j weights[j] · |x ∩ shift(y, j − pad)| (y read as 0 outside its words): the weighted
/// overlaps of `x` with `y` shifted by every offset −pad..=pad in one pass over the words.
/// Needs `pad < 64` and `weights.len() == 2 pad + 1 <= 127`.
#[inline]
pub(crate) fn weighted_overlap(x: &[u64], y: &[u64], weights: &[u64], pad: usize) -> u128 {
    debug_assert!(pad < 64 && weights.len() == 2 * pad + 1);
    let mut counts = [0u32; 127];
    shift_counts(x, y, pad, &mut counts[..weights.len()]);
    counts[..weights.len()]
        .iter()
        .zip(weights)
        .map(|(&c, &w)| u128::from(c) * u128::from(w))
        .sum()
}

/// `counts[j] += |x ∩ shift(y, j − pad)|` for j in 0..=2 pad (y read as 0 outside its
/// words), in one pass over the words. Needs `pad < 64` and `counts.len() == 2 pad + 1`.
#[inline]
pub(crate) fn shift_counts(x: &[u64], y: &[u64], pad: usize, counts: &mut [u32]) {
    debug_assert!(pad < 64 && counts.len() == 2 * pad + 1);
    let nw = x.len();
    for (i, &xw) in x.iter().enumerate() {
        if xw == 0 {
            continue;
        }
        let lo = if i > 0 { y[i - 1] } else { 0 };
        let mid = y[i];
        let hi = if i + 1 < nw { y[i + 1] } else { 0 };
        for (j, c) in counts.iter_mut().enumerate() {
            // bit b of the shifted word is bit b + s of y around word i
            let s = j as isize - pad as isize;
            let yw = if s > 0 {
                (mid >> s) | (hi << (64 - s))
            } else if s < 0 {
                (mid << -s) | (lo >> (64 + s))
            } else {
                mid
            };
            *c += (xw & yw).count_ones();
        }
    }
}

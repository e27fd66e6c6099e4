//! Bit rows of one axis in the display order of the other axis, with horizontal padding.
//!
//! For the row axis an entity is an original row and its bits are indexed by displayed
//! column; for the column axis an entity is an original column indexed by displayed row.
//! Bit `pad + j` holds displayed position `j`; the `pad` bits on each side hold the padding.

use crate::matrix::{Matrix, Padding, set_bits, words};

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
    /// Words of a mask: `words(w)`.
    mw: usize,
    /// `nz[(l * n_ent + e) * mw ..]`: bit k set when word k of the padded bits of entity `e`
    /// in layer `l` is non-zero (the real bits are a subset, so it covers them too). Sparse
    /// rows visit only the words where both rows of a pair have bits near each other.
    nz: Vec<u64>,
    nz_top: Vec<u64>,
    nz_bottom: Vec<u64>,
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

/// `mask` bit k set when `bits[k]` is non-zero.
#[inline]
fn mask_into(bits: &[u64], mask: &mut [u64]) {
    mask.iter_mut().for_each(|m| *m = 0);
    for (k, &b) in bits.iter().enumerate() {
        if b != 0 {
            mask[k / 64] |= 1u64 << (k % 64);
        }
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
        let mw = words(w);
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
            mw,
            nz: vec![0; n_layers * n_ent * mw],
            nz_top: vec![0; n_layers * mw],
            nz_bottom: vec![0; n_layers * mw],
            padding,
        };
        // displayed position of each original index of the other axis
        let mut shown = vec![0usize; other_map.len()];
        for (j, &o) in other_map.iter().enumerate() {
            shown[o as usize] = j;
        }
        for l in 0..n_layers {
            // walk the set bits of the matrix's rows: rows are entities of axis 0 and
            // positions of axis 1
            for r in 0..matrix.n_rows() {
                for c in set_bits(matrix.row_bits(l, r)) {
                    let (e, j) = if axis == 0 {
                        (r, shown[c])
                    } else {
                        (c, shown[r])
                    };
                    let base = (l * n_ent + e) * w;
                    put(&mut v.real[base..base + w], pad + j, true);
                    v.ones[l * n_ent + e] += 1;
                }
            }
            for e in 0..n_ent {
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
            mask_into(
                &v.top[l * w..(l + 1) * w],
                &mut v.nz_top[l * mw..(l + 1) * mw],
            );
            mask_into(
                &v.bottom[l * w..(l + 1) * w],
                &mut v.nz_bottom[l * mw..(l + 1) * mw],
            );
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
        self.refresh_mask(l, e);
    }

    /// Recomputes the non-zero word mask of entity `e` in layer `l` from its padded bits.
    #[inline]
    fn refresh_mask(&mut self, l: usize, e: usize) {
        let (w, mw) = (self.w, self.mw);
        let i = l * self.n_ent + e;
        mask_into(
            &self.padded[i * w..(i + 1) * w],
            &mut self.nz[i * mw..(i + 1) * mw],
        );
    }

    /// Non-zero word mask of entity `e` in layer `l` (covers its real and padded bits).
    #[inline]
    pub fn mask_of(&self, l: usize, e: usize) -> &[u64] {
        let i = l * self.n_ent + e;
        &self.nz[i * self.mw..(i + 1) * self.mw]
    }

    /// Real bits of entity `e` in layer `l` with their mask.
    #[inline]
    pub fn masked_real(&self, l: usize, e: usize) -> Masked<'_> {
        Masked {
            bits: self.real_of(l, e),
            mask: self.mask_of(l, e),
        }
    }

    /// Padded bits of a neighbour source in layer `l` with their mask.
    #[inline]
    pub fn masked_src(&self, l: usize, s: Src) -> Masked<'_> {
        Masked {
            bits: self.src_bits(l, s),
            mask: self.src_mask(l, s),
        }
    }

    /// Non-zero word mask of a neighbour source in layer `l`.
    #[inline]
    pub fn src_mask(&self, l: usize, s: Src) -> &[u64] {
        let mw = self.mw;
        match s {
            Src::Real(e) => self.mask_of(l, e as usize),
            Src::Top => &self.nz_top[l * mw..(l + 1) * mw],
            Src::Bottom => &self.nz_bottom[l * mw..(l + 1) * mw],
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
        let mw = self.mw;
        let (ma, mb) = ((a * self.n_ent + e) * mw, (b * self.n_ent + e) * mw);
        for k in 0..mw {
            self.nz.swap(ma + k, mb + k);
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
            } else {
                self.refresh_mask(a, e);
                self.refresh_mask(b, e);
            }
        }
    }

    /// Permutes the displayed positions of entity `e` in layer `l`: the bit at old position
    /// `s` in `lo..lo + new_pos.len()` moves to `new_pos[s - lo]` (a permutation of that
    /// span). Only the entity's set bits in the span are visited. An entity with no bit in
    /// the span is unchanged, so a caller may skip it.
    pub fn permute_entity(
        &mut self,
        l: usize,
        e: usize,
        lo: usize,
        new_pos: &[u32],
        scratch: &mut Vec<u32>,
    ) {
        let (w, pad) = (self.w, self.pad);
        let base = (l * self.n_ent + e) * w;
        let (a, b) = (pad + lo, pad + lo + new_pos.len());
        let (wa, wb) = (a / 64, (b - 1) / 64);
        // the span's bits of word k
        let span = |k: usize| {
            let from = if k == wa { a % 64 } else { 0 };
            let to = if k == wb { (b - 1) % 64 + 1 } else { 64 };
            (u64::MAX >> (64 - (to - from))) << from
        };
        let real = &mut self.real[base..base + w];
        // read (and clear) every bit of the span before setting any: a bit's new position
        // may lie in a word not read yet
        scratch.clear();
        for (k, word) in real.iter_mut().enumerate().take(wb + 1).skip(wa) {
            let mut bits = *word & span(k);
            *word &= !span(k);
            while bits != 0 {
                let i = k * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                scratch.push(new_pos[i - a]);
            }
        }
        for &p in scratch.iter() {
            put(real, pad + p as usize, true);
        }
        if matches!(self.padding, Padding::Extension | Padding::Cyclic) {
            self.refresh_padding(l, e);
        } else {
            let padded = &mut self.padded[base..base + w];
            for k in wa..=wb {
                padded[k] = (padded[k] & !span(k)) | (real[k] & span(k));
            }
            let mw = self.mw;
            let nz = &mut self.nz[(l * self.n_ent + e) * mw..(l * self.n_ent + e + 1) * mw];
            for k in wa..=wb {
                if padded[k] == 0 {
                    nz[k / 64] &= !(1u64 << (k % 64));
                } else {
                    nz[k / 64] |= 1u64 << (k % 64);
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
/// The masks of `x` and `y` mark their non-zero words (see [`shift_counts_masked`]).
/// Needs `pad < 64` and `weights.len() == 2 pad + 1 <= 127`.
#[inline]
pub(crate) fn weighted_overlap(x: Masked, y: Masked, weights: &[u64], pad: usize) -> u128 {
    debug_assert!(pad < 64 && weights.len() == 2 * pad + 1);
    // a counts array no longer than needed: zeroing 127 counts per pair showed in profiles
    match weights.len() {
        0..=7 => weighted_overlap_n::<7>(x, y, weights, pad),
        8..=31 => weighted_overlap_n::<31>(x, y, weights, pad),
        _ => weighted_overlap_n::<127>(x, y, weights, pad),
    }
}

#[inline(always)]
fn weighted_overlap_n<const N: usize>(x: Masked, y: Masked, weights: &[u64], pad: usize) -> u128 {
    let mut counts = [0u32; N];
    let counts = &mut counts[..weights.len()];
    shift_counts_masked(x, y, pad, counts);
    counts
        .iter()
        .zip(weights)
        .map(|(&c, &w)| u128::from(c) * u128::from(w))
        .sum()
}

/// A bit row with the mask of its non-zero words (see [`View::nz`]).
#[derive(Clone, Copy)]
pub(crate) struct Masked<'a> {
    pub bits: &'a [u64],
    pub mask: &'a [u64],
}

/// [`shift_counts`] visiting only the words where `x` and the words next to them in `y`
/// can be non-zero: their masks mark (at least) the non-zero words of `x` and `y`.
///
/// On x86-64 CPUs with the POPCNT instruction (all since 2008) the counts use it: the
/// baseline target counts bits with a dozen shifts and multiplies, which made this the
/// hottest loop of the search.
#[inline]
pub(crate) fn shift_counts_masked(x: Masked, y: Masked, pad: usize, counts: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    if vastml_spatial::simd_allowed() && std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT (checked above)
        unsafe { shift_counts_masked_popcnt(x, y, pad, counts) };
        return;
    }
    shift_counts_masked_body(x, y, pad, counts);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn shift_counts_masked_popcnt(x: Masked, y: Masked, pad: usize, counts: &mut [u32]) {
    shift_counts_masked_body(x, y, pad, counts);
}

#[inline(always)]
fn shift_counts_masked_body(x: Masked, y: Masked, pad: usize, counts: &mut [u32]) {
    let (Masked { bits: x, mask: mx }, Masked { bits: y, mask: my }) = (x, y);
    debug_assert!(pad < 64 && counts.len() == 2 * pad + 1 && mx.len() == my.len());
    let nw = x.len();
    let nm = my.len();
    for k in 0..nm {
        // word i of x meets words i - 1, i, i + 1 of y
        let below = if k > 0 { my[k - 1] >> 63 } else { 0 };
        let above = if k + 1 < nm { my[k + 1] << 63 } else { 0 };
        let near = my[k] | (my[k] << 1) | (my[k] >> 1) | below | above;
        let mut hits = mx[k] & near;
        while hits != 0 {
            let i = k * 64 + hits.trailing_zeros() as usize;
            hits &= hits - 1;
            let xw = x[i];
            if xw == 0 {
                // the mask marks padded words: with ZerosAndOnes padding word 0 always
                continue;
            }
            let lo = if i > 0 { y[i - 1] } else { 0 };
            let mid = y[i];
            let hi = if i + 1 < nw { y[i + 1] } else { 0 };
            shift_word(xw, lo, mid, hi, pad, counts);
        }
    }
}

/// `counts[j] += |xw ∩ (word of y shifted by j − pad)|` for one word, given the words of y
/// below, at and above it.
#[inline(always)]
fn shift_word(xw: u64, lo: u64, mid: u64, hi: u64, pad: usize, counts: &mut [u32]) {
    // bit b of the word shifted by s is bit b + s of y around the word
    counts[pad] += (xw & mid).count_ones();
    let (below, above) = counts.split_at_mut(pad);
    for (s, (cb, ca)) in (1..=pad).zip(below.iter_mut().rev().zip(&mut above[1..])) {
        *ca += (xw & ((mid >> s) | (hi << (64 - s)))).count_ones();
        *cb += (xw & ((mid << s) | (lo >> (64 - s)))).count_ones();
    }
}

/// `counts[j] += |x ∩ shift(y, j − pad)|` for j in 0..=2 pad (y read as 0 outside its
/// words), in one pass over the words. Needs `pad < 64` and `counts.len() == 2 pad + 1`.
/// The oracle of [`shift_counts_masked`].
#[cfg(test)]
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
        // its own shift per offset (not `shift_word`), to stay an independent oracle
        for (j, c) in counts.iter_mut().enumerate() {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn mask(bits: &[u64]) -> Vec<u64> {
        let mut m = vec![0; words(bits.len())];
        mask_into(bits, &mut m);
        m
    }

    /// Words with a few random bits, most of them zero, so that a word skipped wrongly (at a
    /// mask-word boundary: 64 words) changes the counts.
    fn sparse_words(n: usize, seed: u64) -> Vec<u64> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                match s % 4 {
                    0 => s.rotate_left(11) & s.rotate_left(29),
                    1 => 1u64 << (s % 64) | 1u64 << 63,
                    _ => 0,
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn masked_counts_equal_the_full_scan(
            nw in 1usize..200, pad in 0usize..64, sx in any::<u64>(), sy in any::<u64>(),
        ) {
            let (x, y) = (sparse_words(nw, sx), sparse_words(nw, sy));
            let mut full = vec![0u32; 2 * pad + 1];
            let mut fast = full.clone();
            shift_counts(&x, &y, pad, &mut full);
            let (mx, my) = (mask(&x), mask(&y));
            let m = |bits, mask| Masked { bits, mask };
            shift_counts_masked(m(&x, &mx), m(&y, &my), pad, &mut fast);
            prop_assert_eq!(full, fast);
        }
    }

    #[test]
    fn bits_across_a_mask_word_boundary_are_counted() {
        // x's only bit is the first of word 64, y's the last of word 63: one apart
        let (mut x, mut y) = (vec![0u64; 130], vec![0u64; 130]);
        x[64] = 1;
        y[63] = 1 << 63;
        let (mx, my) = (mask(&x), mask(&y));
        let (xm, ym) = (
            Masked {
                bits: &x,
                mask: &mx,
            },
            Masked {
                bits: &y,
                mask: &my,
            },
        );
        let mut c = [0u32; 3];
        shift_counts_masked(xm, ym, 1, &mut c);
        assert_eq!(c, [1, 0, 0]);
        let mut c = [0u32; 3];
        shift_counts_masked(ym, xm, 1, &mut c);
        assert_eq!(c, [0, 0, 1]);
    }
}

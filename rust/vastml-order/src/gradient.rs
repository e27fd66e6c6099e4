//! Branch and bound for the anti-Robinson gradient criteria of a dissimilarity matrix
//! (Brusco & Stahl; R seriation's BBURCG and BBWRCG).
//!
//! For an order ψ the within-row-and-column gradient is
//! Σ_{i<k<j} f(d(ψi,ψj) − d(ψi,ψk)) + f(d(ψi,ψj) − d(ψk,ψj)), with f = sign (unweighted) or
//! the identity (weighted); it is maximised. Each triple only cares which of its objects is in
//! the middle, so an order and its reversal score the same.
//!
//! The search places objects from the left. With a prefix P placed and U unplaced:
//!
//! * triples inside P and triples with two objects of P and one of U are exact (the unplaced
//!   object comes last, the later placed one is the middle);
//! * a triple (i ∈ P, a, b ∈ U) has its middle decided by which of a, b comes first, one choice
//!   shared by every i: the bound takes max(Σ_i g(i,a,b), Σ_i g(i,b,a)) per pair (Brusco &
//!   Stahl's bound, kept incrementally in O(n²) per node);
//! * a triple inside U gets the best of its three middles.
//!
//! Pruning, besides the bound:
//!
//! * **symmetry**: of an order and its reversal only the one with object `a` before object `b`
//!   is searched (a, b = the ends of the heuristic incumbent, whose reversed subtree is the one
//!   worth cutting);
//! * **insertion test** (Brusco & Stahl): if moving the last placed object to an earlier place
//!   of the prefix strictly improves the triples it changes (placed and unplaced alike), the
//!   prefix is dominated;
//! * **prefix dominance**: the value of a completion only depends on the prefix through
//!   F = (triples inside P) + (triples with two in P, one in U); a prefix whose set was already
//!   seen with an F at least as large (and then fully searched or itself dominated) is cut.
//!   Kept in a per-thread memo.
//!
//! The incumbent starts from a multi-start insertion local search, and the tree is searched in
//! parallel over the first two objects with a shared atomic incumbent. Children are bounded
//! and insertion-tested from their parent's frame; only survivors get a frame of their own.
//!
//! The result does not depend on the thread count or timing (unless cancelled): among the
//! optimal orders it is the heuristic incumbent if that is optimal, else the first one (in
//! the search's own child order) of the subtree with the smallest first two objects. Each
//! subtree has a rank (0 for the heuristic, then the subtrees by their first two objects);
//! the shared incumbent keeps its finder's rank next to its value in one atomic word and each
//! memo entry keeps the rank of the subtree that made it. A tie (within the tolerance of
//! "strictly better") is cut only against a find or a memo entry of the same or a higher
//! rank; anything strictly better cuts whoever found it. The subtrees are taken in rank order
//! by the threads, so most ties meet a higher-ranked find. With real-valued dissimilarities
//! this holds as long as no two orders' values differ by less than the tolerance (about
//! 1e-11 relative) without being equal; it is exact for the unweighted criterion and for
//! integer dissimilarities.
//!
//! From [`SETS_MIN`] to [`SETS_MAX`] objects both criteria are instead solved by a bounded
//! dynamic programme over the sets of placed objects with a meet in the middle (`dp`): the
//! value of a completion only depends on the prefix through its set, so each set is kept once
//! with its best chain, and only sets up to half of the objects are needed. The weighted
//! criterion is also a sum over the cuts of the prefixes (see `weighted_dp`): up to
//! [`DP_MAX`] objects it is solved by the plain O(2^n n) dynamic programme.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_pcg::Pcg64;
use rayon::prelude::*;

use crate::error::{OrderError, invalid};

mod dp;

/// Unweighted (sign) or weighted (difference) gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gradient {
    /// f = sign: BBURCG.
    Unweighted,
    /// f = identity: BBWRCG.
    Weighted,
}

/// Result of [`gradient_order`].
#[derive(Debug, Clone, PartialEq)]
pub struct GradientResult {
    /// An optimal order.
    pub order: Vec<usize>,
    /// Its gradient value (maximised).
    pub value: f64,
    /// Nodes visited.
    pub nodes: u64,
    /// Value of the heuristic incumbent the search started from.
    pub heuristic_value: f64,
}

struct Tables {
    n: usize,
    /// g[(a * n + m) * n + c]: value of the triple with a first, m in the middle, c last
    /// (symmetric in a and c).
    g: Vec<f64>,
    /// best middle of an unordered triple.
    best3: Vec<f64>,
    /// best4[((x * n + a) * n + b) * n + c]: best order of the quadruple {x, a, b, c}
    /// (sum of its four triples; symmetric in the four indices), for n <= [`QUAD_MAX`]
    /// (empty otherwise).
    best4: Vec<f64>,
    /// tolerance of "strictly better".
    eps: f64,
    /// whether f is the identity (BBWRCG).
    weighted: bool,
}

/// Largest n with the quadruple table (n⁴ values).
const QUAD_MAX: usize = 40;

impl Tables {
    fn new(d: &[f64], n: usize, kind: Gradient) -> Self {
        let f = |x: f64| match kind {
            Gradient::Unweighted => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            Gradient::Weighted => x,
        };
        let mut g = vec![0.0; n * n * n];
        for a in 0..n {
            for m in 0..n {
                for c in 0..n {
                    if a != m && a != c && m != c {
                        g[(a * n + m) * n + c] =
                            f(d[a * n + c] - d[a * n + m]) + f(d[a * n + c] - d[m * n + c]);
                    }
                }
            }
        }
        let mut best3 = vec![0.0; n * n * n];
        let mut scale = 0.0f64;
        for a in 0..n {
            for b in 0..n {
                for c in 0..n {
                    let v = g[(b * n + a) * n + c]
                        .max(g[(a * n + b) * n + c])
                        .max(g[(a * n + c) * n + b]);
                    best3[(a * n + b) * n + c] = v;
                    scale += v.abs();
                }
            }
        }
        let eps = match kind {
            Gradient::Unweighted => 0.5,
            Gradient::Weighted => 1e-11 * scale.max(1.0),
        };
        let mut t = Self {
            n,
            g,
            best3,
            best4: Vec::new(),
            eps,
            weighted: kind == Gradient::Weighted,
        };
        if (4..=QUAD_MAX).contains(&n) {
            t.best4 = t.quads();
        }
        t
    }

    /// The best value of each quadruple over its 12 orders (up to reversal).
    fn quads(&self) -> Vec<f64> {
        let n = self.n;
        const PERMS: [[usize; 4]; 12] = [
            [0, 1, 2, 3],
            [0, 1, 3, 2],
            [0, 2, 1, 3],
            [0, 2, 3, 1],
            [0, 3, 1, 2],
            [0, 3, 2, 1],
            [1, 0, 2, 3],
            [1, 0, 3, 2],
            [1, 2, 0, 3],
            [1, 3, 0, 2],
            [2, 0, 1, 3],
            [2, 1, 0, 3],
        ];
        let mut out = vec![0.0; n * n * n * n];
        let idx = |x: usize, a: usize, b: usize, c: usize| ((x * n + a) * n + b) * n + c;
        for a in 0..n {
            for b in a + 1..n {
                for c in b + 1..n {
                    for d in c + 1..n {
                        let q = [a, b, c, d];
                        let mut best = f64::NEG_INFINITY;
                        for p in &PERMS {
                            let o = [q[p[0]], q[p[1]], q[p[2]], q[p[3]]];
                            let v = self.g(o[0], o[1], o[2])
                                + self.g(o[0], o[1], o[3])
                                + self.g(o[0], o[2], o[3])
                                + self.g(o[1], o[2], o[3]);
                            best = best.max(v);
                        }
                        // the table is symmetric: every permutation of the four indices
                        for &p0 in &q {
                            for &p1 in &q {
                                for &p2 in &q {
                                    for &p3 in &q {
                                        if p0 != p1
                                            && p0 != p2
                                            && p0 != p3
                                            && p1 != p2
                                            && p1 != p3
                                            && p2 != p3
                                        {
                                            out[idx(p0, p1, p2, p3)] = best;
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
    #[inline]
    fn g(&self, a: usize, m: usize, c: usize) -> f64 {
        self.g[(a * self.n + m) * self.n + c]
    }
}

/// Gradient value of an order.
pub fn gradient_value(d: &[f64], n: usize, order: &[usize], kind: Gradient) -> f64 {
    let f = |x: f64| match kind {
        Gradient::Unweighted => x.signum() * f64::from(u8::from(x != 0.0)),
        Gradient::Weighted => x,
    };
    let mut v = 0.0;
    for i in 0..order.len() {
        for k in i + 1..order.len() {
            for j in k + 1..order.len() {
                let (a, m, c) = (order[i], order[k], order[j]);
                v += f(d[a * n + c] - d[a * n + m]) + f(d[a * n + c] - d[m * n + c]);
            }
        }
    }
    v
}

fn order_value(t: &Tables, order: &[usize]) -> f64 {
    let mut v = 0.0;
    for i in 0..order.len() {
        for k in i + 1..order.len() {
            for j in k + 1..order.len() {
                v += t.g(order[i], order[k], order[j]);
            }
        }
    }
    v
}

/// Change of the value when the objects at positions k and k + 1 swap.
fn adjacent_delta(t: &Tables, o: &[usize], k: usize) -> f64 {
    let (x, y) = (o[k], o[k + 1]);
    let mut d = 0.0;
    for &a in &o[..k] {
        d += t.g(a, y, x) - t.g(a, x, y);
    }
    for &c in &o[k + 2..] {
        d += t.g(y, x, c) - t.g(x, y, c);
    }
    d
}

/// Insertion local search: moves single objects to their best place until none improves.
fn insertion_local_search(t: &Tables, order: &mut [usize]) {
    let n = order.len();
    let mut work = order.to_vec();
    loop {
        let mut improved = false;
        for j in 0..n {
            let mut best = (t.eps, j);
            work.copy_from_slice(order);
            let mut acc = 0.0;
            for k in (0..j).rev() {
                acc += adjacent_delta(t, &work, k);
                work.swap(k, k + 1);
                if acc > best.0 {
                    best = (acc, k);
                }
            }
            work.copy_from_slice(order);
            acc = 0.0;
            for k in j..n - 1 {
                acc += adjacent_delta(t, &work, k);
                work.swap(k, k + 1);
                if acc > best.0 {
                    best = (acc, k + 1);
                }
            }
            let p = best.1;
            if p < j {
                order[p..=j].rotate_right(1);
                improved = true;
            } else if p > j {
                order[j..=p].rotate_left(1);
                improved = true;
            }
        }
        if !improved {
            return;
        }
    }
}

/// Best of `restarts` insertion local searches from random orders (parallel).
fn heuristic(t: &Tables, restarts: usize, seed: u64) -> (f64, Vec<usize>) {
    let n = t.n;
    (0..restarts)
        .into_par_iter()
        .map(|r| {
            let mut rng = Pcg64::seed_from_u64(seed ^ (r as u64).wrapping_mul(0x9E37_79B9));
            let mut o: Vec<usize> = (0..n).collect();
            o.shuffle(&mut rng);
            insertion_local_search(t, &mut o);
            (order_value(t, &o), r, o)
        })
        .reduce_with(|a, b| {
            if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) {
                b
            } else {
                a
            }
        })
        .map(|(v, _, o)| (v, o))
        .unwrap_or((0.0, (0..n).collect()))
}

/// Search state of one depth (prefix P placed, U unplaced).
#[derive(Clone)]
struct Frame {
    /// a[x * n + y] = Σ_{i ∈ P} g(i, x, y) for unplaced x, y.
    a: Vec<f64>,
    /// ht[z * n + y] = Σ_{u ∈ U} g(y, z, u) (transposed so that placing x subtracts the
    /// contiguous slab g(x, ·, ·)).
    ht: Vec<f64>,
    /// s2[u] = Σ_{i<j ∈ P} g(i, j, u) for unplaced u.
    s2: Vec<f64>,
    /// t3[x] = Σ best3 over the triples of U containing x, for unplaced x.
    t3: Vec<f64>,
    /// t4[x] = Σ best4 over the quadruples of U with x, for unplaced x.
    t4: Vec<f64>,
    /// Σ best3 over the unplaced triples.
    c: f64,
    /// Σ best4 over the unplaced quadruples.
    c4: f64,
    /// value of the triples inside P.
    value: f64,
}

/// Multiplicative hash of a set (the keys are bit masks).
#[derive(Default)]
struct MaskHasher(u64);

impl std::hash::Hasher for MaskHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (x ^ x >> 29).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 ^= self.0 >> 32;
    }
}

/// Prefix-dominance memo: placed set -> (largest F seen, rank of the subtree that saw it).
type Memo = HashMap<u64, (f64, u64), std::hash::BuildHasherDefault<MaskHasher>>;

/// Entries of each thread's prefix-dominance memo.
const MEMO_CAPACITY: usize = 1 << 21;

/// Bits of a rank in the incumbent's word: 0 for the heuristic, then the subtrees (at most
/// 64 * 63 of them) from 1.
const RANK_BITS: u32 = 12;
const RANK_MASK: u64 = (1 << RANK_BITS) - 1;

/// The shared incumbent: its value and its finder's rank in one atomic word, so that a
/// reader never pairs a value with another find's rank. The word is the value's bits mapped
/// to an unsigned integer of the same order, with the low [`RANK_BITS`] replaced by the
/// rank; the value it gives back is rounded down by at most 2^-40 of itself, far below the
/// tolerance of "strictly better".
struct Incumbent {
    word: AtomicU64,
    /// The incumbent order (written under the lock with the word).
    order: Mutex<Vec<usize>>,
    eps: f64,
}

impl Incumbent {
    fn new(value: f64, rank: u64, order: Vec<usize>, eps: f64) -> Self {
        Self {
            word: AtomicU64::new(Self::pack(value, rank)),
            order: Mutex::new(order),
            eps,
        }
    }

    fn pack(value: f64, rank: u64) -> u64 {
        // -inf would round down to a NaN: the lowest finite value stands for "nothing yet"
        let b = value.max(f64::MIN).to_bits();
        let ordered = if b >> 63 == 0 { b | 1 << 63 } else { !b };
        ordered & !RANK_MASK | rank
    }

    /// (value, rank) of the incumbent.
    fn load(&self) -> (f64, u64) {
        let w = self.word.load(Ordering::Relaxed);
        let ordered = w & !RANK_MASK;
        let b = if ordered >> 63 == 1 {
            ordered & !(1 << 63)
        } else {
            !ordered
        };
        (f64::from_bits(b), w & RANK_MASK)
    }

    /// Whether a node of subtree `rank` whose completions are worth at most `bound` can be
    /// cut: the incumbent is strictly better, or ties and was found by an equal or higher
    /// (smaller) rank.
    fn cuts(&self, bound: f64, rank: u64) -> bool {
        let (v, r) = self.load();
        if r <= rank {
            bound <= v + self.eps
        } else {
            bound < v - self.eps
        }
    }

    /// Offers a complete order of value `value` found by subtree `rank`: it replaces the
    /// incumbent when strictly better, or when it ties and ranks higher.
    fn offer(&self, value: f64, rank: u64, order: &[usize]) {
        let Ok(mut o) = self.order.lock() else {
            return;
        };
        let (v, r) = self.load();
        if value > v + self.eps || (value >= v - self.eps && rank < r) {
            self.word.store(Self::pack(value, rank), Ordering::Relaxed);
            o.clear();
            o.extend_from_slice(order);
        }
    }
}

struct Shared<'a> {
    t: &'a Tables,
    best: Incumbent,
    cancel: &'a AtomicBool,
    cancelled: AtomicBool,
    nodes: AtomicU64,
    /// symmetry: `sym.0` must come before `sym.1`.
    sym: (usize, usize),
}

struct Worker<'a, 'b> {
    s: &'a Shared<'b>,
    frames: Vec<Frame>,
    prefix: Vec<usize>,
    used: u64,
    nodes: u64,
    memo: &'a mut Memo,
    /// Rank of the subtree being searched.
    rank: u64,
    /// Best value this subtree has found (its first find of a value wins ties).
    own: f64,
}

impl Worker<'_, '_> {
    /// Whether a node whose completions are worth at most `bound` can be cut: this
    /// subtree's own find, or the shared incumbent's rule (see [`Incumbent::cuts`]).
    fn cuts(&self, bound: f64) -> bool {
        bound <= self.own + self.s.t.eps || self.s.best.cuts(bound, self.rank)
    }

    /// Fills frame `k + 1` from frame `k` with `x` placed at position k (`self.used` does
    /// not contain `x` yet).
    fn place(&mut self, k: usize, x: usize) {
        let t = self.s.t;
        let n = t.n;
        let (lo, hi) = self.frames.split_at_mut(k + 1);
        let (f, nf) = (&lo[k], &mut hi[0]);
        let used = self.used | 1 << x;
        nf.value = f.value + f.s2[x];
        nf.c = f.c - f.t3[x];
        nf.c4 = f.c4 - f.t4[x];
        let gx = &t.g[x * n * n..(x + 1) * n * n];
        // whole-matrix updates: contiguous, and the rows of placed objects are never read
        for ((na, &oa), &gv) in nf.a.iter_mut().zip(&f.a).zip(gx) {
            *na = oa + gv;
        }
        for ((nh, &oh), &gv) in nf.ht.iter_mut().zip(&f.ht).zip(gx) {
            *nh = oh - gv;
        }
        let ax = &f.a[x * n..(x + 1) * n];
        for ((ns, &os), &av) in nf.s2.iter_mut().zip(&f.s2).zip(ax) {
            *ns = os + av;
        }
        let all = u64::MAX >> (64 - n);
        let un = !used & all;
        let mut fy = un;
        while fy != 0 {
            let y = fy.trailing_zeros() as usize;
            fy &= fy - 1;
            let others = un & !(1 << y);
            let b3 = &t.best3[(y * n + x) * n..(y * n + x + 1) * n];
            let mut s3 = 0.0;
            let mut fc = others;
            while fc != 0 {
                s3 += b3[fc.trailing_zeros() as usize];
                fc &= fc - 1;
            }
            nf.t3[y] = f.t3[y] - s3;
            if !t.best4.is_empty() {
                let q = &t.best4[(y * n + x) * n * n..(y * n + x + 1) * n * n];
                let mut s4 = 0.0;
                let mut fc = others;
                while fc != 0 {
                    let c = fc.trailing_zeros() as usize;
                    fc &= fc - 1;
                    let row = &q[c * n..(c + 1) * n];
                    let mut fd = fc;
                    while fd != 0 {
                        s4 += row[fd.trailing_zeros() as usize];
                        fd &= fd - 1;
                    }
                }
                nf.t4[y] = f.t4[y] - s4;
            }
        }
    }

    /// Bound on the triples inside U plus the (placed, unplaced, unplaced) triples: every
    /// unplaced triple takes its best order of its own middle plus its share 1/(u-2) of the
    /// three pair terms that order implies.
    fn joint_bound(&self, m: usize) -> f64 {
        let t = self.s.t;
        let n = t.n;
        let f = &self.frames[m];
        let un: Vec<usize> = (0..n).filter(|&v| self.used >> v & 1 == 0).collect();
        let w = 1.0 / (un.len() - 2) as f64;
        let mut total = 0.0;
        for (i, &a) in un.iter().enumerate() {
            for (j, &b) in un.iter().enumerate().skip(i + 1) {
                let (ab, ba) = (f.a[a * n + b] * w, f.a[b * n + a] * w);
                for &c in &un[j + 1..] {
                    let (ac, ca) = (f.a[a * n + c] * w, f.a[c * n + a] * w);
                    let (bc, cb) = (f.a[b * n + c] * w, f.a[c * n + b] * w);
                    let (gb, ga, gc) = (t.g(a, b, c), t.g(b, a, c), t.g(a, c, b));
                    let v = (gb + ab + ac + bc)
                        .max(gb + cb + ca + ba)
                        .max(ga + ba + bc + ac)
                        .max(ga + ca + cb + ab)
                        .max(gc + ac + ab + cb)
                        .max(gc + bc + ba + ca);
                    total += v;
                }
            }
        }
        total
    }

    /// Brusco & Stahl's insertion test for the unplaced object `r` appended to the prefix of
    /// frame `m`: true when moving it earlier strictly improves. Uses the parent frame: the
    /// terms of `h` with `r` itself in the third place vanish.
    fn insertion_dominated(&self, m: usize, r: usize) -> bool {
        let t = self.s.t;
        let n = t.n;
        let ht = &self.frames[m].ht;
        let q = &self.prefix[..m];
        let mut delta = 0.0;
        for p in (0..m).rev() {
            let b = q[p];
            let mut d = ht[b * n + r] - ht[r * n + b];
            for &x in &q[..p] {
                d += t.g(x, r, b) - t.g(x, b, r);
            }
            for &b2 in &q[p + 1..] {
                d += t.g(r, b, b2) - t.g(b, b2, r);
            }
            delta += d;
            if delta > t.eps {
                return true;
            }
        }
        false
    }

    /// True when moving an earlier object of the prefix to its end (after the last placed
    /// one) strictly improves. Moves that do not cross the last placed object were tested by
    /// the ancestors: their change does not depend on it.
    fn move_to_end_dominated(&self, m: usize) -> bool {
        let t = self.s.t;
        let n = t.n;
        let ht = &self.frames[m].ht;
        let h = |y: usize, z: usize| ht[z * n + y];
        let q = &self.prefix;
        for p in (0..m - 2).rev() {
            let b = q[p];
            let blk = &q[p + 1..m];
            let mut d = 0.0;
            for (i, &c) in blk.iter().enumerate() {
                d += h(c, b) - h(b, c);
                for &x in &q[..p] {
                    d += t.g(x, c, b) - t.g(x, b, c);
                }
                for &c2 in &blk[i + 1..] {
                    d += t.g(c, c2, b) - t.g(b, c, c2);
                }
            }
            if d > t.eps {
                return true;
            }
        }
        false
    }

    /// Brusco & Stahl's interchange test: true when swapping the last placed object with an
    /// earlier one (not its neighbour) strictly improves.
    fn interchange_dominated(&self, m: usize) -> bool {
        let t = self.s.t;
        let n = t.n;
        let ht = &self.frames[m].ht;
        let h = |y: usize, z: usize| ht[z * n + y];
        let q = &self.prefix;
        let r = q[m - 1];
        for p in (0..m - 2).rev() {
            let s = q[p];
            let blk = &q[p + 1..m - 1];
            let mut d = h(r, s) - h(s, r);
            for &x in &q[..p] {
                d += t.g(x, r, s) - t.g(x, s, r);
                for &b in blk {
                    d += t.g(x, r, b) - t.g(x, s, b) + t.g(x, b, s) - t.g(x, b, r);
                }
            }
            for (i, &b1) in blk.iter().enumerate() {
                d += h(r, b1) - h(s, b1) + h(b1, s) - h(b1, r);
                for &b2 in &blk[i + 1..] {
                    d += t.g(r, b1, b2) - t.g(s, b1, b2) + t.g(b1, b2, s) - t.g(b1, b2, r);
                }
            }
            if d > t.eps {
                return true;
            }
        }
        false
    }

    /// Upper bound on every completion of the prefix of frame `m` followed by the unplaced
    /// `x`, from frame `m` alone (the child frame is never built for pruned children):
    /// exact triples with two placed objects, the pair-coupled bound on the (placed,
    /// unplaced, unplaced) triples and the better of the triple and quadruple bounds on the
    /// triples inside U. `un` lists the unplaced objects of frame `m` (with `x`), `s2sum` is
    /// Σ_{u ∈ un} s2[u]. Exact when one object remains after `x`.
    fn child_bound(&self, m: usize, x: usize, un: &[usize], s2sum: f64) -> f64 {
        let t = self.s.t;
        let n = t.n;
        let f = &self.frames[m];
        let ax = &f.a[x * n..(x + 1) * n];
        let mut fv = f.value + s2sum;
        for &v in un {
            fv += ax[v];
        }
        let gx = &t.g[x * n * n..(x + 1) * n * n];
        let mut pairs = 0.0;
        for (i, &p) in un.iter().enumerate() {
            if p == x {
                continue;
            }
            let (ap, gp) = (&f.a[p * n..(p + 1) * n], &gx[p * n..(p + 1) * n]);
            for &q in &un[i + 1..] {
                if q != x {
                    pairs += (ap[q] + gp[q]).max(f.a[q * n + p] + gx[q * n + p]);
                }
            }
        }
        let left = un.len() - 1;
        let mut rest = f.c - f.t3[x];
        if !t.best4.is_empty() && left >= 4 {
            rest = rest.min((f.c4 - f.t4[x]) / (left - 3) as f64);
        }
        fv + pairs + rest
    }

    /// Expands the node of frame `m` (`only`: the one child to consider): children are
    /// bounded and insertion-tested from this frame, and only the survivors are placed.
    fn expand(&mut self, m: usize, only: Option<usize>) {
        let t = self.s.t;
        let n = t.n;
        let un: Vec<usize> = (0..n).filter(|&v| self.used >> v & 1 == 0).collect();
        let s2sum: f64 = un.iter().map(|&v| self.frames[m].s2[v]).sum();
        let mut kids: Vec<(f64, usize, f64)> = Vec::with_capacity(un.len());
        for &x in &un {
            if only.is_some_and(|o| o != x) {
                continue;
            }
            if x == self.s.sym.1 && self.used >> self.s.sym.0 & 1 == 0 {
                continue;
            }
            self.nodes += 1;
            let bound = self.child_bound(m, x, &un, s2sum);
            if un.len() == 2 {
                // a complete order: the bound is its value
                if !self.cuts(bound) {
                    let last = un[usize::from(un[0] == x)];
                    self.prefix.extend([x, last]);
                    self.own = bound;
                    self.s.best.offer(bound, self.rank, &self.prefix);
                    self.prefix.truncate(m);
                }
                continue;
            }
            if self.cuts(bound) {
                continue;
            }
            if m >= 1 && self.insertion_dominated(m, x) {
                continue;
            }
            kids.push((self.frames[m].s2[x], x, bound));
        }
        kids.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, x, bound) in kids {
            if self.cuts(bound) {
                continue;
            }
            self.place(m, x);
            self.prefix.push(x);
            self.used |= 1 << x;
            self.dfs(m + 1);
            self.used &= !(1 << x);
            self.prefix.pop();
        }
    }

    /// A node that passed its parent's bound and insertion test.
    fn dfs(&mut self, m: usize) {
        if self.nodes % 1024 < 16 {
            if self.s.cancel.load(Ordering::Relaxed) {
                self.s.cancelled.store(true, Ordering::Relaxed);
            }
            if self.s.cancelled.load(Ordering::Relaxed) {
                return;
            }
        }
        let t = self.s.t;
        let n = t.n;
        if m >= 3 && self.move_to_end_dominated(m) {
            return;
        }
        if m >= 3 && self.interchange_dominated(m) {
            return;
        }
        let f = &self.frames[m];
        let mut fval = f.value;
        for u in 0..n {
            if self.used >> u & 1 == 0 {
                fval += f.s2[u];
            }
        }
        // the joint bound pays for itself on the weighted criterion only (measured)
        if t.weighted && n - m >= 3 && self.cuts(fval + self.joint_bound(m)) {
            return;
        }
        if m >= 3 && m + 2 < n {
            // a strictly larger F cuts whoever saw it; a tie only when seen by this or a
            // higher-ranked subtree (see the module documentation)
            let rank = self.rank;
            match self.memo.get_mut(&self.used) {
                Some(&mut (v, r)) if v > fval + t.eps || (v >= fval - t.eps && r <= rank) => {
                    return;
                }
                Some(e) => *e = (fval, rank),
                None => {
                    if self.memo.len() < MEMO_CAPACITY {
                        self.memo.insert(self.used, (fval, rank));
                    }
                }
            }
        }
        self.expand(m, None);
    }
}

/// The frame with nothing placed.
fn root_frame(t: &Tables) -> Frame {
    let n = t.n;
    let mut root = Frame {
        a: vec![0.0; n * n],
        ht: vec![0.0; n * n],
        s2: vec![0.0; n],
        t3: vec![0.0; n],
        t4: vec![0.0; n],
        c: 0.0,
        c4: 0.0,
        value: 0.0,
    };
    for z in 0..n {
        for y in 0..n {
            root.ht[z * n + y] = (0..n).map(|u| t.g(y, z, u)).sum();
        }
    }
    for a in 0..n {
        for b in a + 1..n {
            for c in b + 1..n {
                let v = t.best3[(a * n + b) * n + c];
                root.c += v;
                for x in [a, b, c] {
                    root.t3[x] += v;
                }
                if !t.best4.is_empty() {
                    for d4 in c + 1..n {
                        let v = t.best4[((a * n + b) * n + c) * n + d4];
                        root.c4 += v;
                        for x in [a, b, c, d4] {
                            root.t4[x] += v;
                        }
                    }
                }
            }
        }
    }
    root
}

/// The order maximising the gradient criterion of the dissimilarity matrix `d` (n x n,
/// row-major, symmetric), by branch and bound, parallel over the first two objects.
///
/// # Errors
/// A non-square or asymmetric or non-finite matrix, more than 64 objects, or cancellation.
pub fn gradient_order(
    d: &[f64],
    n: usize,
    kind: Gradient,
    cancel: &AtomicBool,
) -> Result<GradientResult, OrderError> {
    if kind == Gradient::Weighted && (3..=DP_MAX).contains(&n) {
        validate(d, n)?;
        return weighted_dp(d, n, cancel);
    }
    if (SETS_MIN..=SETS_MAX).contains(&n) {
        validate(d, n)?;
        return sets_order(d, n, kind, cancel);
    }
    gradient_order_with(d, n, kind, cancel, 20 + 2 * n)
}

/// Smallest n solved by the bounded dynamic programme over sets (`dp`; below, the branch
/// and bound is as fast).
pub const SETS_MIN: usize = 16;
/// Largest n of the bounded dynamic programme over sets (sets are 32-bit masks); larger n use
/// the branch and bound.
pub const SETS_MAX: usize = 32;

/// The heuristic incumbent, then the bounded dynamic programme over sets with a meet in the
/// middle ([`dp::bounded_dp`]) to improve it or prove it optimal.
fn sets_order(
    d: &[f64],
    n: usize,
    kind: Gradient,
    cancel: &AtomicBool,
) -> Result<GradientResult, OrderError> {
    let t = Tables::new(d, n, kind);
    let (init_value, init) = heuristic(&t, 20 + 2 * n, 0x5eed);
    let (better, stats) = dp::bounded_dp(&t, d, init_value, cancel)?;
    let order = better.map_or(init, |(_, o)| o);
    let value = order_value(&t, &order);
    Ok(GradientResult {
        order,
        value,
        nodes: stats.kept.iter().map(|&k| k as u64).sum(),
        heuristic_value: init_value,
    })
}

fn validate(d: &[f64], n: usize) -> Result<(), OrderError> {
    if d.len() != n * n {
        return Err(OrderError::ShapeMismatch(format!(
            "{} dissimilarities for {n} objects",
            d.len()
        )));
    }
    if n > 64 {
        return Err(invalid(
            "dissimilarities",
            format!("branch and bound handles at most 64 objects (got {n})"),
        ));
    }
    if d.iter().any(|x| !x.is_finite()) {
        return Err(invalid("dissimilarities", "must be finite"));
    }
    for a in 0..n {
        for b in 0..a {
            if (d[a * n + b] - d[b * n + a]).abs() > 1e-12 * d[a * n + b].abs().max(1.0) {
                return Err(invalid("dissimilarities", "must be symmetric"));
            }
        }
    }
    Ok(())
}

/// Largest n for which the weighted criterion is solved by the full `weighted_dp` (2^n
/// values: 8 MB at n = 20); larger n use the bounded dynamic programme (`dp`), which prunes
/// most sets.
pub const DP_MAX: usize = 20;

/// Low bits of a set handled inside one block of [`weighted_dp`].
const DP_BLOCK_BITS: usize = 16;

/// The weighted criterion (BBWRCG) exactly, by dynamic programming over the sets of placed
/// objects.
///
/// With f the identity, a pair at positions p < q is the outer pair of q - p - 1 triples
/// (weight +2), the left pair of n - 1 - q and the right pair of p (weight -1 each), so
/// the gradient is Σ_{p<q} d(ψp, ψq) (3 (q - p) - n - 1) = 3 Σ_k cut(S_k) - (n + 1) Σ d,
/// where S_k holds the first k objects and cut(S) = Σ_{i ∈ S, j ∉ S} d(i, j). The best
/// chain of prefixes is V(S) = cut(S) + max_{x ∈ S} V(S \ {x}): O(2^n n) time, 2^n
/// values. Sets are processed in blocks of their low [`DP_BLOCK_BITS`] objects, the blocks
/// in parallel by the number of high objects (a set only reads subsets with one fewer).
fn weighted_dp(d: &[f64], n: usize, cancel: &AtomicBool) -> Result<GradientResult, OrderError> {
    weighted_dp_blocks(d, n, cancel, DP_BLOCK_BITS)
}

/// [`weighted_dp`] with blocks of `block_bits` low objects.
fn weighted_dp_blocks(
    d: &[f64],
    n: usize,
    cancel: &AtomicBool,
    block_bits: usize,
) -> Result<GradientResult, OrderError> {
    let dd = |a: usize, b: usize| if a == b { 0.0 } else { d[a * n + b] };
    let lbits = n.min(block_bits);
    let hbits = n - lbits;
    let lsize = 1usize << lbits;
    let rowsum: Vec<f64> = (0..n).map(|a| (0..n).map(|b| dd(a, b)).sum()).collect();
    // cut of every set of low objects
    let mut cut_lo = vec![0.0; lsize];
    for s in 1..lsize {
        let x = s.trailing_zeros() as usize;
        let rest = s & (s - 1);
        let mut inner = 0.0;
        let mut f = rest;
        while f != 0 {
            inner += dd(f.trailing_zeros() as usize, x);
            f &= f - 1;
        }
        cut_lo[s] = cut_lo[rest] + rowsum[x] - 2.0 * inner;
    }
    let v: Vec<AtomicU64> = std::iter::repeat_with(|| AtomicU64::new(0))
        .take(1usize << n)
        .collect();
    let get = |s: usize| f64::from_bits(v[s].load(Ordering::Relaxed));
    let his: Vec<usize> = (0..1usize << hbits).collect();
    for layer in 0..=hbits {
        if cancel.load(Ordering::Relaxed) {
            return Err(OrderError::Cancelled);
        }
        his.par_iter()
            .filter(|h| h.count_ones() as usize == layer)
            .for_each_init(
                || vec![0.0; lsize],
                |cross, &h| {
                    // the high objects of the block, as object indices
                    let hset: Vec<usize> = (0..hbits)
                        .filter(|&k| h >> k & 1 == 1)
                        .map(|k| k + lbits)
                        .collect();
                    let mut cut_h = 0.0;
                    for (i, &a) in hset.iter().enumerate() {
                        cut_h += rowsum[a];
                        for &b in &hset[..i] {
                            cut_h -= 2.0 * dd(a, b);
                        }
                    }
                    let w: Vec<f64> = (0..lbits)
                        .map(|j| hset.iter().map(|&a| dd(a, j)).sum())
                        .collect();
                    cross[0] = 0.0;
                    let base = h << lbits;
                    for lo in 0..lsize {
                        if lo > 0 {
                            let x = lo.trailing_zeros() as usize;
                            cross[lo] = cross[lo & (lo - 1)] + w[x];
                        }
                        let s = base | lo;
                        if s == 0 {
                            continue;
                        }
                        let cut = cut_h + cut_lo[lo] - 2.0 * cross[lo];
                        let mut best = f64::NEG_INFINITY;
                        let mut f = s;
                        while f != 0 {
                            let bit = f & f.wrapping_neg();
                            f &= f - 1;
                            best = best.max(get(s & !bit));
                        }
                        v[s].store((cut + best).to_bits(), Ordering::Relaxed);
                    }
                },
            );
    }
    // the last object of the best chain of S is an argmax of V(S \ {x})
    let mut order = vec![0; n];
    let mut s = (1usize << n) - 1;
    for pos in (0..n).rev() {
        let mut best = (f64::NEG_INFINITY, 0);
        let mut f = s;
        while f != 0 {
            let x = f.trailing_zeros() as usize;
            f &= f - 1;
            let val = get(s & !(1 << x));
            if val > best.0 {
                best = (val, x);
            }
        }
        order[pos] = best.1;
        s &= !(1 << best.1);
    }
    let t = Tables::new(d, n, Gradient::Weighted);
    let value = order_value(&t, &order);
    Ok(GradientResult {
        order,
        value,
        nodes: 1 << n,
        heuristic_value: value,
    })
}

/// [`gradient_order`] with the number of restarts of the heuristic incumbent (0: start from
/// no incumbent, for testing the tree search alone).
///
/// # Errors
/// As [`gradient_order`].
pub fn gradient_order_with(
    d: &[f64],
    n: usize,
    kind: Gradient,
    cancel: &AtomicBool,
    restarts: usize,
) -> Result<GradientResult, OrderError> {
    validate(d, n)?;
    if n <= 2 {
        let order: Vec<usize> = (0..n).collect();
        return Ok(GradientResult {
            value: 0.0,
            order,
            nodes: 1,
            heuristic_value: 0.0,
        });
    }
    let t = Tables::new(d, n, kind);
    let (init_value, init) = if restarts > 0 {
        heuristic(&t, restarts, 0x5eed)
    } else {
        (f64::NEG_INFINITY, (0..n).collect())
    };
    let sym = (init[0].min(init[n - 1]), init[0].max(init[n - 1]));
    let threads = rayon::current_num_threads().max(1);
    let shared = Shared {
        t: &t,
        best: Incumbent::new(init_value, 0, init.clone(), t.eps),
        cancel,
        cancelled: AtomicBool::new(false),
        nodes: AtomicU64::new(0),
        sym,
    };
    let root = root_frame(&t);
    // the subtrees in rank order (rank = index + 1)
    let tasks: Vec<(usize, usize)> = (0..n)
        .flat_map(|a| (0..n).map(move |b| (a, b)))
        .filter(|&(a, b)| a != b && a != sym.1 && !(b == sym.1 && a != sym.0))
        .collect();
    // every thread takes the next subtree in rank order, keeping its memo and frames
    let next = AtomicUsize::new(0);
    (0..threads).into_par_iter().for_each(|_| {
        let mut memo = Memo::default();
        let mut w = Worker {
            s: &shared,
            frames: vec![root.clone(); n + 1],
            prefix: Vec::with_capacity(n),
            used: 0,
            nodes: 0,
            memo: &mut memo,
            rank: 0,
            own: f64::NEG_INFINITY,
        };
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= tasks.len() || shared.cancelled.load(Ordering::Relaxed) {
                break;
            }
            let (a, b) = tasks[i];
            w.rank = i as u64 + 1;
            w.own = f64::NEG_INFINITY;
            w.used = 0;
            w.place(0, a);
            w.prefix.clear();
            w.prefix.push(a);
            w.used = 1 << a;
            w.expand(1, Some(b));
        }
        shared.nodes.fetch_add(w.nodes, Ordering::Relaxed);
    });
    if shared.cancelled.load(Ordering::Relaxed) || cancel.load(Ordering::Relaxed) {
        return Err(OrderError::Cancelled);
    }
    let order = shared.best.order.into_inner().unwrap_or(init);
    let value = order_value(&t, &order);
    Ok(GradientResult {
        order,
        value,
        nodes: shared.nodes.load(Ordering::Relaxed),
        heuristic_value: init_value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exhaustive(d: &[f64], n: usize, kind: Gradient) -> f64 {
        fn rec(d: &[f64], n: usize, kind: Gradient, p: &mut Vec<usize>, best: &mut f64) {
            if p.len() == n {
                *best = best.max(gradient_value(d, n, p, kind));
                return;
            }
            for u in 0..n {
                if !p.contains(&u) {
                    p.push(u);
                    rec(d, n, kind, p, best);
                    p.pop();
                }
            }
        }
        let mut best = f64::NEG_INFINITY;
        rec(d, n, kind, &mut Vec::new(), &mut best);
        best
    }

    fn lcg(s: &mut u64) -> u64 {
        *s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *s >> 33
    }

    fn points(n: usize, s: &mut u64) -> Vec<f64> {
        let pts: Vec<[f64; 2]> = (0..n)
            .map(|_| [(lcg(s) % 1_000_000) as f64, (lcg(s) % 1_000_000) as f64])
            .collect();
        (0..n * n)
            .map(|k| {
                let (a, b) = (pts[k / n], pts[k % n]);
                ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
            })
            .collect()
    }

    /// small integer dissimilarities: many ties, the hard case for strict dominance tests
    fn ties(n: usize, s: &mut u64) -> Vec<f64> {
        let mut d = vec![0.0; n * n];
        for a in 0..n {
            for b in a + 1..n {
                let v = (lcg(s) % 4) as f64;
                d[a * n + b] = v;
                d[b * n + a] = v;
            }
        }
        d
    }

    fn check(d: &[f64], n: usize) {
        for kind in [Gradient::Unweighted, Gradient::Weighted] {
            let ex = exhaustive(d, n, kind);
            // the tree search alone (no heuristic incumbent) and with it
            for restarts in [0, 5] {
                let r = gradient_order_with(d, n, kind, &AtomicBool::new(false), restarts).unwrap();
                assert!(
                    (r.value - ex).abs() < 1e-6,
                    "{n} {kind:?} restarts {restarts}: {} vs {ex}",
                    r.value
                );
                assert!((gradient_value(d, n, &r.order, kind) - r.value).abs() < 1e-6);
                let mut o = r.order.clone();
                o.sort_unstable();
                assert_eq!(o, (0..n).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn weighted_dp_equals_exhaustive_and_branch_and_bound() {
        let mut s = 5u64;
        let no = AtomicBool::new(false);
        for n in 3..=8 {
            for k in 0..4 {
                let d = if k % 2 == 0 {
                    points(n, &mut s)
                } else {
                    ties(n, &mut s)
                };
                let ex = exhaustive(&d, n, Gradient::Weighted);
                // one block, and blocks of 2 low objects (the parallel path over high sets)
                for bits in [16, 2] {
                    let r = weighted_dp_blocks(&d, n, &no, bits).unwrap();
                    assert!(
                        (r.value - ex).abs() < 1e-6,
                        "{n} {bits}: {} vs {ex}",
                        r.value
                    );
                    assert!(
                        (gradient_value(&d, n, &r.order, Gradient::Weighted) - r.value).abs()
                            < 1e-6
                    );
                    let mut o = r.order.clone();
                    o.sort_unstable();
                    assert_eq!(o, (0..n).collect::<Vec<_>>());
                }
            }
        }
        // larger: the DP (several blocks) against the branch and bound
        for n in [12, 15] {
            let d = points(n, &mut s);
            let bb = gradient_order_with(&d, n, Gradient::Weighted, &no, 10).unwrap();
            let dp = weighted_dp_blocks(&d, n, &no, 5).unwrap();
            assert!(
                (bb.value - dp.value).abs() < 1e-6 * bb.value.abs().max(1.0),
                "{n}: {} vs {}",
                bb.value,
                dp.value
            );
            let r = gradient_order(&d, n, Gradient::Weighted, &no).unwrap();
            assert!((r.value - dp.value).abs() < 1e-6 * dp.value.abs().max(1.0));
        }
    }

    /// Best value of `prefix` followed by any order of the remaining objects.
    fn best_completion(t: &Tables, prefix: &mut Vec<usize>) -> f64 {
        let n = t.n;
        if prefix.len() == n {
            return order_value(t, prefix);
        }
        let mut best = f64::NEG_INFINITY;
        for u in 0..n {
            if !prefix.contains(&u) {
                prefix.push(u);
                best = best.max(best_completion(t, prefix));
                prefix.pop();
            }
        }
        best
    }

    /// The incrementally kept frame equals its from-scratch definition after random
    /// placements, and the child bound is >= the best completion (exact with one left).
    #[test]
    fn frames_and_child_bound() {
        let mut s = 19u64;
        let no = AtomicBool::new(false);
        for case in 0..12 {
            let n = 5 + case % 4;
            let d = if case % 3 == 0 {
                ties(n, &mut s)
            } else {
                points(n, &mut s)
            };
            for kind in [Gradient::Unweighted, Gradient::Weighted] {
                let t = Tables::new(&d, n, kind);
                let shared = Shared {
                    t: &t,
                    best: Incumbent::new(f64::NEG_INFINITY, 0, (0..n).collect(), t.eps),
                    cancel: &no,
                    cancelled: AtomicBool::new(false),
                    nodes: AtomicU64::new(0),
                    sym: (0, 1),
                };
                let mut memo = Memo::default();
                let mut w = Worker {
                    s: &shared,
                    frames: vec![root_frame(&t); n + 1],
                    prefix: Vec::new(),
                    used: 0,
                    nodes: 0,
                    memo: &mut memo,
                    rank: 1,
                    own: f64::NEG_INFINITY,
                };
                let mut perm: Vec<usize> = (0..n).collect();
                for k in (1..n).rev() {
                    perm.swap(k, (lcg(&mut s) % (k as u64 + 1)) as usize);
                }
                for m in 0..n - 1 {
                    // frame m against its definition
                    let f = &w.frames[m];
                    let (p, un): (Vec<usize>, Vec<usize>) =
                        (perm[..m].to_vec(), perm[m..].to_vec());
                    // incremental sums cancel: compare on the scale of the data
                    let scale = d.iter().fold(1.0f64, |a, &v| a.max(v.abs())) * (n * n * n) as f64;
                    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * scale;
                    assert!(close(f.value, order_value(&t, &p)));
                    for &x in &un {
                        for &y in &un {
                            let a: f64 = p.iter().map(|&i| t.g(i, x, y)).sum();
                            assert!(close(f.a[x * n + y], a));
                        }
                        let mut s2 = 0.0;
                        for i in 0..m {
                            for j in i + 1..m {
                                s2 += t.g(p[i], p[j], x);
                            }
                        }
                        assert!(close(f.s2[x], s2));
                        let rest: Vec<usize> = un.iter().copied().filter(|&v| v != x).collect();
                        let (mut t3, mut t4) = (0.0, 0.0);
                        for i in 0..rest.len() {
                            for j in i + 1..rest.len() {
                                t3 += t.best3[(x * n + rest[i]) * n + rest[j]];
                                for k in j + 1..rest.len() {
                                    t4 += t.best4[((x * n + rest[i]) * n + rest[j]) * n + rest[k]];
                                }
                            }
                        }
                        assert!(close(f.t3[x], t3));
                        assert!(close(f.t4[x], t4));
                    }
                    for y in 0..n {
                        for z in 0..n {
                            let h: f64 = un.iter().map(|&u| t.g(y, z, u)).sum();
                            assert!(close(f.ht[z * n + y], h));
                        }
                    }
                    // every child's bound against its best completion
                    if m >= 1 {
                        let s2sum: f64 = un.iter().map(|&v| f.s2[v]).sum();
                        for &x in &un {
                            let bound = w.child_bound(m, x, &un, s2sum);
                            let mut q = p.clone();
                            q.push(x);
                            let best = best_completion(&t, &mut q);
                            assert!(
                                bound >= best - 1e-9 * best.abs().max(1.0),
                                "{kind:?} n {n} m {m}: {bound} < {best}"
                            );
                            if un.len() == 2 {
                                assert!(close(bound, best));
                            }
                        }
                    }
                    let x = perm[m];
                    w.place(m, x);
                    w.prefix.push(x);
                    w.used |= 1 << x;
                }
            }
        }
    }

    #[test]
    fn equals_exhaustive() {
        let mut s = 7u64;
        for n in 3..=8 {
            for _ in 0..3 {
                check(&points(n, &mut s), n);
            }
        }
    }

    #[test]
    fn equals_exhaustive_with_ties() {
        let mut s = 11u64;
        for n in 3..=9 {
            for _ in 0..3 {
                check(&ties(n, &mut s), n);
            }
        }
    }

    fn points5(n: usize, s: &mut u64) -> Vec<f64> {
        let pts: Vec<Vec<f64>> = (0..n)
            .map(|_| (0..5).map(|_| (lcg(s) % 1_000_000) as f64 / 1e6).collect())
            .collect();
        (0..n * n)
            .map(|k| {
                let (a, b) = (&pts[k / n], &pts[k % n]);
                a.iter()
                    .zip(b)
                    .map(|(x, y)| (x - y).powi(2))
                    .sum::<f64>()
                    .sqrt()
            })
            .collect()
    }

    /// Layer sizes of the bounded DP (`DP_N=22 cargo test --release dp_layers -- --ignored
    /// --nocapture`; `DP_KIND=u` or `w` for one criterion; `DP_FILE` a raw n x n f64 matrix,
    /// e.g. the bench's).
    #[test]
    #[ignore = "measurement"]
    fn dp_layers() {
        let n: usize = std::env::var("DP_N").map_or(22, |v| v.parse().unwrap());
        let mut s = 1u64 + n as u64;
        let d = match std::env::var("DP_FILE") {
            Ok(path) => std::fs::read(path)
                .unwrap()
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            Err(_) => points5(n, &mut s),
        };
        assert_eq!(d.len(), n * n, "DP_FILE holds n * n little-endian f64");
        let no = AtomicBool::new(false);
        let kinds = match std::env::var("DP_KIND").as_deref() {
            Ok("u") => vec![Gradient::Unweighted],
            Ok("w") => vec![Gradient::Weighted],
            _ => vec![Gradient::Unweighted, Gradient::Weighted],
        };
        for kind in kinds {
            let t = Tables::new(&d, n, kind);
            let t0 = std::time::Instant::now();
            let (hv, _) = heuristic(&t, 20 + 2 * n, 0x5eed);
            let t1 = t0.elapsed().as_secs_f64();
            let (better, st) = dp::bounded_dp(&t, &d, hv, &no).unwrap();
            eprintln!(
                "{kind:?} n {n}: heuristic {hv} ({t1:.2} s) better {:?} total {:.2} s\n gen {:?}\n kept {:?}",
                better.map(|b| b.0),
                t0.elapsed().as_secs_f64(),
                st.generated,
                st.kept
            );
        }
    }

    /// Nodes and time of the tree search on 1 and 2 threads (`cargo test --release
    /// tree_nodes -- --ignored --nocapture`): generic points at n = 24 and tie-heavy data
    /// at n = 20, both criteria, with the heuristic incumbent and without (restarts 0).
    #[test]
    #[ignore = "measurement"]
    fn tree_nodes() {
        let no = AtomicBool::new(false);
        for (what, n) in [("points", 24), ("ties", 20)] {
            let mut s = 77u64 + n as u64;
            let d = if what == "points" {
                points5(n, &mut s)
            } else {
                ties(n, &mut s)
            };
            for kind in [Gradient::Unweighted, Gradient::Weighted] {
                for (threads, restarts) in [(1, 20 + 2 * n), (2, 20 + 2 * n), (1, 0), (2, 0)] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    let t0 = std::time::Instant::now();
                    let r = pool
                        .install(|| gradient_order_with(&d, n, kind, &no, restarts))
                        .unwrap();
                    eprintln!(
                        "{what} n {n} {kind:?} restarts {restarts} {threads} threads: nodes {} value {} ({:.3} s)",
                        r.nodes,
                        r.value,
                        t0.elapsed().as_secs_f64()
                    );
                }
            }
        }
    }

    /// The public entry at the sizes of the set DP agrees with the branch and bound (both
    /// criteria, with and without ties), and its order has the value it reports.
    #[test]
    fn sets_dp_equals_branch_and_bound() {
        let mut s = 41u64;
        let no = AtomicBool::new(false);
        for (n, tie) in [(SETS_MIN, false), (SETS_MIN, true), (SETS_MIN + 1, false)] {
            let d = if tie {
                ties(n, &mut s)
            } else {
                points5(n, &mut s)
            };
            for kind in [Gradient::Unweighted, Gradient::Weighted] {
                let r = gradient_order(&d, n, kind, &no).unwrap();
                let bb = gradient_order_with(&d, n, kind, &no, 10).unwrap();
                assert!(
                    (r.value - bb.value).abs() < 1e-9 * bb.value.abs().max(1.0),
                    "{kind:?} n {n}: {} vs {}",
                    r.value,
                    bb.value
                );
                assert!((gradient_value(&d, n, &r.order, kind) - r.value).abs() < 1e-6);
                let mut o = r.order.clone();
                o.sort_unstable();
                assert_eq!(o, (0..n).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn heuristic_is_a_local_optimum() {
        let mut s = 3u64;
        let n = 12;
        let d = points(n, &mut s);
        let t = Tables::new(&d, n, Gradient::Unweighted);
        let (v, o) = heuristic(&t, 4, 1);
        assert_eq!(v, order_value(&t, &o));
        // no single swap of neighbours improves
        for k in 0..n - 1 {
            let mut p = o.clone();
            p.swap(k, k + 1);
            assert!(order_value(&t, &p) <= v);
            assert_eq!(adjacent_delta(&t, &o, k), order_value(&t, &p) - v);
        }
    }
}

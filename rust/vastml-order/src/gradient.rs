//! Branch and bound for the anti-Robinson gradient criteria of a dissimilarity matrix
//! (Brusco & Stahl; R seriation's BBURCG and BBWRCG).
//!
//! For an order ψ the within-row-and-column gradient is
//! Σ_{i<k<j} f(d(ψi,ψj) − d(ψi,ψk)) + f(d(ψi,ψj) − d(ψk,ψj)), with f = sign (unweighted) or
//! the identity (weighted); it is maximised. Each triple only cares which of its objects is in
//! the middle, so an order and its reversal score the same. The bound adds to the completed
//! triples: the exact value of triples with two placed objects, the better of two middles for
//! triples with one placed object and the best of three middles for unplaced triples, all
//! maintained incrementally (O(n²) per node).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;

use crate::error::{OrderError, invalid};

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
}

struct Tables {
    n: usize,
    /// g[(a * n + m) * n + c]: value of the triple with a first, m in the middle, c last.
    g: Vec<f64>,
    /// best middle of an unordered triple.
    best3: Vec<f64>,
}

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
                    g[(a * n + m) * n + c] =
                        f(d[a * n + c] - d[a * n + m]) + f(d[a * n + c] - d[m * n + c]);
                }
            }
        }
        let mut best3 = vec![0.0; n * n * n];
        for a in 0..n {
            for b in 0..n {
                for c in 0..n {
                    let v = g[(b * n + a) * n + c]
                        .max(g[(a * n + b) * n + c])
                        .max(g[(a * n + c) * n + b]);
                    best3[(a * n + b) * n + c] = v;
                }
            }
        }
        Self { n, g, best3 }
    }
    #[inline]
    fn g(&self, a: usize, m: usize, c: usize) -> f64 {
        self.g[(a * self.n + m) * self.n + c]
    }
    #[inline]
    fn max2(&self, i: usize, a: usize, b: usize) -> f64 {
        self.g(i, a, b).max(self.g(i, b, a))
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

struct Node {
    /// s2[j]: value of the triples (placed, placed, j) for unplaced j.
    s2: Vec<f64>,
    /// s1[a * n + b]: Σ over placed i of max2(i; a, b).
    s1: Vec<f64>,
    /// best middles of the unplaced triples.
    c: f64,
}

struct Dfs<'a> {
    t: &'a Tables,
    best: &'a AtomicU64,
    cancel: &'a AtomicBool,
    nodes: u64,
    cancelled: bool,
    prefix: Vec<usize>,
    used: Vec<bool>,
    best_value: f64,
    best_order: Vec<usize>,
}

const EPS: f64 = 1e-9;

impl Dfs<'_> {
    fn global_best(&self) -> f64 {
        f64::from_bits(self.best.load(Ordering::Relaxed))
    }

    fn raise_best(&self, v: f64) {
        let mut cur = self.best.load(Ordering::Relaxed);
        while f64::from_bits(cur) < v {
            match self.best.compare_exchange_weak(
                cur,
                v.to_bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(x) => cur = x,
            }
        }
    }

    /// Places `x` at the end: returns the child node and the value it adds.
    fn place(&self, node: &Node, x: usize) -> (Node, f64) {
        let n = self.t.n;
        let gain = node.s2[x];
        let unplaced: Vec<usize> = (0..n).filter(|&u| !self.used[u] && u != x).collect();
        let mut s2 = node.s2.clone();
        for &j in &unplaced {
            // new triples (i, x, j) with i placed, and (x, a, j)... only i before x count here
            let mut add = 0.0;
            for &i in &self.prefix {
                add += self.t.g(i, x, j);
            }
            // triples (x, a, j) where a is unplaced are not complete yet: they are in s1
            s2[j] += add;
        }
        let mut s1 = node.s1.clone();
        let mut c = node.c;
        for (ai, &a) in unplaced.iter().enumerate() {
            for &b in &unplaced[ai + 1..] {
                s1[a * n + b] += self.t.max2(x, a, b);
                c -= self.t.best3[(x * n + a) * n + b];
            }
        }
        // pairs (x, j): the triples (i, x, j) moved from s1 to s2
        (Node { s2, s1, c }, gain)
    }

    fn bound(&self, node: &Node) -> f64 {
        let n = self.t.n;
        let unplaced: Vec<usize> = (0..n).filter(|&u| !self.used[u]).collect();
        let mut b = node.c;
        for (ai, &a) in unplaced.iter().enumerate() {
            b += node.s2[a];
            for &c in &unplaced[ai + 1..] {
                b += node.s1[a * n + c];
            }
        }
        b
    }

    fn dfs(&mut self, node: &Node, value: f64) {
        self.nodes += 1;
        if self.nodes % 4096 == 0 && self.cancel.load(Ordering::Relaxed) {
            self.cancelled = true;
        }
        if self.cancelled {
            return;
        }
        let n = self.t.n;
        let k = self.prefix.len();
        if k == n {
            if value > self.best_value + EPS {
                self.best_value = value;
                self.best_order = self.prefix.clone();
                self.raise_best(value);
            }
            return;
        }
        let first = self.prefix[0];
        if (0..n)
            .rev()
            .find(|&u| !self.used[u])
            .is_none_or(|u| u < first)
        {
            return;
        }
        let target = self.global_best().max(self.best_value);
        if value + self.bound(node) <= target + EPS {
            return;
        }
        let mut children: Vec<(f64, usize)> = (0..n)
            .filter(|&u| !self.used[u] && (k + 1 < n || u > first))
            .map(|u| (node.s2[u], u))
            .collect();
        children.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, u) in children {
            let (child, gain) = self.place(node, u);
            self.prefix.push(u);
            self.used[u] = true;
            self.dfs(&child, value + gain);
            self.used[u] = false;
            self.prefix.pop();
            if self.cancelled {
                return;
            }
        }
    }
}

/// The order maximising the gradient criterion of the dissimilarity matrix `d` (n x n,
/// row-major, symmetric), by branch and bound, parallel over the first object.
///
/// # Errors
/// A non-square or asymmetric or non-finite matrix, or cancellation.
pub fn gradient_order(
    d: &[f64],
    n: usize,
    kind: Gradient,
    cancel: &AtomicBool,
) -> Result<GradientResult, OrderError> {
    if d.len() != n * n {
        return Err(OrderError::ShapeMismatch(format!(
            "{} dissimilarities for {n} objects",
            d.len()
        )));
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
    if n <= 2 {
        let order: Vec<usize> = (0..n).collect();
        return Ok(GradientResult {
            value: 0.0,
            order,
            nodes: 1,
        });
    }
    let t = Tables::new(d, n, kind);
    let ident: Vec<usize> = (0..n).collect();
    let init = gradient_value(d, n, &ident, kind);
    let best = AtomicU64::new(init.to_bits());
    let found: Mutex<Vec<(usize, f64, Vec<usize>)>> = Mutex::new(Vec::new());
    let nodes = AtomicU64::new(0);
    let cancelled = AtomicBool::new(false);
    let mut c_all = 0.0;
    for a in 0..n {
        for b in a + 1..n {
            for c in b + 1..n {
                c_all += t.best3[(a * n + b) * n + c];
            }
        }
    }
    (0..n - 1).into_par_iter().for_each(|first| {
        let root = Node {
            s2: vec![0.0; n],
            s1: vec![0.0; n * n],
            c: c_all,
        };
        let mut dfs = Dfs {
            t: &t,
            best: &best,
            cancel,
            nodes: 0,
            cancelled: false,
            prefix: Vec::new(),
            used: vec![false; n],
            best_value: f64::NEG_INFINITY,
            best_order: Vec::new(),
        };
        let (child, _) = dfs.place(&root, first);
        dfs.prefix.push(first);
        dfs.used[first] = true;
        dfs.dfs(&child, 0.0);
        nodes.fetch_add(dfs.nodes, Ordering::Relaxed);
        if dfs.cancelled {
            cancelled.store(true, Ordering::Relaxed);
        }
        if !dfs.best_order.is_empty()
            && let Ok(mut f) = found.lock()
        {
            f.push((first, dfs.best_value, dfs.best_order));
        }
    });
    if cancelled.load(Ordering::Relaxed) {
        return Err(OrderError::Cancelled);
    }
    let mut found = found.into_inner().unwrap_or_default();
    found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let (order, value) = match found.into_iter().next() {
        Some((_, v, o)) if v > init + EPS => (o, v),
        _ => (ident, init),
    };
    Ok(GradientResult {
        order,
        value,
        nodes: nodes.load(Ordering::Relaxed),
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

    #[test]
    fn equals_exhaustive() {
        let mut s = 7u64;
        for n in 3..=7 {
            for _ in 0..4 {
                let pts: Vec<[f64; 2]> = (0..n)
                    .map(|_| {
                        s = s
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        [(s >> 40) as f64 / 1e6, (s >> 20 & 0xFFFFF) as f64 / 1e6]
                    })
                    .collect();
                let d: Vec<f64> = (0..n * n)
                    .map(|k| {
                        let (a, b) = (pts[k / n], pts[k % n]);
                        ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
                    })
                    .collect();
                for kind in [Gradient::Unweighted, Gradient::Weighted] {
                    let r = gradient_order(&d, n, kind, &AtomicBool::new(false)).unwrap();
                    let ex = exhaustive(&d, n, kind);
                    assert!(
                        (r.value - ex).abs() < 1e-9,
                        "{n} {kind:?}: {} vs {ex}",
                        r.value
                    );
                    assert!((gradient_value(&d, n, &r.order, kind) - r.value).abs() < 1e-9);
                }
            }
        }
    }
}

//! Adaptive multi-hyperplane machines (AMM), their online and growing (GAMM) variants, and
//! multi-class Pegasos as the one-weight-per-class special case.
//!
//! The model is `g(i, x) = max_j w_ij . x` over the weights of class i, prediction
//! `argmax_i g(i, x)` (thesis eqs. 4.1, 4.5). Training is SGD on the convex sub-problem (4.11)
//! with step `eta_t = 1 / (lambda t)` (4.12, 4.14), from `W = 0`.
//!
//! Conventions chosen where the thesis and BudgetedSVM differ (spec section 3.4):
//! - While a class has fewer than `max_weights_per_class` weights it also owns a *reserved
//!   zero weight* scoring 0, for the true class and for the wrong classes (the thesis's rule;
//!   BudgetedSVM only grows the true class). When the zero weight wins and the loss is positive
//!   it becomes a new weight (`+eta x` for the true class, `-eta x` for the top wrong class).
//!   At the cap the class has no zero weight: its best stored weight is assigned and updated
//!   (BudgetedSVM would skip the update, which stalls learning on examples unlike every
//!   stored weight). Ties go to the zero weight, and to the lowest class index. Prediction
//!   uses the same model: `g(i, x) = max(0, max_j w_ij . x)` while class i has room.
//! - With `max_weights_per_class == 1` every class has exactly one weight, always assigned and
//!   always updated: this is multi-class (Crammer-Singer) Pegasos, exactly.
//! - GAMM in batch mode: an example whose assigned weight was cloned since the last
//!   reassignment goes to the best-scoring member of that weight's family (original and
//!   clones), so the clones can specialise within the epoch (see `Amm::assigned_slot`).
//!   GAMM reads Algorithm 6 as: on a positive loss, while the true class is below its cap, with
//!   probability `p` append a copy of the assigned true-class weight (it counts against the
//!   cap), give the copy the step's update and the example, then `p <- beta p` (kept across
//!   epochs).
//! - [`AmmParams::budgetedsvm`] replaces the above by BudgetedSVM 1.2's rules (`mm_algs.cpp`
//!   v1.02, see `Amm::step_budgetedsvm` and [`Amm::epoch_with`]): one stored zero weight per
//!   class and no reserved zero weights, `t + 1` in the step and the shrink, clones only of a
//!   positive-scoring weight, taken before the update (the original keeps the update and its
//!   examples), the initial pass's pre-step assignments for the first batch epoch, no pruning
//!   in that pass. On a9a with `-B 20 -C 0.2` that lowers GAMM's 20-seed mean test error from
//!   about 15.16% to 15.06%; on the 4x4 checkerboard it leaves GAMM near AMM (22-41%).
//! - The bias is an extra constant feature of value `bias` (0 disables it), regularised like
//!   the other weights (BudgetedSVM's `BIAS_TERM`).
//!
//! Weights are stored as `scale * v` with one scale shared by all weights, so the shrink
//! `w <- (1 - 1/t) w` costs O(1) and an update O(nnz(x)) (thesis sec. 4.3.6).

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use rayon::prelude::*;

use crate::data::{Examples, Gathered, Row, Rows, check_labels, check_positive, try_reserve_rows};
use crate::error::{SvmError, invalid, shape};
use vastml_core::{Control, Halt};

/// How often (in examples) long loops look at the cancel flag.
pub(crate) const CANCEL_EVERY: usize = 1024;

/// For steps of `cost` multiply-adds each, a mask `m` such that polling the cancel flag when
/// `step & m == 0` polls about every 4 million multiply-adds (a few milliseconds) and at least
/// every [`CANCEL_EVERY`] steps: one less than a power of two, so the test costs no division.
pub(crate) fn poll_mask(cost: usize) -> usize {
    let steps = ((1usize << 22) / cost.max(1)).clamp(1, CANCEL_EVERY);
    (1usize << steps.ilog2()) - 1
}

/// Rows per parallel task of prediction; the cancel flag is polled once per block.
pub(crate) const ROW_BLOCK: usize = 256;
/// How many examples ahead an SGD pass prefetches a row of a shuffled order.
const PREFETCH_AHEAD: usize = 4;

/// Hyper-parameters of AMM / GAMM / Pegasos.
#[derive(Debug, Clone, PartialEq)]
pub struct AmmParams {
    /// Regularisation `lambda > 0`.
    pub lambda: f64,
    /// Cap on the weights of one class (`B_lim`); 1 gives multi-class Pegasos.
    pub max_weights_per_class: usize,
    /// Prune every this many steps (`k`); 0 disables pruning.
    pub prune_every: u64,
    /// Pruning aggressiveness `c >= 0`: weights are removed while the Frobenius norm of the
    /// removed set stays within `c / ((t - 1) lambda)`.
    pub prune_c: f64,
    /// Value of the constant bias feature; 0 for no bias.
    pub bias: f64,
    /// GAMM: probability of cloning the assigned true-class weight on a positive loss (`p`).
    pub clone_probability: f64,
    /// GAMM: factor applied to the clone probability after each clone (`beta`).
    pub clone_decay: f64,
    /// BudgetedSVM 1.2's rules instead of the thesis conventions (see [`Amm::epoch_with`]):
    /// each class starts with one stored zero weight and there are no reserved zero weights,
    /// step `1/(lambda (t+1))` and shrink `1 - 1/(t+1)`, BudgetedSVM's true-class / clone
    /// rules, and (batch) the initial pass's assignments for the first epoch.
    pub budgetedsvm: bool,
}

impl Default for AmmParams {
    fn default() -> Self {
        AmmParams {
            lambda: 1e-4,
            max_weights_per_class: 50,
            prune_every: 10_000,
            prune_c: 10.0,
            bias: 1.0,
            clone_probability: 0.0,
            clone_decay: 0.99,
            budgetedsvm: false,
        }
    }
}

impl AmmParams {
    fn validate(&self) -> Result<(), SvmError> {
        check_positive(self.lambda, "lambda")?;
        if self.max_weights_per_class == 0 {
            return Err(invalid("max_weights_per_class", "must be at least 1"));
        }
        if !(self.prune_c.is_finite() && self.prune_c >= 0.0) {
            return Err(invalid(
                "prune_c",
                format!("must be finite and >= 0, got {}", self.prune_c),
            ));
        }
        if !self.bias.is_finite() {
            return Err(invalid("bias", "must be finite"));
        }
        if !(0.0..=1.0).contains(&self.clone_probability) {
            return Err(invalid(
                "clone_probability",
                format!("must lie in [0, 1], got {}", self.clone_probability),
            ));
        }
        if !(0.0..=1.0).contains(&self.clone_decay) {
            return Err(invalid(
                "clone_decay",
                format!("must lie in [0, 1], got {}", self.clone_decay),
            ));
        }
        Ok(())
    }
}

/// What one training epoch saw.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EpochStats {
    /// Steps with a positive loss (updates).
    pub n_updates: usize,
    /// Mean convex loss `l_cvx` over the epoch's examples (before each step).
    pub mean_loss: f64,
    /// Weights removed by pruning during the epoch.
    pub n_pruned: usize,
    /// Weights cloned (GAMM) during the epoch.
    pub n_cloned: usize,
}

/// An AMM model under training: weights, step counter and (for batch AMM) assignments.
#[derive(Debug, Clone)]
pub struct Amm {
    params: AmmParams,
    dim: usize,
    n_classes: usize,
    /// Shared scale of all weights: `w_j = scale * v_j`.
    scale: f64,
    /// `v_j`, `dim + 1` values each (the last one multiplies the bias feature).
    v: Vec<f64>,
    class_of: Vec<usize>,
    ids: Vec<u64>,
    next_id: u64,
    count: Vec<usize>,
    t: u64,
    clone_probability: f64,
    /// Batch AMM: the assigned weight id of every training example (`None` = zero weight).
    z: Vec<Option<u64>>,
    /// Batch GAMM: weights cloned since the last reassignment, grouped by the weight they
    /// descend from (`family[root]`), and the root of each clone.
    family: std::collections::HashMap<u64, Vec<u64>>,
    root_of: std::collections::HashMap<u64, u64>,
    scores: Vec<f64>,
}

/// Best weight found in a scan: score and weight slot (`None` = the reserved zero weight).
#[derive(Clone, Copy)]
struct Best {
    score: f64,
    class: usize,
    slot: Option<usize>,
}

impl Amm {
    /// A model with no weights (one zero weight per class in Pegasos mode).
    ///
    /// # Errors
    /// [`SvmError::InvalidParameter`] for bad parameters, `dim == 0` or `n_classes < 2`.
    pub fn new(params: AmmParams, dim: usize, n_classes: usize) -> Result<Self, SvmError> {
        Self::from_parts(params, dim, n_classes, &[], &[], 0)
    }

    /// A model from its exported parts: `weights` row-major `(n_weights, dim + 1)` (bias weight
    /// last), the class of each weight and the step counter `t`.
    ///
    /// # Errors
    /// [`SvmError::InvalidParameter`] / [`SvmError::ShapeMismatch`] for inconsistent parts,
    /// more weights in a class than `max_weights_per_class`, or (Pegasos mode) not exactly one
    /// weight per class.
    pub fn from_parts(
        params: AmmParams,
        dim: usize,
        n_classes: usize,
        weights: &[f64],
        class_of: &[usize],
        t: u64,
    ) -> Result<Self, SvmError> {
        params.validate()?;
        if dim == 0 {
            return Err(invalid("dim", "must be at least 1"));
        }
        if n_classes < 2 {
            return Err(invalid("n_classes", "needs at least 2 classes"));
        }
        let width = dim + 1;
        if weights.len() != class_of.len() * width {
            return Err(shape(
                "weights",
                format!(
                    "{} values for {} weights of width {width}",
                    weights.len(),
                    class_of.len()
                ),
            ));
        }
        if !weights.iter().all(|v| v.is_finite()) {
            return Err(SvmError::NonFinite { name: "weights" });
        }
        let mut count = vec![0usize; n_classes];
        for &c in class_of {
            if c >= n_classes {
                return Err(shape("weight_class", format!("class {c} >= n_classes")));
            }
            count[c] += 1;
        }
        if count.iter().any(|&k| k > params.max_weights_per_class) {
            return Err(invalid(
                "weights",
                "a class has more weights than max_weights_per_class",
            ));
        }
        let mut model = Amm {
            clone_probability: params.clone_probability,
            params,
            dim,
            n_classes,
            scale: 1.0,
            v: weights.to_vec(),
            class_of: class_of.to_vec(),
            ids: (0..class_of.len() as u64).collect(),
            next_id: class_of.len() as u64,
            count,
            t,
            z: Vec::new(),
            family: Default::default(),
            root_of: Default::default(),
            scores: Vec::new(),
        };
        if class_of.is_empty() && (model.params.budgetedsvm || model.fixed()) {
            try_reserve_rows(&mut model.v, n_classes, dim + 1, "dim")?;
        }
        if model.params.budgetedsvm && !model.fixed() && class_of.is_empty() {
            for c in 0..n_classes {
                model.push(c, None, 0.0);
            }
        }
        if model.fixed() {
            if class_of.is_empty() {
                for c in 0..n_classes {
                    model.push(c, None, 0.0);
                }
            } else if model.count.iter().any(|&k| k != 1) {
                return Err(invalid(
                    "weights",
                    "with max_weights_per_class = 1 every class needs exactly one weight",
                ));
            }
        }
        Ok(model)
    }

    /// Pegasos mode: one weight per class, always assigned.
    fn fixed(&self) -> bool {
        self.params.max_weights_per_class == 1
    }

    /// The hyper-parameters.
    pub fn params(&self) -> &AmmParams {
        &self.params
    }

    /// Steps taken so far (`t`).
    pub fn steps(&self) -> u64 {
        self.t
    }

    /// Current GAMM clone probability (after decays).
    pub fn clone_probability(&self) -> f64 {
        self.clone_probability
    }

    /// Restores the GAMM clone probability (when resuming training).
    pub fn set_clone_probability(&mut self, p: f64) -> Result<(), SvmError> {
        if !(0.0..=1.0).contains(&p) {
            return Err(invalid("clone_probability", "must lie in [0, 1]"));
        }
        self.clone_probability = p;
        Ok(())
    }

    /// Number of stored (non-reserved) weights.
    pub fn n_weights(&self) -> usize {
        self.class_of.len()
    }

    /// Input dimension (without the bias).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of classes.
    pub fn n_classes(&self) -> usize {
        self.n_classes
    }

    /// Class of each weight.
    pub fn weight_classes(&self) -> &[usize] {
        &self.class_of
    }

    /// The weights, row-major `(n_weights, dim + 1)`, bias weight last, scale folded in.
    pub fn weights(&self) -> Vec<f64> {
        self.v.iter().map(|v| v * self.scale).collect()
    }

    fn width(&self) -> usize {
        self.dim + 1
    }

    /// The [`poll_mask`] of a step: it scores every weight, O(width) each for dense rows.
    fn step_poll_mask(&self) -> usize {
        let weights = self.n_classes * (self.params.max_weights_per_class + 1);
        poll_mask(self.width() * weights)
    }

    fn push(&mut self, class: usize, row: Option<(Row<'_>, f64)>, _unused: f64) -> usize {
        let w = self.width();
        let start = self.v.len();
        self.v.resize(start + w, 0.0);
        if let Some((x, a)) = row {
            x.axpy(a, &mut self.v[start..start + self.dim]);
            self.v[start + self.dim] = a * self.params.bias;
        }
        self.class_of.push(class);
        self.ids.push(self.next_id);
        self.next_id += 1;
        self.count[class] += 1;
        self.class_of.len() - 1
    }

    fn add_row(&mut self, slot: usize, x: Row<'_>, a: f64) {
        let w = self.width();
        let d = self.dim;
        let vj = &mut self.v[slot * w..(slot + 1) * w];
        x.axpy(a, &mut vj[..d]);
        vj[d] += a * self.params.bias;
    }

    /// Unscaled `v_j . [x; bias]` of every weight into `self.scores`.
    fn dots(&mut self, x: Row<'_>) {
        let w = self.width();
        let d = self.dim;
        let bias = self.params.bias;
        self.scores.clear();
        self.scores.extend(
            self.v
                .chunks_exact(w)
                .map(|vj| x.dot(&vj[..d]) + bias * vj[d]),
        );
    }

    /// Score of the reserved zero weight of a class: 0 while the class has room for another
    /// weight, minus infinity at the cap (then only its stored weights compete).
    fn floor(&self, class: usize) -> f64 {
        if self.params.budgetedsvm {
            return f64::NEG_INFINITY;
        }
        if self.count[class] < self.params.max_weights_per_class {
            0.0
        } else {
            f64::NEG_INFINITY
        }
    }

    /// Best weight of each class from `self.scores` (the zero weight wins ties).
    fn best_per_class(&self) -> Vec<Best> {
        let mut per_class: Vec<Best> = (0..self.n_classes)
            .map(|c| Best {
                score: self.floor(c),
                class: c,
                slot: None,
            })
            .collect();
        for (j, (&c, &s)) in self.class_of.iter().zip(&self.scores).enumerate() {
            let s = s * self.scale;
            let b = &mut per_class[c];
            if s > b.score || (b.slot.is_none() && b.score == f64::NEG_INFINITY) {
                *b = Best {
                    score: s,
                    class: c,
                    slot: Some(j),
                };
            }
        }
        per_class
    }

    /// Best weight over the classes other than `y` (the first class wins ties).
    fn best_wrong(per_class: &[Best], y: usize) -> Best {
        let mut best = per_class[(y + 1) % per_class.len()];
        for b in per_class.iter().filter(|b| b.class != y) {
            if b.score > best.score {
                best = *b;
            }
        }
        // Ties go to the lowest class index.
        per_class
            .iter()
            .filter(|b| b.class != y && b.score == best.score)
            .copied()
            .next()
            .unwrap_or(best)
    }

    /// Batch mode: the slot of the weight an example is assigned to. When that weight has been
    /// cloned since the last reassignment (GAMM), the example goes to the best-scoring member
    /// of its family (original and clones, from `self.scores`): a clone starts as a copy of
    /// its original, so without this it would only ever see the one example that triggered
    /// it until the next reassignment while the original keeps all the others, and the copies
    /// never specialise (thesis Table 4.5: 4x4 checkerboard error stays near AMM's).
    fn assigned_slot(&self, id: u64) -> Option<usize> {
        let root = *self.root_of.get(&id).unwrap_or(&id);
        let Some(members) = self.family.get(&root) else {
            return self.slot_of_id(id);
        };
        std::iter::once(root)
            .chain(members.iter().copied())
            .filter_map(|m| self.slot_of_id(m))
            .max_by(|&a, &b| self.scores[a].total_cmp(&self.scores[b]).then(b.cmp(&a)))
    }

    fn slot_of_id(&self, id: u64) -> Option<usize> {
        // Ids are increasing along the slots (removal keeps order), so binary search works.
        self.ids.binary_search(&id).ok()
    }

    /// One SGD step on `(x, y)`; returns the convex loss before the step. `assigned` is the
    /// batch assignment (`Some(None)` = zero weight), `None` for online assignment.
    fn step(
        &mut self,
        x: Row<'_>,
        y: usize,
        assigned: Option<Option<u64>>,
        rng: &mut Pcg64,
        stats: &mut EpochStats,
    ) -> (f64, Option<u64>) {
        if self.params.budgetedsvm && !self.fixed() {
            return self.step_budgetedsvm(x, y, assigned, rng, stats);
        }
        self.t += 1;
        let t = self.t as f64;
        let eta = 1.0 / (self.params.lambda * t);
        self.dots(x);
        let per_class = self.best_per_class();
        let mut plus = per_class[y];
        if let Some(a) = assigned {
            if !self.fixed() {
                match a.and_then(|id| self.assigned_slot(id)) {
                    Some(j) => {
                        plus = Best {
                            score: self.scores[j] * self.scale,
                            class: y,
                            slot: Some(j),
                        }
                    }
                    None if a.is_none() => {
                        plus = Best {
                            score: 0.0,
                            class: y,
                            slot: None,
                        }
                    }
                    None => {} // assigned weight was pruned: fall back to the argmax
                }
            }
        }
        let minus = Self::best_wrong(&per_class, y);
        let loss = (1.0 + minus.score - plus.score).max(0.0);
        // Shrink every weight by (1 - 1/t); at t = 1 that zeroes the model.
        if self.t == 1 {
            self.v.iter_mut().for_each(|v| *v = 0.0);
            self.scale = 1.0;
        } else {
            self.scale *= 1.0 - 1.0 / t;
        }
        let mut assigned_id = plus.slot.map(|j| self.ids[j]);
        if loss > 0.0 {
            stats.n_updates += 1;
            let a = eta / self.scale;
            let cap = self.params.max_weights_per_class;
            match minus.slot {
                Some(j) => self.add_row(j, x, -a),
                None => {
                    if self.count[minus.class] < cap {
                        self.push(minus.class, Some((x, -a)), 0.0);
                    }
                }
            }
            let mut target = plus.slot;
            if let Some(j) = target {
                if !self.fixed()
                    && self.clone_probability > 0.0
                    && self.count[y] < cap
                    && rng.random::<f64>() < self.clone_probability
                {
                    let w = self.width();
                    let copy: Vec<f64> = self.v[j * w..(j + 1) * w].to_vec();
                    let k = self.push(y, None, 0.0);
                    self.v[k * w..(k + 1) * w].copy_from_slice(&copy);
                    if assigned.is_some() {
                        let (parent, child) = (self.ids[j], self.ids[k]);
                        let root = *self.root_of.get(&parent).unwrap_or(&parent);
                        self.family.entry(root).or_default().push(child);
                        self.root_of.insert(child, root);
                    }
                    self.clone_probability *= self.params.clone_decay;
                    stats.n_cloned += 1;
                    target = Some(k);
                }
            }
            match target {
                Some(j) => {
                    self.add_row(j, x, a);
                    assigned_id = Some(self.ids[j]);
                }
                None => {
                    if self.count[y] < cap {
                        let k = self.push(y, Some((x, a)), 0.0);
                        assigned_id = Some(self.ids[k]);
                    }
                }
            }
        }
        if self.scale < 1e-9 {
            let s = self.scale;
            self.v.iter_mut().for_each(|v| *v *= s);
            self.scale = 1.0;
        }
        if self.params.prune_every > 0 && self.t % self.params.prune_every == 0 && self.t > 1 {
            stats.n_pruned += self.prune();
        }
        (loss, assigned_id)
    }

    /// One step of BudgetedSVM 1.2's `trainAMMonline` (`assigned == None`: the online pass)
    /// or `trainAMMbatch` epoch (`assigned == Some(id)`), following `mm_algs.cpp` v1.02:
    /// - `t' = t + 1`: shrink by `1 - 1/t'`, step `1/(lambda t')` (`downgrade`,
    ///   `updateUsingVector`, `updateDegradation`);
    /// - online: `j+` = best stored true-class weight, `j-` = best stored weight of the other
    ///   classes. On a positive loss `j-` takes `-eta x`; if `j+` scores > 0 it takes `+eta x`,
    ///   and first, while the class is below its cap, with probability `p` a copy of the
    ///   pre-update `j+` is appended (`p <- beta p`); otherwise `x` becomes a new weight while
    ///   the class is below its cap (at the cap nothing happens to the true class);
    /// - batch: the loss uses the assigned weight (the best one if it was pruned); on a
    ///   positive loss the assigned weight is cloned as above if it scores > 0, it takes
    ///   `+eta x` in any case, `j-` takes `-eta x`, and if no true-class weight scores > 0 the
    ///   example also becomes a new weight while there is room. BudgetedSVM's scans there
    ///   start from a best score of 0 and let a weight replace a best score of exactly 0
    ///   (`maxFx == 0 || fx > maxFx`); that is kept.
    ///
    /// Returns the loss and the id of `j+` before the update (the initial pass's assignment).
    fn step_budgetedsvm(
        &mut self,
        x: Row<'_>,
        y: usize,
        assigned: Option<Option<u64>>,
        rng: &mut Pcg64,
        stats: &mut EpochStats,
    ) -> (f64, Option<u64>) {
        self.t += 1;
        let t = self.t as f64 + 1.0;
        let eta = 1.0 / (self.params.lambda * t);
        self.dots(x);
        let sc = self.scale;
        let cap = self.params.max_weights_per_class;
        let batch = assigned.is_some();
        let better = |s: f64, best: f64, none: bool| {
            if batch {
                best == 0.0 || s > best
            } else {
                none || s > best
            }
        };
        let start = if batch { 0.0 } else { f64::NEG_INFINITY };
        // j+ and, in batch mode, the assigned weight
        let (mut j1, mut fx1) = (usize::MAX, start);
        let want = assigned.flatten();
        let mut assoc = None;
        for j in 0..self.class_of.len() {
            if self.class_of[j] != y {
                continue;
            }
            let s = self.scores[j] * sc;
            if better(s, fx1, j1 == usize::MAX) {
                (j1, fx1) = (j, s);
            }
            if want == Some(self.ids[j]) {
                assoc = Some((j, s));
            }
        }
        let (ja, fxa) = assoc.unwrap_or((j1, fx1));
        // j- over the other classes, class by class
        let (mut j2, mut fx2) = (usize::MAX, start);
        for c in (0..self.n_classes).filter(|&c| c != y) {
            for j in 0..self.class_of.len() {
                if self.class_of[j] == c {
                    let s = self.scores[j] * sc;
                    if better(s, fx2, j2 == usize::MAX) {
                        (j2, fx2) = (j, s);
                    }
                }
            }
        }
        let before = Some(self.ids[j1]);
        let loss = (1.0 + fx2 - fxa).max(0.0);
        self.scale *= 1.0 - 1.0 / t;
        if loss > 0.0 {
            stats.n_updates += 1;
            let a = eta / self.scale;
            let room = self.count[y] < cap;
            let mut clone = |m: &mut Self, j: usize| {
                if room && m.clone_probability > 0.0 && rng.random::<f64>() < m.clone_probability {
                    m.clone_slot(j, y);
                    stats.n_cloned += 1;
                }
            };
            if batch {
                if fxa > 0.0 {
                    clone(self, ja);
                }
                self.add_row(ja, x, a);
                self.add_row(j2, x, -a);
                if fx1 <= 0.0 && self.count[y] < cap {
                    self.push(y, Some((x, a)), 0.0);
                }
            } else {
                self.add_row(j2, x, -a);
                if fx1 > 0.0 {
                    clone(self, j1);
                    self.add_row(j1, x, a);
                } else if room {
                    self.push(y, Some((x, a)), 0.0);
                }
            }
        }
        if self.scale < 1e-9 {
            let s = self.scale;
            self.v.iter_mut().for_each(|v| *v *= s);
            self.scale = 1.0;
        }
        (loss, before)
    }

    /// Appends a copy of weight `j` to class `y` and decays the clone probability.
    fn clone_slot(&mut self, j: usize, y: usize) {
        let w = self.width();
        let copy: Vec<f64> = self.v[j * w..(j + 1) * w].to_vec();
        let k = self.push(y, None, 0.0);
        self.v[k * w..(k + 1) * w].copy_from_slice(&copy);
        self.clone_probability *= self.params.clone_decay;
    }

    /// Removes the smallest weights while the Frobenius norm of the removed set stays within
    /// `c / ((t - 1) lambda)`, never the last weight of a class. Returns how many were removed.
    pub fn prune(&mut self) -> usize {
        if self.fixed() || self.t < 2 {
            return 0;
        }
        // BudgetedSVM divides by t, the thesis by t - 1.
        let tt = if self.params.budgetedsvm {
            self.t
        } else {
            self.t - 1
        };
        let threshold = self.params.prune_c / (tt as f64 * self.params.lambda);
        let w = self.width();
        let norms: Vec<f64> = self
            .v
            .chunks_exact(w)
            .map(|vj| vj.iter().map(|a| a * a).sum::<f64>() * self.scale * self.scale)
            .collect();
        let mut order: Vec<usize> = (0..norms.len()).collect();
        order.sort_by(|&a, &b| norms[a].total_cmp(&norms[b]).then(a.cmp(&b)));
        let mut removed_sq = 0.0;
        let mut remove = vec![false; norms.len()];
        let mut left = self.count.clone();
        for j in order {
            if removed_sq + norms[j] > threshold * threshold {
                break;
            }
            if left[self.class_of[j]] <= 1 {
                continue;
            }
            removed_sq += norms[j];
            left[self.class_of[j]] -= 1;
            remove[j] = true;
        }
        let n_removed = remove.iter().filter(|&&r| r).count();
        if n_removed > 0 {
            let mut k = 0;
            for (j, &gone) in remove.iter().enumerate() {
                if !gone {
                    self.v.copy_within(j * w..(j + 1) * w, k * w);
                    self.class_of[k] = self.class_of[j];
                    self.ids[k] = self.ids[j];
                    k += 1;
                }
            }
            self.v.truncate(k * w);
            self.class_of.truncate(k);
            self.ids.truncate(k);
            self.count = left;
        }
        n_removed
    }

    /// One pass over `data` in a (seeded) random or the given order.
    ///
    /// `batch = false`: online AMM (assignment by argmax at every step, Algorithm 5).
    /// `batch = true`: the assignments of the last [`Amm::reassign`] stay fixed during the
    /// epoch (Algorithm 4's sub-problem); examples without one fall back to the argmax.
    ///
    /// # Errors
    /// Shape errors for labels/dimensions, [`SvmError::Cancelled`] when `cancel` is raised.
    pub fn epoch(
        &mut self,
        data: &Examples<'_>,
        labels: &[usize],
        shuffle: bool,
        seed: u64,
        batch: bool,
        control: Control<'_>,
    ) -> Result<EpochStats, SvmError> {
        let kind = if batch { Pass::Batch } else { Pass::Online };
        self.epoch_with(data, labels, shuffle, seed, kind, control)
    }

    /// [`Amm::epoch`] with BudgetedSVM's batch initialisation: with
    /// [`AmmParams::budgetedsvm`] and [`Pass::Initial`] (the online pass that starts batch
    /// AMM) every example is assigned to its best true-class weight *before*
    /// its step, as `trainAMMbatch` does, those assignments are the first batch epoch's (call
    /// [`Amm::reassign`] only before the later ones), and there is no pruning in this pass.
    /// In that mode batch epochs keep their assignments (a clone gets examples from the next
    /// reassignment on). [`Pass::Initial`] is [`Pass::Online`] without `budgetedsvm`.
    ///
    /// # Errors
    /// As [`Amm::epoch`].
    pub fn epoch_with(
        &mut self,
        data: &Examples<'_>,
        labels: &[usize],
        shuffle: bool,
        seed: u64,
        kind: Pass,
        control: Control<'_>,
    ) -> Result<EpochStats, SvmError> {
        let (batch, initial) = (kind == Pass::Batch, kind == Pass::Initial);
        self.check_data(data)?;
        check_labels(labels, data.len(), self.n_classes)?;
        let n = data.len();
        let mut rng = Pcg64::seed_from_u64(seed);
        let order = permutation(n, shuffle, &mut rng);
        let use_z = batch && self.z.len() == n;
        let bsvm = self.params.budgetedsvm && !self.fixed();
        let record_z = bsvm && initial && !batch;
        if record_z {
            self.z = vec![None; n];
            self.family.clear();
            self.root_of.clear();
        }
        if !batch && self.plain_pegasos() {
            return self.pegasos_epoch(data, labels, &order, control);
        }
        let k_prune = self.params.prune_every;
        let gathered = if shuffle {
            Gathered::new(data, &order)
        } else {
            None
        };
        let mut stats = EpochStats::default();
        let mut loss_sum = 0.0;
        let poll = self.step_poll_mask();
        for (k, &i) in order.iter().enumerate() {
            if k & poll == 0 {
                control.check()?;
            }
            let assigned = if use_z { Some(self.z[i]) } else { None };
            let x = match &gathered {
                Some(g) => g.row(k),
                None => data.row(i),
            };
            let (loss, id) = self.step(x, labels[i], assigned, &mut rng, &mut stats);
            if bsvm {
                if record_z {
                    self.z[i] = id;
                }
                if !record_z && k_prune > 0 && self.t % k_prune == 0 {
                    stats.n_pruned += self.prune();
                }
            } else if use_z && id.is_some() {
                // A new weight (from the zero weight, or a GAMM clone) now carries the example.
                self.z[i] = id;
            }
            loss_sum += loss;
        }
        stats.mean_loss = loss_sum / n as f64;
        Ok(stats)
    }

    /// Trains one pass per seed of `schedule`, reporting to `control` after every pass.
    ///
    /// The passes follow the estimator's rules: with `schedule.online` every pass is an online
    /// pass ([`Amm::epoch`] with `batch = false`); otherwise the first pass is the initial online
    /// pass and every later pass is a batch pass, preceded by [`Amm::reassign`] (except, with
    /// [`AmmParams::budgetedsvm`], the second pass, which keeps the initial pass's assignments:
    /// BudgetedSVM 1.2's `trainAMMbatch`). Pass `e` (from 1) is reported as
    /// `control.report(e, NaN, &n_weights)`: the objective would cost one more pass over the
    /// data, so none is given; the state is the current number of weights (the model size).
    ///
    /// # Errors
    /// As [`Amm::epoch_with`]; [`SvmError::Cancelled`] when the cancel flag is raised (the
    /// model is then mid-pass). A hook that asks to stop is not an error: the returned
    /// [`FitOutcome`] says so and the model holds the passes made.
    pub fn fit(
        &mut self,
        data: &Examples<'_>,
        labels: &[usize],
        schedule: &Schedule<'_>,
        control: Control<'_, usize>,
    ) -> Result<FitOutcome, SvmError> {
        let inner = Control::new(control.cancel_flag());
        let bsvm = self.params.budgetedsvm;
        for (e, &seed) in schedule.seeds.iter().enumerate() {
            let batch = !schedule.online && e > 0;
            if batch && !(bsvm && e == 1) {
                self.reassign_with(data, labels, inner)?;
            }
            let kind = match (batch, bsvm && e == 0) {
                (true, _) => Pass::Batch,
                (false, true) => Pass::Initial,
                (false, false) => Pass::Online,
            };
            self.epoch_with(data, labels, schedule.shuffle, seed, kind, inner)?;
            if let Some(out) =
                FitOutcome::after(e + 1, control.report(e + 1, || f64::NAN, &self.n_weights()))?
            {
                return Ok(out);
            }
        }
        Ok(FitOutcome::ran(schedule.seeds.len()))
    }

    /// Pegasos mode with nothing else to do per step (no pruning, no cloning, not
    /// BudgetedSVM's batch rules): exactly [`Amm::step`]'s arithmetic, in the same order, without
    /// its bookkeeping (no per-step allocation, one weight per class found once).
    fn plain_pegasos(&self) -> bool {
        self.fixed()
            && !self.params.budgetedsvm
            && self.params.prune_every == 0
            && self.clone_probability == 0.0
            && self.class_of.len() == self.n_classes
    }

    /// One online Pegasos pass in `order` (see [`Amm::plain_pegasos`]). Rows are read in place;
    /// the next rows are prefetched, so the shuffled order costs little memory latency.
    fn pegasos_epoch(
        &mut self,
        data: &Examples<'_>,
        labels: &[usize],
        order: &[usize],
        control: Control<'_>,
    ) -> Result<EpochStats, SvmError> {
        let c = self.n_classes;
        let w = self.width();
        let d = self.dim;
        let bias = self.params.bias;
        let lambda = self.params.lambda;
        let mut slot_of = vec![0usize; c];
        for (j, &k) in self.class_of.iter().enumerate() {
            slot_of[k] = j;
        }
        let mut scores = vec![0.0; c];
        let mut stats = EpochStats::default();
        let mut loss_sum = 0.0;
        let poll = self.step_poll_mask();
        for (k, &i) in order.iter().enumerate() {
            if k & poll == 0 {
                control.check()?;
            }
            if let Some(&ahead) = order.get(k + PREFETCH_AHEAD) {
                data.prefetch_row(ahead);
            }
            let x = data.row(i);
            let y = labels[i];
            self.t += 1;
            let t = self.t as f64;
            for (s, &j) in scores.iter_mut().zip(&slot_of) {
                let vj = &self.v[j * w..(j + 1) * w];
                *s = (x.dot(&vj[..d]) + bias * vj[d]) * self.scale;
            }
            // best other class; the lowest index wins ties (as best_wrong)
            let mut minus = usize::MAX;
            for (cls, &s) in scores.iter().enumerate() {
                if cls != y && (minus == usize::MAX || s > scores[minus]) {
                    minus = cls;
                }
            }
            let loss = (1.0 + scores[minus] - scores[y]).max(0.0);
            if self.t == 1 {
                self.v.iter_mut().for_each(|v| *v = 0.0);
                self.scale = 1.0;
            } else {
                self.scale *= 1.0 - 1.0 / t;
            }
            if loss > 0.0 {
                stats.n_updates += 1;
                let a = 1.0 / (lambda * t) / self.scale;
                self.add_row(slot_of[minus], x, -a);
                self.add_row(slot_of[y], x, a);
            }
            if self.scale < 1e-9 {
                let s = self.scale;
                self.v.iter_mut().for_each(|v| *v *= s);
                self.scale = 1.0;
            }
            loss_sum += loss;
        }
        stats.mean_loss = loss_sum / order.len() as f64;
        Ok(stats)
    }

    /// Batch AMM: recomputes every example's assignment `z_n = argmax_k w_{y_n,k} . x_n`
    /// (eq. 4.10). Returns how many assignments changed.
    ///
    /// # Errors
    /// Shape errors for labels/dimensions.
    pub fn reassign(&mut self, data: &Examples<'_>, labels: &[usize]) -> Result<usize, SvmError> {
        self.reassign_with(data, labels, Control::none())
    }

    /// [`Amm::reassign`] polling `control`'s cancel flag.
    ///
    /// # Errors
    /// As [`Amm::reassign`], and [`SvmError::Cancelled`].
    pub fn reassign_with(
        &mut self,
        data: &Examples<'_>,
        labels: &[usize],
        control: Control<'_>,
    ) -> Result<usize, SvmError> {
        self.check_data(data)?;
        check_labels(labels, data.len(), self.n_classes)?;
        let n = data.len();
        let old = std::mem::take(&mut self.z);
        self.family.clear();
        self.root_of.clear();
        let mut z = Vec::with_capacity(n);
        let poll = self.step_poll_mask();
        for (i, &y) in labels.iter().enumerate() {
            if i & poll == 0 {
                control.check()?;
            }
            self.dots(data.row(i));
            let b = self.best_per_class()[y];
            z.push(b.slot.map(|j| self.ids[j]));
        }
        let changed = if old.len() == n {
            old.iter().zip(&z).filter(|(a, b)| a != b).count()
        } else {
            n
        };
        self.z = z;
        Ok(changed)
    }

    /// Forgets the batch assignments.
    pub fn clear_assignments(&mut self) {
        self.z.clear();
        self.family.clear();
        self.root_of.clear();
    }

    fn check_data(&self, data: &Examples<'_>) -> Result<(), SvmError> {
        if data.dim() != self.dim {
            return Err(shape(
                "X",
                format!("{} features, the model has {}", data.dim(), self.dim),
            ));
        }
        Ok(())
    }

    /// Class scores `g(i, x)`, row-major `(n, n_classes)`, in parallel over examples.
    ///
    /// # Errors
    /// A shape error if the dimension differs from the model's.
    pub fn decision(&self, data: &Examples<'_>) -> Result<Vec<f64>, SvmError> {
        self.decision_with(data, Control::none())
    }

    /// [`Amm::decision`] polling `control`'s cancel flag every block of rows.
    ///
    /// # Errors
    /// As [`Amm::decision`], and [`SvmError::Cancelled`].
    pub fn decision_with(
        &self,
        data: &Examples<'_>,
        control: Control<'_>,
    ) -> Result<Vec<f64>, SvmError> {
        self.check_data(data)?;
        let c = self.n_classes;
        let mut out = vec![0.0; data.len() * c];
        let w = self.width();
        let d = self.dim;
        let floors: Vec<f64> = (0..c).map(|k| self.floor(k)).collect();
        let nw = self.n_weights();
        // Weights transposed `(dim, n_weights)`, scale folded in: a row's scores against
        // every weight are one contiguous update per non-zero.
        let mut wt = vec![0.0; d * nw];
        let mut bias_w = vec![0.0; nw];
        for (j, vj) in self.v.chunks_exact(w).enumerate() {
            for (f, &v) in vj[..d].iter().enumerate() {
                wt[f * nw + j] = self.scale * v;
            }
            bias_w[j] = self.scale * self.params.bias * vj[d];
        }
        if c == 0 {
            return Ok(out);
        }
        out.par_chunks_mut(c * ROW_BLOCK)
            .enumerate()
            .try_for_each_init(
                || vec![0.0; nw],
                |sc, (blk, ob)| {
                    control.check()?;
                    for (k, o) in ob.chunks_exact_mut(c).enumerate() {
                        sc.copy_from_slice(&bias_w);
                        if nw > 0 {
                            data.row(blk * ROW_BLOCK + k).dots_transposed(&wt, sc);
                        }
                        o.copy_from_slice(&floors);
                        for (&s, &cls) in sc.iter().zip(&self.class_of) {
                            if s > o[cls] {
                                o[cls] = s;
                            }
                        }
                    }
                    Ok::<(), Halt>(())
                },
            )?;
        Ok(out)
    }
}

/// The passes of a multi-pass fit ([`Amm::fit`], [`crate::Bsgd::fit`],
/// [`crate::arow_one_vs_rest`]): one pass per seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule<'a> {
    /// Seed of every pass's shuffle (and of its random draws); its length is the number of
    /// passes.
    pub seeds: &'a [u64],
    /// Shuffle the examples in every pass (else their order).
    pub shuffle: bool,
    /// AMM only: online passes only (else batch AMM: the initial pass, then batch passes).
    pub online: bool,
}

/// How a reporting fit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FitOutcome {
    /// Iterations (passes, or chunks for the single-pass learners) completed.
    pub n_iter: usize,
    /// Whether the progress hook asked to stop before the last iteration.
    pub stopped: bool,
}

impl FitOutcome {
    /// All `n_iter` iterations ran.
    pub fn ran(n_iter: usize) -> Self {
        Self {
            n_iter,
            stopped: false,
        }
    }

    /// After iteration `it`'s report: `Some(stopped)` when the hook asked to stop, `None` to go
    /// on, [`SvmError::Cancelled`] on cancel.
    pub(crate) fn after(it: usize, report: Result<(), Halt>) -> Result<Option<Self>, SvmError> {
        match report {
            Ok(()) => Ok(None),
            Err(Halt::Stopped) => Ok(Some(Self {
                n_iter: it,
                stopped: true,
            })),
            Err(Halt::Cancelled) => Err(SvmError::Cancelled),
        }
    }
}

/// The kind of pass [`Amm::epoch_with`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// An online SGD pass.
    Online,
    /// The online pass that starts batch AMM (with [`AmmParams::budgetedsvm`], it records
    /// every example's assignment before its step).
    Initial,
    /// A batch pass over the current assignments.
    Batch,
}

/// The identity or a seeded random permutation of `0..n`.
pub(crate) fn permutation(n: usize, shuffle: bool, rng: &mut Pcg64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if shuffle {
        for i in (1..n).rev() {
            let j = rng.random_range(0..=i);
            order.swap(i, j);
        }
    }
    order
}

/// Index of the largest value of each row of a row-major score matrix (first on ties).
pub fn argmax_rows(scores: &[f64], n_classes: usize) -> Vec<usize> {
    scores
        .chunks_exact(n_classes)
        .map(|r| {
            let mut best = 0;
            for (k, &s) in r.iter().enumerate() {
                if s > r[best] {
                    best = k;
                }
            }
            best
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A shuffled epoch (which reads a gathered copy) equals an unshuffled epoch over the rows
    /// permuted by hand in the same order, for dense and CSR input.
    #[test]
    fn absurd_dimension_is_an_error_not_an_abort() {
        let pegasos = AmmParams {
            max_weights_per_class: 1,
            ..AmmParams::default()
        };
        for dim in [1usize << 40, usize::MAX / 4] {
            let err = Amm::new(pegasos.clone(), dim, 2).err().unwrap();
            assert!(err.to_string().contains("`dim`"), "{err}");
        }
        let p = crate::BsgdParams {
            lambda: 1e-3,
            budget: 10,
            kernel: crate::Kernel::Gaussian { gamma: 1.0 },
            maintenance: crate::Maintenance::Merge,
        };
        assert!(crate::Bsgd::new(p, 1usize << 50, 2).is_err());
    }

    #[test]
    fn gathered_epoch_equals_explicit_permutation() {
        let (n, d) = (300, 5);
        let mut s: u64 = 3;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let dense: Vec<f64> = (0..n * d)
            .map(|_| if next() < 0.4 { 0.0 } else { next() - 0.5 })
            .collect();
        let labels: Vec<usize> = (0..n).map(|_| (next() * 3.0) as usize % 3).collect();
        let seed = 11;
        let order = permutation(n, true, &mut Pcg64::seed_from_u64(seed));
        let permuted: Vec<f64> = order
            .iter()
            .flat_map(|&i| dense[i * d..(i + 1) * d].to_vec())
            .collect();
        let plabels: Vec<usize> = order.iter().map(|&i| labels[i]).collect();
        let params = AmmParams {
            lambda: 1e-2,
            max_weights_per_class: 4,
            prune_every: 100,
            ..AmmParams::default()
        };
        let cancel = AtomicBool::new(false);
        let mut want = Amm::new(params.clone(), d, 3).unwrap();
        want.epoch(
            &Examples::dense(&permuted, d).unwrap(),
            &plabels,
            false,
            0,
            false,
            Control::new(&cancel),
        )
        .unwrap();
        let mut got = Amm::new(params.clone(), d, 3).unwrap();
        got.epoch(
            &Examples::dense(&dense, d).unwrap(),
            &labels,
            true,
            seed,
            false,
            Control::new(&cancel),
        )
        .unwrap();
        assert_eq!(got.weights(), want.weights());
        // CSR input takes the sparse gather.
        let (mut ip, mut ix, mut dv) = (vec![0i64], vec![], vec![]);
        for row in dense.chunks(d) {
            for (j, &v) in row.iter().enumerate() {
                if v != 0.0 {
                    ix.push(j as i64);
                    dv.push(v);
                }
            }
            ip.push(ix.len() as i64);
        }
        let mut sparse = Amm::new(params, d, 3).unwrap();
        sparse
            .epoch(
                &Examples::csr(&ip, &ix, &dv, d).unwrap(),
                &labels,
                true,
                seed,
                false,
                Control::new(&cancel),
            )
            .unwrap();
        let (a, b) = (sparse.weights(), want.weights());
        assert!(
            a.iter()
                .zip(&b)
                .all(|(x, y)| (x - y).abs() <= 1e-12 * (1.0 + y.abs()))
        );
    }
}

//! `method = auto`: estimate, then measure.
//!
//! The cost model ([`crate::plan`]) ranks the four methods from data-free estimates,
//! refined on the data (sampled neighbour counts, the real clustering) for the methods that
//! may win. A model of machine speed is never exact, and near the cross-over points it picks
//! the wrong method by a factor of two or three. So every candidate within [`TIME_WINDOW`] of the
//! cheapest estimate is built and *timed* on a sample of the targets: the time of one target
//! (the difference of a one-target and a sample evaluation, so fixed per-call costs are not
//! multiplied), times the number of targets, plus the fixed costs and, for the IFGT, the
//! coefficients timed on a stride of the sources. The fastest is kept in the plan, so a
//! reusable transform pays for the trial once.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use vastml_core::{Control, Halt};

use crate::direct::{DirectPlan, TreePlan};
use crate::error::{FgtError, Result};
use crate::grid1d::{Grid1d, grid_parameters};
use crate::ifgt::{self, IfgtPlan, IfgtProblem, choose_parameters_uniform};
use crate::{Engine, Method, monomials, plan};

/// Candidates whose estimate is within this factor of the cheapest are refined on the data.
pub(crate) const WINDOW: f64 = 3.0;
/// Refined candidates within this factor of the cheapest are timed: beyond it the model's
/// order was right in every case of the grid bench, and the trials of a candidate 3x slower
/// cost more than a mis-pick saves.
const TIME_WINDOW: f64 = 2.0;
/// Timed rounds over the candidates: the second only for those within [`NOISE`] of the
/// leader after the first. (A third round between the two closest cost more than it saved:
/// two candidates within 1.3x of each other lose at most that much by a mis-pick, while
/// every round of trials is paid on every plan.)
const REPEATS: usize = 2;
/// Candidates timed within this factor of the leader are timed once more (CPU time on a
/// loaded machine still moves by about this much between runs).
const NOISE: f64 = 1.3;
/// Below this estimated cost (ns on one core) the model's pick is kept without timing: a
/// mis-pick costs little there, and the choice (so the result, to the last bit) stays the
/// same from run to run. (At 2e7 with the tree's measured costs, a direct sum and a tree at
/// 1.4x it were timed on 5,660 sources in 10-D: the trials cost 2.8 ms of an 8.7 ms call,
/// and the model's order was right.)
const MEASURE_ABOVE_NS: f64 = 5e7;
/// Above this estimated cost (ns on one core) the IFGT's clustering is tried even where the
/// data-free model rules the IFGT out, with [`TRY_IFGT_SHARE`] of the estimate. Below it a
/// failed try costs too much: the estimate is of one core, the call runs on two, so a 10%
/// share was a third of the call at 8 ms. The size is the direct sum's estimate, and the best
/// one must be above [`TRY_IFGT_BEST_ABOVE_NS`]: the curved sheet of
/// `test_auto_clusters_a_curved_sheet_the_uniform_model_rules_out` has a tree the measured
/// costs put at 16 ms, and its IFGT runs at a third of the tree; with the best estimate
/// alone at 1e7, failed tries cost 1.3-1.4x on direct sums of 4-6 ms, and with the direct
/// sum's alone, 1.5x on a tree of 2 ms.
const TRY_IFGT_ABOVE_NS: f64 = 2e7;
/// See [`TRY_IFGT_ABOVE_NS`].
const TRY_IFGT_BEST_ABOVE_NS: f64 = 1e7;
/// Share of the best estimate the clustering may cost when only the crowding admits it.
const TRY_IFGT_SHARE: f64 = 0.06;
/// ... and above [`TRY_IFGT_WIDE_ABOVE_NS`] (a curved sheet in 7-D at 115 ms: the IFGT
/// needed 73 clusters, 6% allowed 10 of them, and the IFGT at 10 was slower than the
/// direct sum it beats by 4x at 73).
const TRY_IFGT_WIDE_SHARE: f64 = 0.2;
/// See [`TRY_IFGT_WIDE_SHARE`].
const TRY_IFGT_WIDE_ABOVE_NS: f64 = 1e8;
/// CPU ns of one point-centre distance per dimension in the farthest-point clustering, as
/// measured (1.2 ns: 73 clusters of 32,839 points in 7-D, 20 ms of CPU for the whole
/// plan); the cost model's [`plan::ns::CLUSTERING_PER_DIM`] is a conservative 2.5.
const CLUSTERING_BUDGET_PER_DIM: f64 = 1.2;
/// Interleaved groups of the sample the tree's neighbour count is taken in (see
/// [`Context::tree_estimate`]).
const GROUPS: usize = 8;
/// A tree whose pairs alone cost this share of the best estimate is not built.
const TREE_HOPELESS: f64 = 0.9;
/// On a line the IFGT is tried only below this share of the grid transform's estimate.
const GRID_OVER_IFGT: f64 = 0.3;
/// Sources the tree's reach is first counted on (see [`share_within_above`]):
/// with the 128 sampled targets, 16,384 pairs, which put the share in reach within a few
/// percent of the 60% the test is about. (512 sources took a fifth of planning a small
/// transform in 10-D.)
const REACH_SOURCES: usize = 128;
/// The IFGT's clustering is not run when it would need more than this many times the
/// clusters it may cost (see [`clusters_needed_at_most`]).
const NEEDED_OVER_BUDGET: f64 = 2.0;
/// Below this share of the plain IFGT's estimate, its search for the clusters in reach
/// leaves the centre tree nothing worth timing.
const FLAT_SEARCH_SHARE: f64 = 0.1;
/// Sources of the clustering that judges an IFGT admitted only by the crowding (see
/// [`Context::pilot_cost`]).
const PILOT_SOURCES: usize = 2048;
/// A sample whose [`plan::crowding`] is below this does not fill its box.
const CROWDED: f64 = 0.5;
/// Where only the crowding admits the IFGT, its clustering stops at this many sources per
/// cluster on average (see [`Context::choose`]).
const CROWDED_SOURCES_PER_CLUSTER: usize = 16;

/// What the planner knows about the problem.
pub(crate) struct Context<'a> {
    pub sources: &'a [f64],
    pub dim: usize,
    pub h: f64,
    pub epsilon: f64,
    /// Targets per evaluation.
    pub m: usize,
    /// Weight columns.
    pub w: usize,
    pub diag: f64,
    pub sides: &'a [f64],
    pub tree_radius: f64,
    pub ifgt_cutoff: f64,
    pub problem: IfgtProblem,
    /// Where the targets are (or the sources, when nothing is known).
    pub sample_src: &'a [f64],
    pub measure: bool,
    /// Seconds of the IFGT coefficients of one call: the fastest timing so far, and the
    /// round of trials that last timed them.
    pub coefficient_seconds: std::cell::Cell<Option<(usize, f64)>>,
}

impl Context<'_> {
    /// The bandwidth, error bound and cut-off an IFGT plan of this problem must reach.
    fn accuracy(&self) -> ifgt::Accuracy {
        ifgt::Accuracy {
            h: self.h,
            epsilon: self.epsilon,
            cutoff: self.ifgt_cutoff,
        }
    }
}

/// The outcome of [`Context::choose`].
pub(crate) struct Chosen {
    pub engine: Engine,
    /// Model estimates (ns on one core).
    pub estimates: Vec<(Method, f64)>,
    /// Extrapolated seconds of one evaluation, for the candidates that were timed (the IFGT's
    /// coefficients left out when only its two variants were).
    pub measured: Vec<(Method, f64)>,
    /// Whether the progress hook ended the planning early.
    pub stopped: bool,
}

/// Whether the IFGT needs at most `k` clusters (ties aside), about: the sources over the
/// mean number of sources within the largest radius a usable cluster may have, of a sample
/// of 128 sources (counted on a stride of at most [`REACH_SOURCES`] sources, only as far as
/// it takes to tell), is at most `k`. A cluster of that radius holds no more than the
/// sources within it of its centre, so where densities differ (clusters) this errs low, on
/// the side of clustering. With n sources and `within` (at least 1) in reach, n / within
/// <= k holds where n <= k or a share of at least 1 / k is in reach.
fn clusters_needed_at_most(sources: &[f64], problem: &IfgtProblem, k: f64) -> bool {
    let dim = problem.dim;
    let n = sources.len() / dim;
    let radius = problem.largest_feasible_radius();
    let sample = plan::sample_rows(sources, dim, 128);
    n as f64 <= k || share_within_above(sources, dim, &sample, radius, 1.0 / k)
}

/// Whether the share of (source, target) pairs within `radius` of each other, over every
/// target of `sample` and a stride of at most [`REACH_SOURCES`] sources, is above `share`
/// (false without pairs). The count stops as soon as the rest of the sample cannot change
/// the answer: where few pairs are in reach that is after a few of its targets (the full
/// count was a tenth of planning a 0.6 ms sum in 9-D).
fn share_within_above(
    sources: &[f64],
    dim: usize,
    sample: &[f64],
    radius: f64,
    share: f64,
) -> bool {
    let n = sources.len() / dim;
    let stride = n.div_ceil(REACH_SOURCES).max(1);
    let r2 = radius * radius;
    // The strided sources coordinate by coordinate, so that each target's pairs run over
    // contiguous values (a loop over the coordinates per pair was a tenth of planning a
    // small transform in 10-D); each pair's sum is taken in the same order as before.
    let picked = n.div_ceil(stride);
    let mut cols = vec![0.0; picked * dim];
    for (j, x) in sources.chunks_exact(dim).step_by(stride).enumerate() {
        for (k, &v) in x.iter().enumerate() {
            cols[k * picked + j] = v;
        }
    }
    let pairs = picked * (sample.len() / dim);
    let bar = share * pairs as f64;
    let mut d2 = vec![0.0; picked];
    let mut inside = 0usize;
    for (t, y) in sample.chunks_exact(dim).enumerate() {
        d2.fill(0.0);
        for (col, &yk) in cols.chunks_exact(picked).zip(y) {
            for (d, &x) in d2.iter_mut().zip(col) {
                let t = x - yk;
                *d += t * t;
            }
        }
        inside += d2.iter().filter(|&&v| v <= r2).count();
        // decided: above already, or not even with every pair left inside
        if inside as f64 > bar || ((pairs - (t + 1) * picked + inside) as f64) <= bar {
            break;
        }
    }
    pairs > 0 && inside as f64 > bar
}

/// CPU seconds of the whole process so far (every thread), where the platform tells them;
/// else wall-clock seconds since the first call. Trials are timed in CPU time: on a machine
/// shared with other jobs the wall-clock time of a few milliseconds of work depends more on
/// the scheduler than on the method (a trial of the direct sum once came out 10x off).
pub(crate) fn cpu_seconds() -> f64 {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime only writes the timespec it is given.
        if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

struct Candidate {
    method: Method,
    estimate: f64,
    engine: Option<Engine>,
}

impl Context<'_> {
    /// Clusters the sources for the IFGT (at most `k_budget` clusters); `None` when epsilon
    /// cannot be reached.
    pub fn build_ifgt(
        &self,
        with_tree: bool,
        k_budget: usize,
        cancel: &AtomicBool,
    ) -> Result<Option<IfgtPlan>> {
        let problem = IfgtProblem {
            max_clusters: k_budget,
            ..self.problem
        };
        let chosen = if self.dim == 1 {
            ifgt::interval_clustering(self.sources, &problem)
        } else {
            ifgt::choose_clustering(self.sources, &problem, cancel)?
        };
        match chosen {
            Some((_, clustering, seeds)) => Ok(Some(IfgtPlan::new(
                self.sources,
                self.dim,
                self.accuracy(),
                clustering,
                &seeds,
                with_tree,
            )?)),
            None => Ok(None),
        }
    }

    /// Estimates every method, refines and builds the promising ones, times the close
    /// ones, and returns the fastest. Each stage is reported to `control` (see
    /// [`crate::GaussTransform::plan_with_control`]); a stop skips the stages left.
    pub fn choose(&self, control: &Control<'_, str>) -> Result<Chosen> {
        let cancel = control.cancel_flag();
        let mut stage = 0usize;
        // Ok(true) when the hook asks to stop; the cancel flag is an error
        let mut report = |name: &str, seconds: f64| -> Result<bool> {
            stage += 1;
            match control.report(stage, || seconds, name) {
                Ok(()) => Ok(false),
                Err(Halt::Stopped) => Ok(true),
                Err(Halt::Cancelled) => Err(FgtError::Cancelled),
            }
        };
        let (n, m, dim, w) = (self.sources.len() / self.dim, self.m, self.dim, self.w);
        let sample = plan::sample_rows(self.sample_src, dim, 128);
        let mut cands: Vec<Candidate> = Vec::new();
        let direct = plan::direct_cost(n, m, dim, w);
        cands.push(Candidate {
            method: Method::Direct,
            estimate: direct,
            engine: None,
        });
        let tree_rough = (self.tree_radius < self.diag && n >= 64)
            .then(|| plan::tree_cost_uniform(n, m, w, self.tree_radius, self.sides));
        let rough_ifgt = |problem: &IfgtProblem| {
            choose_parameters_uniform(problem).map(|u| {
                let terms = monomials::n_terms(dim, u.truncation - 1);
                let reach = (((self.ifgt_cutoff / u.max_radius) + 1.0).powi(dim as i32))
                    .min(u.n_clusters as f64);
                plan::ifgt_cost(
                    plan::Size { n, m, dim, w },
                    u.n_clusters,
                    plan::IfgtTerms::full(terms),
                    reach,
                    false,
                )
            })
        };
        // A few far outliers stretch the box the uniform model spreads the sources over, and
        // then it finds the IFGT hopeless where the real clustering (which gives the outliers
        // clusters of their own) is the fastest method: the model is also asked with the
        // extent of the sample (128 points) less its two most extreme values on each side,
        // and the cheaper answer decides whether the clustering is tried.
        let sample_range = {
            // per coordinate, without the 1/64 most extreme values on each side
            let rows = sample.len() / dim;
            let cut = rows / 64;
            let mut values = Vec::with_capacity(rows);
            (0..dim)
                .map(|k| {
                    values.clear();
                    values.extend(sample.iter().skip(k).step_by(dim).copied());
                    if values.is_empty() {
                        return 0.0;
                    }
                    // two order statistics, selected (a sort per coordinate was 6% of
                    // planning a small transform in 10-D)
                    let top = *values
                        .select_nth_unstable_by(rows - 1 - cut, f64::total_cmp)
                        .1;
                    let bottom = *values.select_nth_unstable_by(cut, f64::total_cmp).1;
                    top - bottom
                })
                .fold(0.0f64, f64::max)
                .max(self.h * 1e-3)
        };
        // The clustering alone of more clusters than this costs over WINDOW direct sums, so
        // the model's search over K stops there (at a narrow kernel the search over
        // thousands of K, each with a truncation number, was a tenth of planning a 1 ms sum).
        let capped = IfgtProblem {
            max_clusters: (WINDOW * direct / (n as f64 * dim as f64 * plan::ns::CLUSTERING_PER_DIM))
                .max(1.0) as usize,
            ..self.problem
        };
        // (the estimate, and whether only the sample's extent admits the IFGT)
        let ifgt_rough = match rough_ifgt(&capped) {
            Some(r) if sample_range >= 0.5 * capped.range => Some((r, false)),
            full => {
                let robust = rough_ifgt(&IfgtProblem {
                    range: sample_range,
                    ..capped
                });
                match (full, robust) {
                    (Some(a), Some(b)) if b < a => Some((b, true)),
                    (Some(a), _) => Some((a, false)),
                    (None, b) => b.map(|b| (b, true)),
                }
            }
        };
        let rough_best = [Some(direct), tree_rough, ifgt_rough.map(|r| r.0)]
            .into_iter()
            .flatten()
            .fold(f64::INFINITY, f64::min);
        // On a line the grid transform's estimate is close to exact (its work does not depend
        // on how the data are spread), and it needs no refinement to plan.
        let grid = (dim == 1)
            .then(|| {
                let lo = self.sources.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = self
                    .sources
                    .iter()
                    .copied()
                    .fold(f64::NEG_INFINITY, f64::max);
                grid_parameters(n, m, w, hi - lo, self.h, self.epsilon)
            })
            .flatten();
        if let Some(g) = &grid {
            cands.push(Candidate {
                method: Method::Fgt,
                estimate: g.cost,
                engine: None,
            });
        }
        let rough_best = rough_best.min(grid.map_or(f64::INFINITY, |g| g.cost));
        let mut best = direct.min(grid.map_or(f64::INFINITY, |g| g.cost));
        let mut stopped = report("estimate", rough_best * 1e-9)?;
        if let Some(rough) = tree_rough {
            // the uniform model overestimates the tree by up to ~5x (clumpy data)
            // A wide cut-off in many dimensions puts most sources in reach of every target;
            // the tree's build and neighbour count then cost a sixth of a direct sum it
            // cannot beat (d = 10: 25 ms of CPU on a 135 ms call). The sources in reach of
            // the sample, counted directly on a stride of the sources, bound its cost from
            // below first (pairs only, no leaf visits): beyond [`TREE_HOPELESS`] of the best
            // the tree is not built (its pairs cost 1.2-1.4 direct ones, so this is about 85%
            // of the sources in reach of the average target).
            let hopeless = || {
                // the cost is linear in the sources in reach: hopeless above `reach`
                let cost = |pts: f64| plan::tree_cost(n, m, dim, w, 0.8 * pts, 0.0);
                let reach = (TREE_HOPELESS * best - cost(0.0)) / (cost(1.0) - cost(0.0));
                reach < 0.0
                    || share_within_above(
                        self.sources,
                        dim,
                        &sample,
                        self.tree_radius,
                        reach / n as f64,
                    )
            };
            if !stopped && rough < 5.0 * rough_best && !hopeless() {
                let tree = TreePlan::new(
                    self.sources,
                    dim,
                    self.h,
                    self.epsilon,
                    self.tree_radius,
                    &sample,
                )?;
                let cost = self.tree_estimate(&tree, &sample, best);
                best = best.min(cost);
                cands.push(Candidate {
                    method: Method::DirectTree,
                    estimate: cost,
                    engine: Some(Engine::Tree(tree)),
                });
                stopped = report("direct-tree", cost * 1e-9)?;
            } else {
                cands.push(Candidate {
                    method: Method::DirectTree,
                    estimate: rough,
                    engine: None,
                });
            }
        }
        // The uniform model finds the IFGT hopeless on data that fill few of their
        // dimensions (a curved sheet in 7-D: the real clustering reached epsilon with 67
        // clusters and ran 2x faster than the direct sum): where the direct sum is above
        // 20 ms, the best estimate above 10 ms, and a sample of the sources is crowded
        // (nearest neighbours at under half the distance of points filling the box), the
        // clustering is still tried, with 6% of the best estimate.
        // The same where the model finds the IFGT possible but far too dear: on tight
        // clusters in 10-D it put the IFGT at 130x the direct sum, which it beat by 2.4x.
        let crowded = || {
            dim > 1
                && direct > TRY_IFGT_ABOVE_NS
                && best > TRY_IFGT_BEST_ABOVE_NS
                && plan::crowding(&plan::sample_rows(self.sources, dim, 128), dim, self.sides)
                    < CROWDED
        };
        let ifgt_try = match ifgt_rough {
            Some((rough, robust_only)) if rough < WINDOW * best => {
                Some((rough, if robust_only { 0.2 } else { 0.5 }))
            }
            _ if crowded() => Some((
                0.0,
                if best > TRY_IFGT_WIDE_ABOVE_NS {
                    TRY_IFGT_WIDE_SHARE
                } else {
                    TRY_IFGT_SHARE
                },
            )),
            Some((rough, _)) => Some((rough, 0.5)),
            None => None,
        };
        if let Some((rough, share)) = ifgt_try {
            // Clustering is only worth it when the IFGT may come within the timing window
            // of the best refined alternative, and never grows past the number of clusters
            // whose clustering alone would cost half of that (a fifth when only the sample's
            // extent admits the IFGT: heavy tails look like outliers there, and the
            // clustering then often ends without reaching epsilon).
            // On a line the intervals' IFGT does the grid's work less well (p terms for
            // every interval in reach, against one polynomial per target), and the grid's
            // estimate errs high if anything (3x on far outliers): the IFGT is only
            // clustered where the model puts it below a third of the grid.
            let window = if grid.is_some() {
                GRID_OVER_IFGT
            } else {
                WINDOW
            };
            // ... nor past half the sources: with clusters of fewer than two sources on
            // average, the expansion evaluates its terms where the tree sums a source or two,
            // so it cannot win (heavy tails in 6-D at a small bandwidth: a cluster per
            // source, an IFGT at 2.6x the tree, which the model put at 0.4x)
            // Where only the crowding admits the IFGT (no estimate at all), nor past a
            // sixteenth of the sources, so that the pilot below (clusterings up to an eighth
            // of its 2,048 sources) can judge the whole budget. The crowded IFGTs that won on
            // the full sums grid had hundreds of sources a cluster or more (11 clusters of
            // 3,303 sources, 45 of 195,035); the clustering up to half the sources cost half
            // of a call (heavy tails in 10-D, 2,751 sources: 27 ms for 1,375 clusters that
            // put the IFGT at 26x the 57 ms direct sum auto then ran).
            let k_cap = if rough == 0.0 {
                n / CROWDED_SOURCES_PER_CLUSTER
            } else {
                n / 2
            };
            let k_budget = (share * best / (n as f64 * dim as f64 * CLUSTERING_BUDGET_PER_DIM))
                .min(k_cap as f64)
                .max(1.0) as usize;
            // A clustering that cannot reach a usable radius within its budget is not run
            // (tight clusters in 10-D at a bandwidth far below their spread: 31 ms of a
            // 100 ms plan went into 1,000 clusters that still missed epsilon).
            let reachable = || {
                dim == 1
                    || clusters_needed_at_most(
                        self.sources,
                        &self.problem,
                        NEEDED_OVER_BUDGET * k_budget as f64,
                    )
            };
            // Where only the crowding admits the IFGT, a clustering of a sample of the
            // sources first says roughly what the IFGT would cost: heavy tails look crowded
            // too (their bulk fills a small part of the box), and there the full clustering
            // (23 ms on 11,842 sources in 3-D, for an IFGT 12x the tree it lost to) was
            // most of the call.
            let hopeless = || {
                rough == 0.0
                    && self
                        .pilot_cost(&sample, k_budget)
                        .is_some_and(|c| c > WINDOW * best)
            };
            if !stopped && rough < window * best && reachable() && !hopeless() {
                if let Some(p) = self.build_ifgt(false, k_budget, cancel)? {
                    // the terms the plan's truncations keep, counted on the sample: where
                    // a wide kernel needs many terms for the farthest targets, the nearer
                    // ones use few of them (uniform 6-D, 100,947 terms: the share of the
                    // uniform model put the IFGT at 2.7x the direct sum it beat by 2x)
                    let (reach, per_pair) = p.work_in_reach(&sample);
                    let terms = plan::IfgtTerms {
                        per_source: p.mean_source_terms(),
                        per_pair,
                    };
                    // the clustering is done: from here on the IFGT costs its calls (the
                    // estimate with it, where it was 60% of the total, put a 7-D IFGT at
                    // 0.6x the direct sum it beat by 3.4x, and the direct sum was timed)
                    let k = p.n_clusters();
                    let size = plan::Size { n, m, dim, w };
                    let flat = plan::ifgt_call_cost(size, k, terms, reach, false);
                    let treed = plan::ifgt_call_cost(size, k, terms, reach, true);
                    cands.push(Candidate {
                        method: Method::IfgtTree,
                        estimate: treed,
                        engine: None,
                    });
                    cands.push(Candidate {
                        method: Method::Ifgt,
                        estimate: flat,
                        engine: Some(Engine::Ifgt(Box::new(p))),
                    });
                    stopped = report("ifgt", flat.min(treed) * 1e-9)?;
                }
            } else if rough > 0.0 {
                // (0: only the crowding admitted the IFGT; there is no estimate to report)
                cands.push(Candidate {
                    method: Method::Ifgt,
                    estimate: rough,
                    engine: None,
                });
            }
        }
        let estimates: Vec<(Method, f64)> = cands.iter().map(|c| (c.method, c.estimate)).collect();
        // Buildable candidates: direct always; the tree and the IFGT when they were built.
        let ifgt_built = cands
            .iter()
            .any(|c| c.method == Method::Ifgt && c.engine.is_some());
        // The two IFGT variants differ only in how a group of targets finds the clusters in
        // reach. Where the plain search (a box test per centre) is under a tenth of the
        // plain variant's estimate, the centre tree can save at most that, and timing it
        // costs more: it is not a candidate (on one cluster of 1,807 sources in 5-D the two
        // trials were 4.5 ms of an 18 ms plan and call).
        let flat_search_small = cands.iter().any(|c| match (&c.method, &c.engine) {
            (Method::Ifgt, Some(Engine::Ifgt(p))) => {
                m as f64 * plan::ifgt_flat_search(p.n_clusters(), dim)
                    < FLAT_SEARCH_SHARE * c.estimate
            }
            _ => false,
        });
        let buildable = |c: &Candidate| match c.method {
            Method::Direct | Method::Fgt => true,
            Method::DirectTree => c.engine.is_some(),
            Method::Ifgt => ifgt_built,
            Method::IfgtTree => ifgt_built && !flat_search_small,
            Method::Auto => false,
        };
        let low = cands
            .iter()
            .filter(|c| buildable(c))
            .map(|c| c.estimate)
            .fold(f64::INFINITY, f64::min);
        let close: Vec<Method> = cands
            .iter()
            .filter(|c| buildable(c) && c.estimate <= TIME_WINDOW * low)
            .map(|c| c.method)
            .collect();
        let timed = !stopped && self.measure && close.len() > 1 && low > MEASURE_ABOVE_NS;
        let mut measured: Vec<(Method, f64)> = Vec::new();
        let winner = if timed {
            // Round-robin repeats, keeping each one's fastest: a burst of load from other
            // processes then hits one repeat, not one candidate.
            // A candidate clearly behind after a round (1.5x the leader) is not timed again.
            // Targets per trial: a round costs about 4% of the cheapest estimate (at least
            // 1/256 and at most 1/8 of the targets, 64 to 16,384 of them), so that a trial of
            // a slow candidate stays cheap and one of a fast candidate is long enough to be
            // timed above the noise.
            let sum_close: f64 = cands
                .iter()
                .filter(|c| close.contains(&c.method))
                .map(|c| c.estimate)
                .sum();
            let frac = (0.04 * low / sum_close).clamp(1.0 / 256.0, 0.125);
            let trial = ((m as f64 * frac).ceil() as usize).clamp(64, 16_384);
            // one sample for every trial (ordering the targets along the curve is a sort of
            // all of them, and it was most of a trial's cost on small problems)
            let sample = self.timing_sample(trial.min(self.sample_src.len() / dim).max(1));
            let ones = vec![1.0; n * w];
            // Between the two IFGT variants alone the coefficients (one pass over the
            // sources, the same for both) decide nothing: they are timed only against
            // another method (on 1,807 sources in 5-D at 3,003 terms, their timing was 8 ms
            // of a 25 ms plan and call).
            let coefficients = close
                .iter()
                .any(|m| !matches!(m, Method::Ifgt | Method::IfgtTree));
            let mut secs = vec![f64::INFINITY; close.len()];
            'rounds: for round in 0..REPEATS {
                let mut sorted = secs.clone();
                sorted.sort_by(f64::total_cmp);
                let lead = sorted[0];
                if round > 0 && !(sorted.len() > 1 && sorted[1] <= NOISE * lead) {
                    break;
                }
                for (slot, &method) in secs.iter_mut().zip(&close) {
                    if round > 0 && *slot > NOISE * lead {
                        continue;
                    }
                    let engine = self.take_engine(&mut cands, method)?;
                    let t =
                        self.time_engine(&engine, &sample, &ones, coefficients, round, cancel)?;
                    *slot = slot.min(t);
                    self.put_engine(&mut cands, method, engine);
                    if report(&format!("time {}", method.name()), t)? {
                        stopped = true;
                        break 'rounds;
                    }
                }
            }
            // after a stop, only the candidates timed so far
            measured = close
                .iter()
                .copied()
                .zip(secs.iter().copied())
                .filter(|(_, s)| s.is_finite())
                .collect();
            measured
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(Method::Direct, |b| b.0)
        } else {
            cands
                .iter()
                .filter(|c| buildable(c))
                .min_by(|a, b| a.estimate.total_cmp(&b.estimate))
                .map_or(Method::Direct, |c| c.method)
        };
        let engine = self.take_engine(&mut cands, winner)?;
        Ok(Chosen {
            engine,
            estimates,
            measured,
            stopped,
        })
    }

    /// The built engine of `method` (building a direct one; the IFGT with or without the
    /// centre tree from the one clustering).
    fn take_engine(&self, cands: &mut [Candidate], method: Method) -> Result<Engine> {
        let slot = |cands: &mut [Candidate], m: Method| {
            cands
                .iter_mut()
                .find(|c| c.method == m)
                .and_then(|c| c.engine.take())
        };
        Ok(match method {
            Method::Fgt => match slot(cands, method) {
                Some(e) => e,
                None => Engine::Grid(Grid1d::new(
                    self.sources,
                    self.h,
                    self.epsilon,
                    self.m,
                    self.w,
                )?),
            },
            Method::Direct | Method::Auto => slot(cands, Method::Direct).unwrap_or_else(|| {
                Engine::Direct(DirectPlan::new(
                    self.sources,
                    self.dim,
                    self.h,
                    self.epsilon,
                ))
            }),
            Method::DirectTree => match slot(cands, method) {
                Some(e) => e,
                None => Engine::Tree(TreePlan::new(
                    self.sources,
                    self.dim,
                    self.h,
                    self.epsilon,
                    self.tree_radius,
                    self.sample_src,
                )?),
            },
            Method::Ifgt | Method::IfgtTree => {
                let found = slot(cands, Method::Ifgt).or_else(|| slot(cands, Method::IfgtTree));
                let plan = match found {
                    Some(Engine::Ifgt(p)) => *p,
                    _ => self
                        .build_ifgt(false, usize::MAX, &AtomicBool::new(false))?
                        .ok_or_else(|| {
                            crate::error::invalid("method", "the IFGT cannot reach epsilon")
                        })?,
                };
                Engine::Ifgt(Box::new(if method == Method::IfgtTree {
                    plan.with_center_tree()?
                } else {
                    plan.without_center_tree()
                }))
            }
        })
    }

    fn put_engine(&self, cands: &mut [Candidate], method: Method, engine: Engine) {
        // the IFGT plan is kept in the `Ifgt` slot whichever variant was timed
        let key = if method == Method::IfgtTree {
            Method::Ifgt
        } else {
            method
        };
        if let Some(c) = cands.iter_mut().find(|c| c.method == key) {
            c.engine = Some(engine);
        }
    }

    /// The cost of a call of the built tree (its build is paid) from the sources and leaf
    /// runs in reach of the sample, counted in eight interleaved groups. In many dimensions
    /// at a wide cut-off a count visits most of the tree per target, and on small problems
    /// the count of 128 targets was most of the planning: once four groups put the tree
    /// beyond [`TIME_WINDOW`] of `best` (where it is neither timed nor, unless the estimate
    /// is off by that much, picked), the rest are not counted.
    fn tree_estimate(&self, tree: &TreePlan, sample: &[f64], best: f64) -> f64 {
        let (m, dim, w) = (self.m, self.dim, self.w);
        let rows = sample.len() / dim;
        let groups = GROUPS.min(rows).max(1);
        let (mut pts, mut runs, mut counted) = (0.0, 0.0, 0usize);
        let mut group = Vec::with_capacity(sample.len().div_ceil(groups));
        for g in 0..groups {
            group.clear();
            for r in (g..rows).step_by(groups) {
                group.extend_from_slice(&sample[r * dim..(r + 1) * dim]);
            }
            let k = group.len() / dim;
            let (p, l) = tree.mean_sources_in_reach(&group);
            pts += p * k as f64;
            runs += l * k as f64;
            counted += k;
            if g + 1 >= GROUPS / 2 && g + 1 < groups {
                let cost =
                    plan::tree_call_cost(m, dim, w, pts / counted as f64, runs / counted as f64);
                if cost > TIME_WINDOW * best {
                    return cost;
                }
            }
        }
        if counted == 0 {
            let (p, l) = tree.mean_sources_in_reach(&[]);
            return plan::tree_call_cost(m, dim, w, p, l);
        }
        plan::tree_call_cost(m, dim, w, pts / counted as f64, runs / counted as f64)
    }

    /// The IFGT's cost as a clustering of [`PILOT_SOURCES`] sources (on a stride) puts it:
    /// their largest radius at K clusters is about that of all the sources while K is well
    /// below their number (a sample misses the rarest outliers, so this errs low, on the side
    /// of clustering). Infinite when no clustering of the sample within the budget reaches
    /// epsilon (one of all the sources, whose radii are about as large or larger, would not
    /// either: 2.5 ms of a 10 ms plan and call in 10-D went into such a clustering); `None` when
    /// the sample cannot judge: the clusters needed are too many for it, or its clusterings
    /// up to an eighth of its size miss epsilon where the budget allows more.
    fn pilot_cost(&self, targets: &[f64], k_budget: usize) -> Option<f64> {
        let (n, m, dim, w) = (self.sources.len() / self.dim, self.m, self.dim, self.w);
        let pilot = plan::sample_rows(self.sources, dim, PILOT_SOURCES);
        let k_max = (pilot.len() / dim / 8).min(k_budget);
        if n <= PILOT_SOURCES || !clusters_needed_at_most(self.sources, &self.problem, k_max as f64)
        {
            return None;
        }
        let problem = IfgtProblem {
            max_clusters: k_max,
            ..self.problem
        };
        let Some((params, clustering, seeds)) =
            ifgt::choose_clustering(&pilot, &problem, &AtomicBool::new(false)).ok()?
        else {
            return (k_max == k_budget).then_some(f64::INFINITY);
        };
        // The terms the pilot's plan keeps, per source and per target in reach of a cluster,
        // as for the real plan: each source and target keeps only the degrees its distance
        // to the centre needs. Counted at the full degree for every one (clusters of a few
        // tight clumps in 10-D: 43,758 terms each), the pilot put an IFGT 1.5x faster than
        // the direct sum at 45x it.
        let pilot_plan =
            IfgtPlan::new(&pilot, dim, self.accuracy(), clustering, &seeds, false).ok()?;
        let (in_reach, per_pair) = pilot_plan.work_in_reach(targets);
        let full = monomials::n_terms(dim, pilot_plan.truncation() - 1);
        let (source_share, pair_share) = (pilot_plan.mean_source_terms() / full, per_pair / full);
        let size = plan::Size { n, m, dim, w };
        // (at another truncation, the pilot's shares of its full count)
        let cost = |k: usize, p: usize, reach: f64| {
            let full = monomials::n_terms(dim, p - 1);
            let terms = plan::IfgtTerms {
                per_source: source_share * full,
                per_pair: pair_share * full,
            };
            plan::ifgt_cost(size, k, terms, reach, false)
                .min(plan::ifgt_cost(size, k, terms, reach, true))
        };
        let k = params.n_clusters;
        let at_pilot = cost(k, pilot_plan.truncation(), in_reach);
        // Still falling at the sample's limit: the budget's clusters, with the radius shrunk
        // as for points filling their dimensions (K^(-1/d): an optimistic rate for clumps)
        // and as many more clusters in reach.
        if 2 * k <= k_max || k_budget <= k {
            return Some(at_pilot);
        }
        let radius = params.max_radius * (k as f64 / k_budget as f64).powf(1.0 / dim as f64);
        let beyond = crate::bounds::truncation_number(
            radius,
            self.ifgt_cutoff + radius,
            self.h,
            self.epsilon,
            crate::MAX_TRUNCATION,
        )
        .map_or(f64::INFINITY, |p| {
            cost(k_budget, p, in_reach * k_budget as f64 / k as f64)
        });
        Some(at_pilot.min(beyond))
    }

    /// About `s` targets for timing: eight runs of consecutive targets along a Z-order curve,
    /// spread evenly over it. Runs keep the targets as dense as they really are (the tree
    /// and the IFGT's target groups gain from neighbours sharing leaves and clusters, which a
    /// thin strided sample would hide), eight of them cover the space.
    fn timing_sample(&self, s: usize) -> Vec<f64> {
        let dim = self.dim;
        let total = self.sample_src.len() / dim;
        if s >= total {
            return self.sample_src.to_vec();
        }
        let order = ifgt::morton_order(self.sample_src, dim);
        let runs = 8usize;
        let per = s.div_ceil(runs);
        let mut out = Vec::with_capacity(runs * per * dim);
        for r in 0..runs {
            let start = (r * total / runs).min(total - per);
            for &i in &order[start..start + per] {
                out.extend_from_slice(&self.sample_src[i * dim..(i + 1) * dim]);
            }
        }
        out
    }

    /// Extrapolated seconds of one evaluation at `m` targets with `w` weight columns; for
    /// the IFGT, with its coefficients only when `coefficients` is set (timed once in each
    /// `round` of trials).
    fn time_engine(
        &self,
        engine: &Engine,
        sample: &[f64],
        ones: &[f64],
        coefficients: bool,
        round: usize,
        cancel: &AtomicBool,
    ) -> Result<f64> {
        let dim = self.dim;
        let s = sample.len() / dim;
        let one = &sample[..dim];
        let n = self.sources.len() / dim;
        let threads = rayon::current_num_threads() as f64;
        let run = |targets: &[f64]| -> Result<f64> {
            let mut out = vec![0.0; targets.len() / dim * self.w];
            let t0 = cpu_seconds();
            match engine {
                Engine::Direct(p) => p.evaluate(targets, ones, self.w, &mut out, cancel)?,
                Engine::Tree(p) => p.evaluate(targets, ones, self.w, &mut out, cancel)?,
                Engine::Ifgt(p) => {
                    // coefficients of one weight column per cluster term, shared
                    let coeffs = vec![0.0; p.n_clusters() * self.w * p.n_terms()];
                    p.evaluate(targets, &coeffs, self.w, &mut out, cancel)?
                }
                Engine::Grid(g) => g.evaluate(targets, ones, self.w, &mut out, cancel)?,
            }
            // CPU seconds over the threads: about the wall-clock time on an idle machine
            Ok((cpu_seconds() - t0) / threads)
        };
        // the fixed part of a call, then the sample
        let fixed = run(one)?;
        let t = run(sample)?;
        // The one-target call also catches the threads' wake-up, which on a loaded machine
        // can be most of it: a per-target cost below 0.8 of the sample's mean would
        // underestimate the sum (the direct method was taken at a quarter of its time).
        // The grid's fixed part (the sources' moments) is real and large: it is kept whole.
        let floor = match engine {
            Engine::Grid(_) => 0.0,
            _ => 0.8 * t / s as f64,
        };
        let per_target = ((t - fixed) / (s.max(2) - 1) as f64).max(floor);
        // the coefficients are the same for both IFGT variants: timed once, on a sixteenth
        // of the sources (at least 2,000 of them), and on one source per cluster for the
        // fixed part of the pass (the clusters' accumulators: in 7-D at 1e-9, many thousand
        // terms each, and scaling it up with the sources took the IFGT at 4x its time)
        let coefficients = match engine {
            Engine::Ifgt(_) if !coefficients => 0.0,
            // Timed once a round (both IFGT variants share them), keeping the fastest: one
            // timing moved by 1.7x between plans (0.060-0.102 s on 71,070 sources in 5-D),
            // and a round that reused a slow one could not undo it (the IFGT at 0.26 s
            // against a 0.21 s direct sum it beats by 2x).
            Engine::Ifgt(p) => match self.coefficient_seconds.get() {
                Some((r, t)) if r == round => t,
                before => {
                    let stride = (n / 2000).clamp(1, 16);
                    let (t, used) = p.time_coefficients(self.sources, self.w, stride, cancel)?;
                    let t = if stride > 1 {
                        let (t1, used1) =
                            p.time_coefficients(self.sources, self.w, usize::MAX, cancel)?;
                        // between the sample's own time and its plain scaling (the tiny
                        // pass can catch a thread's wake-up)
                        if used > used1 {
                            let per_source = (t - t1).max(0.0) / (used - used1) as f64;
                            (t1 + per_source * n.saturating_sub(used1) as f64)
                                .clamp(t, t * n as f64 / used as f64)
                        } else {
                            t * n as f64 / used.max(1) as f64
                        }
                    } else {
                        t
                    };
                    let t = before.map_or(t, |(_, b)| b.min(t));
                    self.coefficient_seconds.set(Some((round, t)));
                    t
                }
            },
            _ => 0.0,
        };
        Ok(fixed + coefficients + per_target * self.m as f64)
    }
}

#[cfg(test)]
mod tests {
    use crate::{GaussTransform, Method, PlanOptions, direct_reference};
    use std::sync::atomic::AtomicBool;

    fn points(n: usize, dim: usize, seed: u64) -> Vec<f64> {
        crate::testing::uniform(n * dim, seed)
    }

    /// The count that stops once decided answers as the whole count does, on either side
    /// of the share, where it is decided early (few or most pairs in reach) and late.
    #[test]
    fn share_above_stops_with_the_answer_of_the_whole_count() {
        let dim = 3;
        let sources = points(1000, dim, 81);
        let sample = points(128, dim, 82);
        let stride = 1000usize.div_ceil(super::REACH_SOURCES);
        for radius in [0.05, 0.3, 0.6, 2.0] {
            let mut inside = 0usize;
            let mut pairs = 0usize;
            for y in sample.chunks_exact(dim) {
                for x in sources.chunks_exact(dim).step_by(stride) {
                    let d2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
                    inside += usize::from(d2 <= radius * radius);
                    pairs += 1;
                }
            }
            let share = inside as f64 / pairs as f64;
            for bar in [
                0.0,
                0.5 * share,
                share - 1e-9,
                share,
                share + 1e-9,
                1.5 * share,
            ] {
                assert_eq!(
                    super::share_within_above(&sources, dim, &sample, radius, bar),
                    share > bar,
                    "radius {radius}, share {share}, bar {bar}"
                );
            }
        }
    }

    /// Plans `Method::Auto` with a hook that records the name of every planning stage.
    fn plan_recording_stages(
        x: &[f64],
        dim: usize,
        h: f64,
        eps: f64,
        options: &PlanOptions<'_>,
    ) -> (GaussTransform, Vec<String>) {
        use std::sync::Mutex;
        use vastml_core::Control;
        let cancel = AtomicBool::new(false);
        let seen = Mutex::new(Vec::new());
        let hook = |_: usize, _: f64, stage: &str| {
            seen.lock().unwrap().push(stage.to_string());
            false
        };
        let control = Control::<str>::new(&cancel).with_hook(&hook, 1);
        let gt = GaussTransform::plan_with_control(x, dim, h, eps, Method::Auto, options, &control)
            .unwrap();
        (gt, seen.into_inner().unwrap())
    }

    /// Auto times its close candidates (here several are close at this size) and whatever
    /// it keeps meets epsilon against the direct sum.
    #[test]
    fn measured_auto_meets_epsilon_and_reports_what_it_timed() {
        let (n, dim, h, eps) = (20_000, 2, 0.05, 1e-6);
        let x = points(n, dim, 3);
        let y = points(3000, dim, 4);
        let q: Vec<f64> = points(n, 1, 5);
        let options = PlanOptions {
            target_sample: Some(&y),
            n_targets: Some(20_000),
            ..PlanOptions::default()
        };
        let cancel = AtomicBool::new(false);
        let gt =
            GaussTransform::plan_with(&x, dim, h, eps, Method::Auto, &options, &cancel).unwrap();
        let info = gt.info();
        assert_ne!(info.method, Method::Auto);
        assert!(info.measured.len() >= 2, "{info:?}");
        assert!(info.measured.iter().all(|(_, s)| *s > 0.0));
        let g = gt.evaluate(&y[..200], &q, 1, &cancel).unwrap();
        let exact = direct_reference(&x, &y[..200], dim, &q, 1, h);
        let qsum: f64 = q.iter().sum();
        for (a, b) in g.iter().zip(&exact) {
            assert!((a - b).abs() <= eps * qsum);
        }
    }

    /// The planner reports its stages 1, 2, ... in order, named; a hook's stop ends the
    /// planning with a usable plan that still meets epsilon; a raised cancel flag is an error.
    #[test]
    fn planning_stages_are_reported_and_a_stop_keeps_a_usable_plan() {
        use std::sync::Mutex;
        use vastml_core::Control;
        let (n, dim, h, eps) = (20_000, 2, 0.05, 1e-6);
        let x = points(n, dim, 3);
        let y = points(3000, dim, 4);
        let q: Vec<f64> = points(n, 1, 5);
        let options = PlanOptions {
            target_sample: Some(&y),
            n_targets: Some(20_000),
            ..PlanOptions::default()
        };
        let cancel = AtomicBool::new(false);
        let seen = Mutex::new(Vec::new());
        let hook = |it: usize, seconds: f64, stage: &str| {
            seen.lock().unwrap().push((it, seconds, stage.to_string()));
            false
        };
        let control = Control::<str>::new(&cancel).with_hook(&hook, 1);
        let gt =
            GaussTransform::plan_with_control(&x, dim, h, eps, Method::Auto, &options, &control)
                .unwrap();
        let seen = seen.into_inner().unwrap();
        assert!(!gt.info().stopped);
        assert!(seen.len() >= 3, "{seen:?}");
        assert_eq!(seen[0].2, "estimate");
        assert!(
            seen.iter()
                .enumerate()
                .all(|(k, (it, s, _))| *it == k + 1 && *s > 0.0)
        );
        assert!(seen.iter().any(|(_, _, name)| name.starts_with("time ")));

        let stop = |_: usize, _: f64, _: &str| true;
        let control = Control::<str>::new(&cancel).with_hook(&stop, 1);
        let gt =
            GaussTransform::plan_with_control(&x, dim, h, eps, Method::Auto, &options, &control)
                .unwrap();
        assert!(gt.info().stopped && gt.info().measured.is_empty());
        let g = gt.evaluate(&y[..200], &q, 1, &cancel).unwrap();
        let exact = direct_reference(&x, &y[..200], dim, &q, 1, h);
        let qsum: f64 = q.iter().sum();
        assert!(
            g.iter()
                .zip(&exact)
                .all(|(a, b)| (a - b).abs() <= eps * qsum)
        );

        let raised = AtomicBool::new(true);
        let control = Control::<str>::new(&raised);
        assert!(matches!(
            GaussTransform::plan_with_control(&x, dim, h, eps, Method::Auto, &options, &control),
            Err(crate::FgtError::Cancelled)
        ));
    }

    /// Auto's plan is the chosen method's plan: its result equals, bit for bit, that of
    /// the method it reports planned on its own (direct and tree sums, the grid on a line),
    /// and meets epsilon against the direct sum.
    #[test]
    fn auto_gives_the_chosen_methods_own_result() {
        let cancel = AtomicBool::new(false);
        // (dim, h, eps): a wide bandwidth in 9-D (direct), a small one in 3-D (tree), a line
        for &(dim, h, eps) in &[(9usize, 1.5, 1e-6), (3, 0.02, 1e-6), (1, 0.05, 1e-8)] {
            let x = points(6000, dim, 21);
            let y = points(3000, dim, 22);
            let q: Vec<f64> = points(6000, 1, 23).iter().map(|v| v - 0.2).collect();
            let options = PlanOptions {
                target_sample: Some(&y),
                measure: false,
                ..PlanOptions::default()
            };
            let auto = GaussTransform::plan_with(&x, dim, h, eps, Method::Auto, &options, &cancel)
                .unwrap();
            let method = auto.method();
            assert!(
                matches!(method, Method::Direct | Method::DirectTree | Method::Fgt),
                "{dim}: {:?}",
                auto.info()
            );
            let own =
                GaussTransform::plan_with(&x, dim, h, eps, method, &options, &cancel).unwrap();
            let a = auto.evaluate(&y, &q, 1, &cancel).unwrap();
            assert_eq!(a, own.evaluate(&y, &q, 1, &cancel).unwrap(), "{method}");
            let exact = direct_reference(&x, &y[..200 * dim], dim, &q, 1, h);
            let qsum: f64 = q.iter().map(|v| v.abs()).sum();
            assert!(
                a.iter()
                    .zip(&exact)
                    .all(|(g, e)| (g - e).abs() <= eps * qsum)
            );
        }
    }

    /// On a line with far outliers (0.5% of the sources 100-10,000 spreads away) at a small
    /// bandwidth, the grid stores only its occupied boxes, so auto's model keeps it (or a
    /// clustering) rather than a direct or tree sum, and the result meets epsilon.
    #[test]
    fn a_line_with_far_outliers_picks_a_grid_or_clusters() {
        let n = 50_000;
        let mut x: Vec<f64> = points(n, 1, 31).iter().map(|v| v - 0.5).collect();
        for (i, v) in x.iter_mut().enumerate().step_by(200) {
            let side = if i % 400 == 0 { 1.0 } else { -1.0 };
            *v = side * 100.0 * (1.0 + 99.0 * (i as f64 / n as f64));
        }
        let y = x.clone();
        let q: Vec<f64> = points(n, 1, 32);
        let cancel = AtomicBool::new(false);
        for &(h, eps) in &[(0.02, 1e-4), (0.005, 1e-7)] {
            let options = PlanOptions {
                target_sample: Some(&y),
                measure: false,
                ..PlanOptions::default()
            };
            let gt =
                GaussTransform::plan_with(&x, 1, h, eps, Method::Auto, &options, &cancel).unwrap();
            assert!(
                matches!(gt.method(), Method::Fgt | Method::Ifgt | Method::IfgtTree),
                "h={h}: {:?}",
                gt.info()
            );
            let g = gt.evaluate(&y[..300], &q, 1, &cancel).unwrap();
            let exact = direct_reference(&x, &y[..300], 1, &q, 1, h);
            let qsum: f64 = q.iter().sum();
            assert!(
                g.iter()
                    .zip(&exact)
                    .all(|(a, b)| (a - b).abs() <= eps * qsum)
            );
        }
    }

    /// In 10-D at a cut-off that holds most sources, the tree cannot beat the direct sum:
    /// the direct count on a stride of the sources rules it out before it is built (no
    /// "direct-tree" stage), and the direct sum runs.
    #[test]
    fn a_tree_holding_most_sources_is_not_built() {
        let (n, dim, h, eps) = (20_000, 10, 0.55, 1e-6);
        let x = points(n, dim, 41);
        let y = points(2000, dim, 42);
        let options = PlanOptions {
            target_sample: Some(&y),
            measure: false,
            ..PlanOptions::default()
        };
        let (gt, seen) = plan_recording_stages(&x, dim, h, eps, &options);
        assert!(!seen.iter().any(|s| s == "direct-tree"), "{seen:?}");
        assert!(
            gt.info()
                .estimates
                .iter()
                .any(|(m, _)| *m == Method::DirectTree),
            "{:?}",
            gt.info()
        );
        assert_eq!(gt.method(), Method::Direct);
    }

    /// Tight clusters in 10-D: the uniform model finds the IFGT possible but far dearer
    /// than the direct sum; the sample is crowded, and a clustering of 2,048 of the 3,000
    /// sources finds the IFGT cheap, so the clustering is tried (an "ifgt" stage is
    /// reported) and, with few clusters holding every source, the IFGT is kept, within
    /// epsilon of the direct sum.
    #[test]
    fn tight_clusters_in_many_dimensions_get_the_clustering_tried() {
        let (dim, h, eps) = (10usize, 0.5, 1e-6);
        let centres = points(6, dim, 51);
        let noise = points(3000 * dim, 1, 52);
        let x: Vec<f64> = (0..3000 * dim)
            .map(|i| centres[(i / dim % 6) * dim + i % dim] + 1e-3 * (noise[i] - 0.5))
            .collect();
        let options = PlanOptions {
            target_sample: Some(&x),
            n_targets: Some(200_000),
            measure: false,
            ..PlanOptions::default()
        };
        let (gt, seen) = plan_recording_stages(&x, dim, h, eps, &options);
        assert!(seen.iter().any(|s| s == "ifgt"), "{seen:?}");
        assert!(
            matches!(gt.method(), Method::Ifgt | Method::IfgtTree),
            "{:?}",
            gt.info()
        );
        let q = vec![1.0; 3000];
        let g = gt
            .evaluate(&x[..100 * dim], &q, 1, &AtomicBool::new(false))
            .unwrap();
        let exact = direct_reference(&x, &x[..100 * dim], dim, &q, 1, h);
        assert!(
            g.iter()
                .zip(&exact)
                .all(|(a, b)| (a - b).abs() <= eps * 3000.0)
        );
    }

    /// Nine Gaussian clumps of widths 0.002-0.1 in 10-D under a kernel wider than all of
    /// them, few targets: the crowded sample sends the IFGT to the pilot clustering, which
    /// counts the terms its sources and targets keep (most sit near their centres), as the
    /// plan of all the sources does, and lets the clustering run: that plan puts the IFGT
    /// within the window of the direct sum. Counted at the full 43,758 terms for each, the
    /// pilot put it beyond and the clustering never ran (on such clumps of 436,600 sources
    /// the IFGT then ran 1.5x faster than the direct sum auto kept).
    #[test]
    fn the_pilot_counts_the_terms_its_plan_keeps() {
        let (n, m, dim, h, eps) = (30_000usize, 2400usize, 10usize, 2.7, 3.7e-8);
        let centres = points(9, dim, 91);
        let widths = [0.1, 0.002, 0.05, 0.01, 0.1, 0.003, 0.03, 0.08, 0.005];
        let u = points(2 * n * dim, 1, 92);
        let x: Vec<f64> = (0..n * dim)
            .map(|i| {
                // unequal weights: point j in clump j^2 mod 9
                let c = (i / dim) * (i / dim) % 9;
                let radius = (-2.0 * u[2 * i].max(1e-300).ln()).sqrt();
                let gauss = radius * (std::f64::consts::TAU * u[2 * i + 1]).cos();
                centres[c * dim + i % dim] + widths[c] * gauss
            })
            .collect();
        let options = PlanOptions {
            target_sample: Some(&x[..m * dim]),
            n_targets: Some(m),
            measure: false,
            ..PlanOptions::default()
        };
        let (gt, seen) = plan_recording_stages(&x, dim, h, eps, &options);
        assert!(seen.iter().any(|s| s == "ifgt"), "{seen:?} {:?}", gt.info());
        let estimate = |method| {
            let found = gt
                .info()
                .estimates
                .iter()
                .find(|e| e.0 == method)
                .map(|e| e.1);
            found.unwrap_or_else(|| panic!("no {method} estimate: {:?}", gt.info()))
        };
        let (direct, ifgt) = (estimate(Method::Direct), estimate(Method::Ifgt));
        assert!(ifgt < super::WINDOW * direct, "{:?}", gt.info());
    }

    /// The same clusters, each spread far wider than the bandwidth: a usable cluster would
    /// hold a single source, so the clustering is not run (before, the crowded sample sent it
    /// up to its budget of clusters, a third of the plan).
    #[test]
    fn clusters_that_cannot_reach_epsilon_are_not_run() {
        let (n, dim, h, eps) = (5000, 10usize, 0.01, 1e-9);
        let centres = points(6, dim, 51);
        let noise = points(n * dim, 1, 52);
        let x: Vec<f64> = (0..n * dim)
            .map(|i| centres[(i / dim % 6) * dim + i % dim] + 0.02 * (noise[i] - 0.5))
            .collect();
        let gt = plan_without_an_ifgt(&x, dim, (h, eps), &x, 25_000);
        // (the crowding admitted the clustering, the estimates leave no IFGT behind)
        assert!(gt.info().estimates.iter().all(|e| e.0 != Method::Ifgt));
        // A usable cluster holds one source here, a sixth of them with tight clusters.
        let problem = |h: f64| crate::ifgt::IfgtProblem::on_unit_range(n, 25_000, dim, h, eps);
        let at_most = super::clusters_needed_at_most;
        assert!(!at_most(&x, &problem(h), 0.5 * n as f64));
        let tight: Vec<f64> = (0..n * dim)
            .map(|i| centres[(i / dim % 6) * dim + i % dim] + 1e-4 * (noise[i] - 0.5))
            .collect();
        assert!(at_most(&tight, &problem(h), 8.0));
        assert!(!at_most(&tight, &problem(h), 5.0));
    }

    /// One tight cluster and a wide kernel: the IFGT has one centre, so the centre tree has
    /// nothing to find, and only the plain IFGT is a candidate: nothing is timed (before,
    /// the two variants were, on every plan).
    #[test]
    fn one_cluster_leaves_the_centre_tree_untimed() {
        let (n, dim, h, eps) = (3000, 5, 1.0, 1e-9);
        let x: Vec<f64> = points(n, dim, 71).iter().map(|v| 0.3 * v).collect();
        let options = PlanOptions {
            target_sample: Some(&x),
            n_targets: Some(400_000),
            ..PlanOptions::default()
        };
        let gt = GaussTransform::plan_with(
            &x,
            dim,
            h,
            eps,
            Method::Auto,
            &options,
            &AtomicBool::new(false),
        )
        .unwrap();
        let info = gt.info();
        assert_eq!(gt.method(), Method::Ifgt, "{info:?}");
        assert_eq!(info.n_clusters, 1, "{info:?}");
        // both variants were estimated, above the timing threshold and within its window
        let est = |m: Method| info.estimates.iter().find(|e| e.0 == m).unwrap().1;
        let (flat, treed) = (est(Method::Ifgt), est(Method::IfgtTree));
        assert!(flat * 1e9 > super::MEASURE_ABOVE_NS, "{info:?}");
        assert!(treed <= super::TIME_WINDOW * flat, "{info:?}");
        assert!(info.measured.is_empty(), "{info:?}");
    }

    /// Plans `auto` at `n_targets` targets (measuring nothing) and checks that no IFGT came
    /// out of the clustering (no "ifgt" stage) and that the direct sum or the tree was kept.
    fn plan_without_an_ifgt(
        x: &[f64],
        dim: usize,
        (h, eps): (f64, f64),
        sample: &[f64],
        n_targets: usize,
    ) -> GaussTransform {
        let options = PlanOptions {
            target_sample: Some(sample),
            n_targets: Some(n_targets),
            measure: false,
            ..PlanOptions::default()
        };
        let (gt, seen) = plan_recording_stages(x, dim, h, eps, &options);
        assert!(
            !seen.iter().any(|s| s == "ifgt"),
            "{seen:?} {:?}",
            gt.info()
        );
        assert!(
            matches!(gt.method(), Method::Direct | Method::DirectTree),
            "{:?}",
            gt.info()
        );
        gt
    }

    /// The sides of the points' bounding box.
    fn box_sides(x: &[f64], dim: usize) -> Vec<f64> {
        (0..dim)
            .map(|k| {
                let c = x.iter().skip(k).step_by(dim);
                c.clone().fold(f64::NEG_INFINITY, |a, &b| a.max(b))
                    - c.fold(f64::INFINITY, |a, &b| a.min(b))
            })
            .collect()
    }

    /// `n` points of a Student-t distribution with two degrees of freedom in `dim`
    /// dimensions: a normal vector (Box-Muller, coordinates paired cyclically) over
    /// sqrt(chi2(2) / 2) = sqrt(-ln u).
    fn student_t2(n: usize, dim: usize, seed: u64) -> Vec<f64> {
        let u = points(n * (dim + 1), 1, seed);
        (0..n)
            .flat_map(|i| {
                let r = &u[i * (dim + 1)..(i + 1) * (dim + 1)];
                let scale = 1.0 / (-(1.0 - r[dim]).ln()).sqrt();
                (0..dim).map(move |k| {
                    let (a, b) = (1.0 - r[k], r[(k + 1) % dim]);
                    (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos() * scale
                })
            })
            .collect()
    }

    /// Heavy tails in 6-D at a small bandwidth: only a cluster per source or so reaches
    /// epsilon, and such an IFGT evaluates its terms where the tree sums a source or two.
    /// The clustering stops at half the sources, so no IFGT comes out of it.
    #[test]
    fn clusters_of_single_sources_are_not_an_ifgt() {
        let (n, dim, h, eps) = (2500usize, 6usize, 0.16, 7e-8);
        let x = student_t2(n, dim, 81);
        plan_without_an_ifgt(&x, dim, (h, eps), &x, 250_000);
        // (with every source allowed a cluster, one reaches epsilon, with most of them)
        let range = box_sides(&x, dim).into_iter().fold(0.0, f64::max);
        let problem = crate::ifgt::IfgtProblem {
            n_sources: n,
            n_targets: 250_000,
            dim,
            range,
            bandwidth: h,
            epsilon: eps,
            cutoff: crate::cutoff_radius(h, eps, None),
            max_clusters: n,
        };
        let (params, _, _) = crate::ifgt::choose_clustering(&x, &problem, &AtomicBool::new(false))
            .unwrap()
            .unwrap();
        assert!(2 * params.n_clusters > n, "{params:?}");
    }

    /// Heavy tails in 10-D at a wide kernel: the data look crowded, the uniform model has no
    /// estimate, and only clusterings of a few sources each reach epsilon. The clustering
    /// stops at a sixteenth of the sources, where the pilot already judges it hopeless; the
    /// full clustering of up to half the sources (27 ms against a 57 ms direct sum on a case
    /// of the sums grid) is not run.
    #[test]
    fn a_crowded_clustering_stops_at_sixteen_sources_a_cluster() {
        let (n, dim, h, eps) = (2750usize, 10usize, 8.0, 1e-4);
        let x = student_t2(n, dim, 195);
        let y = student_t2(2000, dim, 196);
        plan_without_an_ifgt(&x, dim, (h, eps), &y, 23_600);
    }

    /// The IFGT's coefficients are timed again in each round of trials and the fastest
    /// timing is kept: a slow first timing (a thread's wake-up, fresh memory) does not stay
    /// for the whole plan. Within a round, both IFGT variants share one timing.
    #[test]
    fn each_round_times_the_coefficients_again() {
        let (n, dim, h, eps) = (4000usize, 3usize, 0.5, 1e-6);
        let x = points(n, dim, 91);
        let sides = vec![1.0; dim];
        let cutoff = crate::cutoff_radius(h, eps, None);
        let ctx = super::Context {
            sources: &x,
            dim,
            h,
            epsilon: eps,
            m: n,
            w: 1,
            diag: (dim as f64).sqrt(),
            sides: &sides,
            tree_radius: cutoff,
            ifgt_cutoff: cutoff,
            problem: crate::ifgt::IfgtProblem {
                n_sources: n,
                n_targets: n,
                dim,
                range: 1.0,
                bandwidth: h,
                epsilon: eps,
                cutoff,
                max_clusters: usize::MAX,
            },
            sample_src: &x,
            measure: true,
            coefficient_seconds: std::cell::Cell::new(None),
        };
        let cancel = AtomicBool::new(false);
        let plan = ctx
            .build_ifgt(false, usize::MAX, &cancel)
            .expect("uniform points in the unit cube plan without error")
            .expect("the IFGT reaches epsilon at this bandwidth");
        let engine = crate::Engine::Ifgt(Box::new(plan));
        let (ones, sample) = (vec![1.0; n], &x[..256 * dim]);
        let time = |round| {
            ctx.time_engine(&engine, sample, &ones, true, round, &cancel)
                .expect("a trial of a built plan on its own sources runs")
        };
        assert!(time(0) < 1e3);
        assert_eq!(ctx.coefficient_seconds.get().map(|c| c.0), Some(0));
        // a first timing of 1,000 s: kept within its round, replaced in the next one
        ctx.coefficient_seconds.set(Some((0, 1e3)));
        assert!(time(0) >= 1e3);
        let next = time(1);
        let kept = ctx.coefficient_seconds.get().expect("timed");
        assert!(next < 1e3 && kept.0 == 1 && kept.1 < 1e3, "{next} {kept:?}");
    }

    /// Student-t sources (two degrees of freedom) in 3-D look crowded, their bulk in a small
    /// part of the box the tails stretch: the crowding alone would send them to the
    /// clustering, which reaches epsilon there, but at an IFGT far dearer than the tree. A
    /// clustering of a sample says so first, and the full one is not run.
    #[test]
    fn heavy_tails_are_judged_on_a_sample_before_the_clustering() {
        let (n, dim, h, eps) = (12_000usize, 3usize, 0.5, 3e-4);
        let x = student_t2(n, dim, 61);
        let gt = plan_without_an_ifgt(&x, dim, (h, eps), &x[..5000 * dim], 30_000);
        // the estimate that gives the clustering its widest share (a fifth of it)
        let best = gt
            .info()
            .estimates
            .iter()
            .map(|e| e.1)
            .fold(f64::INFINITY, f64::min);
        assert!(best * 1e9 > super::TRY_IFGT_WIDE_ABOVE_NS, "{best}");
        let sides = box_sides(&x, dim);
        let crowding = crate::plan::crowding(&crate::plan::sample_rows(&x, dim, 128), dim, &sides);
        assert!(crowding < super::CROWDED, "{crowding}");
        // and a clustering within that share reaches epsilon
        let problem = crate::ifgt::IfgtProblem {
            n_sources: n,
            n_targets: 30_000,
            dim,
            range: sides.iter().copied().fold(0.0, f64::max),
            bandwidth: h,
            epsilon: eps,
            cutoff: crate::cutoff_radius(h, eps, None),
            max_clusters: (0.2 * best * 1e9 / (n * dim) as f64 / super::CLUSTERING_BUDGET_PER_DIM)
                as usize,
        };
        let clustering =
            crate::ifgt::choose_clustering(&x, &problem, &AtomicBool::new(false)).unwrap();
        assert!(clustering.is_some());
    }

    /// Fixed-p mode uses exactly the given p: a large p is as accurate as the bound asks,
    /// p = 1 (the cluster's total weight at its centre) is far off, and the plan says so.
    #[test]
    fn fixed_truncation_and_clusters_are_used() {
        let (n, dim, h) = (3000, 3, 0.4);
        let x = points(n, dim, 7);
        let q = vec![1.0; n];
        let cancel = AtomicBool::new(false);
        let exact = direct_reference(&x, &x[..300], dim, &q, 1, h);
        let err = |p: usize, k: usize| {
            let options = PlanOptions {
                truncation: Some(p),
                n_clusters: Some(k),
                ..PlanOptions::default()
            };
            let gt = GaussTransform::plan_with(&x, dim, h, 1e-6, Method::Ifgt, &options, &cancel)
                .unwrap();
            assert_eq!(gt.info().truncation, p);
            assert_eq!(gt.info().n_clusters, k);
            let g = gt.evaluate(&x[..300], &q, 1, &cancel).unwrap();
            g.iter()
                .zip(&exact)
                .map(|(a, b)| (a - b).abs() / n as f64)
                .fold(0.0, f64::max)
        };
        assert!(err(20, 30) < 1e-7);
        assert!(err(1, 30) > 1e-3);
        assert!(err(6, 30) < err(2, 30));
        // a fixed p needs an IFGT method
        let options = PlanOptions {
            truncation: Some(4),
            ..PlanOptions::default()
        };
        assert!(
            GaussTransform::plan_with(&x, dim, h, 1e-6, Method::Auto, &options, &cancel).is_err()
        );
    }
}

#[cfg(test)]
mod streamed_tests {
    use crate::{GaussTransform, Method, direct_reference};
    use std::sync::atomic::AtomicBool;

    /// Above 65,536 sources the coefficients come from one pass in memory order; the
    /// transform still meets epsilon against the direct sum, and the same for any thread count.
    #[test]
    fn streamed_coefficients_meet_epsilon() {
        let (n, dim, h, eps) = (70_000, 2, 0.2, 1e-8);
        let mut state = 9u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let x: Vec<f64> = (0..n * dim).map(|_| next()).collect();
        let q: Vec<f64> = (0..n * 2).map(|_| next() - 0.3).collect();
        let y = &x[..200 * dim];
        let cancel = AtomicBool::new(false);
        let gt = GaussTransform::new(&x, dim, h, eps, Method::Ifgt).unwrap();
        let g = gt.evaluate(y, &q, 2, &cancel).unwrap();
        let exact = direct_reference(&x, y, dim, &q, 2, h);
        for w in 0..2 {
            let qsum: f64 = q.iter().skip(w).step_by(2).map(|v| v.abs()).sum();
            for j in 0..200 {
                assert!((g[j * 2 + w] - exact[j * 2 + w]).abs() <= eps * qsum);
            }
        }
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let g1 = one.install(|| gt.evaluate(y, &q, 2, &cancel).unwrap());
        assert_eq!(g, g1);
        // the streamed and the per-cluster passes both stop on a raised cancel flag
        let crate::Engine::Ifgt(plan) = &gt.engine else {
            panic!("an IFGT plan was asked for");
        };
        let raised = AtomicBool::new(true);
        assert!(matches!(
            plan.coefficients(&x, &q, 2, &raised),
            Err(crate::FgtError::Cancelled)
        ));
        assert!(matches!(
            plan.time_coefficients(&x, 2, 2, &raised),
            Err(crate::FgtError::Cancelled)
        ));
        let r = plan.coefficients_of(&x[..1000 * dim], &q[..2000], 2, &raised);
        assert!(matches!(r, Err(crate::FgtError::Cancelled)), "{r:?}");
    }
}

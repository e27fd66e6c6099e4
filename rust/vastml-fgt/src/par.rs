//! Small calls run in one piece on the calling thread.
//!
//! Handing a call of a few hundred microseconds to a pool costs more than it saves: waking a
//! second thread takes tens of microseconds on an idle machine, and on a loaded one a thread
//! that is woken often waits a whole scheduler tick (4 ms) for a core. A call estimated below
//! [`INLINE_NS`] of work is therefore run sequentially: [`GaussTransform::evaluate`] marks
//! its thread for the duration of the call, and every parallel loop of an evaluation asks
//! [`sequential`] before splitting. The chunks are the same either way, so the result is
//! the same to the last bit.
//!
//! [`GaussTransform::evaluate`]: crate::GaussTransform::evaluate

use std::cell::Cell;

/// Estimated work (ns on one core) below which a call runs on the calling thread.
pub const INLINE_NS: f64 = 5e5;

thread_local! {
    static SEQUENTIAL: Cell<bool> = const { Cell::new(false) };
}

/// Whether the evaluation running on this thread was marked to run in one piece.
pub(crate) fn sequential() -> bool {
    SEQUENTIAL.with(Cell::get)
}

/// Marks the calling thread's planning and evaluations sequential (when `on`) until the guard
/// is dropped: for a call run on a thread outside any pool (a caller's own thread), whose
/// parallel loops would otherwise go to rayon's global pool, whatever number of threads the
/// caller asked for.
///
/// ```
/// let _sequential = vastml_fgt::SequentialScope::new(true);
/// // vastml-fgt's loops on this thread now run in one piece, with the same results
/// ```
pub struct SequentialScope(bool);

impl SequentialScope {
    /// Marks (when `on`) until the guard is dropped; the previous mark is restored then.
    pub fn new(on: bool) -> Self {
        SequentialScope(SEQUENTIAL.with(|s| s.replace(on)))
    }
}

impl Drop for SequentialScope {
    fn drop(&mut self) {
        SEQUENTIAL.with(|s| s.set(self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::SequentialScope;
    use crate::{GaussTransform, Method, direct_reference};
    use std::sync::atomic::AtomicBool;

    fn points(n: usize, seed: u64) -> Vec<f64> {
        crate::testing::uniform(n, seed)
    }

    /// A call at one target still runs the IFGT's coefficients over every source: over many
    /// sources it is not a small call, whatever the number of targets.
    #[test]
    fn ifgt_coefficients_over_many_sources_are_not_inline() {
        let (n, dim) = (60_000, 2);
        let x = points(n * dim, 21);
        let gt = GaussTransform::new(&x, dim, 0.5, 1e-6, Method::Ifgt).unwrap();
        let crate::Engine::Ifgt(p) = &gt.engine else {
            panic!("{:?}", gt.info())
        };
        let fixed = crate::plan::ifgt_coefficient_cost(
            crate::plan::Size { n, m: 1, dim, w: 1 },
            p.mean_source_terms(),
        );
        assert!(fixed > super::INLINE_NS, "{fixed}");
        assert!(!gt.runs_inline(1, 1));
        // a few thousand sources stay a small call
        let small = GaussTransform::new(&x[..2000 * dim], dim, 0.5, 1e-6, Method::Ifgt).unwrap();
        assert!(small.runs_inline(1, 1));
    }

    /// Every method gives the same bits in one piece on the calling thread as split over a
    /// pool (the chunks are the same), and meets epsilon against the direct sum either way;
    /// a tiny call is run inline, a large one is not.
    #[test]
    fn inline_calls_give_the_parallel_result() {
        let cancel = AtomicBool::new(false);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let cases = [
            (Method::Direct, 2, 0.3, 2500),
            (Method::DirectTree, 3, 0.05, 2500),
            (Method::Ifgt, 2, 0.4, 2500),
            (Method::IfgtTree, 3, 0.5, 2500),
            (Method::Fgt, 1, 0.02, 400_000),
        ];
        for (method, dim, h, m) in cases {
            let (n, eps) = (3000, 1e-6);
            let x = points(n * dim, 11);
            let y = points(m * dim, 12);
            let q: Vec<f64> = points(n * 2, 13).iter().map(|v| v - 0.3).collect();
            let gt = pool.install(|| GaussTransform::new(&x, dim, h, eps, method).unwrap());
            assert_eq!(gt.method(), method);
            // planned in one piece on this thread (as an inline plan is), the same transform
            let planned_whole = {
                let _one = SequentialScope::new(true);
                GaussTransform::new(&x, dim, h, eps, method).unwrap()
            };
            let probe = &y[..64 * dim];
            assert_eq!(
                planned_whole.evaluate(probe, &q, 2, &cancel).unwrap(),
                gt.evaluate(probe, &q, 2, &cancel).unwrap(),
                "{method} planned in one piece"
            );
            assert!(!gt.runs_inline(m, 2), "{method}");
            // one target is a small call, unless the IFGT's coefficients over the sources
            // (the part of a call that does not shrink with the targets) are not
            let fixed = match &gt.engine {
                crate::Engine::Ifgt(p) => crate::plan::ifgt_coefficient_cost(
                    crate::plan::Size { n, m: 1, dim, w: 1 },
                    p.mean_source_terms(),
                ),
                _ => 0.0,
            };
            assert_eq!(gt.runs_inline(1, 1), fixed < super::INLINE_NS, "{method}");
            let split = pool.install(|| gt.evaluate(&y, &q, 2, &cancel).unwrap());
            let whole = {
                let _one = SequentialScope::new(true);
                gt.evaluate(&y, &q, 2, &cancel).unwrap()
            };
            assert_eq!(split, whole, "{method}");
            let checked = 500;
            let exact = direct_reference(&x, &y[..checked * dim], dim, &q, 2, h);
            for c in 0..2 {
                let qsum: f64 = q.iter().skip(c).step_by(2).map(|v| v.abs()).sum();
                for j in 0..checked {
                    let k = j * 2 + c;
                    assert!((whole[k] - exact[k]).abs() <= eps * qsum, "{method}");
                }
            }
        }
    }
}

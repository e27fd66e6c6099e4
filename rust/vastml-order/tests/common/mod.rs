//! Helpers shared by the determinism tests of the branch-and-bound searches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

/// The next number of a fixed linear congruential sequence (its high 31 bits).
pub fn lcg(x: &mut u64) -> u64 {
    *x = x
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *x >> 33
}

/// Runs `f` while `k` threads spin, so the pool's threads are descheduled at random points.
pub fn under_load<T>(k: usize, f: impl FnOnce() -> T) -> T {
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        for _ in 0..k {
            s.spawn(|| {
                let mut x = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(lcg(&mut x));
                    }
                    thread::yield_now();
                }
            });
        }
        let out = f();
        stop.store(true, Ordering::Relaxed);
        out
    })
}

//! The one narrow door into Rust: every binding calls [`enter`].
//!
//! `enter` validates `n_jobs`, releases the GIL, runs the work on the right rayon pool in a
//! worker thread, and meanwhile keeps the Python main thread polling for signals: on
//! Ctrl-C it raises the cancel flag the work polls, waits for the work to stop, and
//! returns `KeyboardInterrupt`. Errors of the pure-Rust crates are mapped by [`ToPyErr`].
//!
//! Pools: `n_jobs=None` uses a pool over all cores (or `RAYON_NUM_THREADS`), an int k > 0 a
//! pool of k threads, -1 all cores and k < -1 `n_cpus + 1 + k` (scikit-learn's rule).
//! Pools are cached per size *and process id*, so a child made by `fork` builds its own
//! instead of deadlocking on threads that did not survive the fork (rayon's global pool
//! would).

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::errors::{ToPyErr, VastmlError};

/// Pools by (process id, thread count).
type PoolCache = HashMap<(u32, usize), Arc<ThreadPool>>;

static POOLS: Mutex<Option<PoolCache>> = Mutex::new(None);

/// How often the main thread looks for Ctrl-C while the work runs.
const POLL: Duration = Duration::from_millis(50);

/// The cores, read once per process: `available_parallelism` reads the cgroup files on each
/// call, about 9 µs, half of a 50 x 50 sum's call.
fn n_cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Number of threads for an `n_jobs` value: a positive count is clamped to the cores (as
/// `vastml._validation.n_jobs_arg` does), so that `n_jobs=2**62` cannot ask for 2^62 threads.
pub fn resolve_n_jobs(n_jobs: Option<isize>) -> PyResult<usize> {
    let cpus = n_cpus() as isize;
    let k = match n_jobs {
        None => std::env::var("RAYON_NUM_THREADS")
            .ok()
            .and_then(|v| v.parse::<isize>().ok())
            .filter(|&v| v > 0)
            .unwrap_or(cpus),
        Some(0) => {
            return Err(PyValueError::new_err(
                "n_jobs == 0 is not allowed; use None (all cores), a positive count, or -1",
            ));
        }
        Some(k) if k > 0 => k.min(cpus.max(1)),
        Some(k) => (cpus + 1 + k).max(1),
    };
    Ok(k as usize)
}

fn pool(threads: usize) -> PyResult<Arc<ThreadPool>> {
    let key = (std::process::id(), threads);
    let mut guard = POOLS
        .lock()
        .map_err(|_| VastmlError::new_err("thread-pool cache poisoned"))?;
    let map = guard.get_or_insert_with(HashMap::new);
    map.retain(|(pid, _), _| *pid == key.0);
    if let Some(p) = map.get(&key) {
        return Ok(p.clone());
    }
    let p = Arc::new(
        ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("vastml-{i}"))
            .build()
            .map_err(|e| VastmlError::new_err(format!("cannot start {threads} threads: {e}")))?,
    );
    map.insert(key, p.clone());
    Ok(p)
}

/// A panic in the work is a bug of vastml: it reaches Python as `VastmlError` (an `Exception`,
/// so `except Exception` catches it), not as pyo3's `PanicException` (a `BaseException`).
fn panic_to_pyerr(payload: &(dyn std::any::Any + Send)) -> PyErr {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    VastmlError::new_err(format!(
        "internal error in vastml's Rust core (a bug, please report it with the input): {msg}"
    ))
}

/// Waits for the work's signal on `done`, polling for Ctrl-C meanwhile: on the first one it
/// raises `cancel` (the work stops soon after) and returns the `KeyboardInterrupt`.
fn wait_for(done: &mpsc::Receiver<()>, cancel: &AtomicBool) -> Option<PyErr> {
    let mut interrupted: Option<PyErr> = None;
    loop {
        match done.recv_timeout(POLL) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return interrupted,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if interrupted.is_none() {
                    if let Err(e) = Python::attach(|py| py.check_signals()) {
                        cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                        interrupted = Some(e);
                    }
                }
            }
        }
    }
}

/// Runs `work` without the GIL on the pool for `n_jobs`, honouring Ctrl-C.
///
/// `work` receives the cancel flag it should poll in its long loops. A panic inside `work`
/// becomes `VastmlError` rather than pyo3's `PanicException`.
pub fn enter<T, E, F>(py: Python<'_>, n_jobs: Option<isize>, work: F) -> PyResult<T>
where
    T: Send,
    E: ToPyErr + Send,
    F: FnOnce(&AtomicBool) -> Result<T, E> + Send,
{
    let pool = pool(resolve_n_jobs(n_jobs)?)?;
    let cancel = AtomicBool::new(false);
    let outcome: Result<Result<T, E>, PyErr> = py.detach(|| {
        let (tx, rx) = mpsc::channel::<()>();
        let mut slot: Option<Result<T, E>> = None;
        let mut interrupted = None;
        // The work is a job of the pool (waking one of its threads), not a thread of its own:
        // starting a thread per call cost tens of microseconds, as much as a small sum.
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.in_place_scope(|scope| {
                let (slot, cancel) = (&mut slot, &cancel);
                scope.spawn(move |_| {
                    *slot = Some(work(cancel));
                    let _ = tx.send(());
                });
                interrupted = wait_for(&rx, cancel);
            });
        }));
        match (interrupted, ran, slot) {
            (Some(e), _, _) => Err(e),
            (None, Err(payload), _) => Err(panic_to_pyerr(payload.as_ref())),
            (None, Ok(()), Some(r)) => Ok(r),
            (None, Ok(()), None) => Err(VastmlError::new_err(
                "internal error: the work ended without a result",
            )),
        }
    });
    match outcome {
        Err(e) => Err(e),
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_pyerr()),
    }
}

/// Runs `work` without the GIL on the calling thread, for calls known to take well under a
/// millisecond: handing them to the pool would wake two threads, which on a loaded machine
/// can each wait a scheduler tick (milliseconds) for a core. Ctrl-C is not polled (the work
/// ends before it would be seen); `n_jobs` is still validated.
pub fn enter_inline<T, E, F>(py: Python<'_>, n_jobs: Option<isize>, work: F) -> PyResult<T>
where
    T: Send,
    E: ToPyErr + Send,
    F: FnOnce(&AtomicBool) -> Result<T, E> + Send,
{
    resolve_n_jobs(n_jobs)?;
    let cancel = AtomicBool::new(false);
    let outcome =
        py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&cancel))));
    match outcome {
        Err(payload) => Err(panic_to_pyerr(payload.as_ref())),
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_pyerr()),
    }
}

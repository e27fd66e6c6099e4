//! The Python side of [`vastml_core::Control`]: a Python callable as a progress hook.
//!
//! A binding that runs a long loop takes `progress=None` (Python passes the bound method
//! `vastml._progress.Progress.report`, called as `report(iteration, objective, state)` and
//! returning True to stop) and builds a [`PyHook`]. Inside [`crate::door::enter`] the work runs
//! without the GIL; the hook takes it only for the call. An exception raised by the callable
//! stops the loop and is raised after it (see [`finish`]).

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use pyo3::prelude::*;
use vastml_core::{Control, Hook};

/// A Python callable `(iteration, objective, state) -> bool` as a [`Hook`] over states of type
/// `S`, with the conversion of `&S` to a Python object.
pub struct PyHook<S: ?Sized> {
    callable: Py<PyAny>,
    to_py: fn(Python<'_>, &S) -> PyResult<Py<PyAny>>,
    error: Mutex<Option<PyErr>>,
}

impl<S: ?Sized> PyHook<S> {
    /// Wraps `callable`; `to_py` turns the state into what the callable receives.
    pub fn new(callable: Py<PyAny>, to_py: fn(Python<'_>, &S) -> PyResult<Py<PyAny>>) -> Self {
        Self {
            callable,
            to_py,
            error: Mutex::new(None),
        }
    }

    /// Raises the first exception the callable raised, if any.
    pub fn finish(&self) -> PyResult<()> {
        match self.error.lock().ok().and_then(|mut g| g.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn keep(&self, e: PyErr) {
        if let Ok(mut g) = self.error.lock() {
            g.get_or_insert(e);
        }
    }
}

impl<S: ?Sized> Hook<S> for PyHook<S> {
    fn report(&self, iteration: usize, objective: f64, state: &S) -> bool {
        Python::attach(|py| {
            let call = (self.to_py)(py, state).and_then(|s| {
                self.callable
                    .call1(py, (iteration, objective, s))
                    .and_then(|r| r.is_truthy(py))
            });
            call.unwrap_or_else(|e| {
                self.keep(e);
                true
            })
        })
    }
}

/// A state the callable does not see (`None`).
pub fn no_state<S: ?Sized>(py: Python<'_>, _: &S) -> PyResult<Py<PyAny>> {
    Ok(py.None())
}

/// An order as the int64 array the callable receives.
pub fn order_state(py: Python<'_>, order: &[usize]) -> PyResult<Py<PyAny>> {
    Ok(crate::arrays::index_array(py, order).into_any().unbind())
}

/// The optional hook of a binding's `progress` argument.
pub fn hook<S: ?Sized>(
    progress: Option<Py<PyAny>>,
    to_py: fn(Python<'_>, &S) -> PyResult<Py<PyAny>>,
) -> Option<PyHook<S>> {
    progress.map(|p| PyHook::new(p, to_py))
}

/// Ends a call made with an optional hook: the callable's exception if it raised one (it
/// stopped the work), else the work's result.
pub fn finish<S: ?Sized, T>(hook: Option<PyHook<S>>, out: PyResult<T>) -> PyResult<T> {
    hook.map_or(Ok(()), |h| h.finish())?;
    out
}

/// A [`Control`] over `cancel` that reports to `hook` (every iteration: the Python
/// `Progress` applies `callback_every` itself) when there is one.
pub fn control<'a, S: ?Sized>(
    cancel: &'a AtomicBool,
    hook: Option<&'a PyHook<S>>,
) -> Control<'a, S> {
    let c = Control::new(cancel);
    match hook {
        Some(h) => c.with_hook(h, 1),
        None => c,
    }
}

//! Cancellation and progress reporting for long loops.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why a loop ended before its natural end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Halt {
    /// The cancel flag was raised (Ctrl-C in Python): the result should be discarded.
    Cancelled,
    /// A progress hook returned `true`: the loop stops cleanly and keeps its best state.
    Stopped,
}

impl fmt::Display for Halt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Halt::Cancelled => "cancelled",
            Halt::Stopped => "stopped by a progress hook",
        })
    }
}

impl std::error::Error for Halt {}

/// A progress hook: called as `hook(iteration, objective, state)`; returning `true` asks the
/// loop to stop cleanly. Any `Fn(usize, f64, &S) -> bool + Sync` closure is a hook.
pub trait Hook<S: ?Sized>: Sync {
    /// Reports `iteration` (counted from 1) with the objective and the current state.
    fn report(&self, iteration: usize, objective: f64, state: &S) -> bool;
}

impl<S: ?Sized, F> Hook<S> for F
where
    F: Fn(usize, f64, &S) -> bool + Sync,
{
    fn report(&self, iteration: usize, objective: f64, state: &S) -> bool {
        self(iteration, objective, state)
    }
}

/// A cancel flag that is never raised, for [`Control::none`].
static NEVER: AtomicBool = AtomicBool::new(false);

/// What a long loop polls: a cancel flag and an optional progress hook.
///
/// `S` is the type of the state handed to the hook (an embedding, a weight vector, an order);
/// loops that report no state use the default `()`.
pub struct Control<'a, S: ?Sized = ()> {
    cancel: &'a AtomicBool,
    hook: Option<&'a dyn Hook<S>>,
    every: usize,
}

impl<S: ?Sized> Clone for Control<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: ?Sized> Copy for Control<'_, S> {}

impl<S: ?Sized> fmt::Debug for Control<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Control")
            .field("cancelled", &self.is_cancelled())
            .field("hook", &self.hook.is_some())
            .field("every", &self.every)
            .finish()
    }
}

impl<S: ?Sized> Default for Control<'_, S> {
    fn default() -> Self {
        Self::none()
    }
}

impl<'a, S: ?Sized> Control<'a, S> {
    /// A control that polls `cancel` and reports to no one.
    pub fn new(cancel: &'a AtomicBool) -> Self {
        Self {
            cancel,
            hook: None,
            every: 1,
        }
    }

    /// A control that is never cancelled and reports to no one.
    pub fn none() -> Self {
        Self::new(&NEVER)
    }

    /// Adds a progress hook called every `every` iterations (`every = 0` is taken as 1).
    #[must_use]
    pub fn with_hook(mut self, hook: &'a dyn Hook<S>, every: usize) -> Self {
        self.hook = Some(hook);
        self.every = every.max(1);
        self
    }

    /// The cancel flag this control polls (to hand to code that takes a bare flag).
    pub fn cancel_flag(&self) -> &'a AtomicBool {
        self.cancel
    }

    /// Whether the cancel flag is raised.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// `Err(Halt::Cancelled)` when the cancel flag is raised: the poll for inner loops.
    pub fn check(&self) -> Result<(), Halt> {
        if self.is_cancelled() {
            Err(Halt::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Whether a hook is attached.
    pub fn has_hook(&self) -> bool {
        self.hook.is_some()
    }

    /// Whether [`Control::report`] would call the hook at `iteration`: lets a loop skip
    /// computing an expensive objective when nobody looks.
    pub fn wants(&self, iteration: usize) -> bool {
        self.hook.is_some() && iteration % self.every == 0
    }

    /// Polls the cancel flag, then, when [`Control::wants`] `iteration`, calls the hook with
    /// the objective (computed only then) and `state`.
    ///
    /// # Errors
    /// [`Halt::Cancelled`] when the flag is raised, [`Halt::Stopped`] when the hook returned
    /// `true`.
    pub fn report(
        &self,
        iteration: usize,
        objective: impl FnOnce() -> f64,
        state: &S,
    ) -> Result<(), Halt> {
        self.check()?;
        match self.hook {
            Some(hook) if iteration % self.every == 0 => {
                if hook.report(iteration, objective(), state) {
                    Err(Halt::Stopped)
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn hook_is_called_every_k_iterations_and_objective_only_then() {
        let seen = Mutex::new(Vec::new());
        let hook = |it: usize, obj: f64, _s: &()| {
            seen.lock().unwrap().push((it, obj));
            false
        };
        let cancel = AtomicBool::new(false);
        let control = Control::new(&cancel).with_hook(&hook, 3);
        let computed = Mutex::new(0);
        for it in 1..=10 {
            control
                .report(
                    it,
                    || {
                        *computed.lock().unwrap() += 1;
                        it as f64
                    },
                    &(),
                )
                .unwrap();
        }
        assert_eq!(*seen.lock().unwrap(), vec![(3, 3.0), (6, 6.0), (9, 9.0)]);
        assert_eq!(*computed.lock().unwrap(), 3);
    }

    #[test]
    fn cancel_wins_over_the_hook_and_is_seen_without_one() {
        let cancel = AtomicBool::new(true);
        let hook = |_: usize, _: f64, _: &()| panic!("must not be called once cancelled");
        let control = Control::new(&cancel).with_hook(&hook, 1);
        assert_eq!(control.report(1, || 0.0, &()), Err(Halt::Cancelled));
        assert_eq!(Control::<()>::new(&cancel).check(), Err(Halt::Cancelled));
        assert_eq!(Control::<()>::none().check(), Ok(()));
    }

    #[test]
    fn a_true_hook_stops_and_state_reaches_it() {
        let hook = |it: usize, _: f64, s: &[f64]| s[0] > 2.0 && it > 1;
        let control = Control::<[f64]>::none().with_hook(&hook, 1);
        assert_eq!(control.report(1, || 0.0, &[5.0][..]), Ok(()));
        assert_eq!(control.report(2, || 0.0, &[1.0][..]), Ok(()));
        assert_eq!(control.report(3, || 0.0, &[5.0][..]), Err(Halt::Stopped));
        assert!(control.wants(1) && control.has_hook());
    }
}

//! Options dicts: a pure crate's parameter struct read straight from the dict a Python
//! wrapper passes (the wrapper has validated the values; the crate checks them again).
//!
//! A binding takes `params: Dict<AmmParams>`; `AmmParams` implements [`FromDict`] by naming
//! the key of each field, so no mirror struct of the crate's parameters lives here.

use std::str::FromStr;

use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;

use crate::errors::ToPyErr;

/// A string option parsed by the crate's `FromStr` (polars' `Wrap`): a binding takes
/// `Wrap<Kernel>` and gets the crate's error, which names the parameter, as a `ValueError`
/// (pyo3 adds a note naming the argument too).
pub struct Wrap<T>(pub T);

impl<'a, 'py, T> FromPyObject<'a, 'py> for Wrap<T>
where
    T: FromStr,
    T::Err: ToPyErr,
{
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let s: PyBackedStr = obj.extract()?;
        s.parse::<T>().map(Wrap).map_err(ToPyErr::to_pyerr)
    }
}

/// The dict of options of one call.
pub struct Options<'py>(Bound<'py, PyAny>);

impl<'py> Options<'py> {
    /// The value of `key`.
    ///
    /// # Errors
    /// `KeyError` naming the key when it is missing; pyo3's `TypeError` for a wrong type.
    pub fn get<T: FromPyObjectOwned<'py>>(&self, key: &str) -> PyResult<T> {
        let v = self.0.get_item(key).map_err(|_| missing(key))?;
        v.extract().map_err(Into::into)
    }

    /// The value of `key`, or `default` when the key is absent.
    pub fn get_or<T: FromPyObjectOwned<'py>>(&self, key: &str, default: T) -> PyResult<T> {
        match self.0.get_item(key) {
            Ok(v) => v.extract().map_err(Into::into),
            Err(_) => Ok(default),
        }
    }

    /// The string of `key` parsed by the crate's `FromStr`, whose error names the parameter.
    pub fn parse<T>(&self, key: &str) -> PyResult<T>
    where
        T: FromStr,
        T::Err: ToPyErr,
    {
        self.get::<Wrap<T>>(key).map(|w| w.0)
    }

    /// A value read from this same dict (a crate struct nested in another one).
    pub fn read<T: FromDict>(&self) -> PyResult<T> {
        T::from_dict(self)
    }
}

fn missing(key: &str) -> PyErr {
    PyKeyError::new_err(format!("missing option {key:?}"))
}

/// A parameter struct that can be read from an options dict.
pub trait FromDict: Sized {
    /// Reads every field from `d`.
    ///
    /// # Errors
    /// As [`Options::get`] and [`Options::parse`].
    fn from_dict(d: &Options<'_>) -> PyResult<Self>;
}

/// A `T` extracted from an options dict: the argument type of a binding.
pub struct Dict<T>(pub T);

impl<'a, 'py, T: FromDict> FromPyObject<'a, 'py> for Dict<T> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        T::from_dict(&Options(obj.to_owned())).map(Dict)
    }
}

/// Two parameter structs read from one dict.
impl<A: FromDict, B: FromDict> FromDict for (A, B) {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        Ok((d.read()?, d.read()?))
    }
}

/// Three parameter structs read from one dict.
impl<A: FromDict, B: FromDict, C: FromDict> FromDict for (A, B, C) {
    fn from_dict(d: &Options<'_>) -> PyResult<Self> {
        Ok((d.read()?, d.read()?, d.read()?))
    }
}

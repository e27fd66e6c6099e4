"""Generators of the synthetic data sets used in tests, benches and demos."""

from vastml.datasets._synthetic import make_gaussian_mixture, make_uniform
from vastml.datasets._waveform import make_waveform

__all__ = ["make_gaussian_mixture", "make_uniform", "make_waveform"]

"""Generators of the synthetic data sets used in tests, benches and demos."""

from vastml.datasets._checkerboard import make_checkerboard
from vastml.datasets._distributed_data import make_binary_waveform
from vastml.datasets._synthetic import make_gaussian_mixture, make_uniform

__all__ = ["make_binary_waveform", "make_checkerboard", "make_gaussian_mixture", "make_uniform"]

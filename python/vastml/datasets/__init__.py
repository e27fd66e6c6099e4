"""Generators of the synthetic data sets used in tests, benches and demos."""

from vastml.datasets._checkerboard import make_checkerboard
from vastml.datasets._densities import (
    MARRON_WAND_NAMES,
    make_marron_wand,
    make_robot_arm,
    marron_wand_pdf,
)
from vastml.datasets._distributed_data import make_binary_waveform
from vastml.datasets._synthetic import make_gaussian_mixture, make_uniform
from vastml.datasets._waveform import make_waveform

__all__ = [
    "MARRON_WAND_NAMES",
    "make_binary_waveform",
    "make_checkerboard",
    "make_gaussian_mixture",
    "make_marron_wand",
    "make_robot_arm",
    "make_uniform",
    "make_waveform",
    "marron_wand_pdf",
]

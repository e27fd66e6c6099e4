"""Generators of the synthetic data sets used in tests, benches and demos."""

from typing import TYPE_CHECKING

from vastml._lazy import attach

# Public names, imported on first use (see vastml._lazy): `import vastml.datasets` stays cheap.
if TYPE_CHECKING:
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

__getattr__, __dir__ = attach(__name__, __file__)

"""Matrix reordering for faithful heatmaps.

- :class:`ConvoMap` -- reorder rows and columns of a binary or categorical matrix so that a
  heatmap, even shrunk, shows its structure (local search over exact incremental moves, TSP
  initial order, parallel pipeline P-LS).
- :func:`convolution_error` -- the ConvoMap objective.
- :func:`branch_and_bound_order` -- exact row order by branch and bound.
- :func:`tsp_order` -- greedy + 2-opt TSP order.
- :class:`TSPMeans` -- O(n log n) ordering of millions of points (thesis Algorithms 2-3);
  :class:`EMOrdering` -- TSP ordering with learned feature scales (Algorithm 1);
  :func:`tsp_path` -- exact / 2-opt + Or-opt open paths on points.
- Measures: :func:`figure_of_merit`, :func:`path_length`, :func:`dpc`, :func:`dpc_sigma`,
  :func:`dpc_entropy`.
- Baselines: :func:`nested_order`, :func:`barycentric_order`, :func:`bidirectional_order`,
  :func:`spectral_order`, :func:`heatmap_order`.
- :func:`compress`, :func:`plot_matrix`, :func:`save_png`, :func:`knn_accuracy`,
  :func:`load_matrix`, :func:`save_matrix`, data loaders and the thesis's planted matrices.
"""

from typing import TYPE_CHECKING

from vastml._lazy import attach

# Public names, imported on first use (see vastml._lazy): `import vastml.reorder` stays cheap.
if TYPE_CHECKING:
    from vastml.reorder._baselines import (
        barycentric_order,
        bidirectional_order,
        heatmap_order,
        nested_order,
        spectral_order,
    )
    from vastml.reorder._compress import compress
    from vastml.reorder._convomap import ConvoMap
    from vastml.reorder._criterion import criterion
    from vastml.reorder._em import EMOrdering
    from vastml.reorder._evaluate import knn_accuracy
    from vastml.reorder._heatmap import heatmap
    from vastml.reorder._measures import dpc, dpc_entropy, dpc_sigma, figure_of_merit, path_length
    from vastml.reorder._io import (
        load_football,
        load_genes,
        load_mammals,
        load_matrix,
        load_mushrooms,
        load_news,
        load_paleo,
        save_matrix,
    )
    from vastml.reorder._objective import convolution_error
    from vastml.reorder._orders import branch_and_bound_order, gradient_order, tsp_order
    from vastml.reorder._planted import planted_categorical, planted_matrix
    from vastml.reorder._plot import plot_matrix, save_png
    from vastml.reorder._seriate import seriate
    from vastml.reorder._tspmeans import TSPMeans, tsp_path

__all__ = [
    "ConvoMap",
    "EMOrdering",
    "TSPMeans",
    "dpc",
    "dpc_entropy",
    "dpc_sigma",
    "figure_of_merit",
    "path_length",
    "tsp_path",
    "barycentric_order",
    "bidirectional_order",
    "branch_and_bound_order",
    "compress",
    "convolution_error",
    "criterion",
    "gradient_order",
    "heatmap",
    "heatmap_order",
    "knn_accuracy",
    "load_football",
    "load_genes",
    "load_mammals",
    "load_matrix",
    "load_mushrooms",
    "load_news",
    "load_paleo",
    "nested_order",
    "planted_categorical",
    "planted_matrix",
    "plot_matrix",
    "save_matrix",
    "save_png",
    "seriate",
    "spectral_order",
    "tsp_order",
]

__getattr__, __dir__ = attach(__name__, __file__)

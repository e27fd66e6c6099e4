"""Posterior builders and evaluation metrics of Parametric Embedding (spec 001 §5, §5.5).

Builders turn a fitted model into the conditional table P (objects x classes) that
:class:`~vastml.embed.ParametricEmbedding` embeds, with the class prior where the model has
one: a classifier's ``predict_proba`` (:func:`posteriors_from_classifier`), a mixture
model's responsibilities (:func:`posteriors_from_mixture`), a topic model's document-topic
proportions (:func:`posteriors_from_topics`) or its topic-word table inverted into word-topic
posteriors (:func:`topic_word_to_word_topic`). Metrics compare an embedding with the
posteriors it came from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from vastml._typing import ArrayLike, FloatArray

from vastml._validation import as_points, check_int


def _rows(P: ArrayLike, name: str = "P") -> FloatArray:
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2 or P.size == 0 or not np.isfinite(P).all() or (P < 0).any():
        raise ValueError(f"`{name}` must be a non-empty 2-D array of non-negative numbers")
    return P


def posteriors_from_mixture(mixture: Any, X: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """(P, prior) from a fitted mixture model: P the responsibilities p(component | x)
    (``predict_proba``), the prior its mixing weights ``weights_`` (spec 001 §7.1 item 3:
    PE as unsupervised dimensionality reduction).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.mixture import GaussianMixture
    >>> X = np.r_[np.zeros((5, 1)), np.ones((15, 1)) * 8] + np.linspace(0, 0.5, 20)[:, None]
    >>> gm = GaussianMixture(2, random_state=0).fit(X)
    >>> P, prior = posteriors_from_mixture(gm, X)
    >>> P.shape, sorted(np.round(prior, 2).tolist())
    ((20, 2), [0.25, 0.75])
    """
    if not hasattr(mixture, "predict_proba") or not hasattr(mixture, "weights_"):
        raise TypeError("`mixture` must be a fitted mixture model (predict_proba and weights_)")
    P = _rows(mixture.predict_proba(X))
    P = P / P.sum(axis=1, keepdims=True)
    w = np.asarray(mixture.weights_, dtype=np.float64)
    return P, w / w.sum()


def posteriors_from_topics(
    topic_model: Any, X: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """(P, prior) from a fitted topic model (e.g. scikit-learn's
    ``LatentDirichletAllocation``): P the documents' topic proportions (``transform``,
    rows renormalised), the prior the mean proportion over the documents.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.decomposition import LatentDirichletAllocation
    >>> C = np.random.default_rng(0).poisson(1.0, size=(30, 12))
    >>> lda = LatentDirichletAllocation(3, random_state=0).fit(C)
    >>> P, prior = posteriors_from_topics(lda, C)
    >>> P.shape, bool(np.allclose(P.sum(1), 1)), bool(np.isclose(prior.sum(), 1))
    ((30, 3), True, True)
    """
    if not hasattr(topic_model, "transform"):
        raise TypeError("`topic_model` must be a fitted topic model with transform")
    P = _rows(topic_model.transform(X))
    P = P / P.sum(axis=1, keepdims=True)
    return P, P.mean(axis=0)


def topic_word_to_word_topic(
    topic_word: ArrayLike, topic_prior: ArrayLike | None = None, subset: ArrayLike | None = None
) -> tuple[FloatArray, FloatArray]:
    r"""Word-topic posteriors :math:`p(z \mid w) \propto p(w \mid z) p(z)` from a topic-word
    table (spec 001 App. E / §5.4): each word becomes an object to embed.

    Parameters
    ----------
    topic_word : array-like of shape (n_topics, n_words)
        Rows proportional to :math:`p(w \mid z)` (normalised here; e.g. an LDA's
        ``components_``).
    topic_prior : array-like of shape (n_topics,), default=None
        :math:`p(z)` (uniform when None).
    subset : array-like of int, default=None
        Keep only these words.

    Returns
    -------
    P : ndarray of shape (n_words or len(subset), n_topics)
    word_prior : ndarray
        :math:`p(w) = \sum_z p(w \mid z) p(z)` over the kept words, renormalised (usable as
        the objects' sample weights).

    Examples
    --------
    >>> import numpy as np
    >>> P, pw = topic_word_to_word_topic([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    >>> P.tolist(), pw.tolist()
    ([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]], [0.25, 0.5, 0.25])
    """
    T = _rows(topic_word, "topic_word")
    T = T / T.sum(axis=1, keepdims=True)
    K = T.shape[0]
    prior = np.full(K, 1.0 / K) if topic_prior is None else np.asarray(topic_prior, float)
    if prior.shape != (K,) or (prior < 0).any() or not prior.sum() > 0:
        raise ValueError(f"`topic_prior` must be {K} non-negative numbers, not all 0")
    prior = prior / prior.sum()
    joint = (T * prior[:, None]).T  # (n_words, n_topics): p(w, z)
    if subset is not None:
        joint = joint[np.asarray(subset, dtype=np.int64)]
    pw = joint.sum(axis=1)
    if not (pw > 0).all():
        raise ValueError("a kept word has probability 0 under every topic")
    return joint / pw[:, None], pw / pw.sum()


def prec_at_h(
    P: ArrayLike, R: ArrayLike, h: int, Phi: ArrayLike | None = None
) -> tuple[float, FloatArray]:
    r"""Conditional-probability approximation (spec 001 eq. 12):
    :math:`\mathrm{prec}(h) = \frac1K \sum_k \frac1h |X^{high}_k(h) \cap X^{close}_k(h)|`,
    :math:`X^{high}_k(h)` the h objects with the highest :math:`p(c_k \mid x_n)`,
    :math:`X^{close}_k(h)` the h objects nearest to :math:`\phi_k` in the embedding R. With
    ``Phi`` None (methods without class centres), :math:`\phi_k = r_{\arg\max_n P_{nk}}`.
    Ties go to the lower object index in both rankings.

    Returns ``(mean, per_class)``.

    Examples
    --------
    >>> import numpy as np
    >>> P = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.1, 0.9]])
    >>> R = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> prec_at_h(P, R, 2, Phi=np.array([[0.0], [3.0]]))
    (1.0, array([1., 1.]))
    """
    P = _rows(P)
    R = np.asarray(R, dtype=np.float64)
    N, K = P.shape
    h = check_int(h, "h", low=1, high=N)
    if R.ndim != 2 or R.shape[0] != N:
        raise ValueError(f"`R` must have {N} rows")
    if Phi is None:
        Phi = R[np.argmax(P, axis=0)]
    Phi = np.asarray(Phi, dtype=np.float64)
    if Phi.shape != (K, R.shape[1]):
        raise ValueError(f"`Phi` must have shape ({K}, {R.shape[1]})")
    per = np.empty(K)
    for k in range(K):
        high = np.argsort(-P[:, k], kind="stable")[:h]
        close = np.argsort(((R - Phi[k]) ** 2).sum(axis=1), kind="stable")[:h]
        per[k] = np.intersect1d(high, close).size / h
    return float(per.mean()), per


def class_f_measure(y_true: ArrayLike, P: ArrayLike) -> FloatArray:
    """Per-class F-measure (harmonic mean of precision and recall) of the classes
    :math:`\\arg\\max_k P_{nk}` against ``y_true`` (labels 0..K-1), spec 001 Table 1.

    Examples
    --------
    >>> class_f_measure([0, 0, 1, 1], [[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.1, 0.9]]).tolist()
    [0.6666666666666666, 0.8]
    """
    P = _rows(P)
    y = np.asarray(y_true)
    if y.shape != (P.shape[0],):
        raise ValueError(f"`y_true` must have {P.shape[0]} labels")
    pred = np.argmax(P, axis=1)
    out = np.zeros(P.shape[1])
    for k in range(P.shape[1]):
        tp = np.sum((pred == k) & (y == k))
        npred, ntrue = np.sum(pred == k), np.sum(y == k)
        if tp > 0:
            prec, rec = tp / npred, tp / ntrue
            out[k] = 2 * prec * rec / (prec + rec)
    return out


def kl_per_object(P: ArrayLike, Q: ArrayLike) -> FloatArray:
    r""":math:`KL(P_n \| Q_n) = \sum_k P_{nk} \log(P_{nk} / Q_{nk})` per object (0 log 0 = 0).

    Examples
    --------
    >>> kl_per_object([[0.5, 0.5], [1.0, 0.0]], [[0.5, 0.5], [0.5, 0.5]]).round(6).tolist()
    [0.0, 0.693147]
    """
    P, Q = _rows(P), _rows(Q, "Q")
    if P.shape != Q.shape:
        raise ValueError("`P` and `Q` must have the same shape")
    pos = P > 0
    with np.errstate(divide="ignore"):
        terms = np.where(pos, P * (np.log(np.where(pos, P, 1.0)) - np.log(Q)), 0.0)
    return terms.sum(axis=1)


def mean_kl(P: ArrayLike, Q: ArrayLike) -> float:
    """The mean of :func:`kl_per_object`.

    Examples
    --------
    >>> round(mean_kl([[0.5, 0.5], [1.0, 0.0]], [[0.5, 0.5], [0.5, 0.5]]), 6)
    0.346574
    """
    return float(kl_per_object(P, Q).mean())


def agreement(P: ArrayLike, Q: ArrayLike) -> float:
    """The fraction of objects whose most probable class is the same under P and Q.

    Examples
    --------
    >>> agreement([[0.9, 0.1], [0.2, 0.8]], [[0.6, 0.4], [0.7, 0.3]])
    0.5
    """
    P, Q = _rows(P), _rows(Q, "Q")
    if P.shape != Q.shape:
        raise ValueError("`P` and `Q` must have the same shape")
    return float(np.mean(np.argmax(P, axis=1) == np.argmax(Q, axis=1)))


def procrustes_distance(A: ArrayLike, B: ArrayLike) -> float:
    r""":math:`\min_{Q, t} \|A - (B Q + t)\|_F` over orthogonal Q (rotations and reflections)
    and translations t, no scaling: how far two embeddings of the same objects are.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    >>> round(procrustes_distance(A, A @ [[0, -1], [1, 0]] + 5.0), 12)
    0.0
    """
    from scipy.linalg import orthogonal_procrustes

    A = as_points(A, "A", allow_1d=False)
    B = as_points(B, "B", allow_1d=False)
    if A.shape != B.shape:
        raise ValueError("`A` and `B` must be 2-D arrays of the same shape")
    A0, B0 = A - A.mean(axis=0), B - B.mean(axis=0)
    Qm, _ = orthogonal_procrustes(B0, A0)
    return float(np.linalg.norm(A0 - B0 @ Qm))

"""``vastml embed FILE``: coordinates and scatter PNG."""

import numpy as np
from sklearn.datasets import load_digits
from vastml.cli import main


def test_embed_csv_with_label_column(tmp_path, capsys):
    d = load_digits()
    data = np.column_stack([d.data[:300], d.target[:300]])
    f = tmp_path / "digits.csv"
    np.savetxt(f, data, delimiter=",")
    assert (
        main(["embed", str(f), "--label-column", "-1", "--perplexity", "20", "--max-iter", "300"])
        == 0
    )
    Y = np.loadtxt(tmp_path / "digits-embedding.csv", delimiter=",", skiprows=1)
    assert Y.shape == (300, 2) and np.isfinite(Y).all()
    png = tmp_path / "digits-embedding.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "tsne: 300 points x 64 features" in capsys.readouterr().out


def test_embed_npy_ee_with_labels_file(tmp_path):
    d = load_digits()
    np.save(tmp_path / "x.npy", d.data[:200])
    np.savetxt(tmp_path / "y.txt", d.target[:200], fmt="%d")
    out = tmp_path / "coords.npy"
    rc = main(
        [
            "embed",
            str(tmp_path / "x.npy"),
            "--method",
            "ee",
            "--perplexity",
            "15",
            "--labels",
            str(tmp_path / "y.txt"),
            "--out",
            str(out),
            "--plot",
            "none",
        ]
    )
    assert rc == 0
    assert np.load(out).shape == (200, 2)

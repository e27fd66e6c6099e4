"""`vastml svm train|predict` on LIBSVM-format files, every algorithm letter."""

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from vastml.cli import main
from vastml.svm import load_budgetedsvm


@pytest.mark.parametrize(
    "opts",
    [
        ["-A", "0", "-L", "0.01"],
        ["-A", "1", "-L", "0.001", "-B", "10"],
        ["-A", "2", "-L", "0.001", "-C", "0.2"],
        ["-A", "3", "-L", "0.01", "-g", "2", "-B", "20"],
        ["-A", "4", "-L", "0.001", "-g", "2", "-B", "20", "-e", "2"],
    ],
)
def test_train_predict(tmp_path, opts, capsys):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(600, 3))
    y = np.where((X[:, :2] ** 2).sum(1) < 0.5, 1, -1)
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    dump_svmlight_file(X[:400], y[:400], str(train))
    dump_svmlight_file(X[400:], y[400:], str(test))
    model, out = tmp_path / "model.txt", tmp_path / "pred.txt"
    assert main(["svm", "train", *opts, "-r", "0", str(train), str(model)]) == 0
    assert main(["svm", "predict", "-o", "1", str(test), str(model), str(out)]) == 0
    text = capsys.readouterr().out
    assert "accuracy" in text
    lines = out.read_text().splitlines()
    assert len(lines) == 200
    pred = np.array([int(float(line.split("\t")[0])) for line in lines])
    np.testing.assert_array_equal(pred, load_budgetedsvm(model).predict(X[400:]))
    if opts[1] != "0":  # the non-linear ones learn the disc
        assert np.mean(pred == y[400:]) > 0.75


def test_bad_algorithm(tmp_path, capsys):
    train = tmp_path / "t.txt"
    dump_svmlight_file(np.eye(3), [0, 1, 0], str(train))
    assert main(["svm", "train", "-A", "7", str(train), str(tmp_path / "m.txt")]) == 2
    assert "-A 7: unknown algorithm" in capsys.readouterr().err
    assert not (tmp_path / "m.txt").exists()

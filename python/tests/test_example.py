"""The examples run against the test server."""

import importlib.util
import os

from conftest import ROOT


def test_dataset_example(server, capsys):
    path = os.path.join(ROOT, "python", "examples", "dataset.py")
    spec = importlib.util.spec_from_file_location("dataset_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--endpoint", server, "--samples", "9", "--sample-bytes", str(256 << 10)]) == 0
    out = capsys.readouterr().out
    assert "9 samples read, bytes exact, path rdma" in out

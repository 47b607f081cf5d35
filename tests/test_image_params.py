"""``--param`` values of the image benchmarks are checked with the inputs: a value that is
not finite or outside the benchmark's range, or a parameter given twice, is one line and
exit status 2 before any run (not a run that reports a mismatch as if the hardware were
wrong)."""

from __future__ import annotations

import math

import pytest

from pimforge.gen.cli import main
from pimforge.verif.models.ipim.image import (
    PARAM_RANGES,
    ImageInputError,
    check_param,
    resolve_params,
)

BAD = ["nan", "inf", "-inf", "1e308", "-1e308", "1e400"]


@pytest.mark.parametrize("cmd", [["run", "image", "--engine", "iss"], ["compile", "image"]])
@pytest.mark.parametrize("bench, key", sorted(PARAM_RANGES))
def test_out_of_range_or_non_finite_param_is_refused(tmp_path, capsys, monkeypatch, cmd,
                                                     bench, key):
    monkeypatch.chdir(tmp_path)
    lo, hi = PARAM_RANGES[bench, key]
    for v in [*BAD, repr(hi * 1.5 + 1), repr(lo - 1)]:
        code = main([*cmd, "--bench", bench, "--param", f"{key}={v}"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, (v, err)
        assert key in err[0] and ("finite" in err[0] or "between" in err[0]), (v, err)
    assert list(tmp_path.iterdir()) == []


def test_param_given_twice_is_refused(capsys):
    for cmd in (["run", "image", "--engine", "iss"], ["compile", "image"]):
        code = main([*cmd, "--bench", "brighten", "--param", "a=2", "--param", "a=3"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "given twice" in err[0], err


def test_check_param_edges():
    for (bench, key), (lo, hi) in PARAM_RANGES.items():
        check_param(bench, key, lo)
        check_param(bench, key, hi)
        for v in (math.nan, math.inf, -math.inf, hi + 1, lo - 1, True, "1"):
            with pytest.raises(ImageInputError):
                check_param(bench, key, v)
    import numpy as np
    with pytest.raises(ImageInputError, match="finite"):
        resolve_params("brighten", np.zeros((8, 16), np.float32), a=math.nan)

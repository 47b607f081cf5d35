"""A fast subset of scripts/bad_input_survey.py: bad invocations of every command, each a
subprocess in a fresh folder, must exit 2 with one stderr line, no traceback and
nothing written (the whole survey, ~470 cases, takes many minutes: run the script)."""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "bad_input_survey.py"
_spec = importlib.util.spec_from_file_location("bad_input_survey", _PATH)
survey = importlib.util.module_from_spec(_spec)
sys.modules["bad_input_survey"] = survey
_spec.loader.exec_module(survey)

#: One or two cases per command and per kind of bad input.
SUBSET = ["config: config empty", "verilog: --top empty", "regress: -k empty",
    "valid: config",
    "unknown command",
    "config: --set int as text",
    "config: --set bool as text",
    "config: --set twice",
    "config: config non-UTF-8 TOML",
    "config: config unknown key",
    "verilog: --out under a file",
    "verilog: --top unknown",
    "regress: --seed '-1'",
    "regress: PIMFORGE_SEED=abc",
    "regress: PIMFORGE_CACHE a file",
    "run capsnet: --scale '0'",
    "run capsnet: --freq 'nan'",
    "run capsnet: --dump is a file",
    "membench: --requests past the memory",
    "membench: --burst '24'",
    "membench: --json is a folder",
    "membench: PIMFORGE_CACHE a file",
    "demo: --batch '0'",
    "demo: config missing file",
    "approx: --samples '99999999999999999999'",
    "approx: --json under a file",
    "accuracy: --rtl-images '0'",
    "capsnet-dist: --freq twice",
    "capsnet-dist: --net unknown",
    "dse: --org twice in one list",
    "dse: --out is a file",
    "run image: --param the bench does not take",
    "run image: --param beyond the image",
    "run dnn: --onnx not a model",
    "compile image: --param the bench does not take",
    # second round: sweep specs, hostile program files, clobbered paths, caches,
    # --param values, model sizes, a full disk
    "valid: sweep --list",
    "sweep: spec with a TOML date",
    "sweep: spec grid of a million points",
    "sweep: spec naming a preset that does not exist",
    "sweep: --executor slurm without sbatch",
    "simb: asm: a 64 KiB garbage token",
    "simb: run: a program past the config's program memory",
    "simb: asm: fp32 literal that overflows to inf",
    "simb: asm: output is the input",
    "noc: --json and --png the same file",
    "verilog: --out a symbolic link loop",
    "verilog: config name empty",
    "membench: PIMFORGE_CACHE with a subfolder that is a file",
    "config: --set an integer of 70000 digits",
    "run image: --param not finite",
    "run image: --param out of the bench's range",
    "compile image: --param twice",
    "schedule sharing: an ILP too big to build within --time-limit",
    "full disk: run capsnet --dump",
    "full disk: compile image -o",
]
#: Cases that break the promise in gen/cli.py (outside the commands' own modules);
#: strict, so that the fix shows here as an unexpected pass.
KNOWN: dict[str, str] = {}   # cases known to break the promise (strict xfail)
BY_NAME = {c.name: c for c in survey.CASES}


@pytest.fixture(scope="module")
def outcomes():
    names = SUBSET + list(KNOWN)
    with ThreadPoolExecutor(2) as pool:
        got = pool.map(lambda n: survey.run_case(BY_NAME[n], timeout=20), names)
    return dict(zip(names, got))


def test_subset_names_exist():
    missing = [n for n in SUBSET + list(KNOWN) if n not in BY_NAME]
    assert not missing, missing


@pytest.mark.parametrize("name", SUBSET + [pytest.param(n, marks=pytest.mark.xfail(
    reason=why, strict=True)) for n, why in KNOWN.items()])
def test_case_holds(outcomes, name):
    o = outcomes[name]
    assert o.holds, f"{o.case.command}: {'; '.join(o.problems)}\n{o.stderr}"


def test_survey_reports_a_broken_case_and_writes_the_table(tmp_path):
    # `pimforge config` succeeds: declared as bad input it must be reported as broken
    broken = survey.Case("config listed as bad", ("config",))
    good = BY_NAME["config: --set unknown section"]
    res = [survey.run_case(c, timeout=20) for c in (broken, good)]
    assert [o.holds for o in res] == [False, True]
    assert res[0].problems == ["exit 0", "0 stderr lines"]
    text = survey.table(res)
    assert text.startswith("# Bad-input survey: 2 cases, 1 hold, 1 do not")
    assert "| config listed as bad | `pimforge config` | **FAILS**: exit 0; 0 stderr lines" in text
    out = tmp_path / "survey.md"
    assert survey.main(["--out", str(out), "-k", "valid: config default"]) == 0
    assert "1 cases, 1 hold, 0 do not" in out.read_text()

"""Typed workload results: the JSON form, its schema checks and the exit status (``ok``).

The runs here are on the ISA-level model (``model_only``), a few seconds each.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from pimforge.gen.config import load_config
from pimforge.gen.errors import PimforgeError
from pimforge.sim.capsnet.workload import (
    CapsNetRun,
    CapsNetRunOptions,
    RoutingVariant,
    WallTimes,
    run_ablations,
    run_capsnet,
)
from pimforge.sim.result import ResultSchemaError, WorkloadResult

PLAIN = (dict, list, str, int, float, bool, type(None))


@pytest.fixture(scope="module")
def model_run() -> CapsNetRun:
    return run_capsnet("Caps-MN1", None, CapsNetRunOptions(scale=64, model_only=True))


def _walk_types(x, path="$"):
    assert type(x) in PLAIN, f"{path} is a {type(x).__name__}, not a plain JSON type"
    if isinstance(x, dict):
        for k, v in x.items():
            assert type(k) is str, f"{path} has a key {k!r} that is not a str"
            _walk_types(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _walk_types(v, f"{path}[{i}]")


def _with_variants(r: CapsNetRun, matches: bool | None) -> CapsNetRun:
    v = dataclasses.replace(RoutingVariant.of(r), rtl_matches_model=matches)
    return dataclasses.replace(r, variants={"pim-inter": v}, speedup_vs={"pim-inter": 1.5},
                               energy_saving_vs={"pim-inter": 0.25},
                               speedup_scope={"pim-inter": "routing"})


def test_to_json_is_plain_and_carries_the_schema(model_run):
    d = model_run.to_json()
    assert d["schema"] == CapsNetRun.SCHEMA == "pimforge.run.capsnet"
    assert d["schema_version"] == CapsNetRun.SCHEMA_VERSION == 1
    _walk_types(d)
    # every field is a key; the ablation-only sections are left out while unset
    names = {f.name for f in dataclasses.fields(CapsNetRun)}
    optional = {"variants", "speedup_vs", "energy_saving_vs", "speedup_scope", "whole_network"}
    assert set(d) == (names - optional) | {"schema", "schema_version"}
    assert d["executed_on"] == "isa-model" and d["rtl_matches_model"] is None
    assert d["wall_s"] == dataclasses.asdict(model_run.wall_s)
    assert json.loads(json.dumps(d)) == d


def test_json_round_trip(model_run):
    d = json.loads(json.dumps(model_run.to_json()))
    back = CapsNetRun.from_json(d)
    assert isinstance(back.wall_s, WallTimes)
    assert back == model_run and back.to_json() == model_run.to_json()
    # nested dataclasses of the ablation sections come back typed
    r = _with_variants(model_run, True)
    back = CapsNetRun.from_json(json.loads(json.dumps(r.to_json())))
    assert isinstance(back.variants["pim-inter"], RoutingVariant)
    assert back == r and back.to_json() == r.to_json()
    assert r.to_json()["variants"]["pim-inter"]["cycles"] == model_run.cycles
    # a producer's own section (pimforge demo adds "demo") is ignored on reading
    assert CapsNetRun.from_json({**d, "demo": {"labels": [1]}}) == CapsNetRun.from_json(d)


def test_wrong_schema_version_or_shape_is_a_clear_error(model_run):
    d = model_run.to_json()
    with pytest.raises(ResultSchemaError,
                       match="schema must be 'pimforge.run.capsnet' .* not 'pimforge.run.image'"):
        CapsNetRun.from_json({**d, "schema": "pimforge.run.image"})
    with pytest.raises(ResultSchemaError, match="schema_version must be 1 .* not 2"):
        CapsNetRun.from_json({**d, "schema_version": 2})
    with pytest.raises(ResultSchemaError, match="no 'schema' field"):
        CapsNetRun.from_json({k: v for k, v in d.items() if k != "schema"})
    with pytest.raises(ResultSchemaError, match="lacks 'cycles', 'time_s'"):
        CapsNetRun.from_json({k: v for k, v in d.items() if k not in ("cycles", "time_s")})
    with pytest.raises(ResultSchemaError, match=r"wall_s lacks 'total'"):
        CapsNetRun.from_json({**d, "wall_s": {k: v for k, v in d["wall_s"].items()
                                              if k != "total"}})
    with pytest.raises(ResultSchemaError, match="must be a JSON object, not list"):
        CapsNetRun.from_json([d])
    # the base class is abstract in what a run means
    with pytest.raises(NotImplementedError):
        WorkloadResult().summary()


def test_ok_follows_rtl_matches_model(model_run):
    rtl = dataclasses.replace(model_run, executed_on="rtl")
    assert dataclasses.replace(rtl, rtl_matches_model=True).ok is True
    assert dataclasses.replace(rtl, rtl_matches_model=False).ok is False
    assert dataclasses.replace(rtl, rtl_matches_model=None).ok is False
    # on the ISA model alone: the model against route_pim
    assert model_run.ok is True and model_run.isa_model_matches_route_pim is True
    assert dataclasses.replace(model_run, isa_model_matches_route_pim=False).ok is False
    # and no routing variant's RTL differs from its model (None: not run on the RTL)
    good = dataclasses.replace(rtl, rtl_matches_model=True)
    assert _with_variants(good, True).ok is True and _with_variants(good, None).ok is True
    assert _with_variants(good, False).ok is False


def test_summary_is_what_the_cli_prints(model_run):
    lines = model_run.summary().splitlines()
    assert lines[0] == (f"Caps-MN1 B=2 N_L=18 N_H=10 on {model_run.vaults} vaults at "
                        f"{model_run.freq_mhz} MHz")
    assert lines[1].startswith("  dimension scores (1/s): B ")
    assert lines[1].endswith(f"-> {model_run.dimension}")
    assert lines[2].startswith(f"  {model_run.cycles} cycles = ")
    assert lines[3].startswith("  on isa-model; rtl_matches_model None; max |v - v_float64| ")
    r = _with_variants(model_run, True)
    assert r.summary().splitlines()[0] == "  speedup vs pim-inter (routing): 1.500x"


def test_routing_variant_and_unknown_ablation():
    cfg = load_config()
    r = run_ablations("Caps-MN1", cfg, CapsNetRunOptions(scale=64, model_only=True,
                                                         ablation="pim-inter"))
    assert r.ablation == "pim-inter" and r.address_mapping == "default" and r.variants is None
    with pytest.raises(PimforgeError, match="--ablation must be one of .* not 'pim-magic'"):
        run_ablations("Caps-MN1", cfg, CapsNetRunOptions(ablation="pim-magic"))


def test_routing_from_run_takes_the_typed_result(model_run):
    from pimforge.sim.capsnet.pipeline import routing_from_run

    r = routing_from_run(model_run)
    assert r == routing_from_run(model_run.to_json())
    assert r["time_s"] == model_run.time_s and r["reads"] == model_run.reads
    assert r["per_vault"] == "run"

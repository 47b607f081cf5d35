"""The native drivers' contracts: named-field files, tables and the generated params header.

The C++ half (``driver.h``) is compiled here into a small echo program, so a
float written by Python comes back from C++ bit for bit, and a missing field
stops the C++ side with a message naming it.
"""

import math
import random
import struct
import subprocess
from pathlib import Path

import pytest

from pimforge.gen.errors import SimulationError
from pimforge.sim.drivers import PARAMS_HEADER, params_header, source
from pimforge.sim.drivers.io import read_fields, write_fields, write_table
from pimforge.sim.drivers.pins import driver_top

SEED = 2024


def _floats(n):
    r = random.Random(SEED)
    print("seed", SEED)
    xs = [0.1, 1 / 3, 2.0**-1074, 1.7976931348623157e308, -0.0, 5e-324, 123456789.0]
    xs += [struct.unpack("<d", struct.pack("<Q", r.getrandbits(64)))[0] for _ in range(n)]
    return [x for x in xs if math.isfinite(x)]


def test_fields_round_trip_exactly(tmp_path):
    xs = _floats(200)
    write_fields(tmp_path / "f.txt", {"a": 3, "flag": True, "xs": xs, "ns": [1, -2, 3],
                                      "name": "a b/c", "x": xs[1]})
    f = read_fields(tmp_path / "f.txt")
    assert f.int("a") == 3 and f.int("flag") == 1 and f.ints("ns") == [1, -2, 3]
    assert f["name"] == "a b/c"
    got = f.floats("xs")
    assert [struct.pack("<d", x) for x in got] == [struct.pack("<d", x) for x in xs]
    assert struct.pack("<d", f.float("x")) == struct.pack("<d", 1 / 3)


def test_missing_or_bad_fields_are_named(tmp_path):
    (tmp_path / "s.txt").write_text("cycles = 12\nreads = 1 2 x\n")
    f = read_fields(tmp_path / "s.txt")
    assert "cycles" in f and "sends" not in f and f.get("sends") is None
    with pytest.raises(SimulationError, match=r"s\.txt: missing field 'sends' \(it has cycles"):
        f.int("sends")
    with pytest.raises(SimulationError, match="field 'reads' is not a list of integers"):
        f.ints("reads")
    (tmp_path / "bad.txt").write_text("cycles 12\n")
    with pytest.raises(SimulationError, match=r"bad\.txt:1: not a 'key = value' line"):
        read_fields(tmp_path / "bad.txt")
    with pytest.raises(ValueError, match="field 'x' must be finite"):
        write_fields(tmp_path / "w.txt", {"x": math.nan})
    with pytest.raises(ValueError, match="a string value has no newline"):
        write_fields(tmp_path / "w.txt", {"trace": "a\nb"})
    with pytest.raises(ValueError, match="has 2 values, not 3"):
        write_table(tmp_path / "t.txt", ("a", "b", "c"), [(1, 2)])


def test_params_header():
    h = params_header("capsnet_vault_driver", LANES=16, IWORDS=16, BIG=1 << 40, TSV=0.1,
                      HAS_MEM=[False, True], SECTORS=(1, 4))
    assert '#include "Vcapsnet_vault_driver.h"' in h
    assert "using Top = Vcapsnet_vault_driver;" in h
    assert "constexpr int LANES = 16;" in h
    assert "constexpr long long BIG = 1099511627776LL;" in h
    assert f"constexpr double TSV = {(0.1).hex()};" in h
    assert "constexpr bool HAS_MEM[2] = {false, true};" in h
    assert "constexpr int SECTORS[2] = {1, 4};" in h
    with pytest.raises(ValueError, match="C identifiers"):
        params_header("t", **{"not-a-name": 1})
    with pytest.raises(ValueError, match="must not be empty"):
        params_header("t", EMPTY=[])


@pytest.fixture(scope="module")
def echo(tmp_path_factory):
    from pimforge.sim.verilator import verilator_root

    d = tmp_path_factory.mktemp("echo")
    (d / "driver.h").write_text(source("driver.h"))
    (d / "Vfake.h").write_text("#pragma once\nclass Vfake {};\n")
    scale = 1 / 3 + 1e-9
    (d / PARAMS_HEADER).write_text(params_header("fake", SCALE=scale, COUNTS=(3, 1, 4),
                                                 FLAG=True))
    inc = verilator_root() / "include"
    exe = d / "fields_echo"
    res = subprocess.run(["g++", "-std=c++20", "-O1", f"-I{d}", f"-I{inc}",
                          f"-I{inc / 'vltstd'}", "-o", str(exe),
                          str(Path(__file__).with_name("cpp") / "fields_echo.cpp")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    return exe, scale


def test_cpp_reads_and_writes_the_same_contract(tmp_path, echo):
    exe, scale = echo
    x = _floats(1)[-1]
    write_fields(tmp_path / "in.txt", {"x": x, "n": -(2**40), "name": "a b"})
    write_table(tmp_path / "t.txt", ("a", "b"), [(1, 2), (3, -4), (5, 2**50)])
    subprocess.run([str(exe), tmp_path / "in.txt", tmp_path / "t.txt", tmp_path / "out.txt"],
                   check=True)
    st = read_fields(tmp_path / "out.txt")
    assert struct.pack("<d", st.float("x")) == struct.pack("<d", x)
    assert struct.pack("<d", st.float("scale")) == struct.pack("<d", scale)
    assert st.int("n") == -(2**40) and st.int("absent") == 7 and st.int("name_length") == 3
    assert st.ints("col_b") == [2, -4, 2**50]
    assert st.ints("lanes") == [0xDEADBEEF, 5 << 32, 5 << 32]
    assert st.ints("counts") == [3, 1, 4] and st.int("flag") == 1
    res = subprocess.run([str(exe), tmp_path / "in.txt", tmp_path / "t.txt",
                          tmp_path / "out.txt", "cycles"], capture_output=True, text=True)
    assert res.returncode == 2 and "in.txt: missing field 'cycles'" in res.stderr
    write_table(tmp_path / "t2.txt", ("a", "c"), [(1, 2)])
    res = subprocess.run([str(exe), tmp_path / "in.txt", tmp_path / "t2.txt",
                          tmp_path / "out.txt"], capture_output=True, text=True)
    assert res.returncode == 2 and "t2.txt: missing column 'b'" in res.stderr


def test_driver_top_renames_and_packs_ports():
    from amaranth.back import verilog
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    class Inner(wiring.Component):
        a__x: In(3)
        b__x: In(40)
        y: Out(8)

        def elaborate(self, platform):
            from amaranth.hdl import Module
            m = Module()
            m.d.comb += self.y.eq(self.a__x + self.b__x[:8])
            return m

    text = verilog.convert(Inner(), name="inner", emit_src=False)
    top = driver_top(text, "inner", None, {"x": ["a__x", None, "b__x"], "out": "y"},
                     name="inner_driver")
    assert top.words == {"x": 2}
    head = top.verilog[:top.verilog.index("endmodule")]
    assert "input [191:0] x;" in head and "output [7:0] out;" in head
    assert ".a__x(x[2:0])" in head and ".b__x(x[167:128])" in head
    with pytest.raises(SimulationError, match="input 'b__x' of inner is driven by no pin"):
        driver_top(text, "inner", None, {"x": ["a__x"]}, name="w")
    with pytest.raises(SimulationError, match="inner has no port 'z'"):
        driver_top(text, "inner", None, {"x": ["a__x", "b__x"], "o": "z"}, name="w")


def test_driver_top_has_no_width_limit(tmp_path):
    """A lane pin wider than Amaranth's 65,536-bit cell limit (the 16x16 NicePIM array's
    counters pass it) is written and lints clean."""
    from amaranth.back import verilog
    from amaranth.lib import wiring
    from amaranth.lib.wiring import Out

    from pimforge.sim.verilator import lint

    n = 2100                                # 2,100 x 32 bits = 67,200 bits of outputs

    class Inner(wiring.Component):
        def __init__(self):
            super().__init__({f"c__{i}": Out(20) for i in range(n)})

        def elaborate(self, platform):
            from amaranth.hdl import Module
            m = Module()
            for i in range(n):
                m.d.comb += getattr(self, f"c__{i}").eq(i)
            return m

    text = verilog.convert(Inner(), name="inner", emit_src=False)
    top = driver_top(text, "inner", None, {"cnt": [f"c__{i}" for i in range(n)]},
                     name="wide_driver")
    head = top.verilog[:top.verilog.index("endmodule")]
    assert f"output [{32 * n - 1}:0] cnt;" in head
    assert f"assign cnt[{32 * (n - 1) + 19}:{32 * (n - 1)}] = cnt__{n - 1};" in head
    assert f"assign cnt[{32 * n - 1}:{32 * (n - 1) + 20}] = 12'd0;" in head
    (tmp_path / "w.v").write_text(top.verilog)
    lint(tmp_path / "w.v", "wide_driver")

"""Manifests are built from the component; they must agree with the Verilog it becomes."""

import re

import pytest

from pimforge.gen.config import load_config
from pimforge.gen.elaborate import elaborate
from pimforge.rtl.describe import block_info

_PORT_RE = re.compile(r"^\s*(input|output)\s+(?:signed\s+)?(?:\[(\d+):(\d+)\]\s+)?"
                      r"\\?([\w$]+)\s*;", re.M)


def _verilog_ports(text: str, top: str) -> list[dict]:
    body = re.search(rf"^module {top}\(.*?^endmodule", text, re.M | re.S).group(0)
    return [{"name": n, "dir": d, "width": int(hi) - int(lo) + 1 if hi else 1}
            for d, hi, lo, n in _PORT_RE.findall(body)]


@pytest.mark.parametrize("block", ["fp32_add", "descnet_spm", "vault_ctrl"])
def test_manifest_ports_are_the_verilog_ports(block):
    e = elaborate(block, load_config())
    assert e.manifest["ports"] == _verilog_ports(e.verilog, e.top)
    # Nested signatures (stream payloads, SPM ports) are named as the backend names them.
    assert (block == "fp32_add") != any("__" in p["name"] for p in e.manifest["ports"])


def test_block_info_checks_the_protocol():
    class Bad:
        latencies = {"read": 1.5}

    with pytest.raises(TypeError, match="latencies must map names to cycle counts"):
        block_info(Bad())
    assert block_info(object()).latencies == {}

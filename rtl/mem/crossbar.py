"""Crossbar between request masters (host links, vault PE ports) and vault controllers."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .address_map import HDL_OPS, AddressMap
from .port import HOST, PE, VaultPortSignature

__all__ = ["Crossbar", "master_request_layout", "master_response_layout", "rr_pick"]


def master_request_layout(addr_bits: int, tag_bits: int, data_bits: int):
    return data.StructLayout({"we": 1, "addr": addr_bits, "tag": tag_bits, "data": data_bits})


def master_response_layout(tag_bits: int, data_bits: int):
    return data.StructLayout({"we": 1, "tag": tag_bits, "data": data_bits})


def rr_pick(m: Module, reqs: list, advance, name: str):
    """Round-robin grant over *reqs*: returns (any, one-hot grant list). The pointer
    moves past the winner when *advance* holds."""
    n = len(reqs)
    if n == 1:
        return reqs[0], [reqs[0]]
    last = Signal(range(n), name=f"{name}_last", init=n - 1)
    grant = [Signal(name=f"{name}_g{i}") for i in range(n)]
    # Priority order last+1, last+2, ...: the lowest request above the pointer,
    # else the lowest request overall (x & -x isolates the lowest set bit).
    req = Cat(*reqs)
    above = Signal(n, name=f"{name}_above")
    m.d.comb += above.eq(req & Cat(Const(0, 1), *(last < i for i in range(1, n))))
    first = Signal(n, name=f"{name}_first")
    m.d.comb += first.eq(Mux(above != 0, above & -above, req & -req))
    m.d.comb += [g.eq(first[i]) for i, g in enumerate(grant)]
    any_ = Signal(name=f"{name}_any")
    m.d.comb += any_.eq(req != 0)
    with m.If(advance & any_):
        for i in range(n):
            with m.If(grant[i]):
                m.d.sync += last.eq(i)
    return any_, grant


class Crossbar(wiring.Component):
    """Routes block requests from ``links`` host ports and one PE port per vault to the
    vault controllers, and the responses back.

    Every master's byte address is decoded with the shared
    :class:`~pimforge.rtl.mem.address_map.AddressMap`. A PE port whose request
    maps to another vault makes a vault-to-vault transfer (the aggregation
    traffic of the routing procedure). Contention: each vault accepts one
    request per cycle; masters of the same class are served round robin, and
    between classes the vault's ``host_first`` bit (from RMAS) decides, or the
    arrival order (the request that has waited longest) when ``arrival`` is
    set. Each master receives one response per cycle, vaults round robin; a
    response that cannot be delivered back-pressures its vault.

    Parameters
    ----------
    amap : AddressMap
        The address mapping.
    links, vaults : int
        Host ports and vaults (= PE ports).
    tag_bits : int
        Width of a master's tags.
    vault_signature : VaultPortSignature
        Port of a vault controller (its tag must hold master index and tag).

    Attributes
    ----------
    m{i} : In(stream.Signature(request)), m{i}_resp : Out(stream.Signature(response))
        Master ports; masters ``0..links-1`` are host links, ``links+v`` is vault v's PEs.
    v{v} : Out(vault_signature)
        To vault controller v.
    host_first : In(vaults), arrival : In(1)
        Priority control from RMAS.
    host_target : Out(vaults)
        Vaults that a host link currently requests (RMAS's n_max set).
    """

    def __init__(self, *, amap: AddressMap, links: int, vaults: int, tag_bits: int,
                 vault_signature: VaultPortSignature, data_bits: int = 128):
        if not isinstance(links, int) or not 1 <= links <= 8:
            raise ValueError(f"links must be an integer between 1 and 8, not {links!r}")
        if not isinstance(vaults, int) or not 1 <= vaults <= 64:
            raise ValueError(f"vaults must be an integer between 1 and 64, not {vaults!r}")
        self.amap, self.links, self.vaults, self.tag_bits = amap, links, vaults, tag_bits
        self.masters = links + vaults
        self.mbits = max(1, ceil_log2(self.masters))
        if vault_signature.tag_bits < tag_bits + self.mbits:
            raise ValueError(f"vault tags must be at least {tag_bits + self.mbits} bits, "
                             f"not {vault_signature.tag_bits}")
        self.req_layout = master_request_layout(amap.addr_bits, tag_bits, data_bits)
        self.resp_layout = master_response_layout(tag_bits, data_bits)
        ports = {}
        for i in range(self.masters):
            ports[f"m{i}"] = In(stream.Signature(self.req_layout))
            ports[f"m{i}_resp"] = Out(stream.Signature(self.resp_layout))
        for v in range(vaults):
            ports[f"v{v}"] = Out(vault_signature)
        ports.update({"host_first": In(vaults), "arrival": In(1), "host_target": Out(vaults)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        M, V, L = self.masters, self.vaults, self.links
        mreq = [getattr(self, f"m{i}") for i in range(M)]
        mresp = [getattr(self, f"m{i}_resp") for i in range(M)]
        vp = [getattr(self, f"v{v}") for v in range(V)]

        dec = []
        for i, r in enumerate(mreq):
            d = self.amap.decode(r.payload.addr, HDL_OPS)
            fields = {}
            for nm, val, w in (("vault", d.vault, max(1, self.amap.vault_bits)),
                               ("bank", d.bank, max(1, self.amap.bank_bits)),
                               ("row", d.row, self.amap.row_bits),
                               ("col", d.col, self.amap.col_bits)):
                s = Signal(w, name=f"m{i}_{nm}")
                m.d.comb += s.eq(val if not isinstance(val, int) else Const(val, w))
                fields[nm] = s
            dec.append(fields)

        # Waiting time of each master's head request (for arrival-order arbitration).
        wait = [Signal(16, name=f"m{i}_wait") for i in range(M)]
        for i, r in enumerate(mreq):
            with m.If(r.valid & ~r.ready):
                m.d.sync += wait[i].eq(Mux(wait[i].all(), wait[i], wait[i] + 1))
            with m.Else():
                m.d.sync += wait[i].eq(0)

        m.d.comb += self.host_target.eq(
            Cat(*[Cat(*[mreq[i].valid & (dec[i]["vault"] == v) for i in range(L)]).any()
                  for v in range(V)]))

        granted = [[Signal(name=f"gnt_v{v}_m{i}") for i in range(M)] for v in range(V)]
        for v in range(V):
            want = [mreq[i].valid & (dec[i]["vault"] == v) for i in range(M)]
            fire = Signal(name=f"v{v}_fire")
            h_any, h_g = rr_pick(m, want[:L], fire, f"v{v}_host")
            p_any, p_g = rr_pick(m, want[L:], fire, f"v{v}_pe")
            # Arrival order: the class whose candidate has waited longer (host on ties).
            h_wait = Signal(16, name=f"v{v}_hwait")
            p_wait = Signal(16, name=f"v{v}_pwait")
            for i in range(L):
                with m.If(h_g[i]):
                    m.d.comb += h_wait.eq(wait[i])
            for k in range(V):
                with m.If(p_g[k]):
                    m.d.comb += p_wait.eq(wait[L + k])
            host_wins = Signal(name=f"v{v}_host_wins")
            m.d.comb += host_wins.eq(h_any & (~p_any | Mux(
                self.arrival, h_wait >= p_wait, self.host_first[v])))
            gl = [h & host_wins for h in h_g] + [p & ~host_wins for p in p_g]
            for i in range(M):
                m.d.comb += granted[v][i].eq(gl[i])
            sel = Signal(range(M), name=f"v{v}_sel")
            for i in range(M):
                with m.If(gl[i]):
                    m.d.comb += sel.eq(i)
            out = vp[v].req
            m.d.comb += [out.valid.eq(h_any | p_any), fire.eq(out.valid & out.ready)]
            with m.Switch(sel):
                for i in range(M):
                    with m.Case(i):
                        p = mreq[i].payload
                        m.d.comb += [
                            out.payload.we.eq(p.we), out.payload.cls.eq(HOST if i < L else PE),
                            out.payload.bank.eq(dec[i]["bank"]), out.payload.row.eq(dec[i]["row"]),
                            out.payload.col.eq(dec[i]["col"]), out.payload.data.eq(p.data),
                            out.payload.tag.eq(Cat(p.tag, Const(i, self.mbits))),
                        ]
        for i in range(M):
            m.d.comb += mreq[i].ready.eq(
                Cat(*[granted[v][i] & vp[v].req.ready for v in range(V)]).any())

        # Responses: each master takes one per cycle from the vaults, round robin.
        tb = self.tag_bits
        resp_gnt = [[None] * M for _ in range(V)]
        for i in range(M):
            want = [vp[v].resp.valid & (vp[v].resp.payload.tag[tb:tb + self.mbits] == i)
                    for v in range(V)]
            fire = Signal(name=f"m{i}_rfire")
            any_, g = rr_pick(m, want, fire, f"m{i}_resp")
            m.d.comb += [mresp[i].valid.eq(any_), fire.eq(mresp[i].valid & mresp[i].ready)]
            for v in range(V):
                resp_gnt[v][i] = g[v]
                with m.If(g[v]):
                    p = vp[v].resp.payload
                    m.d.comb += [mresp[i].payload.we.eq(p.we),
                                 mresp[i].payload.tag.eq(p.tag[:tb]),
                                 mresp[i].payload.data.eq(p.data)]
        for v in range(V):
            m.d.comb += vp[v].resp.ready.eq(
                Cat(*[resp_gnt[v][i] & mresp[i].ready for i in range(M)]).any())
        return m

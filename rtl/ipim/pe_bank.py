"""The bank path of the near-bank PE: the bank's controller, the slots of its outstanding
requests and the remote reads of other vaults that share its queue."""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..mem.port import PE as CLS_PE
from ..mem.port import CmdSignature, DRAMArraySignature
from ..mem.timing import Timing
from ..mem.vault_ctrl import VaultController
from ..params import check, check_bool, check_choice, check_int, check_pow2
from .bus import VECTOR_BITS, RemoteBankSignature
from .isa import DRAM_BITS, REG_BITS, SPM_BITS, Opcode
from .pe_completion import completion_layout
from .pe_dispatch import mem_layout

__all__ = ["PEBankPath"]

# Kinds of a bank request slot (_REMOTE: a read for the ``remote`` port, not an instruction).
_LD_RF, _ST_RF, _LD_PGSM, _ST_PGSM, _REMOTE = range(5)


class PEBankPath(wiring.Component):
    """The PE's bank: a one-bank controller and the slots of its outstanding requests.

    ``ld_rf``, ``st_rf`` and ``ld_pgsm`` taken on ``instr`` go into the
    controller's queue, each in a bank slot that holds what its response needs
    (its kind, issue tag, DataRF entry, PGSM line); the controller answers
    them out of order, tagged with the slot. ``st_pgsm`` reserves its slot on
    ``reserve`` when it is dispatched (its bank write comes after its PGSM
    read, and a slot held from the start means that the write cannot wait
    behind ``ld_pgsm`` responses that wait for the engine) and sends the write
    on ``write`` once its line is read.

    Remote reads. A read taken on ``remote.req`` waits in a one-entry register
    (were ``remote.req.valid`` to take part in this cycle's choice, it would
    reach the PE's ``issue.ready`` combinationally), then goes into the same
    queue in a slot of its own. Its response leaves on ``remote.resp`` and
    frees the slot when it is taken.

    The controller's one request port takes, in this order: ``write`` (its
    slot is held already), the pending remote read, then ``instr``; a remote
    read also takes the free slot ahead of a ``reserve`` of the same cycle.
    Every ``ready`` depends on registered state and the controller only.

    Responses leave by kind: ``ld_pgsm`` data on ``ldp`` (to the scratchpad
    engine), remote reads on ``remote.resp``, the rest (``ld_rf`` with its
    DataRF write, ``st_rf`` and ``st_pgsm`` acknowledgements) on ``done``; one
    that is not taken holds the head of the controller's response FIFO.

    Parameters
    ----------
    tag_bits : int
        Width of the issue tags.
    remote_tag_bits : int
        Tag width of the ``remote`` port.
    timing : Timing
        The bank's DRAM timing in cycles.
    rows, columns : int
        The bank's rows and 128-bit vectors per row.
    queue : int
        Request-queue entries of the controller, and bank slots.
    scheduler, page_policy : str
        As :class:`~pimforge.rtl.mem.vault_ctrl.VaultController`.
    col_gate : bool
        RD and WR wait for ``col_ok`` (the PE on the base die, its data over the TSVs).
    path_latency : int
        Cycles added to every bank response.

    Attributes
    ----------
    instr : In(stream.Signature(mem_layout(tag_bits)))
        A bank instruction from dispatch.
    reserve : In(stream.Signature(StructLayout({"tag", "idx", "spm"})))
        An ``st_pgsm`` takes a slot; ``slot`` is its number.
    slot : Out(range(queue))
        The slot that ``reserve`` (or the next request) takes.
    write : In(stream.Signature(StructLayout({"dram", "data", "slot"})))
        The bank write of an ``st_pgsm``, in its reserved ``slot``.
    ldp : Out(stream.Signature(StructLayout({"tag", "spm", "data"})))
        An ``ld_pgsm``'s vector, for the engine to write into the PGSM.
    done : Out(stream.Signature(completion_layout(tag_bits)))
        A finished ``ld_rf``, ``st_rf`` or ``st_pgsm``.
    remote : In(RemoteBankSignature(dram_bits=DRAM_BITS, tag_bits=remote_tag_bits))
    arr : Out(DRAMArraySignature)
        The bank's array (``addr`` = column, row, then one bank bit that is 0).
    cmd : Out(CmdSignature)
        DRAM command issued this cycle.
    act_want, act_ok : Out(1), In(1)
        The controller would issue an ACT; it may.
    col_want, col_ok : Out(1), In(1)
        With ``col_gate``: the controller would issue a RD or WR; it may.
    ctrl_busy : Out(1)
        The controller has requests queued or in flight.
    busy : Out(1)
        ``ctrl_busy``, a slot is held or a remote read waits.
    """

    def __init__(self, *, tag_bits: int, remote_tag_bits: int, timing: Timing, rows: int,
                 columns: int, queue: int = 16, scheduler: str = "frfcfs",
                 page_policy: str = "open", col_gate: bool = False, path_latency: int = 0):
        if not isinstance(timing, Timing):
            raise TypeError(f"timing must be a Timing, not {timing!r}")
        check_int("tag_bits", tag_bits, 1, 16)
        check_int("remote_tag_bits", remote_tag_bits, 1, 8)
        check_pow2("rows", rows, 2, 1 << 24)
        check_pow2("columns", columns, 2, 4096)
        check(rows * columns <= 1 << DRAM_BITS, "rows * columns", rows * columns,
              f"at most 2**{DRAM_BITS}")
        check_int("queue", queue, 2, 64)
        check_choice("scheduler", scheduler, ("fcfs", "frfcfs"))
        check_choice("page_policy", page_policy, ("open", "close"))
        check_bool("col_gate", col_gate)
        check_int("path_latency", path_latency, 0, 64)
        self.tag_bits, self.remote_tag_bits = tag_bits, remote_tag_bits
        self.rows, self.columns, self.queue = rows, columns, queue
        self.col_gate = col_gate
        # The controller is built in elaborate (a bank path never elaborated leaves no
        # unused controller behind); its parameters are checked here and by it.
        self._ctrl_kw = {
            "timing": timing, "banks": 1, "rows": rows, "columns": columns,
            "queue_depth": queue, "tag_bits": max(1, ceil_log2(queue)),
            "scheduler": scheduler, "page_policy": page_policy,
            "block_bytes": VECTOR_BITS // 8, "act_gate": True, "col_gate": col_gate,
            "path_latency": path_latency}
        row_bits, col_bits = ceil_log2(rows), ceil_log2(columns)
        gate = {"col_want": Out(1), "col_ok": In(1)} if col_gate else {}
        super().__init__({
            **gate,
            "instr": In(stream.Signature(mem_layout(tag_bits))),
            "reserve": In(stream.Signature(data.StructLayout(
                {"tag": tag_bits, "idx": REG_BITS, "spm": SPM_BITS}))),
            "slot": Out(range(queue)),
            "write": In(stream.Signature(data.StructLayout(
                {"dram": DRAM_BITS, "data": VECTOR_BITS, "slot": range(queue)}))),
            "ldp": Out(stream.Signature(data.StructLayout(
                {"tag": tag_bits, "spm": SPM_BITS, "data": VECTOR_BITS}))),
            "done": Out(stream.Signature(completion_layout(tag_bits))),
            "remote": In(RemoteBankSignature(dram_bits=DRAM_BITS, tag_bits=remote_tag_bits)),
            "arr": Out(DRAMArraySignature(addr_bits=1 + row_bits + col_bits,
                                          data_bits=VECTOR_BITS)),
            "cmd": Out(CmdSignature(bank_bits=1, row_bits=row_bits, col_bits=col_bits)),
            "act_want": Out(1), "act_ok": In(1),
            "ctrl_busy": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        ctrl = m.submodules.ctrl = VaultController(**self._ctrl_kw)
        wiring.connect(m, wiring.flipped(self.arr), ctrl.arr)
        wiring.connect(m, wiring.flipped(self.cmd), ctrl.cmd)
        m.d.comb += [self.act_want.eq(ctrl.act_want), ctrl.act_ok.eq(self.act_ok)]
        if self.col_gate:
            m.d.comb += [self.col_want.eq(ctrl.col_want), ctrl.col_ok.eq(self.col_ok)]

        NS = self.queue
        sbits = max(1, ceil_log2(NS))
        # ``tag``: the issue tag of an instruction's slot, the remote tag of a remote read.
        slot_l = data.StructLayout({"kind": 3, "tag": max(self.tag_bits, self.remote_tag_bits),
                                    "idx": REG_BITS, "spm": SPM_BITS})
        slots = Array(Signal(slot_l, name=f"bslot{i}") for i in range(NS))
        used = Signal(NS)
        free_idx = Signal(sbits)
        any_free = Signal()
        for i in reversed(range(NS)):
            with m.If(~used[i]):
                m.d.comb += [free_idx.eq(i), any_free.eq(1)]
        m.d.comb += self.slot.eq(free_idx)
        req, resp = ctrl.bus.req, ctrl.bus.resp
        col_bits = ceil_log2(ctrl.columns)
        row_bits = ceil_log2(ctrl.rows)
        ins, ip = self.instr, self.instr.payload
        is_st_rf = ins.valid & (ip.opcode == Opcode.ST_RF)
        is_ld_pgsm = ins.valid & (ip.opcode == Opcode.LD_PGSM)
        write, rsv = self.write, self.reserve

        rmt = self.remote
        p_v = Signal()
        p_dram = Signal(DRAM_BITS)
        p_tag = Signal(self.remote_tag_bits)
        r_take = Signal()          # the pending remote read goes into the queue
        m.d.comb += [r_take.eq(p_v & ~write.valid & any_free & req.ready),
                     rmt.req.ready.eq(~p_v | r_take)]
        with m.If(rmt.req.valid & rmt.req.ready):
            m.d.sync += [p_v.eq(1), p_dram.eq(rmt.req.payload.dram),
                         p_tag.eq(rmt.req.payload.tag)]
        with m.Elif(r_take):
            m.d.sync += p_v.eq(0)
        b_we = Signal()
        b_addr = Signal(DRAM_BITS)
        b_data = Signal(VECTOR_BITS)
        b_slot = Signal(slot_l)
        with m.If(write.valid):
            m.d.comb += [b_we.eq(1), b_addr.eq(write.payload.dram),
                         b_data.eq(write.payload.data), b_slot.kind.eq(_ST_PGSM)]
            m.d.comb += req.payload.tag.eq(write.payload.slot)
        # On r_take only: the slot reserved in a cycle when the queue refuses the remote
        # read must be the st_pgsm's.
        with m.Elif(r_take):
            m.d.comb += [b_addr.eq(p_dram), b_slot.kind.eq(_REMOTE), b_slot.tag.eq(p_tag)]
            m.d.comb += req.payload.tag.eq(free_idx)
        with m.Else():
            m.d.comb += [b_we.eq(is_st_rf), b_addr.eq(ip.dram), b_data.eq(ip.data)]
            with m.If(rsv.valid):
                m.d.comb += [b_slot.kind.eq(_ST_PGSM), b_slot.tag.eq(rsv.payload.tag),
                             b_slot.idx.eq(rsv.payload.idx), b_slot.spm.eq(rsv.payload.spm)]
            with m.Else():
                m.d.comb += [b_slot.tag.eq(ip.tag), b_slot.idx.eq(ip.drf),
                             b_slot.spm.eq(ip.spm),
                             b_slot.kind.eq(Mux(is_st_rf, _ST_RF,
                                                Mux(is_ld_pgsm, _LD_PGSM, _LD_RF)))]
            m.d.comb += req.payload.tag.eq(free_idx)
        m.d.comb += [
            req.valid.eq(write.valid | ((p_v | ins.valid) & any_free)),
            req.payload.we.eq(b_we), req.payload.cls.eq(CLS_PE), req.payload.bank.eq(0),
            req.payload.col.eq(b_addr[:col_bits]),
            req.payload.row.eq(b_addr[col_bits:col_bits + row_bits]),
            req.payload.data.eq(b_data),
            write.ready.eq(req.ready),
            ins.ready.eq(~write.valid & ~p_v & any_free & req.ready),
            rsv.ready.eq(any_free & ~r_take),
        ]
        set_used = Signal(NS)
        clr_used = Signal(NS)
        alloc = Signal()
        m.d.comb += alloc.eq((ins.valid & ins.ready) | r_take | (rsv.valid & rsv.ready))
        with m.If(alloc):
            m.d.sync += slots[free_idx].eq(b_slot)
            m.d.comb += set_used.eq(1 << free_idx)

        r_slot = slots[resp.payload.tag]
        r_ldp = resp.valid & (r_slot.kind == _LD_PGSM)
        r_rmt = resp.valid & (r_slot.kind == _REMOTE)
        m.d.comb += [rmt.resp.valid.eq(r_rmt), rmt.resp.payload.tag.eq(r_slot.tag),
                     rmt.resp.payload.data.eq(resp.payload.data),
                     self.ldp.valid.eq(r_ldp), self.ldp.payload.tag.eq(r_slot.tag),
                     self.ldp.payload.spm.eq(r_slot.spm),
                     self.ldp.payload.data.eq(resp.payload.data)]
        d = self.done.payload
        m.d.comb += [self.done.valid.eq(resp.valid & ~r_ldp & ~r_rmt),
                     d.tag.eq(r_slot.tag), d.drf.eq(r_slot.kind == _LD_RF), d.idx.eq(r_slot.idx),
                     d.mask.eq(0b1111), d.data.eq(resp.payload.data)]
        m.d.comb += resp.ready.eq((self.ldp.valid & self.ldp.ready) |
                                  (self.done.valid & self.done.ready) |
                                  (rmt.resp.valid & rmt.resp.ready))
        with m.If(resp.valid & resp.ready):
            m.d.comb += clr_used.eq(1 << resp.payload.tag)
        m.d.sync += used.eq((used | set_used) & ~clr_used)
        m.d.comb += [self.ctrl_busy.eq(ctrl.busy),
                     self.busy.eq(p_v | used.any() | ctrl.busy)]
        return m

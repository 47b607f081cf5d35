"""DRAM protocol checker: every timing constraint on a stream of vault commands.

One rule set, used online by the cocotb protocol monitor (:meth:`TimingChecker.step`)
and offline on membench traces (:func:`check_trace`). Times are controller
cycles; a command at cycle ``t`` and a constraint ``tX`` between two commands
mean the second may issue at ``t + tX`` at the earliest.
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["TimingChecker", "Violation", "check_trace", "read_trace", "refresh_gaps"]

NEVER = -(10**12)


@dataclass
class Violation:
    cycle: int
    vault: int
    bank: int
    cmd: str
    rule: str

    def __str__(self):
        return f"cycle {self.cycle} vault {self.vault} bank {self.bank} {self.cmd}: {self.rule}"


@dataclass
class _Bank:
    open_row: int | None = None
    act: int = NEVER
    pre: int = NEVER
    rd: int = NEVER
    wr: int = NEVER


@dataclass
class TimingChecker:
    """Checks one vault's command stream against :class:`~pimforge.rtl.mem.timing.Timing` *t*.

    Rules (``>=`` distances in cycles):

    ACT: bank closed; ACT->ACT same bank tRC; PRE->ACT tRP; REF->ACT tRFC;
    ACT->ACT any bank tRRD; 5th ACT at least tFAW after the 1st of any four.
    PRE: bank open; ACT->PRE tRAS; RD->PRE tRTP; WR->PRE tCWL+tBL+tWR.
    RD/WR: bank open on the addressed row; ACT->RD/WR tRCD; column->column
    max(tCCD, tBL); WR->RD tCWL+tBL+tWTR; RD->WR tCL+tBL+2-tCWL.
    REF: all banks closed; PRE->REF tRP; REF->REF tRFC.
    At most one command per cycle; cycles never decrease.
    """

    t: object
    banks: int
    vault: int = 0
    violations: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)

    def __post_init__(self):
        self.bank = [_Bank() for _ in range(self.banks)]
        self.last_cycle = NEVER
        self.acts: list[int] = []
        self.any_act = self.any_col = self.any_rd = self.any_wr = NEVER
        self.any_pre = self.ref = NEVER
        self.refs: list[int] = []

    def _need(self, ok: bool, cycle, bank, cmd, rule):
        if not ok:
            self.violations.append(Violation(cycle, self.vault, bank, cmd, rule))

    def step(self, cycle: int, cmd: str, bank: int = -1, row: int = 0, col: int = 0) -> None:
        t, need = self.t, self._need
        self.counts[cmd] = self.counts.get(cmd, 0) + 1
        need(cycle > self.last_cycle, cycle, bank, cmd, f"second command in cycle / cycle went "
             f"backwards (previous {self.last_cycle})")
        self.last_cycle = cycle
        if cmd == "REF":
            for i, b in enumerate(self.bank):
                need(b.open_row is None, cycle, i, cmd, "REF with a bank open")
            need(cycle - self.any_pre >= t.tRP, cycle, bank, cmd, "tRP (PRE->REF)")
            need(cycle - self.ref >= t.tRFC, cycle, bank, cmd, "tRFC (REF->REF)")
            self.ref = cycle
            self.refs.append(cycle)
            return
        need(0 <= bank < self.banks, cycle, bank, cmd, "bank out of range")
        if not 0 <= bank < self.banks:
            return
        b = self.bank[bank]
        if cmd == "ACT":
            need(b.open_row is None, cycle, bank, cmd, "ACT to an open bank")
            need(cycle - b.act >= t.tRC, cycle, bank, cmd, "tRC (ACT->ACT same bank)")
            need(cycle - b.pre >= t.tRP, cycle, bank, cmd, "tRP (PRE->ACT)")
            need(cycle - self.ref >= t.tRFC, cycle, bank, cmd, "tRFC (REF->ACT)")
            need(cycle - self.any_act >= t.tRRD, cycle, bank, cmd, "tRRD (ACT->ACT)")
            if len(self.acts) >= 4:
                need(cycle - self.acts[-4] >= t.tFAW, cycle, bank, cmd, "tFAW (5th ACT)")
            self.acts = (self.acts + [cycle])[-4:]
            b.open_row, b.act, self.any_act = row, cycle, cycle
        elif cmd == "PRE":
            need(b.open_row is not None, cycle, bank, cmd, "PRE to a closed bank")
            need(cycle - b.act >= t.tRAS, cycle, bank, cmd, "tRAS (ACT->PRE)")
            need(cycle - b.rd >= t.tRTP, cycle, bank, cmd, "tRTP (RD->PRE)")
            need(cycle - b.wr >= t.tCWL + t.tBL + t.tWR, cycle, bank, cmd,
                 "tWR (WR data end->PRE)")
            b.open_row, b.pre, self.any_pre = None, cycle, cycle
        elif cmd in ("RD", "WR"):
            need(b.open_row == row, cycle, bank, cmd,
                 f"column to row {row} while row {b.open_row} is open")
            need(cycle - b.act >= t.tRCD, cycle, bank, cmd, "tRCD (ACT->column)")
            need(cycle - self.any_col >= max(t.tCCD, t.tBL), cycle, bank, cmd,
                 "tCCD/tBL (column->column)")
            if cmd == "RD":
                need(cycle - self.any_wr >= t.tCWL + t.tBL + t.tWTR, cycle, bank, cmd,
                     "tWTR (WR data end->RD)")
                b.rd = self.any_rd = cycle
            else:
                need(cycle - self.any_rd >= t.tCL + t.tBL + 2 - t.tCWL, cycle, bank, cmd,
                     "read-to-write turnaround")
                b.wr = self.any_wr = cycle
            self.any_col = cycle
        else:
            need(False, cycle, bank, cmd, "unknown command")


def refresh_gaps(refs: list[int], end_cycle: int) -> list[int]:
    """Gaps between consecutive REFs, the first from cycle 0 and the last to *end_cycle*."""
    pts = [0, *refs, end_cycle]
    return [b - a for a, b in itertools.pairwise(pts)]


def read_trace(path: str | Path) -> list[dict]:
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        if r.fieldnames != ["cycle", "vault", "bank", "cmd", "row", "col"]:
            raise ValueError(f"{path}: header must be cycle,vault,bank,cmd,row,col, "
                             f"not {','.join(r.fieldnames or [])}")
        return [{k: (v if k == "cmd" else int(v)) for k, v in row.items()} for row in r]


def check_trace(rows: list[dict], t, banks: int
                ) -> tuple[list[Violation], dict[int, TimingChecker]]:
    """Check a membench trace; returns the violations and one checker per vault."""
    checkers: dict[int, TimingChecker] = {}
    last = NEVER
    bad: list[Violation] = []
    for r in rows:
        if r["cycle"] < last:
            bad.append(Violation(r["cycle"], r["vault"], r["bank"], r["cmd"],
                                 "trace not in cycle order"))
        last = r["cycle"]
        c = checkers.setdefault(r["vault"], TimingChecker(t, banks, r["vault"]))
        if r["cmd"] == "REF" and r["bank"] != -1:
            bad.append(Violation(r["cycle"], r["vault"], r["bank"], "REF", "REF bank must be -1"))
        c.step(r["cycle"], r["cmd"], r["bank"], r["row"], r["col"])
    for c in checkers.values():
        bad.extend(c.violations)
    return bad, checkers

"""The DRAM port of a node during a data-sharing step: a small cycle model of the
data-sharing unit's reads and the received words' writes through the node's one-bank
FR-FCFS controller.

In a sharing step every node of a set sends a chunk (``SEND``: reads issued ahead, up
to the reorder buffer's slots, one message of :data:`~.share.MESSAGE_FLITS` flits a
:data:`~.share.MESSAGE_FLITS` cycles) and receives one (each message a DRAM write),
all nodes at once. The two streams share the node's DRAM port, and where the sent
and the received words lie in different rows the controller switches rows as often as
its queue runs out of hits to the open one -- a rate that comes out of the queue's
depth, the arrivals and the bank's timing together, with no closed form. So this
module plays the step cycle by cycle, as the RTL does it
(:class:`~pimforge.rtl.nicepim.share.DataShare`,
:class:`~pimforge.rtl.mem.scheduler.Scheduler` with ``frfcfs`` and an open page,
:class:`~pimforge.rtl.mem.bank.BankMachine`), with the step's symmetry standing in for
the other nodes: the word another node sends to this one arrives as this node's own
word of the same index reaches its neighbour (every node runs the same chunk sizes at
once). Refresh is left to the caller (:class:`~.node_model.NodeTiming` stretches by
it), as is the network beyond the path latency (a link carries a flit a cycle, which
the unit's one message per :data:`~.share.MESSAGE_FLITS` cycles never exceeds).

Long steps repeat with the DRAM rows: :func:`step_cycles` plays at most
:data:`PLAYED_ROWS` rows' worth of words and extends the last row's rate to the rest.
"""

from __future__ import annotations

import functools

from pimforge.rtl.mem.timing import Timing
from pimforge.rtl.nicepim.share import MESSAGE_FLITS

__all__ = ["PLAYED_ROWS", "REQ_LATENCY", "RESP_LATENCY", "gather_cycles", "port_cycles",
           "same_row_words", "step_cycles"]

#: Rows' worth of words a step is played for before its rate is extended.
PLAYED_ROWS = 3
#: Cycles from a request's acceptance to the scheduler seeing it in the queue (the
#: queue's register), and from a RD's data leaving the bank to the unit's reorder
#: buffer (the controller's response FIFO and the buffer's write), read off the RTL's
#: waves of a sharing step.
REQ_LATENCY, RESP_LATENCY = 1, 2


def port_cycles(t: Timing, sent_rows: list[int], got_rows: list[int] | None, *,
                path: int, queue_depth: int, inflight: int, period: int,
                req_lat: int = REQ_LATENCY, resp_lat: int = RESP_LATENCY,
                arrivals: list[int] | None = None, pops: list[int] | None = None) -> int:
    """Play one node's step: it sends words from DRAM rows *sent_rows* (in order), a
    message every *period* cycles at most, and, unless *got_rows* is None, receives as
    many words into rows *got_rows*, each as a write requested *path* cycles after its
    own word of the same index left. Returns the cycle, from the unit's start, by which
    the last message has left and the last word has been written (here, and -- the
    step being symmetric -- at the destination: its arrival plus a write).

    *arrivals*: the cycles the words of *got_rows* arrive instead (a node that gathers
    from others: nothing of the symmetry). *pops*: a list to which the cycle each
    message leaves is appended."""
    n = len(sent_rows)
    got = got_rows is not None
    n_got = len(got_rows) if got else 0
    rd_lat = t.rd_latency
    col_gap, wtr, rtw = t.col_gap, t.wr_to_rd, t.rd_to_wr
    wr_rec = t.tCWL + t.tBL + t.tWR
    tRTP, tRCD, tRAS, tRC, tRP = t.tRTP, t.tRCD, t.tRAS, t.tRC, t.tRP
    queue: list[tuple[int, int, int]] = []  # (we, row, visible from), oldest first
    queued = 0                  # len(queue)
    open_row = -1
    # the cycles from which an ACT, PRE, column command (tRCD), any column command
    # (tCCD), a RD (after a WR) and a WR (after a RD) may issue
    ok_act = ok_pre = ok_col = ok_ccd = ok_rd = ok_wr = 0
    iss = pop = 0               # reads issued, messages sent
    ready_at: list[int] = []    # when each word read can be sent
    n_ready = 0                 # len(ready_at)
    arrive: list[int] = list(arrivals or [])    # when each received word's write is requested
    n_arrive = len(arrive)      # len(arrive)
    wr_next = 0                 # next received word to request
    wr_done = 0
    send_free = 0               # the cycle the interface takes the next message
    last_tail = last_wr = arrive_last = 0
    rr = 0
    took = -period              # when the last received word's write was requested
    c = 0
    col_from = 0                # max(ok_col, ok_ccd)
    # (the step repeats itself: see below)
    seen: dict | None = {} if arrivals is None and pops is None else None
    opened = False
    while pop < n or wr_done < n_got:
        # ---- the scheduler: the oldest legal hit, else the oldest request's ACT/PRE
        col = -1
        if open_row >= 0 and c >= col_from:
            i = 0
            for we, row, vis in queue:
                if row == open_row and vis <= c and c >= (ok_wr if we else ok_rd):
                    col = i
                    break
                i += 1
        if col >= 0:
            we = queue.pop(col)[0]
            queued -= 1
            ok_ccd = col_from = c + col_gap
            if ok_col > col_from:
                col_from = ok_col
            if we:
                ok_rd = c + wtr
                if c + wr_rec > ok_pre:
                    ok_pre = c + wr_rec
                wr_done += 1
                last_wr = c
            else:
                ok_wr = c + rtw
                if c + tRTP > ok_pre:
                    ok_pre = c + tRTP
                ready_at.append(c + rd_lat + resp_lat)
                n_ready += 1
        elif queue and queue[0][2] <= c:
            row = queue[0][1]
            if open_row < 0:
                if c >= ok_act:
                    opened = True
                    open_row = row
                    ok_col = c + tRCD
                    col_from = ok_col if ok_col > ok_ccd else ok_ccd
                    if c + tRAS > ok_pre:
                        ok_pre = c + tRAS
                    ok_act = c + tRC
            elif row != open_row and c >= ok_pre:
                # (only if no visible request hits the open row)
                for e in queue:
                    if e[1] == open_row and e[2] <= c:
                        break
                else:
                    open_row = -1
                    if c + tRP > ok_act:
                        ok_act = c + tRP
        # ---- requests into the queue: reads and received writes, round robin
        if queued < queue_depth:
            want_rd = iss < n and iss - pop < inflight
            want_wr = got and wr_next < n_arrive and arrive[wr_next] <= c and c >= took + period
            if want_rd and (not want_wr or rr == 0):
                queue.append((0, sent_rows[iss], c + req_lat))
                queued += 1
                iss += 1
                rr = 1
            elif want_wr:
                queue.append((1, got_rows[wr_next], c + req_lat))
                queued += 1
                wr_next += 1
                took = c
                rr = 0
        # ---- the network interface: one message at a time, in order
        if pop < n_ready and ready_at[pop] <= c and send_free <= c:
            send_free = c + period
            last_tail = c + MESSAGE_FLITS - 1
            if arrivals is None:
                arrive.append(c + path)
                n_arrive += 1
                arrive_last = c + path
            if pops is not None:
                pops.append(c)
            pop += 1
        if opened and seen is not None:
            opened = False
            # The state the next cycle starts from. Where it equals the state after an
            # earlier row activation, times taken from the cycle each starts (a time
            # already passed acts as that cycle itself), the cycles between repeat as
            # long as their requests read and write the same DRAM rows and words are
            # left: so many repeats are taken at once, every time moved on by their
            # length, and the words they read, send and receive appended (the lists
            # only grow, so an earlier state's pending words are still in them).
            at = c + 1
            key = (open_row, rr, iss - pop, queued, n_ready - pop,
                   n_arrive - wr_next if got else 0)
            now = (at, iss, pop, wr_next, wr_done, n_ready, n_arrive, tuple(queue), ok_act,
                   ok_pre, ok_col, ok_ccd, ok_rd, ok_wr, col_from, took, send_free)
            was = seen.get(key)
            seen[key] = now
            if was is not None and _same_state(was, now, ready_at, arrive, got, period):
                at0, iss0, pop0, wr0, done0, ready0, arrive0 = was[:7]
                d_iss, d_pop, d_wr, d_done = iss - iss0, pop - pop0, wr_next - wr0, wr_done - done0
                m = _NEVER
                if d_iss:
                    j, r = iss0, sent_rows[iss0]
                    while j < n and sent_rows[j] == r:
                        j += 1
                    m = min((j - iss) // d_iss, (n - 1 - iss) // d_iss)
                if d_wr:
                    j, r = wr0, got_rows[wr0]
                    while j < n_got and got_rows[j] == r:
                        j += 1
                    m = min(m, (j - wr_next) // d_wr)
                if d_pop:
                    m = min(m, (n - 1 - pop) // d_pop)
                elif d_done:
                    m = min(m, (n_got - 1 - wr_done) // d_done)
                else:
                    m = 0
                if 0 < m < _NEVER:
                    T = at - at0
                    shift = m * T
                    c += shift
                    queue = [(we, row, vis + shift) for we, row, vis in queue]
                    ok_act += shift
                    ok_pre += shift
                    ok_col += shift
                    ok_ccd += shift
                    ok_rd += shift
                    ok_wr += shift
                    col_from += shift
                    took += shift
                    send_free += shift
                    new = ready_at[ready0:n_ready]
                    ready_at.extend([x + k * T for k in range(1, m + 1) for x in new])
                    new = arrive[arrive0:n_arrive]
                    arrive.extend([x + k * T for k in range(1, m + 1) for x in new])
                    n_ready, n_arrive = len(ready_at), len(arrive)
                    iss += m * d_iss
                    pop += m * d_pop
                    wr_next += m * d_wr
                    wr_done += m * d_done
                    if d_pop:
                        last_tail += shift
                        arrive_last += shift
                    if d_done:
                        last_wr += shift
                    seen.clear()
        c += 1
    return max(last_tail, last_wr, arrive_last + req_lat + 1)


#: A cycle later than any play's.
_NEVER = 1 << 62


def _same_state(a: tuple, b: tuple, ready_at: list[int], arrive: list[int], got: bool,
                period: int) -> bool:
    """Whether :func:`port_cycles`' states *a* and *b* (each ``(cycle, reads issued,
    messages sent, writes requested, writes done, words read, words arrived, queue,
    ok_act, ok_pre, ok_col, ok_ccd, ok_rd, ok_wr, col_from, took, send_free)``, with
    equal counts in flight) act alike from their cycles on: every time relative to its
    state's cycle, those already passed as that cycle."""
    at, bt = a[0], b[0]
    if len(a[7]) != len(b[7]):
        return False
    for (we, row, vis), (we2, row2, vis2) in zip(a[7], b[7]):
        if we != we2 or row != row2 or max(vis - at, 0) != max(vis2 - bt, 0):
            return False
    for x, y in zip(a[8:15], b[8:15]):
        if max(x - at, 0) != max(y - bt, 0):
            return False
    if (max(a[15] + period - at, 0) != max(b[15] + period - bt, 0)
            or max(a[16] - at, 0) != max(b[16] - bt, 0)):
        return False
    for x, y in zip(ready_at[a[2]:a[5]], ready_at[b[2]:b[5]]):
        if max(x - at, 0) != max(y - bt, 0):
            return False
    if got:
        for x, y in zip(arrive[a[3]:a[6]], arrive[b[3]:b[6]]):
            if max(x - at, 0) != max(y - bt, 0):
                return False
    return True


@functools.lru_cache(maxsize=1024)
def gather_cycles(t: Timing, words: int, row_words: int, got_at: tuple[int, ...], *,
                  path: int, queue_depth: int, inflight: int, period: int) -> float:
    """Cycles until a node that receives *words* words from each of ``len(got_at)``
    senders (sending nothing itself) has written them all, sender ``s``'s into DRAM
    from word ``got_at[s]`` on: the senders read and send as a node that receives
    nothing does (:func:`port_cycles`), their messages meet at the receiver's port, one
    a *period* (the last router takes a packet at a time), and the receiver's writes
    are played through its DRAM port."""
    if words <= 0 or not got_at:
        return 0.0
    pops: list[int] = []
    port_cycles(t, [0] * words, None, path=path, queue_depth=queue_depth,
                inflight=inflight, period=period, pops=pops)
    msgs = sorted((p + path, s, k) for s in range(len(got_at)) for k, p in enumerate(pops))
    times, rows = [], []
    for at, s, k in msgs:
        times.append(max(at, times[-1] + period) if times else at)
        rows.append((got_at[s] + k) // row_words)
    return float(port_cycles(t, [], rows, path=path, queue_depth=queue_depth,
                             inflight=inflight, period=period, arrivals=times))


def same_row_words(lo: int, hi: int, sent_at: int, got_at: int, row_words: int) -> int:
    """How many words ``k`` in ``[lo, hi)`` have ``sent_at + k`` and ``got_at + k`` in
    one DRAM row."""
    d = got_at - sent_at
    if abs(d) >= row_words or hi <= lo:
        return 0
    # word k shares its row iff (sent_at + k) mod row_words falls in a window of
    # row_words - |d| positions: [0, row_words - d) for d >= 0, [-d, row_words) else
    w0, w1 = (0, row_words - d) if d >= 0 else (-d, row_words)
    first = sent_at % row_words

    def upto(n: int) -> int:              # such k in [0, n)
        full, rest = divmod(n, row_words)
        cnt = full * (w1 - w0)
        for start, length in ((first, min(rest, row_words - first)),
                              (0, max(0, rest - (row_words - first)))):
            cnt += max(0, min(start + length, w1) - max(start, w0))
        return cnt

    return upto(hi) - upto(lo)


@functools.lru_cache(maxsize=65536)
def _play(t: Timing, words: int, row_words: int, sent_at: int, got_at: int | None,
          kw: tuple) -> int:
    return port_cycles(t, [(sent_at + i) // row_words for i in range(words)],
                       None if got_at is None else [(got_at + i) // row_words
                                                    for i in range(words)], **dict(kw))


def step_cycles(t: Timing, words: int, row_words: int, sent_at: int, got_at: int | None, *,
                path: int, queue_depth: int, inflight: int, period: int) -> float:
    """The unit's busy cycles for a step of *words* words sent from DRAM word *sent_at*
    and (unless None) as many received at word *got_at*: until its last message's tail
    and its last word's write (:func:`port_cycles`). Steps longer than
    :data:`PLAYED_ROWS` rows are played that long and the last row's rate is extended
    to the rest. Plays are memoized by what they depend on: where the chunks start
    within a row, and how far apart they are up to the distance at which their rows
    can no longer meet within the played words."""
    if words <= 0:
        return 0.0
    kw = (("path", path), ("queue_depth", queue_depth), ("inflight", inflight),
          ("period", period))
    cap = PLAYED_ROWS * row_words
    if got_at is not None:
        far = cap + row_words
        if abs(got_at - sent_at) > far:
            got_at = sent_at + (far if got_at > sent_at else -far)
        base = min(sent_at, got_at) // row_words * row_words
        sent_at, got_at = sent_at - base, got_at - base
    else:
        sent_at %= row_words
    if words <= cap:
        return float(_play(t, words, row_words, sent_at, got_at, kw))
    whole = _play(t, cap, row_words, sent_at, got_at, kw)
    last = _play(t, cap - row_words, row_words, sent_at, got_at, kw)
    return whole + (words - cap) * (whole - last) / row_words

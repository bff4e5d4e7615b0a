"""A linearizability checker for histories of S3 operations on single keys,
in the manner of Wing & Gong, with the optimisations of Lowe ("Testing for
linearizability", 2017) that Porcupine and Knossos also use:

- P-compositionality: a history is linearizable iff each key's
  sub-history is (every operation touches one key; a listing is split into
  one read per key it covers, which checks a necessary condition);
- the search lifts a call entry (and its return) out of a doubly linked
  list of call/return entries, and backtracks at the first return entry it
  reaches whose call it has not linearized;
- memoisation of (set of linearized operations as a bitmask, model state):
  a configuration already explored is not explored again.

The model is one S3 key seen as a register whose state is `None` (absent)
or the ETag of the object (every write in a history writes a unique body,
so its ETag names it):

- PUT (and CompleteMultipartUpload): the state becomes the value;
- PUT_IF_ABSENT (`If-None-Match: *`): succeeds iff the state is absent;
- PUT_IF_MATCH (`If-Match: <etag>`): succeeds iff the state is that ETag;
- DELETE: the state becomes absent (S3 answers 204 either way);
- GET (and a listing's view of the key): reads the state.

An operation whose outcome is unknown (a timeout, a connection reset or
refused, a 5xx: S3 does not say whether a 503 left its write behind) "maybe
happened": its completion time is +infinity, so it may be linearized at any
point after its invocation, or never. A failed conditional write (412)
happened and changed nothing; a read that failed is no constraint and is
left out of the history by the recorder.

`check_history` returns, per key, whether the key's history is
linearizable, and if not a witness: the operations linearized at the
deepest point of the search and the operation whose return could not be
reached. `minimise` shrinks a non-linearizable history to a smaller one
that still is not (for regression tests and reports).
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Iterable

INF = math.inf

PUT = "PUT"
PUT_IF_ABSENT = "PUT_IF_ABSENT"
PUT_IF_MATCH = "PUT_IF_MATCH"
DELETE = "DELETE"
GET = "GET"
WRITES = (PUT, PUT_IF_ABSENT, PUT_IF_MATCH, DELETE)
KINDS = WRITES + (GET,)

OK, FAIL, UNKNOWN = "ok", "fail", "unknown"


@dataclasses.dataclass(frozen=True)
class Op:
    """One operation of a history. `call` and `ret` are instants of one
    clock (the recorder's monotonic clock); `ret` is INF when the outcome
    is unknown. `value` is what a write writes (None for DELETE) or what a
    GET read (None: absent); `expect` is PUT_IF_MATCH's ETag. `outcome`
    is OK, FAIL (a conditional write refused: 412, or 404 for If-Match on
    an absent key) or UNKNOWN. `note` says how it was done (for reports)."""

    id: int
    key: str
    kind: str
    call: float
    ret: float
    value: str | None = None
    expect: str | None = None
    outcome: str = OK
    client: str = ""
    note: str = ""

    def __post_init__(self):
        assert self.kind in KINDS, self.kind
        assert self.outcome in (OK, FAIL, UNKNOWN), self.outcome
        assert (self.outcome == UNKNOWN) == (self.ret == INF), (self.outcome, self.ret)
        assert self.kind != GET or self.outcome == OK, "a failed read is no constraint: leave it out"
        assert self.outcome != FAIL or self.kind in (PUT_IF_ABSENT, PUT_IF_MATCH), "only a conditional write fails"
        assert self.call <= self.ret, (self.call, self.ret)

    def describe(self) -> str:
        v = "absent" if self.value is None else short(self.value)
        what = {
            PUT: f"PUT {v}",
            PUT_IF_ABSENT: f"PUT If-None-Match:* {v}",
            PUT_IF_MATCH: f"PUT If-Match:{short(self.expect)} {v}",
            DELETE: "DELETE",
            GET: f"GET -> {v}",
        }[self.kind]
        end = "?" if self.ret == INF else f"{self.ret:.3f}"
        return (f"#{self.id} {self.client} {what} [{self.outcome}] {self.call:.3f}-{end}"
                + (f" ({self.note})" if self.note else ""))


def short(v: str | None) -> str:
    return "absent" if v is None else "(unread)" if v == UNOBSERVED else v[:10]


def step(state: str | None, op: Op) -> tuple[bool, str | None]:
    """The register model: (is `op` with its recorded outcome legal in
    `state`, the state after it)."""
    k = op.kind
    if k == GET:
        return state == op.value, state
    if k == PUT:
        return True, op.value
    if k == DELETE:
        return True, None
    holds = state is None if k == PUT_IF_ABSENT else (state is not None and state == op.expect)
    if op.outcome == OK:
        return holds, op.value if holds else state
    if op.outcome == FAIL:
        return not holds, state
    # UNKNOWN: whatever happened, it followed the rules
    return True, op.value if holds else state


@dataclasses.dataclass
class KeyResult:
    key: str
    ops: int
    linearizable: bool | None  # None: the search gave up (budget)
    steps: int = 0
    linearized: list = dataclasses.field(default_factory=list)  # at the deepest point, in order
    blocked: Op | None = None  # whose return the deepest point could not reach
    state_at_block: str | None = None
    pending: list = dataclasses.field(default_factory=list)  # calls open at that point

    def explain(self, limit: int = 12) -> str:
        if self.linearizable:
            return f"{self.key}: linearizable ({self.ops} ops, {self.steps} steps)"
        if self.linearizable is None:
            return f"{self.key}: undecided after {self.steps} steps ({self.ops} ops)"
        lines = [f"{self.key}: NOT linearizable ({self.ops} ops). Deepest point: {len(self.linearized)} ops "
                 f"linearized, the state then {short(self.state_at_block)}; the last ones:"]
        lines += [f"    {o.describe()}" for o in self.linearized[-limit:]]
        if self.blocked is not None:
            lines.append(f"  no order lets this one in before its return: {self.blocked.describe()}")
        if self.pending:
            lines.append("  open at that point (none of them fits first):")
            lines += [f"    {o.describe()}" for o in self.pending[:limit]]
        return "\n".join(lines)


class _Entry:
    __slots__ = ("op", "idx", "is_call", "match", "prev", "next")

    def __init__(self, op, idx, is_call):
        self.op, self.idx, self.is_call = op, idx, is_call
        self.match = self.prev = self.next = None


UNOBSERVED = "~unobserved"


def prune(ops: list[Op]) -> list[Op]:
    """Simplifies what cannot change the verdict. The model compares a
    state only with values some operation observed (a GET's result, an
    If-Match's ETag) and with absent, so every value no operation observed
    is the same to it: they all become one value, UNOBSERVED (which lets
    the memoisation merge their states). Then, in a history without failed
    conditional writes (only those could need such a value in place to
    explain them), writes of unknown outcome whose value no operation
    observed are dropped: linearized or not, they change what no read saw."""
    seen = {o.value for o in ops if o.kind == GET} | {o.expect for o in ops if o.kind == PUT_IF_MATCH}
    out = [o if o.kind == GET or o.value is None or o.value in seen else dataclasses.replace(o, value=UNOBSERVED)
           for o in ops]
    if any(o.outcome == FAIL for o in out):
        return out
    return [o for o in out if not (o.outcome == UNKNOWN and o.kind != DELETE and o.value == UNOBSERVED)]


def check_key(ops: list[Op], init: str | None = None, budget: int = 2_000_000, key: str = "") -> KeyResult:
    """Wing-Gong-Lowe search over one key's history, from state `init`.

    The candidates at each point are the calls listed before the first
    return still in the list; those of operations with a known end are
    tried first, those of unknown outcome after (they may also never be
    linearized). Memoisation: a configuration is (operations with a known
    end linearized, model state, operations of unknown outcome linearized);
    one is not explored if an explored one had the same first two and a
    subset of the third, because that one could do everything this one
    can (an unknown operation can always be left out)."""
    ops = prune(list(ops))
    res = KeyResult(key=key or (ops[0].key if ops else ""), ops=len(ops), linearizable=True)
    if not ops:
        return res
    events = []
    for i, o in enumerate(ops):
        events.append((o.call, 0, i))
        events.append((o.ret, 1, i))
    # At equal instants calls come first: the two operations then overlap
    # (the more permissive reading of a tie).
    events.sort()
    head = _Entry(None, -1, False)
    prev = head
    calls: dict[int, _Entry] = {}
    for t, kind, i in events:
        e = _Entry(ops[i], i, kind == 0)
        if kind == 0:
            calls[i] = e
        else:
            calls[i].match = e
        prev.next, e.prev = e, prev
        prev = e

    def lift(e):
        e.prev.next = e.next
        if e.next is not None:
            e.next.prev = e.prev
        m = e.match
        m.prev.next = m.next
        if m.next is not None:
            m.next.prev = m.prev

    def unlift(e):
        m = e.match
        m.prev.next = m
        if m.next is not None:
            m.next.prev = m
        e.prev.next = e
        if e.next is not None:
            e.next.prev = e

    def candidates():
        known, unknown = [], []
        e = head.next
        while e is not None and e.is_call:
            (unknown if e.op.ret == INF else known).append(e)
            e = e.next
        return known + unknown, e

    finite_left = sum(1 for o in ops if o.ret != INF)
    state = init
    fin = unk = 0  # bitmasks of the linearized operations, known end / unknown outcome
    explored: dict[tuple[int, str | None], list[int]] = {}
    path: list[tuple[_Entry, str | None]] = []
    cands, blocker = candidates()
    frames: list[list] = [[cands, 0, blocker]]
    deepest = -1
    steps = 0
    while finite_left:
        steps += 1
        if steps > budget:
            res.linearizable, res.steps = None, steps
            return res
        frame = frames[-1]
        cands = frame[0]
        moved = False
        while frame[1] < len(cands):
            e = cands[frame[1]]
            frame[1] += 1
            ok, new_state = step(state, e.op)
            if not ok:
                continue
            bit = 1 << e.idx
            f2, u2 = (fin | bit, unk) if e.op.ret != INF else (fin, unk | bit)
            seen = explored.setdefault((f2, new_state), [])
            if any(u & ~u2 == 0 for u in seen):
                continue
            seen.append(u2)
            path.append((e, state))
            state, fin, unk = new_state, f2, u2
            if e.op.ret != INF:
                finite_left -= 1
            lift(e)
            cands, blocker = candidates()
            frames.append([cands, 0, blocker])
            moved = True
            break
        if moved:
            continue
        # every candidate tried: back one step
        if len(path) > deepest:
            deepest = len(path)
            res.linearized = [x.op for x, _ in path]
            res.blocked = frame[2].op if frame[2] is not None else None
            res.state_at_block = state
            res.pending = [x.op for x in cands]
        frames.pop()
        if not path:
            res.linearizable, res.steps = False, steps
            return res
        e, state = path.pop()
        bit = 1 << e.idx
        if e.op.ret != INF:
            fin &= ~bit
            finite_left += 1
        else:
            unk &= ~bit
        unlift(e)
    res.steps = steps
    return res


def by_key(history: Iterable[Op]) -> dict[str, list[Op]]:
    out: dict[str, list[Op]] = collections.defaultdict(list)
    for o in history:
        out[o.key].append(o)
    return dict(out)


def check_history(history: Iterable[Op], init: dict[str, str | None] | None = None,
                  budget: int = 5_000_000) -> dict[str, KeyResult]:
    """Each key's sub-history checked on its own (P-compositionality)."""
    init = init or {}
    return {k: check_key(ops, init.get(k), budget, key=k) for k, ops in sorted(by_key(history).items())}


def is_linearizable(history: Iterable[Op], init: dict[str, str | None] | None = None) -> bool:
    return all(r.linearizable for r in check_history(history, init).values())


def minimise(ops: list[Op], init: str | None = None, budget: int = 200_000) -> list[Op]:
    """A smaller history of one key that is still not linearizable, by
    delta debugging (chunks of halves, quarters, ... single operations
    dropped while the rest stays non-linearizable; an undecided check
    keeps them). Only reads and refused conditional writes are dropped:
    they change no state, so if the smaller history has no linearization
    the whole one has none either. (Dropping a write could *make* a
    history non-linearizable: a 412 explained by a concurrent winner
    becomes unexplained without it.) Writes, acknowledged or of unknown
    outcome, all stay. Refused writes whose value the result observes are
    put back, to show where that value came from."""

    def refuted(h):
        return check_key(h, init, budget).linearizable is False

    def neutral(o):
        return o.kind == GET or o.outcome == FAIL

    cur = sorted(ops, key=lambda o: (o.call, o.id))
    assert refuted(cur)
    n = 2
    while True:
        drop = [i for i, o in enumerate(cur) if neutral(o)]
        if not drop:
            break
        size = max(1, len(drop) // n)
        dropped = False
        for start in range(0, len(drop), size):
            gone = set(drop[start:start + size])
            rest = [o for i, o in enumerate(cur) if i not in gone]
            if refuted(rest):
                cur, dropped = rest, True
                break
        if dropped:
            n = max(n - 1, 2)
        elif size == 1:
            break
        else:
            n = min(n * 2, len(drop))
    # Shown with it: the refused writes that carried a value the rest
    # observes (one more constraint cannot make the history linearizable).
    seen = {o.value for o in cur if o.kind == GET} | {o.expect for o in cur if o.kind == PUT_IF_MATCH}
    back = [o for o in ops if o.outcome == FAIL and o.value in seen and o not in cur]
    return sorted(cur + back, key=lambda o: (o.call, o.id))

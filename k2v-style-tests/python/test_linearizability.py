"""The linearizability checker (linearizability.py) against histories
known to be linearizable and known not to be: hand-made ones, property
tests (hypothesis) that build histories from a sequential execution with
random overlapping intervals (linearizable by construction) and break them
in ways no order can explain (a read of a value never written, a stale read
after a completed write, two If-None-Match:* winners on one key), and a
brute-force enumeration of every order that must agree with the search on
small random histories. No server is involved."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import linearizability as lz
from linearizability import DELETE, FAIL, GET, INF, OK, PUT, PUT_IF_ABSENT, PUT_IF_MATCH, UNKNOWN, Op

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def op(i, kind, call, ret, value=None, expect=None, outcome=OK, key="k"):
    if outcome == UNKNOWN:
        ret = INF
    return Op(id=i, key=key, kind=kind, call=call, ret=ret, value=value, expect=expect, outcome=outcome)


# ---------------------------------------------------------------- by hand


def test_sequential_write_then_read():
    h = [op(0, PUT, 0, 1, "a"), op(1, GET, 2, 3, "a")]
    assert lz.is_linearizable(h)


def test_stale_read_after_a_completed_overwrite_is_refused():
    h = [op(0, PUT, 0, 1, "a"), op(1, PUT, 2, 3, "b"), op(2, GET, 4, 5, "a")]
    r = lz.check_key(h)
    assert r.linearizable is False
    assert r.blocked is not None and r.blocked.id == 2, r.explain()


def test_a_read_concurrent_with_a_write_may_see_either_value():
    for seen in ("a", "b"):
        h = [op(0, PUT, 0, 1, "a"), op(1, PUT, 2, 6, "b"), op(2, GET, 3, 4, seen)]
        assert lz.is_linearizable(h), seen


def test_new_then_old_inversion_is_refused():
    """Two reads one after the other, both concurrent with a write: the
    first sees the new value, the second the old one (what a quorum read
    without write-back can do)."""
    h = [op(0, PUT, 0, 1, "a"), op(1, PUT, 2, 10, "b"), op(2, GET, 3, 4, "b"), op(3, GET, 5, 6, "a")]
    assert not lz.is_linearizable(h)


def test_an_unknown_write_may_have_happened_late_or_never():
    late = [op(0, PUT, 0, 1, "a"), op(1, PUT, 2, 3, "b", outcome=UNKNOWN), op(2, GET, 4, 5, "a"),
            op(3, GET, 6, 7, "b")]
    assert lz.is_linearizable(late)
    never = [op(0, PUT, 0, 1, "a"), op(1, PUT, 2, 3, "b", outcome=UNKNOWN), op(2, GET, 10, 11, "a")]
    assert lz.is_linearizable(never)
    # but once seen it stays (nothing else wrote "a" again)
    flicker = late + [op(4, GET, 8, 9, "a")]
    assert not lz.is_linearizable(flicker)


def test_an_unknown_delete_explains_a_lost_value_but_not_its_return():
    h = [op(0, PUT, 0, 1, "a"), op(1, DELETE, 2, 3, outcome=UNKNOWN), op(2, GET, 4, 5, None)]
    assert lz.is_linearizable(h)
    assert not lz.is_linearizable(h + [op(3, GET, 6, 7, "a")])  # resurrected


def test_two_if_none_match_winners_are_refused():
    h = [op(0, PUT_IF_ABSENT, 0, 5, "a"), op(1, PUT_IF_ABSENT, 1, 4, "b")]
    assert not lz.is_linearizable(h)
    one = [op(0, PUT_IF_ABSENT, 0, 5, "a"), op(1, PUT_IF_ABSENT, 1, 4, "b", outcome=FAIL), op(2, GET, 6, 7, "a")]
    assert lz.is_linearizable(one)
    # the loser's 412 needs the winner first: a winner that started later fails
    late = [op(0, PUT_IF_ABSENT, 0, 1, "a", outcome=FAIL), op(1, PUT_IF_ABSENT, 2, 3, "b")]
    assert not lz.is_linearizable(late)
    # ... unless a write of unknown outcome may explain it
    assert lz.is_linearizable(late + [op(2, PUT, -1, 0, "c", outcome=UNKNOWN), op(3, DELETE, 1.5, 1.6)])


def test_if_match_chain():
    h = [op(0, PUT_IF_ABSENT, 0, 1, "a"), op(1, PUT_IF_MATCH, 2, 5, "b", expect="a"),
         op(2, PUT_IF_MATCH, 3, 6, "c", expect="a", outcome=FAIL), op(3, GET, 7, 8, "b")]
    assert lz.is_linearizable(h)
    both = [h[0], h[1], op(2, PUT_IF_MATCH, 3, 6, "c", expect="a"), op(3, GET, 7, 8, "c")]
    assert not lz.is_linearizable(both)
    # If-Match on an absent key fails
    assert lz.is_linearizable([op(0, PUT_IF_MATCH, 0, 1, "a", expect="x", outcome=FAIL)])
    assert not lz.is_linearizable([op(0, PUT_IF_MATCH, 0, 1, "a", expect="x")])


def test_keys_are_checked_apart_and_init_states_are_used():
    h = [op(0, GET, 0, 1, "x", key="k1"), op(1, GET, 0, 1, None, key="k2")]
    res = lz.check_history(h, init={"k1": "x"})
    assert res["k1"].linearizable and res["k2"].linearizable
    assert lz.check_history(h)["k1"].linearizable is False


def test_the_budget_gives_up_rather_than_answers():
    # many concurrent blind writes and reads of each of them: a wide search
    h = [op(i, PUT, 0, 100, f"v{i}") for i in range(14)]
    h += [op(100 + i, GET, 1 + i, 1.5 + i, f"v{(i * 5) % 14}") for i in range(14)]
    r = lz.check_key(h, budget=50)
    assert r.linearizable is None


def test_minimise_keeps_a_counterexample():
    h = [op(0, PUT, 0, 1, "a"), op(1, GET, 1.5, 1.8, "a"), op(2, PUT, 2, 3, "b"), op(3, GET, 3.5, 3.8, "b"),
         op(4, GET, 4, 5, "a"), op(5, GET, 6, 7, "b")]
    m = lz.minimise(h)
    assert not lz.is_linearizable(m)
    # the stale read, the write it read and the write that overwrote it
    assert sorted(o.id for o in m) == [0, 2, 4], [o.describe() for o in m]


def test_minimise_never_drops_a_write():
    """A 412 explained by a concurrent winner: dropping the winner would
    make a "counterexample" that the whole history is not. Here the whole
    history is broken only by a stale read, which is what stays."""
    h = [op(0, PUT_IF_ABSENT, 0, 1, "a"), op(1, PUT_IF_MATCH, 2, 4, "b", expect="a"),
         op(2, PUT_IF_MATCH, 2.5, 4.5, "c", expect="a", outcome=FAIL), op(3, GET, 5, 6, "b"),
         op(4, GET, 7, 8, "a")]
    m = lz.minimise(h)
    assert not lz.is_linearizable(m)
    assert sorted(o.id for o in m) == [0, 1, 4], [o.describe() for o in m]


def test_minimise_shows_the_refused_write_whose_value_was_seen():
    """A 412 whose value a later If-Match names: the minimal history is
    the chain with a value no kept write wrote, and the refused write that
    carried it is shown with it."""
    h = [op(0, PUT_IF_ABSENT, 0, 1, "a"), op(1, PUT_IF_MATCH, 2, 4, "b", expect="a", outcome=FAIL),
         op(2, GET, 3, 3.5, "b"), op(3, PUT_IF_MATCH, 5, 6, "c", expect="b"), op(4, GET, 7, 8, "c")]
    m = lz.minimise(h)
    assert not lz.is_linearizable(m)
    assert 1 in {o.id for o in m} and 3 in {o.id for o in m}, [o.describe() for o in m]


def test_a_long_history_with_low_concurrency_is_quick():
    h, t = [], 0.0
    for i in range(3000):
        h.append(op(i, PUT if i % 3 == 0 else GET, t, t + 1.5, f"v{(i // 3) * 3}"))
        t += 1.0
    r = lz.check_key(h)
    assert r.linearizable and r.steps < 100_000, r.steps


# ---------------------------------------------------------------- brute force


def brute_force(ops: list[Op], init=None) -> bool:
    """Every order consistent with real time (a before b when a returned
    before b was called), ops of unknown outcome optional."""
    finite = [o for o in ops if o.ret != INF]

    def must_precede(a, b):
        return a.ret < b.call

    def dfs(state, placed, left):
        if all(o in placed for o in finite):
            return True
        for o in left:
            if any(must_precede(c, o) for c in left if c is not o):
                continue
            ok, new = lz.step(state, o)
            if ok and dfs(new, placed | {o}, [x for x in left if x is not o]):
                return True
        return False

    # an unknown op left out is the same as an unknown op placed last
    return dfs(init, frozenset(), list(ops))


VALUES = ["a", "b", "c", None]


@st.composite
def random_small_history(draw):
    n = draw(st.integers(1, 6))
    ops = []
    for i in range(n):
        kind = draw(st.sampled_from(lz.KINDS))
        call = draw(st.integers(0, 8))
        length = draw(st.integers(0, 4))
        value = draw(st.sampled_from(VALUES)) if kind in (GET,) else (
            None if kind == DELETE else draw(st.sampled_from(VALUES[:3])))
        expect = draw(st.sampled_from(VALUES[:3])) if kind == PUT_IF_MATCH else None
        outcomes = [OK, UNKNOWN] + ([FAIL] if kind in (PUT_IF_ABSENT, PUT_IF_MATCH) else [])
        outcome = OK if kind == GET else draw(st.sampled_from(outcomes))
        ops.append(op(i, kind, float(call), float(call + length), value, expect, outcome))
    return ops


@settings(SETTINGS, max_examples=1500)
@given(random_small_history(), st.sampled_from([None, "a"]))
def test_the_search_agrees_with_brute_force(ops, init):
    assert lz.check_key(ops, init).linearizable == brute_force(ops, init), \
        "\n".join(o.describe() for o in ops)


# ---------------------------------------------------------------- from sequential executions


@st.composite
def sequential_history(draw, kinds=lz.KINDS, keys=("k1", "k2"), unknown=True, min_ops=1):
    """Operations executed one after the other on the model, each at its
    linearization point t_i = i, then given an interval around that point
    (overlapping its neighbours'). A write of unknown outcome either took
    effect at its point or never did."""
    n = draw(st.integers(min_ops, 30))
    state = {k: None for k in keys}
    written = {k: [] for k in keys}
    ops = []
    for i in range(n):
        key = draw(st.sampled_from(keys))
        kind = draw(st.sampled_from(kinds))
        t = float(i)
        call = t - draw(st.floats(0, 2.5))
        ret = t + draw(st.floats(0, 2.5))
        value = f"v{i}"
        expect = None
        if kind == PUT_IF_MATCH:
            choices = written[key] + ([state[key]] if state[key] else []) + ["nope"]
            expect = draw(st.sampled_from(choices))
        if kind == GET:
            ops.append(Op(i, key, GET, call, ret, value=state[key]))
            continue
        if kind == DELETE:
            value = None
        if kind in (PUT_IF_ABSENT, PUT_IF_MATCH):
            holds = state[key] is None if kind == PUT_IF_ABSENT else state[key] == expect
            outcome = OK if holds else FAIL
        else:
            holds, outcome = True, OK
        if unknown and draw(st.integers(0, 5)) == 0:
            applied = draw(st.booleans())
            ops.append(Op(i, key, kind, call, INF, value=value, expect=expect, outcome=UNKNOWN))
            if applied and holds:
                state[key] = value
                if value is not None:
                    written[key].append(value)
            continue
        ops.append(Op(i, key, kind, call, ret, value=value, expect=expect, outcome=outcome))
        if holds:
            state[key] = value
            if value is not None:
                written[key].append(value)
    return ops


@SETTINGS
@given(sequential_history())
def test_a_sequential_execution_with_overlapping_intervals_is_linearizable(ops):
    res = lz.check_history(ops)
    assert all(r.linearizable for r in res.values()), "\n".join(r.explain() for r in res.values())


@SETTINGS
@given(sequential_history(), st.data())
def test_a_read_of_a_value_never_written_is_refused(ops, data):
    reads = [o for o in ops if o.kind == GET]
    assume(reads)
    r = data.draw(st.sampled_from(reads))
    bad = [o if o is not r else Op(r.id, r.key, GET, r.call, r.ret, value="never-written") for o in ops]
    res = lz.check_history(bad)
    assert res[r.key].linearizable is False
    assert all(v.linearizable for k, v in res.items() if k != r.key)


@SETTINGS
@given(sequential_history(keys=("k",)), st.data())
def test_a_stale_read_after_a_completed_overwrite_is_refused(ops, data):
    """A read that starts after a write w2 completed returns the value of a
    write w1 that completed before w2 started: no order allows it (values
    are unique, so nothing else wrote it back)."""
    changed = [o for o in ops if o.outcome == OK and o.kind != GET]
    cands = [(w1, w2, r) for r in ops if r.kind == GET for w2 in changed if w2.ret < r.call
             for w1 in changed if w1.value is not None and w1.ret < w2.call]
    if cands:
        w1, w2, r = data.draw(st.sampled_from(cands))
        bad = [o if o is not r else Op(r.id, r.key, GET, r.call, r.ret, value=w1.value) for o in ops]
    else:
        end = max([o.ret for o in ops if o.ret != INF] + [o.call for o in ops]) + 10
        w1 = Op(1000, "k", PUT, end, end + 1, value="w1")
        w2 = Op(1001, "k", data.draw(st.sampled_from([PUT, DELETE])), end + 2, end + 3)
        w2 = Op(1001, "k", w2.kind, end + 2, end + 3, value=None if w2.kind == DELETE else "w2")
        bad = ops + [w1, w2, Op(1002, "k", GET, end + 4, end + 5, value="w1")]
    assert lz.check_key(bad).linearizable is False


@SETTINGS
@given(sequential_history(kinds=(PUT_IF_ABSENT, PUT_IF_MATCH, GET, PUT_IF_ABSENT), keys=("k",),
                          unknown=False, min_ops=2), st.data())
def test_two_if_none_match_winners_on_one_key_are_refused(ops, data):
    """No DELETE on the key: once an If-None-Match:* write won, every
    later one must fail. Turning a loser's 412 into a 200 makes two
    winners, which no order allows."""
    assume(any(o.kind == PUT_IF_ABSENT and o.outcome == OK for o in ops))
    losers = [o for o in ops if o.kind == PUT_IF_ABSENT and o.outcome == FAIL]
    assume(losers)
    lo = data.draw(st.sampled_from(losers))
    bad = [o if o is not lo else Op(lo.id, lo.key, PUT_IF_ABSENT, lo.call, lo.ret, value=lo.value) for o in ops]
    assert lz.check_key(bad).linearizable is False


@pytest.mark.parametrize("seed", range(3))
def test_mutations_found_by_brute_force_agree(seed):
    """Every single-field change of a small sequential history: the
    search and the enumeration agree on each."""
    import random

    rng = random.Random(seed)
    for _ in range(60):
        ops, state = [], None
        for i in range(5):
            kind = rng.choice(lz.KINDS)
            t = float(i)
            call, ret = t - rng.random() * 2, t + rng.random() * 2
            if kind == GET:
                ops.append(Op(i, "k", GET, call, ret, value=state))
                continue
            value = None if kind == DELETE else f"v{i}"
            holds = (state is None) if kind == PUT_IF_ABSENT else (state == "v0") if kind == PUT_IF_MATCH else True
            outcome = OK if holds else FAIL
            ops.append(Op(i, "k", kind, call, ret, value=value, expect="v0" if kind == PUT_IF_MATCH else None,
                          outcome=outcome))
            if holds:
                state = value
        assert lz.check_key(ops).linearizable and brute_force(ops)
        for i, o in enumerate(ops):
            for new in ([None, "v0", "zz"] if o.kind == GET else []):
                m = ops[:i] + [Op(o.id, "k", GET, o.call, o.ret, value=new)] + ops[i + 1:]
                assert lz.check_key(m).linearizable == brute_force(m)
            if o.outcome in (OK, FAIL) and o.kind in (PUT_IF_ABSENT, PUT_IF_MATCH):
                flip = FAIL if o.outcome == OK else OK
                m = ops[:i] + [dataclass_replace(o, outcome=flip)] + ops[i + 1:]
                assert lz.check_key(m).linearizable == brute_force(m)


def dataclass_replace(o, **kw):
    import dataclasses

    return dataclasses.replace(o, **kw)


def test_three_concurrent_writes_then_a_read():
    """Three concurrent PUTs then a read: any of the three values, never absent."""
    for v in ("a", "b", "c", None):
        h = [op(i, PUT, 0, 2, x) for i, x in enumerate("abc")] + [op(3, GET, 3, 4, v)]
        assert lz.is_linearizable(h) == (v is not None)
    for perm in itertools.permutations("abc"):
        h = [op(i, PUT, i * 2, i * 2 + 1, x) for i, x in enumerate(perm)] + [op(3, GET, 7, 8, perm[-1])]
        assert lz.is_linearizable(h)


@SETTINGS
@given(random_small_history(), st.sampled_from([None, "a"]))
def test_minimise_keeps_every_write_and_stays_refuted(ops, init):
    assume(lz.check_key(ops, init).linearizable is False)
    m = lz.minimise(ops, init)
    assert lz.check_key(m, init).linearizable is False
    assert {o.id for o in ops if o.kind != GET and o.outcome != FAIL} <= {o.id for o in m}

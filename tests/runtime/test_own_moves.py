"""The versions our own pending writes moved a Workload through, and when a write follows them."""

from __future__ import annotations

from reconciler.runtime.shared.own_moves import OwnMoves, Version

KEY = ("ns", "w")


def moves_over(store: dict[tuple[str, str], Version]) -> OwnMoves:
    return OwnMoves(store.get)


def test_a_write_decided_before_our_writes_follows_them_through_a_chain() -> None:
    store: dict[tuple[str, str], Version] = {KEY: ("10", 1)}
    moves = moves_over(store)
    moves.landed(KEY, ("10", 1), ("11", 1))
    moves.landed(KEY, ("11", 1), ("12", 1))
    store[KEY] = ("12", 1)
    assert moves.follow(KEY, "10") == "12"
    assert moves.follow(KEY, "11") == "12"
    assert moves.follow(KEY, "9") == "9"  # decided before a change that was not ours


def test_no_follow_past_a_change_that_was_not_ours_or_a_new_spec() -> None:
    store: dict[tuple[str, str], Version] = {KEY: ("10", 1)}
    moves = moves_over(store)
    moves.landed(KEY, ("10", 1), ("11", 1))
    store[KEY] = ("13", 1)  # someone else wrote after our write
    assert moves.follow(KEY, "10") == "10"
    moves.landed(KEY, ("13", 1), ("14", 2))  # the spec changed on the way: not a move of ours alone
    store[KEY] = ("14", 2)
    assert moves.follow(KEY, "13") == "13"


def test_forgotten_with_the_workload() -> None:
    store: dict[tuple[str, str], Version] = {KEY: ("11", 1)}
    moves = moves_over(store)
    moves.landed(KEY, ("10", 1), ("11", 1))
    assert len(moves) == 1
    moves.forget(KEY)
    assert len(moves) == 0
    assert moves.follow(KEY, "10") == "10"

"""Iterative depth-first post-order over any graph (no recursion: HLO graphs get deep)."""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

Node = TypeVar("Node")


def post_order(starts: Iterable[Node], successors: Callable[[Node], Iterable[Node]],
               on_cycle: Callable[[Node], None] | None = None) -> list[Node]:
    """Every node reachable from ``starts``, each after all of its successors, in visiting
    order; ``on_cycle(node)`` is called (and may raise) when a back edge reaches ``node``."""
    order: list[Node] = []
    state: dict[int, int] = {}       # 1: on the stack, 2: done
    for start in starts:
        if id(start) in state:
            continue
        stack = [(start, iter(successors(start)))]
        state[id(start)] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[id(node)] = 2
                order.append(node)
            elif id(nxt) not in state:
                state[id(nxt)] = 1
                stack.append((nxt, iter(successors(nxt))))
            elif state[id(nxt)] == 1 and on_cycle is not None:
                on_cycle(nxt)
    return order

"""Resuming with another layout: the global position in a torchdata ``StatefulDataLoader`` state.

:func:`loader_position` finds mxrec's own position records in a loader state;
how many batches the loader had delivered is read by :func:`delivered_batches`,
the one place that knows torchdata's (private) state keys, tested against the
pinned torchdata (``tests/torch/test_resume.py``).
"""

from __future__ import annotations

from typing import Any

from mxrec.errors import ParameterError


def delivered_batches(loader_state: dict) -> int:
    """The batches a ``StatefulDataLoader`` had delivered when its ``state_dict()`` was taken.

    torchdata 0.11 keeps them under private keys: ``_num_yielded`` without
    workers; with workers, ``_snapshot["_snapshot_step"]`` plus
    ``_steps_since_snapshot``.
    """
    if "_num_yielded" in loader_state:  # a loader without workers
        return int(loader_state["_num_yielded"])
    snapshot = loader_state.get("_snapshot", {})
    return int(snapshot.get("_snapshot_step", 0)) + int(loader_state.get("_steps_since_snapshot", 0))


def loader_position(loader_state: dict) -> dict:
    """The global position in a torchdata ``StatefulDataLoader`` state, for a resume with another layout.

    Over a :class:`DistributedBatchSampler`: the sampler's position. Over an
    :class:`ImageRecordIterable`: the batches the loader had delivered,
    converted to records of the epoch's order. Load the result into a new
    sampler or iterable (any number of ranks or workers) before making its loader.

    Parameters
    ----------
    loader_state
        A ``StatefulDataLoader``'s ``state_dict()``.

    Returns
    -------
    dict
        The position, for ``load_state_dict`` of a :class:`DistributedBatchSampler` or an
        :class:`ImageRecordIterable`.

    Raises
    ------
    ParameterError
        The state holds no mxrec position.
    """
    states: list[dict] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("format") == "mxrec-epoch-position":
                states.append(node)
                return
            for value in node.values():
                walk(value)

    walk(loader_state)
    if not states:
        raise ParameterError("no mxrec position in this loader state")
    sampler_states = [state for state in states if "worker" not in state]
    if sampler_states:  # a DistributedBatchSampler's: already global
        return dict(sampler_states[0])
    steps = delivered_batches(loader_state)
    state = {k: v for k, v in states[0].items() if k not in ("worker", "num_workers", "yielded")}
    state["consumed"] = int(state["consumed"]) + steps * int(state["batch_size"]) * (
        1 if state.get("stick_to_shard") else int(state["num_parts"]))
    return state

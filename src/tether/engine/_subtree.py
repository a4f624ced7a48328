"""A submission's subagent tree: every child it spawned, theirs in turn, with statuses and
usage, read from the store's parent links and each child's log."""

from __future__ import annotations

from dataclasses import dataclass

from tether.engine._usage import UsageTotals, total_usage
from tether.engine._views import ViewCache
from tether.store import ChildStore, Store, Submission

__all__ = ("MAX_TREE_NODES", "SubmissionTree", "submission_tree")

MAX_TREE_NODES = 1000
"""The most nodes a tree is read with; a deeper or wider one is cut (``truncated``)."""


@dataclass(frozen=True, slots=True)
class SubmissionTree:
    """A submission, what its model calls used (its settled children's included), and the
    trees of its children in spawn order.

    Example::

        tree = await runtime.tree(submission_id)
        for child in tree.children:
            print(child.submission.key.agent, child.submission.status, child.usage.calls)
    """

    submission: Submission
    usage: UsageTotals
    children: tuple[SubmissionTree, ...] = ()
    truncated: bool = False
    """Children were left out: the tree passed :data:`MAX_TREE_NODES`."""


async def submission_tree(
    store: Store,
    parents: ChildStore | None,
    views: ViewCache,
    submission: Submission,
    *,
    budget: list[int] | None = None,
) -> SubmissionTree:
    """The tree under ``submission``, read breadth of one node at a time (depth-first);
    ``parents`` is the store's children capability (without it, no submission has any)."""
    left = budget if budget is not None else [MAX_TREE_NODES - 1]
    view = await views.refreshed(store, submission.conversation_id)
    usage = total_usage(view.records, submission_id=submission.id)
    children: list[SubmissionTree] = []
    truncated = False
    for child in await parents.list_children(submission.id) if parents else ():
        if left[0] <= 0:
            truncated = True
            break
        left[0] -= 1
        children.append(await submission_tree(store, parents, views, child, budget=left))
    return SubmissionTree(submission, usage, tuple(children), truncated)

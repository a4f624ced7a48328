"""The store conformance suite: the contract every Tether store backend passes unchanged.

A backend's test module subclasses :class:`StoreConformance` and says how to open a
fresh store; pytest then collects every case (and the Hypothesis state machine that
drives the backend against the in-memory reference model). Needs ``pytest`` and
``hypothesis`` (the ``tether[testing]`` extra); no async pytest plugin is required.

Example (a complete test module for a third-party backend)::

    from pathlib import Path

    from tether.testing.storetest import StoreConformance
    from mystore import MyStore

    class TestMyStore(StoreConformance):
        async def make_store(self, directory: Path) -> MyStore:
            return await MyStore.open(directory / "db")

        async def tamper(self, store, conversation_id, seq, body):  # optional
            await store.raw_update_record(conversation_id, seq, body)
"""

from tether.testing.storetest._admitting import AdmitAndClaimCases
from tether.testing.storetest._base import BaseConformance, Fixtures
from tether.testing.storetest._children import ChildCases
from tether.testing.storetest._deciding import DecisionCases
from tether.testing.storetest._gates import GateCases
from tether.testing.storetest._input_gates import InputGateCases
from tether.testing.storetest._log import AttachmentCases, LogCases, SnapshotCases
from tether.testing.storetest._machine import MachineCase, run_reference_machine
from tether.testing.storetest._sessions import SessionCases
from tether.testing.storetest._settling import SettlementCases
from tether.testing.storetest._submissions import SubmissionCases
from tether.testing.storetest._truncation import TruncationCases

__all__ = ("Fixtures", "StoreConformance", "run_reference_machine")


class StoreConformance(
    SubmissionCases,
    AdmitAndClaimCases,
    LogCases,
    SnapshotCases,
    SettlementCases,
    DecisionCases,
    ChildCases,
    GateCases,
    InputGateCases,
    SessionCases,
    TruncationCases,
    AttachmentCases,
    MachineCase,
    BaseConformance,
):
    """Every conformance case. Implement :meth:`make_store`, and :meth:`tamper` if you can."""

"""The store conformance suite: the contract every Tether store backend passes unchanged.

It is organised as the contract is (:mod:`tether.store`): the core cases, which every store
passes, and the cases of each capability, which run only on a store that offers it (the
others are skipped, saying which capability they need). A backend's test module subclasses
:class:`StoreConformance` and says how to open a fresh store; pytest then collects every
case, and the Hypothesis state machine that drives the backend against the in-memory
reference model (with the operations of the capabilities it offers). Needs ``pytest`` and
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
from tether.testing.storetest._attachments import AttachmentCases
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, complete
from tether.testing.storetest._budget_gates import BudgetGateCases
from tether.testing.storetest._children import ChildCases
from tether.testing.storetest._deciding import DecisionCases
from tether.testing.storetest._erasure import ErasureCases
from tether.testing.storetest._forks import ForkCases
from tether.testing.storetest._gates import GateCases
from tether.testing.storetest._imports import ImportCases
from tether.testing.storetest._input_gates import InputGateCases
from tether.testing.storetest._limits import LimitCases
from tether.testing.storetest._log import LogCases
from tether.testing.storetest._machine import MachineCase, run_reference_machine
from tether.testing.storetest._memory_items import MemoryCases
from tether.testing.storetest._parking import ParkingCases
from tether.testing.storetest._priorities import PriorityCases
from tether.testing.storetest._schedules import ScheduleCases
from tether.testing.storetest._search import SessionSearchCases
from tether.testing.storetest._serving import ServingCases
from tether.testing.storetest._sessions import SessionListCases
from tether.testing.storetest._settling import SettlementCases
from tether.testing.storetest._snapshots import SnapshotCases
from tether.testing.storetest._submissions import SubmissionCases
from tether.testing.storetest._tenants import TenantCases
from tether.testing.storetest._timers import TimerCases
from tether.testing.storetest._tokens import TokenCases
from tether.testing.storetest._truncation import TruncationCases
from tether.testing.storetest._usage import UsageCases
from tether.testing.storetest._versions import VersionCases
from tether.testing.storetest._webhooks import WebhookCases

__all__ = (
    "CompleteStore",
    "CoreConformance",
    "Fixtures",
    "StoreConformance",
    "complete",
    "run_reference_machine",
)


class CoreConformance(
    SubmissionCases,
    ServingCases,
    PriorityCases,
    LogCases,
    SettlementCases,
    MachineCase,
    BaseConformance,
):
    """The core cases (:class:`tether.store.Store`) and the state machine: what every store
    passes. Implement :meth:`make_store`, and :meth:`tamper` and :meth:`truncate` if you can."""


class StoreConformance(
    AdmitAndClaimCases,  # admit_and_claim
    AttachmentCases,  # attachments
    SnapshotCases,  # snapshots
    ForkCases,  # forks
    ParkingCases,  # gates or children
    DecisionCases,  # gates
    GateCases,  # gates
    InputGateCases,  # gates
    BudgetGateCases,  # gates
    ChildCases,  # children
    SessionListCases,  # sessions
    SessionSearchCases,  # sessions
    ErasureCases,  # retention
    TruncationCases,  # retention
    ImportCases,  # import
    ScheduleCases,  # schedules
    VersionCases,  # versions
    TokenCases,  # tokens
    TimerCases,  # timers
    LimitCases,  # limits
    UsageCases,  # usage
    MemoryCases,  # memory
    WebhookCases,  # webhooks
    TenantCases,  # each case what its listing needs
    CoreConformance,
):
    """Every conformance case: the core's, and those of each capability, which run only on
    a store that offers it. Implement :meth:`make_store`, and :meth:`tamper` and
    :meth:`truncate` if you can."""

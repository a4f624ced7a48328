import pytest
from tests.engine.test_steering import test_steers_queued_before_a_run_is_claimed_are_looked_for_at_once as a
from tests.engine.test_approvals import test_parks_do_not_use_the_attempt_budget as b

@pytest.mark.parametrize("i", range(100))
async def test_rep_a(make_runtime, store, i):
    await a(make_runtime, store)

@pytest.mark.parametrize("i", range(100))
async def test_rep_b(make_runtime, store, i):
    await b(make_runtime, store)

"""``.venv/bin/python -m examples.triage``: see the runbook in ``examples/triage/__init__.py``."""

from examples.triage import main

main()

"""``.venv/bin/python -m examples.github_bot``; its runbook: ``examples/github_bot/__init__.py``."""

from examples.github_bot import main

main()

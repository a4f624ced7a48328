"""``python -m examples.github_bot``: see the runbook in ``examples/github_bot/__init__.py``."""

from examples.github_bot import main

main()

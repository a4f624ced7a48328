"""``.venv/bin/python -m examples.scheduler``."""

from examples.scheduler import main

main()

"""``.venv/bin/python -m examples.multitenant``."""

from examples.multitenant import main

main()

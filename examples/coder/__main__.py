"""``.venv/bin/python -m examples.coder``."""

from examples.coder import main

main()

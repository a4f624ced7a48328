"""``.venv/bin/python -m examples.chat``."""

from examples.chat import main

main()

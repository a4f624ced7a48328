"""``.venv/bin/python -m examples.basic``."""

from examples.basic import main

main()

"""``python -m tests.cli.peak_rss ARGS...``: the ``tether`` command with ``ARGS``, then the
process's peak resident set size in kB (``VmHWM``) as stderr's last line: how much memory a
command took, measured in the process that took it.

Not ``getrusage``: on Linux its ``ru_maxrss`` counts the parent's memory the child was
forked with, before it ran the interpreter; ``VmHWM`` belongs to the program run."""

import atexit
import sys
from pathlib import Path

from tether.cli import main


@atexit.register
def _report() -> None:
    status = Path("/proc/self/status").read_text()
    [peak] = [line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")]
    print(peak, file=sys.stderr)


if __name__ == "__main__":
    sys.argv[0] = "tether"
    main()

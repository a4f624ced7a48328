"""Kill a writing process at a random moment, knowing what it had acknowledged."""

import signal
import subprocess

__all__ = ("kill_after",)


def kill_after(command: list[str], acknowledgements: int) -> int:
    """Run ``command``, a worker that prints an integer once each of its writes returned, read
    ``acknowledgements`` of them, SIGKILL it, and return the highest it printed (those that
    reached the pipe before the kill included): what the store must still hold."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    printed = [0]
    for _ in range(acknowledgements):
        line = process.stdout.readline()
        assert line, "the worker stopped writing"
        printed.append(int(line))
    process.send_signal(signal.SIGKILL)
    rest, _ = process.communicate(timeout=30)
    return max(printed + [int(value) for value in rest.split()])

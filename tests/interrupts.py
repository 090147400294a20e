"""Child processes that a test interrupts with SIGINT, as a terminal's Ctrl-C would.

A process started in the background by a non-interactive shell (``make test &``, a CI runner)
inherits SIGINT *ignored*, its children too, and Python then never raises KeyboardInterrupt:
a test that sends SIGINT would wait for nothing. `python_interruptible` builds the command of a
Python child that restores SIGINT's default handler before it runs, whatever it inherited.
"""

from __future__ import annotations

import sys
from typing import Final

_RESTORE: Final = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "


def python_interruptible(
    *,
    module: str | None = None,
    code: str | None = None,
    args: tuple[str, ...] = (),
    flags: tuple[str, ...] = (),
) -> list[str]:
    """``python [flags] -m module args`` or ``python [flags] -c code args``, SIGINT restored."""
    if (module is None) == (code is None):
        raise ValueError("give one of module and code")
    if module is not None:
        body = (
            "import runpy, sys; sys.argv = [" + repr(module) + ", *sys.argv[1:]]; "
            "runpy.run_module(" + repr(module) + ", run_name='__main__', alter_sys=True)"
        )
    else:
        assert code is not None
        body = "exec(compile(" + repr(code) + ", '<test>', 'exec'))"
    return [sys.executable, *flags, "-c", _RESTORE + body, *args]

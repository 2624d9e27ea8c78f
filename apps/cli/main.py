"""The `dsh` console script (docs/cli.md): imports the commands, then runs the command line.

The commands' modules (typer, pydantic, the framework, the session store) are imported with the
cyclic garbage collector paused and are then frozen: they live as long as the process, so no
collection walks them again, neither while the command runs nor the interpreter's last one at
exit, which also skips whatever the command leaves (docs/performance.md, "Start-up (P11)").
"""

import atexit
import gc


def main() -> None:
    """Console-script entry point: import `apps.cli.commands` as above and run it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        from .commands import dispatch
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
    atexit.register(gc.freeze)
    dispatch()


if __name__ == "__main__":
    main()

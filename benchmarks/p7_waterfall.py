"""P7: `ctx.waterfall` through 5 middleware layers vs pluggy with 5 hook wrappers, same work.

Each layer calls the next one and adds 1 to its result; the innermost returns the payload.
Samples alternate between the two cases in one run; the figure is the ratio of medians.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pluggy

from benchmarks.harness import alternate, report, row
from framework import Context

LAYERS = 5
CALLS = 1000
ROUNDS = 300

hookspec = pluggy.HookspecMarker("p7")
hookimpl = pluggy.HookimplMarker("p7")


class Spec:
    @hookspec(firstresult=True)
    def compute(self, payload: int) -> int:  # type: ignore[empty-body]
        """The hook both cases implement."""


class Wrapper:
    @hookimpl(wrapper=True)
    def compute(self, payload: int) -> Any:
        result = yield
        return result + 1


class Inner:
    @hookimpl
    def compute(self, payload: int) -> int:
        return payload


def pluggy_case() -> Callable[[], object]:
    pm = pluggy.PluginManager("p7")
    pm.add_hookspecs(Spec)
    pm.register(Inner())
    for _ in range(LAYERS):
        pm.register(Wrapper())
    hook = pm.hook.compute

    def run() -> object:
        for i in range(CALLS):
            hook(payload=i)
        return None

    return run


def middleware(payload: int, nxt: Callable[[], int]) -> int:
    return nxt() + 1


def framework_case(ctx: Context) -> Callable[[], object]:
    for _ in range(LAYERS):
        ctx.on("compute", middleware)
    waterfall = ctx.waterfall

    def run() -> object:
        for i in range(CALLS):

            def inner(i: int = i) -> int:
                return i

            waterfall("compute", i, inner=inner)
        return None

    return run


async def measure() -> None:
    async with Context() as ctx:
        fw, pg = framework_case(ctx), pluggy_case()
        assert ctx.waterfall("compute", 1, inner=lambda: 1) == 1 + LAYERS
        series = alternate({"framework waterfall": fw, "pluggy hookwrappers": pg}, ROUNDS)
    base = series["pluggy hookwrappers"]
    ours = series["framework waterfall"]
    rows = [row(base), row(ours, base, note=f"target <= 1.0x pluggy ({CALLS} calls/sample)")]
    report(
        "p7_waterfall",
        f"waterfall through {LAYERS} middleware layers vs pluggy with {LAYERS} hook wrappers",
        rows,
        {"ratio": ours.median / base.median},
    )
    print(f"median ratio framework/pluggy: {ours.median / base.median:.2f}x")


def main() -> None:
    anyio.run(measure)


if __name__ == "__main__":
    main()

"""How a multi-line or grouped failure becomes the one line `dsh` prints."""

from __future__ import annotations

import errno

from apps.cli.errors import describe, error_code, one_line
from framework import BootError


def test_one_line_joins_items_and_nested_titles_without_stray_punctuation() -> None:
    text = (
        "failed to boot app.yml: 2 entries did not start\n"
        "  a (./a.py): invalid config for entry a (app.yml:4):\n"
        "    - Input should be a valid integer (at port)\n"
        "    - Extra inputs are not permitted (at colour)\n"
        "  b (dsh-agent): waiting for services: llm"
    )
    assert one_line(text) == (
        "failed to boot app.yml: 2 entries did not start: a (./a.py): invalid config for entry a "
        "(app.yml:4): Input should be a valid integer (at port); Extra inputs are not permitted "
        "(at colour); b (dsh-agent): waiting for services: llm"
    )
    assert ":;" not in one_line(text)
    assert one_line("head:\n- x\n- y") == "head: x; y"
    assert one_line("just one") == "just one"


def test_describe_names_each_member_of_an_exception_group_once() -> None:
    full = OSError(errno.ENOSPC, "No space left on device")
    group = ExceptionGroup("failed to roll back append", [full, OSError(*full.args)])
    assert describe(group) == "failed to roll back append: [Errno 28] No space left on device"
    assert describe(ExceptionGroup("outer", [group])) == describe(group)


def test_error_codes_come_from_the_error_or_its_type() -> None:
    assert error_code(BootError("x")) == "BOOT_FAILED"
    assert error_code(OSError(errno.EIO, "Input/output error")) == "STORAGE_FAILED"
    coded = RuntimeError("locked")
    coded.code = "SESSION_LOCKED_ELSEWHERE"  # type: ignore[attr-defined]
    assert error_code(coded) == "SESSION_LOCKED_ELSEWHERE"
    assert error_code(ValueError("x")) == "FAILED"

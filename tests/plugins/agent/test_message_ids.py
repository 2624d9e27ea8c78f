"""Message ids: random version-4 UUIDs written like `str(uuid.uuid4())`."""

from __future__ import annotations

import os
import uuid

from plugins.agent.messages import assistant_message, new_id, tool_result_message, user_message


def test_ids_are_version_4_uuids_in_their_canonical_text() -> None:
    for _ in range(600):  # more than one batch of random bytes
        text = new_id()
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_ids_are_unique_and_every_builder_uses_them() -> None:
    ids = {new_id() for _ in range(2000)}
    ids |= {
        user_message("hi")["id"],
        assistant_message([], "p", "m")["id"],
        tool_result_message("c", [], False)["id"],
    }
    assert len(ids) == 2003
    for text in ids:
        assert uuid.UUID(text).version == 4


def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    new_id()  # the parent holds unused random bytes now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        os.write(write, ",".join(new_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split(",")
    os.waitpid(pid, 0)
    parent = [new_id() for _ in range(3)]
    assert len(child) == 3
    assert not set(child) & set(parent)

"""docs/python.md runs as written: its Python blocks, in order, in one session.

As a reader pastes them into one interpreter, each block runs in the namespace
the blocks before it left, in a fresh directory holding the checkout's data/.
A block after `<!-- docs-test: skip REASON -->` is shown but not run (a Ray
cluster of several machines, an S3 endpoint); the reasons are printed.
The shell blocks of the same page run in crates/hearth/tests/docs_commands.rs.
"""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "python.md"
FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"^<!-- docs-test: skip (.+) -->$")


def python_blocks(text):
    """(line, skip reason or None, code) for each ```python block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if m.group(1) == "python":
            skip = SKIP.match(lines[i - 1].strip()) if i > 0 else None
            yield i + 2, skip.group(1) if skip else None, "\n".join(lines[i + 1 : end]) + "\n"
        i = end + 1


def test_the_blocks_are_found():
    blocks = list(python_blocks(PAGE.read_text()))
    assert len(blocks) >= 8, blocks
    assert any(skip is None for _, skip, _ in blocks)


def test_every_python_block_of_python_md_runs(tmp_path, monkeypatch):
    pytest.importorskip("pandas")
    (tmp_path / "data").symlink_to(ROOT / "data")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    ran = 0
    for line, skip, code in python_blocks(PAGE.read_text()):
        if skip:
            print(f"skipped python.md:{line}: {skip}")
            continue
        try:
            exec(compile(code, f"docs/python.md:{line}", "exec"), namespace)
        except Exception as e:  # name the block, as the reader would find it
            raise AssertionError(f"docs/python.md:{line} failed: {type(e).__name__}: {e}\n{code}") from e
        ran += 1
    print(f"ran {ran} Python blocks of docs/python.md")
    assert ran >= 7
    assert os.path.exists("mrc.png"), "the plotting block writes mrc.png"

"""Errors are Python exceptions carrying the command line's text."""

from __future__ import annotations

import pytest

import hearth
from conftest import cli, cli_error


def test_missing_trace_is_an_oserror_with_the_cli_text(tmp_path, hearth_bin):
    missing = tmp_path / "nope.oracleGeneral.bin"
    want = cli_error(hearth_bin, "sim", str(missing), "-p", "lru", "-s", "1MiB")
    with pytest.raises(OSError) as e:
        hearth.sim(missing, "lru", "1MiB")
    assert isinstance(e.value, hearth.TraceIOError)
    # The CLI prints anyhow's chain of causes, so it repeats the OS error after the text.
    assert want == str(e.value) or want.startswith(str(e.value) + ": ")
    assert str(e.value).startswith(f"{missing}: ") and "No such file or directory" in str(e.value)
    assert str(missing) in want and e.value.file == str(missing) and e.value.errno == 2


def test_malformed_text_trace_names_file_and_line(tmp_path, hearth_bin):
    bad = tmp_path / "ids.txt"
    bad.write_text("1\n2\n3\nnot-a-number\n5\n")
    want = cli_error(hearth_bin, "sim", str(bad), "-p", "lru", "-s", "2")
    with pytest.raises(ValueError) as e:
        hearth.sim(bad, "lru", 2)
    assert isinstance(e.value, hearth.TraceError)
    assert str(e.value) == want
    assert want.startswith(f"{bad}:4: ") and e.value.line == 4


def test_truncated_binary_trace_names_the_byte(oracle, tmp_path, hearth_bin):
    cut = tmp_path / "cut.oracleGeneral.bin"
    cut.write_bytes(oracle.read_bytes()[: 24 * 1000 + 10])
    want = cli_error(hearth_bin, "sim", str(cut), "-p", "lru", "-s", "1MiB")
    with pytest.raises(hearth.TraceError) as e:
        hearth.sim(cut, "lru", "1MiB")
    assert str(e.value) == want and "byte 24000" in want and e.value.byte_offset == 24000


def test_unknown_format_and_bad_arguments(tmp_path, oracle, hearth_bin):
    blob = tmp_path / "trace.dat"
    blob.write_text("x\n")
    want = cli_error(hearth_bin, "sim", str(blob), "-p", "lru", "-s", "1MiB")
    with pytest.raises(hearth.TraceError) as e:
        hearth.sim(blob, "lru", "1MiB")
    assert str(e.value) == want

    # The command line refuses the option's value as it parses it (clap's
    # usage error), with the same text after naming the option.
    p = cli(hearth_bin, "sim", str(oracle), "-p", "lru,nope", "-s", "1MiB")
    with pytest.raises(hearth.ConfigError) as e:
        hearth.sim(oracle, ["lru", "nope"], "1MiB")
    assert p.returncode == 2 and f"'--policies <POLICIES>': {e.value}\n" in p.stderr, p.stderr
    assert str(e.value).startswith('unknown policy "nope"') and isinstance(e.value, ValueError)

    with pytest.raises(hearth.ConfigError, match="bad percentage"):
        hearth.sim(oracle, "lru", "x%")
    with pytest.raises(hearth.ConfigError, match="object trace"):
        hearth.sim(oracle, "lru", "1MiB", mode="block")
    with pytest.raises(ValueError, match="mode must be"):
        hearth.sim(oracle, "lru", "1MiB", mode="blocks")

"""Traces by fsspec URL, over HTTP (Python's http.server) and S3 (moto's
server), read by whoever runs the task: the same rows as the local files."""

from __future__ import annotations

import pytest

import hearth

POLICIES = ["lru", "arc", "s3fifo"]
SIZES = "1%,10%,4MiB"


def same_rows(got, want, urls) -> None:
    assert got.drop(columns="trace").equals(want.drop(columns="trace"))
    names = {str(p): u for p, u in zip(want.trace.unique(), urls)}
    assert got.trace.tolist() == [names[t] for t in want.trace]


@pytest.fixture(scope="module")
def local(url_traces):
    return hearth.sweep(url_traces, POLICIES, SIZES, engine="local", progress=False)


def test_sweep_over_http_equals_the_local_files(url_traces, http_server, local):
    urls = [f"{http_server.url}/{p.name}" for p in url_traces]
    before = {p.name: http_server.gets(p.name) for p in url_traces}
    got = hearth.sweep(urls, POLICIES, SIZES, engine="local", workers=2, progress=False)
    same_rows(got, local, urls)
    # Each task downloaded its trace itself: one GET per (trace, policy).
    assert {p.name: http_server.gets(p.name) - before[p.name] for p in url_traces} == {
        p.name: len(POLICIES) for p in url_traces
    }


def test_sweep_over_s3_equals_the_local_files(url_traces, s3_server, local, monkeypatch):
    for k, v in s3_server.env.items():
        monkeypatch.setenv(k, v)
    urls = s3_server.upload("traces", url_traces)
    got = hearth.sweep(urls, POLICIES, SIZES, engine="local", workers=2, progress=False)
    same_rows(got, local, urls)


def test_a_missing_url_is_an_os_error(http_server):
    with pytest.raises(OSError):
        hearth.sim(f"{http_server.url}/nope.oracleGeneral.bin", "lru", "1MiB")


def test_the_memory_hint_reads_a_urls_size_not_its_data(url_traces, http_server):
    url = f"{http_server.url}/{url_traces[0].name}"
    before = http_server.gets(url_traces[0].name)
    assert hearth.memory_hint((0, 0, url, "lru", SIZES)) == hearth.memory_hint((0, 0, str(url_traces[0]), "lru", SIZES))
    assert http_server.gets(url_traces[0].name) == before

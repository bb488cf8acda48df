"""The peer for `hearth bench sim`: times libCacheSim's own C replay loop
(`process_trace` with its C trace reader) on the same trace, policies and
cache size, and prints {policy: {"req_per_s": ..., "miss_ratio": ...}} as JSON.

Usage: python3 libcachesim_peer.py TRACE TYPE CACHE_BYTES REPEAT POLICY...
TYPE is a libcachesim TraceType name such as ORACLE_GENERAL_TRACE.
"""
import json
import sys
import time

import libcachesim as lcs

CLASSES = {"lru": lcs.LRU, "fifo": lcs.FIFO, "arc": lcs.ARC, "mq": lcs.MQ, "lirs": lcs.LIRS,
           "clock": lcs.Clock, "lfu": lcs.LFU, "2q": lcs.TwoQ, "slru": lcs.SLRU, "opt": lcs.Belady,
           "s3fifo": lcs.S3FIFO, "sieve": lcs.Sieve, "wtinylfu": lcs.WTinyLFU, "lruk": lcs.LRUK,
           "gdsf": lcs.GDSF, "lfuda": lcs.LFUDA, "random": lcs.Random, "hyperbolic": lcs.Hyperbolic,
           "lecar": lcs.LeCaR, "cacheus": lcs.Cacheus, "lhd": lcs.LHD, "clockpro": lcs.ClockPro,
           "clock2qplus": lcs.Clock2QPlus, "beladysize": lcs.BeladySize}


def main():
    path, trace_type, cache_bytes, repeat, *policies = sys.argv[1:]
    trace_type = getattr(lcs.TraceType, trace_type)
    out = {}
    for name in policies:
        best, miss = float("inf"), None
        for _ in range(int(repeat)):
            reader = lcs.TraceReader(path, trace_type)
            n = reader.get_num_of_req()
            # A hash table sized to the trace (2^18 buckets), not libCacheSim's
            # default 2^24, whose set-up would dominate a short trace's time.
            cache = CLASSES[name](int(cache_bytes), hashpower=18)
            start = time.perf_counter()
            miss, _byte_miss = cache.process_trace(reader)
            best = min(best, time.perf_counter() - start)
        out[name] = {"seconds": best, "requests": n, "miss_ratio": miss}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Miss counts of libCacheSim's policies on an oracleGeneral trace, as JSON.

Usage: libcachesim_reference.py TRACE SIZES POLICIES
       libcachesim_reference.py --one TRACE SIZE SPEC   (one miss count)
  TRACE     path to a .oracleGeneral.bin trace (24-byte records)
  SIZES     comma-separated cache sizes in bytes
  POLICIES  semicolon-separated Hearth policy specs (the keys of CLASSES or
            LOW_LEVEL; a spec's parameters are separated by commas)

Prints {"requests": N, "misses": {"lru": {"134217728": 93374, ...}, ...}}.
Exits with status 3 when the libcachesim package cannot be imported, so the
Rust test can tell "not installed" from a real failure.

Caches use libCacheSim's defaults (no object metadata, default parameters).

A spec may end in an admission policy, `POLICY+ADMISSION[:key=value,...]`
(the keys of ADMISSIONERS), passed as libcachesim's `admissioner=`. The
random admissioners draw from libCacheSim's thread-local generator, which
starts at 0xdeadbeef in a fresh process and carries over from one cache to
the next, so each run of one of them gets a fresh interpreter (`--one`).
"""

import json
import subprocess
import sys

NOT_INSTALLED = 3

# Hearth policy spec -> libcachesim class name, or (class name, {keyword: value})
# for a parameterised counterpart.
CLASSES = {
    "lru": "LRU",
    "fifo": "FIFO",
    "clock": "Clock",
    "lfu": "LFU",
    "arc": "ARC",
    "slru": "SLRU",
    "lirs": "LIRS",
    "opt": "Belady",
    "s3fifo": "S3FIFO",
    "sieve": "Sieve",
    "lruk": "LRUK",
    "gdsf": "GDSF",
    "random": "Random",
    "hyperbolic": "Hyperbolic",
    "lecar": "LeCaR",
    "cacheus": "Cacheus",
    "lhd": "LHD",
    "clockpro": "ClockPro",
    "clock2qplus": "Clock2QPlus",
    # Hearth's libCacheSim-compatible parameterisations of 2Q, MQ and LFU-DA.
    "2q:sizing=bytes": "TwoQ",
    "lfuda:formula=additive": "LFUDA",
    "mq:lifetime=10000,history=bytes": "MQ",
    # ... and Hearth's own, compared to show the difference.
    "2q": "TwoQ",
    "lfuda": "LFUDA",
    "mq": "MQ",
    # Without a correlation window, where the two windows' units agree.
    "clock2qplus:window=0": ("Clock2QPlus", {"corr_window_ratio": 0.0}),
    "beladysize": "BeladySize",
    "lruprob": "LRUProb",
    "size": "Size",
    "lruprob:prob=0.3": ("LRUProb", {"prob": 0.3}),
    # libCacheSim's counting, which Hearth's default sketch does not follow.
    "wtinylfu:freq=exact": "WTinyLFU",
    # libCacheSim's batch, with which neither tool trains on the bundled trace.
    "3lcache:batch=65536": "ThreeLCache",
}

# Hearth policy spec -> (the package's low-level init function, libCacheSim's
# parameter string) for policies it builds but wraps in no class.
LOW_LEVEL = {
    "fifomerge": ("FIFO_Merge_init", ""),
    "fifomerge:retain=recency": ("FIFO_Merge_init", "retain-policy=recency"),
    "s3fifod": ("S3FIFOd_init", ""),
}


# Hearth admission name -> (libcachesim class, {hearth param: libcachesim keyword}).
ADMISSIONERS = {
    "tinylfu": ("BloomFilterAdmissioner", {}),
    "bloom": ("BloomFilterAdmissioner", {}),
    "size": ("SizeAdmissioner", {"max": "size_threshold"}),
    "prob": ("ProbAdmissioner", {"p": "prob"}),
    "sizeprob": ("SizeProbabilisticAdmissioner", {"exponent": "exponent"}),
    "adaptsize": ("AdaptSizeAdmissioner", {"iterations": "max_iteration", "interval": "reconf_interval"}),
}
RANDOM_ADMISSIONERS = {"prob", "sizeprob", "adaptsize"}
# Policies that draw from the same generator: also run in a fresh interpreter.
RANDOM_POLICIES = {"lruprob", "random", "hyperbolic", "lecar", "cacheus", "lhd", "beladysize", "fifomerge"}


def split_spec(spec):
    """('lru', 'prob', {'p': '0.5'}) for 'lru+prob:p=0.5'; admission None without '+'."""
    policy, _, admission = spec.partition("+")
    if not admission:
        return policy, None, {}
    name, _, rest = admission.partition(":")
    params = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
    return policy, name, params


def run_one(lcs, reader, spec, size):
    policy, admission, params = split_spec(spec)
    if policy in LOW_LEVEL and admission is None:
        from libcachesim import libcachesim_python as low

        init, params = LOW_LEVEL[policy]
        cache = lcs.CacheBase(_cache=getattr(low, init)(low.CommonCacheParams(cache_size=int(size)), params))
        miss_ratio, _byte_miss_ratio = cache.process_trace(reader)
        return round(miss_ratio * reader.get_num_of_req())
    if policy not in CLASSES:
        sys.exit(f"no libcachesim counterpart for policy {policy!r} (known: {', '.join(CLASSES)})")
    kwargs = {}
    if admission is not None:
        if admission not in ADMISSIONERS:
            sys.exit(f"no libcachesim counterpart for admission {admission!r} (known: {', '.join(ADMISSIONERS)})")
        cls_name, keys = ADMISSIONERS[admission]
        args = {}
        for k, v in params.items():
            if k not in keys:
                sys.exit(f"admission {admission}: parameter {k!r} has no libcachesim counterpart")
            args[keys[k]] = float(v) if k in ("p", "exponent") else int(v)
        kwargs["admissioner"] = getattr(lcs, cls_name)(**args)
    cls_name, params = CLASSES[policy] if isinstance(CLASSES[policy], tuple) else (CLASSES[policy], {})
    cache = getattr(lcs, cls_name)(int(size), **params, **kwargs)
    miss_ratio, _byte_miss_ratio = cache.process_trace(reader)
    # process_trace reports a ratio over all requests; recover the count.
    return round(miss_ratio * reader.get_num_of_req())


def main(argv):
    if len(argv) == 5 and argv[1] == "--one":
        import libcachesim as lcs

        reader = lcs.TraceReader(argv[2], lcs.TraceType.ORACLE_GENERAL_TRACE)
        print(run_one(lcs, reader, argv[4], argv[3]))
        return
    if len(argv) != 4:
        sys.exit(f"usage: {argv[0]} TRACE SIZES POLICIES")
    try:
        import libcachesim as lcs
    except ImportError as e:
        print(f"libcachesim not installed: {e}", file=sys.stderr)
        sys.exit(NOT_INSTALLED)

    trace, sizes, policies = argv[1], argv[2].split(","), argv[3].split(";")
    reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
    requests = reader.get_num_of_req()
    misses = {}
    for name in policies:
        misses[name] = {}
        fresh = split_spec(name)[1] in RANDOM_ADMISSIONERS or split_spec(name)[0].split(":")[0] in RANDOM_POLICIES
        for size in sizes:
            if fresh:
                out = subprocess.run(
                    [sys.executable, argv[0], "--one", trace, size, name],
                    check=True,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                ).stdout
                misses[name][size] = int(out.strip().splitlines()[-1])
            else:
                misses[name][size] = run_one(lcs, reader, name, size)
    json.dump({"requests": requests, "misses": misses}, sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python3
"""C1 and dict figures of the Python module (python/shmobj.py).

    python3 bench/python-c1.py [--quick] [SUBJECT...]

C1 (doc/benchmarks.md): 3,000 shared records of 11 fields; a second
process adds 1 to the 9 numeric fields of every record, pass after pass,
for about 1 s (0.2 s with --quick); the first reads every value back and
counts lost increments. Subjects:

  python-view    each field a view made once; view.add(1)
  python-field   fixed dicts; rec.add_at(name, 1), keys prepared once
  python-shape   records of one shape; rec.add_at(name, 1)

Dict figures (one process): a mutable dict of 10,000 string keys,
`d[key] = i` (python-mdict set) and `d[key].value` (python-mdict get);
the shared map's `m[key] = value` and `m.get(key)` (python-map).

Prints "BENCH <workload> <subject> <metric> <value>" lines, as the C
programs of bench/ do. Needs the library (SHMOBJ_LIBRARY) and the module
(PYTHONPATH=python) as tests/test-python.py does.
"""
import os
import subprocess
import sys
import time

import shmobj

RECORDS, FIELDS = 3000, 9
NAMES = ["id", "health", "mana", "pos_x", "pos_y", "pos_z", "rot_x", "rot_y", "rot_z"]
COUNTERS = RECORDS * FIELDS


def init(r, f):
    return r if f == 0 else r * 100 + f * 10


def expect(k, total):
    return init(k // FIELDS, k % FIELDS) + total // COUNTERS + (1 if k < total % COUNTERS else 0)


def record(r):
    d = {n: init(r, f) for f, n in enumerate(NAMES)}
    d["name"] = "player-%d" % r
    d["inventory"] = [r, r + 1]
    return d


def build(seg, subject):
    if subject == "python-shape":
        shape = seg.shape([(n, int) for n in NAMES] + [("name", str, 16),
                                                        ("inventory", None)])
        recs = [shmobj.Record(shape, record(r)) for r in range(RECORDS)]
    else:
        recs = [record(r) for r in range(RECORDS)]
    seg.put(recs, root="c1")


def incrementer(name, subject, seconds):
    """The second process: returns (increments, seconds)."""
    with shmobj.Segment(name) as seg:
        recs = list(seg.get("c1"))
        total = 0
        if subject == "python-view":
            views = [[rec[n] for n in NAMES] for rec in recs]
            t0 = time.perf_counter()
            end = t0 + seconds
            while True:
                for fields in views:
                    for v in fields:
                        v.add(1)
                total += COUNTERS
                now = time.perf_counter()
                if now >= end:
                    break
        else:
            t0 = time.perf_counter()
            end = t0 + seconds
            while True:
                for rec in recs:
                    add = rec.add_at
                    for n in NAMES:
                        add(n, 1)
                total += COUNTERS
                now = time.perf_counter()
                if now >= end:
                    break
        return total, now - t0


def c1(subject, seconds):
    name = "shmobj-bench-py-%d" % os.getpid()
    with shmobj.Segment.create(name, size=32 << 20, replace=True) as seg:
        try:
            build(seg, subject)
            p = subprocess.run([sys.executable, __file__, "--child", name, subject,
                                str(seconds)], capture_output=True, text=True, check=True)
            total, secs = p.stdout.split()
            total, secs = int(total), float(secs)
            lost = 0
            for r, rec in enumerate(seg.get("c1")):
                for f, n in enumerate(NAMES):
                    if rec[n].value != expect(r * FIELDS + f, total):
                        lost += 1
        finally:
            shmobj.Segment.destroy(name)
    print("BENCH C1 %s Mincr/s %.4g" % (subject, total / secs / 1e6))
    print("BENCH C1 %s lost-increments %d" % (subject, lost))
    sys.stdout.flush()


def timed(fn, n):
    t0 = time.perf_counter()
    fn(n)
    return n / (time.perf_counter() - t0) / 1e6


def dicts(quick):
    name = "shmobj-bench-py-%d" % os.getpid()
    keys = ["key-%06d" % i for i in range(10000)]
    n = len(keys) * (3 if quick else 20)
    with shmobj.Segment.create(name, size=64 << 20, replace=True) as seg:
        try:
            d = seg.get(seg.put(shmobj.MDict()))

            def dset(n):
                for i in range(n):
                    d[keys[i % 10000]] = i

            def dget(n):
                for i in range(n):
                    d[keys[i % 10000]].value
            m = seg.map("m", create=True)
            bkeys = [k.encode() for k in keys]

            def mset(n):
                for i in range(n):
                    m[bkeys[i % 10000]] = b"12345678"

            def mget(n):
                get = m.get
                for i in range(n):
                    get(bkeys[i % 10000])
            for label, fn in [("python-mdict set", dset), ("python-mdict get", dget),
                              ("python-map set", mset), ("python-map get", mget)]:
                subject, op = label.split()
                print("BENCH D-%s %s Mops/s %.4g" % (op, subject, timed(fn, n)))
                sys.stdout.flush()
            m.close()
        finally:
            shmobj.Segment.destroy(name)


def main(argv):
    if argv[:1] == ["--child"]:
        total, secs = incrementer(argv[1], argv[2], float(argv[3]))
        print(total, secs)
        return
    quick = "--quick" in argv
    argv = [a for a in argv if a != "--quick"]
    subjects = argv or ["python-view", "python-field", "python-shape", "dict"]
    for s in subjects:
        if s == "dict":
            dicts(quick)
        else:
            c1(s, 0.2 if quick else 1.0)


if __name__ == "__main__":
    main(sys.argv[1:])

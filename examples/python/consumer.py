#!/usr/bin/env python3
"""The consumer of examples/completion.c, in Python: B starts first.

    python3 consumer.py SEGMENT_NAME COUNT

Waits (asleep) up to 10 s for the segment, then for the queue "jobs", then
for each job: a dict {"n": N, "square": -1, ...} that the C producer put
tracked. Writes N * N into "square" in place and marks the job done, which
wakes the producer (it checks the answer and frees the object). Counts the
jobs in the shared map "stats", made by whichever process comes first."""
import sys

import shmobj

WAIT_NS = 10 * 10**9

name, count = sys.argv[1], int(sys.argv[2])
with shmobj.Segment(name, timeout_ns=WAIT_NS) as seg, \
        shmobj.Queue(seg, "jobs", timeout_ns=WAIT_NS) as jobs, \
        shmobj.Map(seg, "stats", create=True) as stats:
    for _ in range(count):
        ref = jobs.take(WAIT_NS)
        if ref is None:
            sys.exit("python: no job came in %d s" % (WAIT_NS // 10**9))
        job = seg.get(ref)  # read in place, no copy
        n = job["n"].get()
        job["square"].set(n * n)
        jobs.done(ref)  # the producer's now: do not touch the job again
        answered = stats.add("answered", 1)
    print("python: answered %d jobs (stats says %d)" % (count, answered))

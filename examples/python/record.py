#!/usr/bin/env python3
"""Read and update, in place, a record a C process made (record-peer.c).

    python3 record.py SEGMENT_NAME

Opens the segment (waiting up to 5 s for it), waits for the root "record",
prints the record, adds 1 to its "reads" counter atomically and sets its
temperature: the C process sees both at once, without a copy."""
import sys

import shmobj

WAIT_NS = 5 * 10**9

with shmobj.Segment(sys.argv[1], timeout_ns=WAIT_NS) as seg:
    rec = seg.get(seg.root("record", timeout_ns=WAIT_NS))
    print("python: read", rec.to_python())
    low, high = rec["limits"][0].get(), rec["limits"][-1].get()
    before = rec["reads"].add(1)
    rec["temperature"].set(22.25)
    print("python: %s reads %d -> %d, limits %d..%d, temperature now %.2f"
          % (rec["sensor"].get(), before, rec["reads"].get(), low, high,
             rec["temperature"].get()))
    try:
        rec["reads"].set("many")  # a slot keeps its kind
    except shmobj.Error as e:
        print("python: an int slot takes only an int:", e.name)

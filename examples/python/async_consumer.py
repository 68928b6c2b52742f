#!/usr/bin/env python3
"""A queue consumer inside an asyncio loop: it awaits messages instead of
blocking the loop.

    python3 async_consumer.py SEGMENT_NAME COUNT

Waits up to 10 s for the segment, opens (or creates) the queue "jobs" and
takes COUNT messages, each a value {"n": N} that a producer put with
Queue.put_value() (the consumer owns it and frees it). Between messages
the coroutine awaits the queue's descriptor: loop.add_reader() wakes it
when a producer puts, so other tasks (here a ticker) keep running.
Prints the sum of the N taken."""
import asyncio
import sys

import shmobj

WAIT_NS = 10 * 10**9


async def readable(loop, fd, timeout):
    """Wait until fd is readable (or timeout seconds pass)."""
    ready = loop.create_future()
    loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await asyncio.wait_for(ready, timeout)
    except asyncio.TimeoutError:
        pass  # look anyway: a producer that died half-way wakes nobody
    finally:
        loop.remove_reader(fd)


async def take(queue):
    """The next message: take at once when one waits, else arm the
    descriptor and await it (arm makes it readable at once when a message
    came in between, so no wake-up is missed)."""
    loop = asyncio.get_running_loop()
    fd = queue.fileno()
    while True:
        ref = queue.take(0)
        if ref is not None:
            return ref
        queue.arm()
        ref = queue.take(0)
        if ref is not None:
            return ref
        await readable(loop, fd, 0.1)


async def ticker(counter):
    while True:
        await asyncio.sleep(0.001)
        counter[0] += 1


async def main(name, count):
    with shmobj.Segment(name, timeout_ns=WAIT_NS) as seg, \
            shmobj.Queue(seg, "jobs", create=True) as jobs:
        ticks = [0]
        tick = asyncio.create_task(ticker(ticks))
        total = 0
        for _ in range(count):
            ref = await asyncio.wait_for(take(jobs), WAIT_NS / 1e9)
            job = seg.get(ref)
            total += job["n"].value
            seg.free(ref)  # put untracked: the consumer owns it
        tick.cancel()
        print("python: took %d jobs, sum %d; the loop ran other tasks meanwhile"
              " (%d ticks)" % (count, total, ticks[0]))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))

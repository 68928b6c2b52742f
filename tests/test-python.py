#!/usr/bin/env python3
"""Tests of the Python module (python/shmobj.py) against a built library.

    SHMOBJ_LIBRARY=build/libshmobj.so PYTHONPATH=python python3 tests/test-python.py

Every value kind round trip, views as Python containers, mutable
containers, atomic adds from several processes, buffers shown to numpy
without a copy and written from a second process, queues and completion
with a second process, the shared map, tables (rows appended from bytes,
fields added to from several processes, columns shown to numpy in place),
topics (fan-out, history for a late joiner), services served by a forked
child (the answer, EPEERDEAD when it dies holding the request), watches
woken by a child's map set, wait-sets, errors, the asyncio example, and
every order of closing a segment and dropping its views, queues, maps and
exported arrays (in child interpreters, so that a crash fails a test and
not the runner). numpy parts are skipped only when numpy is missing, which
fails under CI (CI set in the environment).
"""
import array
import gc
import json
import os
import struct
import subprocess
import sys
import textwrap
import time
import unittest

import shmobj

try:
    import numpy
except ImportError:
    numpy = None
    if os.environ.get("CI"):
        sys.exit("test-python: numpy is missing, and CI must test it "
                 "(install python3-numpy)")

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
WAIT_NS = 10 * 10**9
_count = [0]


def seg_name():
    _count[0] += 1
    return "shmobj-pytest-%d-%d" % (os.getpid(), _count[0])


def run_python(code, *args, timeout=60):
    """Run code in a child interpreter with this one's environment; returns
    (returncode, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class SegmentCase(unittest.TestCase):
    def setUp(self):
        self.name = seg_name()
        self.seg = shmobj.Segment.create(self.name, size=4 << 20)

    def tearDown(self):
        self.seg.close()
        try:
            shmobj.Segment.destroy(self.name)
        except shmobj.Error:
            pass

    def roundtrip(self, value, expect=None):
        ref = self.seg.put(value)
        got = self.seg.get(ref).to_python()
        self.assertEqual(got, value if expect is None else expect)
        return ref


class TestTypes(SegmentCase):
    def test_types_scalar_round_trip(self):
        for v in [None, True, False, 0, 1, -1, (1 << 63) - 1, -(1 << 63), 1 << 63,
                  (1 << 64) - 1, 0.0, -2.5, 1e300, "", "text", "héllo ✓", b"",
                  b"\x00\xffbytes", bytearray(b"ba")]:
            with self.subTest(v=v):
                self.roundtrip(v, bytes(v) if isinstance(v, bytearray) else v)
        self.assertEqual(self.seg.get(self.seg.put(1 << 63)).type, shmobj.UINT)
        self.assertEqual(self.seg.get(self.seg.put(5)).type, shmobj.INT)

    def test_types_container_round_trip(self):
        self.roundtrip([1, "a", None, 2.5, b"b", True])
        self.roundtrip((1, (2, (3,))))
        self.roundtrip([])
        self.roundtrip({})
        self.roundtrip({"s": 1, 7: "int key", b"k": [1, 2]})
        self.roundtrip({1, "two", b"3"}, frozenset({1, "two", b"3"}))
        self.roundtrip(frozenset({5}), frozenset({5}))
        nested = {"a": [{"b": (1, 2, {"c": {3, 4}})}], "d": {"e": {"f": None}}}
        self.roundtrip(nested, {"a": [{"b": (1, 2, {"c": frozenset({3, 4})})}],
                                "d": {"e": {"f": None}}})

    def test_types_struct_record_link_round_trip(self):
        named = self.seg.get(self.seg.put(shmobj.Struct([1, "x"], ["id", "name"])))
        self.assertEqual(named.type, shmobj.STRUCT)
        self.assertEqual(named.to_python(), {"id": 1, "name": "x"})
        bare = self.seg.get(self.seg.put(shmobj.Struct([1, 2.5]))).to_python()
        self.assertIsInstance(bare, shmobj.Struct)
        self.assertEqual(bare.values, [1, 2.5])
        shape = self.seg.shape([("id", int), ("name", str, 16), ("x", float),
                                ("ok", bool), ("raw", bytes), ("any", None)])
        rec = self.seg.get(self.seg.put(shmobj.Record(shape, {
            "id": 3, "name": "n", "x": 1.5, "ok": True, "raw": b"r", "any": [1, 2]})))
        self.assertEqual(rec.type, shmobj.RECORD)
        self.assertEqual(rec.to_python(), {"id": 3, "name": "n", "x": 1.5, "ok": True,
                                           "raw": b"r", "any": [1, 2]})
        self.assertEqual(list(rec), shape.names)
        rec["id"].add(4)
        self.assertEqual(rec.add_at("id", 1), 7)
        self.assertEqual(rec.add_at(0, 1), 8)
        self.assertEqual(rec["id"].value, 9)
        target = self.seg.put({"t": 1})
        links = self.seg.get(self.seg.put([shmobj.Link(target)]))
        self.assertEqual(links.to_python(), [shmobj.Link(target)])
        self.assertEqual(links[0].follow().to_python(), {"t": 1})
        self.seg.free(target)
        with self.assertRaises(shmobj.Error) as cm:
            links[0].follow()
        self.assertEqual(cm.exception.code, shmobj.ESTALE)
        kid = self.seg.put([1, 2])
        owner = self.seg.put({"kid": shmobj.Adopt(kid)})
        self.assertEqual(self.seg.get(owner).to_python(), {"kid": [1, 2]})
        with self.assertRaises(shmobj.Error):
            self.seg.free(kid)  # the container owns it now

    def test_types_mutable_round_trip(self):
        v = {"l": shmobj.MList([1, "a", shmobj.MDict({"x": 1})]),
             "d": shmobj.MDict({"k": [1, 2], 5: shmobj.MSet({"m"})}),
             "s": shmobj.MSet({1, b"b"}), "e": shmobj.MList()}
        ref = self.seg.put(v)
        view = self.seg.get(ref)
        self.assertEqual(view["l"].type, shmobj.MLIST)
        self.assertEqual(view["d"].type, shmobj.MDICT)
        self.assertEqual(view["s"].type, shmobj.MSET)
        self.assertEqual(view.to_python(), {
            "l": [1, "a", {"x": 1}], "d": {"k": [1, 2], 5: frozenset({"m"})},
            "s": frozenset({1, b"b"}), "e": []})

    def test_types_buffer_round_trip_without_numpy(self):
        a = array.array("d", [1.0, 2.0, 3.0])
        view = self.seg.get(self.seg.put(a))
        self.assertEqual(view.type, shmobj.BUFFER)
        self.assertEqual(view.shape, (3,))
        self.assertEqual(view.dtype, "float64")
        self.assertEqual(view.to_python().tolist(), [1.0, 2.0, 3.0])
        mv = view.memoryview()
        mv[1] = 20.0  # in place
        self.assertEqual(view.to_python().tolist(), [1.0, 20.0, 3.0])
        self.assertEqual(json.loads(view.json()), {"$buffer": "f64", "shape": [3]})
        s = self.seg.get(self.seg.put("in place"))
        self.assertEqual(bytes(s.memoryview()), b"in place")
        self.assertTrue(s.memoryview().readonly)

    @unittest.skipIf(numpy is None, "numpy is missing")
    def test_types_buffer_round_trip_numpy(self):
        for dt in ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                   "uint64", "float32", "float64", "bool"]:
            with self.subTest(dtype=dt):
                a = (numpy.arange(24) % 3).astype(dt).reshape(2, 3, 4)
                view = self.seg.get(self.seg.put(a))
                self.assertEqual(view.dtype, dt)
                self.assertEqual(view.shape, (2, 3, 4))
                got = numpy.asarray(view)
                self.assertEqual(got.dtype, numpy.dtype(dt))
                self.assertTrue(numpy.array_equal(got, a))
        # not C-contiguous in, C order out; 0-d; empty
        t = numpy.arange(12, dtype="int32").reshape(3, 4).T
        self.assertTrue(numpy.array_equal(numpy.asarray(self.seg.get(self.seg.put(t))), t))
        z = numpy.asarray(self.seg.get(self.seg.put(numpy.array(7.5))))
        self.assertEqual(z.shape, ())
        self.assertEqual(float(z), 7.5)
        e = numpy.asarray(self.seg.get(self.seg.put(numpy.zeros((0, 3), "f4"))))
        self.assertEqual(e.shape, (0, 3))
        with self.assertRaises(shmobj.Error) as cm:
            self.seg.put(numpy.zeros(2, dtype="float16"))
        self.assertEqual(cm.exception.code, shmobj.EINVAL)


class TestViews(SegmentCase):
    def test_view_fixed_containers_protocols(self):
        v = self.seg.get(self.seg.put({"n": 1, "l": [10, 20, 30], "t": ("a", "b"),
                                       "s": {1, 2}, 9: "nine"}))
        self.assertEqual(len(v), 5)
        self.assertEqual(sorted(map(str, v)), sorted(["n", "l", "t", "s", "9"]))
        self.assertIn("n", v)
        self.assertIn(9, v)
        self.assertNotIn("zz", v)
        self.assertNotIn(1.5, v)
        self.assertEqual(v[9].value, "nine")
        self.assertEqual(v["l"][-1].value, 30)
        self.assertEqual([i.value for i in v["l"]], [10, 20, 30])
        self.assertIn(20, v["l"])
        self.assertNotIn(21, v["l"])
        self.assertIn(2, v["s"])
        self.assertEqual(sorted(v["s"]), [1, 2])
        self.assertEqual(v.get("zz", "dflt"), "dflt")
        self.assertEqual(v["l"].get(7), None)
        with self.assertRaises(shmobj.Error) as cm:
            v["zz"]
        self.assertEqual(cm.exception.code, shmobj.ENOTFOUND)
        with self.assertRaises(shmobj.Error) as cm:
            v["l"][3]
        self.assertEqual(cm.exception.code, shmobj.ERANGE)
        v["n"] = 5  # a scalar slot: atomic store
        v["l"][0] = 11
        self.assertEqual(v["n"].value, 5)
        self.assertEqual(v["l"][0].value, 11)
        v["l"] = ["replaced", "list"]  # an object slot takes any value
        self.assertEqual(v["l"].to_python(), ["replaced", "list"])
        with self.assertRaises(shmobj.Error) as cm:
            v["t"][0].set("x")  # tuple items are immutable
        self.assertEqual(cm.exception.code, shmobj.EACCES)
        with self.assertRaises(shmobj.Error):
            v["n"] = "a string into an int slot"

    def test_view_mutable_containers_protocols(self):
        v = self.seg.get(self.seg.put({"l": shmobj.MList(), "d": shmobj.MDict(),
                                       "s": shmobj.MSet()}))
        lst, d, s = v["l"], v["d"], v["s"]
        for i in range(5):
            lst.append(i)
        lst.append({"nested": shmobj.MList([1])})
        lst.insert(0, "first")
        self.assertEqual(len(lst), 7)
        lst[1] = 100
        del lst[2]
        self.assertEqual(lst.to_python(), ["first", 100, 2, 3, 4, {"nested": [1]}])
        self.assertIn(3, lst)
        lst.clear()
        self.assertEqual(len(lst), 0)
        d["a"] = 1
        d[2] = "two"
        d[b"b"] = [1]
        d["a"] = 3
        self.assertEqual(len(d), 3)
        self.assertEqual(sorted(map(str, d)), ["2", "a", "b'b'"])
        self.assertIn("a", d)
        self.assertNotIn("zz", d)
        with self.assertRaises(shmobj.Error) as cm:
            d["a"].add(2)  # views of a mutable dict's values are read-only
        self.assertEqual(cm.exception.code, shmobj.EACCES)
        self.assertEqual(d.add_at("a", 2), 3)
        self.assertEqual(d["a"].value, 5)
        del d["a"]
        self.assertNotIn("a", d)
        with self.assertRaises(shmobj.Error) as cm:
            del d["a"]
        self.assertEqual(cm.exception.code, shmobj.ENOTFOUND)
        self.assertEqual(dict((k, x.to_python()) for k, x in d.items()),
                         {2: "two", b"b": [1]})
        s.add("m")
        s.add("m")
        s.add(7)
        self.assertEqual(set(s), {"m", 7})
        del s["m"]
        self.assertEqual(s.to_python(), frozenset({7}))
        with self.assertRaises(shmobj.Error) as cm:
            del v["l"]  # a fixed dict's keys stay
        self.assertEqual(cm.exception.code, shmobj.EACCES)

    def test_view_atomic_add_from_processes(self):
        ref = self.seg.put({"n": 0, "x": 0.0, "u": 1 << 63}, root="c")
        code = textwrap.dedent("""
            import sys, shmobj
            with shmobj.Segment(sys.argv[1], timeout_ns=10**10) as seg:
                c = seg.get("c")
                n, x, u = c["n"], c["x"], c["u"]
                for _ in range(2000):
                    n.add(1); x.add(0.5); u.add(1)
        """)
        procs = [subprocess.Popen([sys.executable, "-c", code, self.name]) for _ in range(3)]
        v = self.seg.get(ref)
        for _ in range(2000):
            v["n"].add(1)
        for p in procs:
            self.assertEqual(p.wait(60), 0)
        self.assertEqual(v["n"].value, 8000)
        self.assertEqual(v["x"].value, 3000.0)
        self.assertEqual(v["u"].value, (1 << 63) + 6000)
        self.assertTrue(v["n"].cas(8000, 1))
        self.assertFalse(v["n"].cas(8000, 2))
        self.assertEqual(v["n"].value, 1)

    def test_view_free_gives_estale(self):
        ref = self.seg.put([1, 2])
        v = self.seg.get(ref)
        self.seg.free(ref)
        with self.assertRaises(shmobj.Error) as cm:
            len(v)
        self.assertEqual(cm.exception.code, shmobj.ESTALE)


class TestTable(SegmentCase):
    FIELDS = [("id", int), ("x", float), ("name", str, 12), ("ok", bool)]
    ROW = "=qd12s?3x"  # the C struct of FIELDS: 32 bytes

    def rows(self, lo, hi):
        return b"".join(struct.pack(self.ROW, i, i * 0.5, b"row-%d" % i, i % 2 == 0)
                        for i in range(lo, hi))

    def test_table_append_row_add_from_processes(self):
        t = self.seg.table(self.FIELDS, capacity=4, root="t")
        self.assertEqual(t.type, shmobj.TABLE)
        self.assertEqual(t.row_size, struct.calcsize(self.ROW))
        self.assertEqual(t.append(self.rows(0, 3)), 0)
        self.assertEqual(t.append(self.rows(3, 10)), 3)
        self.assertEqual(len(t), 10)
        self.assertEqual(struct.unpack(self.ROW, t.row(7)), (7, 3.5, b"row-7\0\0\0\0\0\0\0",
                                                             False))
        self.assertEqual(t.get(7, "x"), 3.5)
        self.assertEqual(t.add(7, "id", 5), 7)
        self.assertEqual(t.info()["chunks"], 2)
        code = textwrap.dedent("""
            import sys, shmobj
            with shmobj.Segment(sys.argv[1], timeout_ns=10**10) as seg:
                t = seg.get("t")
                for _ in range(500):
                    for i in range(10):
                        t.add(i, "id", 1)
                        t.add(i, "x", 1.0)
        """)
        procs = [subprocess.Popen([sys.executable, "-c", code, self.name]) for _ in range(3)]
        for p in procs:
            self.assertEqual(p.wait(60), 0)
        self.assertEqual([t.get(i, "id") for i in range(10)],
                         [i + 1500 + (5 if i == 7 else 0) for i in range(10)])
        self.assertEqual(t.get(2, "x"), 1501.0)
        js = json.loads(self.seg.get("t").json())
        self.assertEqual(js["$table"], ["id", "x", "name", "ok"])
        self.assertEqual(js["rows"][2][2], "row-2")
        with self.assertRaises(shmobj.Error) as cm:
            t.row(10)
        self.assertEqual(cm.exception.code, shmobj.ERANGE)
        with self.assertRaises(shmobj.Error) as cm:
            t.append(b"short")
        self.assertEqual(cm.exception.code, shmobj.EINVAL)

    @unittest.skipIf(numpy is None, "numpy is missing")
    def test_table_column_numpy_in_place(self):
        t = self.seg.table(self.FIELDS, capacity=100)
        t.append(self.rows(0, 100))
        dt = numpy.dtype([("id", "i8"), ("x", "f8"), ("name", "S12"), ("ok", "?")], align=True)
        self.assertEqual(dt.itemsize, t.row_size)  # numpy lays the struct out the same
        x = t.column("x")
        self.assertEqual(x.dtype, numpy.dtype("float64"))
        self.assertTrue(numpy.array_equal(x, numpy.arange(100) * 0.5))
        t.add(3, "x", 1.0)
        self.assertEqual(x[3], 2.5)  # in place: the add shows in the array
        self.assertEqual(int(t.column("ok").sum()), 50)
        t.append(numpy.zeros(3, dtype=dt).tobytes())  # a second chunk
        self.assertEqual(len(t.column("id")), 103)


@unittest.skipIf(numpy is None, "numpy is missing")
class TestNumpy(SegmentCase):
    def test_numpy_zero_copy_read_write_second_process(self):
        ref = self.seg.put(numpy.zeros((4, 5), dtype="float32"), root="t")
        view = self.seg.get(ref)
        a = numpy.asarray(view)
        b = numpy.asarray(view)
        # no copy: both arrays are the buffer's memory in the segment
        self.assertEqual(a.__array_interface__["data"][0], view._buffer_info().data)
        self.assertTrue(numpy.shares_memory(a, b))
        self.assertTrue(a.flags.writeable)
        a[1, 2] = 7.0
        self.assertEqual(b[1, 2], 7.0)
        code = textwrap.dedent("""
            import sys, numpy, shmobj
            with shmobj.Segment(sys.argv[1], timeout_ns=10**10) as seg:
                t = numpy.asarray(seg.get("t"))
                assert t[1, 2] == 7.0, t        # the parent's write, seen in place
                t[3, :] = numpy.arange(5)       # written in place for the parent
                t *= 2
                print("child", float(t.sum()))
        """)
        rc, out, err = run_python(code, self.name)
        self.assertEqual(rc, 0, err)
        self.assertTrue(numpy.array_equal(a[3], numpy.arange(5) * 2))
        self.assertEqual(a[1, 2], 14.0)
        self.assertEqual(float(out.split()[1]), float(a.sum()))

    def test_numpy_array_outlives_segment_close(self):
        code = textwrap.dedent("""
            import gc, sys, numpy, shmobj
            def mapped():
                with open("/proc/self/maps") as f:
                    return sum(sys.argv[1] in line for line in f)
            seg = shmobj.Segment(sys.argv[1])
            a = numpy.asarray(seg.get(seg.put(numpy.arange(6.0))))
            seg.close()
            assert mapped(), "detached while an array lives"
            a[0] = 9.0  # still the segment's memory
            assert a.sum() == 9.0 + 15.0
            del a
            gc.collect()
            assert not mapped(), "still attached after the last array went"
            print("ok")
        """)
        rc, out, err = run_python(code, self.name)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), "ok")


class TestQueue(SegmentCase):
    PRODUCER = textwrap.dedent("""
        import sys, shmobj
        with shmobj.Segment(sys.argv[1], timeout_ns=10**10) as seg, \\
                shmobj.Queue(seg, "jobs", timeout_ns=10**10) as q:
            for i in range(int(sys.argv[2])):
                q.put_value({"i": i, "sq": -1})
            q.put_bytes(b"last")
    """)

    def test_queue_second_process_put_take(self):
        q = shmobj.Queue(self.seg, "jobs", create=True, capacity=8)
        self.assertIsNone(q.take(0))
        self.assertIsNone(q.take(10**7))  # 10 ms, then None
        self.assertIsNone(q.peek())
        p = subprocess.Popen([sys.executable, "-c", self.PRODUCER, self.name, "50"])
        seen = []
        for _ in range(50):
            ref = q.take(WAIT_NS)
            self.assertIsNotNone(ref)
            seen.append(self.seg.get(ref)["i"].value)
            self.seg.free(ref)
        ref = q.take(WAIT_NS)
        self.assertEqual(bytes(q.msg_data(ref)), b"last")
        q.msg_done(ref)
        self.assertEqual(p.wait(60), 0)
        self.assertEqual(seen, list(range(50)))
        q.put(self.seg.put(1))
        self.assertEqual(len(q), 1)
        peeked = q.peek()
        self.assertEqual(q.take(0), peeked)
        st = q.stats()
        self.assertEqual(st["capacity"], 8)
        self.assertEqual(st["depth"], 0)
        q.close()
        q.close()

    def test_queue_completion_second_process(self):
        q = self.seg.queue("work", create=True)
        consumer = textwrap.dedent("""
            import sys, shmobj
            with shmobj.Segment(sys.argv[1], timeout_ns=10**10) as seg, \\
                    seg.queue("work", timeout_ns=10**10) as q:
                for _ in range(3):
                    ref = q.take(10**10)
                    job = seg.get(ref)
                    job["sq"] = job["n"].value ** 2
                    q.done(ref)
        """)
        p = subprocess.Popen([sys.executable, "-c", consumer, self.name])
        refs = [self.seg.put({"n": n, "sq": 0}) for n in (3, 4, 5)]
        for r in refs:
            self.assertTrue(q.put(r, tracked=True))
        self.assertTrue(q.wait_done(refs[0], WAIT_NS))
        self.assertTrue(q.wait_all(WAIT_NS))
        self.assertEqual(p.wait(60), 0)
        self.assertEqual([self.seg.get(r)["sq"].value for r in refs], [9, 16, 25])
        with self.assertRaises(shmobj.Error) as cm:
            q.wait_done(refs[0], 0)  # released already
        self.assertEqual(cm.exception.code, shmobj.ENOTFOUND)

    def test_queue_async_example(self):
        q = self.seg.queue("jobs", create=True)
        script = os.path.join(SOURCE, "examples", "python", "async_consumer.py")
        p = subprocess.Popen([sys.executable, script, self.name, "40"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.2)  # let it wait on the descriptor for some of them
        for n in range(40):
            self.assertIsNotNone(q.put_value({"n": n}, WAIT_NS))
            if n % 10 == 0:
                time.sleep(0.05)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("took 40 jobs, sum %d" % sum(range(40)), out)


class TestMap(SegmentCase):
    def test_map_dict_like_and_second_process(self):
        m = shmobj.Map(self.seg, "m", create=True)
        self.assertEqual(len(m), 0)
        m["a"] = "1"
        m[b"b"] = b"\x00" * 1000  # longer than the first read buffer
        self.assertEqual(m["a"], b"1")
        self.assertEqual(m.get("b"), b"\x00" * 1000)
        self.assertIsNone(m.get("zz"))
        self.assertIn("a", m)
        self.assertNotIn("zz", m)
        with self.assertRaises(shmobj.Error) as cm:
            m["zz"]
        self.assertEqual(cm.exception.code, shmobj.ENOTFOUND)
        self.assertEqual(m.add("n", 2), 2)
        code = textwrap.dedent("""
            import sys, shmobj
            with shmobj.Segment(sys.argv[1], timeout_ns=10**10) as seg, \\
                    shmobj.Map(seg, "m", timeout_ns=10**10) as m:
                for _ in range(500):
                    m.add("n", 1)
                m["child"] = "was here"
        """)
        rc, _, err = run_python(code, self.name)
        self.assertEqual(rc, 0, err)
        self.assertEqual(m.add("n", 0), 502)
        self.assertEqual(sorted(m.keys()), [b"a", b"b", b"child", b"n"])
        self.assertEqual(dict(m.items())[b"child"], b"was here")
        self.assertEqual(len(m), 4)
        self.assertTrue(m.delete("a"))
        self.assertFalse(m.delete("a"))
        with self.assertRaises(shmobj.Error):
            del m["a"]
        m.clear()
        self.assertEqual(len(m), 0)
        m.close()


class TestErrors(SegmentCase):
    def test_errors_carry_code_name_text(self):
        with self.assertRaises(shmobj.Error) as cm:
            shmobj.Segment("shmobj-pytest-no-such-segment")
        e = cm.exception
        self.assertEqual(e.code, shmobj.ENOTFOUND)
        self.assertEqual(e.code, -3)
        self.assertEqual(e.name, "SHMOBJ_ENOTFOUND")
        self.assertEqual(e.text, "not found")
        self.assertIn("SHMOBJ_ENOTFOUND", str(e))
        with self.assertRaises(shmobj.Error) as cm:
            shmobj.Segment.create(self.name)
        self.assertEqual(cm.exception.name, "SHMOBJ_EEXIST")
        for bad, code in [(object(), shmobj.EINVAL), (1 << 64, shmobj.ERANGE),
                          ({1.5: "float key"}, shmobj.EINVAL),
                          ("\ud800", None)]:
            with self.subTest(bad=repr(bad)):
                try:
                    self.seg.put(bad)
                except shmobj.Error as e:
                    if code is not None:
                        self.assertEqual(e.code, code)
                except UnicodeError:
                    pass  # Python's own: the text cannot be encoded
                else:
                    self.fail("put accepted %r" % (bad,))
        counter = self.seg.get(self.seg.put({"n": 0}))
        for call, code in [(lambda: counter["n"].add("x"), shmobj.EINVAL),
                           (lambda: counter["n"].add(1 << 70), shmobj.ERANGE),
                           (lambda: counter.add_at("n", 2.5), shmobj.EINVAL),
                           (lambda: counter["n"].set(None), shmobj.EINVAL),
                           (lambda: counter.add_at("absent", 1), shmobj.ENOTFOUND),
                           (lambda: self.seg.map("m", create=True).set(1, 2), shmobj.EINVAL),
                           (lambda: self.seg.root(b"not a str"), None)]:
            try:
                call()
            except shmobj.Error as e:
                if code is not None:
                    self.assertEqual(e.code, code)
            except Exception as e:  # a raw ctypes or Python error: refused
                self.fail("%r instead of shmobj.Error" % (e,))
            else:
                self.fail("accepted")
        with self.assertRaises(shmobj.Error) as cm:
            self.seg.get(12345)  # names no block
        self.assertIn(cm.exception.code, (shmobj.EINVAL, shmobj.ESTALE, shmobj.ETYPE))
        with self.assertRaises(shmobj.Error) as cm:
            self.seg.get(self.seg.put(1))[0]
        self.assertEqual(cm.exception.code, shmobj.ETYPE)
        with self.assertRaises(shmobj.Error) as cm:
            shmobj.Queue(self.seg, "absent")
        self.assertIn(cm.exception.code, (shmobj.ENOTFOUND, shmobj.ETIMEDOUT))
        self.assertEqual(shmobj.ERRORS[shmobj.EPEERDEAD], "SHMOBJ_EPEERDEAD")


# ---- every order of closing and dropping --------------------------------------

# Runs in a child interpreter: for every order of (closing the segment,
# dropping each of its children), and for each child a use after each step,
# checks that a use either works (segment open, or memory it exported) or
# raises Error ESTALE, and never crashes. Prints "ok N" with the cases run.
ORDERS = textwrap.dedent("""
    import gc, itertools, os, sys, shmobj
    try:
        import numpy
    except ImportError:
        numpy = None
    name = "shmobj-pytest-orders-%d" % os.getpid()
    kinds = ["view", "queue", "map", "mem", "iter"]
    if numpy is not None:
        kinds.append("array")

    def make(seg, kind):
        if kind == "view":
            return seg.get("obj")
        if kind == "queue":
            return seg.queue("q")
        if kind == "map":
            return seg.map("m")
        if kind == "mem":
            return seg.get("obj")["buf"].memoryview()
        if kind == "iter":
            return iter(seg.get("obj")["d"])
        return numpy.asarray(seg.get("obj")["buf"])

    def use(kind, x, open_):
        try:
            if kind == "view":
                r = x["n"].add(1)
            elif kind == "queue":
                r = len(x)
            elif kind == "map":
                r = x.add("k", 1)
            elif kind == "mem":
                x[0] = x[0] + 1.0  # exported memory: always usable
                r = x[0]
            elif kind == "iter":
                r = next(x, None)
            else:
                x[0] += 1.0
                r = float(x.sum())
        except shmobj.Error as e:
            if open_ or e.code != shmobj.ESTALE or kind in ("mem", "array"):
                raise
            return
        return r

    cases = 0
    seg0 = shmobj.Segment.create(name, size=1 << 20)
    seg0.put({"n": 0, "buf": __import__("array").array("d", [0.0] * 8),
              "d": shmobj.MDict({i: i for i in range(40)})}, root="obj")
    seg0.queue("q", create=True).close()
    seg0.map("m", create=True).close()
    for r in range(1, 4):
        for combo in itertools.combinations(kinds, r):
            steps = ["close"] + list(combo)
            for order in itertools.permutations(steps):
                seg = shmobj.Segment(name)
                live = {k: make(seg, k) for k in combo}
                closed = False
                for step in order:
                    if step == "close":
                        seg.close()
                        closed = True
                    else:
                        x = live.pop(step)
                        if step in ("queue", "map") and cases % 2:
                            x.close()  # an explicit close, then the drop
                        del x
                    for k, x in live.items():
                        use(k, x, not closed)
                del seg  # children that were never dropped keep it
                live.clear()
                cases += 1
    # the segment dropped first, never closed: children keep it and work
    seg = shmobj.Segment(name)
    q, m, v = seg.queue("q"), seg.map("m"), seg.get("obj")
    del seg
    assert len(q) == 0 and m.add("k", 1) > 0 and v["n"].add(1) >= 0
    del q, m, v
    # a reference cycle with everything in it, collected by the GC
    seg = shmobj.Segment(name)
    holder = {"seg": seg, "q": seg.queue("q"), "m": seg.map("m"), "v": seg.get("obj")}
    holder["self"] = holder
    seg.cycle = holder
    del seg, holder
    gc.collect()
    # closing through the with blocks in the wrong order
    with shmobj.Segment(name) as seg:
        q = seg.queue("q")
        m = seg.map("m")
    q.close(); m.close()
    seg0.close()
    shmobj.Segment.destroy(name)
    # left alive at exit: the interpreter's shutdown drops them in any order
    seg = shmobj.Segment.create(name, size=1 << 20)
    keep = [seg.queue("q", create=True), seg.map("m", create=True),
            seg.get(seg.put({"n": 1, "b": __import__("array").array("d", [1.0])}))]
    keep.append(keep[2]["b"].memoryview())
    if numpy is not None:
        keep.append(numpy.asarray(keep[2]["b"]))
    shmobj.Segment.destroy(name)
    print("ok", cases)
""")


class TestLifetime(unittest.TestCase):
    def test_lifetime_every_order_of_close_and_drop(self):
        rc, out, err = run_python(ORDERS, timeout=120)
        self.assertEqual(rc, 0, "child interpreter failed (%d):\n%s" % (rc, err))
        self.assertTrue(out.startswith("ok "), out + err)
        self.assertGreater(int(out.split()[1]), 300)

    def test_lifetime_closed_children_raise_estale(self):
        name = seg_name()
        seg = shmobj.Segment.create(name, size=1 << 20)
        try:
            v = seg.get(seg.put({"n": 1}))
            q = seg.queue("q", create=True)
            m = seg.map("m", create=True)
            seg.close()
            self.assertTrue(seg.closed)
            for call in [lambda: v["n"], lambda: len(v), lambda: q.take(0),
                         lambda: m.get("k"), lambda: seg.get(1), lambda: seg.put(1)]:
                with self.assertRaises(shmobj.Error) as cm:
                    call()
                self.assertEqual(cm.exception.code, shmobj.ESTALE)
            q.close()  # after the segment's close: nothing to do, no crash
            m.close()
            seg.close()
        finally:
            shmobj.Segment.destroy(name)


def fork_child(fn):
    """Run fn() in a forked child, which opens what it needs itself and
    ends with os._exit (0: fn returned; 1: it raised); returns the pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fn()
            code = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def child_status(pid):
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


class TestTopic(SegmentCase):
    def test_topic_fan_out_and_late_joiner_sees_history(self):
        t = self.seg.topic("news", create=True, capacity=16, history=2)
        a, b = t.subscribe(), t.subscribe()
        for i in range(3):
            self.assertTrue(t.publish(b"m%d" % i, timeout=1))
        for sub in (a, b):
            got = []
            for i in range(3):
                with sub.take(timeout=1) as m:
                    self.assertIsInstance(m.data, memoryview)
                    got.append((m.seq, bytes(m.data), m.missed))
            self.assertEqual(got, [(0, b"m0", 0), (1, b"m1", 0), (2, b"m2", 0)])
            self.assertIsNone(sub.try_take())
        late = t.subscribe()  # the last two kept, then what comes after
        t.publish("m3")
        self.assertEqual([bytes(late.take(1)) for _ in range(3)], [b"m1", b"m2", b"m3"])
        self.assertIsNone(late.take(timeout=0.01))
        st = t.stats()
        self.assertEqual((st["published"], st["history"], st["subscribers"]), (4, 2, 3))

    def test_topic_message_release_and_fileno(self):
        t = self.seg.topic("t", create=True, capacity=4)
        sub = t.subscribe()
        fd = sub.fileno()
        self.assertIsInstance(fd, int)
        sub.arm()
        t.publish(b"x" * 100)
        import select
        self.assertEqual(select.select([fd], [], [], 5)[0], [fd])
        m = sub.try_take()
        self.assertEqual((len(m), m.seq), (100, 0))
        m.release()
        with self.assertRaises(ValueError):  # the view went with it
            m.data[0]
        m.release()  # twice: nothing
        with self.assertRaises(shmobj.Error) as cm:
            t.publish(12)
        self.assertEqual(cm.exception.code, shmobj.EINVAL)
        with self.assertRaises(shmobj.Error) as cm:
            shmobj.Topic(self.seg, "none")
        self.assertEqual(cm.exception.code, shmobj.ENOTFOUND)

    def test_topic_dropped_message_is_released(self):
        t = self.seg.topic("full", create=True, capacity=2)
        sub = t.subscribe()
        self.assertTrue(t.publish(b"a", timeout=0))
        self.assertTrue(t.publish(b"b", timeout=0))
        self.assertFalse(t.publish(b"c", timeout=0))  # full until released
        data = sub.take(0).data  # the message dropped, its bytes kept
        self.assertFalse(t.publish(b"c", timeout=0))
        self.assertEqual(bytes(data), b"a")
        del data
        sub.take(0)  # dropped at once
        self.assertTrue(t.publish(b"c", timeout=0))
        self.assertTrue(t.publish(b"d", timeout=0))


class TestService(SegmentCase):
    def test_service_call_served_by_forked_child(self):
        svc = self.seg.service("sq", create=True, capacity=4)
        name = self.name

        def serve():
            with shmobj.Segment(name) as seg, seg.service("sq") as s:
                for _ in range(2):
                    req = s.take(timeout=10)
                    n = int(bytes(req.data))
                    req.reply(str(n * n))

        pid = fork_child(serve)
        try:
            self.assertEqual(svc.call(b"12", timeout=10), b"144")
            self.assertEqual(svc.call("-3", timeout=10), b"9")
        finally:
            self.assertEqual(child_status(pid), 0)
        self.assertEqual(svc.pending(), 0)
        with self.assertRaises(shmobj.Error) as cm:
            svc.call(b"1", timeout=0.05)  # nobody serves now
        self.assertEqual(cm.exception.code, shmobj.ETIMEDOUT)

    def test_service_server_dies_holding_request_gives_epeerdead(self):
        svc = self.seg.service("die", create=True)
        name = self.name

        def serve_and_die():
            seg = shmobj.Segment(name)
            req = seg.service("die").take(timeout=10)
            assert bytes(req.data) == b"hello"
            os._exit(7)  # holding the request, unanswered

        pid = fork_child(serve_and_die)
        t0 = time.monotonic()
        with self.assertRaises(shmobj.Error) as cm:
            svc.call(b"hello", timeout=10)
        self.assertEqual(cm.exception.code, shmobj.EPEERDEAD)
        self.assertEqual(cm.exception.name, "SHMOBJ_EPEERDEAD")
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(child_status(pid), 7)

    def test_service_release_unanswered_gives_enotfound(self):
        svc = self.seg.service("rel", create=True)
        name = self.name

        def serve():
            with shmobj.Segment(name) as seg, seg.service("rel") as s:
                s.take(timeout=10).release()
                s.take(timeout=10)  # dropped unanswered: given back too

        pid = fork_child(serve)
        for _ in range(2):
            with self.assertRaises(shmobj.Error) as cm:
                svc.call(b"x", timeout=10)
            self.assertEqual(cm.exception.code, shmobj.ENOTFOUND)
        self.assertEqual(child_status(pid), 0)


class TestWatch(SegmentCase):
    def test_watch_woken_by_child_map_set(self):
        m = self.seg.map("cfg", create=True)
        w = m.watch("mode")
        self.assertIsInstance(w.fileno(), int)
        self.assertFalse(w.consume())
        self.assertFalse(w.wait(timeout=0.01))
        name = self.name

        def setter():
            with shmobj.Segment(name) as seg, seg.map("cfg") as cm:
                time.sleep(0.05)
                cm["other"] = b"no wake-up"
                cm["mode"] = b"fast"

        pid = fork_child(setter)
        self.assertTrue(w.wait(timeout=10))
        self.assertEqual(child_status(pid), 0)
        self.assertTrue(w.consume())
        self.assertEqual(m["mode"], b"fast")
        self.assertFalse(w.consume())
        w.close()
        w.close()

    def test_watch_container(self):
        v = self.seg.get(self.seg.put(shmobj.MList([1])))
        w = v.watch()
        v.append(2)
        self.assertTrue(w.wait(1))
        self.assertTrue(w.consume())
        with self.assertRaises(shmobj.Error) as cm:
            self.seg.get(self.seg.put([1, 2])).watch()  # not mutable
        self.assertEqual(cm.exception.code, shmobj.ETYPE)


class TestWaitSet(SegmentCase):
    def test_waitset_queue_and_watch(self):
        q = self.seg.queue("jobs", create=True)
        m = self.seg.map("cfg", create=True)
        w = m.watch("k")
        ws = shmobj.WaitSet()
        ws.add(q, "queue")
        ws.add(w, "watch")
        self.assertEqual(ws.wait(timeout=0.01), [])
        name = self.name

        def child():
            with shmobj.Segment(name) as seg, seg.map("cfg") as cm:
                time.sleep(0.05)
                cm["k"] = b"v"

        pid = fork_child(child)
        self.assertEqual(ws.wait(timeout=10), ["watch"])
        self.assertEqual(child_status(pid), 0)
        self.assertTrue(w.consume())
        q.put_bytes(b"job")
        self.assertEqual(ws.wait(timeout=10), ["queue"])
        m["k"] = b"w"
        self.assertEqual(ws.wait(timeout=10), ["queue", "watch"])
        with self.assertRaises(shmobj.Error) as cm:
            ws.add(m, "map")
        self.assertEqual(cm.exception.code, shmobj.EINVAL)
        self.assertTrue(w.consume())
        q.msg_done(q.take(0))
        # the queue taken out: its messages no longer wake the set
        ws.remove(q)
        with self.assertRaises(shmobj.Error) as cm:
            ws.remove(q)
        self.assertEqual(cm.exception.code, shmobj.ENOTFOUND)
        self.assertEqual(len(ws), 1)
        q.put_bytes(b"job")
        self.assertEqual(ws.wait(timeout=0.01), [])
        m["k"] = b"x"
        self.assertEqual(ws.wait(timeout=10), ["watch"])
        w.close()
        with self.assertRaises(shmobj.Error) as cm:  # a member closed: no wait
            ws.wait(0)
        self.assertEqual(cm.exception.code, shmobj.ESTALE)
        ws.close()

    def test_waitset_subscription_and_service(self):
        t = self.seg.topic("t", create=True)
        svc = self.seg.service("s", create=True)
        with shmobj.WaitSet() as ws:
            sub = t.subscribe()
            ws.add(sub)
            ws.add(svc, "svc")
            t.publish(b"1")
            self.assertEqual(ws.wait(timeout=10), [sub])


class TestNewHandlesLifetime(unittest.TestCase):
    def test_lifetime_topic_service_watch_closed_with_segment(self):
        name = seg_name()
        seg = shmobj.Segment.create(name, size=1 << 20)
        try:
            t = seg.topic("t", create=True, history=1)
            sub = t.subscribe()
            t.publish(b"kept")
            msg = sub.take(1)
            svc = seg.service("s", create=True)
            m = seg.map("m", create=True)
            w = m.watch("k")
            lw = seg.get(seg.put(shmobj.MDict())).watch()
            ws = shmobj.WaitSet()
            ws.add(sub, 1)
            ws.add(w, 2)
            seg.close()
            self.assertEqual(bytes(msg.data), b"kept")  # still mapped
            for call in [lambda: t.publish(b"x"), lambda: t.subscribe(), t.stats,
                         lambda: sub.take(0), sub.fileno, msg.release,
                         lambda: svc.call(b"x", 1), lambda: svc.take(0), svc.fileno,
                         w.consume, lambda: w.wait(0), w.fileno, lw.consume,
                         lambda: m.watch("k"), lambda: ws.wait(0)]:
                with self.assertRaises(shmobj.Error) as cm:
                    call()
                self.assertEqual(cm.exception.code, shmobj.ESTALE)
            with msg:  # released with its subscription: nothing to do
                pass
            for h in (sub, t, svc, w, lw, m, ws):
                h.close()
                h.close()
        finally:
            shmobj.Segment.destroy(name)


if __name__ == "__main__":
    unittest.main(verbosity=2)

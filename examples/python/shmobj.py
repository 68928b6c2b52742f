"""A small binding of libshmobj for Python 3, with ctypes only.

It covers what a script needs to find an object another process made and
to read and update it in place: open a segment, look a root up (or wait
for it), views of values (fixed and mutable containers, records of a
shape), atomic updates of scalars, and JSON; to be a queue's consumer
(take with a timeout, completion back to the sender, message blocks read
in place); and to use a shared map. It does not build objects: a C (or
C++) process puts them, the script reads and updates them.

The library's handles are opaque pointers. The one struct a caller holds
is the view (``shmobj_view``): instead of mirroring its fields, which are
private and may change, the binding asks the library how large it is
(``shmobj_view_size()``) and gives it that many 8-byte-aligned bytes.

The library is found as ``libshmobj.so.0`` on the usual search path
(``LD_LIBRARY_PATH`` included) or at the path in ``SHMOBJ_LIBRARY``.
"""
import ctypes
import json
import os

__all__ = ["Error", "Segment", "View", "Queue", "Map", "FOREVER", "BACKEND_SHM",
           "BACKEND_FILE"]

_lib = ctypes.CDLL(os.environ.get("SHMOBJ_LIBRARY", "libshmobj.so.0"))

FOREVER = -1
BACKEND_SHM = 0
BACKEND_FILE = 1

# enum shmobj_type (stable numbers, part of the format)
NULL, BOOL, INT, UINT, DOUBLE, STR, BYTES, BUFFER, LIST, TUPLE, DICT, SET, STRUCT = range(1, 14)
MLIST, MDICT, MSET = 14, 15, 16
# enum shmobj_type_ref (also stable): what shmobj_view_type() gives besides
SHAPE, RECORD, LINK = 17, 18, 19
# the statuses the binding turns into Python answers rather than errors
ENOTFOUND, ETIMEDOUT, EEMPTY, ETYPE, ENOBUFS = -3, -8, -9, -11, -17

_p = ctypes.c_void_p
_i64 = ctypes.c_int64
_u64 = ctypes.c_uint64
_size = ctypes.c_size_t


def _fn(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_strerror = _fn("shmobj_strerror", ctypes.c_char_p, ctypes.c_int)
_errname = _fn("shmobj_errname", ctypes.c_char_p, ctypes.c_int)
_view_size = _fn("shmobj_view_size", _size)
_seg_open = _fn("shmobj_segment_open", ctypes.c_int, ctypes.c_char_p, ctypes.c_uint, _i64,
                ctypes.POINTER(_p))
_seg_close = _fn("shmobj_segment_close", None, _p)
_seg_destroy = _fn("shmobj_segment_destroy", ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
_root_get = _fn("shmobj_segment_root_get", ctypes.c_int, _p, ctypes.c_char_p,
                ctypes.POINTER(_u64))
_root_wait = _fn("shmobj_segment_root_wait", ctypes.c_int, _p, ctypes.c_char_p, _i64,
                 ctypes.POINTER(_u64))
_obj_get = _fn("shmobj_obj_get", ctypes.c_int, _p, _u64, _p)
_view_type = _fn("shmobj_view_type", ctypes.c_int, _p)
_view_len = _fn("shmobj_view_len", ctypes.c_int, _p, ctypes.POINTER(_size))
_view_item = _fn("shmobj_view_item", ctypes.c_int, _p, _size, _p)
_view_key = _fn("shmobj_view_key", ctypes.c_int, _p, _size, _p)
_view_get_str = _fn("shmobj_field_get", ctypes.c_int, _p, ctypes.c_char_p, _p)
_view_json = _fn("shmobj_view_json", ctypes.c_int, _p, ctypes.c_char_p, _size,
                 ctypes.POINTER(_size))
_bool_get = _fn("shmobj_bool_get", ctypes.c_int, _p, ctypes.POINTER(ctypes.c_int))
_bool_set = _fn("shmobj_bool_set", ctypes.c_int, _p, ctypes.c_int)
_int_get = _fn("shmobj_int_get", ctypes.c_int, _p, ctypes.POINTER(_i64))
_int_set = _fn("shmobj_int_set", ctypes.c_int, _p, _i64)
_int_add = _fn("shmobj_int_add", ctypes.c_int, _p, _i64, ctypes.POINTER(_i64))
_uint_get = _fn("shmobj_uint_get", ctypes.c_int, _p, ctypes.POINTER(_u64))
_uint_set = _fn("shmobj_uint_set", ctypes.c_int, _p, _u64)
_double_get = _fn("shmobj_double_get", ctypes.c_int, _p, ctypes.POINTER(ctypes.c_double))
_double_set = _fn("shmobj_double_set", ctypes.c_int, _p, ctypes.c_double)
_double_add = _fn("shmobj_double_add", ctypes.c_int, _p, ctypes.c_double,
                  ctypes.POINTER(ctypes.c_double))
_str_get = _fn("shmobj_str_get", ctypes.c_int, _p, ctypes.POINTER(_p), ctypes.POINTER(_size))
_bytes_get = _fn("shmobj_bytes_get", ctypes.c_int, _p, ctypes.POINTER(_p),
                 ctypes.POINTER(_size))
_view_follow = _fn("shmobj_view_follow", ctypes.c_int, _p, _p)
_miter_init = _fn("shmobj_miter_init", ctypes.c_int, _p, _p)
_miter_next = _fn("shmobj_miter_next", ctypes.c_int, _p, _p, _p)
_q_open_timed = _fn("shmobj_queue_open_timed", ctypes.c_int, _p, ctypes.c_char_p, _i64,
                    ctypes.POINTER(_p))
_q_close = _fn("shmobj_queue_close", None, _p)
_q_take_timed = _fn("shmobj_queue_take_timed", ctypes.c_int, _p, ctypes.POINTER(_u64), _i64)
_q_put_timed = _fn("shmobj_queue_put_timed", ctypes.c_int, _p, _u64, _i64)
_q_done = _fn("shmobj_queue_done", ctypes.c_int, _p, _u64)
_q_msg_data = _fn("shmobj_queue_msg_data", ctypes.c_int, _p, _u64, ctypes.POINTER(_p),
                  ctypes.POINTER(_size))
_q_msg_done = _fn("shmobj_queue_msg_done", ctypes.c_int, _p, _u64)
_map_open_timed = _fn("shmobj_map_open_timed", ctypes.c_int, _p, ctypes.c_char_p, _i64,
                      ctypes.POINTER(_p))
_map_open_or_create = _fn("shmobj_map_open_or_create", ctypes.c_int, _p, ctypes.c_char_p,
                          ctypes.POINTER(_p))
_map_close = _fn("shmobj_map_close", None, _p)
_map_get = _fn("shmobj_map_get", ctypes.c_int, _p, ctypes.c_char_p, _size, _p, _size,
               ctypes.POINTER(_size))
_map_set = _fn("shmobj_map_set", ctypes.c_int, _p, ctypes.c_char_p, _size, ctypes.c_char_p,
               _size)
_map_del = _fn("shmobj_map_del", ctypes.c_int, _p, ctypes.c_char_p, _size)
_map_add = _fn("shmobj_map_add", ctypes.c_int, _p, ctypes.c_char_p, _size, _i64,
               ctypes.POINTER(_i64))

# A view as opaque bytes: as many 8-byte words as the library asks for.
_VIEW_WORDS = (_view_size() + 7) // 8
# An iteration cursor (shmobj_miter, caller memory): a view and two words.
_MITER_WORDS = _VIEW_WORDS + 2


class Error(Exception):
    """A negative SHMOBJ_E* status; ``code`` is the number, ``name`` its name."""

    def __init__(self, code, what=""):
        self.code = code
        self.name = _errname(code).decode()
        text = _strerror(code).decode()
        super().__init__("%s%s (%s)" % (what + ": " if what else "", text, self.name))


def _check(rc, what=""):
    if rc != 0:
        raise Error(rc, what)


class _Handle:
    """A library handle closed once, by close() or at the end of a with
    block; subclasses name the C call that closes it (_closer)."""

    _closer = None

    def close(self):
        if self._h:
            self._closer(self._h)
            self._h = _p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Segment(_Handle):
    """An attached segment. Close it (or use ``with``) when done."""

    _closer = staticmethod(_seg_close)

    def __init__(self, name, timeout_ns=0, backend=BACKEND_SHM):
        """Open the segment ``name``, waiting up to ``timeout_ns`` for its
        creator (0: fail at once; FOREVER)."""
        self._h = _p()
        _check(_seg_open(name.encode(), backend, timeout_ns, ctypes.byref(self._h)),
               "open " + name)

    @staticmethod
    def destroy(name, backend=BACKEND_SHM):
        """Remove a segment's name (attached processes keep it)."""
        _check(_seg_destroy(name.encode(), backend), "destroy " + name)

    def root(self, name, timeout_ns=0):
        """The reference published under ``name``; with a timeout, waits
        for it to appear (asleep, no polling)."""
        ref = _u64()
        if timeout_ns == 0:
            _check(_root_get(self._h, name.encode(), ctypes.byref(ref)), "root " + name)
        else:
            _check(_root_wait(self._h, name.encode(), timeout_ns, ctypes.byref(ref)),
                   "root " + name)
        return ref.value

    def get(self, ref):
        """A view of the object ``ref`` names, read in place."""
        v = View(self)
        _check(_obj_get(self._h, ref, v._p), "get")
        return v


class View:
    """A view of one value in a segment. Valid while the object lives and
    the segment is open; scalar reads see the current value each time."""

    def __init__(self, seg):
        self._seg = seg  # keeps the segment's handle alive
        self._buf = (ctypes.c_uint64 * _VIEW_WORDS)()
        self._p = ctypes.cast(self._buf, _p)

    @property
    def type(self):
        return _view_type(self._p)

    def __len__(self):
        n = _size()
        _check(_view_len(self._p, ctypes.byref(n)), "len")
        return n.value

    def __getitem__(self, key):
        """Item ``key`` of a list, tuple, set or struct (an int), or the
        value under a string key of a dict or named struct."""
        item = View(self._seg)
        if isinstance(key, str):
            _check(_view_get_str(self._p, key.encode(), item._p), "get %r" % key)
        else:
            if key < 0:
                key += len(self)
            _check(_view_item(self._p, key, item._p), "item %d" % key)
        return item

    def key(self, i):
        """Key i of a dict, member i of a set, name of field i of a struct."""
        k = View(self._seg)
        _check(_view_key(self._p, i, k._p), "key %d" % i)
        return k

    def follow(self):
        """The target of a link (Error SHMOBJ_ESTALE once it was freed);
        any other view is returned as it is."""
        t = View(self._seg)
        _check(_view_follow(self._p, t._p), "follow")
        return t

    def items(self):
        """(key, value) views of a mutable dict or set (a set's values are
        null), in insertion order; every key present for the whole
        iteration comes exactly once, whatever other processes change."""
        it = (ctypes.c_uint64 * _MITER_WORDS)()
        _check(_miter_init(self._p, it), "iterate")
        while True:
            k, v = View(self._seg), View(self._seg)
            rc = _miter_next(it, k._p, v._p)
            if rc == ENOTFOUND:
                return
            _check(rc, "iterate")
            yield k, v

    # ---- scalars: atomic, in place --------------------------------------
    def get(self):
        """The value as a Python scalar (None, bool, int, float, str, bytes)."""
        t = self.type
        if t == NULL:
            return None
        if t == BOOL:
            b = ctypes.c_int()
            _check(_bool_get(self._p, ctypes.byref(b)))
            return bool(b.value)
        if t == INT:
            x = _i64()
            _check(_int_get(self._p, ctypes.byref(x)))
            return x.value
        if t == UINT:
            x = _u64()
            _check(_uint_get(self._p, ctypes.byref(x)))
            return x.value
        if t == DOUBLE:
            d = ctypes.c_double()
            _check(_double_get(self._p, ctypes.byref(d)))
            return d.value
        if t in (STR, BYTES):
            ptr, n = _p(), _size()
            _check((_str_get if t == STR else _bytes_get)(self._p, ctypes.byref(ptr),
                                                         ctypes.byref(n)))
            raw = ctypes.string_at(ptr.value, n.value) if n.value else b""
            return raw.decode() if t == STR else raw
        raise Error(ETYPE, "get: not a scalar")

    def set(self, x):
        """Store a scalar of the slot's own kind (atomic)."""
        t = self.type
        if t == BOOL:
            _check(_bool_set(self._p, 1 if x else 0), "set")
        elif t == INT:
            _check(_int_set(self._p, x), "set")
        elif t == UINT:
            _check(_uint_set(self._p, x), "set")
        elif t == DOUBLE:
            _check(_double_set(self._p, x), "set")
        else:
            raise Error(ETYPE, "set: not a mutable scalar")

    def add(self, delta):
        """Add to an int or a double atomically; returns the value before."""
        if self.type == DOUBLE:
            old = ctypes.c_double()
            _check(_double_add(self._p, delta, ctypes.byref(old)), "add")
        else:
            old = _i64()
            _check(_int_add(self._p, delta, ctypes.byref(old)), "add")
        return old.value

    # ---- whole values ---------------------------------------------------
    def json(self):
        """The value as compact JSON text (buffers without their data)."""
        n = _size()
        rc = _view_json(self._p, None, 0, ctypes.byref(n))
        if rc not in (0, -17):  # -17: SHMOBJ_ENOBUFS, the length is known
            _check(rc, "json")
        buf = ctypes.create_string_buffer(n.value + 1)
        _check(_view_json(self._p, buf, n.value + 1, ctypes.byref(n)), "json")
        return buf.value.decode()

    def to_python(self):
        """A copy of the value as Python objects (dict, list, tuple,
        frozenset, scalars); a buffer as its JSON description."""
        t = self.type
        if t in (LIST, TUPLE, SET, MLIST):
            items = [self[i].to_python() for i in range(len(self))]
            return items if t in (LIST, MLIST) else tuple(items) if t == TUPLE else frozenset(items)
        if t in (DICT, RECORD):
            return {self.key(i).get(): self[i].to_python() for i in range(len(self))}
        if t == MDICT:
            return {k.get(): v.to_python() for k, v in self.items()}
        if t == MSET:
            return frozenset(k.get() for k, _ in self.items())
        if t in (LINK, SHAPE):  # as JSON prints them: a link is not followed
            return json.loads(self.json())
        if t == STRUCT:
            try:
                return {self.key(i).get(): self[i].to_python() for i in range(len(self))}
            except Error:  # fields without names
                return tuple(self[i].to_python() for i in range(len(self)))
        if t == BUFFER:
            return json.loads(self.json())
        return self.get()


class Queue(_Handle):
    """A handle of a queue another process created, for a consumer."""

    _closer = staticmethod(_q_close)

    def __init__(self, seg, name, timeout_ns=0):
        """Open the queue ``name``, waiting up to ``timeout_ns`` for it to
        be created (asleep, no polling)."""
        self._seg = seg
        self._h = _p()
        _check(_q_open_timed(seg._h, name.encode(), timeout_ns, ctypes.byref(self._h)),
               "queue " + name)

    def take(self, timeout_ns=FOREVER):
        """The oldest message (a reference), waiting up to ``timeout_ns``;
        None when none came in time."""
        ref = _u64()
        rc = _q_take_timed(self._h, ctypes.byref(ref), timeout_ns)
        if rc in (ETIMEDOUT, EEMPTY):
            return None
        _check(rc, "take")
        return ref.value

    def put(self, ref, timeout_ns=FOREVER):
        """Put a reference, waiting up to ``timeout_ns`` for room; False
        when the queue stayed full."""
        rc = _q_put_timed(self._h, ref, timeout_ns)
        if rc in (ETIMEDOUT, -10):  # -10: SHMOBJ_EFULL
            return False
        _check(rc, "put")
        return True

    def done(self, ref):
        """Mark a reference its sender put tracked
        (shmobj_queue_put_tracked()) done: wakes the sender, frees nothing;
        do not use the reference afterwards."""
        _check(_q_done(self._h, ref), "done")

    def msg_data(self, ref):
        """The bytes of a message block, in place (a memoryview valid until
        msg_done())."""
        ptr, n = _p(), _size()
        _check(_q_msg_data(self._h, ref, ctypes.byref(ptr), ctypes.byref(n)), "msg_data")
        if n.value == 0:
            return memoryview(b"")
        return memoryview((ctypes.c_char * n.value).from_address(ptr.value)).cast("B")

    def msg_done(self, ref):
        """Give a message block back (frees an untracked one, wakes the
        sender of a tracked one)."""
        _check(_q_msg_done(self._h, ref), "msg_done")


class Map(_Handle):
    """A handle of a shared map: keys and values are bytes (str is encoded
    as UTF-8)."""

    _closer = staticmethod(_map_close)

    def __init__(self, seg, name, timeout_ns=0, create=False):
        """Open the map ``name``, waiting up to ``timeout_ns`` for it; with
        ``create``, open it or create it, whichever process comes first."""
        self._h = _p()
        if create:
            rc = _map_open_or_create(seg._h, name.encode(), ctypes.byref(self._h))
        else:
            rc = _map_open_timed(seg._h, name.encode(), timeout_ns, ctypes.byref(self._h))
        _check(rc, "map " + name)

    @staticmethod
    def _b(x):
        return x.encode() if isinstance(x, str) else bytes(x)

    def get(self, key, default=None):
        """A copy of the value, or ``default`` when the key is absent."""
        k = self._b(key)
        cap = 64
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = _size()
            rc = _map_get(self._h, k, len(k), buf, cap, ctypes.byref(n))
            if rc == ENOTFOUND:
                return default
            if rc == ENOBUFS:  # the length needed is in n: read again
                cap = n.value
                continue
            _check(rc, "get")
            return buf.raw[:n.value]

    def set(self, key, value):
        k, v = self._b(key), self._b(value)
        _check(_map_set(self._h, k, len(k), v, len(v)), "set")

    def delete(self, key):
        """Remove a key; False when it was absent."""
        k = self._b(key)
        rc = _map_del(self._h, k, len(k))
        if rc == ENOTFOUND:
            return False
        _check(rc, "delete")
        return True

    def add(self, key, delta):
        """Add to an 8-byte integer value atomically (an absent key is
        created holding ``delta``); returns the value after the add."""
        k = self._b(key)
        out = _i64()
        _check(_map_add(self._h, k, len(k), delta, ctypes.byref(out)), "add")
        return out.value

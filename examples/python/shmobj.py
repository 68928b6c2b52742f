"""A small binding of libshmobj for Python 3, with ctypes only.

It covers what a script needs to find an object another process made and
to read and update it in place: open a segment, look a root up (or wait
for it), views of values, atomic updates of scalars, and JSON.

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

__all__ = ["Error", "Segment", "View", "FOREVER", "BACKEND_SHM", "BACKEND_FILE"]

_lib = ctypes.CDLL(os.environ.get("SHMOBJ_LIBRARY", "libshmobj.so.0"))

FOREVER = -1
BACKEND_SHM = 0
BACKEND_FILE = 1

# enum shmobj_type (stable numbers, part of the format)
NULL, BOOL, INT, UINT, DOUBLE, STR, BYTES, BUFFER, LIST, TUPLE, DICT, SET, STRUCT = range(1, 14)
ETYPE = -11  # SHMOBJ_ETYPE, for errors the binding raises itself

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

# A view as opaque bytes: as many 8-byte words as the library asks for.
_VIEW_WORDS = (_view_size() + 7) // 8


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


class Segment:
    """An attached segment. Close it (or use ``with``) when done."""

    def __init__(self, name, timeout_ns=0, backend=BACKEND_SHM):
        """Open the segment ``name``, waiting up to ``timeout_ns`` for its
        creator (0: fail at once; FOREVER)."""
        self._h = _p()
        _check(_seg_open(name.encode(), backend, timeout_ns, ctypes.byref(self._h)),
               "open " + name)

    def close(self):
        if self._h:
            _seg_close(self._h)
            self._h = _p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

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
        if t in (LIST, TUPLE, SET):
            items = [self[i].to_python() for i in range(len(self))]
            return items if t == LIST else tuple(items) if t == TUPLE else frozenset(items)
        if t == DICT:
            return {self.key(i).get(): self[i].to_python() for i in range(len(self))}
        if t == STRUCT:
            try:
                return {self.key(i).get(): self[i].to_python() for i in range(len(self))}
            except Error:  # fields without names
                return tuple(self[i].to_python() for i in range(len(self)))
        if t == BUFFER:
            return json.loads(self.json())
        return self.get()

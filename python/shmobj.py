"""libshmobj from Python 3: ctypes over the installed libshmobj.so.

No build step: the module is one file that loads the C library and calls
it. It creates and opens segments, builds objects from Python values and
reads them in place through views, updates scalars atomically, shows
buffers (tensors) to numpy without a copy, and uses queues, shared maps,
topics, services, watches and wait-sets.

    import shmobj
    with shmobj.Segment.create("demo", size=1 << 20) as seg:
        ref = seg.put({"name": "boiler-7", "reads": 0, "hist": shmobj.MList()},
                      root="record")
        rec = seg.get("record")
        rec["reads"].add(1)              # atomic, seen by every process
        rec["hist"].append(21.5)         # a growable list
        print(rec.to_python())

Values (``Segment.put``): None, bool, int (int64, or uint64 above), float,
str, bytes and bytearray, list, tuple, dict (keys int, str or bytes), set
and frozenset, nested to any depth; any other object with the buffer
protocol (a numpy array, array.array, memoryview) becomes a buffer of its
dtype and shape. Wrappers name what Python has no type for: ``MList``,
``MDict`` and ``MSet`` (mutable containers, with initial items),
``Struct`` (fields by index, optional names), ``Record`` (a record of a
shape made with ``Segment.shape``), ``Link`` and ``Adopt`` (a weak
reference to, or the taking over of, an object already put).

Tables (``Segment.table``): many records of one shape stored as C struct
rows, laid out as a C compiler lays out a struct of the same fields in the
same order (so a C program's ``struct`` and a numpy structured dtype read
the same rows); ``Table.append`` takes rows as bytes, ``Table.column``
shows a field of every row to numpy in place.

Reads (``Segment.get``) give a ``View``: containers answer ``len``,
``[]``, ``in`` and iteration; items are views again (they live in the
segment and change in place), keys and set members are Python values (they
are immutable). ``View.to_python()`` copies a whole value out.

Topics, services, watches and wait-sets (timeouts in seconds, None: for
ever). ``Segment.topic`` gives a ``Topic`` (``publish``, ``subscribe``,
``stats``); a ``Subscription`` takes ``Message`` objects whose ``data`` is
a memoryview of the bytes in place until ``release()`` (or the end of a
``with`` block). ``Segment.service`` gives a ``Service``: ``call`` returns
the response's bytes (Error EPEERDEAD when the server died holding the
request), ``take`` gives a ``Request`` to ``reply`` to. ``Map.watch(key)``
and ``View.watch()`` give a ``Watch`` (``wait``, ``consume``); a
``WaitSet`` waits on queues, subscriptions, services and watches at once.
Subscriptions, services and watches have ``fileno()`` for select/poll.

    with shmobj.Segment.create("demo", size=1 << 20) as seg:
        t = seg.topic("news", create=True, history=4)
        sub = t.subscribe()
        t.publish(b"hello")
        with sub.take(timeout=1) as msg:
            print(msg.seq, bytes(msg.data))
        m = seg.map("config", create=True)
        w = m.watch("mode")
        ws = shmobj.WaitSet()
        ws.add(sub, "news")
        ws.add(w, "config")
        m["mode"] = b"fast"
        print(ws.wait(timeout=1))        # ['config']
        ws.close()

Lifetime. Every view and handle holds its Segment. ``Segment.close()``
(or the end of its ``with`` block) closes the queue, map, topic,
subscription, service and watch handles opened through it and detaches;
afterwards every call through a view or handle of that segment raises
``Error`` with code ``ESTALE`` (a wait-set with such a member too), and never touches
unmapped memory. Memory given out to Python objects (a numpy array or
memoryview of a buffer, of bytes or of a message block) stays mapped while
any such object lives: the detach itself waits for the last of them. So no
order of closing and dropping crashes. A handle is not shared between
threads while it is being closed.

Errors: every failure raises ``shmobj.Error``, with ``code`` (the negative
SHMOBJ_E* number, also a module constant: ``shmobj.ENOTFOUND``), ``name``
("SHMOBJ_ENOTFOUND") and the library's text of the code.

The library is loaded from the path in ``SHMOBJ_LIBRARY`` or as
``libshmobj.so.0`` on the usual search path (``LD_LIBRARY_PATH``
included).
"""
import ctypes
import json
import os
import sys

__all__ = ["Error", "Segment", "View", "Table", "Queue", "Map", "MList", "MDict",
           "MSet", "Struct", "Record", "Shape", "Link", "Adopt", "Topic", "Subscription",
           "Message", "Service", "Request", "Watch", "WaitSet", "FOREVER",
           "TOPIC_BLOCK", "TOPIC_OVERWRITE", "BACKEND_SHM", "BACKEND_FILE",
           "BACKEND_MEMFD"]

try:
    _lib = ctypes.CDLL(os.environ.get("SHMOBJ_LIBRARY") or "libshmobj.so.0")
except OSError as _e:  # not an Error: the module cannot work at all
    raise ImportError("shmobj: cannot load libshmobj (%s); install the library "
                      "or set SHMOBJ_LIBRARY to its path" % _e) from None

FOREVER = -1
BACKEND_SHM, BACKEND_FILE, BACKEND_MEMFD = 0, 1, 2

# enum shmobj_type and shmobj_type_ref (stable numbers, part of the format)
NULL, BOOL, INT, UINT, DOUBLE, STR, BYTES, BUFFER = 1, 2, 3, 4, 5, 6, 7, 8
LIST, TUPLE, DICT, SET, STRUCT, MLIST, MDICT, MSET = 9, 10, 11, 12, 13, 14, 15, 16
SHAPE, RECORD, LINK, ADOPT, TABLE = 17, 18, 19, 20, 21
TYPE_NAMES = {NULL: "null", BOOL: "bool", INT: "int", UINT: "uint",
              DOUBLE: "double", STR: "str", BYTES: "bytes", BUFFER: "buffer",
              LIST: "list", TUPLE: "tuple", DICT: "dict", SET: "set",
              STRUCT: "struct", MLIST: "mlist", MDICT: "mdict", MSET: "mset",
              SHAPE: "shape", RECORD: "record", LINK: "link", TABLE: "table"}

# enum shmobj_dtype, with the ctypes type of an element and the letters of
# the buffer protocol that map to it
_DTYPES = {1: ctypes.c_int8, 2: ctypes.c_int16, 3: ctypes.c_int32,
           4: ctypes.c_int64, 5: ctypes.c_uint8, 6: ctypes.c_uint16,
           7: ctypes.c_uint32, 8: ctypes.c_uint64, 9: ctypes.c_float,
           10: ctypes.c_double, 11: ctypes.c_bool}
# the struct module's letter of each dtype (native order, as memoryview takes)
_FORMATS = {1: "b", 2: "h", 3: "i", 4: "q", 5: "B", 6: "H", 7: "I", 8: "Q", 9: "f",
            10: "d", 11: "?"}
_NUMPY = {1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "uint8", 6: "uint16",
          7: "uint32", 8: "uint64", 9: "float32", 10: "float64", 11: "bool"}
_SIGNED = {1: 1, 2: 2, 4: 3, 8: 4}
_UNSIGNED = {1: 5, 2: 6, 4: 7, 8: 8}

_p = ctypes.c_void_p
_i64 = ctypes.c_int64
_u64 = ctypes.c_uint64
_size = ctypes.c_size_t
_int = ctypes.c_int
_str = ctypes.c_char_p


def _fn(name, restype, *argtypes):
    """The C function ``name``, called through a wrapper that turns an
    argument ctypes cannot convert into Error EINVAL; ``.raw`` is the
    function itself, for the hot paths (which catch the same)."""
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)

    def call(*args):
        try:
            return f(*args)
        except ctypes.ArgumentError as e:
            raise Error(EINVAL, "%s: %s" % (name, e)) from None
    call.raw = f
    call.__name__ = name
    return call


_strerror = _fn("shmobj_strerror", _str, _int)
_errname = _fn("shmobj_errname", _str, _int)

# Every status code as a module constant: shmobj.ENOTFOUND == -3, ...
ERRORS = {}
for _c in range(-1, -128, -1):
    _n = _errname(_c).decode()
    if _n.endswith("?"):
        break
    ERRORS[_c] = _n
    globals()[_n[len("SHMOBJ_"):]] = _c
del _c, _n


class Error(Exception):
    """A failure of the library: ``code`` is the negative SHMOBJ_E* number,
    ``name`` its name ("SHMOBJ_ESTALE"), ``text`` the library's text of it
    and ``what`` the operation that failed."""

    def __init__(self, code, what=""):
        self.code = code
        self.name = _errname(code).decode()
        self.text = _strerror(code).decode()
        self.what = what
        super().__init__("%s%s (%s)" % (what + ": " if what else "", self.text, self.name))


def _nm(name):
    """A name (of a segment, root, queue, map) for the library."""
    if isinstance(name, str):
        return name.encode()
    if isinstance(name, bytes):
        return name
    raise Error(EINVAL, "a name is a str, not %s" % type(name).__name__)


def _check(rc, what=""):
    if rc != 0:
        raise Error(rc, what)


# ---- C structures ---------------------------------------------------------


class _Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("backend", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("mode", ctypes.c_uint32),
                ("initial_size", _u64), ("max_size", _u64)]


class _Mem(ctypes.Structure):
    # c_char_p: assigning bytes stores their address and keeps them alive
    # with the description (the length is given, NULs inside are fine)
    _fields_ = [("ptr", ctypes.c_char_p), ("len", _size)]


class _Items(ctypes.Structure):
    _fields_ = [("items", _p), ("count", _size), ("names", _p)]


class _Rec(ctypes.Structure):
    _fields_ = [("items", _p), ("count", _size), ("shape", _u64)]


class _Payload(ctypes.Union):
    _fields_ = [("b", _int), ("i", _i64), ("u", _u64), ("d", ctypes.c_double),
                ("s", _Mem), ("c", _Items), ("buf", _p), ("ref", _u64), ("r", _Rec)]


class _Value(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("reserved", ctypes.c_uint32), ("v", _Payload)]


class _BufferDesc(ctypes.Structure):
    _fields_ = [("data", _p), ("nbytes", _size), ("shape", _p), ("strides", _p),
                ("dtype", ctypes.c_uint32), ("ndim", ctypes.c_uint32)]


class _BufferInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("dtype", ctypes.c_uint32),
                ("ndim", ctypes.c_uint32), ("itemsize", ctypes.c_uint32),
                ("data", _p), ("nbytes", _u64), ("shape", _u64 * 8),
                ("strides", _i64 * 8)]


class _Field(ctypes.Structure):
    _fields_ = [("name", _str), ("kind", ctypes.c_uint32),
                ("capacity", ctypes.c_uint32), ("offset", _u64)]


class _TableInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("row_size", ctypes.c_uint32),
                ("fields", ctypes.c_uint32), ("chunks", ctypes.c_uint32),
                ("shape", _u64), ("rows", _u64), ("capacity", _u64)]


class _QueueStats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("capacity", ctypes.c_uint32),
                ("depth", _u64), ("puts", _u64), ("takes", _u64),
                ("skipped", _u64), ("rescued", _u64),
                ("consumers_waiting", ctypes.c_uint32),
                ("producers_waiting", ctypes.c_uint32),
                ("listeners", ctypes.c_uint32), ("armed", ctypes.c_uint32),
                ("retired_blocks", _u64), ("retired_bytes", _u64)]


_PV = ctypes.POINTER(_Value)
_Pi64 = ctypes.POINTER(_i64)
_Pu64 = ctypes.POINTER(_u64)
_Psize = ctypes.POINTER(_size)

_view_size = _fn("shmobj_view_size", _size)
_opts_init = _fn("shmobj_segment_options_init", None, ctypes.POINTER(_Options))
_seg_create = _fn("shmobj_segment_create", _int, _str, ctypes.POINTER(_Options),
                  ctypes.POINTER(_p))
_seg_open = _fn("shmobj_segment_open", _int, _str, ctypes.c_uint, _i64, ctypes.POINTER(_p))
_seg_close = _fn("shmobj_segment_close", None, _p)
_seg_destroy = _fn("shmobj_segment_destroy", _int, _str, ctypes.c_uint)
_root_set = _fn("shmobj_segment_root_set", _int, _p, _str, _u64)
_root_get = _fn("shmobj_segment_root_get", _int, _p, _str, _Pu64)
_root_wait = _fn("shmobj_segment_root_wait", _int, _p, _str, _i64, _Pu64)
_root_del = _fn("shmobj_segment_root_del", _int, _p, _str)
_obj_put = _fn("shmobj_obj_put", _int, _p, _PV, _Pu64)
_obj_free = _fn("shmobj_obj_free", _int, _p, _u64)
_obj_get = _fn("shmobj_obj_get", _int, _p, _u64, _p)
_shape_put = _fn("shmobj_shape_put", _int, _p, ctypes.POINTER(_Field), _size, _Pu64)
_view_type = _fn("shmobj_view_type", _int, _p)
_view_len = _fn("shmobj_view_len", _int, _p, _Psize)
_view_item = _fn("shmobj_view_item", _int, _p, _size, _p)
_view_key = _fn("shmobj_view_key", _int, _p, _size, _p)
_view_index = _fn("shmobj_view_index", _int, _p, _PV, _Psize)
_view_get = _fn("shmobj_view_get", _int, _p, _PV, _p)
_field_get = _fn("shmobj_field_get", _int, _p, _str, _p)
_view_set = _fn("shmobj_view_set", _int, _p, _PV)
_view_json = _fn("shmobj_view_json", _int, _p, _str, _size, _Psize)
_bool_get = _fn("shmobj_bool_get", _int, _p, ctypes.POINTER(_int))
_bool_set = _fn("shmobj_bool_set", _int, _p, _int)
_int_get = _fn("shmobj_int_get", _int, _p, _Pi64)
_int_set = _fn("shmobj_int_set", _int, _p, _i64)
_int_add = _fn("shmobj_int_add", _int, _p, _i64, _Pi64)
_byref = ctypes.byref


def _fast(name):
    """The C function without argtypes, for the counters' hot paths
    (ctypes converts arguments faster then): every argument must be a
    ctypes object (c_int64(), byref(), a view's array)."""
    f = _lib[name]  # a function object of its own
    f.restype = _int
    return f


_int_add_fast = _fast("shmobj_int_add")
_view_type_raw = _view_type.raw
_ONE = _i64(1)


def _i64c(x):
    """c_int64(x), refusing what does not fit (ctypes would cut it)."""
    try:
        if -(1 << 63) <= x < (1 << 63):
            return _i64(x)
    except TypeError:
        raise Error(EINVAL, "%r is not an int" % (x,)) from None
    raise Error(ERANGE, "%d does not fit an int64" % x)
_int_cas = _fn("shmobj_int_cas", _int, _p, _Pi64, _i64)
_uint_get = _fn("shmobj_uint_get", _int, _p, _Pu64)
_uint_set = _fn("shmobj_uint_set", _int, _p, _u64)
_uint_add = _fn("shmobj_uint_add", _int, _p, _u64, _Pu64)
_double_get = _fn("shmobj_double_get", _int, _p, ctypes.POINTER(ctypes.c_double))
_double_set = _fn("shmobj_double_set", _int, _p, ctypes.c_double)
_double_add = _fn("shmobj_double_add", _int, _p, ctypes.c_double,
                  ctypes.POINTER(ctypes.c_double))
_str_get = _fn("shmobj_str_get", _int, _p, ctypes.POINTER(_p), _Psize)
_bytes_get = _fn("shmobj_bytes_get", _int, _p, ctypes.POINTER(_p), _Psize)
_buffer_get = _fn("shmobj_buffer_get", _int, _p, ctypes.POINTER(_BufferInfo))
_view_follow = _fn("shmobj_view_follow", _int, _p, _p)
_link_get = _fn("shmobj_link_get", _int, _p, _Pu64)
_record_shape = _fn("shmobj_record_shape", _int, _p, _Pu64)
_table_put = _fn("shmobj_table_put", _int, _p, _u64, _size, _u64, _Pu64)
_table_append = _fn("shmobj_table_append", _int, _p, _p, _size, _size, _Pu64)
_table_len = _fn("shmobj_table_len", _int, _p, _Pu64)
_table_get = _fn("shmobj_table_get", _int, _p, _u64, _p, _size)
_table_index = _fn("shmobj_table_index", _int, _p, _str, _Psize)
_table_column = _fn("shmobj_table_column_get", _int, _p, _size, _u64,
                    ctypes.POINTER(_BufferInfo))
_table_info = _fn("shmobj_table_info_get", _int, _p, ctypes.POINTER(_TableInfo))
_table_int_get = _fn("shmobj_table_int_get", _int, _p, _u64, _size, _Pi64)
_table_int_add = _fn("shmobj_table_int_add", _int, _p, _u64, _size, _i64, _Pi64)
_table_double_get = _fn("shmobj_table_double_get", _int, _p, _u64, _size,
                        ctypes.POINTER(ctypes.c_double))
_table_double_add = _fn("shmobj_table_double_add", _int, _p, _u64, _size, ctypes.c_double,
                        ctypes.POINTER(ctypes.c_double))
_mlist_append = _fn("shmobj_mlist_append", _int, _p, _PV)
_mlist_insert = _fn("shmobj_mlist_insert", _int, _p, _size, _PV)
_mlist_delete = _fn("shmobj_mlist_delete", _int, _p, _size)
_mlist_set = _fn("shmobj_mlist_set", _int, _p, _size, _PV)
_mlist_get = _fn("shmobj_mlist_get", _int, _p, _size, _p)
_mut_clear = _fn("shmobj_mut_clear", _int, _p)
_mdict_set = _fn("shmobj_mdict_set", _int, _p, _PV, _PV)
_mdict_get = _fn("shmobj_mdict_get", _int, _p, _PV, _p)
_mut_delete = _fn("shmobj_mut_delete", _int, _p, _PV)
_mut_contains = _fn("shmobj_mut_contains", _int, _p, _PV)
_mset_add = _fn("shmobj_mset_add", _int, _p, _PV)
_miter_init = _fn("shmobj_miter_init", _int, _p, _p)
_miter_next = _fn("shmobj_miter_next", _int, _p, _p, _p)
_q_create = _fn("shmobj_queue_open_or_create", _int, _p, _str, ctypes.c_uint32,
                ctypes.c_uint, ctypes.POINTER(_p))
_q_open_timed = _fn("shmobj_queue_open_timed", _int, _p, _str, _i64, ctypes.POINTER(_p))
_q_close = _fn("shmobj_queue_close", None, _p)
_q_destroy = _fn("shmobj_queue_destroy", _int, _p, _str)
_q_put_timed = _fn("shmobj_queue_put_timed", _int, _p, _u64, _i64)
_q_take_timed = _fn("shmobj_queue_take_timed", _int, _p, _Pu64, _i64)
_q_peek_timed = _fn("shmobj_queue_peek_timed", _int, _p, _Pu64, _i64)
_q_count = _fn("shmobj_queue_count", _int, _p, _Pu64)
_q_stats = _fn("shmobj_queue_stats_get", _int, _p, ctypes.POINTER(_QueueStats))
_q_put_tracked = _fn("shmobj_queue_put_tracked", _int, _p, _u64, _i64)
_q_done = _fn("shmobj_queue_done", _int, _p, _u64)
_q_wait_done = _fn("shmobj_queue_wait_done", _int, _p, _u64, _i64)
_q_wait_all = _fn("shmobj_queue_wait_all", _int, _p, _i64)
_q_untrack = _fn("shmobj_queue_untrack", _int, _p, _u64)
_q_put_copy = _fn("shmobj_queue_put_copy", _int, _p, _p, _size, ctypes.c_uint, _i64, _Pu64)
_q_msg_data = _fn("shmobj_queue_msg_data", _int, _p, _u64, ctypes.POINTER(_p), _Psize)
_q_msg_done = _fn("shmobj_queue_msg_done", _int, _p, _u64)
_q_notify_fd = _fn("shmobj_queue_notify_fd", _int, _p, ctypes.POINTER(_int))
_q_notify_arm = _fn("shmobj_queue_notify_arm", _int, _p)
_map_create = _fn("shmobj_map_open_or_create", _int, _p, _str, ctypes.POINTER(_p))
_map_open_timed = _fn("shmobj_map_open_timed", _int, _p, _str, _i64, ctypes.POINTER(_p))
_map_close = _fn("shmobj_map_close", None, _p)
_map_get = _fn("shmobj_map_get", _int, _p, _str, _size, _p, _size, _Psize)
_map_set = _fn("shmobj_map_set", _int, _p, _str, _size, _str, _size)
_map_del = _fn("shmobj_map_del", _int, _p, _str, _size)
_map_contains = _fn("shmobj_map_contains", _int, _p, _str, _size)
_map_add = _fn("shmobj_map_add", _int, _p, _str, _size, _i64, _Pi64)
_map_count = _fn("shmobj_map_count", _int, _p, _Pu64)
_map_clear = _fn("shmobj_map_clear", _int, _p)
_map_iter_open = _fn("shmobj_map_iter_open", _int, _p, ctypes.POINTER(_p))
_map_iter_next = _fn("shmobj_map_iter_next", _int, _p, ctypes.POINTER(_p), _Psize,
                     ctypes.POINTER(_p), _Psize)
_map_iter_close = _fn("shmobj_map_iter_close", None, _p)

# A view as opaque bytes: as many 8-byte words as the library asks for
# (the struct's fields are private and may change).
_VIEW_T = ctypes.c_uint64 * ((_view_size() + 7) // 8)
# An iteration cursor (shmobj_miter, caller memory): a view and two words.
_MITER_T = ctypes.c_uint64 * ((_view_size() + 7) // 8 + 2)


class _Key(ctypes.Structure):
    """shmobj_key: a key prepared once (it points to its bytes, kept here)."""
    _fields_ = [("type", ctypes.c_uint32), ("reserved_", ctypes.c_uint32),
                ("i", _i64), ("ptr", _p), ("len", _u64), ("hash_", _u64),
                ("word_", _u64)]


_keys = {}  # prepared keys by Python key, for add_at (1 and True: one key)
_PK = ctypes.POINTER(_Key)
_item_int_add = _fn("shmobj_item_int_add", _int, _p, _size, _i64, _Pi64)
_key_int_add = _fn("shmobj_view_key_int_add", _int, _p, _PK, _i64, _Pi64)
_mdict_int_add = _fn("shmobj_mdict_int_add", _int, _p, _PK, _i64, _Pi64)
_key_init = _fn("shmobj_key_init", _int, _PK, _PV)
_item_int_add_fast = _fast("shmobj_item_int_add")
_key_int_add_fast = _fast("shmobj_view_key_int_add")
_mdict_int_add_fast = _fast("shmobj_mdict_int_add")


def _prepare_key(key):
    b = _Builder()
    v = b.key(key)
    k = _Key()
    _check(_key_init(ctypes.byref(k), ctypes.byref(v)), "key %r" % (key,))
    k._keep = v  # the key's bytes, which k points to
    kref = ctypes.byref(k)  # holds k
    if len(_keys) < 16384:  # the first keys only: no churn
        _keys[key] = kref
    return kref


# ---- wrappers for what Python has no type for ------------------------------


class MList(list):
    """A growable list (SHMOBJ_TYPE_MLIST), put with these initial items."""


class MDict(dict):
    """A mutable dict (SHMOBJ_TYPE_MDICT), put with these initial items."""


class MSet(set):
    """A mutable set (SHMOBJ_TYPE_MSET), put with these initial members."""


class Struct:
    """A struct: fields by index, with names (distinct strings) or without."""

    def __init__(self, values, names=None):
        self.values = list(values)
        self.names = None if names is None else [str(n) for n in names]


class Link:
    """A weak reference to an object already put (SHMOBJ_VAL_LINK)."""

    def __init__(self, ref):
        self.ref = int(ref)

    def __eq__(self, other):
        return isinstance(other, Link) and other.ref == self.ref

    def __hash__(self):
        return hash(("link", self.ref))

    def __repr__(self):
        return "Link(%#x)" % self.ref


class Adopt:
    """An object already put, taken over by the container being put
    (SHMOBJ_VAL_ADOPT): freeing the container frees it."""

    def __init__(self, ref):
        self.ref = int(ref)


class Shape:
    """A shape made by ``Segment.shape``: ``ref`` and the field ``names`` in
    order."""

    def __init__(self, ref, names):
        self.ref, self.names = ref, list(names)

    def __repr__(self):
        return "Shape(%#x, %r)" % (self.ref, self.names)


class Record:
    """A record of a shape: ``values`` a list in the shape's field order, or
    a dict by field name."""

    def __init__(self, shape, values):
        if not isinstance(shape, Shape):
            raise Error(EINVAL, "Record: the shape is a Shape from Segment.shape()")
        if isinstance(values, dict):
            try:
                values = [values[n] for n in shape.names]
            except KeyError as e:
                raise Error(EINVAL, "Record: no value for field %s" % e) from None
        self.shape, self.values = shape, list(values)


_KINDS = {None: NULL, bool: BOOL, int: INT, float: DOUBLE, str: STR, bytes: BYTES,
          Link: LINK}


# ---- building values ---------------------------------------------------------


def _dtype_of(mv):
    """The shmobj dtype of a memoryview's format."""
    fmt = mv.format.lstrip("@=<")
    if len(fmt) == 1:
        c = fmt
        if c == "?":
            return 11
        if c == "f" and mv.itemsize == 4:
            return 9
        if c == "d" and mv.itemsize == 8:
            return 10
        if c in "bhilq" and mv.itemsize in _SIGNED:
            return _SIGNED[mv.itemsize]
        if c in "BHILQ" and mv.itemsize in _UNSIGNED:
            return _UNSIGNED[mv.itemsize]
    raise Error(EINVAL, "a buffer of format %r has no shmobj dtype" % mv.format)


class _Builder:
    """Turns a Python value into a shmobj_value tree in ctypes memory; keeps
    everything the tree points to alive until the put is done; notes the
    mutable containers whose initial items are added after the put."""

    def __init__(self):
        self.keep = []
        self.fills = []  # (path from the top, wrapper)

    def value(self, x):
        v = _Value()
        self.fill(v, x, ())
        return v

    def key(self, x):
        """A dict key or set member: int, str or bytes."""
        v = _Value()
        if isinstance(x, int):
            self._int(v, x)
        elif isinstance(x, str):
            self._mem(v, STR, x.encode())
        elif isinstance(x, (bytes, bytearray, memoryview)):
            self._mem(v, BYTES, bytes(x))
        else:
            raise Error(EINVAL, "a key is an int, str or bytes, not %s" % type(x).__name__)
        return v

    def _int(self, v, x):
        if -(1 << 63) <= x < (1 << 63):
            v.type, v.v.i = INT, x
        elif 0 <= x < (1 << 64):
            v.type, v.v.u = UINT, x
        else:
            raise Error(ERANGE, "%d does not fit 64 bits" % x)

    def _mem(self, v, t, raw):
        v.type = t
        v.v.s.ptr = raw
        v.v.s.len = len(raw)

    def _items(self, v, t, xs, path):
        arr = (_Value * max(len(xs), 1))()
        self.keep.append(arr)
        for i, x in enumerate(xs):
            self.fill(arr[i], x, path + (i,))
        v.type = t
        v.v.c.items = ctypes.addressof(arr)
        v.v.c.count = len(xs)

    def fill(self, v, x, path):
        if x is None:
            v.type = NULL
        elif isinstance(x, bool):
            v.type, v.v.b = BOOL, int(x)
        elif isinstance(x, int):
            self._int(v, x)
        elif isinstance(x, float):
            v.type, v.v.d = DOUBLE, x
        elif isinstance(x, str):
            self._mem(v, STR, x.encode())
        elif isinstance(x, (bytes, bytearray)):
            self._mem(v, BYTES, bytes(x))
        elif isinstance(x, (MList, MDict, MSet)):
            v.type = MLIST if isinstance(x, MList) else MDICT if isinstance(x, MDict) else MSET
            if x:
                self.fills.append((path, x))
        elif isinstance(x, (list, tuple)):
            self._items(v, LIST if isinstance(x, list) else TUPLE, x, path)
        elif isinstance(x, dict):
            arr = (_Value * max(2 * len(x), 1))()
            self.keep.append(arr)
            for i, (k, val) in enumerate(x.items()):
                kv = self.key(k)
                self.keep.append(kv)  # holds the key's bytes
                ctypes.memmove(ctypes.byref(arr, 2 * i * ctypes.sizeof(_Value)),
                               ctypes.byref(kv), ctypes.sizeof(_Value))
                self.fill(arr[2 * i + 1], val, path + (("key", k),))
            v.type = DICT
            v.v.c.items = ctypes.addressof(arr)
            v.v.c.count = len(x)
        elif isinstance(x, (set, frozenset)):
            arr = (_Value * max(len(x), 1))()
            self.keep.append(arr)
            for i, k in enumerate(x):
                kv = self.key(k)
                self.keep.append(kv)  # holds the member's bytes
                ctypes.memmove(ctypes.byref(arr, i * ctypes.sizeof(_Value)),
                               ctypes.byref(kv), ctypes.sizeof(_Value))
            v.type = SET
            v.v.c.items = ctypes.addressof(arr)
            v.v.c.count = len(x)
        elif isinstance(x, Struct):
            self._items(v, STRUCT, x.values, path)
            if x.names is not None:
                if len(x.names) != len(x.values):
                    raise Error(EINVAL, "Struct: %d names for %d fields"
                                % (len(x.names), len(x.values)))
                names = (_str * max(len(x.names), 1))(*[n.encode() for n in x.names])
                self.keep.append(names)
                v.v.c.names = ctypes.addressof(names)
        elif isinstance(x, Record):
            self._items(v, RECORD, x.values, path)
            count = v.v.c.count
            v.v.r.shape, v.v.r.count = x.shape.ref, count
        elif isinstance(x, Link):
            v.type, v.v.ref = LINK, x.ref
        elif isinstance(x, Adopt):
            v.type, v.v.ref = ADOPT, x.ref
        elif isinstance(x, View) and x._t == BUFFER:
            self.fill(v, x.memoryview(), path)
        else:
            try:
                mv = memoryview(x)
            except TypeError:
                raise Error(EINVAL, "cannot store a %s" % type(x).__name__) from None
            self._buffer(v, mv)

    def _buffer(self, v, mv):
        dtype = _dtype_of(mv)
        if not mv.c_contiguous:
            mv = memoryview(mv.tobytes()).cast("B").cast(mv.format.lstrip("@=<") or "B",
                                                           mv.shape)
        shape = (_u64 * max(mv.ndim, 1))(*mv.shape)
        desc = _BufferDesc()
        desc.nbytes = mv.nbytes
        desc.shape = ctypes.addressof(shape)
        desc.dtype, desc.ndim = dtype, mv.ndim
        if mv.nbytes:
            if mv.readonly:
                raw = ctypes.c_char_p(mv.tobytes())
                self.keep.append(raw)
                desc.data = ctypes.cast(raw, _p).value
            else:
                flat = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B"))
                self.keep.append(flat)
                desc.data = ctypes.addressof(flat)
        self.keep += [shape, desc]
        v.type = BUFFER
        v.v.buf = ctypes.addressof(desc)

    def finish(self, view):
        """Add the initial items of the mutable containers, through view
        (the value just put)."""
        for path, w in self.fills:
            t = view
            for step in path:
                t = t._at(step[1] if isinstance(step, tuple) else step)
            if isinstance(w, MList):
                for x in w:
                    t.append(x)
            elif isinstance(w, MDict):
                for k, x in w.items():
                    t[k] = x
            else:
                for k in w:
                    t.add(k)


_keyvals = {}  # key descriptions by Python key (str, int, bytes)


def _keyval(key):
    """The description of a dict key or set member, made once per key."""
    c = key.__class__
    v = _keyvals.get(key) if c is str or c is int or c is bytes else None
    if v is None:
        b = _Builder()
        v = b.key(key)
        if c is str or c is int or c is bytes:
            if len(_keyvals) < 16384:  # the first keys only: no churn
                _keyvals[key] = v
    return v


def _scalar_value(x):
    """The description of None, a bool, an int of 64 bits or a float; None
    for anything else (the builder's work)."""
    c = x.__class__
    v = _Value()
    if c is int and -(1 << 63) <= x < (1 << 63):
        v.type, v.v.i = INT, x
    elif c is float:
        v.type, v.v.d = DOUBLE, x
    elif c is bool:
        v.type, v.v.b = BOOL, x
    elif x is None:
        v.type = NULL
    else:
        return None
    return v


# ---- segments ----------------------------------------------------------------


class _Pin:
    """Held by memory given out to Python (a ctypes array behind a numpy
    array or memoryview): the segment stays mapped while it lives."""

    __slots__ = ("seg",)

    def __init__(self, seg):
        self.seg = seg
        seg._pins += 1

    def __del__(self):
        try:
            self.seg._unpin()
        except Exception:  # interpreter shutdown: the process unmaps it
            pass


class _Closing:
    """``with`` and garbage collection close what ``close()`` closes."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Segment(_Closing):
    """An attached segment: ``Segment(name)`` opens one, ``Segment.create``
    makes one. Use ``with`` or call ``close()``. See the module's text for
    what close does to views, queues, maps and exported memory."""

    def __init__(self, name, timeout_ns=0, backend=BACKEND_SHM):
        """Open the segment ``name``, waiting up to ``timeout_ns`` for its
        creator (0: fail at once; FOREVER: no bound)."""
        h = _p()
        _check(_seg_open(_nm(name), backend, timeout_ns, ctypes.byref(h)),
               "open " + str(name))
        self._attach(name, h.value)

    def _attach(self, name, h):
        self.name = name
        self._h = h        # None once close() was called
        self._real = h     # the C handle, until it is really closed
        self._pins = 0
        self._handles = {}  # id(cell) -> (cell, closer): queues and maps

    @classmethod
    def create(cls, name, size=1 << 20, max_size=0, mode=0o600, replace=False,
               backend=BACKEND_SHM, prefault=False):
        """Create the segment ``name`` of ``size`` bytes (growing up to
        ``max_size`` when larger), with permission bits ``mode``; with
        ``replace``, replace a segment of that name."""
        o = _Options()
        _opts_init(ctypes.byref(o))
        o.backend, o.mode, o.initial_size, o.max_size = backend, mode, size, max_size
        o.flags = (1 if replace else 0) | (2 if prefault else 0)
        h = _p()
        _check(_seg_create(_nm(name), ctypes.byref(o), ctypes.byref(h)),
               "create " + str(name))
        self = cls.__new__(cls)
        self._attach(name, h.value)
        return self

    @staticmethod
    def destroy(name, backend=BACKEND_SHM):
        """Remove a segment's name (attached processes keep it)."""
        _check(_seg_destroy(_nm(name), backend), "destroy " + str(name))

    # ---- lifetime -------------------------------------------------------
    @property
    def closed(self):
        return self._h is None

    def _handle(self):
        h = self._h
        if h is None:
            raise Error(ESTALE, "segment %s is closed" % self.name)
        return h

    def _adopt(self, h, closer):
        """Register the C handle of a queue or map: close() closes it."""
        cell = [h]
        self._handles[id(cell)] = (cell, closer)
        return cell

    def _release(self, cell):
        """Forget a registered handle and return it for its object to
        close (None when close() closed it already)."""
        h = cell[0]
        if h:
            cell[0] = None
            self._handles.pop(id(cell), None)
        return h

    def close(self):
        """Close the queues and maps opened through this segment and
        detach; views, queues and maps raise Error ESTALE afterwards.
        Memory exported to numpy arrays and memoryviews stays mapped until
        the last of them is released. Closing twice does nothing."""
        if self._h is None:
            return
        self._h = None
        for cell, closer in list(self._handles.values()):
            h = cell[0]
            cell[0] = None
            if h:
                closer(h)
        self._handles.clear()
        if self._pins == 0:
            self._detach()

    def _detach(self):
        h, self._real = self._real, None
        if h:
            _seg_close(h)

    def _unpin(self):
        self._pins -= 1
        if self._pins == 0 and self._h is None:
            self._detach()

    def __repr__(self):
        return "<shmobj.Segment %r%s>" % (self.name, " closed" if self.closed else "")

    # ---- roots ----------------------------------------------------------
    def root(self, name, timeout_ns=0):
        """The reference published under ``name``; with a timeout, waits
        (asleep) for it to appear."""
        h, ref = self._handle(), _u64()
        if timeout_ns == 0:
            _check(_root_get(h, _nm(name), ctypes.byref(ref)), "root " + str(name))
        else:
            _check(_root_wait(h, _nm(name), timeout_ns, ctypes.byref(ref)),
                   "root " + str(name))
        return ref.value

    def root_set(self, name, ref):
        """Publish ``ref`` under ``name`` (replacing what it named)."""
        _check(_root_set(self._handle(), _nm(name), ref), "root_set " + str(name))

    def root_del(self, name):
        """Remove the root ``name`` (the object stays)."""
        _check(_root_del(self._handle(), _nm(name)), "root_del " + str(name))

    # ---- objects --------------------------------------------------------
    def put(self, value, root=None):
        """Write a value (see the module's text for the kinds) into the
        segment; returns its reference, owned by the caller. With ``root``,
        also publish it under that name."""
        h = self._handle()
        b = _Builder()
        v = b.value(value)
        ref = _u64()
        _check(_obj_put(h, ctypes.byref(v), ctypes.byref(ref)), "put")
        try:
            if b.fills:
                b.finish(self.get(ref.value))
            if root is not None:
                self.root_set(root, ref.value)
        except BaseException:
            _obj_free(h, ref.value)
            raise
        return ref.value

    def get(self, ref, timeout_ns=0):
        """A view of the object ``ref`` names (a reference, or the name of
        a root, waited for up to ``timeout_ns``)."""
        if isinstance(ref, str):
            ref = self.root(ref, timeout_ns)
        v = View(self)
        _check(_obj_get(self._handle(), ref, v._v), "get")
        v._t = _view_type(v._v)
        if v._t == TABLE:
            t = Table(self)
            t._v, t._t = v._v, TABLE
            return t
        return v

    def free(self, ref):
        """Free an object and its whole tree (views of it give ESTALE)."""
        _check(_obj_free(self._handle(), ref), "free")

    def shape(self, fields):
        """Make a shape: ``fields`` a list of (name, kind) or (name, kind,
        capacity), kind one of bool, int, float, str, bytes, Link, None
        (any object) or a type number (shmobj.UINT, ...); a fourth item is
        the field's offset in a C struct (a table's row)."""
        arr = (_Field * len(fields))()
        names = []
        for i, f in enumerate(fields):
            name, kind = f[0], f[1]
            kind = _KINDS.get(kind, kind)
            if not isinstance(kind, int):
                raise Error(EINVAL, "shape: bad kind for field %r" % name)
            arr[i].name = _nm(name)
            arr[i].kind = kind
            arr[i].capacity = f[2] if len(f) > 2 else 0
            arr[i].offset = f[3] if len(f) > 3 else 0
            names.append(name)
        ref = _u64()
        _check(_shape_put(self._handle(), arr, len(fields), ctypes.byref(ref)), "shape")
        return Shape(ref.value, names)

    def table(self, fields, capacity=1024, root=None):
        """Make a table: ``fields`` a list of (name, kind) or (name, kind,
        capacity) as for ``shape``, of the kinds a row holds (bool, int,
        shmobj.UINT, float, Link, and str or bytes with a capacity). Each
        field is placed as a C compiler places a struct's member (bool one
        byte, the others 8 bytes aligned to 8, str and bytes arrays of their
        capacity), so the rows are the bytes of the C struct of the same
        fields in the same order. ``capacity``: the rows of the first chunk.
        With ``root``, also publish it under that name. Returns the Table;
        its shape and reference are ``table.shape_ref`` and ``table.ref``."""
        placed, off, align = [], 0, 1
        for f in fields:
            name, kind = f[0], _KINDS.get(f[1], f[1])
            cap = f[2] if len(f) > 2 else 0
            size = {BOOL: 1, STR: cap, BYTES: cap}.get(kind, 8)
            a = 8 if size == 8 and kind not in (STR, BYTES) else 1
            off = (off + a - 1) // a * a
            placed.append((name, kind, cap, off))
            off, align = off + size, max(align, a)
        row_size = max((off + align - 1) // align * align, 1)
        shape = self.shape(placed)
        ref = _u64()
        _check(_table_put(self._handle(), shape.ref, row_size, capacity, ctypes.byref(ref)),
               "table")
        if root is not None:
            self.root_set(root, ref.value)
        return self.get(ref.value)

    def queue(self, name, **kw):
        """``Queue(self, name, ...)``."""
        return Queue(self, name, **kw)

    def map(self, name, **kw):
        """``Map(self, name, ...)``."""
        return Map(self, name, **kw)

    def topic(self, name, **kw):
        """``Topic(self, name, ...)``."""
        return Topic(self, name, **kw)

    def service(self, name, **kw):
        """``Service(self, name, ...)``."""
        return Service(self, name, **kw)


# ---- views -------------------------------------------------------------------

_SCALARS = (NULL, BOOL, INT, UINT, DOUBLE, STR, BYTES)
_LISTS = (LIST, TUPLE, MLIST)
_KEYED = (DICT, MDICT, RECORD, STRUCT)


class View:
    """A view of one value in a segment, read in place: scalars read the
    current value on every call. Items are views again; keys and set
    members are Python values. Holds its segment."""

    __slots__ = ("_seg", "_v", "_t", "__weakref__")

    def __init__(self, seg):
        self._seg = seg
        self._v = _VIEW_T()
        self._t = 0

    def _new(self):
        """An empty view of the same segment (checks it is open)."""
        if self._seg._h is None:
            raise Error(ESTALE, "segment %s is closed" % self._seg.name)
        return View(self._seg)

    def _ok(self):
        if self._seg._h is None:
            raise Error(ESTALE, "segment %s is closed" % self._seg.name)
        return self._v

    @property
    def type(self):
        """The kind of value: shmobj.INT, shmobj.MDICT, ..."""
        return self._t

    @property
    def segment(self):
        return self._seg

    def __repr__(self):
        return "<shmobj.View %s>" % TYPE_NAMES.get(self._t, self._t)

    # ---- containers -----------------------------------------------------
    def __len__(self):
        n = _size()
        _check(_view_len(self._ok(), ctypes.byref(n)), "len")
        return n.value

    def _fin(self, item, rc, what):
        _check(rc, what)
        item._t = _view_type(item._v)
        return item

    def _at(self, key):
        """The item at position or key ``key``, as a view."""
        t, item = self._t, self._new()
        if isinstance(key, int) and not isinstance(key, bool) and t in (LIST, TUPLE, STRUCT,
                                                                         RECORD, MLIST):
            if key < 0:
                key += len(self)
                if key < 0:
                    raise Error(ERANGE, "item %d" % (key - len(self)))
            if t == MLIST:
                return self._fin(item, _mlist_get(self._v, key, item._v), "item %d" % key)
            return self._fin(item, _view_item(self._v, key, item._v), "item %d" % key)
        if t == MDICT:
            rc = _mdict_get.raw(self._v, _byref(_keyval(key)), item._v)
            if rc:
                raise Error(rc, "get %r" % (key,))
            item._t = _view_type_raw(item._v)
            return item
        if isinstance(key, str):
            return self._fin(item, _field_get(self._v, key.encode(), item._v),
                             "get %r" % key)
        k = _Builder().key(key)
        return self._fin(item, _view_get(self._v, ctypes.byref(k), item._v),
                         "get %r" % (key,))

    def __getitem__(self, key):
        """Item ``key`` of a list, tuple or struct (an int, negative from
        the end), or the value under a key of a dict or a field of a
        record or named struct: a view."""
        return self._at(key)

    def get(self, key=None, default=None):
        """Without a key: the value as a Python scalar (None, bool, int,
        float, str, bytes). With one: ``self[key]``, or ``default`` when
        the key is absent (as dict.get)."""
        if key is None:
            return self._scalar()
        try:
            return self._at(key)
        except Error as e:
            if e.code in (ENOTFOUND, ERANGE):
                return default
            raise

    @property
    def value(self):
        """The scalar value (as get())."""
        return self._scalar()

    def __setitem__(self, key, x):
        """Store ``x`` at ``key``: a scalar slot takes a value of its own
        kind (an atomic store); an object slot any value (the old one is
        freed); a mutable dict any key; a mutable list any position below
        its length."""
        t = self._t
        if t == MDICT:
            k, v, b = _keyval(key), _scalar_value(x), None
            if v is None:
                b = _Builder()
                v = b.value(x)
            _check(_mdict_set(self._ok(), _byref(k), _byref(v)), "set %r" % (key,))
            if b is not None and b.fills:
                b.finish(self._at(key))
        elif t == MLIST:
            if key < 0:
                key += len(self)
            b = _Builder()
            v = b.value(x)
            _check(_mlist_set(self._ok(), key, ctypes.byref(v)), "set %d" % key)
            if b.fills:
                b.finish(self._at(key))
        else:
            self._at(key).set(x)

    def __delitem__(self, key):
        """Delete a key of a mutable dict, or an item of a mutable list."""
        t = self._t
        if t == MLIST:
            if key < 0:
                key += len(self)
            _check(_mlist_delete(self._ok(), key), "delete %d" % key)
        elif t in (MDICT, MSET):
            k = _Builder().key(key)
            _check(_mut_delete(self._ok(), ctypes.byref(k)), "delete %r" % (key,))
        else:
            raise Error(EACCES, "delete: a %s has fixed items" % TYPE_NAMES.get(t, t))

    def __contains__(self, key):
        """A key of a dict or record, a member of a set, an item (equal as
        Python values) of a list or tuple."""
        t = self._t
        if t in (MDICT, MSET):
            try:
                k = _Builder().key(key)
            except Error:
                return False
            rc = _mut_contains(self._ok(), ctypes.byref(k))
            if rc == ENOTFOUND:
                return False
            _check(rc, "contains")
            return True
        if t in (DICT, SET, RECORD, STRUCT):
            try:
                k = _Builder().key(key)
            except Error:
                return False
            i = _size()
            rc = _view_index(self._ok(), ctypes.byref(k), ctypes.byref(i))
            if rc in (ENOTFOUND, ETYPE):
                return False
            _check(rc, "contains")
            return True
        return any(item.to_python() == key for item in self._items())

    def _items(self):
        """Views of the items of a list, tuple, struct or record, in
        order (a mutable list: up to its length when each is read)."""
        i = 0
        while True:
            try:
                yield self._at(i)
            except Error as e:
                if e.code == ERANGE:
                    return
                raise
            i += 1

    def _names(self):
        n = len(self)
        for i in range(n):
            yield self.key(i).get()

    def _miter(self):
        it = _MITER_T()
        _check(_miter_init(self._ok(), it), "iterate")
        while True:
            k, v = self._new(), self._new()
            rc = _miter_next(it, k._v, v._v)
            if rc == ENOTFOUND:
                return
            _check(rc, "iterate")
            k._t, v._t = _view_type(k._v), _view_type(v._v)
            yield k, v

    def __iter__(self):
        """Lists, tuples and unnamed structs: views of the items. Dicts,
        records and named structs: their keys. Sets: their members (keys
        and members as Python values). A mutable container may be changed
        by other processes meanwhile: every key present for the whole
        iteration comes exactly once."""
        t = self._t
        if t in (MDICT, MSET):
            return (k._scalar() for k, _ in self._miter())
        if t in (DICT, SET, RECORD):
            return self._names()
        if t == STRUCT:
            try:
                self.key(0) if len(self) else None
                return self._names()
            except Error:
                pass
        if t in (LIST, TUPLE, MLIST, STRUCT):
            return self._items()
        raise Error(ETYPE, "iterate: a %s is not a container" % TYPE_NAMES.get(t, t))

    def keys(self):
        return list(iter(self))

    def items(self):
        """(key, value view) pairs of a dict, record or named struct;
        (member, None) of a set."""
        t = self._t
        if t in (MDICT, MSET):
            return [(k._scalar(), None if t == MSET else v) for k, v in self._miter()]
        n = len(self)
        return [(self.key(i).get(), None if t == SET else self._at_index(i))
                for i in range(n)]

    def values(self):
        return [v for _, v in self.items()]

    def _at_index(self, i):
        item = self._new()
        return self._fin(item, _view_item(self._v, i, item._v), "item %d" % i)

    def key(self, i):
        """Key i of a dict, member i of a set, name of field i of a struct
        or record: a view."""
        k = self._new()
        return self._fin(k, _view_key(self._v, i, k._v), "key %d" % i)

    # ---- mutable containers ---------------------------------------------
    def append(self, x):
        """Append to a growable list. A nested MList/MDict/MSet with items
        gets them right after, through the list's last item: fill it
        yourself when other processes append at the same time."""
        b = _Builder()
        v = b.value(x)
        _check(_mlist_append(self._ok(), ctypes.byref(v)), "append")
        if b.fills:
            b.finish(self._at(-1))

    def insert(self, i, x):
        """Insert before position i of a growable list."""
        v = _Builder().value(x)
        _check(_mlist_insert(self._ok(), i, ctypes.byref(v)), "insert")

    def clear(self):
        """Remove every item of a mutable list, dict or set."""
        _check(_mut_clear(self._ok()), "clear")

    def add(self, x):
        """An int, uint or double: add x atomically and return the value
        before. A mutable set: add the member x (present already: nothing
        changes)."""
        t = self._t
        if self._seg._h is None:
            raise Error(ESTALE, "segment %s is closed" % self._seg.name)
        try:
            if t == INT:
                old = _i64()
                rc = _int_add_fast(self._v, _ONE if x == 1 else _i64c(x), _byref(old))
            elif t == DOUBLE:
                old = ctypes.c_double()
                rc = _double_add.raw(self._v, x, _byref(old))
            elif t == UINT:
                old = _u64()
                rc = _uint_add.raw(self._v, x & ((1 << 64) - 1), _byref(old))
            elif t == MSET:
                k = _Builder().key(x)
                rc = _mset_add(self._v, _byref(k))
                if rc != EEXIST and rc:
                    raise Error(rc, "add")
                return None
            else:
                old = _i64()
                rc = _int_add.raw(self._v, x, _byref(old))  # the library says why not
        except (ctypes.ArgumentError, TypeError):
            raise Error(EINVAL, "add: %r is not a number" % (x,)) from None
        if rc:
            raise Error(rc, "add")
        return old.value

    def add_at(self, key, delta=1):
        """Add to the int under ``key`` atomically, in one call and without
        a view of the item; returns the value before. A mutable dict takes
        its adds this way (views of its values are read-only); a fixed
        dict, record or named struct by key or field name, a list or
        struct by position. The fast path for counters."""
        if self._seg._h is None:
            raise Error(ESTALE, "segment %s is closed" % self._seg.name)
        t = self._t
        old = _i64()
        try:
            d = _ONE if delta == 1 else _i64c(delta)
            k = _keys.get(key) if key.__class__ is str else None
            if k is not None or not isinstance(key, int) or t == MDICT or t == DICT:
                if k is None:
                    k = _prepare_key(key)
                rc = (_mdict_int_add_fast if t == MDICT else _key_int_add_fast)(
                    self._v, k, d, _byref(old))
            else:
                rc = _item_int_add_fast(self._v, _size(key), d, _byref(old))
        except (ctypes.ArgumentError, TypeError):
            raise Error(EINVAL, "add_at: %r is not an int" % (delta,)) from None
        if rc:
            raise Error(rc, "add_at %r" % (key,))
        return old.value

    def cas(self, expected, desired):
        """Compare and swap an int: True when it held ``expected`` and now
        holds ``desired``."""
        e = _i64(expected)
        rc = _int_cas(self._ok(), ctypes.byref(e), desired)
        if rc == EBUSY:
            return False
        _check(rc, "cas")
        return True

    # ---- scalars --------------------------------------------------------
    def _scalar(self):
        t, v = self._t, self._ok()
        if t == INT:
            x = _i64()
            _check(_int_get(v, ctypes.byref(x)), "get")
            return x.value
        if t == DOUBLE:
            d = ctypes.c_double()
            _check(_double_get(v, ctypes.byref(d)), "get")
            return d.value
        if t == NULL:
            return None
        if t == BOOL:
            b = _int()
            _check(_bool_get(v, ctypes.byref(b)), "get")
            return bool(b.value)
        if t == UINT:
            x = _u64()
            _check(_uint_get(v, ctypes.byref(x)), "get")
            return x.value
        if t in (STR, BYTES):
            ptr, n = _p(), _size()
            _check((_str_get if t == STR else _bytes_get)(v, ctypes.byref(ptr),
                                                         ctypes.byref(n)), "get")
            raw = ctypes.string_at(ptr.value, n.value) if n.value else b""
            return raw.decode() if t == STR else raw
        raise Error(ETYPE, "get: a %s is not a scalar" % TYPE_NAMES.get(t, t))

    def set(self, x):
        """Store a scalar of the slot's own kind (atomic), or replace the
        value of an object slot by any value (the old one is freed: no
        process may still read it)."""
        t, v = self._t, self._ok()
        if t == INT:
            _check(_int_set(v, _i64c(x).value), "set")
        elif t == DOUBLE:
            _check(_double_set(v, x), "set")
        elif t == BOOL:
            _check(_bool_set(v, 1 if x else 0), "set")
        elif t == UINT:
            if isinstance(x, int) and not 0 <= x < (1 << 64):
                raise Error(ERANGE, "%d does not fit a uint64" % x)
            _check(_uint_set(v, x), "set")
        else:
            b = _Builder()
            val = b.value(x)
            _check(_view_set(v, ctypes.byref(val)), "set")
            self._t = _view_type(v)
            if b.fills:
                b.finish(self)

    # ---- references -----------------------------------------------------
    def follow(self):
        """The target of a link (Error ESTALE once it was freed); any other
        view is returned as it is."""
        t = self._new()
        return self._fin(t, _view_follow(self._v, t._v), "follow")

    @property
    def link(self):
        """The reference a link holds."""
        r = _u64()
        _check(_link_get(self._ok(), ctypes.byref(r)), "link")
        return r.value

    # ---- buffers --------------------------------------------------------
    def _buffer_info(self):
        info = _BufferInfo()
        info.struct_size = ctypes.sizeof(_BufferInfo)
        _check(_buffer_get(self._ok(), ctypes.byref(info)), "buffer")
        return info

    def _export(self, ctype, address):
        """A ctypes object over segment memory that keeps it mapped."""
        arr = ctype.from_address(address)
        arr._shmobj_pin = _Pin(self._seg)
        return arr

    @property
    def shape(self):
        info = self._buffer_info()
        return tuple(info.shape[i] for i in range(info.ndim))

    @property
    def dtype(self):
        """The buffer's element type as numpy names it ("float32")."""
        return _NUMPY.get(self._buffer_info().dtype, "?")

    def memoryview(self):
        """The data in place, no copy: of a buffer, a writable memoryview
        of its dtype and shape (numpy.asarray() of it, or of the view
        itself, reads and writes the shared memory); of a str or bytes, a
        read-only memoryview of its bytes. The segment stays mapped while
        the memoryview (or anything made from it) lives."""
        t = self._t
        if t in (STR, BYTES):
            ptr, n = _p(), _size()
            _check((_str_get if t == STR else _bytes_get)(self._ok(), ctypes.byref(ptr),
                                                         ctypes.byref(n)), "memoryview")
            if n.value == 0:
                return memoryview(b"")
            return memoryview(self._export(ctypes.c_char * n.value, ptr.value)).toreadonly()
        info = self._buffer_info()
        shape = [info.shape[i] for i in range(info.ndim)]
        if info.dtype not in _FORMATS:
            raise Error(ECORRUPT, "buffer of unknown dtype %d" % info.dtype)
        c_order, step = True, info.itemsize
        for i in reversed(range(info.ndim)):
            if shape[i] > 1 and info.strides[i] != step:
                c_order = False
            step *= shape[i]
        if not c_order:
            raise Error(ENOTSUP, "memoryview: the buffer is not in C order "
                        "(numpy.asarray() of the view reads it in place)")
        if info.nbytes == 0:
            return memoryview(b"").cast(_FORMATS[info.dtype], shape)
        raw = self._export(ctypes.c_char * info.nbytes, info.data)
        return memoryview(raw).cast("B").cast(_FORMATS[info.dtype], shape)

    def __buffer__(self, flags):
        """memoryview(view) from Python 3.12 on: as memoryview()."""
        return self.memoryview()

    def __array__(self, dtype=None, copy=None):
        """numpy.asarray(view): the buffer's data in place, no copy (the
        segment stays mapped while the array lives)."""
        import numpy
        info = self._buffer_info()
        if info.dtype not in _NUMPY:
            raise Error(ECORRUPT, "buffer of unknown dtype %d" % info.dtype)
        shape = tuple(info.shape[i] for i in range(info.ndim))
        strides = tuple(info.strides[i] for i in range(info.ndim))
        raw = self._export(ctypes.c_char * max(info.nbytes, 1), info.data)
        arr = numpy.ndarray(shape, dtype=_NUMPY[info.dtype], buffer=raw, strides=strides)
        if dtype is not None and numpy.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError("shmobj: a change of dtype needs a copy")
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    # ---- whole values ---------------------------------------------------
    def json(self):
        """The value as compact JSON text (buffers without their data)."""
        v, n = self._ok(), _size()
        rc = _view_json(v, None, 0, ctypes.byref(n))
        if rc not in (0, ENOBUFS):
            _check(rc, "json")
        buf = ctypes.create_string_buffer(n.value + 1)
        _check(_view_json(v, buf, n.value + 1, ctypes.byref(n)), "json")
        return buf.value.decode()

    def to_python(self):
        """A copy of the value as Python objects: list (a growable list
        too), tuple, dict (a mutable one too, records and named structs),
        frozenset (sets), Struct (unnamed structs), Link (links, not
        followed), a memoryview holding a copy of a buffer's data, scalars;
        a shape as its JSON description."""
        t = self._t
        if t in _SCALARS:
            return self._scalar()
        if t in (LIST, MLIST):
            return [i.to_python() for i in self._items()]
        if t == TUPLE:
            return tuple(i.to_python() for i in self._items())
        if t in (DICT, RECORD):
            return {k: v.to_python() for k, v in self.items()}
        if t == SET:
            return frozenset(self._names())
        if t == MDICT:
            return {k._scalar(): v.to_python() for k, v in self._miter()}
        if t == MSET:
            return frozenset(k._scalar() for k, _ in self._miter())
        if t == STRUCT:
            try:
                return {k: v.to_python() for k, v in self.items()}
            except Error as e:
                if e.code != ETYPE:
                    raise
                return Struct([i.to_python() for i in self._items()])
        if t == BUFFER:
            info = self._buffer_info()
            shape = [info.shape[i] for i in range(info.ndim)]
            return memoryview(self.memoryview().tobytes()).cast(_FORMATS[info.dtype],
                                                                shape)
        if t == LINK:
            return Link(self.link)
        return json.loads(self.json())


# ---- queues -------------------------------------------------------------------


class Table(View):
    """A table (``Segment.table``, or ``Segment.get`` of one): rows of one
    shape as the bytes of a C struct. ``len`` is its rows; ``append`` adds
    rows from bytes (one row, or several back to back, e.g. a numpy
    structured array's ``tobytes()``), ``row(i)`` copies one out as bytes,
    ``add``/``get`` update and read a field of a row atomically, and
    ``column(name)`` is a numpy array of a field over the rows, in place."""

    __slots__ = ()

    def __len__(self):
        n = _u64()
        _check(_table_len(self._ok(), ctypes.byref(n)), "len")
        return n.value

    def info(self):
        """A dict: row_size, fields, chunks, rows, capacity, shape (ref)."""
        i = _TableInfo()
        i.struct_size = ctypes.sizeof(_TableInfo)
        _check(_table_info(self._ok(), ctypes.byref(i)), "table info")
        return {k: getattr(i, k) for k in ("row_size", "fields", "chunks", "rows",
                                            "capacity", "shape")}

    @property
    def row_size(self):
        return self.info()["row_size"]

    def append(self, rows):
        """Append rows given as bytes (a multiple of the row size); returns
        the index of the first."""
        mv = memoryview(rows).cast("B")
        rs = self.row_size
        if len(mv) == 0 or len(mv) % rs:
            raise Error(EINVAL, "append: %d bytes are no whole rows of %d" % (len(mv), rs))
        buf = (ctypes.c_char * len(mv)).from_buffer_copy(mv)
        first = _u64()
        _check(_table_append(self._ok(), buf, len(mv) // rs, rs, ctypes.byref(first)),
               "append")
        return first.value

    def row(self, i):
        """A copy of row ``i`` as bytes."""
        rs = self.row_size
        buf = ctypes.create_string_buffer(rs)
        _check(_table_get(self._ok(), i, buf, rs), "row %d" % i)
        return buf.raw

    def field(self, name):
        """The position of field ``name``."""
        f = _size()
        _check(_table_index(self._ok(), name.encode(), ctypes.byref(f)), "field %r" % name)
        return f.value

    def _pos(self, name):
        return name if isinstance(name, int) else self.field(name)

    def get(self, i, name=None, default=None):
        """The int or float field ``name`` of row ``i``, read atomically."""
        f, x, d = self._pos(name), _i64(), ctypes.c_double()
        rc = _table_int_get(self._ok(), i, f, ctypes.byref(x))
        if rc == 0:
            return x.value
        if rc == ETYPE:
            _check(_table_double_get(self._v, i, f, ctypes.byref(d)), "get %r" % (name,))
            return d.value
        _check(rc, "get %r" % (name,))

    def add(self, i, name, delta=1):
        """Add to the int or float field ``name`` of row ``i`` atomically;
        returns the value before."""
        f = self._pos(name)
        if isinstance(delta, float):
            d = ctypes.c_double()
            _check(_table_double_add(self._ok(), i, f, delta, ctypes.byref(d)), "add")
            return d.value
        x = _i64()
        _check(_table_int_add(self._ok(), i, f, _i64c(delta), ctypes.byref(x)), "add")
        return x.value

    def _runs(self, name):
        f, n, first = self._pos(name), len(self), 0
        while first < n:
            info = _BufferInfo()
            info.struct_size = ctypes.sizeof(_BufferInfo)
            _check(_table_column(self._ok(), f, first, ctypes.byref(info)), "column")
            yield info
            first += info.shape[0]

    def column(self, name):
        """Field ``name`` of every row as a numpy array: in place (no copy,
        writable shared memory) when the rows lie in one chunk, else a copy
        of the runs joined."""
        import numpy
        parts = []
        for info in self._runs(name):
            shape = tuple(info.shape[i] for i in range(info.ndim))
            strides = tuple(info.strides[i] for i in range(info.ndim))
            raw = self._export(ctypes.c_char * max(info.nbytes, 1), info.data)
            parts.append(numpy.ndarray(shape, dtype=_NUMPY[info.dtype], buffer=raw,
                                       strides=strides))
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return numpy.zeros(0)
        return numpy.concatenate(parts)


class Queue(_Closing):
    """A handle of a queue: references between processes, FIFO. Holds its
    segment; ``close()`` (or ``with``) gives the handle back."""

    def __init__(self, seg, name, timeout_ns=0, create=False, capacity=64):
        """Open the queue ``name``, waiting up to ``timeout_ns`` for it to
        be created; with ``create``, open it or create it (``capacity``
        messages, a power of two), whichever process comes first."""
        self._seg, self.name = seg, name
        h = _p()
        if create:
            rc = _q_create(seg._handle(), _nm(name), capacity, 0, ctypes.byref(h))
        else:
            rc = _q_open_timed(seg._handle(), _nm(name), timeout_ns, ctypes.byref(h))
        _check(rc, "queue " + str(name))
        self._cell = seg._adopt(h.value, _q_close)

    def _h(self):
        h = self._cell[0]
        if h is None:
            raise Error(ESTALE, "queue %s is closed" % self.name)
        return h

    @property
    def segment(self):
        return self._seg

    def close(self):
        h = self._seg._release(self._cell)
        if h:
            _q_close(h)

    @staticmethod
    def destroy(seg, name):
        """Remove the queue ``name`` (its handles' calls give ESTALE)."""
        _check(_q_destroy(seg._handle(), _nm(name)), "destroy queue " + str(name))

    def put(self, ref, timeout_ns=FOREVER, tracked=False):
        """Put a reference, waiting up to ``timeout_ns`` for room; False
        when the queue stayed full. ``tracked``: the consumer's done()
        wakes this handle's wait_done()."""
        rc = (_q_put_tracked if tracked else _q_put_timed)(self._h(), ref, timeout_ns)
        if rc in (ETIMEDOUT, EFULL):
            return False
        _check(rc, "put")
        return True

    def put_value(self, value, timeout_ns=FOREVER, tracked=False):
        """Put a Python value into the segment and its reference into the
        queue; returns the reference (freed here when the queue stayed
        full: then None). Untracked, the consumer owns it."""
        ref = self._seg.put(value)
        try:
            ok = self.put(ref, timeout_ns, tracked)
        except BaseException:
            self._seg.free(ref)
            raise
        if not ok:
            self._seg.free(ref)
            return None
        return ref

    def take(self, timeout_ns=FOREVER):
        """The oldest message (a reference), waiting up to ``timeout_ns``;
        None when none came in time."""
        ref = _u64()
        rc = _q_take_timed(self._h(), ctypes.byref(ref), timeout_ns)
        if rc in (ETIMEDOUT, EEMPTY):
            return None
        _check(rc, "take")
        return ref.value

    def try_take(self):
        return self.take(0)

    def peek(self, timeout_ns=0):
        """The oldest message without taking it (None when there is none
        within ``timeout_ns``)."""
        ref = _u64()
        rc = _q_peek_timed(self._h(), ctypes.byref(ref), timeout_ns)
        if rc in (ETIMEDOUT, EEMPTY):
            return None
        _check(rc, "peek")
        return ref.value

    def __len__(self):
        n = _u64()
        _check(_q_count(self._h(), ctypes.byref(n)), "count")
        return n.value

    def stats(self):
        """The queue's figures as a dict (capacity, depth, puts, takes, ...)."""
        s = _QueueStats()
        s.struct_size = ctypes.sizeof(_QueueStats)
        _check(_q_stats(self._h(), ctypes.byref(s)), "stats")
        return {f: getattr(s, f) for f, _ in _QueueStats._fields_ if f != "struct_size"}

    # ---- completion -----------------------------------------------------
    def done(self, ref):
        """Mark a reference its sender put tracked done: wakes the sender,
        frees nothing; do not use the reference afterwards."""
        _check(_q_done(self._h(), ref), "done")

    def wait_done(self, ref, timeout_ns=FOREVER):
        """Sender: wait until the consumer marked ``ref`` done; True then
        (the reference is the sender's again), False on timeout."""
        rc = _q_wait_done(self._h(), ref, timeout_ns)
        if rc == ETIMEDOUT:
            return False
        _check(rc, "wait_done")
        return True

    def wait_all(self, timeout_ns=FOREVER):
        """Sender: wait until every tracked reference is done; True then."""
        rc = _q_wait_all(self._h(), timeout_ns)
        if rc == ETIMEDOUT:
            return False
        _check(rc, "wait_all")
        return True

    def untrack(self, ref):
        """Sender: stop tracking ``ref``; True when it was done already."""
        rc = _q_untrack(self._h(), ref)
        if rc == EBUSY:
            return False
        _check(rc, "untrack")
        return True

    # ---- message blocks -------------------------------------------------
    def put_bytes(self, data, timeout_ns=FOREVER):
        """Copy ``data`` into a message block and put it; returns its
        reference, or None when the queue stayed full."""
        raw = bytes(data)
        ref = _u64()
        rc = _q_put_copy(self._h(), ctypes.cast(ctypes.c_char_p(raw), _p), len(raw), 0,
                         timeout_ns, ctypes.byref(ref))
        if rc in (ETIMEDOUT, EFULL):
            return None
        _check(rc, "put_bytes")
        return ref.value

    def msg_data(self, ref):
        """The bytes of a message block, in place (a memoryview, valid
        until msg_done(); the segment stays mapped while it lives)."""
        ptr, n = _p(), _size()
        _check(_q_msg_data(self._h(), ref, ctypes.byref(ptr), ctypes.byref(n)), "msg_data")
        if n.value == 0:
            return memoryview(b"")
        arr = (ctypes.c_char * n.value).from_address(ptr.value)
        arr._shmobj_pin = _Pin(self._seg)
        return memoryview(arr).cast("B")

    def msg_done(self, ref):
        """Give a message block back (frees an untracked one)."""
        _check(_q_msg_done(self._h(), ref), "msg_done")

    # ---- event loops ----------------------------------------------------
    def fileno(self):
        """A descriptor that becomes readable when messages wait (for
        select, poll, asyncio's add_reader): call arm() before each wait,
        then take with a timeout of 0 until None."""
        fd = _int()
        _check(_q_notify_fd(self._h(), ctypes.byref(fd)), "fileno")
        return fd.value

    def arm(self):
        """Empty the descriptor and ask for a wake-up at the next put
        (readable at once when a message already waits)."""
        _check(_q_notify_arm(self._h()), "arm")


# ---- maps -------------------------------------------------------------------------


def _b(x):
    if isinstance(x, str):
        return x.encode()
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    raise Error(EINVAL, "map keys and values are str or bytes, not %s" % type(x).__name__)


class Map(_Closing):
    """A shared map: keys and values are bytes (a str is encoded as UTF-8);
    dict-like. Holds its segment; ``close()`` (or ``with``) gives the
    handle back."""

    def __init__(self, seg, name, timeout_ns=0, create=False):
        """Open the map ``name``, waiting up to ``timeout_ns`` for it; with
        ``create``, open it or create it, whichever process comes first."""
        self._seg, self.name = seg, name
        h = _p()
        if create:
            rc = _map_create(seg._handle(), _nm(name), ctypes.byref(h))
        else:
            rc = _map_open_timed(seg._handle(), _nm(name), timeout_ns, ctypes.byref(h))
        _check(rc, "map " + str(name))
        self._cell = seg._adopt(h.value, _map_close)
        self._cap = 64  # bytes of a first read (grows with the values, to 4 KiB)

    def _h(self):
        h = self._cell[0]
        if h is None:
            raise Error(ESTALE, "map %s is closed" % self.name)
        return h

    @property
    def segment(self):
        return self._seg

    def close(self):
        h = self._seg._release(self._cell)
        if h:
            _map_close(h)

    def get(self, key, default=None):
        """A copy of the value (bytes), or ``default`` when absent."""
        h, k = self._h(), _b(key)
        n = _size()
        cap = self._cap
        while True:
            buf = ctypes.create_string_buffer(cap)  # per call: threads may share the map
            rc = _map_get(h, k, len(k), buf, cap, ctypes.byref(n))
            if rc == ENOTFOUND:
                return default
            if rc == ENOBUFS:  # the length needed is in n: read again
                cap = max(n.value, 1)
                self._cap = min(cap, 4096)
                continue
            _check(rc, "get")
            return buf.raw[:n.value]

    def __getitem__(self, key):
        v = self.get(key, None)
        if v is None:
            raise Error(ENOTFOUND, "map %s: key %r" % (self.name, key))
        return v

    def set(self, key, value):
        k, v = _b(key), _b(value)
        _check(_map_set(self._h(), k, len(k), v, len(v)), "set")

    __setitem__ = set

    def delete(self, key):
        """Remove a key; False when it was absent."""
        k = _b(key)
        rc = _map_del(self._h(), k, len(k))
        if rc == ENOTFOUND:
            return False
        _check(rc, "delete")
        return True

    def __delitem__(self, key):
        if not self.delete(key):
            raise Error(ENOTFOUND, "map %s: key %r" % (self.name, key))

    def __contains__(self, key):
        k = _b(key)
        rc = _map_contains(self._h(), k, len(k))
        if rc == ENOTFOUND:
            return False
        _check(rc, "contains")
        return True

    def add(self, key, delta=1):
        """Add to an 8-byte integer value atomically (an absent key is
        created holding ``delta``); returns the value after the add."""
        k = _b(key)
        out = _i64()
        _check(_map_add(self._h(), k, len(k), delta, ctypes.byref(out)), "add")
        return out.value

    def __len__(self):
        n = _u64()
        _check(_map_count(self._h(), ctypes.byref(n)), "count")
        return n.value

    def clear(self):
        _check(_map_clear(self._h()), "clear")

    def items(self):
        """(key, value) pairs, copied: every key present for the whole
        iteration comes exactly once."""
        it = _p()
        _check(_map_iter_open(self._h(), ctypes.byref(it)), "iterate")
        out = []
        try:
            k, kn, v, vn = _p(), _size(), _p(), _size()
            err = 0
            while True:
                rc = _map_iter_next(it, ctypes.byref(k), ctypes.byref(kn),
                                    ctypes.byref(v), ctypes.byref(vn))
                if rc == ENOTFOUND:
                    break
                if rc != 0:  # the cursor has moved past what failed
                    err = err or rc
                    continue
                out.append((ctypes.string_at(k.value, kn.value) if kn.value else b"",
                            ctypes.string_at(v.value, vn.value) if vn.value else b""))
        finally:
            _map_iter_close(it)
        _check(err, "iterate")
        return out

    def keys(self):
        return [k for k, _ in self.items()]

    def values(self):
        return [v for _, v in self.items()]

    def __iter__(self):
        return iter(self.keys())


# ---- topics, services, watches, wait-sets ------------------------------------

TOPIC_BLOCK, TOPIC_OVERWRITE = 0, 1
_SERVICE_OBJECT, _SERVICE_BYTES = 1, 2


class _TopicConfig(ctypes.Structure):
    _fields_ = [("capacity", ctypes.c_uint32), ("history", ctypes.c_uint32),
                ("subscribers", ctypes.c_uint32), ("policy", ctypes.c_uint32)]


class _TopicMsg(ctypes.Structure):
    _fields_ = [("data", _p), ("len", _u64), ("ref", _u64), ("seq", _u64),
                ("missed", _u64)]


class _TopicStats(ctypes.Structure):
    _fields_ = [("published", _u64), ("retained", _u64), ("capacity", ctypes.c_uint32),
                ("history", ctypes.c_uint32), ("subscribers", ctypes.c_uint32),
                ("loans", ctypes.c_uint32), ("max_lag", _u64), ("missed", _u64),
                ("spares", ctypes.c_uint32)]


class _ServiceMsg(ctypes.Structure):
    _fields_ = [("ref", _u64), ("data", _p), ("len", _size), ("flags", ctypes.c_uint),
                ("call", _u64)]


_PP = ctypes.POINTER(_p)
_topic_cfg_init = _fn("shmobj_topic_config_init", None, ctypes.POINTER(_TopicConfig))
_topic_create = _fn("shmobj_topic_open_or_create", _int, _p, _str,
                    ctypes.POINTER(_TopicConfig), _PP)
_topic_open = _fn("shmobj_topic_open", _int, _p, _str, _PP)
_topic_open_timed = _fn("shmobj_topic_open_timed", _int, _p, _str, _i64, _PP)
_topic_close = _fn("shmobj_topic_close", None, _p)
_topic_destroy = _fn("shmobj_topic_destroy", _int, _p, _str)
_topic_stats = _fn("shmobj_topic_stats_get", _int, _p, ctypes.POINTER(_TopicStats))
_topic_publish = _fn("shmobj_topic_publish", _int, _p, _p, _u64, _i64)
_topic_subscribe = _fn("shmobj_topic_subscribe", _int, _p, _PP)
_topic_unsubscribe = _fn("shmobj_topic_unsubscribe", None, _p)
_topic_take = _fn("shmobj_topic_take", _int, _p, ctypes.POINTER(_TopicMsg), _i64)
_topic_release = _fn("shmobj_topic_release", _int, _p, ctypes.POINTER(_TopicMsg))
_topic_notify_fd = _fn("shmobj_topic_notify_fd", _int, _p, ctypes.POINTER(_int))
_topic_notify_arm = _fn("shmobj_topic_notify_arm", _int, _p)
_svc_open_or_create = _fn("shmobj_service_open_or_create", _int, _p, _str, ctypes.c_uint32,
                          ctypes.c_uint, _PP)
_svc_open = _fn("shmobj_service_open", _int, _p, _str, _i64, _PP)
_svc_close = _fn("shmobj_service_close", None, _p)
_svc_destroy = _fn("shmobj_service_destroy", _int, _p, _str)
_PSM = ctypes.POINTER(_ServiceMsg)
_svc_call = _fn("shmobj_service_call", _int, _p, _PSM, _i64, _PSM)
_svc_release = _fn("shmobj_service_release", _int, _p, _PSM)
_svc_take = _fn("shmobj_service_take", _int, _p, _i64, _PSM)
_svc_reply = _fn("shmobj_service_reply", _int, _p, _PSM, _PSM)
_svc_pending = _fn("shmobj_service_pending", _int, _p, ctypes.POINTER(ctypes.c_uint32))
_svc_notify_fd = _fn("shmobj_service_notify_fd", _int, _p, ctypes.POINTER(_int))
_svc_notify_arm = _fn("shmobj_service_notify_arm", _int, _p)
_watch_map_key = _fn("shmobj_watch_map_key", _int, _p, _str, _size, _PP)
_watch_container = _fn("shmobj_watch_container", _int, _p, _PP)
_watch_fd = _fn("shmobj_watch_fd", _int, _p, ctypes.POINTER(_int))
_watch_arm = _fn("shmobj_watch_arm", _int, _p)
_watch_consume = _fn("shmobj_watch_consume", _int, _p)
_watch_wait = _fn("shmobj_watch_wait", _int, _p, _i64)
_watch_close = _fn("shmobj_watch_close", None, _p)
_ws_create = _fn("shmobj_waitset_create", _int, _PP)
_ws_destroy = _fn("shmobj_waitset_destroy", None, _p)
_ws_add_queue = _fn("shmobj_waitset_add_queue", _int, _p, _p, _p)
_ws_add_topic = _fn("shmobj_waitset_add_topic", _int, _p, _p, _p)
_ws_add_service = _fn("shmobj_waitset_add_service", _int, _p, _p, _p)
_ws_add_watch = _fn("shmobj_waitset_add_watch", _int, _p, _p, _p)
_ws_remove = _fn("shmobj_waitset_remove", _int, _p, _p)
_ws_wait = _fn("shmobj_waitset_wait", _int, _p, _i64, _PP, _size, _Psize)


def _ns(timeout):
    """A timeout in seconds (None or negative: for ever) in nanoseconds."""
    if timeout is None:
        return FOREVER
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise Error(EINVAL, "a timeout is seconds (int or float) or None, not %r"
                    % (timeout,))
    if timeout != timeout:
        raise Error(EINVAL, "a timeout is not NaN")
    if timeout < 0 or timeout * 1e9 >= (1 << 63):
        return FOREVER
    return int(timeout * 1e9)


def _inplace(seg, ptr, n, hold):
    """``n`` bytes at ``ptr`` in ``seg`` as a memoryview that keeps the
    segment mapped, and ``hold`` alive, while it (or a slice of it) lives."""
    if n == 0:
        return memoryview(b"")
    arr = (ctypes.c_char * n).from_address(ptr)
    arr._shmobj_pin = _Pin(seg)
    arr._shmobj_hold = hold
    return memoryview(arr).cast("B")


class _Hold:
    """A message taken (``m``) and how to give it back: given back when the
    last of its Message (or Request) and its memoryview goes, unless it
    was given back before (then ``m`` is None)."""

    __slots__ = ("give", "m")

    def __init__(self, give, m):
        self.give, self.m = give, m

    def take(self):
        m, self.m = self.m, None
        return m

    def __del__(self):
        m = self.take()
        if m is not None:
            try:
                self.give(m)
            except Exception:  # its handle was closed: that gave it back
                pass


def _outbytes(data):
    """A Python bytes-like as (bytes, length) for the library."""
    if isinstance(data, str):
        raw = data.encode()
    else:
        try:
            raw = data if isinstance(data, bytes) else memoryview(data).tobytes()
        except TypeError:
            raise Error(EINVAL, "bytes wanted, not %s" % type(data).__name__) from None
    return raw, len(raw)


class _Handle(_Closing):
    """A C handle registered with its segment (closed with it)."""

    _kind = "handle"

    def _h(self):
        h = self._cell[0]
        if h is None:
            raise Error(ESTALE, "%s %s is closed" % (self._kind, self.name))
        return h

    @property
    def closed(self):
        return self._cell[0] is None

    @property
    def segment(self):
        return self._seg

    def close(self):
        h = self._seg._release(self._cell)
        if h:
            self._closer(h)

    def __repr__(self):
        return "<shmobj.%s %r%s>" % (type(self).__name__, self.name,
                                     " closed" if self.closed else "")


class Topic(_Handle):
    """A handle of a topic: publish/subscribe, every subscriber gets every
    message, a late joiner first the last ``history`` kept. Holds its
    segment; ``close()`` (or ``with``) gives the handle back."""

    _kind = "topic"
    _closer = staticmethod(_topic_close)

    def __init__(self, seg, name, create=False, capacity=256, history=0,
                 subscribers=1024, policy=TOPIC_BLOCK, timeout=0):
        """Open the topic ``name``, waiting up to ``timeout`` seconds for
        it; with ``create``, open it or create it with ``capacity`` ring
        slots (a power of two, more than ``history``), ``history``
        messages kept for late joiners, at most ``subscribers``, and the
        ``policy`` for a full ring (TOPIC_BLOCK or TOPIC_OVERWRITE)."""
        self._seg, self.name = seg, name
        h = _p()
        if create:
            cfg = _TopicConfig()
            _topic_cfg_init(ctypes.byref(cfg))
            for f, x in (("capacity", capacity), ("history", history),
                         ("subscribers", subscribers), ("policy", policy)):
                if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < 1 << 32:
                    raise Error(EINVAL, "topic %s: bad %s %r" % (name, f, x))
                setattr(cfg, f, x)
            rc = _topic_create(seg._handle(), _nm(name), ctypes.byref(cfg), ctypes.byref(h))
        else:
            t = _ns(timeout)
            if t == 0:  # ENOTFOUND, as a queue or a map says
                rc = _topic_open(seg._handle(), _nm(name), ctypes.byref(h))
            else:
                rc = _topic_open_timed(seg._handle(), _nm(name), t, ctypes.byref(h))
        _check(rc, "topic " + str(name))
        self._cell = seg._adopt(h.value, _topic_close)

    @staticmethod
    def destroy(seg, name):
        """Remove the topic ``name`` (its handles' calls give ESTALE)."""
        _check(_topic_destroy(seg._handle(), _nm(name)), "destroy topic " + str(name))

    def publish(self, data, timeout=None):
        """Publish a copy of ``data`` (bytes-like, or str as UTF-8), waiting
        up to ``timeout`` seconds (None: for ever) for room under
        TOPIC_BLOCK; False when there was none in time."""
        raw, n = _outbytes(data)
        rc = _topic_publish(self._h(), ctypes.cast(ctypes.c_char_p(raw), _p), n, _ns(timeout))
        if rc in (ETIMEDOUT, EFULL):
            return False
        _check(rc, "publish")
        return True

    def subscribe(self):
        """Join: a Subscription that gets the messages kept for late
        joiners, then every message published after."""
        return Subscription(self)

    def stats(self):
        """The topic's figures as a dict (published, retained, capacity,
        history, subscribers, loans, max_lag, missed, spares)."""
        s = _TopicStats()
        _check(_topic_stats(self._h(), ctypes.byref(s)), "stats")
        return {f: getattr(s, f) for f, _ in _TopicStats._fields_}


class Message:
    """A message taken from a subscription: ``data`` its bytes in place (a
    memoryview, valid until ``release()``), ``seq`` its place in the
    topic's order, ``missed`` the messages lost just before it (overwrite
    policy). ``bytes(msg)`` copies it. Release it (or use ``with``): a
    subscriber holding messages holds the publishers back."""

    __slots__ = ("_sub", "_hold", "data", "seq", "missed")

    def __init__(self, sub, m):
        self._sub = sub
        self._hold = _Hold(sub._give, m)
        self.data = _inplace(sub._seg, m.data, m.len, self._hold)
        self.seq, self.missed = m.seq, m.missed

    def __bytes__(self):
        return self.data.tobytes()

    def __len__(self):
        return len(self.data)

    def release(self):
        """Give the message back; its ``data`` is released too (reading
        it afterwards raises ValueError). Releasing twice does nothing.
        A message dropped unreleased is released once neither it nor its
        ``data`` is referenced any more."""
        if self._hold.m is None:
            return
        h = self._sub._h()
        m = self._hold.take()
        try:
            self.data.release()
        except BufferError:  # a buffer of it is exported: leave it
            pass
        _check(_topic_release(h, ctypes.byref(m)), "release")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._sub.closed:  # unsubscribing released it
            self._hold.take()
            return
        self.release()

    def __repr__(self):
        live = self._hold.m is not None
        return "<shmobj.Message seq=%d len=%d%s>" % (
            self.seq, len(self.data) if live else 0, "" if live else " released")


class Subscription(_Handle):
    """A subscriber of a topic. ``close()`` (or ``with``) leaves the
    topic, releasing the messages it holds."""

    _kind = "subscription"
    _closer = staticmethod(_topic_unsubscribe)

    def __init__(self, topic):
        self._seg, self.name, self.topic = topic._seg, topic.name, topic
        h = _p()
        _check(_topic_subscribe(topic._h(), ctypes.byref(h)), "subscribe " + str(self.name))
        self._cell = self._seg._adopt(h.value, _topic_unsubscribe)

    def _give(self, m):
        _topic_release(self._h(), ctypes.byref(m))

    def take(self, timeout=None):
        """The next message (a Message), waiting up to ``timeout`` seconds
        (None: for ever); None when none came in time."""
        m = _TopicMsg()
        rc = _topic_take(self._h(), ctypes.byref(m), _ns(timeout))
        if rc in (ETIMEDOUT, EEMPTY):
            return None
        _check(rc, "take")
        return Message(self, m)

    def try_take(self):
        """The next message, or None at once."""
        return self.take(0)

    def fileno(self):
        """A descriptor that becomes readable when a message waits (for
        select, poll, asyncio's add_reader): call arm() before each wait,
        then try_take() until None."""
        fd = _int()
        _check(_topic_notify_fd(self._h(), ctypes.byref(fd)), "fileno")
        return fd.value

    def arm(self):
        """Empty the descriptor and ask for a wake-up at the next message
        (readable at once when one already waits)."""
        _check(_topic_notify_arm(self._h()), "arm")


class Request:
    """A request taken by a server: ``data`` its bytes in place (a
    memoryview, valid until answered or released; None for a request that
    carries an object: then ``ref``). Answer with ``reply()``, or give it
    back unanswered with ``release()`` (the caller gets ENOTFOUND)."""

    __slots__ = ("_svc", "_hold", "data", "ref")

    def __init__(self, svc, m):
        self._svc = svc
        self._hold = _Hold(svc._give, m)
        self.ref = m.ref
        self.data = (_inplace(svc._seg, m.data, m.len, self._hold)
                     if m.flags & _SERVICE_BYTES else None)

    def __bytes__(self):
        if self.data is None:
            raise Error(ETYPE, "the request carries an object, not bytes")
        return self.data.tobytes()

    def _done(self):
        self._hold.take()
        if self.data is not None:
            try:
                self.data.release()
            except BufferError:
                pass

    def reply(self, data):
        """Answer with a copy of ``data`` (bytes-like, or str as UTF-8).
        A request dropped unanswered is given back (as ``release()``) once
        neither it nor its ``data`` is referenced any more."""
        raw, n = _outbytes(data)
        h = self._svc._h()
        m = self._hold.m
        if m is None:
            raise Error(EINVAL, "the request was answered or released already")
        resp = _ServiceMsg(flags=_SERVICE_BYTES, len=n)
        resp.data = ctypes.cast(ctypes.c_char_p(raw), _p)
        _check(_svc_reply(h, ctypes.byref(m), ctypes.byref(resp)), "reply")
        self._done()

    def release(self):
        """Give the request back unanswered (its caller gets ENOTFOUND).
        Does nothing once answered or released."""
        m = self._hold.m
        if m is None:
            return
        _check(_svc_release(self._svc._h(), ctypes.byref(m)), "release")
        self._done()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._svc.closed:
            self._hold.take()
            return
        self.release()


class Service(_Handle):
    """A handle of a service: request/response between processes, for its
    clients (``call``) and its servers (``take``, then ``reply``). Holds its
    segment; ``close()`` (or ``with``) gives the handle back."""

    _kind = "service"
    _closer = staticmethod(_svc_close)

    def __init__(self, seg, name, create=False, capacity=64, timeout=0):
        """Open the service ``name``, waiting up to ``timeout`` seconds for
        it; with ``create``, create it (``capacity`` calls may wait, a
        power of two), or open it when it exists already."""
        self._seg, self.name = seg, name
        h = _p()
        if create:
            if isinstance(capacity, bool) or not isinstance(capacity, int) \
                    or not 0 <= capacity < 1 << 32:
                raise Error(EINVAL, "service %s: bad capacity %r" % (name, capacity))
            rc = _svc_open_or_create(seg._handle(), _nm(name), capacity, 0, ctypes.byref(h))
        else:
            rc = _svc_open(seg._handle(), _nm(name), _ns(timeout), ctypes.byref(h))
        _check(rc, "service " + str(name))
        self._cell = seg._adopt(h.value, _svc_close)

    def _give(self, m):
        _svc_release(self._h(), ctypes.byref(m))

    @staticmethod
    def destroy(seg, name):
        """Remove the service ``name`` (its handles' calls give ESTALE)."""
        _check(_svc_destroy(seg._handle(), _nm(name)), "destroy service " + str(name))

    def call(self, data, timeout=None):
        """Send ``data`` (bytes-like, or str as UTF-8) and wait up to
        ``timeout`` seconds (None: for ever) for the answer; returns the
        response's bytes (copied; the response is given back). Raises
        Error: ETIMEDOUT (no answer in time), EPEERDEAD (the server died
        holding the request), ENOTFOUND (the server gave it back), ..."""
        raw, n = _outbytes(data)
        h = self._h()
        t = _ns(timeout)
        if t == 0:
            raise Error(EINVAL, "call: a timeout of 0 cannot be met")
        req = _ServiceMsg(flags=_SERVICE_BYTES, len=n)
        req.data = ctypes.cast(ctypes.c_char_p(raw), _p)
        resp = _ServiceMsg()
        _check(_svc_call(h, ctypes.byref(req), t, ctypes.byref(resp)), "call " + str(self.name))
        try:
            if resp.flags & _SERVICE_BYTES:
                return ctypes.string_at(resp.data, resp.len) if resp.len else b""
            raise Error(ETYPE, "call: the response is not bytes")
        finally:
            _svc_release(h, ctypes.byref(resp))

    def take(self, timeout=None):
        """Server: the next request (a Request), waiting up to ``timeout``
        seconds (None: for ever); None when none came in time."""
        m = _ServiceMsg()
        rc = _svc_take(self._h(), _ns(timeout), ctypes.byref(m))
        if rc in (ETIMEDOUT, EEMPTY):
            return None
        _check(rc, "take")
        return Request(self, m)

    def try_take(self):
        return self.take(0)

    def pending(self):
        """Calls outstanding (waiting, being served or answered)."""
        n = ctypes.c_uint32()
        _check(_svc_pending(self._h(), ctypes.byref(n)), "pending")
        return n.value

    def fileno(self):
        """A descriptor that becomes readable when calls wait: call arm()
        before each wait, then try_take() until None."""
        fd = _int()
        _check(_svc_notify_fd(self._h(), ctypes.byref(fd)), "fileno")
        return fd.value

    def arm(self):
        """Empty the descriptor and ask for a wake-up at the next call."""
        _check(_svc_notify_arm(self._h()), "arm")


class Watch(_Handle):
    """Being woken when a map's key or a mutable container changes
    (``Map.watch``, ``View.watch``). Changes are counted, not described:
    read the value again. A watch belongs to the process and thread that
    made it. Closed with its segment."""

    _kind = "watch"
    _closer = staticmethod(_watch_close)

    def __init__(self, seg, name, h):
        self._seg, self.name = seg, name
        self._cell = seg._adopt(h, _watch_close)

    def fileno(self):
        """A descriptor that becomes readable once a change happened since
        the last consume() (a hint: consume() says)."""
        fd = _int()
        _check(_watch_fd(self._h(), ctypes.byref(fd)), "fileno")
        return fd.value

    def consume(self):
        """True when something changed since the last consume (or since
        the watch was made); also arms the descriptor."""
        rc = _watch_consume(self._h())
        if rc == EEMPTY:
            return False
        _check(rc, "consume")
        return True

    def wait(self, timeout=None):
        """Wait up to ``timeout`` seconds (None: for ever) for a change
        since the last consume, without consuming it; True when one came."""
        rc = _watch_wait(self._h(), _ns(timeout))
        if rc == ETIMEDOUT:
            return False
        _check(rc, "wait")
        return True


def _map_watch(self, key):
    """A Watch of ``key`` (str or bytes): woken when it is set, replaced,
    added to or removed."""
    k = _b(key)
    h = _p()
    _check(_watch_map_key(self._h(), k, len(k), ctypes.byref(h)), "watch %r" % (key,))
    return Watch(self._seg, "%s[%r]" % (self.name, key), h.value)


Map.watch = _map_watch


def _view_watch(self):
    """A Watch of this mutable container (MList, MDict or MSet): woken when
    it changes."""
    self._ok()
    h = _p()
    _check(_watch_container(self._v, ctypes.byref(h)), "watch")
    return Watch(self._seg, "container", h.value)


View.watch = _view_watch


class WaitSet(_Closing):
    """Waiting on several queues, subscriptions, services and watches at
    once: ``add(obj, tag)``, then ``wait(timeout)`` gives the tags of the
    members ready. Holds its members; once one of them is closed (or its
    segment), wait() raises Error ESTALE. Not shared between threads."""

    def __init__(self):
        h = _p()
        _check(_ws_create(ctypes.byref(h)), "waitset")
        self._ws = h.value
        self._members = {}  # C tag -> (object, tag), in the order added
        self._next = 1

    def add(self, obj, tag=None):
        """Add a Queue, Subscription, Service (its servers' side) or Watch;
        ``tag`` (any object; the member itself when None) is what wait()
        reports for it."""
        ws = self._h()
        add = {Queue: _ws_add_queue, Subscription: _ws_add_topic,
               Service: _ws_add_service, Watch: _ws_add_watch}.get(type(obj))
        if add is None:
            for cls, f in ((Queue, _ws_add_queue), (Subscription, _ws_add_topic),
                           (Service, _ws_add_service), (Watch, _ws_add_watch)):
                if isinstance(obj, cls):
                    add = f
        if add is None:
            raise Error(EINVAL, "a wait-set takes a Queue, Subscription, Service or "
                        "Watch, not %s" % type(obj).__name__)
        _check(add(ws, obj._h(), self._next), "waitset add")
        self._members[self._next] = (obj, obj if tag is None else tag)
        self._next += 1

    def remove(self, obj):
        """Take a member out (then it may be closed); Error ENOTFOUND when
        it is not in the set."""
        ws = self._h()
        for ctag, (member, _) in self._members.items():
            if member is obj:
                _check(_ws_remove(ws, obj._h()), "waitset remove")
                del self._members[ctag]
                return
        raise Error(ENOTFOUND, "waitset: %r is not a member" % (obj,))

    def wait(self, timeout=None):
        """Wait up to ``timeout`` seconds (None: for ever) until at least
        one member is ready; the tags of those ready, in the order they
        were added ([] when none was in time). Ready is a hint: take with
        a timeout of 0 (or consume) until there is nothing."""
        ws = self._h()
        for obj, _ in self._members.values():
            if obj._cell[0] is None:
                raise Error(ESTALE, "waitset: a member (%r) is closed" % (obj,))
        n = len(self._members)
        if n == 0:
            raise Error(EINVAL, "waitset: empty")
        tags = (_p * n)()
        got = _size()
        rc = _ws_wait(ws, _ns(timeout), tags, n, ctypes.byref(got))
        if rc == ETIMEDOUT:
            return []
        _check(rc, "waitset wait")
        return [self._members[tags[i]][1] for i in range(got.value)]

    def __len__(self):
        return len(self._members)

    def _h(self):
        if self._ws is None:
            raise Error(ESTALE, "waitset is closed")
        return self._ws

    def close(self):
        """Free the wait-set (not its members)."""
        ws, self._ws = self._ws, None
        if ws:
            _ws_destroy(ws)
        self._members = {}

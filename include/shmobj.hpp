// shmobj.hpp: a header-only C++17 layer over libshmobj (optional).
//
// What it gives over <shmobj.h>:
// - RAII handles: shmobj::segment, shmobj::queue, shmobj::map and
//   shmobj::map_view close or release what they hold in their destructors;
//   they move and do not copy. shmobj::view wraps the C view, a plain value
//   that borrows the segment's memory like a pointer (it needs no release).
// - Value builders that own their storage: shmobj::dict(), list(), str(),
//   buffer() and the others return a shmobj::value whose C description
//   (and every array and string it points to) lives as long as the value
//   does. The C header's SHMOBJ_VAL_*_OF macros build C compound literals,
//   which in C++ are temporaries destroyed at the end of the full
//   expression; <shmobj/object.h> refuses them in C++ for that reason.
// - Errors as exceptions. A call that fails throws shmobj::error, a
//   std::system_error whose code() is in shmobj::category() and compares
//   equal to the SHMOBJ_E* value (e.code() == SHMOBJ_ENOMEM). Exceptions,
//   because constructors of RAII handles have no other way to fail, and
//   because what the library reports as an error (a full segment, damage,
//   a lock held by a stopped process) is rare and seldom handled where it
//   happens. What is an ordinary outcome rather than an error is not
//   thrown: a take or put that times out or finds the queue empty or full,
//   a key or root that is absent, a completion wait that times out; those
//   calls return std::optional or bool. Code that wants no exceptions calls
//   the C functions, which every class exposes through c().
//
// The C API's rules hold unchanged: who frees what, which calls are
// thread- and process-safe, and what survives a crash are stated in
// <shmobj/*.h> and the guide. The timeouts are nanoseconds, as in C
// (shmobj::forever waits without limit).
#ifndef SHMOBJ_HPP
#define SHMOBJ_HPP

#if __cplusplus < 201703L
#error "shmobj.hpp needs C++17 (-std=c++17)"
#endif

#include <shmobj.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace shmobj {

/// Wait without limit (a timeout value).
inline constexpr std::int64_t forever = SHMOBJ_FOREVER;

/// A reference to a block of a segment, valid in every process.
using ref = shmobj_ref;

// ---- errors ---------------------------------------------------------------

/// The category of libshmobj's status codes: message() is
/// shmobj_strerror().
inline const std::error_category &category() noexcept
{
    struct cat final : std::error_category {
        const char *name() const noexcept override { return "shmobj"; }
        std::string message(int status) const override { return shmobj_strerror(status); }
    };
    static const cat instance;
    return instance;
}

/// A failed call: code().value() is the negative SHMOBJ_E* status.
class error : public std::system_error {
public:
    error(int status, const char *what)
        : std::system_error(status, category(), what) {}
    /// The SHMOBJ_E* status.
    int status() const noexcept { return code().value(); }
    /// Its symbolic name, e.g. "SHMOBJ_ENOMEM".
    const char *name() const noexcept { return shmobj_errname(code().value()); }
};

/// Throws shmobj::error when status is not 0.
inline void check(int status, const char *what)
{
    if (status != 0)
        throw error(status, what);
}

} // namespace shmobj

/// SHMOBJ_E* values convert to std::error_code of shmobj::category().
inline std::error_code make_error_code(shmobj_status s) noexcept
{
    return {static_cast<int>(s), shmobj::category()};
}
namespace std {
template <> struct is_error_code_enum<shmobj_status> : true_type {};
} // namespace std

namespace shmobj {

// ---- value builders -------------------------------------------------------

/// A description of a value to put (the C ::shmobj_value) together with
/// everything it points to. Cheap to copy (the tree is shared and never
/// changed once built). Build it with the functions below.
class value {
    struct node {
        shmobj_value v{};
        std::string text;                     // STR, BYTES
        std::vector<value> kids;              // containers: what items point into
        std::vector<shmobj_value> items;      // containers: the C array
        std::vector<std::string> names;       // STRUCT field names
        std::vector<const char *> name_ptrs;  // ... as the C array
        std::vector<std::uint64_t> shape;     // BUFFER
        shmobj_buffer_desc buf{};             // BUFFER
    };
    std::shared_ptr<const node> n_;
    explicit value(std::shared_ptr<node> n) : n_(std::move(n)) {}

    static std::shared_ptr<node> make(std::uint32_t type)
    {
        auto n = std::make_shared<node>();
        n->v.type = type;
        return n;
    }
    static value container(std::uint32_t type, std::vector<value> kids, std::size_t count)
    {
        auto n = make(type);
        n->kids = std::move(kids);
        n->items.reserve(n->kids.size());
        for (const value &k : n->kids)
            n->items.push_back(*k.c());
        n->v.v.c.items = n->items.data();
        n->v.v.c.count = count;
        return value(std::move(n));
    }

public:
    /// null
    value() : n_(make(SHMOBJ_TYPE_NULL)) {}

    /// The C description, valid while this value (or a copy) lives.
    const shmobj_value *c() const noexcept { return &n_->v; }

    friend value null();
    friend value boolean(bool);
    friend value integer(std::int64_t);
    friend value uinteger(std::uint64_t);
    friend value real(double);
    friend value str(std::string_view);
    friend value bytes(const void *, std::size_t);
    friend value list(std::vector<value>);
    friend value tuple(std::vector<value>);
    friend value set(std::vector<value>);
    friend value dict(std::initializer_list<std::pair<value, value>>);
    friend value structure(std::initializer_list<std::pair<std::string_view, value>>);
    friend value structure(std::vector<value>);
    friend value buffer(unsigned, std::vector<std::uint64_t>, const void *);
};

/// null
inline value null() { return value(); }
/// A bool.
inline value boolean(bool b)
{
    auto n = value::make(SHMOBJ_TYPE_BOOL);
    n->v.v.b = b ? 1 : 0;
    return value(std::move(n));
}
/// An int64.
inline value integer(std::int64_t x)
{
    auto n = value::make(SHMOBJ_TYPE_INT);
    n->v.v.i = x;
    return value(std::move(n));
}
/// A uint64.
inline value uinteger(std::uint64_t x)
{
    auto n = value::make(SHMOBJ_TYPE_UINT);
    n->v.v.u = x;
    return value(std::move(n));
}
/// A double.
inline value real(double x)
{
    auto n = value::make(SHMOBJ_TYPE_DOUBLE);
    n->v.v.d = x;
    return value(std::move(n));
}
/// A UTF-8 string (copied into the value; checked by the put).
inline value str(std::string_view s)
{
    auto n = value::make(SHMOBJ_TYPE_STR);
    n->text.assign(s.data(), s.size());
    n->v.v.s.ptr = n->text.data();
    n->v.v.s.len = n->text.size();
    return value(std::move(n));
}
/// Bytes (copied into the value).
inline value bytes(const void *p, std::size_t len)
{
    auto n = value::make(SHMOBJ_TYPE_BYTES);
    n->text.assign(static_cast<const char *>(p), len);
    n->v.v.s.ptr = n->text.data();
    n->v.v.s.len = n->text.size();
    return value(std::move(n));
}
/// A list of mutable items: list({integer(1), str("a")}).
inline value list(std::vector<value> items)
{
    std::size_t n = items.size();
    return value::container(SHMOBJ_TYPE_LIST, std::move(items), n);
}
/// A tuple (immutable items).
inline value tuple(std::vector<value> items)
{
    std::size_t n = items.size();
    return value::container(SHMOBJ_TYPE_TUPLE, std::move(items), n);
}
/// A set of distinct int, str or bytes members.
inline value set(std::vector<value> members)
{
    std::size_t n = members.size();
    return value::container(SHMOBJ_TYPE_SET, std::move(members), n);
}
/// A dict: dict({{str("name"), str("x")}, {str("n"), integer(1)}}). Keys
/// are int, str or bytes and distinct; values are mutable in place.
inline value dict(std::initializer_list<std::pair<value, value>> pairs)
{
    std::vector<value> kv;
    kv.reserve(2 * pairs.size());
    for (const auto &p : pairs) {
        kv.push_back(p.first);
        kv.push_back(p.second);
    }
    return value::container(SHMOBJ_TYPE_DICT, std::move(kv), pairs.size());
}
/// A struct with named fields: structure({{"hits", integer(0)}, ...}).
inline value structure(std::initializer_list<std::pair<std::string_view, value>> fields)
{
    std::vector<value> items;
    std::vector<std::string> names;
    for (const auto &f : fields) {
        names.emplace_back(f.first);
        items.push_back(f.second);
    }
    value v = value::container(SHMOBJ_TYPE_STRUCT, std::move(items), fields.size());
    auto *n = const_cast<value::node *>(v.n_.get()); // still private to v
    n->names = std::move(names);
    for (const std::string &s : n->names)
        n->name_ptrs.push_back(s.c_str());
    n->v.v.c.names = n->name_ptrs.data();
    return v;
}
/// A struct whose fields have no names (read by position).
inline value structure(std::vector<value> fields)
{
    std::size_t n = fields.size();
    return value::container(SHMOBJ_TYPE_STRUCT, std::move(fields), n);
}
/// A C-ordered buffer of `dtype` (enum shmobj_dtype) and `shape`; data
/// holds prod(shape) elements to copy in, or nullptr to leave the data to
/// be filled in place after the put (segment::get(ref).buffer().data).
/// The data is not copied into the value: it must outlive the put.
inline value buffer(unsigned dtype, std::vector<std::uint64_t> shape, const void *data = nullptr)
{
    auto n = value::make(SHMOBJ_TYPE_BUFFER);
    n->shape = std::move(shape);
    n->buf.data = data;
    n->buf.shape = n->shape.empty() ? nullptr : n->shape.data();
    n->buf.dtype = dtype;
    n->buf.ndim = static_cast<std::uint32_t>(n->shape.size());
    n->v.v.buf = &n->buf;
    return value(std::move(n));
}

// ---- views ----------------------------------------------------------------

/// A view of one value in a segment (the C ::shmobj_view): valid until the
/// object is freed or the item replaced, like a pointer. Scalar reads see
/// the current value every time; updates are atomic and seen by every
/// process at once.
class view {
    shmobj_view v_{};

public:
    view() = default;
    /// Wraps a C view.
    explicit view(const shmobj_view &v) noexcept : v_(v) {}
    /// The C view.
    const shmobj_view *c() const noexcept { return &v_; }
    shmobj_view *c() noexcept { return &v_; }

    /// enum shmobj_type of the value.
    int type() const noexcept { return shmobj_view_type(&v_); }
    /// Items of a container, bytes of a string, bytes or buffer.
    std::size_t size() const
    {
        std::size_t n = 0;
        check(shmobj_view_len(&v_, &n), "shmobj_view_len");
        return n;
    }
    /// Item i of a list, tuple or struct, value i of a dict, member i of a set.
    view operator[](std::size_t i) const
    {
        view out;
        check(shmobj_view_item(&v_, i, &out.v_), "shmobj_view_item");
        return out;
    }
    /// The value under a string key of a dict, or a field of a named struct.
    view operator[](std::string_view key) const
    {
        std::optional<view> v = find(key);
        if (!v)
            throw error(SHMOBJ_ENOTFOUND, "shmobj_view_get");
        return *v;
    }
    /// As operator[] with a key, but an absent key is std::nullopt.
    std::optional<view> find(std::string_view key) const
    {
        shmobj_value k{};
        k.type = SHMOBJ_TYPE_STR;
        k.v.s.ptr = key.data();
        k.v.s.len = key.size();
        view out;
        int rc = shmobj_view_get(&v_, &k, &out.v_);
        if (rc == SHMOBJ_ENOTFOUND)
            return std::nullopt;
        check(rc, "shmobj_view_get");
        return out;
    }
    /// Key i of a dict, member i of a set, name of field i of a struct.
    view key(std::size_t i) const
    {
        view out;
        check(shmobj_view_key(&v_, i, &out.v_), "shmobj_view_key");
        return out;
    }

    bool as_bool() const
    {
        int b = 0;
        check(shmobj_bool_get(&v_, &b), "shmobj_bool_get");
        return b != 0;
    }
    std::int64_t as_int() const
    {
        std::int64_t x = 0;
        check(shmobj_int_get(&v_, &x), "shmobj_int_get");
        return x;
    }
    std::uint64_t as_uint() const
    {
        std::uint64_t x = 0;
        check(shmobj_uint_get(&v_, &x), "shmobj_uint_get");
        return x;
    }
    double as_double() const
    {
        double x = 0;
        check(shmobj_double_get(&v_, &x), "shmobj_double_get");
        return x;
    }
    /// A string's bytes in place (borrowed like the view).
    std::string_view as_str() const
    {
        const char *s = nullptr;
        std::size_t n = 0;
        check(shmobj_str_get(&v_, &s, &n), "shmobj_str_get");
        return {s, n};
    }
    /// A bytes value in place (borrowed like the view).
    std::string_view as_bytes() const
    {
        const void *p = nullptr;
        std::size_t n = 0;
        check(shmobj_bytes_get(&v_, &p, &n), "shmobj_bytes_get");
        return {static_cast<const char *>(p), n};
    }
    /// A buffer's data address, dtype, shape and strides.
    shmobj_buffer_info buffer() const
    {
        shmobj_buffer_info info{};
        info.struct_size = sizeof info;
        check(shmobj_buffer_get(&v_, &info), "shmobj_buffer_get");
        return info;
    }

    /// Atomic store of a scalar: a bool into a bool, a floating-point
    /// number into a double, a signed integer into an int, an unsigned one
    /// into a uint (another kind of slot: SHMOBJ_ETYPE).
    template <class T> void set(T x) const
    {
        static_assert(std::is_arithmetic_v<T>, "set() takes a number or a bool");
        if constexpr (std::is_same_v<T, bool>)
            check(shmobj_bool_set(&v_, x ? 1 : 0), "shmobj_bool_set");
        else if constexpr (std::is_floating_point_v<T>)
            check(shmobj_double_set(&v_, static_cast<double>(x)), "shmobj_double_set");
        else if constexpr (std::is_signed_v<T>)
            check(shmobj_int_set(&v_, static_cast<std::int64_t>(x)), "shmobj_int_set");
        else
            check(shmobj_uint_set(&v_, static_cast<std::uint64_t>(x)), "shmobj_uint_set");
    }
    /// Atomic add, by the same rule of kinds as set(); returns the value
    /// before.
    template <class T> T add(T delta) const
    {
        static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                      "add() takes a number");
        if constexpr (std::is_floating_point_v<T>) {
            double old = 0;
            check(shmobj_double_add(&v_, static_cast<double>(delta), &old), "shmobj_double_add");
            return static_cast<T>(old);
        } else if constexpr (std::is_signed_v<T>) {
            std::int64_t old = 0;
            check(shmobj_int_add(&v_, static_cast<std::int64_t>(delta), &old), "shmobj_int_add");
            return static_cast<T>(old);
        } else {
            std::uint64_t old = 0;
            check(shmobj_uint_add(&v_, static_cast<std::uint64_t>(delta), &old), "shmobj_uint_add");
            return static_cast<T>(old);
        }
    }
    /// Replace the value (see shmobj_view_set(): no process may still
    /// read the old object).
    void replace(const value &v) { check(shmobj_view_set(&v_, v.c()), "shmobj_view_set"); }

    /// The value as compact JSON.
    std::string json() const
    {
        std::size_t n = 0;
        int rc = shmobj_view_json(&v_, nullptr, 0, &n);
        if (rc != SHMOBJ_ENOBUFS)
            check(rc, "shmobj_view_json");
        std::string s(n + 1, '\0');
        check(shmobj_view_json(&v_, s.data(), s.size(), &n), "shmobj_view_json");
        s.resize(n);
        return s;
    }
};

// ---- segment --------------------------------------------------------------

/// An attached segment; the destructor detaches (the segment stays until
/// destroy() removes its name and the last process detaches).
class segment {
    shmobj_segment *s_ = nullptr;
    explicit segment(shmobj_segment *s) noexcept : s_(s) {}

public:
    segment() = default;
    ~segment() { shmobj_segment_close(s_); }
    segment(segment &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    segment &operator=(segment &&o) noexcept
    {
        if (this != &o) {
            shmobj_segment_close(s_);
            s_ = std::exchange(o.s_, nullptr);
        }
        return *this;
    }
    segment(const segment &) = delete;
    segment &operator=(const segment &) = delete;

    /// Create a segment (options as in C, nullptr for the defaults).
    static segment create(const std::string &name, const shmobj_segment_options *opts = nullptr)
    {
        shmobj_segment *s = nullptr;
        check(shmobj_segment_create(name.c_str(), opts, &s), "shmobj_segment_create");
        return segment(s);
    }
    /// Create a segment of initial_size bytes that may grow to max_size
    /// (0: does not grow), with the other options at their defaults.
    static segment create(const std::string &name, std::uint64_t initial_size,
                          std::uint64_t max_size = 0, unsigned backend = SHMOBJ_BACKEND_SHM)
    {
        shmobj_segment_options o;
        shmobj_segment_options_init(&o);
        o.initial_size = initial_size;
        o.max_size = max_size;
        o.backend = backend;
        return create(name, &o);
    }
    /// Open a segment, waiting up to timeout_ns for its creator.
    static segment open(const std::string &name, std::int64_t timeout_ns = 0,
                        unsigned backend = SHMOBJ_BACKEND_SHM)
    {
        shmobj_segment *s = nullptr;
        check(shmobj_segment_open(name.c_str(), backend, timeout_ns, &s), "shmobj_segment_open");
        return segment(s);
    }
    /// Remove a segment's name; false when there was none.
    static bool destroy(const std::string &name, unsigned backend = SHMOBJ_BACKEND_SHM)
    {
        int rc = shmobj_segment_destroy(name.c_str(), backend);
        if (rc == SHMOBJ_ENOTFOUND)
            return false;
        check(rc, "shmobj_segment_destroy");
        return true;
    }

    /// The C handle.
    shmobj_segment *c() const noexcept { return s_; }
    explicit operator bool() const noexcept { return s_ != nullptr; }

    /// Write a value tree into the segment; the caller owns the object.
    ref put(const value &v) const
    {
        ref r = 0;
        check(shmobj_obj_put(s_, v.c(), &r), "shmobj_obj_put");
        return r;
    }
    /// A view of an object.
    view get(ref r) const
    {
        shmobj_view v;
        check(shmobj_obj_get(s_, r, &v), "shmobj_obj_get");
        return view(v);
    }
    /// Free an object and its tree.
    void free(ref r) const { check(shmobj_obj_free(s_, r), "shmobj_obj_free"); }

    /// Publish a reference under a name (replacing an earlier one).
    void root_set(const std::string &name, ref r) const
    {
        check(shmobj_segment_root_set(s_, name.c_str(), r), "shmobj_segment_root_set");
    }
    /// Publish under a new name; false when the name exists.
    bool root_add(const std::string &name, ref r) const
    {
        int rc = shmobj_segment_root_add(s_, name.c_str(), r);
        if (rc == SHMOBJ_EEXIST)
            return false;
        check(rc, "shmobj_segment_root_add");
        return true;
    }
    /// The reference under a name, std::nullopt when absent.
    std::optional<ref> root_get(const std::string &name) const
    {
        ref r = 0;
        int rc = shmobj_segment_root_get(s_, name.c_str(), &r);
        if (rc == SHMOBJ_ENOTFOUND)
            return std::nullopt;
        check(rc, "shmobj_segment_root_get");
        return r;
    }
    /// Wait (asleep) up to timeout_ns for a root; std::nullopt on timeout.
    std::optional<ref> root_wait(const std::string &name, std::int64_t timeout_ns) const
    {
        ref r = 0;
        int rc = shmobj_segment_root_wait(s_, name.c_str(), timeout_ns, &r);
        if (rc == SHMOBJ_ETIMEDOUT)
            return std::nullopt;
        check(rc, "shmobj_segment_root_wait");
        return r;
    }
    /// Remove a root (not what it names); false when absent.
    bool root_del(const std::string &name) const
    {
        int rc = shmobj_segment_root_del(s_, name.c_str());
        if (rc == SHMOBJ_ENOTFOUND)
            return false;
        check(rc, "shmobj_segment_root_del");
        return true;
    }
};

// ---- queue ----------------------------------------------------------------

/// A handle of a named queue; the destructor closes the handle (the queue
/// stays until shmobj_queue_destroy()).
class queue {
    shmobj_queue *q_ = nullptr;
    explicit queue(shmobj_queue *q) noexcept : q_(q) {}

public:
    queue() = default;
    ~queue() { shmobj_queue_close(q_); }
    queue(queue &&o) noexcept : q_(std::exchange(o.q_, nullptr)) {}
    queue &operator=(queue &&o) noexcept
    {
        if (this != &o) {
            shmobj_queue_close(q_);
            q_ = std::exchange(o.q_, nullptr);
        }
        return *this;
    }
    queue(const queue &) = delete;
    queue &operator=(const queue &) = delete;

    /// Create a queue of `capacity` messages (a power of two).
    static queue create(const segment &seg, const std::string &name, std::uint32_t capacity)
    {
        shmobj_queue *q = nullptr;
        check(shmobj_queue_create(seg.c(), name.c_str(), capacity, 0, &q), "shmobj_queue_create");
        return queue(q);
    }
    /// Open a queue, waiting (asleep) up to timeout_ns for it to be created.
    static queue open(const segment &seg, const std::string &name, std::int64_t timeout_ns = 0)
    {
        shmobj_queue *q = nullptr;
        check(shmobj_queue_open_timed(seg.c(), name.c_str(), timeout_ns, &q),
              "shmobj_queue_open_timed");
        return queue(q);
    }
    /// Open a queue or create it, whichever process comes first.
    static queue open_or_create(const segment &seg, const std::string &name,
                                std::uint32_t capacity)
    {
        shmobj_queue *q = nullptr;
        check(shmobj_queue_open_or_create(seg.c(), name.c_str(), capacity, 0, &q),
              "shmobj_queue_open_or_create");
        return queue(q);
    }

    /// The C handle.
    shmobj_queue *c() const noexcept { return q_; }

    /// Put, waiting while the queue is full.
    void put(ref r) const { check(shmobj_queue_put(q_, r), "shmobj_queue_put"); }
    /// Put, waiting up to timeout_ns for room; false when still full.
    bool put(ref r, std::int64_t timeout_ns) const
    {
        int rc = shmobj_queue_put_timed(q_, r, timeout_ns);
        if (rc == SHMOBJ_EFULL || rc == SHMOBJ_ETIMEDOUT)
            return false;
        check(rc, "shmobj_queue_put_timed");
        return true;
    }
    /// Take, waiting while the queue is empty.
    ref take() const
    {
        ref r = 0;
        check(shmobj_queue_take(q_, &r), "shmobj_queue_take");
        return r;
    }
    /// Take, waiting up to timeout_ns (0: do not wait); nullopt when none came.
    std::optional<ref> take(std::int64_t timeout_ns) const
    {
        ref r = 0;
        int rc = shmobj_queue_take_timed(q_, &r, timeout_ns);
        if (rc == SHMOBJ_EEMPTY || rc == SHMOBJ_ETIMEDOUT)
            return std::nullopt;
        check(rc, "shmobj_queue_take_timed");
        return r;
    }

    /// A message block of len bytes (flags: 0 or SHMOBJ_QUEUE_MSG_TRACK)
    /// and this process's address of its data.
    std::pair<ref, void *> msg_alloc(std::size_t len, unsigned flags = 0) const
    {
        ref r = 0;
        void *data = nullptr;
        check(shmobj_queue_msg_alloc(q_, len, flags, &r, &data), "shmobj_queue_msg_alloc");
        return {r, data};
    }
    /// The data of a message block and its length.
    std::pair<void *, std::size_t> msg_data(ref r) const
    {
        void *data = nullptr;
        std::size_t len = 0;
        check(shmobj_queue_msg_data(q_, r, &data, &len), "shmobj_queue_msg_data");
        return {data, len};
    }
    /// Consumer: the message is done (frees an untracked one).
    void msg_done(ref r) const { check(shmobj_queue_msg_done(q_, r), "shmobj_queue_msg_done"); }
    /// Sender: wait up to timeout_ns for a tracked message to be done;
    /// false on timeout.
    bool msg_wait_done(ref r, std::int64_t timeout_ns) const
    {
        int rc = shmobj_queue_msg_wait_done(q_, r, timeout_ns);
        if (rc == SHMOBJ_ETIMEDOUT)
            return false;
        check(rc, "shmobj_queue_msg_wait_done");
        return true;
    }
    /// Sender: release a tracked message block (see shmobj_queue_msg_free()).
    void msg_free(ref r) const { check(shmobj_queue_msg_free(q_, r), "shmobj_queue_msg_free"); }
};

// ---- map ------------------------------------------------------------------

/// A value read in place under a read guard (shmobj_map_get_view());
/// released by the destructor. Release it soon: it holds back the freeing
/// of the map's retired memory.
class map_view {
    shmobj_map_view v_{};
    bool held_ = false;
    friend class map;

public:
    map_view() = default;
    ~map_view()
    {
        if (held_)
            shmobj_map_view_release(&v_);
    }
    map_view(map_view &&o) noexcept : v_(o.v_), held_(std::exchange(o.held_, false)) {}
    map_view &operator=(map_view &&o) noexcept
    {
        if (this != &o) {
            if (held_)
                shmobj_map_view_release(&v_);
            v_ = o.v_;
            held_ = std::exchange(o.held_, false);
        }
        return *this;
    }
    map_view(const map_view &) = delete;
    map_view &operator=(const map_view &) = delete;

    std::string_view key() const noexcept
    {
        return {static_cast<const char *>(v_.key), v_.key_len};
    }
    std::string_view value() const noexcept
    {
        return {static_cast<const char *>(v_.value), v_.value_len};
    }
};

/// A handle of a shared map; the destructor closes it (the map stays). A
/// handle belongs to the process that opened it: after fork(), open the
/// map again in the child.
class map {
    shmobj_map *m_ = nullptr;
    explicit map(shmobj_map *m) noexcept : m_(m) {}

public:
    map() = default;
    ~map() { shmobj_map_close(m_); }
    map(map &&o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
    map &operator=(map &&o) noexcept
    {
        if (this != &o) {
            shmobj_map_close(m_);
            m_ = std::exchange(o.m_, nullptr);
        }
        return *this;
    }
    map(const map &) = delete;
    map &operator=(const map &) = delete;

    /// Create a map under a root name.
    static map create(const segment &seg, const std::string &name)
    {
        shmobj_map *m = nullptr;
        check(shmobj_map_create(seg.c(), name.c_str(), &m), "shmobj_map_create");
        return map(m);
    }
    /// Open a map, waiting (asleep) up to timeout_ns for it to be created.
    static map open(const segment &seg, const std::string &name, std::int64_t timeout_ns = 0)
    {
        shmobj_map *m = nullptr;
        check(shmobj_map_open_timed(seg.c(), name.c_str(), timeout_ns, &m),
              "shmobj_map_open_timed");
        return map(m);
    }
    /// Open a map or create it, whichever process comes first.
    static map open_or_create(const segment &seg, const std::string &name)
    {
        shmobj_map *m = nullptr;
        check(shmobj_map_open_or_create(seg.c(), name.c_str(), &m), "shmobj_map_open_or_create");
        return map(m);
    }

    /// The C handle.
    shmobj_map *c() const noexcept { return m_; }

    /// Insert or replace.
    void set(std::string_view key, std::string_view value) const
    {
        check(shmobj_map_set(m_, key.data(), key.size(), value.data(), value.size()),
              "shmobj_map_set");
    }
    /// A copy of the value; std::nullopt when the key is absent.
    std::optional<std::string> get(std::string_view key) const
    {
        std::string out(64, '\0');
        for (;;) {
            std::size_t len = 0;
            int rc = shmobj_map_get(m_, key.data(), key.size(), out.data(), out.size(), &len);
            if (rc == SHMOBJ_ENOTFOUND)
                return std::nullopt;
            if (rc == SHMOBJ_ENOBUFS) { // replaced by a longer value meanwhile: again
                out.resize(len);
                continue;
            }
            check(rc, "shmobj_map_get");
            out.resize(len);
            return out;
        }
    }
    /// The value in place under a read guard; std::nullopt when absent.
    std::optional<map_view> get_view(std::string_view key) const
    {
        map_view v;
        int rc = shmobj_map_get_view(m_, key.data(), key.size(), &v.v_);
        if (rc == SHMOBJ_ENOTFOUND)
            return std::nullopt;
        check(rc, "shmobj_map_get_view");
        v.held_ = true;
        return std::optional<map_view>(std::move(v));
    }
    /// Whether the key is present.
    bool contains(std::string_view key) const
    {
        int rc = shmobj_map_contains(m_, key.data(), key.size());
        if (rc == SHMOBJ_ENOTFOUND)
            return false;
        check(rc, "shmobj_map_contains");
        return true;
    }
    /// Remove a key; false when it was absent.
    bool erase(std::string_view key) const
    {
        int rc = shmobj_map_del(m_, key.data(), key.size());
        if (rc == SHMOBJ_ENOTFOUND)
            return false;
        check(rc, "shmobj_map_del");
        return true;
    }
    /// Atomic add to an 8-byte integer value (created as delta when
    /// absent); returns the value after.
    std::int64_t add(std::string_view key, std::int64_t delta) const
    {
        std::int64_t out = 0;
        check(shmobj_map_add(m_, key.data(), key.size(), delta, &out), "shmobj_map_add");
        return out;
    }
    /// Entries (a sum over shards).
    std::uint64_t size() const
    {
        std::uint64_t n = 0;
        check(shmobj_map_count(m_, &n), "shmobj_map_count");
        return n;
    }
    /// Call fn(key, value) for every entry (string_views valid during the
    /// call only); see shmobj_map_iter_open() for what concurrent writers
    /// do to it.
    template <class Fn> void for_each(Fn &&fn) const
    {
        shmobj_map_iter *it = nullptr;
        check(shmobj_map_iter_open(m_, &it), "shmobj_map_iter_open");
        std::unique_ptr<shmobj_map_iter, void (*)(shmobj_map_iter *)> guard(it, shmobj_map_iter_close);
        for (;;) {
            const void *k = nullptr, *v = nullptr;
            std::size_t kl = 0, vl = 0;
            int rc = shmobj_map_iter_next(it, &k, &kl, &v, &vl);
            if (rc == SHMOBJ_ENOTFOUND)
                return;
            check(rc, "shmobj_map_iter_next");
            fn(std::string_view(static_cast<const char *>(k), kl),
               std::string_view(static_cast<const char *>(v), vl));
        }
    }
};

} // namespace shmobj

#endif // SHMOBJ_HPP

// shmobj.hpp: a header-only C++17 layer over libshmobj (optional).
//
// What it gives over <shmobj.h>:
// - RAII handles: shmobj::segment, queue, map, topic, subscription and the
//   objects they hand out (view, map_view, map cursors, topic_loan,
//   topic_message) release what they hold in their destructors. Handles
//   move and do not copy; views copy freely.
// - Shared ownership of the segment. Every object that reads a segment's
//   memory (a queue, map, topic or subscription, a view of an object, a
//   mutable container, a message taken from a topic) holds the segment
//   through a std::shared_ptr to one internal holder: destroying
//   shmobj::segment drops its share, and the C segment is closed (the
//   mapping goes) with the last share. So objects may be destroyed in any
//   order; none can read unmapped memory. The C handles are closed in the
//   order C asks for whatever the C++ order was: a view or cursor of a
//   map before its map, a subscription before its topic, all of them
//   before the segment.
// - Value builders that own their storage: shmobj::dict(), list(), str(),
//   buffer() and the others return a shmobj::value whose C description
//   (and every array and string it points to) lives as long as the value
//   does. The C header's SHMOBJ_VAL_*_OF macros build C compound literals,
//   which in C++ are temporaries destroyed at the end of the full
//   expression; <shmobj/object.h> refuses them in C++ for that reason.
// - Mutable containers (mutable_list, mutable_dict, mutable_set) with
//   iterators for range-for, records declared once from a C++ struct
//   (record_type), completion of queued references, topics, and the map
//   over std::string_view keys and contiguous ranges of values.
//
// Errors, in one scheme. Every call that can fail comes in two forms:
// - the plain form throws shmobj::error, a std::system_error whose code()
//   is in shmobj::category() and compares equal to the SHMOBJ_E* value
//   (e.code() == SHMOBJ_ENOMEM; e.status() is the number, e.name() the
//   symbol);
// - the same call with a last argument `std::error_code &ec` throws no
//   shmobj::error: it sets ec to the status (cleared on success) and
//   returns an empty result (a null handle, std::nullopt, false, 0). Only
//   a failed allocation of the process's own memory (std::bad_alloc) can
//   still leave it, as in <filesystem>. Operators and begin() have theirs
//   under a name: v[i] is item(i, ec), v["k"] find(k, ec), list[i]
//   at(i, ec), dict[k] get(k, ec), and items(ec) iterates without
//   throwing; a container's constructor from a view takes ec too.
// What is an ordinary outcome rather than an error is neither thrown nor
// set in ec: a take or put that times out or finds the queue empty or
// full, a key or root that is absent, a completion wait that times out;
// those calls return std::optional, bool or an enum. Code that wants the
// C calls themselves gets every C handle with c().
//
// The C API's rules hold unchanged: who frees what, which calls are
// thread- and process-safe, and what survives a crash are stated in
// <shmobj/*.h> and the guide ("From C++"). Timeouts are nanoseconds, as in
// C (shmobj::forever waits without limit).
#ifndef SHMOBJ_HPP
#define SHMOBJ_HPP

#if __cplusplus < 201703L
#error "shmobj.hpp needs C++17 (-std=c++17)"
#endif

#include <shmobj.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
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
    /// @param status a SHMOBJ_E* status; @param what the call that failed
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

/// Sets ec from a status: cleared for 0, else the status in category().
/// @return whether status was 0
inline bool set_status(std::error_code &ec, int status) noexcept
{
    if (status == 0)
        ec.clear();
    else
        ec.assign(status, category());
    return status == 0;
}

/// @cond INTERNAL
namespace detail {

// The throwing form of a call whose error_code form is f(ec).
template <class F> auto or_throw(const char *what, F &&f)
{
    std::error_code ec;
    if constexpr (std::is_void_v<decltype(f(ec))>) {
        f(ec);
        if (ec)
            throw error(ec.value(), what);
    } else {
        auto r = f(ec);
        if (ec)
            throw error(ec.value(), what);
        return r;
    }
}

// The owners behind the handles. Each C handle is closed by its holder's
// destructor, before the holder lets go of what it holds, so the C calls
// run in the order C asks for (a map before its segment, a subscription
// before its topic) whatever order the C++ objects go in.
struct segment_holder {
    shmobj_segment *s;
    explicit segment_holder(shmobj_segment *p) noexcept : s(p) {}
    ~segment_holder() { shmobj_segment_close(s); }
    segment_holder(const segment_holder &) = delete;
    segment_holder &operator=(const segment_holder &) = delete;
};
using segment_ptr = std::shared_ptr<segment_holder>;

struct queue_holder {
    segment_ptr seg;
    shmobj_queue *q;
    queue_holder(segment_ptr sp, shmobj_queue *p) noexcept : seg(std::move(sp)), q(p) {}
    ~queue_holder() { shmobj_queue_close(q); }
    queue_holder(const queue_holder &) = delete;
    queue_holder &operator=(const queue_holder &) = delete;
};

struct map_holder {
    segment_ptr seg;
    shmobj_map *m;
    map_holder(segment_ptr sp, shmobj_map *p) noexcept : seg(std::move(sp)), m(p) {}
    ~map_holder() { shmobj_map_close(m); }
    map_holder(const map_holder &) = delete;
    map_holder &operator=(const map_holder &) = delete;
};

struct topic_holder {
    segment_ptr seg;
    shmobj_topic *t;
    topic_holder(segment_ptr sp, shmobj_topic *p) noexcept : seg(std::move(sp)), t(p) {}
    ~topic_holder() { shmobj_topic_close(t); }
    topic_holder(const topic_holder &) = delete;
    topic_holder &operator=(const topic_holder &) = delete;
};

struct service_holder {
    segment_ptr seg;
    shmobj_service *s;
    service_holder(segment_ptr sp, shmobj_service *p) noexcept : seg(std::move(sp)), s(p) {}
    ~service_holder() { shmobj_service_close(s); }
    service_holder(const service_holder &) = delete;
    service_holder &operator=(const service_holder &) = delete;
};

struct subscription_holder {
    std::shared_ptr<topic_holder> topic;
    shmobj_topic_sub *s;
    subscription_holder(std::shared_ptr<topic_holder> tp, shmobj_topic_sub *p) noexcept
        : topic(std::move(tp)), s(p) {}
    ~subscription_holder() { shmobj_topic_unsubscribe(s); }
    subscription_holder(const subscription_holder &) = delete;
    subscription_holder &operator=(const subscription_holder &) = delete;
};

} // namespace detail
/// @endcond

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
    friend value mlist();
    friend value mdict();
    friend value mset();
    friend value adopt(ref);
    friend value link(ref);
    friend value record(ref, std::vector<value>);
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

/// An empty growable list (change it through a mutable_list).
inline value mlist() { return value(value::make(SHMOBJ_TYPE_MLIST)); }
/// An empty mutable dict (change it through a mutable_dict).
inline value mdict() { return value(value::make(SHMOBJ_TYPE_MDICT)); }
/// An empty mutable set (change it through a mutable_set).
inline value mset() { return value(value::make(SHMOBJ_TYPE_MSET)); }
/// An object already put, adopted by the container this value goes into
/// (ownership moves in; see "References" in <shmobj/object.h>).
inline value adopt(ref r)
{
    auto n = value::make(SHMOBJ_TYPE_ADOPT);
    n->v.v.ref = r;
    return value(std::move(n));
}
/// A weak link to an object already put (see "References").
inline value link(ref r)
{
    auto n = value::make(SHMOBJ_TYPE_LINK);
    n->v.v.ref = r;
    return value(std::move(n));
}
/// A record of a shape: one value per field, in the shape's order (see
/// record_type for records read from and written to a C++ struct).
inline value record(ref shape, std::vector<value> fields)
{
    std::size_t count = fields.size();
    value v = value::container(SHMOBJ_TYPE_RECORD, std::move(fields), count);
    auto *n = const_cast<value::node *>(v.n_.get()); // still private to v
    const shmobj_value *items = n->v.v.c.items;
    n->v.v.r.items = items;
    n->v.v.r.count = count;
    n->v.v.r.shape = shape;
    return v;
}

/// A value borrowed for the length of one call, made implicitly from what
/// a call accepts: a shmobj::value, a C ::shmobj_value, nullptr (null), a
/// bool, an integer (signed: int, unsigned: uint), a floating-point number
/// (double) or a string (str). A string is not copied: the call reads it
/// in place.
class value_ref {
    shmobj_value v_{};
    const shmobj_value *ext_ = nullptr;

public:
    /// A built value.
    value_ref(const value &v) noexcept : ext_(v.c()) {}
    /// A C description (its arrays must outlive the call).
    value_ref(const shmobj_value &v) noexcept : ext_(&v) {}
    /// null
    value_ref(std::nullptr_t) noexcept { v_.type = SHMOBJ_TYPE_NULL; }
    /// A bool.
    value_ref(bool b) noexcept
    {
        v_.type = SHMOBJ_TYPE_BOOL;
        v_.v.b = b ? 1 : 0;
    }
    /// An integer: int64 when signed, uint64 when unsigned.
    template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
    value_ref(T x) noexcept
    {
        if constexpr (std::is_signed_v<T>) {
            v_.type = SHMOBJ_TYPE_INT;
            v_.v.i = static_cast<std::int64_t>(x);
        } else {
            v_.type = SHMOBJ_TYPE_UINT;
            v_.v.u = static_cast<std::uint64_t>(x);
        }
    }
    /// A double.
    template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
    value_ref(T x) noexcept
    {
        v_.type = SHMOBJ_TYPE_DOUBLE;
        v_.v.d = static_cast<double>(x);
    }
    /// A UTF-8 string.
    value_ref(std::string_view s) noexcept
    {
        v_.type = SHMOBJ_TYPE_STR;
        v_.v.s.ptr = s.data();
        v_.v.s.len = s.size();
    }
    /// A NUL-terminated UTF-8 string.
    value_ref(const char *s) noexcept : value_ref(std::string_view(s)) {}
    /// A UTF-8 string.
    value_ref(const std::string &s) noexcept : value_ref(std::string_view(s)) {}
    /// Other pointers are not values (they would silently become bools).
    template <class T> value_ref(T *) = delete;

    /// The C description.
    const shmobj_value *c() const noexcept { return ext_ != nullptr ? ext_ : &v_; }
};

/// A key of a dict or set borrowed for one call: an integer, a string, or
/// bytes (key_view::bytes(), or a value built with shmobj::bytes()).
class key_view {
    shmobj_value v_{};

public:
    /// An int key.
    template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
    key_view(T x) noexcept
    {
        v_.type = SHMOBJ_TYPE_INT;
        v_.v.i = static_cast<std::int64_t>(x);
    }
    /// A string key.
    key_view(std::string_view s) noexcept
    {
        v_.type = SHMOBJ_TYPE_STR;
        v_.v.s.ptr = s.data();
        v_.v.s.len = s.size();
    }
    /// A NUL-terminated string key.
    key_view(const char *s) noexcept : key_view(std::string_view(s)) {}
    /// A string key.
    key_view(const std::string &s) noexcept : key_view(std::string_view(s)) {}
    /// A key of a built value (an int, str or bytes; another kind is
    /// refused by the call with SHMOBJ_EINVAL).
    key_view(const value &v) noexcept : v_(*v.c()) {}
    /// A bytes key (not copied).
    static key_view bytes(const void *p, std::size_t n) noexcept
    {
        key_view k(std::string_view{});
        k.v_.type = SHMOBJ_TYPE_BYTES;
        k.v_.v.s.ptr = p;
        k.v_.v.s.len = n;
        return k;
    }
    /// The C description.
    const shmobj_value *c() const noexcept { return &v_; }
};

// ---- views ----------------------------------------------------------------

/// A view of one value in a segment (the C ::shmobj_view) together with a
/// share of its segment, so the memory it reads stays mapped while the
/// view lives. Valid until the object is freed or the item replaced, like
/// a pointer: after that, calls give SHMOBJ_ESTALE (see ::shmobj_view).
/// Scalar reads see the current value every time; updates are atomic and
/// seen by every process at once. Copy it freely.
class view {
    shmobj_view v_{};
    detail::segment_ptr owner_;

    view derived(const shmobj_view &v) const { return view(v, owner_); }

public:
    view() = default;
    /// Wraps a C view without a share of its segment: the caller keeps the
    /// segment open while it uses the result (segment::wrap() gives one
    /// that holds it).
    explicit view(const shmobj_view &v) noexcept : v_(v) {}
    /// @cond INTERNAL
    view(const shmobj_view &v, detail::segment_ptr owner) noexcept
        : v_(v), owner_(std::move(owner)) {}
    const detail::segment_ptr &owner() const noexcept { return owner_; }
    /// @endcond

    /// The C view.
    const shmobj_view *c() const noexcept { return &v_; }
    /// The C view.
    shmobj_view *c() noexcept { return &v_; }

    /// enum shmobj_type of the value.
    int type() const noexcept { return shmobj_view_type(&v_); }

    /// Items of a container, bytes of a string, bytes or buffer.
    std::size_t size(std::error_code &ec) const noexcept
    {
        std::size_t n = 0;
        set_status(ec, shmobj_view_len(&v_, &n));
        return n;
    }
    /// Items of a container, bytes of a string, bytes or buffer.
    std::size_t size() const
    {
        return detail::or_throw("shmobj_view_len", [&](std::error_code &ec) { return size(ec); });
    }

    /// Item i of a list (fixed or growable), tuple, struct or record, value
    /// i of a fixed dict, member i of a fixed set.
    view item(std::size_t i, std::error_code &ec) const
    {
        shmobj_view out;
        if (!set_status(ec, shmobj_view_item(&v_, i, &out)))
            return view();
        return derived(out);
    }
    /// Item i (see item()).
    view operator[](std::size_t i) const
    {
        return detail::or_throw("shmobj_view_item",
                                [&](std::error_code &ec) { return item(i, ec); });
    }
    /// The value under a key of a dict (fixed or mutable), or a field of a
    /// named struct or record; std::nullopt when absent.
    std::optional<view> find(key_view key, std::error_code &ec) const
    {
        shmobj_view out;
        int rc = shmobj_view_get(&v_, key.c(), &out);
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        return derived(out);
    }
    /// As find(key, ec), throwing on an error.
    std::optional<view> find(key_view key) const
    {
        return detail::or_throw("shmobj_view_get",
                                [&](std::error_code &ec) { return find(key, ec); });
    }
    /// The value under a string key (SHMOBJ_ENOTFOUND when absent).
    view operator[](std::string_view key) const
    {
        std::optional<view> v = find(key);
        if (!v)
            throw error(SHMOBJ_ENOTFOUND, "shmobj_view_get");
        return *v;
    }
    /// Key i of a fixed dict, member i of a set, name of field i of a
    /// struct or record.
    view key(std::size_t i, std::error_code &ec) const
    {
        shmobj_view out;
        if (!set_status(ec, shmobj_view_key(&v_, i, &out)))
            return view();
        return derived(out);
    }
    /// Key i (see key(i, ec)).
    view key(std::size_t i) const
    {
        return detail::or_throw("shmobj_view_key", [&](std::error_code &ec) { return key(i, ec); });
    }
    /// The target of a link (any other view is returned as it is).
    view follow(std::error_code &ec) const
    {
        shmobj_view out;
        if (!set_status(ec, shmobj_view_follow(&v_, &out)))
            return view();
        return derived(out);
    }
    /// The target of a link (SHMOBJ_ESTALE once it was freed).
    view follow() const
    {
        return detail::or_throw("shmobj_view_follow", [&](std::error_code &ec) { return follow(ec); });
    }

    /// A bool's value.
    bool as_bool(std::error_code &ec) const noexcept
    {
        int b = 0;
        set_status(ec, shmobj_bool_get(&v_, &b));
        return b != 0;
    }
    /// A bool's value.
    bool as_bool() const
    {
        return detail::or_throw("shmobj_bool_get", [&](std::error_code &ec) { return as_bool(ec); });
    }
    /// An int's value.
    std::int64_t as_int(std::error_code &ec) const noexcept
    {
        std::int64_t x = 0;
        set_status(ec, shmobj_int_get(&v_, &x));
        return x;
    }
    /// An int's value.
    std::int64_t as_int() const
    {
        return detail::or_throw("shmobj_int_get", [&](std::error_code &ec) { return as_int(ec); });
    }
    /// A uint's value.
    std::uint64_t as_uint(std::error_code &ec) const noexcept
    {
        std::uint64_t x = 0;
        set_status(ec, shmobj_uint_get(&v_, &x));
        return x;
    }
    /// A uint's value.
    std::uint64_t as_uint() const
    {
        return detail::or_throw("shmobj_uint_get", [&](std::error_code &ec) { return as_uint(ec); });
    }
    /// A double's value.
    double as_double(std::error_code &ec) const noexcept
    {
        double x = 0;
        set_status(ec, shmobj_double_get(&v_, &x));
        return x;
    }
    /// A double's value.
    double as_double() const
    {
        return detail::or_throw("shmobj_double_get", [&](std::error_code &ec) { return as_double(ec); });
    }
    /// A string's bytes in place (borrowed like the view).
    std::string_view as_str(std::error_code &ec) const noexcept
    {
        const char *s = nullptr;
        std::size_t n = 0;
        if (!set_status(ec, shmobj_str_get(&v_, &s, &n)))
            return {};
        return {s, n};
    }
    /// A string's bytes in place (borrowed like the view).
    std::string_view as_str() const
    {
        return detail::or_throw("shmobj_str_get", [&](std::error_code &ec) { return as_str(ec); });
    }
    /// A bytes value in place (borrowed like the view).
    std::string_view as_bytes(std::error_code &ec) const noexcept
    {
        const void *p = nullptr;
        std::size_t n = 0;
        if (!set_status(ec, shmobj_bytes_get(&v_, &p, &n)))
            return {};
        return {static_cast<const char *>(p), n};
    }
    /// A bytes value in place (borrowed like the view).
    std::string_view as_bytes() const
    {
        return detail::or_throw("shmobj_bytes_get", [&](std::error_code &ec) { return as_bytes(ec); });
    }
    /// A buffer's data address, dtype, shape and strides.
    shmobj_buffer_info buffer(std::error_code &ec) const noexcept
    {
        shmobj_buffer_info info{};
        info.struct_size = sizeof info;
        set_status(ec, shmobj_buffer_get(&v_, &info));
        return info;
    }
    /// A buffer's data address, dtype, shape and strides.
    shmobj_buffer_info buffer() const
    {
        return detail::or_throw("shmobj_buffer_get", [&](std::error_code &ec) { return buffer(ec); });
    }

    /// Atomic store of a scalar: a bool into a bool, a floating-point
    /// number into a double, a signed integer into an int, an unsigned one
    /// into a uint (another kind of slot: SHMOBJ_ETYPE).
    template <class T> void set(T x, std::error_code &ec) const noexcept
    {
        static_assert(std::is_arithmetic_v<T>, "set() takes a number or a bool");
        if constexpr (std::is_same_v<T, bool>)
            set_status(ec, shmobj_bool_set(&v_, x ? 1 : 0));
        else if constexpr (std::is_floating_point_v<T>)
            set_status(ec, shmobj_double_set(&v_, static_cast<double>(x)));
        else if constexpr (std::is_signed_v<T>)
            set_status(ec, shmobj_int_set(&v_, static_cast<std::int64_t>(x)));
        else
            set_status(ec, shmobj_uint_set(&v_, static_cast<std::uint64_t>(x)));
    }
    /// Atomic store of a scalar (see set(x, ec)).
    template <class T> void set(T x) const
    {
        detail::or_throw("shmobj_view_set", [&](std::error_code &ec) { set(x, ec); });
    }
    /// Atomic add, by the same rule of kinds as set(); returns the value
    /// before.
    template <class T> T add(T delta, std::error_code &ec) const noexcept
    {
        static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                      "add() takes a number");
        if constexpr (std::is_floating_point_v<T>) {
            double old = 0;
            set_status(ec, shmobj_double_add(&v_, static_cast<double>(delta), &old));
            return static_cast<T>(old);
        } else if constexpr (std::is_signed_v<T>) {
            std::int64_t old = 0;
            set_status(ec, shmobj_int_add(&v_, static_cast<std::int64_t>(delta), &old));
            return static_cast<T>(old);
        } else {
            std::uint64_t old = 0;
            set_status(ec, shmobj_uint_add(&v_, static_cast<std::uint64_t>(delta), &old));
            return static_cast<T>(old);
        }
    }
    /// Atomic add (see add(delta, ec)); returns the value before.
    template <class T> T add(T delta) const
    {
        return detail::or_throw("shmobj_view_add",
                                [&](std::error_code &ec) { return add(delta, ec); });
    }
    /// Atomic compare-and-swap of an int or uint: stores desired when the
    /// value is expected and returns true; else loads the value into
    /// expected and returns false.
    template <class T> bool compare_exchange(T &expected, T desired, std::error_code &ec) const noexcept
    {
        static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>,
                      "compare_exchange() takes an integer");
        int rc;
        if constexpr (std::is_signed_v<T>) {
            std::int64_t e = expected;
            rc = shmobj_int_cas(&v_, &e, static_cast<std::int64_t>(desired));
            expected = static_cast<T>(e);
        } else {
            std::uint64_t e = expected;
            rc = shmobj_uint_cas(&v_, &e, static_cast<std::uint64_t>(desired));
            expected = static_cast<T>(e);
        }
        if (rc == SHMOBJ_EBUSY) { // not expected: expected holds the value found
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Atomic compare-and-swap (see compare_exchange(expected, desired, ec)).
    template <class T> bool compare_exchange(T &expected, T desired) const
    {
        return detail::or_throw("shmobj_int_cas", [&](std::error_code &ec) {
            return compare_exchange(expected, desired, ec);
        });
    }
    /// Replace the value (see shmobj_view_set(): no process may still
    /// read the old object).
    void replace(value_ref v, std::error_code &ec) noexcept
    {
        set_status(ec, shmobj_view_set(&v_, v.c()));
    }
    /// Replace the value (see replace(v, ec)).
    void replace(value_ref v)
    {
        detail::or_throw("shmobj_view_set", [&](std::error_code &ec) { replace(v, ec); });
    }

    /// The value as compact JSON.
    std::string json(std::error_code &ec) const
    {
        std::size_t n = 0;
        int rc = shmobj_view_json(&v_, nullptr, 0, &n);
        if (rc != SHMOBJ_ENOBUFS && rc != 0) {
            set_status(ec, rc);
            return {};
        }
        std::string s(n + 1, '\0');
        if (!set_status(ec, shmobj_view_json(&v_, s.data(), s.size(), &n)))
            return {};
        s.resize(n);
        return s;
    }
    /// The value as compact JSON.
    std::string json() const
    {
        return detail::or_throw("shmobj_view_json", [&](std::error_code &ec) { return json(ec); });
    }
};

// ---- segment --------------------------------------------------------------

/// An attached segment. It moves and does not copy; the attachment itself
/// is shared with every object made through it (queues, maps, topics,
/// views...), and the process detaches when the last of them goes. The
/// segment stays until destroy() removes its name and the last process
/// detaches.
class segment {
    detail::segment_ptr s_;

    static segment adopt(shmobj_segment *s)
    {
        segment out;
        try {
            out.s_ = std::make_shared<detail::segment_holder>(s);
        } catch (...) {
            shmobj_segment_close(s);
            throw;
        }
        return out;
    }

public:
    /// No segment.
    segment() = default;
    segment(segment &&) noexcept = default;
    segment &operator=(segment &&) noexcept = default;
    segment(const segment &) = delete;
    segment &operator=(const segment &) = delete;

    /// Create a segment (options as in C, nullptr for the defaults).
    static segment create(const std::string &name, const shmobj_segment_options *opts,
                          std::error_code &ec)
    {
        shmobj_segment *s = nullptr;
        if (!set_status(ec, shmobj_segment_create(name.c_str(), opts, &s)))
            return segment();
        return adopt(s);
    }
    /// Create a segment (options as in C, nullptr for the defaults).
    static segment create(const std::string &name, const shmobj_segment_options *opts = nullptr)
    {
        return detail::or_throw("shmobj_segment_create",
                                [&](std::error_code &ec) { return create(name, opts, ec); });
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
    static segment open(const std::string &name, std::int64_t timeout_ns, unsigned backend,
                        std::error_code &ec)
    {
        shmobj_segment *s = nullptr;
        if (!set_status(ec, shmobj_segment_open(name.c_str(), backend, timeout_ns, &s)))
            return segment();
        return adopt(s);
    }
    /// Open a segment, waiting up to timeout_ns for its creator.
    static segment open(const std::string &name, std::int64_t timeout_ns = 0,
                        unsigned backend = SHMOBJ_BACKEND_SHM)
    {
        return detail::or_throw("shmobj_segment_open", [&](std::error_code &ec) {
            return open(name, timeout_ns, backend, ec);
        });
    }
    /// Remove a segment's name; false when there was none.
    static bool destroy(const std::string &name, unsigned backend, std::error_code &ec) noexcept
    {
        int rc = shmobj_segment_destroy(name.c_str(), backend);
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Remove a segment's name; false when there was none.
    static bool destroy(const std::string &name, unsigned backend = SHMOBJ_BACKEND_SHM)
    {
        return detail::or_throw("shmobj_segment_destroy", [&](std::error_code &ec) {
            return destroy(name, backend, ec);
        });
    }

    /// The C handle (nullptr for no segment). Valid while this object or
    /// anything made through it lives.
    shmobj_segment *c() const noexcept { return s_ ? s_->s : nullptr; }
    /// Whether this object holds a segment.
    explicit operator bool() const noexcept { return s_ != nullptr; }
    /// @cond INTERNAL
    const detail::segment_ptr &holder() const noexcept { return s_; }
    /// @endcond

    /// A C view of this segment, wrapped with a share of the segment.
    view wrap(const shmobj_view &v) const { return view(v, s_); }

    /// Wait (asleep) up to timeout_ns until count processes are attached;
    /// false on timeout.
    bool wait_attached(unsigned count, std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        int rc = shmobj_segment_wait_attached(c(), count, timeout_ns);
        if (rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Wait until count processes are attached; false on timeout.
    bool wait_attached(unsigned count, std::int64_t timeout_ns) const
    {
        return detail::or_throw("shmobj_segment_wait_attached", [&](std::error_code &ec) {
            return wait_attached(count, timeout_ns, ec);
        });
    }

    /// Write a value tree into the segment; the caller owns the object.
    ref put(value_ref v, std::error_code &ec) const noexcept
    {
        ref r = 0;
        set_status(ec, shmobj_obj_put(c(), v.c(), &r));
        return r;
    }
    /// Write a value tree into the segment; the caller owns the object.
    ref put(value_ref v) const
    {
        return detail::or_throw("shmobj_obj_put", [&](std::error_code &ec) { return put(v, ec); });
    }
    /// A view of an object (it holds a share of this segment).
    view get(ref r, std::error_code &ec) const
    {
        shmobj_view v;
        if (!set_status(ec, shmobj_obj_get(c(), r, &v)))
            return view();
        return view(v, s_);
    }
    /// A view of an object (it holds a share of this segment).
    view get(ref r) const
    {
        return detail::or_throw("shmobj_obj_get", [&](std::error_code &ec) { return get(r, ec); });
    }
    /// Free an object and its tree (a shape: see shmobj_shape_free()).
    void free(ref r, std::error_code &ec) const noexcept { set_status(ec, shmobj_obj_free(c(), r)); }
    /// Free an object and its tree.
    void free(ref r) const
    {
        detail::or_throw("shmobj_obj_free", [&](std::error_code &ec) { free(r, ec); });
    }

    /// Publish a reference under a name (replacing an earlier one).
    void root_set(const std::string &name, ref r, std::error_code &ec) const noexcept
    {
        set_status(ec, shmobj_segment_root_set(c(), name.c_str(), r));
    }
    /// Publish a reference under a name (replacing an earlier one).
    void root_set(const std::string &name, ref r) const
    {
        detail::or_throw("shmobj_segment_root_set",
                         [&](std::error_code &ec) { root_set(name, r, ec); });
    }
    /// Publish under a new name; false when the name exists.
    bool root_add(const std::string &name, ref r, std::error_code &ec) const noexcept
    {
        int rc = shmobj_segment_root_add(c(), name.c_str(), r);
        if (rc == SHMOBJ_EEXIST) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Publish under a new name; false when the name exists.
    bool root_add(const std::string &name, ref r) const
    {
        return detail::or_throw("shmobj_segment_root_add",
                                [&](std::error_code &ec) { return root_add(name, r, ec); });
    }
    /// The reference under a name, std::nullopt when absent.
    std::optional<ref> root_get(const std::string &name, std::error_code &ec) const noexcept
    {
        ref r = 0;
        int rc = shmobj_segment_root_get(c(), name.c_str(), &r);
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        return r;
    }
    /// The reference under a name, std::nullopt when absent.
    std::optional<ref> root_get(const std::string &name) const
    {
        return detail::or_throw("shmobj_segment_root_get",
                                [&](std::error_code &ec) { return root_get(name, ec); });
    }
    /// Wait (asleep) up to timeout_ns for a root; std::nullopt on timeout.
    std::optional<ref> root_wait(const std::string &name, std::int64_t timeout_ns,
                                 std::error_code &ec) const noexcept
    {
        ref r = 0;
        int rc = shmobj_segment_root_wait(c(), name.c_str(), timeout_ns, &r);
        if (rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        return r;
    }
    /// Wait (asleep) up to timeout_ns for a root; std::nullopt on timeout.
    std::optional<ref> root_wait(const std::string &name, std::int64_t timeout_ns) const
    {
        return detail::or_throw("shmobj_segment_root_wait", [&](std::error_code &ec) {
            return root_wait(name, timeout_ns, ec);
        });
    }
    /// Remove a root (not what it names); false when absent.
    bool root_del(const std::string &name, std::error_code &ec) const noexcept
    {
        int rc = shmobj_segment_root_del(c(), name.c_str());
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Remove a root (not what it names); false when absent.
    bool root_del(const std::string &name) const
    {
        return detail::or_throw("shmobj_segment_root_del",
                                [&](std::error_code &ec) { return root_del(name, ec); });
    }
};

// ---- mutable containers ---------------------------------------------------

/// A pair of begin and end iterators, for range-for (what the
/// error_code forms of begin() give).
template <class It> class range {
    It b_, e_;

public:
    /// @param b first @param e past the last
    range(It b, It e) : b_(std::move(b)), e_(std::move(e)) {}
    /// The first.
    It begin() const { return b_; }
    /// Past the last.
    It end() const { return e_; }
};

/// What mutable_list, mutable_dict and mutable_set share: a view of the
/// container (holding a share of its segment), its size, clear() and,
/// for a dict or set, contains() and erase().
class mutable_container {
protected:
    view v_; ///< the container

    mutable_container() = default;
    /// Takes v when it is of `type`, else sets ec to SHMOBJ_ETYPE.
    mutable_container(view v, int type, std::error_code &ec) noexcept
    {
        if (v.type() != type) {
            set_status(ec, SHMOBJ_ETYPE);
            return;
        }
        ec.clear();
        v_ = std::move(v);
    }
    bool contains_(key_view key, std::error_code &ec) const noexcept
    {
        int rc = shmobj_mut_contains(v_.c(), key.c());
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    bool erase_(key_view key, std::error_code &ec) const noexcept
    {
        int rc = shmobj_mut_delete(v_.c(), key.c());
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }

public:
    /// The view of the container.
    const view &as_view() const noexcept { return v_; }
    /// The C view.
    const shmobj_view *c() const noexcept { return v_.c(); }
    /// Whether this object names a container.
    explicit operator bool() const noexcept { return v_.type() != 0; }
    /// Items, pairs or members now (other processes may change it next).
    std::size_t size(std::error_code &ec) const noexcept { return v_.size(ec); }
    /// Items, pairs or members now.
    std::size_t size() const { return v_.size(); }
    /// Whether it is empty now.
    bool empty(std::error_code &ec) const noexcept { return size(ec) == 0 && !ec; }
    /// Whether it is empty now.
    bool empty() const { return size() == 0; }
    /// Remove every item (children freed).
    void clear(std::error_code &ec) const noexcept { set_status(ec, shmobj_mut_clear(v_.c())); }
    /// Remove every item (children freed).
    void clear() const
    {
        detail::or_throw("shmobj_mut_clear", [&](std::error_code &ec) { clear(ec); });
    }
};

/// A growable list (SHMOBJ_TYPE_MLIST) changed in place by any number of
/// processes (see "Mutable containers" in <shmobj/object.h>).
///
/// Iteration goes by position, from 0 until a position past the list's
/// current length: the loop ends cleanly when other processes shorten the
/// list meanwhile (an item deleted before the cursor makes it skip one, an
/// item inserted before it shows one twice; appends are seen). Each step
/// is one lock-free read. A list freed meanwhile ends the loop with
/// SHMOBJ_ESTALE: thrown by begin() and ++, set by items(ec)'s iterators.
class mutable_list : public mutable_container {
public:
    /// An input iterator over the items' views.
    class iterator {
        view list_;
        view cur_;
        std::size_t i_ = 0;
        bool done_ = true;
        std::error_code *ec_ = nullptr;

        void fetch()
        {
            shmobj_view out;
            int rc = shmobj_mlist_get(list_.c(), i_, &out);
            if (rc == 0) {
                cur_ = view(out, list_.owner());
                return;
            }
            done_ = true;
            cur_ = view();
            if (rc == SHMOBJ_ERANGE) // past the end, also of a list shortened meanwhile
                return;
            if (ec_ == nullptr)
                throw error(rc, "shmobj_mlist_get");
            set_status(*ec_, rc);
        }

    public:
        /// @cond INTERNAL
        using iterator_category = std::input_iterator_tag;
        using value_type = view;
        using difference_type = std::ptrdiff_t;
        using pointer = const view *;
        using reference = const view &;
        /// @endcond
        /// The end.
        iterator() = default;
        /// @cond INTERNAL
        iterator(view list, std::error_code *ec) : list_(std::move(list)), done_(false), ec_(ec)
        {
            if (ec_ != nullptr)
                ec_->clear();
            fetch();
        }
        /// @endcond
        /// The item's view.
        const view &operator*() const noexcept { return cur_; }
        /// The item's view.
        const view *operator->() const noexcept { return &cur_; }
        /// The next position.
        iterator &operator++()
        {
            i_++;
            fetch();
            return *this;
        }
        /// The next position.
        void operator++(int) { ++*this; }
        /// Its position.
        std::size_t index() const noexcept { return i_; }
        /// Equal when both ended, or at one position of one list.
        bool operator==(const iterator &o) const noexcept
        {
            return done_ == o.done_ && (done_ || i_ == o.i_);
        }
        /// Not equal.
        bool operator!=(const iterator &o) const noexcept { return !(*this == o); }
    };

    /// No list.
    mutable_list() = default;
    /// The list v views (SHMOBJ_ETYPE in ec when it is no growable list).
    mutable_list(view v, std::error_code &ec) noexcept : mutable_container(std::move(v), SHMOBJ_TYPE_MLIST, ec) {}
    /// The list v views (throws SHMOBJ_ETYPE when it is no growable list).
    explicit mutable_list(view v)
    {
        std::error_code ec;
        *this = mutable_list(std::move(v), ec);
        if (ec)
            throw error(ec.value(), "shmobj::mutable_list");
    }

    /// The first item (throws on an error other than the end).
    iterator begin() const { return iterator(v_, nullptr); }
    /// The end.
    iterator end() const noexcept { return iterator(); }
    /// Items for range-for whose iterators end on an error and set ec.
    range<iterator> items(std::error_code &ec) const { return {iterator(v_, &ec), iterator()}; }

    /// A view of the item at position i (SHMOBJ_ERANGE past the end).
    view at(std::size_t i, std::error_code &ec) const
    {
        shmobj_view out;
        if (!set_status(ec, shmobj_mlist_get(v_.c(), i, &out)))
            return view();
        return view(out, v_.owner());
    }
    /// A view of the item at position i.
    view at(std::size_t i) const
    {
        return detail::or_throw("shmobj_mlist_get", [&](std::error_code &ec) { return at(i, ec); });
    }
    /// A view of the item at position i.
    view operator[](std::size_t i) const { return at(i); }
    /// The int item at position i, without a view.
    std::int64_t get_int(std::size_t i, std::error_code &ec) const noexcept
    {
        std::int64_t x = 0;
        set_status(ec, shmobj_mlist_get_int(v_.c(), i, &x));
        return x;
    }
    /// The int item at position i, without a view.
    std::int64_t get_int(std::size_t i) const
    {
        return detail::or_throw("shmobj_mlist_get_int",
                                [&](std::error_code &ec) { return get_int(i, ec); });
    }
    /// Append an item (a scalar or null without the lock).
    void append(value_ref v, std::error_code &ec) const noexcept
    {
        set_status(ec, shmobj_mlist_append(v_.c(), v.c()));
    }
    /// Append an item.
    void append(value_ref v) const
    {
        detail::or_throw("shmobj_mlist_append", [&](std::error_code &ec) { append(v, ec); });
    }
    /// Insert before position i (i == size() appends).
    void insert(std::size_t i, value_ref v, std::error_code &ec) const noexcept
    {
        set_status(ec, shmobj_mlist_insert(v_.c(), i, v.c()));
    }
    /// Insert before position i.
    void insert(std::size_t i, value_ref v) const
    {
        detail::or_throw("shmobj_mlist_insert", [&](std::error_code &ec) { insert(i, v, ec); });
    }
    /// Replace the item at position i (the old one's child is freed).
    void set(std::size_t i, value_ref v, std::error_code &ec) const noexcept
    {
        set_status(ec, shmobj_mlist_set(v_.c(), i, v.c()));
    }
    /// Replace the item at position i.
    void set(std::size_t i, value_ref v) const
    {
        detail::or_throw("shmobj_mlist_set", [&](std::error_code &ec) { set(i, v, ec); });
    }
    /// Delete the item at position i (its child is freed).
    void erase(std::size_t i, std::error_code &ec) const noexcept
    {
        set_status(ec, shmobj_mlist_delete(v_.c(), i));
    }
    /// Delete the item at position i.
    void erase(std::size_t i) const
    {
        detail::or_throw("shmobj_mlist_delete", [&](std::error_code &ec) { erase(i, ec); });
    }
    /// Remove the item at position i (negative: from the end) and hand it
    /// over as an object of its own, which the caller frees
    /// (segment::free()).
    ref pop(std::int64_t i, std::error_code &ec) const noexcept
    {
        ref r = 0;
        set_status(ec, shmobj_mlist_pop(v_.c(), i, &r));
        return r;
    }
    /// Remove the item at position i (default: the last) and hand it over.
    ref pop(std::int64_t i = -1) const
    {
        return detail::or_throw("shmobj_mlist_pop", [&](std::error_code &ec) { return pop(i, ec); });
    }
};

/// @cond INTERNAL
namespace detail {

// The iterator of a mutable dict (Pair: key and value views) or set
// (view: the member), over shmobj_miter_next().
template <bool Pair> class miter_iterator {
public:
    using item_type = std::conditional_t<Pair, std::pair<view, view>, view>;

private:
    shmobj_miter it_{};
    segment_ptr owner_;
    item_type cur_{};
    std::uint64_t n_ = 0;
    bool done_ = true;
    std::error_code *ec_ = nullptr;

    void fetch()
    {
        shmobj_view k, v;
        int rc = shmobj_miter_next(&it_, &k, Pair ? &v : nullptr);
        if (rc == 0) {
            if constexpr (Pair)
                cur_ = {view(k, owner_), view(v, owner_)};
            else
                cur_ = view(k, owner_);
            n_++;
            return;
        }
        done_ = true;
        cur_ = item_type{};
        if (rc == SHMOBJ_ENOTFOUND)
            return;
        if (ec_ == nullptr)
            throw error(rc, "shmobj_miter_next");
        set_status(*ec_, rc);
    }

public:
    using iterator_category = std::input_iterator_tag;
    using value_type = item_type;
    using difference_type = std::ptrdiff_t;
    using pointer = const item_type *;
    using reference = const item_type &;

    miter_iterator() = default;
    miter_iterator(const view &c, std::error_code *ec) : owner_(c.owner()), done_(false), ec_(ec)
    {
        if (ec_ != nullptr)
            ec_->clear();
        int rc = shmobj_miter_init(c.c(), &it_);
        if (rc != 0) {
            done_ = true;
            if (ec_ == nullptr)
                throw error(rc, "shmobj_miter_init");
            set_status(*ec_, rc);
            return;
        }
        fetch();
    }
    const item_type &operator*() const noexcept { return cur_; }
    const item_type *operator->() const noexcept { return &cur_; }
    miter_iterator &operator++()
    {
        fetch();
        return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(const miter_iterator &o) const noexcept
    {
        return done_ == o.done_ && (done_ || n_ == o.n_);
    }
    bool operator!=(const miter_iterator &o) const noexcept { return !(*this == o); }
};

} // namespace detail
/// @endcond

/// A mutable dict (SHMOBJ_TYPE_MDICT) changed in place by any number of
/// processes. Keys are ints, strings or bytes (key_view).
///
/// Iteration follows insertion order and yields std::pair<view, view>
/// (key, value; structured bindings work). It keeps the shared map's
/// promise whatever other processes do meanwhile: every key present for
/// the whole loop is seen exactly once, one inserted or deleted during it
/// may or may not be; the loop always ends. A dict freed meanwhile ends it
/// with SHMOBJ_ESTALE (thrown, or set by items(ec)'s iterators).
class mutable_dict : public mutable_container {
    static int prepare(shmobj_key &k, key_view key) noexcept { return shmobj_key_init(&k, key.c()); }

public:
    /// An input iterator over (key, value) pairs of views.
    using iterator = detail::miter_iterator<true>;

    /// No dict.
    mutable_dict() = default;
    /// The dict v views (SHMOBJ_ETYPE in ec when it is no mutable dict).
    mutable_dict(view v, std::error_code &ec) noexcept : mutable_container(std::move(v), SHMOBJ_TYPE_MDICT, ec) {}
    /// The dict v views (throws SHMOBJ_ETYPE when it is no mutable dict).
    explicit mutable_dict(view v)
    {
        std::error_code ec;
        *this = mutable_dict(std::move(v), ec);
        if (ec)
            throw error(ec.value(), "shmobj::mutable_dict");
    }

    /// The first pair (throws on an error).
    iterator begin() const { return iterator(v_, nullptr); }
    /// The end.
    iterator end() const noexcept { return iterator(); }
    /// Pairs for range-for whose iterators end on an error and set ec.
    range<iterator> items(std::error_code &ec) const { return {iterator(v_, &ec), iterator()}; }

    /// Insert or replace (the old value's child is freed).
    void set(key_view key, value_ref v, std::error_code &ec) const noexcept
    {
        set_status(ec, shmobj_mdict_set(v_.c(), key.c(), v.c()));
    }
    /// Insert or replace.
    void set(key_view key, value_ref v) const
    {
        detail::or_throw("shmobj_mdict_set", [&](std::error_code &ec) { set(key, v, ec); });
    }
    /// A view of the value under key; std::nullopt when absent.
    std::optional<view> get(key_view key, std::error_code &ec) const
    {
        shmobj_view out;
        int rc = shmobj_mdict_get(v_.c(), key.c(), &out);
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        return view(out, v_.owner());
    }
    /// A view of the value under key; std::nullopt when absent.
    std::optional<view> get(key_view key) const
    {
        return detail::or_throw("shmobj_mdict_get", [&](std::error_code &ec) { return get(key, ec); });
    }
    /// A view of the value under key (SHMOBJ_ENOTFOUND when absent).
    view operator[](key_view key) const
    {
        std::optional<view> v = get(key);
        if (!v)
            throw error(SHMOBJ_ENOTFOUND, "shmobj_mdict_get");
        return *v;
    }
    /// The int value under key, without a view; std::nullopt when absent.
    std::optional<std::int64_t> get_int(key_view key, std::error_code &ec) const noexcept
    {
        shmobj_key k;
        std::int64_t x = 0;
        int rc = prepare(k, key);
        if (rc == 0)
            rc = shmobj_mdict_get_int(v_.c(), &k, &x);
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        return x;
    }
    /// The int value under key, without a view; std::nullopt when absent.
    std::optional<std::int64_t> get_int(key_view key) const
    {
        return detail::or_throw("shmobj_mdict_get_int",
                                [&](std::error_code &ec) { return get_int(key, ec); });
    }
    /// Atomic add to the int value under key (which must exist:
    /// SHMOBJ_ENOTFOUND otherwise); returns the value before.
    std::int64_t add(key_view key, std::int64_t delta, std::error_code &ec) const noexcept
    {
        shmobj_key k;
        std::int64_t old = 0;
        int rc = prepare(k, key);
        if (rc == 0)
            rc = shmobj_mdict_int_add(v_.c(), &k, delta, &old);
        set_status(ec, rc);
        return old;
    }
    /// Atomic add to the int value under key; returns the value before.
    std::int64_t add(key_view key, std::int64_t delta) const
    {
        return detail::or_throw("shmobj_mdict_int_add",
                                [&](std::error_code &ec) { return add(key, delta, ec); });
    }
    /// Whether key is present now.
    bool contains(key_view key, std::error_code &ec) const noexcept { return contains_(key, ec); }
    /// Whether key is present now.
    bool contains(key_view key) const
    {
        return detail::or_throw("shmobj_mut_contains",
                                [&](std::error_code &ec) { return contains_(key, ec); });
    }
    /// Delete key (its children freed); false when it was absent.
    bool erase(key_view key, std::error_code &ec) const noexcept { return erase_(key, ec); }
    /// Delete key; false when it was absent.
    bool erase(key_view key) const
    {
        return detail::or_throw("shmobj_mut_delete",
                                [&](std::error_code &ec) { return erase_(key, ec); });
    }
};

/// A mutable set (SHMOBJ_TYPE_MSET) of ints, strings or bytes changed in
/// place by any number of processes. Iteration yields the members' views
/// with the promise of mutable_dict's.
class mutable_set : public mutable_container {
public:
    /// An input iterator over the members' views.
    using iterator = detail::miter_iterator<false>;

    /// No set.
    mutable_set() = default;
    /// The set v views (SHMOBJ_ETYPE in ec when it is no mutable set).
    mutable_set(view v, std::error_code &ec) noexcept : mutable_container(std::move(v), SHMOBJ_TYPE_MSET, ec) {}
    /// The set v views (throws SHMOBJ_ETYPE when it is no mutable set).
    explicit mutable_set(view v)
    {
        std::error_code ec;
        *this = mutable_set(std::move(v), ec);
        if (ec)
            throw error(ec.value(), "shmobj::mutable_set");
    }

    /// The first member (throws on an error).
    iterator begin() const { return iterator(v_, nullptr); }
    /// The end.
    iterator end() const noexcept { return iterator(); }
    /// Members for range-for whose iterators end on an error and set ec.
    range<iterator> items(std::error_code &ec) const { return {iterator(v_, &ec), iterator()}; }

    /// Add a member; false when it was one already.
    bool add(key_view key, std::error_code &ec) const noexcept
    {
        int rc = shmobj_mset_add(v_.c(), key.c());
        if (rc == SHMOBJ_EEXIST) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Add a member; false when it was one already.
    bool add(key_view key) const
    {
        return detail::or_throw("shmobj_mset_add", [&](std::error_code &ec) { return add(key, ec); });
    }
    /// Whether key is a member now.
    bool contains(key_view key, std::error_code &ec) const noexcept { return contains_(key, ec); }
    /// Whether key is a member now.
    bool contains(key_view key) const
    {
        return detail::or_throw("shmobj_mut_contains",
                                [&](std::error_code &ec) { return contains_(key, ec); });
    }
    /// Remove a member; false when it was absent.
    bool erase(key_view key, std::error_code &ec) const noexcept { return erase_(key, ec); }
    /// Remove a member; false when it was absent.
    bool erase(key_view key) const
    {
        return detail::or_throw("shmobj_mut_delete",
                                [&](std::error_code &ec) { return erase_(key, ec); });
    }
};

// ---- shapes and records ---------------------------------------------------

/// A link field of a record struct (SHMOBJ_TYPE_LINK): the target's
/// reference. Same bytes as a shmobj_ref.
struct link_ref {
    ref target; ///< the object linked to (not null when put)
};
/// An object field of a record struct (SHMOBJ_TYPE_NULL, "any object"):
/// the reference of an object the record adopts when put, or 0 for null.
/// Same bytes as a shmobj_ref.
struct object_ref {
    ref object; ///< the object, or SHMOBJ_REF_NULL
};

/// @cond INTERNAL
namespace detail {

template <class M, class = void> struct field_kind {
    static_assert(sizeof(M) == 0,
                  "a record field is bool, a 64-bit integer, double, const char *, "
                  "char[N], std::uint8_t[N], shmobj::link_ref or shmobj::object_ref");
};
// Any 64-bit integer type (std::int64_t is long or long long by platform).
template <class M>
struct field_kind<M, std::enable_if_t<std::is_integral_v<M> && !std::is_same_v<M, bool>>> {
    static_assert(sizeof(M) == 8,
                  "an integer field of a record is 64 bits (std::int64_t or std::uint64_t)");
    static constexpr std::uint32_t kind = std::is_signed_v<M> ? SHMOBJ_TYPE_INT : SHMOBJ_TYPE_UINT;
    static constexpr std::uint32_t capacity = 0;
};
template <> struct field_kind<bool> {
    static constexpr std::uint32_t kind = SHMOBJ_TYPE_BOOL, capacity = 0;
};
template <> struct field_kind<double> {
    static constexpr std::uint32_t kind = SHMOBJ_TYPE_DOUBLE, capacity = 0;
};
template <> struct field_kind<const char *> {
    static constexpr std::uint32_t kind = SHMOBJ_TYPE_STR, capacity = 0;
};
template <std::size_t N> struct field_kind<char[N]> {
    static_assert(N <= UINT32_MAX, "string field too long");
    static constexpr std::uint32_t kind = SHMOBJ_TYPE_STR, capacity = static_cast<std::uint32_t>(N);
};
template <std::size_t N> struct field_kind<std::uint8_t[N]> {
    static_assert(N <= UINT32_MAX, "bytes field too long");
    static constexpr std::uint32_t kind = SHMOBJ_TYPE_BYTES, capacity = static_cast<std::uint32_t>(N);
};
template <> struct field_kind<link_ref> {
    static constexpr std::uint32_t kind = SHMOBJ_TYPE_LINK, capacity = 0;
};
template <> struct field_kind<object_ref> {
    static constexpr std::uint32_t kind = SHMOBJ_TYPE_NULL, capacity = 0;
};

} // namespace detail
/// @endcond

/// A field of a C++ struct at `offset`, its kind and capacity taken from
/// its type M (see SHMOBJ_HPP_FIELD(), which fills both in).
template <class M> shmobj_field field_of(const char *name, std::size_t offset) noexcept
{
    using K = detail::field_kind<std::remove_cv_t<M>>;
    shmobj_field f{};
    f.name = name;
    f.kind = K::kind;
    f.capacity = K::capacity;
    f.offset = offset;
    return f;
}

/// A field of a struct for record_type: SHMOBJ_HPP_FIELD(reading, temp).
/// The field's name is the member's; its kind comes from the member's
/// type: bool, std::int64_t, std::uint64_t, double, const char * (a string
/// of any length), char[N] (a string of at most N bytes),
/// std::uint8_t[N] (N bytes), shmobj::link_ref, shmobj::object_ref.
#define SHMOBJ_HPP_FIELD(type, member) \
    (::shmobj::field_of<decltype(type::member)>(#member, offsetof(type, member)))

/// A record type declared once from a C++ struct T: the shape's field
/// table, the put of a T as a record and the read of a record back into a
/// T.
///
///     struct reading { std::int64_t id; double temp; char sensor[16]; };
///     const shmobj::record_type<reading> reading_type{
///         SHMOBJ_HPP_FIELD(reading, id), SHMOBJ_HPP_FIELD(reading, temp),
///         SHMOBJ_HPP_FIELD(reading, sensor)};
///     shmobj::ref shape = reading_type.make_shape(seg);   // once
///     shmobj::ref r = reading_type.put(seg, shape, reading{7, 21.5, "boiler"});
///     reading back = reading_type.get(seg.get(r));
///
/// A record costs one 16-byte slot per field (and its strings' bytes):
/// names live once, in the shape. Fields are read and updated in place by
/// position through a view (v[i], fastest) or by name (v["temp"]).
template <class T> class record_type {
    static_assert(std::is_standard_layout_v<T> && std::is_trivially_copyable_v<T>,
                  "a record struct is standard-layout and trivially copyable");
    std::vector<shmobj_field> fields_;

public:
    /// The fields, in the shape's order (SHMOBJ_HPP_FIELD()).
    record_type(std::initializer_list<shmobj_field> fields) : fields_(fields) {}

    /// The C field table.
    const std::vector<shmobj_field> &fields() const noexcept { return fields_; }
    /// The position of a field by name (what v[i] takes); std::nullopt
    /// when no field has it.
    std::optional<std::size_t> index(std::string_view name) const noexcept
    {
        for (std::size_t i = 0; i < fields_.size(); i++)
            if (name == fields_[i].name)
                return i;
        return std::nullopt;
    }

    /// Build the shape in a segment; the caller owns it (free it with
    /// segment::free() once no record uses it).
    ref make_shape(const segment &seg, std::error_code &ec) const noexcept
    {
        ref r = 0;
        set_status(ec, shmobj_shape_put(seg.c(), fields_.data(), fields_.size(), &r));
        return r;
    }
    /// Build the shape in a segment.
    ref make_shape(const segment &seg) const
    {
        return detail::or_throw("shmobj_shape_put",
                                [&](std::error_code &ec) { return make_shape(seg, ec); });
    }
    /// Put x as a record of shape (made from this table: SHMOBJ_EINVAL
    /// otherwise); the caller owns the record.
    ref put(const segment &seg, ref shape, const T &x, std::error_code &ec) const noexcept
    {
        ref r = 0;
        set_status(ec, shmobj_record_put_fields(seg.c(), shape, fields_.data(), fields_.size(),
                                                &x, &r));
        return r;
    }
    /// Put x as a record of shape; the caller owns the record.
    ref put(const segment &seg, ref shape, const T &x) const
    {
        return detail::or_throw("shmobj_record_put_fields",
                                [&](std::error_code &ec) { return put(seg, shape, x, ec); });
    }
    /// Read a record (or any struct of these fields by position) into a
    /// T. A char[N] field gets the string's bytes and zeros after them; a
    /// const char * field points at the string inside the segment (valid
    /// while the record and a handle of its segment live); an object_ref
    /// field is left 0 (read the object through the view: v[i]). A record
    /// of another number of fields is SHMOBJ_ETYPE, a field of another
    /// kind the error of its read (SHMOBJ_ETYPE).
    T get(const view &rec, std::error_code &ec) const
    {
        T out{};
        std::size_t n = rec.size(ec);
        if (ec)
            return out;
        if (n != fields_.size()) {
            set_status(ec, SHMOBJ_ETYPE);
            return out;
        }
        auto *base = reinterpret_cast<unsigned char *>(&out);
        for (std::size_t i = 0; i < n; i++) {
            const shmobj_field &f = fields_[i];
            view v = rec.item(i, ec);
            if (ec)
                return T{};
            unsigned char *at = base + f.offset;
            switch (f.kind) {
            case SHMOBJ_TYPE_BOOL: {
                bool b = v.as_bool(ec);
                std::memcpy(at, &b, sizeof b);
                break;
            }
            case SHMOBJ_TYPE_INT: {
                std::int64_t x = v.as_int(ec);
                std::memcpy(at, &x, sizeof x);
                break;
            }
            case SHMOBJ_TYPE_UINT: {
                std::uint64_t x = v.as_uint(ec);
                std::memcpy(at, &x, sizeof x);
                break;
            }
            case SHMOBJ_TYPE_DOUBLE: {
                double x = v.as_double(ec);
                std::memcpy(at, &x, sizeof x);
                break;
            }
            case SHMOBJ_TYPE_STR:
            case SHMOBJ_TYPE_BYTES: {
                std::string_view s = f.kind == SHMOBJ_TYPE_STR ? v.as_str(ec) : v.as_bytes(ec);
                if (ec)
                    break;
                if (f.capacity == 0) {
                    const char *p = s.data();
                    std::memcpy(at, &p, sizeof p);
                } else if (s.size() > f.capacity) {
                    set_status(ec, SHMOBJ_ERANGE); // a record of another shape
                } else {
                    std::memcpy(at, s.data(), s.size());
                }
                break;
            }
            case SHMOBJ_TYPE_LINK: {
                ref r = 0;
                set_status(ec, shmobj_link_get(v.c(), &r));
                std::memcpy(at, &r, sizeof r);
                break;
            }
            default: // an object field: read through the view
                break;
            }
            if (ec)
                return T{};
        }
        return out;
    }
    /// Read a record into a T (see get(rec, ec)).
    T get(const view &rec) const
    {
        return detail::or_throw("shmobj::record_type::get",
                                [&](std::error_code &ec) { return get(rec, ec); });
    }
};

// ---- service ----------------------------------------------------------------

/// A request/response service (include/shmobj/service.h) with requests
/// and responses of bytes. Holds a share of its segment; the destructor
/// closes the handle (the service stays until destroy()).
///
///     auto svc = shmobj::service::open(seg, "adder", 5'000'000'000);
///     std::string answer = svc.call("41", 250'000'000);   // a client
///     if (auto req = svc.take(1'000'000'000))              // a server
///         svc.reply(*req, "42");
class service {
    std::shared_ptr<detail::service_holder> h_;

    static service adopt(const segment &seg, shmobj_service *s)
    {
        service out;
        try {
            out.h_ = std::make_shared<detail::service_holder>(seg.holder(), s);
        } catch (...) {
            shmobj_service_close(s);
            throw;
        }
        return out;
    }

public:
    /// A request taken by a server: its bytes (valid until it is answered
    /// or released) and what reply() needs.
    class request {
        friend class service;
        shmobj_service_msg m_{};

    public:
        /// The request's bytes (empty when it is an object or a raw block).
        std::string_view bytes() const noexcept
        {
            return {static_cast<const char *>(m_.data), m_.len};
        }
        /// Whether the request is a typed object (read it with
        /// service::object()).
        bool is_object() const noexcept { return (m_.flags & SHMOBJ_SERVICE_OBJECT) != 0; }
        /// The C message.
        shmobj_service_msg *c() noexcept { return &m_; }
    };

    /// A response received by call_object(): bytes or a typed object, the
    /// client's until this goes, which gives it back
    /// (shmobj_service_release()). Move-only.
    class response {
        friend class service;
        std::shared_ptr<detail::service_holder> h_;
        shmobj_service_msg m_{};
        view v_;

        void reset() noexcept
        {
            if (h_ && m_.ref != 0)
                (void)shmobj_service_release(h_->s, &m_);
            m_ = {};
            v_ = view();
            h_.reset();
        }

    public:
        response() = default;
        response(response &&o) noexcept : h_(std::move(o.h_)), m_(o.m_), v_(std::move(o.v_))
        {
            o.m_ = {};
        }
        response &operator=(response &&o) noexcept
        {
            if (this != &o) {
                reset();
                h_ = std::move(o.h_);
                m_ = o.m_;
                v_ = std::move(o.v_);
                o.m_ = {};
            }
            return *this;
        }
        response(const response &) = delete;
        response &operator=(const response &) = delete;
        ~response() { reset(); }

        /// Whether the response is a typed object.
        bool is_object() const noexcept { return (m_.flags & SHMOBJ_SERVICE_OBJECT) != 0; }
        /// The object (an empty view when the response is bytes): valid
        /// while this response lives, SHMOBJ_ESTALE on reads after.
        const view &object() const noexcept { return v_; }
        /// The bytes (empty when the response is an object).
        std::string_view bytes() const noexcept
        {
            return {static_cast<const char *>(m_.data), m_.len};
        }
    };

    /// No service.
    service() = default;

    /// Create a service for up to capacity calls in flight (a power of
    /// two).
    static service create(const segment &seg, const std::string &name, std::uint32_t capacity,
                          std::error_code &ec)
    {
        shmobj_service *s = nullptr;
        if (!set_status(ec, shmobj_service_create(seg.c(), name.c_str(), capacity, 0, &s)))
            return service();
        return adopt(seg, s);
    }
    /// Create a service.
    static service create(const segment &seg, const std::string &name, std::uint32_t capacity)
    {
        return detail::or_throw("shmobj_service_create", [&](std::error_code &ec) {
            return create(seg, name, capacity, ec);
        });
    }
    /// Open a service, or create it (for up to capacity calls in flight)
    /// when there is none.
    static service open_or_create(const segment &seg, const std::string &name,
                                  std::uint32_t capacity, std::error_code &ec)
    {
        shmobj_service *s = nullptr;
        if (!set_status(ec, shmobj_service_open_or_create(seg.c(), name.c_str(), capacity, 0, &s)))
            return service();
        return adopt(seg, s);
    }
    /// Open a service, or create it when there is none.
    static service open_or_create(const segment &seg, const std::string &name,
                                  std::uint32_t capacity)
    {
        return detail::or_throw("shmobj_service_open_or_create", [&](std::error_code &ec) {
            return open_or_create(seg, name, capacity, ec);
        });
    }
    /// Open a service, waiting up to timeout_ns for it to be created (0:
    /// look once).
    static service open(const segment &seg, const std::string &name, std::int64_t timeout_ns,
                        std::error_code &ec)
    {
        shmobj_service *s = nullptr;
        if (!set_status(ec, shmobj_service_open(seg.c(), name.c_str(), timeout_ns, &s)))
            return service();
        return adopt(seg, s);
    }
    /// Open a service.
    static service open(const segment &seg, const std::string &name, std::int64_t timeout_ns = 0)
    {
        return detail::or_throw("shmobj_service_open", [&](std::error_code &ec) {
            return open(seg, name, timeout_ns, ec);
        });
    }

    /// The C handle.
    shmobj_service *c() const noexcept { return h_ ? h_->s : nullptr; }

    /// Send request and wait up to timeout_ns for its own response.
    /// SHMOBJ_ETIMEDOUT when none came (the late answer is freed),
    /// SHMOBJ_EPEERDEAD when the server that took it died.
    std::string call(std::string_view req, std::int64_t timeout_ns, std::error_code &ec) const
    {
        shmobj_service_msg in{};
        in.data = req.data();
        in.len = req.size();
        in.flags = SHMOBJ_SERVICE_BYTES;
        shmobj_service_msg out{};
        if (!set_status(ec, shmobj_service_call(c(), &in, timeout_ns, &out)))
            return std::string();
        std::string answer(static_cast<const char *>(out.data), out.len);
        (void)shmobj_service_release(c(), &out);
        return answer;
    }
    /// Send request and wait for its response.
    std::string call(std::string_view req, std::int64_t timeout_ns) const
    {
        return detail::or_throw("shmobj_service_call", [&](std::error_code &ec) {
            return call(req, timeout_ns, ec);
        });
    }

    /// Send value as a typed object (written into the segment here and
    /// handed over by reference, no copy) and wait up to timeout_ns for its
    /// own response, bytes or an object. The object is freed by the service
    /// (or here, when the call fails before it is sent).
    response call_object(value_ref req, std::int64_t timeout_ns, std::error_code &ec) const
    {
        response out;
        ref r = 0;
        if (!set_status(ec, shmobj_obj_put(h_ ? h_->seg->s : nullptr, req.c(), &r)))
            return out;
        shmobj_service_msg in{};
        in.ref = r;
        in.flags = SHMOBJ_SERVICE_OBJECT;
        int rc = shmobj_service_call(c(), &in, timeout_ns, &out.m_);
        if (rc == SHMOBJ_EINVAL || rc == SHMOBJ_EFULL || rc == SHMOBJ_ENOMEM ||
            rc == SHMOBJ_ENOTSUP || rc == SHMOBJ_ERDONLY)
            (void)shmobj_obj_free(h_->seg->s, r); /* nothing was sent */
        if (!set_status(ec, rc))
            return out;
        out.h_ = h_;
        if (out.is_object()) {
            shmobj_view v;
            if (set_status(ec, shmobj_obj_get(h_->seg->s, out.m_.ref, &v)))
                out.v_ = view(v, h_->seg);
            else
                out.reset();
        }
        return out;
    }
    /// Send value as a typed object and wait for its response.
    response call_object(value_ref req, std::int64_t timeout_ns) const
    {
        return detail::or_throw("shmobj_service_call", [&](std::error_code &ec) {
            return call_object(req, timeout_ns, ec);
        });
    }

    /// A taken request's object (it holds a share of the segment; valid
    /// until the request is answered or released). SHMOBJ_ETYPE when the
    /// request is not an object.
    view object(const request &req, std::error_code &ec) const
    {
        shmobj_view v;
        if (!req.is_object()) {
            set_status(ec, SHMOBJ_ETYPE);
            return view();
        }
        if (!set_status(ec, shmobj_obj_get(h_ ? h_->seg->s : nullptr, req.m_.ref, &v)))
            return view();
        return view(v, h_->seg);
    }
    /// A taken request's object.
    view object(const request &req) const
    {
        return detail::or_throw("shmobj_obj_get",
                                [&](std::error_code &ec) { return object(req, ec); });
    }

    /// Take the next request, waiting up to timeout_ns; std::nullopt when
    /// none came.
    std::optional<request> take(std::int64_t timeout_ns, std::error_code &ec) const
    {
        request r;
        int rc = shmobj_service_take(c(), timeout_ns, &r.m_);
        if (rc == SHMOBJ_ETIMEDOUT || rc == SHMOBJ_EEMPTY) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        return r;
    }
    /// Take the next request; std::nullopt when none came in time.
    std::optional<request> take(std::int64_t timeout_ns) const
    {
        return detail::or_throw("shmobj_service_take", [&](std::error_code &ec) {
            return take(timeout_ns, ec);
        });
    }

    /// Answer a taken request with bytes; the request is freed.
    void reply(request &req, std::string_view resp, std::error_code &ec) const noexcept
    {
        shmobj_service_msg out{};
        out.data = resp.data();
        out.len = resp.size();
        out.flags = SHMOBJ_SERVICE_BYTES;
        set_status(ec, shmobj_service_reply(c(), &req.m_, &out));
    }
    /// Answer a taken request with bytes.
    void reply(request &req, std::string_view resp) const
    {
        detail::or_throw("shmobj_service_reply", [&](std::error_code &ec) {
            reply(req, resp, ec);
            return 0;
        });
    }
    /// Answer a taken request with value as a typed object (written into
    /// the segment here, handed over by reference); the request is freed.
    void reply_object(request &req, value_ref resp, std::error_code &ec) const noexcept
    {
        ref r = 0;
        if (!set_status(ec, shmobj_obj_put(h_ ? h_->seg->s : nullptr, resp.c(), &r)))
            return;
        shmobj_service_msg out{};
        out.ref = r;
        out.flags = SHMOBJ_SERVICE_OBJECT;
        if (!set_status(ec, shmobj_service_reply(c(), &req.m_, &out)))
            (void)shmobj_obj_free(h_->seg->s, r); /* not handed over */
    }
    /// Answer a taken request with value as a typed object.
    void reply_object(request &req, value_ref resp) const
    {
        detail::or_throw("shmobj_service_reply", [&](std::error_code &ec) {
            reply_object(req, resp, ec);
            return 0;
        });
    }

    /// Give a taken request back unanswered (its client's call says
    /// SHMOBJ_ENOTFOUND).
    void release(request &req, std::error_code &ec) const noexcept
    {
        set_status(ec, shmobj_service_release(c(), &req.m_));
    }
    /// Give a taken request back unanswered.
    void release(request &req) const
    {
        detail::or_throw("shmobj_service_release", [&](std::error_code &ec) {
            release(req, ec);
            return 0;
        });
    }
};

// ---- table ----------------------------------------------------------------

/// A table of T: records of one shape stored row after row as the bytes of
/// T (include/shmobj/table.h), for T's whose fields all have a fixed size
/// (no const char * or object_ref field). Rows never move; appends by many
/// processes at once keep each one's order; fields of a row are read and
/// updated atomically in place. Holds a share of its segment.
///
///     shmobj::ref t = shmobj::table<reading>::make(seg, shape, 1024);
///     shmobj::table<reading> tab(seg.get(t));
///     tab.append(reading{7, 21.5, "boiler"});
///     tab.add(0, *reading_type.index("id"), 1);
///     for (const reading &r : tab) ...
template <class T> class table {
    static_assert(std::is_standard_layout_v<T> && std::is_trivially_copyable_v<T>,
                  "a table's row struct is standard-layout and trivially copyable");
    view v_;

public:
    table() = default;
    /// The table a view shows (SHMOBJ_ETYPE from its calls otherwise).
    explicit table(view v) noexcept : v_(std::move(v)) {}

    /// Build a table of rows of T with room for capacity rows before it
    /// grows; shape was made from T's fields (record_type::make_shape()).
    /// The caller owns it (segment::free()).
    static ref make(const segment &seg, ref shape, std::uint64_t capacity,
                    std::error_code &ec) noexcept
    {
        ref r = 0;
        set_status(ec, shmobj_table_put(seg.c(), shape, sizeof(T), capacity, &r));
        return r;
    }
    /// Build a table of rows of T (see make(seg, shape, capacity, ec)).
    static ref make(const segment &seg, ref shape, std::uint64_t capacity)
    {
        return detail::or_throw("shmobj_table_put", [&](std::error_code &ec) {
            return make(seg, shape, capacity, ec);
        });
    }

    /// The view of the table.
    const view &as_view() const noexcept { return v_; }

    /// Append n rows; the index of the first.
    std::uint64_t append(const T *rows, std::size_t n, std::error_code &ec) noexcept
    {
        std::uint64_t first = 0;
        set_status(ec, shmobj_table_append(v_.c(), rows, n, sizeof(T), &first));
        return first;
    }
    /// Append n rows; the index of the first.
    std::uint64_t append(const T *rows, std::size_t n)
    {
        return detail::or_throw("shmobj_table_append",
                                [&](std::error_code &ec) { return append(rows, n, ec); });
    }
    /// Append one row; its index.
    std::uint64_t append(const T &row) { return append(&row, 1); }
    /// Append one row; its index.
    std::uint64_t append(const T &row, std::error_code &ec) noexcept
    {
        return append(&row, 1, ec);
    }

    /// Rows published so far.
    std::uint64_t size(std::error_code &ec) const noexcept
    {
        std::uint64_t n = 0;
        set_status(ec, shmobj_table_len(v_.c(), &n));
        return n;
    }
    /// Rows published so far.
    std::uint64_t size() const
    {
        return detail::or_throw("shmobj_table_len",
                                [&](std::error_code &ec) { return size(ec); });
    }

    /// A copy of row i (each 8-byte field read atomically).
    T get(std::uint64_t i, std::error_code &ec) const noexcept
    {
        T out{};
        set_status(ec, shmobj_table_get(v_.c(), i, &out, sizeof out));
        return out;
    }
    /// A copy of row i.
    T get(std::uint64_t i) const
    {
        return detail::or_throw("shmobj_table_get",
                                [&](std::error_code &ec) { return get(i, ec); });
    }
    /// A copy of row i.
    T operator[](std::uint64_t i) const { return get(i); }

    /// Add delta atomically to the integer field `field` of row i; the
    /// value before.
    std::int64_t add(std::uint64_t i, std::size_t field, std::int64_t delta,
                     std::error_code &ec) noexcept
    {
        std::int64_t old = 0;
        set_status(ec, shmobj_table_int_add(v_.c(), i, field, delta, &old));
        return old;
    }
    /// Add delta atomically to an integer field; the value before.
    std::int64_t add(std::uint64_t i, std::size_t field, std::int64_t delta)
    {
        return detail::or_throw("shmobj_table_int_add", [&](std::error_code &ec) {
            return add(i, field, delta, ec);
        });
    }
    /// Add delta atomically to the double field `field` of row i; the
    /// value before.
    double add_double(std::uint64_t i, std::size_t field, double delta,
                      std::error_code &ec) noexcept
    {
        double old = 0;
        set_status(ec, shmobj_table_double_add(v_.c(), i, field, delta, &old));
        return old;
    }
    /// Add delta atomically to a double field; the value before.
    double add_double(std::uint64_t i, std::size_t field, double delta)
    {
        return detail::or_throw("shmobj_table_double_add", [&](std::error_code &ec) {
            return add_double(i, field, delta, ec);
        });
    }

    /// Field `field` of the rows from `first` on that lie in one run (the
    /// rows of one chunk) as a strided buffer: info.shape[0] rows,
    /// info.strides[0] == sizeof(T). Read the next run from first +
    /// info.shape[0].
    shmobj_buffer_info column(std::size_t field, std::uint64_t first,
                              std::error_code &ec) const noexcept
    {
        shmobj_buffer_info info{};
        info.struct_size = sizeof info;
        set_status(ec, shmobj_table_column_get(v_.c(), field, first, &info));
        return info;
    }
    /// A run of one field's values as a strided buffer.
    shmobj_buffer_info column(std::size_t field, std::uint64_t first) const
    {
        return detail::or_throw("shmobj_table_column_get", [&](std::error_code &ec) {
            return column(field, first, ec);
        });
    }

    /// Rows by value, from the first to the last published when begin()
    /// was called (rows appended meanwhile are not visited; rows never
    /// move, so nothing is skipped or seen twice).
    class iterator {
        const table *t_ = nullptr;
        std::uint64_t i_ = 0;

    public:
        using iterator_category = std::input_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = const T *;
        using reference = T;
        iterator() = default;
        iterator(const table *t, std::uint64_t i) noexcept : t_(t), i_(i) {}
        T operator*() const { return t_->get(i_); }
        iterator &operator++() noexcept
        {
            ++i_;
            return *this;
        }
        bool operator==(const iterator &o) const noexcept { return i_ == o.i_; }
        bool operator!=(const iterator &o) const noexcept { return i_ != o.i_; }
    };
    class range {
        const table *t_;
        std::uint64_t n_;

    public:
        range(const table *t, std::uint64_t n) noexcept : t_(t), n_(n) {}
        iterator begin() const noexcept { return iterator(t_, 0); }
        iterator end() const noexcept { return iterator(t_, n_); }
    };
    /// The rows published now, for range-for.
    range rows() const { return range(this, size()); }
    /// For range-for: the rows published when the loop starts.
    iterator begin() const { return iterator(this, 0); }
    /// For range-for: the rows published when the loop starts.
    iterator end() const { return iterator(this, size()); }
};

// ---- queue ----------------------------------------------------------------

/// How a completion wait ended (queue::wait_done(), queue::wait_all()).
enum class completion {
    done,      ///< marked done: the reference is the sender's again
    peer_dead, ///< its consumer died before marking it: the sender's again
    timed_out  ///< not done yet: wait again, or untrack()
};

/// A handle of a named queue, holding a share of its segment; the
/// destructor closes the handle (the queue stays until destroy()).
class queue {
    std::shared_ptr<detail::queue_holder> h_;

    static queue adopt(const segment &seg, shmobj_queue *q)
    {
        queue out;
        try {
            out.h_ = std::make_shared<detail::queue_holder>(seg.holder(), q);
        } catch (...) {
            shmobj_queue_close(q);
            throw;
        }
        return out;
    }
    static std::optional<completion> outcome(int rc, std::error_code &ec) noexcept
    {
        ec.clear();
        if (rc == 0)
            return completion::done;
        if (rc == SHMOBJ_EPEERDEAD)
            return completion::peer_dead;
        if (rc == SHMOBJ_ETIMEDOUT)
            return completion::timed_out;
        set_status(ec, rc);
        return std::nullopt;
    }

public:
    /// No queue.
    queue() = default;
    queue(queue &&) noexcept = default;
    queue &operator=(queue &&) noexcept = default;
    queue(const queue &) = delete;
    queue &operator=(const queue &) = delete;

    /// Create a queue of `capacity` messages (a power of two).
    static queue create(const segment &seg, const std::string &name, std::uint32_t capacity,
                        std::error_code &ec)
    {
        shmobj_queue *q = nullptr;
        if (!set_status(ec, shmobj_queue_create(seg.c(), name.c_str(), capacity, 0, &q)))
            return queue();
        return adopt(seg, q);
    }
    /// Create a queue of `capacity` messages (a power of two).
    static queue create(const segment &seg, const std::string &name, std::uint32_t capacity)
    {
        return detail::or_throw("shmobj_queue_create", [&](std::error_code &ec) {
            return create(seg, name, capacity, ec);
        });
    }
    /// Open a queue, waiting (asleep) up to timeout_ns for it to be created
    /// (0: look once; absent: SHMOBJ_ENOTFOUND; not in time: SHMOBJ_ETIMEDOUT).
    static queue open(const segment &seg, const std::string &name, std::int64_t timeout_ns,
                      std::error_code &ec)
    {
        shmobj_queue *q = nullptr;
        int rc = timeout_ns == 0 ? shmobj_queue_open(seg.c(), name.c_str(), &q)
                                 : shmobj_queue_open_timed(seg.c(), name.c_str(), timeout_ns, &q);
        if (!set_status(ec, rc))
            return queue();
        return adopt(seg, q);
    }
    /// Open a queue, waiting (asleep) up to timeout_ns for it to be created
    /// (0: look once; absent: SHMOBJ_ENOTFOUND; not in time: SHMOBJ_ETIMEDOUT).
    static queue open(const segment &seg, const std::string &name, std::int64_t timeout_ns = 0)
    {
        return detail::or_throw("shmobj_queue_open_timed", [&](std::error_code &ec) {
            return open(seg, name, timeout_ns, ec);
        });
    }
    /// Open a queue or create it, whichever process comes first.
    static queue open_or_create(const segment &seg, const std::string &name,
                                std::uint32_t capacity, std::error_code &ec)
    {
        shmobj_queue *q = nullptr;
        if (!set_status(ec, shmobj_queue_open_or_create(seg.c(), name.c_str(), capacity, 0, &q)))
            return queue();
        return adopt(seg, q);
    }
    /// Open a queue or create it, whichever process comes first.
    static queue open_or_create(const segment &seg, const std::string &name,
                                std::uint32_t capacity)
    {
        return detail::or_throw("shmobj_queue_open_or_create", [&](std::error_code &ec) {
            return open_or_create(seg, name, capacity, ec);
        });
    }
    /// Remove a queue (its name and ring); false when no root had the name.
    static bool destroy(const segment &seg, const std::string &name, std::error_code &ec) noexcept
    {
        int rc = shmobj_queue_destroy(seg.c(), name.c_str());
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Remove a queue; false when no root had the name.
    static bool destroy(const segment &seg, const std::string &name)
    {
        return detail::or_throw("shmobj_queue_destroy",
                                [&](std::error_code &ec) { return destroy(seg, name, ec); });
    }

    /// The C handle (nullptr for no queue).
    shmobj_queue *c() const noexcept { return h_ ? h_->q : nullptr; }
    /// Whether this object holds a queue.
    explicit operator bool() const noexcept { return h_ != nullptr; }

    /// Put, waiting while the queue is full.
    void put(ref r, std::error_code &ec) const noexcept { set_status(ec, shmobj_queue_put(c(), r)); }
    /// Put, waiting while the queue is full.
    void put(ref r) const
    {
        detail::or_throw("shmobj_queue_put", [&](std::error_code &ec) { put(r, ec); });
    }
    /// Put, waiting up to timeout_ns for room; false when still full.
    bool put(ref r, std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        int rc = shmobj_queue_put_timed(c(), r, timeout_ns);
        if (rc == SHMOBJ_EFULL || rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Put, waiting up to timeout_ns for room; false when still full.
    bool put(ref r, std::int64_t timeout_ns) const
    {
        return detail::or_throw("shmobj_queue_put_timed",
                                [&](std::error_code &ec) { return put(r, timeout_ns, ec); });
    }
    /// Take, waiting while the queue is empty.
    ref take(std::error_code &ec) const noexcept
    {
        ref r = 0;
        set_status(ec, shmobj_queue_take(c(), &r));
        return r;
    }
    /// Take, waiting while the queue is empty.
    ref take() const
    {
        return detail::or_throw("shmobj_queue_take", [&](std::error_code &ec) { return take(ec); });
    }
    /// Take, waiting up to timeout_ns (0: do not wait); nullopt when none came.
    std::optional<ref> take(std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        ref r = 0;
        int rc = shmobj_queue_take_timed(c(), &r, timeout_ns);
        if (rc == SHMOBJ_EEMPTY || rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        return r;
    }
    /// Take, waiting up to timeout_ns (0: do not wait); nullopt when none came.
    std::optional<ref> take(std::int64_t timeout_ns) const
    {
        return detail::or_throw("shmobj_queue_take_timed",
                                [&](std::error_code &ec) { return take(timeout_ns, ec); });
    }
    /// The oldest message without taking it, waiting up to timeout_ns;
    /// nullopt when none came.
    std::optional<ref> peek(std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        ref r = 0;
        int rc = shmobj_queue_peek_timed(c(), &r, timeout_ns);
        if (rc == SHMOBJ_EEMPTY || rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        return r;
    }
    /// The oldest message without taking it; nullopt when none came.
    std::optional<ref> peek(std::int64_t timeout_ns = 0) const
    {
        return detail::or_throw("shmobj_queue_peek_timed",
                                [&](std::error_code &ec) { return peek(timeout_ns, ec); });
    }
    /// Messages in the queue now.
    std::uint64_t size(std::error_code &ec) const noexcept
    {
        std::uint64_t n = 0;
        set_status(ec, shmobj_queue_count(c(), &n));
        return n;
    }
    /// Messages in the queue now.
    std::uint64_t size() const
    {
        return detail::or_throw("shmobj_queue_count", [&](std::error_code &ec) { return size(ec); });
    }
    /// Its figures (depth, totals, crash counters).
    shmobj_queue_stats stats(std::error_code &ec) const noexcept
    {
        shmobj_queue_stats st{};
        st.struct_size = sizeof st;
        set_status(ec, shmobj_queue_stats_get(c(), &st));
        return st;
    }
    /// Its figures.
    shmobj_queue_stats stats() const
    {
        return detail::or_throw("shmobj_queue_stats_get", [&](std::error_code &ec) { return stats(ec); });
    }

    /// A message block of len bytes (flags: 0 or SHMOBJ_QUEUE_MSG_TRACK)
    /// and this process's address of its data.
    std::pair<ref, void *> msg_alloc(std::size_t len, unsigned flags, std::error_code &ec) const noexcept
    {
        ref r = 0;
        void *data = nullptr;
        set_status(ec, shmobj_queue_msg_alloc(c(), len, flags, &r, &data));
        return {r, data};
    }
    /// A message block of len bytes and this process's address of its data.
    std::pair<ref, void *> msg_alloc(std::size_t len, unsigned flags = 0) const
    {
        return detail::or_throw("shmobj_queue_msg_alloc",
                                [&](std::error_code &ec) { return msg_alloc(len, flags, ec); });
    }
    /// The data of a message block and its length.
    std::pair<void *, std::size_t> msg_data(ref r, std::error_code &ec) const noexcept
    {
        void *data = nullptr;
        std::size_t len = 0;
        set_status(ec, shmobj_queue_msg_data(c(), r, &data, &len));
        return {data, len};
    }
    /// The data of a message block and its length.
    std::pair<void *, std::size_t> msg_data(ref r) const
    {
        return detail::or_throw("shmobj_queue_msg_data",
                                [&](std::error_code &ec) { return msg_data(r, ec); });
    }
    /// Consumer: the message block is done (frees an untracked one).
    void msg_done(ref r, std::error_code &ec) const noexcept { set_status(ec, shmobj_queue_msg_done(c(), r)); }
    /// Consumer: the message block is done.
    void msg_done(ref r) const
    {
        detail::or_throw("shmobj_queue_msg_done", [&](std::error_code &ec) { msg_done(r, ec); });
    }
    /// Sender: wait up to timeout_ns for a tracked message block to be
    /// done; false on timeout.
    bool msg_wait_done(ref r, std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        int rc = shmobj_queue_msg_wait_done(c(), r, timeout_ns);
        if (rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Sender: wait for a tracked message block to be done; false on timeout.
    bool msg_wait_done(ref r, std::int64_t timeout_ns) const
    {
        return detail::or_throw("shmobj_queue_msg_wait_done", [&](std::error_code &ec) {
            return msg_wait_done(r, timeout_ns, ec);
        });
    }
    /// Sender: release a tracked message block (see shmobj_queue_msg_free()).
    void msg_free(ref r, std::error_code &ec) const noexcept { set_status(ec, shmobj_queue_msg_free(c(), r)); }
    /// Sender: release a tracked message block.
    void msg_free(ref r) const
    {
        detail::or_throw("shmobj_queue_msg_free", [&](std::error_code &ec) { msg_free(r, ec); });
    }
    /// Put a copy of len bytes in a new message block (flags as for
    /// msg_alloc()), waiting up to timeout_ns for room; the block's
    /// reference, or std::nullopt when the queue stayed full (nothing sent).
    std::optional<ref> put_copy(const void *data, std::size_t len, unsigned flags,
                                std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        ref r = 0;
        int rc = shmobj_queue_put_copy(c(), data, len, flags, timeout_ns, &r);
        if (rc == SHMOBJ_EFULL || rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        return r;
    }
    /// Put a copy of len bytes in a new message block.
    std::optional<ref> put_copy(const void *data, std::size_t len, unsigned flags = 0,
                                std::int64_t timeout_ns = forever) const
    {
        return detail::or_throw("shmobj_queue_put_copy", [&](std::error_code &ec) {
            return put_copy(data, len, flags, timeout_ns, ec);
        });
    }

    /// Completion of any reference. Put r tracked (it stays the sender's:
    /// see shmobj_queue_put_tracked()), waiting up to timeout_ns for room;
    /// false when the queue stayed full.
    bool put_tracked(ref r, std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        int rc = shmobj_queue_put_tracked(c(), r, timeout_ns);
        if (rc == SHMOBJ_EFULL || rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Put r tracked; false when the queue stayed full.
    bool put_tracked(ref r, std::int64_t timeout_ns = forever) const
    {
        return detail::or_throw("shmobj_queue_put_tracked",
                                [&](std::error_code &ec) { return put_tracked(r, timeout_ns, ec); });
    }
    /// Consumer: mark a tracked reference done and wake its sender.
    void done(ref r, std::error_code &ec) const noexcept { set_status(ec, shmobj_queue_done(c(), r)); }
    /// Consumer: mark a tracked reference done.
    void done(ref r) const
    {
        detail::or_throw("shmobj_queue_done", [&](std::error_code &ec) { done(r, ec); });
    }
    /// Sender: wait up to timeout_ns for a reference this handle put
    /// tracked to be done (std::nullopt: an error, in ec).
    std::optional<completion> wait_done(ref r, std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        return outcome(shmobj_queue_wait_done(c(), r, timeout_ns), ec);
    }
    /// Sender: wait up to timeout_ns for a reference to be done.
    completion wait_done(ref r, std::int64_t timeout_ns) const
    {
        return *detail::or_throw("shmobj_queue_wait_done", [&](std::error_code &ec) {
            return wait_done(r, timeout_ns, ec);
        });
    }
    /// Sender: wait up to timeout_ns for every reference this handle put
    /// tracked (peer_dead: all released, one consumer at least died).
    std::optional<completion> wait_all(std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        return outcome(shmobj_queue_wait_all(c(), timeout_ns), ec);
    }
    /// Sender: wait for every reference this handle put tracked.
    completion wait_all(std::int64_t timeout_ns) const
    {
        return *detail::or_throw("shmobj_queue_wait_all",
                                 [&](std::error_code &ec) { return wait_all(timeout_ns, ec); });
    }
    /// Sender: stop tracking r. True when it was done (r is the sender's);
    /// false when not (its consumer's done() releases it: free r only when
    /// no consumer uses it).
    bool untrack(ref r, std::error_code &ec) const noexcept
    {
        int rc = shmobj_queue_untrack(c(), r);
        if (rc == SHMOBJ_EINUSE) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Sender: stop tracking r; true when it was done.
    bool untrack(ref r) const
    {
        return detail::or_throw("shmobj_queue_untrack",
                                [&](std::error_code &ec) { return untrack(r, ec); });
    }

    /// A descriptor that becomes readable when messages wait (owned by the
    /// handle; see shmobj_queue_notify_fd()). Call notify_arm() before
    /// each poll.
    int notify_fd(std::error_code &ec) const noexcept
    {
        int fd = -1;
        set_status(ec, shmobj_queue_notify_fd(c(), &fd));
        return fd;
    }
    /// A descriptor that becomes readable when messages wait.
    int notify_fd() const
    {
        return detail::or_throw("shmobj_queue_notify_fd", [&](std::error_code &ec) { return notify_fd(ec); });
    }
    /// Arm the descriptor for the next poll.
    void notify_arm(std::error_code &ec) const noexcept { set_status(ec, shmobj_queue_notify_arm(c())); }
    /// Arm the descriptor for the next poll.
    void notify_arm() const
    {
        detail::or_throw("shmobj_queue_notify_arm", [&](std::error_code &ec) { notify_arm(ec); });
    }
};

// ---- map ------------------------------------------------------------------

class map;

/// A value read in place under a read guard (shmobj_map_get_view()),
/// holding a share of its map (and so of the segment); released by the
/// destructor. Release it soon: it holds back the freeing of the map's
/// retired memory.
class map_view {
    shmobj_map_view v_{};
    std::shared_ptr<detail::map_holder> owner_;
    friend class map;

    void release() noexcept
    {
        if (owner_)
            shmobj_map_view_release(&v_);
        owner_.reset();
    }

public:
    map_view() = default;
    ~map_view() { release(); }
    map_view(map_view &&o) noexcept : v_(o.v_), owner_(std::move(o.owner_)) {}
    map_view &operator=(map_view &&o) noexcept
    {
        if (this != &o) {
            release();
            v_ = o.v_;
            owner_ = std::move(o.owner_);
        }
        return *this;
    }
    map_view(const map_view &) = delete;
    map_view &operator=(const map_view &) = delete;

    /// The key's bytes.
    std::string_view key() const noexcept
    {
        return {static_cast<const char *>(v_.key), v_.key_len};
    }
    /// The value's bytes (16-byte aligned).
    std::string_view value() const noexcept
    {
        return {static_cast<const char *>(v_.value), v_.value_len};
    }
    /// The value's first byte.
    const void *data() const noexcept { return v_.value; }
    /// The value's length in bytes.
    std::size_t size() const noexcept { return v_.value_len; }
};

/// @cond INTERNAL
namespace detail {

// Values of the map: any contiguous range of trivially copyable elements
// that is not a string (strings have their own overloads).
template <class R, class = void> struct is_byte_range : std::false_type {};
template <class R>
struct is_byte_range<R, std::void_t<decltype(std::data(std::declval<const R &>())),
                                    decltype(std::size(std::declval<const R &>()))>>
    : std::bool_constant<
          !std::is_convertible_v<const R &, std::string_view> &&
          std::is_trivially_copyable_v<std::remove_pointer_t<decltype(std::data(std::declval<const R &>()))>>> {};

} // namespace detail
/// @endcond

/// A handle of a shared map holding a share of its segment; the
/// destructor closes it (the map stays). A handle belongs to the process
/// that opened it: after fork(), open the map again in the child.
///
/// Keys are bytes given as std::string_view. Values are bytes too: a
/// std::string_view, a pointer and a length, or any contiguous range of
/// trivially copyable elements (std::vector<float>, std::array, a C array:
/// what C++20 would pass as std::span, which C++17 lacks); get_as<T>()
/// and get_array<T>() read them back.
class map {
    std::shared_ptr<detail::map_holder> h_;

    static map adopt(const segment &seg, shmobj_map *m)
    {
        map out;
        try {
            out.h_ = std::make_shared<detail::map_holder>(seg.holder(), m);
        } catch (...) {
            shmobj_map_close(m);
            throw;
        }
        return out;
    }
    // Copies the value of key into a buffer sized by the first try
    // (again when a longer value replaced it meanwhile).
    template <class Buf> std::optional<Buf> read(std::string_view key, std::size_t unit,
                                                 std::error_code &ec) const
    {
        Buf out(64 / unit + 1, typename Buf::value_type{});
        for (;;) {
            std::size_t len = 0;
            int rc = shmobj_map_get(c(), key.data(), key.size(), out.data(),
                                    out.size() * unit, &len);
            if (rc == SHMOBJ_ENOTFOUND) {
                ec.clear();
                return std::nullopt;
            }
            if (rc == SHMOBJ_ENOBUFS) {
                out.resize(len / unit + 1);
                continue;
            }
            if (!set_status(ec, rc))
                return std::nullopt;
            if (len % unit != 0) {
                set_status(ec, SHMOBJ_ETYPE); // not a whole number of elements
                return std::nullopt;
            }
            out.resize(len / unit);
            return out;
        }
    }

public:
    /// A step of an iteration: the key's and the value's bytes, valid
    /// until the next step.
    struct entry {
        std::string_view key;   ///< the key's bytes
        std::string_view value; ///< the value's bytes
    };

    /// An input iterator over the entries (see shmobj_map_iter_open() for
    /// what concurrent writers do to it). Copies share one cursor.
    class iterator {
        struct cursor {
            std::shared_ptr<detail::map_holder> owner;
            shmobj_map_iter *it = nullptr;
            ~cursor() { shmobj_map_iter_close(it); }
        };
        std::shared_ptr<cursor> cur_;
        entry e_{};
        std::error_code *ec_ = nullptr;

        void fetch()
        {
            const void *k = nullptr, *v = nullptr;
            std::size_t kl = 0, vl = 0;
            int rc;
            // an error about one shard moves the cursor past it: the
            // throwing form stops there, the error_code form goes on and
            // keeps the first error
            while ((rc = shmobj_map_iter_next(cur_->it, &k, &kl, &v, &vl)) != 0) {
                if (rc == SHMOBJ_ENOTFOUND) {
                    cur_.reset();
                    return;
                }
                if (ec_ == nullptr) {
                    cur_.reset();
                    throw error(rc, "shmobj_map_iter_next");
                }
                if (!*ec_)
                    set_status(*ec_, rc);
                if (rc == SHMOBJ_ESTALE) {
                    cur_.reset();
                    return;
                }
            }
            e_ = {{static_cast<const char *>(k), kl}, {static_cast<const char *>(v), vl}};
        }

    public:
        /// @cond INTERNAL
        using iterator_category = std::input_iterator_tag;
        using value_type = entry;
        using difference_type = std::ptrdiff_t;
        using pointer = const entry *;
        using reference = const entry &;
        /// @endcond
        /// The end.
        iterator() = default;
        /// @cond INTERNAL
        iterator(const std::shared_ptr<detail::map_holder> &h, std::error_code *ec) : ec_(ec)
        {
            if (ec_ != nullptr)
                ec_->clear();
            shmobj_map_iter *it = nullptr;
            int rc = shmobj_map_iter_open(h ? h->m : nullptr, &it);
            if (rc != 0) {
                if (ec_ == nullptr)
                    throw error(rc, "shmobj_map_iter_open");
                set_status(*ec_, rc);
                return;
            }
            cur_ = std::make_shared<cursor>();
            cur_->owner = h;
            cur_->it = it;
            fetch();
        }
        /// @endcond
        /// The entry.
        const entry &operator*() const noexcept { return e_; }
        /// The entry.
        const entry *operator->() const noexcept { return &e_; }
        /// The next entry.
        iterator &operator++()
        {
            fetch();
            return *this;
        }
        /// The next entry.
        void operator++(int) { ++*this; }
        /// Equal when both ended, or copies of one cursor.
        bool operator==(const iterator &o) const noexcept { return cur_ == o.cur_; }
        /// Not equal.
        bool operator!=(const iterator &o) const noexcept { return cur_ != o.cur_; }
    };

    /// No map.
    map() = default;
    map(map &&) noexcept = default;
    map &operator=(map &&) noexcept = default;
    map(const map &) = delete;
    map &operator=(const map &) = delete;

    /// Create a map under a root name.
    static map create(const segment &seg, const std::string &name, std::error_code &ec)
    {
        shmobj_map *m = nullptr;
        if (!set_status(ec, shmobj_map_create(seg.c(), name.c_str(), &m)))
            return map();
        return adopt(seg, m);
    }
    /// Create a map under a root name.
    static map create(const segment &seg, const std::string &name)
    {
        return detail::or_throw("shmobj_map_create",
                                [&](std::error_code &ec) { return create(seg, name, ec); });
    }
    /// Open a map, waiting (asleep) up to timeout_ns for it to be created
    /// (0: look once; absent: SHMOBJ_ENOTFOUND; not in time: SHMOBJ_ETIMEDOUT).
    static map open(const segment &seg, const std::string &name, std::int64_t timeout_ns,
                    std::error_code &ec)
    {
        shmobj_map *m = nullptr;
        int rc = timeout_ns == 0 ? shmobj_map_open(seg.c(), name.c_str(), &m)
                                 : shmobj_map_open_timed(seg.c(), name.c_str(), timeout_ns, &m);
        if (!set_status(ec, rc))
            return map();
        return adopt(seg, m);
    }
    /// Open a map, waiting (asleep) up to timeout_ns for it to be created
    /// (0: look once; absent: SHMOBJ_ENOTFOUND; not in time: SHMOBJ_ETIMEDOUT).
    static map open(const segment &seg, const std::string &name, std::int64_t timeout_ns = 0)
    {
        return detail::or_throw("shmobj_map_open_timed", [&](std::error_code &ec) {
            return open(seg, name, timeout_ns, ec);
        });
    }
    /// Open a map or create it, whichever process comes first.
    static map open_or_create(const segment &seg, const std::string &name, std::error_code &ec)
    {
        shmobj_map *m = nullptr;
        if (!set_status(ec, shmobj_map_open_or_create(seg.c(), name.c_str(), &m)))
            return map();
        return adopt(seg, m);
    }
    /// Open a map or create it, whichever process comes first.
    static map open_or_create(const segment &seg, const std::string &name)
    {
        return detail::or_throw("shmobj_map_open_or_create",
                                [&](std::error_code &ec) { return open_or_create(seg, name, ec); });
    }

    /// The C handle (nullptr for no map).
    shmobj_map *c() const noexcept { return h_ ? h_->m : nullptr; }
    /// Whether this object holds a map.
    explicit operator bool() const noexcept { return h_ != nullptr; }

    /// Insert or replace: the value is len bytes at data.
    void set(std::string_view key, const void *data, std::size_t len, std::error_code &ec) const noexcept
    {
        set_status(ec, shmobj_map_set(c(), key.data(), key.size(), data, len));
    }
    /// Insert or replace: the value is len bytes at data.
    void set(std::string_view key, const void *data, std::size_t len) const
    {
        detail::or_throw("shmobj_map_set", [&](std::error_code &ec) { set(key, data, len, ec); });
    }
    /// Insert or replace: the value is a string's bytes.
    void set(std::string_view key, std::string_view value, std::error_code &ec) const noexcept
    {
        set(key, value.data(), value.size(), ec);
    }
    /// Insert or replace: the value is a string's bytes.
    void set(std::string_view key, std::string_view value) const
    {
        set(key, value.data(), value.size());
    }
    /// Insert or replace: the value is the bytes of a contiguous range of
    /// trivially copyable elements (std::vector<float>, std::array...).
    template <class R, std::enable_if_t<detail::is_byte_range<R>::value, int> = 0>
    void set(std::string_view key, const R &range, std::error_code &ec) const noexcept
    {
        set(key, std::data(range), std::size(range) * sizeof *std::data(range), ec);
    }
    /// Insert or replace: the value is the bytes of a contiguous range.
    template <class R, std::enable_if_t<detail::is_byte_range<R>::value, int> = 0>
    void set(std::string_view key, const R &range) const
    {
        set(key, std::data(range), std::size(range) * sizeof *std::data(range));
    }

    /// A copy of the value; std::nullopt when the key is absent.
    std::optional<std::string> get(std::string_view key, std::error_code &ec) const
    {
        return read<std::string>(key, 1, ec);
    }
    /// A copy of the value; std::nullopt when the key is absent.
    std::optional<std::string> get(std::string_view key) const
    {
        return detail::or_throw("shmobj_map_get", [&](std::error_code &ec) { return get(key, ec); });
    }
    /// The value as a T (trivially copyable) whose size it must have
    /// (SHMOBJ_ETYPE otherwise); std::nullopt when the key is absent.
    template <class T> std::optional<T> get_as(std::string_view key, std::error_code &ec) const noexcept
    {
        static_assert(std::is_trivially_copyable_v<T>, "get_as<T>() reads a trivially copyable T");
        T out{};
        std::size_t len = 0;
        int rc = shmobj_map_get(c(), key.data(), key.size(), &out, sizeof out, &len);
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return std::nullopt;
        }
        if (rc == SHMOBJ_ENOBUFS || (rc == 0 && len != sizeof out))
            rc = SHMOBJ_ETYPE;
        if (!set_status(ec, rc))
            return std::nullopt;
        return out;
    }
    /// The value as a T; std::nullopt when the key is absent.
    template <class T> std::optional<T> get_as(std::string_view key) const
    {
        return detail::or_throw("shmobj_map_get", [&](std::error_code &ec) { return get_as<T>(key, ec); });
    }
    /// The value as elements of T (its length a multiple of sizeof(T),
    /// SHMOBJ_ETYPE otherwise); std::nullopt when the key is absent.
    template <class T> std::optional<std::vector<T>> get_array(std::string_view key, std::error_code &ec) const
    {
        static_assert(std::is_trivially_copyable_v<T>, "get_array<T>() reads trivially copyable Ts");
        return read<std::vector<T>>(key, sizeof(T), ec);
    }
    /// The value as elements of T; std::nullopt when the key is absent.
    template <class T> std::optional<std::vector<T>> get_array(std::string_view key) const
    {
        return detail::or_throw("shmobj_map_get",
                                [&](std::error_code &ec) { return get_array<T>(key, ec); });
    }
    /// The value in place under a read guard; std::nullopt when absent.
    std::optional<map_view> get_view(std::string_view key, std::error_code &ec) const
    {
        map_view v;
        int rc = shmobj_map_get_view(c(), key.data(), key.size(), &v.v_);
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        v.owner_ = h_;
        return std::optional<map_view>(std::move(v));
    }
    /// The value in place under a read guard; std::nullopt when absent.
    std::optional<map_view> get_view(std::string_view key) const
    {
        return detail::or_throw("shmobj_map_get_view",
                                [&](std::error_code &ec) { return get_view(key, ec); });
    }
    /// Whether the key is present.
    bool contains(std::string_view key, std::error_code &ec) const noexcept
    {
        int rc = shmobj_map_contains(c(), key.data(), key.size());
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Whether the key is present.
    bool contains(std::string_view key) const
    {
        return detail::or_throw("shmobj_map_contains",
                                [&](std::error_code &ec) { return contains(key, ec); });
    }
    /// Remove a key; false when it was absent.
    bool erase(std::string_view key, std::error_code &ec) const noexcept
    {
        int rc = shmobj_map_del(c(), key.data(), key.size());
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Remove a key; false when it was absent.
    bool erase(std::string_view key) const
    {
        return detail::or_throw("shmobj_map_del", [&](std::error_code &ec) { return erase(key, ec); });
    }
    /// Atomic add to an 8-byte integer value (created as delta when
    /// absent); returns the value after.
    std::int64_t add(std::string_view key, std::int64_t delta, std::error_code &ec) const noexcept
    {
        std::int64_t out = 0;
        set_status(ec, shmobj_map_add(c(), key.data(), key.size(), delta, &out));
        return out;
    }
    /// Atomic add to an 8-byte integer value; returns the value after.
    std::int64_t add(std::string_view key, std::int64_t delta) const
    {
        return detail::or_throw("shmobj_map_add",
                                [&](std::error_code &ec) { return add(key, delta, ec); });
    }
    /// Entries (a sum over shards).
    std::uint64_t size(std::error_code &ec) const noexcept
    {
        std::uint64_t n = 0;
        set_status(ec, shmobj_map_count(c(), &n));
        return n;
    }
    /// Entries (a sum over shards).
    std::uint64_t size() const
    {
        return detail::or_throw("shmobj_map_count", [&](std::error_code &ec) { return size(ec); });
    }
    /// Remove every entry.
    void clear(std::error_code &ec) const noexcept { set_status(ec, shmobj_map_clear(c())); }
    /// Remove every entry.
    void clear() const
    {
        detail::or_throw("shmobj_map_clear", [&](std::error_code &ec) { clear(ec); });
    }

    /// The first entry, for range-for: `for (auto &e : m)`.
    iterator begin() const { return iterator(h_, nullptr); }
    /// The end.
    iterator end() const noexcept { return iterator(); }
    /// Entries for range-for whose iterators skip a damaged shard, end on
    /// SHMOBJ_ESTALE, and set ec to the first error.
    range<iterator> items(std::error_code &ec) const { return {iterator(h_, &ec), iterator()}; }
    /// Call fn(key, value) for every entry (string_views valid during the
    /// call only).
    template <class Fn> void for_each(Fn &&fn) const
    {
        for (const entry &e : *this)
            fn(e.key, e.value);
    }
};

// ---- topics ---------------------------------------------------------------

class topic;
class subscription;

/// A message taken by a subscription, read in place. It holds a share of
/// its subscription (and so of the topic and segment), and releases
/// itself when destroyed or by release(). Releasing a message releases
/// every message its subscription took before it (see
/// shmobj_topic_release()), so keep one message at a time, or release in
/// order. Use it in the thread that uses its subscription. Moves, does
/// not copy.
class topic_message {
    shmobj_topic_msg m_{};
    std::shared_ptr<detail::subscription_holder> owner_;
    friend class subscription;

public:
    topic_message() = default;
    ~topic_message() { release(); }
    topic_message(topic_message &&o) noexcept : m_(o.m_), owner_(std::move(o.owner_)) {}
    topic_message &operator=(topic_message &&o) noexcept
    {
        if (this != &o) {
            release();
            m_ = o.m_;
            owner_ = std::move(o.owner_);
        }
        return *this;
    }
    topic_message(const topic_message &) = delete;
    topic_message &operator=(const topic_message &) = delete;

    /// The message's first byte (valid until released).
    const void *data() const noexcept { return m_.data; }
    /// Its length in bytes.
    std::size_t size() const noexcept { return static_cast<std::size_t>(m_.len); }
    /// Its bytes (valid until released).
    std::string_view bytes() const noexcept
    {
        return {static_cast<const char *>(m_.data), static_cast<std::size_t>(m_.len)};
    }
    /// Its place in the topic's order (0, 1, ...).
    std::uint64_t seq() const noexcept { return m_.seq; }
    /// Messages this subscription lost just before it (overwrite policy).
    std::uint64_t missed() const noexcept { return m_.missed; }
    /// Its block.
    ref block() const noexcept { return m_.ref; }
    /// The C message.
    const shmobj_topic_msg *c() const noexcept { return &m_; }
    /// Whether it is held (taken and not released).
    explicit operator bool() const noexcept { return owner_ != nullptr; }
    /// Release it (and the messages taken before it) now.
    void release(std::error_code &ec) noexcept
    {
        if (!owner_) {
            ec.clear();
            return;
        }
        int rc = shmobj_topic_release(owner_->s, &m_);
        owner_.reset();
        set_status(ec, rc);
    }
    /// Release it now (a failure, e.g. of a destroyed topic, is ignored:
    /// the message is gone either way).
    void release() noexcept
    {
        std::error_code ec;
        release(ec);
    }
};

/// A message block lent by a topic, filled in place and then published
/// (or cancelled: the destructor cancels a loan not published). Holds a
/// share of its topic. Moves, does not copy.
class topic_loan {
    shmobj_topic_loan l_{};
    std::shared_ptr<detail::topic_holder> owner_;
    friend class topic;

public:
    topic_loan() = default;
    ~topic_loan() { cancel(); }
    topic_loan(topic_loan &&o) noexcept : l_(o.l_), owner_(std::move(o.owner_)) {}
    topic_loan &operator=(topic_loan &&o) noexcept
    {
        if (this != &o) {
            cancel();
            l_ = o.l_;
            owner_ = std::move(o.owner_);
        }
        return *this;
    }
    topic_loan(const topic_loan &) = delete;
    topic_loan &operator=(const topic_loan &) = delete;

    /// Its bytes, to fill in place.
    void *data() const noexcept { return l_.data; }
    /// Bytes asked for.
    std::size_t size() const noexcept { return static_cast<std::size_t>(l_.size); }
    /// Its block.
    ref block() const noexcept { return l_.ref; }
    /// Whether it is still lent (not published nor cancelled).
    explicit operator bool() const noexcept { return owner_ != nullptr; }

    /// Publish len bytes of it (at most size()), waiting up to timeout_ns
    /// for a slow subscriber (SHMOBJ_TOPIC_BLOCK); false when the ring
    /// stayed full (the loan is still lent: publish again or cancel).
    bool publish(std::size_t len, std::int64_t timeout_ns, std::error_code &ec) noexcept
    {
        if (!owner_)
            return set_status(ec, SHMOBJ_EINVAL);
        int rc = shmobj_topic_loan_publish(owner_->t, &l_, len, timeout_ns);
        if (rc == SHMOBJ_EFULL || rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return false;
        }
        if (!set_status(ec, rc))
            return false;
        owner_.reset(); // the block is the topic's now
        return true;
    }
    /// Publish len bytes of it; false when the ring stayed full.
    bool publish(std::size_t len, std::int64_t timeout_ns = forever)
    {
        return detail::or_throw("shmobj_topic_loan_publish",
                                [&](std::error_code &ec) { return publish(len, timeout_ns, ec); });
    }
    /// Give the block back (nothing when not lent).
    void cancel() noexcept
    {
        if (owner_)
            shmobj_topic_loan_cancel(owner_->t, &l_);
        owner_.reset();
    }
};

/// One subscriber of a topic, holding a share of the topic; the destructor
/// leaves (shmobj_topic_unsubscribe()) once no message it took is held.
/// Used by one thread at a time. Moves, does not copy.
class subscription {
    std::shared_ptr<detail::subscription_holder> h_;
    friend class topic;

public:
    /// No subscription.
    subscription() = default;
    subscription(subscription &&) noexcept = default;
    subscription &operator=(subscription &&) noexcept = default;
    subscription(const subscription &) = delete;
    subscription &operator=(const subscription &) = delete;

    /// The C handle (nullptr for none).
    shmobj_topic_sub *c() const noexcept { return h_ ? h_->s : nullptr; }
    /// Whether this object holds a subscription.
    explicit operator bool() const noexcept { return h_ != nullptr; }

    /// Take the next message, waiting up to timeout_ns (0: do not wait,
    /// negative: for ever); std::nullopt when none came.
    std::optional<topic_message> take(std::int64_t timeout_ns, std::error_code &ec) const
    {
        topic_message m;
        int rc = shmobj_topic_take(c(), &m.m_, timeout_ns);
        if (rc == SHMOBJ_EEMPTY || rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return std::nullopt;
        }
        if (!set_status(ec, rc))
            return std::nullopt;
        m.owner_ = h_;
        return std::optional<topic_message>(std::move(m));
    }
    /// Take the next message; std::nullopt when none came.
    std::optional<topic_message> take(std::int64_t timeout_ns = forever) const
    {
        return detail::or_throw("shmobj_topic_take",
                                [&](std::error_code &ec) { return take(timeout_ns, ec); });
    }
    /// How long a blocking take spins before it sleeps.
    void spin_set(std::int64_t spin_ns, std::error_code &ec) const noexcept
    {
        set_status(ec, shmobj_topic_spin_set(c(), spin_ns));
    }
    /// How long a blocking take spins before it sleeps.
    void spin_set(std::int64_t spin_ns) const
    {
        detail::or_throw("shmobj_topic_spin_set", [&](std::error_code &ec) { spin_set(spin_ns, ec); });
    }
    /// A descriptor that polls readable after notify_arm() once a message
    /// is there (owned by the subscription).
    int notify_fd(std::error_code &ec) const noexcept
    {
        int fd = -1;
        set_status(ec, shmobj_topic_notify_fd(c(), &fd));
        return fd;
    }
    /// A descriptor that polls readable once a message is there.
    int notify_fd() const
    {
        return detail::or_throw("shmobj_topic_notify_fd", [&](std::error_code &ec) { return notify_fd(ec); });
    }
    /// Ask for one wake-up of the descriptor.
    void notify_arm(std::error_code &ec) const noexcept { set_status(ec, shmobj_topic_notify_arm(c())); }
    /// Ask for one wake-up of the descriptor.
    void notify_arm() const
    {
        detail::or_throw("shmobj_topic_notify_arm", [&](std::error_code &ec) { notify_arm(ec); });
    }
};

/// A handle of a topic (publish once, every subscriber reads every message
/// in place), holding a share of its segment; the destructor closes it
/// (the topic stays until destroy()).
class topic {
    std::shared_ptr<detail::topic_holder> h_;

    static topic adopt(const segment &seg, shmobj_topic *t)
    {
        topic out;
        try {
            out.h_ = std::make_shared<detail::topic_holder>(seg.holder(), t);
        } catch (...) {
            shmobj_topic_close(t);
            throw;
        }
        return out;
    }
    static bool published(int rc, std::error_code &ec) noexcept
    {
        if (rc == SHMOBJ_EFULL || rc == SHMOBJ_ETIMEDOUT) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }

public:
    /// No topic.
    topic() = default;
    topic(topic &&) noexcept = default;
    topic &operator=(topic &&) noexcept = default;
    topic(const topic &) = delete;
    topic &operator=(const topic &) = delete;

    /// Create a topic (cfg nullptr: the defaults of
    /// shmobj_topic_config_init()).
    static topic create(const segment &seg, const std::string &name,
                        const shmobj_topic_config *cfg, std::error_code &ec)
    {
        shmobj_topic *t = nullptr;
        if (!set_status(ec, shmobj_topic_create(seg.c(), name.c_str(), cfg, &t)))
            return topic();
        return adopt(seg, t);
    }
    /// Create a topic.
    static topic create(const segment &seg, const std::string &name,
                        const shmobj_topic_config *cfg = nullptr)
    {
        return detail::or_throw("shmobj_topic_create",
                                [&](std::error_code &ec) { return create(seg, name, cfg, ec); });
    }
    /// Open a topic, waiting (asleep) up to timeout_ns for it to be created
    /// (0: look once; absent: SHMOBJ_ENOTFOUND; not in time: SHMOBJ_ETIMEDOUT).
    static topic open(const segment &seg, const std::string &name, std::int64_t timeout_ns,
                      std::error_code &ec)
    {
        shmobj_topic *t = nullptr;
        int rc = timeout_ns == 0 ? shmobj_topic_open(seg.c(), name.c_str(), &t)
                                 : shmobj_topic_open_timed(seg.c(), name.c_str(), timeout_ns, &t);
        if (!set_status(ec, rc))
            return topic();
        return adopt(seg, t);
    }
    /// Open a topic, waiting (asleep) up to timeout_ns for it to be created
    /// (0: look once; absent: SHMOBJ_ENOTFOUND; not in time: SHMOBJ_ETIMEDOUT).
    static topic open(const segment &seg, const std::string &name, std::int64_t timeout_ns = 0)
    {
        return detail::or_throw("shmobj_topic_open_timed", [&](std::error_code &ec) {
            return open(seg, name, timeout_ns, ec);
        });
    }
    /// Open a topic or create it with cfg, whichever process comes first.
    static topic open_or_create(const segment &seg, const std::string &name,
                                const shmobj_topic_config *cfg, std::error_code &ec)
    {
        shmobj_topic *t = nullptr;
        if (!set_status(ec, shmobj_topic_open_or_create(seg.c(), name.c_str(), cfg, &t)))
            return topic();
        return adopt(seg, t);
    }
    /// Open a topic or create it with cfg, whichever process comes first.
    static topic open_or_create(const segment &seg, const std::string &name,
                                const shmobj_topic_config *cfg = nullptr)
    {
        return detail::or_throw("shmobj_topic_open_or_create", [&](std::error_code &ec) {
            return open_or_create(seg, name, cfg, ec);
        });
    }
    /// Destroy a topic; false when no root had the name.
    static bool destroy(const segment &seg, const std::string &name, std::error_code &ec) noexcept
    {
        int rc = shmobj_topic_destroy(seg.c(), name.c_str());
        if (rc == SHMOBJ_ENOTFOUND) {
            ec.clear();
            return false;
        }
        return set_status(ec, rc);
    }
    /// Destroy a topic; false when no root had the name.
    static bool destroy(const segment &seg, const std::string &name)
    {
        return detail::or_throw("shmobj_topic_destroy",
                                [&](std::error_code &ec) { return destroy(seg, name, ec); });
    }

    /// The C handle (nullptr for no topic).
    shmobj_topic *c() const noexcept { return h_ ? h_->t : nullptr; }
    /// Whether this object holds a topic.
    explicit operator bool() const noexcept { return h_ != nullptr; }

    /// Publish a copy of len bytes, waiting up to timeout_ns for a slow
    /// subscriber; false when the ring stayed full.
    bool publish(const void *data, std::size_t len, std::int64_t timeout_ns,
                 std::error_code &ec) const noexcept
    {
        return published(shmobj_topic_publish(c(), data, len, timeout_ns), ec);
    }
    /// Publish a copy of len bytes; false when the ring stayed full. (No
    /// default timeout here: publish("text", 0) is the string's form.)
    bool publish(const void *data, std::size_t len, std::int64_t timeout_ns) const
    {
        return detail::or_throw("shmobj_topic_publish", [&](std::error_code &ec) {
            return publish(data, len, timeout_ns, ec);
        });
    }
    /// Publish a copy of a string's bytes; false when the ring stayed full.
    bool publish(std::string_view bytes, std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        return publish(bytes.data(), bytes.size(), timeout_ns, ec);
    }
    /// Publish a copy of a string's bytes; false when the ring stayed full.
    bool publish(std::string_view bytes, std::int64_t timeout_ns = forever) const
    {
        return publish(bytes.data(), bytes.size(), timeout_ns);
    }
    /// Publish a block of the segment by reference (it becomes the
    /// topic's, see shmobj_topic_publish_ref()); false when the ring
    /// stayed full.
    bool publish_ref(ref r, std::size_t len, std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        return published(shmobj_topic_publish_ref(c(), r, len, timeout_ns), ec);
    }
    /// Publish a block of the segment by reference.
    bool publish_ref(ref r, std::size_t len, std::int64_t timeout_ns = forever) const
    {
        return detail::or_throw("shmobj_topic_publish_ref", [&](std::error_code &ec) {
            return publish_ref(r, len, timeout_ns, ec);
        });
    }
    /// Borrow a message block of size bytes to fill in place.
    topic_loan loan(std::size_t size, std::error_code &ec) const noexcept
    {
        topic_loan l;
        if (set_status(ec, shmobj_topic_loan_get(c(), size, &l.l_)))
            l.owner_ = h_;
        return l;
    }
    /// Borrow a message block of size bytes to fill in place.
    topic_loan loan(std::size_t size) const
    {
        return detail::or_throw("shmobj_topic_loan_get", [&](std::error_code &ec) { return loan(size, ec); });
    }
    /// Join: the subscription first gets the history kept, then every
    /// message published after.
    subscription subscribe(std::error_code &ec) const
    {
        shmobj_topic_sub *s = nullptr;
        subscription out;
        if (!set_status(ec, shmobj_topic_subscribe(c(), &s)))
            return out;
        try {
            out.h_ = std::make_shared<detail::subscription_holder>(h_, s);
        } catch (...) {
            shmobj_topic_unsubscribe(s);
            throw;
        }
        return out;
    }
    /// Join the topic.
    subscription subscribe() const
    {
        return detail::or_throw("shmobj_topic_subscribe", [&](std::error_code &ec) { return subscribe(ec); });
    }
    /// The topic's figures.
    shmobj_topic_stats stats(std::error_code &ec) const noexcept
    {
        shmobj_topic_stats st{};
        set_status(ec, shmobj_topic_stats_get(c(), &st));
        return st;
    }
    /// The topic's figures.
    shmobj_topic_stats stats() const
    {
        return detail::or_throw("shmobj_topic_stats_get", [&](std::error_code &ec) { return stats(ec); });
    }
};

// ---- watches and wait-sets ---------------------------------------------------

/// A watch on a map's key or a mutable container (shmobj/watch.h): woken
/// when it changes. Move-only; closed by its destructor.
class watch {
    struct closer {
        void operator()(shmobj_watch *w) const noexcept { shmobj_watch_close(w); }
    };
    std::unique_ptr<shmobj_watch, closer> w_;

    explicit watch(shmobj_watch *w) noexcept : w_(w) {}

public:
    watch() = default;

    /// Watch one key of a map (shmobj_watch_map_key()).
    static watch map_key(const map &m, std::string_view key, std::error_code &ec) noexcept
    {
        shmobj_watch *w = nullptr;
        set_status(ec, shmobj_watch_map_key(m.c(), key.data(), key.size(), &w));
        return watch(w);
    }
    /// Watch one key of a map (shmobj_watch_map_key()).
    static watch map_key(const map &m, std::string_view key)
    {
        return detail::or_throw("shmobj_watch_map_key",
                                [&](std::error_code &ec) { return map_key(m, key, ec); });
    }
    /// Watch a mutable container (shmobj_watch_container()).
    static watch container(const view &v, std::error_code &ec) noexcept
    {
        shmobj_watch *w = nullptr;
        set_status(ec, shmobj_watch_container(v.c(), &w));
        return watch(w);
    }
    /// Watch a mutable container (shmobj_watch_container()).
    static watch container(const view &v)
    {
        return detail::or_throw("shmobj_watch_container",
                                [&](std::error_code &ec) { return container(v, ec); });
    }

    /// The C handle (nullptr for no watch).
    shmobj_watch *c() const noexcept { return w_.get(); }
    /// Whether this object holds a watch.
    explicit operator bool() const noexcept { return w_ != nullptr; }

    /// The pollable descriptor (shmobj_watch_fd()); it belongs to the watch.
    int fd() const
    {
        int fd = -1;
        check(shmobj_watch_fd(c(), &fd), "shmobj_watch_fd");
        return fd;
    }
    /// Arm the descriptor (shmobj_watch_arm()).
    void arm() const { check(shmobj_watch_arm(c()), "shmobj_watch_arm"); }
    /// Take the changes since the last consume and arm the descriptor.
    /// @return whether something changed (shmobj_watch_consume())
    bool consume(std::error_code &ec) const noexcept
    {
        int rc = shmobj_watch_consume(c());
        set_status(ec, rc == SHMOBJ_EEMPTY ? 0 : rc);
        return rc == 0;
    }
    /// Take the changes since the last consume and arm the descriptor.
    /// @return whether something changed (shmobj_watch_consume())
    bool consume() const
    {
        return detail::or_throw("shmobj_watch_consume",
                                [&](std::error_code &ec) { return consume(ec); });
    }
    /// Wait until something changed since the last consume, or the timeout.
    /// @return false at the timeout (shmobj_watch_wait())
    bool wait(std::int64_t timeout_ns, std::error_code &ec) const noexcept
    {
        int rc = shmobj_watch_wait(c(), timeout_ns);
        set_status(ec, rc == SHMOBJ_ETIMEDOUT ? 0 : rc);
        return rc == 0;
    }
    /// Wait until something changed since the last consume, or the timeout.
    /// @return false at the timeout (shmobj_watch_wait())
    bool wait(std::int64_t timeout_ns = forever) const
    {
        return detail::or_throw("shmobj_watch_wait",
                                [&](std::error_code &ec) { return wait(timeout_ns, ec); });
    }
};

/// One wait on several queues, subscriptions, services and watches
/// (shmobj/waitset.h). Its members must outlive it or be removed first: it
/// keeps their C handles, not a share of them. Move-only; one thread's.
class waitset {
    struct destroyer {
        void operator()(shmobj_waitset *ws) const noexcept { shmobj_waitset_destroy(ws); }
    };
    std::unique_ptr<shmobj_waitset, destroyer> ws_;

public:
    /// An empty wait-set.
    waitset()
    {
        shmobj_waitset *ws = nullptr;
        check(shmobj_waitset_create(&ws), "shmobj_waitset_create");
        ws_.reset(ws);
    }
    /// The C handle.
    shmobj_waitset *c() const noexcept { return ws_.get(); }

    /// Add a queue: tag comes back from wait() when messages wait in it.
    void add(const queue &q, void *tag)
    {
        check(shmobj_waitset_add_queue(c(), q.c(), tag), "shmobj_waitset_add_queue");
    }
    /// Add a topic subscription.
    void add(const subscription &s, void *tag)
    {
        check(shmobj_waitset_add_topic(c(), s.c(), tag), "shmobj_waitset_add_topic");
    }
    /// Add a service's servers' side.
    void add(const service &s, void *tag)
    {
        check(shmobj_waitset_add_service(c(), s.c(), tag), "shmobj_waitset_add_service");
    }
    /// Add a watch: ready when its key or container changed since its last
    /// consume.
    void add(const watch &w, void *tag)
    {
        check(shmobj_waitset_add_watch(c(), w.c(), tag), "shmobj_waitset_add_watch");
    }
    /// Take a member out (then it may be closed); throws
    /// shmobj::error(SHMOBJ_ENOTFOUND) when it is not in the set.
    template <class Member> void remove(const Member &m)
    {
        check(shmobj_waitset_remove(c(), m.c()), "shmobj_waitset_remove");
    }

    /// The tags of the members ready, in the order they were added; empty
    /// at the timeout (shmobj_waitset_wait()).
    std::vector<void *> wait(std::int64_t timeout_ns, std::error_code &ec) const
    {
        std::vector<void *> tags(SHMOBJ_WAITSET_MAX);
        std::size_t n = 0;
        int rc = shmobj_waitset_wait(c(), timeout_ns, tags.data(), tags.size(), &n);
        set_status(ec, rc == SHMOBJ_ETIMEDOUT ? 0 : rc);
        tags.resize(rc == 0 ? n : 0);
        return tags;
    }
    /// The tags of the members ready; empty at the timeout.
    std::vector<void *> wait(std::int64_t timeout_ns = forever) const
    {
        return detail::or_throw("shmobj_waitset_wait",
                                [&](std::error_code &ec) { return wait(timeout_ns, ec); });
    }
};

} // namespace shmobj

#endif // SHMOBJ_HPP

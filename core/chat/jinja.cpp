// The Jinja interpreter (core/chat/jinja.h): a lexer that applies jinja2's whitespace rules
// (trim_blocks, lstrip_blocks, -/+ markers), a recursive-descent parser to a small tree, and
// a tree-walking renderer whose values follow Python's semantics where the output shows
// them (str() and repr() of values, json.dumps, int/float arithmetic, code-point strings).
#include "core/chat/jinja.h"

#include <utf8proc.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/limits.h"

namespace attnviz {
namespace jinja {

// ---------------------------------------------------------------------------------------
// Errors: every message names the template's line.

[[noreturn]] void fail(int line, const std::string& msg) {
  throw Error("chat template line " + std::to_string(line) + ": " + msg);
}

// ---------------------------------------------------------------------------------------
// Values

struct Interp;
struct Value;
struct CallArgs;
using NativeFn = std::function<Value(Interp&, CallArgs&)>;
struct MacroDef;
struct Frame;

// What one render has spent beyond its steps: the work budget. Each operation whose cost
// grows with its operands charges what it touches, so that no template, whatever its
// steps, runs for long: a byte built, copied, compared or scanned is one unit, a byte
// decoded as part of a code point kCpWork units, and a value visited (a list item, a dict
// entry, a comparison of two values) kItemWork units. The weights are the measured costs
// of these kinds of work relative to a plain byte's.
struct Budget {
  int64_t work = 0;
  int64_t max_work = kMaxTemplateWork;
  int line = 0;  // the line being rendered, for the messages

  void charge(int64_t units) {
    work += units;
    if (work > max_work) over();
  }
  void bytes(size_t n) { charge(static_cast<int64_t>(n)); }
  void items(size_t n) { charge(static_cast<int64_t>(n) * kItemWork); }
  // A string of n bytes gone through code point by code point (decoded, classified, case
  // mapped): kCpWork units a byte.
  void cps(size_t n) { charge(static_cast<int64_t>(n) * kCpWork); }
  // A text being built must stay under the output limit.
  void check_size(size_t n) const {
    if (static_cast<int64_t>(n) > kMaxTemplateOutputBytes)
      fail(line, "the template made a text over " + format_bytes(static_cast<double>(kMaxTemplateOutputBytes)) +
                     " (the output limit)");
  }
  [[noreturn]] void over() const {
    fail(line, "the template did more than " + std::to_string(max_work) +
                   " units of work (bytes built or scanned, values visited; the work limit)");
  }
  static constexpr int64_t kItemWork = 16;
  static constexpr int64_t kCpWork = 8;
};

enum class VK { Undefined, None, Bool, Int, Float, Str, List, Dict, Ns, Func, Macro, Loop };

int64_t count_cps(const std::string& s);

// A string value's bytes, shared by every value that reads it (as a Python str is), with
// its length in code points counted once, when first asked. The count is atomic because a
// template's constants are shared by renders on several threads.
struct StrData {
  std::string s;
  mutable std::atomic<int64_t> cps{-1};
  explicit StrData(std::string x) : s(std::move(x)) {}
  int64_t length(Budget& b) const {
    int64_t n = cps.load(std::memory_order_relaxed);
    if (n < 0) {
      b.bytes(s.size());  // (ASCII counts far faster; the rest is charged as decoding)
      n = count_cps(s);
      cps.store(n, std::memory_order_relaxed);
    }
    return n;
  }
  // Every code point is one byte (ASCII, or invalid bytes read one at a time): byte
  // offsets are code point offsets.
  bool one_byte_each(Budget& b) const { return length(b) == static_cast<int64_t>(s.size()); }
};

struct ListData;
struct DictData;
struct NsData;
struct FuncData {
  std::string name;
  NativeFn fn;
};
struct MacroData {
  const MacroDef* def;
  // The scope the macro was defined in. Weak: that scope holds the macro, and a strong
  // pointer would make a cycle that is never freed.
  std::weak_ptr<Frame> closure;
};
struct LoopState;

// A value: scalars inline, everything else behind one shared pointer to data that never
// changes once made (a namespace's attributes excepted), so that reading, passing and
// storing a value copies no text and no items, whatever their size.
struct Value {
  VK k = VK::Undefined;
  bool b = false;
  bool is_safe = false;  // Markup: kept only so `safe` round-trips; autoescape is off
  union {
    int64_t i = 0;
    double f;
  };
  // Str: StrData; Undefined: StrData (the message an operation on it throws) or null;
  // List: ListData; Dict: DictData; Ns: NsData; Func: FuncData; Macro: MacroData; Loop: LoopState
  std::shared_ptr<const void> p;

  static Value undefined(std::string why) {
    Value v;
    v.p = std::make_shared<const StrData>(std::move(why));
    return v;
  }
  static Value none() {
    Value v;
    v.k = VK::None;
    return v;
  }
  static Value boolean(bool x) {
    Value v;
    v.k = VK::Bool;
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v;
    v.k = VK::Int;
    v.i = x;
    return v;
  }
  static Value number(double x) {
    Value v;
    v.k = VK::Float;
    v.f = x;
    return v;
  }
  static Value str(std::string x) {
    Value v;
    v.k = VK::Str;
    v.p = std::make_shared<const StrData>(std::move(x));
    return v;
  }
  bool undef() const { return k == VK::Undefined; }
  bool is_num() const { return k == VK::Int || k == VK::Float || k == VK::Bool; }
  double as_double() const { return k == VK::Float ? f : k == VK::Bool ? (b ? 1 : 0) : static_cast<double>(i); }
  int64_t as_int() const { return k == VK::Bool ? (b ? 1 : 0) : i; }

  // The data behind p, for the kind the caller has checked.
  const StrData& sd() const { return *static_cast<const StrData*>(p.get()); }
  const std::string& s() const {
    static const std::string empty;
    return p && (k == VK::Str || k == VK::Undefined) ? sd().s : empty;
  }
  const ListData* l() const { return static_cast<const ListData*>(p.get()); }
  const DictData* d() const { return static_cast<const DictData*>(p.get()); }
  // made non-const by namespace(), the one value that changes
  NsData* ns() const { return const_cast<NsData*>(static_cast<const NsData*>(p.get())); }
  const FuncData* fn() const { return static_cast<const FuncData*>(p.get()); }
  const MacroData* macro() const { return static_cast<const MacroData*>(p.get()); }
  const LoopState* loop() const { return static_cast<const LoopState*>(p.get()); }
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// String-keyed entries in insertion order (as Python's dict keeps them). A lookup scans the
// few entries of a small table and uses a hash index on a larger one, so that building a
// table of n keys costs O(n) and not O(n²). The index's keys point into the key values'
// shared text, which stays where it is when the entries' vector grows.
class Table {
 public:
  using Entry = std::pair<Value, Value>;  // key (a Str value), value
  const std::vector<Entry>& entries() const { return v_; }
  size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  const Value* find(std::string_view key) const {
    const size_t i = index_of(key);
    return i == kNone ? nullptr : &v_[i].second;
  }
  Value* find(std::string_view key) {
    const size_t i = index_of(key);
    return i == kNone ? nullptr : &v_[i].second;
  }
  // A new key goes last; a key already there keeps its place and takes the new value.
  void set(Value key, Value value) {
    const size_t i = index_of(key.s());
    if (i != kNone) {
      v_[i].second = std::move(value);
      return;
    }
    v_.emplace_back(std::move(key), std::move(value));
    if (!index_.empty())
      index_.emplace(v_.back().first.s(), v_.size() - 1);
    else if (v_.size() > kLinear)
      for (size_t j = 0; j < v_.size(); ++j) index_.emplace(v_[j].first.s(), j);
  }
  void set(const std::string& key, Value value) {
    if (Value* slot = find(key))
      *slot = std::move(value);
    else
      set(Value::str(key), std::move(value));
  }
  void reserve(size_t n) { v_.reserve(n); }

 private:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  static constexpr size_t kLinear = 8;  // tables up to this size have no index
  size_t index_of(std::string_view key) const {
    if (index_.empty()) {
      for (size_t j = 0; j < v_.size(); ++j)
        if (v_[j].first.s() == key) return j;
      return kNone;
    }
    const auto it = index_.find(key);
    return it == index_.end() ? kNone : it->second;
  }
  std::vector<Entry> v_;
  std::unordered_map<std::string_view, size_t> index_;
};

struct ListData {
  std::vector<Value> v;
  int depth = 1;
  bool tuple = false;
};
struct DictData {
  Table t;
  int depth = 1;
  const Value* find(std::string_view key) const { return t.find(key); }
};
struct NsData {
  Table t;
};
struct LoopState {
  int64_t index0 = 0, length = 0;
  Value prev, next;
  bool has_prev = false, has_next = false;
};

// Namespaces and loop objects are the only values that can change or that hold other
// values' history; kept out of lists, dicts and namespaces, no value can contain itself
// and every value's depth is known when it is made.
void check_storable(const Value& v, int line) {
  if (v.k == VK::Ns || v.k == VK::Loop)
    fail(line, std::string("a ") + (v.k == VK::Ns ? "namespace" : "loop object") +
                   " cannot be stored in a list, a dict or a namespace here (attnviz's Jinja interpreter keeps "
                   "values acyclic)");
}

int value_depth(const Value& v) {
  if (v.k == VK::List) return v.l()->depth;
  if (v.k == VK::Dict) return v.d()->depth;
  return 0;
}

// Lists and dicts carry their depth, so that no template can build one deep enough to make
// the recursive walks below (repr, json, comparison, destruction) overflow the stack. Each
// item is charged to the budget.
Value make_list(Budget& b, std::vector<Value> items, bool tuple = false) {
  if (static_cast<int64_t>(items.size()) > kMaxTemplateListItems)
    fail(b.line, "a list of more than " + std::to_string(kMaxTemplateListItems) + " items (the list limit)");
  b.items(items.size());
  auto l = std::make_shared<ListData>();
  int depth = 0;
  for (const auto& x : items) {
    check_storable(x, b.line);
    depth = std::max(depth, value_depth(x));
  }
  if (depth + 1 > kMaxTemplateDepth)
    fail(b.line, "a list nested deeper than " + std::to_string(kMaxTemplateDepth) + " levels (the nesting limit)");
  l->depth = depth + 1;
  l->v = std::move(items);
  l->tuple = tuple;
  Value r;
  r.k = VK::List;
  r.p = std::move(l);
  return r;
}
// `items`' keys are Str values; a key given twice keeps its first place and its last
// value, as in Python.
Value make_dict(Budget& b, std::vector<Table::Entry> items) {
  b.items(items.size());
  auto d = std::make_shared<DictData>();
  int depth = 0;
  for (const auto& kv : items) {
    check_storable(kv.second, b.line);
    depth = std::max(depth, value_depth(kv.second));
  }
  if (depth + 1 > kMaxTemplateDepth)
    fail(b.line, "a dict nested deeper than " + std::to_string(kMaxTemplateDepth) + " levels (the nesting limit)");
  d->depth = depth + 1;
  d->t.reserve(items.size());
  for (auto& kv : items) d->t.set(std::move(kv.first), std::move(kv.second));
  Value r;
  r.k = VK::Dict;
  r.p = std::move(d);
  return r;
}
Value make_func(std::string name, NativeFn fn) {
  Value r;
  r.k = VK::Func;
  r.p = std::make_shared<const FuncData>(FuncData{std::move(name), std::move(fn)});
  return r;
}
// ---------------------------------------------------------------------------------------
// UTF-8 and Python's str semantics (strings are sequences of code points)

// Decodes one code point at s[i] (invalid bytes decode as themselves, one at a time).
int32_t decode_at(const std::string& s, size_t i, size_t* len) {
  utf8proc_int32_t cp = 0;
  const utf8proc_ssize_t n =
      utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i), static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (n <= 0) {
    *len = 1;
    return static_cast<unsigned char>(s[i]);
  }
  *len = static_cast<size_t>(n);
  return cp;
}
void append_cp(std::string& out, int32_t cp) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(cp, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}
// Byte offsets of each code point, plus s.size() at the end.
std::vector<size_t> cp_offsets(const std::string& s) {
  std::vector<size_t> o;
  o.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    o.push_back(i);
    size_t n;
    decode_at(s, i, &n);
    i += n;
  }
  o.push_back(s.size());
  return o;
}
// Code points in s, without building anything: ASCII bytes count one each, the rest are
// decoded.
int64_t count_cps(const std::string& s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
    } else {
      size_t len;
      decode_at(s, i, &len);
      i += len;
    }
    ++n;
  }
  return n;
}
int64_t cp_length(const std::string& s) { return count_cps(s); }

// The first `pat` in `hay` at or after `from` (npos if none), charging the bytes looked
// at. Knuth-Morris-Pratt (skipping to the next first byte with memchr while nothing
// matches), so that no text and pattern can make a search quadratic, as a plain find can.
size_t find_text(Budget& b, std::string_view hay, std::string_view pat, size_t from = 0) {
  constexpr size_t npos = std::string::npos;
  if (from > hay.size()) return npos;
  const size_t m = pat.size();
  if (m == 0) return from;
  b.bytes(m);
  std::vector<size_t> border(m, 0);  // border[i]: the longest proper border of pat[0..i]
  for (size_t i = 1, k = 0; i < m; ++i) {
    while (k && pat[i] != pat[k]) k = border[k - 1];
    if (pat[i] == pat[k]) ++k;
    border[i] = k;
  }
  size_t k = 0;
  for (size_t i = from; i < hay.size(); ++i) {
    if (k == 0) {
      const void* at = std::memchr(hay.data() + i, pat[0], hay.size() - i);
      if (!at) break;
      i = static_cast<size_t>(static_cast<const char*>(at) - hay.data());
    }
    while (k && hay[i] != pat[k]) k = border[k - 1];
    if (hay[i] == pat[k]) ++k;
    if (k == m) {
      b.bytes(i + 1 - from);
      return i + 1 - m;
    }
  }
  b.bytes(hay.size() - from);
  return npos;
}
// The last `pat` in `hay` (npos if none): find_text on both reversed.
size_t rfind_text(Budget& b, std::string_view hay, std::string_view pat) {
  if (pat.size() > hay.size()) return std::string::npos;
  b.bytes(hay.size() + pat.size());
  const std::string rh(hay.rbegin(), hay.rend()), rp(pat.rbegin(), pat.rend());
  const size_t at = find_text(b, rh, rp);
  return at == std::string::npos ? at : hay.size() - at - pat.size();
}

// Python's str.isspace.
bool py_space(int32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}
std::vector<int32_t> to_cps(const std::string& s) {
  std::vector<int32_t> r;
  for (size_t i = 0; i < s.size();) {
    size_t n;
    r.push_back(decode_at(s, i, &n));
    i += n;
  }
  return r;
}
std::string from_cps(const std::vector<int32_t>& c, size_t a, size_t b) {
  std::string r;
  for (size_t i = a; i < b; ++i) append_cp(r, c[i]);
  return r;
}
// str.strip / lstrip / rstrip: `chars` null = whitespace.
std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right) {
  const auto c = to_cps(s);
  std::vector<int32_t> set;
  if (chars) set = to_cps(*chars);
  auto strip = [&](int32_t x) { return chars ? std::find(set.begin(), set.end(), x) != set.end() : py_space(x); };
  size_t a = 0, b = c.size();
  if (left)
    while (a < b && strip(c[a])) ++a;
  if (right)
    while (b > a && strip(c[b - 1])) --b;
  return from_cps(c, a, b);
}
bool is_cased_letter(int32_t c) {
  const auto cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
bool is_alpha(int32_t c) {
  const auto cat = utf8proc_category(c);
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}
// Case maps are utf8proc's one-to-one mappings (Python's full mappings differ only for a
// few characters such as ß → SS).
std::string py_upper(const std::string& s) {
  std::string r;
  for (int32_t c : to_cps(s)) append_cp(r, utf8proc_toupper(c));
  return r;
}
std::string py_lower(const std::string& s) {
  std::string r;
  for (int32_t c : to_cps(s)) append_cp(r, utf8proc_tolower(c));
  return r;
}
std::string py_capitalize(const std::string& s) {
  std::string r;
  bool first = true;
  for (int32_t c : to_cps(s)) {
    append_cp(r, first ? utf8proc_totitle(c) : utf8proc_tolower(c));
    first = false;
  }
  return r;
}
std::string py_title(const std::string& s) {
  std::string r;
  bool prev_cased = false;
  for (int32_t c : to_cps(s)) {
    append_cp(r, prev_cased ? utf8proc_tolower(c) : utf8proc_totitle(c));
    prev_cased = is_alpha(c) && (is_cased_letter(c) || prev_cased);
  }
  return r;
}
std::string py_replace(const std::string& s, const std::string& a, const std::string& b, int64_t count, Budget& bud) {
  std::string r;
  if (a.empty()) bud.cps(s.size());
  bud.bytes(s.size());
  if (a.empty()) {  // Python inserts `b` between code points and at both ends
    const auto o = cp_offsets(s);
    int64_t n = 0;
    for (size_t i = 0; i + 1 < o.size() + 1; ++i) {
      if (count < 0 || n < count) {
        r += b;
        ++n;
      }
      if (i + 1 < o.size()) r.append(s, o[i], o[i + 1] - o[i]);
      bud.bytes(b.size());
      bud.check_size(r.size());
    }
    return r;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t at = find_text(bud, s, a, pos);
    if (at == std::string::npos) break;
    r.append(s, pos, at - pos);
    bud.bytes(b.size());
    bud.check_size(r.size() + b.size());
    r += b;
    pos = at + a.size();
    ++n;
  }
  r.append(s, pos, std::string::npos);
  return r;
}
// Adds one part to a split's result, which is to become a list: charged, and stopped at the
// list limit before the parts fill the memory.
void add_part(std::vector<std::string>& r, std::string part, Budget& b) {
  if (static_cast<int64_t>(r.size()) >= kMaxTemplateListItems)
    fail(b.line, "a list of more than " + std::to_string(kMaxTemplateListItems) + " items (the list limit)");
  b.items(1);
  r.push_back(std::move(part));
}
// str.split(sep, maxsplit): sep null = runs of whitespace.
std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit, Budget& b) {
  std::vector<std::string> r;
  if (!sep) b.cps(s.size());
  b.bytes(s.size());
  if (sep) {
    if (sep->empty()) fail(b.line, "split: empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(r.size()) < maxsplit) {
      const size_t at = find_text(b, s, *sep, pos);
      if (at == std::string::npos) break;
      add_part(r, s.substr(pos, at - pos), b);
      pos = at + sep->size();
    }
    add_part(r, s.substr(pos), b);
    return r;
  }
  const auto c = to_cps(s);
  size_t i = 0;
  while (true) {
    while (i < c.size() && py_space(c[i])) ++i;
    if (i == c.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(r.size()) == maxsplit) {
      size_t e = c.size();
      while (e > i && py_space(c[e - 1])) --e;
      add_part(r, from_cps(c, i, e), b);
      break;
    }
    size_t j = i;
    while (j < c.size() && !py_space(c[j])) ++j;
    add_part(r, from_cps(c, i, j), b);
    i = j;
  }
  return r;
}
// str.splitlines(): Python's line boundaries.
std::vector<std::string> py_splitlines(const std::string& s, Budget& b) {
  b.cps(s.size());
  const auto c = to_cps(s);
  std::vector<std::string> r;
  size_t a = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const int32_t x = c[i];
    if (x == '\n' || x == '\r' || x == 0x0b || x == 0x0c || x == 0x1c || x == 0x1d || x == 0x1e || x == 0x85 ||
        x == 0x2028 || x == 0x2029) {
      add_part(r, from_cps(c, a, i), b);
      if (x == '\r' && i + 1 < c.size() && c[i + 1] == '\n') ++i;
      a = i + 1;
    }
  }
  if (a < c.size()) add_part(r, from_cps(c, a, c.size()), b);
  return r;
}

// ---------------------------------------------------------------------------------------
// str(), repr() and json.dumps of values, as Python prints them

// repr(float): the shortest text that reads back as the same double, in fixed notation for
// exponents -4..15 and scientific otherwise ("1e+16", "1.5e-05").
std::string py_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  // buf is "-d.ddde±XX": take the digits and the exponent
  std::string m(buf);
  const size_t epos = m.find('e');
  const int exp = std::atoi(m.c_str() + epos + 1);
  std::string digits;
  bool neg = false;
  for (size_t i = 0; i < epos; ++i) {
    if (m[i] == '-') neg = true;
    else if (m[i] >= '0' && m[i] <= '9') digits += m[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string r = neg ? "-" : "";
  const int nd = static_cast<int>(digits.size());
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (nd <= exp + 1) r += digits + std::string(exp + 1 - nd, '0') + ".0";
      else r += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    } else {
      r += "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    r += digits.substr(0, 1);
    if (nd > 1) r += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    r += e;
  }
  return r;
}

bool py_printable(int32_t c) {
  if (c == ' ') return true;
  const auto cat = utf8proc_category(c);
  return !(cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CS ||
           cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_ZL ||
           cat == UTF8PROC_CATEGORY_ZP || cat == UTF8PROC_CATEGORY_ZS);
}
std::string py_repr_str(const std::string& s) {
  const char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string r(1, q);
  r.reserve(s.size() + 2);
  for (size_t i = 0; i < s.size();) {
    const unsigned char u = static_cast<unsigned char>(s[i]);
    if (u >= 0x20 && u < 0x7f && u != '\\' && u != static_cast<unsigned char>(q)) {  // printable ASCII
      r += static_cast<char>(u);
      ++i;
      continue;
    }
    size_t n;
    const int32_t c = decode_at(s, i, &n);
    i += n;
    char buf[16];
    if (c == q || c == '\\') {
      r += '\\';
      r += static_cast<char>(c);
    } else if (c == '\n') r += "\\n";
    else if (c == '\r') r += "\\r";
    else if (c == '\t') r += "\\t";
    else if (py_printable(c)) append_cp(r, c);
    else {
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      r += buf;
    }
  }
  return r + q;
}

// str() and repr() of v appended to `out`; every byte is charged to the budget and the
// text is checked against the output limit as it grows (a list holding one long string a
// million times must stop early, not after it has filled the memory).
void append_str(std::string& out, const Value& v, Budget& b);
void append_repr(std::string& out, const Value& v, Budget& b) {
  switch (v.k) {
    case VK::Str:
      b.check_size(out.size() + v.s().size());  // a repr is never shorter than its string
      b.cps(v.s().size());
      out += py_repr_str(v.s());
      break;
    case VK::List: {
      const ListData& l = *v.l();
      out += l.tuple ? "(" : "[";
      for (size_t i = 0; i < l.v.size(); ++i) {
        if (i) out += ", ";
        b.items(1);
        append_repr(out, l.v[i], b);
      }
      if (l.tuple && l.v.size() == 1) out += ",";
      out += l.tuple ? ")" : "]";
      break;
    }
    case VK::Dict:
    case VK::Ns: {
      const Table& t = v.k == VK::Dict ? v.d()->t : v.ns()->t;
      out += v.k == VK::Dict ? "{" : "<Namespace {";
      for (size_t i = 0; i < t.size(); ++i) {
        if (i) out += ", ";
        b.items(1);
        out += py_repr_str(t.entries()[i].first.s());
        out += ": ";
        append_repr(out, t.entries()[i].second, b);
      }
      out += v.k == VK::Dict ? "}" : "}>";
      break;
    }
    case VK::Undefined: out += "Undefined"; break;
    default: append_str(out, v, b); return;
  }
  b.check_size(out.size());
}
void append_str(std::string& out, const Value& v, Budget& b) {
  switch (v.k) {
    case VK::Undefined: return;
    case VK::None: out += "None"; return;
    case VK::Bool: out += v.b ? "True" : "False"; return;
    case VK::Int: out += std::to_string(v.i); return;
    case VK::Float: out += py_float(v.f); return;
    case VK::Str:
      b.bytes(v.s().size());
      b.check_size(out.size() + v.s().size());
      out += v.s();
      return;
    case VK::List:
    case VK::Dict:
    case VK::Ns: append_repr(out, v, b); return;
    case VK::Func: out += "<built-in function " + v.fn()->name + ">"; return;
    case VK::Macro: out += "<Macro>"; return;
    case VK::Loop:
      out += "<LoopContext " + std::to_string(v.loop()->index0 + 1) + "/" + std::to_string(v.loop()->length) + ">";
      return;
  }
}
std::string to_str(const Value& v, Budget& b) {
  std::string r;
  append_str(r, v, b);
  return r;
}
std::string py_repr(const Value& v, Budget& b) {
  std::string r;
  append_repr(r, v, b);
  return r;
}
const char* type_name(const Value& v) {
  switch (v.k) {
    case VK::Undefined: return "Undefined";
    case VK::None: return "NoneType";
    case VK::Bool: return "bool";
    case VK::Int: return "int";
    case VK::Float: return "float";
    case VK::Str: return "str";
    case VK::List: return v.l()->tuple ? "tuple" : "list";
    case VK::Dict: return "dict";
    case VK::Ns: return "Namespace";
    case VK::Func: return "builtin_function_or_method";
    case VK::Macro: return "Macro";
    case VK::Loop: return "LoopContext";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.k) {
    case VK::Undefined:
    case VK::None: return false;
    case VK::Bool: return v.b;
    case VK::Int: return v.i != 0;
    case VK::Float: return v.f != 0;
    case VK::Str: return !v.s().empty();
    case VK::List: return !v.l()->v.empty();
    case VK::Dict: return !v.d()->t.entries().empty();
    default: return true;
  }
}

// json.dumps(v, ensure_ascii, indent, separators, sort_keys), as transformers' tojson calls it.
struct JsonStyle {
  bool ensure_ascii = false;
  bool indent_set = false;
  std::string indent;
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};
// At s[i], where no valid UTF-8 sequence starts: how many bytes Python's decoder (errors=
// "replace") turns into one U+FFFD there. That is the longest start of a valid sequence
// (a lead byte and the continuation bytes it allows), or the one byte.
size_t invalid_utf8_run(const std::string& s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = at(i);
  int need;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the first continuation byte
  if (b0 >= 0xc2 && b0 <= 0xdf)
    need = 1;
  else if (b0 >= 0xe0 && b0 <= 0xef) {
    need = 2;
    if (b0 == 0xe0) lo = 0xa0;
    if (b0 == 0xed) hi = 0x9f;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    need = 3;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;
  } else {
    return 1;
  }
  size_t n = 1;
  for (int k = 0; k < need && i + n < s.size(); ++k) {
    const unsigned char c = at(i + n);
    if (c < (k == 0 ? lo : 0x80) || c > (k == 0 ? hi : 0xbf)) break;
    ++n;
  }
  return n;
}

// A JSON string as json.dumps writes it. Text that is not valid UTF-8 has no Python str;
// each invalid run becomes U+FFFD, as bytes.decode("utf-8", "replace") reads it, so that
// the output is always valid UTF-8 (JSON requires it).
void json_str(std::string& out, const std::string& s, bool ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    size_t n;
    int32_t c = decode_at(s, i, &n);
    if (static_cast<unsigned char>(s[i]) >= 0x80 && n == 1 && c == static_cast<unsigned char>(s[i])) {
      // an invalid byte (decode_at hands those back one at a time)
      n = invalid_utf8_run(s, i);
      if (ascii)
        out += "\\ufffd";
      else
        out += "\xef\xbf\xbd";
      i += n;
      continue;
    }
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else if (ascii && c > 0x7e) {
          if (c >= 0x10000) {
            const int32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          out.append(s, i, n);
        }
    }
    i += n;
  }
  out += '"';
}
// Every string and item is charged to the budget, and the text checked against the output
// limit as it grows.
void json_dump(std::string& out, const Value& v, const JsonStyle& st, int level, Budget& b) {
  auto newline = [&](int lv) {
    if (!st.indent_set) return;
    b.bytes(st.indent.size() * static_cast<size_t>(lv));
    b.check_size(out.size() + 1 + st.indent.size() * static_cast<size_t>(lv));
    out += '\n';
    for (int i = 0; i < lv; ++i) out += st.indent;
  };
  switch (v.k) {
    case VK::None: out += "null"; return;
    case VK::Bool: out += v.b ? "true" : "false"; return;
    case VK::Int: out += std::to_string(v.i); return;
    case VK::Float:
      if (std::isnan(v.f)) out += "NaN";
      else if (std::isinf(v.f)) out += v.f < 0 ? "-Infinity" : "Infinity";
      else out += py_float(v.f);
      return;
    case VK::Str:
      b.check_size(out.size() + v.s().size());  // nor is a JSON string
      b.cps(v.s().size());
      json_str(out, v.s(), st.ensure_ascii);
      b.check_size(out.size());
      return;
    case VK::List:
      if (v.l()->v.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.l()->v.size(); ++i) {
        if (i) out += st.item_sep;
        b.items(1);
        b.bytes(st.item_sep.size());
        newline(level + 1);
        json_dump(out, v.l()->v[i], st, level + 1, b);
        b.check_size(out.size());
      }
      newline(level);
      out += ']';
      return;
    case VK::Dict: {
      const Table& t = v.d()->t;
      if (t.empty()) {
        out += "{}";
        return;
      }
      std::vector<const Table::Entry*> items;
      for (const auto& kv : t.entries()) items.push_back(&kv);
      b.items(items.size());
      if (st.sort_keys)
        std::stable_sort(items.begin(), items.end(), [&](auto* x, auto* y) {
          b.items(1);
          return x->first.s() < y->first.s();
        });
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += st.item_sep;
        b.bytes(st.item_sep.size() + st.key_sep.size() + items[i]->first.s().size());
        newline(level + 1);
        json_str(out, items[i]->first.s(), st.ensure_ascii);
        out += st.key_sep;
        json_dump(out, items[i]->second, st, level + 1, b);
        b.check_size(out.size());
      }
      newline(level);
      out += '}';
      return;
    }
    default: fail(b.line, std::string("tojson: Object of type ") + type_name(v) + " is not JSON serializable");
  }
}

// nlohmann's ordered_json to a value (keys in the order given).
Value from_json(const nlohmann::ordered_json& j, int depth, Budget& b) {
  if (depth > kMaxTemplateDepth)
    throw Error("chat template input: nested deeper than " + std::to_string(kMaxTemplateDepth) + " levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      for (const auto& x : j) items.push_back(from_json(x, depth + 1, b));
      return make_list(b, std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<Table::Entry> items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it)
        items.emplace_back(Value::str(it.key()), from_json(it.value(), depth + 1, b));
      return make_dict(b, std::move(items));
    }
    default: throw Error("chat template input: a binary JSON value is not supported");
  }
}

// ---------------------------------------------------------------------------------------
// Lexer: the template as text pieces and tags, jinja2's whitespace rules applied.

enum class TT { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };
struct Token {
  TT t;
  std::string s;  // text, name, string value, operator
  int64_t i = 0;
  double f = 0;
  int line;
};

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

// Python's whitespace (str.rstrip() with no argument), for "-" markers.
std::string rstrip_ws(const std::string& s) { return py_strip(s, nullptr, false, true); }
bool all_ws(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (int32_t c : to_cps(s.substr(from)))
    if (!py_space(c)) return false;
  return true;
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) : s_(src) {}

  std::vector<Token> run() {
    bool line_starting = true;
    size_t pos = 0;
    while (pos < s_.size()) {
      const size_t open = find_open(pos);
      std::string text = s_.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
      if (open == std::string::npos) {
        emit_text(text, pos);
        break;
      }
      const char kind = s_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < s_.size() ? s_[open + 2] : 0;
      if (sign == '-') {
        text = rstrip_ws(text);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks: only whitespace before the tag on its line
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && all_ws(text, l_pos)) text.resize(l_pos);
      }
      emit_text(text, pos);
      const int tag_line = line_at(open);
      size_t p = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        const size_t close = s_.find("#}", p);
        if (close == std::string::npos) fail(tag_line, "a comment that is never closed (missing '#}')");
        pos = close + 2;
        if (close > p && s_[close - 1] == '-') pos = skip_ws(pos);
        else if (pos < s_.size() && s_[pos] == '\n') ++pos;  // trim_blocks
      } else {
        toks_.push_back({kind == '{' ? TT::VarBegin : TT::BlockBegin, "", 0, 0, tag_line});
        pos = lex_tag(p, kind == '{');
      }
      line_starting = pos > 0 && s_[pos - 1] == '\n';
    }
    toks_.push_back({TT::Eof, "", 0, 0, line_at(s_.size())});
    return std::move(toks_);
  }

 private:
  const std::string& s_;
  std::vector<Token> toks_;
  size_t line_pos_ = 0;
  int line_ = 1;

  // Line of byte `p` (positions are asked in increasing order).
  int line_at(size_t p) {
    if (p < line_pos_) {
      line_pos_ = 0;
      line_ = 1;
    }
    for (; line_pos_ < p && line_pos_ < s_.size(); ++line_pos_)
      if (s_[line_pos_] == '\n') ++line_;
    return line_;
  }
  size_t find_open(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string::npos; i = s_.find('{', i + 1))
      if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    return std::string::npos;
  }
  size_t skip_ws(size_t p) const {
    while (p < s_.size()) {
      size_t n;
      const int32_t c = decode_at(s_, p, &n);
      if (!py_space(c)) break;
      p += n;
    }
    return p;
  }
  void emit_text(const std::string& text, size_t pos) {
    if (!text.empty()) toks_.push_back({TT::Text, text, 0, 0, line_at(pos)});
  }

  // The tokens of one {{ }} or {% %} tag from `p`; returns the position after its end.
  size_t lex_tag(size_t p, bool var) {
    std::vector<char> brackets;
    while (true) {
      while (p < s_.size() && ascii_space(s_[p])) ++p;
      const int line = line_at(p);
      if (p >= s_.size()) fail(line, var ? "missing '}}' at the end of the template" : "missing '%}' at the end of the template");
      const char c = s_[p];
      const char end1 = var ? '}' : '%';
      if (brackets.empty()) {
        // the tag's end: "}}" / "%}"; "-}}" / "-%}" take the whitespace after it too
        const std::string endtok = std::string(1, end1) + "}";
        const bool minus = c == '-' && s_.compare(p + 1, 2, endtok) == 0;
        const bool plain = s_.compare(p, 2, endtok) == 0;
        if (minus || plain || (!var && c == '+' && s_.compare(p + 1, 2, "%}") == 0)) {
          toks_.push_back({var ? TT::VarEnd : TT::BlockEnd, "", 0, 0, line});
          p += (minus || c == '+') ? 3 : 2;
          if (minus) return skip_ws(p);
          if (!var && c != '+' && p < s_.size() && s_[p] == '\n') ++p;  // trim_blocks
          return p;
        }
      }
      if (name_start(c)) {
        size_t e = p;
        while (e < s_.size() && name_char(s_[e])) ++e;
        toks_.push_back({TT::Name, s_.substr(p, e - p), 0, 0, line});
        p = e;
      } else if (c >= '0' && c <= '9') {
        p = lex_number(p, line);
      } else if (c == '\'' || c == '"') {
        p = lex_string(p, line);
      } else {
        static const char* ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                    "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "="};
        const char* found = nullptr;
        for (const char* op : ops)
          if (s_.compare(p, std::strlen(op), op) == 0) {
            found = op;
            break;
          }
        if (!found) fail(line, "unexpected character " + excerpt(s_.substr(p, 1)) + " in a tag");
        const std::string op(found);
        if (op == "(" || op == "[" || op == "{") brackets.push_back(op[0]);
        if (op == ")" || op == "]" || op == "}") {
          const char want = op == ")" ? '(' : op == "]" ? '[' : '{';
          if (brackets.empty() || brackets.back() != want) fail(line, "unexpected '" + op + "'");
          brackets.pop_back();
        }
        toks_.push_back({TT::Op, op, 0, 0, line});
        p += op.size();
      }
    }
  }

  size_t lex_number(size_t p, int line) {
    size_t e = p;
    std::string digits;
    auto run = [&] {
      while (e < s_.size() && ((s_[e] >= '0' && s_[e] <= '9') || (s_[e] == '_' && e > p))) {
        if (s_[e] != '_') digits += s_[e];
        ++e;
      }
    };
    run();
    bool is_float = false;
    if (e + 1 < s_.size() && s_[e] == '.' && s_[e + 1] >= '0' && s_[e + 1] <= '9') {
      is_float = true;
      digits += '.';
      ++e;
      run();
    }
    if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t q = e + 1;
      if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
      if (q < s_.size() && s_[q] >= '0' && s_[q] <= '9') {
        is_float = true;
        digits += s_.substr(e, q - e);
        e = q;
        run();
      }
    }
    Token t{is_float ? TT::Float : TT::Int, "", 0, 0, line};
    if (is_float) {
      t.f = std::strtod(digits.c_str(), nullptr);
    } else {
      errno = 0;
      t.i = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail(line, "the integer " + excerpt(digits) + " is too large (64 bits at most)");
    }
    toks_.push_back(t);
    return e;
  }

  // A string literal with Python's escapes (\n, \t, \xNN, \uNNNN, \UNNNNNNNN, octal, ...;
  // an unknown escape stays as written).
  size_t lex_string(size_t p, int line) {
    const char q = s_[p];
    std::string v;
    size_t i = p + 1;
    // n hex digits at `at` as a code point; false when they are not, or name one past
    // U+10FFFF (8 digits reach 2^32: counted in 64 bits, so nothing overflows)
    auto hex = [&](size_t at, int n, int32_t* out) {
      if (at + n > s_.size()) return false;
      int64_t x = 0;
      for (int k = 0; k < n; ++k) {
        const char h = s_[at + k];
        x *= 16;
        if (h >= '0' && h <= '9') x += h - '0';
        else if (h >= 'a' && h <= 'f') x += h - 'a' + 10;
        else if (h >= 'A' && h <= 'F') x += h - 'A' + 10;
        else return false;
      }
      if (x > 0x10ffff) return false;
      *out = static_cast<int32_t>(x);
      return true;
    };
    while (true) {
      if (i >= s_.size()) fail(line, "a string that is never closed");
      const char c = s_[i];
      if (c == q) break;
      if (c != '\\') {
        v += c;
        ++i;
        continue;
      }
      if (i + 1 >= s_.size()) fail(line, "a string that is never closed");
      const char e = s_[i + 1];
      int32_t cp;
      switch (e) {
        case '\n': i += 2; continue;
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case 'n': v += '\n'; break;
        case 't': v += '\t'; break;
        case 'r': v += '\r'; break;
        case 'a': v += '\a'; break;
        case 'b': v += '\b'; break;
        case 'f': v += '\f'; break;
        case 'v': v += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (!hex(i + 2, n, &cp) || cp > 0x10ffff) fail(line, std::string("a bad \\") + e + " escape in a string");
          append_cp(v, cp);
          i += 2 + n;
          continue;
        }
        default:
          if (e >= '0' && e <= '7') {
            cp = 0;
            size_t k = i + 1;
            for (int n = 0; n < 3 && k < s_.size() && s_[k] >= '0' && s_[k] <= '7'; ++n, ++k) cp = cp * 8 + (s_[k] - '0');
            append_cp(v, cp);
            i = k;
            continue;
          }
          v += '\\';
          v += e;
      }
      i += 2;
    }
    toks_.push_back({TT::String, v, 0, 0, line});
    return i + 1;
  }
};

// ---------------------------------------------------------------------------------------
// Syntax tree

struct Expr;
using ExprP = std::unique_ptr<Expr>;
enum class EK {
  Const, Name, Attr, Item, Slice, Call, Filter, Test, Neg, Pos, Not, Binary, And, Or, Cond, List, Tuple, Dict,
  BlockValue  // the rendered body of {% set x | filter %}...{% endset %}
};
struct Expr {
  EK k;
  int line;
  std::string name;  // Name, Attr, Filter, Test, Binary operator
  Value cval;        // Const
  std::vector<ExprP> a;
  std::vector<std::pair<std::string, ExprP>> kw;
  bool negate = false;  // Test: `is not`
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;
enum class SK { Text, Output, If, For, Set, SetAttr, SetBlock, Macro, Break, Continue, Block };
struct Stmt {
  SK k;
  int line;
  std::string text;  // Text; SetAttr's attribute
  ExprP e;           // Output, For's iterable, Set's value, SetBlock's filters (on BlockValue)
  std::vector<std::pair<ExprP, Body>> branches;  // If (a null condition = else)
  std::vector<std::string> targets;              // For, Set, SetBlock (a tuple when several)
  bool tuple_target = false;
  ExprP cond;  // For's `if`
  Body body, else_body;
  std::unique_ptr<MacroDef> macro;
};
struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprP> defaults;  // aligned with params; null = none
  Body body;
  int line;
};

// Names the parser accepts; the renderer implements exactly these.
const char* const kFilters[] = {"abs", "attr", "batch", "capitalize", "count", "d", "default", "dictsort", "e",
                                "escape", "first", "float", "indent", "int", "items", "join", "last", "length",
                                "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse",
                                "round", "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson",
                                "trim", "unique", "upper", "wordcount"};
const char* const kTests[] = {"boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even",
                              "false", "float", "ge", "greaterthan", "gt", "in", "integer", "iterable", "le",
                              "lessthan", "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas",
                              "sequence", "string", "true", "undefined", "upper", "==", "!=", "<", "<=", ">", ">="};
template <size_t N>
bool known(const char* const (&names)[N], const std::string& s) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

struct Program {
  Body body;
};

// ---------------------------------------------------------------------------------------
// Parser

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_template() {
    std::string end;
    Body b = parse_body({}, &end);
    return b;
  }

 private:
  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& q, int line) : p(q) {
      if (++p.depth_ > kMaxTemplateDepth)
        fail(line, "nested deeper than " + std::to_string(kMaxTemplateDepth) + " levels (the nesting limit)");
    }
    ~DepthGuard() { --p.depth_; }
  };
  // Chains (a + b + c, x.y.z, x | f | g) are parsed in loops but nest in the tree: each
  // link counts as one level, so that evaluating the tree cannot recurse without bound.
  struct ChainGuard {
    Parser& p;
    int n = 0;
    explicit ChainGuard(Parser& q) : p(q) {}
    void add(int line) {
      ++n;
      if (++p.depth_ > kMaxTemplateDepth)
        fail(line, "nested deeper than " + std::to_string(kMaxTemplateDepth) + " levels (the nesting limit)");
    }
    ~ChainGuard() { p.depth_ -= n; }
  };

  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(p_ + n, t_.size() - 1)]; }
  bool is_op(const char* op) const { return cur().t == TT::Op && cur().s == op; }
  bool is_name(const char* n) const { return cur().t == TT::Name && cur().s == n; }
  std::string describe(const Token& t) const {
    switch (t.t) {
      case TT::Text: return "text";
      case TT::VarBegin: return "'{{'";
      case TT::VarEnd: return "the end of the '{{ }}' tag";
      case TT::BlockBegin: return "'{%'";
      case TT::BlockEnd: return "the end of the '{% %}' tag";
      case TT::Name: return "'" + t.s + "'";
      case TT::String: return "a string";
      case TT::Int:
      case TT::Float: return "a number";
      case TT::Op: return "'" + t.s + "'";
      case TT::Eof: return "the end of the template";
    }
    return "?";
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(cur().line, std::string("expected '") + op + "', found " + describe(cur()));
    ++p_;
  }
  std::string expect_name() {
    if (cur().t != TT::Name) fail(cur().line, "expected a name, found " + describe(cur()));
    return t_[p_++].s;
  }
  void expect_block_end() {
    if (cur().t != TT::BlockEnd) fail(cur().line, "expected the end of the tag ('%}'), found " + describe(cur()));
    ++p_;
  }

  // Statements until a {% tag %} named in `ends` (its name is left in *end, the tag's
  // name consumed) or the end of the template (only when `ends` is empty).
  Body parse_body(const std::vector<std::string>& ends, std::string* end) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.t == TT::Eof) {
        if (!ends.empty()) {
          std::string want;
          for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
          fail(t.line, "the template ended while looking for " + want);
        }
        *end = "";
        return body;
      }
      if (t.t == TT::Text) {
        auto s = std::make_unique<Stmt>();
        s->k = SK::Text;
        s->line = t.line;
        s->text = t.s;
        body.push_back(std::move(s));
        ++p_;
      } else if (t.t == TT::VarBegin) {
        ++p_;
        auto s = std::make_unique<Stmt>();
        s->k = SK::Output;
        s->line = t.line;
        s->e = parse_tuple_or_expr();
        if (cur().t != TT::VarEnd) fail(cur().line, "expected the end of the '{{ }}' tag, found " + describe(cur()));
        ++p_;
        body.push_back(std::move(s));
      } else if (t.t == TT::BlockBegin) {
        ++p_;
        if (cur().t != TT::Name) fail(cur().line, "expected a tag name after '{%', found " + describe(cur()));
        const std::string name = cur().s;
        if (std::find(ends.begin(), ends.end(), name) != ends.end()) {
          ++p_;
          *end = name;
          return body;
        }
        body.push_back(parse_statement());
      } else {
        fail(t.line, "unexpected " + describe(t));
      }
    }
  }

  std::unique_ptr<Stmt> parse_statement() {
    const Token& t = cur();
    const int line = t.line;
    DepthGuard g(*this, line);
    const std::string name = t.s;
    ++p_;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (name == "if") {
      s->k = SK::If;
      ExprP c = parse_tuple_or_expr();
      expect_block_end();
      std::string end;
      Body b = parse_body({"elif", "else", "endif"}, &end);
      s->branches.emplace_back(std::move(c), std::move(b));
      while (end == "elif") {
        ExprP c2 = parse_tuple_or_expr();
        expect_block_end();
        Body b2 = parse_body({"elif", "else", "endif"}, &end);
        s->branches.emplace_back(std::move(c2), std::move(b2));
      }
      if (end == "else") {
        expect_block_end();
        Body b3 = parse_body({"endif"}, &end);
        s->branches.emplace_back(nullptr, std::move(b3));
      }
      expect_block_end();
    } else if (name == "for") {
      s->k = SK::For;
      parse_targets(s.get());
      if (!is_name("in")) fail(cur().line, "expected 'in' in the for loop, found " + describe(cur()));
      ++p_;
      s->e = parse_tuple_or_expr(/*no_cond=*/true);
      if (is_name("if")) {
        ++p_;
        s->cond = parse_expr();
      }
      if (is_name("recursive")) fail(cur().line, "recursive for loops are not supported");
      expect_block_end();
      std::string end;
      s->body = parse_body({"else", "endfor"}, &end);
      if (end == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, &end);
      }
      expect_block_end();
    } else if (name == "set") {
      if (cur().t == TT::Name && peek().t == TT::Op && peek().s == ".") {
        s->k = SK::SetAttr;
        s->targets.push_back(expect_name());
        ++p_;
        s->text = expect_name();
        expect_op("=");
        s->e = parse_tuple_or_expr();
        expect_block_end();
      } else {
        parse_targets(s.get());
        if (is_op("=")) {
          ++p_;
          s->k = SK::Set;
          s->e = parse_tuple_or_expr();
          expect_block_end();
        } else {
          s->k = SK::SetBlock;
          if (s->tuple_target) fail(line, "a block set assigns one name");
          auto bv = std::make_unique<Expr>();
          bv->k = EK::BlockValue;
          bv->line = line;
          s->e = is_op("|") ? parse_filters(std::move(bv)) : std::move(bv);
          expect_block_end();
          std::string end;
          s->body = parse_body({"endset"}, &end);
          expect_block_end();
        }
      }
    } else if (name == "macro") {
      s->k = SK::Macro;
      auto m = std::make_unique<MacroDef>();
      m->line = line;
      m->name = expect_name();
      expect_op("(");
      while (!is_op(")")) {
        if (!m->params.empty()) expect_op(",");
        if (is_op(")")) break;
        m->params.push_back(expect_name());
        if (is_op("=")) {
          ++p_;
          m->defaults.push_back(parse_expr());
        } else {
          m->defaults.push_back(nullptr);
        }
      }
      ++p_;
      expect_block_end();
      std::string end;
      m->body = parse_body({"endmacro"}, &end);
      if (cur().t == TT::Name && cur().s == m->name) ++p_;
      expect_block_end();
      s->macro = std::move(m);
    } else if (name == "generation") {  // transformers' tag: renders its body
      s->k = SK::Block;
      expect_block_end();
      std::string end;
      s->body = parse_body({"endgeneration"}, &end);
      expect_block_end();
    } else if (name == "break" || name == "continue") {
      s->k = name == "break" ? SK::Break : SK::Continue;
      expect_block_end();
    } else if (name == "call" || name == "filter" || name == "with" || name == "raw" || name == "include" ||
               name == "import" || name == "from" || name == "extends" || name == "block" || name == "autoescape" ||
               name == "do" || name == "trans") {
        fail(line, "'{% " + name + " %}' is not supported by attnviz's Jinja interpreter");
    } else if (name == "elif" || name == "else" || name.rfind("end", 0) == 0) {
      fail(line, "unexpected '{% " + name + " %}' (no block to close or continue)");
    } else {
      fail(line, "unknown tag '" + name + "'");
    }
    return s;
  }

  void parse_targets(Stmt* s) {
    s->targets.push_back(expect_name());
    while (is_op(",")) {
      ++p_;
      s->tuple_target = true;
      if (cur().t != TT::Name) break;
      s->targets.push_back(expect_name());
    }
  }

  ExprP node(EK k, int line) {
    auto e = std::make_unique<Expr>();
    e->k = k;
    e->line = line;
    return e;
  }

  // An expression, or a bare tuple "a, b" (as in {{ a, b }} or {% set x = 1, 2 %}).
  ExprP parse_tuple_or_expr(bool no_cond = false) {
    const int line = cur().line;
    ExprP first = no_cond ? parse_or() : parse_expr();
    if (!is_op(",")) return first;
    auto t = node(EK::Tuple, line);
    t->a.push_back(std::move(first));
    while (is_op(",")) {
      ++p_;
      if (cur().t == TT::VarEnd || cur().t == TT::BlockEnd || is_op("=") || is_name("in") || is_name("if")) break;
      t->a.push_back(no_cond ? parse_or() : parse_expr());
    }
    return t;
  }

  ExprP parse_expr() {
    ChainGuard chain(*this);
    DepthGuard g(*this, cur().line);
    const int line = cur().line;
    ExprP e = parse_or();
    while (is_name("if")) {
      chain.add(cur().line);
      ++p_;
      auto c = node(EK::Cond, line);
      ExprP cond = parse_or();
      ExprP other;
      if (is_name("else")) {
        ++p_;
        other = parse_expr();
      }
      c->a.push_back(std::move(cond));
      c->a.push_back(std::move(e));
      c->a.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }
  // `a WORD b WORD c …`, left to right, each operand parsed by `next`: or, and.
  ExprP parse_logical(const char* word, EK kind, ExprP (Parser::*next)()) {
    ChainGuard chain(*this);
    ExprP e = (this->*next)();
    while (is_name(word)) {
      chain.add(cur().line);
      auto n = node(kind, cur().line);
      ++p_;
      n->a.push_back(std::move(e));
      n->a.push_back((this->*next)());
      e = std::move(n);
    }
    return e;
  }
  ExprP parse_or() { return parse_logical("or", EK::Or, &Parser::parse_and); }
  ExprP parse_and() { return parse_logical("and", EK::And, &Parser::parse_not); }
  ExprP parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this, cur().line);
      auto n = node(EK::Not, cur().line);
      ++p_;
      n->a.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }
  ExprP parse_compare() {
    ChainGuard chain(*this);
    ExprP e = parse_math1();
    while (true) {
      chain.add(cur().line);
      std::string op;
      const int line = cur().line;
      if (cur().t == TT::Op && (cur().s == "==" || cur().s == "!=" || cur().s == "<" || cur().s == ">" ||
                                cur().s == "<=" || cur().s == ">=")) {
        op = cur().s;
        ++p_;
      } else if (is_name("in")) {
        op = "in";
        ++p_;
      } else if (is_name("not") && peek().t == TT::Name && peek().s == "in") {
        op = "not in";
        p_ += 2;
      } else {
        return e;
      }
      auto n = node(EK::Binary, line);
      n->name = op;
      n->a.push_back(std::move(e));
      n->a.push_back(parse_math1());
      e = std::move(n);
    }
  }
  ExprP binary(std::string op, ExprP l, ExprP r, int line) {
    auto n = node(EK::Binary, line);
    n->name = std::move(op);
    n->a.push_back(std::move(l));
    n->a.push_back(std::move(r));
    return n;
  }
  ExprP parse_math1() {
    ChainGuard chain(*this);
    ExprP e = parse_concat();
    while (is_op("+") || is_op("-")) {
      chain.add(cur().line);
      const std::string op = cur().s;
      const int line = cur().line;
      ++p_;
      e = binary(op, std::move(e), parse_concat(), line);
    }
    return e;
  }
  ExprP parse_concat() {
    ChainGuard chain(*this);
    ExprP e = parse_math2();
    while (is_op("~")) {
      chain.add(cur().line);
      const int line = cur().line;
      ++p_;
      e = binary("~", std::move(e), parse_math2(), line);
    }
    return e;
  }
  ExprP parse_math2() {
    ChainGuard chain(*this);
    ExprP e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.add(cur().line);
      const std::string op = cur().s;
      const int line = cur().line;
      ++p_;
      e = binary(op, std::move(e), parse_pow(), line);
    }
    return e;
  }
  ExprP parse_pow() {
    ChainGuard chain(*this);
    ExprP e = parse_unary(true);
    while (is_op("**")) {
      chain.add(cur().line);
      const int line = cur().line;
      ++p_;
      e = binary("**", std::move(e), parse_unary(true), line);
    }
    return e;
  }
  ExprP parse_unary(bool with_filter) {
    DepthGuard g(*this, cur().line);
    ExprP e;
    if (is_op("-") || is_op("+")) {
      e = node(is_op("-") ? EK::Neg : EK::Pos, cur().line);
      ++p_;
      e->a.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filters(std::move(e));
    return e;
  }
  ExprP parse_primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.t == TT::Name) {
      ++p_;
      if (t.s == "true" || t.s == "True") return konst(Value::boolean(true), line);
      if (t.s == "false" || t.s == "False") return konst(Value::boolean(false), line);
      if (t.s == "none" || t.s == "None") return konst(Value::none(), line);
      auto n = node(EK::Name, line);
      n->name = t.s;
      return n;
    }
    if (t.t == TT::String) {
      std::string s;
      while (cur().t == TT::String) s += t_[p_++].s;  // adjacent literals join, as in Python
      return konst(Value::str(s), line);
    }
    if (t.t == TT::Int) {
      ++p_;
      return konst(Value::integer(t.i), line);
    }
    if (t.t == TT::Float) {
      ++p_;
      return konst(Value::number(t.f), line);
    }
    if (is_op("(")) {
      ++p_;
      if (is_op(")")) {
        ++p_;
        return node(EK::Tuple, line);
      }
      ExprP e = parse_expr();
      if (is_op(",")) {
        auto tup = node(EK::Tuple, line);
        tup->a.push_back(std::move(e));
        while (is_op(",")) {
          ++p_;
          if (is_op(")")) break;
          tup->a.push_back(parse_expr());
        }
        e = std::move(tup);
      }
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      ++p_;
      auto l = node(EK::List, line);
      while (!is_op("]")) {
        if (!l->a.empty()) expect_op(",");
        if (is_op("]")) break;
        l->a.push_back(parse_expr());
      }
      ++p_;
      return l;
    }
    if (is_op("{")) {
      ++p_;
      auto d = node(EK::Dict, line);
      while (!is_op("}")) {
        if (!d->a.empty()) expect_op(",");
        if (is_op("}")) break;
        d->a.push_back(parse_expr());
        expect_op(":");
        d->a.push_back(parse_expr());
      }
      ++p_;
      return d;
    }
    fail(line, "expected an expression, found " + describe(t));
  }
  ExprP konst(Value v, int line) {
    auto n = node(EK::Const, line);
    n->cval = std::move(v);
    return n;
  }
  ExprP parse_postfix(ExprP e) {
    ChainGuard chain(*this);
    while (true) {
      chain.add(cur().line);
      const int line = cur().line;
      if (is_op(".")) {
        ++p_;
        auto n = node(EK::Attr, line);
        if (cur().t == TT::Int) {  // x.0 = x[0]
          n->k = EK::Item;
          n->a.push_back(std::move(e));
          n->a.push_back(konst(Value::integer(cur().i), line));
          ++p_;
        } else {
          n->name = expect_name();
          n->a.push_back(std::move(e));
        }
        e = std::move(n);
      } else if (is_op("[")) {
        ++p_;
        e = parse_subscript(std::move(e), line);
      } else if (is_op("(")) {
        auto n = node(EK::Call, line);
        n->a.push_back(std::move(e));
        parse_call_args(n.get());
        e = std::move(n);
      } else {
        return e;
      }
    }
  }
  ExprP parse_subscript(ExprP obj, int line) {
    ExprP parts[3];
    bool slice = false;
    int idx = 0;
    while (!is_op("]")) {
      if (is_op(":")) {
        slice = true;
        if (++idx > 2) fail(cur().line, "a slice takes at most three parts");
        ++p_;
        continue;
      }
      if (parts[idx]) fail(cur().line, "expected ':' or ']' in a subscript, found " + describe(cur()));
      parts[idx] = parse_expr();
      if (is_op(",")) fail(cur().line, "tuple subscripts are not supported");
    }
    ++p_;
    auto n = node(slice ? EK::Slice : EK::Item, line);
    n->a.push_back(std::move(obj));
    if (!slice) {
      if (!parts[0]) fail(line, "an empty subscript");
      n->a.push_back(std::move(parts[0]));
    } else {
      for (auto& x : parts) n->a.push_back(std::move(x));
    }
    return n;
  }
  void parse_call_args(Expr* n) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail(cur().line, "*args and **kwargs in calls are not supported");
      if (cur().t == TT::Name && peek().t == TT::Op && peek().s == "=") {
        std::string k = expect_name();
        ++p_;
        n->kw.emplace_back(std::move(k), parse_expr());
      } else {
        if (!n->kw.empty()) fail(cur().line, "a positional argument after a keyword argument");
        n->a.push_back(parse_expr());
      }
    }
    ++p_;
  }
  // `| name(args)` filters and `is [not] name args` tests after a unary expression.
  ExprP parse_filters(ExprP e) {
    ChainGuard chain(*this);
    while (true) {
      chain.add(cur().line);
      const int line = cur().line;
      if (is_op("|")) {
        ++p_;
        std::string name = expect_name();
        while (is_op(".")) {  // dotted filter names do not exist in the builtins
          ++p_;
          name += "." + expect_name();
        }
        if (!known(kFilters, name)) fail(line, "filter '" + name + "' is not supported");
        auto n = node(EK::Filter, line);
        n->name = name;
        n->a.push_back(std::move(e));
        if (is_op("(")) parse_call_args(n.get());
        e = std::move(n);
      } else if (is_name("is")) {
        ++p_;
        auto n = node(EK::Test, line);
        if (is_name("not")) {
          n->negate = true;
          ++p_;
        }
        if (cur().t == TT::Name) n->name = expect_name();
        else if (cur().t == TT::Op && (cur().s == "==" || cur().s == "!=" || cur().s == "<" || cur().s == ">" ||
                                         cur().s == "<=" || cur().s == ">="))
          n->name = t_[p_++].s;
        else fail(cur().line, "expected a test name after 'is', found " + describe(cur()));
        if (!known(kTests, n->name)) fail(line, "test '" + n->name + "' is not supported");
        n->a.push_back(std::move(e));
        if (is_op("(")) {
          parse_call_args(n.get());
        } else if ((cur().t == TT::Name || cur().t == TT::String || cur().t == TT::Int || cur().t == TT::Float ||
                    is_op("(") || is_op("[") || is_op("{")) &&
                   !(is_name("else") || is_name("or") || is_name("and"))) {
          // jinja2 takes one primary as the argument: `is divisibleby 3`, `is sameas none`
          if (is_name("is")) fail(cur().line, "tests cannot be chained with 'is'");
          n->a.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(n);
      } else if (is_op("(")) {
        auto n = node(EK::Call, line);
        n->a.push_back(std::move(e));
        parse_call_args(n.get());
        e = std::move(n);
      } else {
        return e;
      }
    }
  }
};

// ---------------------------------------------------------------------------------------
// Renderer

struct Frame {
  Table vars;
  std::shared_ptr<Frame> parent;
  const Value* find(const std::string& n) const {
    for (const Frame* f = this; f; f = f->parent.get())
      if (const Value* v = f->vars.find(n)) return v;
    return nullptr;
  }
  void set(const std::string& n, Value v) { vars.set(n, std::move(v)); }
};

enum class Flow { Normal, Break, Continue };

struct DateTime {
  int year = 1970, month = 1, day = 1, hour = 0, minute = 0, second = 0;
};

struct Interp : Budget {
  int64_t steps = 0;
  int64_t max_steps = kMaxTemplateSteps;
  int depth = 0;  // macro calls
  DateTime now;
  const Value* block_value = nullptr;

  void step(int at) {
    line = at;
    if (++steps > max_steps)
      fail(at, "the template ran for more than " + std::to_string(max_steps) +
                   " steps (the step limit); does it loop forever?");
  }
  [[noreturn]] void err(const std::string& msg) const { fail(line, msg); }
  [[noreturn]] void undefined_error(const Value& v) const {
    err(v.s().empty() ? std::string("an undefined value was used") : v.s());
  }

  // ---- statements
  Flow exec_body(const Body& body, std::shared_ptr<Frame>& fr, std::string& out) {
    for (const auto& s : body) {
      const Flow f = exec(*s, fr, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  void assign(Frame& fr, const Stmt& s, const Value& v) {
    if (!s.tuple_target) {
      fr.set(s.targets[0], v);
      return;
    }
    std::vector<Value> items = iterate(v);
    if (items.size() != s.targets.size())
      err("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(s.targets.size()) + " names");
    for (size_t i = 0; i < items.size(); ++i) fr.set(s.targets[i], items[i]);
  }

  Flow exec(const Stmt& s, std::shared_ptr<Frame>& fr, std::string& out) {
    step(s.line);
    switch (s.k) {
      case SK::Text:
        bytes(s.text.size());
        out += s.text;
        check_size(out.size());
        return Flow::Normal;
      case SK::Output: {
        const Value v = eval(*s.e, fr);
        append_str(out, v, *this);
        check_size(out.size());
        return Flow::Normal;
      }
      case SK::If:
        for (const auto& br : s.branches)
          if (!br.first || truthy(eval(*br.first, fr))) return exec_body(br.second, fr, out);
        return Flow::Normal;
      case SK::For: return exec_for(s, fr, out);
      case SK::Set: {
        const Value v = eval(*s.e, fr);
        assign(*fr, s, v);
        return Flow::Normal;
      }
      case SK::SetAttr: {
        const Value* target = fr->find(s.targets[0]);
        if (!target || target->k != VK::Ns)
          err("cannot assign attribute '" + s.text + "' on " + (target ? type_name(*target) : "an undefined value") +
              " '" + s.targets[0] + "' (only a namespace() can be changed)");
        const Value ns = *target;  // held: the statement may rebind the name
        Value v = eval(*s.e, fr);
        check_storable(v, s.line);
        ns.ns()->t.set(s.text, std::move(v));
        return Flow::Normal;
      }
      case SK::SetBlock: {
        std::string body;
        exec_body(s.body, fr, body);
        bytes(body.size());
        Value bv = Value::str(std::move(body));
        bv.is_safe = true;
        const Value* saved = block_value;
        block_value = &bv;
        Value v = eval(*s.e, fr);
        block_value = saved;
        fr->set(s.targets[0], std::move(v));
        return Flow::Normal;
      }
      case SK::Macro: {
        Value m;
        m.k = VK::Macro;
        m.p = std::make_shared<const MacroData>(MacroData{s.macro.get(), fr});
        fr->set(s.macro->name, std::move(m));
        return Flow::Normal;
      }
      case SK::Break: return Flow::Break;
      case SK::Continue: return Flow::Continue;
      case SK::Block: return exec_body(s.body, fr, out);
    }
    return Flow::Normal;
  }

  Flow exec_for(const Stmt& s, std::shared_ptr<Frame>& fr, std::string& out) {
    const Value seq = eval(*s.e, fr);
    line = s.line;
    std::vector<Value> items = iterate(seq);
    if (s.cond) {  // {% for x in xs if cond %}: loop.* counts the kept items only
      std::vector<Value> kept;
      for (auto& it : items) {
        step(s.line);
        auto f = std::make_shared<Frame>();
        f->parent = fr;
        assign(*f, s, it);
        if (truthy(eval(*s.cond, f))) kept.push_back(std::move(it));
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      step(s.line);
      auto f = std::make_shared<Frame>();  // a fresh scope each iteration, as in jinja2
      f->parent = fr;
      auto ls = std::make_shared<LoopState>();
      ls->index0 = static_cast<int64_t>(i);
      ls->length = static_cast<int64_t>(items.size());
      if (i > 0) {
        ls->has_prev = true;
        ls->prev = items[i - 1];
      }
      if (i + 1 < items.size()) {
        ls->has_next = true;
        ls->next = items[i + 1];
      }
      Value lv;
      lv.k = VK::Loop;
      lv.p = std::move(ls);
      f->set("loop", std::move(lv));
      assign(*f, s, items[i]);
      const Flow fl = exec_body(s.body, f, out);
      if (fl == Flow::Break) break;
    }
    if (items.empty() && !s.else_body.empty()) return exec_body(s.else_body, fr, out);
    return Flow::Normal;
  }

  // The items a for loop (or list()) visits: a list's items, a dict's keys, a string's
  // characters; nothing for undefined.
  std::vector<Value> iterate(const Value& v) {
    switch (v.k) {
      case VK::Undefined: return {};
      case VK::List: items(v.l()->v.size()); return v.l()->v;
      case VK::Dict: {
        std::vector<Value> r;
        items(v.d()->t.size());
        for (const auto& kv : v.d()->t.entries()) r.push_back(kv.first);
        return r;
      }
      case VK::Str: {
        if (v.sd().length(*this) > kMaxTemplateListItems)
          err("a string of more than " + std::to_string(kMaxTemplateListItems) +
              " characters cannot be gone through one by one (the list limit)");
        std::vector<Value> r;
        const std::string& s = v.s();
        items(static_cast<size_t>(v.sd().length(*this)));
        r.reserve(static_cast<size_t>(v.sd().length(*this)));
        for (size_t i = 0; i < s.size();) {
          size_t n;
          decode_at(s, i, &n);
          r.push_back(Value::str(s.substr(i, n)));
          i += n;
        }
        return r;
      }
      default: err(std::string("'") + type_name(v) + "' object is not iterable");
    }
  }

  // ---- expressions
  Value eval(const Expr& e, const std::shared_ptr<Frame>& fr) {
    step(e.line);
    switch (e.k) {
      case EK::Const: return e.cval;
      case EK::BlockValue: return block_value ? *block_value : Value();
      case EK::Name: {
        if (const Value* v = fr->find(e.name)) return *v;
        return Value::undefined("'" + e.name + "' is undefined");
      }
      case EK::Attr: {
        const Value obj = eval(*e.a[0], fr);
        line = e.line;
        return get_attr(obj, e.name);
      }
      case EK::Item: {
        const Value obj = eval(*e.a[0], fr);
        const Value key = eval(*e.a[1], fr);
        line = e.line;
        return get_item(obj, key);
      }
      case EK::Slice: {
        const Value obj = eval(*e.a[0], fr);
        Value parts[3];
        for (int i = 0; i < 3; ++i)
          if (e.a[i + 1]) parts[i] = eval(*e.a[i + 1], fr);
        line = e.line;
        return slice(obj, parts[0], parts[1], parts[2]);
      }
      case EK::Call: {
        const Value callee = eval(*e.a[0], fr);
        CallArgs args = eval_args(e, fr, 1);
        line = e.line;
        return call(callee, args);
      }
      case EK::Filter: {
        const Value in = eval(*e.a[0], fr);
        CallArgs args = eval_args(e, fr, 1);
        line = e.line;
        return filter(e.name, in, args);
      }
      case EK::Test: {
        const Value in = eval(*e.a[0], fr);
        CallArgs args = eval_args(e, fr, 1);
        line = e.line;
        const bool r = test(e.name, in, args);
        return Value::boolean(e.negate ? !r : r);
      }
      case EK::Neg:
      case EK::Pos: {
        const Value v = eval(*e.a[0], fr);
        line = e.line;
        if (v.undef()) undefined_error(v);
        if (!v.is_num()) err(std::string("bad operand type for unary ") + (e.k == EK::Neg ? "-" : "+") + ": '" + type_name(v) + "'");
        if (e.k == EK::Pos) return v.k == VK::Bool ? Value::integer(v.as_int()) : v;
        if (v.k == VK::Float) return Value::number(-v.f);
        if (v.as_int() == INT64_MIN) err("integer overflow");
        return Value::integer(-v.as_int());
      }
      case EK::Not: return Value::boolean(!truthy(eval(*e.a[0], fr)));
      case EK::And: {
        Value l = eval(*e.a[0], fr);
        return truthy(l) ? eval(*e.a[1], fr) : l;
      }
      case EK::Or: {
        Value l = eval(*e.a[0], fr);
        return truthy(l) ? l : eval(*e.a[1], fr);
      }
      case EK::Cond: {
        if (truthy(eval(*e.a[0], fr))) return eval(*e.a[1], fr);
        if (e.a[2]) return eval(*e.a[2], fr);
        return Value::undefined("the inline if had no else branch");
      }
      case EK::List:
      case EK::Tuple: {
        std::vector<Value> items;
        for (const auto& x : e.a) items.push_back(eval(*x, fr));
        line = e.line;
        return make_list(*this, std::move(items), e.k == EK::Tuple);
      }
      case EK::Dict: {
        std::vector<Table::Entry> items;
        for (size_t i = 0; i + 1 < e.a.size(); i += 2) {
          Value k = eval(*e.a[i], fr);
          if (k.k != VK::Str) fail(e.line, std::string("dict keys must be strings here, not ") + type_name(k));
          k.is_safe = false;
          items.emplace_back(std::move(k), eval(*e.a[i + 1], fr));
        }
        line = e.line;
        return make_dict(*this, std::move(items));
      }
      case EK::Binary: {
        if (e.name == "in" || e.name == "not in") {
          const Value l = eval(*e.a[0], fr);
          const Value r = eval(*e.a[1], fr);
          line = e.line;
          const bool in = contains(r, l);
          return Value::boolean(e.name == "in" ? in : !in);
        }
        const Value l = eval(*e.a[0], fr);
        const Value r = eval(*e.a[1], fr);
        line = e.line;
        return binary(e.name, l, r);
      }
    }
    return Value();
  }

  CallArgs eval_args(const Expr& e, const std::shared_ptr<Frame>& fr, size_t from) {
    CallArgs a;
    for (size_t i = from; i < e.a.size(); ++i) a.pos.push_back(eval(*e.a[i], fr));
    for (const auto& kv : e.kw) a.kw.emplace_back(kv.first, eval(*kv.second, fr));
    return a;
  }

  // ---- operators
  // Each comparison of two values is an item visited; of two strings, the bytes compared.
  bool equal(const Value& a, const Value& b) {
    items(1);
    if (a.is_num() && b.is_num()) {
      if (a.k == VK::Float || b.k == VK::Float) return a.as_double() == b.as_double();
      return a.as_int() == b.as_int();
    }
    if (a.k != b.k) return false;
    switch (a.k) {
      case VK::Undefined:
      case VK::None: return true;
      case VK::Str:
        if (a.p == b.p) return true;
        if (a.s().size() != b.s().size()) return false;
        bytes(a.s().size());
        return a.s() == b.s();
      case VK::List:
        if (a.l()->v.size() != b.l()->v.size() || a.l()->tuple != b.l()->tuple) return false;
        for (size_t i = 0; i < a.l()->v.size(); ++i)
          if (!equal(a.l()->v[i], b.l()->v[i])) return false;
        return true;
      case VK::Dict:
        if (a.d()->t.entries().size() != b.d()->t.entries().size()) return false;
        for (const auto& kv : a.d()->t.entries()) {
          const Value* o = b.d()->find(kv.first.s());
          if (!o || !equal(kv.second, *o)) return false;
        }
        return true;
      case VK::Ns:
      case VK::Func:
      case VK::Macro:
      case VK::Loop: return a.p == b.p;
      default: return false;
    }
  }
  // Python's <: numbers, strings (code point order = UTF-8 byte order), lists.
  int compare(const Value& a, const Value& b, const char* op) {
    items(1);
    if (a.undef()) undefined_error(a);
    if (b.undef()) undefined_error(b);
    if (a.is_num() && b.is_num()) {
      if (a.k == VK::Float || b.k == VK::Float) {
        const double x = a.as_double(), y = b.as_double();
        return x < y ? -1 : x > y ? 1 : 0;
      }
      return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    }
    if (a.k == VK::Str && b.k == VK::Str) {
      bytes(std::min(a.s().size(), b.s().size()));
      const int c = a.s().compare(b.s());
      return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if (a.k == VK::List && b.k == VK::List) {
      const size_t n = std::min(a.l()->v.size(), b.l()->v.size());
      for (size_t i = 0; i < n; ++i)
        if (!equal(a.l()->v[i], b.l()->v[i])) return compare(a.l()->v[i], b.l()->v[i], op);
      return a.l()->v.size() < b.l()->v.size() ? -1 : a.l()->v.size() > b.l()->v.size() ? 1 : 0;
    }
    err(std::string("'") + op + "' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
  }
  bool contains(const Value& hay, const Value& needle) {
    switch (hay.k) {
      case VK::Undefined: return false;
      case VK::Str:
        if (needle.k != VK::Str)
          err(std::string("'in <string>' requires string as left operand, not ") + type_name(needle));
        return find_text(*this, hay.s(), needle.s()) != std::string::npos;
      case VK::List:
        for (const auto& x : hay.l()->v)
          if (equal(x, needle)) return true;
        return false;
      case VK::Dict:
        if (needle.k != VK::Str) return false;
        bytes(needle.s().size());
        return hay.d()->find(needle.s()) != nullptr;
      default: err(std::string("argument of type '") + type_name(hay) + "' is not iterable");
    }
  }
  Value checked_int(__int128 x) const {
    if (x > INT64_MAX || x < INT64_MIN) err("integer overflow (64 bits at most)");
    return Value::integer(static_cast<int64_t>(x));
  }
  Value repeat(const std::vector<Value>* list, const std::string* s, int64_t n) {
    if (n < 0) n = 0;
    if (s) {
      if (s->empty() || n == 0) return Value::str("");
      if (n > kMaxTemplateOutputBytes / static_cast<int64_t>(s->size())) check_size(static_cast<size_t>(kMaxTemplateOutputBytes) + 1);
      std::string r;
      r.reserve(static_cast<size_t>(n) * s->size());
      bytes(static_cast<size_t>(n) * s->size());
      for (int64_t i = 0; i < n; ++i) r += *s;
      return Value::str(std::move(r));
    }
    if (!list->empty() && n > kMaxTemplateListItems / static_cast<int64_t>(list->size()))
      err("a list of more than " + std::to_string(kMaxTemplateListItems) + " items (the list limit)");
    std::vector<Value> r;
    for (int64_t i = 0; i < n; ++i) r.insert(r.end(), list->begin(), list->end());
    steps += static_cast<int64_t>(r.size());
    return make_list(*this, std::move(r));
  }
  Value binary(const std::string& op, const Value& l, const Value& r) {
    if (op == "==") return Value::boolean(equal(l, r));
    if (op == "!=") return Value::boolean(!equal(l, r));
    if (op == "<") return Value::boolean(compare(l, r, "<") < 0);
    if (op == ">") return Value::boolean(compare(l, r, ">") > 0);
    if (op == "<=") return Value::boolean(compare(l, r, "<=") <= 0);
    if (op == ">=") return Value::boolean(compare(l, r, ">=") >= 0);
    if (op == "~") {
      std::string s;
      append_str(s, l, *this);
      append_str(s, r, *this);
      return Value::str(std::move(s));
    }
    if (l.undef()) undefined_error(l);
    if (r.undef()) undefined_error(r);
    const bool nums = l.is_num() && r.is_num();
    const bool flt = nums && (l.k == VK::Float || r.k == VK::Float);
    if (op == "+") {
      if (nums) return flt ? Value::number(l.as_double() + r.as_double()) : checked_int(__int128(l.as_int()) + r.as_int());
      if (l.k == VK::Str && r.k == VK::Str) {
        check_size(l.s().size() + r.s().size());
        bytes(l.s().size() + r.s().size());
        return Value::str(l.s() + r.s());
      }
      if (l.k == VK::List && r.k == VK::List && l.l()->tuple == r.l()->tuple) {
        std::vector<Value> v = l.l()->v;
        v.insert(v.end(), r.l()->v.begin(), r.l()->v.end());
        steps += static_cast<int64_t>(v.size());
        return make_list(*this, std::move(v), l.l()->tuple);
      }
      if (l.k == VK::Str) err(std::string("can only concatenate str (not \"") + type_name(r) + "\") to str");
    } else if (op == "-") {
      if (nums) return flt ? Value::number(l.as_double() - r.as_double()) : checked_int(__int128(l.as_int()) - r.as_int());
    } else if (op == "*") {
      if (nums) return flt ? Value::number(l.as_double() * r.as_double()) : checked_int(__int128(l.as_int()) * r.as_int());
      if (l.k == VK::Str && (r.k == VK::Int || r.k == VK::Bool)) return repeat(nullptr, &l.s(), r.as_int());
      if (r.k == VK::Str && (l.k == VK::Int || l.k == VK::Bool)) return repeat(nullptr, &r.s(), l.as_int());
      if (l.k == VK::List && (r.k == VK::Int || r.k == VK::Bool)) return repeat(&l.l()->v, nullptr, r.as_int());
      if (r.k == VK::List && (l.k == VK::Int || l.k == VK::Bool)) return repeat(&r.l()->v, nullptr, l.as_int());
    } else if (op == "/") {
      if (nums) {
        if (r.as_double() == 0) err("division by zero");
        return Value::number(l.as_double() / r.as_double());
      }
    } else if (op == "//" || op == "%") {
      if (l.k == VK::Str && op == "%") err("'%' string formatting is not supported");
      if (nums) {
        if (r.as_double() == 0) err(op == "//" ? "integer division by zero" : "modulo by zero");
        if (flt) {
          const double a = l.as_double(), b = r.as_double();
          double m = std::fmod(a, b);
          if (m != 0 && ((m < 0) != (b < 0))) m += b;
          if (op == "%") return Value::number(m);
          // CPython's float floor division
          double div = (a - std::fmod(a, b)) / b;
          if (std::fmod(a, b) != 0 && ((b < 0) != (std::fmod(a, b) < 0))) div -= 1.0;
          if (div == 0) return Value::number(std::copysign(0.0, a / b));
          double fl = std::floor(div);
          if (div - fl > 0.5) fl += 1.0;
          return Value::number(fl);
        }
        const int64_t a = l.as_int(), b = r.as_int();
        if (a == INT64_MIN && b == -1) err("integer overflow (64 bits at most)");
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          --q;
          m += b;
        }
        return Value::integer(op == "//" ? q : m);
      }
    } else if (op == "**") {
      if (nums) {
        if (!flt && r.as_int() >= 0) {
          __int128 acc = 1;
          const int64_t base = l.as_int();
          for (int64_t i = 0; i < r.as_int(); ++i) {
            acc *= base;
            if (acc > INT64_MAX || acc < INT64_MIN) err("integer overflow (64 bits at most)");
            if (base == 0 || base == 1) break;
            if (base == -1) {
              acc = (r.as_int() % 2) ? -1 : 1;
              break;
            }
          }
          return Value::integer(static_cast<int64_t>(acc));
        }
        return Value::number(std::pow(l.as_double(), r.as_double()));
      }
    }
    err("unsupported operand type(s) for " + op + ": '" + type_name(l) + "' and '" + type_name(r) + "'");
  }

  // ---- attributes, items, slices
  Value method(const Value& self, const std::string& name) {
    // A bound method; the functions themselves are in call_method.
    Value bound = self;
    return make_func(name, [bound, name](Interp& in, CallArgs& a) { return in.call_method(bound, name, a); });
  }
  static bool is_str_method(const std::string& n) {
    static const char* const names[] = {"startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit",
                                        "replace", "upper", "lower", "title", "capitalize", "find", "rfind",
                                        "count", "join", "splitlines", "isdigit", "isalpha", "isspace", "isupper",
                                        "islower", "index"};
    for (const char* x : names)
      if (n == x) return true;
    return false;
  }
  Value get_attr(const Value& obj, const std::string& name) {
    switch (obj.k) {
      case VK::Undefined: undefined_error(obj);
      case VK::Dict:
        if (name == "items" || name == "keys" || name == "values" || name == "get" || name == "copy" ||
            name == "pop" || name == "update" || name == "setdefault" || name == "clear" || name == "popitem")
          return method(obj, name);
        if (const Value* v = obj.d()->find(name)) return *v;
        break;
      case VK::Str:
        if (is_str_method(name)) return method(obj, name);
        break;
      case VK::List:
        if (name == "index" || name == "count" || name == "append" || name == "extend" || name == "pop" ||
            name == "insert" || name == "remove" || name == "sort" || name == "reverse" || name == "clear")
          return method(obj, name);
        break;
      case VK::Ns:
        if (const Value* v = obj.ns()->t.find(name)) return *v;
        break;
      case VK::Loop: {
        const LoopState& l = *obj.loop();
        if (name == "index") return Value::integer(l.index0 + 1);
        if (name == "index0") return Value::integer(l.index0);
        if (name == "revindex") return Value::integer(l.length - l.index0);
        if (name == "revindex0") return Value::integer(l.length - l.index0 - 1);
        if (name == "first") return Value::boolean(l.index0 == 0);
        if (name == "last") return Value::boolean(l.index0 + 1 == l.length);
        if (name == "length") return Value::integer(l.length);
        if (name == "depth") return Value::integer(1);
        if (name == "depth0") return Value::integer(0);
        if (name == "previtem") return l.has_prev ? l.prev : Value::undefined("there is no previous item");
        if (name == "nextitem") return l.has_next ? l.next : Value::undefined("there is no next item");
        if (name == "cycle") {
          const int64_t i0 = l.index0;
          return make_func("cycle", [i0](Interp& in, CallArgs& a) {
            if (a.pos.empty()) in.err("loop.cycle needs at least one argument");
            return a.pos[static_cast<size_t>(i0 % static_cast<int64_t>(a.pos.size()))];
          });
        }
        break;
      }
      default: break;
    }
    return Value::undefined("'" + std::string(obj.k == VK::None ? "None" : type_name(obj)) + (obj.k == VK::None ? "" : " object") +
                            "' has no attribute '" + name + "'");
  }
  Value get_item(const Value& obj, const Value& key) {
    switch (obj.k) {
      case VK::Undefined: undefined_error(obj);
      case VK::Dict:
        if (key.k == VK::Str) {
          if (const Value* v = obj.d()->find(key.s())) return *v;
          return get_attr(obj, key.s());
        }
        return Value::undefined("'dict object' has no attribute " + py_repr(key, *this));
      case VK::List:
      case VK::Str: {
        if (key.k == VK::Str) return get_attr(obj, key.s());
        if (key.k != VK::Int && key.k != VK::Bool) break;
        int64_t i = key.as_int();
        if (obj.k == VK::List) {
          const int64_t n = static_cast<int64_t>(obj.l()->v.size());
          if (i < 0) i += n;
          if (i < 0 || i >= n) return Value::undefined(std::string(type_name(obj)) + " object has no element " + std::to_string(key.as_int()));
          return obj.l()->v[static_cast<size_t>(i)];
        }
        const int64_t n = obj.sd().length(*this);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined("str object has no element " + std::to_string(key.as_int()));
        if (obj.sd().one_byte_each(*this)) return Value::str(obj.s().substr(static_cast<size_t>(i), 1));
        const auto o = offsets(obj);
        return Value::str(obj.s().substr(o[i], o[i + 1] - o[i]));
      }
      case VK::Ns:
      case VK::Loop:
        if (key.k == VK::Str) return get_attr(obj, key.s());
        break;
      default: break;
    }
    return Value::undefined("'" + std::string(type_name(obj)) + " object' has no attribute " + py_repr(key, *this));
  }
  // Byte offsets of a string value's code points and its end (cp_offsets), charged.
  std::vector<size_t> offsets(const Value& v) {
    cps(v.s().size());
    return cp_offsets(v.s());
  }
  // Python's slice indices for a sequence of n items.
  void slice_bounds(int64_t n, const Value& a, const Value& b, const Value& c, int64_t* start, int64_t* stop,
                    int64_t* stp) const {
    auto idx = [&](const Value& v) -> std::optional<int64_t> {
      if (v.undef() || v.k == VK::None) return std::nullopt;
      if (v.k != VK::Int && v.k != VK::Bool) err("slice indices must be integers or None");
      return v.as_int();
    };
    const auto sa = idx(a), sb = idx(b), sc = idx(c);
    const int64_t step = sc.value_or(1);
    if (step == 0) err("slice step cannot be zero");
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
      if (!v) return dflt;
      int64_t x = *v;
      if (x < 0) x += n;
      if (step > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    *start = clamp(sa, step > 0 ? 0 : n - 1);
    *stop = clamp(sb, step > 0 ? n : -1);
    *stp = step;
  }
  Value slice(const Value& obj, const Value& a, const Value& b, const Value& c) {
    if (obj.undef()) undefined_error(obj);
    int64_t start, stop, step;
    if (obj.k == VK::List) {
      slice_bounds(static_cast<int64_t>(obj.l()->v.size()), a, b, c, &start, &stop, &step);
      std::vector<Value> r;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        r.push_back(obj.l()->v[static_cast<size_t>(i)]);
      steps += static_cast<int64_t>(r.size());
      return make_list(*this, std::move(r), obj.l()->tuple);
    }
    if (obj.k == VK::Str) {
      const std::string& s = obj.s();
      slice_bounds(obj.sd().length(*this), a, b, c, &start, &stop, &step);
      std::string r;
      if (obj.sd().one_byte_each(*this)) {
        if (step == 1) {
          r = start < stop ? s.substr(static_cast<size_t>(start), static_cast<size_t>(stop - start)) : std::string();
        } else {
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) r += s[static_cast<size_t>(i)];
        }
      } else {
        const auto o = offsets(obj);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) r.append(s, o[i], o[i + 1] - o[i]);
      }
      bytes(r.size());
      return Value::str(std::move(r));
    }
    err(std::string("'") + type_name(obj) + "' object is not subscriptable");
  }

  // ---- calls
  Value call(const Value& callee, CallArgs& a) {
    if (callee.k == VK::Func) return callee.fn()->fn(*this, a);
    if (callee.k == VK::Macro) return call_macro(*callee.macro(), a);
    if (callee.undef()) undefined_error(callee);
    err(std::string("'") + type_name(callee) + "' object is not callable");
  }
  Value call_macro(const MacroData& m, CallArgs& a) {
    const MacroDef& d = *m.def;
    if (a.pos.size() > d.params.size())
      err("macro '" + d.name + "' takes not more than " + std::to_string(d.params.size()) + " argument(s)");
    if (depth + 1 > kMaxTemplateDepth)
      err("macro calls nested deeper than " + std::to_string(kMaxTemplateDepth) + " levels (the recursion limit)");
    auto f = std::make_shared<Frame>();
    f->parent = m.closure.lock();
    if (!f->parent) err("macro '" + d.name + "' is called after the loop it was defined in ended");
    std::vector<bool> given(d.params.size(), false);
    for (size_t i = 0; i < a.pos.size(); ++i) {
      f->set(d.params[i], a.pos[i]);
      given[i] = true;
    }
    for (auto& kv : a.kw) {
      const auto it = std::find(d.params.begin(), d.params.end(), kv.first);
      if (it == d.params.end()) err("macro '" + d.name + "' takes no keyword argument '" + kv.first + "'");
      const size_t i = static_cast<size_t>(it - d.params.begin());
      if (given[i]) err("macro '" + d.name + "' got multiple values for argument '" + kv.first + "'");
      f->set(kv.first, kv.second);
      given[i] = true;
    }
    for (size_t i = 0; i < d.params.size(); ++i)
      if (!given[i])
        f->set(d.params[i], d.defaults[i] ? eval(*d.defaults[i], f)
                                          : Value::undefined("parameter '" + d.params[i] + "' was not provided"));
    ++depth;
    std::string out;
    struct Dec {
      int& d;
      ~Dec() { --d; }
    } dec{depth};
    exec_body(d.body, f, out);
    Value r = Value::str(std::move(out));
    r.is_safe = true;
    return r;
  }

  // Argument helpers for builtins: positional i, else keyword `name`, else null.
  static const Value* arg(CallArgs& a, size_t i, const char* name) {
    if (i < a.pos.size()) return &a.pos[i];
    for (auto& kv : a.kw)
      if (kv.first == name) return &kv.second;
    return nullptr;
  }
  int64_t int_arg(CallArgs& a, size_t i, const char* name, int64_t dflt, const char* fn) {
    const Value* v = arg(a, i, name);
    if (!v || v->k == VK::None) return dflt;
    if (v->k != VK::Int && v->k != VK::Bool) err(std::string(fn) + ": '" + name + "' must be an integer");
    return v->as_int();
  }
  const std::string* str_arg(CallArgs& a, size_t i, const char* name, const char* fn) {
    const Value* v = arg(a, i, name);
    if (!v || v->k == VK::None) return nullptr;
    if (v->k != VK::Str) err(std::string(fn) + ": '" + name + "' must be a string, not " + type_name(*v));
    return &v->s();
  }

  Value call_method(const Value& self, const std::string& name, CallArgs& a) {
    if (self.k == VK::Dict) {
      if (name == "get") {
        const Value* k = arg(a, 0, "key");
        if (!k) err("get() needs a key");
        const Value* d = arg(a, 1, "default");
        if (k->k == VK::Str)
          if (const Value* v = self.d()->find(k->s())) return *v;
        return d ? *d : Value::none();
      }
      if (name == "items") {
        std::vector<Value> r;
        for (const auto& kv : self.d()->t.entries()) r.push_back(make_list(*this, {kv.first, kv.second}, true));
        return make_list(*this, std::move(r));
      }
      if (name == "keys") {
        std::vector<Value> r;
        for (const auto& kv : self.d()->t.entries()) r.push_back(kv.first);
        return make_list(*this, std::move(r));
      }
      if (name == "values") {
        std::vector<Value> r;
        for (const auto& kv : self.d()->t.entries()) r.push_back(kv.second);
        return make_list(*this, std::move(r));
      }
      if (name == "copy") return self;
      err("dict." + name + "() would change the dict, which the sandbox forbids");
    }
    if (self.k == VK::List) {
      if (name == "index" || name == "count") {
        const Value* x = arg(a, 0, "value");
        if (!x) err("list." + name + "() needs an argument");
        int64_t n = 0;
        for (size_t i = 0; i < self.l()->v.size(); ++i)
          if (equal(self.l()->v[i], *x)) {
            if (name == "index") return Value::integer(static_cast<int64_t>(i));
            ++n;
          }
        if (name == "index") err(py_repr(*x, *this) + " is not in list");
        return Value::integer(n);
      }
      err("list." + name + "() would change the list, which the sandbox forbids");
    }
    // str methods
    const std::string& s = self.s();
    if (name == "startswith" || name == "endswith") {
      const Value* p = arg(a, 0, "prefix");
      if (!p) err(name + "() needs an argument");
      std::vector<std::string> options;
      if (p->k == VK::Str)
        options.push_back(p->s());
      else if (p->k == VK::List)
        for (const auto& x : p->l()->v) {
          if (x.k != VK::Str) err(name + "(): the tuple must hold strings");
          options.push_back(x.s());
        }
      else err(name + "() takes a string or a tuple of strings, not " + type_name(*p));
      items(options.size());
      for (const auto& o : options) {
        bytes(o.size());
        if (o.size() > s.size()) continue;
        if (name == "startswith" ? s.compare(0, o.size(), o) == 0 : s.compare(s.size() - o.size(), o.size(), o) == 0)
          return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip" || name == "upper" || name == "lower" ||
        name == "title" || name == "capitalize" || name == "splitlines" || name == "isdigit" || name == "isalpha" ||
        name == "isspace" || name == "isupper" || name == "islower")
      cps(s.size());  // one pass over the code points, or two
    if (name == "strip" || name == "lstrip" || name == "rstrip")
      return Value::str(py_strip(s, str_arg(a, 0, "chars", name.c_str()), name != "rstrip", name != "lstrip"));
    if (name == "split" || name == "rsplit") {
      const std::string* sep = str_arg(a, 0, "sep", name.c_str());
      const int64_t maxsplit = int_arg(a, 1, "maxsplit", -1, name.c_str());
      std::vector<std::string> parts;
      if (name == "rsplit" && maxsplit >= 0) {
        // split from the right: reverse, split, reverse back (on code points)
        auto rev = [](const std::string& x) {
          auto c = to_cps(x);
          std::reverse(c.begin(), c.end());
          return from_cps(c, 0, c.size());
        };
        std::string rsep = sep ? rev(*sep) : "";
        cps(s.size());
        parts = py_split(rev(s), sep ? &rsep : nullptr, maxsplit, *this);
        for (auto& p : parts) p = rev(p);
        std::reverse(parts.begin(), parts.end());
      } else {
        parts = py_split(s, sep, maxsplit, *this);
      }
      std::vector<Value> r;
      for (auto& p : parts) r.push_back(Value::str(std::move(p)));
      steps += static_cast<int64_t>(r.size());
      return make_list(*this, std::move(r));
    }
    if (name == "splitlines") {
      std::vector<Value> r;
      for (auto& p : py_splitlines(s, *this)) r.push_back(Value::str(std::move(p)));
      return make_list(*this, std::move(r));
    }
    if (name == "replace") {
      const std::string* o = str_arg(a, 0, "old", "replace");
      const std::string* n = str_arg(a, 1, "new", "replace");
      if (!o || !n) err("replace() needs two strings");
      std::string r = py_replace(s, *o, *n, int_arg(a, 2, "count", -1, "replace"), *this);
      check_size(r.size());
      return Value::str(std::move(r));
    }
    if (name == "upper") return Value::str(py_upper(s));
    if (name == "lower") return Value::str(py_lower(s));
    if (name == "title") return Value::str(py_title(s));
    if (name == "capitalize") return Value::str(py_capitalize(s));
    if (name == "find" || name == "rfind" || name == "index") {
      const std::string* sub = str_arg(a, 0, "sub", name.c_str());
      if (!sub) err(name + "() needs a string");
      const size_t at = name == "rfind" ? rfind_text(*this, s, *sub) : find_text(*this, s, *sub);
      if (at == std::string::npos) {
        if (name == "index") err("substring not found");
        return Value::integer(-1);
      }
      bytes(at);
      return Value::integer(cp_length(s.substr(0, at)));
    }
    if (name == "count") {
      const std::string* sub = str_arg(a, 0, "sub", "count");
      if (!sub) err("count() needs a string");
      if (sub->empty()) return Value::integer(self.sd().length(*this) + 1);
      int64_t n = 0;
      for (size_t at = find_text(*this, s, *sub); at != std::string::npos;
           at = find_text(*this, s, *sub, at + sub->size()))
        ++n;
      return Value::integer(n);
    }
    if (name == "join") {
      const Value* items = arg(a, 0, "iterable");
      if (!items) err("join() needs an argument");
      std::string r;
      bool first = true;
      for (const auto& x : iterate(*items)) {
        if (x.k != VK::Str) err(std::string("join(): expected str instance, ") + type_name(x) + " found");
        if (!first) {
          bytes(s.size());
          r += s;
        }
        r += x.s();
        first = false;
        check_size(r.size());
      }
      return Value::str(std::move(r));
    }
    auto all_of = [&](auto pred) {
      const auto c = to_cps(s);
      if (c.empty()) return Value::boolean(false);
      for (int32_t x : c)
        if (!pred(x)) return Value::boolean(false);
      return Value::boolean(true);
    };
    if (name == "isdigit") return all_of([](int32_t x) { return utf8proc_category(x) == UTF8PROC_CATEGORY_ND; });
    if (name == "isalpha") return all_of(is_alpha);
    if (name == "isspace") return all_of(py_space);
    if (name == "isupper" || name == "islower") {
      bool cased = false;
      for (int32_t x : to_cps(s)) {
        if (!is_cased_letter(x)) continue;
        cased = true;
        if (name == "isupper" ? utf8proc_tolower(x) == x : utf8proc_toupper(x) == x) return Value::boolean(false);
      }
      return Value::boolean(cased);
    }
    err("str." + name + "() is not supported");
  }

  // ---- filters
  // Item `attr` of `x` as jinja2's attribute filters read it ("a.b", "0" an index).
  Value attr_path(const Value& x, const std::string& path) {
    bytes(path.size());
    Value v = x;
    size_t pos = 0;
    while (true) {
      const size_t dot = path.find('.', pos);
      const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
      const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      v = get_item(v, digits ? Value::integer(std::strtoll(part.c_str(), nullptr, 10)) : Value::str(part));
      if (dot == std::string::npos) return v;
      pos = dot + 1;
    }
  }
  std::vector<Value> items_of(const Value& v, const char* fn) {
    if (v.k == VK::None) err(std::string(fn) + ": 'NoneType' object is not iterable");
    return iterate(v);
  }
  // select/reject/selectattr/rejectattr: keep the items whose test (from args[from]) is `want`.
  Value select(const Value& in, CallArgs& a, bool attr, bool want, const char* fn) {
    std::string path;
    size_t from = 0;
    if (attr) {
      if (a.pos.empty() || a.pos[0].k != VK::Str) err(std::string(fn) + " needs an attribute name");
      path = a.pos[0].s();
      from = 1;
    }
    std::string test_name;
    CallArgs targs;
    if (a.pos.size() > from) {
      if (a.pos[from].k != VK::Str) err(std::string(fn) + ": the test name must be a string");
      test_name = a.pos[from].s();
      if (!known(kTests, test_name)) err("test '" + test_name + "' is not supported");
      targs.pos.assign(a.pos.begin() + static_cast<long>(from) + 1, a.pos.end());
      targs.kw = a.kw;
    }
    std::vector<Value> r;
    for (const auto& x : items_of(in, fn)) {
      ++steps;
      const Value v = attr ? attr_path(x, path) : x;
      const bool ok = test_name.empty() ? truthy(v) : test(test_name, v, targs);
      if (ok == want) r.push_back(x);
    }
    return make_list(*this, std::move(r));
  }
  // sort key comparison: strings case-folded unless case_sensitive.
  Value sort_key(const Value& v, bool case_sensitive) {
    if (case_sensitive || v.k != VK::Str) return v;
    bytes(v.s().size());
    return Value::str(py_lower(v.s()));
  }

  Value filter(const std::string& name, const Value& in, CallArgs& a) {
    const char* fn = name.c_str();
    if (name == "safe") {
      Value r = in.k == VK::Str ? in : Value::str(to_str(in, *this));
      r.is_safe = true;
      return r;
    }
    if (name == "string") return in.k == VK::Str ? in : Value::str(to_str(in, *this));
    if (name == "e" || name == "escape") {
      std::string r;
      for (char c : to_str(in, *this)) {
        if (c == '&') r += "&amp;";
        else if (c == '<') r += "&lt;";
        else if (c == '>') r += "&gt;";
        else if (c == '"') r += "&#34;";
        else if (c == '\'') r += "&#39;";
        else r += c;
      }
      bytes(r.size());
      check_size(r.size());
      return Value::str(r);
    }
    if (name == "default" || name == "d") {
      const Value* dflt = arg(a, 0, "default_value");
      const Value* boolean = arg(a, 1, "boolean");
      const bool use = in.undef() || (boolean && truthy(*boolean) && !truthy(in));
      if (use) return dflt ? *dflt : Value::str("");
      return in;
    }
    if (name == "length" || name == "count") {
      switch (in.k) {
        case VK::Undefined: return Value::integer(0);
        case VK::Str: return Value::integer(in.sd().length(*this));
        case VK::List: return Value::integer(static_cast<int64_t>(in.l()->v.size()));
        case VK::Dict: return Value::integer(static_cast<int64_t>(in.d()->t.entries().size()));
        default: err(std::string("object of type '") + type_name(in) + "' has no len()");
      }
    }
    if (name == "tojson") {
      JsonStyle st;
      if (const Value* v = arg(a, 0, "ensure_ascii")) st.ensure_ascii = truthy(*v);
      if (const Value* v = arg(a, 1, "indent"); v && v->k != VK::None) {
        st.indent_set = true;
        if (v->k == VK::Str)
          st.indent = v->s();
        else if (v->k == VK::Int || v->k == VK::Bool) st.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(v->as_int(), 0, 256)), ' ');
        else err("tojson: indent must be an integer or a string");
        st.item_sep = ",";
      }
      if (const Value* v = arg(a, 2, "separators"); v && v->k != VK::None) {
        if (v->k != VK::List || v->l()->v.size() != 2 || v->l()->v[0].k != VK::Str || v->l()->v[1].k != VK::Str)
          err("tojson: separators must be two strings");
        st.item_sep = v->l()->v[0].s();
        st.key_sep = v->l()->v[1].s();
      }
      if (const Value* v = arg(a, 3, "sort_keys")) st.sort_keys = truthy(*v);
      std::string out;
      json_dump(out, in, st, 0, *this);
      check_size(out.size());
      return Value::str(std::move(out));
    }
    if (name == "trim" || name == "upper" || name == "lower" || name == "capitalize" || name == "title" ||
        name == "wordcount") {
      const std::string s = to_str(in, *this);
      cps(s.size());
      if (name == "trim") return Value::str(py_strip(s, str_arg(a, 0, "chars", fn), true, true));
      if (name == "upper") return Value::str(py_upper(s));
      if (name == "lower") return Value::str(py_lower(s));
      if (name == "capitalize") return Value::str(py_capitalize(s));
      if (name == "title") return Value::str(py_title(s));
      return Value::integer(static_cast<int64_t>(py_split(s, nullptr, -1, *this).size()));
    }
    if (name == "replace") {
      const std::string* o = str_arg(a, 0, "old", fn);
      const std::string* n = str_arg(a, 1, "new", fn);
      if (!o || !n) err("replace needs two strings");
      std::string r = py_replace(to_str(in, *this), *o, *n, int_arg(a, 2, "count", -1, fn), *this);
      check_size(r.size());
      return Value::str(std::move(r));
    }
    if (name == "indent") {
      std::string ind;
      if (const Value* w = arg(a, 0, "width"); w && w->k == VK::Str)
        ind = w->s();
      else ind = std::string(static_cast<size_t>(std::clamp<int64_t>(int_arg(a, 0, "width", 4, fn), 0, 1024)), ' ');
      const Value* first = arg(a, 1, "first");
      const Value* blank = arg(a, 2, "blank");
      const std::string text = to_str(in, *this) + "\n";
      cps(text.size());
      std::vector<std::string> lines = py_splitlines(text, *this);
      items(lines.size());
      std::string r;
      // each line adds at most the indent, a newline and itself
      const auto grow = [&](size_t i) {
        bytes(ind.size() + 1 + lines[i].size());
        check_size(r.size() + ind.size() + 1 + lines[i].size());
      };
      if (blank && truthy(*blank)) {
        for (size_t i = 0; i < lines.size(); ++i) {
          grow(i);
          r += (i ? "\n" + ind : "") + lines[i];
        }
      } else {
        r = lines.empty() ? "" : lines[0];
        if (lines.size() > 1) {
          r += "\n";
          for (size_t i = 1; i < lines.size(); ++i) {
            grow(i);
            r += (i > 1 ? "\n" : "") + (lines[i].empty() ? "" : ind) + lines[i];
          }
        }
      }
      check_size(r.size() + ind.size());
      if (first && truthy(*first)) r = ind + r;
      check_size(r.size());
      return Value::str(std::move(r));
    }
    if (name == "first" || name == "last") {
      // without building the sequence: a list's end item, a dict's end key, a string's end
      // code point
      const bool front = name == "first";
      auto empty = [&] { return Value::undefined("No " + name + " item, sequence was empty."); };
      if (in.k == VK::List) return in.l()->v.empty() ? empty() : front ? in.l()->v.front() : in.l()->v.back();
      if (in.k == VK::Dict)
        return in.d()->t.empty() ? empty() : (front ? in.d()->t.entries().front() : in.d()->t.entries().back()).first;
      if (in.k == VK::Str) {
        const std::string& s = in.s();
        if (s.empty()) return empty();
        if (front) {
          size_t n;
          decode_at(s, 0, &n);
          return Value::str(s.substr(0, n));
        }
        // the last code point starts at most 4 bytes from the end
        size_t start = s.size() > 4 ? s.size() - 4 : 0, n = 0;
        for (size_t i = start; i < s.size(); i += n) {
          decode_at(s, i, &n);
          if (i + n == s.size()) return Value::str(s.substr(i));
        }
      }
      std::vector<Value> items = iterate(in);
      if (items.empty()) return empty();
      return front ? items.front() : items.back();
    }
    if (name == "list") return make_list(*this, items_of(in, fn));
    if (name == "reverse") {
      if (in.k == VK::Str) {
        cps(in.s().size());
        auto c = to_cps(in.s());
        std::reverse(c.begin(), c.end());
        return Value::str(from_cps(c, 0, c.size()));
      }
      std::vector<Value> items = items_of(in, fn);
      std::reverse(items.begin(), items.end());
      return make_list(*this, std::move(items));
    }
    if (name == "items") {
      if (in.undef()) return make_list(*this, {});
      if (in.k != VK::Dict) err("items: can only get item pairs from a mapping");
      CallArgs none;
      return call_method(in, "items", none);
    }
    if (name == "dictsort") {
      if (in.k != VK::Dict) err(std::string("dictsort: expected a dict, got ") + type_name(in));
      const Value* cs = arg(a, 0, "case_sensitive");
      const std::string* by = str_arg(a, 1, "by", fn);
      const Value* rev = arg(a, 2, "reverse");
      const bool case_sensitive = cs && truthy(*cs);
      const bool by_value = by && *by == "value";
      if (by && *by != "key" && *by != "value") err("dictsort: 'by' must be 'key' or 'value'");
      std::vector<Value> pairs;
      for (const auto& kv : in.d()->t.entries()) pairs.push_back(make_list(*this, {kv.first, kv.second}, true));
      std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
        const size_t i = by_value ? 1 : 0;
        return compare(sort_key(x.l()->v[i], case_sensitive), sort_key(y.l()->v[i], case_sensitive), "<") < 0;
      });
      if (rev && truthy(*rev)) std::reverse(pairs.begin(), pairs.end());
      return make_list(*this, std::move(pairs));
    }
    if (name == "sort") {
      const Value* rev = arg(a, 0, "reverse");
      const Value* cs = arg(a, 1, "case_sensitive");
      const std::string* attr = str_arg(a, 2, "attribute", fn);
      const bool case_sensitive = cs && truthy(*cs);
      const bool reverse = rev && truthy(*rev);
      std::vector<Value> items = items_of(in, fn);
      std::vector<Value> keys;
      for (const auto& x : items) keys.push_back(sort_key(attr ? attr_path(x, *attr) : x, case_sensitive));
      std::vector<size_t> order(items.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return reverse ? compare(keys[y], keys[x], "<") < 0 : compare(keys[x], keys[y], "<") < 0;
      });
      std::vector<Value> r;
      for (size_t i : order) r.push_back(items[i]);
      return make_list(*this, std::move(r));
    }
    if (name == "unique") {
      const Value* cs = arg(a, 0, "case_sensitive");
      const bool case_sensitive = cs && truthy(*cs);
      std::vector<Value> r, seen;
      for (const auto& x : items_of(in, fn)) {
        const Value k = sort_key(x, case_sensitive);
        bool dup = false;
        for (const auto& s : seen)
          if (equal(s, k)) {
            dup = true;
            break;
          }
        steps += static_cast<int64_t>(seen.size());
        if (!dup) {
          seen.push_back(k);
          r.push_back(x);
        }
      }
      return make_list(*this, std::move(r));
    }
    if (name == "join") {
      const std::string* sep = str_arg(a, 0, "d", fn);
      const std::string* attr = str_arg(a, 1, "attribute", fn);
      std::string r;
      bool first = true;
      for (const auto& x : items_of(in, fn)) {
        if (!first && sep) {
          bytes(sep->size());
          r += *sep;
        }
        r += to_str(attr ? attr_path(x, *attr) : x, *this);
        first = false;
        check_size(r.size());
      }
      return Value::str(std::move(r));
    }
    if (name == "map") {
      std::vector<Value> r;
      const std::string* attr = nullptr;
      for (auto& kv : a.kw)
        if (kv.first == "attribute") {
          if (kv.second.k != VK::Str) err("map: attribute must be a string");
          attr = &kv.second.s();
        }
      if (attr) {
        const Value* dflt = nullptr;
        for (auto& kv : a.kw)
          if (kv.first == "default") dflt = &kv.second;
        for (const auto& x : items_of(in, fn)) {
          ++steps;
          Value v = attr_path(x, *attr);
          r.push_back(v.undef() && dflt ? *dflt : v);
        }
        return make_list(*this, std::move(r));
      }
      if (a.pos.empty() || a.pos[0].k != VK::Str) err("map needs a filter name or attribute=");
      const std::string f = a.pos[0].s();
      if (!known(kFilters, f)) err("filter '" + f + "' is not supported");
      CallArgs fa;
      fa.pos.assign(a.pos.begin() + 1, a.pos.end());
      fa.kw = a.kw;
      for (const auto& x : items_of(in, fn)) {
        ++steps;
        CallArgs copy = fa;
        r.push_back(filter(f, x, copy));
      }
      return make_list(*this, std::move(r));
    }
    if (name == "select") return select(in, a, false, true, fn);
    if (name == "reject") return select(in, a, false, false, fn);
    if (name == "selectattr") return select(in, a, true, true, fn);
    if (name == "rejectattr") return select(in, a, true, false, fn);
    if (name == "attr") {
      const std::string* n = str_arg(a, 0, "name", fn);
      if (!n) err("attr needs a name");
      return get_attr(in, *n);
    }
    if ((name == "int" || name == "float") && in.k == VK::Str) bytes(in.s().size());
    if (name == "int") {
      const int64_t dflt = int_arg(a, 0, "default", 0, fn);
      if (in.k == VK::Int || in.k == VK::Bool) return Value::integer(in.as_int());
      if (in.k == VK::Float) {
        if (!std::isfinite(in.f) || std::fabs(in.f) >= 9.2e18) return Value::integer(dflt);
        return Value::integer(static_cast<int64_t>(in.f));
      }
      if (in.k == VK::Str) {
        const std::string t = py_strip(in.s(), nullptr, true, true);
        std::string digits;
        for (char c : t)
          if (c != '_') digits += c;
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(digits.c_str(), &end, 10);
        if (!digits.empty() && end && *end == 0 && errno == 0) return Value::integer(v);
        const double d = std::strtod(t.c_str(), &end);
        if (!t.empty() && end && *end == 0 && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(d));
      }
      return Value::integer(dflt);
    }
    if (name == "float") {
      const Value* dv = arg(a, 0, "default");
      const double dflt = dv && dv->is_num() ? dv->as_double() : 0.0;
      if (in.is_num()) return Value::number(in.as_double());
      if (in.k == VK::Str) {
        const std::string t = py_strip(in.s(), nullptr, true, true);
        char* end = nullptr;
        const double d = std::strtod(t.c_str(), &end);
        if (!t.empty() && end && *end == 0) return Value::number(d);
      }
      return Value::number(dflt);
    }
    if (name == "abs") {
      if (in.k == VK::Float) return Value::number(std::fabs(in.f));
      if (in.k == VK::Int || in.k == VK::Bool) {
        if (in.as_int() == INT64_MIN) err("integer overflow");
        return Value::integer(std::llabs(in.as_int()));
      }
      err(std::string("bad operand type for abs(): '") + type_name(in) + "'");
    }
    if (name == "round") {
      const int64_t prec = int_arg(a, 0, "precision", 0, fn);
      const std::string* method = str_arg(a, 1, "method", fn);
      if (!in.is_num()) err(std::string("round: expected a number, got ") + type_name(in));
      const double m = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(prec, -300, 300)));
      const double x = in.as_double() * m;
      const double r = (method && *method == "floor") ? std::floor(x) : (method && *method == "ceil") ? std::ceil(x) : std::round(x);
      return Value::number(r / m);
    }
    if (name == "sum" || name == "min" || name == "max") {
      const std::vector<Value> items = items_of(in, fn);
      if (name == "sum") {
        Value acc = Value::integer(0);
        if (const Value* st = arg(a, 1, "start")) acc = *st;
        for (const auto& x : items) acc = binary("+", acc, x);
        return acc;
      }
      if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
      const Value* cs = arg(a, 0, "case_sensitive");
      const bool case_sensitive = cs && truthy(*cs);
      size_t best = 0;
      for (size_t i = 1; i < items.size(); ++i) {
        const int c = compare(sort_key(items[i], case_sensitive), sort_key(items[best], case_sensitive), "<");
        if (name == "min" ? c < 0 : c > 0) best = i;
      }
      return items[best];
    }
    if (name == "batch") {
      const int64_t n = int_arg(a, 0, "linecount", 1, fn);
      if (n <= 0) err("batch: the count must be positive");
      std::vector<Value> r, cur;
      for (const auto& x : items_of(in, fn)) {
        cur.push_back(x);
        if (static_cast<int64_t>(cur.size()) == n) {
          r.push_back(make_list(*this, std::move(cur)));
          cur.clear();
        }
      }
      if (!cur.empty()) r.push_back(make_list(*this, std::move(cur)));
      return make_list(*this, std::move(r));
    }
    err("filter '" + name + "' is not supported");
  }

  // ---- tests
  bool test(const std::string& name, const Value& v, CallArgs& a) {
    auto other = [&]() -> const Value& {
      const Value* o = arg(a, 0, "other");
      if (!o) err("test '" + name + "' needs an argument");
      return *o;
    };
    if (name == "defined") return !v.undef();
    if (name == "undefined") return v.undef();
    if (name == "none") return v.k == VK::None;
    if (name == "boolean") return v.k == VK::Bool;
    if (name == "true") return v.k == VK::Bool && v.b;
    if (name == "false") return v.k == VK::Bool && !v.b;
    if (name == "integer") return v.k == VK::Int;
    if (name == "float") return v.k == VK::Float;
    if (name == "number") return v.is_num();
    if (name == "string") return v.k == VK::Str;
    if (name == "mapping") return v.k == VK::Dict;
    if (name == "iterable") return v.k == VK::Str || v.k == VK::List || v.k == VK::Dict || v.undef();
    if (name == "sequence") return v.k == VK::Str || v.k == VK::List || v.k == VK::Dict || v.undef();
    if (name == "callable") return v.k == VK::Func || v.k == VK::Macro;
    if (name == "escaped") return v.is_safe;
    if (name == "lower" || name == "upper") {
      const std::string s = to_str(v, *this);
      cps(s.size());
      return name == "lower" ? py_lower(s) == s : py_upper(s) == s;
    }
    if (name == "odd" || name == "even" || name == "divisibleby") {
      if (v.k != VK::Int && v.k != VK::Bool) err("test '" + name + "' needs an integer, not " + type_name(v));
      if (name == "divisibleby") {
        const Value& o = other();
        if (o.k != VK::Int || o.i == 0) err("divisibleby needs a non-zero integer");
        return v.as_int() % o.i == 0;
      }
      return (v.as_int() % 2 != 0) == (name == "odd");
    }
    if (name == "sameas") {
      const Value& o = other();
      if (v.k != o.k) return false;
      switch (v.k) {
        case VK::None:
        case VK::Undefined: return true;
        case VK::Bool: return v.b == o.b;
        case VK::Int: return v.i == o.i;  // CPython caches small ints; equal ints are usually the same object
        case VK::Str: return v.s() == o.s();
        case VK::List:
        case VK::Dict:
        case VK::Ns: return v.p == o.p;
        default: return false;
      }
    }
    if (name == "in") return contains(other(), v);
    if (name == "eq" || name == "equalto" || name == "==") return equal(v, other());
    if (name == "ne" || name == "!=") return !equal(v, other());
    if (name == "lt" || name == "lessthan" || name == "<") return compare(v, other(), "<") < 0;
    if (name == "le" || name == "<=") return compare(v, other(), "<=") <= 0;
    if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, other(), ">") > 0;
    if (name == "ge" || name == ">=") return compare(v, other(), ">=") >= 0;
    err("test '" + name + "' is not supported");
  }

  // ---- globals
  std::string strftime(const std::string& fmt) {
    static const char* const months[] = {"January", "February", "March", "April", "May", "June", "July",
                                         "August", "September", "October", "November", "December"};
    static const char* const days[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
    // day of the week (0 = Sunday) and of the year, from the civil date
    std::tm t{};
    t.tm_year = now.year - 1900;
    t.tm_mon = now.month - 1;
    t.tm_mday = now.day;
    t.tm_hour = 12;
    const time_t tt = timegm(&t);
    std::tm u{};
    gmtime_r(&tt, &u);
    const int wday = u.tm_wday, yday = u.tm_yday;
    std::string r;
    char buf[32];
    bytes(fmt.size());
    for (size_t i = 0; i < fmt.size(); ++i) {
      check_size(r.size());
      if (fmt[i] != '%' || i + 1 == fmt.size()) {
        r += fmt[i];
        continue;
      }
      char c = fmt[++i];
      bool no_pad = false;
      if (c == '-' && i + 1 < fmt.size()) {
        no_pad = true;
        c = fmt[++i];
      }
      auto num = [&](int v, int width) {
        if (no_pad) std::snprintf(buf, sizeof buf, "%d", v);
        else std::snprintf(buf, sizeof buf, "%0*d", width, v);
        r += buf;
      };
      switch (c) {
        case 'Y': num(now.year, 4); break;
        case 'y': num(now.year % 100, 2); break;
        case 'm': num(now.month, 2); break;
        case 'd': num(now.day, 2); break;
        case 'e':
          std::snprintf(buf, sizeof buf, "%2d", now.day);
          r += buf;
          break;
        case 'H': num(now.hour, 2); break;
        case 'I': num(now.hour % 12 == 0 ? 12 : now.hour % 12, 2); break;
        case 'M': num(now.minute, 2); break;
        case 'S': num(now.second, 2); break;
        case 'p': r += now.hour < 12 ? "AM" : "PM"; break;
        case 'j': num(yday + 1, 3); break;
        case 'B': r += months[now.month - 1]; break;
        case 'b':
        case 'h': r += std::string(months[now.month - 1]).substr(0, 3); break;
        case 'A': r += days[wday]; break;
        case 'a': r += std::string(days[wday]).substr(0, 3); break;
        case 'w': num(wday, 1); break;
        case 'F':
          std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", now.year, now.month, now.day);
          r += buf;
          break;
        case '%': r += '%'; break;
        default: err(std::string("strftime_now: the format %") + c + " is not supported");
      }
    }
    return r;
  }
};

Value namespace_fn(Interp& in, CallArgs& a) {
  auto ns = std::make_shared<NsData>();
  for (const auto& p : a.pos) {
    if (p.k != VK::Dict) in.err("namespace() takes keyword arguments or a dict");
    in.items(p.d()->t.size());
    for (const auto& kv : p.d()->t.entries()) ns->t.set(kv.first, kv.second);
  }
  for (const auto& kv : a.kw) {
    check_storable(kv.second, in.line);
    ns->t.set(kv.first, kv.second);
  }
  Value r;
  r.k = VK::Ns;
  r.p = std::move(ns);
  return r;
}
Value range_fn(Interp& in, CallArgs& a) {
  if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3) in.err("range() takes one to three integers");
  for (const auto& p : a.pos)
    if (p.k != VK::Int && p.k != VK::Bool) in.err(std::string("range(): '") + type_name(p) + "' object cannot be interpreted as an integer");
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) stop = a.pos[0].as_int();
  else {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) in.err("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
  const __int128 n = span <= 0 ? 0 : (span + (step > 0 ? step : -__int128(step)) - 1) / (step > 0 ? step : -__int128(step));
  if (n > kMaxTemplateListItems)
    in.err("range() of more than " + std::to_string(kMaxTemplateListItems) + " numbers (the list limit)");
  std::vector<Value> r;
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) r.push_back(Value::integer(start + i * step));
  in.steps += static_cast<int64_t>(n);
  return make_list(in, std::move(r));
}

DateTime parse_date(const std::string& date) {
  DateTime d;
  if (date.empty()) {
    const time_t t = std::time(nullptr);
    std::tm lt{};
    localtime_r(&t, &lt);
    d.year = lt.tm_year + 1900;
    d.month = lt.tm_mon + 1;
    d.day = lt.tm_mday;
    d.hour = lt.tm_hour;
    d.minute = lt.tm_min;
    d.second = lt.tm_sec;
    return d;
  }
  char extra = 0;
  const int n = std::sscanf(date.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d", &d.year, &d.month, &d.day, &extra, &d.hour,
                            &d.minute, &d.second);
  const bool ok = (n == 3 && date.size() == 10) || (n == 7 && (extra == ' ' || extra == 'T'));
  if (!ok || d.month < 1 || d.month > 12 || d.day < 1 || d.day > 31 || d.year < 1 || d.hour > 23 || d.minute > 59 ||
      d.second > 60)
    throw Error("bad date " + excerpt(date) + " for strftime_now: expected YYYY-MM-DD or YYYY-MM-DD HH:MM:SS",
                ErrorKind::Usage);
  return d;
}

}  // namespace jinja

// ---------------------------------------------------------------------------------------
// API

JinjaTemplate JinjaTemplate::parse(const std::string& source) {
  if (static_cast<int64_t>(source.size()) > kMaxTemplateBytes)
    throw Error("chat template: " + format_bytes(static_cast<double>(source.size())) + " is over the limit of " +
                format_bytes(static_cast<double>(kMaxTemplateBytes)) + " for a template");
  // jinja2 reads "\r\n" and "\r" as "\n", and (keep_trailing_newline=False) drops one
  // newline at the very end.
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  jinja::Lexer lex(src);
  jinja::Parser parser(lex.run());
  auto prog = std::make_shared<jinja::Program>();
  prog->body = parser.parse_template();
  JinjaTemplate t;
  t.program_ = std::move(prog);
  return t;
}

std::string JinjaTemplate::render(const nlohmann::ordered_json& context, const std::string& date, int64_t max_steps,
                                  JinjaRenderStats* stats, int64_t max_work) const {
  using namespace jinja;
  if (!context.is_object()) throw Error("chat template input: the context must be a JSON object", ErrorKind::Usage);
  Interp in;
  in.max_steps = std::min(max_steps, kMaxTemplateSteps);
  in.max_work = std::min(max_work, kMaxTemplateWork);
  struct Report {  // fills *stats however the render ends
    const Interp& in;
    JinjaRenderStats* stats;
    ~Report() {
      if (stats) *stats = {in.steps, in.work};
    }
  } report{in, stats};
  in.now = parse_date(date);
  auto globals = std::make_shared<Frame>();
  globals->set("range", make_func("range", range_fn));
  globals->set("namespace", make_func("namespace", namespace_fn));
  globals->set("dict", make_func("dict", [](Interp& i, CallArgs& a) {
                 if (!a.pos.empty()) i.err("dict() takes keyword arguments only here");
                 std::vector<Table::Entry> items;
                 for (auto& kv : a.kw) items.emplace_back(Value::str(kv.first), std::move(kv.second));
                 return make_dict(i, std::move(items));
               }));
  globals->set("raise_exception", make_func("raise_exception", [](Interp& i, CallArgs& a) -> Value {
                 const std::string msg = a.pos.empty() ? std::string() : to_str(a.pos[0], i);
                 throw Error("chat template line " + std::to_string(i.line) +
                             ": the template raised an error: " + excerpt(msg, kQuotedMessageBytes));
               }));
  globals->set("strftime_now", make_func("strftime_now", [](Interp& i, CallArgs& a) {
                 if (a.pos.size() != 1 || a.pos[0].k != VK::Str) i.err("strftime_now takes one format string");
                 return Value::str(i.strftime(a.pos[0].s()));
               }));
  auto top = std::make_shared<Frame>();
  top->parent = globals;
  for (auto it = context.begin(); it != context.end(); ++it) top->set(it.key(), from_json(it.value(), 1, in));
  std::string out;
  in.exec_body(program_->body, top, out);
  return out;
}

std::string render_chat_template(const std::string& tmpl, const nlohmann::ordered_json& messages,
                                 const ChatRenderOptions& o) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  ctx["tools"] = nullptr;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = o.add_generation_prompt;
  if (o.bos_token) ctx["bos_token"] = *o.bos_token;
  if (o.eos_token) ctx["eos_token"] = *o.eos_token;
  if (!o.extra.is_object()) throw Error("chat template input: extra variables must be a JSON object", ErrorKind::Usage);
  for (auto it = o.extra.begin(); it != o.extra.end(); ++it) ctx[it.key()] = it.value();
  return JinjaTemplate::parse(tmpl).render(ctx, o.date);
}

}  // namespace attnviz

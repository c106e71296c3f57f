#pragma once
// `NameTable`: the names of a Graph's nodes, and torch.fx's _Namespace.create_name.
//
// Why this shape. A graph's names are few bases with dense numeric suffixes: a graph
// read from a file calls its nodes add, add_1, ..., add_59999, mul, mul_1, ...,
// getitem, getitem_1, ... . One string-keyed hash map over all of them (180,000
// names) costs, per lookup, hashing the whole name and a cache miss, and that
// dominated creating and erasing nodes in a rewrite pass. Here a name of the
// canonical form `base_<n>` (n decimal without leading zeros, below 2^31) lives in a
// vector indexed by n that its base's entry holds, and a bare `base` in the entry
// itself. A lookup hashes only the short base (the map of bases is small and stays in
// cache) and then indexes a vector; counting a suffix up ("add_60000 taken? then
// add_60001?") walks along that vector without building a string.
//
// Every other name goes to a plain hash map, so it costs what it cost before: a
// suffix with leading zeros ("add_01"), one of 2^31 or more, and one far beyond what
// its base has used so far (more than 2 * used + 1024: it would make the vector
// mostly empty). Such a far name moves into the vector when the vector grows over it.
// So every vector is at most about four times as long as the names it holds (plus a
// little slack), and a canonical name below its vector's length is always in the vector.
//
// A name once bound stays used after its node is erased: torch.fx never reuses a
// name. Every slot encodes its name's state the same way: nullptr, never used; a
// sentinel no Node has, used by a node since erased; otherwise the live node.
//
// Node is only declared: the table stores Node* and never dereferences one.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln {

class Node;

class NameTable {
 public:
  NameTable() = default;
  // Copies start with an empty memo: the source's points into the source's map.
  NameTable(const NameTable& o) : bases_(o.bases_), other_(o.other_), size_(o.size_) {}
  NameTable& operator=(const NameTable& o) {
    if (this != &o) {
      bases_ = o.bases_;
      other_ = o.other_;
      size_ = o.size_;
      forget_memo();
    }
    return *this;
  }
  // A moved-from table is empty and usable.
  NameTable(NameTable&& o) noexcept
      : bases_(std::move(o.bases_)), other_(std::move(o.other_)), size_(std::exchange(o.size_, 0)) {
    o.bases_.clear();
    o.other_.clear();
    o.forget_memo();
  }
  NameTable& operator=(NameTable&& o) noexcept {
    if (this != &o) {
      bases_ = std::move(o.bases_);
      other_ = std::move(o.other_);
      size_ = std::exchange(o.size_, 0);
      o.bases_.clear();
      o.other_.clear();
      forget_memo();
      o.forget_memo();
    }
    return *this;
  }

  // _Namespace.create_name: `candidate` made a legal, unused name. Each run of illegal
  // characters becomes one '_' (sanitize), and a name in use gets a numeric suffix
  // counted on from the last one used with that base (add -> add_1 -> add_2; after
  // an explicit add_5, add is still free, then add_6). A free legal name is kept
  // verbatim ("add_01" stays "add_01"). `avoid_reserved`: a derived name that is a
  // Python builtin or keyword gets a suffix, as torch.fx gives it ("abs" -> abs_1);
  // explicit names are kept, so a graph read from a file keeps the names it was
  // written with. Records the base's count as torch.fx does, but does not mark the
  // name used: bind() does.
  std::string make_unique(std::string_view candidate, bool avoid_reserved) {
    std::string name = sanitize(candidate);
    // _name_regex: an "_<digits>" suffix after a non-empty base (fewer than 18 digits,
    // so that it fits an int64_t; leading zeros allowed: "add_01" has base add, suffix 1).
    std::string_view base = name;
    bool has_suffix = false;
    std::int64_t suffix = 0;
    if (auto us = name.rfind('_'); us != std::string::npos && us > 0 && us + 1 < name.size() &&
                                   name.size() - us - 1 < 18 && all_digits(std::string_view(name).substr(us + 1))) {
      base = std::string_view(name).substr(0, us);
      has_suffix = true;
      suffix = parse_digits(std::string_view(name).substr(us + 1));
    }
    // The entry of `base`: a name stored in an entry (canonical `base_<n>` or a bare
    // name without such a suffix) is stored in exactly this one (see split()).
    BaseEntry* be = find_base(base);
    const bool taken = slot_of(split(name), be, name) != nullptr;
    bool skip_reserved = false;
    std::int64_t num;
    if (!has_suffix || taken) {
      // The count is looked up under the whole candidate, as Graph's make_unique_name
      // did after torch.fx: a taken "add_1" counts on from base "add_1"'s count
      // (usually 0: add_2, add_3, ... are tried in turn), not from add's.
      if (!has_suffix) {
        num = be ? be->count : 0;
      } else {
        const BaseEntry* ne = find_base(name);
        num = ne ? ne->count : 0;
      }
      // No reserved name has an "_<digits>" suffix, so only a bare name (base ==
      // name, entry be) can be one; the entry remembers the answer.
      skip_reserved = avoid_reserved && !has_suffix && reserved(be, name);
    } else {
      num = suffix;
    }
    const bool numbered = count_on(be, base, skip_reserved, taken, num);  // base_<num>, not `name`
    if (be) {
      be->count = num;
    } else {
      BaseEntry e;
      e.count = num;
      bases_.emplace(std::string(base), std::move(e));
    }
    if (numbered) return numbered_name(base, num);
    return name;
  }

  // Marks `name` used, mapped to `node` (overwriting what it was mapped to; nullptr:
  // used, but with no live node).
  void bind(std::string_view name, Node* node) {
    const Split s = split(name);
    set_slot(s.n == kOther ? other_slot(name) : slot_for(entry(s.base), s.n, name), node);
  }

  // Where a name made by claim_derived goes, for binding it.
  class Claim {
    friend class NameTable;
    void* entry_ = nullptr;  // the base's MapEntry
    std::int64_t n_ = kOther;
  };
  // Whether claim_derived accepts `candidate`: a legal name (sanitize keeps it) with
  // no "_<digits>" suffix, as the names torch.fx derives from targets almost always
  // are (add, mm, sigmoid). Graph asks once per target.
  static bool is_plain_base(std::string_view candidate) {
    return !candidate.empty() && sanitize(candidate) == candidate && split(candidate).n == kBare;
  }
  // make_unique(base, avoid_reserved = true) for a base that is_plain_base accepts,
  // with what bind needs remembered: creating a node looks its base up once instead
  // of four times, and builds no name string but the answer. Bind it with
  // bind(where, name, node) before any other change to this table.
  // The name is written into `out` (a node's name, whose buffer it reuses).
  // `key`, if not 0, names `base` for claim_derived_by_key: the caller promises
  // that it always comes with this same base.
  void claim_derived(std::string_view base, Claim& where, std::string& out, std::uint64_t key = 0) {
    MapEntry& me = entry(base);
    if (key != 0) key_memo_[key % kKeyMemo] = {key, &me};
    claim_in(me, where, out);
  }
  // claim_derived for the base last claimed with `key`, found by the number
  // alone (Graph passes a node's kind and target, so creating a node of a
  // target seen before neither derives nor looks up its name's base); false,
  // and nothing claimed, if it is not remembered.
  bool claim_derived_by_key(std::uint64_t key, Claim& where, std::string& out) {
    const KeyMemo& m = key_memo_[key % kKeyMemo];
    if (m.key != key || key == 0) return false;
    claim_in(*m.entry, where, out);
    return true;
  }
  std::string claim_derived(std::string_view base, Claim& where) {
    std::string out;
    claim_derived(base, where, out);
    return out;
  }
  void bind(const Claim& where, std::string_view name, Node* node) {
    if (where.n_ == kOther) return bind(name, node);
    set_slot(slot_for(*static_cast<MapEntry*>(where.entry_), where.n_, name), node);
  }

  // If `name` maps to `node`: the node is erased, the name stays used (mapped to no node).
  void release(std::string_view name, const Node* node) {
    const Split s = split(name);
    auto* slot = const_cast<Node**>(slot_of(s, s.n == kOther ? nullptr : find_base(s.base), name));
    if (slot && *slot && live(*slot) == node) *slot = erased_tag();
  }

  // The node `name` is bound to, or nullptr (never bound, or released). Graph does
  // not release the names of the nodes it erases, to save a cache miss per erased
  // node, so it checks the node this returns (see Graph::find_node).
  Node* find(std::string_view name) const {
    const Split s = split(name);
    Node* const* slot = slot_of(s, s.n == kOther ? nullptr : find_base(s.base), name);
    return slot ? live(*slot) : nullptr;
  }
  // Whether `name` was ever bound (the names of erased nodes stay used).
  bool used(std::string_view name) const {
    const Split s = split(name);
    return slot_of(s, s.n == kOther ? nullptr : find_base(s.base), name) != nullptr;
  }
  // How many names are used.
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // A hint that about `n` names will be used. Nothing needs sizing up front: the
  // vectors of suffixes grow geometrically and the map of bases stays small, so a
  // graph read from a file does not rehash a table of all its names over and over.
  void reserve(std::size_t n) { bases_.reserve(std::min<std::size_t>(n, kReserveBases)); }
  void clear() {
    bases_.clear();
    other_.clear();
    size_ = 0;
    forget_memo();
  }

  // The base counts (torch.fx's _base_count) become `o`'s, the used names stay:
  // Graph::clone binds the copied names one by one, then carries the counts over.
  void assign_counts(const NameTable& o) {
    for (auto& [key, e] : bases_) e.count = 0;
    for (const auto& [key, e] : o.bases_)
      if (e.count != 0) entry(key).second.count = e.count;
  }

  // re.sub("[^0-9a-zA-Z_]+", "_", s); "_unnamed" for an empty name; a leading digit
  // gets an underscore in front ("0.weight" -> _0_weight).
  static std::string sanitize(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    bool in_illegal_run = false;  // re.sub("[^0-9a-zA-Z_]+", "_", s)
    for (char c : s) {
      // ASCII only, as the regex's classes are (and without a locale lookup per character).
      const bool legal = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
      if (legal || !in_illegal_run) out.push_back(legal ? c : '_');
      in_illegal_run = !legal;
    }
    if (out.empty()) out = "_unnamed";
    if (out[0] >= '0' && out[0] <= '9') out.insert(out.begin(), '_');
    return out;
  }

  // Python keywords, builtins and the names torch.fx adds to every generated
  // module's globals (Python 3.11): torch.fx never gives a node one of these.
  static bool is_python_reserved(std::string_view name) {
    static constexpr std::string_view kReserved[] = {
        "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BaseExceptionGroup",
        "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning", "ChildProcessError",
        "ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
        "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning", "EnvironmentError", "Exception",
        "ExceptionGroup", "False", "FileExistsError", "FileNotFoundError", "FloatingPointError", "FutureWarning",
        "GeneratorExit", "IOError", "ImportError", "ImportWarning", "IndentationError", "IndexError",
        "InterruptedError", "IsADirectoryError", "KeyError", "KeyboardInterrupt", "LookupError", "MemoryError",
        "ModuleNotFoundError", "NameError", "None", "NoneType", "NotADirectoryError", "NotImplemented",
        "NotImplementedError", "OSError", "OverflowError", "PendingDeprecationWarning", "PermissionError",
        "ProcessLookupError", "RecursionError", "ReferenceError", "ResourceWarning", "RuntimeError",
        "RuntimeWarning", "StopAsyncIteration", "StopIteration", "SyntaxError", "SyntaxWarning", "SystemError",
        "SystemExit", "TabError", "TimeoutError", "True", "TypeError", "UnboundLocalError", "UnicodeDecodeError",
        "UnicodeEncodeError", "UnicodeError", "UnicodeTranslateError", "UnicodeWarning", "UserWarning",
        "ValueError", "Warning", "ZeroDivisionError", "__build_class__", "__debug__", "__doc__", "__import__",
        "__loader__", "__name__", "__package__", "__spec__", "abs", "aiter", "all", "and", "anext", "any", "as",
        "ascii", "assert", "async", "await", "bin", "bool", "break", "breakpoint", "bytearray", "bytes",
        "callable", "chr", "class", "classmethod", "compile", "complex", "continue", "copyright", "credits",
        "def", "del", "delattr", "device", "dict", "dir", "divmod", "elif", "else", "enumerate", "eval",
        "except", "exec", "exit", "filter", "finally", "float", "for", "format", "from", "frozenset",
        "fx_pytree", "getattr", "global", "globals", "hasattr", "hash", "help", "hex", "id", "if", "import",
        "in", "inf", "input", "int", "is", "isinstance", "issubclass", "iter", "lambda", "len", "license",
        "list", "locals", "map", "max", "memoryview", "min", "nan", "next", "nonlocal", "not", "object", "oct",
        "open", "or", "ord", "pass", "pow", "print", "property", "pytree", "quit", "raise", "range", "repr",
        "return", "reversed", "round", "set", "setattr", "slice", "sorted", "staticmethod", "str", "sum",
        "super", "torch", "try", "tuple", "type", "vars", "while", "with", "yield", "zip"};
    static_assert(std::is_sorted(std::begin(kReserved), std::end(kReserved)));
    return std::binary_search(std::begin(kReserved), std::end(kReserved), name);
  }

 private:
  // Hashes a std::string key or a std::string_view probe alike, so that a lookup
  // with a string_view builds no string (C++20 heterogeneous lookup).
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  template <class V>
  using StringMap = std::unordered_map<std::string, V, Hash, std::equal_to<>>;

  struct BaseEntry {
    std::int64_t count = 0;        // torch.fx's _base_count[base]
    Node* bare = nullptr;          // the name `base` itself
    std::vector<Node*> by_suffix;  // by_suffix[n]: the name `base_n`
    std::size_t dense_used = 0;    // used slots in by_suffix
    std::size_t spilled = 0;       // names `base_n` in other_ (n past the end of by_suffix)
    signed char reserved = -1;     // is_python_reserved(base), once asked (-1: not yet)
  };
  static bool reserved(BaseEntry* e, std::string_view base) {
    if (!e) return is_python_reserved(base);
    if (e->reserved < 0) e->reserved = is_python_reserved(base) ? 1 : 0;
    return e->reserved == 1;
  }

  // How a name is stored: n >= 0, canonical `base_<n>` (slot by_suffix[n] of base's
  // entry, or other_ while n is past its end); kBare, the entry of the whole name
  // (base == name); kOther, other_ only.
  static constexpr std::int64_t kBare = -1;
  static constexpr std::int64_t kOther = -2;
  static constexpr std::int64_t kMaxDense = (std::int64_t(1) << 31) - 1;
  static constexpr std::size_t kSlack = 1024;  // a suffix may lie this far past 2 * used
  static constexpr std::size_t kMinVector = 16;
  static constexpr std::size_t kReserveBases = 64;
  struct Split {
    std::string_view base;
    std::int64_t n;
  };

  static bool all_digits(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  }
  static std::int64_t parse_digits(std::string_view s) {  // at most 18 digits
    std::int64_t v = 0;
    for (char c : s) v = v * 10 + (c - '0');
    return v;
  }
  static Split split(std::string_view name) {
    const auto us = name.rfind('_');
    if (us == std::string_view::npos || us == 0 || us + 1 == name.size()) return {name, kBare};
    const std::string_view digits = name.substr(us + 1);
    if (!all_digits(digits)) return {name, kBare};
    if ((digits.size() > 1 && digits[0] == '0') || digits.size() > 10) return {name, kOther};
    const std::int64_t n = parse_digits(digits);
    if (n > kMaxDense) return {name, kOther};
    return {name.substr(0, us), n};
  }
  static std::string numbered_name(std::string_view base, std::int64_t num) {
    std::string out;
    write_numbered_name(base, num, out);
    return out;
  }
  // `base_<num>` into `out`, sized once (names are made for every node created).
  static void write_numbered_name(std::string_view base, std::int64_t num, std::string& out) {
    char digits[24];
    const auto r = std::to_chars(std::begin(digits), std::end(digits), num);
    const auto nd = static_cast<std::size_t>(r.ptr - digits);
    out.resize(base.size() + 1 + nd);
    char* p = out.data();
    std::memcpy(p, base.data(), base.size());
    p[base.size()] = '_';
    std::memcpy(p + base.size() + 1, digits, nd);
  }

  // The "used, node erased" mark: an address no object has (a constant rather than
  // the address of a static, which could differ between shared libraries).
  static Node* erased_tag() noexcept { return reinterpret_cast<Node*>(std::uintptr_t{1}); }
  static Node* live(Node* p) noexcept { return p == erased_tag() ? nullptr : p; }

  // A pass creating and erasing nodes looks up the same handful of bases over
  // and over (addmm, mm, add, ...); a small two-way memo of map entries,
  // keyed by a cheap mix of the base's length and end characters, skips hashing
  // the string and probing the map for them. Map entries never move or go away
  // (until clear), so the memo holds plain pointers into the map.
  using MapEntry = std::pair<const std::string, BaseEntry>;
  static std::size_t memo_set(std::string_view base) {
    // Length, the first two and the last character.
    const auto at = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(base[i])); };
    const std::size_t mix = base.size() + at(0) * 7 + at(base.size() > 1 ? 1 : 0) * 37 + at(base.size() - 1) * 13;
    return mix % kMemoSets;
  }
  MapEntry* lookup(std::string_view base) const {
    if (base.empty()) {
      auto it = bases_.find(base);
      return it == bases_.end() ? nullptr : const_cast<MapEntry*>(&*it);
    }
    // Two ways per set, most recent first, so two bases a pass alternates
    // between do not evict each other.
    MapEntry** way = &memo_[2 * memo_set(base)];
    if (way[0] && way[0]->first == base) return way[0];
    if (way[1] && way[1]->first == base) {
      std::swap(way[0], way[1]);
      return way[0];
    }
    auto it = bases_.find(base);
    if (it == bases_.end()) return nullptr;
    way[1] = way[0];
    way[0] = const_cast<MapEntry*>(&*it);
    return way[0];
  }
  void forget_memo() const {
    memo_.fill(nullptr);
    key_memo_.fill(KeyMemo{});
  }

  // claim_derived's work once the base's entry is found.
  void claim_in(MapEntry& me, Claim& where, std::string& out) {
    const std::string_view base = me.first;
    BaseEntry& e = me.second;
    std::int64_t num = e.count;
    const bool numbered = count_on(&e, base, reserved(&e, base), e.bare != nullptr, num);
    e.count = num;
    where.entry_ = &me;
    where.n_ = !numbered ? kBare : num <= kMaxDense ? num : kOther;
    if (numbered) write_numbered_name(base, num, out);
    else out.assign(base);
  }

  // For const callers, which may run on several threads at once: the memo is
  // read, never updated.
  const BaseEntry* find_base(std::string_view base) const {
    if (!base.empty()) {
      MapEntry* const* way = &memo_[2 * memo_set(base)];
      if (way[0] && way[0]->first == base) return &way[0]->second;
      if (way[1] && way[1]->first == base) return &way[1]->second;
    }
    auto it = bases_.find(base);
    return it == bases_.end() ? nullptr : &it->second;
  }
  BaseEntry* find_base(std::string_view base) {
    MapEntry* e = lookup(base);
    return e ? &e->second : nullptr;
  }
  MapEntry& entry(std::string_view base) {
    if (MapEntry* e = lookup(base)) return *e;
    return *bases_.emplace(std::string(base), BaseEntry{}).first;
  }
  Node*& other_slot(std::string_view name) {
    auto it = other_.find(name);
    if (it == other_.end()) it = other_.emplace(std::string(name), nullptr).first;
    return it->second;
  }

  // The used slot of `name` (split as s; e: the entry of s.base, if any), or nullptr
  // when the name is not used.
  Node* const* slot_of(const Split& s, const BaseEntry* e, std::string_view name) const {
    Node* const* slot = nullptr;
    if (s.n == kOther) {
      if (auto it = other_.find(name); it != other_.end()) slot = &it->second;
    } else if (e) {
      if (s.n == kBare) {
        slot = &e->bare;
      } else if (static_cast<std::size_t>(s.n) < e->by_suffix.size()) {
        slot = &e->by_suffix[static_cast<std::size_t>(s.n)];
      } else if (e->spilled) {
        if (auto it = other_.find(name); it != other_.end()) slot = &it->second;
      }
    }
    return slot && *slot ? slot : nullptr;
  }
  // torch.fx's counting on from the count `num`: a reserved bare name skips to
  // base_<num+1>, and a taken name counts on while base_<num> is used. Returns
  // whether the answer is base_<num> (num updated) rather than the name itself.
  bool count_on(const BaseEntry* be, std::string_view base, bool skip_reserved, bool taken, std::int64_t& num) const {
    bool numbered = false;
    if (skip_reserved) {
      ++num;
      numbered = true;
      taken = numbered_used(be, base, num);
    }
    if (taken) {
      numbered = true;
      do ++num;
      while (numbered_used(be, base, num));
    }
    return numbered;
  }
  // Whether base_<num> is used; e: the entry of `base`, if any.
  bool numbered_used(const BaseEntry* e, std::string_view base, std::int64_t num) const {
    if (num <= kMaxDense) {  // base_<num> is canonical: it is e's, if anyone's
      if (!e) return false;
      if (static_cast<std::size_t>(num) < e->by_suffix.size()) return e->by_suffix[static_cast<std::size_t>(num)];
      if (!e->spilled) return false;
    }
    auto it = other_.find(numbered_name(base, num));
    return it != other_.end() && it->second;
  }

  // The slot of `name`, split as (me's base, n) with n >= 0 or kBare, made to exist.
  Node*& slot_for(MapEntry& me, std::int64_t n, std::string_view name) {
    auto& [key, e] = me;
    if (n == kBare) return e.bare;
    const auto i = static_cast<std::size_t>(n);
    if (i >= e.by_suffix.size() && i <= 2 * e.dense_used + kSlack) grow(key, e, i);
    if (i < e.by_suffix.size()) {
      Node*& slot = e.by_suffix[i];
      if (!slot) ++e.dense_used;
      return slot;
    }
    Node*& slot = other_slot(name);
    if (!slot) ++e.spilled;
    return slot;
  }
  void set_slot(Node*& slot, Node* node) {
    if (!slot) ++size_;
    slot = node ? node : erased_tag();
  }

  // Makes by_suffix cover n (at least doubling it), and moves the names of `key`
  // that it now covers out of other_.
  void grow(const std::string& key, BaseEntry& e, std::size_t n) {
    const std::size_t size = std::max({n + 1, 2 * e.by_suffix.size(), kMinVector});
    e.by_suffix.resize(std::min(size, static_cast<std::size_t>(kMaxDense) + 1), nullptr);  // n <= kMaxDense
    for (auto it = other_.begin(); e.spilled && it != other_.end();) {
      const Split s = split(it->first);
      if (s.n >= 0 && static_cast<std::size_t>(s.n) < e.by_suffix.size() && s.base == key) {
        e.by_suffix[static_cast<std::size_t>(s.n)] = it->second;
        ++e.dense_used;
        --e.spilled;
        it = other_.erase(it);
      } else {
        ++it;
      }
    }
  }

  StringMap<BaseEntry> bases_;  // few: add, mul, getitem, ...
  StringMap<Node*> other_;      // names that fit no vector
  static constexpr std::size_t kMemoSets = 32;
  mutable std::array<MapEntry*, 2 * kMemoSets> memo_{};  // see lookup()
  struct KeyMemo {
    std::uint64_t key = 0;
    MapEntry* entry = nullptr;
  };
  static constexpr std::size_t kKeyMemo = 31;  // odd: Graph's keys are multiples of 8 plus the kind
  mutable std::array<KeyMemo, kKeyMemo> key_memo_{};  // see claim_derived_by_key()
  std::size_t size_ = 0;        // used names
};

}  // namespace kiln

#pragma once
// JsonLexer: the JSON half of the fx-graph-json reader (io/fx_json_read.hpp):
// whitespace, literals, strings (escapes, surrogate pairs, checked UTF-8),
// numbers (int64 or double), objects and lists member by member, and skipping
// a value, all strict JSON, over text held in memory. It builds nothing: the
// reader (the Reader of the CRTP) calls it while building its graph, and its
// errors go out through the reader's `fail(what)`, which names the node and
// field; a syntax error adds the line and column.
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace kiln::io::detail {

template <class Reader>
class JsonLexer {
 protected:
  // Nesting deeper than this is refused (the reader's recursion is bounded by it).
  static constexpr int kMaxDepth = 256;

  explicit JsonLexer(std::string_view text) : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()) {}

  [[noreturn]] void fail(const std::string& what) const { static_cast<const Reader&>(*this).fail(what); }
  // A JSON syntax error at the current position.
  [[noreturn]] void syntax(const std::string& what) const {
    fail(what + " (" + position() + ")");
  }
  [[noreturn]] void expected(const char* what) const {
    if (p_ >= end_) syntax(std::string("unexpected end of input, expected ") + what + " (is the document truncated?)");
    syntax(std::string("expected ") + what + ", found " + describe_char());
  }
  std::string position() const {
    std::size_t line = 1;
    const char* line_start = begin_;
    for (const char* q = begin_; q < p_; ++q)
      if (*q == '\n') {
        ++line;
        line_start = q + 1;
      }
    return "line " + std::to_string(line) + ", column " + std::to_string(p_ - line_start + 1);
  }
  std::string describe_char() const {
    if (p_ >= end_) return "the end of input";
    const auto c = static_cast<unsigned char>(*p_);
    if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    static constexpr char hex[] = "0123456789abcdef";
    return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
  }
  // What kind of JSON value starts at the current position, for messages.
  std::string describe_value() {
    skip_ws();
    if (p_ >= end_) return "the end of input";
    switch (*p_) {
      case '"': return "a string";
      case '[': return "a list";
      case '{': return "an object";
      case 't':
      case 'f': return "a boolean";
      case 'n': return "null";
      default:
        if (*p_ == '-' || is_digit(*p_)) return "a number";
        return describe_char();
    }
  }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  // key == lit, with the length known at compile time: an inlined compare
  // instead of a memcmp call, for the keys of every node.
  template <std::size_t N>
  static bool is(std::string_view key, const char (&lit)[N]) {
    return key.size() == N - 1 && std::memcmp(key.data(), lit, N - 1) == 0;
  }
  void skip_ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  void expect(char c, const char* what) {
    skip_ws();
    if (p_ >= end_ || *p_ != c) expected(what);
    ++p_;
  }
  bool consume_literal(std::string_view lit) {
    if (static_cast<std::size_t>(end_ - p_) >= lit.size() && std::string_view(p_, lit.size()) == lit) {
      p_ += lit.size();
      return true;
    }
    return false;
  }

  // Characters that need no attention inside a string.
  static constexpr std::array<bool, 256> kPlain = [] {
    std::array<bool, 256> t{};
    for (int c = 0x20; c < 0x80; ++c) t[c] = true;
    t['"'] = t['\\'] = false;
    return t;
  }();

  // Steps over one UTF-8 sequence starting at p_ (a byte >= 0x80), checking it.
  void skip_utf8_sequence() {
    const auto b0 = static_cast<unsigned char>(p_[0]);
    int len = 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) len = 2;
    else if (b0 >= 0xe0 && b0 <= 0xef) {
      len = 3;
      if (b0 == 0xe0) lo = 0xa0;
      if (b0 == 0xed) hi = 0x9f;  // no encoded surrogates
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      len = 4;
      if (b0 == 0xf0) lo = 0x90;
      if (b0 == 0xf4) hi = 0x8f;
    } else {
      syntax("invalid UTF-8 in a string");
    }
    if (end_ - p_ < len) syntax("invalid UTF-8 in a string (truncated sequence)");
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(p_[k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) syntax("invalid UTF-8 in a string");
    }
    p_ += len;
  }

  static void append_utf8(std::string& out, std::uint32_t cp) {
    // Lone surrogates (which Python's json accepts) are kept in the generalised
    // 3-byte form, so that writing escapes them back as they were.
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  std::uint32_t parse_hex4() {
    if (end_ - p_ < 4) {
      p_ = end_;
      expected("4 hex digits after \\u");
    }
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = p_[k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<std::uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<std::uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<std::uint32_t>(c - 'A' + 10);
      else {
        p_ += k;
        expected("4 hex digits after \\u");
      }
    }
    p_ += 4;
    return v;
  }

  // Parses the string that starts at p_ (a '"'). The result points into the
  // input when the string has no escapes, else into `buf`.
  std::string_view parse_string(std::string& buf) {
    const char* start = ++p_;
    for (;;) {
      while (p_ < end_ && kPlain[static_cast<unsigned char>(*p_)]) ++p_;
      if (p_ >= end_) expected("'\"' closing the string");
      const char c = *p_;
      if (c == '"') return std::string_view(start, static_cast<std::size_t>(p_++ - start));
      if (c == '\\') break;
      if (static_cast<unsigned char>(c) < 0x20) syntax("unescaped control character in a string");
      skip_utf8_sequence();
    }
    buf.assign(start, p_);
    for (;;) {
      const char* run = p_;
      while (p_ < end_ && kPlain[static_cast<unsigned char>(*p_)]) ++p_;
      buf.append(run, p_);
      if (p_ >= end_) expected("'\"' closing the string");
      const char c = *p_;
      if (c == '"') {
        ++p_;
        return buf;
      }
      if (static_cast<unsigned char>(c) < 0x20) syntax("unescaped control character in a string");
      if (c != '\\') {
        const char* seq = p_;
        skip_utf8_sequence();
        buf.append(seq, p_);
        continue;
      }
      ++p_;
      if (p_ >= end_) expected("an escape character after '\\'");
      switch (*p_++) {
        case '"': buf += '"'; break;
        case '\\': buf += '\\'; break;
        case '/': buf += '/'; break;
        case 'b': buf += '\b'; break;
        case 'f': buf += '\f'; break;
        case 'n': buf += '\n'; break;
        case 'r': buf += '\r'; break;
        case 't': buf += '\t'; break;
        case 'u': {
          std::uint32_t cp = parse_hex4();
          if (cp >= 0xd800 && cp <= 0xdbff && end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u') {
            const char* save = p_;
            p_ += 2;
            const std::uint32_t lo = parse_hex4();
            if (lo >= 0xdc00 && lo <= 0xdfff) cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            else p_ = save;  // not a pair: keep both as they are
          }
          append_utf8(buf, cp);
          break;
        }
        default:
          --p_;
          syntax("invalid escape '\\" + std::string(1, *p_) + "' in a string");
      }
    }
  }

  struct Number {
    bool is_float = false;
    std::int64_t i = 0;
    double d = 0;
    std::string_view text;
  };
  // Parses the JSON number at p_: an int when it has neither fraction nor exponent.
  Number parse_number() {
    const char* start = p_;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ >= end_ || !is_digit(*p_)) expected("a digit");
    if (*p_ == '0') ++p_;
    else
      while (p_ < end_ && is_digit(*p_)) ++p_;
    Number n;
    if (p_ < end_ && *p_ == '.') {
      n.is_float = true;
      ++p_;
      if (p_ >= end_ || !is_digit(*p_)) expected("a digit after the decimal point");
      while (p_ < end_ && is_digit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      n.is_float = true;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= end_ || !is_digit(*p_)) expected("a digit in the exponent");
      while (p_ < end_ && is_digit(*p_)) ++p_;
    }
    n.text = std::string_view(start, static_cast<std::size_t>(p_ - start));
    if (n.is_float) {
      auto [ptr, ec] = std::from_chars(start, p_, n.d);
      if (ec == std::errc::result_out_of_range) {
        // Underflow reads as 0 (as Python does); overflow has no finite value.
        double probe = std::strtod(std::string(n.text).c_str(), nullptr);
        if (std::isinf(probe)) fail("number " + std::string(n.text) + " is out of range for a float (write {\"float\": \"inf\"})");
        n.d = probe;
      } else if (ec != std::errc() || ptr != p_) {
        fail("cannot read number " + std::string(n.text));
      }
    } else {
      auto [ptr, ec] = std::from_chars(start, p_, n.i);
      if (ec != std::errc() || ptr != p_) fail("integer " + std::string(n.text) + " is out of the int64 range");
    }
    return n;
  }

  // Iterates over the members of the object whose '{' was just consumed,
  // calling on_key(key) with p_ at the member's value.
  template <class F>
  void for_each_member(const char* key_what, F&& on_key) {
    skip_ws();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return;
    }
    for (;;) {
      skip_ws();
      if (p_ >= end_ || *p_ != '"') expected(key_what);
      std::string_view key = parse_string(key_buf_);
      expect(':', "':' after an object key");
      skip_ws();
      on_key(key);
      skip_ws();
      if (p_ < end_ && *p_ == ',') {
        ++p_;
        continue;
      }
      if (p_ < end_ && *p_ == '}') {
        ++p_;
        return;
      }
      expected("',' or '}'");
    }
  }
  // Iterates over the elements of the list whose '[' was just consumed,
  // calling on_item(index) with p_ at each element.
  template <class F>
  void for_each_item(F&& on_item) {
    skip_ws();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return;
    }
    for (std::size_t i = 0;; ++i) {
      skip_ws();
      on_item(i);
      skip_ws();
      if (p_ < end_ && *p_ == ',') {
        ++p_;
        continue;
      }
      if (p_ < end_ && *p_ == ']') {
        ++p_;
        return;
      }
      expected("',' or ']'");
    }
  }

  std::string_view expect_string_value(const char* what) {
    skip_ws();
    if (p_ >= end_ || *p_ != '"') fail(std::string("expected ") + what + ", got " + describe_value());
    return parse_string(str_buf_);
  }

  // Steps over any JSON value, checking its syntax.
  void skip_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    skip_ws();
    if (p_ >= end_) expected("a value");
    switch (*p_) {
      case '"': parse_string(str_buf_); return;
      case '[': ++p_; for_each_item([&](std::size_t) { skip_value(depth + 1); }); return;
      case '{': ++p_; for_each_member("a string key", [&](std::string_view) { skip_value(depth + 1); }); return;
      case 't': if (consume_literal("true")) return; break;
      case 'f': if (consume_literal("false")) return; break;
      case 'n': if (consume_literal("null")) return; break;
      default:
        if (*p_ == '-' || is_digit(*p_)) {
          parse_number();
          return;
        }
    }
    expected("a value");
  }

  // The JSON text [b, e) without whitespace between tokens.
  static std::string compact_json(const char* b, const char* e) {
    std::string out;
    out.reserve(static_cast<std::size_t>(e - b));
    bool in_string = false, escaped = false;
    for (const char* q = b; q < e; ++q) {
      const char c = *q;
      if (in_string) {
        out += c;
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
        out += c;
      } else if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
        out += c;
      }
    }
    return out;
  }


  const char* begin_;
  const char* p_;
  const char* end_;
  std::string key_buf_, str_buf_;  // unescaped keys and strings
};

}  // namespace kiln::io::detail

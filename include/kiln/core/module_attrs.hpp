#pragma once
// A module's constructor attributes as Args: fx-graph-json's
// modules[PATH].attrs ({"stride": [1, 1], "padding": "same", ...}), which the
// reader keeps as compact JSON text in ModuleInfo::fields. The exporter writes
// plain data only (null, bools, ints, floats, strings and lists of them), so
// that is what is read; a dict or another form is an error naming the attribute.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/core/arg.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/module_table.hpp"

namespace kiln {

class ModuleAttrs {
 public:
  ModuleAttrs() = default;
  // Reads `m`'s "attrs" field (none: no attributes); throws Error on text it cannot read.
  explicit ModuleAttrs(const ModuleInfo& m) {
    for (const auto& [name, text] : m.fields)
      if (name == "attrs") Parser(text, *this).object();
  }
  // The attribute `name`, or nullptr.
  const Arg* find(std::string_view name) const {
    for (const auto& [k, v] : attrs_)
      if (k == name) return &v;
    return nullptr;
  }
  std::size_t size() const { return attrs_.size(); }

 private:
  class Parser {
   public:
    Parser(std::string_view text, ModuleAttrs& out) : s_(text), out_(out) {}
    void object() {
      ws();
      expect('{');
      ws();
      if (peek() == '}') return void(++i_);
      for (;;) {
        ws();
        std::string key = string();
        ws();
        expect(':');
        key_ = key;
        out_.attrs_.emplace_back(std::move(key), value());
        ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return;
      }
    }

   private:
    Arg value() {
      ws();
      const char c = peek();
      if (c == '[') {
        ++i_;
        ArgList l;
        ws();
        if (peek() == ']') return ++i_, Arg(std::move(l));
        for (;;) {
          l.push_back(value());
          ws();
          if (peek() == ',') {
            ++i_;
            continue;
          }
          expect(']');
          return Arg(std::move(l));
        }
      }
      if (c == '"') return Arg(string());
      if (word("null")) return Arg();
      if (word("true")) return Arg(true);
      if (word("false")) return Arg(false);
      if (c == '-' || (c >= '0' && c <= '9')) return number();
      fail("a value that is not null, a bool, a number, a string or a list");
    }
    Arg number() {
      const std::size_t b = i_;
      bool real = false;
      while (i_ < s_.size() && std::string_view("+-0123456789.eE").find(s_[i_]) != std::string_view::npos) {
        real = real || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E';
        ++i_;
      }
      const std::string t(s_.substr(b, i_ - b));
      char* end = nullptr;
      if (real) {
        const double d = std::strtod(t.c_str(), &end);
        if (end != t.c_str() + t.size()) fail("a malformed number '" + t + "'");
        return Arg(d);
      }
      const long long v = std::strtoll(t.c_str(), &end, 10);
      if (end != t.c_str() + t.size()) fail("a malformed number '" + t + "'");
      return Arg(static_cast<std::int64_t>(v));
    }
    std::string string() {
      expect('"');
      std::string out;
      while (i_ < s_.size() && s_[i_] != '"') {
        char c = s_[i_++];
        if (c == '\\') {
          if (i_ >= s_.size()) break;
          c = s_[i_++];
          switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {  // attribute text is ASCII in practice: keep the code unit's low byte
              if (i_ + 4 > s_.size()) fail("a truncated \\u escape");
              c = static_cast<char>(std::strtol(std::string(s_.substr(i_, 4)).c_str(), nullptr, 16));
              i_ += 4;
              break;
            }
            default: break;  // \" \\ \/
          }
        }
        out.push_back(c);
      }
      expect('"');
      return out;
    }
    bool word(std::string_view w) {
      if (s_.substr(i_, w.size()) != w) return false;
      i_ += w.size();
      return true;
    }
    void ws() {
      while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
    }
    char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
    void expect(char c) {
      if (peek() != c) fail(std::string("'") + c + "' expected");
      ++i_;
    }
    [[noreturn]] void fail(const std::string& what) const {
      throw Error("attrs" + (key_.empty() ? std::string() : "." + key_) + ": " + what + " at offset " + std::to_string(i_));
    }

    std::string_view s_;
    ModuleAttrs& out_;
    std::size_t i_ = 0;
    std::string key_;
  };

  std::vector<std::pair<std::string, Arg>> attrs_;
};

}  // namespace kiln

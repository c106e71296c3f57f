#pragma once
// What kiln's command-line tools (kiln-opt, kiln-run) share to read their
// arguments: `--option value` and `--option=value`, comma lists, numbers with
// errors that name the option, and the UsageError they throw (exit status 2).
#include <cstddef>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::tool_args {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

inline double parse_number(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(v >= 0)) throw UsageError(flag + " needs a non-negative number, got '" + text + "'");
  return v;
}

// A whole number >= lo.
inline unsigned long long parse_whole(const std::string& flag, const std::string& text, unsigned long long lo = 0,
                                      const char* what = "a whole number") {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || text[0] == '-' || v < lo)
    throw UsageError(flag + " needs " + what + (lo ? " >= " + std::to_string(lo) : std::string()) + ", got '" + text + "'");
  return v;
}

// Walks argv: each argument is an option (its value inline after '=' or the
// next argument) or a positional one.
class ArgCursor {
 public:
  ArgCursor(int argc, char** argv) : argc_(argc), argv_(argv) {}
  // Moves to the next argument; false when there is none.
  bool next() {
    if (++i_ >= argc_) return false;
    arg_ = argv_[i_];
    has_inline_ = false;
    if (arg_.rfind("--", 0) == 0) {
      if (auto eq = arg_.find('='); eq != std::string::npos) {
        inline_ = arg_.substr(eq + 1);
        arg_ = arg_.substr(0, eq);
        has_inline_ = true;
      }
    }
    return true;
  }
  const std::string& arg() const { return arg_; }
  std::string value() {
    if (has_inline_) return inline_;
    if (i_ + 1 >= argc_) throw UsageError(arg_ + " needs a value");
    return argv_[++i_];
  }
  // For a flag: an inline value is a mistake.
  void no_value() const {
    if (has_inline_) throw UsageError(arg_ + " takes no value");
  }

 private:
  int argc_;
  char** argv_;
  int i_ = 0;
  std::string arg_, inline_;
  bool has_inline_ = false;
};

// Runs a tool's body: its exit status, or 2 after one line on stderr for a
// usage error (pointing at --help) or any other error (newlines folded).
template <class Body>
int run_tool(const std::string& tool, Body&& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::cerr << tool << ": " << e.what() << " (see " << tool << " --help)\n";
    return 2;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    std::cerr << tool << ": error: " << msg << "\n";
    return 2;
  }
}

}  // namespace kiln::tool_args

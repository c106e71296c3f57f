#pragma once
// A replacements manifest: search/replace graph pairs (fx-graph-json files)
// listed in one JSON file, loaded into one PatternMatcherPass. kiln-opt's
// --replacements FILE reads it; README's kiln-opt section shows the format:
//
//   {"format": "kiln-replacements", "version": 1,
//    "replacements": [
//      {"name": "mm_add_to_addmm", "search": "mm_add_search.json", "replace": "mm_add_replace.json",
//       "argnames": ["a", "b", "c"], "exclusive_arg_names": [], "scalar_workaround": {"p": 0.5},
//       "ignore_types": ["int", "float", "list", "device", "dtype"], "prepend": false}]}
//
// Paths are relative to the manifest. Only "search" and "replace" are required;
// ignore_types defaults to gen_pattern's (all five). Every entry is read and
// checked before the pass is returned, and an error names the manifest, the
// entry and the field.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/io/fx_json_read.hpp"
#include "kiln/passes/register_replacement.hpp"

namespace kiln {

namespace detail {

inline ReplacementOptions replacement_options(const nlohmann::json& e, const std::string& where) {
  ReplacementOptions o;
  auto strings = [&](const char* key) {
    std::vector<std::string> out;
    if (!e.contains(key)) return out;
    const auto& v = e.at(key);
    if (!v.is_array()) throw Error(where + ": \"" + key + "\" must be a list of strings");
    for (const auto& s : v) {
      if (!s.is_string()) throw Error(where + ": \"" + key + "\" must be a list of strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  };
  for (const auto& [key, value] : e.items()) {
    static const char* known[] = {"name", "search", "replace", "argnames", "exclusive_arg_names",
                                  "scalar_workaround", "ignore_types", "prepend"};
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return key == k; }) == std::end(known))
      throw Error(where + ": unknown field \"" + key + "\"");
  }
  o.pattern.argnames = strings("argnames");
  o.pattern.exclusive_arg_names = strings("exclusive_arg_names");
  if (e.contains("scalar_workaround")) {
    const auto& sw = e.at("scalar_workaround");
    if (!sw.is_object()) throw Error(where + ": \"scalar_workaround\" must map names to numbers");
    for (const auto& [name, v] : sw.items()) {
      if (v.is_number_integer()) o.pattern.scalar_workaround.emplace_back(name, kiln::Arg(v.get<std::int64_t>()));
      else if (v.is_number()) o.pattern.scalar_workaround.emplace_back(name, kiln::Arg(v.get<double>()));
      else throw Error(where + ": \"scalar_workaround\": '" + name + "' is not a number");
    }
  }
  if (e.contains("ignore_types")) {
    o.pattern.ignore_types = {};  // the listed types only
    for (const std::string& t : strings("ignore_types")) {
      auto& it = o.pattern.ignore_types;
      if (t == "int") it.ints = true;
      else if (t == "float") it.floats = true;
      else if (t == "list") it.lists = true;
      else if (t == "device") it.devices = true;
      else if (t == "dtype") it.dtypes = true;
      else throw Error(where + ": \"ignore_types\": unknown type '" + t + "' (int, float, list, device, dtype)");
    }
  }
  if (e.contains("prepend")) {
    if (!e.at("prepend").is_boolean()) throw Error(where + ": \"prepend\" must be true or false");
    o.pass.prepend = e.at("prepend").get<bool>();
  }
  if (e.contains("name")) {
    if (!e.at("name").is_string()) throw Error(where + ": \"name\" must be a string");
    o.pass.name = e.at("name").get<std::string>();
  }
  return o;
}

}  // namespace detail

// Reads the manifest at `path` and registers each pair in a new pass called `name`.
inline PatternMatcherPass load_replacements(const std::filesystem::path& path, std::string name = "replacements") {
  std::ifstream f(path);
  if (!f) throw Error("replacements manifest " + path.string() + ": cannot read it");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(f);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error("replacements manifest " + path.string() + ": not valid JSON: " + e.what());
  }
  const std::string where = "replacements manifest " + path.string();
  if (!doc.is_object() || doc.value("format", "") != "kiln-replacements")
    throw Error(where + ": \"format\" must be \"kiln-replacements\"");
  if (doc.value("version", 0) != 1) throw Error(where + ": unsupported \"version\" (1 is known)");
  if (!doc.contains("replacements") || !doc.at("replacements").is_array())
    throw Error(where + ": \"replacements\" must be a list");
  const std::filesystem::path base = std::filesystem::absolute(path).parent_path();
  PatternMatcherPass pass(std::move(name));
  std::size_t i = 0;
  for (const auto& e : doc.at("replacements")) {
    std::string entry = where + ": replacements[" + std::to_string(i++) + "]";
    if (!e.is_object()) throw Error(entry + ": must be an object");
    if (e.contains("name") && e.at("name").is_string()) entry += " (" + e.at("name").get<std::string>() + ")";
    auto file = [&](const char* key) {
      if (!e.contains(key) || !e.at(key).is_string()) throw Error(entry + ": \"" + key + "\" must name a graph file");
      try {
        return io::read_fx_json(base / e.at(key).get<std::string>());
      } catch (const std::exception& x) {
        throw Error(entry + ": \"" + key + "\": " + x.what());
      }
    };
    io::GraphFile search = file("search");
    io::GraphFile replace = file("replace");
    try {
      register_replacement(search.graph, replace.graph, pass, detail::replacement_options(e, entry));
    } catch (const Error& x) {
      const std::string msg = x.what();
      throw Error(msg.rfind(entry, 0) == 0 ? msg : entry + ": " + msg);
    }
  }
  return pass;
}

}  // namespace kiln

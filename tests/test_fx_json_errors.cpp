// Malformed fx-graph-json: every bad input throws FormatError, and the message
// names the node and the field.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/io.hpp"

namespace {

namespace fs = std::filesystem;

// A document around the given node list (JSON text of the nodes, comma-separated).
std::string doc(const std::string& nodes, const std::string& rest = "") {
  return R"({"format":"fx-graph-json","version":1,"name":"t","nodes":[)" + nodes + "]" + rest + "}";
}
const std::string kX = R"({"name":"x","op":"placeholder","target":"x","args":[],"kwargs":{},"meta":{}})";
const std::string kOut = R"({"name":"output","op":"output","target":"output","args":[[{"node":"x"}]],"kwargs":{}})";
// x, then node "f" with the given args, then the output.
std::string with_args(const std::string& args, const std::string& kwargs = "{}") {
  return doc(kX + R"(,{"name":"f","op":"call_function","target":"test.f","args":)" + args + R"(,"kwargs":)" +
             kwargs + "}," + kOut);
}
// x, then node "f" with the given meta, then the output.
std::string with_meta(const std::string& meta) {
  return doc(kX + R"(,{"name":"f","op":"call_function","target":"test.f","args":[],"kwargs":{},"meta":)" + meta +
             "}," + kOut);
}

struct BadInput {
  std::string what;
  std::string text;
  std::string message;  // a substring the error message must contain
};

// The spec example, cut in the middle of node 'mm'.
const std::string kValid = doc(
    kX + R"(,{"name":"w","op":"placeholder","target":"w","args":[],"kwargs":{},"meta":{}},)" +
    R"({"name":"mm","op":"call_function","target":"aten.mm.default","args":[{"node":"x"},{"node":"w"}],"kwargs":{}},)" +
    R"({"name":"output","op":"output","target":"output","args":[[{"node":"mm"}]],"kwargs":{}})");

const std::vector<BadInput> kBadInputs = {
    // ---- not JSON, or not this format
    {"empty file", "", "bad.json: empty document"},
    {"not JSON", "hello, world", "bad.json: not an fx-graph-json document: it does not start with '{' (found 'h')"},
    {"truncated JSON", kValid.substr(0, kValid.find("{\"node\":\"w\"}") + 5),
     "bad.json: node 'mm' (#2): args[1]: unexpected end of input"},
    {"truncated between nodes", kValid.substr(0, kValid.find(",{\"name\":\"w\"")),
     "bad.json: nodes: unexpected end of input, expected ',' or ']' (is the document truncated?)"},
    {"trailing garbage", kValid + " x", "unexpected data after the end of the document"},
    {"syntax error inside a node", doc(R"({"name":"x" "op":"placeholder"})"),
     "node 'x' (#0): expected ',' or '}', found '\"' (line 1, column"},
    {"invalid escape", doc(R"({"name":"x\q"})"), "node #0: name: invalid escape '\\q' in a string"},
    {"integer out of range", with_args("[99999999999999999999]"),
     "node 'f' (#1): args[0]: integer 99999999999999999999 is out of the int64 range"},
    {"wrong format", R"({"format":"onnx","version":1,"name":"t","nodes":[]})",
     "format: expected \"fx-graph-json\", got \"onnx\""},
    {"wrong version", R"({"format":"fx-graph-json","version":2,"name":"t","nodes":[]})",
     "version: unsupported version 2 (this reader reads version 1)"},
    {"missing format", R"({"version":1,"name":"t","nodes":[)" + kX + "," + kOut + "]}", "the graph has no field 'format'"},
    {"missing graph name", R"({"format":"fx-graph-json","version":1,"nodes":[)" + kX + "," + kOut + "]}",
     "the graph has no field 'name' (the top-level object's, beside 'nodes')"},
    {"missing nodes", R"({"format":"fx-graph-json","version":1,"name":"t"})", "the graph has no field 'nodes'"},
    {"unknown top-level field", doc(kX + "," + kOut, R"(,"extra":1)"), "unknown top-level field 'extra'"},
    {"nodes not a list", R"({"format":"fx-graph-json","version":1,"name":"t","nodes":{}})",
     "nodes: expected a list of nodes, got an object"},

    // ---- nodes
    {"unknown op kind", doc(R"({"name":"a","op":"call_fn","target":"f","args":[],"kwargs":{}})"),
     "node 'a' (#0): op: unknown op kind 'call_fn'"},
    {"missing name", doc(R"({"op":"placeholder","target":"x","args":[],"kwargs":{}})"),
     "node #0: missing field 'name'"},
    {"non-string name", doc(R"({"name":3,"op":"placeholder","target":"x","args":[],"kwargs":{}})"),
     "node #0: name: expected a string, got a number"},
    {"empty name", doc(R"({"name":"","op":"placeholder","target":"x","args":[],"kwargs":{}})"),
     "name: '' is not a valid node name"},
    {"illegal name", doc(R"({"name":"a.b","op":"placeholder","target":"x","args":[],"kwargs":{}})"),
     "node 'a.b' (#0): name: 'a.b' is not a valid node name"},
    {"duplicate name", doc(kX + "," + kX + "," + kOut),
     "node 'x' (#1): name: duplicate node name 'x' (already used by node #0)"},
    {"missing kwargs", doc(R"({"name":"x","op":"placeholder","target":"x","args":[]})"),
     "node 'x' (#0): missing field 'kwargs'"},
    {"unknown node field", doc(R"({"name":"x","op":"placeholder","target":"x","args":[],"kwargs":{},"users":[]})"),
     "node 'x' (#0): unknown field 'users'"},
    {"duplicate node field", doc(R"({"name":"x","op":"placeholder","op":"placeholder"})"),
     "node 'x' (#0): duplicate field 'op'"},
    {"args not a list", with_args("{}"), "node 'f' (#1): args: expected a list, got an object"},
    {"dangling reference",
     doc(kX + R"(,{"name":"mm","op":"call_function","target":"aten.mm.default","args":[{"node":"x"},{"node":"w2"}],"kwargs":{}},)" + kOut),
     "bad.json: node 'mm' (#1): args[1]: reference to unknown node 'w2'"},
    {"forward reference",
     doc(kX + R"(,{"name":"a","op":"call_function","target":"test.f","args":[{"node":"b"}],"kwargs":{}},)" +
         R"({"name":"b","op":"call_function","target":"test.f","args":[{"node":"x"}],"kwargs":{}},)" + kOut),
     "node 'a' (#1): args[0]: reference to node 'b' (#2), which comes later"},
    {"self reference", doc(kX + R"(,{"name":"a","op":"call_function","target":"test.f","args":[{"node":"a"}],"kwargs":{}},)" + kOut),
     "node 'a' (#1): args[0]: reference to the node itself"},
    {"reference before the node's name is known",
     doc(kX + R"(,{"args":[{"node":"zz"}],"name":"a","op":"call_function","target":"test.f","kwargs":{}},)" + kOut),
     "node 'a' (#1): args[0]: reference to unknown node 'zz'"},
    {"dangling reference nested in a list", with_args(R"([[1,{"node":"nope"}]])"),
     "node 'f' (#1): args[0][1]: reference to unknown node 'nope'"},
    {"dangling reference in kwargs", with_args("[]", R"({"dim":{"node":"nope"}})"),
     "node 'f' (#1): kwargs['dim']: reference to unknown node 'nope'"},
    {"dangling reference in a dict ARG", with_args(R"([{"dict":{"k":{"node":"nope"}}}])"),
     "node 'f' (#1): args[0].dict['k']: reference to unknown node 'nope'"},
    {"missing output node", doc(kX), "nodes: no output node"},
    {"output not last", doc(kX + "," + kOut + R"(,{"name":"z","op":"placeholder","target":"z","args":[],"kwargs":{}})"),
     "node 'z' (#2): comes after the output node 'output' (#1); the output node must be last"},
    {"two output nodes", doc(kX + "," + kOut + R"(,{"name":"output_1","op":"output","target":"output","args":[[]],"kwargs":{}})"),
     "node 'output_1' (#2): more than one output node (the first is node 'output' (#1))"},
    {"output with two arguments", doc(kX + R"(,{"name":"output","op":"output","target":"output","args":[1,2],"kwargs":{}})"),
     "node 'output' (#1): args: an output node takes exactly one argument"},
    {"duplicate kwarg", with_args("[]", R"({"dim":1,"dim":2})"), "node 'f' (#1): kwargs: duplicate key 'dim'"},

    // ---- malformed ARGs
    {"node reference by number", with_args(R"([{"node":3}])"),
     "node 'f' (#1): args[0]: {\"node\": ...} needs a string, got a number"},
    {"unknown dtype", with_args(R"([{"dtype":"float99"}])"), "node 'f' (#1): args[0]: unknown dtype 'float99'"},
    {"slice of two", with_args(R"([{"slice":[1,2]}])"),
     "node 'f' (#1): args[0].slice: needs exactly 3 items (start, stop, step), got 2"},
    {"slice not a list", with_args(R"([{"slice":5}])"), "args[0]: {\"slice\": ...} needs a list"},
    {"unknown single key", with_args(R"([1,{"tensor":"t0"}])"),
     "node 'f' (#1): args[1]: unknown ARG object {\"tensor\": ...}"},
    {"float banana", with_args(R"([{"float":"banana"}])"),
     "node 'f' (#1): args[0]: {\"float\": ...} must be \"inf\", \"-inf\" or \"nan\", got \"banana\""},
    {"two keys", with_args(R"([{"node":"x","dtype":"float32"}])"),
     "node 'f' (#1): args[0]: an ARG object has exactly one key"},
    {"empty object", with_args("[{}]"), "node 'f' (#1): args[0]: {} is not an ARG"},
    {"dict not an object", with_args(R"([{"dict":[1]}])"), "args[0]: {\"dict\": ...} needs an object, got a list"},
    {"bare NaN", with_args("[NaN]"), "node 'f' (#1): args[0]: expected a value, found 'N'"},
    {"leading zero", with_args("[01]"), "node 'f' (#1): args: expected ',' or ']', found '1'"},

    // ---- meta
    {"meta not an object", with_meta("[]"), "node 'f' (#1): meta: expected an object, got a list"},
    {"shape not a list", with_meta(R"({"val":{"shape":4,"dtype":"float32"}})"),
     "node 'f' (#1): meta.val.shape: expected a list of sizes, got a number"},
    {"unknown meta dtype", with_meta(R"({"val":{"shape":[4],"dtype":"float99"}})"),
     "node 'f' (#1): meta.val.dtype: unknown dtype 'float99'"},
    {"missing meta dtype", with_meta(R"({"val":{"shape":[4]}})"), "node 'f' (#1): meta.val: a TENSOR_META needs \"dtype\""},
    {"float in a shape", with_meta(R"({"val":{"shape":[4,2.5],"dtype":"float32"}})"),
     "node 'f' (#1): meta.val.shape[1]: expected an integer or {\"sym\": NAME}, got the float 2.5"},
    {"negative size", with_meta(R"({"val":{"shape":[4,-3],"dtype":"float32"}})"),
     "node 'f' (#1): meta.val.shape[1]: a tensor's size is never negative, got -3"},
    {"negative stride", with_meta(R"({"val":{"shape":[4,3],"dtype":"float32","stride":[-3,1]}})"),
     "node 'f' (#1): meta.val.stride[0]: a tensor's stride is never negative, got -3"},
    {"unknown TENSOR_META field", with_meta(R"({"val":{"shape":[4],"dtype":"float32","layout":"strided"}})"),
     "meta.val: unknown field 'layout' in a TENSOR_META"},
    {"bad entry of a multi-output meta", with_meta(R"({"val":[{"shape":[4],"dtype":"float32"},{"shape":[4],"dtype":"x"}]})"),
     "node 'f' (#1): meta.val[1].dtype: unknown dtype 'x'"},
    {"string meta.val", with_meta(R"({"val":"Tensor"})"), "meta.val: expected a TENSOR_META, a list of them, an integer"},
    {"invalid JSON in an extra meta key", with_meta(R"({"trace":[1,}]})"), "node 'f' (#1): meta.trace: expected a value"},

    // ---- weights
    {"weights entry without file", doc(kX + "," + kOut, R"(,"weights":{"w":{}})"),
     "weights['w']: missing \"file\""},
    {"weights file not a string", doc(kX + "," + kOut, R"(,"weights":{"w":{"file":1}})"),
     "weights['w'].file: expected a string"},
    {"weights entry not an object", doc(kX + "," + kOut, R"(,"weights":{"w":"w.npy"})"),
     "weights['w']: expected an object {\"file\": PATH}, got a string"},
};

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("kiln_test_errors_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST_CASE("malformed documents are FormatErrors that name the node and the field") {
  REQUIRE(kBadInputs.size() >= 25);
  CHECK_NOTHROW(kiln::io::parse_fx_json(kValid, "bad.json"));  // the base of the truncation rows is valid
  for (const auto& row : kBadInputs) {
    CAPTURE(row.what);
    CAPTURE(row.text);
    bool threw = false;
    if (std::getenv("KILN_SHOW_ERRORS")) {  // KILN_SHOW_ERRORS=1: print every message, to review them
      try {
        kiln::io::parse_fx_json(row.text, "bad.json");
      } catch (const std::exception& e) {
        MESSAGE(std::string(row.what + " -> " + e.what()));
      }
    }
    try {
      kiln::io::parse_fx_json(row.text, "bad.json");
    } catch (const kiln::io::FormatError& e) {
      threw = true;
      const std::string msg = e.what();
      CAPTURE(msg);
      CHECK(msg.find(row.message) != std::string::npos);
      CHECK(msg.rfind("bad.json: ", 0) == 0);  // every message starts with the source
    }
    CHECK(threw);
  }
}

TEST_CASE("a FormatError is a kiln::Error") {
  CHECK_THROWS_AS(kiln::io::parse_fx_json("[]"), kiln::Error);
  CHECK_THROWS_WITH(kiln::io::parse_fx_json("[]"), "<string>: not an fx-graph-json document: it does not start with '{' (found '[')");
}

TEST_CASE("a non-JSON file read from disk names the file") {
  const fs::path dir = temp_dir();
  const fs::path p = dir / "weights.npy";
  kiln::io::write_file(p, std::string("\x93NUMPY\x01\x00", 8) + "binary junk");
  CHECK_THROWS_WITH_AS(kiln::io::read_fx_json(p), doctest::Contains((p.string() + ": not an fx-graph-json document").c_str()),
                       kiln::io::FormatError);
  fs::remove_all(dir);
}

TEST_CASE("a truncated or corrupt gzip file is a FormatError naming the file") {
  const fs::path dir = temp_dir();
  const std::string packed = kiln::io::gzip_compress(kValid);
  SUBCASE("truncated") {
    const fs::path p = dir / "cut.json.gz";
    kiln::io::write_file(p, packed.substr(0, packed.size() / 2));
    CHECK_THROWS_WITH_AS(kiln::io::read_fx_json(p), doctest::Contains((p.string() + ": truncated gzip data").c_str()),
                         kiln::io::FormatError);
  }
  SUBCASE("missing only its trailer") {
    const fs::path p = dir / "notrailer.json.gz";
    kiln::io::write_file(p, packed.substr(0, packed.size() - 4));
    CHECK_THROWS_WITH_AS(kiln::io::read_fx_json(p), doctest::Contains("truncated gzip data"), kiln::io::FormatError);
  }
  SUBCASE("corrupt") {
    std::string bad = packed;
    bad[bad.size() - 6] ^= 0x55;  // breaks the CRC
    const fs::path p = dir / "bad.json.gz";
    kiln::io::write_file(p, bad);
    CHECK_THROWS_WITH_AS(kiln::io::read_fx_json(p), doctest::Contains((p.string() + ": corrupt gzip data").c_str()),
                         kiln::io::FormatError);
  }
  SUBCASE("only the magic bytes") {
    const fs::path p = dir / "magic.json.gz";
    kiln::io::write_file(p, "\x1f\x8b");
    CHECK_THROWS_AS(kiln::io::read_fx_json(p), kiln::io::FormatError);
  }
  fs::remove_all(dir);
}

TEST_CASE("a gzip file that decompresses past the limit is refused with a FormatError naming the file") {
  // 1 MiB of zeros compresses to about 1 KiB; a limit keeps such a file from
  // taking the memory its compressed size does not suggest.
  const fs::path dir = temp_dir();
  const fs::path p = dir / "bomb.json.gz";
  kiln::io::write_file(p, kiln::io::gzip_compress(std::string(1 << 20, '\0')));
  CHECK(fs::file_size(p) < 8192);
  CHECK_THROWS_WITH_AS(kiln::io::read_fx_json(p, 4096),
                       doctest::Contains((p.string() + ": decompresses to more than 4096 bytes, the limit").c_str()),
                       kiln::io::FormatError);
  // Exactly at the limit still reads; a valid document under a raised limit too.
  const std::string packed = kiln::io::gzip_compress(kValid);
  CHECK(kiln::io::gzip_decompress(packed, "<t>", kValid.size()) == std::string(kValid));
  CHECK_THROWS_AS(kiln::io::gzip_decompress(packed, "<t>", kValid.size() - 1), kiln::io::FormatError);
  const fs::path ok = dir / "ok.json.gz";
  kiln::io::write_file(ok, packed);
  CHECK(kiln::io::read_fx_json(ok, 1 << 20).graph.size() > 0);
  CHECK(kiln::io::read_fx_json(ok).graph.size() > 0);  // the default limit is far above it
  fs::remove_all(dir);
}

TEST_CASE("a missing file is an IoError naming it") {
  CHECK_THROWS_WITH_AS(kiln::io::read_fx_json("/nonexistent/kiln/graph.json"),
                       doctest::Contains("/nonexistent/kiln/graph.json: cannot open for reading"), kiln::io::IoError);
}

TEST_CASE("an error deep inside nested ARGs names a shortened path: its ends and how many levels between") {
  const std::string deep = std::string(100, '[') + R"({"node":"nope"})" + std::string(100, ']');
  std::string message;
  try {
    kiln::io::parse_fx_json(with_args("[" + deep + "]"));
  } catch (const kiln::io::FormatError& e) {
    message = e.what();
  }
  // args, then 101 indexes: the first six and last six elements are kept.
  CHECK(message.find("node 'f' (#1): args[0][0][0][0][0] ...(90 more)... [0][0][0][0][0][0]: reference to unknown node 'nope'") !=
        std::string::npos);
  CHECK(message.size() < 200);
}

TEST_CASE("deeply nested ARGs are refused, not a stack overflow") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK_THROWS_WITH_AS(kiln::io::parse_fx_json(with_args("[" + deep + "]")), doctest::Contains("nesting deeper than"),
                       kiln::io::FormatError);
}

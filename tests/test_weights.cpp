// Weights: .npy files named by a graph file's weights table.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xtensor.hpp>

#include "kiln/core.hpp"
#include "kiln/io.hpp"
#include "kiln/io/npy_xtensor.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::io::WeightTensor;

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() / ("kiln_test_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path / "weights");
  }
  ~TempDir() { fs::remove_all(path); }
};

// A .npy file written by hand: header dict text, padded as numpy pads it.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + header + data;
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// A graph with one get_attr per weight name, written with its weights table.
void write_graph_with_weights(const fs::path& file, const kiln::io::WeightsTable& weights) {
  kiln::Graph g("weighted");
  kiln::Node* x = g.placeholder("x");
  kiln::ArgList outs{x};
  for (const auto& [attr, rel] : weights) outs.push_back(g.get_attr(attr));
  g.output(outs);
  kiln::io::write_fx_json(g, file, weights);
}

}  // namespace

TEST_CASE("float32, int8 and int64 weights written by xtensor load through the weights table") {
  TempDir dir("weights");
  xt::xtensor<float, 2> wf = {{1.5f, -2.f, 3.f}, {4.f, 5.25f, -6.f}};
  xt::xtensor<std::int8_t, 1> wq = {-128, 0, 7, 127};
  xt::xtensor<std::int64_t, 2> wz = {{1, -2}, {3, 4000000000000LL}, {5, 6}};
  xt::dump_npy((dir.path / "weights/wf.npy").string(), wf);
  xt::dump_npy((dir.path / "weights/wq.npy").string(), wq);
  xt::dump_npy((dir.path / "weights/wz.npy").string(), wz);
  const kiln::io::WeightsTable table{{"wf", "weights/wf.npy"}, {"wq", "weights/wq.npy"}, {"layer.wz", "weights/wz.npy"}};
  write_graph_with_weights(dir.path / "graph.json.gz", table);

  kiln::io::GraphFile f = kiln::io::read_fx_json(dir.path / "graph.json.gz");
  CHECK(f.weights == table);  // file order kept
  auto w = kiln::io::load_weights(f);
  REQUIRE(w.size() == 3);

  const WeightTensor& a = w.at("wf");
  CHECK(a.dtype == kiln::DType::float32);
  CHECK(a.shape == std::vector<std::int64_t>{2, 3});
  CHECK(a.values<float>() == std::vector<float>{1.5f, -2.f, 3.f, 4.f, 5.25f, -6.f});

  const WeightTensor& q = w.at("wq");
  CHECK(q.dtype == kiln::DType::int8);
  CHECK(q.shape == std::vector<std::int64_t>{4});
  CHECK(q.values<std::int8_t>() == std::vector<std::int8_t>{-128, 0, 7, 127});

  const WeightTensor& z = w.at("layer.wz");
  CHECK(z.dtype == kiln::DType::int64);
  CHECK(z.shape == std::vector<std::int64_t>{3, 2});
  CHECK(z.values<std::int64_t>() == std::vector<std::int64_t>{1, -2, 3, 4000000000000LL, 5, 6});

  // One weight on its own, and as an xarray.
  CHECK(kiln::io::load_weight(f, "wq") == q);
  xt::xarray<float> xa = kiln::io::to_xarray<float>(a);
  CHECK(xa.shape() == std::vector<std::size_t>{2, 3});
  CHECK(xa(1, 1) == 5.25f);
  CHECK(kiln::io::from_xarray<float>(xa) == a);
}

TEST_CASE("typed access checks the dtype") {
  WeightTensor t = kiln::io::make_weight<float>({2}, {1.f, 2.f});
  CHECK_THROWS_WITH_AS(t.values<double>(), doctest::Contains("the tensor holds float32"), kiln::Error);
  CHECK_THROWS_AS(kiln::io::to_xarray<std::int8_t>(t), kiln::Error);
  CHECK_THROWS_AS(kiln::io::make_weight<float>({3}, {1.f, 2.f}), kiln::Error);
}

TEST_CASE("npy headers: versions, byte orders, Fortran order, bool, float16 and 0-d arrays") {
  SUBCASE("version 2.0 header") {
    auto t = kiln::io::parse_npy(
        npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", raw(std::vector<std::int32_t>{7, -8, 9}), 2));
    CHECK(t.values<std::int32_t>() == std::vector<std::int32_t>{7, -8, 9});
  }
  SUBCASE("Fortran order is reordered to C order") {
    // [[1, 2, 3], [4, 5, 6]] stored column by column.
    auto t = kiln::io::parse_npy(npy_bytes("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                           raw(std::vector<std::int32_t>{1, 4, 2, 5, 3, 6})));
    CHECK(t.shape == std::vector<std::int64_t>{2, 3});
    CHECK(t.values<std::int32_t>() == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
  }
  SUBCASE("Fortran order in three dimensions") {
    // a[i][j][k] = 100 i + 10 j + k, shape (2, 3, 2); Fortran order: i fastest.
    std::vector<std::int32_t> f, c;
    for (int k = 0; k < 2; ++k)
      for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 2; ++i) f.push_back(100 * i + 10 * j + k);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 2; ++k) c.push_back(100 * i + 10 * j + k);
    auto t = kiln::io::parse_npy(npy_bytes("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 2), }", raw(f)));
    CHECK(t.values<std::int32_t>() == c);
  }
  SUBCASE("big-endian float64") {
    std::string be;
    for (double d : {1.0, -0.5}) {
      std::string b(reinterpret_cast<const char*>(&d), 8);
      be.append(b.rbegin(), b.rend());
    }
    auto t = kiln::io::parse_npy(npy_bytes("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", be));
    CHECK(t.dtype == kiln::DType::float64);
    CHECK(t.values<double>() == std::vector<double>{1.0, -0.5});
  }
  SUBCASE("bool and uint8") {
    auto b = kiln::io::parse_npy(npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\1\0\1", 3)));
    CHECK(b.values<bool>() == std::vector<bool>{true, false, true});
    auto u = kiln::io::parse_npy(npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", "\xff\x01"));
    CHECK(u.values<std::uint8_t>() == std::vector<std::uint8_t>{255, 1});
  }
  SUBCASE("float16 keeps its bytes") {
    auto t = kiln::io::parse_npy(npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", std::string("\x00\x3c\x00\xc0", 4)));
    CHECK(t.dtype == kiln::DType::float16);
    REQUIRE(t.bytes.size() == 4);
    CHECK(t.bytes[1] == std::byte{0x3c});  // 1.0 in half precision
  }
  SUBCASE("a 0-d array") {
    auto t = kiln::io::parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", raw(std::vector<float>{2.5f})));
    CHECK(t.shape.empty());
    CHECK(t.numel() == 1);
    CHECK(t.values<float>() == std::vector<float>{2.5f});
  }
}

TEST_CASE("write_npy writes files that xtensor (numpy's format) reads back") {
  TempDir dir("npy_write");
  WeightTensor t = kiln::io::make_weight<std::int64_t>({2, 2}, {1, 2, 3, -4});
  kiln::io::write_npy(dir.path / "t.npy", t);
  auto back = xt::load_npy<std::int64_t>((dir.path / "t.npy").string());
  CHECK(back.shape() == std::vector<std::size_t>{2, 2});
  CHECK(back(1, 1) == -4);
  CHECK(kiln::io::read_npy(dir.path / "t.npy") == t);
  // numpy pads the header so that the data starts at a multiple of 64 bytes.
  const std::string bytes = kiln::io::to_npy(t);
  CHECK((bytes.size() - 4 * 8) % 64 == 0);
  CHECK(bytes[bytes.size() - 4 * 8 - 1] == '\n');
}

TEST_CASE("a missing weight file is an error naming the attribute and the file") {
  TempDir dir("weights_missing");
  write_graph_with_weights(dir.path / "graph.json", {{"w", "weights/absent.npy"}});
  auto f = kiln::io::read_fx_json(dir.path / "graph.json");
  const std::string path = (fs::absolute(dir.path) / "weights/absent.npy").string();
  CHECK_THROWS_WITH_AS(kiln::io::load_weights(f), doctest::Contains(("weights['w']: " + path + ": cannot open for reading").c_str()),
                       kiln::io::IoError);
  CHECK_THROWS_WITH_AS(kiln::io::load_weight(f, "other"), doctest::Contains("weights['other']: the graph file has no weights entry"),
                       kiln::Error);
}

TEST_CASE("a bad npy file is an error naming the attribute and the file") {
  TempDir dir("weights_bad");
  struct Row {
    const char* what;
    std::string bytes;
    std::string message;
  };
  const std::vector<Row> rows{
      {"not npy", "PK\x03\x04 zip file", "not a .npy file"},
      {"unsupported dtype", npy_bytes("{'descr': '<U4', 'fortran_order': False, 'shape': (1,), }", std::string(16, 'a')),
       "unsupported dtype '<U4'"},
      {"structured dtype", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd"),
       "structured dtypes are not supported"},
      {"missing shape", npy_bytes("{'descr': '<f4', 'fortran_order': False, }", "abcd"),
       "it needs 'descr', 'fortran_order' and 'shape'"},
      {"truncated data", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", "abcd"),
       "data size mismatch: shape and dtype '<f4' need 16 bytes, the file holds 4 (truncated?)"},
      {"truncated header", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", "").substr(0, 30),
       "truncated .npy header"},
      {"bad version", std::string("\x93NUMPY\x09\x00\x10\x00", 10) + std::string(16, ' '), "unsupported .npy format version 9"},
      // An empty array (a zero dimension) whose other dimensions multiply past
      // int64: numel() would overflow, so it is refused when read.
      {"overflowing empty shape",
       npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }", ""),
       "shape too large: its element count overflows"},
      {"overflowing shape", npy_bytes("{'descr': '<i1', 'fortran_order': False, 'shape': (3037000500, 3037000500), }", ""),
       "shape too large"},
  };
  kiln::io::WeightsTable table;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string rel = "weights/bad" + std::to_string(i) + ".npy";
    kiln::io::write_file(dir.path / rel, rows[i].bytes);
    table.emplace_back("attr" + std::to_string(i), rel);
  }
  write_graph_with_weights(dir.path / "graph.json", table);
  auto f = kiln::io::read_fx_json(dir.path / "graph.json");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(rows[i].what);
    const std::string attr = "attr" + std::to_string(i);
    const std::string path = (fs::absolute(dir.path) / table[i].second).string();
    CHECK_THROWS_WITH_AS(kiln::io::load_weight(f, attr), doctest::Contains(("weights['" + attr + "']: " + path + ": ").c_str()),
                         kiln::io::FormatError);
    CHECK_THROWS_WITH_AS(kiln::io::load_weight(f, attr), doctest::Contains(rows[i].message.c_str()), kiln::io::FormatError);
  }
}

TEST_CASE("read_npy_layout reads the header alone and read_npy_elements a run of the flat array, from every kind of file") {
  TempDir dir("weights_partial");
  // a[i][j] = 10 i + j, shape (3, 4): the reference is read_npy's whole array.
  std::vector<std::int32_t> c, f;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) c.push_back(10 * i + j);
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) f.push_back(10 * i + j);
  std::string be;
  for (std::int32_t v : c) {
    std::string b(reinterpret_cast<const char*>(&v), 4);
    be.append(b.rbegin(), b.rend());
  }
  const struct {
    const char* name;
    std::string bytes;
    bool gzip;
  } files[] = {
      {"c.npy", npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }", raw(c)), false},
      {"v2.npy", npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }", raw(c), 2), false},
      {"big.npy", npy_bytes("{'descr': '>i4', 'fortran_order': False, 'shape': (3, 4), }", be), false},
      {"fortran.npy", npy_bytes("{'descr': '<i4', 'fortran_order': True, 'shape': (3, 4), }", raw(f)), false},
      {"c.npy.gz", npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }", raw(c)), true},
  };
  for (const auto& file : files) {
    CAPTURE(file.name);
    const fs::path path = dir.path / file.name;
    kiln::io::write_file(path, file.bytes, file.gzip);
    const kiln::io::NpyLayout l = kiln::io::read_npy_layout(path);
    CHECK(l.meta.dtype == kiln::DType::int32);
    CHECK(l.meta.shape == std::vector<std::int64_t>{3, 4});
    CHECK(l.meta.bytes.empty());
    const std::vector<std::int32_t> whole = kiln::io::read_npy(path).values<std::int32_t>();
    REQUIRE(whole == c);
    for (std::int64_t from = 0; from <= 12; ++from) {
      for (std::int64_t count = 0; from + count <= 12; count += 5) {
        const std::vector<std::byte> got = kiln::io::read_npy_elements(path, from, count);
        REQUIRE(got.size() == static_cast<std::size_t>(count) * 4);
        std::vector<std::int32_t> values(static_cast<std::size_t>(count));
        if (count) std::memcpy(values.data(), got.data(), got.size());
        CHECK(values == std::vector<std::int32_t>(whole.begin() + from, whole.begin() + from + count));
      }
    }
    CHECK_THROWS_WITH_AS(kiln::io::read_npy_elements(path, 10, 3), doctest::Contains("elements 10 to 13 asked of an array of 12"),
                         kiln::Error);
  }
  SUBCASE("a truncated file is the size error parse_npy gives") {
    const fs::path path = dir.path / "short.npy";
    const std::string bytes = npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (3, 4), }", raw(c));
    kiln::io::write_file(path, bytes.substr(0, bytes.size() - 8));  // the last two elements missing
    CHECK_THROWS_WITH_AS(kiln::io::read_npy_elements(path, 0, 1), doctest::Contains("data size mismatch"), kiln::io::FormatError);
  }
}

TEST_CASE("WeightStore::meta and read_elements read a file's header and one run of it, or a held value") {
  TempDir dir("weights_store_partial");
  const std::vector<float> v{1, 2, 3, 4, 5, 6};
  kiln::io::write_npy(dir.path / "weights/w.npy", kiln::io::make_weight<float>({2, 3}, v));
  write_graph_with_weights(dir.path / "graph.json", {{"w", "weights/w.npy"}, {"gone", "weights/gone.npy"}});
  const auto f = kiln::io::read_fx_json(dir.path / "graph.json");
  kiln::io::WeightStore store(f);
  const auto m = store.meta("w");
  REQUIRE(m.has_value());
  CHECK(m->shape == std::vector<std::int64_t>{2, 3});
  CHECK(m->bytes.empty());
  const auto run = store.read_elements("w", 2, 3);
  std::vector<float> got(3);
  std::memcpy(got.data(), run.data(), run.size());
  CHECK(got == std::vector<float>{3, 4, 5});
  store.add("held", kiln::io::make_weight<float>({4}, {9, 8, 7, 6}));
  const auto held = store.read_elements("held", 3, 1);
  float last = 0;
  std::memcpy(&last, held.data(), 4);
  CHECK(last == 6);
  CHECK(store.meta("held")->shape == std::vector<std::int64_t>{4});
  CHECK_FALSE(store.meta("nothing").has_value());
  CHECK_THROWS_WITH_AS(store.read_elements("held", 3, 2), doctest::Contains("elements 3 to 5 of 'held', which has 4"), kiln::Error);
  CHECK_THROWS_WITH_AS(store.meta("gone"), doctest::Contains("weights['gone']: "), kiln::io::IoError);
  CHECK_THROWS_WITH_AS(store.read_elements("nothing", 0, 1), doctest::Contains("no weight named 'nothing'"), kiln::Error);
}

TEST_CASE("a weight kept as shards reads whole, by its header alone, or a run from only the shards it covers") {
  TempDir dir("weights_shards");
  // 10 elements over 3 ranks: shards of 4, 4 and 2 (shard_parameters's cut).
  std::vector<float> v(10);
  for (int i = 0; i < 10; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i) + 0.5f;
  const auto shard = [&](int from, int n) { return kiln::io::make_weight<float>({n}, std::vector<float>(v.begin() + from, v.begin() + from + n)); };
  kiln::io::write_npy(dir.path / "weights/w.rank0.npy", shard(0, 4));
  kiln::io::write_npy(dir.path / "weights/w.rank1.npy", shard(4, 4));
  kiln::io::write_npy(dir.path / "weights/w.rank2.npy", shard(8, 2));
  const std::string manifest = R"({"format":"kiln-weight-shards","version":1,"dtype":"float32","shape":[2,5],"world_size":3,)"
                               R"("files":["w.rank0.npy","w.rank1.npy","w.rank2.npy"]})";
  kiln::io::write_file(dir.path / "weights/w.shards.json", manifest);
  write_graph_with_weights(dir.path / "graph.json", {{"w", "weights/w.shards.json"}});
  const auto f = kiln::io::read_fx_json(dir.path / "graph.json");
  CHECK(kiln::io::load_weight(f, "w") == kiln::io::make_weight<float>({2, 5}, v));
  const auto floats = [](const std::vector<std::byte>& b) {
    std::vector<float> out(b.size() / 4);
    std::memcpy(out.data(), b.data(), b.size());
    return out;
  };
  {
    kiln::io::WeightStore store(f);
    CHECK(floats(store.read_elements("w", 2, 5)) == std::vector<float>(v.begin() + 2, v.begin() + 7));  // across three shards
  }
  // Rank 1 of 3 needs its own file only.
  fs::remove(dir.path / "weights/w.rank0.npy");
  fs::remove(dir.path / "weights/w.rank2.npy");
  kiln::io::WeightStore store(f);
  const auto m = store.meta("w");
  REQUIRE(m.has_value());
  CHECK(m->shape == std::vector<std::int64_t>{2, 5});
  CHECK(m->bytes.empty());
  CHECK(floats(store.read_elements("w", 4, 4)) == std::vector<float>(v.begin() + 4, v.begin() + 8));
  CHECK_THROWS_WITH_AS(store.read_elements("w", 0, 5), doctest::Contains("w.rank0.npy: cannot open for reading"), kiln::io::IoError);
  CHECK_THROWS_WITH_AS(kiln::io::load_weight(f, "w"), doctest::Contains("weights['w']: "), kiln::io::IoError);
  CHECK_THROWS_WITH_AS(store.read_elements("w", 8, 3), doctest::Contains("elements 8 to 11 asked of a weight of 10"), kiln::Error);
  // A shard of the wrong length, and manifests that do not hold together.
  kiln::io::write_npy(dir.path / "weights/w.rank0.npy", shard(0, 3));
  CHECK_THROWS_WITH_AS(store.read_elements("w", 0, 1), doctest::Contains("rank 0's shard must be a 1-d float32 array of 4 elements"),
                       kiln::io::FormatError);
  const std::vector<std::pair<std::string, std::string>> bad{
      {R"({"format":"kiln-weight-shards","version":1,"dtype":"float32","shape":[2,5],"world_size":2,"files":["a.npy"]})",
       "\"files\" must list one file per rank (2)"},
      {R"({"format":"kiln-weight-shards","version":1,"dtype":"float99","shape":[2,5],"world_size":1,"files":["a.npy"]})",
       "\"dtype\" is missing or not a dtype name"},
      {R"({"format":"npy-shards","version":1})", "\"format\" is not \"kiln-weight-shards\""},
      {R"({"format":"kiln-weight-shards","version":1,"dtype":"float32","shape":[-2],"world_size":1,"files":["a.npy"]})",
       "\"shape\" holds something that is not a size"},
      {"{not json", "not JSON"}};
  for (const auto& [text, message] : bad) {
    kiln::io::write_file(dir.path / "weights/w.shards.json", text);
    CHECK_THROWS_WITH_AS(store.meta("w"), doctest::Contains(("weights['w']: " + (dir.path / "weights/w.shards.json").string() + ": " + message).c_str()),
                         kiln::io::FormatError);
  }
}

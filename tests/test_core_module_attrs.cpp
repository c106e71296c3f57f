// ModuleAttrs: a module's constructor attributes (modules[PATH].attrs, kept as
// compact JSON text) read as Args: every form the exporter writes, escapes,
// nesting, and text it cannot read reported naming the attribute.
#include <doctest/doctest.h>

#include <string>

#include "kiln/core/module_attrs.hpp"

using namespace kiln;

namespace {
ModuleInfo with_attrs(std::string text) { return ModuleInfo{"m", "torch.nn.modules.conv.Conv2d", {{"other", "[1]"}, {"attrs", std::move(text)}}}; }
}  // namespace

TEST_CASE("ModuleAttrs reads null, bools, ints, floats, strings and nested lists") {
  const ModuleAttrs a(with_attrs(
      R"({"stride":[2,1],"padding":"same","eps":1e-05,"momentum":0.1,"neg":-3,"big":-2.5E+3,"affine":true,)"
      R"("bias":false,"divisor_override":null,"nested":[[1,null],[]],"esc":"a\"b\\c\u0041\n"})"));
  CHECK(a.size() == 11);
  REQUIRE(a.find("stride"));
  const ArgList* stride = a.find("stride")->list();
  REQUIRE(stride);
  REQUIRE(stride->size() == 2);
  CHECK(*(*stride)[0].get_if<std::int64_t>() == 2);
  CHECK(*(*stride)[1].get_if<std::int64_t>() == 1);
  CHECK(*a.find("padding")->get_if<std::string>() == "same");
  CHECK(*a.find("eps")->get_if<double>() == doctest::Approx(1e-5));
  CHECK(*a.find("momentum")->get_if<double>() == doctest::Approx(0.1));
  CHECK(*a.find("neg")->get_if<std::int64_t>() == -3);
  CHECK(*a.find("big")->get_if<double>() == -2500.0);
  CHECK(*a.find("affine")->get_if<bool>());
  CHECK_FALSE(*a.find("bias")->get_if<bool>());
  CHECK(a.find("divisor_override")->is_none());
  const ArgList* nested = a.find("nested")->list();
  REQUIRE(nested);
  REQUIRE(nested->size() == 2);
  REQUIRE((*nested)[0].list());
  CHECK((*(*nested)[0].list())[1].is_none());
  CHECK((*nested)[1].list()->empty());
  CHECK(*a.find("esc")->get_if<std::string>() == "a\"b\\cA\n");
  CHECK(a.find("missing") == nullptr);
}

TEST_CASE("ModuleAttrs: no attrs field reads as none, and text it cannot read names the attribute") {
  CHECK(ModuleAttrs(ModuleInfo{"m", "torch.nn.modules.activation.Tanh", {}}).size() == 0);
  CHECK(ModuleAttrs(with_attrs("{}")).size() == 0);
  auto error = [](const char* text) {
    try {
      ModuleAttrs a(with_attrs(text));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error(R"({"dim":{"x":1}})").find("attrs.dim") != std::string::npos);
  CHECK(error(R"({"k":[1,2)").find("attrs.k") != std::string::npos);
  CHECK(error(R"({"eps":1e-0.5})").find("malformed number") != std::string::npos);
  CHECK(error(R"([1])").find("'{' expected") != std::string::npos);
}

#pragma once
// The compile-time pattern DSL (Inductor's pattern_matcher semantics).
#include "kiln/pattern/call.hpp"
#include "kiln/pattern/check_result.hpp"
#include "kiln/pattern/leaf.hpp"
#include "kiln/pattern/list_of.hpp"
#include "kiln/pattern/match.hpp"
#include "kiln/pattern/multi_output.hpp"
#include "kiln/pattern/repeated.hpp"

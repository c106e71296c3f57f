#pragma once
// The runtime graph: everything in include/kiln/core/.
#include "kiln/core/arg.hpp"
#include "kiln/core/dead_code.hpp"
#include "kiln/core/dot.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/graph.hpp"
#include "kiln/core/lint.hpp"
#include "kiln/core/node.hpp"
#include "kiln/core/op_ref.hpp"
#include "kiln/core/print.hpp"
#include "kiln/core/tensor_meta.hpp"
#include "kiln/core/topological_sort.hpp"

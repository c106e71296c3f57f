#pragma once
// Every op namespace kiln declares.
#include "kiln/ops/aten.hpp"
#include "kiln/ops/c10d_functional.hpp"
#include "kiln/ops/functional.hpp"
#include "kiln/ops/onednn.hpp"
#include "kiln/ops/operator.hpp"
#include "kiln/ops/prims.hpp"
#include "kiln/ops/quantized.hpp"
#include "kiln/ops/quantized_decomposed.hpp"
#include "kiln/ops/torch.hpp"

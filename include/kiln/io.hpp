#pragma once
// Reading and writing graphs: fx-graph-json (plain or gzip) and .npy weights.
// The xtensor bridge (kiln/io/npy_xtensor.hpp) is not included here, to keep
// xtensor's compile time out of files that do not use it.
#include "kiln/io/errors.hpp"
#include "kiln/io/fx_json_read.hpp"
#include "kiln/io/fx_json_write.hpp"
#include "kiln/io/graph_file.hpp"
#include "kiln/io/graph_weights.hpp"
#include "kiln/io/gzip.hpp"
#include "kiln/io/npy_slice.hpp"
#include "kiln/io/npy_weights.hpp"
#include "kiln/io/weight_shards.hpp"
#include "kiln/io/weight_store.hpp"

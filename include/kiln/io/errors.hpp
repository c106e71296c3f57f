#pragma once
// Exceptions of kiln::io. FormatError: a document (fx-graph-json, gzip, .npy)
// that does not follow its format; the message names the source, the node and
// the field. IoError: a file that cannot be opened, read or written.
#include <string>

#include "kiln/core/error.hpp"

namespace kiln::io {

class FormatError : public kiln::Error {
 public:
  using kiln::Error::Error;
};

class IoError : public kiln::Error {
 public:
  using kiln::Error::Error;
};

}  // namespace kiln::io

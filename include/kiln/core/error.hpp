#pragma once
// Exceptions thrown by kiln. Every message names what it is about (a node, a
// field, a file) and what was expected, so a user can act on it without a debugger.
#include <stdexcept>
#include <string>

namespace kiln {

// Base of every error kiln throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A graph edit that would break the graph's invariants (erasing a node that
// still has users, using a node of another graph, ...).
class GraphError : public Error {
 public:
  using Error::Error;
};

// lint() found an inconsistency; the message lists the first problem found.
class LintError : public GraphError {
 public:
  using GraphError::GraphError;
};

// Two different op names hash to the same 64-bit OpRef hash.
class OpHashCollision : public Error {
 public:
  using Error::Error;
};

}  // namespace kiln

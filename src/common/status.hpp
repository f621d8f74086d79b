// Status and Result<T> for the code inside the tree: the public types
// (include/objdirect/status.hpp, the one error table) plus the helpers that only the implementation
// uses.
#pragma once

#include "objdirect/status.hpp"

// Propagate an error Status from an expression returning Status.
#define OBJDIRECT_RETURN_IF_ERROR(expr) \
  do {                                  \
    ::objdirect::Status _st = (expr);   \
    if (!_st.ok()) return _st;          \
  } while (0)

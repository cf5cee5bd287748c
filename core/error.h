// Errors that reach the user. Every message says what is wrong and, where it can, what to
// do about it (a HINT). The CLI prints them to stderr and exits with `exit_code`.
#pragma once
#include <stdexcept>
#include <string>

namespace attnviz {

// exit codes: 1 = bad data (model files, input text, I/O), 2 = bad usage (flags, options)
enum class ErrorKind { Data = 1, Usage = 2 };

struct Error : std::runtime_error {
  ErrorKind kind;
  explicit Error(const std::string& what, ErrorKind k = ErrorKind::Data)
      : std::runtime_error(what), kind(k) {}
  int exit_code() const { return static_cast<int>(kind); }
};

// "(a, b, c)" for messages about shapes.
std::string shape_str(const std::initializer_list<long long>& dims);
template <class Vec>
std::string shape_str_of(const Vec& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}

}  // namespace attnviz

// Errors that reach the user. Every message says what is wrong and, where it can, what to
// do about it (a HINT). The CLI prints them to stderr and exits with `exit_code`.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

namespace attnviz {

// exit codes: 1 = bad data (model files, input text, I/O), 2 = bad usage (flags, options)
enum class ErrorKind { Data = 1, Usage = 2 };

struct Error : std::runtime_error {
  ErrorKind kind;
  explicit Error(const std::string& what, ErrorKind k = ErrorKind::Data)
      : std::runtime_error(what), kind(k) {}
  int exit_code() const { return static_cast<int>(kind); }
};

// Longest message printed for one error, warning or note, in bytes; a longer one is cut
// with "… (N bytes in all)". Messages quote input (a template's raise_exception text, a
// file's values), and that can be any size.
constexpr size_t kMaxPrintedMessageBytes = 3000;

// `label` ("error", "warning", "note") + ": " + `message`, made safe for a terminal, then a
// newline: every control character but the newline shown as \xNN (ESC, BEL, CR: no escape
// sequence reaches the terminal), C1 controls and bytes that are not UTF-8 likewise, each
// line after the first indented (no line but the first can pass for an "error:" line), and
// at most kMaxPrintedMessageBytes of the message. Everything attnviz prints about a failure
// goes through this.
std::string format_message(const char* label, std::string_view message);

// "(a, b, c)" for messages about shapes.
std::string shape_str(const std::initializer_list<long long>& dims);
template <class Vec>
std::string shape_str_of(const Vec& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")";
}

}  // namespace attnviz

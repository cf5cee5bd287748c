#include "core/limits.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace attnviz {

namespace {
template <class It>
int64_t product_of(It begin, It end, const std::string& what) {
  int64_t n = 1;
  for (It it = begin; it != end; ++it) {
    const int64_t d = *it;
    if (d < 0) throw Error(what + ": negative size " + std::to_string(d));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw Error(what + ": size overflows (a product of dimensions exceeds 2^63)");
    n *= d;
  }
  return n;
}
}  // namespace

int64_t checked_product(std::initializer_list<int64_t> dims, const std::string& what) {
  return product_of(dims.begin(), dims.end(), what);
}
int64_t checked_product(const std::vector<int64_t>& dims, const std::string& what) {
  return product_of(dims.begin(), dims.end(), what);
}

int checked_layers(int64_t n, const std::string& what) {
  if (n > kMaxLayers)
    throw Error(what + " is " + std::to_string(n) + ": more layers than attnviz accepts (" + std::to_string(kMaxLayers) +
                ")\n  HINT: the file is damaged or not a model's.");
  return static_cast<int>(n);
}

namespace {
std::string int_range_text(int64_t lo, int64_t hi) {
  return lo == 1 ? "a positive integer up to " + std::to_string(hi)
                 : "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
}
}  // namespace

int checked_int(int64_t v, int64_t lo, int64_t hi, const std::string& what) {
  lo = std::max<int64_t>(lo, std::numeric_limits<int>::min());
  hi = std::min<int64_t>(hi, std::numeric_limits<int>::max());
  if (v < lo || v > hi) throw Error(what + " = " + std::to_string(v) + " must be " + int_range_text(lo, hi));
  return static_cast<int>(v);
}

int json_int(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what) {
  lo = std::max<int64_t>(lo, std::numeric_limits<int>::min());
  hi = std::min<int64_t>(hi, std::numeric_limits<int>::max());
  // An unsigned value above INT64_MAX is out of any int range: never read it as int64.
  const bool in = v.is_number_integer() &&
                  (v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(std::max<int64_t>(hi, 0)) &&
                                                static_cast<int64_t>(v.get<uint64_t>()) >= lo
                                          : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi);
  if (!in) throw Error(what + " must be " + int_range_text(lo, hi) + ", found " + json_excerpt(v));
  return static_cast<int>(v.get<int64_t>());
}

int checked_dim(int64_t a, int64_t b, const std::string& what) {
  const int64_t n = checked_product({a, b}, what);
  if (n > kMaxDim)
    throw Error(what + " = " + std::to_string(a) + " x " + std::to_string(b) + " = " + std::to_string(n) +
                " exceeds the largest dimension attnviz accepts (" + std::to_string(kMaxDim) + ")");
  return static_cast<int>(n);
}

std::string excerpt(std::string_view s, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  for (; i < s.size() && i < max_bytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < s.size()) {
    // do not end inside a UTF-8 sequence: drop trailing continuation/lead bytes
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80)) {
      const unsigned char c = static_cast<unsigned char>(out.back());
      out.pop_back();
      if (c >= 0xC0) break;  // dropped the lead byte of the cut sequence
    }
    out += "… (" + std::to_string(s.size()) + " bytes)";
  }
  return out;
}

std::string json_excerpt(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::string: return "\"" + excerpt(j.get_ref<const std::string&>()) + "\"";
    case nlohmann::json::value_t::array:
      return "an array of " + std::to_string(j.size()) + (j.size() == 1 ? " element" : " elements");
    case nlohmann::json::value_t::object:
      return "an object with " + std::to_string(j.size()) + (j.size() == 1 ? " key" : " keys");
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::discarded: return "nothing";
    default: return excerpt(j.dump());  // a number or a boolean: one short token
  }
}

int open_regular_file(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + excerpt(path, kPathExcerptBytes) + "' (" + what + "): " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(what + " '" + excerpt(path, kPathExcerptBytes) + "' is not a regular file" +
                "\n  HINT: pass an ordinary file (not a folder, pipe or device).");
  }
  // Regular files never block; reads below can use a normal descriptor.
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string read_regular_file(const std::string& path, int64_t max_bytes, const std::string& what,
                              bool allow_nul) {
  const int fd = open_regular_file(path, what);
  struct stat st {};
  fstat(fd, &st);
  if (st.st_size > max_bytes) {
    ::close(fd);
    throw Error(what + " '" + excerpt(path, kPathExcerptBytes) + "' is " + format_bytes(static_cast<double>(st.st_size)) +
                ", more than the " + format_bytes(static_cast<double>(max_bytes)) + " attnviz reads" +
                "\n  HINT: use a smaller file.");
  }
  std::string bytes;
  bytes.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw Error("cannot read " + what + " '" + excerpt(path, kPathExcerptBytes) + "': " + why);
    }
    if (got == 0) break;
    if (static_cast<int64_t>(bytes.size()) + got > max_bytes) {  // grew while being read
      ::close(fd);
      throw Error(what + " '" + excerpt(path, kPathExcerptBytes) + "' is larger than the " +
                  format_bytes(static_cast<double>(max_bytes)) + " attnviz reads\n  HINT: use a smaller file.");
    }
    bytes.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  if (!allow_nul) {
    const size_t nul = bytes.find('\0');
    if (nul != std::string::npos)
      throw Error(what + " '" + excerpt(path, kPathExcerptBytes) + "' holds a NUL byte at offset " + std::to_string(nul) +
                  "; it is not a text file (or has junk appended)");
  }
  return bytes;
}

double memory_available_bytes() {
  double avail = std::numeric_limits<double>::infinity();
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (meminfo >> key >> kb) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") {
      avail = kb * 1024.0;
      break;
    }
  }
  for (int res : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit rl {};
    if (getrlimit(res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      avail = std::min(avail, static_cast<double>(rl.rlim_cur));
  }
  if (const char* env = std::getenv("ATTNVIZ_MAX_MEMORY_MB"); env && *env) {
    char* end = nullptr;
    const double mb = std::strtod(env, &end);
    if (end != env && mb > 0) avail = std::min(avail, mb * 1024.0 * 1024.0);
  }
  return avail;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 6) bytes /= 1000.0, ++u;
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[u]);
  else if (bytes < 1e6) std::snprintf(buf, sizeof buf, "%.1f %s", bytes, units[u]);
  else std::snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
  return buf;
}

void check_memory(double bytes, const std::string& what, const std::string& hint) {
  const double avail = memory_available_bytes();
  if (bytes > avail)
    throw Error(what + " needs about " + format_bytes(bytes) + " of memory, but only " + format_bytes(avail) +
                " is available\n  HINT: " + hint);
}

}  // namespace attnviz

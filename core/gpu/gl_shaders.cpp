#include "core/gpu/gl_shaders.h"

#include <epoxy/gl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <cstring>

#include "core/error.h"

namespace attnviz {

std::vector<std::string> embedded_shader_names() {
  std::vector<std::string> names;
  for (int i = 0; i < kEmbeddedShaderFileCount; ++i) names.emplace_back(kEmbeddedShaderFiles[i].name);
  return names;
}

std::string ShaderSources::file(const std::string& name) const {
  if (auto it = overrides.find(name); it != overrides.end()) return it->second;
  if (const char* dir = std::getenv("ATTNVIZ_SHADER_DIR"); dir && *dir) {
    const std::string path = std::string(dir) + "/" + name;
    std::ifstream f(path, std::ios::binary);
    if (!f)
      throw Error("shader file '" + path + "' cannot be read\n  HINT: ATTNVIZ_SHADER_DIR=" + dir +
                  " should name a copy of the source tree's shaders/ directory; unset it to use the built-in shaders.");
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  for (int i = 0; i < kEmbeddedShaderFileCount; ++i)
    if (name == kEmbeddedShaderFiles[i].name) return kEmbeddedShaderFiles[i].text;
  throw Error("no shader named '" + name + "' is built in");
}

std::string assemble_shader(const ShaderSources& src, const std::string& name, const std::string& defines) {
  std::istringstream in(src.file(name));
  std::ostringstream out;
  static const std::regex include_re(R"re(^\s*#\s*include\s+"([^"]+)"\s*$)re");
  std::string line;
  bool version_seen = false;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, include_re)) {
      const std::string inc = m[1].str(), body = src.file(inc);
      out << "// ---- begin " << inc << " ----\n" << body;
      if (!body.empty() && body.back() != '\n') out << "\n";
      out << "// ---- end " << inc << " ----\n";
      continue;
    }
    out << line << "\n";
    if (!version_seen && line.rfind("#version", 0) == 0) {
      version_seen = true;
      out << defines;
      if (!defines.empty() && defines.back() != '\n') out << "\n";
    }
  }
  if (!version_seen) throw Error("shader '" + name + "' has no #version line (it must start with #version 430)");
  return out.str();
}

std::string numbered_source(const std::string& text, const std::vector<int>& only, int context) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::set<int> show;
  for (int n : only)
    for (int k = n - context; k <= n + context; ++k)
      if (k >= 1 && k <= static_cast<int>(lines.size())) show.insert(k);
  std::ostringstream out;
  int last = 0;
  for (int n = 1; n <= static_cast<int>(lines.size()); ++n) {
    if (!only.empty() && !show.count(n)) continue;
    if (!only.empty() && last && n != last + 1) out << "     …\n";
    char num[16];
    std::snprintf(num, sizeof num, "%4d", n);
    const bool marked = !only.empty() && std::find(only.begin(), only.end(), n) != only.end();
    out << num << (marked ? " >| " : "  | ") << lines[static_cast<size_t>(n - 1)] << "\n";
    last = n;
  }
  return out.str();
}

std::vector<int> log_line_numbers(const std::string& log) {
  static const std::regex re(R"((?:^|\n)\s*(?:ERROR:\s*|WARNING:\s*)?\d+[:(](\d+)\)?)");
  std::vector<int> lines;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it) {
    const int n = std::stoi((*it)[1].str());
    if (std::find(lines.begin(), lines.end(), n) == lines.end()) lines.push_back(n);
  }
  return lines;
}

GlProgram::GlProgram(const ShaderSources& src, const std::string& name, const std::string& defines) : name_(name) {
  const std::string text = assemble_shader(src, name, defines);
  const GLuint sh = glCreateShader(GL_COMPUTE_SHADER);
  const char* p = text.c_str();
  glShaderSource(sh, 1, &p, nullptr);
  glCompileShader(sh);
  GLint ok = 0, len = 0;
  glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
  glGetShaderiv(sh, GL_INFO_LOG_LENGTH, &len);
  std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
  glGetShaderInfoLog(sh, len, nullptr, log.data());
  log.resize(std::strlen(log.c_str()));
  if (!ok) {
    glDeleteShader(sh);
    const std::vector<int> at = log_line_numbers(log);
    std::cerr << "attnviz: shader '" << name << "' does not compile:\n"
              << log << "\n---- " << name << " as compiled (line numbers as in the log above) ----\n"
              << numbered_source(text) << "---- end of " << name << " ----\n";
    throw Error("shader '" + name + "' does not compile:\n" + log + "\n" +
                (at.empty() ? numbered_source(text) : numbered_source(text, at)) +
                "  HINT: the full numbered source was printed to stderr; check the shader (or ATTNVIZ_SHADER_DIR).");
  }
  id_ = glCreateProgram();
  glAttachShader(id_, sh);
  glLinkProgram(id_);
  glDeleteShader(sh);
  glGetProgramiv(id_, GL_LINK_STATUS, &ok);
  if (!ok) {
    glGetProgramiv(id_, GL_INFO_LOG_LENGTH, &len);
    std::string plog(static_cast<size_t>(std::max(len, 1)), '\0');
    glGetProgramInfoLog(id_, len, nullptr, plog.data());
    plog.resize(std::strlen(plog.c_str()));
    glDeleteProgram(id_);
    id_ = 0;
    std::cerr << "attnviz: shader '" << name << "' does not link:\n"
              << plog << "\n---- " << name << " ----\n" << numbered_source(text);
    throw Error("shader '" + name + "' does not link:\n" + plog + "\n" + numbered_source(text));
  }
}

GlProgram::~GlProgram() {
  if (id_) glDeleteProgram(id_);
}

GlProgram::GlProgram(GlProgram&& o) noexcept
    : id_(o.id_), name_(std::move(o.name_)), locations_(std::move(o.locations_)) {
  o.id_ = 0;
}

GlProgram& GlProgram::operator=(GlProgram&& o) noexcept {
  if (this != &o) {
    if (id_) glDeleteProgram(id_);
    id_ = o.id_;
    name_ = std::move(o.name_);
    locations_ = std::move(o.locations_);
    o.id_ = 0;
  }
  return *this;
}

void GlProgram::use() const { glUseProgram(id_); }

int GlProgram::location(const char* uniform) {
  auto it = locations_.find(uniform);
  if (it == locations_.end()) it = locations_.emplace(uniform, glGetUniformLocation(id_, uniform)).first;
  return it->second;
}

void GlProgram::set(const char* uniform, int v) {
  if (const int l = location(uniform); l >= 0) glUniform1i(l, v);
}
void GlProgram::set(const char* uniform, float v) {
  if (const int l = location(uniform); l >= 0) glUniform1f(l, v);
}

}  // namespace attnviz

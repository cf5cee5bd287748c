// GLSL compute shaders: where their text comes from, how includes are spliced in, and
// compiling them into programs that refuse to exist when the compiler complains.
//
// The text of shaders/*.comp and shaders/*.glsl is embedded into the binary at build time
// (cmake/EmbedShaders.cmake). During development, env ATTNVIZ_SHADER_DIR=DIR makes every
// shader load from DIR instead, so an edited shader needs no rebuild.
#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace attnviz {

struct EmbeddedShaderFile {
  const char* name;  // "norm.comp", "common.glsl"
  const char* text;
};
extern const EmbeddedShaderFile kEmbeddedShaderFiles[];  // generated
extern const int kEmbeddedShaderFileCount;

std::vector<std::string> embedded_shader_names();

// Where shader files come from: `overrides` (name → text, for tests), then
// $ATTNVIZ_SHADER_DIR when set, then the embedded copies.
struct ShaderSources {
  std::map<std::string, std::string> overrides;
  std::string file(const std::string& name) const;  // throws attnviz::Error when missing
};

// The text the compiler sees: `name` with `defines` ("#define RM 4\n…") put right after
// its #version line and every `#include "X"` line replaced by file X (marked by comments).
std::string assemble_shader(const ShaderSources& src, const std::string& name, const std::string& defines = "");

// "   1 | first line\n   2 | …": the listing that compiler logs refer to. With `only`
// non-empty, just those lines and `context` lines around each ("…" between gaps).
std::string numbered_source(const std::string& text, const std::vector<int>& only = {}, int context = 3);

// Line numbers a compiler log points at (Mesa "0:12(5): error", NVIDIA "0(12) : error").
std::vector<int> log_line_numbers(const std::string& log);

// A linked compute program. Needs the GL context current for every call.
class GlProgram {
 public:
  GlProgram() = default;
  // Compiles and links `name`; on failure prints the log with the numbered source to
  // stderr and throws an Error with the log and the numbered lines it points at.
  GlProgram(const ShaderSources& src, const std::string& name, const std::string& defines = "");
  ~GlProgram();
  GlProgram(GlProgram&& o) noexcept;
  GlProgram& operator=(GlProgram&& o) noexcept;
  GlProgram(const GlProgram&) = delete;
  GlProgram& operator=(const GlProgram&) = delete;

  unsigned id() const { return id_; }
  const std::string& name() const { return name_; }
  void use() const;
  // Uniform setters, for the program in use. A name the shader does not have (or that
  // the compiler removed as unused) is ignored.
  void set(const char* uniform, int v);
  void set(const char* uniform, float v);

 private:
  int location(const char* uniform);
  unsigned id_ = 0;
  std::string name_;
  std::unordered_map<std::string, int> locations_;
};

}  // namespace attnviz

#include "core/error.h"

#include <vector>

namespace attnviz {

std::string shape_str(const std::initializer_list<long long>& dims) {
  return shape_str_of(std::vector<long long>(dims));
}

}  // namespace attnviz

#include "adamant/core/param_spec.h"

#include "adamant/core/error.h"

namespace adamant {

std::size_t ParamList::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return i;
  }
  fail("no parameter named '{}'", name);
}

}  // namespace adamant

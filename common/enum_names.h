// The names of an enum's values, written once as a table that both directions read: the name
// a log line or error prints, and the value a flag or config names. A switch per direction kept
// two lists that could drift apart; a bad name is refused listing every accepted one.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace pstrain {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The name of `value`, or `unknown` for a value the table lacks (a cast from a bad integer).
template <typename E, size_t N>
const char* NameOf(const EnumName<E> (&table)[N], E value, const char* unknown = "unknown") {
  for (const EnumName<E>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return unknown;
}

// "a, b or c": the accepted names, for an error message.
template <typename E, size_t N>
std::string NamesOf(const EnumName<E> (&table)[N]) {
  std::string names;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) names += i + 1 == N ? " or " : ", ";
    names += table[i].name;
  }
  return names;
}

// The value named `name`; an error "<what> must be a, b or c, got '<name>'" otherwise.
template <typename E, size_t N>
Result<E> ValueNamed(const EnumName<E> (&table)[N], const std::string& name,
                     const std::string& what) {
  for (const EnumName<E>& entry : table) {
    if (name == entry.name) return entry.value;
  }
  return InvalidArgument(what + " must be " + NamesOf(table) + ", got '" + name + "'");
}

}  // namespace pstrain

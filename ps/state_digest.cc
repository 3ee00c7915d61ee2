#include "ps/state_digest.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/wire/keyed_hash.h"

namespace pstrain {
namespace ps {

namespace {

// Both digests walk the state alike, each through its own sink: `name(const std::string&)` and
// `bytes(const void*, size_t)`.
template <typename Name, typename Bytes>
void WalkRows(const SparseTable& table, Name name, Bytes bytes) {
  name(table.options().name);
  const SparseTable::Rows rows = table.Export();
  std::vector<size_t> order(rows.ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return rows.ids[a] < rows.ids[b]; });
  const int64_t d = table.dimension();
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(float);
  for (size_t i : order) {
    bytes(&rows.ids[i], sizeof(int64_t));
    const int64_t at = static_cast<int64_t>(i) * d;
    bytes(rows.values.data() + at, row_bytes);
    for (const Tensor& slot : rows.slots) bytes(slot.data() + at, row_bytes);
  }
}

template <typename Name, typename Bytes>
void WalkState(const std::map<std::string, Tensor>& state,
               const std::vector<const SparseTable*>& tables, Name name, Bytes bytes) {
  for (const auto& [n, tensor] : state) {
    name(n);
    bytes(tensor.data(), tensor.bytes());
  }
  for (const SparseTable* table : tables) WalkRows(*table, name, bytes);
}

}  // namespace

uint32_t StateCrc32c(const VariableStore& store, const std::vector<const SparseTable*>& tables) {
  uint32_t crc = 0;
  WalkState(
      store.StateTensors(), tables,
      // With its NUL: names stay apart.
      [&](const std::string& n) { crc = crc32c::Extend(crc, n.data(), n.size() + 1); },
      [&](const void* p, size_t n) { crc = crc32c::Extend(crc, p, n); });
  return crc;
}

std::string StateBlake2b(const std::map<std::string, Tensor>& state, int64_t global_step,
                         const std::vector<const SparseTable*>& tables) {
  wire::KeyedHash h("", 32);
  WalkState(
      state, tables, [&](const std::string& n) { h.String(n); },
      [&](const void* p, size_t n) {
        h.Number(n);  // lengths too: a tensor's bytes cannot pass for its neighbour's
        h.Bytes(p, n);
      });
  h.Number(global_step);
  return h.Final();
}

}  // namespace ps
}  // namespace pstrain

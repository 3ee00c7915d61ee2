#include "ps/state_digest.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "common/crc32c.h"

namespace pstrain {
namespace ps {

namespace {

uint32_t ExtendName(uint32_t crc, const std::string& name) {
  return crc32c::Extend(crc, name.data(), name.size() + 1);  // with its NUL: names stay apart
}

uint32_t ExtendRows(uint32_t crc, const SparseTable& table) {
  const SparseTable::Rows rows = table.Export();
  std::vector<size_t> order(rows.ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return rows.ids[a] < rows.ids[b]; });
  const int64_t d = table.dimension();
  const size_t bytes = static_cast<size_t>(d) * sizeof(float);
  for (size_t i : order) {
    crc = crc32c::Extend(crc, &rows.ids[i], sizeof(int64_t));
    const int64_t at = static_cast<int64_t>(i) * d;
    crc = crc32c::Extend(crc, rows.values.data() + at, bytes);
    for (const Tensor& slot : rows.slots) crc = crc32c::Extend(crc, slot.data() + at, bytes);
  }
  return crc;
}

}  // namespace

uint32_t StateCrc32c(const VariableStore& store, const std::vector<const SparseTable*>& tables) {
  uint32_t crc = 0;
  for (const auto& [name, tensor] : store.StateTensors()) {
    crc = ExtendName(crc, name);
    crc = crc32c::Extend(crc, tensor.data(), tensor.bytes());
  }
  for (const SparseTable* table : tables) {
    crc = ExtendRows(ExtendName(crc, table->options().name), *table);
  }
  return crc;
}

}  // namespace ps
}  // namespace pstrain

#include "common/checkpoint/variable_summary.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/checkpoint/joined_checkpoint.h"

namespace pstrain {

Result<VariableSummary> SummarizeVariable(const std::string& path, const std::string& name) {
  ASSIGN_OR_RETURN(JoinedCheckpoint joined, ReadJoinedCheckpoint(path));
  VariableSummary s;
  s.name = name;
  s.global_step = joined.data.global_step;
  auto it = joined.data.tensors.find(name);
  if (it == joined.data.tensors.end()) {
    std::string known;
    size_t i = 0;
    for (auto k = joined.data.tensors.begin(); k != joined.data.tensors.end() && i < 40; ++k, ++i) {
      known += (i ? ", " : "") + k->first;
    }
    const size_t n = joined.data.tensors.size();
    return NotFound("no variable '" + name + "' in " + path + " (it holds " + std::to_string(n) +
                    " tensors: " + known + (n > 40 ? ", ..." : "") + ")");
  }
  s.value = it->second;
  s.files = joined.files[name];
  double sum = 0, sum_sq = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < s.value.size(); ++i) {
    const float v = s.value[i];
    if (std::isnan(v)) {
      ++s.nan_count;
      continue;
    }
    if (std::isinf(v)) {
      ++s.inf_count;
      continue;
    }
    s.zero_count += v == 0.0f;
    s.min = finite == 0 ? v : std::min<double>(s.min, v);
    s.max = finite == 0 ? v : std::max<double>(s.max, v);
    sum += v;
    sum_sq += static_cast<double>(v) * v;
    ++finite;
  }
  if (finite > 0) {
    s.mean = sum / finite;
    s.stddev = std::sqrt(std::max(0.0, sum_sq / finite - s.mean * s.mean));
  }
  return s;
}

std::string FormatVariableSummary(const VariableSummary& s, int max_values) {
  std::ostringstream out;
  out << s.name << ": float32 " << s.value.shape().ToString() << ", " << s.value.size()
      << " values, global step " << s.global_step << "\n";
  for (const std::string& f : s.files) out << "  from " << f << "\n";
  out << "  min " << s.min << "  max " << s.max << "  mean " << s.mean << "  stddev " << s.stddev
      << "\n  NaN " << s.nan_count << "  Inf " << s.inf_count << "  zeros " << s.zero_count << "\n";
  out << "  values:";
  const int64_t n = s.value.size();
  const int64_t half = std::max(1, max_values / 2);
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * half && i == half) {
      out << " ... (" << n - 2 * half << " more)";
      i = n - half;
    }
    out << " " << s.value[i];
  }
  out << "\n";
  return out.str();
}

}  // namespace pstrain

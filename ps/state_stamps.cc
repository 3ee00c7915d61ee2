#include "ps/state_stamps.h"

#include <algorithm>

namespace pstrain {
namespace ps {

namespace {

// A stamp costs about 1 ms per MiB of state on the head and on each replica: never on every
// record.
constexpr auto kStampInterval = std::chrono::seconds(1);

}  // namespace

bool StateStamps::Due(bool joiner_listed, Clock::time_point now) const {
  return joiner_listed && (!last_stamp_ || now - *last_stamp_ >= kStampInterval);
}

void StateStamps::CopyInstalled(int from, int64_t sequence) { copy_ = Copy{from, sequence}; }

int64_t StateStamps::Acknowledgeable(int64_t committed, bool joiner) const {
  if (!joiner || !copy_) return committed;
  return std::min(committed, copy_->sequence);
}

StateStamps::Verdict StateStamps::Compare(const std::string& stamp, const std::string& own) {
  const bool verifying = copy_.has_value();
  if (stamp == own) {
    copy_.reset();
    return verifying ? Verdict::kVerified : Verdict::kAgrees;
  }
  return verifying ? Verdict::kForgedCopy : Verdict::kDiverged;
}

}  // namespace ps
}  // namespace pstrain

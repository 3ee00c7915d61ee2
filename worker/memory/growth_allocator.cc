#include "worker/memory/growth_allocator.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace pstrain {
namespace {

size_t RoundUp(size_t bytes, size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

std::string Printf(const char *format, double value, const char *unit) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value, unit);
  return buf;
}

}  // namespace

std::string FormatBytes(size_t bytes) {
  constexpr double kKiB = 1024.0;
  const double b = static_cast<double>(bytes);
  if (b >= kKiB * kKiB * kKiB) return Printf("%.1f %s", b / (kKiB * kKiB * kKiB), "GiB");
  if (b >= kKiB * kKiB) return Printf("%.1f %s", b / (kKiB * kKiB), "MiB");
  if (b >= kKiB) return Printf("%.1f %s", b / kKiB, "KiB");
  return std::to_string(bytes) + " B";
}

Result<std::unique_ptr<GrowthAllocator>> GrowthAllocator::Create(
    MemoryBacking *backing, const GrowthAllocatorOptions &options) {
  CHECK(backing != nullptr);
  if (!(options.memory_fraction > 0.0 && options.memory_fraction <= 1.0)) {
    return InvalidArgument("memory_fraction must be in (0, 1], got " +
                           std::to_string(options.memory_fraction));
  }
  if (options.allow_growth && options.initial_region_bytes == 0) {
    return InvalidArgument("initial_region_bytes must be > 0 with allow_growth, got 0");
  }
  const size_t total = backing->total_memory();
  const size_t limit = static_cast<size_t>(static_cast<double>(total) * options.memory_fraction) /
                       kAlignment * kAlignment;
  if (limit == 0) {
    return InvalidArgument("memory limit of " + FormatBytes(limit) + " on " + backing->name() +
                           " (fraction " + std::to_string(options.memory_fraction) + " of " +
                           FormatBytes(total) + ") is below the " + std::to_string(kAlignment) +
                           " B minimum; expected a larger memory_fraction");
  }
  std::unique_ptr<GrowthAllocator> allocator(new GrowthAllocator(backing, options, limit));
  const size_t first = options.allow_growth
                           ? std::min(limit, RoundUp(options.initial_region_bytes, kAlignment))
                           : limit;
  std::lock_guard<std::mutex> lock(allocator->mu_);
  RETURN_IF_ERROR(allocator->AddRegion(first).WithContext(
      "reserving the first " + FormatBytes(first) + " region on " + backing->name()));
  return allocator;
}

GrowthAllocator::GrowthAllocator(MemoryBacking *backing, const GrowthAllocatorOptions &options,
                                 size_t limit)
    : backing_(backing), options_(options), limit_(limit) {
  stats_.bytes_limit = limit;
}

GrowthAllocator::~GrowthAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  LOG_IF(WARNING, stats_.bytes_in_use != 0)
      << "GrowthAllocator destroyed with live allocations: " << DebugStringLocked();
  for (const Region &region : regions_) {
    if (region.size > 0) backing_->Release(reinterpret_cast<void *>(region.base), region.size);
  }
}

size_t GrowthAllocator::ReleaseFreeRegions() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!options_.allow_growth) return 0;
  size_t released = 0;
  for (Region &region : regions_) {
    if (region.size == 0) continue;
    auto it = chunks_.find(region.base);
    if (it == chunks_.end() || it->second.in_use || it->second.size != region.size) continue;
    RemoveFree(it->first, it->second);
    chunks_.erase(it);
    backing_->Release(reinterpret_cast<void *>(region.base), region.size);
    stats_.bytes_reserved -= region.size;
    --stats_.num_regions;
    released += region.size;
    region.size = 0;
  }
  if (released > 0) {
    VLOG(1) << "GrowthAllocator gave back " << FormatBytes(released) << "; " << DebugStringLocked();
  }
  return released;
}

int GrowthAllocator::BinIndex(size_t size) {
  size_t units = std::max<size_t>(size / kAlignment, 1);
  int index = 0;
  while (units > 1 && index < kNumBins - 1) {
    units >>= 1;
    ++index;
  }
  return index;
}

void GrowthAllocator::InsertFree(uintptr_t addr, const Chunk &chunk) {
  bins_[BinIndex(chunk.size)].emplace(chunk.size, addr);
}

void GrowthAllocator::RemoveFree(uintptr_t addr, const Chunk &chunk) {
  const size_t erased = bins_[BinIndex(chunk.size)].erase({chunk.size, addr});
  CHECK_EQ(erased, 1u) << "free chunk missing from its bin";
}

Status GrowthAllocator::AddRegion(size_t bytes) {
  ASSIGN_OR_RETURN(void *base, backing_->Reserve(bytes));
  CHECK_EQ(reinterpret_cast<uintptr_t>(base) % kAlignment, 0u)
      << backing_->name() << " returned memory not aligned to " << kAlignment << " bytes";
  const uintptr_t addr = reinterpret_cast<uintptr_t>(base);
  Chunk chunk{bytes, regions_.size(), false};
  regions_.push_back({addr, bytes});
  chunks_.emplace(addr, chunk);
  InsertFree(addr, chunk);
  stats_.bytes_reserved += bytes;
  ++stats_.num_regions;
  VLOG(1) << "GrowthAllocator reserved a " << FormatBytes(bytes) << " region; "
          << DebugStringLocked();
  return Status::OK();
}

Status GrowthAllocator::Grow(size_t rounded) {
  const size_t left = limit_ - stats_.bytes_reserved;
  if (!options_.allow_growth) return ResourceExhausted("allow_growth is off");
  if (rounded > left) {
    return ResourceExhausted("only " + FormatBytes(left) + " left to reserve under the limit");
  }
  // Regions double while small, as TensorFlow's; past kGrowthFloor each adds at most a
  // sixteenth of what is reserved, so that a process holds within some 6% of what it needs
  // (doubling alone can hold nearly twice). At least the request, at most what is left.
  const size_t doubled = regions_.empty() ? rounded : 2 * regions_.back().size;  // 0: given back
  const size_t step = std::max(kGrowthFloor, stats_.bytes_reserved / 16);
  const size_t next = std::min(left, std::max(std::min(doubled, step), rounded));
  Status status = AddRegion(next);
  // The device may hold less than the limit promised (other processes): take
  // just the request.
  if (!status.ok() && next > rounded) status = AddRegion(rounded);
  return status;
}

std::map<uintptr_t, GrowthAllocator::Chunk>::iterator GrowthAllocator::FindBestFit(size_t rounded) {
  // Every chunk in a higher bin is larger than any in a lower one, so the first
  // hit is the smallest fitting chunk overall.
  for (int b = BinIndex(rounded); b < kNumBins; ++b) {
    auto it = bins_[b].lower_bound({rounded, 0});
    if (it != bins_[b].end()) return chunks_.find(it->second);
  }
  return chunks_.end();
}

Result<void *> GrowthAllocator::Allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > limit_) {
    return OutOfMemory(bytes, ResourceExhausted("the request is larger than the whole limit"));
  }
  const size_t rounded = RoundUp(std::max<size_t>(bytes, 1), kAlignment);
  auto it = FindBestFit(rounded);
  if (it == chunks_.end()) {
    const Status grown = Grow(rounded);
    if (!grown.ok()) return OutOfMemory(bytes, grown);
    it = FindBestFit(rounded);
    CHECK(it != chunks_.end()) << "a new region of at least the request did not fit it";
  }
  const uintptr_t addr = it->first;
  Chunk &chunk = it->second;
  RemoveFree(addr, chunk);
  // With sizes in multiples of kAlignment any remainder can serve a later
  // request: split it.
  if (chunk.size > rounded) {
    Chunk rest{chunk.size - rounded, chunk.region, false};
    chunk.size = rounded;
    chunks_.emplace(addr + rounded, rest);
    InsertFree(addr + rounded, rest);
  }
  chunk.in_use = true;
  stats_.bytes_in_use += chunk.size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.largest_alloc = std::max(stats_.largest_alloc, chunk.size);
  ++stats_.num_allocs;
  return reinterpret_cast<void *>(addr);
}

void GrowthAllocator::Free(void *ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = chunks_.find(reinterpret_cast<uintptr_t>(ptr));
  CHECK(it != chunks_.end() && it->second.in_use)
      << "GrowthAllocator::Free(" << ptr << "): not a live allocation of this allocator";
  it->second.in_use = false;
  stats_.bytes_in_use -= it->second.size;

  auto next = std::next(it);
  if (next != chunks_.end() && !next->second.in_use && next->second.region == it->second.region) {
    RemoveFree(next->first, next->second);
    it->second.size += next->second.size;
    chunks_.erase(next);
  }
  if (it != chunks_.begin()) {
    auto prev = std::prev(it);
    if (!prev->second.in_use && prev->second.region == it->second.region) {
      RemoveFree(prev->first, prev->second);
      prev->second.size += it->second.size;
      chunks_.erase(it);
      it = prev;
    }
  }
  InsertFree(it->first, it->second);
}

size_t GrowthAllocator::AllocatedSize(const void *ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = chunks_.find(reinterpret_cast<uintptr_t>(ptr));
  CHECK(it != chunks_.end() && it->second.in_use)
      << "GrowthAllocator::AllocatedSize(" << ptr << "): not a live allocation";
  return it->second.size;
}

AllocatorStats GrowthAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<RegionInfo> GrowthAllocator::Regions() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RegionInfo> infos(regions_.size());
  for (const auto &[addr, chunk] : chunks_) {
    RegionInfo &info = infos[chunk.region];
    info.bytes = regions_[chunk.region].size;
    ++info.num_chunks;
    if (!chunk.in_use) {
      ++info.num_free_chunks;
      info.largest_free_chunk = std::max(info.largest_free_chunk, chunk.size);
    }
  }
  // Regions given back hold no chunks: leave them out.
  infos.erase(std::remove_if(infos.begin(), infos.end(),
                             [](const RegionInfo &i) { return i.num_chunks == 0; }),
              infos.end());
  return infos;
}

Status GrowthAllocator::OutOfMemory(size_t bytes, const Status &cause) const {
  char fraction[32];
  std::snprintf(fraction, sizeof(fraction), "%.2f", options_.memory_fraction);
  return ResourceExhausted(
      "out of GPU memory allocating " + FormatBytes(bytes) + " on " + backing_->name() +
      ": in use " + FormatBytes(stats_.bytes_in_use) + ", reserved " +
      FormatBytes(stats_.bytes_reserved) + " of a " + FormatBytes(limit_) + " limit (fraction " +
      fraction + " of " + FormatBytes(backing_->total_memory()) + "), " +
      std::to_string(stats_.num_regions) + (stats_.num_regions == 1 ? " region" : " regions") +
      " (" + cause.message() + "); try --gpu_memory_fraction or a smaller batch");
}

std::string GrowthAllocator::DebugString() const {
  std::lock_guard<std::mutex> lock(mu_);
  return DebugStringLocked();
}

std::string GrowthAllocator::DebugStringLocked() const {
  return "GrowthAllocator on " + backing_->name() + ": in use " + FormatBytes(stats_.bytes_in_use) +
         " (peak " + FormatBytes(stats_.peak_bytes_in_use) + "), reserved " +
         FormatBytes(stats_.bytes_reserved) + " of a " + FormatBytes(limit_) + " limit in " +
         std::to_string(stats_.num_regions) + " regions, " + std::to_string(stats_.num_allocs) +
         " allocations, largest " + FormatBytes(stats_.largest_alloc) +
         (options_.allow_growth ? ", growing" : "");
}

}  // namespace pstrain

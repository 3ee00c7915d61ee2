// Runs one function per rank, each on its own thread over a shared CPU context (gloo's
// base_test), and returns each rank's Status.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "worker/collectives/cpu_collectives.h"

namespace pstrain {

inline std::vector<Status> RunRanks(int size, const std::function<Status(Collectives&)>& body) {
  auto context = std::make_shared<CpuCollectivesContext>(size);
  std::vector<Status> statuses(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      auto collectives = CpuCollectives::Create(context, rank);
      CHECK(collectives.ok()) << collectives.status().ToString();
      statuses[rank] = body(**collectives);
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

}  // namespace pstrain

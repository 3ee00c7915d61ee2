// Runs one function per rank, each on its own thread (gloo's base_test), and returns each
// rank's Status. The ranks meet either in memory (CpuCollectives) or, as worker processes on
// one host do, through a HostHub over loopback TCP (HubCollectives).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "worker/distributed/collectives/cpu_collectives.h"
#include "worker/distributed/collectives/host_hub.h"
#include "worker/distributed/collectives/hub_collectives.h"

namespace pstrain {

enum class RankTransport { kThreads, kHub };

inline std::string TransportName(RankTransport t) {
  return t == RankTransport::kThreads ? "Threads" : "Hub";
}

inline std::vector<Status> RunRanks(int size, const std::function<Status(Collectives&)>& body,
                                    RankTransport transport = RankTransport::kThreads) {
  auto context = std::make_shared<CpuCollectivesContext>(size);
  std::unique_ptr<HostHub> hub;
  if (transport == RankTransport::kHub) {
    HostHubOptions options;
    options.size = size;
    auto started = HostHub::Start("tcp://127.0.0.1:0", options);
    CHECK(started.ok()) << started.status().ToString();
    hub = std::move(started).value();
  }
  std::vector<Status> statuses(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      std::unique_ptr<Collectives> collectives;
      if (hub) {
        HubCollectivesOptions options;
        options.rank = rank;
        options.size = size;
        auto connected = HubCollectives::Connect(hub->endpoint(), options);
        CHECK(connected.ok()) << connected.status().ToString();
        collectives = std::move(connected).value();
      } else {
        auto created = CpuCollectives::Create(context, rank);
        CHECK(created.ok()) << created.status().ToString();
        collectives = std::move(created).value();
      }
      statuses[rank] = body(*collectives);
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

}  // namespace pstrain

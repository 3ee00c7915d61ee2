#include "common/wire/map_proof.h"

#include <cstdint>
#include <string>

#include "common/wire/pair_tag.h"

namespace pstrain {
namespace wire {
namespace {

constexpr char kContext[] = "pstrain shard map v1";

void Append(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The map's bytes, as the tags cover them: epoch, then per shard its members and joiners.
std::string MapBytes(const replication::ShardMap& map) {
  std::string out;
  Append(&out, map.epoch, 8);
  Append(&out, map.chains.size(), 4);
  for (size_t s = 0; s < map.chains.size(); ++s) {
    const std::vector<int>* lists[] = {&map.chains[s],
                                       s < map.joining.size() ? &map.joining[s] : nullptr};
    for (const std::vector<int>* list : lists) {
      Append(&out, list ? list->size() : 0, 4);
      if (list) {
        for (int t : *list) Append(&out, static_cast<uint32_t>(t), 4);
      }
    }
  }
  return out;
}

}  // namespace

Result<std::vector<MapProof>> ProveMap(const replication::ShardMap& map, const ClusterKeys& chief) {
  std::vector<MapProof> proofs;
  if (!chief.curve()) return proofs;
  const std::string bytes = MapBytes(map);
  for (const auto& [public_key, name] : chief.client_keys) {
    ASSIGN_OR_RETURN(std::string tag, PairTag(chief.own.secret_key, public_key, kContext, bytes));
    proofs.push_back({name, std::move(tag)});
  }
  return proofs;
}

Status CheckMapProof(const replication::ShardMap& map, const std::vector<MapProof>& proofs,
                     const ClusterKeys& own) {
  if (!own.curve()) return Status::OK();
  std::string chief;
  for (const auto& [public_key, name] : own.client_keys) {
    if (name == kChiefKeyName) chief = public_key;
  }
  if (chief.empty()) {
    return FailedPrecondition("no public key of the chief (" + std::string(kChiefKeyName) +
                              ") in " + own.dir + " to check shard maps with");
  }
  for (const MapProof& p : proofs) {
    if (p.name != own.own_name) continue;
    ASSIGN_OR_RETURN(std::string expected,
                     PairTag(own.own.secret_key, chief, kContext, MapBytes(map)));
    if (SameTag(expected, p.tag)) return Status::OK();
    return PermissionDenied("map epoch " + std::to_string(map.epoch) + " carries a proof for " +
                            own.own_name + " that the chief's key did not make");
  }
  return PermissionDenied("map epoch " + std::to_string(map.epoch) + " carries no proof for " +
                          own.own_name + " from the chief's key (" + std::to_string(proofs.size()) +
                          " proofs)");
}

}  // namespace wire
}  // namespace pstrain

// The embedding rows of a distributed worker, held by the parameter servers: each row lives on
// the server that owns its id (common/row_owner.h, ps/table_shard.h). Before a step the batch's
// distinct ids of each embedding layer are split by owner and every owner's row pull is sent at
// once; the replies are written into the layer's "rows" variable in the batch's order. After
// backward each owner gets a row push of its ids and their gradient rows. The one-process
// EmbeddingTables does the same against tables in memory; both are TableRows.
//
// Requests leave through `exchange` (PsClient::ExchangeWithShards in a worker: the router's
// retries and restarts apply), so this class holds no connection and tests drive it in-process.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/wire/message.h"
#include "worker/network/model.h"
#include "worker/training/embedding_bindings.h"
#include "worker/training/table_rows.h"

namespace pstrain {
namespace worker {

class RemoteTables : public TableRows {
 public:
  // Requests by shard (the owner of their rows, common/row_owner.h), sent together; the replies
  // in the order sent.
  using Exchange = std::function<Result<std::vector<wire::Message>>(
      std::vector<std::pair<int, wire::Message>> requests)>;

  // Binds the model's embedding layers to the config's tables (embedding_bindings.h) over
  // `servers` parameter servers.
  static Result<std::unique_ptr<RemoteTables>> Create(const ConfigNode& tables_node, Model* model,
                                                      int servers, Exchange exchange);

  bool Holds(const Variable* v) const override;
  // A training gather creates the rows its batch touches; an evaluation's (`training` false) is
  // read-only, as every evaluator's pull is to the servers.
  Status Gather(const FeatureBatch& batch, int64_t step, bool training) override;
  Status Apply(const FeatureBatch& batch, int64_t step) override;

 private:
  // One request's part of a binding: the owner and the positions of its ids in the batch's list.
  struct Part {
    size_t binding;
    int server;
    std::vector<int64_t> positions;
  };
  // Each binding's ids of `batch` split by owner (owners without ids have no part).
  std::vector<Part> Split(const FeatureBatch& batch) const;
  // The first error among `replies`, naming its server, or OK.
  static Status CheckReplies(const std::vector<wire::Message>& replies,
                             const std::vector<Part>& parts, const char* what);

  int servers_ = 1;
  Exchange exchange_;
  std::vector<EmbeddingBinding> bindings_;
  std::vector<uint64_t> push_sequence_;  // per server: row pushes sent in this process
};

}  // namespace worker
}  // namespace pstrain

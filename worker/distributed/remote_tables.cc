#include "worker/distributed/remote_tables.h"

#include <algorithm>
#include <cstring>

#include "common/row_owner.h"
#include "ps/sparse_tables_config.h"

namespace pstrain {
namespace worker {

using wire::Message;
using wire::MessageType;

Result<std::unique_ptr<RemoteTables>> RemoteTables::Create(const ConfigNode& tables_node,
                                                           Model* model, int servers,
                                                           Exchange exchange) {
  if (servers <= 0) return InvalidArgument("embedding tables need at least one parameter server");
  // Read whole, so that a config the servers would refuse is refused here too.
  ASSIGN_OR_RETURN(ps::SparseTables tables, ps::ReadSparseTables(tables_node));
  auto remote = std::unique_ptr<RemoteTables>(new RemoteTables());
  ASSIGN_OR_RETURN(remote->bindings_, BindEmbeddings(tables_node, model, tables));
  remote->servers_ = servers;
  remote->exchange_ = std::move(exchange);
  remote->push_sequence_.assign(servers, 0);
  return remote;
}

bool RemoteTables::Holds(const Variable* v) const {
  for (const EmbeddingBinding& b : bindings_) {
    if (&RowsOf(b) == v) return true;
  }
  return false;
}

std::vector<RemoteTables::Part> RemoteTables::Split(const FeatureBatch& batch) const {
  std::vector<Part> parts;
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const std::vector<int64_t>& ids = batch.ids[bindings_[i].input];
    std::vector<std::vector<int64_t>> by_server(servers_);
    for (size_t k = 0; k < ids.size(); ++k) {
      by_server[RowOwner(bindings_[i].table, ids[k], servers_)].push_back(static_cast<int64_t>(k));
    }
    for (int s = 0; s < servers_; ++s) {
      if (!by_server[s].empty()) parts.push_back({i, s, std::move(by_server[s])});
    }
  }
  return parts;
}

Status RemoteTables::CheckReplies(const std::vector<Message>& replies,
                                  const std::vector<Part>& parts, const char* what) {
  if (replies.size() != parts.size()) {
    return Internal(std::string(what) + ": " + std::to_string(replies.size()) + " replies to " +
                    std::to_string(parts.size()) + " requests");
  }
  for (size_t i = 0; i < replies.size(); ++i) {
    Status s = wire::StatusOfReply(replies[i]);
    if (!s.ok())
      return s.WithContext(std::string(what) + " to ps " + std::to_string(parts[i].server));
  }
  return Status::OK();
}

Status RemoteTables::Gather(const FeatureBatch& batch, int64_t /*step*/, bool training) {
  for (const EmbeddingBinding& b : bindings_) {
    RETURN_IF_ERROR(CheckRowsFit(b, batch.ids[b.input].size()));
  }
  const std::vector<Part> parts = Split(batch);
  std::vector<std::pair<int, Message>> requests;
  for (const Part& p : parts) {
    const EmbeddingBinding& b = bindings_[p.binding];
    Message m;
    m.type = MessageType::kRowPull;
    m.text = b.table;
    m.value = training ? 0 : 1;  // read-only: no row created, nothing counted towards admission
    for (int64_t k : p.positions) m.ids.push_back(batch.ids[b.input][k]);
    requests.emplace_back(p.server, std::move(m));
  }
  for (const EmbeddingBinding& b : bindings_) RowsOf(b).value.SetZero();
  if (requests.empty()) return Status::OK();
  ASSIGN_OR_RETURN(std::vector<Message> replies, exchange_(std::move(requests)));
  RETURN_IF_ERROR(CheckReplies(replies, parts, "row pull"));
  for (size_t i = 0; i < parts.size(); ++i) {
    const EmbeddingBinding& b = bindings_[parts[i].binding];
    const int64_t d = b.layer->dimension();
    const int64_t n = static_cast<int64_t>(parts[i].positions.size());
    if (replies[i].tensors.size() != 1 || replies[i].tensors[0].tensor.shape() != Shape{n, d}) {
      return DataLoss("row pull of table '" + b.table + "' from ps " +
                      std::to_string(parts[i].server) + ": expected one tensor [" +
                      std::to_string(n) + "," + std::to_string(d) + "]");
    }
    const float* rows = replies[i].tensors[0].tensor.data();
    float* value = RowsOf(b).value.data();
    for (int64_t j = 0; j < n; ++j) {
      std::memcpy(value + parts[i].positions[j] * d, rows + j * d, d * sizeof(float));
    }
  }
  return Status::OK();
}

Status RemoteTables::Apply(const FeatureBatch& batch, int64_t step) {
  const std::vector<Part> parts = Split(batch);
  std::vector<std::pair<int, Message>> requests;
  for (const Part& p : parts) {
    const EmbeddingBinding& b = bindings_[p.binding];
    const int64_t d = b.layer->dimension();
    const int64_t n = static_cast<int64_t>(p.positions.size());
    Message m;
    m.type = MessageType::kRowPush;
    m.text = b.table;
    m.step = step;
    m.sequence = ++push_sequence_[p.server];
    Tensor grads = Tensor::Uninitialized(Shape{n, d});
    const float* grad = RowsOf(b).grad.data();
    for (int64_t j = 0; j < n; ++j) {
      m.ids.push_back(batch.ids[b.input][p.positions[j]]);
      std::memcpy(grads.data() + j * d, grad + p.positions[j] * d, d * sizeof(float));
    }
    m.tensors.push_back({b.table, std::move(grads)});
    requests.emplace_back(p.server, std::move(m));
  }
  if (requests.empty()) return Status::OK();
  ASSIGN_OR_RETURN(std::vector<Message> replies, exchange_(std::move(requests)));
  return CheckReplies(replies, parts, "row push");
}

}  // namespace worker
}  // namespace pstrain

#include "ps/message_bound.h"

#include <algorithm>

#include "ps/sparse_tables_config.h"
#include "ps/variable_store.h"

namespace pstrain {
namespace ps {
namespace {

constexpr int64_t kIdBytes = 8;     // an int64 id
constexpr int64_t kFloatBytes = 4;  // values, gradients and slots are float32
// A fixed margin for what the config does not size (the header has its own allowance), so that
// a small model's bound is not a tight one.
constexpr uint64_t kHeadroomBytes = uint64_t{16} << 20;

// Whole MiB, as the server's line for a cut connection gives its bound.
std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// `payload` plus a quarter, the header and the headroom, at most --max_message_mb.
uint64_t WithHeadroom(uint64_t payload, const MessageSources& s, std::string* from) {
  const uint64_t bound = payload + payload / 4 + s.header_bytes + kHeadroomBytes;
  if (s.max_message_bytes > 0 && bound >= s.max_message_bytes) {
    *from = "--max_message_mb, below " + *from + " with headroom";
    return s.max_message_bytes;
  }
  return bound;
}

}  // namespace

MessageBound BoundMessages(const MessageSources& s) {
  // A push or register of every variable; an evaluator's pull is smaller.
  uint64_t client = static_cast<uint64_t>(std::max<int64_t>(s.variable_bytes, 0));
  std::string client_from = "a push of every variable: " + std::to_string(client) + " B";
  // A copy: the variables with their slots, each table's rows with theirs and their ids.
  uint64_t copy = client * static_cast<uint64_t>(1 + std::max(s.optimizer_slots, 0));
  for (const MessageSources::Table& t : s.tables) {
    const uint64_t rows = static_cast<uint64_t>(std::max<int64_t>(t.max_rows, 0));
    const uint64_t dimension = static_cast<uint64_t>(std::max<int64_t>(t.dimension, 0));
    const uint64_t push = rows * (kIdBytes + dimension * kFloatBytes);
    if (push > client) {
      client = push;
      client_from = "a row push of table " + t.name + "'s max_rows: " + std::to_string(push) + " B";
    }
    copy += rows * (kIdBytes + dimension * kFloatBytes * (1 + std::max(t.slots, 0)));
  }
  MessageBound b;
  b.client_bytes = WithHeadroom(client, s, &client_from);
  b.client_from = client_from;
  if (!s.replicated) {
    b.server_bytes = b.client_bytes;
    b.server_from = "no replicas: as a client's";
    return b;
  }
  // A record is at most a push; a copy is larger whenever the shard has anything in it.
  std::string server_from =
      "a replica copy of every variable and table row with their slots: " + std::to_string(copy) +
      " B";
  b.server_bytes = WithHeadroom(copy, s, &server_from);
  b.server_from = server_from;
  if (b.server_bytes < b.client_bytes) {  // records are pushes: never below a client's
    b.server_bytes = b.client_bytes;
    b.server_from = "a record, as a client's push";
  }
  return b;
}

Result<MessageSources> ReadMessageSources(const ConfigNode& config, int64_t variable_bytes,
                                          int64_t max_table_rows) {
  MessageSources s;
  s.variable_bytes = variable_bytes;
  ASSIGN_OR_RETURN(ConfigNode train, config.Child("train"));
  ASSIGN_OR_RETURN(std::unique_ptr<VariableStore> store, VariableStore::FromConfig(train));
  s.optimizer_slots = static_cast<int>(store->optimizer().slot_names().size());
  if (!config.Has("tables")) return s;
  ASSIGN_OR_RETURN(ConfigNode tables_node, config.Child("tables"));
  ASSIGN_OR_RETURN(SparseTables tables, ReadSparseTables(tables_node, max_table_rows));
  for (const auto& [name, table] : tables) {
    s.tables.push_back({name, table->dimension(), table->options().max_rows,
                        static_cast<int>(table->slot_names().size())});
  }
  return s;
}

std::string DescribeBound(const MessageBound& bound) {
  return "a client's messages up to " + Mib(bound.client_bytes) + " (" + bound.client_from +
         "), a server's up to " + Mib(bound.server_bytes) + " (" + bound.server_from + ")";
}

}  // namespace ps
}  // namespace pstrain

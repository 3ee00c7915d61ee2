// The largest message an honest peer sends this server, from the server's config, so that the
// connection guard (common/wire/connection_guard.h) cuts a peer's unfinished message near what
// its role could ever need rather than at --max_message_mb (4 GiB by default). A worker's push,
// the chief's register and an evaluator's pull carry at most every variable of the model; a row
// push the ids and rows of a table's max_rows; with --replicas a server's record is a push's
// size and its copy to a joiner at most the shard's variables with their optimizer slots and its
// tables' rows with theirs. Each bound is the largest of these with headroom, at most
// --max_message_mb. Kept apart from the server so that the arithmetic is tested on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"

namespace pstrain {
namespace ps {

// What the messages this server takes are made of.
struct MessageSources {
  // Every variable of the model in float32 (an upper bound of any shard's: which server holds
  // which variable depends on the workers' partition flags and, with replicas, on failovers).
  int64_t variable_bytes = 0;
  int optimizer_slots = 0;  // per dense variable (train: optimizer)
  struct Table {
    std::string name;
    int64_t dimension = 0;
    int64_t max_rows = 0;  // on this server (--max_table_rows caps it)
    int slots = 0;         // per row (tables: optimizer)
  };
  std::vector<Table> tables;
  bool replicated = false;         // --replicas > 0: other servers send records and copies
  uint64_t header_bytes = 0;       // a message's header frame at most (names, uses)
  uint64_t max_message_bytes = 0;  // --max_message_mb: no bound above it
};

struct MessageBound {
  uint64_t client_bytes = 0;  // a worker's, chief's or evaluator's key
  uint64_t server_bytes = 0;  // another server's key (client_bytes without replicas)
  std::string client_from;    // what each came from, for the server's start line
  std::string server_from;
};

MessageBound BoundMessages(const MessageSources& sources);

// The optimizer slots from `config`'s train: section and the tables from its tables: section
// (errors name the field); `variable_bytes` is the model's, which the server cannot build.
Result<MessageSources> ReadMessageSources(const ConfigNode& config, int64_t variable_bytes,
                                          int64_t max_table_rows);

// "client messages up to 17 MiB (a push of every variable: 10 B), server messages ..."
std::string DescribeBound(const MessageBound& bound);

}  // namespace ps
}  // namespace pstrain

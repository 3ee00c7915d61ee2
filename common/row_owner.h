// Which parameter server holds a row of an embedding table. Both sides compute it: a worker to
// send each id of its batch to the server that holds it, a server to refuse an id it does not
// hold. Rows are spread by id, not by table, so that one large table is split across every
// server; the id goes through a mixing hash first because click-log ids are skewed (a few ids
// are in most batches) and often sequential, and a plain modulo would put neighbouring hot ids
// on the same server. The table's name is mixed in too, so that the same hot id (0, "missing")
// of many tables does not land on one server.
#pragma once

#include <cstdint>
#include <string>

namespace pstrain {

// A 64-bit finaliser with full avalanche: every input bit flips about half the output bits.
inline uint64_t MixRowKey(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// FNV-1a of the table's name: the same value in every process and build (std::hash is not).
inline uint64_t TableKey(const std::string& table) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : table) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// The server (0 .. servers-1) holding row `id` of `table`; servers must be > 0.
inline int RowOwner(const std::string& table, int64_t id, int servers) {
  const uint64_t key = MixRowKey(static_cast<uint64_t>(id) ^ TableKey(table));
  return static_cast<int>(key % static_cast<uint64_t>(servers));
}

}  // namespace pstrain

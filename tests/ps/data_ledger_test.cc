// The data ledger (ps/data_ledger.h) driven by simulated workers that read their chunks in the
// chunks' example order, push their batches' uses, and join, leave, die or are wrongly presumed
// dead at random: every example index of every epoch must be used exactly once, checked with a
// bitmap of the indices the accepted pushes used.
#include "ps/data_ledger.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>
#include <vector>

#include "common/data/chunk_order.h"

namespace pstrain {
namespace ps {
namespace {

DataLedgerOptions Options(int64_t examples, int64_t chunk, int64_t epochs, uint64_t seed = 7) {
  DataLedgerOptions o;
  o.examples = examples;
  o.chunk_size = chunk;
  o.epochs = epochs;
  o.seed = seed;
  return o;
}

// A worker as the leased source runs it: leases in hand, each read from `skip` on in the
// chunk's example order; examples read but not yet pushed wait in `pending`.
struct SimWorker {
  std::string name;
  bool live = false;
  bool done = false;
  int64_t epoch = 0;  // the epoch it asks for next
  struct Reading {
    ChunkLease lease;
    std::vector<int64_t> order;
    int64_t next = 0;  // position in `order`
  };
  std::deque<Reading> reading;
  struct Example {
    int64_t epoch, chunk, index;
  };
  std::vector<Example> pending;

  void Drop() {
    reading.clear();
    pending.clear();
  }
};

struct Simulation {
  DataLedger ledger;
  uint64_t seed;
  std::vector<SimWorker> workers;
  std::vector<std::vector<bool>> seen;  // by epoch, by example index
  int duplicates = 0;

  Simulation(const DataLedgerOptions& o, int n)
      : ledger(o), seed(o.seed), workers(n), seen(o.epochs, std::vector<bool>(o.examples)) {
    for (int i = 0; i < n; ++i) workers[i].name = "worker " + std::to_string(i);
  }

  // Pushes `w`'s pending examples; an aborted push drops everything the worker holds.
  void Push(SimWorker& w) {
    if (w.pending.empty()) return;
    std::vector<wire::ChunkUse> uses;
    for (const auto& e : w.pending) {
      if (uses.empty() || uses.back().epoch != e.epoch || uses.back().chunk != e.chunk) {
        uses.push_back({e.epoch, e.chunk, 0});
      }
      ++uses.back().count;
    }
    Status s = ledger.Use(w.name, uses);
    if (s.code() == StatusCode::kAborted) {
      w.Drop();
      return;
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const auto& e : w.pending) {
      if (seen[e.epoch][e.index]) ++duplicates;
      seen[e.epoch][e.index] = true;
    }
    w.pending.clear();
  }

  // Reads up to `batch` examples, leasing as it needs; pushes them now or, with `defer`, later.
  void Step(SimWorker& w, int batch, bool defer) {
    int read = 0;
    while (read < batch && !w.done) {
      while (!w.reading.empty() && w.reading.front().next == w.reading.front().lease.size) {
        w.reading.pop_front();
      }
      if (w.reading.empty()) {
        Result<ChunkLease> lease = ledger.Lease(w.name, w.epoch);
        if (lease.status().code() == StatusCode::kResourceExhausted) {
          Push(w);  // its older chunks' uses first
          lease = ledger.Lease(w.name, w.epoch);
        }
        if (lease.status().code() == StatusCode::kAborted) {
          w.Drop();
          continue;
        }
        if (lease.status().code() == StatusCode::kOutOfRange) {
          w.done = true;
          break;
        }
        if (lease.status().code() == StatusCode::kUnavailable) break;
        ASSERT_TRUE(lease.ok()) << lease.status().ToString();
        w.epoch = lease->epoch;
        SimWorker::Reading r;
        r.lease = *lease;
        r.order = data::ExampleOrder(seed, lease->epoch, lease->chunk, lease->size);
        r.next = lease->skip;
        w.reading.push_back(std::move(r));
        continue;
      }
      SimWorker::Reading& r = w.reading.front();
      w.pending.push_back({r.lease.epoch, r.lease.chunk, r.lease.first + r.order[r.next++]});
      ++read;
    }
    if (!defer) Push(w);
  }
};

TEST(DataLedgerTest, EveryExampleIsUsedOncePerEpochWhateverJoinsAndLeaves) {
  std::mt19937_64 rng(20261125);
  for (int script = 0; script < 1000; ++script) {
    const int64_t chunk = 1 + rng() % 40;
    const int64_t examples = 1 + rng() % 400;
    const int64_t epochs = 1 + rng() % 3;
    const int n = 1 + rng() % 4;
    Simulation sim(Options(examples, chunk, epochs, rng()), n);
    sim.workers[0].live = true;
    for (int tick = 0; tick < 100000; ++tick) {
      bool all_done = true;
      for (const SimWorker& w : sim.workers) all_done &= (!w.live || w.done);
      bool any_live = false;
      for (const SimWorker& w : sim.workers) any_live |= w.live;
      if (all_done && any_live) break;
      SimWorker& w = sim.workers[rng() % n];
      const int action = rng() % 100;
      if (!w.live) {
        if (action < 30 || !any_live) {  // joins: a new process of this task
          sim.ledger.Forget(w.name);
          const std::string name = w.name;
          w = SimWorker();
          w.name = name;
          w.live = true;
        }
      } else if (action < 3) {  // leaves: pushes what it read, says goodbye
        sim.Push(w);
        ASSERT_FALSE(HasFailure()) << "script " << script;
        sim.ledger.Release(w.name);
        w.live = false;
      } else if (action < 6) {  // dies: its unpushed examples are lost
        sim.ledger.Release(w.name);
        w.live = false;
      } else if (action < 8) {  // presumed dead, but keeps running
        sim.ledger.Release(w.name);
      } else if (!w.done) {
        sim.Step(w, 1 + rng() % 64, action % 3 == 0);
        ASSERT_FALSE(HasFailure()) << "script " << script;
      }
    }
    ASSERT_EQ(sim.duplicates, 0) << "script " << script;
    for (int64_t e = 0; e < epochs; ++e) {
      int64_t unused = 0;
      for (bool b : sim.seen[e]) unused += b ? 0 : 1;
      ASSERT_EQ(unused, 0) << "script " << script << " epoch " << e;
      ASSERT_EQ(sim.ledger.used(e), examples) << "script " << script << " epoch " << e;
      ASSERT_TRUE(sim.ledger.complete(e)) << "script " << script << " epoch " << e;
    }
  }
}

TEST(DataLedgerTest, ChunksAreHandedOutInAnOrderDrawnFromTheSeedAndEpoch) {
  DataLedger a(Options(60000, 1024, 2, 3)), b(Options(60000, 1024, 2, 3));
  EXPECT_EQ(a.chunks_per_epoch(), 59);
  std::vector<int64_t> first, second;
  for (int i = 0; i < 59; ++i) {
    const std::string w = "worker " + std::to_string(i);
    Result<ChunkLease> l = a.Lease(w, 0);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(l->epoch, 0);
    EXPECT_EQ(l->first, l->chunk * 1024);
    EXPECT_EQ(l->size, l->chunk == 58 ? 60000 - 58 * 1024 : 1024);
    first.push_back(l->chunk);
    Result<ChunkLease> m = b.Lease(w, 0);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->chunk, l->chunk);
  }
  EXPECT_EQ(first, data::ChunkOrder(3, 0, 59));
  EXPECT_NE(data::ChunkOrder(3, 0, 59), data::ChunkOrder(3, 1, 59));
  EXPECT_NE(data::ChunkOrder(3, 0, 59), data::ChunkOrder(4, 0, 59));
  // Nothing free in epoch 0: the next lessee goes on to epoch 1.
  Result<ChunkLease> next = a.Lease("worker 99", 0);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->epoch, 1);
  EXPECT_EQ(next->chunk, data::ChunkOrder(3, 1, 59)[0]);
}

TEST(DataLedgerTest, AWorkerHoldsAtMostTwoLeases) {
  DataLedger ledger(Options(100, 10, 1));
  ASSERT_TRUE(ledger.Lease("worker 1", 0).ok());
  ASSERT_TRUE(ledger.Lease("worker 1", 0).ok());
  Result<ChunkLease> third = ledger.Lease("worker 1", 0);
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("worker 1 holds 2 leases"), std::string::npos)
      << third.status().message();
}

TEST(DataLedgerTest, ALeftWorkersChunkIsLeasedAgainFromWhereItsPushesStopped) {
  DataLedger ledger(Options(100, 10, 1));
  Result<ChunkLease> mine = ledger.Lease("worker 1", 0);
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(mine->skip, 0);
  ASSERT_TRUE(ledger.Use("worker 1", {{0, mine->chunk, 3}, {0, mine->chunk, 2}}).ok());
  EXPECT_EQ(ledger.Release("worker 1"), 1);
  EXPECT_TRUE(ledger.leases_of("worker 1").empty());
  Result<ChunkLease> again = ledger.Lease("worker 2", 0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->chunk, mine->chunk);  // the first free chunk in the epoch's order
  EXPECT_EQ(again->skip, 5);
  // Its last five examples end the chunk's lease; a sixth is beyond it, refused by name.
  Status beyond = ledger.Use("worker 2", {{0, mine->chunk, 6}});
  EXPECT_EQ(beyond.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(beyond.message().find("which has 5 left of 10"), std::string::npos) << beyond.message();
  ASSERT_TRUE(ledger.Use("worker 2", {{0, mine->chunk, 5}}).ok());
  EXPECT_TRUE(ledger.leases_of("worker 2").empty());
  EXPECT_EQ(ledger.used(0), 10);
}

TEST(DataLedgerTest, AChunkGivenBackInAnEarlierEpochIsFinishedFirstByWhoeverAsks) {
  DataLedger ledger(Options(20, 10, 2));
  Result<ChunkLease> a = ledger.Lease("worker 1", 0);
  Result<ChunkLease> b = ledger.Lease("worker 2", 0);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(ledger.Use("worker 2", {{0, b->chunk, 10}}).ok());
  Result<ChunkLease> later = ledger.Lease("worker 2", 0);  // epoch 0 has nothing free
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->epoch, 1);
  ASSERT_TRUE(ledger.Use("worker 1", {{0, a->chunk, 7}}).ok());
  ledger.Release("worker 1");
  Result<ChunkLease> back = ledger.Lease("worker 2", 1);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->epoch, 0);
  EXPECT_EQ(back->chunk, a->chunk);
  EXPECT_EQ(back->skip, 7);
}

TEST(DataLedgerTest, AUseOfARevokedLeaseIsRefused) {
  DataLedger ledger(Options(100, 10, 1));
  Result<ChunkLease> mine = ledger.Lease("worker 1", 0);
  ASSERT_TRUE(mine.ok());
  ASSERT_TRUE(ledger.Use("worker 1", {{0, mine->chunk, 4}}).ok());
  ledger.Release("worker 1");  // presumed dead; it was only slow
  Result<ChunkLease> theirs = ledger.Lease("worker 2", 0);
  ASSERT_TRUE(theirs.ok());
  ASSERT_EQ(theirs->chunk, mine->chunk);
  Status late = ledger.Use("worker 1", {{0, mine->chunk, 2}});
  EXPECT_EQ(late.code(), StatusCode::kAborted);
  EXPECT_NE(late.message().find("revoked"), std::string::npos) << late.message();
  // Told once, at its next lease; then it leases afresh.
  EXPECT_EQ(ledger.Lease("worker 1", 0).status().code(), StatusCode::kAborted);
  Result<ChunkLease> fresh = ledger.Lease("worker 1", 0);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_NE(fresh->chunk, mine->chunk);
  // Another worker's chunk, or one never leased, is refused the same way; nothing changed.
  EXPECT_EQ(ledger.Use("worker 1", {{0, mine->chunk, 1}}).code(), StatusCode::kAborted);
  Status unleased = ledger.Use("worker 3", {{0, 9, 1}});
  EXPECT_EQ(unleased.code(), StatusCode::kAborted);
  EXPECT_NE(unleased.message().find("not leased to it"), std::string::npos) << unleased.message();
  EXPECT_EQ(ledger.used(0), 4);
  // A use outside the data, or of no examples, is named.
  EXPECT_EQ(ledger.Use("worker 1", {{0, 10, 1}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.Use("worker 1", {{1, 0, 1}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.Use("worker 1", {{0, fresh->chunk, 0}}).code(), StatusCode::kInvalidArgument);
}

TEST(DataLedgerTest, AfterTheLastEpochALeaseIsOutOfRange) {
  DataLedger ledger(Options(15, 10, 1));
  Result<ChunkLease> a = ledger.Lease("worker 1", 0);
  Result<ChunkLease> b = ledger.Lease("worker 1", 0);
  ASSERT_TRUE(a.ok() && b.ok());
  // Every chunk is leased: another worker must wait, not end, since worker 1 may leave.
  EXPECT_EQ(ledger.Lease("worker 2", 0).status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(ledger.Use("worker 1", {{0, a->chunk, a->size}, {0, b->chunk, b->size}}).ok());
  EXPECT_TRUE(ledger.complete(0));
  EXPECT_EQ(ledger.used(0), 15);
  EXPECT_EQ(ledger.Lease("worker 2", 0).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ledger.Lease("worker 2", 1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ledger.Lease("worker 2", -1).status().code(), StatusCode::kInvalidArgument);
}

TEST(DataLedgerTest, ALedgerInstalledFromASnapshotContinuesIdentically) {
  std::mt19937_64 rng(5);
  DataLedger head(Options(500, 16, 3, 11));
  // Some history: leases, partial uses, a release, a revoked worker.
  for (int i = 0; i < 40; ++i) {
    const std::string w = "worker " + std::to_string(rng() % 4);
    Result<ChunkLease> l = head.Lease(w, 0);
    if (l.ok() && rng() % 2) {
      const int64_t count = 1 + static_cast<int64_t>(rng() % (l->size - l->skip));
      ASSERT_TRUE(head.Use(w, {{l->epoch, l->chunk, count}}).ok());
    }
    if (rng() % 10 == 0) head.Release(w);
  }
  DataLedger replica(Options(500, 16, 3, 11));
  ASSERT_TRUE(replica.Install(head.Snapshot()).ok());
  EXPECT_EQ(replica.Snapshot().used, head.Snapshot().used);
  EXPECT_EQ(replica.Snapshot().leases, head.Snapshot().leases);
  EXPECT_EQ(replica.Snapshot().revoked, head.Snapshot().revoked);
  // The same calls from here give the same answers on both.
  for (int i = 0; i < 400; ++i) {
    const std::string w = "worker " + std::to_string(rng() % 5);
    const int op = rng() % 10;
    if (op < 6) {
      const int64_t e = rng() % 3;
      Result<ChunkLease> a = head.Lease(w, e), b = replica.Lease(w, e);
      ASSERT_EQ(a.status().code(), b.status().code());
      if (a.ok()) {
        EXPECT_EQ(a->chunk, b->chunk);
        EXPECT_EQ(a->skip, b->skip);
      }
    } else if (op < 9) {
      for (const HeldLease& l : head.leases_of(w)) {
        const std::vector<wire::ChunkUse> uses = {{l.epoch, l.chunk, 1 + int64_t(rng() % 8)}};
        EXPECT_EQ(head.Use(w, uses).code(), replica.ApplyRecordUses(w, uses).code());
      }
    } else {
      EXPECT_EQ(head.Release(w), replica.Release(w));
    }
  }
  for (int64_t e = 0; e < 3; ++e) EXPECT_EQ(head.used(e), replica.used(e));
  EXPECT_EQ(replica.Snapshot().used, head.Snapshot().used);
  EXPECT_EQ(replica.Snapshot().leases, head.Snapshot().leases);
}

TEST(DataLedgerTest, AHostileSnapshotIsRefusedWholeNamingTheEntry) {
  DataLedger ledger(Options(100, 10, 1));
  ASSERT_TRUE(ledger.Lease("worker 1", 0).ok());
  const DataLedgerSnapshot before = ledger.Snapshot();
  DataLedgerSnapshot bad;
  bad.used = {{0, 1, 3}, {0, 2, 11}};
  Status s = ledger.Install(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("epoch 0 chunk 2 counts 11"), std::string::npos) << s.message();
  bad.used = {{0, 1, 10}};
  bad.leases = {{"worker 1", 0, 1}};  // a lease of a chunk used whole
  EXPECT_FALSE(ledger.Install(bad).ok());
  bad.used = {{3, 0, 1}};
  bad.leases = {};
  EXPECT_FALSE(ledger.Install(bad).ok());
  EXPECT_EQ(ledger.Snapshot().leases, before.leases);
}

TEST(DataLedgerTest, OptionsOutsideTheirRangesAreNamed) {
  EXPECT_TRUE(CheckDataLedgerOptions(Options(60000, 1024, 4)).ok());
  EXPECT_NE(CheckDataLedgerOptions(Options(0, 1024, 4)).message().find("examples per epoch"),
            std::string::npos);
  EXPECT_NE(CheckDataLedgerOptions(Options(10, 0, 4)).message().find("--data_chunk"),
            std::string::npos);
  EXPECT_NE(CheckDataLedgerOptions(Options(10, 5, 0)).message().find("--num_epochs"),
            std::string::npos);
}

}  // namespace
}  // namespace ps
}  // namespace pstrain

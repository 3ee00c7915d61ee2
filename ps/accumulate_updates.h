// --update_mode=accumulate and sync (ps/update_policy.h): pushes are summed in an open window
// until it holds the pushes the shard requires, then the window's mean is applied as one update.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ps/gradient_accumulator.h"
#include "ps/update_policy.h"

namespace pstrain {
namespace ps {

class AccumulateUpdates : public UpdatePolicy {
 public:
  AccumulateUpdates(UpdateShard* shard, int64_t max_staleness, std::string log_name)
      : shard_(shard), max_staleness_(max_staleness), log_name_(std::move(log_name)) {}
  const char* name() const override { return "accumulate"; }
  void Reset(const VariableStore& store) override;
  void Take(const std::string& peer, const wire::Message& request, const PushContents& push,
            std::vector<Outgoing>* out) override;
  void AnswerWithWindow(const std::string& peer, wire::Message reply) override;
  bool CloseIfComplete(std::vector<Outgoing>* out) override;
  std::vector<HeldReply> TakeHeld() override;
  bool window_empty() const override { return pushes_ == 0; }
  size_t pending() const override { return replies_.size(); }

 protected:
  // Where a push's reply waits: answered now, or (replicated) with the window's record.
  virtual void HoldReply(const std::string& peer, const wire::Message& request,
                         std::vector<Outgoing>* out);
  // The replies the window's update releases, besides those kept by HoldReply.
  virtual std::vector<HeldReply> TakeReleased() { return {}; }
  UpdateShard* shard_;

 private:
  // Drops a push computed from too old a version, answering it (value -1, the reason in text).
  void DropStale(const std::string& peer, const wire::Message& request, std::vector<Outgoing>* out);
  // Applies the window's mean and releases what waited for it.
  void Close(std::vector<Outgoing>* out);
  void Abandon();

  const int64_t max_staleness_;
  const std::string log_name_;
  std::map<std::string, GradientAccumulator> sums_;
  int pushes_ = 0;                  // pushes in the open window
  NamedTensors assigns_;            // replicated: assigned since the last record
  std::vector<HeldReply> replies_;  // replicated: answered with the window's record
  std::vector<wire::PushEntry> entries_;
  std::vector<std::string> pushers_;  // replicated: whose retries wait for the window's record
};

class SyncUpdates : public AccumulateUpdates {
 public:
  using AccumulateUpdates::AccumulateUpdates;
  const char* name() const override { return "sync"; }
  bool HoldPull(const std::string& peer, const wire::Message& request) override;
  bool HoldRetry(const std::string& peer, const wire::Message& request) override;
  std::vector<HeldReply> TakeHeld() override;
  std::vector<std::string> waiting_pushers() const override;
  size_t pending() const override;

 private:
  void HoldReply(const std::string& peer, const wire::Message& request,
                 std::vector<Outgoing>* out) override;
  std::vector<HeldReply> TakeReleased() override;

  struct Waiting {
    std::string peer;
    wire::Message request;
  };
  std::vector<Waiting> pushes_waiting_;
  std::vector<Waiting> pulls_waiting_;  // behind their sender's push
};

}  // namespace ps
}  // namespace pstrain

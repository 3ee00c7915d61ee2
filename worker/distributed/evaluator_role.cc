// The evaluator role (worker_role.h): pulls the variables every --eval_interval_secs and
// evaluates them on the test split, until the workers reach the last step.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <thread>

#include "common/summary/summary_writer.h"
#include "worker/distributed/ps_client.h"
#include "worker/distributed/role_input.h"
#include "worker/distributed/role_setup.h"
#include "worker/distributed/worker_role.h"
#include "worker/training/evaluation_scalars.h"

namespace pstrain {
namespace worker {

using Clock = std::chrono::steady_clock;

namespace {

void WarnUncounted(const std::string& who, int evaluators) {
  LOG(WARNING) << who << ": the cluster counts " << evaluators << " evaluator(s) (--evaluators,"
               << " or TF_CONFIG's cluster, which Kubeflow's operator writes without the "
               << "evaluator): this one evaluates while training runs, but the end does not "
               << "wait for it (the chief evaluates the final model itself)";
}

// One evaluation in the log and, where there is one, in the summaries.
Status Report(const std::string& who, int64_t step, const Evaluation& e, SummaryWriter* log) {
  LOG(INFO) << who << ": step " << step << ": test accuracy " << std::fixed << std::setprecision(4)
            << e.accuracy << ", test loss " << e.loss << (e.auc >= 0 ? ", test AUC " : "")
            << (e.auc >= 0 ? std::to_string(e.auc) : "");
  if (log == nullptr) return Status::OK();
  AddEvaluationScalars(e, step, log);
  return log->Flush();
}

// Sleeps until `next`, or until the heartbeats carry the last step: that one is evaluated at once,
// not at the next interval, since the chief's final barrier waits for this evaluator.
void WaitForNext(Clock::time_point next, const PsClient& client, int64_t max_steps) {
  while (Clock::now() < next && client.HeardStep() < max_steps) {
    std::this_thread::sleep_until(std::min(next, Clock::now() + std::chrono::milliseconds(200)));
  }
}

}  // namespace

Status RunEvaluator(const RoleOptions& o) {
  const std::string who = "evaluator " + std::to_string(o.task_index);
  // Kubeflow's operator writes TF_CONFIG's cluster without the evaluator, so every other role
  // counts none (--evaluators=0). Such an evaluator still evaluates while training runs, but the
  // final barrier does not wait for it, and a run that ends first ends it too.
  const bool counted = o.task_index < o.evaluators;
  ASSIGN_OR_RETURN(RoleSetup s, LoadRoleSetup(o));
  DeviceOptions device_options = o.device;
  if (s.clicks) device_options.device = "cpu";  // its named inputs and tables are CPU code
  ASSIGN_OR_RETURN(std::unique_ptr<ComputeDevice> device, ComputeDevice::Open(device_options, who));
  Model* model = s.model.get();
  std::unique_ptr<PsClient> client;
  ASSIGN_OR_RETURN(std::unique_ptr<RoleInput> input,
                   OpenRoleInput(s, o, 0, 0, [&](std::vector<std::pair<int, wire::Message>> r) {
                     return client->ExchangeWithShards(std::move(r));
                   }));
  ASSIGN_OR_RETURN(client, PsClient::Connect(o.ps_hosts, "evaluator", o.task_index,
                                             ServerVariables(model, *input), o.partition_bytes,
                                             o.curve, o.replicas));
  client->set_unavailable_timeout(std::chrono::seconds(o.unavailable_timeout_secs));
  if (!counted) {
    // Servers gone for this long mean the run is over (or failed): nobody waits for this one.
    client->set_unavailable_timeout(
        std::min(std::chrono::seconds(o.unavailable_timeout_secs), std::chrono::seconds(30)));
    WarnUncounted(who, o.evaluators);
  }
  if (Status ready = client->WaitUntilInitialized(std::chrono::seconds(o.init_timeout_secs),
                                                  /*ended_when_gone=*/!counted);
      !ready.ok()) {
    // A run short enough to end before this evaluator saw it initialised: nothing to evaluate.
    if (!counted && ready.code() == StatusCode::kOutOfRange) {
      LOG(INFO) << who << ": the servers ended before this uncounted evaluator saw the model ("
                << ready.ToString() << ")";
      return Status::OK();
    }
    return ready;
  }
  RETURN_IF_ERROR(device->Place(model));
  std::unique_ptr<SummaryWriter> log;
  if (!o.logdir.empty()) {
    ASSIGN_OR_RETURN(log, SummaryWriter::Open(o.logdir, "eval"));
  }
  int64_t last = -1;
  for (;;) {
    const auto start = Clock::now();
    Result<int64_t> pulled = client->Pull();
    if (!pulled.ok() && !counted &&
        (pulled.status().code() == StatusCode::kOutOfRange ||
         pulled.status().code() == StatusCode::kUnavailable)) {
      LOG(INFO) << who << ": the servers have ended (" << pulled.status().ToString()
                << "), so has this uncounted evaluator; the last step it heard of: "
                << client->HeardStep();
      return Status::OK();
    }
    ASSIGN_OR_RETURN(int64_t step, std::move(pulled));
    if (step != last) {
      model->UploadVariables();
      ASSIGN_OR_RETURN(Evaluation e, input->Evaluate(model, step));
      RETURN_IF_ERROR(Report(who, step, e, log.get()));
      last = step;
    }
    if (step >= s.max_steps) break;
    WaitForNext(
        start + std::chrono::milliseconds(static_cast<int64_t>(o.eval_interval_secs * 1000)),
        *client, s.max_steps);
  }
  if (!counted) return Status::OK();
  return client->Barrier("done", static_cast<int>(o.worker_hosts.size()) + o.evaluators);
}

}  // namespace worker
}  // namespace pstrain

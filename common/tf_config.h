// A role's place in its cluster from TensorFlow's TF_CONFIG environment variable, as Kubeflow's
// TFJob operator (and tf.distribute's cluster resolvers) write it:
//   {"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"], "ps": ["h3:2222"],
//                "evaluator": ["h4:2222"]},
//    "task": {"type": "worker", "index": 1}, "environment": "cloud"}
// TF-1's `master` job is the chief. pstrain's workers are TF's chief followed by its workers: the
// chief is worker 0 and TF's worker i is pstrain's worker i+1 when there is a chief. Evaluators are
// counted, not addressed (they only connect). The role's explicit flags win over what TF_CONFIG
// says (pstrain_main.cc).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain {

struct TfConfigRole {
  std::string job_name;  // ps, worker or evaluator
  int task_index = 0;
  std::vector<std::string> ps_hosts;
  std::vector<std::string> worker_hosts;  // the chief first, if there is one
  int evaluators = 0;
};

// Parses `json`; an error names the field that is wrong and what was expected
// ("TF_CONFIG: task.index 3 is out of range for 2 worker task(s)").
Result<TfConfigRole> ParseTfConfig(const std::string& json);

}  // namespace pstrain

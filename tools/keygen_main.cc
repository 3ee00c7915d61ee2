// pstrain-keygen: fresh CURVE keys for every role of a cluster, one private directory per role
// holding its own secret certificate and every role's public one (layout in curve.h). The
// launcher runs it; each role then gets --curve_keys=<out_dir>/<job>-<task>.
//   pstrain-keygen --out_dir=runs/dist/keys --ps=2 --worker=2 --evaluator=1
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "common/flags.h"
#include "common/wire/curve.h"

DEFINE_string(out_dir, "", "new directory for the keys (created with mode 0700)");
DEFINE_int32(ps, 1, "parameter server tasks");
DEFINE_int32(worker, 1, "worker tasks");
DEFINE_int32(evaluator, 0, "evaluator tasks");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "writes CURVE keys for a pstrain cluster.\n  pstrain-keygen --out_dir=DIR --ps=N "
      "--worker=N [--evaluator=N]");
  pstrain::ParseFlags(&argc, &argv, {"tools/keygen_main.cc"});
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1 || FLAGS_out_dir.empty()) {
    std::fprintf(stderr, "pstrain-keygen: %s\n",
                 argc > 1 ? "flags are --name=value" : "--out_dir is required");
    return 2;
  }
  pstrain::Status status =
      pstrain::wire::WriteClusterKeys(FLAGS_out_dir, FLAGS_ps, FLAGS_worker, FLAGS_evaluator);
  if (!status.ok()) {
    std::fprintf(stderr, "pstrain-keygen: %s\n", status.message().c_str());
    return status.code() == pstrain::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::printf("pstrain-keygen: keys for %d ps, %d worker(s), %d evaluator(s) in %s/<job>-<task>\n",
              FLAGS_ps, FLAGS_worker, FLAGS_evaluator, FLAGS_out_dir.c_str());
  return 0;
}

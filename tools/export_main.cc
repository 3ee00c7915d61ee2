// pstrain-export: writes a trained model in a format other tools serve (--format=onnx:
// worker/training/onnx_export.h), to take it away from pstrain.
//   pstrain-export --format=onnx --config=configs/refnet.yaml --checkpoint=runs/refnet
//       --output=model.onnx   (one command line)
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>

#include "common/config.h"
#include "common/flags.h"
#include "worker/training/onnx_export.h"
#include "worker/training/trained_weights.h"

DEFINE_string(format, "onnx", "what to write: onnx (opset 13)");
DEFINE_string(config, "configs/refnet.yaml", "the model config the weights were trained with");
DEFINE_string(checkpoint, "",
              "the weights: a train_dir (its model.safetensors, else its latest checkpoint), a "
              "checkpoint file or a .safetensors file");
DEFINE_string(output, "model.onnx", "the ONNX file to write");
DEFINE_bool(softmax_output, true,
            "also output \"probabilities\" (the softmax of \"logits\") over the classes");

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Writes a trained model as ONNX (opset 13): input \"input\" [N, C, H, W] float, outputs "
      "\"logits\" [N, classes] and \"probabilities\".\n  " +
      std::string(argv[0]) +
      " --format=onnx --config=configs/refnet.yaml --checkpoint=runs/refnet --output=model.onnx");
  pstrain::ParseFlags(&argc, &argv, {"tools/export_main.cc"});
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument '" << argv[1] << "' (flags are --name=value)";
    return 2;
  }
  if (FLAGS_format != "onnx") {
    LOG(ERROR) << "--format=" << FLAGS_format << ": expected onnx";
    return 2;
  }
  if (FLAGS_checkpoint.empty()) {
    LOG(ERROR) << "--checkpoint is required (a train_dir, a checkpoint or a .safetensors file)";
    return 2;
  }
  auto config = pstrain::ConfigNode::LoadFile(FLAGS_config);
  if (!config.ok()) {
    LOG(ERROR) << config.status().ToString();
    return 2;
  }
  auto model = config->Child("model");
  if (!model.ok()) {
    LOG(ERROR) << model.status().ToString();
    return 2;
  }
  auto weights = pstrain::ReadTrainedWeights(FLAGS_checkpoint);
  if (!weights.ok()) {
    LOG(ERROR) << "--checkpoint=" << FLAGS_checkpoint << ": " << weights.status().ToString();
    return 1;
  }
  pstrain::OnnxExportOptions options;
  options.softmax_output = FLAGS_softmax_output;
  pstrain::Status written = pstrain::WriteOnnx(*model, *weights, options, FLAGS_output);
  if (!written.ok()) {
    LOG(ERROR) << written.ToString();
    return 1;
  }
  std::printf("wrote %s from %s (%zu tensors read)\n", FLAGS_output.c_str(),
              FLAGS_checkpoint.c_str(), weights->size());
  return 0;
}

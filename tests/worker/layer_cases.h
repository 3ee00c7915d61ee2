// One table of layer cases, run by every test that iterates layers, as Caffe's
// TestDtypesAndDevices runs one test body on every device: each case is a numeric gradient check
// (tests/worker/layers_test.cc) and a CPU-vs-GPU comparison (tests/gpu/layers_gpu_test.cc), a
// named gtest each, and a seed model of fuzz_config (fuzz/make_corpus.cc). A registered layer type
// without a case here fails LayerCasesTest.EveryRegisteredLayerTypeHasAGradientCaseAndADeviceCase,
// so adding a layer means adding its rows.
//
// Data only (no test or layer code), in a header, so that the corpus writer includes it without
// linking test libraries. Tests that prove a layer's own semantics (dropout's keep rate, batch
// norm's moving statistics, forward values against tests/worker/reference_ops.h) stay beside
// the layer's other tests in layers_test.cc.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/tensor.h"

namespace pstrain {
namespace worker {
namespace testing {

// How a case's inputs are filled.
enum class InputValues {
  kUniform,   // uniform in [lo, hi]
  kDistinct,  // distinct, 0.05 apart: no max-pool tie or ReLU kink within the difference step
  kIndices,   // integers uniform in [lo, hi]: an embedding's row indices (-1 for padding)
};

struct LayerCase {
  LayerCase(std::string name, std::string yaml, std::vector<Shape> inputs)
      : name(std::move(name)), yaml(std::move(yaml)), inputs(std::move(inputs)) {}

  std::string name;           // the test's name: lower case, digits and '_'
  std::string yaml;           // the layer's fields as a YAML flow map, `type` included
  std::vector<Shape> inputs;  // per example (no batch dim), one per layer input
  int64_t batch = 2;
  bool training = true;
  uint64_t seed = 1;  // the inputs' random values
  InputValues values = InputValues::kUniform;
  float lo = -1.0f, hi = 1.0f;
  std::vector<int32_t> labels;  // loss layers: one per example
  // Variables given values after initialisation, by short name ("moving_mean"): a state other
  // than the initial one (a non-zero bias, a trained batch norm's statistics).
  std::vector<std::pair<std::string, std::vector<float>>> variables;
  // Numeric gradient check (GradientCheckOptions).
  bool check_gradient = true;
  float gradient_step = 1e-2f;
  float gradient_tolerance = 2e-2f;
  // CPU vs GPU: outputs, input and variable gradients, variables after the step, relative to
  // max(1, |CPU|).
  bool compare_devices = true;
  float device_tolerance = 1e-4f;

  LayerCase& Batch(int64_t n) { return batch = n, *this; }
  LayerCase& Evaluation() { return training = false, *this; }
  LayerCase& Seed(uint64_t s) { return seed = s, *this; }
  LayerCase& Distinct() { return values = InputValues::kDistinct, *this; }
  LayerCase& Indices(float l, float h) {
    return values = InputValues::kIndices, lo = l, hi = h, *this;
  }
  LayerCase& Range(float l, float h) { return lo = l, hi = h, *this; }
  LayerCase& Labels(std::vector<int32_t> l) { return labels = std::move(l), *this; }
  LayerCase& Set(std::string variable, std::vector<float> v) {
    variables.emplace_back(std::move(variable), std::move(v));
    return *this;
  }
  LayerCase& GradientStep(float step) { return gradient_step = step, *this; }
  LayerCase& NoGradientCheck() { return check_gradient = false, *this; }
  LayerCase& NoDeviceComparison() { return compare_devices = false, *this; }
  LayerCase& DeviceTolerance(float t) { return device_tolerance = t, *this; }
};

inline const std::vector<LayerCase>& LayerCases() {
  static const std::vector<LayerCase>* const cases = new std::vector<LayerCase>{
      // conv2d
      LayerCase("conv2d_same_stride2_odd_size",
                "{type: conv2d, filters: 4, kernel: 4, stride: 2, padding: SAME}", {{3, 7, 7}})
          .Set("bias", {0.3f, -0.2f, 0.1f, 0.5f}),
      LayerCase("conv2d_valid_leftover_pixels",
                "{type: conv2d, filters: 3, kernel: 3, stride: 2, padding: VALID}", {{2, 8, 8}})
          .Batch(3)
          .Seed(2),
      // 16 -> 32 channels makes oneDNN pick blocked layouts, exercising the reorders.
      LayerCase("conv2d_blocked_layout_channels",
                "{type: conv2d, filters: 32, kernel: 3, padding: SAME, use_bias: false}",
                {{16, 5, 5}})
          .Seed(3),
      LayerCase("conv2d_same_symmetric", "{type: conv2d, filters: 6, kernel: 5, padding: SAME}",
                {{3, 12, 12}})
          .Batch(4),
      // 9x7 input, 4x3 kernel, stride 2: pads 1/2 rows and 1/1 columns, so cuDNN gets explicit
      // padding.
      LayerCase("conv2d_same_stride2_asymmetric_padding",
                "{type: conv2d, filters: 5, kernel: [4, 3], stride: 2, padding: SAME}", {{2, 9, 7}})
          .Batch(4),
      // 28x28, 3x3, stride 2 (tiny.yaml's first layer): pads 0 before, 1 after.
      LayerCase("conv2d_28x28_stride2", "{type: conv2d, filters: 8, kernel: 3, stride: 2}",
                {{1, 28, 28}})
          .Batch(8),
      LayerCase("conv2d_valid_without_bias",
                "{type: conv2d, filters: 4, kernel: 3, stride: 2, padding: VALID, use_bias: false}",
                {{3, 10, 9}})
          .Batch(4),

      // conv2d_transpose: weights [in_channels, filters, kh, kw], those of the conv2d it is the
      // input gradient of.
      LayerCase("conv2d_transpose_same_stride2",
                "{type: conv2d_transpose, filters: 4, kernel: 3, stride: 2, padding: SAME}",
                {{3, 4, 5}})
          .Set("bias", {0.3f, -0.2f, 0.1f, 0.5f}),
      // 7x9 of the 8x10 a SAME stride 2 allows: with a 4x4 kernel, pads 1/2 rows and 1/1 columns.
      LayerCase("conv2d_transpose_same_stride2_output_size_asymmetric_padding",
                "{type: conv2d_transpose, filters: 3, kernel: 4, stride: 2, padding: SAME, "
                "output_size: [7, 9]}",
                {{2, 4, 5}})
          .Batch(3)
          .Seed(2),
      LayerCase("conv2d_transpose_valid_stride_2x1_without_bias",
                "{type: conv2d_transpose, filters: 3, kernel: [3, 2], stride: [2, 1], "
                "padding: VALID, use_bias: false}",
                {{2, 3, 4}})
          .Seed(3),
      // Kernel 2 < stride 3: Keras' VALID size in*stride leaves a pixel in three that no input
      // reaches.
      LayerCase("conv2d_transpose_valid_kernel_smaller_than_stride",
                "{type: conv2d_transpose, filters: 2, kernel: 2, stride: 3, padding: VALID}",
                {{2, 3, 3}})
          .Seed(4),
      LayerCase("conv2d_transpose_blocked_layout_channels",
                "{type: conv2d_transpose, filters: 16, kernel: 3, padding: SAME, init: he_normal}",
                {{16, 4, 4}})
          .Seed(5),

      // max_pool and avg_pool
      LayerCase("max_pool_same_stride2_odd_size",
                "{type: max_pool, size: 3, stride: 2, padding: SAME}", {{2, 7, 7}})
          .Distinct()
          .Seed(4),
      LayerCase("max_pool_valid_leftover_pixels", "{type: max_pool, size: 2}", {{3, 5, 5}})
          .Distinct()
          .Seed(5),
      LayerCase("max_pool_valid", "{type: max_pool, size: 2}", {{3, 8, 8}}).Batch(4).Distinct(),
      LayerCase("max_pool_valid_stride2_size3", "{type: max_pool, size: 3, stride: 2}", {{2, 9, 9}})
          .Batch(4)
          .Distinct(),
      LayerCase("max_pool_same_stride1", "{type: max_pool, size: 3, stride: 1, padding: SAME}",
                {{2, 7, 7}})
          .Batch(4)
          .Distinct(),
      // 7x8 with 2x2 windows, stride 2: the last row's window ends in the padding.
      LayerCase("max_pool_same_stride2_asymmetric_padding",
                "{type: max_pool, size: 2, padding: SAME}", {{3, 7, 8}})
          .Batch(4)
          .Distinct(),
      // ResNet's stem pool: 3x3, stride 2, SAME on an even size pads one pixel after, none
      // before (the GPU pads with -FLT_MAX and runs cuDNN).
      LayerCase("max_pool_same_size3_stride2_even_size",
                "{type: max_pool, size: 3, stride: 2, padding: SAME}", {{3, 8, 8}})
          .Batch(4)
          .Distinct(),
      LayerCase("avg_pool_same_stride2_excludes_padding",
                "{type: avg_pool, size: 3, stride: 2, padding: SAME}", {{2, 6, 5}})
          .Seed(6),
      LayerCase("avg_pool_valid", "{type: avg_pool, size: 2}", {{3, 8, 8}}).Batch(4),
      LayerCase("avg_pool_same_stride1", "{type: avg_pool, size: 3, stride: 1, padding: SAME}",
                {{2, 7, 7}})
          .Batch(4),
      // Average pooling divides by the real pixels only.
      LayerCase("avg_pool_same_stride2_asymmetric_padding",
                "{type: avg_pool, size: 2, padding: SAME}", {{3, 7, 8}})
          .Batch(4),
      LayerCase("avg_pool_same_size4_stride2",
                "{type: avg_pool, size: 4, stride: 2, padding: SAME}", {{2, 9, 6}})
          .Batch(4),

      // relu, flatten, add
      LayerCase("relu", "{type: relu}", {{3, 4, 4}}).Distinct().Seed(7),
      LayerCase("relu_batch4", "{type: relu}", {{3, 5, 5}}).Batch(4).Distinct(),
      // leaky_relu: distinct values keep the kink at 0 out of the difference step.
      LayerCase("leaky_relu", "{type: leaky_relu}", {{3, 4, 4}}).Distinct().Seed(15),
      LayerCase("leaky_relu_alpha_0_01_batch4", "{type: leaky_relu, alpha: 0.01}", {{2, 5, 5}})
          .Batch(4)
          .Distinct(),
      LayerCase("flatten", "{type: flatten}", {{2, 3, 3}}).Seed(9),
      LayerCase("flatten_batch4", "{type: flatten}", {{3, 5, 5}}).Batch(4),
      LayerCase("add", "{type: add}", {{2, 3, 3}, {2, 3, 3}}).Seed(14),
      LayerCase("add_batch4", "{type: add}", {{3, 5, 5}, {3, 5, 5}}).Batch(4),

      // embedding: the rows of the batch's distinct ids pooled per example; the input is row
      // indices (-1: padding), which have no gradient (the check sees none: rounding absorbs
      // the step).
      LayerCase("embedding_sum", "{type: embedding, dimension: 3, rows: 5}", {{4}})
          .Batch(3)
          .Indices(-1, 4),
      LayerCase("embedding_mean_repeated_rows",
                "{type: embedding, dimension: 4, rows: 3, combiner: mean}", {{6}})
          .Batch(4)
          .Seed(16)
          .Indices(-1, 2),
      LayerCase("embedding_one_slot_dimension_1", "{type: embedding, dimension: 1, rows: 8}", {{1}})
          .Batch(5)
          .Seed(17)
          .Indices(0, 7),

      // concat
      LayerCase("concat_features", "{type: concat}", {{3}, {3}}).Batch(3).Seed(18),
      LayerCase("concat_channels", "{type: concat}", {{2, 3, 3}, {2, 3, 3}}).Seed(19),

      // fully_connected
      LayerCase("fully_connected", "{type: fully_connected, units: 5}", {{7}})
          .Batch(3)
          .Seed(8)
          .Set("bias", {0.1f, -0.4f, 0.2f, 0.0f, 0.7f}),
      LayerCase("fully_connected_33_to_7", "{type: fully_connected, units: 7}", {{33}}).Batch(5),
      LayerCase("fully_connected_without_bias",
                "{type: fully_connected, units: 10, use_bias: false}", {{64}})
          .Batch(3),
      // RefNet's fc1 at batch 128: large enough that cuBLAS picks its tiled kernels. No gradient
      // check: 600 perturbations of a 411M multiply-add forward pass; the small cases check the
      // same code.
      LayerCase("fully_connected_refnet_fc1_batch128", "{type: fully_connected, units: 1024}",
                {{3136}})
          .Batch(128)
          .DeviceTolerance(1e-3f)
          .NoGradientCheck(),

      // dropout: the training mask is the layer's random draw, which the GPU makes on its own
      // (DropoutKeepsTheCpuMaskSemanticsAndRepeatsWithTheSeed compares the semantics instead).
      LayerCase("dropout_training_fixed_seed", "{type: dropout, keep_prob: 0.7}", {{10, 10}})
          .Batch(4)
          .Seed(10)
          .Range(0.5f, 1.0f)
          .NoDeviceComparison(),
      LayerCase("dropout_evaluation", "{type: dropout, keep_prob: 0.5}", {{50}})
          .Evaluation()
          .Seed(11),

      // batch_norm
      LayerCase("batch_norm_training", "{type: batch_norm}", {{3, 4, 5}})
          .Batch(4)
          .Seed(12)
          .Range(-2.0f, 3.0f)
          .Set("gamma", {0.7f, 1.4f, 0.9f})
          .Set("beta", {0.2f, -0.5f, 0.8f})
          .DeviceTolerance(1e-3f),
      LayerCase("batch_norm_evaluation_moving_statistics", "{type: batch_norm, epsilon: 0.001}",
                {{2, 3, 3}})
          .Batch(3)
          .Evaluation()
          .Seed(13)
          .Set("moving_mean", {0.5f, -1.0f})
          .Set("moving_variance", {4.0f, 0.25f}),
      LayerCase("batch_norm_training_4x5x5", "{type: batch_norm}", {{4, 5, 5}})
          .Batch(6)
          .DeviceTolerance(1e-3f),
      LayerCase("batch_norm_training_flat_momentum",
                "{type: batch_norm, momentum: 0.9, epsilon: 1.0e-4}", {{12}})
          .Batch(8)
          .DeviceTolerance(1e-3f),
      LayerCase("batch_norm_evaluation_4x5x5", "{type: batch_norm}", {{4, 5, 5}})
          .Batch(6)
          .Evaluation(),
      LayerCase("batch_norm_evaluation_flat", "{type: batch_norm}", {{12}}).Batch(8).Evaluation(),

      // softmax_cross_entropy
      LayerCase("softmax_cross_entropy", "{type: softmax_cross_entropy}", {{4}})
          .Labels({3, 1})
          .GradientStep(1e-3f),
      LayerCase("softmax_cross_entropy_10_classes", "{type: softmax_cross_entropy}", {{10}})
          .Batch(6)
          .Labels({0, 3, 9, 9, 1, 5})
          .GradientStep(1e-3f)
          .DeviceTolerance(1e-5f),
  };
  return *cases;
}

}  // namespace testing
}  // namespace worker
}  // namespace pstrain

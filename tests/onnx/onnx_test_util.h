// What the ONNX export tests share: running a command, the test venv's Python when it has onnx
// and onnxruntime, and writing a tensor's raw bytes for tests/onnx's Python scripts.
#pragma once

#include <string>

#include "common/tensor.h"
#include "tests/test_env.h"  // RunCommand

namespace pstrain::testing {

// The venv Python when it has onnx and onnxruntime; else empty, with the reason in `why`.
std::string OnnxPython(std::string* why);

// `t`'s values as raw little-endian float32.
void WriteFloats(const std::string& path, const Tensor& t);

}  // namespace pstrain::testing

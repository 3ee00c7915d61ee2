// One operation of another framework's graph, as a layer describes itself there: the op's type
// name in that framework and its attributes, in plain values. A layer fills one for TensorFlow
// (TensorBoard's Graphs tab) and one for ONNX (worker/network/layer.h: TensorFlowOp, OnnxOp); the
// writers of those graphs turn it into their protos (common/summary/graph_def.cc,
// worker/training/onnx_export.cc). So what a layer exports lives in the layer's own files, as
// Caffe keeps a layer's parameters beside it, and the writers know formats, not layer types. It
// is here, in common/, so that common/summary reads it without including worker/.
//
// The op's inputs are not listed: it reads the layer's inputs, then the layer's variables in the
// order the layer created them (and, for TensorFlow, a loss reads the "labels" placeholder last),
// or the variables first where the op takes its data before its indices (Gather). A layer that is
// several ops in a row (a gather, then a sum over the slots) lists the followers in `then`: each
// reads the output of the one before, and the last one's output is the layer's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pstrain {

// The element types a type attribute can name (TensorFlow's "T", "Tlabels", "U").
enum class GraphDataType { kFloat, kInt32 };

struct GraphOpAttribute {
  enum class Kind { kInt, kInts, kFloat, kString, kBool, kType };
  std::string name;
  Kind kind = Kind::kInt;
  int64_t i = 0;
  std::vector<int64_t> ints;
  float f = 0.0f;
  std::string s;
  bool b = false;
  GraphDataType type = GraphDataType::kFloat;
};

struct GraphOp {
  GraphOp() = default;
  explicit GraphOp(std::string op_type) : op(std::move(op_type)) {}

  std::string op;  // "Conv2D", "LeakyRelu"
  std::vector<GraphOpAttribute> attributes;
  bool reads_labels = false;  // TensorFlow: a loss also reads the "labels" placeholder
  bool variables_first = false;
  std::vector<GraphOp> then;

  GraphOp& Int(std::string name, int64_t v) {
    return Add(std::move(name), Kind::kInt).i = v, *this;
  }
  GraphOp& Ints(std::string name, std::vector<int64_t> v) {
    return Add(std::move(name), Kind::kInts).ints = std::move(v), *this;
  }
  GraphOp& Float(std::string name, float v) {
    return Add(std::move(name), Kind::kFloat).f = v, *this;
  }
  GraphOp& String(std::string name, std::string v) {
    return Add(std::move(name), Kind::kString).s = std::move(v), *this;
  }
  GraphOp& Bool(std::string name, bool v) { return Add(std::move(name), Kind::kBool).b = v, *this; }
  GraphOp& Type(std::string name, GraphDataType v) {
    return Add(std::move(name), Kind::kType).type = v, *this;
  }
  GraphOp& ReadsLabels() { return reads_labels = true, *this; }
  GraphOp& ReadsVariablesFirst() { return variables_first = true, *this; }
  GraphOp& Then(GraphOp next) { return then.push_back(std::move(next)), *this; }

  // The attribute called `name`, or null.
  const GraphOpAttribute* Find(const std::string& name) const {
    for (const GraphOpAttribute& a : attributes) {
      if (a.name == name) return &a;
    }
    return nullptr;
  }

 private:
  using Kind = GraphOpAttribute::Kind;
  GraphOpAttribute& Add(std::string name, Kind kind) {
    attributes.push_back({});
    attributes.back().name = std::move(name);
    attributes.back().kind = kind;
    return attributes.back();
  }
};

}  // namespace pstrain

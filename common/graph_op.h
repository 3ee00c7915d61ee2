// One operation of another framework's graph, as a layer describes itself there: the op's type
// name in that framework and its attributes, in plain values. A layer fills one for TensorFlow
// (TensorBoard's Graphs tab) and one for ONNX (worker/network/layer.h: TensorFlowOp, OnnxOp); the
// writers of those graphs turn it into their protos (common/summary/graph_def.cc,
// worker/training/onnx_export.cc). So what a layer exports lives in the layer's own files, as
// Caffe keeps a layer's parameters beside it, and the writers know formats, not layer types. It
// is here, in common/, so that common/summary reads it without including worker/.
//
// By default the op's inputs are not listed: it reads the layer's inputs, then the layer's
// variables in the order the layer created them (and, for TensorFlow, a loss reads the "labels"
// placeholder last), or the variables first where the op takes its data before its indices
// (Gather). A layer that is several ops in a row (a gather, then a sum over the slots) lists the
// followers in `then`: each reads the output of the one before, and the last one's output is the
// layer's. An op that reads something else (a small constant such as an axis, or an earlier op of
// its chain, as a mean divides a sum by a count) lists what it reads in `reads` instead.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pstrain {

// The element types a type attribute can name (TensorFlow's "T", "Tlabels", "U").
enum class GraphDataType { kFloat, kInt32, kInt64 };

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

// A small constant tensor an op reads (an axis, a shift), written beside the op.
struct GraphConstant {
  GraphDataType type = GraphDataType::kInt64;
  std::vector<int64_t> dims;  // empty: a scalar
  std::vector<double> values;
};

// One input of an op: where it comes from.
struct GraphOpInput {
  enum class Kind { kLayerInput, kVariable, kOp, kConstant };
  Kind kind = Kind::kLayerInput;
  // kLayerInput: the layer's input k; kVariable: its variable k; kOp: the output of op k of the
  // layer's chain (0 the first op, k > 0 its then[k - 1]), which must come before the reader.
  int index = 0;
  GraphConstant constant;  // kConstant

  static GraphOpInput LayerInput(int k) { return {Kind::kLayerInput, k, {}}; }
  static GraphOpInput Variable(int k) { return {Kind::kVariable, k, {}}; }
  static GraphOpInput Op(int k) { return {Kind::kOp, k, {}}; }
  static GraphOpInput Constant(GraphDataType type, std::vector<int64_t> dims,
                               std::vector<double> values) {
    return {Kind::kConstant, 0, {type, std::move(dims), std::move(values)}};
  }
};

struct GraphOp {
  GraphOp() = default;
  explicit GraphOp(std::string op_type) : op(std::move(op_type)) {}

  std::string op;  // "Conv2D", "LeakyRelu"
  // The node's name in the layer's scope when the op type is not enough (two ReduceSums in one
  // chain); empty: the op type.
  std::string name;
  std::vector<GraphOpAttribute> attributes;
  bool reads_labels = false;  // TensorFlow: a loss also reads the "labels" placeholder
  bool variables_first = false;
  // TensorFlow: the op has the element type attribute "T" (GatherV2 names its types otherwise).
  bool has_t = true;
  // What the op reads, when not the default above.
  std::vector<GraphOpInput> reads;
  // The layer's input 0 holds int64 ids, -1 for padding (the graph's placeholder for it is
  // int64); set on the first op.
  bool reads_ids = false;
  // Set on the first op of a layer whose variable 0 holds rows gathered from the sparse table of
  // this name: an export writes, in the variable's place, the table's rows of every id the input
  // can hold, [1 + ids, dimension], row 0 zeros and row 1 + id the row of id, so that the op reads
  // it at id + 1 and padding (-1) reads zeros.
  std::string sparse_table;
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
  GraphOp& Named(std::string node_name) { return name = std::move(node_name), *this; }
  GraphOp& Reads(std::vector<GraphOpInput> inputs) { return reads = std::move(inputs), *this; }
  GraphOp& WithoutT() { return has_t = false, *this; }
  GraphOp& ReadsIds() { return reads_ids = true, *this; }
  GraphOp& ReadsSparseTable(std::string table) { return sparse_table = std::move(table), *this; }
  // The node's name in the layer's scope.
  const std::string& NodeName() const { return name.empty() ? op : name; }

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

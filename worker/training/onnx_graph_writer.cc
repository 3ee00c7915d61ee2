#include "worker/training/onnx_graph_writer.h"

#include <cstring>

namespace pstrain {
namespace {

constexpr char kBatchDim[] = "N";

void SetAttribute(onnx::NodeProto* node, const GraphOpAttribute& attribute) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(attribute.name);
  switch (attribute.kind) {
    case GraphOpAttribute::Kind::kInt:
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(attribute.i);
      return;
    case GraphOpAttribute::Kind::kInts:
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : attribute.ints) a->add_ints(v);
      return;
    case GraphOpAttribute::Kind::kFloat:
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(attribute.f);
      return;
    case GraphOpAttribute::Kind::kString:
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(attribute.s);
      return;
    case GraphOpAttribute::Kind::kBool:  // ONNX has no booleans: ints 0 and 1
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(attribute.b ? 1 : 0);
      return;
    case GraphOpAttribute::Kind::kType:
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(OnnxElementType(attribute.type));
      return;
  }
}

template <typename T>
std::string RawBytes(const std::vector<double>& values) {
  std::vector<T> typed(values.begin(), values.end());
  std::string bytes(typed.size() * sizeof(T), '\0');
  if (!typed.empty()) std::memcpy(bytes.data(), typed.data(), bytes.size());
  return bytes;
}

}  // namespace

int32_t OnnxElementType(GraphDataType type) {
  switch (type) {
    case GraphDataType::kFloat:
      return onnx::TensorProto::FLOAT;
    case GraphDataType::kInt32:
      return onnx::TensorProto::INT32;
    case GraphDataType::kInt64:
      return onnx::TensorProto::INT64;
  }
  return onnx::TensorProto::UNDEFINED;
}

void SetOnnxShape(onnx::ValueInfoProto* value, const std::vector<int64_t>& per_example,
                  int32_t element_type) {
  auto* tensor = value->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(element_type);
  auto* shape = tensor->mutable_shape();
  shape->add_dim()->set_dim_param(kBatchDim);
  for (int64_t d : per_example) shape->add_dim()->set_dim_value(d);
}

onnx::NodeProto* OnnxGraphWriter::Node(const std::string& op, const std::string& name,
                                       const std::vector<std::string>& inputs,
                                       const std::string& output) {
  onnx::NodeProto* node = graph_->add_node();
  node->set_op_type(op);
  node->set_name(name);
  for (const std::string& in : inputs) node->add_input(in);
  node->add_output(output);
  return node;
}

Status OnnxGraphWriter::Chain(const GraphOp& op, const std::string& layer,
                              const std::vector<std::string>& inputs,
                              const std::vector<std::string>& variables,
                              const std::vector<std::string>& defaults, const std::string& output) {
  std::vector<const GraphOp*> ops = {&op};
  for (const GraphOp& next : op.then) ops.push_back(&next);
  std::vector<std::string> outputs;  // per op of the chain so far
  for (size_t m = 0; m < ops.size(); ++m) {
    const GraphOp& current = *ops[m];
    const std::string node = layer + "/" + current.NodeName();
    std::vector<std::string> reads;
    if (current.reads.empty()) reads = m == 0 ? defaults : std::vector<std::string>{outputs.back()};
    for (size_t r = 0; r < current.reads.size(); ++r) {
      ASSIGN_OR_RETURN(std::string name,
                       Resolve(current.reads[r], node, r, inputs, variables, outputs));
      reads.push_back(std::move(name));
    }
    outputs.push_back(m + 1 == ops.size() ? output : node + ":0");
    onnx::NodeProto* written = Node(current.op, node, reads, outputs.back());
    for (const GraphOpAttribute& a : current.attributes) SetAttribute(written, a);
  }
  return Status::OK();
}

Result<std::string> OnnxGraphWriter::Resolve(const GraphOpInput& in, const std::string& node,
                                             size_t position,
                                             const std::vector<std::string>& inputs,
                                             const std::vector<std::string>& variables,
                                             const std::vector<std::string>& outputs) {
  const std::vector<std::string>* from = nullptr;
  const char* what = "";
  switch (in.kind) {
    case GraphOpInput::Kind::kLayerInput:
      from = &inputs, what = "input";
      break;
    case GraphOpInput::Kind::kVariable:
      from = &variables, what = "variable";
      break;
    case GraphOpInput::Kind::kOp:
      from = &outputs, what = "op";
      break;
    case GraphOpInput::Kind::kConstant: {
      const std::string name = node + "/const_" + std::to_string(position);
      Constant(name, in.constant);
      return name;
    }
  }
  if (in.index < 0 || in.index >= static_cast<int>(from->size())) {
    return Internal(node + " reads " + what + " " + std::to_string(in.index) + " of " +
                    std::to_string(from->size()));
  }
  return (*from)[in.index];
}

void OnnxGraphWriter::Constant(const std::string& name, const GraphConstant& value) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(OnnxElementType(value.type));
  for (int64_t d : value.dims) t->add_dims(d);
  switch (value.type) {
    case GraphDataType::kFloat:
      t->set_raw_data(RawBytes<float>(value.values));
      return;
    case GraphDataType::kInt32:
      t->set_raw_data(RawBytes<int32_t>(value.values));
      return;
    case GraphDataType::kInt64:
      t->set_raw_data(RawBytes<int64_t>(value.values));
      return;
  }
}

void OnnxGraphWriter::Initializer(const std::string& name, const Tensor& value) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : value.shape().dims()) t->add_dims(d);
  t->set_raw_data(value.data(), value.bytes());
}

void OnnxGraphWriter::ValueInfo(const std::string& name, const std::vector<int64_t>& per_example) {
  onnx::ValueInfoProto* v = graph_->add_value_info();
  v->set_name(name);
  SetOnnxShape(v, per_example);
}

}  // namespace pstrain

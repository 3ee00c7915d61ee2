#include "worker/network/layers/embedding.h"

#include <cmath>

namespace pstrain {
namespace worker {

Status Embedding::Configure(const ConfigNode& node) {
  RETURN_IF_ERROR(
      node.CheckKeys({"name", "type", "inputs", "dimension", "rows", "combiner", "table"}));
  ASSIGN_OR_RETURN(dimension_, node.GetInt("dimension"));
  if (dimension_ < 1) {
    return node.Error("field 'dimension' must be >= 1, got " + std::to_string(dimension_));
  }
  ASSIGN_OR_RETURN(rows_, node.GetInt("rows"));
  // Row indices travel as float: integers are exact up to 2^24.
  if (rows_ < 1 || rows_ > (int64_t{1} << 24)) {
    return node.Error("field 'rows' (the most distinct ids one batch may touch) must be in [1, " +
                      std::to_string(int64_t{1} << 24) + "], got " + std::to_string(rows_));
  }
  ASSIGN_OR_RETURN(std::string combiner, node.GetString("combiner", "sum"));
  if (combiner == "sum") {
    combiner_ = Combiner::kSum;
  } else if (combiner == "mean") {
    combiner_ = Combiner::kMean;
  } else {
    return node.Error("field 'combiner' must be sum or mean, got '" + combiner + "'");
  }
  ASSIGN_OR_RETURN(table_, node.GetString("table", name()));
  return Status::OK();
}

Result<Shape> Embedding::Setup(const std::vector<Shape>& inputs) {
  slots_ = inputs[0].num_elements();
  input_rank_ = inputs[0].rank();
  if (slots_ < 1) return ShapeError("input " + inputs[0].ToString() + " has no slots");
  ASSIGN_OR_RETURN(Variable * rows, AddVariable("rows", Shape{rows_, dimension_}));
  (void)rows;
  return Shape{dimension_};
}

void Embedding::InitVariables(std::mt19937_64* rng) {
  // Overwritten by the gathered rows before each step; small values make a layer usable alone.
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  Tensor& rows = variables()[0].value;
  for (int64_t i = 0; i < rows.size(); ++i) rows[i] = dist(*rng);
}

int64_t Embedding::RowIndex(float x) const {
  const int64_t r = std::lround(x);
  CHECK(r >= -1 && r < rows_) << Describe() << ": slot value " << x
                              << " is not a row index in [-1, " << rows_ << ")";
  return r;
}

Result<GraphOp> Embedding::TensorFlowOp() const {
  using In = GraphOpInput;
  GraphOp op("GatherV2");
  op.Type("Tparams", GraphDataType::kFloat).Type("Tindices", GraphDataType::kInt64);
  op.Type("Taxis", GraphDataType::kInt32).Int("batch_dims", 0).WithoutT().ReadsIds();
  op.Reads({In::Variable(0), In::LayerInput(0), In::Constant(GraphDataType::kInt32, {}, {0})});
  op.Then(GraphOp(combiner_ == Combiner::kSum ? "Sum" : "Mean")
              .Bool("keep_dims", false)
              .Type("Tidx", GraphDataType::kInt32)
              .Reads({In::Op(0), In::Constant(GraphDataType::kInt32, {}, {1})}));
  return op;
}

Result<GraphOp> Embedding::OnnxOp() const {
  if (input_rank_ != 1) {
    return InvalidArgument(Describe() + ": ids of " + std::to_string(input_rank_) +
                           " axes per example have no ONNX form; give the input as a list [slots]");
  }
  using In = GraphOpInput;
  const In slot_axis = In::Constant(GraphDataType::kInt64, {1}, {1});
  // Row 0 of the exported table is zeros (GraphOp::sparse_table): ids move up one, and padding
  // (-1) reads the zeros. Any other negative id reads them too (Max), rather than a row counted
  // from the table's end, and is left out of a mean's count as padding is.
  GraphOp op("Add");
  op.Named("shift").ReadsIds().ReadsSparseTable(table_);
  op.Reads({In::LayerInput(0), In::Constant(GraphDataType::kInt64, {}, {1})});
  op.Then(GraphOp("Max").Named("row").Reads(
      {In::Op(0), In::Constant(GraphDataType::kInt64, {}, {0})}));                // op 1
  op.Then(GraphOp("Gather").Int("axis", 0).Reads({In::Variable(0), In::Op(1)}));  // [N, L, D]
  // Opset 13 takes ReduceSum's axes as an input.
  op.Then(GraphOp("ReduceSum").Int("keepdims", 0).Reads({In::Op(2), slot_axis}));  // op 3
  if (combiner_ == Combiner::kSum) return op;
  // The mean over the ids present, as ForwardCpu divides: an example without ids stays zero.
  op.Then(GraphOp("Greater").Named("present").Reads(
      {In::LayerInput(0), In::Constant(GraphDataType::kInt64, {}, {-1})}));
  op.Then(GraphOp("Cast").Named("present_float").Type("to", GraphDataType::kFloat));  // op 5
  op.Then(GraphOp("ReduceSum").Named("count").Int("keepdims", 1).Reads({In::Op(5), slot_axis}));
  op.Then(GraphOp("Max")
              .Named("count_or_one")
              .Reads({In::Op(6), In::Constant(GraphDataType::kFloat, {}, {1})}));
  op.Then(GraphOp("Div").Named("mean").Reads({In::Op(3), In::Op(7)}));
  return op;
}

PSTRAIN_REGISTER_LAYER("embedding", Embedding);

}  // namespace worker
}  // namespace pstrain

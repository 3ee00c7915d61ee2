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
  GraphOp op("GatherV2");
  op.Type("Tparams", GraphDataType::kFloat).Type("Tindices", GraphDataType::kInt32);
  op.Type("Taxis", GraphDataType::kInt32).Int("batch_dims", 0).ReadsVariablesFirst();
  op.Then(GraphOp(combiner_ == Combiner::kSum ? "Sum" : "Mean")
              .Bool("keep_dims", false)
              .Type("Tidx", GraphDataType::kInt32));
  return op;
}

Result<GraphOp> Embedding::OnnxOp() const {
  GraphOp op("Gather");
  op.Int("axis", 0).ReadsVariablesFirst();
  op.Then(GraphOp(combiner_ == Combiner::kSum ? "ReduceSum" : "ReduceMean")
              .Ints("axes", {1})
              .Int("keepdims", 0));
  return op;
}

PSTRAIN_REGISTER_LAYER("embedding", Embedding);

}  // namespace worker
}  // namespace pstrain

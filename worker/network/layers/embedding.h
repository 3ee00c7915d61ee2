// Embedding: per example, a list of slots naming rows of a table, pooled by sum or mean into one
// row of `dimension` floats; TensorFlow's embedding_lookup_sparse (combiner sum or mean) and
// ONNX's Gather followed by a reduction over the slots.
//
// In an export (ONNX, the TensorBoard graph) the input is what a served model is given: per
// example, the ids themselves (int64, -1 pads), and the table is the whole table over the ids
// the input can hold (graph_op.h: GraphOp::sparse_table), not the batch's gathered rows.
//
// The table itself is not a variable of the model: it may hold millions of rows, and lives in a
// SparseTable (ps/sparse_table.h) keyed by id. The layer's variable "rows" [rows, dimension] holds
// the rows of the batch's distinct ids, gathered before the step, and its input holds, per
// (example, slot), the index of the slot's id among them: an integer in float, exact below 2^24,
// or -1 for an empty slot (padding of a shorter list). Backward sums into "rows"' gradient the
// output gradients of every slot that read a row, so an id repeated across the batch gets one
// accumulated gradient row, which is what the table applies.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class Embedding : public Layer {
 public:
  enum class Combiner { kSum, kMean };

  Result<Shape> Setup(const std::vector<Shape>& inputs) override;
  void InitVariables(std::mt19937_64* rng) override;

  int64_t dimension() const { return dimension_; }
  int64_t rows() const { return rows_; }
  Combiner combiner() const { return combiner_; }
  // The SparseTable this layer's rows come from (the config's `table`, the layer's name by
  // default).
  const std::string& table() const { return table_; }

  PSTRAIN_DECLARE_LAYER()

 private:
  // The row index of slot value `x` (rounded), -1 for padding; CHECKs that it is in range.
  int64_t RowIndex(float x) const;

  int64_t dimension_ = 0;
  int64_t rows_ = 0;
  int64_t slots_ = 0;  // per example
  int input_rank_ = 0;  // of the per-example input shape
  Combiner combiner_ = Combiner::kSum;
  std::string table_;
};

}  // namespace worker
}  // namespace pstrain

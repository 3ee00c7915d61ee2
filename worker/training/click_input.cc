#include "worker/training/click_input.h"

#include "worker/training/onnx_table_rows.h"

namespace pstrain {
namespace worker {

Result<std::unique_ptr<ClickInput>> ClickInput::Create(const ConfigNode& config, Model* model,
                                                       int64_t batch_size, uint64_t seed,
                                                       const std::string& data_dir,
                                                       int64_t max_table_rows) {
  ASSIGN_OR_RETURN(ClickData data, ClickData::Read(config, *model, data_dir, ClickShard{}, seed));
  std::unique_ptr<ClickInput> in(new ClickInput(std::move(data), batch_size));
  ASSIGN_OR_RETURN(ConfigNode tables_node, config.Child("tables"));
  ASSIGN_OR_RETURN(in->tables_, EmbeddingTables::Create(tables_node, model, max_table_rows));
  in->onnx_blocker_ = OnnxExportBlocker(*in->tables_, *model, in->data_.schema());
  if (!in->onnx_blocker_.empty()) {
    LOG(WARNING) << "trainer: no model.onnx will be written at the end: " << in->onnx_blocker_;
  }
  return in;
}

Result<TrainingInput::Pass> ClickInput::ForwardBackward(Model* model, int64_t step,
                                                        std::mt19937_64* rng) {
  batch_ = data_.Next(batch_size_);
  RETURN_IF_ERROR(tables_->Gather(batch_, step, /*training=*/true));
  Pass pass;
  pass.loss = model->Forward(InputPointers(batch_), batch_.labels, true, rng);
  pass.examples = static_cast<int64_t>(batch_.labels.size());
  model->Backward();
  return pass;
}

Status ClickInput::AfterUpdate(int64_t step) {
  RETURN_IF_ERROR(tables_->Apply(batch_, step));
  tables_->Evict(step);
  return Status::OK();
}

Result<Evaluation> ClickInput::Evaluate(Model* model, int64_t step) {
  return data_.Evaluate(model, batch_size_, [&](const FeatureBatch& batch) {
    return tables_->Gather(batch, step, /*training=*/false);
  });
}

Status ClickInput::WriteFinal(const ConfigNode& model_node, Model* model,
                              const std::string& train_dir) {
  if (!onnx_blocker_.empty()) return Status::OK();  // said at the start
  std::map<std::string, Tensor> weights;
  for (const Variable* v : model->variables()) weights[v->name] = v->value;
  const std::string path = train_dir + "/model.onnx";
  RETURN_IF_ERROR(WriteOnnx(model_node, weights, OnnxExportOptions{}, path,
                            OnnxTableRowsOf(*tables_, data_.schema())));
  LOG(INFO) << "trainer: exported the model with its tables to " << path
            << " (inputs: the features by name, ids hashed into their hash_buckets)";
  return Status::OK();
}

}  // namespace worker
}  // namespace pstrain

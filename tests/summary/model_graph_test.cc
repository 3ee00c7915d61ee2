// The chief's graph of a model config (model_graph.h), checked against the config, the model the
// worker builds from it and the sharding the servers use; then read back by TensorBoard itself.
#include "worker/training/model_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/replication/sharding.h"
#include "common/summary/summary_writer.h"
#include "tests/summary/event_test_util.h"
#include "tests/test_env.h"
#include "tests/worker/gradient_checker.h"
#include "tests/worker/layer_cases.h"
#include "worker/network/model.h"

namespace pstrain {
namespace {

using nlohmann::json;

ConfigNode ModelConfig(const std::string& file) {
  auto config = ConfigNode::LoadFile(testing::SourceDir() + "/configs/" + file);
  CHECK(config.ok()) << config.status().ToString();
  return config->Child("model").value();
}

std::map<std::string, tensorflow::NodeDef> ByName(const tensorflow::GraphDef& graph) {
  std::map<std::string, tensorflow::NodeDef> nodes;
  for (const tensorflow::NodeDef& n : graph.node()) {
    EXPECT_TRUE(nodes.emplace(n.name(), n).second) << "node name used twice: " << n.name();
  }
  return nodes;
}

std::vector<int64_t> OutputShape(const tensorflow::NodeDef& node) {
  std::vector<int64_t> dims;
  for (const auto& d : node.attr().at("_output_shapes").list().shape(0).dim()) {
    dims.push_back(d.size());
  }
  return dims;
}

tensorflow::GraphDef Graph(const std::string& file, const ModelGraphOptions& options) {
  auto graph = ModelGraphDef(ModelConfig(file), options);
  CHECK(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

// The layers' inputs as the config names them: `inputs:`, else the layer before.
std::vector<std::string> ConfiguredInputs(const ConfigNode& layer, const std::string& previous) {
  if (!layer.Has("inputs")) return {previous};
  const ConfigNode in = layer.Child("inputs").value();
  if (!in.IsSequence()) return {layer.GetString("inputs").value()};
  std::vector<std::string> names;
  for (size_t k = 0; k < in.size(); ++k) {
    names.push_back(
        ConfigNode::Parse("v: " + in.At(k).ToYaml(), "inputs").value().GetString("v").value());
  }
  return names;
}

// Every layer of the config is one node "<name>/<op>" on the worker, reading the nodes of the
// layers the config wires into it, then its own variables, in the model's order.
void ExpectLayersAsConfigured(const std::string& file, const tensorflow::GraphDef& graph) {
  const ConfigNode model_node = ModelConfig(file);
  auto model = worker::Model::FromConfig(model_node);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const auto nodes = ByName(graph);
  const ConfigNode layers = model_node.Child("layers").value();
  ASSERT_EQ(layers.size(), (*model)->layers().size());
  std::map<std::string, std::string> node_of = {{"input", "input"}};
  std::string previous = "input";
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string name = layers.At(i).GetString("name").value();
    const std::string type = layers.At(i).GetString("type").value();
    const Result<GraphOp> op = (*model)->layers()[i]->TensorFlowOp();
    ASSERT_TRUE(op.ok()) << op.status().ToString();
    const std::string node_name = name + "/" + op->op;
    SCOPED_TRACE(node_name);
    ASSERT_TRUE(nodes.count(node_name));
    const tensorflow::NodeDef& node = nodes.at(node_name);
    EXPECT_EQ(node.op(), op->op);
    EXPECT_EQ(node.device(), "/job:worker/task:0");
    std::vector<std::string> expected;
    for (const std::string& in : ConfiguredInputs(layers.At(i), previous)) {
      expected.push_back(node_of.at(in));
    }
    for (const worker::Variable& v : (*model)->layers()[i]->variables()) {
      expected.push_back(nodes.count(v.name) ? v.name : v.name + "/ConcatPartitions/concat");
    }
    if (type == "softmax_cross_entropy") expected.push_back("labels");
    EXPECT_EQ(std::vector<std::string>(node.input().begin(), node.input().end()), expected);
    node_of[name] = node_name;
    previous = name;
  }
}

// Each variable's parts sit on the task the servers' sharding gives them, computed here as the
// PS client computes it: from the worker's model, its variables in order.
void ExpectVariablesWhereTheServersPutThem(const std::string& file,
                                           const tensorflow::GraphDef& graph, int num_ps) {
  auto model = worker::Model::FromConfig(ModelConfig(file));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<replication::VariableSpec> specs;
  for (worker::Variable* v : (*model)->variables()) specs.push_back({v->name, v->value.shape()});
  const replication::Sharding sharding =
      replication::Sharding::Compute(specs, num_ps, 8 << 20).value();
  const auto nodes = ByName(graph);
  int variables = 0;
  for (const auto& [name, node] : nodes) variables += node.op() == "VariableV2";
  EXPECT_EQ(variables, static_cast<int>(sharding.partitions().size()));
  for (const replication::Partition& p : sharding.partitions()) {
    SCOPED_TRACE(p.key);
    ASSERT_TRUE(nodes.count(p.key));
    const tensorflow::NodeDef& node = nodes.at(p.key);
    EXPECT_EQ(node.op(), "VariableV2");
    EXPECT_EQ(node.device(), "/job:ps/task:" + std::to_string(p.task));
    EXPECT_EQ(node.attr().at("dtype").type(), tensorflow::DT_FLOAT);
    EXPECT_EQ(OutputShape(node), p.shape.dims());
  }
}

TEST(ModelGraphTest, RefNetIsOneNodePerLayerWiredAsItsConfig) {
  const tensorflow::GraphDef graph = Graph("refnet.yaml", {2, 8 << 20, "/job:worker/task:0"});
  ExpectLayersAsConfigured("refnet.yaml", graph);
  const auto nodes = ByName(graph);
  EXPECT_EQ(nodes.at("conv1/Conv2D").input(0), "input");
  EXPECT_EQ(nodes.at("relu1/Relu").input(0), "conv1/Conv2D");
  EXPECT_EQ(nodes.at("dropout/Dropout").input(0), "relu3/Relu");
}

TEST(ModelGraphTest, RefNetOutputShapesAreTheLayersOwnWithAnUnknownBatch) {
  const auto nodes = ByName(Graph("refnet.yaml", {2, 8 << 20, "/job:worker/task:0"}));
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"input", {-1, 1, 28, 28}},
      {"conv1/Conv2D", {-1, 32, 28, 28}},
      {"relu1/Relu", {-1, 32, 28, 28}},
      {"pool1/MaxPool", {-1, 32, 14, 14}},
      {"conv2/Conv2D", {-1, 64, 14, 14}},
      {"pool2/MaxPool", {-1, 64, 7, 7}},
      {"flatten/Reshape", {-1, 3136}},
      {"fc1/MatMul", {-1, 1024}},
      {"dropout/Dropout", {-1, 1024}},
      {"fc2/MatMul", {-1, 10}},
      {"loss/SparseSoftmaxCrossEntropyWithLogits", {-1}},
      {"conv1/weights", {32, 1, 5, 5}},
      {"conv2/bias", {64}},
      {"fc2/weights", {10, 1024}}};
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(nodes.count(name)) << name;
    EXPECT_EQ(OutputShape(nodes.at(name)), shape) << name;
  }
}

TEST(ModelGraphTest, RefNetVariablesAreOnTheServersThatHoldThem) {
  const tensorflow::GraphDef graph = Graph("refnet.yaml", {2, 8 << 20, "/job:worker/task:0"});
  ExpectVariablesWhereTheServersPutThem("refnet.yaml", graph, 2);
  // fc1/weights (1024 x 3136 floats, 12.8 MB) is over 8 MiB: two halves, one per server,
  // joined on the worker.
  const auto nodes = ByName(graph);
  EXPECT_EQ(nodes.at("fc1/weights/part_0").device(), "/job:ps/task:0");
  EXPECT_EQ(nodes.at("fc1/weights/part_1").device(), "/job:ps/task:1");
  EXPECT_EQ(OutputShape(nodes.at("fc1/weights/part_0")), (std::vector<int64_t>{512, 3136}));
  EXPECT_EQ(nodes.at("fc1/weights/ConcatPartitions/concat").device(), "/job:worker/task:0");
  EXPECT_EQ(nodes.at("conv1/weights").device(), "/job:ps/task:0");
  EXPECT_EQ(nodes.at("conv2/weights").device(), "/job:ps/task:1");
}

TEST(ModelGraphTest, OneServerHoldsEveryVariableWhole) {
  const tensorflow::GraphDef graph = Graph("refnet.yaml", {1, 0, "/job:worker/task:0"});
  for (const tensorflow::NodeDef& node : graph.node()) {
    if (node.op() == "VariableV2") {
      EXPECT_EQ(node.device(), "/job:ps/task:0") << node.name();
    }
    EXPECT_EQ(node.name().find("part_"), std::string::npos) << node.name();
  }
}

TEST(ModelGraphTest, InOneProcessTheVariablesAreBesideTheLayers) {
  const tensorflow::GraphDef graph =
      Graph("refnet.yaml", {0, 8 << 20, "/job:localhost/replica:0/task:0/device:CPU:0"});
  for (const tensorflow::NodeDef& node : graph.node()) {
    EXPECT_EQ(node.device(), "/job:localhost/replica:0/task:0/device:CPU:0") << node.name();
  }
  EXPECT_TRUE(ByName(graph).count("fc1/weights"));
}

TEST(ModelGraphTest, ResNet20BranchesAndJoinsAsItsConfigWiresIt) {
  const tensorflow::GraphDef graph = Graph("resnet20.yaml", {3, 8 << 20, "/job:worker/task:1"});
  const auto nodes = ByName(graph);
  // A projection block: the shortcut leaves the previous block's output beside the main path,
  // and the add joins them.
  const tensorflow::NodeDef& add = nodes.at("s2b1_add/AddV2");
  EXPECT_EQ(
      std::vector<std::string>(add.input().begin(), add.input().end()),
      (std::vector<std::string>{"s2b1_bn2/FusedBatchNormV3", "s2b1_proj_bn/FusedBatchNormV3"}));
  EXPECT_EQ(nodes.at("s2b1_conv1/Conv2D").input(0), "s1b3_relu2/Relu");
  EXPECT_EQ(nodes.at("s2b1_proj/Conv2D").input(0), "s1b3_relu2/Relu");
  // An identity block: the add reads the block's input directly.
  EXPECT_EQ(nodes.at("s1b2_add/AddV2").input(1), "s1b1_relu2/Relu");
  EXPECT_EQ(OutputShape(add), (std::vector<int64_t>{-1, 32, 14, 14}));
  EXPECT_EQ(OutputShape(nodes.at("s3b3_add/AddV2")), (std::vector<int64_t>{-1, 64, 7, 7}));
  EXPECT_EQ(OutputShape(nodes.at("pool/AvgPool")), (std::vector<int64_t>{-1, 64, 1, 1}));
  // Batch norm's moving statistics are variables too (not trained, but held by the servers).
  EXPECT_EQ(nodes.at("bn0/moving_mean").op(), "VariableV2");
  EXPECT_EQ(nodes.at("bn0/FusedBatchNormV3").input_size(), 5);
}

TEST(ModelGraphTest, ResNet20MatchesItsConfigAndTheServersSharding) {
  ModelGraphOptions options;
  options.num_ps = 3;
  options.worker_device = "/job:worker/task:0";
  const tensorflow::GraphDef graph = Graph("resnet20.yaml", options);
  ExpectLayersAsConfigured("resnet20.yaml", graph);
  ExpectVariablesWhereTheServersPutThem("resnet20.yaml", graph, 3);
}

TEST(ModelGraphTest, ABadConfigFailsNamingTheLayer) {
  auto config = ConfigNode::Parse(
      "model: {input: [1, 4, 4], layers: [{name: a, type: relu}, "
      "{name: b, type: add, inputs: [a, nope]}]}",
      "test.yaml");
  ASSERT_TRUE(config.ok());
  auto graph = ModelGraphDef(config->Child("model").value(), {});
  ASSERT_FALSE(graph.ok());
  EXPECT_NE(graph.status().ToString().find("'nope'"), std::string::npos)
      << graph.status().ToString();
  EXPECT_NE(graph.status().ToString().find("layers[1]"), std::string::npos)
      << graph.status().ToString();
  auto unknown =
      ConfigNode::Parse("model: {input: [1, 4, 4], layers: [{name: a, type: gelu}]}", "test.yaml");
  graph = ModelGraphDef(unknown->Child("model").value(), {});
  ASSERT_FALSE(graph.ok());
  EXPECT_NE(graph.status().ToString().find("gelu"), std::string::npos);
}

// `graph` written into a run, as TensorBoard's loader and its server (what the Graphs tab
// fetches) read it back: node for node the same; returns what read_graph_with_tensorboard.py
// printed, or null when TensorBoard is missing (the caller skips).
json ReadBackWithTensorBoard(const tensorflow::GraphDef& graph, const std::string& logdir_name) {
  const std::string python = TestPythonFromEnv();
  if (python.empty()) return nullptr;
  const std::string script = ScriptPath("read_graph_with_tensorboard.py");
  EXPECT_FALSE(script.empty()) << "PSTRAIN_SOURCE_DIR is not set (ctest sets it)";
  const ScopedLogdir logdir(logdir_name);
  {
    auto writer = SummaryWriter::Open(logdir.path(), "train");
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    (*writer)->AddScalar("loss", 1, 2.5f);
    (*writer)->AddGraph(graph);
    EXPECT_TRUE((*writer)->Close().ok());
  }
  const CommandResult run = RunPython(python, script, {logdir.path(), "train"});
  if (run.exit_code == 3) return nullptr;
  EXPECT_EQ(run.exit_code, 0) << "read_graph_with_tensorboard.py failed";
  if (run.exit_code != 0) return json::object();
  const json got = json::parse(run.out);
  EXPECT_EQ(got["accumulator"]["has_graph"], true);
  EXPECT_EQ(got["server"]["graphs_tab_enabled"], true);
  EXPECT_EQ(got["server"]["run_graph"], true);

  for (const char* reader : {"accumulator", "server"}) {
    SCOPED_TRACE(reader);
    const json& nodes = got[reader]["nodes"];
    EXPECT_EQ(nodes.size(), static_cast<size_t>(graph.node_size()));
    for (int i = 0; i < graph.node_size() && i < static_cast<int>(nodes.size()); ++i) {
      const tensorflow::NodeDef& want = graph.node(i);
      const json& node = nodes[i];
      EXPECT_EQ(node["name"], want.name());
      EXPECT_EQ(node["op"], want.op()) << want.name();
      EXPECT_EQ(node["device"], want.device()) << want.name();
      EXPECT_EQ(node["inputs"],
                json(std::vector<std::string>(want.input().begin(), want.input().end())))
          << want.name();
      // A chain's ops before its last carry no shapes (graph_def.h).
      const json shapes = want.attr().count("_output_shapes")
                              ? json::array({json(OutputShape(want))})
                              : json::array();
      EXPECT_EQ(node["output_shapes"], shapes) << want.name();
    }
  }
  return got;
}

#define SKIP_WITHOUT_TENSORBOARD(got)                                           \
  if ((got).is_null())                                                          \
  GTEST_SKIP() << "no test Python with tensorboard (PSTRAIN_TEST_PYTHON); run " \
                  "scripts/test-venv.sh BUILD_DIR to make it"

// What users see: TensorBoard's loader and its server read the graph the chief writes.
TEST(ModelGraphTest, TensorBoardReadsAndServesTheGraphAsWritten) {
  const tensorflow::GraphDef graph = Graph("refnet.yaml", {2, 8 << 20, "/job:worker/task:0"});
  const json got = ReadBackWithTensorBoard(graph, "graph");
  SKIP_WITHOUT_TENSORBOARD(got);
  // Spot checks in TensorBoard's own terms.
  const json& nodes = got["accumulator"]["nodes"];
  std::map<std::string, json> by_name;
  for (const json& n : nodes) by_name[n["name"]] = n;
  EXPECT_EQ(by_name["conv1/weights"]["op"], "VariableV2");
  EXPECT_EQ(by_name["conv1/weights"]["device"], "/job:ps/task:0");
  EXPECT_EQ(by_name["conv1/weights"]["dtype"], 1);  // DT_FLOAT
  EXPECT_EQ(by_name["conv1/weights"]["shape"], json::array({32, 1, 5, 5}));
  EXPECT_EQ(by_name["conv1/Conv2D"]["inputs"],
            json::array({"input", "conv1/weights", "conv1/bias"}));
  EXPECT_EQ(by_name["pool2/MaxPool"]["output_shapes"], json::array({json::array({-1, 64, 7, 7})}));
  EXPECT_EQ(by_name["labels"]["dtype"], 3);  // DT_INT32
}

// A click model: a placeholder per named input (int64 for the id lists the embeddings read), each
// embedding a GatherV2 of its rows by the ids (axis a Const) then a Sum or Mean over the slots,
// each concat a ConcatV2 of its inputs and a Const axis, as TensorFlow writes them.
TEST(ModelGraphTest, AClickModelHasAPlaceholderPerInputGathersAndConcats) {
  const tensorflow::GraphDef graph = Graph("widedeep.yaml", {0, 8 << 20, "/job:worker/task:0"});
  const auto nodes = ByName(graph);
  EXPECT_EQ(nodes.at("dense").op(), "Placeholder");
  EXPECT_EQ(nodes.at("dense").attr().at("dtype").type(), tensorflow::DT_FLOAT);
  EXPECT_EQ(OutputShape(nodes.at("dense")), (std::vector<int64_t>{-1, 13}));
  for (int k = 1; k <= 26; ++k) {
    const std::string c = "C" + std::to_string(k);
    EXPECT_EQ(nodes.at(c).op(), "Placeholder") << c;
    EXPECT_EQ(nodes.at(c).attr().at("dtype").type(), tensorflow::DT_INT64) << c;
    EXPECT_EQ(OutputShape(nodes.at(c)), (std::vector<int64_t>{-1, 1})) << c;
  }
  EXPECT_FALSE(nodes.count("input"));

  const tensorflow::NodeDef& gather = nodes.at("deep_C3/GatherV2");
  EXPECT_EQ(gather.input().size(), 3);
  EXPECT_EQ(gather.input(0), "deep_C3/rows");
  EXPECT_EQ(gather.input(1), "C3");
  EXPECT_EQ(gather.attr().at("Tparams").type(), tensorflow::DT_FLOAT);
  EXPECT_EQ(gather.attr().at("Tindices").type(), tensorflow::DT_INT64);
  EXPECT_EQ(gather.attr().at("Taxis").type(), tensorflow::DT_INT32);
  EXPECT_EQ(gather.attr().at("batch_dims").i(), 0);
  EXPECT_FALSE(gather.attr().count("T")) << "GatherV2 has no attribute T";
  const tensorflow::NodeDef& axis = nodes.at(gather.input(2));
  EXPECT_EQ(axis.op(), "Const");
  EXPECT_EQ(axis.attr().at("dtype").type(), tensorflow::DT_INT32);
  EXPECT_EQ(axis.attr().at("value").tensor().int_val(0), 0);

  const tensorflow::NodeDef& sum = nodes.at("deep_C3/Sum");
  EXPECT_EQ(sum.input(0), "deep_C3/GatherV2");
  EXPECT_EQ(nodes.at(sum.input(1)).attr().at("value").tensor().int_val(0), 1);  // the slots
  EXPECT_EQ(sum.attr().at("T").type(), tensorflow::DT_FLOAT);
  EXPECT_EQ(sum.attr().at("Tidx").type(), tensorflow::DT_INT32);
  EXPECT_FALSE(sum.attr().at("keep_dims").b());
  EXPECT_EQ(OutputShape(sum), (std::vector<int64_t>{-1, 8}));

  const tensorflow::NodeDef& concat = nodes.at("deep/ConcatV2");
  ASSERT_EQ(concat.input().size(), 28);  // dense, 26 embeddings, the axis
  EXPECT_EQ(concat.input(0), "dense");
  EXPECT_EQ(concat.input(1), "deep_C1/Sum");
  EXPECT_EQ(concat.attr().at("N").i(), 27);
  EXPECT_EQ(nodes.at(concat.input(27)).attr().at("value").tensor().int_val(0), 1);
  EXPECT_EQ(OutputShape(concat), (std::vector<int64_t>{-1, 13 + 26 * 8}));
  EXPECT_EQ(nodes.at("deep1/MatMul").input(0), "deep/ConcatV2");
}

ConfigNode ParsedModel(const std::string& layers) {
  auto config = ConfigNode::Parse(R"(model:
  name: mean_ids
  inputs:
    - {name: ids, shape: [4]}
    - {name: dense, shape: [2]}
  layers:
)" + layers,
                                  "mean_ids.yaml");
  CHECK(config.ok()) << config.status().ToString();
  return config->Child("model").value();
}

TEST(ModelGraphTest, AMeanEmbeddingIsAGatherV2ThenAMeanOverItsSlots) {
  auto graph = ModelGraphDef(
      ParsedModel(
          R"(    - {name: emb, type: embedding, inputs: ids, dimension: 3, rows: 8, combiner: mean}
    - {name: both, type: concat, inputs: [emb, dense]}
    - {name: fc, type: fully_connected, units: 2}
    - {name: loss, type: softmax_cross_entropy}
)"),
      ModelGraphOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  const auto nodes = ByName(*graph);
  EXPECT_EQ(nodes.at("ids").attr().at("dtype").type(), tensorflow::DT_INT64);
  EXPECT_EQ(OutputShape(nodes.at("ids")), (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(nodes.at("dense").attr().at("dtype").type(), tensorflow::DT_FLOAT);
  const tensorflow::NodeDef& mean = nodes.at("emb/Mean");
  EXPECT_EQ(mean.op(), "Mean");
  EXPECT_EQ(mean.input(0), "emb/GatherV2");
  EXPECT_EQ(OutputShape(mean), (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(nodes.at("both/ConcatV2").input(0), "emb/Mean");
}

TEST(ModelGraphTest, AnInputReadAsIdsAndAsFloatsFailsNamingBothLayers) {
  auto graph = ModelGraphDef(
      ParsedModel(R"(    - {name: emb, type: embedding, inputs: ids, dimension: 2, rows: 8}
    - {name: both, type: concat, inputs: [emb, ids]}
    - {name: fc, type: fully_connected, units: 2}
    - {name: loss, type: softmax_cross_entropy}
)"),
      ModelGraphOptions{});
  ASSERT_FALSE(graph.ok());
  const std::string message = graph.status().ToString();
  EXPECT_NE(message.find("model input 'ids' is read as ids by layer 'emb' and as floats by "
                         "layer 'both'"),
            std::string::npos)
      << message;
}

TEST(ModelGraphTest, TensorBoardReadsAClickModelsGraphAsWritten) {
  const tensorflow::GraphDef graph = Graph("widedeep.yaml", {2, 8 << 20, "/job:worker/task:0"});
  const json got = ReadBackWithTensorBoard(graph, "click_graph");
  SKIP_WITHOUT_TENSORBOARD(got);
  std::map<std::string, json> by_name;
  for (const json& n : got["server"]["nodes"]) by_name[n["name"]] = n;
  EXPECT_EQ(by_name["C7"]["dtype"], 9);  // DT_INT64
  EXPECT_EQ(by_name["wide_C7/GatherV2"]["op"], "GatherV2");
  EXPECT_EQ(by_name["wide/ConcatV2"]["op"], "ConcatV2");
}

// TensorFlow's own importer takes the embeddings and concats of a click model: their ops,
// inputs, input types and attributes are what its op registry requires.
TEST(ModelGraphTest, TensorFlowImportsAClickModelsEmbeddingsAndConcats) {
  const std::string python = TestPythonFromEnv();
  if (python.empty()) GTEST_SKIP() << "PSTRAIN_TEST_PYTHON is unset or missing";
  const tensorflow::GraphDef graph = Graph("widedeep.yaml", {0, 8 << 20, "/job:worker/task:0"});
  const ScopedLogdir dir("tf_import");
  const std::string path = dir.path() + "/graph.pb";
  {
    std::ofstream out(path, std::ios::binary);
    ASSERT_TRUE(graph.SerializeToOstream(&out));
  }
  const CommandResult run = RunPython(python, ScriptPath("import_graph_with_tensorflow.py"),
                                      {path, "wide/ConcatV2", "deep/ConcatV2"});
  if (run.exit_code == 3) GTEST_SKIP() << "tensorflow cannot be imported by " << python;
  ASSERT_EQ(run.exit_code, 0) << "TensorFlow refused the graph (its message is in the log)";
  const json imported = json::parse(run.out)["imported"];
  EXPECT_EQ(imported["deep/ConcatV2"], "ConcatV2");
  EXPECT_EQ(imported["wide_C26/GatherV2"], "GatherV2");
  EXPECT_EQ(imported["deep_C1/Sum"], "Sum");
  EXPECT_EQ(imported["C1"], "Placeholder");
  EXPECT_EQ(imported.size(), 1 + 26 + 52 * 3 + 52 * 2 + 2 * 2)
      << "dense, C1..C26, per embedding its rows, GatherV2 and Sum and their two Consts, per "
         "concat it and its axis";
}

// The attributes TensorFlow's graph importer requires of each op pstrain's layers use (those
// without a default in TensorFlow's op registry, "T" included); an op not listed is not checked.
const std::map<std::string, std::vector<std::string>>& RequiredAttributes() {
  static const auto* required = new std::map<std::string, std::vector<std::string>>{
      {"Conv2D", {"T", "strides", "padding"}},
      {"Conv2DBackpropInput", {"T", "strides", "padding"}},
      {"MaxPool", {"T", "ksize", "strides", "padding"}},
      {"AvgPool", {"T", "ksize", "strides", "padding"}},
      {"Relu", {"T"}},
      {"Reshape", {"T"}},
      {"MatMul", {"T"}},
      {"AddV2", {"T"}},
      {"FusedBatchNormV3", {"T", "U"}},
      {"SparseSoftmaxCrossEntropyWithLogits", {"T"}},
      {"GatherV2", {"Tparams", "Tindices", "Taxis"}},
      {"ConcatV2", {"T", "N", "Tidx"}},
  };
  return *required;
}

// TensorBoard shows a layer as the TensorFlow op it computes, which the layer itself names
// (Layer::TensorFlowOp); a registered layer type without one would be drawn under its own type
// name, which TensorFlow's graph importer cannot read. Each type is built from its first case in
// tests/worker/layer_cases.h (LayerCasesTest fails a type without one).
TEST(ModelGraphTest, EveryRegisteredLayerTypeHasATensorFlowOpWithItsAttributes) {
  for (const std::string& type : worker::LayerRegistry::Global().Types()) {
    SCOPED_TRACE(type);
    const auto& cases = worker::testing::LayerCases();
    auto c = std::find_if(cases.begin(), cases.end(), [&](const worker::testing::LayerCase& c) {
      return worker::testing::CaseLayerType(c) == type;
    });
    ASSERT_NE(c, cases.end()) << "no case in tests/worker/layer_cases.h";
    Shape out;
    const std::unique_ptr<worker::Layer> layer = worker::testing::MakeCaseLayer(*c, &out);
    const Result<GraphOp> op = layer->TensorFlowOp();
    ASSERT_TRUE(op.ok()) << "layer type '" << type << "' has no TensorFlow op ("
                         << op.status().ToString() << ")";
    EXPECT_NE(op->op, type);
    EXPECT_FALSE(op->op.empty());

    GraphModel model;
    model.inputs = {{"input", c->inputs[0].dims(), GraphDataType::kFloat}};
    GraphLayer graph_layer{"layer", type, {}, out.dims(), {}, op.value()};
    for (const worker::Variable& v : layer->variables()) {
      const std::vector<int64_t> dims = v.value.shape().dims();
      graph_layer.variables.push_back({v.name, dims, {{v.name, dims, ""}}});
    }
    for (size_t i = 0; i < c->inputs.size(); ++i) graph_layer.inputs.push_back("input");
    model.layers.push_back(graph_layer);
    const auto nodes = ByName(BuildGraphDef(model));
    ASSERT_TRUE(nodes.count("layer/" + op->op));
    const tensorflow::NodeDef& node = nodes.at("layer/" + op->op);
    auto required = RequiredAttributes().find(op->op);
    if (required == RequiredAttributes().end()) continue;
    for (const std::string& attribute : required->second) {
      EXPECT_TRUE(node.attr().count(attribute))
          << op->op << " lacks the attribute '" << attribute << "' TensorFlow requires";
    }
  }
}

}  // namespace
}  // namespace pstrain

// The chief's graph of a model config (model_graph.h), checked against the config, the model the
// worker builds from it and the sharding the servers use; then read back by TensorBoard itself.
#include "worker/training/model_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// What users see: TensorBoard's loader and its server (what the Graphs tab fetches) read the
// graph the chief writes, node for node.
TEST(ModelGraphTest, TensorBoardReadsAndServesTheGraphAsWritten) {
  const std::string python = TestPythonFromEnv();
  if (python.empty())
    GTEST_SKIP() << "PSTRAIN_TEST_PYTHON is unset or missing; run "
                    "scripts/test-venv.sh BUILD_DIR to make it";
  const std::string script = ScriptPath("read_graph_with_tensorboard.py");
  ASSERT_FALSE(script.empty()) << "PSTRAIN_SOURCE_DIR is not set (ctest sets it)";
  const tensorflow::GraphDef graph = Graph("refnet.yaml", {2, 8 << 20, "/job:worker/task:0"});
  const ScopedLogdir logdir("graph");
  {
    auto writer = SummaryWriter::Open(logdir.path(), "train");
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    (*writer)->AddScalar("loss", 1, 2.5f);
    (*writer)->AddGraph(graph);
    ASSERT_TRUE((*writer)->Close().ok());
  }
  const CommandResult run = RunPython(python, script, {logdir.path(), "train"});
  if (run.exit_code == 3) GTEST_SKIP() << "tensorboard cannot be imported by " << python;
  ASSERT_EQ(run.exit_code, 0) << "read_graph_with_tensorboard.py failed";
  const json got = json::parse(run.out);
  EXPECT_EQ(got["accumulator"]["has_graph"], true);
  EXPECT_EQ(got["server"]["graphs_tab_enabled"], true);
  EXPECT_EQ(got["server"]["run_graph"], true);

  for (const char* reader : {"accumulator", "server"}) {
    SCOPED_TRACE(reader);
    const json& nodes = got[reader]["nodes"];
    ASSERT_EQ(nodes.size(), static_cast<size_t>(graph.node_size()));
    for (int i = 0; i < graph.node_size(); ++i) {
      const tensorflow::NodeDef& want = graph.node(i);
      const json& node = nodes[i];
      EXPECT_EQ(node["name"], want.name());
      EXPECT_EQ(node["op"], want.op()) << want.name();
      EXPECT_EQ(node["device"], want.device()) << want.name();
      EXPECT_EQ(node["inputs"],
                json(std::vector<std::string>(want.input().begin(), want.input().end())))
          << want.name();
      EXPECT_EQ(node["output_shapes"], json::array({json(OutputShape(want))})) << want.name();
    }
  }
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
    model.input_shape = c->inputs[0].dims();
    GraphLayer graph_layer{"layer", type, {}, out.dims(), {}, op.value()};
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

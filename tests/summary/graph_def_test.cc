// BuildGraphDef's conventions, on a hand-written model: the names, ops, inputs, devices and
// attrs TensorBoard's Graphs tab reads, the way TensorFlow writes them.
#include "common/summary/graph_def.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace pstrain {
namespace {

std::map<std::string, tensorflow::NodeDef> ByName(const tensorflow::GraphDef& graph) {
  std::map<std::string, tensorflow::NodeDef> nodes;
  for (const tensorflow::NodeDef& n : graph.node()) {
    EXPECT_TRUE(nodes.emplace(n.name(), n).second) << "node name used twice: " << n.name();
  }
  return nodes;
}

std::vector<std::string> Inputs(const tensorflow::NodeDef& node) {
  return {node.input().begin(), node.input().end()};
}

std::vector<int64_t> OutputShape(const tensorflow::NodeDef& node) {
  const tensorflow::AttrValue& attr = node.attr().at("_output_shapes");
  EXPECT_EQ(attr.list().shape_size(), 1) << node.name();
  std::vector<int64_t> dims;
  for (const auto& d : attr.list().shape(0).dim()) dims.push_back(d.size());
  return dims;
}

// conv (weights on ps 1, bias on ps 0) -> fc whose weights are split over both servers -> loss.
GraphModel SmallModel() {
  GraphModel m;
  m.inputs = {{"input", {1, 4, 4}, GraphDataType::kFloat}};
  m.worker_device = "/job:worker/task:0";
  GraphLayer conv{"conv1", "conv2d", {"input"}, {2, 4, 4}, {}, GraphOp("Conv2D")};
  conv.op.Ints("strides", {1, 1, 1, 1}).String("padding", "SAME").String("data_format", "NCHW");
  conv.variables.push_back(
      {"conv1/weights", {2, 1, 3, 3}, {{"conv1/weights", {2, 1, 3, 3}, "/job:ps/task:1"}}});
  conv.variables.push_back({"conv1/bias", {2}, {{"conv1/bias", {2}, "/job:ps/task:0"}}});
  GraphLayer flat{"flatten", "flatten", {"conv1"}, {32}, {}, GraphOp("Reshape")};
  GraphLayer fc{"fc1", "fully_connected", {"flatten"}, {10}, {}, GraphOp("MatMul")};
  fc.op.Bool("transpose_b", true);
  fc.variables.push_back({"fc1/weights",
                          {10, 32},
                          {{"fc1/weights/part_0", {5, 32}, "/job:ps/task:0"},
                           {"fc1/weights/part_1", {5, 32}, "/job:ps/task:1"}}});
  GraphLayer loss{"loss",  "softmax_cross_entropy",
                  {"fc1"}, {},
                  {},      GraphOp("SparseSoftmaxCrossEntropyWithLogits")};
  loss.op.Type("Tlabels", GraphDataType::kInt32).ReadsLabels();
  m.layers = {conv, flat, fc, loss};
  return m;
}

TEST(GraphDefTest, EachLayerIsOneOperationInItsOwnNameScopeReadingTheLayersBeforeIt) {
  const auto nodes = ByName(BuildGraphDef(SmallModel()));
  ASSERT_TRUE(nodes.count("conv1/Conv2D"));
  EXPECT_EQ(nodes.at("conv1/Conv2D").op(), "Conv2D");
  EXPECT_EQ(Inputs(nodes.at("conv1/Conv2D")),
            (std::vector<std::string>{"input", "conv1/weights", "conv1/bias"}));
  ASSERT_TRUE(nodes.count("flatten/Reshape"));
  EXPECT_EQ(Inputs(nodes.at("flatten/Reshape")), std::vector<std::string>{"conv1/Conv2D"});
  ASSERT_TRUE(nodes.count("loss/SparseSoftmaxCrossEntropyWithLogits"));
  // The loss also reads the labels, an int32 placeholder beside the float images.
  EXPECT_EQ(Inputs(nodes.at("loss/SparseSoftmaxCrossEntropyWithLogits")),
            (std::vector<std::string>{"fc1/MatMul", "labels"}));
  EXPECT_EQ(nodes.at("input").op(), "Placeholder");
  EXPECT_EQ(nodes.at("input").attr().at("dtype").type(), tensorflow::DT_FLOAT);
  EXPECT_EQ(nodes.at("labels").attr().at("dtype").type(), tensorflow::DT_INT32);
  for (const auto& [name, node] : nodes) {
    if (node.op() != "VariableV2" && node.op() != "Placeholder") {
      EXPECT_EQ(node.attr().at("T").type(), tensorflow::DT_FLOAT) << name;
    }
  }
  EXPECT_EQ(nodes.at("conv1/Conv2D").attr().at("data_format").s(), "NCHW");
  EXPECT_EQ(nodes.at("fc1/MatMul").attr().count("data_format"), 0u);
}

TEST(GraphDefTest, OutputShapesHaveAnUnknownBatchDimensionAsTensorFlowWritesThem) {
  const auto nodes = ByName(BuildGraphDef(SmallModel()));
  EXPECT_EQ(OutputShape(nodes.at("input")), (std::vector<int64_t>{-1, 1, 4, 4}));
  EXPECT_EQ(OutputShape(nodes.at("labels")), std::vector<int64_t>{-1});
  EXPECT_EQ(OutputShape(nodes.at("conv1/Conv2D")), (std::vector<int64_t>{-1, 2, 4, 4}));
  EXPECT_EQ(OutputShape(nodes.at("fc1/MatMul")), (std::vector<int64_t>{-1, 10}));
  EXPECT_EQ(OutputShape(nodes.at("loss/SparseSoftmaxCrossEntropyWithLogits")),
            std::vector<int64_t>{-1});
  // Variables have no batch dimension.
  EXPECT_EQ(OutputShape(nodes.at("conv1/weights")), (std::vector<int64_t>{2, 1, 3, 3}));
}

TEST(GraphDefTest, VariablesAreVariableV2OnTheirServerAndLayersOnTheWorker) {
  const auto nodes = ByName(BuildGraphDef(SmallModel()));
  const tensorflow::NodeDef& w = nodes.at("conv1/weights");
  EXPECT_EQ(w.op(), "VariableV2");
  EXPECT_EQ(w.device(), "/job:ps/task:1");
  EXPECT_EQ(w.attr().at("dtype").type(), tensorflow::DT_FLOAT);
  ASSERT_EQ(w.attr().at("shape").shape().dim_size(), 4);
  EXPECT_EQ(w.attr().at("shape").shape().dim(0).size(), 2);
  EXPECT_EQ(w.attr().at("shape").shape().dim(3).size(), 3);
  EXPECT_TRUE(w.input().empty());
  EXPECT_EQ(nodes.at("conv1/bias").device(), "/job:ps/task:0");
  for (const char* name : {"input", "labels", "conv1/Conv2D", "flatten/Reshape", "fc1/MatMul"}) {
    EXPECT_EQ(nodes.at(name).device(), "/job:worker/task:0") << name;
  }
}

TEST(GraphDefTest, ASplitVariableIsItsPartsOnTheirServersJoinedOnTheWorker) {
  const auto nodes = ByName(BuildGraphDef(SmallModel()));
  EXPECT_EQ(nodes.count("fc1/weights"), 0u);  // only its parts hold values
  EXPECT_EQ(nodes.at("fc1/weights/part_0").device(), "/job:ps/task:0");
  EXPECT_EQ(nodes.at("fc1/weights/part_1").device(), "/job:ps/task:1");
  EXPECT_EQ(OutputShape(nodes.at("fc1/weights/part_1")), (std::vector<int64_t>{5, 32}));
  const tensorflow::NodeDef& concat = nodes.at("fc1/weights/ConcatPartitions/concat");
  EXPECT_EQ(concat.op(), "ConcatV2");
  EXPECT_EQ(concat.device(), "/job:worker/task:0");
  EXPECT_EQ(Inputs(concat), (std::vector<std::string>{"fc1/weights/part_0", "fc1/weights/part_1"}));
  EXPECT_EQ(concat.attr().at("N").i(), 2);
  EXPECT_EQ(OutputShape(concat), (std::vector<int64_t>{10, 32}));
  EXPECT_EQ(Inputs(nodes.at("fc1/MatMul")),
            (std::vector<std::string>{"flatten/Reshape", "fc1/weights/ConcatPartitions/concat"}));
}

// The op's attributes are the layer's (GraphOp), in TensorFlow's AttrValue kinds.
TEST(GraphDefTest, EachOperationCarriesTheAttributesItsLayerGives) {
  const auto nodes = ByName(BuildGraphDef(SmallModel()));
  const tensorflow::NodeDef& conv = nodes.at("conv1/Conv2D");
  ASSERT_EQ(conv.attr().at("strides").list().i_size(), 4);
  EXPECT_EQ(conv.attr().at("strides").list().i(3), 1);
  EXPECT_EQ(conv.attr().at("padding").s(), "SAME");
  EXPECT_TRUE(nodes.at("fc1/MatMul").attr().at("transpose_b").b());
  EXPECT_EQ(nodes.at("loss/SparseSoftmaxCrossEntropyWithLogits").attr().at("Tlabels").type(),
            tensorflow::DT_INT32);
}

TEST(GraphDefTest, ALayerWithoutATensorFlowOpKeepsItsTypeName) {
  GraphModel m = SmallModel();
  m.layers[1].type = "my_new_layer";
  m.layers[1].op = GraphOp();
  const auto nodes = ByName(BuildGraphDef(m));
  ASSERT_TRUE(nodes.count("flatten/my_new_layer"));
  EXPECT_EQ(LayerNodeName(m.layers[1]), "flatten/my_new_layer");
  EXPECT_EQ(Inputs(nodes.at("fc1/MatMul"))[0], "flatten/my_new_layer");
}

// A layer of several ops (an embedding: a gather, then a sum over the slots) is a chain in its
// name scope; a gather reads its table before its indices, and the next layer reads the chain's
// last op.
TEST(GraphDefTest, ALayerOfSeveralOpsIsAChainAndAGatherReadsItsTableFirst) {
  GraphModel m;
  m.inputs = {{"input", {4}, GraphDataType::kFloat}};
  GraphLayer embedding{"emb", "embedding", {"input"}, {3}, {}, GraphOp("GatherV2")};
  embedding.op.ReadsVariablesFirst().Then(GraphOp("Sum").Bool("keep_dims", false));
  embedding.variables.push_back({"emb/rows", {5, 3}, {{"emb/rows", {5, 3}, ""}}});
  GraphLayer fc{"fc", "fully_connected", {"emb"}, {2}, {}, GraphOp("MatMul")};
  m.layers = {embedding, fc};
  const auto nodes = ByName(BuildGraphDef(m));
  EXPECT_EQ(Inputs(nodes.at("emb/GatherV2")), (std::vector<std::string>{"emb/rows", "input"}));
  EXPECT_EQ(Inputs(nodes.at("emb/Sum")), (std::vector<std::string>{"emb/GatherV2"}));
  EXPECT_FALSE(nodes.at("emb/Sum").attr().at("keep_dims").b());
  EXPECT_EQ(OutputShape(nodes.at("emb/Sum")), (std::vector<int64_t>{-1, 3}));
  EXPECT_FALSE(nodes.at("emb/GatherV2").attr().count("_output_shapes"));
  EXPECT_EQ(Inputs(nodes.at("fc/MatMul"))[0], "emb/Sum");
}
}  // namespace
}  // namespace pstrain

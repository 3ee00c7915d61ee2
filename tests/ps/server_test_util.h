// What the ParameterServer tests share: a server that applies plain SGD at learning rate 1 (so an
// update is value - gradient), registered by the chief with the initial values given.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/wire/message.h"
#include "common/wire/request.h"
#include "ps/server.h"

namespace pstrain {
namespace ps {
// A server of options `o` with SGD at learning rate 1, not yet initialised.
inline std::unique_ptr<ParameterServer> SgdServer(const ServerOptions& o) {
  auto config = ConfigNode::Parse("{optimizer: {type: sgd}, learning_rate: {initial: 1.0}}", "t");
  return std::make_unique<ParameterServer>(o, VariableStore::FromConfig(*config).value());
}

// The chief's register (task 0, `incarnation`) carrying `tensors` as the initial values.
inline wire::Message ChiefRegister(std::vector<wire::NamedTensor> tensors,
                                   uint64_t incarnation = 1) {
  wire::Message init = wire::Request(wire::MessageType::kRegister, "chief", 0, incarnation);
  init.tensors = std::move(tensors);
  return init;
}

// SgdServer(o) registered by the chief from `peer` with `tensors`; the register must be answered
// with one kOk.
inline std::unique_ptr<ParameterServer> InitializedSgdServer(const ServerOptions& o,
                                                             std::vector<wire::NamedTensor> tensors,
                                                             uint64_t incarnation = 1,
                                                             const std::string& peer = "chief") {
  std::unique_ptr<ParameterServer> server = SgdServer(o);
  auto out = server->Handle(peer, ChiefRegister(std::move(tensors), incarnation));
  EXPECT_EQ(out.size(), 1u);
  if (!out.empty()) {
    EXPECT_EQ(out[0].message.type, wire::MessageType::kOk) << out[0].message.text;
  }
  return server;
}

}  // namespace ps
}  // namespace pstrain

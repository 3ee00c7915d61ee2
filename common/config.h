// The one config reader: YAML files (yaml-cpp) read through a node that remembers where it
// came from, so every error names the file, the path inside it and the field, and says what
// was expected.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace YAML {
class Node;
}

namespace pstrain {

class ConfigNode {
 public:
  static Result<ConfigNode> LoadFile(const std::string& path);
  // `origin` names the text in error messages (a file name or "<flags>").
  static Result<ConfigNode> Parse(const std::string& text, const std::string& origin);

  // "configs/refnet.yaml: model.layers[3]"
  std::string Where() const;
  // InvalidArgument("<file>: <path>: <message>").
  Status Error(const std::string& message) const;

  bool IsMap() const;
  bool IsSequence() const;
  bool Has(const std::string& key) const;
  std::vector<std::string> Keys() const;
  // Fails naming any key outside `allowed`: a typo in a config must not be ignored.
  Status CheckKeys(const std::vector<std::string>& allowed) const;

  Result<ConfigNode> Child(const std::string& key) const;
  size_t size() const;
  ConfigNode At(size_t i) const;

  // Required fields: missing or of the wrong kind is an error naming the field.
  Result<int64_t> GetInt(const std::string& key) const;
  Result<double> GetDouble(const std::string& key) const;
  Result<std::string> GetString(const std::string& key) const;
  Result<bool> GetBool(const std::string& key) const;
  Result<std::vector<int64_t>> GetIntList(const std::string& key) const;
  Result<std::vector<double>> GetDoubleList(const std::string& key) const;
  // Optional fields: the default when absent, an error when present but malformed.
  Result<int64_t> GetInt(const std::string& key, int64_t fallback) const;
  Result<double> GetDouble(const std::string& key, double fallback) const;
  Result<std::string> GetString(const std::string& key, const std::string& fallback) const;
  Result<bool> GetBool(const std::string& key, bool fallback) const;

  // This node as YAML text (for logging the resolved config).
  std::string ToYaml() const;
  // Sets `dotted.key` to a scalar given as text ("train.batch_size=64" overrides).
  Status Override(const std::string& dotted_key, const std::string& value);

 private:
  ConfigNode(std::shared_ptr<YAML::Node> node, std::string origin, std::string path);
  Result<ConfigNode> Scalar(const std::string& key, const char* expected) const;

  std::shared_ptr<YAML::Node> node_;
  std::string origin_;
  std::string path_;
};

}  // namespace pstrain

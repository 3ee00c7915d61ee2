#include "common/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace pstrain {
namespace {

// A node as text, for key lists and error messages: as<std::string>() throws on a list or a map
// (YAML allows both as keys, and a list may stand where a number was expected).
std::string TextOf(const YAML::Node& node) {
  return node.IsScalar() ? node.Scalar() : YAML::Dump(node);
}

}  // namespace

ConfigNode::ConfigNode(std::shared_ptr<YAML::Node> node, std::string origin, std::string path)
    : node_(std::move(node)), origin_(std::move(origin)), path_(std::move(path)) {}

Result<ConfigNode> ConfigNode::LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

Result<ConfigNode> ConfigNode::Parse(const std::string& text, const std::string& origin) {
  try {
    auto node = std::make_shared<YAML::Node>(YAML::Load(text));
    return ConfigNode(node, origin, "");
  } catch (const YAML::Exception& e) {
    return InvalidArgument(origin + ": not valid YAML at line " + std::to_string(e.mark.line + 1) +
                           ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

std::string ConfigNode::Where() const { return path_.empty() ? origin_ : origin_ + ": " + path_; }

Status ConfigNode::Error(const std::string& message) const {
  return InvalidArgument(Where() + ": " + message);
}

bool ConfigNode::IsMap() const { return node_->IsMap(); }
bool ConfigNode::IsSequence() const { return node_->IsSequence(); }

bool ConfigNode::Has(const std::string& key) const {
  return node_->IsMap() && (*node_)[key].IsDefined() && !(*node_)[key].IsNull();
}

std::vector<std::string> ConfigNode::Keys() const {
  std::vector<std::string> keys;
  if (!node_->IsMap()) return keys;
  for (const auto& kv : *node_) keys.push_back(TextOf(kv.first));
  return keys;
}

Status ConfigNode::CheckKeys(const std::vector<std::string>& allowed) const {
  if (!node_->IsMap()) return Error("expected a map of fields");
  for (const std::string& key : Keys()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return Error("unknown field '" + key + "' (expected one of: " + list + ")");
    }
  }
  return Status::OK();
}

Result<ConfigNode> ConfigNode::Child(const std::string& key) const {
  if (!node_->IsMap()) return Error("expected a map containing '" + key + "'");
  YAML::Node child = (*node_)[key];
  if (!child.IsDefined() || child.IsNull()) return Error("missing field '" + key + "'");
  return ConfigNode(std::make_shared<YAML::Node>(child), origin_,
                    path_.empty() ? key : path_ + "." + key);
}

size_t ConfigNode::size() const { return node_->IsSequence() ? node_->size() : 0; }

ConfigNode ConfigNode::At(size_t i) const {
  return ConfigNode(std::make_shared<YAML::Node>((*node_)[i]), origin_,
                    path_ + "[" + std::to_string(i) + "]");
}

Result<ConfigNode> ConfigNode::Scalar(const std::string& key, const char* expected) const {
  ASSIGN_OR_RETURN(ConfigNode child, Child(key));
  if (!child.node_->IsScalar()) {
    return Error("field '" + key + "' must be " + expected);
  }
  return child;
}

namespace {
template <typename T>
Result<T> Convert(const ConfigNode& parent, const YAML::Node& node, const std::string& key,
                  const char* expected) {
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    return parent.Error("field '" + key + "' must be " + expected + ", got '" + TextOf(node) + "'");
  }
}
}  // namespace

#define PSTRAIN_CONFIG_GETTER(Name, Type, expected)             \
  Result<Type> ConfigNode::Name(const std::string& key) const { \
    ASSIGN_OR_RETURN(ConfigNode child, Scalar(key, expected));  \
    return Convert<Type>(*this, *child.node_, key, expected);   \
  }
#define PSTRAIN_CONFIG_FALLBACK(Name, Type)                                    \
  Result<Type> ConfigNode::Name(const std::string& key, Type fallback) const { \
    if (!Has(key)) return fallback;                                            \
    return Name(key);                                                          \
  }

PSTRAIN_CONFIG_GETTER(GetInt, int64_t, "an integer")
PSTRAIN_CONFIG_GETTER(GetDouble, double, "a number")
PSTRAIN_CONFIG_GETTER(GetString, std::string, "a string")
PSTRAIN_CONFIG_GETTER(GetBool, bool, "true or false")
PSTRAIN_CONFIG_FALLBACK(GetInt, int64_t)
PSTRAIN_CONFIG_FALLBACK(GetDouble, double)
PSTRAIN_CONFIG_FALLBACK(GetBool, bool)
#undef PSTRAIN_CONFIG_FALLBACK
#undef PSTRAIN_CONFIG_GETTER

Result<std::string> ConfigNode::GetString(const std::string& key,
                                          const std::string& fallback) const {
  if (!Has(key)) return fallback;
  return GetString(key);
}

namespace {
template <typename T>
Result<std::vector<T>> GetList(const ConfigNode& parent, const YAML::Node& node,
                               const std::string& key, const char* expected) {
  YAML::Node child = node[key];
  if (!child.IsDefined() || child.IsNull()) return parent.Error("missing field '" + key + "'");
  std::vector<T> out;
  if (child.IsScalar()) {
    ASSIGN_OR_RETURN(T v, Convert<T>(parent, child, key, expected));
    out.push_back(v);
    return out;
  }
  if (!child.IsSequence()) return parent.Error("field '" + key + "' must be a list");
  for (const auto& item : child) {
    ASSIGN_OR_RETURN(T v, Convert<T>(parent, item, key, expected));
    out.push_back(v);
  }
  return out;
}
}  // namespace

Result<std::vector<int64_t>> ConfigNode::GetIntList(const std::string& key) const {
  return GetList<int64_t>(*this, *node_, key, "a list of integers");
}

Result<std::vector<double>> ConfigNode::GetDoubleList(const std::string& key) const {
  return GetList<double>(*this, *node_, key, "a list of numbers");
}

std::string ConfigNode::ToYaml() const {
  YAML::Emitter out;
  out << *node_;
  return out.c_str();
}

Status ConfigNode::Override(const std::string& dotted_key, const std::string& value) {
  std::vector<std::string> parts;
  std::stringstream ss(dotted_key);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  if (parts.empty()) return InvalidArgument("empty override key");
  std::vector<YAML::Node> chain{*node_};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsDefined() || !next.IsMap()) {
      return Error("override '" + dotted_key + "': '" + parts[i] + "' is not a map here");
    }
    chain.push_back(next);
  }
  chain.back()[parts.back()] = YAML::Load(value);
  return Status::OK();
}

}  // namespace pstrain

// What every optimizer with options shares, so that its file holds only its update rule and
// the table of its fields: the options kept beside the rule, the fields read from the config and
// checked against their bounds before one is made, and the loop over a variable's elements (on a
// thread team once the variable is large enough).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "ps/optimizer.h"
#include "ps/optimizers/optimizers.h"
#include "ps/parallel.h"

namespace pstrain::ps::internal {

// Where each type's options sit in an OptimizerRule.
inline void SetOptions(const MomentumOptions& o, OptimizerRule* r) { r->momentum = o; }
inline void SetOptions(const AdamOptions& o, OptimizerRule* r) { r->adam = o; }
inline void SetOptions(const AdagradOptions& o, OptimizerRule* r) { r->adagrad = o; }
inline void SetOptions(const RMSPropOptions& o, OptimizerRule* r) { r->rmsprop = o; }
inline void SetOptions(const FtrlOptions& o, OptimizerRule* r) { r->ftrl = o; }

// Its config type name (a string literal: PSTRAIN_OPTIMIZER_WITH_OPTIONS's) and its options.
template <typename OptionsOfRule>
class OptimizerWith : public Optimizer {
 public:
  using Options = OptionsOfRule;
  OptimizerWith(const char* name, const Options& options) : name_(name), options_(options) {}
  const char* name() const override { return name_; }

 protected:
  void DescribeOptions(OptimizerRule* rule) const override { SetOptions(options_, rule); }
  const char* const name_;
  const Options options_;
};

// An optimizer whose state holds the gradient's square (Adam, Adagrad, FTRL, RMSProp): its pushes
// are bounded by kSquaredGradientBound, so that the square cannot overflow float32.
template <typename Options>
class SquaringOptimizerWith : public OptimizerWith<Options> {
 public:
  using OptimizerWith<Options>::OptimizerWith;
  float gradient_bound() const override { return Optimizer::kSquaredGradientBound; }
};

// One field of an optimizer's options as its config key names it: a float with its bound, or a
// flag (any bool).
template <typename Options>
struct OptionField {
  constexpr OptionField(const char* key, float Options::*number, Bound bound)
      : key(key), number(number), bound(bound) {}
  constexpr OptionField(const char* key, bool Options::*flag) : key(key), flag(flag) {}

  const char* key;
  float Options::*number = nullptr;
  bool Options::*flag = nullptr;
  Bound bound = Bound::kNonNegative;
};

// The first float field of `options` outside its bound, as an error naming it; else OK.
template <typename Options, size_t N>
Status CheckFields(const Options& options, const OptionField<Options> (&fields)[N]) {
  for (const OptionField<Options>& f : fields) {
    if (f.number != nullptr) RETURN_IF_ERROR(CheckBound(f.key, options.*f.number, f.bound));
  }
  return Status::OK();
}

// A `Made` of type `name` over `options` once its `fields` are in bounds; else the error,
// prefixed "<name> optimizer".
template <typename Made, typename Options, size_t N>
Result<std::unique_ptr<Optimizer>> MakeIfValid(const char* name, const Options& options,
                                               const OptionField<Options> (&fields)[N]) {
  RETURN_IF_ERROR(CheckFields(options, fields).WithContext(std::string(name) + " optimizer"));
  return std::unique_ptr<Optimizer>(new Made(name, options));
}

// Reads `fields` from an `optimizer:` node over Options' defaults (a key that is neither "type"
// nor a field is an error), checks their bounds naming the file and path, then `make`s it.
template <typename Options, size_t N>
Result<std::unique_ptr<Optimizer>> ReadOptions(
    const ConfigNode& node, const OptionField<Options> (&fields)[N],
    Result<std::unique_ptr<Optimizer>> (*make)(const Options&)) {
  std::vector<std::string> keys = {"type"};
  for (const OptionField<Options>& f : fields) keys.push_back(f.key);
  RETURN_IF_ERROR(node.CheckKeys(keys));
  Options options;
  for (const OptionField<Options>& f : fields) {
    if (f.number != nullptr) {
      ASSIGN_OR_RETURN(options.*f.number, GetFloat(node, f.key, options.*f.number));
    } else {
      ASSIGN_OR_RETURN(options.*f.flag, node.GetBool(f.key, options.*f.flag));
    }
  }
  RETURN_IF_ERROR(AtNode(node, CheckFields(options, fields)));
  return make(options);
}

// ReadOptions over one optimizer's table and constructor: what it registers (optimizer.h).
template <const auto& kFields, auto kMake>
Result<std::unique_ptr<Optimizer>> ReaderOf(const ConfigNode& node) {
  return ReadOptions(node, kFields, kMake);
}

// body(i) for i in [0, n); the elements are independent, so the loop is also vectorised.
template <typename Body>
void ForEachElement(int64_t n, const Body& body) {
#pragma omp parallel for simd if (parallel : n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace pstrain::ps::internal

// The tail of an optimizer file with options, which names its type once: defines `make`
// (optimizers' New<Name>Optimizer, optimizer.h: a `Made` over options whose `fields` are in
// bounds) and registers `type_name`'s reader of `fields` from a config node.
#define PSTRAIN_OPTIMIZER_WITH_OPTIONS(type_name, Made, make, fields)     \
  Result<std::unique_ptr<Optimizer>> make(const Made::Options& options) { \
    return internal::MakeIfValid<Made>(type_name, options, fields);       \
  }                                                                       \
  PSTRAIN_REGISTER_OPTIMIZER(type_name, (internal::ReaderOf<fields, make>))

// ReLU: max(x, 0), elementwise.
#pragma once

#include <vector>

#include "worker/network/layer.h"

namespace pstrain {
namespace worker {

class Relu : public ElementwiseLayer {
 public:
  PSTRAIN_DECLARE_LAYER()
};

}  // namespace worker
}  // namespace pstrain

// IDX files (the MNIST / Fashion-MNIST format), gzip'd or plain, read into memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace pstrain {

// Images with their labels, all in memory. Pixels are stored per image as height x width x
// channels (HWC), the layout of IDX files and of TF's `img_raw` feature.
struct ImageSet {
  int64_t count = 0;
  int64_t channels = 1;
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> pixels;
  std::vector<int32_t> labels;

  int64_t example_bytes() const { return channels * height * width; }
  const uint8_t* image(int64_t i) const { return pixels.data() + i * example_bytes(); }
};

// Reads an images file (ubyte, rank 3: count x height x width, or rank 4 with channels last)
// and a labels file (ubyte, rank 1) that must hold as many labels as there are images.
// Errors name the file and what was wrong with it.
Result<ImageSet> ReadIdx(const std::string& images_path, const std::string& labels_path);

enum class Split { kTrain, kTest };

// "train" | "test".
Result<Split> ParseSplit(const std::string& name);
const char* SplitName(Split split);

// Fashion-MNIST from `data_dir` ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]): 28x28x1
// images with labels 0..9.
Result<ImageSet> LoadFashionMnist(const std::string& data_dir, Split split);

}  // namespace pstrain

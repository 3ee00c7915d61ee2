#include "worker/training/trained_weights.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_manager.h"
#include "common/little_endian.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors stores little-endian floats; a big-endian host needs byte swaps");

namespace pstrain {

namespace fs = std::filesystem;

Result<std::map<std::string, Tensor>> ReadSafetensors(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  auto bad = [&](const std::string& why) { return DataLoss("safetensors '" + path + "': " + why); };
  if (bytes.size() < 8) return bad("shorter than its 8-byte header length");
  const uint64_t header_len = little_endian::Get64(bytes.data());
  if (header_len > bytes.size() - 8) return bad("header length runs past the end of the file");
  const nlohmann::json header =
      nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_len, nullptr, false);
  if (header.is_discarded() || !header.is_object()) return bad("header is not a JSON object");
  const size_t data_begin = 8 + header_len;
  const size_t data_bytes = bytes.size() - data_begin;
  std::map<std::string, Tensor> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const nlohmann::json& e = it.value();
    const std::string what = "tensor '" + it.key() + "'";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets")) {
      return bad(what + " lacks dtype, shape or data_offsets");
    }
    if (e["dtype"] != "F32") {
      return bad(what + " has dtype " + e["dtype"].dump() + "; only F32 is read");
    }
    std::vector<int64_t> dims;
    uint64_t begin = 0, end = 0;
    try {
      dims = e["shape"].get<std::vector<int64_t>>();
      begin = e["data_offsets"].at(0).get<uint64_t>();
      end = e["data_offsets"].at(1).get<uint64_t>();
    } catch (const nlohmann::json::exception&) {
      return bad(what + " has a malformed shape or data_offsets");
    }
    Shape shape(dims);
    int64_t elements = 1;
    for (int64_t d : dims) {
      if (d < 0 || (d > 0 && elements > static_cast<int64_t>(data_bytes / 4) / d)) {
        return bad(what + " has shape " + shape.ToString() + ", more than the file holds");
      }
      elements *= d;
    }
    if (begin > end || end > data_bytes || end - begin != static_cast<uint64_t>(elements) * 4) {
      return bad(what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 "] do not hold " + shape.ToString() + " floats within the file");
    }
    Tensor t = Tensor::Uninitialized(shape);
    if (elements > 0) std::memcpy(t.data(), bytes.data() + data_begin + begin, end - begin);
    tensors[it.key()] = t;
  }
  return tensors;
}

Result<std::map<std::string, Tensor>> ReadTrainedWeights(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const std::string exported = (fs::path(path) / "model.safetensors").string();
    if (fs::exists(exported, ec)) return ReadSafetensors(exported);
    CheckpointManager manager(path, 0);
    if (!manager.LatestPath().ok()) {
      return NotFound("'" + path + "' holds neither model.safetensors (the chief writes it when " +
                      "training ends) nor a `checkpoint` index; name a checkpoint file instead");
    }
    ASSIGN_OR_RETURN(CheckpointData data, manager.RestoreLatest());
    return data.tensors;
  }
  if (!fs::exists(path, ec)) return NotFound("'" + path + "' does not exist");
  char magic[8] = {};
  std::ifstream(path, std::ios::binary).read(magic, sizeof(magic));
  if (std::memcmp(magic, "PSTCKPT", 8) == 0) {
    ASSIGN_OR_RETURN(CheckpointData data, ReadCheckpoint(path));
    return data.tensors;
  }
  return ReadSafetensors(path);
}

}  // namespace pstrain

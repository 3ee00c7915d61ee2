#include "common/checkpoint/safetensors.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/json_text.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors stores little-endian floats; a big-endian host needs byte swaps");

namespace pstrain {

Status ExportSafetensors(const CheckpointData& data, const std::string& path) {
  using json = nlohmann::json;
  json header = json::object();
  json metadata(data.metadata);
  metadata["global_step"] = std::to_string(data.global_step);
  header["__metadata__"] = std::move(metadata);
  uint64_t end = 0;
  for (const auto& [name, tensor] : data.tensors) {
    if (tensor.empty()) {
      return InvalidArgument("safetensors export '" + path + "': tensor '" + name +
                             "' has no buffer");
    }
    if (name == "__metadata__") {
      return InvalidArgument("safetensors export '" + path +
                             "': a tensor may not be named '__metadata__'");
    }
    header[name] = {{"dtype", "F32"},
                    {"shape", tensor.shape().dims()},
                    {"data_offsets", {end, end + tensor.bytes()}}};
    end += tensor.bytes();
  }
  ASSIGN_OR_RETURN(std::string text, JsonText(header, "safetensors export '" + path + "'"));
  // The reference writer pads the header with spaces so the data starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);

  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  RETURN_IF_ERROR(writer.Append(length, sizeof(length)));
  RETURN_IF_ERROR(writer.Append(text.data(), text.size()));
  for (const auto& entry : data.tensors) {
    RETURN_IF_ERROR(writer.Append(entry.second.data(), entry.second.bytes()));
  }
  return writer.Commit();
}

}  // namespace pstrain

#include "worker/distributed/collectives/nccl_collectives.h"

#include <cstring>
#include <utility>

namespace pstrain {
namespace {

Status FromCuda(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return Status::OK();
  return Internal(what + " failed: CUDA error " + cudaGetErrorName(error) + " (" +
                  cudaGetErrorString(error) + ")");
}

Status FromNccl(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return Status::OK();
  std::string message = what + " failed: NCCL error " + ncclGetErrorString(result);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') message += std::string(" (") + last + ")";
  return result == ncclInvalidArgument || result == ncclInvalidUsage ? InvalidArgument(message)
                                                                     : Internal(message);
}

Status CheckN(int64_t n, const char* op) {
  if (n < 0) return InvalidArgument(std::string(op) + ": n must be >= 0, got " + std::to_string(n));
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<NcclCollectives>> NcclCollectives::Create(Store& store,
                                                                 const NcclOptions& options) {
  if (options.size < 1) {
    return InvalidArgument("NcclOptions.size must be >= 1, got " + std::to_string(options.size));
  }
  if (options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("NcclOptions.rank must be in [0, " + std::to_string(options.size) +
                           "), got " + std::to_string(options.rank));
  }
  int devices = 0;
  RETURN_IF_ERROR(FromCuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount"));
  if (options.device < 0 || options.device >= devices) {
    return InvalidArgument("NcclOptions.device must be in [0, " + std::to_string(devices) +
                           "), got " + std::to_string(options.device));
  }
  std::unique_ptr<NcclCollectives> self(
      new NcclCollectives(options.rank, options.size, options.device));
  RETURN_IF_ERROR(self->UseDevice());

  ncclUniqueId id;
  if (options.rank == 0) {
    RETURN_IF_ERROR(FromNccl(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    RETURN_IF_ERROR(
        store.Set(options.unique_id_key, std::string(id.internal, sizeof(id.internal))));
  } else {
    ASSIGN_OR_RETURN(std::string bytes, store.Get(options.unique_id_key, options.timeout));
    if (bytes.size() != sizeof(id.internal)) {
      return DataLoss("store key '" + options.unique_id_key + "' holds " +
                      std::to_string(bytes.size()) + " bytes; an NCCL unique id has " +
                      std::to_string(sizeof(id.internal)));
    }
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  RETURN_IF_ERROR(FromCuda(cudaStreamCreateWithFlags(&self->stream_, cudaStreamNonBlocking),
                           "cudaStreamCreate"));
  RETURN_IF_ERROR(FromNccl(ncclCommInitRank(&self->comm_, options.size, id, options.rank),
                           "ncclCommInitRank(rank " + std::to_string(options.rank) + " of " +
                               std::to_string(options.size) + ")"));
  return self;
}

NcclCollectives::~NcclCollectives() {
  if (control_ != nullptr) cudaFree(control_);
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status NcclCollectives::UseDevice() {
  return FromCuda(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
}

Status NcclCollectives::Synchronize(const char* op) {
  if (in_group_) return Status::OK();
  return FromCuda(cudaStreamSynchronize(stream_), std::string("waiting for ") + op);
}

Status NcclCollectives::BroadcastFromHost(float* host_data, int64_t n, int root) {
  RETURN_IF_ERROR(CheckN(n, "BroadcastFromHost"));
  RETURN_IF_ERROR(UseDevice());
  if (n > control_elements_) {
    if (control_ != nullptr) cudaFree(control_);
    control_ = nullptr;
    control_elements_ = 0;
    RETURN_IF_ERROR(FromCuda(cudaMalloc(reinterpret_cast<void**>(&control_), n * sizeof(float)),
                             "cudaMalloc of the control buffer"));
    control_elements_ = n;
  }
  const size_t bytes = n * sizeof(float);
  RETURN_IF_ERROR(FromCuda(
      cudaMemcpyAsync(control_, host_data, bytes, cudaMemcpyHostToDevice, stream_), "upload"));
  RETURN_IF_ERROR(Broadcast(control_, n, root));
  RETURN_IF_ERROR(FromCuda(
      cudaMemcpyAsync(host_data, control_, bytes, cudaMemcpyDeviceToHost, stream_), "download"));
  return FromCuda(cudaStreamSynchronize(stream_), "waiting for the control broadcast");
}

Status NcclCollectives::GroupStart() {
  if (in_group_)
    return FailedPrecondition("NCCL GroupStart inside a group (groups do not nest here)");
  RETURN_IF_ERROR(UseDevice());
  RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
  in_group_ = true;
  return Status::OK();
}

Status NcclCollectives::GroupEnd() {
  if (!in_group_) return FailedPrecondition("NCCL GroupEnd without GroupStart");
  in_group_ = false;
  RETURN_IF_ERROR(FromNccl(ncclGroupEnd(), "ncclGroupEnd"));
  return Synchronize("the grouped NCCL calls");
}

Status NcclCollectives::AllReduceAverage(float* data, int64_t n) {
  RETURN_IF_ERROR(CheckN(n, "AllReduceAverage"));
  RETURN_IF_ERROR(UseDevice());
  RETURN_IF_ERROR(
      FromNccl(ncclAllReduce(data, data, n, ncclFloat, ncclAvg, comm_, stream_), "ncclAllReduce"));
  return Synchronize("ncclAllReduce");
}

Status NcclCollectives::Broadcast(float* data, int64_t n, int root) {
  RETURN_IF_ERROR(CheckN(n, "Broadcast"));
  if (root < 0 || root >= size_) {
    return InvalidArgument("Broadcast: root must be in [0, " + std::to_string(size_) + "), got " +
                           std::to_string(root));
  }
  RETURN_IF_ERROR(UseDevice());
  RETURN_IF_ERROR(
      FromNccl(ncclBroadcast(data, data, n, ncclFloat, root, comm_, stream_), "ncclBroadcast"));
  return Synchronize("ncclBroadcast");
}

Status NcclCollectives::ReduceScatterAverage(const float* in, float* out_shard, int64_t n) {
  RETURN_IF_ERROR(CheckN(n, "ReduceScatterAverage"));
  RETURN_IF_ERROR(UseDevice());
  if (n % size_ == 0) {
    RETURN_IF_ERROR(
        FromNccl(ncclReduceScatter(in, out_shard, n / size_, ncclFloat, ncclAvg, comm_, stream_),
                 "ncclReduceScatter"));
    return Synchronize("ncclReduceScatter");
  }
  // ncclReduceScatter needs equal shards; uneven ones are one reduce per shard, fused.
  RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
  for (int r = 0; r < size_; ++r) {
    const ShardRange shard = ShardOf(n, size_, r);
    ncclResult_t result = ncclReduce(in + shard.begin, r == rank_ ? out_shard : nullptr,
                                     shard.size(), ncclFloat, ncclAvg, r, comm_, stream_);
    if (result != ncclSuccess) {
      (void)ncclGroupEnd();
      return FromNccl(result, "ncclReduce of shard " + std::to_string(r));
    }
  }
  RETURN_IF_ERROR(FromNccl(ncclGroupEnd(), "ncclGroupEnd (reduce-scatter)"));
  return Synchronize("reduce-scatter");
}

Status NcclCollectives::AllGather(const float* shard_in, float* out, int64_t n) {
  RETURN_IF_ERROR(CheckN(n, "AllGather"));
  RETURN_IF_ERROR(UseDevice());
  if (n % size_ == 0) {
    RETURN_IF_ERROR(FromNccl(ncclAllGather(shard_in, out, n / size_, ncclFloat, comm_, stream_),
                             "ncclAllGather"));
    return Synchronize("ncclAllGather");
  }
  // Uneven shards: one broadcast per shard, fused.
  RETURN_IF_ERROR(FromNccl(ncclGroupStart(), "ncclGroupStart"));
  for (int r = 0; r < size_; ++r) {
    const ShardRange shard = ShardOf(n, size_, r);
    ncclResult_t result = ncclBroadcast(r == rank_ ? shard_in : nullptr, out + shard.begin,
                                        shard.size(), ncclFloat, r, comm_, stream_);
    if (result != ncclSuccess) {
      (void)ncclGroupEnd();
      return FromNccl(result, "ncclBroadcast of shard " + std::to_string(r));
    }
  }
  RETURN_IF_ERROR(FromNccl(ncclGroupEnd(), "ncclGroupEnd (all-gather)"));
  return Synchronize("all-gather");
}

}  // namespace pstrain

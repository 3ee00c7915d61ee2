#include "common/checkpoint/sstable.h"

#include <cstdint>

#include "common/checkpoint/proto_wire.h"
#include "common/crc32c.h"
#include "common/little_endian.h"

namespace pstrain {
namespace {

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr size_t kFooterBytes = 48;  // two handles of at most 20 bytes, padded, and the magic
constexpr size_t kHandlesBytes = 40;
constexpr size_t kTrailerBytes = 5;       // compression type and masked CRC-32C
constexpr int kDataRestartInterval = 16;  // TensorFlow's table options
constexpr char kNoCompression = 0;

struct BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;  // without the trailer
};

void PutFixed32(std::string* out, uint32_t v) {
  char buf[4];
  little_endian::Put32(buf, v);
  out->append(buf, 4);
}

std::string EncodeHandle(const BlockHandle& h) {
  std::string s;
  proto_wire::PutVarint(&s, h.offset);
  proto_wire::PutVarint(&s, h.size);
  return s;
}

uint32_t BlockCrc(std::string_view contents, char type) {
  return crc32c::Mask(crc32c::Extend(crc32c::Value(contents.data(), contents.size()), &type, 1));
}

// LevelDB's BlockBuilder: prefix-compressed entries, a restart every `interval` entries.
class BlockBuilder {
 public:
  explicit BlockBuilder(int interval) : interval_(interval) {}

  void Add(std::string_view key, std::string_view value) {
    size_t shared = 0;
    if (count_ < interval_) {
      while (shared < last_key_.size() && shared < key.size() && last_key_[shared] == key[shared]) {
        ++shared;
      }
    } else {
      restarts_.push_back(static_cast<uint32_t>(buf_.size()));
      count_ = 0;
    }
    proto_wire::PutVarint(&buf_, shared);
    proto_wire::PutVarint(&buf_, key.size() - shared);
    proto_wire::PutVarint(&buf_, value.size());
    buf_.append(key.substr(shared));
    buf_.append(value);
    last_key_.assign(key);
    ++count_;
    ++entries_;
  }

  std::string Finish() {
    std::string out = std::move(buf_);
    for (uint32_t r : restarts_) PutFixed32(&out, r);
    PutFixed32(&out, static_cast<uint32_t>(restarts_.size()));
    *this = BlockBuilder(interval_);
    return out;
  }

  size_t size() const { return buf_.size() + 4 * restarts_.size() + 4; }
  bool empty() const { return entries_ == 0; }

 private:
  int interval_;
  std::string buf_;
  std::vector<uint32_t> restarts_{0};
  int count_ = 0;
  int entries_ = 0;
  std::string last_key_;
};

BlockHandle AppendBlock(std::string* table, const std::string& contents) {
  BlockHandle h{table->size(), contents.size()};
  table->append(contents);
  table->push_back(kNoCompression);
  PutFixed32(table, BlockCrc(contents, kNoCompression));
  return h;
}

// Reads tables that BuildTable or TensorFlow wrote; every length is checked against the bytes.
class TableParser {
 public:
  TableParser(std::string_view table, const std::string& source) : table_(table), source_(source) {}

  Result<TableEntries> Parse() {
    if (table_.size() < kFooterBytes) {
      return Bad("too short for a table footer: " + std::to_string(table_.size()) +
                 " bytes, expected at least " + std::to_string(kFooterBytes));
    }
    std::string_view footer = table_.substr(table_.size() - kFooterBytes);
    if (little_endian::Get64(footer.data() + kHandlesBytes) != kTableMagic) {
      return Bad("bad magic at the end (not a TensorFlow checkpoint index, an SSTable)");
    }
    BlockHandle metaindex, index;
    if (!DecodeHandle(&footer, &metaindex) || !DecodeHandle(&footer, &index)) {
      return Bad("malformed block handles in the footer");
    }
    RETURN_IF_ERROR(Block(metaindex, "the metaindex block").status());  // checked, not used
    ASSIGN_OR_RETURN(std::string_view index_block, Block(index, "the index block"));
    TableEntries handles, out;
    RETURN_IF_ERROR(ParseBlock(index_block, "the index block", &handles));
    for (size_t i = 0; i < handles.size(); ++i) {
      std::string_view encoded = handles[i].second;
      BlockHandle h;
      const std::string what = "data block " + std::to_string(i);
      if (!DecodeHandle(&encoded, &h)) return Bad("malformed handle of " + what);
      ASSIGN_OR_RETURN(std::string_view block, Block(h, what));
      RETURN_IF_ERROR(ParseBlock(block, what, &out));
    }
    for (size_t i = 1; i < out.size(); ++i) {
      if (!(out[i - 1].first < out[i].first)) {
        return Bad("keys out of order: '" + out[i].first + "' after '" + out[i - 1].first + "'");
      }
    }
    return out;
  }

 private:
  Status Bad(const std::string& what) const { return DataLoss(source_ + ": " + what); }

  static bool DecodeHandle(std::string_view* in, BlockHandle* h) {
    return proto_wire::GetVarint(in, &h->offset) && proto_wire::GetVarint(in, &h->size);
  }

  // The block's contents after checking that it and its trailer lie before the footer and that
  // its checksum holds.
  Result<std::string_view> Block(const BlockHandle& h, const std::string& what) const {
    const uint64_t end = table_.size() - kFooterBytes;
    if (h.offset > end || h.size > end - h.offset || kTrailerBytes > end - h.offset - h.size) {
      return Bad(what + " [" + std::to_string(h.offset) + ", +" + std::to_string(h.size) +
                 ") runs past the end of the blocks at " + std::to_string(end));
    }
    std::string_view contents = table_.substr(h.offset, h.size);
    const char type = table_[h.offset + h.size];
    if (type != kNoCompression) {
      return Bad(what + " is compressed (type " + std::to_string(static_cast<int>(type)) +
                 "); only uncompressed tables are read, as TensorFlow writes bundle indexes");
    }
    const uint32_t stored = little_endian::Get32(table_.data() + h.offset + h.size + 1);
    if (stored != BlockCrc(contents, type)) return Bad("checksum mismatch in " + what);
    return contents;
  }

  Status ParseBlock(std::string_view block, const std::string& what, TableEntries* out) const {
    if (block.size() < 4) return Bad(what + " is shorter than its restart count");
    const uint64_t restarts = little_endian::Get32(block.data() + block.size() - 4);
    if (restarts == 0 || restarts > (block.size() - 4) / 4) {
      return Bad(what + " has " + std::to_string(restarts) + " restarts, which do not fit in its " +
                 std::to_string(block.size()) + " bytes");
    }
    std::string_view in = block.substr(0, block.size() - 4 - 4 * restarts);
    std::string key;
    while (!in.empty()) {
      uint64_t shared = 0, unshared = 0, value_bytes = 0;
      if (!proto_wire::GetVarint(&in, &shared) || !proto_wire::GetVarint(&in, &unshared) ||
          !proto_wire::GetVarint(&in, &value_bytes) || shared > key.size() ||
          unshared > in.size() || value_bytes > in.size() - unshared) {
        return Bad("malformed entry after key '" + key + "' in " + what);
      }
      key.resize(shared);
      key.append(in.substr(0, unshared));
      out->emplace_back(key, std::string(in.substr(unshared, value_bytes)));
      in.remove_prefix(unshared + value_bytes);
    }
    return Status::OK();
  }

  std::string_view table_;
  const std::string& source_;
};

}  // namespace

Result<std::string> BuildTable(const TableEntries& entries, size_t block_size) {
  std::string table;
  BlockBuilder data(kDataRestartInterval), index(1);
  std::string last_key;
  auto flush = [&] { index.Add(last_key, EncodeHandle(AppendBlock(&table, data.Finish()))); };
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [key, value] = entries[i];
    if (i > 0 && !(last_key < key)) {
      return InvalidArgument("table keys must be strictly increasing: '" + key + "' after '" +
                             last_key + "'");
    }
    if (!data.empty() && data.size() >= block_size) flush();
    data.Add(key, value);
    last_key = key;
  }
  if (!data.empty()) flush();
  const BlockHandle metaindex = AppendBlock(&table, BlockBuilder(1).Finish());
  const BlockHandle index_handle = AppendBlock(&table, index.Finish());
  std::string footer = EncodeHandle(metaindex) + EncodeHandle(index_handle);
  footer.resize(kHandlesBytes, '\0');
  char magic[8];
  little_endian::Put64(magic, kTableMagic);
  footer.append(magic, 8);
  table += footer;
  return table;
}

Result<TableEntries> ReadTable(std::string_view table, const std::string& source) {
  return TableParser(table, source).Parse();
}

}  // namespace pstrain

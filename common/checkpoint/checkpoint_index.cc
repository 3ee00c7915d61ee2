#include "common/checkpoint/checkpoint_index.h"

#include <algorithm>
#include <cctype>

namespace pstrain {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          // Octal, as protobuf's CEscape writes bytes outside printable ASCII.
          out += '\\';
          out += static_cast<char>('0' + (c >> 6));
          out += static_cast<char>('0' + ((c >> 3) & 7));
          out += static_cast<char>('0' + (c & 7));
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// A small reader of the protobuf text format subset CheckpointState uses: `name: value` pairs
// with quoted strings or numbers as values, '#' comments, any whitespace between tokens.
class TextFormatReader {
 public:
  TextFormatReader(const std::string& text, const std::string& source)
      : text_(text), source_(source) {}

  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }

  Status ReadFieldName(std::string* name) {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(Byte()) || text_[pos_] == '_')) ++pos_;
    if (pos_ == start) return Error("expected a field name");
    *name = text_.substr(start, pos_ - start);
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != ':') return Error("expected ':' after " + *name);
    ++pos_;
    return Status::OK();
  }

  // A quoted string; *is_string is false for a bare number, which is skipped.
  Status ReadValue(std::string* value, bool* is_string) {
    SkipSpace();
    if (pos_ >= text_.size()) return Error("expected a value");
    char quote = text_[pos_];
    if (quote != '"' && quote != '\'') {
      size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(Byte()) || std::string("+-._").find(text_[pos_]) != std::string::npos)) {
        ++pos_;
      }
      if (pos_ == start) return Error("expected a quoted string or a number");
      *is_string = false;
      return Status::OK();
    }
    *is_string = true;
    value->clear();
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      char c = text_[pos_++];
      if (c == '\n') return Error("unterminated string");
      if (c != '\\') {
        *value += c;
        continue;
      }
      if (pos_ >= text_.size()) return Error("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case 'n':
          *value += '\n';
          break;
        case 'r':
          *value += '\r';
          break;
        case 't':
          *value += '\t';
          break;
        case 'a':
          *value += '\a';
          break;
        case 'b':
          *value += '\b';
          break;
        case 'f':
          *value += '\f';
          break;
        case 'v':
          *value += '\v';
          break;
        case '"':
        case '\'':
        case '\\':
        case '?':
          *value += e;
          break;
        case 'x': {
          int v = 0, digits = 0;
          while (digits < 2 && pos_ < text_.size() && std::isxdigit(Byte())) {
            char h = text_[pos_++];
            v = v * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                                                                      : std::tolower(h) - 'a' + 10);
            ++digits;
          }
          if (digits == 0) return Error("bad \\x escape");
          *value += static_cast<char>(v);
          break;
        }
        default: {
          if (e < '0' || e > '7') return Error(std::string("unknown escape \\") + e);
          int v = e - '0';
          for (int i = 0; i < 2 && pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '7';
               ++i) {
            v = v * 8 + (text_[pos_++] - '0');
          }
          *value += static_cast<char>(v);
        }
      }
    }
    if (pos_ >= text_.size()) return Error("unterminated string");
    ++pos_;
    return Status::OK();
  }

  Status Error(const std::string& what) const {
    int line = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) line += text_[i] == '\n';
    return DataLoss(source_ + ":" + std::to_string(line) + ": " + what +
                    " (expected TensorFlow's CheckpointState text format)");
  }

 private:
  unsigned char Byte() const { return static_cast<unsigned char>(text_[pos_]); }
  void SkipSpace() {
    while (pos_ < text_.size()) {
      if (std::isspace(Byte())) {
        ++pos_;
      } else if (text_[pos_] == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  const std::string& text_;
  const std::string& source_;
  size_t pos_ = 0;
};

}  // namespace

std::string FormatCheckpointState(const CheckpointState& state) {
  std::string out = "model_checkpoint_path: " + Quote(state.model_checkpoint_path) + "\n";
  for (const std::string& p : state.all_model_checkpoint_paths) {
    out += "all_model_checkpoint_paths: " + Quote(p) + "\n";
  }
  return out;
}

Result<CheckpointState> ParseCheckpointState(const std::string& text, const std::string& source) {
  CheckpointState state;
  TextFormatReader reader(text, source);
  while (!reader.AtEnd()) {
    std::string name, value;
    bool is_string = false;
    RETURN_IF_ERROR(reader.ReadFieldName(&name));
    RETURN_IF_ERROR(reader.ReadValue(&value, &is_string));
    if (name == "model_checkpoint_path" || name == "all_model_checkpoint_paths") {
      if (!is_string) return reader.Error(name + " must be a quoted string");
      if (name == "model_checkpoint_path") {
        state.model_checkpoint_path = value;
      } else {
        state.all_model_checkpoint_paths.push_back(value);
      }
    } else if (name != "all_model_checkpoint_timestamps" && name != "last_preserved_timestamp") {
      return reader.Error("unknown field '" + name + "'");
    }
  }
  if (state.model_checkpoint_path.empty()) {
    return DataLoss(source + ": no model_checkpoint_path (expected TensorFlow's CheckpointState " +
                    "text format)");
  }
  // TF keeps the latest last in the list; an index written by hand may omit it.
  std::vector<std::string>& all = state.all_model_checkpoint_paths;
  if (all.empty() || all.back() != state.model_checkpoint_path) {
    all.erase(std::remove(all.begin(), all.end(), state.model_checkpoint_path), all.end());
    all.push_back(state.model_checkpoint_path);
  }
  return state;
}

}  // namespace pstrain

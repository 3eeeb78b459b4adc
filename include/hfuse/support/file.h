// Reading whole files and writing them atomically.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace hfuse {

// Reads a regular file (a FIFO, device or socket is refused: nothing bounds
// what it gives); throws InputError naming the path when it cannot, or when
// the file is larger than the memory budget (support/checked.h).
std::string ReadFile(const std::string& path);
// Bytes [offset, offset + length) of a regular file (length -1: to the
// end), checked against the file's size and the memory budget before
// anything is allocated or read; `what` names the data in a budget error.
std::string ReadFileRange(const std::string& path, int64_t offset, int64_t length,
                          std::string_view what);

// A file's bytes, for reading once: a regular file is mapped into memory
// (a graph of hundreds of MB is read where the page cache holds it, not
// copied into a string first), anything else is read with ReadFile. Throws
// as ReadFile does.
class FileText {
 public:
  explicit FileText(const std::string& path);
  ~FileText();
  FileText(const FileText&) = delete;
  FileText& operator=(const FileText&) = delete;

  std::string_view view() const { return map_ ? std::string_view(map_, size_) : copy_; }

 private:
  const char* map_ = nullptr;
  size_t size_ = 0;
  std::string copy_;
};

// Writes `content` to a temporary file beside `path`, then renames it over
// `path`: readers see the old file or the whole new one, never a part. The
// temporary file has a random name (".hfuse-<16 hex>.tmp", so a target name
// of any length works), is created exclusively (O_EXCL|O_NOFOLLOW: never
// through a planted file or symlink), gets the mode of the file it replaces,
// is fsynced before the rename, and is removed on error and on SIGINT or
// SIGTERM. A symlink at `path` is followed: its destination is replaced, the
// link stays. Throws InputError when the file cannot be written.
void WriteFileAtomic(const std::string& path, std::string_view content);
// The same for content made piece by piece: `produce` calls `put` with each
// piece, in order.
void WriteFileAtomic(
    const std::string& path,
    const std::function<void(const std::function<void(std::string_view)>& put)>& produce);

}  // namespace hfuse

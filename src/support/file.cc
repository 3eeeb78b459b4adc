// File helpers: reading whole files, and writing them atomically and safely
// (a temporary file of an unpredictable name, created exclusively beside the
// target, synced, then renamed over it).
#include "hfuse/support/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"

namespace hfuse {

std::string ReadFileRange(const std::string& path, int64_t offset, int64_t length,
                          std::string_view what) {
  // O_NONBLOCK: opening a FIFO that has no writer would wait for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) ThrowInputError("{}: cannot open: {}", path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) ThrowInputError("{}: cannot open: {}", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) ThrowInputError("{}: is a directory", path);
  // A FIFO, device or socket has no size to bound the read (/dev/zero never
  // ends): only regular files are read.
  if (!S_ISREG(st.st_mode)) ThrowInputError("{}: is not a regular file", path);
  const int64_t size = st.st_size;
  if (offset < 0 || offset > size || (length >= 0 && length > size - offset)) {
    ThrowInputError("{}: has {} bytes, too few for offset {} length {}", path, size, offset, length);
  }
  const int64_t n = length >= 0 ? length : size - offset;
  std::string text = Allocate(n, what.empty() ? std::string_view(path) : what,
                              [&] { return std::string(static_cast<size_t>(n), '\0'); });
  int64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, text.data() + done, static_cast<size_t>(n - done), offset + done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) ThrowInputError("{}: read failed: {}", path, std::strerror(errno));
    if (got == 0) ThrowInputError("{}: the file shrank while being read", path);
    done += got;
  }
  return text;
}

std::string ReadFile(const std::string& path) { return ReadFileRange(path, 0, -1, path); }

FileText::FileText(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ,
                     MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) {
      map_ = static_cast<const char*>(p);
      size_ = static_cast<size_t>(st.st_size);
    }
  }
  if (fd >= 0) ::close(fd);
  if (map_ == nullptr) copy_ = ReadFile(path);  // and its messages
}

FileText::~FileText() {
  if (map_ != nullptr) ::munmap(const_cast<char*>(map_), size_);
}

namespace {

// The temporary files being written, for the signal handler to remove: a
// fixed table of fixed buffers, since a handler may not allocate.
constexpr int kTempSlots = 8;
// A slot is free (0), being filled (1) or names a file to remove (2).
char g_temp_path[kTempSlots][PATH_MAX];
std::atomic<int> g_temp_state[kTempSlots];

extern "C" void RemoveTempFilesAndDie(int sig) {
  for (int i = 0; i < kTempSlots; ++i) {
    if (g_temp_state[i].load() == 2) ::unlink(g_temp_path[i]);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// SIGINT and SIGTERM remove the temporary files, then end the process as
// the signal would have; a handler someone else installed is left alone.
void InstallSignalHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction act {};
      act.sa_handler = RemoveTempFilesAndDie;
      sigemptyset(&act.sa_mask);
      ::sigaction(sig, &act, nullptr);
    }
  });
}

// "a/b/c" -> "a/b", "c" -> ".", "/c" -> "/".
std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The file a path names once its symlinks are followed (the link chain,
// not the folders above it): writing to a symlink writes its destination,
// which need not exist yet.
std::string FollowSymlinks(const std::string& path) {
  std::string at = path;
  for (int hop = 0; hop < 40; ++hop) {
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
    std::string target(static_cast<size_t>(PATH_MAX), '\0');
    const ssize_t n = ::readlink(at.c_str(), target.data(), target.size());
    if (n < 0 || static_cast<size_t>(n) >= target.size()) {
      ThrowInputError("{}: cannot write: cannot read the symlink", path);
    }
    target.resize(static_cast<size_t>(n));
    at = target[0] == '/' ? target : FolderOf(at) + "/" + target;
  }
  ThrowInputError("{}: cannot write: {}", path, std::strerror(ELOOP));
}

// A temporary file beside the target, created exclusively under a random
// name (O_CREAT|O_EXCL|O_NOFOLLOW: never an existing file or a planted
// symlink), short enough for any target name, removed on error and on
// SIGINT/SIGTERM, renamed over the target once written and synced.
class TempFile {
 public:
  explicit TempFile(const std::string& path) : path_(path), target_(FollowSymlinks(path)) {
    const std::string dir = FolderOf(target_);
    InstallSignalHandlers();
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
      uint64_t r = 0;
      if (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
        r = static_cast<uint64_t>(::getpid()) * 0x9e3779b97f4a7c15ull ^
            static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      }
      tmp_ = fmt::format("{}/.hfuse-{:016x}.tmp", dir, r);
      // Registered before it exists: a stop can reach any thread (OpenBLAS
      // starts its own), so holding signals back in this one cannot close
      // the window between creating the file and registering it.
      Register();
      fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (fd_ < 0) {
        const int error = errno;
        Unregister();
        if (error != EEXIST) ThrowInputError("{}: cannot write: {}", path_, std::strerror(error));
      }
    }
    if (fd_ < 0) ThrowInputError("{}: cannot write: no unused temporary name", path_);
    // An existing file keeps its mode; a new one gets 0666 less the umask.
    struct stat st {};
    if (::stat(target_.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::fchmod(fd_, st.st_mode & 07777);
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
    Unregister();
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void Write(std::string_view piece) {
    while (!piece.empty() && error_ == 0) {
      const ssize_t n = ::write(fd_, piece.data(), piece.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        error_ = errno;
        break;
      }
      piece.remove_prefix(static_cast<size_t>(n));
    }
  }

  void Commit() {
    if (error_ == 0 && ::fsync(fd_) != 0) error_ = errno;
    if (::close(fd_) != 0 && error_ == 0) error_ = errno;
    fd_ = -1;
    if (error_ == 0 && ::rename(tmp_.c_str(), target_.c_str()) != 0) error_ = errno;
    if (error_ != 0) ThrowInputError("{}: cannot write: {}", path_, std::strerror(error_));
    committed_ = true;
    // The rename itself survives a crash once the folder is synced.
    const int dfd = ::open(FolderOf(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  void Register() {
    if (tmp_.size() >= PATH_MAX) return;
    for (int i = 0; i < kTempSlots; ++i) {
      int expected = 0;
      if (!g_temp_state[i].compare_exchange_strong(expected, 1)) continue;
      std::memcpy(g_temp_path[i], tmp_.c_str(), tmp_.size() + 1);
      g_temp_state[i].store(2);
      slot_ = i;
      return;
    }
  }
  void Unregister() {
    if (slot_ >= 0) g_temp_state[slot_].store(0);
    slot_ = -1;
  }

  std::string path_;    // as given, for messages
  std::string target_;  // with its symlinks followed
  std::string tmp_;
  int fd_ = -1;
  int slot_ = -1;
  int error_ = 0;
  bool committed_ = false;
};

}  // namespace

void WriteFileAtomic(const std::string& path, std::string_view content) {
  WriteFileAtomic(path, [&](const std::function<void(std::string_view)>& put) { put(content); });
}

void WriteFileAtomic(
    const std::string& path,
    const std::function<void(const std::function<void(std::string_view)>& put)>& produce) {
  TempFile file(path);
  produce([&](std::string_view piece) { file.Write(piece); });
  file.Commit();
}

}  // namespace hfuse

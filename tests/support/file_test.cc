// Writing output safely (support/file.h): the temporary file is created
// exclusively under a random name beside the target and renamed over it, so
// a planted file or symlink is never written through, an existing file keeps
// its mode, a symlinked target is replaced at its destination, a name of 250
// characters works, and a process stopped mid-write (SIGTERM, SIGINT,
// SIGKILL) leaves the target as it was: absent or whole, never partial; on
// SIGTERM and SIGINT the temporary file is removed too.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "hfuse/support/error.h"
#include "hfuse/support/file.h"
#include "testing/tool_runner.h"

namespace hfuse {
namespace {

namespace fs = std::filesystem;
using test::Slurp;
using test::Spit;
using test::TempDir;

TEST(WriteFileAtomic, DoesNotWriteThroughAPlantedTemporaryName) {
  // The old scheme's temporary name was PATH.tmp.PID: a symlink planted
  // there made hfuse overwrite the file it points to.
  TempDir dir;
  Spit(dir / "victim", "precious");
  const std::string out = dir.Str("out.json");
  fs::create_symlink(dir / "victim", fmt::format("{}.tmp.{}", out, ::getpid()));
  WriteFileAtomic(out, "new");
  EXPECT_EQ(Slurp(dir / "victim"), "precious");
  EXPECT_EQ(Slurp(out), "new");
}

TEST(WriteFileAtomic, LeavesOnlyTheTarget) {
  TempDir dir;
  WriteFileAtomic(dir.Str("a.json"), "x");
  WriteFileAtomic(dir.Str("a.json"), [](const auto& put) {
    put("y");
    put("z");
  });
  EXPECT_EQ(dir.Listing(), std::vector<std::string>{"a.json"});
  EXPECT_EQ(Slurp(dir / "a.json"), "yz");
}

TEST(WriteFileAtomic, KeepsTheModeOfTheFileItReplaces) {
  TempDir dir;
  const std::string out = dir.Str("out.json");
  Spit(out, "old");
  ASSERT_EQ(::chmod(out.c_str(), 0600), 0);
  WriteFileAtomic(out, "new");
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(Slurp(out), "new");
}

TEST(WriteFileAtomic, NewFileGetsTheUmaskMode) {
  TempDir dir;
  const mode_t old = ::umask(022);
  WriteFileAtomic(dir.Str("new.json"), "x");
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(dir.Str("new.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);  // not mkstemp's 0600
}

TEST(WriteFileAtomic, WritesThroughASymlinkedTarget) {
  TempDir dir;
  fs::create_directory(dir / "real");
  Spit(dir / "real" / "out.json", "old");
  fs::create_symlink("real/out.json", dir / "link.json");
  WriteFileAtomic(dir.Str("link.json"), "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(Slurp(dir / "real" / "out.json"), "new");
  EXPECT_EQ(dir.Listing("real"), std::vector<std::string>{"out.json"});
  // A dangling link: its destination is created.
  fs::create_symlink("real/fresh.json", dir / "dangling.json");
  WriteFileAtomic(dir.Str("dangling.json"), "fresh");
  EXPECT_EQ(Slurp(dir / "real" / "fresh.json"), "fresh");
}

TEST(WriteFileAtomic, LongNamesWork) {
  TempDir dir;
  const std::string name = std::string(245, 'n') + ".json";  // 250 characters
  WriteFileAtomic(dir.Str(name), "x");
  EXPECT_EQ(Slurp(dir / name), "x");
  EXPECT_EQ(dir.Listing(), std::vector<std::string>{name});
}

TEST(WriteFileAtomic, FailureLeavesNothing) {
  TempDir dir;
  EXPECT_THROW(WriteFileAtomic(dir.Str("missing/out.json"), "x"), InputError);
  EXPECT_THROW(WriteFileAtomic(dir.Str("out.json"), [](const auto& put) {
                 put("partial");
                 throw InputError("stop");
               }),
               InputError);
  EXPECT_TRUE(dir.Listing().empty());
}

// Starts `hfuse fuse big -o DIR/out.json`, waits until its temporary file
// appears (it is writing), sends `sig`, and returns the exit status.
int KillMidWrite(const TempDir& dir, const std::string& big, int sig) {
  const std::string out = dir.Str("out.json");
  const pid_t pid = ::fork();
  if (pid == 0) {
    // A shell that started the tests in the background ignores SIGINT, and
    // hfuse leaves an ignored signal ignored: restore the defaults.
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execl(HFUSE_TOOL, HFUSE_TOOL, "fuse", big.c_str(), "-o", out.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  bool writing = false;
  for (int i = 0; i < 200000 && !writing; ++i) {
    for (const std::string& name : dir.Listing()) writing = writing || name.starts_with(".hfuse-");
    if (!writing) std::this_thread::sleep_for(std::chrono::microseconds(500));
    int status = 0;
    if (!writing && ::waitpid(pid, &status, WNOHANG) == pid) return status;  // done too soon
  }
  ::kill(pid, sig);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

class KillMidWriteTest : public ::testing::TestWithParam<int> {};

// On a loaded machine the stop can come late (after the rename, or after
// hfuse is done), so each try checks what must always hold: the target is
// as it was or whole, never partial, and on SIGTERM/SIGINT no temporary
// file is left. Some try must catch hfuse mid-write.
TEST_P(KillMidWriteTest, NoPartialFileAtTheTarget) {
  const int sig = GetParam();
  TempDir gen;
  const std::string big = gen.Str("big.json");
  // About 40 MB of graph JSON: the write takes long enough to be caught.
  const std::string make = fmt::format("{} towers --ops 100000 -o {}", test::Quote(HFUSE_GEN),
                                       test::Quote(big));
  ASSERT_EQ(std::system(make.c_str()), 0);
  TempDir whole_dir;
  const std::string whole_out = whole_dir.Str("out.json");
  const std::string fuse = fmt::format("{} fuse {} -o {}", test::Quote(HFUSE_TOOL),
                                       test::Quote(big), test::Quote(whole_out));
  ASSERT_EQ(std::system(fuse.c_str()), 0);
  const std::string whole = Slurp(whole_out);

  int caught = 0;
  for (int attempt = 0; attempt < 6 && caught < 2; ++attempt) {
    for (const bool existing : {false, true}) {
      TempDir dir;
      if (existing) Spit(dir / "out.json", "the old file");
      const int status = KillMidWrite(dir, big, sig);
      const bool stopped = WIFSIGNALED(status) && WTERMSIG(status) == sig;
      ASSERT_TRUE(stopped || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
          << "hfuse failed: status " << status;
      if (fs::exists(dir / "out.json")) {
        const std::string got = Slurp(dir / "out.json");
        EXPECT_TRUE(got == whole || (existing && got == "the old file"))
            << "a partial file of " << got.size() << " bytes at the target";
        if (existing && got == "the old file" && stopped) ++caught;
      } else {
        EXPECT_FALSE(existing) << "the old file was removed";
        EXPECT_TRUE(stopped);
        ++caught;
      }
      if (sig != SIGKILL) {
        for (const std::string& name : dir.Listing()) {
          EXPECT_EQ(name, "out.json") << "the temporary file was left behind";
        }
      }
    }
  }
  EXPECT_GE(caught, 1) << "no try stopped hfuse mid-write";
}

INSTANTIATE_TEST_SUITE_P(Signals, KillMidWriteTest, ::testing::Values(SIGTERM, SIGINT, SIGKILL),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });

}  // namespace
}  // namespace hfuse

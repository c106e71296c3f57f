#pragma once
// Driving a command-line tool as a user does: a real process, its exit status,
// its stdout and stderr (for the kiln-opt and kiln-run suites).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kiln::test {

struct ToolRun {
  int status;
  std::string out;
  std::string err;
};

// A folder of this test process's own under the system's temporary directory.
inline std::filesystem::path scratch_dir(const std::string& prefix) {
  std::filesystem::path d = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// Runs `exe` with `args` (already shell-quoted where needed), capturing both streams.
inline ToolRun run_tool(const std::string& exe, const std::string& args, const std::filesystem::path& dir) {
  const std::string out = (dir / "stdout").string(), err = (dir / "stderr").string();
  const std::string cmd = "'" + exe + "' " + args + " >'" + out + "' 2>'" + err + "'";
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(out), slurp(err)};
}

}  // namespace kiln::test

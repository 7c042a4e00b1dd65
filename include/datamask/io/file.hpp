// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Atomic file output: write to a temporary file beside the target, then rename, so a
/// reader never sees a half-written file; and a check that a path can be written at all.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "datamask/error.hpp"

#if __has_include(<unistd.h>)
#include <fcntl.h>
#include <unistd.h>
#define DATAMASK_IO_HAS_FSYNC 1
#else
#define DATAMASK_IO_HAS_FSYNC 0
#endif

namespace datamask::io {

namespace detail {
inline std::string temp_name(const std::string& path) {
#if DATAMASK_IO_HAS_FSYNC
  return path + ".tmp." + std::to_string(::getpid());
#else
  return path + ".tmp";
#endif
}
}  // namespace detail

/// @brief Replaces `path` with `contents` atomically (temporary file in the same directory,
/// flushed to disk, then renamed over the target).
/// @throws invalid_input naming `path` when it cannot be written.
inline void write_file_atomic(const std::string& path, std::string_view contents) {
  const std::string tmp = detail::temp_name(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw invalid_input(path, datamask::detail::concat("cannot write: ", std::strerror(errno)));
    }
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw invalid_input(path, "write failed (disk full?)");
    }
  }
#if DATAMASK_IO_HAS_FSYNC
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)::fsync(fd);
    ::close(fd);
  }
#endif
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw invalid_input(path, "cannot rename the finished temporary file into place: " + ec.message());
  }
}

/// @brief Checks, before any work, that `path` can be created or replaced: its directory exists
/// and a file can be created there. Leaves nothing behind.
/// @throws invalid_input naming `path` otherwise.
inline void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw invalid_input(path, "is a directory, expected a file name");
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec)) {
    throw invalid_input(path, "cannot write: directory '" + dir.string() + "' does not exist");
  }
  const std::string probe = detail::temp_name(path) + ".probe";
  {
    std::ofstream out(probe, std::ios::binary | std::ios::trunc);
    if (!out) {
      // The directory exists (checked above), so ENOENT means the file system refuses new files
      // there (/proc, /sys): "No such file or directory" would send the user looking for one.
      const int err = errno;
      const std::string where = dir.empty() ? std::string(".") : dir.string();
      throw invalid_input(path, err == ENOENT ? "cannot write: directory '" + where + "' does not accept new files"
                                              : datamask::detail::concat("cannot write: ", std::strerror(err)));
    }
  }
  std::remove(probe.c_str());
}

}  // namespace datamask::io

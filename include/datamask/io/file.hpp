// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file
/// @brief Atomic file output: write to a temporary file beside the target, then rename, so a
/// reader never sees a half-written file; a check that a path can be written at all; and the one
/// way input files are opened, which refuses anything but a regular file.

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <ostream>
#include <string>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "datamask/core/error.hpp"

#if __has_include(<unistd.h>)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#define DATAMASK_IO_HAS_FSYNC 1
#else
#define DATAMASK_IO_HAS_FSYNC 0
#endif
#if __has_include(<sys/file.h>) && __has_include(<sys/stat.h>)
#include <sys/file.h>
#include <sys/stat.h>
#define DATAMASK_IO_HAS_FLOCK 1
#else
#define DATAMASK_IO_HAS_FLOCK 0
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

namespace detail {

/// Writes what `write` puts on its stream to the temporary file of `path`, flushed to disk;
/// returns its name. Removes the temporary when writing fails or `write` throws.
inline std::string write_temp(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string tmp = temp_name(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw invalid_input(path, datamask::detail::concat("cannot write: ", std::strerror(errno)));
    }
    try {
      write(out);
    } catch (...) {
      out.close();
      std::remove(tmp.c_str());
      throw;
    }
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
  return tmp;
}

/// An exclusive lock (flock) on each folder that holds one of `paths`, held while the object
/// lives: two processes replacing files of one folder (two runs writing the same outputs) rename
/// them one set after the other, never interleaved. Each folder is locked once, the folders in
/// the order of their (device, inode), the same in every process, so that two writers wait
/// for each other in turn and never deadlock. The folders themselves are locked: no lock file is
/// left behind. Where the file system has no locks (some network file systems), the files are
/// renamed unlocked.
class folder_locks {
 public:
  explicit folder_locks([[maybe_unused]] std::span<const std::string> paths) {
#if DATAMASK_IO_HAS_FLOCK
    struct folder {
      dev_t dev;
      ino_t ino;
      int fd;
    };
    std::vector<folder> folders;
    for (const auto& f : paths) {
      const std::filesystem::path dir = std::filesystem::path(f).parent_path();
      const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) continue;  // the rename will say what is wrong with the folder
      struct stat st {};
      if (::fstat(fd, &st) != 0) {
        ::close(fd);
        continue;
      }
      bool known = false;  // a second flock on one folder, by another descriptor, would wait forever
      for (const auto& g : folders) known = known || (g.dev == st.st_dev && g.ino == st.st_ino);
      if (known) {
        ::close(fd);
      } else {
        folders.push_back({st.st_dev, st.st_ino, fd});
      }
    }
    std::sort(folders.begin(), folders.end(),
              [](const folder& a, const folder& b) { return a.dev != b.dev ? a.dev < b.dev : a.ino < b.ino; });
    for (const auto& g : folders) {
      while (::flock(g.fd, LOCK_EX) != 0 && errno == EINTR) {  // a signal's handler ran: wait on
      }
      fds_.push_back(g.fd);  // closed (and so unlocked) by the destructor, locked or not
    }
#endif
  }
  folder_locks(const folder_locks&) = delete;
  folder_locks& operator=(const folder_locks&) = delete;
  ~folder_locks() {
#if DATAMASK_IO_HAS_FLOCK
    for (const int fd : fds_) ::close(fd);
#endif
  }

 private:
  std::vector<int> fds_;
};

}  // namespace detail

/// @brief One file of a set that `write_files_atomic` replaces: its contents, or, where `stream` is
/// set, what `stream` writes (a file too large to build in memory first, written as it is read).
struct output_file {
  std::string path;
  std::string contents;
  std::function<void(std::ostream&)> stream;
};

/// @brief Replaces several files at once: every file is first written in full to a temporary
/// beside its target, and only then are they all renamed into place. A failure while writing
/// (disk full, a folder gone, a `stream` that throws) leaves every target as it was, so a set of
/// outputs (ids, report, log) is never half replaced; only a failing rename, after all were
/// written, can leave some replaced. The renames happen under a lock on the targets' folders
/// (detail::folder_locks), so when several processes replace the same files at once, the files
/// left are all one process's.
/// @throws invalid_input naming the path that cannot be written; what a `stream` throws.
inline void write_files_atomic(std::span<const output_file> files) {
  std::vector<std::string> temps;
  std::vector<std::string> paths;
  try {
    for (const auto& f : files) {
      paths.push_back(f.path);
      const std::function<void(std::ostream&)> whole = [&f](std::ostream& out) {
        out.write(f.contents.data(), static_cast<std::streamsize>(f.contents.size()));
      };
      temps.push_back(detail::write_temp(f.path, f.stream ? f.stream : whole));
    }
  } catch (...) {
    for (const auto& t : temps) std::remove(t.c_str());
    throw;
  }
  const detail::folder_locks locked(paths);
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    std::filesystem::rename(temps[i], files[i].path, ec);
    if (ec) {
      for (std::size_t j = i; j < temps.size(); ++j) std::remove(temps[j].c_str());
      throw invalid_input(files[i].path, "cannot rename the finished temporary file into place: " + ec.message());
    }
  }
}

/// @brief `write_files_atomic` of (path, contents) pairs.
inline void write_files_atomic(std::span<const std::pair<std::string, std::string>> files) {
  std::vector<output_file> out;
  for (const auto& [path, contents] : files) out.push_back({path, contents, {}});
  write_files_atomic(std::span<const output_file>(out));
}

/// @brief Replaces `path` with `contents` atomically (temporary file in the same directory,
/// flushed to disk, then renamed over the target).
/// @throws invalid_input naming `path` when it cannot be written.
inline void write_file_atomic(const std::string& path, std::string_view contents) {
  const output_file one{path, std::string(contents), {}};
  write_files_atomic(std::span(&one, 1));
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

#if DATAMASK_IO_HAS_FSYNC
/// @brief Opens the input file `path` read-only and returns its descriptor (the caller closes
/// it). Refuses, without blocking, what is not a regular file: opening a FIFO waits for a writer
/// and reading a pipe or a device twice (once to parse, once to hash) sees other bytes, so the
/// file is opened non-blocking, checked, and only then set to blocking reads.
/// @throws invalid_input naming `path` when it cannot be opened or is not a regular file.
[[nodiscard]] inline int open_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw invalid_input(path, datamask::detail::concat("cannot open: ", std::strerror(errno)));
  const auto refuse = [&](const std::string& problem) {  // the problem is said before close() sets errno
    ::close(fd);
    return invalid_input(path, problem);
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw refuse(datamask::detail::concat("cannot open: ", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw refuse("is a directory, not a regular file");
  if (!S_ISREG(st.st_mode)) throw refuse("not a regular file (a pipe, FIFO or device)");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    throw refuse(datamask::detail::concat("cannot open: ", std::strerror(errno)));
  }
  return fd;
}
#endif

/// @brief The whole contents of the input file `path`, read once.
/// @throws invalid_input naming `path` when it cannot be read or is not a regular file (see
/// `open_regular_file`).
[[nodiscard]] inline std::string read_file(const std::string& path) {
#if DATAMASK_IO_HAS_FSYNC
  const int fd = open_regular_file(path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ::ssize_t got = ::read(fd, buf, sizeof buf);
    if (got == 0) break;
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      ::close(fd);
      throw invalid_input(path, datamask::detail::concat("cannot read: ", std::strerror(err)));
    }
    out.append(buf, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return out;
#else
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw invalid_input(path, "not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw invalid_input(path, datamask::detail::concat("cannot open: ", std::strerror(errno)));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
#endif
}

}  // namespace datamask::io

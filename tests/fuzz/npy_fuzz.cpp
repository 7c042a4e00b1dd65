// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target for the .npy reader: any byte string must either parse into a header whose
// data the reader can then convert without touching memory outside the input, or be rejected
// with datamask::invalid_input. Anything else (a crash, a sanitizer report, another exception)
// is a bug. Built by scripts/fuzz with clang -fsanitize=fuzzer,address,undefined; the same entry
// point is replayed over the seed corpus by the ctest `fuzz.npy_replay` with any compiler.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <datamask/io/npy.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace datamask::io;
  try {
    const npy_file f = npy_file::from_bytes(std::vector<unsigned char>(data, data + size), "fuzz.npy");
    const npy_header& h = f.header();
    volatile double sink = 0.0;
    if (npy_is_float(h.dtype)) {
      const std::vector<double> all = f.read_doubles();
      for (double v : all) sink = sink + v;
      if (f.rows() > 0 && f.cols() > 0 && h.count > 0) {
        std::vector<float> row(static_cast<std::size_t>(f.cols()));
        f.read_row(f.rows() - 1, row.data());
        f.read_row(0, row.data());
        const auto view = f.float_view(0, f.rows());
        if (!view.empty()) sink = sink + view(view.rows - 1, view.cols - 1);
      }
    } else {
      const std::vector<std::int64_t> all = f.read_int64();
      for (std::int64_t v : all) sink = sink + static_cast<double>(v);
    }
  } catch (const datamask::invalid_input&) {
    // Rejected with a message: the expected outcome for malformed input.
  }
  return 0;
}
